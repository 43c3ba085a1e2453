#include "core/train/TelemetrySampler.h"

#include <chrono>

namespace strata {

TelemetrySampler::TelemetrySampler(std::unique_ptr<TelemetrySource> source, TrainingObserver* observer, int intervalMs)
    : m_source(std::move(source)), m_observer(observer), m_intervalMs(intervalMs) {
    if (m_source && m_observer && m_intervalMs > 0) m_thread = std::thread([this] { loop(); });
}

TelemetrySampler::~TelemetrySampler() {
    {
        std::lock_guard lock(m_mutex);
        m_stop = true;
    }
    m_wake.notify_all();
    if (m_thread.joinable()) m_thread.join();
}

void TelemetrySampler::loop() {
    const auto start = std::chrono::steady_clock::now();
    bool reportedUnavailable = false;
    std::unique_lock lock(m_mutex);
    while (!m_stop) {
        lock.unlock();
        TelemetryEvent e = m_source->sample();
        e.timeSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (e.available || !reportedUnavailable) m_observer->onTelemetry(e);
        reportedUnavailable = reportedUnavailable || !e.available;
        lock.lock();
        m_wake.wait_for(lock, std::chrono::milliseconds(m_intervalMs), [this] { return m_stop; });
    }
}

}  // namespace strata
