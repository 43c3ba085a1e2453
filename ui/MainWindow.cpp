// MainWindow: menus, toolbar, canvas and docks of the workbench.
#include "ui/MainWindow.h"

#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QCloseEvent>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDir>
#include <QDockWidget>
#include <QEventLoop>
#include <QFileDialog>
#include <QFileInfo>
#include <QLabel>
#include <QListWidget>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QProgressDialog>
#include <QPushButton>
#include <QScrollArea>
#include <QSettings>
#include <QStatusBar>
#include <QStyle>
#include <QToolBar>
#include <QUndoStack>
#include <QVBoxLayout>
#include <algorithm>
#include <utility>

#include "ui/DataChecker.h"
#include "ui/DatasetPanel.h"
#include "ui/DevicePicker.h"
#include "ui/ExportDialog.h"
#include "ui/FeatureMapPanel.h"
#include "ui/GraphScene.h"
#include "ui/GraphView.h"
#include "ui/HistogramPanel.h"
#include "ui/LayerHealthOverlay.h"
#include "ui/LayerPalette.h"
#include "ui/LrFinderDialog.h"
#include "ui/ModelImporter.h"
#include "ui/OptimizePanel.h"
#include "ui/PredictPanel.h"
#include "ui/ProblemsPanel.h"
#include "ui/ProfileOverlay.h"
#include "ui/ProjectorPanel.h"
#include "ui/PropertyPanel.h"
#include "ui/RunsPanel.h"
#include "ui/SweepPanel.h"
#include "ui/TaskPredictView.h"
#include "ui/TrainingDashboard.h"
#include "ui/TrainingSettingsPanel.h"
#include "ui/WorkbenchInput.h"
#include "ui/base/EngineWorker.h"
#include "ui/base/Examples.h"
#include "ui/base/ProjectDocument.h"
#include "ui/base/Templates.h"

namespace strata::ui {

namespace {
constexpr int kMaxRecent = 8;
const char* kRecentKey = "recentFiles";
const char* kFileFilter = "Strata projects (*.strata);;All files (*)";
}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent), m_doc(new ProjectDocument(this)) {
    setObjectName(QStringLiteral("StrataMainWindow"));
    m_scene = new GraphScene(m_doc, this);
    m_view = new GraphView(m_scene, this);
    m_view->setObjectName(QStringLiteral("graphView"));
    setCentralWidget(m_view);
    setDockNestingEnabled(true);

    createDocks();
    createActions();
    createMenus();
    connectPanelState();
    setUpKeyboard();

    connect(m_doc, &ProjectDocument::fileChanged, this, &MainWindow::updateTitle);
    connect(m_view, &GraphView::statusMessage, this, [this](const QString& m) { statusBar()->showMessage(m, 6000); });
    connect(m_palette, &LayerPalette::layerActivated, this, [this](const QString& type) {
        m_view->addLayerAtCentre(type);
        m_view->setFocus();
    });
    connect(m_problems, &ProblemsPanel::problemActivated, this, &MainWindow::showNode);
    connect(m_doc, &ProjectDocument::analysisChanged, this, [this] {
        const auto& a = m_doc->analysis();
        statusBar()->showMessage(a.ok() ? tr("Graph valid: %1 nodes, %2 parameters")
                                              .arg(m_doc->graph().nodes().size())
                                              .arg(QLocale(QLocale::English).toString(qint64(a.parameterCount)))
                                        : tr("%n problem(s) in the graph", nullptr, int(a.problems.size())));
    });
    updateTitle();
    statusBar()->showMessage(tr("Ready"));
}

MainWindow::~MainWindow() {
    // The scene and the document die among this window's children, after or before the panels that
    // observe them; no signal may reach a half-destroyed panel.
    m_scene->disconnect();
    m_doc->disconnect();
}

namespace {
// The QSettings key of a project file's dock layout.
QString layoutKey(const QString& projectPath) {
    return QStringLiteral("layout/") + QFileInfo(projectPath).absoluteFilePath();
}
}  // namespace

