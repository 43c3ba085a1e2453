// Issue 34: runs belong to the project file. A MainWindow on a run history of its own, trained on synthetic
// blobs without checkpoint folders (every run keeps its weights in a run folder), checks that
//  - after training A, opening B offers none of A's runs anywhere: the export dialog and Predict dock say B has
//    none (and export writes nothing), Optimize has nothing to start from, the dashboard and the Runs view are
//    cleared, A's overlays gone; once B is trained, export writes B's weights;
//  - a project trained before its first save adopts its runs: a new window opening the saved file shows their
//    curves and Predict loads their weights;
//  - a moved or renamed file keeps its runs (by id), a file from before ids is matched by path until it is saved
//    and then by id, and Save As of a saved project is a copy that starts with no runs;
//  - Optimize starts from the latest run by default (another with the picker) and writes into its folder;
//  - closing the window or opening another project during a run asks (the QMessageBox driven here): Cancel
//    changes nothing, "Stop and keep weights" waits for the run and records it "stopped" with its epochs and
//    curve.
// Screenshots of the export dialog and Predict dock naming their run go to $STRATA_UI_SCREENSHOTS when set.
#include <QAbstractButton>
#include <QApplication>
#include <QCheckBox>
#include <QDir>
#include <QDockWidget>
#include <QFile>
#include <QMessageBox>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>
#include <functional>

#include <qcustomplot.h>

#include "core/export/ExportModel.h"
#include "core/infer/Compression.h"
#include "tests/support/TestDatabase.h"
#include "tests/support/TestProjects.h"
#include "ui/ChartPanel.h"
#include "ui/ExportDialog.h"
#include "ui/MainWindow.h"
#include "ui/OptimizePanel.h"
#include "ui/PredictPanel.h"
#include "ui/RunPicker.h"
#include "ui/RunsPanel.h"
#include "ui/TrainingDashboard.h"
#include "ui/base/ProjectDocument.h"
#include "ui/base/ProjectRuns.h"
#include "ui/base/RunHistory.h"

using namespace strata;
using namespace strata::ui;

namespace {

// A small MLP on blobs, no checkpoint folder: its runs keep their weights in run folders.
Project blobs(const std::string& name, int inputs, int classes, int epochs = 1) {
    Project p = test::blobsMlpProject(name, inputs, classes);
    test::useBlobs(p, 1200, classes, {inputs});
    p.training.epochs = epochs;
    p.training.device = "cpu";
    return p;
}

void attach(MainWindow& w, RunHistory& history) {
    w.setSavePrompt([](const QString&) { return MainWindow::SaveChoice::Discard; });
    w.setErrorReporter([](const QString&, const QString& text) { qWarning("reported: %s", qPrintable(text)); });
    w.dashboard()->setRunHistory(&history);
    w.runsPanel()->setDatabase(history.path());
}

// Trains the window's project for `steps` steps (0: all its epochs); false on an error.
bool train(MainWindow& w, qint64 steps) {
    QSignalSpy finished(w.dashboard(), &TrainingDashboard::trainingFinished);
    w.dashboard()->startTraining(steps);
    if (!finished.wait(120000)) return false;
    return !w.dashboard()->errorVisible();
}

QString status(const RunHistory& history, qint64 run) {
    for (const RunHistory::RunSummary& r : history.runs())
        if (r.id == run) return r.status;
    return {};
}

RunHistory::RunSummary summary(const RunHistory& history, qint64 run) {
    for (const RunHistory::RunSummary& r : history.runs())
        if (r.id == run) return r;
    return {};
}

// Answers the next "activeRunPrompt" message box with the button named `button` (by object name or text), as a
// user would click it; `seen` says whether one came (polled for 10 s).
void answerRunPrompt(const QString& button, bool* seen, int tries = 0) {
    if (tries == 0) *seen = false;
    QTimer::singleShot(tries == 0 ? 0 : 25, [button, seen, tries] {
        auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget());
        if (!box || box->objectName() != "activeRunPrompt") {
            if (tries < 400) answerRunPrompt(button, seen, tries + 1);
            return;
        }
        *seen = true;
        for (QAbstractButton* b : box->buttons())
            if (b->objectName() == button || b->text().remove('&') == button) {
                b->click();
                return;
            }
        QFAIL(qPrintable("no button " + button));
    });
}

