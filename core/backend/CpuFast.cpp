// Fast paths of CpuBackend: GEMM through OpenBLAS, and the scratch workspace.
#include "core/backend/CpuFast.h"

#include <cblas.h>

#include <cstdlib>

#include "core/backend/Backend.h"

namespace strata::cpu {

Workspace::~Workspace() {
    for (Block& b : m_blocks) std::free(b.ptr);
}

float* Workspace::buffer(int thread, size_t floats) {
    if (thread >= static_cast<int>(m_blocks.size())) m_blocks.resize(static_cast<size_t>(thread) + 1);
    Block& b = m_blocks[static_cast<size_t>(thread)];
    if (b.floats < floats) {
        std::free(b.ptr);
        b.ptr = nullptr;
        b.floats = 0;
        const size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
        b.ptr = static_cast<float*>(std::aligned_alloc(64, bytes));
        if (!b.ptr) throw OutOfMemoryError("cpu: out of memory for a " + std::to_string(bytes) + "-byte scratch buffer",
                                           bytes);
        b.floats = floats;
    }
    return b.ptr;
}

void setBlasThreads(int threads) {
    static int current = -1;
    if (threads != current) {
        openblas_set_num_threads(threads);
        current = threads;
    }
}

void gemm(int threads, bool transA, bool transB, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc) {
    setBlasThreads(threads);
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, m, n, k, alpha,
                a, lda, b, ldb, beta, c, ldc);
}

}  // namespace strata::cpu
