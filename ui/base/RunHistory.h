// RunHistory: the workbench's view of the per-user run history, a thin Qt model over core's RunStore (the one
// reader and writer of the database, shared with strata-train): QString and QDateTime in and out, no SQL here.
// Every run started from the workbench is recorded: when, which project and device, the full project JSON
// (graph, dataset and training settings) so a run can be repeated, how it ended, and its metrics (per step and
// per epoch). The dashboard hands over the points of each UI tick; they are written through a RunRecorder, as
// strata-train's are, so a database another program keeps locked mid-run loses nothing (queued, retried, kept
// in a pending file at the end) and the run records source "gui", this host and this process.
#pragma once

#include <QDateTime>
#include <QString>
#include <QStringList>
#include <QVector>
#include <map>
#include <memory>

#include "core/graph/Project.h"
#include "core/train/TrainingObserver.h"

namespace strata::history {
class RunStore;
class RunRecorder;
}  // namespace strata::history

namespace strata::ui {

class RunHistory {
public:
    struct RunSummary {
        qint64 id = 0;
        QDateTime started;
        QString projectName, projectPath, projectId, device;
        QString name;       // given in the Runs view; empty: none
        QString status;     // running | finished | stopped | failed | interrupted
        QString runFolder;  // where the run's checkpoints went (empty: none)
        QString message;    // error message or finish summary
        int epochsCompleted = 0, bestEpoch = 0;
        qint64 steps = 0;                                          // the last step it recorded
        double bestValLoss = 0, bestValAccuracy = 0, seconds = 0;  // 0: not recorded
    };

    // Opens or creates the database; an empty path means the per-user default
    // (<AppDataLocation>/runs.sqlite). isOpen() says whether it worked.
    explicit RunHistory(const QString& path = {});
    // A run still being recorded stays 'running' (its queued points written): the next start marks it
    // interrupted.
    ~RunHistory();
    RunHistory(const RunHistory&) = delete;
    RunHistory& operator=(const RunHistory&) = delete;

    static QString defaultPath();
    // The per-user data folder (the default database's folder; unsaved projects' runs go under it).
    static QString defaultDataDir();
    bool isOpen() const { return m_store != nullptr; }
    QString lastError() const { return m_error; }
    QString path() const { return m_path; }

    // For the workbench's start: RunStore::recover (replays the pending files of processes that are gone, marks
    // the runs of this host whose process is gone 'interrupted' with the epochs they recorded; a run of another
    // host is left alone). Returns what it did, one line each; empty when there was nothing to do.
    QStringList recover();

    // Returns the new run's id, or 0 on failure. started: when the run started (default: now); a run recorded
    // at its first step gives the time it started, which ProjectRuns compares with its checkpoint's.
    qint64 beginRun(const Project& project, const QString& projectPath, const QString& device,
                    const QString& runFolder = {}, const QDateTime& started = {});
    // The writes of a run begun here; they never block for long: a locked database queues them.
    void addSteps(qint64 run, const QVector<StepEvent>& steps);
    void addEpoch(qint64 run, const EpochEvent& epoch);
    void finishRun(qint64 run, const QString& status, const QString& message, const FinishedEvent& finished);

    QVector<RunSummary> runs() const;  // newest first
    // The runs of one project, newest first: those that recorded its id, and those recorded without an id at
    // its path (RunStore::runsOfProject).
    QVector<RunSummary> runsOfProject(const QString& projectId, const QString& projectPath) const;
    // A project trained before its first save: its runs (its id, no path) take the path it was saved to.
    // Returns how many.
    int adoptUnsavedRuns(const QString& projectId, const QString& projectPath);
    // A project file from before ids, given one when saved where it was: its runs (that path, no id) take it.
    int adoptRunsOfFile(const QString& projectPath, const QString& projectId);
    // Rows in the metrics table for a run: kind "step" or "epoch"; -1 when the history cannot be read.
    int metricCount(qint64 run, const QString& kind) const;
    QString projectJson(qint64 run) const;
    // The newest run of the project (as runsOfProject) that recorded a step; 0 when none.
    qint64 lastRunOf(const QString& projectId, const QString& projectPath) const;
    // A run's recorded points, in order: its steps, and its epochs each with the last step before it (the x
    // the dashboard plots it at).
    QVector<StepEvent> stepsOf(qint64 run) const;
    QVector<QPair<EpochEvent, qint64>> epochsOf(qint64 run) const;

private:
    // Runs `f` on the store; an exception becomes lastError() and `fallback` the result.
    template <typename T, typename F>
    T attempt(T fallback, F&& f) const;
    history::RunRecorder* recorder(qint64 run);

    QString m_path;
    mutable QString m_error;
    std::unique_ptr<history::RunStore> m_store;
    std::unique_ptr<TrainingObserver> m_log;                              // the recorders' messages, to stderr
    std::map<qint64, std::unique_ptr<history::RunRecorder>> m_recorders;  // the runs being recorded
};

}  // namespace strata::ui
