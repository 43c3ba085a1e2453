// TrainingDashboard end to end on the CPU with the synthetic dataset: a short
// run fills every chart (one loss/LR/throughput point per step, one point per
// epoch, the best epoch marked), buttons follow the run, pause/resume/stop act
// on the engine, an engine error (a missing dataset file) shows in the banner
// while the application and the project stay as they were, and the charts
// export to PNG and CSV.
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <qcustomplot.h>

#include "core/train/RunFolder.h"
#include "tests/support/TestDatabase.h"
#include "tests/support/TestProjects.h"
#include "ui/ChartPanel.h"
#include "ui/ExportDialog.h"
#include "ui/TrainingDashboard.h"
#include "ui/base/EngineWorker.h"
#include "ui/base/ProjectDocument.h"
#include "ui/base/RunHistory.h"

using namespace strata;
using namespace strata::ui;

namespace {

// 1024 synthetic samples (16 features, 4 classes), a quarter held out: 768 training
// samples, batch 32, so 24 steps per epoch.
Project syntheticProject(int epochs) {
    Project p = test::blobsMlpProject("dashboard-test");
    test::useBlobs(p, 1024, 4, {16});
    p.training.epochs = epochs;
    p.training.seed = TrainingSettings{}.seed;
    p.training.device = "cpu";
    return p;
}

QString screenshotDir() { return qEnvironmentVariable("STRATA_UI_SCREENSHOTS"); }

}  // namespace

class TestTrainingDashboard : public QObject {
    Q_OBJECT
    QTemporaryDir m_dataHome;

private slots:
    // Runs without a checkpoint folder keep their weights under the per-user data folder: a fresh one here.
    void initTestCase() { qputenv("XDG_DATA_HOME", m_dataHome.path().toLocal8Bit()); }
    // Issue 17: an unsaved project with no checkpoint folder trains, stops at the step limit mid-epoch and
    // keeps its weights in a run folder under the per-user data folder (here the history's); the history
    // records the folder, and the export dialog and Predict dock find the checkpoint by default. A run left
    // "running" by a workbench that died is marked interrupted at the next start.
    void runWithoutFolderKeepsWeights() {
        ProjectDocument doc;
        doc.newProject(syntheticProject(3));
        QVERIFY(doc.project().training.checkpointDir.empty());
        QTemporaryDir historyDir;
        RunHistory history(historyDir.filePath("runs.sqlite"));
        QVERIFY2(history.isOpen(), qPrintable(history.lastError()));
        QString error;
        QVERIFY(ExportDialog::projectCheckpoint(&doc, &error).isEmpty());
        QVERIFY2(error.contains("No run of this project has kept weights"), qPrintable(error));
        TrainingDashboard dash(&doc);
        dash.setRunHistory(&history);
        QSignalSpy finished(&dash, &TrainingDashboard::trainingFinished);
        dash.startTraining(10);
        QVERIFY(finished.wait(60000));
        QVERIFY2(!dash.errorVisible(), qPrintable(dash.errorText()));
        const QString folder = dash.runFolder();
        QVERIFY2(folder.startsWith(historyDir.filePath("runs/dashboard-test-")), qPrintable(folder));
        QVERIFY(QFile::exists(folder + "/latest.safetensors"));
        const QString checkpoint = ExportDialog::projectCheckpoint(&doc, &error);
        QVERIFY2(checkpoint.startsWith(folder + "/"), qPrintable(checkpoint + " " + error));
        QCOMPARE(history.runs().front().runFolder, folder);

        // The run ended; one whose process is gone is marked interrupted, one of this process is not.
        const qint64 dead = history.beginRun(doc.project(), {}, "cpu");
        const qint64 live = history.beginRun(doc.project(), {}, "cpu");
        QCOMPARE(test::execSql(history.path().toStdString(),
                               "UPDATE runs SET pid = 2147483647 WHERE id = " + std::to_string(dead)),
                 std::string());
        QCOMPARE(history.recover().size(), 1);
        QHash<qint64, QString> status;
        for (const RunHistory::RunSummary& r : history.runs()) status[r.id] = r.status;
        QCOMPARE(status.value(dead), QString("interrupted"));
        QCOMPARE(status.value(live), QString("running"));
        QCOMPARE(status.value(dash.runId()), QString("finished"));
    }

