// RunPicker: which of the open project's runs (ui/base/ProjectRuns) Export, Predict or Optimize uses: a combo
// box with one line per run (name, date, epochs, validation accuracy, status), runs without weights greyed out
// with the reason as tooltip, and the newest run with weights chosen by default. It follows the project: a new,
// opened or saved-as project, or a run that starts or ends, lists the runs again; the choice goes back to the
// newest run with weights unless the user picked one that still has them.
#pragma once

#include <QComboBox>
#include <QVector>
#include <optional>
#include <string>

#include "ui/base/ProjectRuns.h"

namespace strata::ui {

class ProjectDocument;

class RunPicker : public QComboBox {
    Q_OBJECT
public:
    // otherItem: a last entry ("Another checkpoint or model file") the owner selects when its source is not a run.
    explicit RunPicker(ProjectDocument* doc, bool otherItem, QWidget* parent = nullptr);

    const QVector<ProjectRun>& runs() const { return m_runs; }
    // The chosen run; nullopt when none has weights or the other entry is selected.
    std::optional<ProjectRun> chosen() const;
    // Why no run can be chosen (empty when one can).
    QString whyNone() const { return m_whyNone; }
    // Selects the run with that history id (0: the checkpoint folder's entry) if it has weights; false otherwise.
    bool choose(qint64 id);
    void chooseOther();
    bool otherSelected() const;

public slots:
    // Lists the runs again. A choice the user made stays while its run has weights; otherwise the newest run
    // with weights is chosen. `resetChoice` forgets the user's choice (another project).
    void refresh(bool resetChoice = false);

signals:
    // The chosen run changed, by the user or by a refresh (read chosen()).
    void runChosen();
    // The user selected the other entry.
    void otherChosen();

private:
    void onActivated(int index);

    ProjectDocument* m_doc;
    bool m_otherItem;
    QVector<ProjectRun> m_runs;
    QString m_whyNone;
    std::string m_checkpointDir;  // the setting the list was made with
    qint64 m_userChoice = -1;     // the run the user picked; -1: none (follow the newest)
    bool m_filling = false;
};

}  // namespace strata::ui
