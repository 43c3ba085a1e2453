// MainWindow: the Strata workbench. The graph canvas in the centre, the
// layer palette on the left, properties and problems on the right, and the
// dataset, training settings, devices and training dashboard at the bottom (tabbed with the Predict and
// Optimize panels).
// Owns the ProjectDocument; File/Edit/View/Train/Help menus act on it.
#pragma once

#include <QMainWindow>
#include <QStringList>
#include <functional>

#include "core/graph/Project.h"
#include "core/train/RunFolder.h"

class QAction;
class QDockWidget;
class QMenu;
class QProgressDialog;

namespace strata::ui {

class GraphScene;
class GraphView;
class LayerPalette;
class ProblemsPanel;
class ProjectDocument;
class PropertyPanel;
class TrainingDashboard;
class DevicePicker;
class DataChecker;
class DatasetPanel;
class TrainingSettingsPanel;
class ExportDialog;
class ModelImporter;
class PredictPanel;
class TaskPredictView;
class OptimizePanel;
class ProfileRunner;
class RunsPanel;
class SweepPanel;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    enum class SaveChoice { Save, Discard, Cancel };

    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    ProjectDocument* document() const { return m_doc; }
    GraphScene* scene() const { return m_scene; }
    GraphView* view() const { return m_view; }
    LayerPalette* palette() const { return m_palette; }
    PropertyPanel* properties() const { return m_properties; }
    ProblemsPanel* problems() const { return m_problems; }
    // Null in a build without the training widgets.
    TrainingDashboard* dashboard() const { return m_dashboard; }
    PredictPanel* predictPanel() const { return m_predict; }
    TaskPredictView* taskPredictView() const { return m_taskPredict; }
    OptimizePanel* optimizePanel() const { return m_optimize; }
    // The Runs view (dock "runsDock"); strata_gui points it at the run history's database.
    RunsPanel* runsPanel() const { return m_runs; }
    SweepPanel* sweepPanel() const { return m_sweep; }
    // Train > Profile Layers and the runner behind it (ui/ProfileOverlay).
    QAction* profileAction() const { return m_profileAct; }
    ProfileRunner* profiler() const { return m_profiler; }
    // The Check: the data against the graph (Train > Check Data Against Graph, and Start).
    DataChecker* dataChecker() const { return m_checker; }
    // The File > Export Model dialog; null until first shown.
    ExportDialog* exportDialog() const { return m_exportDialog; }
    // "paletteDock", "propertiesDock", "problemsDock", "datasetDock", "trainingSettingsDock",
    // "devicesDock", "dashboardDock", "predictDock", "optimizeDock"; null when absent.
    QDockWidget* dockNamed(const QString& objectName) const;

    // Each asks before dropping unsaved edits; false when cancelled or failed.
    bool openFile(const QString& path);
    bool newFromTemplate(const QString& templateId);
    void newProject(const strata::Project& project);
    // Locks the graph (document, canvas with a note, property panel, undo) while a run is active.
    void setGraphLocked(bool locked);
    // Help > Getting Started and Help > Keyboard Shortcuts (rich text).
    QString gettingStartedText() const;
    QString shortcutsText() const;
    bool save();
    bool saveAs(const QString& path);
    // Asks Save/Discard/Cancel when there are unsaved edits; true when it is fine to go on.
    bool maybeSave();
    // While a run is active, asks (a QMessageBox "activeRunPrompt": "Stop and keep weights" / Cancel) before
    // `action` ("closing the window", "opening another project"); on Stop, waits until the run has ended and is
    // recorded as stopped with its epochs and curves. True when no run is active or it was stopped.
    bool maybeStopRun(const QString& action);

    QStringList recentFiles() const;
    // The last error shown to the user (load/save failures), for tests and the status bar.
    QString lastError() const { return m_lastError; }

