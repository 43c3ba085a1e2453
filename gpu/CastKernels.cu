// Rounding of float32 values to bf16 / fp16 precision (kept in float32): the operands of reduced precision.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gpu/CastKernels.cuh"
#include "gpu/CudaCheck.h"
#include "gpu/DeviceUtils.cuh"

namespace strata::gpu {
namespace {

__global__ void roundBf16Kernel(float* y, const float* x, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        y[i] = __bfloat162float(__float2bfloat16_rn(x[i]));
}

__global__ void roundHalfKernel(float* y, const float* x, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        y[i] = __half2float(__float2half_rn(x[i]));
}

}  // namespace

void launchRoundFloat(cudaStream_t s, float* y, const float* x, int64_t n, bool bf16) {
    if (n <= 0) return;
    if (bf16)
        roundBf16Kernel<<<detail::gridFor(n), detail::kBlock, 0, s>>>(y, x, n);
    else
        roundHalfKernel<<<detail::gridFor(n), detail::kBlock, 0, s>>>(y, x, n);
    CUDA_CHECK_LAUNCH();
}

}  // namespace strata::gpu
