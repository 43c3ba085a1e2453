// The run history shared by the workbench and strata-train (core/history/RunStore, ui/base/RunHistory):
// both default to one database; a run from the dashboard and a run of the strata-train program land in it
// with their curves and are listed, shown and exported by `strata-train runs`; the settings diff names
// exactly the changed keys; a database from before the shared schema is migrated in place.
#include <QDir>
#include <QProcess>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <thread>

#include "app/CliCommands.h"
#include "core/history/RunStore.h"
#include "tests/support/TestDatabase.h"
#include "tests/support/TestProjects.h"
#include "ui/TrainingDashboard.h"
#include "ui/base/ProjectDocument.h"
#include "ui/base/RunHistory.h"

using namespace strata;
using namespace strata::ui;

namespace {

// 1200 blobs, a quarter held out: 900 training samples, batch 32, 29 steps per epoch.
Project tinyProject(const std::string& name) {
    Project p = test::blobsMlpProject(name);
    p.training.epochs = 2;
    p.training.device = "cpu";
    return p;
}

int runsCli(const std::vector<std::string>& args, std::string& out) {
    std::ostringstream o, e;
    const int rc = runRunsCommand(args, o, e);
    out = o.str() + e.str();
    return rc;
}

}  // namespace

class TestRunHistory : public QObject {
    Q_OBJECT
    QTemporaryDir m_home;

private slots:
    void initTestCase() {
        QVERIFY(m_home.isValid());
        // Both sides find the per-user database through XDG_DATA_HOME: point it at a scratch folder.
        qputenv("XDG_DATA_HOME", m_home.filePath("data").toUtf8());
        QCoreApplication::setOrganizationName(QStringLiteral("Strata"));
        QCoreApplication::setApplicationName(QStringLiteral("Strata"));
    }

    void defaultPathsAgree() {
        QCOMPARE(QString::fromStdString(history::RunStore::defaultPath()), RunHistory::defaultPath());
        QVERIFY(RunHistory::defaultPath().startsWith(m_home.filePath("data")));
    }

