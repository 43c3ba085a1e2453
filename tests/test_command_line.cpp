// strata-train's command line (app/Cli.h, CLI11): one declaration per command makes its --help; the flags that
// set a project setting take their limits and help from the settings table in every command (profile --batch,
// prune --threads) and refuse with the project file's words; every command's errors have one format and one
// set of exit statuses; a flag whose setting has no effect is warned about; --version says what was built.
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <filesystem>
#include <sstream>

#include "app/Cli.h"
#include "app/CliCommands.h"
#include "core/graph/Project.h"
#include "tests/support/TestProjects.h"

using namespace strata;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

struct Result {
    int rc = -1;
    std::string out, err;
    bool trained = false;
    cli::TrainArgs args;  // what the training command got
};

// The whole command line in-process; the training command records its arguments instead of training.
Result run(const std::vector<std::string>& args) {
    Result r;
    std::ostringstream out, err;
    r.rc = cli::runCommandLine(
        args,
        [&r](const cli::TrainArgs& a) {
            r.trained = true;
            r.args = a;
            return 0;
        },
        out, err);
    r.out = out.str();
    r.err = err.str();
    return r;
}

}  // namespace

class TestCommandLine : public QObject {
    Q_OBJECT
private slots:
    // --help of the program lists every settings flag with the table's range and dotted name, the run options
    // and every command; each command's --help lists its options.
    void helpIsGenerated() {
        const Result top = run({"--help"});
        QCOMPARE(top.rc, 0);
        QVERIFY(!top.trained);
        for (const SettingInfo* s : settingsWithFlags()) {
            QVERIFY2(contains(top.out, s->flag), s->flag.c_str());
            QVERIFY2(contains(top.out, "[" + s->dottedName() + "]"), s->dottedName().c_str());
            if (s->isInteger()) QVERIFY2(contains(top.out, "(" + s->rangeText() + ")"), s->flag.c_str());
        }
        for (const char* option : {"--metrics-out", "--resume-from", "--max-steps", "--bucket-mb",
                                   "--collective-timeout", "--list-devices", "--version"})
            QVERIFY2(contains(top.out, option), option);
        for (const cli::Command& c : cli::commands()) {
            QVERIFY2(contains(top.out, c.name) && contains(top.out, c.summary), c.name);
            const Result sub = run({c.name, "--help"});
            QVERIFY2(sub.rc == 0 && contains(sub.out, std::string("strata-train ") + c.name), sub.err.c_str());
        }
        QCOMPARE(int(cli::commands().size()), 8);  // export, import, predict, prune, profile, sweep, runs, lr-find
        // The table's help and limits in the commands that set a setting.
        const Result profile = run({"profile", "--help"});
        QVERIFY2(contains(profile.out, "--batch") && contains(profile.out, "(1 to 16777216)") &&
                     contains(profile.out, "[training.batch_size]"),
                 profile.out.c_str());
        const Result prune = run({"prune", "--help"});
        QVERIFY2(contains(prune.out, "(0 to 4096)") && contains(prune.out, "[training.threads]") &&
                     contains(prune.out, "--fine-tune-epochs") && contains(prune.out, "[training.epochs]"),
                 prune.out.c_str());
        // No argument at all: the help, on the error stream, as a wrong command line.
        const Result none = run({});
        QCOMPARE(none.rc, 2);
        QVERIFY(contains(none.err, "--batch"));
    }

