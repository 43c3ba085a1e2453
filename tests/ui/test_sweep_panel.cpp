// The Sweep dock (ui/SweepPanel): runs the saved project's sweep on a worker thread into the run history,
// lists the trials sorted by the metric, and plots the chosen parameter against it (a log axis for the
// learning rate's range, evenly spaced choices for the optimizer). STRATA_UI_SCREENSHOTS=<dir> saves
// sweep-panel.png.
#include <QComboBox>
#include <QElapsedTimer>
#include <QFile>
#include <QLabel>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>
#include <QUndoStack>

#include "core/history/RunStore.h"
#include "qcustomplot.h"
#include "tests/support/TestProjects.h"
#include "ui/FieldError.h"
#include "ui/SweepEditor.h"
#include "ui/SweepPanel.h"
#include "ui/base/ProjectDocument.h"

using namespace strata;
using namespace strata::ui;

class TestSweepPanel : public QObject {
    Q_OBJECT
private slots:
    void runsListsAndPlots() {
        QTemporaryDir dir;
        Project p = test::blobsMlpProject("sweep-panel");
        p.training.epochs = 2;
        p.sweep = Json::parse(R"({"parameters": [
            {"setting": "training.learning_rate", "min": 0.001, "max": 0.3, "scale": "log", "count": 4},
            {"setting": "training.optimizer", "values": ["sgd", "adam"]}]})");
        const QString path = dir.filePath("sweep.strata");
        writeProject(p, path.toStdString());
        ProjectDocument doc;
        QVERIFY(doc.load(path, nullptr));
        SweepPanel panel(&doc);
        panel.setDatabase(dir.filePath("runs.sqlite"));
        QVERIFY(!panel.loadResults());  // nothing run yet
        QSignalSpy finished(&panel, &SweepPanel::sweepFinished);
        panel.parallelBox()->setValue(2);  // two trials at once, each with half the cores
        QVERIFY(panel.start());
        QVERIFY(!panel.start());  // one at a time
        QVERIFY(finished.wait(120000));

        QCOMPARE(panel.table()->rowCount(), 8);
        // Sorted by validation accuracy, best first.
        double last = 2;
        for (int r = 0; r < 8; ++r) {
            const double v = panel.table()->item(r, 3)->text().toDouble();
            QVERIFY(v <= last);
            last = v;
        }
        QCOMPARE(panel.parameterBox()->count(), 2);
        panel.parameterBox()->setCurrentText("training.learning_rate");
        QCOMPARE(panel.plottedPoints(), 8);
        QCOMPARE(panel.plot()->xAxis->scaleType(), QCPAxis::stLogarithmic);
        panel.parameterBox()->setCurrentText("training.optimizer");
        QCOMPARE(panel.plottedPoints(), 8);
        QCOMPARE(panel.plot()->xAxis->scaleType(), QCPAxis::stLinear);
        history::RunStore store(dir.filePath("runs.sqlite").toStdString());
        QCOMPARE(store.runs().size(), size_t(8));
        const int threads = std::max(1, QThread::idealThreadCount() / 2);
        for (const history::RunRecord& r : store.runs())
            QCOMPARE(Json::parse(store.projectJson(r.id))["training"]["threads"].get<int>(), threads);

        if (const QString shots = qEnvironmentVariable("STRATA_UI_SCREENSHOTS"); !shots.isEmpty()) {
            panel.parameterBox()->setCurrentText("training.learning_rate");
            panel.resize(1200, 420);
            panel.show();
            QTest::qWait(100);
            panel.grab().save(shots + "/sweep-panel.png");
        }
    }

    // Parallel 0 or more trials than threads: kept as typed, refused with the reason under the field, and
    // Run sweep does not start (issue 17: the spin box used to clamp it silently).
    void parallelOutOfRangeIsRefused() {
        QTemporaryDir dir;
        Project p = test::blobsMlpProject("sweep-parallel");
        p.sweep = Json::parse(R"({"parameters": [{"setting": "training.optimizer", "values": ["sgd", "adam"]}]})");
        const QString path = dir.filePath("sweep.strata");
        writeProject(p, path.toStdString());
        ProjectDocument doc;
        QVERIFY(doc.load(path, nullptr));
        SweepPanel panel(&doc);
        panel.setDatabase(dir.filePath("runs.sqlite"));
        panel.show();
        auto* line = panel.findChild<QLabel*>("error_sweepParallel");
        QVERIFY(line && line->isHidden());
        const int max = SweepPanel::maxParallel();
        for (const int bad : {0, -3, max + 1}) {
            panel.parallelBox()->setValue(bad);
            QCOMPARE(panel.parallelBox()->value(), bad);
            QCOMPARE(fieldError(panel.parallelBox()),
                     QStringLiteral("%1 is not applied: must be 1 to %2 (this machine's threads).").arg(bad).arg(max));
            QVERIFY(line->isVisible());
            QVERIFY(!panel.start());
            QVERIFY2(panel.statusText().contains("Parallel"), qPrintable(panel.statusText()));
        }
        panel.parallelBox()->setValue(max);
        QVERIFY(fieldError(panel.parallelBox()).isEmpty());
        QVERIFY(line->isHidden());
        QVERIFY(!QFile::exists(panel.statePath()));  // nothing was started
    }

    void stopStopsRunningTrials() {
        // Trials that would train for many seconds: Stop must end the running ones, not wait for them.
        QTemporaryDir dir;
        Project p = test::blobsMlpProject("sweep-stop");
        test::useBlobs(p, 24000, 4, {16});
        p.training.epochs = 1000;
        p.sweep = Json::parse(R"({"parameters": [{"setting": "training.learning_rate",
                                   "values": [0.01, 0.02, 0.05, 0.1]}]})");
        const QString path = dir.filePath("stop.strata");
        writeProject(p, path.toStdString());
        ProjectDocument doc;
        QVERIFY(doc.load(path, nullptr));
        SweepPanel panel(&doc);
        panel.setDatabase(dir.filePath("runs.sqlite"));
        panel.parallelBox()->setValue(2);
        QSignalSpy finished(&panel, &SweepPanel::sweepFinished);
        QVERIFY(panel.start());
        QTest::qWait(700);  // both trials set up and training
        QElapsedTimer stopping;
        stopping.start();
        panel.stop();
        QVERIFY(finished.wait(60000));
        QVERIFY2(stopping.elapsed() < 5000, qPrintable(QString("stopping took %1 ms").arg(stopping.elapsed())));
        QVERIFY(!QFile::exists(panel.statePath()));  // no trial counts as done: a later start redoes them
        history::RunStore store(dir.filePath("runs.sqlite").toStdString());
        QVERIFY(!store.runs().empty() && store.runs().size() <= 2);  // those that were running; no further one
        for (const history::RunRecord& r : store.runs()) QVERIFY2(r.status != "finished", r.status.c_str());
    }

    // Issue 34: a sweep defined in the workbench. The editor writes the definition to the project (one undoable
    // edit), a tiny sweep runs from it, and "Apply best trial" gives the project the best trial's values
    // (undoable too). STRATA_UI_SCREENSHOTS=<dir> saves sweep-editor.png.
    void defineRunApplyBest() {
        QTemporaryDir dir;
        Project p = test::blobsMlpProject("sweep-editor");
        test::useBlobs(p, 400, 4, {16});
        p.training.learningRate = 0.0001;  // far from the best of the sweep's values
        const QString path = dir.filePath("edit.strata");
        writeProject(p, path.toStdString());
        ProjectDocument doc;
        QVERIFY(doc.load(path, nullptr));
        SweepPanel panel(&doc);
        panel.setDatabase(dir.filePath("runs.sqlite"));
        QVERIFY(!panel.applyBestButton()->isEnabled());

        SweepEditor* editor = panel.editSweep();
        QVERIFY(editor && editor->isVisible());
        QVERIFY(editor->settingChoices().contains("training.learning_rate"));
        QVERIFY(editor->settingChoices().contains("graph.dense1.units"));  // layer parameters too
        editor->setRows(
            {{"training.learning_rate", "0.001, 0.2"}, {"graph.dense1.units", QString(), 8, 16, 2, false, true}});
        editor->setMetric("val_loss");
        QVERIFY2(editor->summaryText().startsWith("4 trial"), qPrintable(editor->summaryText()));
        QVERIFY(editor->okButton()->isEnabled());
        if (const QString shots = qEnvironmentVariable("STRATA_UI_SCREENSHOTS"); !shots.isEmpty()) {
            editor->resize(760, 380);
            QTest::qWait(50);
            editor->grab().save(shots + "/sweep-editor.png");
        }
        editor->accept();
        const Json expected = Json::parse(R"({"method": "grid", "metric": "val_loss", "parameters": [
            {"setting": "training.learning_rate", "values": [0.001, 0.2]},
            {"setting": "graph.dense1.units", "min": 8.0, "max": 16.0, "count": 2, "integer": true}]})");
        QCOMPARE(doc.project().sweep.dump(), expected.dump());
        QVERIFY2(panel.statusText().contains("4 trial"), qPrintable(panel.statusText()));
        doc.undoStack()->undo();
        QVERIFY(doc.project().sweep.is_null());
        doc.undoStack()->redo();
        QCOMPARE(doc.project().sweep.dump(), expected.dump());
        QVERIFY(doc.save(path, nullptr));  // the sweep's state goes beside the saved file

        QSignalSpy finished(&panel, &SweepPanel::sweepFinished);
        QVERIFY(panel.start());
        QVERIFY(finished.wait(120000));
        QCOMPARE(panel.table()->rowCount(), 4);
        QVERIFY(panel.applyBestButton()->isEnabled());
        // The best row is the first; its values become the project's.
        auto column = [&](const QString& header) {
            for (int c = 0; c < panel.table()->columnCount(); ++c)
                if (panel.table()->horizontalHeaderItem(c)->text() == header) return c;
            return -1;
        };
        const double bestLr = panel.table()->item(0, column("training.learning_rate"))->text().toDouble();
        const int bestUnits = panel.table()->item(0, column("graph.dense1.units"))->text().toInt();
        QVERIFY(panel.applyBestTrial());
        QCOMPARE(doc.project().training.learningRate, bestLr);
        QCOMPARE(doc.project().graph.nodeByName("dense1")->params.at("units").get<int>(), bestUnits);
        QVERIFY(bestUnits == 8 || bestUnits == 16);
        doc.undoStack()->undo();  // one edit: both values back
        QCOMPARE(doc.project().training.learningRate, 0.0001);
        QCOMPARE(doc.project().graph.nodeByName("dense1")->params.at("units").get<int>(), 32);
    }

    // A definition that cannot run is refused in the editor with the JSON path and why; OK stays off.
    void editorRefusesBadDefinitions() {
        ProjectDocument doc;
        doc.newProject(test::blobsMlpProject("sweep-bad"));
        SweepEditor editor(doc.project());
        QString error;
        editor.setRows({{"training.learning_rate", QString(), 0, 0.1, 3, true, false}});
        QVERIFY(editor.definition(&error).is_null());
        QVERIFY2(error.contains("/sweep/parameters/0/min") && error.contains("log range"), qPrintable(error));
        QVERIFY(!editor.okButton()->isEnabled());
        editor.setRows({{"training.batch_size", "32, lots"}});
        QVERIFY(editor.definition(&error).is_null());
        QVERIFY2(error.contains("batch_size"), qPrintable(error));
        editor.setRows({{"graph.nosuchnode.units", "8"}});
        QVERIFY(editor.definition(&error).is_null());
        QVERIFY2(error.contains("no node named 'nosuchnode'"), qPrintable(error));
        editor.setRows({{"training.optimizer", "sgd, adam"}});
        editor.setMethod("random");
        editor.setTrials(5);
        QVERIFY2(!editor.definition(&error).is_null(), qPrintable(error));
        QVERIFY(editor.okButton()->isEnabled());
        QVERIFY2(editor.summaryText().startsWith("5 trial"), qPrintable(editor.summaryText()));
    }
};

QTEST_MAIN(TestSweepPanel)
#include "test_sweep_panel.moc"
