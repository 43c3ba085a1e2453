// Fused loss kernels and countCorrect (host launchers only). Loss gradients are WRITTEN; losses and
// gradient outputs may be null. errorFlag: see DeviceErrorFlag.h.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace strata::gpu {

void launchSoftmaxCrossEntropy(cudaStream_t s, float* losses, float* dlogits, const float* logits,
                               const int32_t* labels, int rows, int cols, float gradScale, int* errorFlag);
void launchMseLoss(cudaStream_t s, float* losses, float* dpred, const float* pred, const float* target, int rows,
                   int cols, float gradScale);
// delta 0: mean absolute error; delta > 0: Huber.
void launchRobustLoss(cudaStream_t s, float* losses, float* dpred, const float* pred, const float* target, int rows,
                      int cols, float delta, float gradScale);
void launchBceWithLogits(cudaStream_t s, float* losses, float* dlogits, const float* logits, const float* target,
                         int rows, int cols, float gradScale);
// Writes the number of rows whose first maximal column equals the label into *count (device int64).
// A label outside [0, cols) is reported through errorFlag.
void launchCountCorrect(cudaStream_t s, long long* count, const float* logits, const int32_t* labels, int rows,
                        int cols, int* errorFlag);

}  // namespace strata::gpu
