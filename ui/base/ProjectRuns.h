// ProjectRuns: the open project's runs as Export, Predict, Optimize and the dashboard offer them. A run
// belongs to a project by the project id it recorded (or, recorded without one, by its project file's path:
// RunStore::runsOfProject), so another project's weights are never offered, whatever folder they are in.
// Each run comes with the checkpoint it kept (best, else latest, in its folder) or the reason it has none; when
// the project's checkpoint folder holds weights that no recorded run wrote (trained with the history off, or
// before there was one), the folder is offered too. No widgets.
#pragma once

#include <QDateTime>
#include <QString>
#include <QVector>
#include <limits>
#include <optional>

namespace strata::ui {

class ProjectDocument;

struct ProjectRun {
    qint64 id = 0;  // the run history's id; 0: the project's checkpoint folder, no recorded run
    QString name;   // given in the Runs view
    QDateTime started;
    QString status;  // running | finished | stopped | failed | interrupted ("" for the folder)
    int epochs = 0;
    qint64 steps = 0;
    double valAccuracy = std::numeric_limits<double>::quiet_NaN();  // best validation accuracy; NaN: none
    QString folder;                                                 // where its checkpoints are
    QString checkpoint;   // the file Export, Predict and Optimize load; empty: none (see unavailable)
    QString unavailable;  // why there is no checkpoint ("kept no weights", "overwritten by run 7")
    bool usable() const { return !checkpoint.isEmpty(); }
    // One line naming it: "run 12 "baseline", 2026-12-04 13:05, 3 epochs, 88.67% validation accuracy, stopped"
    // (a run stopped within its first epoch: "141 steps").
    QString label() const;
};

// The open project's runs, newest first (the checkpoint folder's entry, when there is one, last). Without a run
// history only the checkpoint folder can be offered.
QVector<ProjectRun> projectRuns(const ProjectDocument& doc);
// The newest usable run of `runs`; nullopt with `why` (what to do about it) when there is none.
std::optional<ProjectRun> latestUsableRun(const QVector<ProjectRun>& runs, const ProjectDocument& doc, QString* why);
// The run with history id `id` in `runs` (0: the checkpoint folder's entry); nullopt when absent.
std::optional<ProjectRun> runWithId(const QVector<ProjectRun>& runs, qint64 id);

}  // namespace strata::ui
