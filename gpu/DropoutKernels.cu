// Dropout with the counter-based mask shared with the CPU (DropoutHash.h).
#include "gpu/CudaCheck.h"
#include "gpu/DeviceUtils.cuh"
#include "gpu/DropoutHash.h"
#include "gpu/DropoutKernels.cuh"

namespace strata::gpu {
namespace {

__global__ void dropoutForwardKernel(float* y, const float* x, int64_t n, float p, float scale, uint64_t seed,
                                     uint64_t first) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        y[i] = dropoutKeepHD(seed, first + static_cast<uint64_t>(i), p) ? x[i] * scale : 0.0f;
}

__global__ void dropoutBackwardKernel(float* dx, const float* dy, int64_t n, float p, float scale, uint64_t seed,
                                      uint64_t first) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        if (dropoutKeepHD(seed, first + static_cast<uint64_t>(i), p)) dx[i] += dy[i] * scale;
}

// p >= 1 drops everything; the scale is then never applied.
float keptScale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

}  // namespace

void launchDropoutForward(cudaStream_t s, float* y, const float* x, int64_t n, float p, uint64_t seed, uint64_t first) {
    if (n <= 0) return;
    dropoutForwardKernel<<<detail::gridFor(n), detail::kBlock, 0, s>>>(y, x, n, p, keptScale(p), seed, first);
    CUDA_CHECK_LAUNCH();
}

void launchDropoutBackward(cudaStream_t s, float* dx, const float* dy, int64_t n, float p, uint64_t seed,
                           uint64_t first) {
    if (n <= 0) return;
    dropoutBackwardKernel<<<detail::gridFor(n), detail::kBlock, 0, s>>>(dx, dy, n, p, keptScale(p), seed, first);
    CUDA_CHECK_LAUNCH();
}

}  // namespace strata::gpu
