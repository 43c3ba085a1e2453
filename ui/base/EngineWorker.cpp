// EngineWorker: the engine side of the GUI (see EngineWorker.h).
#include "ui/base/EngineWorker.h"

#include <chrono>
#include <exception>

#include "core/backend/Backend.h"
#include "core/backend/BackendRegistry.h"
#include "core/train/BackendOptionsFor.h"
#include "core/train/Trainer.h"

namespace strata::ui {

void registerEngineMetaTypes() {
    static const bool once = [] {
        qRegisterMetaType<strata::StepEvent>("strata::StepEvent");
        qRegisterMetaType<strata::EpochEvent>("strata::EpochEvent");
        qRegisterMetaType<strata::TelemetryEvent>("strata::TelemetryEvent");
        qRegisterMetaType<strata::CheckpointEvent>("strata::CheckpointEvent");
        qRegisterMetaType<strata::FinishedEvent>("strata::FinishedEvent");
        qRegisterMetaType<strata::Project>("strata::Project");
        return true;
    }();
    (void)once;
}

EngineWorker::EngineWorker(QObject* parent) : QObject(parent) { registerEngineMetaTypes(); }

EngineWorker::~EngineWorker() = default;

void EngineWorker::pause() {
    bool changed = false;
    {
        std::lock_guard lock(m_mutex);
        if (m_trainer) {
            m_trainer->requestPause();
            changed = true;
        } else if (m_running) {
            m_pendingPause = true;
            changed = true;
        }
    }
    // Emitted outside the lock: a direct receiver may call back into the worker.
    if (changed) emit pausedChanged(true);
}

void EngineWorker::resume() {
    {
        std::lock_guard lock(m_mutex);
        m_pendingPause = false;
        if (m_trainer) m_trainer->requestResume();
    }
    if (m_running) emit pausedChanged(false);
}

void EngineWorker::stop() {
    std::lock_guard lock(m_mutex);
    if (m_trainer) {
        m_trainer->requestStop();  // also wakes a paused Trainer
    } else if (m_running) {
        m_pendingStop = true;
    }
}

void EngineWorker::saveNow() {
    std::lock_guard lock(m_mutex);
    if (m_trainer)
        m_trainer->requestCheckpoint();
    else if (m_running)
        m_pendingCheckpoint = true;
}

void EngineWorker::reportUnsampledDevice(const Device& device) {
    // The Trainer silently skips a device without a telemetry source; say so once.
    std::string reason;
    std::unique_ptr<TelemetrySource> source;
    try {
        source = backendRegistry().telemetry(device);
    } catch (const std::exception& e) {
        reason = e.what();
    }
    if (source) return;
    TelemetryEvent e;
    e.device = device.toString();
    e.available = false;
    e.reason = reason.empty() ? "this device cannot be sampled" : reason;
    emit telemetryReported(e);
}

void EngineWorker::reportError(const QString& message) {
    if (m_errorReported) return;
    m_errorReported = true;
    emit errorOccurred(message);
}

void EngineWorker::start(const strata::Project& project, const QString& projectPath, const QString& device,
                         qint64 maxSteps, const QString& runFolder) {
    if (m_running.exchange(true)) {
        emit errorOccurred(tr("A training run is already active."));
        return;
    }
    {
        std::lock_guard lock(m_mutex);
        m_pendingStop = m_pendingCheckpoint = m_pendingPause = false;
    }
    m_errorReported = false;
    emit runStarted(device);

    bool ok = false;
    try {
        const Device dev = Device::parse(device.toStdString());
        Project run = project;
        run.training.device = dev.toString();
        std::unique_ptr<Backend> backend = backendRegistry().create(dev, backendOptionsFor(run.training));

        TrainerOptions options;
        options.projectPath = projectPath.toStdString();
        options.maxSteps = maxSteps;
        options.runFolder = runFolder.toStdString();
        options.telemetryIntervalMs = m_telemetryIntervalMs.load();
        reportUnsampledDevice(dev);
        Trainer trainer(std::move(run), *backend, this, options);
        {
            std::lock_guard lock(m_mutex);
            m_trainer = &trainer;
            if (m_pendingPause) trainer.requestPause();
            if (m_pendingCheckpoint) trainer.requestCheckpoint();
            if (m_pendingStop) trainer.requestStop();
        }
        try {
            ok = trainer.run();
        } catch (...) {
            std::lock_guard lock(m_mutex);
            m_trainer = nullptr;
            throw;
        }
        std::lock_guard lock(m_mutex);
        m_trainer = nullptr;
    } catch (const std::exception& e) {
        reportError(QString::fromStdString(e.what()));
        ok = false;
    } catch (...) {
        reportError(tr("The engine stopped on an unknown error."));
        ok = false;
    }
    if (!ok && !m_errorReported) reportError(tr("The training run failed."));
    m_running = false;
    emit runEnded(ok);
}

void EngineWorker::onStep(const StepEvent& e) { emit stepReported(e); }
void EngineWorker::onEpoch(const EpochEvent& e) { emit epochReported(e); }
void EngineWorker::onTelemetry(const TelemetryEvent& e) { emit telemetryReported(e); }
void EngineWorker::onCheckpoint(const CheckpointEvent& e) { emit checkpointSaved(e); }
void EngineWorker::onFinished(const FinishedEvent& e) { emit finished(e); }
void EngineWorker::onError(const std::string& message) { reportError(QString::fromStdString(message)); }
void EngineWorker::onLog(const std::string& message) { emit logMessage(QString::fromStdString(message)); }

}  // namespace strata::ui
