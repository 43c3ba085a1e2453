// Device-side helpers shared by the kernel files (.cu only): grid sizing and
// fixed-order warp/block reductions. Reductions here are deterministic: the
// same inputs and launch shape always combine in the same order.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace strata::gpu::detail {

constexpr int kBlock = 256;

// Blocks for a grid-stride loop over n items: enough to fill the GPU, capped so the
// launch shape (and so any reduction order) depends on n only.
inline int gridFor(int64_t n, int block = kBlock) {
    const int64_t blocks = (n + block - 1) / block;
    constexpr int64_t cap = 132 * 32;  // a few waves on an H200 (132 SMs)
    return static_cast<int>(blocks < 1 ? 1 : (blocks > cap ? cap : blocks));
}

template <typename T>
__device__ inline T warpSum(T v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

__device__ inline float warpMax(float v) {
    for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

// Sum over a block of blockDim.x threads (a multiple of 32, at most 1024); every thread gets the result.
template <typename T>
__device__ inline T blockSum(T v) {
    __shared__ T partial[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warpSum(v);
    __syncthreads();  // partial may still be read by a previous call
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    const int warps = blockDim.x >> 5;
    T t = lane < warps ? partial[lane] : T(0);
    return warpSum(t);
}

}  // namespace strata::gpu::detail
