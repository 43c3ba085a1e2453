// The backend registry and its always-present CPU provider (device list from
// /proc/meminfo, telemetry of this process from /proc/self).
#include "core/backend/BackendRegistry.h"

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <unistd.h>

#include "core/backend/CpuBackend.h"

namespace strata {

namespace {

int hardwareThreads() {
    const unsigned hw = std::thread::hardware_concurrency();
    return hw > 0 ? static_cast<int>(hw) : 1;
}

// A "Key:   123 kB" field of /proc/meminfo or /proc/self/status, in bytes; 0 when absent.
uint64_t procKilobytesField(const char* file, const std::string& key) {
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line)) {
        if (line.compare(0, key.size(), key) == 0 && line.size() > key.size() && line[key.size()] == ':') {
            std::istringstream fields(line.substr(key.size() + 1));
            uint64_t kb = 0;
            fields >> kb;
            return kb * 1024;
        }
    }
    return 0;
}

// User + system CPU time of this process in seconds, from /proc/self/stat (fields 14 and 15).
double processCpuSeconds() {
    std::ifstream in("/proc/self/stat");
    std::string text;
    std::getline(in, text);
    // The command name (field 2) is in parentheses and may contain spaces: parse after the last ')'.
    const size_t close = text.rfind(')');
    if (close == std::string::npos) return 0.0;
    std::istringstream fields(text.substr(close + 2));
    std::string field;
    unsigned long long utime = 0, stime = 0;
    // After ')' come field 3 (state) onwards; utime is field 14, stime field 15.
    for (int i = 3; i <= 15 && fields >> field; ++i) {
        if (i == 14) utime = std::stoull(field);
        if (i == 15) stime = std::stoull(field);
    }
    const long ticks = sysconf(_SC_CLK_TCK);
    return static_cast<double>(utime + stime) / static_cast<double>(ticks > 0 ? ticks : 100);
}

// Utilization is this process's CPU time over wall time, as a percentage of all hardware threads.
class CpuTelemetry : public TelemetrySource {
public:
    CpuTelemetry() : m_start(std::chrono::steady_clock::now()), m_lastWall(m_start), m_lastCpu(processCpuSeconds()) {}

    TelemetryEvent sample() override {
        TelemetryEvent e;
        e.device = "cpu";
        const auto now = std::chrono::steady_clock::now();
        const double cpu = processCpuSeconds();
        const double wall = std::chrono::duration<double>(now - m_lastWall).count();
        if (wall > 0.0) {
            const double percent = 100.0 * (cpu - m_lastCpu) / (wall * hardwareThreads());
            e.utilizationPercent = percent < 0.0 ? 0.0 : (percent > 100.0 ? 100.0 : percent);
        }
        m_lastWall = now;
        m_lastCpu = cpu;
        e.memoryUsedBytes = static_cast<double>(procKilobytesField("/proc/self/status", "VmRSS"));
        e.memoryTotalBytes = static_cast<double>(procKilobytesField("/proc/meminfo", "MemTotal"));
        e.timeSeconds = std::chrono::duration<double>(now - m_start).count();
        return e;
    }

private:
    std::chrono::steady_clock::time_point m_start, m_lastWall;
    double m_lastCpu;
};

class CpuProvider : public BackendProvider {
public:
    std::string name() const override { return "cpu"; }

    std::vector<DeviceInfo> devices() override {
        DeviceInfo info;
        info.device = Device::cpu();
        const int threads = hardwareThreads();
        info.name = "CPU (" + std::to_string(threads) + (threads == 1 ? " thread" : " threads") + ", " +
                    (CpuBackend::oneDnnAvailable() ? "oneDNN" : "OpenBLAS") + ")";
        info.totalMemoryBytes = procKilobytesField("/proc/meminfo", "MemTotal");
        info.freeMemoryBytes = procKilobytesField("/proc/meminfo", "MemAvailable");
        info.multiprocessors = threads;
        return {info};
    }

    std::unique_ptr<Backend> create(const Device& device, const BackendOptions& options) override {
        if (device.type != DeviceType::Cpu || device.index != 0)
            throw BackendError(
                (device.type == DeviceType::Cpu ? "cpu:" + std::to_string(device.index) : device.toString()) +
                ": the CPU provider only opens device cpu (index 0)");
        return std::make_unique<CpuBackend>(options);
    }

    std::unique_ptr<TelemetrySource> telemetry(const Device& device) override {
        if (device.type != DeviceType::Cpu) return nullptr;
        return std::make_unique<CpuTelemetry>();
    }
};

const char* providerName(DeviceType type) { return type == DeviceType::Cpu ? "cpu" : "cuda"; }

}  // namespace

BackendRegistry::BackendRegistry() { add(std::make_unique<CpuProvider>()); }

void BackendRegistry::add(std::unique_ptr<BackendProvider> provider) {
    // A provider registered twice replaces the earlier one, so repeated registration is harmless.
    for (auto& existing : m_providers)
        if (existing->name() == provider->name()) {
            existing = std::move(provider);
            return;
        }
    m_providers.push_back(std::move(provider));
}

std::vector<DeviceInfo> BackendRegistry::devices() {
    std::vector<DeviceInfo> all;
    for (auto& p : m_providers) {
        std::vector<DeviceInfo> some = p->devices();
        all.insert(all.end(), some.begin(), some.end());
    }
    return all;
}

BackendProvider* BackendRegistry::provider(DeviceType type) {
    for (auto& p : m_providers)
        if (p->name() == providerName(type)) return p.get();
    return nullptr;
}

std::unique_ptr<Backend> BackendRegistry::create(const Device& device, const BackendOptions& options) {
    BackendProvider* p = provider(device.type);
    if (!p) {
        if (device.type == DeviceType::Cuda) throw BackendError(device.toString() + ": this build has no CUDA backend");
        throw BackendError(device.toString() + ": no backend is registered for this device");
    }
    return p->create(device, options);
}

std::unique_ptr<TelemetrySource> BackendRegistry::telemetry(const Device& device) {
    BackendProvider* p = provider(device.type);
    return p ? p->telemetry(device) : nullptr;
}

BackendRegistry& backendRegistry() {
    static BackendRegistry registry;
    return registry;
}

}  // namespace strata
