// strata: the workbench GUI. Wiring only: parse the command line, register
// the CUDA provider when built with CUDA, open the project and show the
// main window. --screenshot renders the window to a PNG and exits (docs, CI).
// --screenshot-export / --screenshot-predict train the project for one short
// epoch (checkpoints in a temporary folder), then render the Export dialog
// after a GGUF Q8_0 export, or the Predict panel with a confusion matrix, or the Optimize panel after a
// study (80% and 90% sparse, structured 50%, int8; one fine-tuning epoch each).
//
// --state-file FILE keeps FILE up to date with what the views show (ui/WorkbenchState: tools/gui-review.sh reads
// it to assert on the real GUI).
//
//   strata [PROJECT] [--screenshot FILE.png] [--window-size WxH] [--train-steps N] [--select NODE]
//          [--screenshot-export FILE.png] [--screenshot-predict FILE.png] [--screenshot-optimize FILE.png]
//          [--state-file FILE.json]
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFile>
#include <QFileInfo>
#include <QGuiApplication>
#include <QLineEdit>
#include <QPainter>
#include <QScreen>
#include <QSpinBox>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTimer>
#include <cstdio>
#include <functional>
#include <memory>

#include "app/OpenMpWaitPolicy.h"
#include "core/backend/BackendRegistry.h"
#include "ui/ExportDialog.h"
#include "ui/GraphScene.h"
#include "ui/GraphView.h"
#include "ui/MainWindow.h"
#include "ui/OptimizePanel.h"
#include "ui/PredictPanel.h"
#include "ui/RunsPanel.h"
#include "ui/SweepPanel.h"
#include "ui/TrainingDashboard.h"
#include "ui/WorkbenchState.h"
#include "ui/base/ProjectDocument.h"
#include "ui/base/RunHistory.h"
#include "ui/base/Templates.h"

#ifdef STRATA_CUDA_PLUGIN
#include "core/backend/CudaPlugin.h"
#elif defined(STRATA_HAVE_CUDA)
#include "gpu/CudaProvider.h"
#endif