    void cliAndGuiRunsLandInOneDatabase() {
        // The workbench's run: the dashboard records into RunHistory's default database, as strata_gui does.
        RunHistory gui;
        QVERIFY2(gui.isOpen(), qPrintable(gui.lastError()));
        ProjectDocument doc;
        const Project project = tinyProject("from-gui");
        doc.newProject(project);
        TrainingDashboard dash(&doc);
        dash.setRunHistory(&gui);
        QSignalSpy finished(&dash, &TrainingDashboard::trainingFinished);
        dash.startTraining(0);
        QVERIFY(finished.wait(60000));
        const qint64 guiRun = dash.runId();
        QVERIFY(guiRun > 0);

        // The headless run: the strata-train program, with no --history flag (the default database).
        Project cliProject = tinyProject("from-cli");
        cliProject.id = newProjectId();
        cliProject.training.learningRate = 0.02;
        const QString projectFile = m_home.filePath("cli.strata");
        writeProject(cliProject, projectFile.toStdString());
        QProcess cli;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("XDG_DATA_HOME", m_home.filePath("data"));
        cli.setProcessEnvironment(env);
        cli.start(QStringLiteral(STRATA_TRAIN_EXE), {projectFile, "--quiet"});
        QVERIFY(cli.waitForFinished(60000));
        QVERIFY2(cli.exitCode() == 0, cli.readAllStandardError().constData());

        // One database, both runs, each with its curves, status and final metrics.
        history::RunStore store(history::RunStore::defaultPath());
        const std::vector<history::RunRecord> runs = store.runs();
        QCOMPARE(runs.size(), size_t(2));
        const history::RunRecord& c = runs[0];
        const history::RunRecord& g = runs[1];
        QCOMPARE(g.id, guiRun);
        QCOMPARE(g.source, std::string("gui"));
        QCOMPARE(c.source, std::string("cli"));
        QCOMPARE(c.projectName, std::string("from-cli"));
        QCOMPARE(c.projectPath, QFileInfo(projectFile).absoluteFilePath().toStdString());
        QCOMPARE(c.device, std::string("cpu"));
        for (const history::RunRecord& r : runs) {
            QCOMPARE(r.status, std::string("finished"));
            QCOMPARE(r.epochsCompleted, 2);
            QCOMPARE(store.metrics(r.id, "step").size(), size_t(58));
            QCOMPARE(store.metrics(r.id, "epoch").size(), size_t(2));
            QVERIFY(std::isfinite(r.finalValAccuracy) && r.finalValAccuracy > 0.25);
            QVERIFY(std::isfinite(r.finalValLoss));
            QVERIFY(r.samplesPerSecond > 0);
            QVERIFY(r.bestEpoch >= 1);
        }
        QCOMPARE(parseProject(store.projectJson(c.id)), cliProject);
        QCOMPARE(parseProject(store.projectJson(g.id)), doc.project());
        // Issue 34: each run belongs to its project by the id both writers recorded (the GUI's project got one
        // when it was created), whatever path either has.
        QVERIFY(!doc.projectId().isEmpty());
        QCOMPARE(store.runIdsOfProject(cliProject.id, "/elsewhere/moved.strata"), std::vector<int64_t>{c.id});
        QCOMPARE(store.runIdsOfProject(doc.projectId().toStdString(), ""), std::vector<int64_t>{g.id});
        QCOMPARE(gui.runsOfProject(QString::fromStdString(cliProject.id), {}).size(), 1);
        QCOMPARE(gui.runsOfProject(QString::fromStdString(cliProject.id), {}).front().id, c.id);
        // The GUI's reader sees the CLI's run too.
        QCOMPARE(gui.runs().size(), 2);
        QCOMPARE(gui.metricCount(c.id, "step"), 58);

        // strata-train runs: list, show, export, diff, rename, note, delete.
        std::string out;
        QCOMPARE(runsCli({"list"}, out), 0);
        QVERIFY2(out.find("from-cli") != std::string::npos && out.find("from-gui") != std::string::npos, out.c_str());
        QCOMPARE(runsCli({"show", std::to_string(c.id)}, out), 0);
        QVERIFY2(out.find("58 step points, 2 epoch points") != std::string::npos, out.c_str());
        QCOMPARE(runsCli({"export", std::to_string(c.id), "--csv"}, out), 0);
        QCOMPARE(std::count(out.begin(), out.end(), '\n'), 1 + 58 + 2);
        QVERIFY(out.rfind("kind,step,epoch,loss,", 0) == 0);
        QCOMPARE(runsCli({"diff", std::to_string(g.id), std::to_string(c.id)}, out), 0);
        QCOMPARE(out, std::string("name: \"from-gui\" -> \"from-cli\"\ntraining.learning_rate: 0.05 -> 0.02\n"));
        QCOMPARE(runsCli({"rename", std::to_string(c.id), "lower lr"}, out), 0);
        QCOMPARE(runsCli({"note", std::to_string(c.id), "slower start"}, out), 0);
        QCOMPARE(store.run(c.id)->name, std::string("lower lr"));
        QCOMPARE(store.run(c.id)->notes, std::string("slower start"));
        QCOMPARE(runsCli({"show", "999"}, out), 1);
        QVERIFY2(out.find("no run 999") != std::string::npos, out.c_str());
        QCOMPARE(runsCli({"delete", std::to_string(c.id)}, out), 0);
        QCOMPARE(store.runs().size(), size_t(1));
        QCOMPARE(store.metrics(c.id, "step").size(), size_t(0));
        QCOMPARE(runsCli({"export", std::to_string(g.id)}, out), 2);  // --csv is required

        // --history off records nothing; --history DB records there.
        const QString other = m_home.filePath("other.sqlite");
        for (const QStringList& extra : {QStringList{"--history", "off"}, QStringList{"--history", other}}) {
            cli.start(QStringLiteral(STRATA_TRAIN_EXE),
                      QStringList{projectFile, "--quiet", "--max-steps", "3"} + extra);
            QVERIFY(cli.waitForFinished(60000));
            QCOMPARE(cli.exitCode(), 0);
        }
        QCOMPARE(store.runs().size(), size_t(1));
        history::RunStore otherStore(other.toStdString());
        QCOMPARE(otherStore.runs().size(), size_t(1));
        QCOMPARE(otherStore.metrics(otherStore.runs()[0].id, "step").size(), size_t(3));
    }

