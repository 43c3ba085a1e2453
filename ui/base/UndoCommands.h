// Undo commands for ProjectDocument edits.
//
// Structural edits (add, delete, connect, disconnect, paste, parameters) keep the graph
// before and after: the order of edges is part of Graph equality and of the
// saved file, and re-adding removed edges one by one would not restore it.
// Graphs in the editor are small (tens of nodes), so the copies are cheap.
// Parameters count as structural: fewer input ports drop edges. Moves, names and
// settings store only what they change.
#pragma once

#include <QMap>
#include <QPointF>
#include <QUndoCommand>

#include "core/graph/Graph.h"
#include "core/graph/Project.h"

namespace strata::ui {

class ProjectDocument;

enum CommandId { MoveNodesId = 1001 };

class GraphSnapshotCommand : public QUndoCommand {
public:
    GraphSnapshotCommand(ProjectDocument* doc, strata::Graph before, strata::Graph after, const QString& text);
    void undo() override;
    void redo() override;

private:
    ProjectDocument* m_doc;
    strata::Graph m_before, m_after;
};

// Moves nodes. Consecutive moves of the same set of nodes merge (mergeWith), unless
// `mergeable` is false (auto-layout is its own step).
class MoveNodesCommand : public QUndoCommand {
public:
    MoveNodesCommand(ProjectDocument* doc, QMap<int, QPointF> before, QMap<int, QPointF> after, bool mergeable,
                     const QString& text);
    void undo() override;
    void redo() override;
    int id() const override { return m_mergeable ? MoveNodesId : -1; }
    bool mergeWith(const QUndoCommand* other) override;

private:
    ProjectDocument* m_doc;
    QMap<int, QPointF> m_before, m_after;
    bool m_mergeable;
};

class RenameCommand : public QUndoCommand {
public:
    RenameCommand(ProjectDocument* doc, int node, std::string before, std::string after);
    void undo() override;
    void redo() override;

private:
    ProjectDocument* m_doc;
    int m_node;
    std::string m_before, m_after;
};

class DatasetSettingsCommand : public QUndoCommand {
public:
    DatasetSettingsCommand(ProjectDocument* doc, strata::DatasetSettings before, strata::DatasetSettings after);
    void undo() override;
    void redo() override;

private:
    ProjectDocument* m_doc;
    strata::DatasetSettings m_before, m_after;
};

class TrainingSettingsCommand : public QUndoCommand {
public:
    TrainingSettingsCommand(ProjectDocument* doc, strata::TrainingSettings before, strata::TrainingSettings after);
    void undo() override;
    void redo() override;

private:
    ProjectDocument* m_doc;
    strata::TrainingSettings m_before, m_after;
};

// The graph, the data and training settings and the sweep together (the sweep editor, "apply the best trial").
class ProjectSettingsCommand : public QUndoCommand {
public:
    ProjectSettingsCommand(ProjectDocument* doc, strata::Project before, strata::Project after, const QString& text);
    void undo() override;
    void redo() override;

private:
    ProjectDocument* m_doc;
    strata::Project m_before, m_after;
};

}  // namespace strata::ui
