// Layer norm: one block per row for the row statistics and dx; two fixed-order passes over row chunks for
// dgamma/dbeta (deterministic, no atomics).
#include <algorithm>
#include <cstdint>
#include <string>

#include "core/backend/Backend.h"
#include "gpu/CudaCheck.h"
#include "gpu/DeviceUtils.cuh"
#include "gpu/LayerNormKernels.cuh"

namespace strata::gpu {
namespace {

__global__ void forwardKernel(float* y, float* meanOut, float* rstdOut, const float* x, const float* gamma,
                              const float* beta, int cols, float eps) {
    const int64_t base = int64_t(blockIdx.x) * cols;
    const float* xr = x + base;
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c];
    const float mean = detail::blockSum(s) / cols;
    float q = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        const float d = xr[c] - mean;
        q += d * d;
    }
    const float var = detail::blockSum(q) / cols;
    const float rstd = rsqrtf(var + eps);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        const float g = gamma ? gamma[c] : 1.0f, b = beta ? beta[c] : 0.0f;
        y[base + c] = (xr[c] - mean) * rstd * g + b;
    }
    if (threadIdx.x == 0) {
        if (meanOut) meanOut[blockIdx.x] = mean;
        if (rstdOut) rstdOut[blockIdx.x] = rstd;
    }
}

__global__ void backwardDxKernel(float* dx, const float* dy, const float* x, const float* gamma, const float* meanIn,
                                 const float* rstdIn, int cols) {
    const int64_t base = int64_t(blockIdx.x) * cols;
    const float mean = meanIn[blockIdx.x], rstd = rstdIn[blockIdx.x];
    float sg = 0.0f, sgx = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        const float g = dy[base + c] * (gamma ? gamma[c] : 1.0f);
        sg += g;
        sgx += g * (x[base + c] - mean) * rstd;
    }
    const float meanG = detail::blockSum(sg) / cols;
    const float meanGx = detail::blockSum(sgx) / cols;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        const float g = dy[base + c] * (gamma ? gamma[c] : 1.0f);
        const float xhat = (x[base + c] - mean) * rstd;
        dx[base + c] += rstd * (g - meanG - xhat * meanGx);
    }
}

// Parameter gradients in two deterministic passes: blocks of 32 columns x one chunk of rows write
// per-chunk partial sums (8 row lanes per column, combined in a fixed order), then one thread per column
// adds the chunks in order. (One thread per column walking every row kept only a few SMs busy.)
constexpr int kParamCols = 32, kParamLanes = 8;

__global__ void backwardParamsPartialKernel(double* partG, double* partB, const float* dy, const float* x,
                                            const float* meanIn, const float* rstdIn, int rows, int cols,
                                            int chunkRows) {
    const int c = blockIdx.x * kParamCols + threadIdx.x;
    const int r0 = blockIdx.y * chunkRows, r1 = min(rows, r0 + chunkRows);
    double ag = 0.0, ab = 0.0;
    if (c < cols)
        for (int r = r0 + threadIdx.y; r < r1; r += kParamLanes) {
            const float d = dy[int64_t(r) * cols + c];
            ag += d * (x[int64_t(r) * cols + c] - meanIn[r]) * rstdIn[r];
            ab += d;
        }
    __shared__ double sg[kParamLanes][kParamCols], sb[kParamLanes][kParamCols];
    sg[threadIdx.y][threadIdx.x] = ag;
    sb[threadIdx.y][threadIdx.x] = ab;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
        for (int l = 1; l < kParamLanes; ++l) {
            ag += sg[l][threadIdx.x];
            ab += sb[l][threadIdx.x];
        }
        partG[int64_t(blockIdx.y) * cols + c] = ag;
        partB[int64_t(blockIdx.y) * cols + c] = ab;
    }
}

__global__ void backwardParamsFinalKernel(float* dgamma, float* dbeta, const double* partG, const double* partB,
                                          int chunks, int cols) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    double ag = 0.0, ab = 0.0;
    for (int k = 0; k < chunks; ++k) {
        ag += partG[int64_t(k) * cols + c];
        ab += partB[int64_t(k) * cols + c];
    }
    if (dgamma) dgamma[c] += static_cast<float>(ag);
    if (dbeta) dbeta[c] += static_cast<float>(ab);
}

// Rows per chunk: at least 64; at most 512 chunks (the final pass walks them serially), and at most 2^20
// partials per array (16 MiB of scratch in all, whatever the width).
int paramChunkRows(int rows, int cols) {
    const int maxChunks = std::clamp((1 << 20) / std::max(cols, 1), 1, 512);
    return std::max(64, (rows + maxChunks - 1) / maxChunks);
}

int paramChunks(int rows, int cols) {
    const int per = paramChunkRows(rows, cols);
    return (rows + per - 1) / per;
}

}  // namespace

size_t layerNormBackwardScratchBytes(int rows, int cols) {
    if (rows <= 0 || cols <= 0) return 0;
    return size_t(2) * size_t(paramChunks(rows, cols)) * size_t(cols) * sizeof(double);
}

namespace {

int rowThreads(int cols) { return cols <= 64 ? 32 : (cols <= 512 ? 128 : 256); }

}  // namespace

void launchLayerNormForward(cudaStream_t s, float* y, float* mean, float* rstd, const float* x, const float* gamma,
                            const float* beta, int rows, int cols, float eps) {
    if (rows <= 0 || cols <= 0) return;
    forwardKernel<<<rows, rowThreads(cols), 0, s>>>(y, mean, rstd, x, gamma, beta, cols, eps);
    CUDA_CHECK_LAUNCH();
}

void launchLayerNormBackward(cudaStream_t s, float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                             const float* gamma, const float* mean, const float* rstd, int rows, int cols,
                             void* scratch, size_t scratchBytes) {
    if (rows <= 0 || cols <= 0) return;
    if (dx) {
        backwardDxKernel<<<rows, rowThreads(cols), 0, s>>>(dx, dy, x, gamma, mean, rstd, cols);
        CUDA_CHECK_LAUNCH();
    }
    if (dgamma || dbeta) {
        const int chunks = paramChunks(rows, cols);
        if (!scratch || scratchBytes < layerNormBackwardScratchBytes(rows, cols))
            throw BackendError("layerNormBackward: scratch of " + std::to_string(scratchBytes) + " bytes, needs " +
                               std::to_string(layerNormBackwardScratchBytes(rows, cols)));
        double* partG = static_cast<double*>(scratch);
        double* partB = partG + int64_t(chunks) * cols;
        const dim3 grid((cols + kParamCols - 1) / kParamCols, chunks), block(kParamCols, kParamLanes);
        backwardParamsPartialKernel<<<grid, block, 0, s>>>(partG, partB, dy, x, mean, rstd, rows, cols,
                                                           paramChunkRows(rows, cols));
        CUDA_CHECK_LAUNCH();
        backwardParamsFinalKernel<<<(cols + 127) / 128, 128, 0, s>>>(dgamma, dbeta, partG, partB, chunks, cols);
        CUDA_CHECK_LAUNCH();
    }
}

}  // namespace strata::gpu