namespace {

// Lets queued signals, timers and repaints run for a while.
void settle(int ms) {
    QElapsedTimer t;
    t.start();
    while (t.elapsed() < ms) QApplication::processEvents(QEventLoop::AllEvents, 20);
}

// Runs the event loop until `done` holds; false after `ms`.
bool waitUntil(const std::function<bool()>& done, int ms) {
    QElapsedTimer t;
    t.start();
    while (!done() && t.elapsed() < ms) {
        QEventLoop loop;
        QTimer::singleShot(20, &loop, &QEventLoop::quit);
        loop.exec();
    }
    return done();
}

// The Export dialog after a GGUF Q8_0 export of the trained project into `dir`.
bool exportScreenshot(strata::ui::MainWindow& window, const QString& dir, const QString& file) {
    window.showExportDialog();
    strata::ui::ExportDialog* dlg = window.exportDialog();
    dlg->setFormat(strata::ExportFormat::Gguf);
    dlg->setPrecision(strata::ExportPrecision::Q8_0);
    dlg->setOutputPath(QDir(dir).filePath(QFileInfo(dlg->defaultOutputPath()).fileName()));
    dlg->resize(820, 500);
    bool finished = false, ok = false;
    QObject::connect(dlg, &strata::ui::ExportDialog::exportFinished, dlg, [&](bool result) {
        finished = true;
        ok = result;
    });
    dlg->startExport();
    if (!waitUntil([&] { return finished; }, 300000) || !ok)
        std::fprintf(stderr, "strata: export failed: %s\n", qPrintable(dlg->errorText()));
    settle(300);
    return dlg->grab().save(file);
}

// The Predict panel, floated and enlarged: a sample's prediction (a typed sentence for a text model) above the
// validation confusion matrix, with the samples of its most confused cell listed beside it.
bool predictScreenshot(strata::ui::MainWindow& window, const QString& file) {
    QDockWidget* dock = window.dockNamed(QStringLiteral("predictDock"));
    strata::ui::PredictPanel* panel = window.predictPanel();
    dock->setFloating(true);
    dock->resize(1300, 500);  // the confusion matrix's class-named columns beside a cell's samples
    dock->show();
    int loaded = 0, predicted = 0, confusion = 0;
    bool loadedOk = false;
    QObject::connect(panel, &strata::ui::PredictPanel::modelLoaded, panel, [&](bool ok) {
        ++loaded;
        loadedOk = ok;
    });
    QObject::connect(panel, &strata::ui::PredictPanel::predictionReady, panel, [&] { ++predicted; });
    QObject::connect(panel, &strata::ui::PredictPanel::confusionReady, panel, [&] { ++confusion; });
    panel->loadModel();
    if (!waitUntil([&] { return loaded > 0; }, 300000) || !loadedOk) {
        std::fprintf(stderr, "strata: predict panel: %s\n", qPrintable(panel->errorText()));
        return false;
    }
    waitUntil([&] { return predicted > 0; }, 60000);
    // A text model classifies a typed sentence (with the attention strip for attention models); others sample 3.
    if (!panel->textEdit()->isHidden())
        panel->textEdit()->setText(QStringLiteral("Python bindings for the GTK toolkit, with examples and tests"));
    else
        panel->selectSample(3);
    waitUntil([&] { return predicted > 1; }, 60000);
    settle(200);
    const QPixmap top = panel->grab();
    panel->tabs()->setCurrentIndex(1);
    panel->runConfusionMatrix();
    waitUntil([&] { return confusion > 0; }, 300000);
    // The most confused pair of classes, with its samples listed beside the matrix.
    const strata::ConfusionMatrix& m = panel->confusion();
    int worstTrue = 0, worstPredicted = 1;
    for (int t = 0; t < m.classes; ++t)
        for (int p = 0; p < m.classes; ++p)
            if (t != p && m.at(t, p) > m.at(worstTrue, worstPredicted)) {
                worstTrue = t;
                worstPredicted = p;
            }
    if (m.classes > 1) panel->showCellSamples(worstTrue, worstPredicted);
    settle(300);
    const QPixmap bottom = panel->grab();
    QImage both(top.width(), top.height() + bottom.height(), QImage::Format_RGB32);
    both.fill(Qt::white);
    QPainter painter(&both);
    painter.drawPixmap(0, 0, top);
    painter.drawPixmap(0, top.height(), bottom);
    painter.end();
    return both.save(file);
}

// The Optimize panel, floated and enlarged, after a study of the trained project (variants in `dir`).
bool optimizeScreenshot(strata::ui::MainWindow& window, const QString& dir, const QString& file) {
    QDockWidget* dock = window.dockNamed(QStringLiteral("optimizeDock"));
    strata::ui::OptimizePanel* panel = window.optimizePanel();
    dock->setFloating(true);
    dock->resize(1500, 470);
    dock->show();
    panel->setOutputFolder(QDir(dir).filePath(QStringLiteral("optimized")));
    panel->sparsityEdit()->setText(QStringLiteral("80, 90"));
    panel->epochsSpin()->setValue(1);
    bool finished = false, ok = false;
    QObject::connect(panel, &strata::ui::OptimizePanel::optimizeFinished, panel, [&](bool result) {
        finished = true;
        ok = result;
    });
    panel->optimize();
    if (!waitUntil([&] { return finished; }, 1800000) || !ok) {
        std::fprintf(stderr, "strata: optimize failed: %s\n", qPrintable(panel->errorText()));
        return false;
    }
    panel->selectVariant(2);
    settle(400);
    return dock->grab().save(file);
}

}  // namespace

int main(int argc, char** argv) {
    strata::app::ensurePassiveOpenMpWait(argv);
    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("Strata"));
    QApplication::setApplicationName(QStringLiteral("Strata"));
    QApplication::setApplicationVersion(QStringLiteral("0.1.0"));
    // The desktop entry (resources/desktop): Wayland compositors match the window to it, and so its icon and name.
    QGuiApplication::setDesktopFileName(QStringLiteral("org.strata.Strata"));

#ifdef STRATA_CUDA_PLUGIN
    strata::loadCudaPlugin(strata::backendRegistry());  // or a "cuda" provider that says what is missing
#elif defined(STRATA_HAVE_CUDA)
    strata::gpu::registerCudaProvider(strata::backendRegistry());
