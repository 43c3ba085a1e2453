// ExportDialog and PredictPanel offscreen on a tiny trained project (synthetic
// blobs, 16 features, 4 classes, 300 validation samples): ONNX and GGUF Q8_0
// exports are written and checked (difference and accuracies shown; the ONNX
// graph runs in OpenCV DNN), the options follow the format, errors (no
// checkpoint, unwritable path, broken file) are shown naming the file; the
// predict panel gives probabilities that sum to 1 and a confusion matrix over
// the whole validation split; image files become raw input values of the
// model's size; MainWindow offers both.
#include <QAction>
#include <QComboBox>
#include <QDockWidget>
#include <QFile>
#include <QFileInfo>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMenuBar>
#include <QSet>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <cmath>

#include "core/backend/CpuInt8.h"
#include "core/export/ExportModel.h"
#include "core/infer/OnnxRunner.h"
#include "core/train/Trainer.h"
#include "tests/support/TestBackends.h"
#include "tests/support/TestProjects.h"
#include "ui/ExportDialog.h"
#include "ui/FieldError.h"
#include "ui/MainWindow.h"
#include "ui/PredictPanel.h"
#include "ui/base/ProjectDocument.h"

using namespace strata;
using namespace strata::ui;

namespace {

Project tinyProject(const QString& checkpointDir) {
    Project p = test::blobsMlpProject("Tiny Blobs");
    p.dataset.classNames = {"north", "east", "south", "west"};
    p.training.seed = 5;
    p.training.checkpointDir = checkpointDir.toStdString();
    return p;
}

// A trained project saved in `dir` (tiny.strata, checkpoints in dir/ckpt), open in `doc`.
void makeTrainedProject(const QTemporaryDir& dir, ProjectDocument& doc) {
    const Project p = tinyProject(dir.filePath("ckpt"));
    const std::string why = test::trainQuietly(p);
    QVERIFY2(why.empty(), why.c_str());
    doc.newProject(p);
    QString error;
    QVERIFY2(doc.save(dir.filePath("tiny.strata"), &error), qPrintable(error));
}

bool waitFor(QSignalSpy& spy, int ms = 60000) { return spy.count() > 0 || spy.wait(ms); }

// Shows the panel (900 x 400) and loads the model file into it; false when loading failed (errorText says why).
bool showWithModel(PredictPanel& panel, const QString& file) {
    panel.resize(900, 400);
    panel.show();
    QSignalSpy loaded(&panel, &PredictPanel::modelLoaded);
    panel.loadModel(file);
    return waitFor(loaded) && loaded.takeFirst().at(0).toBool();
}

}  // namespace

