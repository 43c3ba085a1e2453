// EngineWorker: the engine side of the GUI (see EngineWorker.h).
#include "ui/base/EngineWorker.h"

#include <chrono>
#include <exception>

#include "core/backend/Backend.h"
#include "core/backend/BackendRegistry.h"
#include "core/export/OnnxWeights.h"
#include "core/train/BackendOptionsFor.h"
#include "core/train/ReplicaRun.h"
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
        qRegisterMetaType<std::shared_ptr<const strata::HistogramReport>>();
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
        if (m_trainer || m_replicas) {
            if (m_trainer) m_trainer->requestPause();
            if (m_replicas) m_replicas->requestPause();
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
        if (m_replicas) m_replicas->requestResume();
    }
    if (m_running) emit pausedChanged(false);
}

void EngineWorker::stop() {
    std::lock_guard lock(m_mutex);
    if (m_trainer || m_replicas) {
        if (m_trainer) m_trainer->requestStop();  // also wakes a paused Trainer
        if (m_replicas) m_replicas->requestStop();
    } else if (m_running) {
        m_pendingStop = true;
    }
}

void EngineWorker::saveNow() {
    std::lock_guard lock(m_mutex);
    if (m_trainer)
        m_trainer->requestCheckpoint();
    else if (m_replicas)
        m_replicas->requestCheckpoint();
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

// Runs `run` (a Trainer or a ReplicaRun) with `slot` pointing at it meanwhile, so that pause, stop and save
// reach it; requests that arrived while it was being built are applied first.
template <typename Run>
bool EngineWorker::runAttached(Run& run, Run*& slot) {
    {
        std::lock_guard lock(m_mutex);
        slot = &run;
        if (m_pendingPause) run.requestPause();
        if (m_pendingCheckpoint) run.requestCheckpoint();
        if (m_pendingStop) run.requestStop();
    }
    bool ok = false;
    try {
        ok = run.run();
    } catch (...) {
        std::lock_guard lock(m_mutex);
        slot = nullptr;
        throw;
    }
    std::lock_guard lock(m_mutex);
    slot = nullptr;
    return ok;
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
        const std::vector<Device> devices = Device::parseList(device.toStdString());
        Project run = project;
        std::vector<std::unique_ptr<Backend>> backends;
        for (const Device& d : devices)
            backends.push_back(backendRegistry().create(d, backendOptionsFor(run.training)));
        // One device by its canonical name ("cuda" -> "cuda:0"); a list as given.
        run.training.device = devices.size() == 1 ? devices[0].toString() : device.toStdString();

        TrainerOptions options;
        options.projectPath = projectPath.toStdString();
        options.maxSteps = maxSteps;
        options.runFolder = runFolder.toStdString();
        options.telemetryIntervalMs = m_telemetryIntervalMs.load();
        options.histogramEvery = m_histogramEvery.load();
        options.distMode = run.training.distMode;  // several devices: data parallel, as strata-train runs them
        options.localSgdSteps = run.training.localSgdSteps;
        options.readModelWeights = onnxWeightSource;  // a run that starts from an ONNX file's weights
        for (const Device& d : devices) reportUnsampledDevice(d);
        if (backends.size() == 1) {
            Trainer trainer(std::move(run), *backends[0], this, options);
            ok = runAttached(trainer, m_trainer);
        } else {
            // Several GPUs: one engine thread each, data parallel (ReplicaRun); this thread is rank 0's.
            std::vector<Backend*> list;
            for (const auto& b : backends) list.push_back(b.get());
            ReplicaRun replicas(std::move(run), std::move(list), this, options);
            ok = runAttached(replicas, m_replicas);
        }
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
// Assessed here, on the engine thread, so the GUI thread only draws the verdicts.
void EngineWorker::onHistograms(const HistogramSample& s) {
    emit histogramsReported(std::make_shared<const HistogramReport>(HistogramReport{s, assessLayers(s)}));
}
void EngineWorker::onError(const std::string& message) { reportError(QString::fromStdString(message)); }
void EngineWorker::onLog(const std::string& message) { emit logMessage(QString::fromStdString(message)); }

}  // namespace strata::ui
