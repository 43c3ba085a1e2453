// OptimizePanel offscreen on a small trained CNN (image-shaped blobs): the targets become a study request
// (bad sparsities refused with the text), Optimize runs on the panel's engine thread while the GUI thread
// stays free, every variant lands in the table and on both charts as it is measured, the selected variant's
// layer sparsity is shown, and Export / Open as project hand the variant to MainWindow. Stop ends a study
// between steps. A screenshot of the panel is written when STRATA_SCREENSHOT_DIR is set.
#include <QCheckBox>
#include <QDir>
#include <QDockWidget>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>

#include <qcustomplot.h>

#include "core/backend/CpuInt8.h"
#include "core/train/Trainer.h"
#include "tests/support/TestBackends.h"
#include "tests/support/TestProjects.h"
#include "ui/ExportDialog.h"
#include "ui/FieldError.h"
#include "ui/MainWindow.h"
#include "ui/OptimizePanel.h"
#include "ui/base/ProjectDocument.h"

using namespace strata;
using namespace strata::ui;

namespace {

// Input [1, 8, 8] -> conv (8) -> ReLU -> MaxPool -> Flatten -> fc (16) -> ReLU -> out (3), trained one epoch
// into dir/ckpt and saved as dir/cnn.strata.
Project cnnProject(const QString& checkpointDir) {
    Project p;
    p.name = "Tiny CNN";
    test::addChain(p.graph, {{"Input", "input", Json{{"shape", {1, 8, 8}}}},
                             {"Conv2D", "conv", Json{{"filters", 8}, {"kernel", {3, 3}}, {"padding", {1, 1}}}},
                             {"ReLU", "relu1"},
                             {"MaxPool2D", "pool", Json{{"kernel", {2, 2}}}},
                             {"Flatten", "flatten"},
                             {"Dense", "fc", Json{{"units", 16}}},
                             {"ReLU", "relu2"},
                             {"Dense", "out", Json{{"units", 3}}}});
    test::useBlobs(p, 480, 3, {1, 8, 8});
    p.training.learningRate = 0.05;
    p.training.batchSize = 32;
    p.training.epochs = 1;
    p.training.seed = 3;
    p.training.threads = 1;
    p.training.checkpointDir = checkpointDir.toStdString();
    return p;
}

void makeTrainedProject(const QTemporaryDir& dir, ProjectDocument& doc) {
    const Project p = cnnProject(dir.filePath("ckpt"));
    BackendOptions one;
    one.threads = 1;
    const std::string why = test::trainQuietly(p, one);
    QVERIFY2(why.empty(), why.c_str());
    doc.newProject(p);
    QString error;
    QVERIFY2(doc.save(dir.filePath("cnn.strata"), &error), qPrintable(error));
}

bool waitFor(QSignalSpy& spy, int ms = 120000) { return spy.count() > 0 || spy.wait(ms); }

}  // namespace