class TestExportPredict : public QObject {
    Q_OBJECT
private slots:
    void exportsOnnxAndGgufAndShowsTheCheck() {
        QTemporaryDir dir;
        ProjectDocument doc;
        makeTrainedProject(dir, doc);
        ExportDialog dlg(&doc);
        dlg.show();
        QVERIFY(QTest::qWaitForWindowExposed(&dlg) || true);
        QVERIFY2(dlg.findChild<QLineEdit*>("exportSource")->text().endsWith("best.safetensors"),
                 qPrintable(dlg.findChild<QLineEdit*>("exportSource")->text()));
        // Default output next to the project, named after it.
        QCOMPARE(dlg.outputPath(), dir.filePath("tiny-blobs.onnx"));

        // ONNX: opset on, quantization F32 or int8 only.
        dlg.setFormat(ExportFormat::Onnx);
        QVERIFY(dlg.opsetSpin()->isEnabled());
        QCOMPARE(dlg.opsetSpin()->value(), 13);
        auto* onnxItems = qobject_cast<QStandardItemModel*>(dlg.precisionCombo()->model());
        for (int i = 0; i < dlg.precisionCombo()->count(); ++i) {
            const auto p = ExportPrecision(dlg.precisionCombo()->itemData(i).toInt());
            QCOMPARE(onnxItems->item(i)->isEnabled(), p == ExportPrecision::F32 || p == ExportPrecision::Int8);
        }
        dlg.opsetSpin()->setValue(17);
        QSignalSpy done(&dlg, &ExportDialog::exportFinished);
        dlg.startExport();
        QVERIFY(dlg.isBusy() || done.count() > 0);
        QVERIFY(waitFor(done));
        QVERIFY2(done.takeFirst().at(0).toBool(), qPrintable(dlg.errorText()));
        QVERIFY(QFile::exists(dir.filePath("tiny-blobs.onnx")));
        const ExportOutcome onnx = dlg.outcome();
        QVERIFY(onnx.checked);
        QCOMPARE(onnx.check.samples, qint64(256));
        QVERIFY(onnx.check.maxAbsDiff <= 1e-4);
        QCOMPARE(onnx.check.fileAccuracy, onnx.check.liveAccuracy);
        QVERIFY(dlg.resultText().contains("Largest output difference"));
        QVERIFY(dlg.resultText().contains("Accuracy:"));
        QVERIFY(dlg.resultText().contains(QString::number(100.0 * onnx.check.liveAccuracy, 'f', 2) + "%"));
        // The file's ONNX graph ran in OpenCV DNN; without OpenCV the dialog says it was not executed.
        if (onnxRunnerAvailable()) {
            QCOMPARE(onnx.check.runtime, onnxRunnerName());
            QVERIFY2(dlg.methodText().contains("Ran the ONNX graph in OpenCV DNN"), qPrintable(dlg.methodText()));
        } else {
            QVERIFY2(dlg.methodText().contains("NOT executed"), qPrintable(dlg.methodText()));
        }
        QVERIFY(dlg.tensorText().contains("dense1.weight [32, 16] F32"));
        QVERIFY(dlg.errorText().isEmpty());

        // GGUF: every precision; the output keeps the user's name with the new extension (and the precision's tag,
        // so a quantized file never replaces the float one).
        dlg.setOutputPath(dir.filePath("mine.onnx"));
        dlg.setFormat(ExportFormat::Gguf);
        QCOMPARE(dlg.outputPath(), dir.filePath("mine.gguf"));
        QVERIFY(!dlg.opsetSpin()->isEnabled());
        QVERIFY(dlg.precisionCombo()->isEnabled());
        auto* items = qobject_cast<QStandardItemModel*>(dlg.precisionCombo()->model());
        QVERIFY(items->item(2)->isEnabled());
        dlg.setPrecision(ExportPrecision::Q8_0);
        QCOMPARE(dlg.outputPath(), dir.filePath("mine-q8_0.gguf"));
        dlg.startExport();
        QVERIFY(waitFor(done));
        QVERIFY2(done.takeFirst().at(0).toBool(), qPrintable(dlg.errorText()));
        const ExportOutcome q8 = dlg.outcome();
        QVERIFY(q8.check.maxAbsDiff > 0);
        QVERIFY(q8.check.maxAbsDiff < 0.05 * q8.check.maxAbsOutput);
        QVERIFY(dlg.tensorText().contains("dense1.weight [32, 16] F16   (fallback from Q8_0)"));
        QVERIFY(dlg.tensorText().contains("dense2.weight [4, 32] Q8_0"));
        QVERIFY(dlg.resultText().contains("Stored as F16 instead of Q8_0"));
        QVERIFY(dlg.resultText().contains("mine-q8_0.gguf"));

        // safetensors has no Q8_0: the item is disabled and the choice falls back to F32.
        dlg.setFormat(ExportFormat::Safetensors);
        QVERIFY(!items->item(2)->isEnabled());
        QCOMPARE(dlg.precision(), ExportPrecision::F32);
        QCOMPARE(dlg.outputPath(), dir.filePath("mine.safetensors"));

        // int8 ONNX: calibrated on the training split, checked by simulating the file's integer arithmetic
        // (OpenCV cannot import QDQ graphs), and said so.
        dlg.setFormat(ExportFormat::Onnx);
        dlg.setPrecision(ExportPrecision::Int8);
        QCOMPARE(dlg.precision(), ExportPrecision::Int8);
        dlg.setOutputPath(dir.filePath("mine-int8.onnx"));
        dlg.startExport();
        QVERIFY(waitFor(done));
        QVERIFY2(done.takeFirst().at(0).toBool(), qPrintable(dlg.errorText()));
        const ExportOutcome int8 = dlg.outcome();
        QCOMPARE(
            int8.check.runtime,
            std::string(cpu::int8Unavailable().empty() ? "Strata int8 engine" : "Strata CPU backend (int8 simulated)"));
        // On the int8 engine, checked against the simulation of the same file.
        if (cpu::int8Unavailable().empty()) QVERIFY(int8.check.int8SameAsSimulation >= int8.check.samples * 98 / 100);
        QVERIFY(std::abs(int8.check.fileAccuracy - int8.check.liveAccuracy) <= 0.03);
        QVERIFY(dlg.tensorText().contains("dense1.weight/int8 [32, 16] INT8"));
        QVERIFY2(dlg.methodText().contains("uint8 scale and zero point"), qPrintable(dlg.methodText()));
        // The Predict dock runs the int8 file on the int8 engine (where the CPU has AVX512-VNNI) and says so.
        PredictPanel predict(&doc);
        QSignalSpy predicted(&predict, &PredictPanel::predictionReady);
        const int64_t matmulsBefore = cpu::int8Counters().matmuls;
        QVERIFY2(showWithModel(predict, dir.filePath("mine-int8.onnx")), qPrintable(predict.errorText()));
        QVERIFY2(predict.sourceText().contains(cpu::int8Unavailable().empty() ? "runs on: int8 engine"
                                                                              : "not the int8 engine"),
                 qPrintable(predict.sourceText()));
        QVERIFY(waitFor(predicted));
        QVERIFY2(!predict.predictionText().isEmpty(), qPrintable(predict.errorText()));
        // Its prediction ran oneDNN's int8 matmuls (the model's Dense layers), not the float32 model.
        if (cpu::int8Unavailable().empty()) QVERIFY(cpu::int8Counters().matmuls > matmulsBefore);
    }

