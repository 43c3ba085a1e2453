// Dropout kernels (host launchers only): element i kept iff dropoutKeep(seed, first + i, p), scaled by 1/(1-p).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace strata::gpu {

void launchDropoutForward(cudaStream_t s, float* y, const float* x, int64_t n, float p, uint64_t seed, uint64_t first);
// dx += mask * dy / (1 - p)
void launchDropoutBackward(cudaStream_t s, float* dx, const float* dy, int64_t n, float p, uint64_t seed,
                           uint64_t first);

}  // namespace strata::gpu
