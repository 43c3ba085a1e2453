// ProblemsPanel: the problems analyzeGraph() reports for the open graph (bad parameters, unconnected inputs,
// shape mismatches, cycles) and, with a DataChecker, every way the graph and its data disagree (the Check:
// sample shape, classes, vocabulary), each of those with a button that applies its fix as one undoable edit.
// Activating a problem (double-click, Enter) asks for its node to be selected and centred. The summary line
// never calls the graph valid while its data disagrees or has not been checked.
#pragma once

#include <QPointer>
#include <QWidget>

class QLabel;
class QPushButton;
class QTreeWidget;

namespace strata::ui {

class DataChecker;
class ProjectDocument;

class ProblemsPanel : public QWidget {
    Q_OBJECT
public:
    explicit ProblemsPanel(ProjectDocument* doc, QWidget* parent = nullptr);
    QTreeWidget* list() const { return m_list; }
    int problemCount() const;
    // The message shown in a row, for tests.
    QString messageAt(int row) const;
    // The Check's results join the list; its button reads the data again.
    void setDataChecker(DataChecker* checker);
    QString summaryText() const;
    QPushButton* checkButton() const { return m_check; }
    // The fix button of a row ("Set units to 10"); null for a row without one.
    QPushButton* fixButton(int row) const;

signals:
    // A problem's node was activated; -1 for problems of the whole graph.
    void problemActivated(int nodeId);

private:
    void refresh();

    ProjectDocument* m_doc;
    QPointer<DataChecker> m_checker;
    QLabel* m_summary;
    QPushButton* m_check;
    QTreeWidget* m_list;
};

}  // namespace strata::ui
