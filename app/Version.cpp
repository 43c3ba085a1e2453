// strata-train --version: the version, the commit and build type of this build (StrataVersion.h, written at
// every build by app/Version.cmake), the backends compiled in (oneDNN, CUDA, NCCL, MPI) and, for CUDA built as
// a plugin, whether this machine has it (the strata-cuda package).
#include <string>

#include "StrataVersion.h"
#include "app/Cli.h"
#include "core/backend/BackendRegistry.h"
#include "core/backend/CpuBackend.h"
#include "core/backend/CudaPlugin.h"
#include "core/dist/MpiCommunicator.h"

namespace strata::cli {

namespace {

#if defined(STRATA_BUILT_CUDA_PLUGIN)
constexpr const char* kCudaBuilt = "yes (plugin libstrata_cuda.so, package strata-cuda)";
#elif defined(STRATA_BUILT_CUDA)
constexpr const char* kCudaBuilt = "yes (linked in)";
#else
constexpr const char* kCudaBuilt = "no";
#endif

}  // namespace

std::string versionText() {
    // "backends" lists what can run here: the CUDA provider counts when main() registered it, or loaded its plugin
    // (a missing plugin leaves a stand-in provider that only says why).
    std::string backends = "cpu";
    std::string cudaLine;
    if (backendRegistry().provider(DeviceType::Cuda)) {
#ifdef STRATA_BUILT_CUDA_PLUGIN
        const CudaPluginStatus& plugin = cudaPluginStatus();
        if (plugin.loaded) {
            backends += ", cuda";
            cudaLine = "\nCUDA backend loaded from " + plugin.path;
        } else {
            cudaLine = "\n" + plugin.problem;
        }
#else
        backends += ", cuda";
#endif
    }
#if defined(STRATA_BUILT_CUDA)
    // gpu/ always has NCCL's header; the library itself is opened at the first data-parallel GPU run.
    const char* nccl = "yes (libnccl.so.2 opened when a multi-GPU run starts)";
#else
    const char* nccl = "no";
#endif
    return std::string("strata-train ") + STRATA_VERSION + "\ncommit " + STRATA_COMMIT + "\nbuild type " +
           STRATA_BUILD_TYPE + "\nbackends " + backends + "\ncompiled in: oneDNN " +
           (CpuBackend::oneDnnAvailable() ? "yes" : "no (im2col + OpenBLAS)") + ", CUDA " + kCudaBuilt + ", NCCL " +
           nccl + ", MPI " + (mpiBuilt() ? "yes (Open MPI)" : "no") + cudaLine;
}

}  // namespace strata::cli
