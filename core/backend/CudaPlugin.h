// The CUDA backend as a plugin: libstrata_cuda.so (the strata-cuda package), opened with dlopen when the program
// starts, so that strata and strata-train install and run on machines without CUDA. When the plugin is absent or
// cannot load, a stand-in "cuda" provider says why (no devices, unavailableReason(), create() throws), so that
// asking for a GPU never falls back to the CPU silently.
#pragma once

#include <string>
#include <vector>

namespace strata {

class BackendRegistry;

// The entry points libstrata_cuda.so exports (gpu/CudaPlugin.cpp), resolved with dlsym.
// Returns the version the plugin was built as (CMake's PROJECT_VERSION); the loader refuses another.
using CudaPluginVersionFn = const char* (*)();
// Registers the CUDA provider (and the NCCL communicator) into `registry`.
using CudaPluginRegisterFn = void (*)(BackendRegistry* registry);
inline constexpr const char* kCudaPluginName = "libstrata_cuda.so";
inline constexpr const char* kCudaPluginVersionSymbol = "strata_cuda_plugin_version";
inline constexpr const char* kCudaPluginRegisterSymbol = "strata_cuda_plugin_register";

struct CudaPluginStatus {
    bool loaded = false;
    std::string path;     // the plugin that was loaded, or ""
    std::string problem;  // why not, or ""
};

// Where the plugin is looked for, in order: $STRATA_CUDA_PLUGIN (a file), beside the executable (the build
// folder), and <executable>/../lib/strata/ (installed: /usr/bin -> /usr/lib/strata).
std::vector<std::string> cudaPluginCandidates();

// Opens the first candidate that exists and registers its provider; otherwise registers the stand-in provider
// with the reason ("CUDA backend not installed: ..."). Never throws. The result is also kept for
// cudaPluginStatus().
CudaPluginStatus loadCudaPlugin(BackendRegistry& registry,
                                const std::vector<std::string>& candidates = cudaPluginCandidates());

// What the last loadCudaPlugin() of this process found (not loaded and no problem when none ran).
const CudaPluginStatus& cudaPluginStatus();

}  // namespace strata
