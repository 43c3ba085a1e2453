// CudaMemoryClasses: see CudaMemoryClasses.h.
#include "core/backend/CudaMemoryClasses.h"

namespace strata {

uint64_t cudaAllocationClass(uint64_t bytes) {
    if (bytes == 0) bytes = 1;
    if (bytes > (uint64_t(1) << 62)) return bytes;
    constexpr uint64_t kSmall = 512;
    if (bytes <= 64 * 1024) return (bytes + kSmall - 1) / kSmall * kSmall;
    uint64_t p = 64 * 1024;
    while (p * 2 < bytes) p *= 2;
    const uint64_t step = p / 4;
    return (bytes + step - 1) / step * step;
}

}  // namespace strata