    // Replace the dialogs (tests run without anyone to click).
    void setSavePrompt(std::function<SaveChoice(const QString& name)> prompt) { m_savePrompt = std::move(prompt); }
    void setErrorReporter(std::function<void(const QString& title, const QString& text)> report) {
        m_reportError = std::move(report);
    }
    void setSaveAsPrompt(std::function<QString()> prompt) { m_saveAsPrompt = std::move(prompt); }
    // File > Open Example's file dialog, given the examples folder; and whether a folder or file can be written
    // (root may write anywhere, so tests tell which folders are read-only).
    void setOpenExamplePrompt(std::function<QString(const QString& folder)> prompt) {
        m_openExamplePrompt = std::move(prompt);
    }
    void setWritableCheck(strata::WritableCheck writable);
    // File > Import Model's two file dialogs (the ONNX file, then the project to write); an empty path cancels.
    void setImportPrompt(std::function<std::pair<QString, QString>()> prompt) { m_importPrompt = std::move(prompt); }
    // The import worker (File > Import Model); null until the first import.
    ModelImporter* modelImporter() const { return m_importer; }

public slots:
    void open();
    // The installed examples (or the source tree's, run from a build); false when cancelled or none found.
    bool openExample();
    void showTemplateDialog();
    bool saveAsDialog();
    void copy();
    void cut();
    void paste();
    void deleteSelection();
    void selectAll();
    void autoLayout();
    void showNode(int id);
    // Opens (non-modal) the Export dialog for the current project.
    void showExportDialog();
    // File > Import Model: an ONNX file imported off the GUI thread into a new project, which is then opened.
    void importModel();

protected:
    void closeEvent(QCloseEvent* event) override;
    // The first show sizes the docks for the window (fitDocksToWindow).
    void showEvent(QShowEvent* event) override;
    // Remembers the dock layout for the open project file (restored when it is opened again).
    void saveLayout();

private:
    void createDocks();
    // Wraps each dock's panel in a scroll area, so that none holds the window above a small screen.
    void keepPanelsWithinSmallScreens();
    // Dock sizes in proportion to the window (1280 x 720 as usable as 1600 x 1000).
    void fitDocksToWindow();
    void createActions();
    void createMenus();
    // Global shortcuts (WorkbenchInput) and a Tab stop on each toolbar button.
    void setUpKeyboard();
    // What one panel learns that another shows (sample counts, refusals).
    void connectPanelState();
    void showStartRefusal(const QString& reason);
    void showProblems();
    void updateTitle();
    void addRecentFile(const QString& path);
    void rebuildRecentMenu();
    void reportError(const QString& title, const QString& text);

    ProjectDocument* m_doc;
    GraphScene* m_scene;
    GraphView* m_view;
    LayerPalette* m_palette;
    PropertyPanel* m_properties;
    ProblemsPanel* m_problems;
    TrainingDashboard* m_dashboard = nullptr;
    DevicePicker* m_devices = nullptr;
    DatasetPanel* m_dataset = nullptr;
    TrainingSettingsPanel* m_trainingSettings = nullptr;
    PredictPanel* m_predict = nullptr;
    TaskPredictView* m_taskPredict = nullptr;
    OptimizePanel* m_optimize = nullptr;
    RunsPanel* m_runs = nullptr;
    SweepPanel* m_sweep = nullptr;
    ExportDialog* m_exportDialog = nullptr;
    DataChecker* m_checker = nullptr;  // the Check (Problems panel, Start)
    QAction* m_checkAct = nullptr;
    QList<QDockWidget*> m_docks;

    QMenu* m_recentMenu = nullptr;
    QMenu* m_viewMenu = nullptr;
    QAction* m_newAct = nullptr;
    QAction* m_templateAct = nullptr;
    QAction* m_openAct = nullptr;
    QAction* m_saveAct = nullptr;
    QAction* m_saveAsAct = nullptr;
    QAction* m_exportAct = nullptr;
    QAction* m_importAct = nullptr;
    QAction* m_quitAct = nullptr;
    QAction* m_undoAct = nullptr;
    QAction* m_redoAct = nullptr;
    QAction* m_cutAct = nullptr;
    QAction* m_copyAct = nullptr;
    QAction* m_pasteAct = nullptr;
    QAction* m_deleteAct = nullptr;
    QAction* m_selectAllAct = nullptr;
    QAction* m_layoutAct = nullptr;
    QAction* m_zoomInAct = nullptr;
    QAction* m_zoomOutAct = nullptr;
    QAction* m_zoomFitAct = nullptr;
    QAction* m_zoomResetAct = nullptr;
    QAction* m_trainAct = nullptr;
    QAction* m_pauseAct = nullptr;
    QAction* m_stopAct = nullptr;
    QAction* m_checkpointAct = nullptr;
    QAction* m_profileAct = nullptr;  // Train > Profile Layers (ui/ProfileOverlay)
    ProfileRunner* m_profiler = nullptr;
    QAction* m_aboutAct = nullptr;

    bool m_docksFitted = false;
    QString m_lastError;
    bool m_stoppingRun = false;  // maybeStopRun is waiting for the run to end
    std::function<SaveChoice(const QString&)> m_savePrompt;
    std::function<void(const QString&, const QString&)> m_reportError;
    std::function<QString()> m_saveAsPrompt;
    std::function<QString(const QString&)> m_openExamplePrompt;
    strata::WritableCheck m_writable = strata::folderWritable;
    QAction* m_openExampleAct = nullptr;
    std::function<std::pair<QString, QString>()> m_importPrompt;
    ModelImporter* m_importer = nullptr;
    QProgressDialog* m_importProgress = nullptr;
};

}  // namespace strata::ui
