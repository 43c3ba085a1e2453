// CpuBf16: the CPU's native bf16 compute (BackendOptions::precision bf16 on a CPU with AVX512-BF16 or AMX):
// GEMM inputs converted to bf16 (round to nearest even) and multiplied by oneDNN's bf16 matmul with float32
// accumulation and a float32 result. Convolutions run oneDNN's bf16 primitives (CpuDnnl.cpp, Workspace::bf16).
// Activations, weights and gradients stay float32 in memory: the conversion happens at each GEMM and convolution
// boundary, so every other op computes in float32, as on the GPU. Internal to core/backend.
#pragma once

#include <cstdint>
#include <string>

namespace strata::cpu {

struct Bf16Cache;
void destroyBf16Cache(Bf16Cache* cache);

// Empty when this CPU (as oneDNN sees it, so DNNL_MAX_CPU_ISA caps it) computes bf16 natively; else why not,
// naming the missing CPU flag.
std::string bf16Unavailable();

class Workspace;

// C = alpha op(A) op(B) + beta C for `count` products at the given strides (count 1: one GEMM), with A and B
// rounded to bf16 and float32 accumulation. False when oneDNN has no primitive for this shape (the caller then
// computes the same definition on rounded float32 copies).
bool bf16Gemm(int threads, Workspace& ws, bool transA, bool transB, int m, int n, int k, float alpha, const float* a,
              int lda, int64_t strideA, const float* b, int ldb, int64_t strideB, float beta, float* c, int ldc,
              int64_t strideC, int count);

// Operands bf16Gemm converted by its own transposing copy (op(A) = A^T or op(B) = B^T), for the tests.
int64_t bf16TransposedOperands(const Workspace& ws);

}  // namespace strata::cpu
