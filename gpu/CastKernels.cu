// f32 <-> bf16 / fp16 conversion kernels.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gpu/CastKernels.cuh"
#include "gpu/CudaCheck.h"
#include "gpu/DeviceUtils.cuh"

namespace strata::gpu {
namespace {

__global__ void toBf16Kernel(__nv_bfloat16* y, const float* x, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        y[i] = __float2bfloat16_rn(x[i]);
}

__global__ void fromBf16Kernel(float* y, const __nv_bfloat16* x, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        y[i] = __bfloat162float(x[i]);
}

__global__ void toHalfKernel(__half* y, const float* x, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        y[i] = __float2half_rn(x[i]);
}

__global__ void fromHalfKernel(float* y, const __half* x, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        y[i] = __half2float(x[i]);
}

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

void launchFloatToBf16(cudaStream_t s, uint16_t* y, const float* x, int64_t n) {
    if (n <= 0) return;
    toBf16Kernel<<<detail::gridFor(n), detail::kBlock, 0, s>>>(reinterpret_cast<__nv_bfloat16*>(y), x, n);
    CUDA_CHECK_LAUNCH();
}

void launchBf16ToFloat(cudaStream_t s, float* y, const uint16_t* x, int64_t n) {
    if (n <= 0) return;
    fromBf16Kernel<<<detail::gridFor(n), detail::kBlock, 0, s>>>(y, reinterpret_cast<const __nv_bfloat16*>(x), n);
    CUDA_CHECK_LAUNCH();
}

void launchFloatToHalf(cudaStream_t s, uint16_t* y, const float* x, int64_t n) {
    if (n <= 0) return;
    toHalfKernel<<<detail::gridFor(n), detail::kBlock, 0, s>>>(reinterpret_cast<__half*>(y), x, n);
    CUDA_CHECK_LAUNCH();
}

void launchHalfToFloat(cudaStream_t s, float* y, const uint16_t* x, int64_t n) {
    if (n <= 0) return;
    fromHalfKernel<<<detail::gridFor(n), detail::kBlock, 0, s>>>(y, reinterpret_cast<const __half*>(x), n);
    CUDA_CHECK_LAUNCH();
}

}  // namespace strata::gpu
