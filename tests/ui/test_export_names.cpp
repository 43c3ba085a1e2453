// The export dialog's file name follows the precision (issue 34: an int8 export from the Optimize panel wrote
// over the float model.onnx the user had exported before): a quantized file always carries its precision in
// its name, whether the name was the dialog's, picked, or typed.
#include <QApplication>
#include <QFile>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

#include "tests/support/TestProjects.h"
#include "ui/ExportDialog.h"
#include "ui/MainWindow.h"
#include "ui/OptimizePanel.h"
#include "ui/base/ProjectDocument.h"

using namespace strata;
using namespace strata::ui;

class TestExportNames : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        QApplication::setOrganizationName(QStringLiteral("StrataTest"));
        QApplication::setApplicationName(QStringLiteral("test_export_names"));
        QSettings().clear();
    }

    void namesCarryTheirPrecision() {
        QCOMPARE(ExportDialog::outputPathFor("/x/model.onnx", ExportPrecision::Int8), QString("/x/model-int8.onnx"));
        QCOMPARE(ExportDialog::outputPathFor("/x/model-int8.onnx", ExportPrecision::Int8),
                 QString("/x/model-int8.onnx"));
        QCOMPARE(ExportDialog::outputPathFor("/x/model-int8.onnx", ExportPrecision::F32), QString("/x/model.onnx"));
        QCOMPARE(ExportDialog::outputPathFor("/x/model-f16.gguf", ExportPrecision::Q8_0),
                 QString("/x/model-q8_0.gguf"));
        QCOMPARE(ExportDialog::outputPathFor("model.onnx", ExportPrecision::Q4_0), QString("model-q4_0.onnx"));
        QCOMPARE(ExportDialog::outputPathFor("/x/model.onnx", ExportPrecision::F32), QString("/x/model.onnx"));
    }

    // A name the user picked follows the precision both ways; one typed with int8 selected gets its tag when
    // the export starts, and the float file beside it stays as it was.
    void pickedAndTypedNames() {
        QTemporaryDir dir;
        ProjectDocument doc;
        doc.newProject(test::blobsMlpProject("names"));
        ExportDialog dialog(&doc);
        dialog.setFormat(ExportFormat::Onnx);
        const QString floatFile = dir.filePath("model.onnx");
        dialog.setOutputPath(floatFile);
        dialog.setPrecision(ExportPrecision::Int8);
        QCOMPARE(dialog.outputPath(), dir.filePath("model-int8.onnx"));
        dialog.setPrecision(ExportPrecision::F32);
        QCOMPARE(dialog.outputPath(), floatFile);

        QFile f(floatFile);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("the float model");
        f.close();
        dialog.setPrecision(ExportPrecision::Int8);
        dialog.setOutputPath(floatFile);  // typed over
        dialog.setSource(dir.filePath("no-checkpoint"));
        QSignalSpy finished(&dialog, &ExportDialog::exportFinished);
        dialog.startExport();
        QCOMPARE(dialog.outputPath(), dir.filePath("model-int8.onnx"));
        QVERIFY(finished.count() > 0 || finished.wait(30000));
        QVERIFY(f.open(QIODevice::ReadOnly));
        QCOMPARE(f.readAll(), QByteArray("the float model"));
    }

    // The Optimize panel's "export int8" after a float export to a picked file: the dialog names the int8 file.
    void optimizeInt8AfterFloatExport() {
        QTemporaryDir dir;
        MainWindow w;
        w.newProject(test::blobsMlpProject("optimize-names"));
        w.showExportDialog();
        w.exportDialog()->setFormat(ExportFormat::Onnx);
        w.exportDialog()->setOutputPath(dir.filePath("model.onnx"));
        w.exportDialog()->hide();
        emit w.optimizePanel()->exportRequested(dir.filePath("variant/best.safetensors"), true);
        QCOMPARE(w.exportDialog()->precision(), ExportPrecision::Int8);
        QCOMPARE(w.exportDialog()->outputPath(), dir.filePath("model-int8.onnx"));
    }
};

QTEST_MAIN(TestExportNames)
#include "test_export_names.moc"
