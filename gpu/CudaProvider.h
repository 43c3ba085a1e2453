// The "cuda" BackendProvider: lists CUDA GPUs, opens CudaBackends and NVML
// telemetry. main() of each program registers it explicitly when built with CUDA.
#pragma once

namespace strata {
class BackendRegistry;
}

namespace strata::gpu {

void registerCudaProvider(BackendRegistry& registry);

}  // namespace strata::gpu
