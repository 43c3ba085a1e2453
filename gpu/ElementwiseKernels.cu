// Element-wise kernels, bias adds and block copies (bias gradients are cuBLAS gemv in CudaBackend.cpp).
#include <climits>

#include "gpu/CudaCheck.h"
#include "gpu/DeviceErrorFlag.h"
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

__global__ void mulKernel(float* y, const float* a, const float* b, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        y[i] = a[i] * b[i];
}

__global__ void addBiasRowsKernel(float* y, const float* bias, int64_t total, int cols) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
        y[i] += bias[i % cols];
}

__global__ void addBiasChannelsKernel(float* y, const float* bias, int64_t total, int c, int inner) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
        y[i] += bias[(i / inner) % c];
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

// One thread per element, in the destination's order (coalesced writes).
__global__ void reblockKernel(float* dst, int dstBlock, const float* src, int srcBlock, int64_t c, int64_t inner,
                              int64_t total, bool accumulate) {
    for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
        // Position t in the destination layout -> (image i, channel ch, position p).
        int64_t i, ch, p;
        if (dstBlock == 0) {
            p = t % inner;
            ch = (t / inner) % c;
            i = t / (inner * c);
        } else {
            const int64_t lane = t % dstBlock, rest = t / dstBlock;
            p = rest % inner;
            const int64_t cb = (rest / inner) % (c / dstBlock);
            i = rest / (inner * (c / dstBlock));
            ch = cb * dstBlock + lane;
        }
        const int64_t from = srcBlock == 0
                                 ? (i * c + ch) * inner + p
                                 : ((i * (c / srcBlock) + ch / srcBlock) * inner + p) * srcBlock + ch % srcBlock;
        if (accumulate)
            dst[t] += src[from];
        else
            dst[t] = src[from];
    }
}

__global__ void gatherRowsKernel(uint32_t* dst, const uint32_t* src, int64_t srcRows, const int32_t* indices,
                                 int64_t total, int64_t rowWords, int* flag) {
    for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
        const int64_t i = t / rowWords, j = t % rowWords;
        const int32_t r = indices[i];
        if (r < 0 || r >= srcRows) {
            if (j == 0 && atomicCAS(&flag[0], 0, kGatherRowIndex) == 0) {  // one report, the first
                flag[1] = r;
                flag[2] = static_cast<int>(i);
                flag[3] = static_cast<int>(srcRows < INT_MAX ? srcRows : INT_MAX);
            }
            continue;
        }
        dst[t] = src[int64_t(r) * rowWords + j];
    }
}

}  // namespace

void launchGatherRows(cudaStream_t s, void* dst, const void* src, int64_t srcRows, const int32_t* indices,
                      int64_t count, int64_t rowWords, int* errorFlag) {
    const int64_t total = count * rowWords;
    if (total <= 0) return;
    gatherRowsKernel<<<detail::gridFor(total), kBlock, 0, s>>>(
        static_cast<uint32_t*>(dst), static_cast<const uint32_t*>(src), srcRows, indices, total, rowWords, errorFlag);
    CUDA_CHECK_LAUNCH();
}

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

void launchMul(cudaStream_t s, float* y, const float* a, const float* b, int64_t n) {
    if (n <= 0) return;
    mulKernel<<<detail::gridFor(n), kBlock, 0, s>>>(y, a, b, n);
    CUDA_CHECK_LAUNCH();
}

void launchAddBiasRows(cudaStream_t s, float* y, const float* bias, int rows, int cols) {
    const int64_t total = int64_t(rows) * cols;
    if (total <= 0) return;
    addBiasRowsKernel<<<detail::gridFor(total), kBlock, 0, s>>>(y, bias, total, cols);
    CUDA_CHECK_LAUNCH();
}

void launchAddBiasChannels(cudaStream_t s, float* y, const float* bias, int n, int c, int inner) {
    const int64_t total = int64_t(n) * c * inner;
    if (total <= 0) return;
    addBiasChannelsKernel<<<detail::gridFor(total), kBlock, 0, s>>>(y, bias, total, c, inner);
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

void launchReblock(cudaStream_t s, float* dst, int dstBlock, const float* src, int srcBlock, int n, int c,
                   int64_t inner, bool accumulate) {
    const int64_t total = int64_t(n) * c * inner;
    if (total <= 0) return;
    reblockKernel<<<detail::gridFor(total), kBlock, 0, s>>>(dst, dstBlock, src, srcBlock, c, inner, total, accumulate);
    CUDA_CHECK_LAUNCH();
}

}  // namespace strata::gpu
