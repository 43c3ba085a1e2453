// Hyperparameter sweeps (core/history/Sweep, strata-train sweep): grid and random assignments from the
// project's definition, errors naming the JSON path, layer parameters swept by node name, successive
// halving keeping the best trials, and a sweep killed mid-way (SIGKILL) that resumes without redoing the
// trials it finished.
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>
#include <algorithm>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "core/history/Sweep.h"
#include "core/train/Trainer.h"
#include "tests/support/TestProjects.h"

using namespace strata;
using namespace strata::history;

namespace {

Project sweepProject(int64_t samples) {
    Project p = test::blobsMlpProject("sweep");
    test::useBlobs(p, samples, 4, {16});
    p.training.epochs = 1;
    p.training.device = "cpu";
    return p;
}

Json readJson(const QString& path) {
    std::ifstream f(path.toStdString());
    return Json::parse(f);
}

}  // namespace

class TestSweep : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

private slots:
    void assignments() {
        const Json grid = Json::parse(R"({"parameters": [
            {"setting": "training.learning_rate", "min": 0.001, "max": 0.1, "scale": "log", "count": 3},
            {"setting": "training.optimizer", "values": ["sgd", "adam"]}]})");
        const SweepDefinition d = parseSweep(grid);
        const std::vector<Json> a = sweepAssignments(d);
        QCOMPARE(a.size(), size_t(6));
        QCOMPARE(a[0].dump(), std::string(R"({"training.learning_rate":0.001,"training.optimizer":"sgd"})"));
        QCOMPARE(a[5].dump(), std::string(R"({"training.learning_rate":0.1,"training.optimizer":"adam"})"));
        QCOMPARE(a[2]["training.learning_rate"].get<double>(), 0.01);

        const Json random = Json::parse(R"({"method": "random", "trials": 20, "seed": 3, "parameters": [
            {"setting": "graph.dense1.units", "min": 8, "max": 64, "scale": "log", "integer": true},
            {"setting": "training.weight_decay", "min": 0, "max": 0.01}]})");
        const std::vector<Json> r = sweepAssignments(parseSweep(random));
        QCOMPARE(r.size(), size_t(20));
        QVERIFY(sweepAssignments(parseSweep(random)) == r);  // the same seed, the same sweep
        for (const Json& x : r) {
            const int64_t units = x["graph.dense1.units"].get<int64_t>();
            QVERIFY(units >= 8 && units <= 64);
            QVERIFY(x["training.weight_decay"].get<double>() <= 0.01);
        }
        // A layer parameter by node name; the result is checked like a project file.
        const Project base = sweepProject(200);
        const Project p = applyAssignment(base, r[0]);
        QCOMPARE(p.graph.nodeByName("dense1")->params["units"].get<int64_t>(),
                 r[0]["graph.dense1.units"].get<int64_t>());
        try {
            applyAssignment(base, Json{{"graph.nosuch.units", 3}});
            QFAIL("no error for an unknown node");
        } catch (const ProjectError& e) {
            QVERIFY2(std::string(e.what()).find("no node named 'nosuch'") != std::string::npos, e.what());
        }
        try {
            applyAssignment(base, Json{{"training.batch_size", 0}});
            QFAIL("no error for batch size 0");
        } catch (const ProjectError& e) {
            QVERIFY2(std::string(e.what()).find("batch_size") != std::string::npos, e.what());
        }
        try {
            parseSweep(Json::parse(R"({"parameters": [{"setting": "training.learning_rate", "min": 0, "max": 1,
                                       "scale": "cubic"}]})"));
            QFAIL("no error for an unknown scale");
        } catch (const ProjectError& e) {
            QCOMPARE(e.jsonPath(), std::string("/sweep/parameters/0/scale"));
        }
    }

    void halvingKeepsTheBest() {
        Project p = sweepProject(400);
        p.sweep = Json::parse(R"({"parameters": [{"setting": "training.learning_rate",
                                   "values": [0.0001, 0.001, 0.05, 0.2]}], "halving": {"rungs": [1, 2], "keep": 0.5}})");
        const std::string projectPath = m_dir.filePath("halving.strata").toStdString();
        RunStore store(m_dir.filePath("halving.sqlite").toStdString());
        SweepOptions options;
        options.store = &store;
        std::ostringstream log;
        const std::vector<TrialResult> results = runSweep(p, projectPath, options, log);
        QCOMPARE(results.size(), size_t(6));  // 4 trials, then the best 2 for 2 epochs
        std::vector<std::pair<double, int>> rung1;
        for (const TrialResult& r : results)
            if (r.rung == 0) rung1.push_back({r.metric, r.trial});
        std::sort(rung1.rbegin(), rung1.rend());
        std::set<int> second;
        for (const TrialResult& r : results)
            if (r.rung == 1) {
                second.insert(r.trial);
                QCOMPARE(r.epochs, 2);
                QCOMPARE(store.run(r.runId)->epochsCompleted, 2);
            }
        QCOMPARE(second, (std::set<int>{rung1[0].second, rung1[1].second}));
        // A promoted trial continued from its epoch-1 checkpoint: its run trained (and recorded) epoch 2 only,
        // one epoch's steps, not epochs 1 and 2 again.
        int64_t rung1Steps = 0;
        for (const TrialResult& r : results)
            if (r.rung == 0) rung1Steps = int64_t(store.metrics(r.runId, "step").size());
        QVERIFY(rung1Steps > 0);
        for (const TrialResult& r : results) {
            if (r.rung != 1) continue;
            QVERIFY2(r.resumedFrom.find("trial-" + std::to_string(r.trial + 1) + "/epoch-001") != std::string::npos,
                     r.resumedFrom.c_str());
            const std::vector<MetricRow> epochs = store.metrics(r.runId, "epoch");
            QCOMPARE(epochs.size(), size_t(1));
            QCOMPARE(epochs[0].epoch, 2);
            QCOMPARE(int64_t(store.metrics(r.runId, "step").size()), rung1Steps);
        }
        QVERIFY2(log.str().find("continuing from epoch 1") != std::string::npos, log.str().c_str());
        QCOMPARE(store.runs().size(), size_t(6));
        QCOMPARE(store.runs()[0].source, std::string("sweep"));
    }

    void killedSweepResumes() { killAndResume("killed", {}); }
    void killedParallelSweepResumes() { killAndResume("killed-parallel", {"--parallel", "2"}); }

    void parallelTrialsOverlap() {
        Project p = sweepProject(4000);
        p.sweep = Json::parse(R"({"parameters": [{"setting": "training.learning_rate",
                                   "values": [0.01, 0.02, 0.05, 0.1]}]})");
        const std::string projectPath = m_dir.filePath("parallel.strata").toStdString();
        RunStore store(m_dir.filePath("parallel.sqlite").toStdString());
        SweepOptions options;
        options.store = &store;
        options.parallel = 2;
        std::mutex mutex;
        int running = 0, most = 0;
        std::set<int> usedSlots;
        options.onTrainer = [&](int slot, Trainer* t) {
            std::lock_guard lock(mutex);
            running += t ? 1 : -1;
            most = std::max(most, running);
            usedSlots.insert(slot);
        };
        std::ostringstream log;
        const std::vector<TrialResult> results = runSweep(p, projectPath, options, log);
        QCOMPARE(results.size(), size_t(4));
        QCOMPARE(most, 2);  // two trials trained at once, never more
        QCOMPARE(usedSlots, (std::set<int>{0, 1}));
        QCOMPARE(running, 0);
        // Every trial a finished run; CPU trials split the cores between the two slots.
        const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
        for (const TrialResult& r : results) {
            QCOMPARE(r.status, std::string("done"));
            QCOMPARE(r.device, std::string("cpu"));
            QCOMPARE(store.run(r.runId)->status, std::string("finished"));
            const Json project = Json::parse(store.projectJson(r.runId));
            QCOMPARE(project["training"]["threads"].get<int>(), std::max(1, cores / 2));
        }
        QCOMPARE(store.runs().size(), size_t(4));
    }

    void badDeviceNamed() {
        Project p = sweepProject(200);
        p.sweep = Json::parse(R"({"parameters": [{"setting": "training.learning_rate", "values": [0.01]}]})");
        SweepOptions options;
        options.devices = {"cpu", "tpu:3"};
        std::ostringstream log;
        try {
            runSweep(p, m_dir.filePath("bad-device.strata").toStdString(), options, log);
            QFAIL("no error for an unknown device");
        } catch (const std::invalid_argument& e) {
            QVERIFY2(std::string(e.what()).find("sweep device 'tpu:3'") != std::string::npos, e.what());
        }
    }