    // A saved project in a folder the user cannot write (an installed example) trains as it is: its run goes to
    // the per-user data folder (the history's), under a folder of its own, where export (the dialog, and
    // strata-train's latestRunFolder) finds it; nothing is written beside the project. A relative checkpoint
    // folder in it is refused before the run, naming the folder. Writability is injected: the tests run as root.
    void readOnlyProjectRunsInTheUserFolder() {
        QTemporaryDir dir, historyDir;
        const QString ro = dir.filePath("examples");
        QVERIFY(QDir().mkpath(ro));
        const QString file = ro + "/example.strata";
        writeProject(syntheticProject(3), file.toStdString());
        ProjectDocument doc;
        QString error;
        QVERIFY2(doc.load(file, &error), qPrintable(error));
        RunHistory history(historyDir.filePath("runs.sqlite"));
        QVERIFY2(history.isOpen(), qPrintable(history.lastError()));
        TrainingDashboard dash(&doc);
        dash.setRunHistory(&history);
        dash.setWritableCheck([&](const std::string& f) { return !f.starts_with(ro.toStdString()); });
        QSignalSpy finished(&dash, &TrainingDashboard::trainingFinished);
        dash.startTraining(10);
        const QString perUser = QString::fromStdString(
            perUserRunsFolder(doc.project(), file.toStdString(), historyDir.path().toStdString()));
        QVERIFY2(perUser.startsWith(historyDir.filePath("runs/dashboard-test-")), qPrintable(perUser));
        QVERIFY(finished.wait(60000));
        QVERIFY2(!dash.errorVisible(), qPrintable(dash.errorText()));
        const QString folder = dash.runFolder();
        QVERIFY2(folder.startsWith(perUser + "/dashboard-test-"), qPrintable(folder));
        QVERIFY(QFile::exists(folder + "/latest.safetensors"));
        QVERIFY(!QFileInfo::exists(ro + "/runs"));
        const QString checkpoint = ExportDialog::projectCheckpoint(&doc, &error);
        QVERIFY2(checkpoint.startsWith(folder + "/"), qPrintable(checkpoint + " " + error));
        QCOMPARE(
            QString::fromStdString(latestRunFolder(doc.project(), file.toStdString(), historyDir.path().toStdString())),
            folder);

        Project withFolder = doc.project();
        withFolder.training.checkpointDir = "ck";
        writeProject(withFolder, file.toStdString());
        QVERIFY2(doc.load(file, &error), qPrintable(error));
        QSignalSpy refused(&dash, &TrainingDashboard::startRefused);
        dash.startTraining(10);
        QCOMPARE(refused.size(), 1);
        QVERIFY2(dash.errorText().contains("cannot write checkpoints to " + ro + "/ck"), qPrintable(dash.errorText()));
        QVERIFY2(dash.errorText().contains("Checkpoint folder"), qPrintable(dash.errorText()));
        QVERIFY(!QFileInfo::exists(ro + "/ck"));
    }

