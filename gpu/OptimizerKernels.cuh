// Fused optimizer updates (host launchers only), one kernel each, formulas as in PyTorch.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace strata::gpu {

void launchSgdUpdate(cudaStream_t s, float* w, float* velocity, const float* grad, int64_t n, float lr, float momentum,
                     float weightDecay, bool nesterov);
// Scalars computed on the host in double, as PyTorch does: stepSize = lr / (1 - beta1^step),
// bc2Sqrt = sqrt(1 - beta2^step), decay = 1 - lr * weightDecay (AdamW).
void launchAdamUpdate(cudaStream_t s, float* w, float* m, float* v, const float* grad, int64_t n, float beta1,
                      float beta2, float eps, float weightDecay, bool decoupled, float stepSize, float bc2Sqrt,
                      float decay);

}  // namespace strata::gpu
