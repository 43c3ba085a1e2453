// ProjectDocument: the open project in the workbench. It owns the one
// strata::Project (id, graph, dataset and training settings), its analysis
// (shapes and problems from analyzeGraph, recomputed after every change) and
// the undo stack. Every edit goes through an undoable method here; the canvas,
// panels and dashboard only observe the document through its signals.
// It also knows where runs are recorded (RunHistory): a run belongs to the
// project by its id (or, for a file from before ids, by its path), and
// ProjectRuns.h lists the open project's runs from there.
#pragma once

#include <QList>
#include <QMap>
#include <QObject>
#include <QPointF>
#include <QString>
#include <vector>

#include "core/graph/Graph.h"
#include "core/graph/Project.h"

class QUndoStack;

namespace strata::ui {

class RunHistory;

class ProjectDocument : public QObject {
    Q_OBJECT
public:
    explicit ProjectDocument(QObject* parent = nullptr);
    ~ProjectDocument() override;

    const strata::Project& project() const { return m_project; }
    const strata::Graph& graph() const { return m_project.graph; }
    const strata::GraphAnalysis& analysis() const { return m_analysis; }
    QUndoStack* undoStack() const { return m_undo; }

    QString filePath() const { return m_path; }
    // Project::id: empty only for a file written before ids existed, until it is saved.
    QString projectId() const { return QString::fromStdString(m_project.id); }
    // "untitled" when the project was never saved.
    QString displayName() const;
    // True when the undo stack is away from its clean state.
    bool isModified() const;
    // While a training run is active the graph is locked: every edit of its structure, parameters or names
    // is refused (false / -1, `error` says why), since the run trains the graph it started with and export
    // would use the checkpoint's. Moves stay allowed. `reason` is the note shown; empty unlocks.
    void setGraphLocked(const QString& reason);
    bool graphLocked() const { return !m_lockReason.isEmpty(); }
    QString graphLockReason() const { return m_lockReason; }

    // Where runs are recorded (not owned; nullptr: nowhere, and the project's runs are unknown).
    void setRunHistory(RunHistory* history);
    RunHistory* runHistory() const { return m_history; }
    // Said by whoever starts or ends a run of this project (the dashboard): views of its runs refresh.
    void notifyRunsChanged() { emit runsChanged(); }

    // On failure nothing changes and `error` holds the loader's message (with the JSON path).
    bool load(const QString& path, QString* error);
    // Writes the project to `path`. Its identity: a project saved for the first time keeps its id, and the runs it
    // made unsaved take the path (adopted); a file without an id gets one, and its runs (by path) take it; Save As
    // to another path while the file it was opened from still holds it writes a copy with an id of its own (the
    // runs so far stay with that file, whose graph they trained). Nothing changes when writing fails.
    bool save(const QString& path, QString* error);
    // Replaces the project; clears the undo stack and the file path. A project without an id gets a new one.
    void newProject(const strata::Project& project);