void MainWindow::createDocks() {
    auto dock = [this](const QString& title, const QString& name, QWidget* widget, Qt::DockWidgetArea area) {
        auto* d = new QDockWidget(title, this);
        d->setObjectName(name);
        d->setWidget(widget);
        addDockWidget(area, d);
        m_docks << d;
        return d;
    };
    // Forms scroll instead of squashing their fields when an error line appears, and their minimum size
    // never pushes the window past the screen (selecting a Conv2D grew it beyond 1000 px).
    auto scrolled = [this](QWidget* form) {
        auto* area = new QScrollArea(this);
        area->setWidget(form);
        area->setWidgetResizable(true);
        area->setFrameShape(QFrame::NoFrame);
        area->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
        return area;
    };
    m_palette = new LayerPalette(this);
    QDockWidget* paletteDock = dock(tr("Layers"), QStringLiteral("paletteDock"), m_palette, Qt::LeftDockWidgetArea);
    m_properties = new PropertyPanel(m_doc, m_scene, this);
    QDockWidget* propDock =
        dock(tr("Properties"), QStringLiteral("propertiesDock"), scrolled(m_properties), Qt::RightDockWidgetArea);
    m_problems = new ProblemsPanel(m_doc, this);
    QDockWidget* problemsDock =
        dock(tr("Problems"), QStringLiteral("problemsDock"), m_problems, Qt::RightDockWidgetArea);
    splitDockWidget(propDock, problemsDock, Qt::Vertical);

    // Dataset and Training sit with the dashboard: the dataset's form and preview side by side need the width
    // (squeezed into the right column at 1280 x 720 they showed a few lines of each).
    m_dataset = new DatasetPanel(m_doc, this);
    QDockWidget* datasetDock =
        dock(tr("Dataset"), QStringLiteral("datasetDock"), scrolled(m_dataset), Qt::BottomDockWidgetArea);
    m_trainingSettings = new TrainingSettingsPanel(m_doc, this);
    QDockWidget* settingsDock = dock(tr("Training"), QStringLiteral("trainingSettingsDock"),
                                     scrolled(m_trainingSettings), Qt::BottomDockWidgetArea);

    m_devices = new DevicePicker(this);
    QDockWidget* devicesDock = dock(tr("Devices"), QStringLiteral("devicesDock"), m_devices, Qt::LeftDockWidgetArea);
    splitDockWidget(paletteDock, devicesDock, Qt::Vertical);

    m_dashboard = new TrainingDashboard(m_doc, this);
    m_dashboard->setDevicePicker(m_devices);
    // The dashboard's charts have a large minimum height; a scroll area keeps it from forcing the
    // window taller than the screen when the dock is short.
    auto* scroll = new QScrollArea(this);
    scroll->setWidget(m_dashboard);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    QDockWidget* dashDock =
        dock(tr("Training dashboard"), QStringLiteral("dashboardDock"), scroll, Qt::BottomDockWidgetArea);
    m_predict = new PredictPanel(m_doc, this);
    // Tasks other than classification: their own tab in the Predict panel, evaluated whenever it loads a model.
    m_taskPredict = new TaskPredictView(m_predict);
    m_predict->tabs()->addTab(m_taskPredict, tr("Task"));
    connect(m_predict, &PredictPanel::modelLoaded, this, [this](bool ok) {
        if (ok)
            m_taskPredict->setModel(m_predict->modelSource(), m_doc->filePath());
        else
            m_taskPredict->clear();
    });
    QDockWidget* predictDock = dock(tr("Predict"), QStringLiteral("predictDock"), m_predict, Qt::BottomDockWidgetArea);
    tabifyDockWidget(dashDock, predictDock);
    m_optimize = new OptimizePanel(m_doc, this);
    QDockWidget* optimizeDock =
        dock(tr("Optimize"), QStringLiteral("optimizeDock"), m_optimize, Qt::BottomDockWidgetArea);
    tabifyDockWidget(predictDock, optimizeDock);
    // The Runs view: its selection overlays curves in the dashboard's charts.
    m_runs = new RunsPanel(this);
    m_runs->setDashboard(m_dashboard);
    m_runs->setDocument(m_doc);  // the open project's runs; its overlays go when another opens
    QDockWidget* runsDock = dock(tr("Runs"), QStringLiteral("runsDock"), m_runs, Qt::BottomDockWidgetArea);
    tabifyDockWidget(optimizeDock, runsDock);
    connect(m_dashboard, &TrainingDashboard::trainingStarted, m_runs, &RunsPanel::clearOverlay);
    connect(m_dashboard, &TrainingDashboard::trainingFinished, m_runs, &RunsPanel::reload);
    // The project's sweep: trial table and parameter-vs-metric plot; its trials are runs in the Runs view.
    m_sweep = new SweepPanel(m_doc, this);
    QDockWidget* sweepDock = dock(tr("Sweep"), QStringLiteral("sweepDock"), m_sweep, Qt::BottomDockWidgetArea);
    tabifyDockWidget(runsDock, sweepDock);
    tabifyDockWidget(sweepDock, datasetDock);
    tabifyDockWidget(datasetDock, settingsDock);
    // Weight and gradient histograms of the run under way; their verdicts as badges on the canvas.
    auto* histograms = new HistogramPanel(this);
    QDockWidget* histogramsDock =
        dock(tr("Histograms"), QStringLiteral("histogramsDock"), histograms, Qt::BottomDockWidgetArea);
    tabifyDockWidget(settingsDock, histogramsDock);
    // Inside the Predict dock's model at the node selected on the canvas: filters, feature maps, activations.
    auto* featureMaps = new FeatureMapPanel(m_doc, m_scene, m_predict, this);
    tabifyDockWidget(histogramsDock, dock(tr("Feature maps"), QStringLiteral("featureMapsDock"), featureMaps,
                                          Qt::BottomDockWidgetArea));
    connect(m_dashboard->worker(), &EngineWorker::histogramsReported, histograms, &HistogramPanel::addReport);
    connect(m_dashboard, &TrainingDashboard::trainingStarted, this, [this, histograms] {
        histograms->clear();
        clearLayerHealth(m_scene);
    });
    connect(histograms, &HistogramPanel::healthChanged, this,
            [this](const std::vector<strata::LayerHealth>& health) { applyLayerHealth(m_scene, health); });
    // The embedding projector: the Predict dock's model (or the newest run's) on the validation samples.
    auto* projector = new ProjectorPanel(m_doc, m_predict, this);
    QDockWidget* projectorDock =
        dock(tr("Projector"), QStringLiteral("projectorDock"), projector, Qt::BottomDockWidgetArea);
    tabifyDockWidget(histogramsDock, projectorDock);
    connect(projector, &ProjectorPanel::sampleSelected, this, [this](qint64 sample) {
        if (m_predict->hasModel()) m_predict->selectSample(int(sample));
    });
    connect(m_sweep, &SweepPanel::sweepFinished, m_runs, &RunsPanel::reload);
    connect(m_doc, &ProjectDocument::projectReset, m_sweep, [this] { m_sweep->loadResults(); });
    // A run's project opens as a new, unsaved project of its own: its runs would otherwise be the run's project's.
    connect(m_runs, &RunsPanel::openProjectRequested, this, [this](strata::Project project, const QString&) {
        project.id.clear();
        newProject(project);
    });
    connect(m_optimize, &OptimizePanel::exportRequested, this, [this](const QString& checkpoint, bool int8) {
        showExportDialog();
        m_exportDialog->setSource(checkpoint);
        if (int8) {
            m_exportDialog->setFormat(ExportFormat::Onnx);
            m_exportDialog->setPrecision(ExportPrecision::Int8);
        }
    });
    connect(m_optimize, &OptimizePanel::openProjectRequested, this, [this](const QString& file) { openFile(file); });
    dashDock->raise();
    connect(m_dashboard, &TrainingDashboard::trainingFinished, m_predict, &PredictPanel::projectTrained);
    // The graph is locked while a run is active: the run trains the graph it started with.
    connect(m_dashboard, &TrainingDashboard::trainingStarted, this, [this] { setGraphLocked(true); });
    connect(m_dashboard, &TrainingDashboard::trainingFinished, this, [this] { setGraphLocked(false); });
    resizeDocks({dashDock}, {400}, Qt::Vertical);
    resizeDocks({paletteDock, devicesDock}, {480, 200}, Qt::Vertical);
    resizeDocks({paletteDock}, {210}, Qt::Horizontal);
    resizeDocks({propDock}, {340}, Qt::Horizontal);
    resizeDocks({propDock, problemsDock}, {420, 180}, Qt::Vertical);
    keepPanelsWithinSmallScreens();
}

