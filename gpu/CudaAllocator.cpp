// Caching device allocator (see CudaAllocator.h).
#include "gpu/CudaAllocator.h"

#include <cuda_runtime_api.h>

#include "core/backend/Backend.h"
#include "core/backend/CudaMemoryClasses.h"
#include "gpu/CudaCheck.h"

namespace strata::gpu {

CudaAllocator::CudaAllocator(std::string deviceName) : m_deviceName(std::move(deviceName)) {}

CudaAllocator::~CudaAllocator() {
    // Destructors must not throw; a failing cudaFree at teardown has nowhere to be reported.
    for (auto& [cls, blocks] : m_free)
        for (void* p : blocks) (void)cudaFree(p);
    for (auto& [p, cls] : m_live) (void)cudaFree(p);
}

size_t CudaAllocator::roundSize(size_t bytes) {
    // The rule lives in core (CudaMemoryClasses.h) so that MemoryEstimate predicts with the same classes.
    return static_cast<size_t>(cudaAllocationClass(bytes));
}

void* CudaAllocator::allocate(size_t bytes) {
    const size_t cls = roundSize(bytes);
    std::lock_guard lock(m_mutex);
    auto it = m_free.find(cls);
    void* p = nullptr;
    if (it != m_free.end() && !it->second.empty()) {
        p = it->second.back();
        it->second.pop_back();
        m_cached -= cls;
    } else {
        cudaError_t err = cudaMalloc(&p, cls);
        if (err == cudaErrorMemoryAllocation) {
            (void)cudaGetLastError();  // clear it so a later launch check does not report it
            releaseCachedLocked();
            err = cudaMalloc(&p, cls);
            if (err == cudaErrorMemoryAllocation) {
                (void)cudaGetLastError();
                size_t freeB = 0, totalB = 0;
                (void)cudaMemGetInfo(&freeB, &totalB);
                (void)cudaGetLastError();
                throw OutOfMemoryError(m_deviceName + ": out of memory allocating " + std::to_string(bytes) +
                                           " bytes (" + std::to_string(m_inUse) + " bytes in use by Strata, " +
                                           std::to_string(freeB) + " of " + std::to_string(totalB) +
                                           " bytes free on the device)",
                                       bytes);
            }
        }
        CUDA_CHECK(err);
        ++m_mallocs;
    }
    m_live.emplace(p, cls);
    m_inUse += cls;
    if (m_inUse > m_peak) m_peak = m_inUse;
    return p;
}

void CudaAllocator::deallocate(void* ptr) {
    if (!ptr) return;
    std::lock_guard lock(m_mutex);
    auto it = m_live.find(ptr);
    if (it == m_live.end())
        throw BackendError(m_deviceName + ": deallocate of a pointer this allocator did not hand out");
    const size_t cls = it->second;
    m_live.erase(it);
    m_inUse -= cls;
    m_free[cls].push_back(ptr);
    m_cached += cls;
}

void CudaAllocator::releaseCached() {
    std::lock_guard lock(m_mutex);
    releaseCachedLocked();
}

void CudaAllocator::releaseCachedLocked() {
    // The lists are emptied before anything can throw, so a failing cudaFree cannot leave freed
    // pointers behind to be handed out (or freed) again.
    std::map<size_t, std::vector<void*>> blocks;
    blocks.swap(m_free);
    m_cached = 0;
    cudaError_t first = cudaSuccess;
    for (auto& [cls, list] : blocks)
        for (void* p : list) {
            const cudaError_t err = cudaFree(p);
            if (first == cudaSuccess) first = err;
        }
    if (first != cudaSuccess)
        throwCudaFailure("CUDA", cudaGetErrorString(first), "cudaFree(cached block)", __FILE__, __LINE__);
}

size_t CudaAllocator::bytesInUse() const {
    std::lock_guard lock(m_mutex);
    return m_inUse;
}

size_t CudaAllocator::peakBytes() const {
    std::lock_guard lock(m_mutex);
    return m_peak;
}

size_t CudaAllocator::cachedBytes() const {
    std::lock_guard lock(m_mutex);
    return m_cached;
}

uint64_t CudaAllocator::deviceMallocCount() const {
    std::lock_guard lock(m_mutex);
    return m_mallocs;
}

}  // namespace strata::gpu