#endif

    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral("Strata: draw, train and export neural networks."));
    parser.addHelpOption();
    parser.addVersionOption();
    parser.addPositionalArgument(QStringLiteral("project"), QStringLiteral("A .strata project to open."),
                                 QStringLiteral("[PROJECT]"));
    const QCommandLineOption screenshotOpt(QStringLiteral("screenshot"),
                                           QStringLiteral("Render the main window to FILE (PNG) and exit."),
                                           QStringLiteral("FILE"));
    const QCommandLineOption stepsOpt(QStringLiteral("train-steps"),
                                      QStringLiteral("With --screenshot: train N steps before the screenshot."),
                                      QStringLiteral("N"));
    const QCommandLineOption selectOpt(QStringLiteral("select"),
                                       QStringLiteral("Select the node named NODE (its properties show)."),
                                       QStringLiteral("NODE"));
    const QCommandLineOption exportShotOpt(QStringLiteral("screenshot-export"),
                                           QStringLiteral("Train one short epoch, export (GGUF Q8_0) and render the "
                                                          "Export dialog to FILE (PNG), then exit."),
                                           QStringLiteral("FILE"));
    const QCommandLineOption predictShotOpt(QStringLiteral("screenshot-predict"),
                                            QStringLiteral("Train one short epoch and render the Predict panel with "
                                                           "a confusion matrix to FILE (PNG), then exit."),
                                            QStringLiteral("FILE"));
    const QCommandLineOption optimizeShotOpt(QStringLiteral("screenshot-optimize"),
                                             QStringLiteral("Train one short epoch, run the Optimize panel's study and "
                                                            "render the panel to FILE (PNG), then exit."),
                                             QStringLiteral("FILE"));
    const QCommandLineOption sizeOpt(QStringLiteral("window-size"),
                                     QStringLiteral("With --screenshot: the window's size (default 1600x1000)."),
                                     QStringLiteral("WxH"));
    parser.addOption(sizeOpt);
    const QCommandLineOption stateOpt(
        QStringLiteral("state-file"),
        QStringLiteral("Keep FILE (JSON) up to date with what the views show: the "
                       "project, the runs each view uses, errors (for scripted reviews)."),
        QStringLiteral("FILE"));
    parser.addOption(stateOpt);
    parser.addOption(optimizeShotOpt);
    parser.addOption(screenshotOpt);
    parser.addOption(exportShotOpt);
    parser.addOption(predictShotOpt);
    parser.addOption(stepsOpt);
    parser.addOption(selectOpt);
    parser.process(app);

    const QString screenshot = parser.value(screenshotOpt);
    const QString exportShot = parser.value(exportShotOpt), predictShot = parser.value(predictShotOpt);
    const QString optimizeShot = parser.value(optimizeShotOpt);
    const bool needModel = !exportShot.isEmpty() || !predictShot.isEmpty() || !optimizeShot.isEmpty();
    const bool shots = !screenshot.isEmpty() || needModel;
    bool stepsOk = true;
    const qint64 trainSteps = parser.isSet(stepsOpt) ? parser.value(stepsOpt).toLongLong(&stepsOk) : 0;
    if (!stepsOk || trainSteps < 0) {
        std::fprintf(stderr, "strata: --train-steps needs a non-negative integer, got '%s'\n",
                     qPrintable(parser.value(stepsOpt)));
        return 2;
    }

    QFile style(QStringLiteral(":/strata.qss"));
    if (style.open(QIODevice::ReadOnly)) app.setStyleSheet(QString::fromUtf8(style.readAll()));

    // Interactive runs are recorded in the per-user run history (screenshots' in a scratch one). Declared
    // before the window so it outlives the dashboard that writes to it.
    std::unique_ptr<strata::ui::RunHistory> history;
    std::unique_ptr<QTemporaryDir> shotHistory;  // screenshots that train: a history of their own, removed on exit
    if (!shots) {
        history = std::make_unique<strata::ui::RunHistory>();
        // Runs of a workbench or strata-train of this host that was killed or crashed, and writes a locked
        // database left pending: said on stderr, nothing on screen.
        for (const QString& line : history->recover()) std::fprintf(stderr, "strata: %s\n", qPrintable(line));
    } else if (needModel) {
        shotHistory = std::make_unique<QTemporaryDir>();
        history = std::make_unique<strata::ui::RunHistory>(shotHistory->filePath(QStringLiteral("runs.sqlite")));
    }
    strata::ui::MainWindow window;
    if (shots)
        window.setErrorReporter(
            [](const QString&, const QString& text) { std::fprintf(stderr, "strata: %s\n", qPrintable(text)); });
    // The run history first: opening a project shows its last run and offers its runs from there.
    if (history) {
        if (history->isOpen()) {
            window.dashboard()->setRunHistory(history.get());
            window.runsPanel()->setDatabase(history->path());
            window.sweepPanel()->setDatabase(history->path());
        } else
            std::fprintf(stderr, "strata: run history unavailable: %s\n", qPrintable(history->lastError()));
    }
    const QStringList args = parser.positionalArguments();
    if (!args.isEmpty()) {
        if (!window.openFile(args.front()) && shots) return 1;
    } else {
        window.newProject(strata::ui::fashionCnnTemplate());
    }

    if (parser.isSet(selectOpt)) {
        const strata::Node* node = window.document()->graph().nodeByName(parser.value(selectOpt).toStdString());
        if (!node) {
            std::fprintf(stderr, "strata: --select: no node named '%s'\n", qPrintable(parser.value(selectOpt)));
            return 2;
        }
        window.scene()->selectNodes({node->id});
    }

    if (parser.isSet(stateOpt)) new strata::ui::StateWriter(&window, parser.value(stateOpt));
    if (!shots) {
        // 1600 x 1000 where the screen has room, and never larger than the screen's free area.
        QSize size(1600, 1000);
        if (const QScreen* screen = QGuiApplication::primaryScreen())
            size = size.boundedTo(screen->availableGeometry().size() * 0.95);
        window.resize(size);
        window.show();
        return app.exec();
    }

    // The editor screenshot gives the canvas the room; with training, the dashboard is the subject.
    if (trainSteps == 0)
        if (QDockWidget* dash = window.dockNamed(QStringLiteral("dashboardDock"))) dash->hide();
    // The size the docs show: readable at 1600 x 1000 (issue 17) and usable at 1280 x 720 (issue 34).
    QSize shotSize(1600, 1000);
    if (parser.isSet(sizeOpt)) {
        const QStringList wh = parser.value(sizeOpt).split(QLatin1Char('x'));
        const int w = wh.value(0).toInt(), h = wh.size() == 2 ? wh[1].toInt() : 0;
        if (w < 200 || h < 200) {
            std::fprintf(stderr, "strata: --window-size needs WxH, e.g. 1280x720, got '%s'\n",
                         qPrintable(parser.value(sizeOpt)));
            return 2;
        }
        shotSize = QSize(w, h);
    }
    window.resize(shotSize);
    window.show();
    settle(300);
    window.view()->showReadable();
    // The export and predict screenshots need a trained model: one epoch on at most 12,000 samples, with
    // checkpoints in a folder that is removed on exit.
    QTemporaryDir scratch;
    if (needModel) {
        strata::TrainingSettings ts = window.document()->project().training;
        ts.checkpointDir = QDir(scratch.path()).filePath(QStringLiteral("checkpoints")).toStdString();
        ts.epochs = 1;
        window.document()->setTrainingSettings(ts);
        strata::DatasetSettings ds = window.document()->project().dataset;
        if (ds.trainLimit == 0 || ds.trainLimit > 12000) ds.trainLimit = 12000;
        window.document()->setDatasetSettings(ds);
    }
    if (trainSteps > 0 || needModel) {
        strata::ui::TrainingDashboard* dash = window.dashboard();
        QEventLoop loop;
        QObject::connect(dash, &strata::ui::TrainingDashboard::trainingFinished, &loop, &QEventLoop::quit);
        QTimer::singleShot(0, dash, [dash, trainSteps] { dash->startTraining(trainSteps); });
        QTimer::singleShot(600000, &loop, &QEventLoop::quit);  // a run that hangs must not hang the docs build
        loop.exec();
        settle(1500);  // the dashboard drains its event queue on a UI timer
    }
    settle(200);
    if (!screenshot.isEmpty()) {
        if (!window.grab().save(screenshot)) {
            std::fprintf(stderr, "strata: cannot write %s\n", qPrintable(screenshot));
            return 1;
        }
        std::printf("strata: wrote %s\n", qPrintable(screenshot));
    }
    if (!exportShot.isEmpty()) {
        if (!exportScreenshot(window, scratch.path(), exportShot)) {
            std::fprintf(stderr, "strata: cannot write %s\n", qPrintable(exportShot));
            return 1;
        }
        std::printf("strata: wrote %s\n", qPrintable(exportShot));
    }
    if (!predictShot.isEmpty()) {
        if (!predictScreenshot(window, predictShot)) {
            std::fprintf(stderr, "strata: cannot write %s\n", qPrintable(predictShot));
            return 1;
        }
        std::printf("strata: wrote %s\n", qPrintable(predictShot));
    }
    if (!optimizeShot.isEmpty()) {
        if (!optimizeScreenshot(window, scratch.path(), optimizeShot)) {
            std::fprintf(stderr, "strata: cannot write %s\n", qPrintable(optimizeShot));
            return 1;
        }
        std::printf("strata: wrote %s\n", qPrintable(optimizeShot));
    }
    return 0;
}
