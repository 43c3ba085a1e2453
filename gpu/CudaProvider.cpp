// CudaProvider: device enumeration (never throws), backend creation, telemetry.
#include "gpu/CudaProvider.h"

#include <algorithm>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "core/backend/BackendRegistry.h"
#include "gpu/CudaBackend.h"
#include "gpu/NcclCommunicator.h"
#include "gpu/Nvml.h"

namespace strata::gpu {

namespace {

// Number of CUDA devices, or -1 with `reason` set. Any error counts as "no GPU".
int deviceCount(std::string& reason) {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        const bool noDevice = err == cudaErrorNoDevice;
        reason = std::string(noDevice ? "no CUDA device" : "no CUDA driver") +
                 " (cudaGetDeviceCount: " + cudaGetErrorString(err) + ")";
        return -1;
    }
    if (count == 0) reason = "no CUDA device (cudaGetDeviceCount returned 0)";
    return count;
}

std::string pciBusIdOf(int index) {
    char buf[32] = {};
    if (cudaDeviceGetPCIBusId(buf, sizeof buf, index) != cudaSuccess) {
        (void)cudaGetLastError();
        return {};
    }
    return buf;
}

class CudaProvider : public BackendProvider {
public:
    std::string name() const override { return "cuda"; }

    std::vector<DeviceInfo> devices() override {
        std::vector<DeviceInfo> list;
        try {
            m_reason.clear();
            const int count = deviceCount(m_reason);
            for (int i = 0; i < count; ++i) {
                cudaDeviceProp prop{};
                if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
                    (void)cudaGetLastError();
                    continue;
                }
                DeviceInfo info;
                info.device = Device::cuda(i);
                info.name = prop.name;
                info.totalMemoryBytes = prop.totalGlobalMem;
                info.computeMajor = prop.major;
                info.computeMinor = prop.minor;
                info.multiprocessors = prop.multiProcessorCount;
                info.pciBusId = pciBusIdOf(i);
                // NVML counts all physical memory, CUDA's total leaves out the driver's reserve, so NVML's
                // free figure on an idle GPU can exceed totalMemoryBytes; keep free <= total.
                info.freeMemoryBytes = std::min<uint64_t>(freeMemory(i, info.pciBusId), info.totalMemoryBytes);
                list.push_back(std::move(info));
            }
            if (count > 0 && list.empty())
                m_reason = "no CUDA device could be queried (cudaGetDeviceProperties failed)";
        } catch (const std::exception& e) {
            m_reason = std::string("CUDA device listing failed: ") + e.what();
            list.clear();
        } catch (...) {
            m_reason = "CUDA device listing failed";
            list.clear();
        }
        return list;
    }

    std::string unavailableReason() override {
        if (m_reason.empty()) {
            std::string reason;
            (void)deviceCount(reason);
            return reason;
        }
        return m_reason;
    }

    std::unique_ptr<Backend> create(const Device& device, const BackendOptions& options) override {
        if (device.type != DeviceType::Cuda)
            throw BackendError(device.toString() + ": the CUDA provider only opens cuda devices");
        return std::make_unique<CudaBackend>(device.index, options);
    }

    std::unique_ptr<TelemetrySource> telemetry(const Device& device) override {
        if (device.type != DeviceType::Cuda) return nullptr;
        // The PCI bus id ties CUDA's device order to NVML's; without a driver it stays empty.
        return std::make_unique<NvmlTelemetry>(device.toString(), pciBusIdOf(device.index), device.index);
    }

private:
    // NVML gives free memory without creating a CUDA context; otherwise ask CUDA (which creates one).
    static uint64_t freeMemory(int index, const std::string& pciBusId) {
        if (Nvml::instance().available()) {
            const NvmlReading r = Nvml::instance().read(pciBusId, index);
            if (r.ok) return static_cast<uint64_t>(r.memoryFreeBytes);
        }
        int previous = 0;
        if (cudaGetDevice(&previous) != cudaSuccess) previous = 0;
        size_t freeB = 0, totalB = 0;
        if (cudaSetDevice(index) != cudaSuccess || cudaMemGetInfo(&freeB, &totalB) != cudaSuccess) freeB = 0;
        (void)cudaSetDevice(previous);
        (void)cudaGetLastError();
        return freeB;
    }

    std::string m_reason;
};

}  // namespace

void registerCudaProvider(BackendRegistry& registry) {
    registry.add(std::make_unique<CudaProvider>());
    registerNcclCommunicator();
}

}  // namespace strata::gpu