    void errorsAreShownNotThrown() {
        QTemporaryDir dir;
        // No checkpoint folder in the project, and no run of it yet.
        ProjectDocument bare;
        bare.newProject(tinyProject(QString()));
        ExportDialog none(&bare);
        none.show();
        QSignalSpy noneDone(&none, &ExportDialog::exportFinished);
        none.startExport();
        QVERIFY(waitFor(noneDone));
        QCOMPARE(noneDone.takeFirst().at(0).toBool(), false);
        QVERIFY2(none.errorText().contains("No run of this project has kept weights"), qPrintable(none.errorText()));

        // A checkpoint folder that holds nothing yet.
        ProjectDocument empty;
        empty.newProject(tinyProject(dir.filePath("never-trained")));
        QString error;
        QVERIFY(ExportDialog::projectCheckpoint(&empty, &error).isEmpty());
        QVERIFY2(error.contains("never-trained"), qPrintable(error));

        ProjectDocument doc;
        makeTrainedProject(dir, doc);
        ExportDialog dlg(&doc);
        dlg.show();
        QSignalSpy done(&dlg, &ExportDialog::exportFinished);
        // An unwritable output path.
        dlg.setFormat(ExportFormat::Gguf);
        dlg.setOutputPath("/nonexistent-strata-dir/out.gguf");
        dlg.startExport();
        QVERIFY(waitFor(done));
        QCOMPARE(done.takeFirst().at(0).toBool(), false);
        QVERIFY2(dlg.errorText().contains("out.gguf"), qPrintable(dlg.errorText()));
        // A broken source file.
        QFile bad(dir.filePath("broken.safetensors"));
        QVERIFY(bad.open(QIODevice::WriteOnly));
        bad.write("\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":", 13);
        bad.close();
        dlg.setSource(bad.fileName());
        dlg.setOutputPath(dir.filePath("out.gguf"));
        dlg.startExport();
        QVERIFY(waitFor(done));
        QCOMPARE(done.takeFirst().at(0).toBool(), false);
        QVERIFY2(dlg.errorText().contains("broken.safetensors"), qPrintable(dlg.errorText()));
        QVERIFY(!QFile::exists(dir.filePath("out.gguf")));

        // The predict panel reports a missing checkpoint the same way.
        PredictPanel panel(&bare);
        QSignalSpy loaded(&panel, &PredictPanel::modelLoaded);
        panel.loadModel();
        QVERIFY(waitFor(loaded));
        QCOMPARE(loaded.takeFirst().at(0).toBool(), false);
        QVERIFY2(panel.errorText().contains("No run of this project has kept weights"), qPrintable(panel.errorText()));
        QVERIFY(!panel.hasModel());
        // And a model file that is not one.
        panel.loadModel(bad.fileName());
        QVERIFY(waitFor(loaded));
        QCOMPARE(loaded.takeFirst().at(0).toBool(), false);
        QVERIFY2(panel.errorText().contains("broken.safetensors"), qPrintable(panel.errorText()));
    }

    // Issue 17: the export dialog and the Predict dock keep numbers as typed and say why one is refused;
    // an error goes when what it was about changes; the dock offers the project's weights after a run
    // without being asked, and its header has no empty parentheses.
    void refusedNumbersAndStaleErrors() {
        QTemporaryDir dir;
        ProjectDocument bare;
        bare.newProject(tinyProject(QString()));
        ExportDialog none(&bare);
        none.show();
        QSignalSpy noneDone(&none, &ExportDialog::exportFinished);
        none.startExport();
        QVERIFY(waitFor(noneDone));
        QVERIFY(!none.errorText().isEmpty());
        auto* opset = none.findChild<QSpinBox*>("exportOpset");
        QVERIFY(opset);
        none.setFormat(ExportFormat::Onnx);
        opset->setValue(99);
        QVERIFY2(none.errorText().isEmpty(), qPrintable(none.errorText()));  // the edit cleared the old error
        QCOMPARE(opset->value(), 99);
        QVERIFY2(fieldError(opset).startsWith("99 is not applied: must be"), qPrintable(fieldError(opset)));
        QVERIFY(none.findChild<QLabel*>("error_exportOpset")->isVisible());
        noneDone.clear();
        none.startExport();
        QVERIFY(waitFor(noneDone));
        QCOMPARE(noneDone.takeFirst().at(0).toBool(), false);
        QVERIFY2(none.errorText().contains("fix the values marked"), qPrintable(none.errorText()));
        opset->setValue(17);
        QVERIFY(fieldError(opset).isEmpty());
        QVERIFY(none.errorText().isEmpty());
        // The default file name: the project's name in lower case, then the quantization ("Model-q8_0.gguf" was seen).
        none.setFormat(ExportFormat::Gguf);
        none.setPrecision(ExportPrecision::Q8_0);
        QCOMPARE(QFileInfo(none.defaultOutputPath()).fileName(), QStringLiteral("tiny-blobs-q8_0.gguf"));
        none.setFormat(ExportFormat::Onnx);
        auto* samples = none.findChild<QSpinBox*>("exportSamples");
        samples->setValue(0);
        QCOMPARE(samples->value(), 0);
        QVERIFY(!fieldError(samples).isEmpty());

        // The dock: a failed load of the project's weights is shown; after a run (here: the project now
        // names a folder with weights) it loads them by itself and the error goes.
        PredictPanel panel(&bare);
        panel.show();
        QSignalSpy loaded(&panel, &PredictPanel::modelLoaded);
        panel.loadModel();
        QVERIFY(waitFor(loaded));
        QCOMPARE(loaded.takeFirst().at(0).toBool(), false);
        QVERIFY(!panel.errorText().isEmpty());
        ProjectDocument trained;
        makeTrainedProject(dir, trained);
        TrainingSettings ts = bare.project().training;
        ts.checkpointDir = trained.project().training.checkpointDir;
        bare.setTrainingSettings(ts);
        panel.projectTrained();
        QVERIFY(waitFor(loaded));
        QVERIFY2(loaded.takeFirst().at(0).toBool(), qPrintable(panel.errorText()));
        QVERIFY2(panel.errorText().isEmpty(), qPrintable(panel.errorText()));
        QVERIFY2(panel.sourceText().contains("(Tiny Blobs)"), qPrintable(panel.sourceText()));
        // Nothing loaded yet: a finished run loads the project's weights by default (a hidden dock when it is
        // shown).
        PredictPanel fresh(&trained);
        QSignalSpy freshLoaded(&fresh, &PredictPanel::modelLoaded);
        fresh.projectTrained();
        QTest::qWait(50);
        QCOMPARE(freshLoaded.count(), 0);
        fresh.resize(900, 400);
        fresh.show();
        QVERIFY(waitFor(freshLoaded));
        QVERIFY2(freshLoaded.takeFirst().at(0).toBool(), qPrintable(fresh.errorText()));
        QSignalSpy predicted(&fresh, &PredictPanel::predictionReady);
        QVERIFY(waitFor(predicted));
        auto* index = fresh.findChild<QSpinBox*>("predictIndex");
        index->setValue(300);  // 300 validation samples: 0 to 299
        QCOMPARE(index->value(), 300);
        QVERIFY2(fieldError(index).startsWith("300 is not applied: must be 0 to 299"), qPrintable(fieldError(index)));
        predicted.clear();
        index->setValue(12);
        QVERIFY(fieldError(index).isEmpty());
        QVERIFY(waitFor(predicted));

        // A model file without a project name: its name alone, no "()".
        Project unnamed = tinyProject(dir.filePath("unnamed"));
        unnamed.name.clear();
        const std::string why = test::trainQuietly(unnamed);
        QVERIFY2(why.empty(), why.c_str());
        fresh.loadModel(dir.filePath("unnamed"));
        QVERIFY(waitFor(freshLoaded));
        QVERIFY2(freshLoaded.takeFirst().at(0).toBool(), qPrintable(fresh.errorText()));
        QVERIFY2(!fresh.sourceText().contains("()"), qPrintable(fresh.sourceText()));
        QVERIFY2(fresh.sourceText().contains(".safetensors"), qPrintable(fresh.sourceText()));
    }

    // A text model in the Predict dock: the text field appears, typing predicts (after a pause), the tokens show
    // with the unknown word marked and the padding masked.
    void predictPanelClassifiesTypedText() {
        QTemporaryDir dir;
        const ExportModel m = test::sentimentTextModel();
        const QString file = dir.filePath("text.safetensors");
        writeSafetensorsExport(file.toStdString(), m, ExportPrecision::F32);
        ProjectDocument doc;
        PredictPanel panel(&doc);
        QVERIFY2(showWithModel(panel, file), qPrintable(panel.errorText()));
        QSignalSpy predicted(&panel, &PredictPanel::predictionReady);
        QVERIFY(panel.textEdit()->isVisible());
        QTest::keyClicks(panel.textEdit(), QStringLiteral("bad bad zzz"));
        QVERIFY(waitFor(predicted));
        QCOMPARE(panel.classNames()[panel.predictedClass()], QStringLiteral("neg"));
        QVERIFY(std::fabs(panel.probabilities()[1] - 0.6608) < 1e-3);  // mean (0, 2/3): padding masked
        QVERIFY2(panel.tokensText().contains(QStringLiteral("bad bad")), qPrintable(panel.tokensText()));
        QVERIFY2(panel.tokensText().contains(QStringLiteral("#b00020; font-weight:bold'>zzz")),
                 qPrintable(panel.tokensText()));
        predicted.clear();
        panel.textEdit()->setText(QStringLiteral("good fine fine fine good"));  // 5 words, max_tokens 4
        QVERIFY(waitFor(predicted));
        QVERIFY2(panel.tokensText().contains(QStringLiteral("<s>good</s>")), qPrintable(panel.tokensText()));
        QVERIFY(std::fabs(panel.probabilities()[0] - 1.0 / (1.0 + std::exp(-0.25))) < 1e-3);  // (0.625, 0.375)
        QVERIFY2(panel.attentionText().isEmpty(), qPrintable(panel.attentionText()));         // no attention layer
    }

    // An attention model: the heat strip shows the weight each typed token received (the hand-set weights give
    // "good" 4/6 and the others 1/6 each; the padding none, though its key would score highest unmasked).
    void predictPanelShowsAttention() {
        QTemporaryDir dir;
        const QString file = dir.filePath("attn.safetensors");
        writeSafetensorsExport(file.toStdString(), test::sentimentAttentionModel(), ExportPrecision::F32);
        ProjectDocument doc;
        PredictPanel panel(&doc);
        QVERIFY2(showWithModel(panel, file), qPrintable(panel.errorText()));
        QSignalSpy predicted(&panel, &PredictPanel::predictionReady);
        panel.textEdit()->setText(QStringLiteral("good bad zzz"));
        QVERIFY(waitFor(predicted));
        const QString strip = panel.attentionText();
        QVERIFY2(strip.contains(QStringLiteral("(attn, one head): ")), qPrintable(strip));
        QVERIFY2(strip.contains(QStringLiteral("most: good 67%, bad 17%, zzz 17%")), qPrintable(strip));
        QVERIFY2(strip.contains(QStringLiteral("rgba(230,110,0,0.88)'>good")), qPrintable(strip));
        QVERIFY2(strip.contains(QStringLiteral("rgba(230,110,0,0.28)'>bad")), qPrintable(strip));
        // Logits (2/3, 1/6): the attention's output, pooled.
        QVERIFY(std::fabs(panel.probabilities()[0] - 1.0 / (1.0 + std::exp(-0.5))) < 1e-3);
        // The strip follows each text: "fine" (0.5, 0.5) scores ln 2, twice the weight of "bad".
        predicted.clear();
        panel.textEdit()->setText(QStringLiteral("bad fine"));
        QVERIFY(waitFor(predicted));
        QVERIFY2(panel.attentionText().contains(QStringLiteral("most: fine 67%, bad 33%")),
                 qPrintable(panel.attentionText()));
    }

    void predictPanelShowsProbabilitiesAndConfusion() {
        QTemporaryDir dir;
        ProjectDocument doc;
        makeTrainedProject(dir, doc);
        PredictPanel panel(&doc);
        panel.resize(900, 400);
        panel.show();
        QSignalSpy loaded(&panel, &PredictPanel::modelLoaded);
        QSignalSpy predicted(&panel, &PredictPanel::predictionReady);
        panel.loadModel();
        QVERIFY(waitFor(loaded));
        QVERIFY2(loaded.takeFirst().at(0).toBool(), qPrintable(panel.errorText()));
        QCOMPARE(panel.validationCount(), qint64(300));
        QCOMPARE(panel.classCount(), 4);
        QCOMPARE(panel.classNames(), (QStringList{"north", "east", "south", "west"}));
        // Loading predicts the current sample.
        QVERIFY(waitFor(predicted));
        predicted.clear();
        panel.selectSample(7);
        QVERIFY(waitFor(predicted));
        const QVector<double> p = panel.probabilities();
        QCOMPARE(p.size(), 4);
        double sum = 0;
        for (double v : p) {
            QVERIFY(v >= 0 && v <= 1);
            sum += v;
        }
        QVERIFY(std::fabs(sum - 1.0) < 1e-5);
        QVERIFY(panel.predictedClass() >= 0 && panel.predictedClass() < 4);
        QCOMPARE(int(std::max_element(p.begin(), p.end()) - p.begin()), panel.predictedClass());
        QVERIFY(panel.predictionText().startsWith(panel.classNames()[panel.predictedClass()]));
        QCOMPARE(panel.probabilityTable()->rowCount(), 4);
        QCOMPARE(panel.findChild<QSpinBox*>("predictIndex")->value(), 7);  // the picker follows
        // The predicted class's row is in view even when the table has room for one row (a short dock, many
        // classes).
        QTableWidget* probs = panel.probabilityTable();
        probs->setFixedHeight(probs->horizontalHeader()->height() + probs->rowHeight(0) + 2 * probs->frameWidth());
        QSet<int> classesSeen;
        for (int sample : {3, 11, 19, 27, 35, 43}) {
            predicted.clear();
            panel.selectSample(sample);
            QVERIFY(waitFor(predicted));
            QTableWidget* table = panel.probabilityTable();
            const QRect row = table->visualItemRect(table->item(panel.predictedClass(), 0));
            QVERIFY2(table->viewport()->rect().contains(row.center()),
                     qPrintable(QStringLiteral("sample %1, class %2 row at y %3, viewport height %4")
                                    .arg(sample)
                                    .arg(panel.predictedClass())
                                    .arg(row.center().y())
                                    .arg(table->viewport()->height())));
            classesSeen.insert(panel.predictedClass());
        }
        QVERIFY(classesSeen.size() > 1);  // not only the first row, which is in view anyway
        probs->setMinimumHeight(0);
        probs->setMaximumHeight(QWIDGETSIZE_MAX);

        QSignalSpy confusion(&panel, &PredictPanel::confusionReady);
        panel.runConfusionMatrix();
        QVERIFY(waitFor(confusion));
        QCOMPARE(panel.confusion().total(), qint64(300));
        QCOMPARE(panel.confusion().classes, 4);
        QCOMPARE(panel.confusionTable()->rowCount(), 5);     // classes + precision row
        QCOMPARE(panel.confusionTable()->columnCount(), 5);  // classes + recall column
        qint64 cells = 0;
        for (int r = 0; r < 4; ++r)
            for (int c = 0; c < 4; ++c) cells += panel.confusionTable()->item(r, c)->text().toLongLong();
        QCOMPARE(cells, qint64(300));
        QVERIFY2(panel.accuracyText().contains("of 300"), qPrintable(panel.accuracyText()));
        // Issue 17: the columns carry the class names too, and a click on a cell lists that cell's samples.
        QCOMPARE(panel.confusionTable()->horizontalHeaderItem(0)->text(), QStringLiteral("north"));
        QCOMPARE(panel.confusionTable()->horizontalHeaderItem(3)->text(), QStringLiteral("west"));
        int cellRow = 0, cellCol = 0;
        for (int r = 0; r < 4; ++r)
            for (int c = 0; c < 4; ++c)
                if (r != c && panel.confusion().at(r, c) > panel.confusion().at(cellRow, cellCol)) {
                    cellRow = r;
                    cellCol = c;
                }
        emit panel.confusionTable()->cellClicked(cellRow, cellCol);
        QCOMPARE(panel.cellSampleIndices().size(), qsizetype(panel.confusion().at(cellRow, cellCol)));
        QVERIFY2(
            panel.cellTitleText().startsWith(
                QStringLiteral("True %1, predicted %2").arg(panel.classNames()[cellRow], panel.classNames()[cellCol])),
            qPrintable(panel.cellTitleText()));
        emit panel.confusionTable()->cellClicked(1, 1);
        QCOMPARE(panel.cellSampleIndices().size(), qsizetype(panel.confusion().at(1, 1)));
        QVERIFY(!panel.cellSampleIndices().isEmpty());
        qint64 listed = 0;
        for (int r = 0; r < 4; ++r)
            for (int c = 0; c < 4; ++c) {
                emit panel.confusionTable()->cellClicked(r, c);
                listed += panel.cellSampleIndices().size();
            }
        QCOMPARE(listed, qint64(300));  // every sample in exactly one cell
        QVERIFY(panel.confusion().accuracy() > 0.5);

        // This model's input is not an image: an image file is refused with a message.
        QImage img(8, 8, QImage::Format_RGB32);
        img.fill(Qt::gray);
        QVERIFY(img.save(dir.filePath("x.png")));
        panel.predictImageFile(dir.filePath("x.png"));
        QVERIFY2(panel.errorText().contains("not an image"), qPrintable(panel.errorText()));
    }

    void imagesBecomeRawInputs() {
        QTemporaryDir dir;
        QString error;
        // A 56x56 white square on black, for a [1, 28, 28] model: resized, one channel, 0..255.
        QImage img(56, 56, QImage::Format_RGB32);
        img.fill(Qt::black);
        for (int y = 14; y < 42; ++y)
            for (int x = 14; x < 42; ++x) img.setPixel(x, y, qRgb(255, 255, 255));
        std::vector<float> v = PredictPanel::imageToRawInput(img, Shape{1, 28, 28}, &error);
        QCOMPARE(v.size(), size_t(784));
        QCOMPARE(v[0], 0.f);
        QCOMPARE(v[14 * 28 + 14], 255.f);
        // Colour for a [3, 4, 4] model: planes R, G, B.
        QImage red(4, 4, QImage::Format_RGB32);
        red.fill(qRgb(200, 10, 30));
        v = PredictPanel::imageToRawInput(red, Shape{3, 4, 4}, &error);
        QCOMPARE(v.size(), size_t(48));
        QCOMPARE(v[0], 200.f);
        QCOMPARE(v[16], 10.f);
        QCOMPARE(v[32], 30.f);
        QVERIFY(PredictPanel::imageToRawInput(red, Shape{16}, &error).empty());
        QVERIFY(error.contains("not an image"));

        // PGM through readNetpbm: exact values at the model's size, resized otherwise.
        QFile pgm(dir.filePath("digit.pgm"));
        QVERIFY(pgm.open(QIODevice::WriteOnly));
        QByteArray bytes("P5\n4 4\n255\n");
        for (int i = 0; i < 16; ++i) bytes.append(char(i * 16));
        pgm.write(bytes);
        pgm.close();
        v = PredictPanel::readImageFile(pgm.fileName(), Shape{1, 4, 4}, &error);
        QCOMPARE(v.size(), size_t(16));
        QCOMPARE(v[5], 80.f);
        v = PredictPanel::readImageFile(pgm.fileName(), Shape{1, 8, 8}, &error);
        QCOMPARE(v.size(), size_t(64));
        // PNG through QImage.
        QVERIFY(img.save(dir.filePath("square.png")));
        v = PredictPanel::readImageFile(dir.filePath("square.png"), Shape{28, 28}, &error);
        QCOMPARE(v.size(), size_t(784));
        QCOMPARE(v[14 * 28 + 14], 255.f);
        // Broken files name themselves.
        QFile junk(dir.filePath("junk.pgm"));
        QVERIFY(junk.open(QIODevice::WriteOnly));
        junk.write("P5\n4 4\n255\nab");
        junk.close();
        QVERIFY(PredictPanel::readImageFile(junk.fileName(), Shape{1, 4, 4}, &error).empty());
        QVERIFY2(error.contains("junk.pgm"), qPrintable(error));
        QVERIFY(PredictPanel::readImageFile(dir.filePath("none.png"), Shape{1, 4, 4}, &error).empty());
        QVERIFY2(error.contains("none.png"), qPrintable(error));
    }

    void mainWindowOffersExportAndPredict() {
        MainWindow w;
        w.setSavePrompt([](const QString&) { return MainWindow::SaveChoice::Discard; });
        QVERIFY(w.dockNamed("predictDock"));
        QVERIFY(w.predictPanel());
        QAction* exportAct = nullptr;
        for (QAction* a : w.menuBar()->actions().first()->menu()->actions())
            if (a->text() == "&Export Model...") exportAct = a;
        QVERIFY(exportAct);
        QVERIFY(!w.exportDialog());
        exportAct->trigger();
        QVERIFY(w.exportDialog());
        QVERIFY(w.exportDialog()->isVisible());
        w.exportDialog()->close();
    }
};

QTEST_MAIN(TestExportPredict)
#include "test_export_predict.moc"
