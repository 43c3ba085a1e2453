// DropoutHash: a __host__ __device__ copy of strata::dropoutHash / dropoutKeep
// (core/backend/Backend.h), because nvcc cannot call the plain inline host
// functions from a kernel. The arithmetic is the same, line for line; the
// host build of this header is tested against the original in
// tests/test_gpu_device.cpp so the GPU drops exactly the CPU's elements.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define STRATA_HOST_DEVICE __host__ __device__
#else
#define STRATA_HOST_DEVICE
#endif

namespace strata::gpu {

STRATA_HOST_DEVICE inline uint64_t dropoutHashHD(uint64_t seed, uint64_t i) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

STRATA_HOST_DEVICE inline bool dropoutKeepHD(uint64_t seed, uint64_t i, float p) {
    // 24 random bits -> uniform in [0, 1); exact in float on host and device.
    const float u = static_cast<float>(dropoutHashHD(seed, i) >> 40) * (1.0f / 16777216.0f);
    return u >= p;
}

}  // namespace strata::gpu
