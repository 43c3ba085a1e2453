// Deterministic reductions (host launchers only): a fixed grid per n writes one double per block, then one
// block sums the partials in a fixed order. No atomics, so equal inputs give bit-identical results.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace strata::gpu {

enum class ReduceOp : int {
    Sum = 0,
    SumSquares = 1,
    NonFiniteCount = 2,  // how many elements are NaN or +-Inf
};

// Doubles of scratch the launcher needs (partials).
int64_t reduceScratchDoubles();
// Writes the result to *result (device memory).
void launchReduce(cudaStream_t s, double* result, double* scratch, const float* x, int64_t n, ReduceOp op);

}  // namespace strata::gpu
