// Activation kernels (host launchers only). act: 0 ReLU, 1 LeakyReLU, 2 GELU (exact erf), 3 Sigmoid, 4 Tanh,
// 5 HardSwish, the order of strata::Activation.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace strata::gpu {

void launchActivationForward(cudaStream_t s, float* y, const float* x, int64_t n, int act, float alpha);
// dx += dy * f'(.); uses x (ReLU, LeakyReLU, GELU, HardSwish) or y (Sigmoid, Tanh), whichever is given.
void launchActivationBackward(cudaStream_t s, float* dx, const float* dy, const float* x, const float* y, int64_t n,
                              int act, float alpha);

// y = min(max(x, lo), hi); its backward dx += dy where lo < x < hi.
void launchClipForward(cudaStream_t s, float* y, const float* x, int64_t n, float lo, float hi);
void launchClipBackward(cudaStream_t s, float* dx, const float* dy, const float* x, int64_t n, float lo, float hi);

}  // namespace strata::gpu
