// Backends available to tests (see TestBackends.h).
#include "tests/support/TestBackends.h"

#include <cstdlib>
#include <mutex>

#include "core/backend/BackendRegistry.h"
#include "core/backend/CpuBackend.h"
#include "core/backend/CpuReferenceBackend.h"

#ifdef STRATA_HAVE_CUDA
#include "gpu/CudaProvider.h"
#endif

namespace strata::test {

namespace {

// The CUDA provider is added to the process-wide registry once, on first use.
BackendRegistry& registry() {
#ifdef STRATA_HAVE_CUDA
    static std::once_flag once;
    std::call_once(once, [] { strata::gpu::registerCudaProvider(strata::backendRegistry()); });
#endif
    return backendRegistry();
}

}  // namespace

std::unique_ptr<Backend> makeReferenceBackend(const BackendOptions& options) {
    return std::make_unique<CpuReferenceBackend>(options);
}

std::unique_ptr<Backend> makeCpuBackend(const BackendOptions& options) { return std::make_unique<CpuBackend>(options); }

std::vector<NamedBackend> fastBackends(const BackendOptions& options) {
    std::vector<NamedBackend> all;
    all.push_back({"cpu", makeCpuBackend(options)});
    if (BackendProvider* cuda = registry().provider(DeviceType::Cuda)) {
        for (const DeviceInfo& info : cuda->devices())
            all.push_back({info.device.toString(), cuda->create(info.device, options)});
    }
    return all;
}

std::string gpuUnavailableReason() {
#ifndef STRATA_HAVE_CUDA
    return "built without CUDA";
#else
    BackendProvider* cuda = registry().provider(DeviceType::Cuda);
    if (!cuda) return "the CUDA provider is not registered";
    if (!cuda->devices().empty()) return {};
    const std::string why = cuda->unavailableReason();
    return "no CUDA device: " + (why.empty() ? std::string("the driver reports none") : why);
#endif
}

std::string sourcePath(const std::string& relative) {
    // A test binary run away from the tree it was built from (tools/gpu-check.sh on the GPU machine) is told
    // where the tree is now.
    const char* moved = std::getenv("STRATA_SOURCE_DIR");
    return std::string(moved && *moved ? moved : STRATA_SOURCE_DIR) + "/" + relative;
}

}  // namespace strata::test