    // profile --batch and prune --threads refuse what the project file refuses, as the training command does,
    // naming the flag and the table's limit (they had limits of their own, in words of their own).
    void settingFlagsTakeTheTablesLimits() {
        std::ostringstream out, err;
        QCOMPARE(runProfileCommand({"p.strata", "--batch", "0"}, out, err), 2);
        QVERIFY2(contains(err.str(), "strata-train profile: --batch: 0 is out of range (1 to 16777216)"),
                 err.str().c_str());
        std::ostringstream out2, err2;
        QCOMPARE(runPruneCommand({"ck", "--sparsity", "0.5", "-o", "d", "--threads", "5000"}, out2, err2), 2);
        QVERIFY2(contains(err2.str(), "strata-train prune: --threads: 5000 is out of range (0 to 4096)"),
                 err2.str().c_str());
        std::ostringstream out3, err3;
        QCOMPARE(runPruneCommand({"ck", "--sparsity", "0.5", "-o", "d", "--fine-tune-epochs", "0"}, out3, err3), 2);
        QVERIFY2(contains(err3.str(), "--fine-tune-epochs: 0 is out of range (1 to 2147483647)"), err3.str().c_str());
        const Result train = run({"p.strata", "--batch", "0"});
        QCOMPARE(train.rc, 2);
        QVERIFY(!train.trained);
        QVERIFY2(contains(train.err, "strata-train: --batch: 0 is out of range (1 to 16777216)"), train.err.c_str());
    }

    // The training command's options reach it parsed: the settings with their checked values (a path made
    // absolute, "local-sgd:4" as two settings), the run options with theirs; a flag given twice counts once,
    // the last.
    void trainingOptionsParse() {
        const Result r = run({"p.strata", "--batch", "8", "--batch", "16", "--dist-mode", "local-sgd:4",
                              "--checkpoint-dir", "ck", "--max-steps", "5", "--resume-from", "best", "--quiet",
                              "--bucket-mb", "0.5", "--resident-data", "off"});
        QVERIFY2(r.rc == 0 && r.trained, r.err.c_str());
        QCOMPARE(r.args.project, std::string("p.strata"));
        QCOMPARE(r.args.maxSteps, int64_t(5));
        QVERIFY(r.args.resumeBest && r.args.quiet);
        QCOMPARE(r.args.bucketMb, 0.5);
        QCOMPARE(r.args.residentData, std::string("off"));
        Project p;
        for (const SettingValue& v : r.args.settings) applySetting(p.dataset, p.training, *v.setting, v.value);
        QCOMPARE(p.training.batchSize, 16);
        QVERIFY(p.training.distMode == DistMode::LocalSgd);
        QCOMPARE(p.training.localSgdSteps, 4);
        QVERIFY2(std::filesystem::path(p.training.checkpointDir).is_absolute(), p.training.checkpointDir.c_str());
        // Defaults when not given.
        const Result plain = run({"p.strata"});
        QVERIFY(plain.trained && plain.args.settings.empty() && plain.args.maxSteps == 0);
        QVERIFY(!plain.args.history.empty());
    }

    // Every command: "strata-train[ COMMAND]: message", exit 2 for a wrong command line (CLI11's or the
    // command's own), 1 for a failure while running.
    void oneErrorFormat() {
        struct Case {
            std::vector<std::string> args;
            int rc;
            std::string message;
        };
        const std::vector<Case> cases = {
            {{"p.strata", "--no-such-flag"},
             2,
             "strata-train: The following argument was not expected: --no-such-flag"},
            {{"p.strata", "--max-steps", "0"}, 2, "strata-train: --max-steps: '0' is not a whole number from 1 to"},
            {{"p.strata", "--resume-from", "newest"},
             2,
             "strata-train: --resume-from: 'newest' is not one of: latest, best"},
            {{"p.strata", "--bucket-mb", "0"},
             2,
             "strata-train: --bucket-mb: '0' is not a number from 1 byte to 65536"},
            {{"p.strata", "--dist-mode", "local-sgd:0"},
             2,
             "strata-train: --dist-mode: local-sgd:0: training.local_sgd_steps 0 is out of range (1 to"},
            {{"--quiet"}, 2, "strata-train: no project file given"},
            {{"export", "x", "--opset", "21", "-o", "y", "--format", "onnx"},
             2,
             "strata-train export: --opset: '21' is not a whole number from 13 to 17"},
            {{"export", "x", "--format", "tflite", "-o", "y"}, 2, "strata-train export: unknown format 'tflite'"},
            {{"predict", "m", "in", "--runtime", "onnxruntime"},
             2,
             "strata-train predict: --runtime: 'onnxruntime' is not one of: strata, opencv"},
            {{"prune", "ck", "-o", "d", "--sparsity", "1.5"},
             2,
             "strata-train prune: --sparsity: '1.5' is not a number from 0 to 1, excluding 1"},
            {{"prune", "ck", "-o", "d", "--sparsity", "0.5", "--scope", "all"}, 2, "strata-train prune: --scope: "},
            {{"profile", "p.strata", "--steps", "x"}, 2, "strata-train profile: --steps: 'x' is not a whole number"},
            {{"sweep", "p.strata", "--parallel", "65"},
             2,
             "strata-train sweep: --parallel: '65' is not a whole number from 1 to 64"},
            {{"runs", "show"}, 2, "strata-train runs: "},
            {{"runs", "list", "--history", "off"}, 2, "strata-train runs: runs needs a history database"},
            {{"runs", "frobnicate"}, 2, "strata-train runs: The following argument was not expected: frobnicate"},
            {{"p.strata", "export"}, 2, "strata-train: 'export' is a command: give it first"},
            {{"profile", "/no/such/project.strata"}, 1, "strata-train profile: "},
        };
        for (const Case& c : cases) {
            const Result r = run(c.args);
            std::string line;
            for (const std::string& a : c.args) line += a + " ";
            QVERIFY2(r.rc == c.rc && contains(r.err, c.message) && !r.trained,
                     (line + "-> " + std::to_string(r.rc) + ": " + r.err).c_str());
            if (c.rc == 2) QVERIFY2(contains(r.err, "--help lists the options"), r.err.c_str());
        }
    }