// The run a picker has chosen; -1 when none.
qint64 chosenId(const RunPicker* picker) {
    const std::optional<ProjectRun> r = picker->chosen();
    return r ? r->id : -1;
}

// The number of points the run recorded of a kind.
int recorded(const RunHistory& history, qint64 run, const char* kind) { return history.metricCount(run, kind); }

QString shots() { return qEnvironmentVariable("STRATA_UI_SCREENSHOTS"); }

}  // namespace

class TestProjectRuns : public QObject {
    Q_OBJECT
    QTemporaryDir m_dataHome;

private slots:
    void initTestCase() {
        qputenv("XDG_DATA_HOME", m_dataHome.path().toLocal8Bit());
        QStandardPaths::setTestModeEnabled(true);
        QApplication::setOrganizationName(QStringLiteral("StrataTest"));
        QApplication::setApplicationName(QStringLiteral("test_project_runs"));
        QSettings().clear();
    }

    // The review's first finding: train A, open B, Ctrl+E exported A's weights under B's name, Predict loaded A
    // into B, the dashboard kept A's curves.
    void openingAnotherProjectShowsOnlyItsRuns() {
        QTemporaryDir dir;
        RunHistory history(dir.filePath("runs.sqlite"));
        QVERIFY2(history.isOpen(), qPrintable(history.lastError()));
        const QString a = dir.filePath("a/a.strata"), b = dir.filePath("b/b.strata");
        QVERIFY(QDir().mkpath(dir.filePath("a")) && QDir().mkpath(dir.filePath("b")));
        MainWindow w;
        attach(w, history);
        w.resize(1400, 900);
        w.show();
        w.newProject(blobs("Project B", 8, 3));
        QVERIFY(w.saveAs(b));
        w.newProject(blobs("Project A", 16, 4));
        QVERIFY(w.saveAs(a));
        QVERIFY(train(w, 20));
        const qint64 runA = w.dashboard()->runId();
        QVERIFY(runA > 0);
        QCOMPARE(summary(history, runA).projectId, w.document()->projectId());
        QCOMPARE(summary(history, runA).projectPath, QFileInfo(a).absoluteFilePath());
        w.showExportDialog();
        QCOMPARE(chosenId(w.exportDialog()->runPicker()), runA);
        w.exportDialog()->hide();
        // A's run overlaid in the dashboard from the Runs view.
        w.runsPanel()->selectRuns({runA});
        QVERIFY(!w.runsPanel()->overlaySelected().isEmpty());
        auto overlays = [&w] {
            int n = 0;
            for (const QString& chart : {QStringLiteral("loss"), QStringLiteral("accuracy")})
                for (const QString& s : w.dashboard()->chart(chart)->seriesNames()) n += s.startsWith("run") ? 1 : 0;
            return n;
        };
        QVERIFY(overlays() > 0);
        QVERIFY(w.dashboard()->pointCount("train_loss") > 0);

        QVERIFY(w.openFile(b));
        // Dashboard, overlays and Runs view: nothing of A.
        QCOMPARE(w.dashboard()->pointCount("train_loss"), 0);
        QCOMPARE(w.dashboard()->runId(), qint64(0));
        QVERIFY2(w.dashboard()->statusText().contains("no run of this project"),
                 qPrintable(w.dashboard()->statusText()));
        QCOMPARE(overlays(), 0);
        // Nor A's axes or devices: an empty chart's range, and no device series until B runs.
        QVERIFY2(w.dashboard()->chart("loss")->plot()->xAxis->range().upper <= 5.0,
                 qPrintable(QString::number(w.dashboard()->chart("loss")->plot()->xAxis->range().upper)));
        QVERIFY(w.dashboard()->chart("utilization")->seriesNames().isEmpty());
        QCOMPARE(w.runsPanel()->model()->rowCount(), 0);
        w.runsPanel()->allProjectsCheck()->setChecked(true);
        QCOMPARE(w.runsPanel()->model()->rowCount(), 1);
        w.runsPanel()->allProjectsCheck()->setChecked(false);
        // Export: no source, says why, writes nothing.
        w.showExportDialog();
        ExportDialog* dlg = w.exportDialog();
        QVERIFY(dlg->runPicker()->runs().isEmpty());
        QVERIFY2(dlg->sourceText().isEmpty(), qPrintable(dlg->sourceText()));
        QVERIFY2(dlg->sourceNoteText().contains("No run of this project has kept weights"),
                 qPrintable(dlg->sourceNoteText()));
        QVERIFY2(QFileInfo(dlg->outputPath()).fileName().startsWith("project-b"), qPrintable(dlg->outputPath()));
        dlg->setOutputPath(dir.filePath("b/out.onnx"));
        QSignalSpy exported(dlg, &ExportDialog::exportFinished);
        dlg->startExport();
        QVERIFY(exported.count() > 0 || exported.wait(60000));
        QCOMPARE(exported.takeFirst().at(0).toBool(), false);
        QVERIFY(!QFile::exists(dir.filePath("b/out.onnx")));
        dlg->hide();
        // Predict: nothing to load, and says so.
        PredictPanel* predict = w.predictPanel();
        QVERIFY(!predict->runPicker()->chosen());
        QSignalSpy loaded(predict, &PredictPanel::modelLoaded);
        predict->loadModel();
        QVERIFY(loaded.count() > 0 || loaded.wait(60000));
        QCOMPARE(loaded.takeFirst().at(0).toBool(), false);
        QVERIFY2(predict->errorText().contains("No run of this project has kept weights"),
                 qPrintable(predict->errorText()));
        QVERIFY(!predict->hasModel());
        // Optimize: nothing to start from.
        CompressionRequest request;
        QString why;
        QVERIFY(!w.optimizePanel()->buildRequest(&request, &why));
        QVERIFY2(why.contains("No run of this project has kept weights"), qPrintable(why));

        // B trained: B's run, and B's weights in the exported file.
        QVERIFY(train(w, 20));
        const qint64 runB = w.dashboard()->runId();
        QVERIFY(runB > runA);
        w.showExportDialog();
        QCOMPARE(chosenId(dlg->runPicker()), runB);
        QVERIFY2(dlg->sourceNoteText().contains(QStringLiteral("Run %1 of b.strata").arg(runB)),
                 qPrintable(dlg->sourceNoteText()));
        dlg->setFormat(ExportFormat::Onnx);
        dlg->startExport();
        QVERIFY(exported.count() > 0 || exported.wait(60000));
        QVERIFY2(exported.takeFirst().at(0).toBool(), qPrintable(dlg->errorText()));
        const ExportModel written = loadModelFile(dir.filePath("b/out.onnx").toStdString());
        QCOMPARE(QString::fromStdString(written.project.id), w.document()->projectId());
        QCOMPARE(written.project.name, std::string("Project B"));
        if (!shots().isEmpty()) dlg->grab().save(shots() + "/export-dialog-run.png");
        dlg->hide();
        predict->loadModel();
        QVERIFY(loaded.count() > 0 || loaded.wait(60000));
        QVERIFY2(loaded.takeFirst().at(0).toBool(), qPrintable(predict->errorText()));
        QVERIFY2(predict->modelRunText().startsWith(QStringLiteral("run %1,").arg(runB)),
                 qPrintable(predict->modelRunText()));
        QCOMPARE(predict->classCount(), 3);
        if (!shots().isEmpty()) {
            QDockWidget* dock = w.dockNamed("predictDock");
            dock->setFloating(true);
            dock->resize(1100, 420);
            dock->show();
            QTest::qWait(100);
            dock->grab().save(shots() + "/predict-run.png");
        }
    }

