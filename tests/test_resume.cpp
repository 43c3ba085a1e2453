// Resume that never rewinds (issue 18): `--resume DIR` continues from the newest checkpoint that loads (best
// only when asked), epoch files are ordered by number, later checkpoints are moved aside (not deleted) when a
// run resumes from an earlier point, temporary files of killed writers are deleted at start, and an
// unwritable checkpoint folder fails before the first step.
#include <QTemporaryDir>
#include <QtTest>
#include <filesystem>
#include <fstream>

#include "core/io/FileIo.h"
#include "core/train/Checkpoint.h"
#include "core/train/Trainer.h"
#include "tests/support/TestBackends.h"
#include "tests/support/TestProjects.h"

using namespace strata;
namespace fs = std::filesystem;

namespace {

struct Recorder : TrainingObserver {
    std::vector<StepEvent> steps;
    std::vector<std::string> logs, errors;
    void onStep(const StepEvent& e) override { steps.push_back(e); }
    void onLog(const std::string& m) override { logs.push_back(m); }
    void onError(const std::string& m) override { errors.push_back(m); }
    bool logged(const std::string& part) const {
        for (const std::string& l : logs)
            if (l.find(part) != std::string::npos) return true;
        return false;
    }
    std::string all() const {
        std::string s;
        for (const std::string& l : logs) s += l + "\n";
        for (const std::string& l : errors) s += "error: " + l + "\n";
        return s;
    }
};

}  // namespace

class TestResume : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;
    std::string m_ck;
    int64_t m_stepsPerEpoch = 0;

    Project project(int epochs) const {
        Project p = test::blobsMlpProject("resume", 8, 3);
        p.training.epochs = epochs;
        p.training.checkpointDir = m_ck;
        return p;
    }
    bool train(const Project& p, Recorder& rec, const std::string& resume = {}, bool best = false) {
        auto backend = test::makeCpuBackend();
        TrainerOptions o;
        o.resumeFrom = resume;
        o.resumeBest = best;
        Trainer t(p, *backend, &rec, o);
        return t.run();
    }
    // A fresh folder with epochs 1..3, best.safetensors holding epoch 1 (as when validation peaked early).
    void freshRun() {
        fs::remove_all(m_ck);
        Recorder rec;
        QVERIFY2(train(project(3), rec), rec.all().c_str());
        m_stepsPerEpoch = rec.steps.front().stepsPerEpoch;
        fs::copy_file(m_ck + "/epoch-001.safetensors", m_ck + "/best.safetensors",
                      fs::copy_options::overwrite_existing);
    }

