// RunStore: the per-user run history (one SQLite database, WAL mode) on
// SQLite's C API, so the headless trainer records its runs without Qt. It is
// the history's only writer and reader: strata-train records through it
// (RunRecorder), and the workbench's ui/base/RunHistory is a Qt model over it
// (QString in, QString out, no SQL of its own), so a new column is added here
// alone. Tables: runs (one row per run: project, settings as the full project
// JSON, device, source, host and pid, status, best and final metrics, notes)
// and metrics (every step and epoch point: the curves; an epoch's task metrics, R^2, F1s, PSNR, as JSON).
//
// Schema changes are additive: a new column is added by ensureSchema to an
// older database (ALTER TABLE ... ADD COLUMN), never renamed or dropped, so a
// database written by an older Strata opens in a newer one and the reverse.
//
// Nothing of a run is lost to a locked database or a dead process, whichever program records it:
// - Writes another connection keeps locked out are queued by the recorder (RunRecorder.h) and retried; what is
//   still unwritten when the run ends goes to a pending file beside the database
//   ("runs.sqlite.pending-<host>-<pid>-<run>.jsonl", PendingWrite lines), which recover() replays.
// - A run whose process died (SIGKILL, a crash, an MPI rank killed by a signal) stays 'running' until recover()
//   finds its process gone: it becomes 'interrupted', with the last epoch it finished and its curves as far as
//   they were written. Only the host that recorded a run can tell: a run of another host is left alone.
// recover() is for the start of every program that opens the history (strata-train's train, runs and sweep
// commands call it; the workbench calls it through RunHistory::recover at start-up).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/graph/Project.h"
#include "core/train/TrainingObserver.h"

struct sqlite3;

namespace strata::history {

// A numeric field that the run did not produce (no validation split, a run
// that never finished an epoch) is NaN.
struct RunRecord {
    int64_t id = 0;
    std::string started;  // ISO 8601, UTC
    std::string projectName, projectPath, device, source, status, message, name, notes;
    std::string projectId, runFolder, host;  // empty: not recorded (a run of an older Strata)
    int64_t lastStep = 0;                    // the last step it recorded; 0: none
    int epochsCompleted = 0, bestEpoch = 0;
    double bestValLoss = 0, bestValAccuracy = 0;
    double finalTrainLoss = 0, finalTrainAccuracy = 0, finalValLoss = 0, finalValAccuracy = 0;
    double samplesPerSecond = 0, seconds = 0;
    // Tasks other than classification: the last epoch's validation metrics (EpochEvent::valMetrics); empty
    // otherwise, and for runs of an older Strata.
    std::vector<NamedMetric> finalValMetrics;
};

// One point of a curve: kind "step" (loss, accuracy, learningRate per batch) or
// "epoch" (train and validation loss and accuracy per epoch).
struct MetricRow {
    std::string kind;
    int64_t step = 0;
    int epoch = 0;
    double loss = 0, accuracy = 0, learningRate = 0, samplesPerSecond = 0, valLoss = 0, valAccuracy = 0,
           elapsedSeconds = 0;
    std::vector<NamedMetric> valMetrics;  // "epoch" rows of tasks other than classification (EpochEvent's)
};

// A write of one run that has not reached the database yet (RunRecorder's queue, a pending file's lines).
struct PendingWrite {
    enum class Kind { Steps, Epoch, Finish };
    Kind kind = Kind::Steps;
    std::vector<StepEvent> steps;  // Steps
    EpochEvent epoch;              // Epoch
    std::string status, message;   // Finish
    FinishedEvent finished;        // Finish
};

class RunStore {
public:
    // Opens or creates the database (and its folder); throws std::runtime_error naming the path when it
    // cannot.
    explicit RunStore(const std::string& path);
    ~RunStore();
    RunStore(const RunStore&) = delete;
    RunStore& operator=(const RunStore&) = delete;

    // The workbench's database: Qt's AppDataLocation for organization and application "Strata" on Linux,
    // $XDG_DATA_HOME (or ~/.local/share)/Strata/Strata/runs.sqlite.
    static std::string defaultPath();
    // Creates the tables and adds the columns a database written by an older Strata lacks. Returns an
    // empty string, or the error.
    static std::string ensureSchema(const std::string& path);

    const std::string& path() const { return m_path; }

