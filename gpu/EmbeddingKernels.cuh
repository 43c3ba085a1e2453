// Embedding kernels (host launchers only). ids are float32 holding integer ids; an id outside
// [0, vocab) is reported through errorFlag (DeviceErrorFlag.h) and contributes nothing.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace strata::gpu {

void launchEmbeddingForward(cudaStream_t s, float* y, const float* table, const float* ids, int64_t count, int dim,
                            int vocab, int* errorFlag);
// dtable[id] += dy[t] with atomics (fast; summation order varies run to run).
void launchEmbeddingBackwardAtomic(cudaStream_t s, float* dtable, const float* dy, const float* ids, int64_t count,
                                   int dim, int vocab, int* errorFlag);
// Deterministic path: stable radix sort of positions by id, then one ordered sum per (id, column).
size_t embeddingBackwardSortedScratchBytes(int64_t count, int vocab);
void launchEmbeddingBackwardSorted(cudaStream_t s, float* dtable, const float* dy, const float* ids, int64_t count,
                                   int dim, int vocab, int* errorFlag, void* scratch, size_t scratchBytes);

}  // namespace strata::gpu
