// Fast paths of CpuBackend: OpenBLAS GEMM, im2col+GEMM convolution and
// OpenMP-parallel loops. Each function computes what its namesake in
// CpuReference.h computes (within float rounding) and is tested against it.
// Internal to core/backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/backend/Backend.h"

namespace strata::cpu {

// Scratch memory reused across calls: one buffer per thread (im2col columns),
// grown on demand and never shrunk, so steady-state training does not allocate.
class Workspace {
public:
    float* buffer(int thread, size_t floats);

private:
    struct Block {
        float* ptr = nullptr;
        size_t floats = 0;
    };
    std::vector<Block> m_blocks;

public:
    Workspace() = default;
    ~Workspace();
    Workspace(const Workspace&) = delete;
    Workspace& operator=(const Workspace&) = delete;
};

// Sets the thread count of OpenBLAS (global to the process) for the next calls.
void setBlasThreads(int threads);

void gemm(int threads, bool transA, bool transB, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc);

}  // namespace strata::cpu
