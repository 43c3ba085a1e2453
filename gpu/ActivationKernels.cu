// Activation kernels: ReLU, LeakyReLU, GELU (exact, erf form), Sigmoid, Tanh, HardSwish; and Clip.
#include "gpu/ActivationKernels.cuh"
#include "gpu/CudaCheck.h"
#include "gpu/DeviceUtils.cuh"

namespace strata::gpu {
namespace {

enum : int { kRelu = 0, kLeaky = 1, kGelu = 2, kSigmoid = 3, kTanh = 4, kHardSwish = 5 };

__device__ inline float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

template <int Act>
__device__ inline float forwardOne(float x, float alpha) {
    if constexpr (Act == kRelu) return x > 0.0f ? x : 0.0f;
    if constexpr (Act == kLeaky) return x > 0.0f ? x : alpha * x;
    if constexpr (Act == kGelu) return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    if constexpr (Act == kSigmoid) return sigmoidf(x);
    if constexpr (Act == kTanh) return tanhf(x);
    if constexpr (Act == kHardSwish) return x * fminf(fmaxf(x + 3.0f, 0.0f), 6.0f) / 6.0f;
    return x;
}

template <int Act>
__global__ void forwardKernel(float* y, const float* x, int64_t n, float alpha) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        y[i] = forwardOne<Act>(x[i], alpha);
}

// x or y may be null; the derivative is taken from whichever the activation can use.
template <int Act>
__global__ void backwardKernel(float* dx, const float* dy, const float* x, const float* y, int64_t n, float alpha) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        float d;
        if constexpr (Act == kRelu) {
            const float v = x ? x[i] : y[i];
            d = v > 0.0f ? 1.0f : 0.0f;
        } else if constexpr (Act == kLeaky) {
            const float v = x ? x[i] : y[i];  // y has the sign of x for alpha > 0
            d = v > 0.0f ? 1.0f : alpha;
        } else if constexpr (Act == kGelu) {
            const float v = x[i];
            const float cdf = 0.5f * (1.0f + erff(v * 0.70710678118654752f));
            const float pdf = 0.39894228040143268f * expf(-0.5f * v * v);
            d = cdf + v * pdf;
        } else if constexpr (Act == kSigmoid) {
            const float s = y ? y[i] : sigmoidf(x[i]);
            d = s * (1.0f - s);
        } else if constexpr (Act == kHardSwish) {
            const float v = x[i];
            d = v < -3.0f ? 0.0f : v <= 3.0f ? v / 3.0f + 0.5f : 1.0f;
        } else {
            const float t = y ? y[i] : tanhf(x[i]);
            d = 1.0f - t * t;
        }
        dx[i] += dy[i] * d;
    }
}

template <int Act>
void forwardAs(cudaStream_t s, float* y, const float* x, int64_t n, float alpha) {
    forwardKernel<Act><<<detail::gridFor(n), detail::kBlock, 0, s>>>(y, x, n, alpha);
    CUDA_CHECK_LAUNCH();
}

template <int Act>
void backwardAs(cudaStream_t s, float* dx, const float* dy, const float* x, const float* y, int64_t n, float alpha) {
    backwardKernel<Act><<<detail::gridFor(n), detail::kBlock, 0, s>>>(dx, dy, x, y, n, alpha);
    CUDA_CHECK_LAUNCH();
}

__global__ void clipForwardKernel(float* y, const float* x, int64_t n, float lo, float hi) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        y[i] = fminf(fmaxf(x[i], lo), hi);
}

__global__ void clipBackwardKernel(float* dx, const float* dy, const float* x, int64_t n, float lo, float hi) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        if (x[i] > lo && x[i] < hi) dx[i] += dy[i];
}

}  // namespace

void launchClipForward(cudaStream_t s, float* y, const float* x, int64_t n, float lo, float hi) {
    if (n <= 0) return;
    clipForwardKernel<<<detail::gridFor(n), detail::kBlock, 0, s>>>(y, x, n, lo, hi);
    CUDA_CHECK_LAUNCH();
}

void launchClipBackward(cudaStream_t s, float* dx, const float* dy, const float* x, int64_t n, float lo, float hi) {
    if (n <= 0) return;
    clipBackwardKernel<<<detail::gridFor(n), detail::kBlock, 0, s>>>(dx, dy, x, n, lo, hi);
    CUDA_CHECK_LAUNCH();
}

void launchActivationForward(cudaStream_t s, float* y, const float* x, int64_t n, int act, float alpha) {
    if (n <= 0) return;
    switch (act) {
        case kRelu: forwardAs<kRelu>(s, y, x, n, alpha); break;
        case kLeaky: forwardAs<kLeaky>(s, y, x, n, alpha); break;
        case kGelu: forwardAs<kGelu>(s, y, x, n, alpha); break;
        case kSigmoid: forwardAs<kSigmoid>(s, y, x, n, alpha); break;
        case kTanh: forwardAs<kTanh>(s, y, x, n, alpha); break;
        case kHardSwish: forwardAs<kHardSwish>(s, y, x, n, alpha); break;
        default: CUDA_CHECK(cudaErrorInvalidValue);
    }
}

void launchActivationBackward(cudaStream_t s, float* dx, const float* dy, const float* x, const float* y, int64_t n,
                              int act, float alpha) {
    if (n <= 0) return;
    switch (act) {
        case kRelu: backwardAs<kRelu>(s, dx, dy, x, y, n, alpha); break;
        case kLeaky: backwardAs<kLeaky>(s, dx, dy, x, y, n, alpha); break;
        case kGelu: backwardAs<kGelu>(s, dx, dy, x, y, n, alpha); break;
        case kSigmoid: backwardAs<kSigmoid>(s, dx, dy, x, y, n, alpha); break;
        case kTanh: backwardAs<kTanh>(s, dx, dy, x, y, n, alpha); break;
        case kHardSwish: backwardAs<kHardSwish>(s, dx, dy, x, y, n, alpha); break;
        default: CUDA_CHECK(cudaErrorInvalidValue);
    }
}

}  // namespace strata::gpu
