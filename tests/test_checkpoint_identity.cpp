// Which checkpoint belongs to which project (issue 35): metadata edited after writing is refused by its checksum,
// naming the field; another project's checkpoint of the same shapes is refused on resume and where a project's
// checkpoint is exported or predicted with, saying what differs; `--init-from` starts a new run from the tensors
// whose name and shape match.
#include <QTemporaryDir>
#include <QtTest>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "app/CliCommands.h"
#include "core/backend/BackendRegistry.h"
#include "core/graph/Model.h"
#include "core/io/Safetensors.h"
#include "core/train/Checkpoint.h"
#include "core/train/ProjectFingerprint.h"
#include "core/train/RunFolder.h"
#include "core/train/Trainer.h"
#include "tests/support/TestBackends.h"
#include "tests/support/TestProjects.h"

using namespace strata;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::vector<std::string> filesIn(const std::string& dir) {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
}

// The global step of every step event.
struct StepsRun : test::RecordedRun {
    std::vector<int64_t> stepNumbers;
    void onStep(const StepEvent& e) override {
        RecordedRun::onStep(e);
        stepNumbers.push_back(e.step);
    }
};

}  // namespace

class TestCheckpointIdentity : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;
    std::string path(const std::string& name) const { return (m_dir.path() + "/").toStdString() + name; }

    // Input [8] -> Dense 32 -> ReLU -> Dense 3 on blobs with these class names and normalization.
    Project project(const std::string& name, std::vector<std::string> classes,
                    NormalizationMode norm = NormalizationMode::None) const {
        Project p = test::blobsMlpProject(name, 8, static_cast<int>(classes.size()));
        p.dataset.classNames = std::move(classes);
        p.dataset.normalization = norm;
        return p;
    }
    static bool train(const Project& p, test::RecordedRun& rec, TrainerOptions o = {}) {
        auto backend = test::makeCpuBackend();
        Trainer t(p, *backend, &rec, o);
        return t.run();
    }
    // Project A ("pets", classes cat, dog, fox) trained for two epochs into path("a-ck").
    std::string trainedA() {
        const std::string ck = path("a-ck");
        if (fs::exists(ck + "/latest.safetensors")) return ck;
        Project a = project("pets", {"cat", "dog", "fox"});
        a.training.epochs = 2;
        a.training.checkpointDir = ck;
        test::RecordedRun rec;
        if (!train(a, rec)) qFatal("training A failed: %s", rec.error.c_str());
        return ck;
    }