    // The review's second finding: New from Template, train, Save As, restart, reopen: no curves, and Predict
    // said no run had kept weights.
    void runsBeforeTheFirstSaveAreAdopted() {
        QTemporaryDir dir;
        RunHistory history(dir.filePath("runs.sqlite"));
        const QString path = dir.filePath("tt.strata");
        qint64 run = 0;
        {
            MainWindow w;
            attach(w, history);
            w.newProject(blobs("Template", 16, 4));
            QVERIFY(w.document()->filePath().isEmpty());
            QVERIFY(train(w, 20));
            run = w.dashboard()->runId();
            QCOMPARE(summary(history, run).projectPath, QString());
            QCOMPARE(summary(history, run).projectId, w.document()->projectId());
            QVERIFY(w.saveAs(path));
            QCOMPARE(summary(history, run).projectPath, QFileInfo(path).absoluteFilePath());
            QCOMPARE(w.dashboard()->pointCount("train_loss"), 20);  // still its run
        }
        MainWindow reopened;
        attach(reopened, history);
        QVERIFY(reopened.openFile(path));
        QCOMPARE(reopened.dashboard()->pointCount("train_loss"), 20);
        QCOMPARE(reopened.dashboard()->runId(), run);
        QVERIFY2(reopened.dashboard()->statusText().startsWith(QStringLiteral("Last run: run %1").arg(run)),
                 qPrintable(reopened.dashboard()->statusText()));
        PredictPanel* predict = reopened.predictPanel();
        QCOMPARE(chosenId(predict->runPicker()), run);
        QSignalSpy loaded(predict, &PredictPanel::modelLoaded);
        predict->loadModel();
        QVERIFY(loaded.count() > 0 || loaded.wait(60000));
        QVERIFY2(loaded.takeFirst().at(0).toBool(), qPrintable(predict->errorText()));
        QString error;
        QVERIFY2(!ExportDialog::projectCheckpoint(reopened.document(), &error).isEmpty(), qPrintable(error));
    }

