// strata: the workbench GUI. Wiring only: parse the command line, register
// the CUDA provider when built with CUDA, open the project and show the
// main window. --screenshot renders the window to a PNG and exits (docs, CI).
//
//   strata [PROJECT] [--screenshot FILE.png] [--train-steps N] [--select NODE]
#include "app/OpenMpWaitPolicy.h"

#include <memory>

#include <QApplication>
#include <QCommandLineParser>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFile>
#include <QTimer>

#include <cstdio>

#include "core/backend/BackendRegistry.h"
#include "ui/GraphScene.h"
#include "ui/GraphView.h"
#include "ui/MainWindow.h"
#include "ui/RunHistory.h"
#include "ui/ProjectDocument.h"
#include "ui/Templates.h"
#if __has_include("ui/TrainingDashboard.h")
#include "ui/TrainingDashboard.h"
#define STRATA_GUI_HAS_DASHBOARD 1
#endif

#ifdef STRATA_HAVE_CUDA
#include "gpu/CudaProvider.h"
#endif

namespace {

// Lets queued signals, timers and repaints run for a while.
void settle(int ms) {
    QElapsedTimer t;
    t.start();
    while (t.elapsed() < ms)
        QApplication::processEvents(QEventLoop::AllEvents, 20);
}

}  // namespace

int main(int argc, char** argv) {
    strata::app::ensurePassiveOpenMpWait(argv);
    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("Strata"));
    QApplication::setApplicationName(QStringLiteral("Strata"));
    QApplication::setApplicationVersion(QStringLiteral("0.1.0"));

#ifdef STRATA_HAVE_CUDA
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
    parser.addOption(screenshotOpt);
    parser.addOption(stepsOpt);
    parser.addOption(selectOpt);
    parser.process(app);

    const QString screenshot = parser.value(screenshotOpt);
    bool stepsOk = true;
    const qint64 trainSteps = parser.isSet(stepsOpt) ? parser.value(stepsOpt).toLongLong(&stepsOk) : 0;
    if (!stepsOk || trainSteps < 0) {
        std::fprintf(stderr, "strata: --train-steps needs a non-negative integer, got '%s'\n",
                     qPrintable(parser.value(stepsOpt)));
        return 2;
    }

    QFile style(QStringLiteral(":/strata.qss"));
    if (style.open(QIODevice::ReadOnly))
        app.setStyleSheet(QString::fromUtf8(style.readAll()));

    // Interactive runs are recorded in the per-user run history (screenshots are not). Declared
    // before the window so it outlives the dashboard that writes to it.
    std::unique_ptr<strata::ui::RunHistory> history;
    if (screenshot.isEmpty()) history = std::make_unique<strata::ui::RunHistory>();
    strata::ui::MainWindow window;
    if (!screenshot.isEmpty())
        window.setErrorReporter([](const QString&, const QString& text) {
            std::fprintf(stderr, "strata: %s\n", qPrintable(text));
        });
    const QStringList args = parser.positionalArguments();
    if (!args.isEmpty()) {
        if (!window.openFile(args.front()) && !screenshot.isEmpty())
            return 1;
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

    if (screenshot.isEmpty()) {
#ifdef STRATA_GUI_HAS_DASHBOARD
        if (history->isOpen())
            window.dashboard()->setRunHistory(history.get());
        else
            std::fprintf(stderr, "strata: run history unavailable: %s\n", qPrintable(history->lastError()));
#endif
        window.resize(1400, 900);
        window.show();
        return app.exec();
    }

    // The editor screenshot gives the canvas the room; with training, the dashboard is the subject.
    if (trainSteps == 0)
        if (QDockWidget* dash = window.dockNamed(QStringLiteral("dashboardDock")))
            dash->hide();
    window.resize(1400, 900);
    window.show();
    settle(300);
    window.view()->zoomToFit();
    if (trainSteps > 0) {
#ifdef STRATA_GUI_HAS_DASHBOARD
        strata::ui::TrainingDashboard* dash = window.dashboard();
        QEventLoop loop;
        QObject::connect(dash, &strata::ui::TrainingDashboard::trainingFinished, &loop, &QEventLoop::quit);
        QTimer::singleShot(0, dash, [dash, trainSteps] { dash->startTraining(trainSteps); });
        QTimer::singleShot(600000, &loop, &QEventLoop::quit);  // a run that hangs must not hang the docs build
        loop.exec();
        settle(1500);  // the dashboard drains its event queue on a UI timer
#else
        std::fprintf(stderr, "strata: this build has no training dashboard; --train-steps ignored\n");
#endif
    }
    settle(200);
    if (!window.grab().save(screenshot)) {
        std::fprintf(stderr, "strata: cannot write %s\n", qPrintable(screenshot));
        return 1;
    }
    std::printf("strata: wrote %s\n", qPrintable(screenshot));
    return 0;
}
