// NVML loader and telemetry source (see Nvml.h).
#include "gpu/Nvml.h"

#include <chrono>
#include <type_traits>

#include <dlfcn.h>

namespace strata::gpu {

namespace {

// The few NVML declarations Strata needs (from NVML's public API; the driver ships the header we lack).
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlNotSupported = 3;
constexpr int kNvmlTemperatureGpu = 0;
constexpr int kNvmlClockSm = 1;
struct nvmlUtilization_t {
    unsigned int gpu;
    unsigned int memory;
};
struct nvmlMemory_t {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
};

double nowSeconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

struct Nvml::Api {
    nvmlReturn_t (*init)() = nullptr;
    nvmlReturn_t (*shutdown)() = nullptr;
    nvmlReturn_t (*byIndex)(unsigned int, nvmlDevice_t*) = nullptr;
    nvmlReturn_t (*byPciBusId)(const char*, nvmlDevice_t*) = nullptr;
    nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
    nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
    nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned int*) = nullptr;
    nvmlReturn_t (*power)(nvmlDevice_t, unsigned int*) = nullptr;
    nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned int*) = nullptr;
    const char* (*errorString)(nvmlReturn_t) = nullptr;

    std::string text(nvmlReturn_t r) const {
        const char* s = errorString ? errorString(r) : nullptr;
        return s ? s : "NVML error " + std::to_string(r);
    }
};

Nvml& Nvml::instance() {
    static Nvml nvml;
    return nvml;
}

Nvml::Nvml() : m_api(std::make_unique<Api>()) {
    m_library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!m_library) {
        const char* err = dlerror();
        m_reason = std::string("NVML not available (") + (err ? err : "libnvidia-ml.so.1 not found") + ")";
        return;
    }
    auto load = [this](auto& fn, const char* name) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(m_library, name));
        if (!fn && m_reason.empty()) m_reason = std::string("NVML not available (") + name + " missing)";
    };
    load(m_api->init, "nvmlInit_v2");
    load(m_api->shutdown, "nvmlShutdown");
    load(m_api->byIndex, "nvmlDeviceGetHandleByIndex_v2");
    load(m_api->byPciBusId, "nvmlDeviceGetHandleByPciBusId_v2");
    load(m_api->utilization, "nvmlDeviceGetUtilizationRates");
    load(m_api->memory, "nvmlDeviceGetMemoryInfo");
    load(m_api->temperature, "nvmlDeviceGetTemperature");
    load(m_api->power, "nvmlDeviceGetPowerUsage");
    load(m_api->clock, "nvmlDeviceGetClockInfo");
    load(m_api->errorString, "nvmlErrorString");
    if (!m_reason.empty()) return;
    const nvmlReturn_t r = m_api->init();
    if (r != kNvmlSuccess) {
        m_reason = "NVML not available (nvmlInit_v2: " + m_api->text(r) + ")";
        return;
    }
    m_available = true;
}

Nvml::~Nvml() {
    if (m_available) (void)m_api->shutdown();
    if (m_library) dlclose(m_library);
}

NvmlReading Nvml::read(const std::string& pciBusId, int index) const {
    NvmlReading out;
    if (!m_available) {
        out.error = m_reason;
        return out;
    }
    nvmlDevice_t dev = nullptr;
    nvmlReturn_t r = pciBusId.empty() ? m_api->byIndex(static_cast<unsigned>(index), &dev)
                                      : m_api->byPciBusId(pciBusId.c_str(), &dev);
    if (r != kNvmlSuccess) {
        out.error = (pciBusId.empty() ? "nvmlDeviceGetHandleByIndex_v2(" + std::to_string(index)
                                      : "nvmlDeviceGetHandleByPciBusId_v2(" + pciBusId) +
                    "): " + m_api->text(r);
        return out;
    }
    nvmlUtilization_t util{};
    r = m_api->utilization(dev, &util);
    if (r != kNvmlSuccess && r != kNvmlNotSupported) {
        out.error = "nvmlDeviceGetUtilizationRates: " + m_api->text(r);
        return out;
    }
    if (r == kNvmlSuccess) out.utilizationPercent = util.gpu;
    nvmlMemory_t mem{};
    r = m_api->memory(dev, &mem);
    if (r != kNvmlSuccess) {
        out.error = "nvmlDeviceGetMemoryInfo: " + m_api->text(r);
        return out;
    }
    out.memoryUsedBytes = static_cast<double>(mem.used);
    out.memoryTotalBytes = static_cast<double>(mem.total);
    out.memoryFreeBytes = static_cast<double>(mem.free);
    // Optional readings: a device that does not report one leaves it at -1.
    unsigned int v = 0;
    if (m_api->temperature(dev, kNvmlTemperatureGpu, &v) == kNvmlSuccess) out.temperatureC = v;
    if (m_api->power(dev, &v) == kNvmlSuccess) out.powerWatts = v / 1000.0;
    if (m_api->clock(dev, kNvmlClockSm, &v) == kNvmlSuccess) out.smClockMHz = v;
    out.ok = true;
    return out;
}

NvmlTelemetry::NvmlTelemetry(std::string deviceLabel, std::string pciBusId, int index)
    : m_label(std::move(deviceLabel)), m_pciBusId(std::move(pciBusId)), m_index(index), m_start(nowSeconds()) {}

TelemetryEvent NvmlTelemetry::sample() {
    TelemetryEvent e;
    e.device = m_label;
    e.timeSeconds = nowSeconds() - m_start;
    const NvmlReading r = Nvml::instance().read(m_pciBusId, m_index);
    if (!r.ok) {
        e.available = false;
        e.reason = r.error;
        return e;
    }
    e.utilizationPercent = r.utilizationPercent;
    e.memoryUsedBytes = r.memoryUsedBytes;
    e.memoryTotalBytes = r.memoryTotalBytes;
    e.temperatureC = r.temperatureC;
    e.powerWatts = r.powerWatts;
    e.smClockMHz = r.smClockMHz;
    return e;
}

}  // namespace strata::gpu