    // Issue 17: a reopened project shows its last run's curves, read back from the run history.
    void reopenedProjectShowsLastRun() {
        QTemporaryDir dir;
        ProjectDocument doc;
        doc.newProject(syntheticProject(2));
        QString error;
        QVERIFY2(doc.save(dir.filePath("p.strata"), &error), qPrintable(error));
        RunHistory history(dir.filePath("runs.sqlite"));
        {
            TrainingDashboard dash(&doc);
            dash.setRunHistory(&history);
            QVERIFY(!dash.showLastRun());  // none yet
            QSignalSpy finished(&dash, &TrainingDashboard::trainingFinished);
            dash.startTraining(40);  // 24 steps an epoch: epoch 1 and 16 steps of epoch 2
            QVERIFY(finished.wait(60000));
            QVERIFY2(!dash.errorVisible(), qPrintable(dash.errorText()));
        }
        TrainingDashboard reopened(&doc);
        reopened.setRunHistory(&history);
        QCOMPARE(reopened.pointCount("train_loss"), 0);
        QVERIFY(reopened.showLastRun());
        QCOMPARE(reopened.pointCount("train_loss"), 40);
        QCOMPARE(reopened.pointCount("val_loss"), 1);
        QCOMPARE(reopened.chart("loss")->markerX(), 24.0);  // the best epoch, at its last step
        QVERIFY2(reopened.statusText().startsWith("Last run:"), qPrintable(reopened.statusText()));
        QCOMPARE(history.metricCount(history.lastRunOf(doc.projectId(), doc.filePath()), "step"), 40);  // once
        ProjectDocument other;
        other.newProject(syntheticProject(2));
        TrainingDashboard otherDash(&other);
        otherDash.setRunHistory(&history);
        QVERIFY(!otherDash.showLastRun());
    }

    void shortRunFillsCharts() {
        ProjectDocument doc;
        doc.newProject(syntheticProject(3));
        const Project before = doc.project();
        QTemporaryDir historyDir;
        RunHistory history(historyDir.filePath("runs.sqlite"));
        QVERIFY2(history.isOpen(), qPrintable(history.lastError()));
        TrainingDashboard dash(&doc);
        dash.setRunHistory(&history);
        dash.resize(1200, 800);
        dash.show();
        QCOMPARE(dash.state(), TrainingDashboard::State::Idle);
        QVERIFY(dash.startButton()->isEnabled());
        QVERIFY(!dash.pauseButton()->isEnabled());
        QVERIFY(!dash.stopButton()->isEnabled());
        QVERIFY(!dash.saveButton()->isEnabled());

        QSignalSpy finished(&dash, &TrainingDashboard::trainingFinished);
        dash.startTraining(50);
        QVERIFY(!dash.startButton()->isEnabled());
        QVERIFY(dash.stopButton()->isEnabled());
        QVERIFY(dash.pauseButton()->isEnabled());
        QVERIFY(finished.wait(60000));

        // 50 steps: epochs end after steps 24 and 48, the run stops at step 50 mid-epoch 3.
        QVERIFY2(!dash.errorVisible(), qPrintable(dash.errorText()));
        QCOMPARE(dash.pointCount("train_loss"), 50);
        QCOMPARE(dash.pointCount("train_acc_batch"), 50);
        QCOMPARE(dash.pointCount("lr"), 50);
        QCOMPARE(dash.pointCount("samples_per_s"), 50);
        QCOMPARE(dash.pointCount("val_loss"), 2);
        QCOMPARE(dash.pointCount("val_acc"), 2);
        QCOMPARE(dash.pointCount("train_acc_epoch"), 2);
        QCOMPARE(dash.pointCount("no_such_series"), -1);
        // Epoch points sit at the step that ended the epoch; the best one is marked.
        ChartPanel* loss = dash.chart("loss");
        QVERIFY(loss->markerVisible());
        QVERIFY(loss->markerX() == 24.0 || loss->markerX() == 48.0);
        QVERIFY(dash.chart("accuracy")->markerVisible());
        QVERIFY(dash.pointCount("util:cpu") >= 1);
        QVERIFY(dash.pointCount("mem:cpu") >= 1);

        QCOMPARE(dash.state(), TrainingDashboard::State::Idle);
        QVERIFY(dash.startButton()->isEnabled());
        QVERIFY(!dash.pauseButton()->isEnabled());
        QVERIFY(!dash.stopButton()->isEnabled());
        QVERIFY(!dash.saveButton()->isEnabled());
        QVERIFY(dash.statusText().startsWith("Stopped") || dash.statusText().startsWith("Finished"));
        QVERIFY(dash.elapsedText().startsWith("Elapsed"));
        QCOMPARE(doc.project(), before);

        if (!screenshotDir().isEmpty()) {
            QTest::qWait(100);  // the charts' queued replots
            dash.grab().save(screenshotDir() + "/dashboard.png");
        }

        // The run is in the history with every step and epoch and the project it ran.
        const QVector<RunHistory::RunSummary> runs = history.runs();
        QCOMPARE(runs.size(), 1);
        QCOMPARE(runs[0].id, dash.runId());
        QCOMPARE(runs[0].status, QString("finished"));
        QCOMPARE(runs[0].device, QString("cpu"));
        QCOMPARE(runs[0].epochsCompleted, 2);
        QCOMPARE(history.metricCount(runs[0].id, "step"), 50);
        QCOMPARE(history.metricCount(runs[0].id, "epoch"), 2);
        QCOMPARE(parseProject(history.projectJson(runs[0].id).toStdString()), before);

        // Export: one PNG and one CSV per chart; the loss CSV holds every point.
        QTemporaryDir dir;
        QVERIFY(dash.exportCharts(dir.path()));
        QVERIFY(QFile::exists(dir.filePath("loss.png")));
        QFile csv(dir.filePath("loss.csv"));
        QVERIFY(csv.open(QIODevice::ReadOnly));
        const QList<QByteArray> lines = csv.readAll().trimmed().split('\n');
        QCOMPARE(lines.first(), QByteArray("series,x,y"));
        int trainRows = 0, valRows = 0;
        for (const QByteArray& line : lines) {
            trainRows += line.startsWith("train_loss,") ? 1 : 0;
            valRows += line.startsWith("val_loss,") ? 1 : 0;
        }
        QCOMPARE(trainRows, 50);
        QCOMPARE(valRows, 2);
        QVERIFY(lines.at(1).startsWith("train_loss,1,"));

        // A second run starts from empty charts.
        dash.startTraining(10);
        QVERIFY(finished.wait(60000));
        QCOMPARE(dash.pointCount("train_loss"), 10);
        QCOMPARE(dash.pointCount("val_loss"), 0);
    }

