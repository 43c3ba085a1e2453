// loadCudaPlugin: finds libstrata_cuda.so, checks its version and lets it register the CUDA provider; otherwise
// registers a stand-in "cuda" provider that names what is missing.
//
// The plugin holds only gpu/'s code: the engine it calls into (Backend, the registries, the communicators) is the
// program's own, which exports its symbols (CMake's ENABLE_EXPORTS), so there is one registry and one NCCL
// registration per process. dlopen's RTLD_NOW makes a plugin of another build fail here, naming the missing
// symbol, instead of at its first call.
#include "core/backend/CudaPlugin.h"

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>

#include "core/backend/BackendRegistry.h"

#ifndef STRATA_VERSION_TEXT
#error "STRATA_VERSION_TEXT (the project's version) must be defined by the build"
#endif

namespace strata {

namespace {

class MissingCudaProvider : public BackendProvider {
public:
    explicit MissingCudaProvider(std::string reason) : m_reason(std::move(reason)) {}
    std::string name() const override { return "cuda"; }
    std::vector<DeviceInfo> devices() override { return {}; }
    std::string unavailableReason() override { return m_reason; }
    std::unique_ptr<Backend> create(const Device& device, const BackendOptions&) override {
        throw BackendError(device.toString() + ": " + m_reason);
    }
    std::unique_ptr<TelemetrySource> telemetry(const Device&) override { return nullptr; }

private:
    std::string m_reason;
};

std::string executableDir() {
    char buf[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n <= 0) return {};
    return std::filesystem::path(std::string(buf, static_cast<size_t>(n))).parent_path().string();
}

CudaPluginStatus& lastStatus() {
    static CudaPluginStatus status;
    return status;
}

CudaPluginStatus load(BackendRegistry& registry, const std::vector<std::string>& candidates) {
    CudaPluginStatus status;
    std::string tried;
    std::string path;
    for (const std::string& c : candidates) {
        std::error_code ec;
        if (std::filesystem::is_regular_file(c, ec)) {
            path = c;
            break;
        }
        tried += (tried.empty() ? "" : ", ") + c;
    }
    if (path.empty()) {
        status.problem = std::string("CUDA backend not installed: ") + kCudaPluginName + " was not found (tried " +
                         (tried.empty() ? std::string("nothing") : tried) +
                         "); install the strata-cuda package for NVIDIA GPUs";
        return status;
    }
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char* why = dlerror();
        status.problem = "CUDA backend not usable: " + path + " could not be loaded (" +
                         (why ? std::string(why) : std::string("unknown error")) +
                         "); it needs NVIDIA's CUDA 13 runtime, cuBLAS and cuDNN 9 (the strata-cuda package's "
                         "dependencies), and must come from the same build as this program";
        return status;
    }
    auto version = reinterpret_cast<CudaPluginVersionFn>(dlsym(handle, kCudaPluginVersionSymbol));
    auto reg = reinterpret_cast<CudaPluginRegisterFn>(dlsym(handle, kCudaPluginRegisterSymbol));
    if (!version || !reg) {
        status.problem = "CUDA backend not usable: " + path + " is not a Strata CUDA plugin (it lacks " +
                         (version ? kCudaPluginRegisterSymbol : kCudaPluginVersionSymbol) + ")";
        dlclose(handle);
        return status;
    }
    if (const std::string v = version(); v != STRATA_VERSION_TEXT) {
        status.problem = "CUDA backend not usable: " + path + " is version " + v + ", this program " +
                         STRATA_VERSION_TEXT + "; install the strata-cuda package of the same version";
        dlclose(handle);
        return status;
    }
    // Never closed: the provider's code lives in it until the process ends.
    reg(&registry);
    status.loaded = true;
    status.path = path;
    return status;
}

}  // namespace

std::vector<std::string> cudaPluginCandidates() {
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("STRATA_CUDA_PLUGIN"); env && *env) candidates.emplace_back(env);
    if (const std::string dir = executableDir(); !dir.empty()) {
        candidates.push_back(dir + "/" + kCudaPluginName);
        candidates.push_back(dir + "/../lib/strata/" + kCudaPluginName);
    }
    return candidates;
}

CudaPluginStatus loadCudaPlugin(BackendRegistry& registry, const std::vector<std::string>& candidates) {
    CudaPluginStatus status = load(registry, candidates);
    if (!status.loaded) registry.add(std::make_unique<MissingCudaProvider>(status.problem));
    lastStatus() = status;
    return status;
}

const CudaPluginStatus& cudaPluginStatus() { return lastStatus(); }

}  // namespace strata
