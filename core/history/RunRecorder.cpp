// RunRecorder: see RunRecorder.h.
#include "core/history/RunRecorder.h"

#include <exception>

namespace strata::history {

namespace {
constexpr size_t kStepBatch = 256;
}

RunRecorder::RunRecorder(RunStore& store, TrainingObserver* next, const Project& project,
                         const std::string& projectPath, const std::string& device, const std::string& source,
                         const std::string& runFolder)
    : m_store(store), m_next(next), m_run(store.beginRun(project, projectPath, device, source, runFolder)) {
    m_steps.reserve(kStepBatch);
}

RunRecorder::~RunRecorder() {
    try {
        finishIfOpen("failed", "the run ended without a result");
    } catch (...) {  // a destructor reports nothing; the row stays 'running'
    }
}

template <class F>
void RunRecorder::write(F&& f) {
    if (m_failed) return;
    try {
        f();
    } catch (const std::exception& e) {
        m_failed = true;
        if (m_next) m_next->onLog("run history: recording stopped (" + std::string(e.what()) + "); training goes on");
    }
}

void RunRecorder::flushSteps() {
    if (m_steps.empty()) return;
    write([&] { m_store.addSteps(m_run, m_steps); });
    m_steps.clear();
}

void RunRecorder::onStep(const StepEvent& e) {
    {
        std::lock_guard lock(m_mutex);
        m_steps.push_back(e);
        if (m_steps.size() >= kStepBatch) flushSteps();
    }
    if (m_next) m_next->onStep(e);
}

void RunRecorder::onEpoch(const EpochEvent& e) {
    {
        std::lock_guard lock(m_mutex);
        flushSteps();
        write([&] { m_store.addEpoch(m_run, e); });
    }
    if (m_next) m_next->onEpoch(e);
}

void RunRecorder::onTelemetry(const TelemetryEvent& e) {
    if (m_next) m_next->onTelemetry(e);
}

void RunRecorder::onCheckpoint(const CheckpointEvent& e) {
    if (m_next) m_next->onCheckpoint(e);
}

void RunRecorder::onFinished(const FinishedEvent& e) {
    {
        std::lock_guard lock(m_mutex);
        flushSteps();
        const std::string status = e.stoppedByUser ? "stopped" : "finished";
        const std::string message = e.earlyStopped ? "early stopped" : "";
        write([&] { m_store.finishRun(m_run, status, m_error.empty() ? message : m_error, e); });
        m_open = false;
    }
    if (m_next) m_next->onFinished(e);
}

void RunRecorder::onError(const std::string& message) {
    {
        std::lock_guard lock(m_mutex);
        flushSteps();
        m_error = message;
        write([&] { m_store.finishRun(m_run, "failed", message, FinishedEvent{}); });
        m_open = false;
    }
    if (m_next) m_next->onError(message);
}

void RunRecorder::onLog(const std::string& message) {
    if (m_next) m_next->onLog(message);
}

void RunRecorder::finishIfOpen(const std::string& status, const std::string& message) {
    std::lock_guard lock(m_mutex);
    if (!m_open) return;
    flushSteps();
    write([&] { m_store.finishRun(m_run, status, message, FinishedEvent{}); });
    m_open = false;
}

}  // namespace strata::history
