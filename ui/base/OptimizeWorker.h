// OptimizeWorker: runs one core::CompressionStudy (pruning with fine-tuning, int8 export, and the
// measurements of every variant) on its own QThread, the engine thread of the Optimize panel, and turns its
// progress, its measured variants and the fine-tuning's events into queued Qt signals. No widgets here.
#pragma once

#include <QObject>
#include <QString>
#include <atomic>
#include <chrono>
#include <mutex>

#include "core/infer/Compression.h"
#include "core/train/TrainingObserver.h"

Q_DECLARE_METATYPE(strata::CompressionVariant)
Q_DECLARE_METATYPE(strata::CompressionRequest)

namespace strata::ui {

class OptimizeWorker : public QObject, private TrainingObserver {
    Q_OBJECT
public:
    explicit OptimizeWorker(QObject* parent = nullptr);
    ~OptimizeWorker() override;

    // Thread-safe: ends the fine-tuning between steps and skips what is left; variants measured so far stay.
    void stop();
    bool isRunning() const { return m_running.load(); }

public slots:
    // Runs the whole study and returns when it ends; call it queued (the worker lives on its own thread).
    // Ends with finished(): ok false after an error (message in `error`), `stopped` after stop().
    void start(const strata::CompressionRequest& request);

signals:
    void progress(const QString& stage, double fraction);  // at most every 100 ms, and at each new stage
    void variantMeasured(const strata::CompressionVariant& variant);
    void logMessage(const QString& message);
    void finished(bool ok, bool stopped, const QString& error);

private:
    void onEpoch(const EpochEvent& e) override;
    void onLog(const std::string& message) override;

    std::mutex m_mutex;  // guards m_study
    CompressionStudy* m_study = nullptr;
    bool m_pendingStop = false;
    std::atomic<bool> m_running{false};
    QString m_lastStage;
    std::chrono::steady_clock::time_point m_lastProgress{};
};

}  // namespace strata::ui