private slots:
    // A doubled normalization scale, reordered class names, an edited step or epoch: all loaded before.
    void editedMetadataIsRefused() {
        Project p = project("meta", {"a", "b", "c"}, NormalizationMode::Scale);
        p.training.checkpointDir = path("meta-ck");
        test::RecordedRun rec;
        QVERIFY2(train(p, rec), rec.error.c_str());
        const std::string good = p.training.checkpointDir + "/epoch-001.safetensors";
        const SafetensorsContents contents = readSafetensors(good);
        QVERIFY(contents.metadata.count("strata.checkpoint.xxh3_64"));
        const Json meta = Json::parse(contents.metadata.at("strata.checkpoint"));
        auto variant = [&](const std::string& name, const std::function<void(Json&)>& edit, bool keepChecksum = true) {
            Json m = meta;
            edit(m);
            std::map<std::string, std::string> md = contents.metadata;
            md["strata.checkpoint"] = m.dump();
            if (!keepChecksum) md.erase("strata.checkpoint.xxh3_64");
            const std::string file = path(name + ".safetensors");
            writeSafetensors(file, contents.tensors, md);
            return file;
        };
        QCOMPARE(loadCheckpoint(variant("same", [](Json&) {})).classNames, (std::vector<std::string>{"a", "b", "c"}));
        const std::vector<std::pair<std::function<void(Json&)>, std::string>> cases = {
            {[](Json& m) { m["normalization"]["scale"] = m["normalization"]["scale"].get<double>() * 2; },
             "'normalization'"},
            {[](Json& m) { std::swap(m["class_names"][0], m["class_names"][2]); }, "'class_names'"},
            {[](Json& m) { m["step"] = m["step"].get<int64_t>() + 10; }, "'step'"},
            {[](Json& m) { m["epoch"] = 0; }, "'epoch'"},
            {[](Json& m) {
                 m["epoch"] = 0;
                 m["best"] = !m["best"].get<bool>();
             },
             "'epoch', 'best'"},
            {[](Json& m) { m["note"] = "x"; }, "'note' (added)"},
            {[](Json& m) { m.erase("vocabulary"); }, "'vocabulary' (removed)"},
        };
        int i = 0;
        for (const auto& [edit, field] : cases) {
            const std::string file = variant("edit" + std::to_string(i++), edit);
            try {
                loadCheckpoint(file);
                QFAIL(("accepted an edit of " + field).c_str());
            } catch (const std::runtime_error& e) {
                QVERIFY2(
                    contains(e.what(), file + ": checkpoint metadata was changed after it was written (checksum ") &&
                        contains(e.what(), "changed " + field),
                    e.what());
            }
        }
        // A file written before the checksum existed has none, and still loads (with the range checks only).
        QCOMPARE(loadCheckpoint(variant(
                                    "old", [](Json& m) { m["step"] = m["step"].get<int64_t>() + 10; }, false))
                     .step,
                 meta["step"].get<int64_t>() + 10);
        // Resuming from an edited file is refused as loading it is: the folder's newest good file is taken instead.
        fs::copy_file(variant("edit-latest", [](Json& m) { std::swap(m["class_names"][0], m["class_names"][1]); }),
                      p.training.checkpointDir + "/latest.safetensors", fs::copy_options::overwrite_existing);
        const ResumePoint r = findResumePoint(p.training.checkpointDir, false);
        QCOMPARE(r.file, good);
        QVERIFY(!r.skipped.empty() && contains(r.skipped.front(), "changed 'class_names'"));
    }

    // Same shapes, other classes and normalization: resumed silently before (train loss 14.2 in the issue).
    void anotherProjectsCheckpointIsRefusedOnResume() {
        const std::string ck = trainedA();
        const std::vector<std::string> before = filesIn(ck);
        Project b = project("colours", {"red", "green", "blue"}, NormalizationMode::Standardize);
        TrainerOptions o;
        o.resumeFrom = ck;
        test::RecordedRun rec;
        QVERIFY(!train(b, rec, o));
        QVERIFY2(contains(rec.error, ck + "/latest.safetensors: this checkpoint was written for another project "
                                          "('pets'): the checkpoint's classes are [cat, dog, fox]; the project's are "
                                          "[red, green, blue]; the checkpoint's input normalization is none; the "
                                          "project's is standardize ("),
                 rec.error.c_str());
        QVERIFY2(contains(rec.error, "use --init-from " + ck + "/latest.safetensors"), rec.error.c_str());
        QCOMPARE(filesIn(ck), before);  // nothing moved aside

        // The same parameters, but a layer more (Dropout has none): the model is not the checkpoint's.
        Project d = test::blobsMlpProject("pets", 8, 3, /*dropout=*/true);
        d.dataset.classNames = {"cat", "dog", "fox"};
        test::RecordedRun recD;
        QVERIFY(!train(d, recD, o));
        QVERIFY2(
            contains(recD.error, "the layers differ (the project's layer dropout (Dropout) is not in the checkpoint)"),
            recD.error.c_str());

        // What may change on resume: the name, epochs, learning rate, batch size.
        Project a = project("pets renamed", {"cat", "dog", "fox"});
        a.training.epochs = 3;
        a.training.learningRate = 0.01;
        a.training.batchSize = 16;
        a.training.checkpointDir = path("a-ck-copy");
        fs::copy(ck, a.training.checkpointDir);
        TrainerOptions resume;
        resume.resumeFrom = a.training.checkpointDir;
        test::RecordedRun recA;
        QVERIFY2(train(a, recA, resume), recA.error.c_str());
        QVERIFY(contains(recA.log, "resumed from"));
    }

    void fingerprintDifferencesSayWhat() {
        const Project a = project("a", {"x", "y", "z"});
        Normalization scale;
        scale.mode = "scale";
        scale.scale = 1.f / 255;
        const ProjectFingerprint fa = projectFingerprint(a, {"x", "y", "z"}, scale, {});
        QVERIFY(fingerprintDifferences(fa, fa).empty());
        Normalization near = scale;
        near.scale *= 1.0001f;  // a data set that grew a little: within 1e-3
        QVERIFY(fingerprintDifferences(fa, projectFingerprint(a, {"x", "y", "z"}, near, {})).empty());
        Normalization doubled = scale;
        doubled.scale *= 2;
        const std::vector<std::string> d =
            fingerprintDifferences(fa, projectFingerprint(a, {"x", "y", "z"}, doubled, {}));
        QCOMPARE(d.size(), size_t(1));
        QVERIFY2(contains(d[0],
                          "the checkpoint's input normalization is scale ((x*0.00392157 - 0)/1); the project's is "
                          "scale ((x*0.00784314 - 0)/1)"),
                 d[0].c_str());
        // Another loss is another task; a wider hidden layer, another parameter shape.
        Project mse = a;
        mse.training.loss = LossKind::Mse;
        QVERIFY(
            contains(fingerprintDifferences(fa, projectFingerprint(mse, {"x", "y", "z"}, scale, {})).at(0),
                     "task is dataset synthetic, loss cross_entropy; the project's is dataset synthetic, loss mse"));
        Project wide = a;
        Json params = wide.graph.nodeByName("dense1")->params;
        params["units"] = 64;
        wide.graph.setParams(wide.graph.nodeByName("dense1")->id, params);
        QVERIFY(contains(fingerprintDifferences(fa, projectFingerprint(wide, {"x", "y", "z"}, scale, {})).at(0),
                         "the checkpoint's dense1.bias is [32]; the project's is [64]"));
        // Vocabularies: the first token that differs.
        const ProjectFingerprint v1 = projectFingerprint(a, {"x", "y", "z"}, scale, {"<pad>", "<unk>", "good"});
        const ProjectFingerprint v2 = projectFingerprint(a, {"x", "y", "z"}, scale, {"<pad>", "<unk>", "bad"});
        QVERIFY(contains(fingerprintDifferences(v1, v2).at(0),
                         "token 2 is 'good' in the checkpoint, 'bad' in the project"));
        // From the project's settings alone, only what they say: no statistics, classes only when listed.
        Project unlisted = a;
        unlisted.dataset.classNames.clear();
        QVERIFY(fingerprintDifferences(fa, projectSettingsFingerprint(unlisted)).size() == 1);  // the mode: none
        QVERIFY(contains(fingerprintDifferences(fa, projectSettingsFingerprint(unlisted))[0],
                         "input normalization is scale; the project's is none"));
    }

    // A project file given to export or predict stands for its checkpoint folder's best checkpoint: refused when the
    // folder holds another project's.
    void exportAndPredictOfAProjectCheckItsCheckpoint() {
        const std::string ck = trainedA();
        Project a = project("pets", {"cat", "dog", "fox"});
        a.training.checkpointDir = ck;
        writeProject(a, path("a.strata"));
        Project b = project("colours", {"red", "green", "blue"});
        b.training.checkpointDir = ck;  // pointed at A's folder
        writeProject(b, path("b.strata"));
        std::ofstream(path("rows.csv")) << "f0,f1,f2,f3,f4,f5,f6,f7\n0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8\n";

        const std::string want =
            "this checkpoint was written for another project ('pets'): the checkpoint's classes are [cat, dog, fox]; "
            "the project's are [red, green, blue]";
        {
            std::ostringstream out, err;
            QCOMPARE(runExportCommand({path("b.strata"), "--format", "onnx", "-o", path("b.onnx")}, out, err), 1);
            QVERIFY2(contains(err.str(), want) && contains(err.str(), "give the checkpoint instead"),
                     err.str().c_str());
            QVERIFY(!fs::exists(path("b.onnx")));
        }
        {
            std::ostringstream out, err;
            QCOMPARE(runPredictCommand({path("b.strata"), path("rows.csv")}, out, err), 1);
            QVERIFY2(contains(err.str(), want), err.str().c_str());
        }
        // Its own project: both work, and predict says which checkpoint it used.
        {
            std::ostringstream out, err;
            QCOMPARE(runExportCommand({path("a.strata"), "--format", "onnx", "-o", path("a.onnx")}, out, err), 0);
            QVERIFY2(fs::exists(path("a.onnx")), err.str().c_str());
        }
        {
            std::ostringstream out, err;
            QCOMPARE(runPredictCommand({path("a.strata"), path("rows.csv")}, out, err), 0);
            QVERIFY2(contains(out.str(), "using checkpoint " + ck + "/best.safetensors") ||
                         contains(out.str(), "using checkpoint " + ck + "/latest.safetensors"),
                     out.str().c_str());
        }
        // A project without a checkpoint folder: its newest run folder (where strata-train put its checkpoints).
        fs::create_directories(path("proj"));
        Project r = project("pets", {"cat", "dog", "fox"});
        writeProject(r, path("proj/r.strata"));
        {
            TrainerOptions o;
            o.projectPath = path("proj/r.strata");
            o.runFolder = newRunFolder(r, o.projectPath, {}, std::chrono::system_clock::now());
            test::RecordedRun rec;
            QVERIFY2(train(r, rec, o), rec.error.c_str());
        }
        {
            std::ostringstream out, err;
            QCOMPARE(runPredictCommand({path("proj/r.strata"), path("rows.csv")}, out, err), 0);
            QVERIFY2(contains(out.str(), "using checkpoint " + path("proj/runs/pets-")), out.str().c_str());
        }
    }

    // Transfer learning on purpose: the matching tensors copied, the rest initialized, a run from step 0.
    void initFromCopiesMatchingTensors() {
        const std::string ck = trainedA();
        const Checkpoint a = loadCheckpoint(ck + "/latest.safetensors");
        // Five classes: dense2 has another shape.
        const Project c = project("five", {"a", "b", "c", "d", "e"});
        auto backend = test::makeCpuBackend();
        auto model = compile(c.graph, *backend, c.training.seed);
        const auto initial = modelWeights(*model);
        const InitFromReport r = initFromCheckpoint(*model, a);
        QCOMPARE(r.copied, (std::vector<std::string>{"dense1.weight [32, 8]", "dense1.bias [32]"}));
        QCOMPARE(r.skipped, (std::vector<std::string>{"dense2.weight [5, 32]: the checkpoint's is [3, 32]",
                                                      "dense2.bias [5]: the checkpoint's is [3]"}));
        QVERIFY(r.unused.empty());
        const auto after = modelWeights(*model);
        QVERIFY(after.at("dense1.weight") == a.weights.at("dense1.weight"));
        QVERIFY(after.at("dense1.bias") == a.weights.at("dense1.bias"));
        QVERIFY(after.at("dense2.weight") == initial.at("dense2.weight"));
        QVERIFY(after.at("dense1.weight") != initial.at("dense1.weight"));

        // Through the Trainer: another project's checkpoint (refused by --resume above), a new run at step 1.
        Project b = project("colours", {"red", "green", "blue"}, NormalizationMode::Standardize);
        TrainerOptions o;
        o.initFrom = ck;
        o.maxSteps = 3;
        StepsRun rec;
        QVERIFY2(train(b, rec, o), rec.error.c_str());
        const std::string best = ck + "/best.safetensors", latest = ck + "/latest.safetensors";
        QVERIFY2(contains(rec.log, "init-from " + best + ": initialized 4 of 4 tensors from " + best +
                                       "; all matched; a new run from step 0 with a fresh optimizer") ||
                     contains(rec.log, "init-from " + latest + ": initialized 4 of 4 tensors from " + latest),
                 rec.log.c_str());
        QVERIFY(contains(rec.log, "  copied dense2.weight [3, 32]"));
        QCOMPARE(rec.stepNumbers, (std::vector<int64_t>{1, 2, 3}));
        QVERIFY(!contains(rec.log, "resumed from"));

        // Nothing in common: refused rather than a run from scratch that looks like transfer learning.
        Project other = test::blobsMlpProject("other", 6, 3);
        other.graph.rename(other.graph.nodeByName("dense1")->id, "hidden");
        other.graph.rename(other.graph.nodeByName("dense2")->id, "head");
        test::RecordedRun recOther;
        QVERIFY(!train(other, recOther, o));
        QVERIFY2(contains(recOther.error, "--init-from copied no tensor"), recOther.error.c_str());
        QVERIFY2(contains(recOther.log, "not used (no parameter of that name) dense1.weight [32, 8]"),
                 recOther.log.c_str());

        // And not together with --resume.
        TrainerOptions both = o;
        both.resumeFrom = ck;
        test::RecordedRun recBoth;
        QVERIFY(!train(b, recBoth, both));
        QVERIFY2(contains(recBoth.error, "give one of them"), recBoth.error.c_str());
    }
};

QTEST_GUILESS_MAIN(TestCheckpointIdentity)
#include "test_checkpoint_identity.moc"
