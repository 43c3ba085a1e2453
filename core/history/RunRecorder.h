// RunRecorder: a TrainingObserver that records a run into a RunStore and
// passes every event on to another observer (the CLI's printer). Steps are
// buffered and written in one transaction per 256 steps or per epoch, so the
// engine thread pays a few milliseconds per batch of points, not one
// transaction per step. The workbench records through it too (RunHistory),
// handing over the points of each UI tick (addSteps) and its own ending
// (finishRun), so a GUI run gets the same queue, retries and pending file.
//
// A write that fails (another program holds the database locked, a full disk) never stops the training, and
// nothing is dropped: the writes queue in order and are retried every two seconds, each try waiting at most
// 100 ms for the lock, so a locked database costs the engine thread little. Past 65536 queued step points the
// queue moves to the run's pending file beside the database (RunStore::pendingFilePath), so memory stays
// bounded. When the run ends, the last writes wait up to five seconds for the lock; what still cannot be
// written stays in the pending file, which RunStore::recover() replays at the next start. onLog says once
// that the history is behind, and again when it has caught up or where the writes went.
//
// A run that ends with an error before its first step (onTrainingStarted: bad data, the memory check, ranks
// that differ) is recorded as 'refused', not 'failed'.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/history/RunStore.h"
#include "core/train/TrainingObserver.h"

namespace strata::history {

class RunRecorder : public TrainingObserver {
public:
    // Starts the run's row now (status running; started: as RunStore::beginRun). Throws when the store cannot.
    RunRecorder(RunStore& store, TrainingObserver* next, const Project& project, const std::string& projectPath,
                const std::string& device, const std::string& source, const std::string& runFolder = {},
                const std::string& started = {});
    ~RunRecorder() override;
    RunRecorder(const RunRecorder&) = delete;
    RunRecorder& operator=(const RunRecorder&) = delete;

    int64_t runId() const { return m_run; }
    // Writes the final row when the trainer returned without onFinished or onError (an exception).
    void finishIfOpen(const std::string& status, const std::string& message);
    // Once the run has ended: the pending file holding the writes the database did not take, or empty when
    // every write reached it.
    std::string pendingFile() const;

    // For a caller that batches the points itself (the workbench, once per UI tick): the steps are queued as one
    // write and written now unless the database is being retried.
    void addSteps(const std::vector<StepEvent>& steps);
    // Ends the run with the status the caller decided (finished | stopped | failed), as onFinished would.
    void finishRun(const std::string& status, const std::string& message, const FinishedEvent& e);
    // The program goes away while the run goes on (the workbench closed mid-run): what is queued is written (or
    // kept in the pending file) and the row stays 'running', for recover() to mark 'interrupted' once this
    // process is gone, not 'failed' as the destructor would.
    void leaveRunning();

    void onStep(const StepEvent& e) override;
    void onEpoch(const EpochEvent& e) override;
    void onTelemetry(const TelemetryEvent& e) override;
    void onCheckpoint(const CheckpointEvent& e) override;
    void onTrainingStarted() override;
    void onFinished(const FinishedEvent& e) override;
    void onError(const std::string& message) override;
    void onLog(const std::string& message) override;

    // The limits above, for tests.
    static constexpr int kRunWaitMs = 100, kFinalWaitMs = 5000, kRetrySeconds = 2;
    static constexpr int64_t kMaxQueuedSteps = 65536;

private:
    using Clock = std::chrono::steady_clock;
    void queueSteps();
    void finish(std::string status, const std::string& message, const FinishedEvent& e);
    // Writes the spilled file and the queue, in order; `final`: the run's end (waits longer, then spills).
    void flush(bool final);
    void spill();
    void say(const std::string& message);

    mutable std::mutex m_mutex;
    RunStore& m_store;
    TrainingObserver* m_next;
    int64_t m_run = 0;
    std::vector<StepEvent> m_steps;     // this batch of step points
    std::vector<PendingWrite> m_queue;  // written by the next flush
    int64_t m_queuedSteps = 0;
    std::string m_pendingFile;  // holds writes older than m_queue's while m_spilled
    bool m_spilled = false;
    bool m_behind = false;  // said that the history is behind
    Clock::time_point m_retryAt{};
    bool m_open = true, m_started = false;
    int m_lastEpoch = 0;       // the last epoch reported
    double m_lastElapsed = 0;  // seconds into the run at the last step
    std::string m_error;
};

}  // namespace strata::history
