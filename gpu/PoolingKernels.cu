// Mean pooling over an axis and max-pool backward with the first-maximum rule (optionally with the
// backward of the ReLU before the pooling).
#include <cstdint>

#include "gpu/CudaCheck.h"
#include "gpu/DeviceUtils.cuh"
#include "gpu/PoolingKernels.cuh"

namespace strata::gpu {
namespace {

__global__ void meanForwardKernel(float* y, const float* x, int outer, int len, int inner) {
    const int64_t total = int64_t(outer) * inner;
    for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
        const int64_t o = t / inner, i = t % inner;
        const float* p = x + o * len * inner + i;
        double acc = 0.0;
        for (int l = 0; l < len; ++l) acc += p[int64_t(l) * inner];
        y[t] = static_cast<float>(acc / len);
    }
}

__global__ void meanBackwardKernel(float* dx, const float* dy, int outer, int len, int inner) {
    const int64_t total = int64_t(outer) * len * inner;
    const float flen = static_cast<float>(len);
    for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
        const int64_t i = t % inner, o = t / (int64_t(len) * inner);
        dx[t] += dy[o * inner + i] / flen;  // as the CPU: divide, not multiply by 1/len
    }
}

struct MaxPoolGeom {
    int n, c, h, w, kh, kw, sh, sw, ph, pw, oh, ow;
};

// kReLUMask: the routed sum is multiplied by (x > 0) (maxPool2dReLUBackward).
template <bool kReLUMask>
__global__ void maxBackwardKernel(float* dx, const float* dy, const float* x, MaxPoolGeom g) {
    const int64_t total = int64_t(g.n) * g.c * g.h * g.w;
    for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
        const int iw = static_cast<int>(t % g.w);
        const int ih = static_cast<int>((t / g.w) % g.h);
        const int64_t plane = t / (int64_t(g.h) * g.w);
        const float* xp = x + plane * g.h * g.w;
        const float* dyp = dy + plane * g.oh * g.ow;
        // Windows containing (ih, iw): oh*sh - ph <= ih <= oh*sh - ph + kh - 1.
        int ohLo = (ih + g.ph - g.kh + g.sh) / g.sh;  // ceil((ih + ph - kh + 1) / sh) for a non-negative numerator
        if (ih + g.ph - g.kh + 1 <= 0) ohLo = 0;
        int ohHi = (ih + g.ph) / g.sh;
        if (ohHi > g.oh - 1) ohHi = g.oh - 1;
        int owLo = (iw + g.pw - g.kw + g.sw) / g.sw;
        if (iw + g.pw - g.kw + 1 <= 0) owLo = 0;
        int owHi = (iw + g.pw) / g.sw;
        if (owHi > g.ow - 1) owHi = g.ow - 1;
        float acc = 0.0f;
        for (int oh = ohLo; oh <= ohHi; ++oh) {
            for (int ow = owLo; ow <= owHi; ++ow) {
                const int hs = oh * g.sh - g.ph, ws = ow * g.sw - g.pw;
                int bestH = -1, bestW = -1;
                float best = 0.0f;
                for (int a = 0; a < g.kh; ++a) {
                    const int yy = hs + a;
                    if (yy < 0 || yy >= g.h) continue;
                    for (int b = 0; b < g.kw; ++b) {
                        const int xx = ws + b;
                        if (xx < 0 || xx >= g.w) continue;
                        const float v = xp[yy * g.w + xx];
                        if (bestH < 0 || v > best) {
                            best = v;
                            bestH = yy;
                            bestW = xx;
                        }
                    }
                }
                if (bestH == ih && bestW == iw) acc += dyp[oh * g.ow + ow];
            }
        }
        if constexpr (kReLUMask)
            dx[t] += acc * (x[t] > 0.0f ? 1.0f : 0.0f);
        else
            dx[t] += acc;
    }
}

}  // namespace

void launchMeanPoolForward(cudaStream_t s, float* y, const float* x, int outer, int len, int inner) {
    const int64_t total = int64_t(outer) * inner;
    if (total <= 0 || len <= 0) return;
    meanForwardKernel<<<detail::gridFor(total), detail::kBlock, 0, s>>>(y, x, outer, len, inner);
    CUDA_CHECK_LAUNCH();
}

void launchMeanPoolBackward(cudaStream_t s, float* dx, const float* dy, int outer, int len, int inner) {
    const int64_t total = int64_t(outer) * len * inner;
    if (total <= 0) return;
    meanBackwardKernel<<<detail::gridFor(total), detail::kBlock, 0, s>>>(dx, dy, outer, len, inner);
    CUDA_CHECK_LAUNCH();
}

void launchMaxPoolBackward(cudaStream_t s, float* dx, const float* dy, const float* x, int n, int c, int h, int w,
                           int kernelH, int kernelW, int strideH, int strideW, int padH, int padW, int outH, int outW) {
    const int64_t total = int64_t(n) * c * h * w;
    if (total <= 0 || outH <= 0 || outW <= 0) return;
    const MaxPoolGeom g{n, c, h, w, kernelH, kernelW, strideH, strideW, padH, padW, outH, outW};
    maxBackwardKernel<false><<<detail::gridFor(total), detail::kBlock, 0, s>>>(dx, dy, x, g);
    CUDA_CHECK_LAUNCH();
}

void launchMaxPoolReLUBackward(cudaStream_t s, float* dx, const float* dy, const float* x, int n, int c, int h, int w,
                               int kernelH, int kernelW, int strideH, int strideW, int padH, int padW, int outH,
                               int outW) {
    const int64_t total = int64_t(n) * c * h * w;
    if (total <= 0 || outH <= 0 || outW <= 0) return;
    const MaxPoolGeom g{n, c, h, w, kernelH, kernelW, strideH, strideW, padH, padW, outH, outW};
    maxBackwardKernel<true><<<detail::gridFor(total), detail::kBlock, 0, s>>>(dx, dy, x, g);
    CUDA_CHECK_LAUNCH();
}

}  // namespace strata::gpu
