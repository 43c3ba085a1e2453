// CudaAllocator: the caching device allocator behind CudaBackend.
//
// Requests are rounded up to a size class (512-byte granularity for small
// blocks, then four classes per power of two, so at most 25% slack). A
// freed block goes to its class's free list and is handed out again for the
// next request of that class; cudaMalloc runs only when the list is empty,
// so after the first training step the loop allocates nothing from the
// driver (deviceMallocCount() stops growing). Blocks are used in stream
// order on the backend's single compute stream, so reuse needs no event.
// When cudaMalloc fails, every cached block is released and the request
// retried once; a second failure throws OutOfMemoryError with the bytes asked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace strata::gpu {

class CudaAllocator {
public:
    explicit CudaAllocator(std::string deviceName);
    ~CudaAllocator();  // returns every block to the driver (the device must be current)
    CudaAllocator(const CudaAllocator&) = delete;
    CudaAllocator& operator=(const CudaAllocator&) = delete;

    void* allocate(size_t bytes);
    void deallocate(void* ptr);
    // Gives cached (free) blocks back to the driver.
    void releaseCached();

    size_t bytesInUse() const;  // sum of size classes handed out
    size_t peakBytes() const;
    size_t cachedBytes() const;          // free blocks kept for reuse
    uint64_t deviceMallocCount() const;  // cudaMalloc calls so far

    // The size class of a request (exposed for tests).
    static size_t roundSize(size_t bytes);

private:
    void releaseCachedLocked();  // releaseCached with m_mutex held

    std::string m_deviceName;
    mutable std::mutex m_mutex;
    std::map<size_t, std::vector<void*>> m_free;  // size class -> free blocks
    std::unordered_map<void*, size_t> m_live;     // block -> size class
    size_t m_inUse = 0, m_peak = 0, m_cached = 0;
    uint64_t m_mallocs = 0;
};

}  // namespace strata::gpu
