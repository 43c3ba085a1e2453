// CpuMemoryBackend: what the two CPU backends share. Memory is ordinary host
// memory, 64-byte aligned, with the bytes in use and the peak tracked; the
// bf16 / fp16 compute precision rounds gemm and convolution inputs into
// scratch copies here (CpuPrecision.h); and gatherRows, whose default both
// replace the same way (rows copied straight from host memory). The other
// ops are CpuReferenceBackend's (the plain loops) and CpuBackend's (the fast
// paths), each declaring them with BackendOpOverrides.def.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/backend/Backend.h"

namespace strata {

class CpuMemoryBackend : public Backend {
public:
    Device device() const override { return Device::cpu(); }
    // Threads the ops use (CpuReferenceBackend: 1).
    int threads() const { return m_threads; }

    void* allocate(size_t bytes) override;
    void deallocate(void* ptr, size_t bytes) override;
    void copyFromHost(void* dst, const void* hostSrc, size_t bytes) override;
    void copyToHost(void* hostDst, const void* src, size_t bytes) override;
    void copy(void* dst, const void* src, size_t bytes) override;
    void synchronize() override {}
    size_t bytesInUse() const override { return m_bytesInUse.load(); }
    size_t peakBytes() const override { return m_peakBytes.load(); }

protected:
    // threads <= 0: one per hardware thread. Host memory, deterministic, and both precisions.
    CpuMemoryBackend(const std::string& name, const BackendOptions& options, int threads);
    // For a CPU backend with other traits than the two above (a test's float32-only one).
    CpuMemoryBackend(const Traits& traits, const BackendOptions& options, int threads);

    // The indices were checked by the seam (host memory): each row copied directly, no read-back.
    void doGatherRows(void* dst, const void* src, int64_t srcRows, const int32_t* indices, int64_t count,
                      int64_t rowWords) override;

    // The operand `count` floats at src, rounded to computePrecision() into scratch slot 0, 1 or 2 (up to
    // three operands per op); src itself in F32. Valid until the slot's next use.
    const float* rounded(int slot, const float* src, int64_t count);
    // gemm's A and B, rounded as above: a and b are replaced by the rounded copies.
    void roundGemmOperands(bool transA, bool transB, int m, int n, int k, const float*& a, int lda, const float*& b,
                           int ldb);

private:
    int m_threads = 1;
    std::atomic<size_t> m_bytesInUse{0};
    std::atomic<size_t> m_peakBytes{0};
    std::vector<float> m_rounded[3];
};

}  // namespace strata
