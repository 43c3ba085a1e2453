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
// launchMaxPoolBackward followed by the backward of the ReLU whose output x is: each element's routed sum is
// multiplied by (x > 0) before it is added, dx += routed * (x > 0 ? 1 : 0) (a multiplication, as the CPU
// reference's activationBackward, so an infinite or NaN routed gradient still gives NaN where x <= 0).
void launchMaxPoolReLUBackward(cudaStream_t s, float* dx, const float* dy, const float* x, int n, int c, int h, int w,
                               int kernelH, int kernelW, int strideH, int strideW, int padH, int padW, int outH,
                               int outW);

}  // namespace strata::gpu
