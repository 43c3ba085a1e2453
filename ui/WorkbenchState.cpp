// WorkbenchState: see WorkbenchState.h.
#include "ui/WorkbenchState.h"

#include <QAbstractButton>
#include <QApplication>
#include <QCheckBox>
#include <QJsonArray>
#include <QJsonDocument>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QPushButton>
#include <QSaveFile>
#include <QTabBar>
#include <QTimer>
#include <QToolBar>

#include "ui/ExportDialog.h"
#include "ui/MainWindow.h"
#include "ui/OptimizePanel.h"
#include "ui/PredictPanel.h"
#include "ui/RunPicker.h"
#include "ui/RunsPanel.h"
#include "ui/TrainingDashboard.h"
#include "ui/base/ProjectDocument.h"
#include "ui/base/ProjectRuns.h"

namespace strata::ui {

namespace {

// The screen position of a widget's centre; null when it is not on screen.
QJsonValue centre(const QWidget* w) {
    if (!w || !w->isVisible() || w->visibleRegion().isEmpty()) return QJsonValue();
    const QPoint p = w->mapToGlobal(w->rect().center());
    return QJsonArray{p.x(), p.y()};
}

QJsonValue runJson(const std::optional<ProjectRun>& run) {
    if (!run) return QJsonValue();
    return QJsonObject{{"id", run->id}, {"label", run->label()}, {"checkpoint", run->checkpoint}};
}

const char* stateName(TrainingDashboard::State s) {
    switch (s) {
        case TrainingDashboard::State::Idle: return "idle";
        case TrainingDashboard::State::Starting: return "starting";
        case TrainingDashboard::State::Running: return "running";
        case TrainingDashboard::State::Paused: return "paused";
        case TrainingDashboard::State::Stopping: return "stopping";
    }
    return "?";
}

}  // namespace

QJsonObject workbenchState(const MainWindow& window) {
    const ProjectDocument* doc = window.document();
    QJsonObject state;
    state["title"] = window.windowTitle();
    state["project"] = QJsonObject{{"path", doc->filePath()},
                                   {"id", doc->projectId()},
                                   {"name", QString::fromStdString(doc->project().name)},
                                   {"modified", doc->isModified()}};
    QJsonArray runs;
    for (const ProjectRun& r : projectRuns(*doc))
        runs.append(QJsonObject{{"id", r.id},
                                {"label", r.label()},
                                {"checkpoint", r.checkpoint},
                                {"unavailable", r.unavailable},
                                {"folder", r.folder}});
    state["runs"] = runs;
    QJsonObject clicks;  // where a script clicks

    if (const TrainingDashboard* d = window.dashboard())
        state["dashboard"] = QJsonObject{{"state", stateName(d->state())},
                                         {"run", d->runId()},
                                         {"status", d->statusText()},
                                         {"error", d->errorVisible() ? d->errorText() : QString()},
                                         {"trainLossPoints", d->pointCount("train_loss")},
                                         {"runFolder", d->runFolder()}};
    if (const ExportDialog* e = window.exportDialog()) {
        QJsonObject o{{"visible", e->isVisible()},   {"source", e->sourceText()}, {"sourceRun", e->sourceRunText()},
                      {"note", e->sourceNoteText()}, {"output", e->outputPath()}, {"busy", e->isBusy()},
                      {"error", e->errorText()},     {"result", e->resultText()}};
        state["export"] = o;
        clicks["exportButton"] = centre(e->exportButton());
        for (const QPushButton* b : e->findChildren<QPushButton*>())
            if (b->text() == ExportDialog::tr("Close")) clicks["exportClose"] = centre(b);
    }
    if (const PredictPanel* p = window.predictPanel()) {
        state["predict"] = QJsonObject{{"hasModel", p->hasModel()},
                                       {"busy", p->isBusy()},
                                       {"modelRun", p->modelRunText()},
                                       {"modelSource", p->modelSource()},
                                       {"picked", runJson(p->runPicker()->chosen())},
                                       {"error", p->errorText()}};
        clicks["predictLoadRun"] = centre(p->loadRunButton());
    }
    if (const OptimizePanel* o = window.optimizePanel())
        state["optimize"] = QJsonObject{{"picked", runJson(o->runPicker()->chosen())},
                                        {"outputFolder", o->outputFolder()},
                                        {"busy", o->isBusy()},
                                        {"status", o->statusText()},
                                        {"error", o->errorText()}};
    if (const RunsPanel* r = window.runsPanel())
        state["runsView"] = QJsonObject{{"rows", r->model()->rowCount()},
                                        {"allProjects", r->allProjectsCheck()->isChecked()},
                                        {"status", r->statusText()}};
    // The menus ("menu:File") and, while one is open, its entries ("item:Save As...", "item:1 b.strata  (...)").
    if (const QMenuBar* bar = window.menuBar(); bar && bar->isVisible())
        for (QAction* a : bar->actions()) {
            const QPoint p = bar->mapToGlobal(bar->actionGeometry(a).center());
            clicks[QStringLiteral("menu:") + a->text().remove(QLatin1Char('&'))] = QJsonArray{p.x(), p.y()};
        }
    if (const auto* menu = qobject_cast<const QMenu*>(QApplication::activePopupWidget()))
        for (QAction* a : menu->actions()) {
            if (a->isSeparator() || a->text().isEmpty()) continue;
            const QPoint p = menu->mapToGlobal(menu->actionGeometry(a).center());
            clicks[QStringLiteral("item:") + a->text().remove(QLatin1Char('&'))] = QJsonArray{p.x(), p.y()};
        }
    // The toolbar's buttons ("tool:Start Training", "tool:Stop", ...).
    for (const QToolBar* bar : window.findChildren<QToolBar*>())
        for (QAction* a : bar->actions())
            if (!a->text().isEmpty())
                clicks[QStringLiteral("tool:") + a->text().remove(QLatin1Char('&'))] = centre(bar->widgetForAction(a));
    // The dock tabs ("Predict", "Runs", ...) of the tabbed bottom docks.
    for (const QTabBar* bar : window.findChildren<QTabBar*>()) {
        if (!bar->isVisible() || bar->visibleRegion().isEmpty()) continue;
        for (int i = 0; i < bar->count(); ++i) {
            const QPoint p = bar->mapToGlobal(bar->tabRect(i).center());
            clicks[QStringLiteral("tab:") + bar->tabText(i).remove(QLatin1Char('&'))] = QJsonArray{p.x(), p.y()};
        }
    }
    // A message box waiting for an answer (the prompt before closing during a run).
    if (const auto* box = qobject_cast<const QMessageBox*>(QApplication::activeModalWidget())) {
        QJsonObject buttons;
        for (const QAbstractButton* b : box->buttons()) {
            buttons[b->text().remove(QLatin1Char('&'))] = centre(b);
        }
        state["messageBox"] = QJsonObject{
            {"name", box->objectName()}, {"title", box->windowTitle()}, {"text", box->text()}, {"buttons", buttons}};
    }
    state["clicks"] = clicks;
    return state;
}

StateWriter::StateWriter(MainWindow* window, const QString& path, int intervalMs)
    : QObject(window), m_window(window), m_path(path), m_timer(new QTimer(this)) {
    connect(m_timer, &QTimer::timeout, this, &StateWriter::write);
    m_timer->start(intervalMs);
}

bool StateWriter::write() {
    const QByteArray text = QJsonDocument(workbenchState(*m_window)).toJson(QJsonDocument::Indented);
    if (text == m_last) return true;
    QSaveFile file(m_path);
    if (!file.open(QIODevice::WriteOnly) || file.write(text) != text.size() || !file.commit()) return false;
    m_last = text;
    return true;
}

}  // namespace strata::ui
