// Upsampling kernels, nearest and bilinear by whole factors (host launchers only); UpsampleDesc (Backend.h)
// defines what they compute.
#pragma once

#include <cuda_runtime_api.h>

#include "core/backend/Backend.h"

namespace strata::gpu {

// y = upsample(x): one thread per output element.
void launchUpsample2dForward(cudaStream_t s, float* y, const float* x, const UpsampleDesc& d);
// dx += the output gradients each input element was read into, with their weights: one thread per INPUT element
// gathers them from the few output rows and columns that can read it, so no atomics and a fixed order.
void launchUpsample2dBackward(cudaStream_t s, float* dx, const float* dy, const UpsampleDesc& d);

}  // namespace strata::gpu
