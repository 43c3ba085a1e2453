// Layer normalization over the last axis of [rows, cols] (host launchers only).
// gamma/beta may be null (identity affine); mean/rstd may be null in forward; any of dx, dgamma, dbeta may be
// null in backward. Gradients accumulate.
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

namespace strata::gpu {

void launchLayerNormForward(cudaStream_t s, float* y, float* mean, float* rstd, const float* x, const float* gamma,
                            const float* beta, int rows, int cols, float eps);
// Device scratch the backward needs when dgamma or dbeta is wanted (per-chunk partial sums).
size_t layerNormBackwardScratchBytes(int rows, int cols);
void launchLayerNormBackward(cudaStream_t s, float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                             const float* gamma, const float* mean, const float* rstd, int rows, int cols,
                             void* scratch, size_t scratchBytes);

}  // namespace strata::gpu