    void settingsDiffNamesExactlyTheChangedKeys() {
        const Project a = tinyProject("same");
        Project b = a;
        b.training.learningRate = 0.1;
        b.training.batchSize = 64;
        // A layer parameter, named by the layer's name, and a moved node (not a setting).
        Node* dense = b.graph.node(b.graph.nodeByName("dense1")->id);
        dense->params["units"] = 48;
        dense->x += 100;
        const auto diff = history::settingsDiff(projectToJson(a), projectToJson(b));
        std::vector<std::string> keys;
        for (const auto& d : diff) keys.push_back(d.first);
        const std::vector<std::string> expected = {"graph.nodes[dense1].params.units", "training.batch_size",
                                                   "training.learning_rate"};
        std::sort(keys.begin(), keys.end());
        QCOMPARE(keys, expected);
        QVERIFY(history::settingsDiff(projectToJson(a), projectToJson(a)).empty());
    }

    void olderDatabaseIsMigrated() {
        // The first release's schema with one GUI run in it.
        const QString path = m_home.filePath("old.sqlite");
        QCOMPARE(test::execSql(path.toStdString(),
                               "CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, started TEXT NOT NULL,"
                               " project_name TEXT, project_path TEXT, device TEXT, project_json TEXT, status TEXT,"
                               " message TEXT, epochs_completed INTEGER, best_epoch INTEGER, best_val_loss REAL,"
                               " best_val_acc REAL, seconds REAL);"
                               "INSERT INTO runs (started, project_name, status) VALUES ('2026-11-30T10:00:00Z',"
                               " 'old', 'finished')"),
                 std::string());
        history::RunStore store(path.toStdString());
        const auto runs = store.runs();
        QCOMPARE(runs.size(), size_t(1));
        QCOMPARE(runs[0].source, std::string("gui"));
        QCOMPARE(runs[0].projectName, std::string("old"));
        QVERIFY(std::isnan(runs[0].finalValAccuracy));
        QVERIFY(store.setNotes(runs[0].id, "kept"));
        RunHistory gui(path);
        QVERIFY2(gui.isOpen(), qPrintable(gui.lastError()));
        QCOMPARE(gui.runs().size(), 1);
        // Issue 34: the project id column is added; the old run has none, so it is matched by its path.
        QVERIFY(gui.runs().front().projectId.isEmpty());
        QVERIFY(store.runIdsOfProject("some-id", "").empty());
        QCOMPARE(test::execSql(path.toStdString(), "UPDATE runs SET project_path = '/p/old.strata'"), std::string());
        QCOMPARE(test::queryInt(path.toStdString(),
                                "SELECT COUNT(*) FROM pragma_index_list('runs') WHERE name = 'runs_project_id'"),
                 int64_t(1));
        QCOMPARE(store.runIdsOfProject("", "/p/old.strata"), std::vector<int64_t>{runs[0].id});
        QCOMPARE(store.runIdsOfProject("any-id", "/p/old.strata"), std::vector<int64_t>{runs[0].id});
        QVERIFY(store.runIdsOfProject("", "/p/other.strata").empty());
    }