    // Issue 17: the accuracy axis follows the data (0.90-0.95 is not drawn on 0..1), a drag stops that and
    // Reset view brings it back; a click on a legend entry hides its series (greyed entry, axes follow the
    // series shown) and a second click shows it again.
    void accuracyAxisFollowsDataAndLegendTogglesSeries() {
        ProjectDocument doc;
        doc.newProject(syntheticProject(3));
        TrainingDashboard dash(&doc);
        dash.resize(1600, 900);
        dash.show();
        QVERIFY(QTest::qWaitForWindowExposed(&dash));
        ChartPanel* acc = dash.chart("accuracy");
        acc->append("train_acc_epoch", {1, 2, 3}, {0.90, 0.93, 0.95});
        acc->append("val_acc", {1, 2, 3}, {0.40, 0.45, 0.50});
        acc->refresh();
        QCPAxis* y = acc->plot()->yAxis;
        QVERIFY2(y->range().lower > 0.3 && y->range().lower < 0.4 && y->range().upper < 1.0,
                 qPrintable(QStringLiteral("%1..%2").arg(y->range().lower).arg(y->range().upper)));

        QCustomPlot* plot = acc->plot();
        plot->replot();
        QCPAbstractLegendItem* valEntry = plot->legend->itemWithPlottable(plot->graph(2));
        QVERIFY(valEntry);
        QTest::mouseClick(plot, Qt::LeftButton, {}, valEntry->rect().center());
        QVERIFY(!acc->seriesVisible("val_acc"));
        QVERIFY(acc->seriesVisible("train_acc_epoch"));
        QVERIFY(acc->followsData());  // a legend click is not a drag
        // The axes now follow the epoch curve alone.
        QVERIFY2(y->range().lower > 0.85, qPrintable(QString::number(y->range().lower)));
        plot->replot();
        QTest::mouseClick(plot, Qt::LeftButton, {}, valEntry->rect().center());
        QVERIFY(acc->seriesVisible("val_acc"));
        QVERIFY2(y->range().lower < 0.4, qPrintable(QString::number(y->range().lower)));

        // A drag on the plot stops following; Reset view follows again.
        const QPoint inside = plot->axisRect()->rect().center() - QPoint(60, 0);
        QTest::mousePress(plot, Qt::LeftButton, {}, inside);
        QTest::mouseRelease(plot, Qt::LeftButton, {}, inside);
        QVERIFY(!acc->followsData());
        acc->append("val_acc", {4}, {0.05});
        acc->refresh();
        QVERIFY(y->range().lower > 0.05);
        acc->resetView();
        QVERIFY(acc->followsData());
        QVERIFY(y->range().lower < 0.05);
    }