void MainWindow::keepPanelsWithinSmallScreens() {
    // No panel's minimum may hold the window wider or taller than a 1024 x 700 screen (the Optimize panel's
    // held it at 1337 px): a dock narrower than its panel scrolls it, in both directions, rather than
    // clipping it or growing the window.
    for (QDockWidget* d : std::as_const(m_docks)) {
        if (auto* area = qobject_cast<QScrollArea*>(d->widget())) {
            area->setHorizontalScrollBarPolicy(Qt::ScrollBarAsNeeded);
            continue;
        }
        QWidget* panel = d->widget();
        auto* area = new QScrollArea(d);
        area->setFrameShape(QFrame::NoFrame);
        area->setWidgetResizable(true);
        area->setWidget(panel);
        d->setWidget(area);
    }
}

void MainWindow::fitDocksToWindow() {
    // Shares of the window for the docks around the canvas: what the 1600 x 1000 layout gives them, less on
    // a smaller screen so that the canvas and every panel stay usable at 1280 x 720 (a 400 px dashboard
    // left the right column two lines of properties).
    auto share = [](int total, double fraction, int lo, int hi) { return std::clamp(int(total * fraction), lo, hi); };
    const int w = width(), h = height();
    QDockWidget *palette = dockNamed(QStringLiteral("paletteDock")),
                *devices = dockNamed(QStringLiteral("devicesDock"));
    QDockWidget *props = dockNamed(QStringLiteral("propertiesDock")),
                *problems = dockNamed(QStringLiteral("problemsDock"));
    resizeDocks({dockNamed(QStringLiteral("dashboardDock"))}, {share(h, 0.44, 200, 400)}, Qt::Vertical);
    resizeDocks({palette}, {share(w, 0.15, 160, 210)}, Qt::Horizontal);
    resizeDocks({props}, {share(w, 0.25, 260, 340)}, Qt::Horizontal);
    const int top = h - share(h, 0.44, 200, 400);
    resizeDocks({palette, devices}, {top - share(top, 0.3, 100, 200), share(top, 0.3, 100, 200)}, Qt::Vertical);
    resizeDocks({props, problems}, {top - share(top, 0.35, 120, 180), share(top, 0.35, 120, 180)}, Qt::Vertical);
}

void MainWindow::showEvent(QShowEvent* event) {
    QMainWindow::showEvent(event);
    // Once, for the window's first size; a layout restored for the project (openFile) is left as it was.
    if (std::exchange(m_docksFitted, true)) return;
    if (!m_doc->filePath().isEmpty() && QSettings().contains(layoutKey(m_doc->filePath()))) return;
    fitDocksToWindow();
}