    // Issue 36: the dashboard records through core's RunRecorder, as strata-train does. Another program holding
    // the database's write lock for longer than a write waits (7 s; SQLite's busy timeout was 5 s) in the
    // middle of a run costs no point: the writes queue and are retried, and the run ends with every step and
    // epoch the dashboard charted, its status, source "gui" and this host.
    void guiRunLockedMidRunLosesNothing() {
        QTemporaryDir dir;
        const QString path = dir.filePath("runs.sqlite");
        RunHistory history(path);
        QVERIFY2(history.isOpen(), qPrintable(history.lastError()));
        ProjectDocument doc;
        Project project = tinyProject("locked");
        project.training.epochs = 1000000;  // runs until stopped
        doc.newProject(project);
        TrainingDashboard dash(&doc);
        dash.setRunHistory(&history);
        QSignalSpy finished(&dash, &TrainingDashboard::trainingFinished);
        dash.startTraining(0);
        QTRY_VERIFY_WITH_TIMEOUT(dash.runId() > 0 && history.metricCount(dash.runId(), "epoch") >= 1, 60000);
        const qint64 run = dash.runId();

        std::atomic<bool> locked{false}, released{false};
        std::thread holder([&] {
            try {
                test::WriteLock lock(path.toStdString());
                locked = true;
                std::this_thread::sleep_for(std::chrono::seconds(7));
            } catch (const std::exception& e) {
                qWarning("%s", e.what());
            }
            released = true;
        });
        QTRY_VERIFY_WITH_TIMEOUT(locked || released, 20000);
        QVERIFY(locked);
        const int before = dash.pointCount("train_loss");
        QTRY_VERIFY_WITH_TIMEOUT(released.load(), 30000);
        holder.join();
        const int duringLock = dash.pointCount("train_loss") - before;
        QVERIFY2(duringLock > 0, "no step was charted while the database was locked");
        QTest::qWait(500);
        dash.stopTraining();
        QVERIFY(finished.wait(60000));

        const int steps = dash.pointCount("train_loss"), epochs = dash.pointCount("train_acc_epoch");
        QVERIFY(epochs >= 1);
        QCOMPARE(history.metricCount(run, "step"), steps);
        QCOMPARE(history.metricCount(run, "epoch"), epochs);
        history::RunStore store(path.toStdString());
        const std::optional<history::RunRecord> r = store.run(run);
        QVERIFY(r);
        QCOMPARE(r->status, std::string("stopped"));
        QCOMPARE(r->source, std::string("gui"));
        QVERIFY(!r->host.empty());
        QCOMPARE(r->lastStep, store.metrics(run, "step").back().step);
        // Nothing left for the next start: every write reached the database.
        for (const auto& entry : std::filesystem::directory_iterator(dir.path().toStdString()))
            QVERIFY2(entry.path().filename().string().find(".pending-") == std::string::npos, entry.path().c_str());
    }

    // Issue 36: the workbench's start-up (RunHistory::recover, as strata_gui calls it) marks the runs of this
    // host whose process is gone 'interrupted', and leaves a 'running' run of another host alone: its process
    // may well be training there, and only that host can tell.
    void startUpLeavesAnotherHostsRunAlone() {
        QTemporaryDir dir;
        const QString path = dir.filePath("runs.sqlite");
        qint64 here = 0, there = 0;
        {
            RunHistory before(path);  // a workbench that goes away with both runs under way
            here = before.beginRun(tinyProject("here"), {}, "cpu");
            there = before.beginRun(tinyProject("there"), {}, "cpu");
            QVERIFY(here > 0 && there > 0);
            EpochEvent e;
            e.epoch = 1;
            before.addEpoch(here, e);
        }
        const std::string db = path.toStdString();
        QCOMPARE(test::execSql(db, "UPDATE runs SET pid = 2147483647"), std::string());  // no such process here
        QCOMPARE(test::execSql(db, "UPDATE runs SET host = 'another-host' WHERE id = " + std::to_string(there)),
                 std::string());
        RunHistory history(path);
        QCOMPARE(history.recover().size(), 1);
        QHash<qint64, RunHistory::RunSummary> runs;
        for (const RunHistory::RunSummary& r : history.runs()) runs[r.id] = r;
        QCOMPARE(runs.value(here).status, QString("interrupted"));
        QCOMPARE(runs.value(here).epochsCompleted, 1);
        QCOMPARE(runs.value(there).status, QString("running"));
        QVERIFY(history.recover().isEmpty());  // nothing new to say on the next start
    }
};

QTEST_MAIN(TestRunHistory)
#include "test_run_history.moc"