    // A run belongs to the project by its id: a moved and renamed file keeps its runs. A file from before ids is
    // matched by path until its first save gives it an id (and its runs). Save As of a saved project is a copy:
    // a project of its own, with none of the original's runs.
    void runsFollowTheIdNotTheFile() {
        QTemporaryDir dir;
        RunHistory history(dir.filePath("runs.sqlite"));
        QVERIFY(QDir().mkpath(dir.filePath("first")) && QDir().mkpath(dir.filePath("moved")));
        const QString original = dir.filePath("first/p.strata"), moved = dir.filePath("moved/renamed.strata");
        MainWindow w;
        attach(w, history);
        w.newProject(blobs("Mover", 16, 4));
        QVERIFY(w.saveAs(original));
        QVERIFY(train(w, 20));
        const qint64 run = w.dashboard()->runId();
        w.newProject(blobs("Other", 16, 4));
        QVERIFY(QFile::rename(original, moved));
        QVERIFY(w.openFile(moved));
        QCOMPARE(projectRuns(*w.document()).size(), 1);
        QCOMPARE(projectRuns(*w.document()).front().id, run);
        QVERIFY(projectRuns(*w.document()).front().usable());
        QCOMPARE(w.dashboard()->runId(), run);

        // Save As of a saved project: a copy, with an id of its own and no runs; the original keeps its run.
        const QString copy = dir.filePath("moved/copy.strata");
        const QString id = w.document()->projectId();
        QVERIFY(w.saveAs(copy));
        QVERIFY(w.document()->projectId() != id);
        QVERIFY(projectRuns(*w.document()).isEmpty());
        QCOMPARE(w.dashboard()->pointCount("train_loss"), 0);
        QVERIFY(w.openFile(moved));
        QCOMPARE(w.document()->projectId(), id);
        QCOMPARE(projectRuns(*w.document()).size(), 1);

        // A file from before ids: its runs are its path's until a save gives it an id; then they follow the id.
        const QString legacy = dir.filePath("first/legacy.strata");
        {
            Project p = blobs("Legacy", 16, 4);
            QVERIFY(p.id.empty());
            writeProject(p, legacy.toStdString());
        }
        QVERIFY(w.openFile(legacy));
        QVERIFY(w.document()->projectId().isEmpty());
        QVERIFY(train(w, 10));
        const qint64 legacyRun = w.dashboard()->runId();
        QCOMPARE(summary(history, legacyRun).projectId, QString());
        QCOMPARE(projectRuns(*w.document()).size(), 1);
        QVERIFY(w.save());
        QVERIFY(!w.document()->projectId().isEmpty());
        QCOMPARE(summary(history, legacyRun).projectId, w.document()->projectId());
        QCOMPARE(QString::fromStdString(readProject(legacy.toStdString()).id), w.document()->projectId());
        w.newProject(blobs("Other", 16, 4));
        const QString legacyMoved = dir.filePath("moved/legacy-renamed.strata");
        QVERIFY(QFile::rename(legacy, legacyMoved));
        QVERIFY(w.openFile(legacyMoved));
        QCOMPARE(projectRuns(*w.document()).size(), 1);
        QCOMPARE(projectRuns(*w.document()).front().id, legacyRun);
    }

