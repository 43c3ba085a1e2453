// Kernels of the sequence layers (attention's masked softmax, masked pooling over a sequence), host launchers
// only. Each computes what the CPU reference (core/backend/CpuReference.cpp) defines; a position or key
// counts where its keep value is not 0.
#pragma once

#include <cuda_runtime_api.h>

#include "core/backend/Backend.h"

namespace strata::gpu {

// Softmax of each row of [groups * rowsPerGroup, cols] over the columns j with keep[g * cols + j] != 0; the
// others get 0, and a row with none kept is all zeros. One warp per row.
void launchMaskedSoftmaxForward(cudaStream_t s, float* y, const float* x, const float* keep, int groups,
                                int rowsPerGroup, int cols);
// y[b, i] = mean or max of x[b, t, i] over the kept t (keep may be null: all); 0 where none is kept.
void launchSequencePoolForward(cudaStream_t s, float* y, const float* x, const float* keep, int batch, int len, int dim,
                               PoolMode mode);
// dx += dy spread over the kept positions (mean) or routed to the first kept position whose x equals y (max).
// One thread per (b, i) column: each writes only its own column, so no atomics.
void launchSequencePoolBackward(cudaStream_t s, float* dx, const float* dy, const float* x, const float* y,
                                const float* keep, int batch, int len, int dim, PoolMode mode);

}  // namespace strata::gpu
