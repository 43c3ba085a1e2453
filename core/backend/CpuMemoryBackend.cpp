// CpuMemoryBackend: aligned host memory with usage tracking, the rounded operands of bf16 / fp16, and
// gatherRows.
#include "core/backend/CpuMemoryBackend.h"

#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/backend/CpuPrecision.h"
#include "core/backend/CpuReference.h"

namespace strata {

namespace {

int threadCount(int threads) {
    if (threads > 0) return threads;
    const unsigned hw = std::thread::hardware_concurrency();
    return hw > 0 ? static_cast<int>(hw) : 1;
}

}  // namespace

CpuMemoryBackend::CpuMemoryBackend(const std::string& name, const BackendOptions& options, int threads)
    : CpuMemoryBackend(Traits{name, /*reducedPrecision=*/true, /*alwaysDeterministic=*/true, /*hostMemory=*/true},
                       options, threads) {}

CpuMemoryBackend::CpuMemoryBackend(const Traits& traits, const BackendOptions& options, int threads)
    : Backend(traits, options), m_threads(threadCount(threads)) {}

void* CpuMemoryBackend::allocate(size_t bytes) {
    // aligned_alloc needs a multiple of the alignment; 64 bytes is one cache line and one AVX-512 vector.
    const size_t rounded = ((bytes == 0 ? 1 : bytes) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p)
        throw OutOfMemoryError("cpu: out of memory allocating " + std::to_string(bytes) + " bytes (" +
                                   std::to_string(m_bytesInUse.load()) + " bytes in use)",
                               bytes);
    const size_t now = m_bytesInUse.fetch_add(bytes) + bytes;
    size_t peak = m_peakBytes.load();
    while (now > peak && !m_peakBytes.compare_exchange_weak(peak, now)) {
    }
    return p;
}

void CpuMemoryBackend::deallocate(void* ptr, size_t bytes) {
    if (!ptr) return;
    std::free(ptr);
    m_bytesInUse.fetch_sub(bytes);
}

void CpuMemoryBackend::copyFromHost(void* dst, const void* hostSrc, size_t bytes) {
    if (bytes) std::memcpy(dst, hostSrc, bytes);
}
void CpuMemoryBackend::copyToHost(void* hostDst, const void* src, size_t bytes) {
    if (bytes) std::memcpy(hostDst, src, bytes);
}
void CpuMemoryBackend::copy(void* dst, const void* src, size_t bytes) {
    if (bytes && dst != src) std::memmove(dst, src, bytes);
}

void CpuMemoryBackend::doGatherRows(void* dst, const void* src, int64_t, const int32_t* indices, int64_t count,
                                    int64_t rowWords) {
    cpuref::gatherRows(dst, src, indices, count, rowWords);
}

const float* CpuMemoryBackend::rounded(int slot, const float* src, int64_t count) {
    if (computePrecision() == ComputePrecision::F32) return src;
    return cpu::roundedCopy(m_rounded[slot], src, count, computePrecision(), m_threads);
}

void CpuMemoryBackend::roundGemmOperands(bool transA, bool transB, int m, int n, int k, const float*& a, int lda,
                                         const float*& b, int ldb) {
    if (computePrecision() == ComputePrecision::F32) return;
    a = rounded(0, a, cpu::operandSpan(transA ? k : m, transA ? m : k, lda));
    b = rounded(1, b, cpu::operandSpan(transB ? n : k, transB ? k : n, ldb));
}

}  // namespace strata
