// The run history's robustness (core/history/RunStore, RunRecorder), without the workbench: a database that
// another connection keeps locked mid-run still gets the run's status, epochs and whole curve; a lock held past
// the run's end leaves the writes in a pending file that the next start replays (once, however often it is
// replayed); a strata-train killed with SIGKILL after its first epoch is marked interrupted with the last epoch
// it finished at the next start, and a pid reused by a later process does not keep a run 'running'; a run
// refused before its first step is 'refused', not 'failed'.
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <sstream>
#include <thread>

#include <sqlite3.h>
#include <unistd.h>

#include "app/CliCommands.h"
#include "core/backend/CpuBackend.h"
#include "core/history/RunRecorder.h"
#include "core/history/RunStore.h"
#include "core/train/BackendOptionsFor.h"
#include "core/train/Trainer.h"
#include "tests/support/TestBackends.h"
#include "tests/support/TestDatabase.h"
#include "tests/support/TestProjects.h"

using namespace strata;
using Clock = std::chrono::steady_clock;

namespace {

using test::WriteLock;

// Passes every event on, each step after `stepMs` (a slower run, so that a lock can start and end inside it),
// and calls `atStep` once at step `when`.
class Paced : public TrainingObserver {
public:
    Paced(TrainingObserver& next, int stepMs, int64_t when, std::function<void()> atStep)
        : m_next(next), m_stepMs(stepMs), m_when(when), m_atStep(std::move(atStep)) {}
    void onStep(const StepEvent& e) override {
        std::this_thread::sleep_for(std::chrono::milliseconds(m_stepMs));
        if (e.step == m_when && m_atStep) m_atStep();
        m_next.onStep(e);
    }
    void onEpoch(const EpochEvent& e) override { m_next.onEpoch(e); }
    void onTrainingStarted() override { m_next.onTrainingStarted(); }
    void onFinished(const FinishedEvent& e) override { m_next.onFinished(e); }
    void onError(const std::string& m) override { m_next.onError(m); }
    void onLog(const std::string& m) override { m_next.onLog(m); }

private:
    TrainingObserver& m_next;
    int m_stepMs;
    int64_t m_when;
    std::function<void()> m_atStep;
};

// 1200 blobs, a quarter held out: 900 training samples, batch 32, 29 steps per epoch.
Project blobs(int epochs) {
    Project p = test::blobsMlpProject("history");
    p.training.epochs = epochs;
    p.training.device = "cpu";
    return p;
}

int64_t count(history::RunStore& store, int64_t run, const char* kind) {
    return static_cast<int64_t>(store.metrics(run, kind).size());
}

std::string joined(const std::vector<std::string>& lines) {
    std::string s;
    for (const std::string& l : lines) s += l + "\n";
    return s;
}

// A pid that no process has now: one that just ended.
int64_t deadPid() {
    QProcess p;
    p.start("/bin/true", {});
    p.waitForFinished();
    return p.processId() > 0 ? p.processId() : 999999;
}

}  // namespace

class TestRunStore : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

    std::string path(const std::string& name) const {
        return m_dir.filePath(QString::fromStdString(name)).toStdString();
    }