void MainWindow::createActions() {
    QStyle* s = style();
    auto make = [this](const QString& text, const QKeySequence& key, auto slot, const QIcon& icon = QIcon()) {
        auto* a = new QAction(icon, text, this);
        if (!key.isEmpty()) a->setShortcut(key);
        connect(a, &QAction::triggered, this, slot);
        return a;
    };
    m_newAct = make(
        tr("&New"), QKeySequence::New, [this] { newProject(strata::Project{}); }, s->standardIcon(QStyle::SP_FileIcon));
    m_templateAct = make(tr("New from &Template..."), QKeySequence(tr("Ctrl+Shift+N")), &MainWindow::showTemplateDialog,
                         s->standardIcon(QStyle::SP_FileDialogNewFolder));
    m_openAct =
        make(tr("&Open..."), QKeySequence::Open, &MainWindow::open, s->standardIcon(QStyle::SP_DialogOpenButton));
    m_openExampleAct = make(tr("Open &Example..."), QKeySequence(), &MainWindow::openExample);
    m_saveAct = make(
        tr("&Save"), QKeySequence::Save, [this] { save(); }, s->standardIcon(QStyle::SP_DialogSaveButton));
    m_saveAsAct = make(tr("Save &As..."), QKeySequence::SaveAs, [this] { saveAsDialog(); });
    m_exportAct = make(tr("&Export Model..."), QKeySequence(tr("Ctrl+E")), &MainWindow::showExportDialog);
    m_importAct = make(tr("&Import Model..."), QKeySequence(tr("Ctrl+I")), &MainWindow::importModel);
    m_importAct->setObjectName(QStringLiteral("importModelAction"));
    m_quitAct = make(tr("&Quit"), QKeySequence::Quit, [this] { close(); });

    m_undoAct = m_doc->undoStack()->createUndoAction(this, tr("&Undo"));
    // The stack re-enables its actions as it changes; a locked graph keeps them off.
    connect(m_doc->undoStack(), &QUndoStack::canUndoChanged, this, [this] {
        if (m_doc->graphLocked()) m_undoAct->setEnabled(false);
    });
    connect(m_doc->undoStack(), &QUndoStack::canRedoChanged, this, [this] {
        if (m_doc->graphLocked()) m_redoAct->setEnabled(false);
    });
    m_undoAct->setShortcut(QKeySequence::Undo);
    // The toolbar shows a fixed label (the menu keeps "Undo Add dense1"), so its buttons do not jump.
    m_undoAct->setIconText(tr("Undo"));
    m_undoAct->setIcon(s->standardIcon(QStyle::SP_ArrowBack));
    m_redoAct = m_doc->undoStack()->createRedoAction(this, tr("&Redo"));
    m_redoAct->setShortcuts({QKeySequence::Redo, QKeySequence(tr("Ctrl+Y"))});
    m_redoAct->setIconText(tr("Redo"));
    m_redoAct->setIcon(s->standardIcon(QStyle::SP_ArrowForward));
    m_cutAct = make(tr("Cu&t"), QKeySequence::Cut, &MainWindow::cut);
    m_copyAct = make(tr("&Copy"), QKeySequence::Copy, &MainWindow::copy);
    m_pasteAct = make(tr("&Paste"), QKeySequence::Paste, &MainWindow::paste);
    m_deleteAct =
        make(tr("&Delete"), QKeySequence::Delete, &MainWindow::deleteSelection, s->standardIcon(QStyle::SP_TrashIcon));
    m_selectAllAct = make(tr("Select &All"), QKeySequence::SelectAll, &MainWindow::selectAll);
    m_layoutAct = make(tr("Auto-&layout"), QKeySequence(tr("Ctrl+L")), &MainWindow::autoLayout,
                       s->standardIcon(QStyle::SP_FileDialogListView));
    // Canvas-only shortcuts: Delete and Ctrl+C must keep working in the panels' line edits.
    for (QAction* a : {m_cutAct, m_copyAct, m_pasteAct, m_deleteAct, m_selectAllAct}) {
        a->setShortcutContext(Qt::WidgetWithChildrenShortcut);
        m_view->addAction(a);
    }

    m_zoomInAct = make(tr("Zoom &In"), QKeySequence::ZoomIn, [this] { m_view->zoomIn(); });
    m_zoomOutAct = make(tr("Zoom &Out"), QKeySequence::ZoomOut, [this] { m_view->zoomOut(); });
    m_zoomFitAct = make(
        tr("Zoom to &Fit"), QKeySequence(tr("Ctrl+0")), [this] { m_view->zoomToFit(); },
        s->standardIcon(QStyle::SP_TitleBarMaxButton));
    m_zoomResetAct = make(tr("&Actual Size"), QKeySequence(tr("Ctrl+1")), [this] { m_view->resetZoom(); });

    m_trainAct = make(
        tr("&Start Training"), QKeySequence(tr("F5")), [this] { m_dashboard->startTraining(); },
        s->standardIcon(QStyle::SP_MediaPlay));
    m_pauseAct = make(
        tr("&Pause / Resume"), QKeySequence(tr("F6")), [this] { m_dashboard->togglePause(); },
        s->standardIcon(QStyle::SP_MediaPause));
    m_stopAct = make(
        tr("S&top"), QKeySequence(tr("Shift+F5")), [this] { m_dashboard->stopTraining(); },
        s->standardIcon(QStyle::SP_MediaStop));
    m_checkpointAct = make(tr("Save &Checkpoint Now"), QKeySequence(), [this] { m_dashboard->saveCheckpointNow(); });
    // Profile Layers: a few training steps on the project's device, then the canvas shows each layer's time.
    m_profiler = new ProfileRunner(this);
    m_profileAct = make(tr("&Profile Layers"), QKeySequence(tr("F7")), [this] {
        if (m_profiler->start(m_doc->project(), m_doc->filePath())) {
            m_profileAct->setEnabled(false);
            statusBar()->showMessage(tr("Profiling each layer..."));
        }
    });
    connect(m_profiler, &ProfileRunner::finished, this, [this] {
        m_profileAct->setEnabled(true);
        applyProfile(m_scene, m_profiler->report());
        statusBar()->showMessage(profileSummary(m_profiler->report()), 30000);
    });
    connect(m_profiler, &ProfileRunner::failed, this, [this](const QString& message) {
        m_profileAct->setEnabled(true);
        m_lastError = message;
        statusBar()->showMessage(tr("Profile failed: %1").arg(message), 15000);
    });
    m_aboutAct = make(tr("&About Strata"), QKeySequence(), [this] {
        QMessageBox::about(this, tr("About Strata"),
                           tr("<b>Strata</b> %1<br>A workbench for drawing, training and exporting neural "
                              "networks.<br><br>Drag layers from the palette, connect an output port (bottom) to "
                              "an input port (top); edges show the tensor shape they carry.")
                               .arg(QApplication::applicationVersion()));
    });
}