    // source: "gui", "cli" or "sweep"; runFolder: where the run's checkpoints go; started: when the run started
    // (ISO 8601 UTC; empty: now). Records this process's id and host, so a 'running' row whose process is gone
    // is known to be interrupted. Returns the new run's id.
    int64_t beginRun(const Project& project, const std::string& projectPath, const std::string& device,
                     const std::string& source, const std::string& runFolder = {}, const std::string& started = {});
    void addSteps(int64_t run, const std::vector<StepEvent>& steps);  // one transaction
    void addEpoch(int64_t run, const EpochEvent& epoch);
    // status: finished | stopped | failed | refused (the run stopped before its first step: bad data, the memory
    // check, ranks that differ; not a failed run).
    void finishRun(int64_t run, const std::string& status, const std::string& message, const FinishedEvent& f);
    // Applies a run's queued writes in order, in one transaction. `replace` (for writes that may have reached
    // the database before, as a pending file replayed after a crash): the run's step (epoch) rows from the
    // first step (epoch) the writes hold on are replaced, not doubled. Without it nothing is deleted (a
    // recorder's own queue: each flush would otherwise scan the run's rows).
    void applyPending(int64_t run, const std::vector<PendingWrite>& writes, bool replace = false);

    // How long a write waits for another connection's lock before it throws (SQLite's busy timeout; 5000 ms
    // unless set).
    void setBusyTimeout(int milliseconds);

    // The pending file of a run of this process, beside the database at `dbPath`.
    static std::string pendingFilePath(const std::string& dbPath, int64_t run);
    // Appends writes to a pending file (fsynced before it returns); throws std::runtime_error naming the file.
    static void appendPendingFile(const std::string& file, int64_t run, const std::vector<PendingWrite>& writes);
    // A pending file's run and writes; throws std::runtime_error naming the file and line.
    static std::vector<PendingWrite> readPendingFile(const std::string& file, int64_t& run);

    // At start: replays the pending files of processes that are gone (a file of a process still running is its
    // own), then marks the runs still 'running' whose process is gone as 'interrupted' (recorded on this host;
    // a pid reused by a later process does not count as the run's). Returns lines saying what it did, for a log;
    // a database still locked or a file that does not load is said, and left for the next start.
    std::vector<std::string> recover();

    std::vector<RunRecord> runs() const;  // newest first
    std::optional<RunRecord> run(int64_t id) const;
    std::vector<MetricRow> metrics(int64_t run, const std::string& kind) const;  // in step (epoch) order
    // Rows of one kind ("step" or "epoch") a run has.
    int64_t metricCount(int64_t run, const std::string& kind) const;
    // A run's points as the trainer reported them, for a view that replays them: its steps in order, and its
    // epochs in order, each with the last step at or before it (where a chart over steps plots it) and `best`
    // set on the run's best epoch.
    std::vector<StepEvent> stepEvents(int64_t run) const;
    std::vector<std::pair<EpochEvent, int64_t>> epochEvents(int64_t run) const;
    std::string projectJson(int64_t run) const;
    // Each returns false when no run has that id.
    bool deleteRun(int64_t run);
    bool renameRun(int64_t run, const std::string& name);
    bool setNotes(int64_t run, const std::string& notes);
    // --- The runs of one project (issue 34). A run belongs to the project whose id it recorded; a run recorded
    // without an id (a project file from before ids, or an older Strata) to the project file at its path.
    // An empty id or path matches nothing. Newest first.
    std::vector<RunRecord> runsOfProject(const std::string& projectId, const std::string& projectPath) const;
    std::vector<int64_t> runIdsOfProject(const std::string& projectId, const std::string& projectPath) const;
    // The newest of them that recorded a step; 0 when none.
    int64_t lastRunOf(const std::string& projectId, const std::string& projectPath) const;
    // A project trained before its first save: its runs (its id, no path) take the path it was saved to.
    // Returns how many; nothing when either is empty.
    int64_t adoptUnsavedRuns(const std::string& projectId, const std::string& projectPath);
    // A project file from before ids, given one when saved where it was: its runs (that path, no id) take it.
    int64_t adoptRunsOfFile(const std::string& projectPath, const std::string& projectId);
    // SQLite's integrity check: "ok", or what is damaged (bench/: the database after a writer is killed).
    std::string integrityCheck() const;

private:
    void exec(const std::string& sql);

    std::string m_path;
    sqlite3* m_db = nullptr;
};

// The settings that differ between two runs' project JSON, as dotted key paths ("training.learning_rate",
// "graph.nodes[2].params.units") with each side's value as JSON text ("(absent)" when a side lacks the key).
// Objects are compared key by key, arrays element by element; canvas positions and the project's id are not
// settings and are skipped.
std::vector<std::pair<std::string, std::pair<std::string, std::string>>> settingsDiff(const Json& a, const Json& b);

// A run's metrics as CSV: kind,step,epoch,loss,accuracy,learning_rate,samples_per_second,val_loss,
// val_accuracy,elapsed_seconds (empty cells for NaN), then one val_NAME column per task metric the rows hold
// (val_r2, val_micro_f1, "val_precision[a,b]"...).
std::string metricsCsv(const std::vector<MetricRow>& rows);

}  // namespace strata::history
