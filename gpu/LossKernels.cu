// Fused losses (softmax cross-entropy, MSE, BCE with logits) and countCorrect. One warp per row.
#include <cmath>

#include "gpu/CudaCheck.h"
#include "gpu/DeviceErrorFlag.h"
#include "gpu/DeviceUtils.cuh"
#include "gpu/LossKernels.cuh"

namespace strata::gpu {
namespace {

constexpr int kRowsPerBlock = 8;  // 8 warps of 32 threads

__device__ inline void reportError(int* flag, int code, int value, int position, int limit) {
    if (atomicCAS(&flag[0], 0, code) == 0) {
        flag[1] = value;
        flag[2] = position;
        flag[3] = limit;
    }
}

__global__ void softmaxCrossEntropyKernel(float* losses, float* dlogits, const float* logits, const int32_t* labels,
                                          int rows, int cols, float gradScale, int* errorFlag) {
    const int row = blockIdx.x * kRowsPerBlock + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const float* x = logits + int64_t(row) * cols;
    float mx = -INFINITY;
    for (int c = lane; c < cols; c += 32) mx = fmaxf(mx, x[c]);
    mx = detail::warpMax(mx);
    float sum = 0.0f;
    for (int c = lane; c < cols; c += 32) sum += expf(x[c] - mx);
    sum = detail::warpSum(sum);
    const int label = labels[row];
    const bool valid = label >= 0 && label < cols;
    if (!valid && lane == 0) reportError(errorFlag, kCrossEntropyLabel, label, row, cols);
    if (losses && lane == 0) losses[row] = valid ? logf(sum) + mx - x[label] : NAN;
    if (dlogits) {
        float* d = dlogits + int64_t(row) * cols;
        const float inv = 1.0f / sum;
        for (int c = lane; c < cols; c += 32) {
            const float p = expf(x[c] - mx) * inv;
            d[c] = (p - (c == label ? 1.0f : 0.0f)) * gradScale;
        }
    }
}

__global__ void mseKernel(float* losses, float* dpred, const float* pred, const float* target, int rows, int cols,
                          float gradScale) {
    const int row = blockIdx.x * kRowsPerBlock + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const int64_t base = int64_t(row) * cols;
    float acc = 0.0f;
    const float k = 2.0f / cols * gradScale;
    for (int c = lane; c < cols; c += 32) {
        const float diff = pred[base + c] - target[base + c];
        acc += diff * diff;
        if (dpred) dpred[base + c] = diff * k;
    }
    acc = detail::warpSum(acc);
    if (losses && lane == 0) losses[row] = acc / cols;
}

__global__ void robustKernel(float* losses, float* dpred, const float* pred, const float* target, int rows, int cols,
                             float delta, float gradScale) {
    const int row = blockIdx.x * kRowsPerBlock + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const int64_t base = int64_t(row) * cols;
    float acc = 0.0f;
    const float k = gradScale / cols;
    for (int c = lane; c < cols; c += 32) {
        const float d = pred[base + c] - target[base + c];
        const float a = fabsf(d);
        const float sign = d > 0.0f ? 1.0f : (d < 0.0f ? -1.0f : 0.0f);
        float g;
        if (delta <= 0.0f) {
            acc += a;
            g = sign;
        } else if (a <= delta) {
            acc += 0.5f * d * d;
            g = d;
        } else {
            acc += delta * (a - 0.5f * delta);
            g = delta * sign;
        }
        if (dpred) dpred[base + c] = g * k;
    }
    acc = detail::warpSum(acc);
    if (losses && lane == 0) losses[row] = acc / cols;
}

__global__ void bceKernel(float* losses, float* dlogits, const float* logits, const float* target, int rows, int cols,
                          float gradScale) {
    const int row = blockIdx.x * kRowsPerBlock + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const int64_t base = int64_t(row) * cols;
    float acc = 0.0f;
    const float k = gradScale / cols;
    for (int c = lane; c < cols; c += 32) {
        const float x = logits[base + c], t = target[base + c];
        // max(x, 0) - x t + log(1 + exp(-|x|)): never overflows.
        acc += fmaxf(x, 0.0f) - x * t + log1pf(expf(-fabsf(x)));
        if (dlogits) dlogits[base + c] = (1.0f / (1.0f + expf(-x)) - t) * k;
    }
    acc = detail::warpSum(acc);
    if (losses && lane == 0) losses[row] = acc / cols;
}

// One block; each thread takes rows by stride and the block sums the integer counts (exact, so order-free).
__global__ void countCorrectKernel(long long* count, const float* logits, const int32_t* labels, int rows, int cols,
                                   int* errorFlag) {
    long long mine = 0;
    for (int r = threadIdx.x; r < rows; r += blockDim.x) {
        const float* x = logits + int64_t(r) * cols;
        int best = 0;
        for (int c = 1; c < cols; ++c)
            if (x[c] > x[best]) best = c;
        const int label = labels[r];
        if (label < 0 || label >= cols) reportError(errorFlag, kCountCorrectLabel, label, r, cols);
        mine += best == label ? 1 : 0;
    }
    mine = detail::blockSum(mine);
    if (threadIdx.x == 0) *count = mine;
}

int rowBlocks(int rows) { return (rows + kRowsPerBlock - 1) / kRowsPerBlock; }

}  // namespace

void launchSoftmaxCrossEntropy(cudaStream_t s, float* losses, float* dlogits, const float* logits,
                               const int32_t* labels, int rows, int cols, float gradScale, int* errorFlag) {
    if (rows <= 0) return;
    softmaxCrossEntropyKernel<<<rowBlocks(rows), kRowsPerBlock * 32, 0, s>>>(losses, dlogits, logits, labels, rows,
                                                                             cols, gradScale, errorFlag);
    CUDA_CHECK_LAUNCH();
}

void launchMseLoss(cudaStream_t s, float* losses, float* dpred, const float* pred, const float* target, int rows,
                   int cols, float gradScale) {
    if (rows <= 0) return;
    mseKernel<<<rowBlocks(rows), kRowsPerBlock * 32, 0, s>>>(losses, dpred, pred, target, rows, cols, gradScale);
    CUDA_CHECK_LAUNCH();
}

void launchRobustLoss(cudaStream_t s, float* losses, float* dpred, const float* pred, const float* target, int rows,
                      int cols, float delta, float gradScale) {
    if (rows <= 0) return;
    robustKernel<<<rowBlocks(rows), kRowsPerBlock * 32, 0, s>>>(losses, dpred, pred, target, rows, cols, delta,
                                                                gradScale);
    CUDA_CHECK_LAUNCH();
}

void launchBceWithLogits(cudaStream_t s, float* losses, float* dlogits, const float* logits, const float* target,
                         int rows, int cols, float gradScale) {
    if (rows <= 0) return;
    bceKernel<<<rowBlocks(rows), kRowsPerBlock * 32, 0, s>>>(losses, dlogits, logits, target, rows, cols, gradScale);
    CUDA_CHECK_LAUNCH();
}

void launchCountCorrect(cudaStream_t s, long long* count, const float* logits, const int32_t* labels, int rows,
                        int cols, int* errorFlag) {
    countCorrectKernel<<<1, 1024, 0, s>>>(count, logits, labels, rows, cols, errorFlag);
    CUDA_CHECK_LAUNCH();
}

}  // namespace strata::gpu
