// Nvml: GPU telemetry through NVML, loaded at run time.
//
// NVML comes with the driver (libnvidia-ml.so.1), not with the toolkit, so
// strata_gpu never links it: the library is dlopen'ed on first use and the
// few functions Strata calls are declared here by hand. Without it (no
// driver, as on build machines) every sample reports available = false with
// the reason, which the caller shows once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/backend/BackendRegistry.h"

namespace strata::gpu {

// What NVML reports for one device.
struct NvmlReading {
    bool ok = false;
    std::string error;  // why not, when !ok
    double utilizationPercent = 0;
    double memoryUsedBytes = 0, memoryTotalBytes = 0, memoryFreeBytes = 0;
    double temperatureC = -1, powerWatts = -1, smClockMHz = -1;  // -1: this device does not report it
};

class Nvml {
public:
    // The process-wide loader; loads and initializes NVML on first call. Never throws.
    static Nvml& instance();
    ~Nvml();
    Nvml(const Nvml&) = delete;
    Nvml& operator=(const Nvml&) = delete;

    bool available() const { return m_available; }
    const std::string& unavailableReason() const { return m_reason; }

    // Reads a device found by PCI bus id ("0000:65:00.0"), or by NVML index when the id is empty.
    NvmlReading read(const std::string& pciBusId, int index) const;

private:
    Nvml();
    struct Api;
    std::unique_ptr<Api> m_api;
    void* m_library = nullptr;
    bool m_available = false;
    std::string m_reason;
};

// TelemetrySource for "cuda:N" backed by NVML.
class NvmlTelemetry : public TelemetrySource {
public:
    // pciBusId may be empty (then NVML's index is used, which may order devices differently from CUDA).
    NvmlTelemetry(std::string deviceLabel, std::string pciBusId, int index);
    TelemetryEvent sample() override;

private:
    std::string m_label, m_pciBusId;
    int m_index;
    double m_start;
};

}  // namespace strata::gpu