private slots:
    void initTestCase() {
        QVERIFY(m_dir.isValid());
        m_ck = (m_dir.path() + "/ck").toStdString();
    }

    void epochFilesSortByNumber() {
        const std::string d = (m_dir.path() + "/names").toStdString();
        fs::create_directories(d);
        for (const char* n : {"epoch-1000.safetensors", "epoch-999.safetensors", "epoch-002.safetensors",
                              "step-00000010.safetensors", "epoch-x.safetensors", "latest.safetensors"})
            std::ofstream(d + "/" + n) << "x";
        const std::vector<NumberedCheckpoint> f = numberedCheckpoints(d);
        QCOMPARE(f.size(), size_t(4));
        QCOMPARE(f[0].number, int64_t(2));
        QCOMPARE(f[1].number, int64_t(999));
        QCOMPARE(f[2].number, int64_t(1000));
        QVERIFY(f[3].isStep);
        QCOMPARE(f[3].number, int64_t(10));
    }

    void folderResumesFromTheLatest() {
        freshRun();
        Recorder rec;
        QVERIFY2(train(project(4), rec, m_ck), rec.all().c_str());
        QVERIFY2(rec.logged("resumed from " + m_ck + "/latest.safetensors at epoch 3"), rec.all().c_str());
        QCOMPARE(rec.steps.front().step, 3 * m_stepsPerEpoch + 1);
        QCOMPARE(int64_t(rec.steps.size()), m_stepsPerEpoch);
    }

    // A kill between epoch-N and latest leaves epoch-N the newest; torn files give way to the next good one.
    void newestGoodFileWins() {
        freshRun();
        fs::copy_file(m_ck + "/epoch-002.safetensors", m_ck + "/latest.safetensors",
                      fs::copy_options::overwrite_existing);
        Recorder rec;
        QVERIFY2(train(project(4), rec, m_ck), rec.all().c_str());
        QVERIFY2(rec.logged("resumed from " + m_ck + "/epoch-003.safetensors at epoch 3"), rec.all().c_str());

        freshRun();
        for (const char* torn : {"/latest.safetensors", "/epoch-003.safetensors"}) {
            const auto size = fs::file_size(m_ck + torn);
            fs::resize_file(m_ck + torn, size / 2);
        }
        Recorder rec2;
        QVERIFY2(train(project(4), rec2, m_ck), rec2.all().c_str());
        QVERIFY2(rec2.logged("resumed from " + m_ck + "/epoch-002.safetensors at epoch 2"), rec2.all().c_str());
        QVERIFY2(rec2.logged("skipped a checkpoint that does not load"), rec2.all().c_str());
        QCOMPARE(rec2.steps.front().step, 2 * m_stepsPerEpoch + 1);
        // The torn epoch-003 went aside before the run wrote a new, whole one.
        QVERIFY(
            fs::exists(m_ck + "/superseded-at-step-" + std::to_string(2 * m_stepsPerEpoch) + "/epoch-003.safetensors"));
        QVERIFY(loadCheckpoint(m_ck + "/epoch-003.safetensors").epoch == 3);
    }

    void bestOnlyWhenAskedAndLaterFilesMovedAside() {
        freshRun();
        Recorder rec;
        QVERIFY2(train(project(2), rec, m_ck, true), rec.all().c_str());
        QVERIFY2(rec.logged("resumed from " + m_ck + "/best.safetensors at epoch 1"), rec.all().c_str());
        QCOMPARE(rec.steps.front().step, m_stepsPerEpoch + 1);
        const std::string aside = m_ck + "/superseded-at-step-" + std::to_string(m_stepsPerEpoch);
        for (const char* n : {"epoch-002.safetensors", "epoch-003.safetensors", "latest.safetensors"})
            QVERIFY2(fs::exists(aside + "/" + n), n);
        QCOMPARE(loadCheckpoint(aside + "/epoch-003.safetensors").epoch, 3);
        // The continued run wrote its own epoch 2; nothing of the old epoch 3 is left in the folder.
        QVERIFY(!fs::exists(m_ck + "/epoch-003.safetensors"));
        QCOMPARE(loadCheckpoint(m_ck + "/latest.safetensors").epoch, 2);
    }

    void orphanedTemporaryFilesRemoved() {
        freshRun();
        // A pid far above pid_max: no such process.
        const std::string orphan = m_ck + "/epoch-004.safetensors.tmp-99999999";
        std::ofstream(orphan) << std::string(4096, 'x');
        const std::string other = m_ck + "/notes.txt";
        std::ofstream(other) << "keep";
        Recorder rec;
        QVERIFY2(train(project(4), rec, m_ck), rec.all().c_str());
        QVERIFY(!fs::exists(orphan));
        QVERIFY(fs::exists(other));
        QVERIFY2(rec.logged("removed 1 temporary file(s)"), rec.all().c_str());
        QVERIFY(isTemporaryFileName("a.safetensors.tmp-12"));
        QVERIFY(!isTemporaryFileName("a.safetensors.tmp-"));
        QVERIFY(!isTemporaryFileName("a.tmp-1x"));
    }

    void unwritableFolderFailsBeforeTheFirstStep() {
        const std::string blocker = (m_dir.path() + "/blocker").toStdString();
        std::ofstream(blocker) << "a file, so no folder can be made under it";
        Project p = project(1);
        p.training.checkpointDir = blocker + "/ck";
        Recorder rec;
        QVERIFY(!train(p, rec));
        QVERIFY(rec.steps.empty());
        QVERIFY2(!rec.errors.empty() && rec.errors.front().find(blocker + "/ck") != std::string::npos,
                 rec.all().c_str());
    }
};

QTEST_GUILESS_MAIN(TestResume)
#include "test_resume.moc"