    // The review's third finding: Optimize failed by default ("no output folder", or "No checkpoint yet" with a
    // checkpoint folder set after training). It starts from the latest run and writes into its folder.
    void optimizeStartsFromTheLatestRun() {
        QTemporaryDir dir;
        RunHistory history(dir.filePath("runs.sqlite"));
        MainWindow w;
        attach(w, history);
        w.newProject(blobs("Optimized", 16, 4));
        QVERIFY(w.saveAs(dir.filePath("opt.strata")));
        QVERIFY(train(w, 20));
        const qint64 first = w.dashboard()->runId();
        QVERIFY(train(w, 0));
        const qint64 latest = w.dashboard()->runId();
        const QString latestFolder = w.dashboard()->runFolder();
        // A checkpoint folder named now holds nothing yet: the runs' weights are still offered, the latest first.
        TrainingSettings ts = w.document()->project().training;
        ts.checkpointDir = dir.filePath("named-later").toStdString();
        w.document()->setTrainingSettings(ts);
        OptimizePanel* panel = w.optimizePanel();
        panel->setThreads(1);
        CompressionRequest r;
        QString error;
        QVERIFY2(panel->buildRequest(&r, &error), qPrintable(error));
        QCOMPARE(chosenId(panel->runPicker()), latest);
        QVERIFY2(QString::fromStdString(r.checkpoint).startsWith(latestFolder + "/"), r.checkpoint.c_str());
        QCOMPARE(QString::fromStdString(r.outputDir), latestFolder + "/optimized");
        QVERIFY2(panel->statusText().contains(QStringLiteral("run %1").arg(latest)), qPrintable(panel->statusText()));
        // Another run by the picker.
        QVERIFY(panel->runPicker()->choose(first));
        QVERIFY2(panel->buildRequest(&r, &error), qPrintable(error));
        QVERIFY(!QString::fromStdString(r.checkpoint).startsWith(latestFolder + "/"));
        QVERIFY(QString::fromStdString(r.outputDir).endsWith("/optimized"));
        // The study (int8 only, quick) writes into the latest run's folder.
        QVERIFY(panel->runPicker()->choose(latest));
        panel->sparseCheck()->setChecked(false);
        panel->structuredCheck()->setChecked(false);
        QSignalSpy done(panel, &OptimizePanel::optimizeFinished);
        panel->optimize();
        QVERIFY(done.count() > 0 || done.wait(120000));
        QVERIFY2(done.takeFirst().at(0).toBool(), qPrintable(panel->errorText()));
        QVERIFY(QDir(latestFolder + "/optimized").exists());
        QVERIFY(!QDir(latestFolder + "/optimized").entryList(QDir::AllEntries | QDir::NoDotAndDotDot).isEmpty());
    }

