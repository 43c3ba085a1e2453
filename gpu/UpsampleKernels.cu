// Upsampling kernels: nearest and bilinear (PyTorch's coordinates, UpsampleDesc), forward and backward.
#include "gpu/CudaCheck.h"
#include "gpu/DeviceUtils.cuh"
#include "gpu/UpsampleKernels.cuh"

namespace strata::gpu {
namespace {

struct Axis {
    int in, out, scale;
};

struct Tap {
    int i0, i1;
    float frac;
};

// Where output index dst reads on one axis, as cpuref::upsampleTap.
__device__ inline Tap tapOf(int dst, Axis a, bool bilinear, bool alignCorners) {
    if (!bilinear) return {dst / a.scale, dst / a.scale, 0.0f};
    float src;
    if (alignCorners)
        src = a.out > 1 ? static_cast<float>(dst) * static_cast<float>(a.in - 1) / static_cast<float>(a.out - 1) : 0.0f;
    else
        src = fmaxf((static_cast<float>(dst) + 0.5f) / static_cast<float>(a.scale) - 0.5f, 0.0f);
    const int i0 = min(static_cast<int>(src), a.in - 1);
    return {i0, min(i0 + 1, a.in - 1), src - static_cast<float>(i0)};
}

// The weight with which output index dst reads source index src (0 when it does not).
__device__ inline float weightOf(int dst, int src, Axis a, bool bilinear, bool alignCorners) {
    const Tap t = tapOf(dst, a, bilinear, alignCorners);
    return (t.i0 == src ? 1.0f - t.frac : 0.0f) + (t.i1 == src ? t.frac : 0.0f);
}

// The output indices that may read source index src: a window a little wider than the exact one.
__device__ inline void readersOf(int src, Axis a, bool bilinear, bool alignCorners, int& lo, int& hi) {
    if (!bilinear) {
        lo = src * a.scale;
        hi = lo + a.scale - 1;
        return;
    }
    const float r = alignCorners ? (a.in > 1 ? static_cast<float>(a.out - 1) / static_cast<float>(a.in - 1)
                                             : static_cast<float>(a.out))
                                 : static_cast<float>(a.scale);
    lo = max(static_cast<int>(floorf((src - 1) * r)) - 1, 0);
    hi = min(static_cast<int>(ceilf((src + 2) * r)) + 1, a.out - 1);
}

__global__ void forwardKernel(float* y, const float* x, int64_t total, Axis ah, Axis aw, bool bilinear,
                              bool alignCorners) {
    for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < total; o += int64_t(gridDim.x) * blockDim.x) {
        const int j = static_cast<int>(o % aw.out), i = static_cast<int>(o / aw.out % ah.out);
        const float* xp = x + o / (int64_t(ah.out) * aw.out) * ah.in * aw.in;
        const Tap ty = tapOf(i, ah, bilinear, alignCorners), tx = tapOf(j, aw, bilinear, alignCorners);
        const float top = (1.0f - tx.frac) * xp[ty.i0 * aw.in + tx.i0] + tx.frac * xp[ty.i0 * aw.in + tx.i1];
        const float bottom = (1.0f - tx.frac) * xp[ty.i1 * aw.in + tx.i0] + tx.frac * xp[ty.i1 * aw.in + tx.i1];
        y[o] = (1.0f - ty.frac) * top + ty.frac * bottom;
    }
}

__global__ void backwardKernel(float* dx, const float* dy, int64_t total, Axis ah, Axis aw, bool bilinear,
                               bool alignCorners) {
    for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
        const int ix = static_cast<int>(e % aw.in), iy = static_cast<int>(e / aw.in % ah.in);
        const float* g = dy + e / (int64_t(ah.in) * aw.in) * ah.out * aw.out;
        int i0, i1, j0, j1;
        readersOf(iy, ah, bilinear, alignCorners, i0, i1);
        readersOf(ix, aw, bilinear, alignCorners, j0, j1);
        float sum = 0.0f;
        for (int i = i0; i <= i1; ++i) {
            const float wy = weightOf(i, iy, ah, bilinear, alignCorners);
            if (wy == 0.0f) continue;
            float row = 0.0f;
            for (int j = j0; j <= j1; ++j)
                row += weightOf(j, ix, aw, bilinear, alignCorners) * g[int64_t(i) * aw.out + j];
            sum += wy * row;
        }
        dx[e] += sum;
    }
}

}  // namespace

void launchUpsample2dForward(cudaStream_t s, float* y, const float* x, const UpsampleDesc& d) {
    const int64_t total = d.outputSize();
    if (total <= 0) return;
    forwardKernel<<<detail::gridFor(total), detail::kBlock, 0, s>>>(
        y, x, total, Axis{d.h, d.outH(), d.scaleH}, Axis{d.w, d.outW(), d.scaleW}, d.bilinear, d.alignCorners);
    CUDA_CHECK_LAUNCH();
}

void launchUpsample2dBackward(cudaStream_t s, float* dx, const float* dy, const UpsampleDesc& d) {
    const int64_t total = d.inputSize();
    if (total <= 0) return;
    backwardKernel<<<detail::gridFor(total), detail::kBlock, 0, s>>>(
        dx, dy, total, Axis{d.h, d.outH(), d.scaleH}, Axis{d.w, d.outW(), d.scaleW}, d.bilinear, d.alignCorners);
    CUDA_CHECK_LAUNCH();
}

}  // namespace strata::gpu
