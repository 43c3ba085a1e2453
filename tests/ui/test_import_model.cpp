// File > Import Model (MainWindow::importModel, ModelImporter): an ONNX file imported off the GUI thread into a
// project that is then open in the window; a file with nodes that cannot be mapped opens in part, with every such
// node named in a dialog; a file that is not ONNX leaves the open project as it was, the error naming the file.
#include <QAction>
#include <QApplication>
#include <QFileInfo>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <fstream>
#include <sstream>

#include "app/CliCommands.h"
#include "ui/MainWindow.h"
#include "ui/ModelImporter.h"
#include "ui/base/ProjectDocument.h"

using namespace strata;
using namespace strata::ui;

class TestImportModel : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    QString path(const QString& name) const { return m_dir.filePath(name); }

    // Runs File > Import Model on `onnx` into `project` and waits for the import to end.
    void importInto(MainWindow& w, const QString& onnx, const QString& project, QStringList& errors) {
        w.setImportPrompt([=] { return std::make_pair(onnx, project); });
        w.setErrorReporter([&](const QString& title, const QString& text) { errors << title + ": " + text; });
        QAction* action = w.findChild<QAction*>(QStringLiteral("importModelAction"));
        QVERIFY(action);
        action->trigger();
        QVERIFY(w.modelImporter());
        QSignalSpy done(w.modelImporter(), &ModelImporter::finished);
        QVERIFY(done.wait(60000));
    }

private slots:
    void initTestCase() {
        QVERIFY(m_dir.isValid());
        QStandardPaths::setTestModeEnabled(true);
        QApplication::setOrganizationName(QStringLiteral("StrataTest"));
        QApplication::setApplicationName(QStringLiteral("test_import_model"));
        QSettings().clear();
    }

    void importsAndOpensTheProject() {
        // A Strata export of the MLP example (untrained weights) as the model to import.
        std::ostringstream out, err;
        const std::string onnx = path("mlp.onnx").toStdString();
        QCOMPARE(runExportCommand(
                     {STRATA_SOURCE_DIR "/examples/fashion_mlp.strata", "--untrained", "--format", "onnx", "-o", onnx},
                     out, err),
                 0);
        MainWindow w;
        QStringList errors;
        importInto(w, path("mlp.onnx"), path("mlp.strata"), errors);
        QVERIFY2(errors.isEmpty(), qPrintable(errors.join('\n')));
        QCOMPARE(w.document()->filePath(), QFileInfo(path("mlp.strata")).absoluteFilePath());
        const Graph& g = w.document()->project().graph;
        QVERIFY(g.nodeByName("input") && g.nodeByName("fc1") && g.nodeByName("fc2"));
        QVERIFY(QFileInfo::exists(path("mlp.imported.safetensors")));
        QCOMPARE(w.document()->project().training.initFrom, std::string("mlp.imported.safetensors"));
    }

    void unmappedNodesAreShown() {
        MainWindow w;
        QStringList errors;
        importInto(w, QStringLiteral(STRATA_SOURCE_DIR "/tests/fuzz/corpus/onnx_import/cumsum_cnn.onnx"),
                   path("cumsum.strata"), errors);
        QCOMPARE(errors.size(), 1);
        QVERIFY2(errors[0].contains(QStringLiteral("(CumSum): no Strata layer maps the operator CumSum")),
                 qPrintable(errors[0]));
        QCOMPARE(w.document()->filePath(), QFileInfo(path("cumsum.strata")).absoluteFilePath());
    }

    void junkLeavesTheProject() {
        const QString junk = path("junk.onnx");
        std::ofstream(junk.toStdString()) << "not an ONNX model";
        MainWindow w;
        const QString before = w.document()->filePath();
        QStringList errors;
        importInto(w, junk, path("junk.strata"), errors);
        QCOMPARE(errors.size(), 1);
        QVERIFY2(errors[0].contains(junk), qPrintable(errors[0]));
        QCOMPARE(w.document()->filePath(), before);
        QVERIFY(!QFileInfo::exists(path("junk.strata")));
    }
};

QTEST_MAIN(TestImportModel)
#include "test_import_model.moc"
