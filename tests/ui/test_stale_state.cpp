// No stale state (issue 34): a banner, a status or a preview goes when what it was about does. "A training run
// is already active" after the run ended, "Tick a device" after a device was ticked again, the out-of-memory
// refusal after New from Template, "no sweep definition" on a project that has one, the previous project's
// dataset preview, "Assuming 100 steps per epoch" with a preview loaded; and a refused Start shows where the
// user is looking (the dashboard brought to the front, the status bar).
#include <QApplication>
#include <QDockWidget>
#include <QFile>
#include <QSettings>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QTest>

#include "tests/support/TestProjects.h"
#include "ui/DatasetPanel.h"
#include "ui/DevicePicker.h"
#include "ui/MainWindow.h"
#include "ui/PropertyPanel.h"
#include "ui/SweepPanel.h"
#include "ui/TrainingDashboard.h"
#include "ui/TrainingSettingsPanel.h"
#include "ui/base/ProjectDocument.h"
#include "ui/base/RunHistory.h"
#include "ui/base/Templates.h"

using namespace strata;
using namespace strata::ui;

namespace {

// A table of `rows` rows: 4 numeric features and a label in 3 classes.
QString writeTable(const QTemporaryDir& dir, int rows) {
    const QString path = dir.filePath(QStringLiteral("table.csv"));
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly)) return {};
    f.write("a,b,c,d,label\n");
    for (int i = 0; i < rows; ++i)
        f.write(QStringLiteral("%1,%2,%3,%4,%5\n").arg(i % 7).arg(i % 5).arg(i % 3).arg(i % 2).arg(i % 3).toUtf8());
    return path;
}

}  // namespace

