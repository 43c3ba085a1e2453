// Embedding gather and its backward (atomic or deterministic sorted segments).
#include <cub/device/device_radix_sort.cuh>

#include "gpu/CudaCheck.h"
#include "gpu/DeviceErrorFlag.h"
#include "gpu/DeviceUtils.cuh"
#include "gpu/EmbeddingKernels.cuh"

namespace strata::gpu {
namespace {

__device__ inline bool checkId(float f, int vocab, int64_t t, int code, int* flag) {
    const int id = static_cast<int>(f);
    const bool ok = f >= 0.0f && id < vocab && static_cast<float>(id) == f;
    if (!ok && atomicCAS(&flag[0], 0, code) == 0) {
        flag[1] = __float_as_int(f);  // the bits: the host prints the id as given (2.5, nan, -1)
        flag[2] = static_cast<int>(t);
        flag[3] = vocab;
    }
    return ok;
}

__global__ void forwardKernel(float* y, const float* table, const float* ids, int64_t count, int dim, int vocab,
                              int* flag) {
    const int64_t total = count * dim;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t t = i / dim, d = i % dim;
        const float f = ids[t];
        // Only the first column's thread reports, so one bad id is reported once.
        const bool ok = d == 0 ? checkId(f, vocab, t, kEmbeddingForwardId, flag)
                               : (f >= 0.0f && static_cast<int>(f) < vocab && static_cast<float>(int(f)) == f);
        y[i] = ok ? table[int64_t(static_cast<int>(f)) * dim + d] : 0.0f;
    }
}

__global__ void backwardAtomicKernel(float* dtable, const float* dy, const float* ids, int64_t count, int dim,
                                     int vocab, int* flag) {
    const int64_t total = count * dim;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t t = i / dim, d = i % dim;
        const float f = ids[t];
        const bool ok = d == 0 ? checkId(f, vocab, t, kEmbeddingBackwardId, flag)
                               : (f >= 0.0f && static_cast<int>(f) < vocab && static_cast<float>(int(f)) == f);
        if (ok) atomicAdd(&dtable[int64_t(static_cast<int>(f)) * dim + d], dy[i]);
    }
}

// Keys are ids (vocab for a bad id, which sorts last and is skipped), values positions.
__global__ void keysKernel(int* keys, int* positions, const float* ids, int64_t count, int vocab, int* flag) {
    for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < count; t += int64_t(gridDim.x) * blockDim.x) {
        const float f = ids[t];
        keys[t] = checkId(f, vocab, t, kEmbeddingBackwardId, flag) ? static_cast<int>(f) : vocab;
        positions[t] = static_cast<int>(t);
    }
}

// Thread (segment start j, column d): sums dy over the segment in sorted (= original) order.
__global__ void segmentSumKernel(float* dtable, const float* dy, const int* keys, const int* positions, int64_t count,
                                 int dim, int vocab) {
    const int64_t j = blockIdx.y + int64_t(gridDim.y) * blockIdx.z;
    const int d = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= count || d >= dim) return;
    const int key = keys[j];
    if (key >= vocab || (j > 0 && keys[j - 1] == key)) return;
    float acc = 0.0f;
    for (int64_t e = j; e < count && keys[e] == key; ++e) acc += dy[int64_t(positions[e]) * dim + d];
    dtable[int64_t(key) * dim + d] += acc;
}

int keyBits(int vocab) {
    int bits = 1;
    while (bits < 31 && (1ll << bits) <= vocab) ++bits;  // keys go up to vocab inclusive
    return bits;
}

size_t align256(size_t b) { return (b + 255) / 256 * 256; }

size_t cubBytes(int64_t count, int vocab) {
    size_t bytes = 0;
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const int*>(nullptr),
                                               static_cast<int*>(nullptr), static_cast<const int*>(nullptr),
                                               static_cast<int*>(nullptr), count, 0, keyBits(vocab)));
    return bytes;
}

}  // namespace

void launchEmbeddingForward(cudaStream_t s, float* y, const float* table, const float* ids, int64_t count, int dim,
                            int vocab, int* errorFlag) {
    if (count <= 0 || dim <= 0) return;
    forwardKernel<<<detail::gridFor(count * dim), detail::kBlock, 0, s>>>(y, table, ids, count, dim, vocab, errorFlag);
    CUDA_CHECK_LAUNCH();
}

void launchEmbeddingBackwardAtomic(cudaStream_t s, float* dtable, const float* dy, const float* ids, int64_t count,
                                   int dim, int vocab, int* errorFlag) {
    if (count <= 0 || dim <= 0) return;
    backwardAtomicKernel<<<detail::gridFor(count * dim), detail::kBlock, 0, s>>>(dtable, dy, ids, count, dim, vocab,
                                                                                 errorFlag);
    CUDA_CHECK_LAUNCH();
}

size_t embeddingBackwardSortedScratchBytes(int64_t count, int vocab) {
    if (count <= 0) return 0;
    return 4 * align256(size_t(count) * sizeof(int)) + align256(cubBytes(count, vocab));
}

void launchEmbeddingBackwardSorted(cudaStream_t s, float* dtable, const float* dy, const float* ids, int64_t count,
                                   int dim, int vocab, int* errorFlag, void* scratch, size_t scratchBytes) {
    if (count <= 0 || dim <= 0) return;
    if (scratchBytes < embeddingBackwardSortedScratchBytes(count, vocab)) CUDA_CHECK(cudaErrorInvalidValue);
    const size_t arr = align256(size_t(count) * sizeof(int));
    char* base = static_cast<char*>(scratch);
    int* keysIn = reinterpret_cast<int*>(base);
    int* posIn = reinterpret_cast<int*>(base + arr);
    int* keysOut = reinterpret_cast<int*>(base + 2 * arr);
    int* posOut = reinterpret_cast<int*>(base + 3 * arr);
    void* temp = base + 4 * arr;
    size_t tempBytes = scratchBytes - 4 * arr;

    keysKernel<<<detail::gridFor(count), detail::kBlock, 0, s>>>(keysIn, posIn, ids, count, vocab, errorFlag);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(
        cub::DeviceRadixSort::SortPairs(temp, tempBytes, keysIn, keysOut, posIn, posOut, count, 0, keyBits(vocab), s));
    const int threads = dim < 128 ? 32 * ((dim + 31) / 32) : 128;
    const int64_t ySplit = count < 65535 ? count : 65535;
    const dim3 grid((dim + threads - 1) / threads, static_cast<unsigned>(ySplit),
                    static_cast<unsigned>((count + ySplit - 1) / ySplit));
    segmentSumKernel<<<grid, threads, 0, s>>>(dtable, dy, keysOut, posOut, count, dim, vocab);
    CUDA_CHECK_LAUNCH();
}

}  // namespace strata::gpu