private slots:
    void initTestCase() { QVERIFY(m_dir.isValid()); }

    // Another connection holds the write lock for 8 s from step 3 (longer than SQLite's busy timeout of 5 s, after
    // which the old recorder stopped recording for good and left the run 'running' with 0 epochs). The run goes
    // on; its points queue and reach the database once the lock is gone: the final status, every epoch and the
    // whole step curve.
    void lockedMidRunStillRecordsEverything() {
        const std::string db = path("locked.sqlite");
        history::RunStore store(db);
        const Project p = blobs(5);  // 145 steps, 40 ms each: about 6 s
        test::RecordedRun printed;
        history::RunRecorder recorder(store, &printed, p, "/tmp/history.strata", "cpu", "cli");
        std::thread holder;
        std::atomic<bool> locked{false};
        Paced paced(recorder, 40, 3, [&] {
            holder = std::thread([&] {
                WriteLock lock(db);
                locked = true;
                std::this_thread::sleep_for(std::chrono::seconds(8));
            });
            while (!locked) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        });
        std::unique_ptr<Backend> be = test::makeCpuBackend(backendOptionsFor(p.training));
        TrainerOptions o;
        o.telemetryIntervalMs = 0;
        const auto start = Clock::now();
        Trainer trainer(p, *be, &paced, o);
        QVERIFY2(trainer.run(), printed.error.c_str());
        const double took = std::chrono::duration<double>(Clock::now() - start).count();
        holder.join();
        qInfo("run took %.1f s; log:\n%s", took, printed.log.c_str());
        QVERIFY2(printed.log.find("run history: cannot write") != std::string::npos, printed.log.c_str());
        QVERIFY2(printed.log.find("run history: caught up") != std::string::npos, printed.log.c_str());
        const std::optional<history::RunRecord> r = store.run(recorder.runId());
        QVERIFY(r);
        QCOMPARE(r->status, std::string("finished"));
        QCOMPARE(r->epochsCompleted, 5);
        QCOMPARE(count(store, r->id, "epoch"), int64_t(5));
        QCOMPARE(count(store, r->id, "step"), int64_t(145));
        QVERIFY(std::isfinite(r->finalValAccuracy));
        QVERIFY(recorder.pendingFile().empty());
        // The training was not held up by the lock: 145 steps of 40 ms, well under the 8 s of the lock plus them.
        QVERIFY2(took < 14, std::to_string(took).c_str());
    }

    // The lock outlasts the run (strata-train's end waits 5 s for it): the last writes go to a pending file beside
    // the database, and the next start (RunStore::recover, as `strata-train runs list` calls it) records them.
    // Replaying the same file again changes nothing.
    void lockPastTheEndIsReplayedAtTheNextStart() {
        const std::string db = path("past-end.sqlite");
        const std::string projectFile = path("past-end.strata");
        writeProject(blobs(20), projectFile);
        { history::RunStore create(db); }
        QProcess cli;
        cli.setProcessChannelMode(QProcess::MergedChannels);
        cli.start(QStringLiteral(STRATA_TRAIN_EXE),
                  {QString::fromStdString(projectFile), "--history", QString::fromStdString(db), "--checkpoint-dir",
                   m_dir.filePath("past-end-ckpt")});
        QVERIFY(cli.waitForStarted());
        // Once its row exists, hold the lock until it has ended (from before its first epoch's write).
        std::unique_ptr<WriteLock> lock;
        int64_t epochsBeforeLock = -1;
        for (int i = 0; i < 3000 && !lock; ++i) {
            {
                history::RunStore look(db);
                if (!look.runs().empty()) {
                    lock = std::make_unique<WriteLock>(db);
                    epochsBeforeLock = count(look, look.runs()[0].id, "epoch");
                }
            }
            if (!lock) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        QVERIFY(lock);
        QCOMPARE(epochsBeforeLock, int64_t(0));
        QVERIFY(cli.waitForFinished(120000));
        const QString out = QString::fromUtf8(cli.readAll());
        QVERIFY2(cli.exitCode() == 0, qPrintable(out));
        QVERIFY2(out.contains("the run's last writes are in"), qPrintable(out));
        lock->release();
        std::vector<std::filesystem::path> pending;
        for (const auto& e : std::filesystem::directory_iterator(m_dir.path().toStdString()))
            if (e.path().filename().string().rfind("past-end.sqlite.pending-", 0) == 0) pending.push_back(e.path());
        QCOMPARE(pending.size(), size_t(1));
        const std::string kept = path("kept.jsonl");
        std::filesystem::copy_file(pending[0], kept);

        history::RunStore store(db);
        const int64_t id = store.runs().at(0).id;
        QCOMPARE(store.run(id)->status, std::string("running"));  // as the lock left it
        std::ostringstream listed, err;
        QCOMPARE(runRunsCommand({"list", "--history", db}, listed, err), 0);
        QVERIFY2(err.str().find("replayed") != std::string::npos, err.str().c_str());
        QVERIFY(!std::filesystem::exists(pending[0]));
        auto check = [&] {
            const std::optional<history::RunRecord> r = store.run(id);
            QCOMPARE(r->status, std::string("finished"));
            QCOMPARE(r->epochsCompleted, 20);
            QCOMPARE(count(store, id, "epoch"), int64_t(20));
            QCOMPARE(count(store, id, "step"), int64_t(20 * 29));
            QVERIFY(std::isfinite(r->finalValAccuracy));
        };
        check();
        QVERIFY2(listed.str().find("finished") != std::string::npos, listed.str().c_str());
        // The same file again (a crash between a replay's commit and the file's removal): no point doubled.
        std::filesystem::copy_file(kept, pending[0]);
        const std::string again = joined(store.recover());
        QVERIFY2(again.find("replayed") != std::string::npos, again.c_str());
        check();
    }

    // strata-train killed with SIGKILL after its first epoch stays 'running' until the next start, which finds its
    // process gone and marks it interrupted with the last epoch it finished; its curve stays. A run whose process
    // runs is left alone, and so is one recorded on another host; a row whose pid now belongs to a process that
    // started after the run (a reused pid) is not the run's process.
    void killedRunIsMarkedWithItsLastEpoch() {
        const std::string db = path("killed.sqlite");
        const std::string projectFile = path("killed.strata");
        writeProject(blobs(1000), projectFile);
        { history::RunStore create(db); }
        QProcess cli;
        cli.start(QStringLiteral(STRATA_TRAIN_EXE),
                  {QString::fromStdString(projectFile), "--history", QString::fromStdString(db), "--checkpoint-dir",
                   m_dir.filePath("killed-ckpt"), "--quiet"});
        QVERIFY(cli.waitForStarted());
        int64_t id = 0;
        for (int i = 0; i < 6000; ++i) {
            history::RunStore look(db);
            const auto runs = look.runs();
            if (!runs.empty() && count(look, runs[0].id, "epoch") >= 1) {
                id = runs[0].id;
                // While it runs, a start leaves it alone.
                const std::string said = joined(look.recover());
                QVERIFY2(said.find("marked interrupted") == std::string::npos, said.c_str());
                QCOMPARE(look.run(id)->status, std::string("running"));
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        QVERIFY(id > 0);
        ::kill(static_cast<pid_t>(cli.processId()), SIGKILL);
        QVERIFY(cli.waitForFinished(10000));

        history::RunStore store(db);
        const int64_t epochs = count(store, id, "epoch");
        const int64_t steps = count(store, id, "step");
        QVERIFY(epochs >= 1);
        QVERIFY(steps >= 29 * epochs);
        QCOMPARE(store.run(id)->status, std::string("running"));  // nobody has looked yet
        const std::string said = joined(store.recover());
        QVERIFY2(said.find("run " + std::to_string(id) + " marked interrupted") != std::string::npos, said.c_str());
        const std::optional<history::RunRecord> r = store.run(id);
        QCOMPARE(r->status, std::string("interrupted"));
        QCOMPARE(r->epochsCompleted, static_cast<int>(epochs));
        QVERIFY2(r->message.find("the last epoch it finished is " + std::to_string(epochs)) != std::string::npos,
                 r->message.c_str());
        QCOMPARE(count(store, id, "step"), steps);  // the curve stays
        QVERIFY(std::isfinite(r->finalTrainLoss));
        QVERIFY(r->bestEpoch >= 1);

        // Rows written by hand: this process's pid on a run that began long before it started (so the pid was
        // reused), and a dead pid recorded on another host.
        sqlite3* raw = nullptr;
        QCOMPARE(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
        const std::string insert =
            "INSERT INTO runs (started, project_name, status, source, pid, host) VALUES"
            " ('2000-01-01T00:00:00.000Z', 'reused', 'running', 'cli', " +
            std::to_string(::getpid()) +
            ", NULL),"
            " ('2000-01-01T00:00:00.000Z', 'elsewhere', 'running', 'cli', " +
            std::to_string(deadPid()) + ", 'another-host')";
        QCOMPARE(sqlite3_exec(raw, insert.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
        sqlite3_close(raw);
        store.recover();
        for (const history::RunRecord& run : store.runs()) {
            if (run.projectName == "reused") QCOMPARE(run.status, std::string("interrupted"));
            if (run.projectName == "elsewhere") QCOMPARE(run.status, std::string("running"));
        }
    }

    // A run that stops before its first step (here: a data file that does not exist) is recorded as 'refused',
    // not listed as a failed run; one that fails while training (a failure injected at step 40, in its second
    // epoch) is 'failed', with the epoch it finished.
    void refusedRunIsNotAFailure() {
        const std::string db = path("refused.sqlite");
        Project bad = blobs(1);
        bad.dataset.kind = DatasetKind::Idx;
        bad.dataset.trainImages = path("no-such-images.idx");
        bad.dataset.trainLabels = path("no-such-labels.idx");
        const std::string badFile = path("refused.strata");
        writeProject(bad, badFile);
        QProcess cli;
        cli.start(QStringLiteral(STRATA_TRAIN_EXE),
                  {QString::fromStdString(badFile), "--history", QString::fromStdString(db), "--quiet"});
        QVERIFY(cli.waitForFinished(60000));
        QCOMPARE(cli.exitCode(), 1);

        const std::string goodFile = path("fails-later.strata");
        writeProject(blobs(3), goodFile);
        QProcess failing;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("STRATA_TEST_FAIL_STEP", "40");
        failing.setProcessEnvironment(env);
        failing.start(QStringLiteral(STRATA_TRAIN_EXE),
                      {QString::fromStdString(goodFile), "--history", QString::fromStdString(db), "--quiet",
                       "--checkpoint-dir", m_dir.filePath("fails-later-ckpt")});
        QVERIFY(failing.waitForFinished(60000));
        QCOMPARE(failing.exitCode(), 1);

        history::RunStore store(db);
        const std::vector<history::RunRecord> runs = store.runs();
        QCOMPARE(runs.size(), size_t(2));
        QCOMPARE(runs[1].status, std::string("refused"));
        QVERIFY2(runs[1].message.find("no-such-images.idx") != std::string::npos, runs[1].message.c_str());
        QCOMPARE(runs[1].epochsCompleted, 0);
        QCOMPARE(runs[0].status, std::string("failed"));
        QCOMPARE(runs[0].epochsCompleted, 1);
        std::ostringstream listed, err;
        QCOMPARE(runRunsCommand({"list", "--history", db}, listed, err), 0);
        const std::string text = listed.str();
        QVERIFY2(text.find("refused") != std::string::npos, text.c_str());
        QCOMPARE(std::count(text.begin(), text.end(), '\n'), 3);  // the header and two runs
        size_t failed = 0;
        for (size_t at = text.find("failed"); at != std::string::npos; at = text.find("failed", at + 1)) ++failed;
        QCOMPARE(failed, size_t(1));
    }

    // Issue 38: an epoch's task metrics (R^2, F1s, PSNR...) are stored with it and read back per epoch (metrics,
    // epochEvents), as the run's last ones (runs, for the Runs view), in the CSV (a column each, a label's comma
    // quoted) and through a pending file. A database of the release before gains the column; its epochs read back
    // without task metrics.
    void taskMetricsAreRecordedPerEpoch() {
        const std::string db = path("tasks.sqlite");
        QCOMPARE(test::execSql(db,
                               "CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, started TEXT NOT NULL,"
                               " project_name TEXT, project_path TEXT, device TEXT, project_json TEXT, status TEXT,"
                               " message TEXT, epochs_completed INTEGER, best_epoch INTEGER, best_val_loss REAL,"
                               " best_val_acc REAL, seconds REAL);"
                               "CREATE TABLE metrics (run_id INTEGER NOT NULL REFERENCES runs(id), kind TEXT NOT NULL,"
                               " step INTEGER, epoch INTEGER, loss REAL, accuracy REAL, learning_rate REAL,"
                               " samples_per_second REAL, val_loss REAL, val_accuracy REAL, elapsed_seconds REAL);"
                               "INSERT INTO runs (started, project_name, status) VALUES ('2026-12-01T10:00:00Z',"
                               " 'old', 'finished');"
                               "INSERT INTO metrics (run_id, kind, epoch, loss, val_loss, val_accuracy)"
                               " VALUES (1, 'epoch', 1, 0.5, 0.6, 0.7)"),
                 std::string());
        history::RunStore store(db);
        QCOMPARE(store.metrics(1, "epoch").size(), size_t(1));
        QVERIFY(store.metrics(1, "epoch")[0].valMetrics.empty());
        QVERIFY(store.run(1)->finalValMetrics.empty());

        const int64_t run = store.beginRun(blobs(2), "/p/tasks.strata", "cpu", "cli");
        auto epoch = [](int n, std::vector<NamedMetric> metrics) {
            EpochEvent e;
            e.epoch = n;
            e.trainLoss = 1.0 / n;
            e.hasValidation = true;
            e.valLoss = 0.5 / n;
            e.valAccuracy = metrics[0].value;
            e.valMetrics = std::move(metrics);
            return e;
        };
        const std::vector<NamedMetric> first = {{"micro_f1", 0.5}, {"macro_f1", 0.25}, {"precision[a,b]", 0.125}},
                                       second = {{"micro_f1", 0.75}, {"macro_f1", 0.5}, {"precision[a,b]", 0.625}};
        store.addEpoch(run, epoch(1, first));
        const std::string pending = path("tasks.pending.jsonl");
        history::PendingWrite later;
        later.kind = history::PendingWrite::Kind::Epoch;
        later.epoch = epoch(2, second);
        history::RunStore::appendPendingFile(pending, run, {later});
        int64_t pendingRun = 0;
        const std::vector<history::PendingWrite> back = history::RunStore::readPendingFile(pending, pendingRun);
        QCOMPARE(pendingRun, run);
        QCOMPARE(back.size(), size_t(1));
        QVERIFY(back[0].epoch.valMetrics == second);
        store.applyPending(run, back, true);

        const std::vector<history::MetricRow> rows = store.metrics(run, "epoch");
        QCOMPARE(rows.size(), size_t(2));
        QVERIFY(rows[0].valMetrics == first);
        QVERIFY(rows[1].valMetrics == second);
        const auto events = store.epochEvents(run);
        QCOMPARE(events.size(), size_t(2));
        QVERIFY(events[1].first.valMetrics == second);
        QVERIFY(store.run(run)->finalValMetrics == second);
        QVERIFY(store.runs().front().finalValMetrics == second);
        const std::string csv = history::metricsCsv(rows);
        QVERIFY2(csv.find("elapsed_seconds,val_micro_f1,val_macro_f1,\"val_precision[a,b]\"\n") != std::string::npos,
                 csv.c_str());
        QVERIFY2(csv.find(",0.75,0.5,0.625\n") != std::string::npos, csv.c_str());
    }
};

QTEST_GUILESS_MAIN(TestRunStore)
#include "test_run_store.moc"