class TestOptimizePanel : public QObject {
    Q_OBJECT
private slots:
    void requestFollowsTheControls() {
        std::vector<double> s;
        QVERIFY(OptimizePanel::parseSparsities("50, 80 90%", &s));
        QCOMPARE(s, (std::vector<double>{0.5, 0.8, 0.9}));
        QVERIFY(!OptimizePanel::parseSparsities("50, 100", &s));
        QVERIFY(!OptimizePanel::parseSparsities("half", &s));
        QVERIFY(!OptimizePanel::parseSparsities("", &s));

        QTemporaryDir dir;
        ProjectDocument doc;
        // No checkpoint yet: the reason is shown, nothing runs.
        doc.newProject(cnnProject(dir.filePath("none")));
        OptimizePanel empty(&doc);
        QSignalSpy emptyDone(&empty, &OptimizePanel::optimizeFinished);
        empty.optimize();
        QCOMPARE(emptyDone.count(), 1);
        QVERIFY2(empty.errorText().contains("No checkpoint yet"), qPrintable(empty.errorText()));

        ProjectDocument trained;
        makeTrainedProject(dir, trained);
        OptimizePanel panel(&trained);
        CompressionRequest r;
        QString error;
        QVERIFY2(panel.buildRequest(&r, &error), qPrintable(error));
        QVERIFY(QString::fromStdString(r.checkpoint).endsWith("best.safetensors"));
        QCOMPARE(r.sparsities, (std::vector<double>{0.5, 0.8, 0.9}));
        QCOMPARE(r.structuredFraction, 0.5);
        QVERIFY(r.int8);
        QCOMPARE(QString::fromStdString(r.outputDir), QDir::cleanPath(dir.filePath("ckpt")) + "/optimized");
        panel.sparsityEdit()->setText("80, 120");
        QVERIFY(!panel.buildRequest(&r, &error));
        QVERIFY2(fieldError(panel.sparsityEdit()).contains("\"80, 120\" is not applied"),
                 qPrintable(fieldError(panel.sparsityEdit())));
        panel.sparsityEdit()->setText("80");
        QVERIFY(fieldError(panel.sparsityEdit()).isEmpty());

        // Numbers out of range stay as typed and are refused with the reason under the field (issue 17: the
        // spin boxes used to clamp 120 to 95 and 0 epochs to 1 silently); fixing one clears its line.
        panel.show();
        struct Case {
            QSpinBox* spin;
            int bad, good;
            QString reason;
        };
        const Case cases[] = {
            {panel.structuredSpin(), 120, 30, "120 is not applied: must be 5 to 95 (%)."},
            {panel.epochsSpin(), 0, 1, "0 is not applied: must be 1 to 1000."},
            {panel.samplesSpin(), -1, 0, "-1 is not applied: must be 0 (all) to 100000000."},
        };
        for (const Case& c : cases) {
            c.spin->setValue(c.bad);
            QCOMPARE(c.spin->value(), c.bad);
            QCOMPARE(fieldError(c.spin), c.reason);
            auto* line = panel.findChild<QLabel*>("error_" + c.spin->objectName());
            QVERIFY2(line && line->isVisible() && line->text() == c.reason, qPrintable(c.spin->objectName()));
            error.clear();
            QVERIFY(!panel.buildRequest(&r, &error));
            QVERIFY2(error.contains("not applied"), qPrintable(error));
            c.spin->setValue(c.good);
            QVERIFY(fieldError(c.spin).isEmpty());
            QVERIFY(line->isHidden());
        }
        // A refused percentage of a target that is off is no reason to refuse the request.
        panel.structuredSpin()->setValue(99);
        QVERIFY(!fieldError(panel.structuredSpin()).isEmpty());
        panel.structuredCheck()->setChecked(false);
        QVERIFY(fieldError(panel.structuredSpin()).isEmpty());
        QVERIFY2(panel.buildRequest(&r, &error), qPrintable(error));
        QCOMPARE(r.structuredFraction, 0.0);
        QCOMPARE(r.fineTuneEpochs, 1);
        QCOMPARE(r.evaluationSamples, int64_t(0));
        QCOMPARE(panel.samplesSpin()->text(), QStringLiteral("measure on all validation samples"));
    }