void MainWindow::createMenus() {
    QMenu* file = menuBar()->addMenu(tr("&File"));
    file->addActions({m_newAct, m_templateAct, m_openAct, m_openExampleAct});
    m_recentMenu = file->addMenu(tr("Open &Recent"));
    m_recentMenu->setObjectName(QStringLiteral("recentMenu"));
    file->addSeparator();
    file->addActions({m_saveAct, m_saveAsAct});
    file->addSeparator();
    file->addAction(m_importAct);
    file->addAction(m_exportAct);
    file->addSeparator();
    file->addAction(m_quitAct);
    rebuildRecentMenu();

    QMenu* edit = menuBar()->addMenu(tr("&Edit"));
    edit->addActions({m_undoAct, m_redoAct});
    edit->addSeparator();
    edit->addActions({m_cutAct, m_copyAct, m_pasteAct, m_deleteAct});
    edit->addSeparator();
    edit->addActions({m_selectAllAct, m_layoutAct});

    m_viewMenu = menuBar()->addMenu(tr("&View"));
    m_viewMenu->addActions({m_zoomInAct, m_zoomOutAct, m_zoomFitAct, m_zoomResetAct});
    m_viewMenu->addSeparator();
    for (QDockWidget* d : std::as_const(m_docks)) m_viewMenu->addAction(d->toggleViewAction());

    QMenu* train = menuBar()->addMenu(tr("&Train"));
    train->addActions({m_trainAct, m_pauseAct, m_stopAct, m_checkpointAct, m_profileAct});
    // The learning-rate range test, in its own window (LrFinderDialog): one at a time, kept for its last curve.
    QAction* lrFind = train->addAction(tr("Find &Learning Rate..."));
    lrFind->setObjectName(QStringLiteral("findLearningRateAction"));
    connect(lrFind, &QAction::triggered, this, [this] {
        auto* dialog = findChild<LrFinderDialog*>();
        if (!dialog) dialog = new LrFinderDialog(m_doc, this);
        dialog->show();
        dialog->raise();
        if (!dialog->isRunning()) dialog->start();
    });

    QMenu* help = menuBar()->addMenu(tr("&Help"));
    help->setObjectName(QStringLiteral("helpMenu"));
    // A short page for a first session, and the keyboard shortcuts, both from the actions themselves.
    connect(help->addAction(tr("&Getting Started")), &QAction::triggered, this,
            [this] { QMessageBox::information(this, tr("Getting started"), gettingStartedText()); });
    connect(help->addAction(tr("&Keyboard Shortcuts")), &QAction::triggered, this,
            [this] { QMessageBox::information(this, tr("Keyboard shortcuts"), shortcutsText()); });
    help->addSeparator();
    help->addAction(m_aboutAct);

    QToolBar* bar = addToolBar(tr("Main"));
    bar->setObjectName(QStringLiteral("mainToolBar"));
    bar->setIconSize(QSize(18, 18));
    bar->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    // Training comes right after the file group: at 1024 px the end of the bar folds into its overflow menu,
    // and Tab reaches Start from the first button in a few steps.
    bar->addActions({m_templateAct, m_openAct, m_saveAct});
    bar->addSeparator();
    bar->addActions({m_trainAct, m_pauseAct, m_stopAct});
    bar->addSeparator();
    bar->addActions({m_undoAct, m_redoAct, m_deleteAct});
    bar->addSeparator();
    bar->addActions({m_layoutAct, m_zoomFitAct});
    m_trainAct->setIconText(tr("Start"));
    m_pauseAct->setIconText(tr("Pause"));
}

void MainWindow::connectPanelState() {
    // The Training panel's steps per epoch come from the data as previewed or checked (it assumed 100 with a
    // preview loaded).
    connect(m_dataset, &DatasetPanel::trainSampleCountKnown, m_trainingSettings,
            &TrainingSettingsPanel::setTrainSampleCount);
    connect(m_dashboard, &TrainingDashboard::startRefused, this, &MainWindow::showStartRefusal);

    // The Check: the data against the graph, listed in Problems with a fix per mismatch. Start asks it first,
    // so a run whose data does not fit is refused with the whole list before it starts.
    m_checker = new DataChecker(m_doc, this);
    m_problems->setDataChecker(m_checker);
    connect(m_checker, &DataChecker::trainSampleCountKnown, m_trainingSettings,
            &TrainingSettingsPanel::setTrainSampleCount);
    m_dashboard->setStartCheck([this](qint64 maxSteps) {
        const DataChecker::Verdict verdict = m_checker->startVerdict(maxSteps);
        if (!verdict.refusal.isEmpty()) showProblems();
        return TrainingDashboard::StartVerdict{verdict.refusal, verdict.waiting};
    });
    connect(m_checker, &DataChecker::startRequested, m_dashboard,
            [this](qint64 maxSteps) { m_dashboard->startTraining(maxSteps); });
    connect(m_checker, &DataChecker::checked, this, [this] {
        if (m_checker->state() == DataChecker::State::Checked && m_checker->mismatches().empty())
            m_dashboard->dropStartRefusal();
    });
    m_checkAct =
        new QAction(style()->standardIcon(QStyle::SP_DialogApplyButton), tr("&Check Data Against Graph"), this);
    m_checkAct->setIconText(tr("Check"));
    m_checkAct->setShortcut(QKeySequence(tr("Ctrl+K")));
    m_checkAct->setToolTip(tr("Compare the data's sample shape, classes and vocabulary with the graph (Ctrl+K)"));
    connect(m_checkAct, &QAction::triggered, this, [this] {
        showProblems();
        m_checker->check();
    });
    for (QAction* menu : menuBar()->actions())
        if (menu->menu() && menu->text() == tr("&Train")) menu->menu()->insertAction(m_pauseAct, m_checkAct);
    if (auto* bar = findChild<QToolBar*>(QStringLiteral("mainToolBar"))) {
        const QList<QAction*> actions = bar->actions();
        const qsizetype stop = actions.indexOf(m_stopAct);
        bar->insertAction(stop + 1 < actions.size() ? actions[stop + 1] : nullptr, m_checkAct);
    }
}

void MainWindow::showProblems() {
    if (QDockWidget* problems = dockNamed(QStringLiteral("problemsDock"))) {
        problems->show();
        problems->raise();
    }
}

void MainWindow::showStartRefusal(const QString& reason) {
    // Where the user is looking: the status bar, and the dashboard's banner brought to the front (F5 pressed
    // with the Dataset tab in front said nothing).
    statusBar()->showMessage(tr("Not started: %1").arg(reason), 20000);
    if (QDockWidget* dash = dockNamed(QStringLiteral("dashboardDock"))) {
        dash->show();
        dash->raise();
    }
}

void MainWindow::setUpKeyboard() {
    // Export, Start, Pause, Stop and Profile work with the focus in any field (WorkbenchInput), and from a
    // floating dock too.
    for (QAction* a : {m_exportAct, m_trainAct, m_pauseAct, m_stopAct, m_profileAct})
        a->setShortcutContext(Qt::ApplicationShortcut);
    WorkbenchInput::instance()->addGlobalShortcuts({m_exportAct, m_trainAct, m_pauseAct, m_stopAct, m_profileAct});
    // The toolbar's buttons take Tab like any button (Qt leaves them out of the focus chain), so Start is a
    // few Tabs from the first one.
    if (auto* bar = findChild<QToolBar*>(QStringLiteral("mainToolBar")))
        for (QAction* a : bar->actions())
            if (QWidget* button = bar->widgetForAction(a); button && !a->isSeparator())
                button->setFocusPolicy(Qt::TabFocus);
}