    void engineErrorShowsBannerAndKeepsProject() {
        ProjectDocument doc;
        Project p = syntheticProject(1);
        p.dataset.kind = DatasetKind::Idx;
        p.dataset.trainImages = "/nonexistent/strata-missing-images.gz";
        p.dataset.trainLabels = "/nonexistent/strata-missing-labels.gz";
        doc.newProject(p);
        const Project before = doc.project();
        TrainingDashboard dash(&doc);
        QSignalSpy finished(&dash, &TrainingDashboard::trainingFinished);
        dash.startTraining(50);
        QVERIFY(finished.wait(30000));
        QVERIFY(dash.errorVisible());
        QVERIFY2(dash.errorText().contains("strata-missing-images"), qPrintable(dash.errorText()));
        QCOMPARE(dash.statusText(), QString("Failed"));
        QCOMPARE(dash.state(), TrainingDashboard::State::Idle);
        QVERIFY(dash.startButton()->isEnabled());
        QCOMPARE(dash.pointCount("train_loss"), 0);
        QCOMPARE(doc.project(), before);

        // The application is still up: fixing the data lets the next run train.
        doc.setDatasetSettings(syntheticProject(1).dataset);
        dash.startTraining(5);
        QVERIFY(finished.wait(60000));
        QVERIFY(!dash.errorVisible());
        QCOMPARE(dash.pointCount("train_loss"), 5);
    }

    void invalidGraphIsAnErrorNotACrash() {
        ProjectDocument doc;
        Project p = syntheticProject(1);
        // 16 features into a model expecting 10: compile or data checks must refuse it.
        p.graph.node(p.graph.nodeByName("input")->id)->params = Json{{"shape", {10}}};
        doc.newProject(p);
        TrainingDashboard dash(&doc);
        QSignalSpy finished(&dash, &TrainingDashboard::trainingFinished);
        dash.startTraining(5);
        QVERIFY(finished.wait(30000));
        QVERIFY(dash.errorVisible());
        QVERIFY(!dash.errorText().isEmpty());
        QCOMPARE(dash.state(), TrainingDashboard::State::Idle);
    }

