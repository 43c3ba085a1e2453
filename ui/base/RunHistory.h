// RunHistory: one SQLite database per user recording every training run
// started from the workbench: when, which project and device, the full
// project JSON (graph, dataset and training settings) so a run can be
// repeated, how it ended, and its metrics (per step and per epoch).
// Writes are batched: the dashboard hands over the points of each UI tick in
// one transaction.
#pragma once

#include <QDateTime>
#include <QString>
#include <QVector>

#include "core/graph/Project.h"
#include "core/train/TrainingObserver.h"

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
        qint64 steps = 0;  // the last step it recorded
        double bestValLoss = 0, bestValAccuracy = 0, seconds = 0;
    };

    // Opens or creates the database; an empty path means the per-user default
    // (<AppDataLocation>/runs.sqlite). isOpen() says whether it worked.
    explicit RunHistory(const QString& path = {});
    ~RunHistory();
    RunHistory(const RunHistory&) = delete;
    RunHistory& operator=(const RunHistory&) = delete;

    static QString defaultPath();
    // The per-user data folder (the default database's folder; unsaved projects' runs go under it).
    static QString defaultDataDir();
    bool isOpen() const { return m_open; }
    QString lastError() const { return m_error; }
    QString path() const { return m_path; }

    // Returns the new run's id, or 0 on failure. started: when the run started (default: now); a run recorded
    // at its first step gives the time it started, which ProjectRuns compares with its checkpoint's.
    qint64 beginRun(const Project& project, const QString& projectPath, const QString& device,
                    const QString& runFolder = {}, const QDateTime& started = {});
    // Marks runs still "running" whose workbench process is gone as "interrupted", with the epochs their
    // metrics recorded (call at start-up); returns how many.
    int markInterruptedRuns();
    void addSteps(qint64 run, const QVector<StepEvent>& steps);
    void addEpoch(qint64 run, const EpochEvent& epoch);
    void finishRun(qint64 run, const QString& status, const QString& message, const FinishedEvent& finished);

    QVector<RunSummary> runs() const;  // newest first
    // The runs of one project, newest first: those that recorded its id, and those recorded without an id at
    // its path (RunStore::projectRunsWhereSql).
    QVector<RunSummary> runsOfProject(const QString& projectId, const QString& projectPath) const;
    // A project trained before its first save: its runs (its id, no path) take the path it was saved to.
    // Returns how many.
    int adoptUnsavedRuns(const QString& projectId, const QString& projectPath);
    // A project file from before ids, given one when saved where it was: its runs (that path, no id) take it.
    int adoptRunsOfFile(const QString& projectPath, const QString& projectId);
    // Rows in the metrics table for a run: kind "step" or "epoch".
    int metricCount(qint64 run, const QString& kind) const;
    QString projectJson(qint64 run) const;
    // The newest run of the project (as runsOfProject) that recorded a step; 0 when none.
    qint64 lastRunOf(const QString& projectId, const QString& projectPath) const;
    // A run's recorded points, in order: its steps, and its epochs each with the last step before it (the x
    // the dashboard plots it at).
    QVector<StepEvent> stepsOf(qint64 run) const;
    QVector<QPair<EpochEvent, qint64>> epochsOf(qint64 run) const;

private:
    bool exec(const QString& sql);
    QVector<RunSummary> selectRuns(const QString& where, const QVariantList& values) const;

    QString m_connection, m_path, m_error;
    bool m_open = false;
};

}  // namespace strata::ui