QDockWidget* MainWindow::dockNamed(const QString& objectName) const {
    for (QDockWidget* d : m_docks)
        if (d->objectName() == objectName) return d;
    return nullptr;
}

void MainWindow::updateTitle() {
    setWindowTitle(tr("%1[*] - Strata").arg(m_doc->displayName()));
    setWindowModified(m_doc->isModified());
}

void MainWindow::reportError(const QString& title, const QString& text) {
    m_lastError = text;
    statusBar()->showMessage(text, 10000);
    if (m_reportError)
        m_reportError(title, text);
    else
        QMessageBox::critical(this, title, text);
}

bool MainWindow::maybeSave() {
    if (!m_doc->isModified()) return true;
    SaveChoice choice;
    if (m_savePrompt) {
        choice = m_savePrompt(m_doc->displayName());
    } else {
        const auto answer = QMessageBox::warning(
            this, tr("Unsaved changes"), tr("%1 has unsaved changes. Save them?").arg(m_doc->displayName()),
            QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel, QMessageBox::Save);
        choice = answer == QMessageBox::Save      ? SaveChoice::Save
                 : answer == QMessageBox::Discard ? SaveChoice::Discard
                                                  : SaveChoice::Cancel;
    }
    switch (choice) {
        case SaveChoice::Save: return save();
        case SaveChoice::Discard: return true;
        case SaveChoice::Cancel: break;
    }
    return false;
}

QString MainWindow::gettingStartedText() const {
    return tr(
        "<h3>Getting started</h3><ol>"
        "<li><b>Start from a template</b> (File &gt; New from Template) or drag layers from the Layers "
        "list onto the canvas and connect an output port to an input port.</li>"
        "<li><b>Point it at data</b> in the Dataset tab: picking the training images of an IDX folder "
        "(Fashion-MNIST) fills in the labels and validation files.</li>"
        "<li><b>Check that it fits</b>: the Properties panel shows the memory a run needs on the chosen "
        "device and the largest batch that fits.</li>"
        "<li><b>Train</b> (F5). Every run keeps its weights in a run folder beside the project; Stop "
        "(Shift+F5) keeps the weights it had.</li>"
        "<li><b>Export</b> (Ctrl+E) and <b>predict</b> in the Predict tab: both use the latest run's "
        "checkpoint by default.</li></ol>");
}

QString MainWindow::shortcutsText() const {
    QString rows;
    for (const QAction* a : findChildren<QAction*>()) {
        if (a->shortcut().isEmpty() || a->text().isEmpty()) continue;
        rows += QStringLiteral("<tr><td>%1</td><td><b>%2</b></td></tr>")
                    .arg(QString(a->text()).remove(QLatin1Char('&')).toHtmlEscaped(),
                         a->shortcut().toString(QKeySequence::NativeText).toHtmlEscaped());
    }
    return tr("<h3>Keyboard shortcuts</h3><table cellspacing='6'>%1</table>"
              "<p>On the canvas: Delete removes the selection; the mouse wheel zooms; drag empty canvas with "
              "the middle button to pan.</p>")
        .arg(rows);
}

void MainWindow::setGraphLocked(bool locked) {
    const QString note = locked ? tr("Training is running: the graph is locked. Stop the run to edit it.") : QString();
    m_doc->setGraphLocked(note);
    m_view->setLockNote(note);
    m_properties->setEnabled(!locked);
    m_undoAct->setEnabled(!locked && m_doc->undoStack()->canUndo());
    m_redoAct->setEnabled(!locked && m_doc->undoStack()->canRedo());
}

bool MainWindow::maybeStopRun(const QString& action) {
    if (m_stoppingRun) return false;  // already waiting for the run to stop
    if (!m_dashboard || !m_dashboard->isRunning()) return true;
    QMessageBox box(QMessageBox::Question, tr("Training is running"),
                    tr("A training run of %1 is active. Stop it before %2?\n\nThe run keeps the weights it has and "
                       "is recorded as stopped, with the epochs it finished and its curves.")
                        .arg(m_doc->displayName(), action),
                    QMessageBox::NoButton, this);
    box.setObjectName(QStringLiteral("activeRunPrompt"));
    QPushButton* stop = box.addButton(tr("Stop and keep weights"), QMessageBox::AcceptRole);
    stop->setObjectName(QStringLiteral("stopRunButton"));
    box.addButton(QMessageBox::Cancel);
    box.setDefaultButton(stop);
    box.exec();
    if (box.clickedButton() != stop) return false;
    if (!m_dashboard->isRunning()) return true;  // it ended while the question was open
    // The run ends on the engine thread (a checkpoint of the weights it had, then its last events): wait for it,
    // so the history records it as stopped with what it did, not as interrupted by a vanished workbench.
    m_stoppingRun = true;
    setEnabled(false);
    statusBar()->showMessage(tr("Stopping the run and keeping its weights..."));
    QEventLoop wait;
    connect(m_dashboard, &TrainingDashboard::trainingFinished, &wait, &QEventLoop::quit);
    m_dashboard->stopTraining();
    if (m_dashboard->isRunning()) wait.exec();
    setEnabled(true);
    m_stoppingRun = false;
    return true;
}

void MainWindow::newProject(const strata::Project& project) {
    if (!maybeStopRun(tr("starting a new project"))) return;
    if (!maybeSave()) return;
    m_doc->newProject(project);
    m_view->showReadable();
}

bool MainWindow::newFromTemplate(const QString& templateId) {
    for (const ProjectTemplate& t : projectTemplates()) {
        if (t.id != templateId) continue;
        if (!maybeStopRun(tr("starting a new project"))) return false;
        if (!maybeSave()) return false;
        m_doc->newProject(t.make());
        m_view->showReadable();
        return true;
    }
    return false;
}