class TestStaleState : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        QApplication::setOrganizationName(QStringLiteral("StrataTest"));
        QApplication::setApplicationName(QStringLiteral("test_stale_state"));
        QSettings().clear();
    }

    // Start during a run is refused with a banner; the banner goes when the run ends.
    void runActiveBannerGoesWithTheRun() {
        ProjectDocument doc;
        Project p = test::blobsMlpProject("active");
        p.training.epochs = 50;
        doc.newProject(p);
        TrainingDashboard dash(&doc);
        QSignalSpy finished(&dash, &TrainingDashboard::trainingFinished);
        QSignalSpy refused(&dash, &TrainingDashboard::startRefused);
        dash.startTraining();
        dash.startTraining();
        QVERIFY(dash.errorVisible() && dash.errorText().contains(QStringLiteral("already active")));
        QCOMPARE(refused.count(), 1);
        dash.stopTraining();
        QVERIFY(finished.wait(60000));
        QVERIFY2(!dash.errorVisible(), qPrintable(dash.errorText()));
    }

    // Start with no device ticked says "Tick a device"; ticking one takes the banner away.
    void tickDeviceBannerGoesWhenTicked() {
        MainWindow w;
        w.newProject(test::blobsMlpProject("devices"));
        auto* picker = w.findChild<DevicePicker*>();
        picker->setSelectedDevices({});
        w.dashboard()->startTraining();
        QVERIFY(w.dashboard()->errorVisible() && w.dashboard()->errorText().contains(QStringLiteral("Tick a device")));
        picker->setSelectedDevices({QStringLiteral("cpu")});
        QVERIFY2(!w.dashboard()->errorVisible(), qPrintable(w.dashboard()->errorText()));
        QVERIFY(!w.dashboard()->isRunning());  // ticking only clears the refusal; Start is still the user's
    }

    // A run refused for memory (a model far larger than this machine) leaves its banner; New from Template (and
    // opening any other project) starts clean. Refused before its first step, the run is not listed in the run
    // history as a failed run; one that trains is.
    void memoryRefusalGoesWithNewProject() {
        QTemporaryDir dir;
        RunHistory history(dir.filePath(QStringLiteral("runs.sqlite")));
        QVERIFY(history.isOpen());
        MainWindow w;
        w.dashboard()->setRunHistory(&history);
        Project p = test::blobsMlpProject("huge", 65536);
        test::useBlobs(p, 64, 4, {65536});
        p.graph.setParams(p.graph.nodeByName("dense1")->id, {{"units", 1 << 20}});
        w.newProject(p);
        QSignalSpy finished(w.dashboard(), &TrainingDashboard::trainingFinished);
        w.dashboard()->startTraining();
        QVERIFY(finished.wait(60000));
        QVERIFY2(w.dashboard()->errorVisible() && w.dashboard()->errorText().contains(QStringLiteral("does not fit")),
                 qPrintable(w.dashboard()->errorText()));
        QCOMPARE(w.dashboard()->runId(), qint64(0));
        QCOMPARE(history.runs().size(), 0);
        QVERIFY(w.newFromTemplate(QStringLiteral("mlp")));
        QVERIFY2(!w.dashboard()->errorVisible(), qPrintable(w.dashboard()->errorText()));

        w.newProject(test::blobsMlpProject("trains"));
        w.dashboard()->startTraining(3);
        QVERIFY(finished.wait(60000));
        QVERIFY(w.dashboard()->runId() > 0);
        QCOMPARE(history.runs().size(), 1);
        QCOMPARE(history.runs().front().status, QStringLiteral("finished"));
    }

    // The property panel's memory estimate: a batch refused in the last project's estimate does not stay
    // refused (with "unknown until the batch size is valid") after New from Template.
    void refusedEstimateBatchGoesWithNewProject() {
        MainWindow w;
        w.newProject(test::blobsMlpProject("estimate"));
        QSpinBox* batch = w.properties()->batchSizeBox();
        batch->setValue(0);
        QVERIFY(w.properties()->memoryText().contains(QStringLiteral("unknown")));
        QVERIFY(w.newFromTemplate(QStringLiteral("mlp")));
        QCOMPARE(batch->value(), mlpTemplate().training.batchSize);
        QVERIFY2(!w.properties()->memoryText().contains(QStringLiteral("unknown")),
                 qPrintable(w.properties()->memoryText()));
    }

    // "no sweep definition" said of the last project stays off a project that has one.
    void sweepStatusFollowsTheProject() {
        QTemporaryDir dir;
        Project none = test::blobsMlpProject("no-sweep");
        Project with = test::blobsMlpProject("with-sweep");
        with.sweep = Json::parse(R"({"parameters": [{"setting": "training.batch_size", "values": [16, 32, 64]}]})");
        writeProject(none, dir.filePath("none.strata").toStdString());
        writeProject(with, dir.filePath("with.strata").toStdString());
        ProjectDocument doc;
        SweepPanel panel(&doc);
        QVERIFY(doc.load(dir.filePath("none.strata"), nullptr));
        QVERIFY(!panel.start());
        QVERIFY2(panel.statusText().contains(QStringLiteral("no sweep")), qPrintable(panel.statusText()));
        QVERIFY(doc.load(dir.filePath("with.strata"), nullptr));
        QVERIFY2(!panel.statusText().contains(QStringLiteral("no sweep")) &&
                     panel.statusText().contains(QStringLiteral("3 trial")),
                 qPrintable(panel.statusText()));
    }

    // The previous project's preview is not shown as the new project's, neither when loaded nor when it was
    // still loading as the project changed.
    void datasetPreviewFollowsTheProject() {
        ProjectDocument doc;
        Project a = test::blobsMlpProject("a");
        test::useBlobs(a, 400, 4, {16});
        doc.newProject(a);
        DatasetPanel panel(&doc);
        panel.resize(900, 500);
        panel.show();
        QSignalSpy ready(&panel, &DatasetPanel::previewReady);
        panel.loadPreview();
        QVERIFY(ready.wait(30000));
        QCOMPARE(panel.preview().classNames.size(), 4);

        Project b = test::blobsMlpProject("b", 8, 3);
        test::useBlobs(b, 300, 3, {8});
        doc.newProject(b);
        QCOMPARE(panel.preview().trainCount, qint64(0));
        QCOMPARE(panel.previewStatusText(), QString());
        // B's own preview loads by itself, as the panel is shown.
        QTRY_COMPARE_WITH_TIMEOUT(panel.preview().classNames.size(), 3, 30000);

        // A preview of A still loading when B opens is dropped: B's follows.
        doc.newProject(a);
        QTRY_VERIFY_WITH_TIMEOUT(!panel.previewRunning(), 30000);
        ready.clear();
        panel.loadPreview();
        doc.newProject(b);
        QTRY_COMPARE_WITH_TIMEOUT(panel.preview().classNames.size(), 3, 30000);
        QTest::qWait(600);  // the dropped one had its chance to show
        QCOMPARE(panel.preview().classNames.size(), 3);
    }

    // With a preview loaded the learning-rate plot counts the real steps per epoch, not "Assuming 100"; a
    // changed limit makes the count stale until the next preview gives the new one.
    void stepsPerEpochFromThePreview() {
        QTemporaryDir dir;
        MainWindow w;
        Project p = test::blobsMlpProject("table", 4, 3);
        p.dataset = DatasetSettings{};
        p.dataset.kind = DatasetKind::Csv;
        p.dataset.trainPath = writeTable(dir, 200).toStdString();
        p.dataset.validationSplit = 0.25;
        p.training.batchSize = 32;
        w.newProject(p);
        w.resize(1280, 720);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        auto* dataset = w.findChild<DatasetPanel*>();
        auto* training = w.findChild<TrainingSettingsPanel*>();
        QVERIFY(training->previewNote().contains(QStringLiteral("Assuming")));
        QSignalSpy ready(dataset, &DatasetPanel::previewReady);
        w.dockNamed(QStringLiteral("datasetDock"))->raise();
        QVERIFY(ready.wait(30000));
        QCOMPARE(dataset->previewTrainCount(), qint64(150));
        QCOMPARE(training->previewStepsPerEpoch(), qint64(5));  // 150 / 32, rounded up
        QVERIFY2(!training->previewNote().contains(QStringLiteral("Assuming")), qPrintable(training->previewNote()));
        DatasetSettings limited = w.document()->project().dataset;
        limited.trainLimit = 64;
        w.document()->setDatasetSettings(limited);
        QVERIFY(training->previewNote().contains(QStringLiteral("Assuming")));  // 150 no longer holds
        QVERIFY(ready.wait(30000));
        QCOMPARE(training->previewStepsPerEpoch(), qint64(2));
    }

    // F5 refused (no device ticked) while the Dataset tab is in front: the dashboard with its banner comes to
    // the front and the status bar says why.
    void refusedStartShownWhereTheUserLooks() {
        MainWindow w;
        w.newProject(test::blobsMlpProject("look"));
        w.resize(1280, 720);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QApplication::setActiveWindow(&w);
        w.dockNamed(QStringLiteral("datasetDock"))->raise();
        QTest::qWait(30);
        QVERIFY(w.dashboard()->visibleRegion().isEmpty());
        w.findChild<DevicePicker*>()->setSelectedDevices({});
        QTest::keyClick(&w, Qt::Key_F5);
        QTest::qWait(30);
        QVERIFY(w.dashboard()->errorVisible());
        QVERIFY2(!w.dashboard()->visibleRegion().isEmpty(), "the dashboard stayed behind the Dataset tab");
        QVERIFY2(w.statusBar()->currentMessage().contains(QStringLiteral("Tick a device")),
                 qPrintable(w.statusBar()->currentMessage()));
    }
};

QTEST_MAIN(TestStaleState)
#include "test_stale_state.moc"
