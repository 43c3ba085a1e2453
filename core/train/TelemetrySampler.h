// TelemetrySampler: polls a device's TelemetrySource on its own thread at a fixed interval and reports each
// sample through TrainingObserver::onTelemetry (an unavailable source is reported once), until destroyed.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "core/backend/BackendRegistry.h"
#include "core/train/TrainingObserver.h"

namespace strata {

class TelemetrySampler {
public:
    // Samples nothing when `source` or `observer` is null or `intervalMs` <= 0.
    TelemetrySampler(std::unique_ptr<TelemetrySource> source, TrainingObserver* observer, int intervalMs);
    ~TelemetrySampler();
    TelemetrySampler(const TelemetrySampler&) = delete;
    TelemetrySampler& operator=(const TelemetrySampler&) = delete;

private:
    void loop();

    std::unique_ptr<TelemetrySource> m_source;
    TrainingObserver* m_observer;
    int m_intervalMs;
    std::mutex m_mutex;
    std::condition_variable m_wake;
    bool m_stop = false;
    std::thread m_thread;
};

}  // namespace strata