    // The review's fourth finding: closing the window mid-run neither asked nor recorded the run ("running",
    // then "interrupted" with 0 epochs although 2 had finished).
    void closingDuringARunAsksAndRecordsIt() {
        QTemporaryDir dir;
        RunHistory history(dir.filePath("runs.sqlite"));
        auto w = std::make_unique<MainWindow>();
        attach(*w, history);
        Project p = blobs("Long run", 16, 4, 5000);
        w->newProject(p);
        w->show();
        QSignalSpy finished(w->dashboard(), &TrainingDashboard::trainingFinished);
        w->dashboard()->startTraining();
        QTRY_VERIFY_WITH_TIMEOUT(w->dashboard()->runId() > 0, 60000);  // recorded from its first step
        const qint64 run = w->dashboard()->runId();
        QTRY_VERIFY_WITH_TIMEOUT(recorded(history, run, "epoch") >= 2, 60000);

        // Cancel: the window stays, the run goes on.
        bool asked = false;
        answerRunPrompt("Cancel", &asked);
        QVERIFY(!w->close());
        QVERIFY(asked);
        QVERIFY(w->isVisible());
        QVERIFY(w->dashboard()->isRunning());
        QCOMPARE(status(history, run), QString("running"));

        // Stop and keep weights: the window closes once the run has ended and is recorded.
        answerRunPrompt("stopRunButton", &asked);
        QVERIFY(w->close());
        QVERIFY(asked);
        QCOMPARE(finished.count(), 1);
        const RunHistory::RunSummary s = summary(history, run);
        QCOMPARE(s.status, QString("stopped"));
        QVERIFY(s.epochsCompleted >= 2);
        QCOMPARE(s.epochsCompleted, recorded(history, run, "epoch"));
        QVERIFY(recorded(history, run, "step") > 0);
        QVERIFY(QFile::exists(s.runFolder + "/latest.safetensors"));
        w.reset();
        QCOMPARE(status(history, run), QString("stopped"));
    }

    // Opening another project during a run asks the same; Cancel keeps the project, Stop records the run.
    void openingAnotherProjectDuringARunAsks() {
        QTemporaryDir dir;
        RunHistory history(dir.filePath("runs.sqlite"));
        MainWindow w;
        attach(w, history);
        w.newProject(blobs("Other", 8, 3));
        const QString other = dir.filePath("other.strata");
        QVERIFY(w.saveAs(other));
        w.newProject(blobs("Long run", 16, 4, 5000));
        w.dashboard()->startTraining();
        QTRY_VERIFY_WITH_TIMEOUT(w.dashboard()->runId() > 0, 60000);  // recorded from its first step
        const qint64 run = w.dashboard()->runId();
        QTRY_VERIFY_WITH_TIMEOUT(recorded(history, run, "epoch") >= 1, 60000);
        bool asked = false;
        answerRunPrompt("Cancel", &asked);
        QVERIFY(!w.openFile(other));
        QVERIFY(asked);
        QVERIFY(w.document()->filePath().isEmpty());
        QVERIFY(w.dashboard()->isRunning());
        answerRunPrompt("stopRunButton", &asked);
        QVERIFY(w.openFile(other));
        QVERIFY(asked);
        QCOMPARE(w.document()->filePath(), QFileInfo(other).absoluteFilePath());
        QCOMPARE(status(history, run), QString("stopped"));
        QVERIFY(summary(history, run).epochsCompleted >= 1);
        QCOMPARE(w.dashboard()->pointCount("train_loss"), 0);  // the other project's dashboard
    }

    // A workbench that died mid-run: its run is marked interrupted with the epochs it recorded, not 0.
    void interruptedRunKeepsItsEpochs() {
        QTemporaryDir dir;
        RunHistory history(dir.filePath("runs.sqlite"));
        const Project p = blobs("Crashed", 16, 4);
        const qint64 run = history.beginRun(p, {}, "cpu");
        EpochEvent e;
        for (int epoch = 1; epoch <= 3; ++epoch) {
            e.epoch = epoch;
            history.addEpoch(run, e);
        }
        QCOMPARE(test::execSql(history.path().toStdString(),
                               "UPDATE runs SET pid = 2147483647 WHERE id = " + std::to_string(run)),
                 std::string());
        QCOMPARE(history.recover().size(), 1);
        QCOMPARE(summary(history, run).status, QString("interrupted"));
        QCOMPARE(summary(history, run).epochsCompleted, 3);
    }
};

QTEST_MAIN(TestProjectRuns)
#include "test_project_runs.moc"
