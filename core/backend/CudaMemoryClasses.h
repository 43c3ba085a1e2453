// CudaMemoryClasses: how the CUDA backend sizes device memory, as plain arithmetic (no CUDA header), so that
// core/train/MemoryEstimate can predict a GPU run's peak on a machine without CUDA and gpu/ uses the same rule.
#pragma once

#include <cstdint>

namespace strata {

// The bytes gpu/CudaAllocator hands out for a request of `bytes`: its size class, 512-byte steps up to 64 KiB,
// then four classes per power of two (2^k * {1, 1.25, 1.5, 1.75}, so at most 25% slack). Past 2^62 bytes (no
// device has that much) a request keeps its size, so that cudaMalloc refuses it instead of the search wrapping.
uint64_t cudaAllocationClass(uint64_t bytes);

// The most cuDNN's convolution workspace may take in gpu/CudaBackend (and the bound on the algorithms it
// considers); MemoryEstimate counts it for a graph with a convolution.
constexpr uint64_t kCudaConvWorkspaceLimit = uint64_t(256) << 20;

}  // namespace strata
