// Pooling kernels that cuDNN does not cover the way Strata defines them (host launchers only).
#pragma once

#include <cuda_runtime_api.h>

namespace strata::gpu {

// y[o, i] = mean_l x[o, l, i] for x of [outer, len, inner].
void launchMeanPoolForward(cudaStream_t s, float* y, const float* x, int outer, int len, int inner);
// dx[o, l, i] += dy[o, i] / len.
void launchMeanPoolBackward(cudaStream_t s, float* dx, const float* dy, int outer, int len, int inner);
// Max-pool backward that routes each output gradient to the FIRST maximal input of its window (row-major scan),
// the CPU's rule; one thread per input element gathers its windows, so no atomics. dx += routed dy.
void launchMaxPoolBackward(cudaStream_t s, float* dx, const float* dy, const float* x, int n, int c, int h, int w,
                           int kernelH, int kernelW, int strideH, int strideW, int padH, int padW, int outH, int outW);

}  // namespace strata::gpu
