// libstrata_cuda.so's entry points (core/backend/CudaPlugin.h): the CUDA provider as a plugin, for the programs
// built with STRATA_CUDA_PLUGIN. Everything else it calls is the loading program's own (exported symbols).
#include "core/backend/CudaPlugin.h"

#include "gpu/CudaProvider.h"

#ifndef STRATA_VERSION_TEXT
#error "STRATA_VERSION_TEXT (the project's version) must be defined by the build"
#endif

extern "C" __attribute__((visibility("default"))) const char* strata_cuda_plugin_version() {
    return STRATA_VERSION_TEXT;
}

extern "C" __attribute__((visibility("default"))) void strata_cuda_plugin_register(strata::BackendRegistry* registry) {
    strata::gpu::registerCudaProvider(*registry);
}