    void optimizeFillsTableAndCharts() {
        QTemporaryDir dir;
        MainWindow window;
        window.setSavePrompt([](const QString&) { return MainWindow::SaveChoice::Discard; });
        ProjectDocument* doc = window.document();
        makeTrainedProject(dir, *doc);
        QVERIFY(window.dockNamed("optimizeDock"));
        OptimizePanel* panel = window.optimizePanel();
        panel->setThreads(1);
        panel->sparsityEdit()->setText("75");
        panel->epochsSpin()->setValue(1);
        QDockWidget* dock = window.dockNamed("optimizeDock");
        dock->setFloating(true);
        dock->resize(1400, 440);
        dock->show();
        QSignalSpy done(panel, &OptimizePanel::optimizeFinished);
        panel->optimize();
        QVERIFY(panel->isBusy());
        // The GUI thread is free while the engine thread works: events are processed.
        QTest::qWait(50);
        QVERIFY(waitFor(done));
        QVERIFY2(done.takeFirst().at(0).toBool(), qPrintable(panel->errorText()));
        QVERIFY(!panel->isBusy());
        // original, 75% sparse, structured 50%, and an int8 file of each.
        QCOMPARE(panel->variants().size(), 6);
        QTableWidget* t = panel->resultTable();
        QCOMPARE(t->rowCount(), 6);
        QCOMPARE(t->item(1, 0)->text(), QString("75% sparse"));
        QCOMPARE(t->item(2, 0)->text(), QString("structured 50%"));
        QCOMPARE(t->item(3, 0)->text(), QString("int8"));
        // The int8 files are timed in the int8 engine where this CPU runs it (AVX512-VNNI), else not, saying why.
        const bool int8Engine = cpu::int8Unavailable().empty();
        if (int8Engine) {
            QVERIFY2(t->item(3, 6)->text().endsWith(" ms"), qPrintable(t->item(3, 6)->text()));
            QVERIFY(t->item(3, 8)->text().endsWith("x"));
            QVERIFY(panel->variants()[3].note.find("int8 engine") != std::string::npos);
        } else {
            QCOMPARE(t->item(3, 6)->text(), QString("not timed"));
            QVERIFY(!t->item(3, 6)->toolTip().isEmpty());
        }
        QVERIFY(t->item(2, 8)->text().endsWith("x"));
        // Every variant on the size chart, the timed ones on the time chart.
        QCOMPARE(panel->sizeChart()->graphCount(), 6);
        QCOMPARE(panel->timeChart()->graphCount(), int8Engine ? 6 : 3);
        // The selected variant's layers.
        panel->selectVariant(1);
        QCOMPARE(panel->layerTable()->rowCount(), 3);
        QCOMPARE(panel->layerTable()->item(0, 2)->text(), QString("75.0%"));
        if (!qEnvironmentVariableIsEmpty("STRATA_SCREENSHOT_DIR"))
            panel->grab().save(QDir(qEnvironmentVariable("STRATA_SCREENSHOT_DIR")).filePath("optimize-panel.png"));

        // Export: the variant's checkpoint in the Export dialog; int8 presets ONNX int8.
        QVERIFY(panel->exportButton()->isEnabled());
        panel->selectVariant(3);
        QVERIFY(!panel->openButton()->isEnabled());  // an int8 file has no project of its own
        panel->exportButton()->click();
        QVERIFY(window.exportDialog());
        QCOMPARE(window.exportDialog()->precision(), ExportPrecision::Int8);
        QVERIFY(window.exportDialog()->findChild<QLineEdit*>("exportSource")->text().endsWith("best.safetensors"));
        window.exportDialog()->hide();
        // Open as project: the structured variant's smaller graph.
        panel->selectVariant(2);
        QVERIFY(panel->openButton()->isEnabled());
        panel->openButton()->click();
        QVERIFY2(window.document()->filePath().endsWith("-pruned-structured.strata"),
                 qPrintable(window.document()->filePath()));
        const Node* conv = window.document()->project().graph.nodeByName("conv");
        QVERIFY(conv);
        QCOMPARE(conv->params.at("filters").get<int>(), 4);
    }

    void stopEndsTheStudy() {
        QTemporaryDir dir;
        ProjectDocument doc;
        makeTrainedProject(dir, doc);
        OptimizePanel panel(&doc);
        panel.setThreads(1);
        panel.epochsSpin()->setValue(50);  // long enough to be stopped
        panel.structuredCheck()->setChecked(false);
        panel.int8Check()->setChecked(false);
        panel.sparsityEdit()->setText("60");
        QSignalSpy done(&panel, &OptimizePanel::optimizeFinished);
        panel.optimize();
        QTRY_VERIFY_WITH_TIMEOUT(panel.variants().size() == 1, 60000);  // the original is measured
        panel.stop();
        QVERIFY(waitFor(done));
        QCOMPARE(done.takeFirst().at(0).toBool(), false);
        QVERIFY2(panel.statusText().contains("Stopped"), qPrintable(panel.statusText()));
        QCOMPARE(panel.variants().size(), 1);
    }
};

QTEST_MAIN(TestOptimizePanel)
#include "test_optimize_panel.moc"
