// RunRecorder: see RunRecorder.h.
#include "core/history/RunRecorder.h"

#include <exception>
#include <filesystem>

namespace strata::history {

namespace {
constexpr size_t kStepBatch = 256;
}

RunRecorder::RunRecorder(RunStore& store, TrainingObserver* next, const Project& project,
                         const std::string& projectPath, const std::string& device, const std::string& source,
                         const std::string& runFolder, const std::string& started)
    : m_store(store), m_next(next), m_run(store.beginRun(project, projectPath, device, source, runFolder, started)) {
    m_steps.reserve(kStepBatch);
    m_pendingFile = RunStore::pendingFilePath(store.path(), m_run);
}

RunRecorder::~RunRecorder() {
    try {
        finishIfOpen("failed", "the run ended without a result");
    } catch (...) {  // a destructor reports nothing; the row stays 'running' until recover() finds it
    }
}

void RunRecorder::say(const std::string& message) {
    if (m_next) m_next->onLog(message);
}

void RunRecorder::queueSteps() {
    if (m_steps.empty()) return;
    PendingWrite w;
    w.kind = PendingWrite::Kind::Steps;
    w.steps.swap(m_steps);
    m_queuedSteps += static_cast<int64_t>(w.steps.size());
    m_queue.push_back(std::move(w));
    m_steps.reserve(kStepBatch);
}

void RunRecorder::flush(bool final) {
    if (m_queue.empty() && !m_spilled) return;
    if (!final && Clock::now() < m_retryAt) {
        if (m_queuedSteps > kMaxQueuedSteps) spill();
        return;
    }
    m_store.setBusyTimeout(final ? kFinalWaitMs : kRunWaitMs);
    try {
        if (m_spilled) {
            int64_t run = 0;
            const std::vector<PendingWrite> older = RunStore::readPendingFile(m_pendingFile, run);
            m_store.applyPending(m_run, older);
            m_spilled = false;
            std::error_code ec;
            std::filesystem::remove(m_pendingFile, ec);  // if it stays, recover() replays it harmlessly
        }
        const size_t count = m_queue.size();
        m_store.applyPending(m_run, m_queue);
        m_queue.clear();
        m_queuedSteps = 0;
        if (m_behind) {
            m_behind = false;
            say("run history: caught up (" + std::to_string(count) + " queued write(s) recorded)");
        }
    } catch (const std::exception& e) {
        m_retryAt = Clock::now() + std::chrono::seconds(kRetrySeconds);
        if (!m_behind) {
            m_behind = true;
            say("run history: cannot write (" + std::string(e.what()) +
                "); the run's points are queued and retried, training goes on");
        }
        if (m_queuedSteps > kMaxQueuedSteps) spill();
    }
    m_store.setBusyTimeout(kFinalWaitMs);
}

void RunRecorder::spill() {
    if (m_queue.empty()) return;
    try {
        RunStore::appendPendingFile(m_pendingFile, m_run, m_queue);
    } catch (const std::exception& e) {
        // Kept in memory: the next try may write them, or the disk may have room again.
        say("run history: " + std::string(e.what()));
        return;
    }
    if (!m_spilled) say("run history: the database stays locked; the run's points go to " + m_pendingFile);
    m_spilled = true;
    m_queue.clear();
    m_queuedSteps = 0;
}

void RunRecorder::onStep(const StepEvent& e) {
    {
        std::lock_guard lock(m_mutex);
        m_steps.push_back(e);
        m_lastElapsed = e.elapsedSeconds;
        if (m_steps.size() >= kStepBatch) {
            queueSteps();
            flush(false);
        }
    }
    if (m_next) m_next->onStep(e);
}

void RunRecorder::onEpoch(const EpochEvent& e) {
    {
        std::lock_guard lock(m_mutex);
        m_lastEpoch = e.epoch;
        queueSteps();
        PendingWrite w;
        w.kind = PendingWrite::Kind::Epoch;
        w.epoch = e;
        m_queue.push_back(std::move(w));
        flush(false);
    }
    if (m_next) m_next->onEpoch(e);
}

void RunRecorder::onTelemetry(const TelemetryEvent& e) {
    if (m_next) m_next->onTelemetry(e);
}

void RunRecorder::onCheckpoint(const CheckpointEvent& e) {
    if (m_next) m_next->onCheckpoint(e);
}

void RunRecorder::onTrainingStarted() {
    {
        std::lock_guard lock(m_mutex);
        m_started = true;
    }
    if (m_next) m_next->onTrainingStarted();
}

// The run's last writes: queued after everything before them, waited for longer, and kept in the pending file
// when the database still does not take them.
void RunRecorder::finish(std::string status, const std::string& message, const FinishedEvent& e) {
    if (!m_open) return;
    m_open = false;
    if (status == "failed" && !m_started) status = "refused";
    queueSteps();
    PendingWrite w;
    w.kind = PendingWrite::Kind::Finish;
    w.status = status;
    w.message = message;
    w.finished = e;
    // A run that ended without its result (an error) still finished the epochs it reported.
    if (w.finished.epochsCompleted == 0) w.finished.epochsCompleted = m_lastEpoch;
    if (w.finished.seconds == 0) w.finished.seconds = m_lastElapsed;
    m_queue.push_back(std::move(w));
    flush(true);
    if (m_queue.empty() && !m_spilled) return;
    spill();
    if (m_spilled && m_queue.empty())
        say("run history: the database stayed locked; the run's last writes are in " + m_pendingFile +
            ", recorded when strata-train or the workbench next opens the history");
    else
        say("run history: the run's last writes could not be kept; its row stays 'running' until the next start "
            "marks it interrupted");
}

void RunRecorder::onFinished(const FinishedEvent& e) {
    {
        std::lock_guard lock(m_mutex);
        const std::string status = e.stoppedByUser ? "stopped" : "finished";
        const std::string message = e.earlyStopped ? "early stopped" : "";
        finish(status, m_error.empty() ? message : m_error, e);
    }
    if (m_next) m_next->onFinished(e);
}

void RunRecorder::onError(const std::string& message) {
    {
        std::lock_guard lock(m_mutex);
        m_error = message;
        finish("failed", message, FinishedEvent{});
    }
    if (m_next) m_next->onError(message);
}

void RunRecorder::onLog(const std::string& message) {
    if (m_next) m_next->onLog(message);
}

void RunRecorder::finishIfOpen(const std::string& status, const std::string& message) {
    std::lock_guard lock(m_mutex);
    finish(status, message, FinishedEvent{});
}

void RunRecorder::addSteps(const std::vector<StepEvent>& steps) {
    if (steps.empty()) return;
    std::lock_guard lock(m_mutex);
    if (!m_open) return;
    queueSteps();
    PendingWrite w;
    w.kind = PendingWrite::Kind::Steps;
    w.steps = steps;
    m_queuedSteps += static_cast<int64_t>(steps.size());
    m_queue.push_back(std::move(w));
    m_lastElapsed = steps.back().elapsedSeconds;
    flush(false);
}

void RunRecorder::finishRun(const std::string& status, const std::string& message, const FinishedEvent& e) {
    std::lock_guard lock(m_mutex);
    m_started = true;  // the caller names the status: "failed" stays failed
    finish(status, message, e);
}

void RunRecorder::leaveRunning() {
    std::lock_guard lock(m_mutex);
    if (!m_open) return;
    m_open = false;
    queueSteps();
    flush(true);
    if (!m_queue.empty()) spill();
}

std::string RunRecorder::pendingFile() const {
    std::lock_guard lock(m_mutex);
    return m_spilled && !m_open ? m_pendingFile : std::string();
}

}  // namespace strata::history
