// Layer norm: one block per row for the row statistics and dx; one thread per column, walking the rows in
// order, for dgamma/dbeta (deterministic, no atomics).
#include <cstdint>

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

__global__ void backwardParamsKernel(float* dgamma, float* dbeta, const float* dy, const float* x, const float* meanIn,
                                     const float* rstdIn, int rows, int cols) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    double ag = 0.0, ab = 0.0;
    for (int r = 0; r < rows; ++r) {
        const float d = dy[int64_t(r) * cols + c];
        ag += d * (x[int64_t(r) * cols + c] - meanIn[r]) * rstdIn[r];
        ab += d;
    }
    if (dgamma) dgamma[c] += static_cast<float>(ag);
    if (dbeta) dbeta[c] += static_cast<float>(ab);
}

int rowThreads(int cols) {
    return cols <= 64 ? 32 : (cols <= 512 ? 128 : 256);
}

}  // namespace

void launchLayerNormForward(cudaStream_t s, float* y, float* mean, float* rstd, const float* x, const float* gamma,
                            const float* beta, int rows, int cols, float eps) {
    if (rows <= 0 || cols <= 0) return;
    forwardKernel<<<rows, rowThreads(cols), 0, s>>>(y, mean, rstd, x, gamma, beta, cols, eps);
    CUDA_CHECK_LAUNCH();
}

void launchLayerNormBackward(cudaStream_t s, float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                             const float* gamma, const float* mean, const float* rstd, int rows, int cols) {
    if (rows <= 0 || cols <= 0) return;
    if (dx) {
        backwardDxKernel<<<rows, rowThreads(cols), 0, s>>>(dx, dy, x, gamma, mean, rstd, cols);
        CUDA_CHECK_LAUNCH();
    }
    if (dgamma || dbeta) {
        backwardParamsKernel<<<(cols + 127) / 128, 128, 0, s>>>(dgamma, dbeta, dy, x, mean, rstd, rows, cols);
        CUDA_CHECK_LAUNCH();
    }
}

}  // namespace strata::gpu