void MainWindow::showTemplateDialog() {
    QDialog dialog(this);
    dialog.setWindowTitle(tr("New from template"));
    auto* layout = new QVBoxLayout(&dialog);
    auto* list = new QListWidget(&dialog);
    auto* description = new QLabel(&dialog);
    description->setWordWrap(true);
    description->setMinimumHeight(60);
    const QList<ProjectTemplate> templates = projectTemplates();
    for (const ProjectTemplate& t : templates) {
        auto* item = new QListWidgetItem(t.title, list);
        item->setData(Qt::UserRole, t.id);
        item->setToolTip(t.description);
    }
    connect(list, &QListWidget::currentRowChanged, description,
            [&](int row) { description->setText(row >= 0 ? templates[row].description : QString()); });
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, &dialog);
    connect(buttons, &QDialogButtonBox::accepted, &dialog, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
    connect(list, &QListWidget::itemDoubleClicked, &dialog, &QDialog::accept);
    layout->addWidget(list);
    layout->addWidget(description);
    layout->addWidget(buttons);
    list->setCurrentRow(0);
    dialog.resize(460, 340);
    if (dialog.exec() == QDialog::Accepted && list->currentItem())
        newFromTemplate(list->currentItem()->data(Qt::UserRole).toString());
}

void MainWindow::open() {
    if (!maybeStopRun(tr("opening another project"))) return;
    if (!maybeSave()) return;
    const QString dir = m_doc->filePath().isEmpty() ? QString() : QFileInfo(m_doc->filePath()).absolutePath();
    const QString path = QFileDialog::getOpenFileName(this, tr("Open project"), dir, tr(kFileFilter));
    if (!path.isEmpty()) openFile(path);
}

void MainWindow::setWritableCheck(strata::WritableCheck writable) {
    m_writable = std::move(writable);
    if (m_dashboard) m_dashboard->setWritableCheck(m_writable);
}

bool MainWindow::openExample() {
    const QString folder = examplesFolder(QCoreApplication::applicationDirPath());
    if (folder.isEmpty()) {
        reportError(tr("No examples found"),
                    tr("No example projects were found (looked in %1 and in a source tree above it; "
                       "STRATA_EXAMPLES_DIR names another folder).")
                        .arg(QDir::cleanPath(QCoreApplication::applicationDirPath() +
                                             QStringLiteral("/../share/strata/examples"))));
        return false;
    }
    const QString path = m_openExamplePrompt
                             ? m_openExamplePrompt(folder)
                             : QFileDialog::getOpenFileName(this, tr("Open example"), folder, tr(kFileFilter));
    if (path.isEmpty() || !openFile(path)) return false;
    if (!savesInPlace(m_doc->filePath(), m_writable))
        statusBar()->showMessage(tr("%1 is read-only: Start keeps its runs in your data folder; Save makes a copy "
                                    "of your own")
                                     .arg(QDir::toNativeSeparators(m_doc->filePath())),
                                 15000);
    return true;
}

bool MainWindow::openFile(const QString& path) {
    if (!maybeStopRun(tr("opening another project"))) return false;
    if (!maybeSave()) return false;
    saveLayout();  // the project being left keeps its dock layout
    QString error;
    if (!m_doc->load(path, &error)) {
        reportError(tr("Cannot open project"), tr("Cannot open %1:\n%2").arg(QFileInfo(path).fileName(), error));
        return false;
    }
    addRecentFile(m_doc->filePath());
    // The dock layout the project had when it was last closed.
    if (const QByteArray state = QSettings().value(layoutKey(m_doc->filePath())).toByteArray(); !state.isEmpty())
        restoreState(state);
    m_view->showReadable();
    statusBar()->showMessage(tr("Opened %1").arg(m_doc->filePath()), 5000);
    return true;
}

void MainWindow::importModel() {
    if (m_importer && m_importer->running()) return;
    if (!maybeStopRun(tr("importing a model"))) return;
    if (!maybeSave()) return;
    QString onnx, project;
    if (m_importPrompt) {
        std::tie(onnx, project) = m_importPrompt();
    } else {
        onnx = QFileDialog::getOpenFileName(this, tr("Import model"), QString(), tr("ONNX models (*.onnx)"));
        if (onnx.isEmpty()) return;
        const QFileInfo info(onnx);
        project = QFileDialog::getSaveFileName(this, tr("Save the imported project as"),
                                               info.absoluteDir().filePath(info.completeBaseName() + ".strata"),
                                               tr(kFileFilter));
    }
    if (onnx.isEmpty() || project.isEmpty()) return;
    if (QFileInfo(project).suffix().isEmpty()) project += QStringLiteral(".strata");
    if (!m_importer) {
        m_importer = new ModelImporter(this);
        m_importProgress = new QProgressDialog(this);
        m_importProgress->setObjectName(QStringLiteral("importProgress"));
        m_importProgress->setWindowTitle(tr("Import Model"));
        m_importProgress->setRange(0, 100);
        m_importProgress->setCancelButton(nullptr);  // the readers are not interruptible; big models take seconds
        m_importProgress->setMinimumDuration(300);
        m_importProgress->reset();
        connect(m_importer, &ModelImporter::progress, this, [this](double f, const QString& stage) {
            m_importProgress->setLabelText(stage);
            m_importProgress->setValue(static_cast<int>(f * 100));
        });
        connect(m_importer, &ModelImporter::finished, this, [this](const ModelImporter::Outcome& o) {
            m_importProgress->reset();
            m_importAct->setEnabled(true);
            const QString list = o.issues.isEmpty() ? QString() : QStringLiteral("\n\n") + o.issues.join('\n');
            if (!o.ok) {
                reportError(tr("Cannot import model"), o.error.section('\n', 0, 0) + list);
                return;
            }
            if (!openFile(o.projectPath)) return;
            statusBar()->showMessage(tr("Imported %1 layers into %2").arg(o.layers).arg(o.projectPath), 10000);
            if (!o.issues.isEmpty())
                reportError(tr("Model imported in part"),
                            tr("%1 node(s) could not be mapped to Strata layers; the layers after them are left "
                               "unconnected (see Problems):")
                                    .arg(o.issues.size()) +
                                list);
        });
    }
    m_importProgress->setLabelText(tr("Importing %1").arg(QFileInfo(onnx).fileName()));
    m_importProgress->setValue(0);
    m_importAct->setEnabled(false);
    m_importer->start(onnx, project);
}

