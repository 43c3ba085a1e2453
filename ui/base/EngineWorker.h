// EngineWorker: runs one core::Trainer at a time on its own QThread and turns
// the TrainingObserver callbacks into queued Qt signals. Dataset loading and
// model compilation happen inside Trainer::run(), so on this thread too; the
// GUI thread only receives plain event structs. Telemetry comes from the
// Trainer's own sampler thread (about four samples a second); a device that
// cannot be sampled is reported once as unavailable.
#pragma once

#include <QObject>
#include <QString>
#include <QThread>
#include <atomic>
#include <memory>
#include <mutex>

#include "core/graph/Project.h"
#include "core/tensor/Device.h"
#include "core/train/ParameterHistograms.h"
#include "core/train/TrainingObserver.h"

Q_DECLARE_METATYPE(strata::StepEvent)
Q_DECLARE_METATYPE(strata::EpochEvent)
Q_DECLARE_METATYPE(strata::TelemetryEvent)
Q_DECLARE_METATYPE(strata::CheckpointEvent)
Q_DECLARE_METATYPE(strata::FinishedEvent)
Q_DECLARE_METATYPE(strata::Project)
Q_DECLARE_METATYPE(std::shared_ptr<const strata::HistogramReport>)

namespace strata {
class ReplicaRun;
class Trainer;
}  // namespace strata

namespace strata::ui {

// Registers the event structs for queued connections; idempotent.
void registerEngineMetaTypes();

class EngineWorker : public QObject, private TrainingObserver {
    Q_OBJECT
public:
    explicit EngineWorker(QObject* parent = nullptr);
    ~EngineWorker() override;

    // Thread-safe requests, callable from any thread while a run is active. A stop or
    // checkpoint request that arrives while the Trainer is still being built is kept
    // and applied as soon as it exists.
    void pause();
    void resume();
    void stop();
    void saveNow();
    bool isRunning() const { return m_running.load(); }

    // Telemetry poll interval of the Trainer's sampler (default 250 ms; 0: off).
    void setTelemetryIntervalMs(int ms) { m_telemetryIntervalMs = ms; }
    // Weight and gradient histograms every this many steps (TrainerOptions::histogramEvery; default 100, which
    // costs under 2% of samples/s: bench/RESULTS.md); 0: off. Applies from the next run.
    void setHistogramEvery(int steps) { m_histogramEvery = steps; }

public slots:
    // Runs a whole training run and returns when it ends; call it queued (the worker lives on
    // its own thread). `device` is "cpu", "cuda:N" or several GPUs, "cuda:0,cuda:1" (data parallel, one
    // engine thread each: ReplicaRun; their telemetry comes as one line per device). Every failure, including a thrown
    // exception, ends in errorOccurred() followed by runEnded(false).
    // `runFolder`: where checkpoints go when the project names no checkpoint folder (TrainerOptions::runFolder).
    void start(const strata::Project& project, const QString& projectPath, const QString& device, qint64 maxSteps,
               const QString& runFolder = {});

signals:
    void runStarted(const QString& device);
    void stepReported(const strata::StepEvent& event);
    void epochReported(const strata::EpochEvent& event);
    void telemetryReported(const strata::TelemetryEvent& event);
    void checkpointSaved(const strata::CheckpointEvent& event);
    void finished(const strata::FinishedEvent& event);
    void histogramsReported(std::shared_ptr<const strata::HistogramReport> report);
    void errorOccurred(const QString& message);
    void logMessage(const QString& message);
    void pausedChanged(bool paused);
    // Last signal of every run; ok is false after an error.
    void runEnded(bool ok);

private:
    void onStep(const StepEvent& e) override;
    void onEpoch(const EpochEvent& e) override;
    void onTelemetry(const TelemetryEvent& e) override;
    void onCheckpoint(const CheckpointEvent& e) override;
    void onFinished(const FinishedEvent& e) override;
    void onError(const std::string& message) override;
    void onLog(const std::string& message) override;
    void onHistograms(const HistogramSample& sample) override;

    void reportError(const QString& message);
    void reportUnsampledDevice(const Device& device);

    template <typename Run>
    bool runAttached(Run& run, Run*& slot);

    mutable std::mutex m_mutex;  // guards m_trainer, m_replicas and the pending requests
    Trainer* m_trainer = nullptr;
    ReplicaRun* m_replicas = nullptr;
    bool m_pendingStop = false, m_pendingCheckpoint = false, m_pendingPause = false;
    std::atomic<bool> m_running{false};
    bool m_errorReported = false;  // engine thread only

    std::atomic<int> m_telemetryIntervalMs{250};
    std::atomic<int> m_histogramEvery{100};
};

}  // namespace strata::ui
