// Fused SGD (momentum, Nesterov, weight decay) and Adam / AdamW updates.
#include "gpu/CudaCheck.h"
#include "gpu/DeviceUtils.cuh"
#include "gpu/OptimizerKernels.cuh"

namespace strata::gpu {
namespace {

__global__ void sgdKernel(float* w, float* vel, const float* grad, int64_t n, float lr, float momentum, float wd,
                          bool nesterov) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const float g = wd != 0.0f ? grad[i] + wd * w[i] : grad[i];
        float step = g;
        if (momentum != 0.0f) {
            const float v = momentum * vel[i] + g;
            vel[i] = v;
            step = nesterov ? g + momentum * v : v;
        }
        w[i] -= lr * step;
    }
}

__global__ void adamKernel(float* w, float* m, float* v, const float* grad, int64_t n, float beta1, float beta2,
                           float eps, float wd, bool decoupled, float stepSize, float bc2Sqrt, float decay) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        float g = grad[i];
        float wi = w[i];
        if (wd != 0.0f) {
            if (decoupled)
                wi *= decay;
            else
                g += wd * wi;
        }
        const float mi = m[i] * beta1 + (1.0f - beta1) * g;
        const float vi = v[i] * beta2 + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        const float denom = sqrtf(vi) / bc2Sqrt + eps;
        w[i] = wi - stepSize * (mi / denom);
    }
}

}  // namespace

void launchSgdUpdate(cudaStream_t s, float* w, float* velocity, const float* grad, int64_t n, float lr, float momentum,
                     float weightDecay, bool nesterov) {
    if (n <= 0) return;
    sgdKernel<<<detail::gridFor(n), detail::kBlock, 0, s>>>(w, velocity, grad, n, lr, momentum, weightDecay, nesterov);
    CUDA_CHECK_LAUNCH();
}

void launchAdamUpdate(cudaStream_t s, float* w, float* m, float* v, const float* grad, int64_t n, float beta1,
                      float beta2, float eps, float weightDecay, bool decoupled, float stepSize, float bc2Sqrt,
                      float decay) {
    if (n <= 0) return;
    adamKernel<<<detail::gridFor(n), detail::kBlock, 0, s>>>(w, m, v, grad, n, beta1, beta2, eps, weightDecay,
                                                             decoupled, stepSize, bc2Sqrt, decay);
    CUDA_CHECK_LAUNCH();
}

}  // namespace strata::gpu