    // On one device, and as a data-parallel run in the window (several GPUs ticked; here two CPU replicas,
    // "cpu,cpu", which the same path runs): rank 0's steps fill the charts, a label says what the all-reduce
    // cost (data parallel only), and pause and stop reach every replica.
    void pauseResumeStop_data() {
        QTest::addColumn<QString>("device");
        QTest::newRow("one device") << "cpu";
        QTest::newRow("two replicas") << "cpu,cpu";
    }
    void pauseResumeStop() {
        QFETCH(QString, device);
        ProjectDocument doc;
        Project p = syntheticProject(1000);
        p.training.device = device.toStdString();
        doc.newProject(p);
        TrainingDashboard dash(&doc);
        dash.setRefreshIntervalMs(50);
        dash.worker()->setTelemetryIntervalMs(50);
        QSignalSpy finished(&dash, &TrainingDashboard::trainingFinished);
        dash.startTraining();
        QTRY_VERIFY_WITH_TIMEOUT(dash.pointCount("train_loss") >= 20, 30000);
        QCOMPARE(dash.state(), TrainingDashboard::State::Running);
        QVERIFY(dash.saveButton()->isEnabled());
        if (device.contains(',')) {
            QVERIFY2(dash.commText().startsWith("2 replicas: all-reduce "), qPrintable(dash.commText()));
            QVERIFY(dash.commText().endsWith("% hidden"));
            if (!screenshotDir().isEmpty()) {
                dash.resize(1200, 800);
                dash.show();
                QTest::qWait(200);  // the charts' queued replots
                dash.grab().save(screenshotDir() + "/dashboard-replicas.png");
            }
        } else {
            QVERIFY2(dash.commText().isEmpty(), qPrintable(dash.commText()));
        }

        dash.pauseButton()->click();
        QCOMPARE(dash.state(), TrainingDashboard::State::Paused);
        QCOMPARE(dash.pauseButton()->text(), QString("Resume"));
        QVERIFY(dash.stopButton()->isEnabled());
        QTest::qWait(300);  // the step in flight lands
        const int pausedAt = dash.pointCount("train_loss");
        const double activeAtPause = dash.activeSeconds();
        QTest::qWait(500);
        QCOMPARE(dash.pointCount("train_loss"), pausedAt);
        // Issue 17: paused time is not counted as elapsed.
        QVERIFY2(dash.activeSeconds() - activeAtPause < 0.05,
                 qPrintable(QString("%1 -> %2").arg(activeAtPause).arg(dash.activeSeconds())));

        dash.pauseButton()->click();
        QCOMPARE(dash.pauseButton()->text(), QString("Pause"));
        QTRY_VERIFY_WITH_TIMEOUT(dash.pointCount("train_loss") > pausedAt + 10, 30000);
        QTRY_VERIFY_WITH_TIMEOUT(dash.pointCount("util:cpu") >= 2, 10000);
        QVERIFY(!dash.etaText().isEmpty());

        dash.stopButton()->click();
        QCOMPARE(dash.state(), TrainingDashboard::State::Stopping);
        QVERIFY(!dash.stopButton()->isEnabled());
        QVERIFY(finished.wait(30000));
        QCOMPARE(dash.state(), TrainingDashboard::State::Idle);
        QVERIFY2(dash.statusText().startsWith("Stopped"), qPrintable(dash.statusText()));
        QVERIFY(!dash.errorVisible());
        const int stoppedAt = dash.pointCount("train_loss");
        QTest::qWait(300);
        QCOMPARE(dash.pointCount("train_loss"), stoppedAt);
    }

    void stopWhilePaused() {
        ProjectDocument doc;
        doc.newProject(syntheticProject(1000));
        TrainingDashboard dash(&doc);
        QSignalSpy finished(&dash, &TrainingDashboard::trainingFinished);
        dash.startTraining();
        QTRY_VERIFY_WITH_TIMEOUT(dash.pointCount("train_loss") >= 5, 30000);
        dash.togglePause();
        QTest::qWait(100);
        dash.stopTraining();
        QVERIFY(finished.wait(30000));
        QCOMPARE(dash.state(), TrainingDashboard::State::Idle);
    }

    void destroyingDashboardStopsRun() {
        ProjectDocument doc;
        doc.newProject(syntheticProject(1000));
        auto* dash = new TrainingDashboard(&doc);
        dash->startTraining();
        QTRY_VERIFY_WITH_TIMEOUT(dash->pointCount("train_loss") >= 3, 30000);
        delete dash;  // must stop the engine and join its thread, not hang or crash
    }
};

QTEST_MAIN(TestTrainingDashboard)
#include "test_training_dashboard.moc"
