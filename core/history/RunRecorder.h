// RunRecorder: a TrainingObserver that records a run into a RunStore and
// passes every event on to another observer (the CLI's printer). Steps are
// buffered and written in one transaction per 256 steps or per epoch, so the
// engine thread pays a few milliseconds per batch of points, not one
// transaction per step. A failed write is reported once through onLog and
// stops the recording; it never stops the training.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/history/RunStore.h"
#include "core/train/TrainingObserver.h"

namespace strata::history {

class RunRecorder : public TrainingObserver {
public:
    // Starts the run's row now (status running). Throws when the store cannot.
    RunRecorder(RunStore& store, TrainingObserver* next, const Project& project, const std::string& projectPath,
                const std::string& device, const std::string& source, const std::string& runFolder = {});
    ~RunRecorder() override;
    RunRecorder(const RunRecorder&) = delete;
    RunRecorder& operator=(const RunRecorder&) = delete;

    int64_t runId() const { return m_run; }
    // Writes the final row when the trainer returned without onFinished or onError (an exception).
    void finishIfOpen(const std::string& status, const std::string& message);

    void onStep(const StepEvent& e) override;
    void onEpoch(const EpochEvent& e) override;
    void onTelemetry(const TelemetryEvent& e) override;
    void onCheckpoint(const CheckpointEvent& e) override;
    void onFinished(const FinishedEvent& e) override;
    void onError(const std::string& message) override;
    void onLog(const std::string& message) override;

private:
    template <class F>
    void write(F&& f);
    void flushSteps();

    std::mutex m_mutex;
    RunStore& m_store;
    TrainingObserver* m_next;
    int64_t m_run = 0;
    std::vector<StepEvent> m_steps;
    bool m_failed = false, m_open = true;
    std::string m_error;
};

}  // namespace strata::history
