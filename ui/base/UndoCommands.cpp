// Undo commands for ProjectDocument edits.
#include "ui/base/UndoCommands.h"

#include "ui/base/ProjectDocument.h"

namespace strata::ui {

GraphSnapshotCommand::GraphSnapshotCommand(ProjectDocument* doc, strata::Graph before, strata::Graph after,
                                           const QString& text)
    : QUndoCommand(text), m_doc(doc), m_before(std::move(before)), m_after(std::move(after)) {}

void GraphSnapshotCommand::undo() { m_doc->applyGraph(m_before); }
void GraphSnapshotCommand::redo() { m_doc->applyGraph(m_after); }

MoveNodesCommand::MoveNodesCommand(ProjectDocument* doc, QMap<int, QPointF> before, QMap<int, QPointF> after,
                                   bool mergeable, const QString& text)
    : QUndoCommand(text), m_doc(doc), m_before(std::move(before)), m_after(std::move(after)), m_mergeable(mergeable) {}

void MoveNodesCommand::undo() { m_doc->applyPositions(m_before); }
void MoveNodesCommand::redo() { m_doc->applyPositions(m_after); }

bool MoveNodesCommand::mergeWith(const QUndoCommand* other) {
    auto* move = dynamic_cast<const MoveNodesCommand*>(other);
    if (!move || !move->m_mergeable || !m_mergeable || move->m_after.keys() != m_after.keys()) return false;
    m_after = move->m_after;  // keep our `before`: undo returns to where the first move started
    return true;
}

RenameCommand::RenameCommand(ProjectDocument* doc, int node, std::string before, std::string after)
    : QUndoCommand(QObject::tr("Rename %1 to %2").arg(QString::fromStdString(before), QString::fromStdString(after))),
      m_doc(doc),
      m_node(node),
      m_before(std::move(before)),
      m_after(std::move(after)) {}

void RenameCommand::undo() { m_doc->applyName(m_node, m_before); }
void RenameCommand::redo() { m_doc->applyName(m_node, m_after); }

DatasetSettingsCommand::DatasetSettingsCommand(ProjectDocument* doc, strata::DatasetSettings before,
                                               strata::DatasetSettings after)
    : QUndoCommand(QObject::tr("Change dataset settings")),
      m_doc(doc),
      m_before(std::move(before)),
      m_after(std::move(after)) {}

void DatasetSettingsCommand::undo() { m_doc->applyDatasetSettings(m_before); }
void DatasetSettingsCommand::redo() { m_doc->applyDatasetSettings(m_after); }

TrainingSettingsCommand::TrainingSettingsCommand(ProjectDocument* doc, strata::TrainingSettings before,
                                                 strata::TrainingSettings after)
    : QUndoCommand(QObject::tr("Change training settings")),
      m_doc(doc),
      m_before(std::move(before)),
      m_after(std::move(after)) {}

void TrainingSettingsCommand::undo() { m_doc->applyTrainingSettings(m_before); }
void TrainingSettingsCommand::redo() { m_doc->applyTrainingSettings(m_after); }

ProjectSettingsCommand::ProjectSettingsCommand(ProjectDocument* doc, strata::Project before, strata::Project after,
                                               const QString& text)
    : QUndoCommand(text), m_doc(doc), m_before(std::move(before)), m_after(std::move(after)) {}

void ProjectSettingsCommand::undo() { m_doc->applyProjectSettings(m_before); }
void ProjectSettingsCommand::redo() { m_doc->applyProjectSettings(m_after); }

}  // namespace strata::ui
