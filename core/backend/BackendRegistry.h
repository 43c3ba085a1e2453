// Backends and devices the running program can use. The CPU provider is
// always present; main() of each program adds the CUDA provider explicitly
// (gpu::registerCudaProvider) when built with CUDA. The GUI and the CLI list
// devices and create backends only through this interface.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/Backend.h"
#include "core/backend/Telemetry.h"

namespace strata {

struct DeviceInfo {
    Device device;
    std::string name;  // "NVIDIA H200", "CPU (2 threads, OpenBLAS)"
    uint64_t totalMemoryBytes = 0, freeMemoryBytes = 0;
    int computeMajor = 0, computeMinor = 0;  // GPUs
    int multiprocessors = 0;                 // GPUs: SMs; CPU: cores
    std::string pciBusId;                    // GPUs
};

// Samples a device's utilization and memory; polled by a sampler thread.
class TelemetrySource {
public:
    virtual ~TelemetrySource() = default;
    virtual TelemetryEvent sample() = 0;
};

class BackendProvider {
public:
    virtual ~BackendProvider() = default;
    virtual std::string name() const = 0;  // "cpu", "cuda"
    // Never throws: a machine without a driver or a device gives an empty list.
    virtual std::vector<DeviceInfo> devices() = 0;
    // Why devices() is empty ("no CUDA driver"), or "" when it is not.
    virtual std::string unavailableReason() { return {}; }
    // Throws BackendError if the device cannot be opened, or cannot run as `options` ask.
    virtual std::unique_ptr<Backend> create(const Device& device, const BackendOptions& options) = 0;
    // nullptr when the device cannot be sampled.
    virtual std::unique_ptr<TelemetrySource> telemetry(const Device& device) = 0;
};

class BackendRegistry {
public:
    BackendRegistry();  // registers the CPU provider
    void add(std::unique_ptr<BackendProvider> provider);
    std::vector<DeviceInfo> devices();
    // The provider for a device type, or nullptr.
    BackendProvider* provider(DeviceType type);
    // Throws BackendError naming the device when no provider can open it (e.g. "cuda:0: this build has no CUDA").
    // A training run's options come from backendOptionsFor(project.training) (core/train/BackendOptionsFor.h).
    std::unique_ptr<Backend> create(const Device& device, const BackendOptions& options = {});
    std::unique_ptr<TelemetrySource> telemetry(const Device& device);

private:
    std::vector<std::unique_ptr<BackendProvider>> m_providers;
};

// The process-wide registry.
BackendRegistry& backendRegistry();

}  // namespace strata
