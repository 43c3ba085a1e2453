// SweepEditor: defines the project's hyperparameter sweep in the workbench (issue 34: it could only be
// written into the project file by hand). One row per swept setting (training.<key>, dataset.<key> or
// graph.<node>.<param>, offered from the settings table and the graph's layer parameters) with either a list
// of values or a range (min, max, grid points, log scale, whole numbers); grid or random search, the metric,
// and successive halving's rungs. The definition is checked as strata-train checks it (core/history/Sweep:
// errors name the JSON path, and the first trial is applied to the project so a bad value shows before a
// run); the trial count shows as it is edited. OK writes it to the project as one undoable edit.
#pragma once

#include <QDialog>

#include "core/graph/Project.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;
class QTableWidget;

namespace strata::ui {

class SweepEditor : public QDialog {
    Q_OBJECT
public:
    // Edits a copy of `project`'s sweep (an empty one: a learning-rate range to start from).
    explicit SweepEditor(const Project& project, QWidget* parent = nullptr);

    // One parameter row: a value list ("0.01, 0.1", "sgd, adam"), or, with no values, a range.
    struct Row {
        QString setting;
        QString values;
        double min = 0.001, max = 0.1;
        int count = 3;
        bool log = false, integer = false;
    };
    void setRows(const QList<Row>& rows);
    QList<Row> rows() const;
    void setMethod(const QString& method);  // "grid" or "random"
    void setTrials(int trials);
    void setMetric(const QString& metric);  // "val_acc" or "val_loss"
    void setRungs(const QString& rungs);    // "1, 3" (epochs per rung) or "" for none

    // The definition as the project file holds it; null with `error` (the JSON path and why) when it is not
    // one a sweep can run.
    Json definition(QString* error) const;
    // "6 trials" or the reason none can run.
    QString summaryText() const;
    // The settings offered in the rows' choice boxes.
    QStringList settingChoices() const { return m_choices; }

    void accept() override;  // only a definition that checks
    QPushButton* okButton() const { return m_ok; }

private:
    void addRow(const Row& row);
    void refresh();

    Project m_project;
    QStringList m_choices;
    QComboBox *m_method, *m_metric;
    QSpinBox *m_trials, *m_seed;
    QLineEdit* m_rungs;
    QDoubleSpinBox* m_keep;
    QTableWidget* m_table;
    QLabel *m_summary, *m_error;
    QPushButton* m_ok;
};

}  // namespace strata::ui
