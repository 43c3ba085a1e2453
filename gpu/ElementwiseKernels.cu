// Element-wise kernels, bias add/reduce and block copies.
#include "gpu/CudaCheck.h"
#include "gpu/DeviceUtils.cuh"
#include "gpu/ElementwiseKernels.cuh"

namespace strata::gpu {
namespace {

using detail::kBlock;

__global__ void fillKernel(float* y, float value, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        y[i] = value;
}

__global__ void scaleKernel(float* y, float alpha, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        y[i] *= alpha;
}

__global__ void axpyKernel(float* y, float alpha, const float* x, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        y[i] += alpha * x[i];
}

__global__ void addKernel(float* y, const float* a, const float* b, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        y[i] = a[i] + b[i];
}

__global__ void addBiasRowsKernel(float* y, const float* bias, int64_t total, int cols) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
        y[i] += bias[i % cols];
}

// One thread per column walks the rows in order: coalesced across the warp and deterministic.
__global__ void sumRowsKernel(float* dbias, const float* dy, int rows, int cols) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    double acc = 0.0;  // rows can be batch x positions: tens of thousands of terms
    for (int r = 0; r < rows; ++r) acc += dy[int64_t(r) * cols + c];
    dbias[c] += static_cast<float>(acc);
}

__global__ void addBiasChannelsKernel(float* y, const float* bias, int64_t total, int c, int inner) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
        y[i] += bias[(i / inner) % c];
}

// One block per channel; fixed thread-to-element map and tree: deterministic.
__global__ void sumChannelsKernel(float* dbias, const float* dy, int n, int c, int inner) {
    const int ch = blockIdx.x;
    const int64_t per = int64_t(n) * inner;
    double acc = 0.0;
    for (int64_t j = threadIdx.x; j < per; j += blockDim.x) {
        const int64_t b = j / inner, i = j % inner;
        acc += dy[(b * c + ch) * inner + i];
    }
    acc = detail::blockSum(acc);
    if (threadIdx.x == 0) dbias[ch] += static_cast<float>(acc);
}

__global__ void copyBlocksKernel(float* dst, int64_t dstStride, const float* src, int64_t srcStride, int64_t blockLen,
                                 int64_t total, bool accumulate) {
    for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
        const int64_t o = t / blockLen, j = t % blockLen;
        const float v = src[o * srcStride + j];
        if (accumulate)
            dst[o * dstStride + j] += v;
        else
            dst[o * dstStride + j] = v;
    }
}

}  // namespace

void launchFill(cudaStream_t s, float* y, float value, int64_t n) {
    if (n <= 0) return;
    fillKernel<<<detail::gridFor(n), kBlock, 0, s>>>(y, value, n);
    CUDA_CHECK_LAUNCH();
}

void launchScale(cudaStream_t s, float* y, float alpha, int64_t n) {
    if (n <= 0) return;
    scaleKernel<<<detail::gridFor(n), kBlock, 0, s>>>(y, alpha, n);
    CUDA_CHECK_LAUNCH();
}

void launchAxpy(cudaStream_t s, float* y, float alpha, const float* x, int64_t n) {
    if (n <= 0) return;
    axpyKernel<<<detail::gridFor(n), kBlock, 0, s>>>(y, alpha, x, n);
    CUDA_CHECK_LAUNCH();
}

void launchAdd(cudaStream_t s, float* y, const float* a, const float* b, int64_t n) {
    if (n <= 0) return;
    addKernel<<<detail::gridFor(n), kBlock, 0, s>>>(y, a, b, n);
    CUDA_CHECK_LAUNCH();
}

void launchAddBiasRows(cudaStream_t s, float* y, const float* bias, int rows, int cols) {
    const int64_t total = int64_t(rows) * cols;
    if (total <= 0) return;
    addBiasRowsKernel<<<detail::gridFor(total), kBlock, 0, s>>>(y, bias, total, cols);
    CUDA_CHECK_LAUNCH();
}

void launchSumRows(cudaStream_t s, float* dbias, const float* dy, int rows, int cols) {
    if (rows <= 0 || cols <= 0) return;
    sumRowsKernel<<<(cols + kBlock - 1) / kBlock, kBlock, 0, s>>>(dbias, dy, rows, cols);
    CUDA_CHECK_LAUNCH();
}

void launchAddBiasChannels(cudaStream_t s, float* y, const float* bias, int n, int c, int inner) {
    const int64_t total = int64_t(n) * c * inner;
    if (total <= 0) return;
    addBiasChannelsKernel<<<detail::gridFor(total), kBlock, 0, s>>>(y, bias, total, c, inner);
    CUDA_CHECK_LAUNCH();
}

void launchSumChannels(cudaStream_t s, float* dbias, const float* dy, int n, int c, int inner) {
    if (n <= 0 || c <= 0 || inner <= 0) return;
    sumChannelsKernel<<<c, kBlock, 0, s>>>(dbias, dy, n, c, inner);
    CUDA_CHECK_LAUNCH();
}

void launchCopyBlocks(cudaStream_t s, float* dst, int64_t dstStride, const float* src, int64_t srcStride,
                      int64_t blockLen, int64_t count, bool accumulate) {
    const int64_t total = blockLen * count;
    if (total <= 0) return;
    copyBlocksKernel<<<detail::gridFor(total), kBlock, 0, s>>>(dst, dstStride, src, srcStride, blockLen, total,
                                                               accumulate);
    CUDA_CHECK_LAUNCH();
}

}  // namespace strata::gpu