bool MainWindow::save() {
    if (m_doc->filePath().isEmpty()) return saveAsDialog();
    // An installed example (or any read-only file) cannot be written where it is: a copy of the user's own.
    if (!savesInPlace(m_doc->filePath(), m_writable)) {
        statusBar()->showMessage(
            tr("%1 is read-only: save a copy of your own").arg(QDir::toNativeSeparators(m_doc->filePath())), 15000);
        return saveAsDialog();
    }
    return saveAs(m_doc->filePath());
}

bool MainWindow::saveAsDialog() {
    const QString path = m_saveAsPrompt ? m_saveAsPrompt()
                                        : QFileDialog::getSaveFileName(
                                              this, tr("Save project"),
                                              savesInPlace(m_doc->filePath(), m_writable) || m_doc->filePath().isEmpty()
                                                  ? m_doc->filePath()
                                                  : copySuggestion(m_doc->filePath(), QDir::homePath()),
                                              tr(kFileFilter));
    if (path.isEmpty()) return false;
    return saveAs(path.endsWith(QStringLiteral(".strata")) || QFileInfo(path).suffix().size() > 0
                      ? path
                      : path + QStringLiteral(".strata"));
}

bool MainWindow::saveAs(const QString& path) {
    const QString oldPath = m_doc->filePath(), oldId = m_doc->projectId();
    // Save As of a saved project writes a copy with an id of its own (ProjectDocument::save); the active run
    // belongs to the project it started with, so the copy waits until it ends.
    if (m_dashboard && m_dashboard->isRunning() && !oldPath.isEmpty() &&
        QFileInfo(path).absoluteFilePath() != oldPath) {
        reportError(tr("Cannot save a copy now"),
                    tr("A run of %1 is active: Save As would write a copy of its own, which the run does not belong "
                       "to. Stop the run first, or use Save.")
                        .arg(m_doc->displayName()));
        return false;
    }
    QString error;
    if (!m_doc->save(path, &error)) {
        reportError(tr("Cannot save project"), tr("Cannot save %1:\n%2").arg(path, error));
        return false;
    }
    addRecentFile(m_doc->filePath());
    if (!oldPath.isEmpty() && oldPath != m_doc->filePath() && oldId != m_doc->projectId())
        statusBar()->showMessage(tr("Saved a copy as %1: a project of its own; the runs so far stay with %2")
                                     .arg(m_doc->filePath(), oldPath),
                                 15000);
    else
        statusBar()->showMessage(tr("Saved %1").arg(m_doc->filePath()), 5000);
    return true;
}

QStringList MainWindow::recentFiles() const { return QSettings().value(QLatin1String(kRecentKey)).toStringList(); }

void MainWindow::addRecentFile(const QString& path) {
    QStringList files = recentFiles();
    files.removeAll(path);
    files.prepend(path);
    while (files.size() > kMaxRecent) files.removeLast();
    QSettings().setValue(QLatin1String(kRecentKey), files);
    rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu() {
    if (!m_recentMenu) return;
    m_recentMenu->clear();
    const QStringList files = recentFiles();
    for (int i = 0; i < files.size(); ++i) {
        const QString path = files[i];
        // The folder too: two projects of one name in different folders are told apart.
        const QFileInfo info(path);
        QAction* a = m_recentMenu->addAction(QStringLiteral("&%1 %2  (%3)")
                                                 .arg(i + 1)
                                                 .arg(info.fileName(), QDir::toNativeSeparators(info.absolutePath())));
        a->setToolTip(path);
        a->setStatusTip(path);
        connect(a, &QAction::triggered, this, [this, path] { openFile(path); });
    }
    if (files.isEmpty())
        m_recentMenu->addAction(tr("(none)"))->setEnabled(false);
    else {
        m_recentMenu->addSeparator();
        connect(m_recentMenu->addAction(tr("Clear list")), &QAction::triggered, this, [this] {
            QSettings().remove(QLatin1String(kRecentKey));
            rebuildRecentMenu();
        });
    }
}

void MainWindow::copy() {
    if (QMimeData* mime = m_scene->copySelection()) QApplication::clipboard()->setMimeData(mime);
}

void MainWindow::cut() {
    copy();
    m_scene->deleteSelection();
}

void MainWindow::paste() {
    if (!m_scene->pasteFrom(QApplication::clipboard()->mimeData()))
        statusBar()->showMessage(tr("Nothing to paste"), 3000);
}

void MainWindow::deleteSelection() { m_scene->deleteSelection(); }

void MainWindow::selectAll() {
    QList<int> ids;
    for (const strata::Node* n : m_doc->graph().nodes()) ids << n->id;
    m_scene->selectNodes(ids);
}

void MainWindow::autoLayout() {
    m_doc->autoLayout();
    m_view->zoomToFit();
}

void MainWindow::showNode(int id) {
    if (id >= 0) m_view->centreOnNode(id);
}

void MainWindow::showExportDialog() {
    if (!m_exportDialog) m_exportDialog = new ExportDialog(m_doc, this);
    m_exportDialog->useProjectCheckpoint(false);  // the run picked (by default the newest with weights)
    m_exportDialog->show();
    m_exportDialog->raise();
    m_exportDialog->activateWindow();
}

void MainWindow::closeEvent(QCloseEvent* event) {
    if (maybeStopRun(tr("closing the window")) && maybeSave()) {
        saveLayout();
        event->accept();
    } else {
        event->ignore();
    }
}

void MainWindow::saveLayout() {
    if (!m_doc->filePath().isEmpty()) QSettings().setValue(layoutKey(m_doc->filePath()), saveState());
}

}  // namespace strata::ui
