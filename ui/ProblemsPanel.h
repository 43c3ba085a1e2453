// ProblemsPanel: the problems analyzeGraph() reports for the open graph
// (bad parameters, unconnected inputs, shape mismatches, cycles). Activating a
// problem (double-click, Enter) asks for its node to be selected and centred.
#pragma once

#include <QWidget>

class QLabel;
class QTreeWidget;

namespace strata::ui {

class ProjectDocument;

class ProblemsPanel : public QWidget {
    Q_OBJECT
public:
    explicit ProblemsPanel(ProjectDocument* doc, QWidget* parent = nullptr);
    QTreeWidget* list() const { return m_list; }
    int problemCount() const;
    // The message shown in a row, for tests.
    QString messageAt(int row) const;

signals:
    // A problem's node was activated; -1 for problems of the whole graph.
    void problemActivated(int nodeId);

private:
    void refresh();

    ProjectDocument* m_doc;
    QLabel* m_summary;
    QTreeWidget* m_list;
};

}  // namespace strata::ui
