// Kernels of the sequence layers: attention's masked softmax and masked pooling over a sequence.
#include <cmath>

#include "gpu/CudaCheck.h"
#include "gpu/DeviceUtils.cuh"
#include "gpu/SequenceKernels.cuh"

namespace strata::gpu {
namespace {

constexpr int kRowsPerBlock = 8;  // 8 warps of 32 threads, one row each

__global__ void maskedSoftmaxKernel(float* y, const float* x, const float* keep, int rows, int rowsPerGroup, int cols) {
    const int row = blockIdx.x * kRowsPerBlock + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const float* k = keep + int64_t(row / rowsPerGroup) * cols;
    const float* xr = x + int64_t(row) * cols;
    float* yr = y + int64_t(row) * cols;
    float mx = -INFINITY;
    int kept = 0;
    for (int c = lane; c < cols; c += 32)
        if (k[c] != 0.0f) {
            mx = fmaxf(mx, xr[c]);
            ++kept;
        }
    mx = detail::warpMax(mx);
    kept = detail::warpSum(kept);
    float sum = 0.0f;
    for (int c = lane; c < cols; c += 32)
        if (k[c] != 0.0f) sum += expf(xr[c] - mx);
    sum = detail::warpSum(sum);
    const float inv = kept > 0 ? 1.0f / sum : 0.0f;
    for (int c = lane; c < cols; c += 32) yr[c] = k[c] != 0.0f ? expf(xr[c] - mx) * inv : 0.0f;
}

__global__ void sequencePoolForwardKernel(float* y, const float* x, const float* keep, int batch, int len, int dim,
                                          bool max) {
    const int64_t total = int64_t(batch) * dim;
    for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
        const int64_t b = t / dim, i = t % dim;
        float acc = 0.0f, best = 0.0f;
        int counted = 0;
        for (int l = 0; l < len; ++l) {
            if (keep && keep[b * len + l] == 0.0f) continue;
            const float v = x[(b * len + l) * dim + i];
            acc += v;
            if (counted == 0 || v > best) best = v;
            ++counted;
        }
        y[t] = counted == 0 ? 0.0f : (max ? best : acc / counted);
    }
}

__global__ void sequencePoolBackwardKernel(float* dx, const float* dy, const float* x, const float* y,
                                           const float* keep, int batch, int len, int dim, bool max) {
    const int64_t total = int64_t(batch) * dim;
    for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
        const int64_t b = t / dim, i = t % dim;
        int counted = 0;
        for (int l = 0; l < len; ++l) counted += (!keep || keep[b * len + l] != 0.0f) ? 1 : 0;
        if (counted == 0) continue;
        const float g = dy[t];
        for (int l = 0; l < len; ++l) {
            if (keep && keep[b * len + l] == 0.0f) continue;
            const int64_t at = (b * len + l) * dim + i;
            if (!max) {
                dx[at] += g / static_cast<float>(counted);
            } else if (x[at] == y[t]) {
                dx[at] += g;
                break;
            }
        }
    }
}

}  // namespace

void launchMaskedSoftmaxForward(cudaStream_t s, float* y, const float* x, const float* keep, int groups,
                                int rowsPerGroup, int cols) {
    const int64_t rows = int64_t(groups) * rowsPerGroup;
    if (rows <= 0 || cols <= 0) return;
    const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
    maskedSoftmaxKernel<<<static_cast<unsigned>(blocks), kRowsPerBlock * 32, 0, s>>>(y, x, keep, static_cast<int>(rows),
                                                                                     rowsPerGroup, cols);
    CUDA_CHECK_LAUNCH();
}

void launchSequencePoolForward(cudaStream_t s, float* y, const float* x, const float* keep, int batch, int len, int dim,
                               PoolMode mode) {
    const int64_t total = int64_t(batch) * dim;
    if (total <= 0 || len <= 0) return;
    sequencePoolForwardKernel<<<detail::gridFor(total), detail::kBlock, 0, s>>>(y, x, keep, batch, len, dim,
                                                                                mode == PoolMode::Max);
    CUDA_CHECK_LAUNCH();
}

void launchSequencePoolBackward(cudaStream_t s, float* dx, const float* dy, const float* x, const float* y,
                                const float* keep, int batch, int len, int dim, PoolMode mode) {
    const int64_t total = int64_t(batch) * dim;
    if (total <= 0 || len <= 0) return;
    sequencePoolBackwardKernel<<<detail::gridFor(total), detail::kBlock, 0, s>>>(dx, dy, x, y, keep, batch, len, dim,
                                                                                 mode == PoolMode::Max);
    CUDA_CHECK_LAUNCH();
}

}  // namespace strata::gpu