    void versionSaysWhatWasBuilt() {
        const Result r = run({"--version"});
        QCOMPARE(r.rc, 0);
        QVERIFY2(contains(r.out, "strata-train 0.") && contains(r.out, "\ncommit ") &&
                     contains(r.out, "\nbuild type ") && contains(r.out, "\nbackends cpu"),
                 r.out.c_str());
    }

    // Warned about, not refused: a flag whose setting has no effect with the others.
    void inapplicableFlagsAreNamed() {
        Project p = test::blobsMlpProject("small", 4, 2);
        std::vector<SettingValue> given;
        for (const char* flag : {"--decode-threads", "--dist-mode", "--batch"}) {
            const SettingInfo* s = settingForFlag(flag);
            for (SettingValue& v : parseSettingFlag(*s, std::string(flag) == "--dist-mode" ? "local-sgd:3" : "2"))
                given.push_back(v);
        }
        for (const SettingValue& v : given) applySetting(p.dataset, p.training, *v.setting, v.value);
        std::vector<std::string> warnings = cli::inapplicableFlags(given, p.dataset, p.training, 1);
        QCOMPARE(warnings.size(), size_t(2));
        QCOMPARE(warnings[0], std::string("--decode-threads has no effect with dataset.kind synthetic (it applies "
                                          "with image_folder)"));
        QVERIFY2(contains(warnings[1], "--dist-mode has no effect in a run of one process on one device"),
                 warnings[1].c_str());
        QCOMPARE(cli::inapplicableFlags(given, p.dataset, p.training, 2).size(), size_t(1));  // under mpirun
        p.training.device = "cpu,cpu";
        QCOMPARE(cli::inapplicableFlags(given, p.dataset, p.training, 1).size(), size_t(1));  // two devices

        // And strata-train says so, and trains.
        QTemporaryDir dir;
        const QString project = dir.filePath("small.strata");
        Project small = test::blobsMlpProject("small", 4, 2);
        small.training.epochs = 1;
        writeProject(small, project.toStdString());
        QProcess train;
        train.start(QStringLiteral(STRATA_TRAIN_EXE),
                    {project, "--decode-threads", "2", "--max-steps", "1", "--history", "off", "--quiet",
                     "--checkpoint-dir", dir.filePath("ck")});
        QVERIFY(train.waitForFinished(120000));
        const QString err = QString::fromUtf8(train.readAllStandardError());
        QVERIFY2(train.exitCode() == 0, qPrintable(err));
        QVERIFY2(err.contains("strata-train: warning: --decode-threads has no effect with dataset.kind synthetic"),
                 qPrintable(err));
    }
};

QTEST_GUILESS_MAIN(TestCommandLine)
#include "test_command_line.moc"