private:
    void killAndResume(const QString& name, const QStringList& extra) {
        // Trials long enough (a few tenths of a second) to be killed in the middle of the sweep.
        Project p = sweepProject(24000);
        p.training.epochs = 3;
        p.sweep = Json::parse(R"({"parameters": [{"setting": "training.learning_rate",
                                   "values": [0.01, 0.02, 0.05, 0.1, 0.2, 0.3]}]})");
        const QString projectPath = m_dir.filePath(name + ".strata");
        writeProject(p, projectPath.toStdString());
        const QString db = m_dir.filePath(name + ".sqlite");
        const QString state = projectPath + ".sweep-state.json";
        QProcess sweep;
        sweep.start(QStringLiteral(STRATA_TRAIN_EXE),
                    QStringList{"sweep", projectPath, "--history", db, "--quiet"} + extra);
        QVERIFY(sweep.waitForStarted());
        // Kill it (no chance to clean up) once two trials are done.
        int done = 0;
        for (int i = 0; i < 6000 && done < 2; ++i) {
            QThread::msleep(5);
            if (QFile::exists(state)) {
                try {
                    done = int(readJson(state)["trials"].size());
                } catch (const std::exception&) {  // written atomically, so never half a file; retry anyway
                }
            }
        }
        sweep.kill();
        sweep.waitForFinished();
        const Json before = readJson(state);
        const size_t finished = before["trials"].size();
        QVERIFY2(finished >= 2 && finished < 6, qPrintable(QString("trials done when killed: %1").arg(finished)));

        sweep.start(QStringLiteral(STRATA_TRAIN_EXE), QStringList{"sweep", projectPath, "--history", db} + extra);
        QVERIFY(sweep.waitForFinished(120000));
        const QString err = sweep.readAllStandardError();
        QVERIFY2(sweep.exitCode() == 0, qPrintable(err));
        QVERIFY2(err.contains(QString("resuming: %1 trial(s) already done").arg(finished)), qPrintable(err));
        const Json after = readJson(state);
        QCOMPARE(after["trials"].size(), size_t(6));
        // The finished trials kept their runs; each trial finished exactly once.
        for (size_t i = 0; i < finished; ++i) QVERIFY(after["trials"][i] == before["trials"][i]);
        std::map<int, int> perTrial;
        for (const Json& t : after["trials"]) ++perTrial[t["trial"].get<int>()];
        QCOMPARE(perTrial.size(), size_t(6));
        for (const auto& [trial, n] : perTrial) QCOMPARE(n, 1);
        RunStore store(db.toStdString());
        int finishedRuns = 0, cutOff = 0;
        for (const RunRecord& r : store.runs()) {
            finishedRuns += r.status == "finished" ? 1 : 0;
            cutOff += r.status == "running" ? 1 : 0;
        }
        // A trial is done once the sweep state says so. The kill can land after a trial's run was marked
        // finished in the history but before the state file recorded it: that trial runs again, so its first
        // run stays in the history as an extra finished run. Either way, every trial the kill interrupted
        // (cut off mid-training or in that window) belongs to a slot that was busy: at most one per slot.
        const int busySlots = extra.isEmpty() ? 1 : 2;
        QVERIFY2(finishedRuns >= 6, qPrintable(QString("finished runs: %1").arg(finishedRuns)));
        QVERIFY2(cutOff + (finishedRuns - 6) <= busySlots,
                 qPrintable(QString("runs cut off: %1, extra finished runs: %2, slots: %3")
                                .arg(cutOff)
                                .arg(finishedRuns - 6)
                                .arg(busySlots)));
        QVERIFY(sweep.readAllStandardOutput().contains("TRIAL"));
    }
};

QTEST_MAIN(TestSweep)
#include "test_sweep.moc"