    // --- Undoable edits. Each pushes one QUndoCommand; invalid edits push nothing,
    // return false / -1 and say why in `error`.
    // Returns the new node's id, or -1 for an unknown type.
    int addNode(const QString& type, const QPointF& pos, const strata::Json& params = strata::Json::object(),
                const QString& name = {}, QString* error = nullptr);
    // Removes the nodes and every edge touching them.
    bool removeNodes(const QList<int>& ids);
    // Connects from's output to to's input port, replacing an edge already feeding that port.
    // Refuses unknown nodes or ports, self-loops and edges that would close a cycle.
    bool connectPorts(const strata::PortRef& from, const strata::PortRef& to, QString* error = nullptr);
    bool disconnectPort(const strata::PortRef& to);
    // Moves the edge feeding `oldTo` so that it feeds `newTo` instead (one command).
    bool moveEdge(const strata::PortRef& oldTo, const strata::PortRef& newTo, QString* error = nullptr);
    // New positions for nodes; consecutive moves of the same nodes merge into one command.
    void moveNodes(const QMap<int, QPointF>& positions);
    // Lays the graph out top to bottom by topological depth (one command).
    void autoLayout();
    bool setParams(int id, const strata::Json& params);
    // Sets one parameter of a node, keeping the others.
    bool setParam(int id, const QString& name, const strata::Json& value);
    bool rename(int id, const QString& name, QString* error = nullptr);
    // Transfer learning. Freezes (false) or unfreezes a node's weights (Node::trainable); one undoable edit.
    bool setTrainable(int id, bool trainable);
    // Replaces the head (core/graph/Transfer.h: the last Dense takes `classes` units and a new name, so it starts
    // from new initial weights); one undoable edit. Refused, with `error`, when the graph has no Dense layer.
    bool replaceHead(int classes, QString* error = nullptr);
    // The data set's number of classes when the settings say it without reading data (its class names, the
    // synthetic data set's classes); -1 when only the data would tell.
    int knownClassCount() const;
    // Adds copies of nodes (their ids and names are replaced; names stay unique) and of the
    // edges among them, shifted by `offset`. Returns the new ids in the order of `nodes`.
    QList<int> paste(const std::vector<strata::Node>& nodes, const std::vector<strata::Edge>& edges,
                     const QPointF& offset);
    // Adds a block of blockTemplates() (Templates.h) with its first node at pos, as one undoable edit. from >= 0:
    // the node feeding it, when its output is a sequence [length, width] (the block takes that width; otherwise
    // the block is added unconnected at width 128); the attention is masked by the token ids of the Input that
    // feeds an Embedding, when there is one. Returns the block's nodes; empty, with *error, when refused.
    QList<int> insertBlock(const QString& id, const QPointF& pos, int from, QString* error = nullptr);
    void setDatasetSettings(const strata::DatasetSettings& settings);
    void setTrainingSettings(const strata::TrainingSettings& settings);
    // The project's "sweep" definition (null: none), as the sweep editor writes it.
    void setSweep(const strata::Json& sweep);
    // The graph's parameters, the data and training settings and the sweep of `after` as one edit titled
    // `text` ("apply the best trial"). Refused, with `error`, while the graph is locked and its graph differs.
    bool setProjectSettings(const strata::Project& after, const QString& text, QString* error = nullptr);

    // Problems that concern a node (node-level and port-level).
    std::vector<strata::Problem> problemsOf(int id) const;
    // Trainable scalars of one node, from its layer type's parameter specs for the analysed
    // params and input shapes; -1 when they are not known (bad params, unknown input shape).
    qint64 parameterCountOf(int id) const;
    // Per-sample output shape with the batch as "N": "[N, 32, 28, 28]"; "?" when unknown.
    QString shapeText(int id) const;

    // --- Used by the undo commands (UndoCommands.cpp); not for widgets.
    void applyGraph(const strata::Graph& graph);
    void applyPositions(const QMap<int, QPointF>& positions);
    void applyName(int id, const std::string& name);
    void applyDatasetSettings(const strata::DatasetSettings& settings);
    void applyTrainingSettings(const strata::TrainingSettings& settings);
    void applyProjectSettings(const strata::Project& project);

signals:
    void graphChanged();  // structure, names or params
    void nodeMoved(int id);
    void settingsChanged();  // dataset or training settings
    void sweepChanged();
    void analysisChanged();
    void fileChanged();  // path or modified flag
    // The whole project was replaced (new, load): views rebuild from scratch.
    void projectReset();
    // The project's id or file changed (new, load, first save, Save As): views of its runs list them again.
    void identityChanged();
    // A run of the project started or ended, or the run history changed (notifyRunsChanged, setRunHistory).
    void runsChanged();
    void graphLockChanged(bool locked);

private:
    void reanalyze();
    // Pushes a command replacing the graph by `after`, titled `text`.
    void pushGraph(const strata::Graph& after, const QString& text);
    void pushParams(int id, const strata::Json& params, const QString& text);
    // Checks and applies from -> to on `after` (which may already hold other changes), then pushes it.
    bool connectInto(strata::Graph after, const strata::PortRef& from, const strata::PortRef& to, QString* error);

    strata::Project m_project;
    strata::GraphAnalysis m_analysis;
    QUndoStack* m_undo;
    QString m_path;
    RunHistory* m_history = nullptr;
    QString m_lockReason;
    bool refuseWhenLocked(QString* error) const;
};

}  // namespace strata::ui
