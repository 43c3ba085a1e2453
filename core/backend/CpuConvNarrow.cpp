// Convolutions with one output channel (CpuBackend's fast path): the last layer of an image-to-image model
// (a decoder's 3x3 convolution back to one grey channel), or a saliency/score head.
//
// With one output channel, im2col + GEMM is a matrix-vector product over a column matrix C*R*S times the
// image's size, and oneDNN's blocked kernels have one channel where they expect sixteen: both reached about 15
// GFLOP/s on this project's AVX-512 VMs (examples/fashion_denoising.strata's last layer was 40% of its step).
// Here each image is first copied into a zero-padded buffer, and a vector of output columns is then the sum,
// over input channels and kernel taps, of unaligned loads of padded input rows times a broadcast weight: the
// accumulator stays in a register and each multiply-add reads one vector. The input gradient is the same loop
// over the padded output gradient with the kernel turned 180 degrees, and the filter gradient keeps one vector
// of partial sums per tap. Kernels for AVX-512 (16 lanes), AVX2 with FMA (8) and the baseline (4) are compiled
// from CpuConvNarrowKernels.h and chosen by the CPU at run time.
//
// Threads: images are split across threads; each thread pads into its own workspace slot. The filter gradient
// is summed per thread in double and the partial sums added in thread order, so every result is bit-identical
// from run to run for a fixed thread count.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/backend/CpuFast.h"
#include "core/backend/CpuParallel.h"

namespace strata::cpu {

namespace {

// Below this many multiply-adds per call the padding copies and loop overheads dominate; oneDNN or im2col take
// those.
constexpr double kMinMacs = 2e5;
constexpr int kNarrowMaxTaps = 49;  // kernels up to 7x7 (the filter gradient keeps a vector per tap)

// The geometry of one call, with the padded buffers' sizes for vectors of `lanes` floats.
struct NarrowPlan {
    int C, H, W, R, S, OH, OW, padH, padW;
    int OWr, PH, PW;  // output width in whole vectors; the padded input's rows and row length
    int Wr, QH, QW;   // input width in whole vectors; the padded output gradient's rows and row length
    NarrowPlan(const ConvDesc& d, int lanes)
        : C(d.c),
          H(d.h),
          W(d.w),
          R(d.r),
          S(d.s),
          OH(d.outH()),
          OW(d.outW()),
          padH(d.padH),
          padW(d.padW),
          OWr((d.outW() + lanes - 1) / lanes * lanes),
          PH(d.outH() + d.r - 1),
          PW(OWr + d.s - 1),
          Wr((d.w + lanes - 1) / lanes * lanes),
          QH(d.h + d.r - 1),
          QW(Wr + d.s - 1) {}
    size_t inPlane() const { return static_cast<size_t>(H) * W; }
    size_t outPlane() const { return static_cast<size_t>(OH) * OW; }
    size_t xpadFloats() const { return static_cast<size_t>(C) * PH * PW; }
    size_t gradFloats() const { return std::max(static_cast<size_t>(QH) * QW, static_cast<size_t>(OH) * OWr); }
};

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define STRATA_NARROW_X86
namespace avx512 {
#define STRATA_NARROW_LANES 16
#define STRATA_NARROW_TARGET __attribute__((target("avx512f")))
#include "core/backend/CpuConvNarrowKernels.h"
#undef STRATA_NARROW_TARGET
#undef STRATA_NARROW_LANES
}  // namespace avx512
namespace avx2 {
#define STRATA_NARROW_LANES 8
#define STRATA_NARROW_TARGET __attribute__((target("avx2,fma")))
#include "core/backend/CpuConvNarrowKernels.h"
#undef STRATA_NARROW_TARGET
#undef STRATA_NARROW_LANES
}  // namespace avx2
#endif
namespace baseline {
#define STRATA_NARROW_LANES 4
#define STRATA_NARROW_TARGET
#include "core/backend/CpuConvNarrowKernels.h"
#undef STRATA_NARROW_TARGET
#undef STRATA_NARROW_LANES
}  // namespace baseline

struct Kernels {
    int lanes;
    void (*forward)(float*, const float*, const float*, float, bool, const NarrowPlan&);
    void (*backwardData)(float*, const float*, const float*, bool, const NarrowPlan&);
    void (*backwardFilter)(double*, const float*, const float*, bool, const NarrowPlan&);
};

// The widest kernels this CPU runs (STRATA_NO_AVX2, as elsewhere in the fast path, keeps the baseline;
// STRATA_NO_AVX512 keeps AVX2, so that the tests check all three on an AVX-512 machine).
const Kernels& kernels() {
    static const Kernels chosen = [] {
#ifdef STRATA_NARROW_X86
        if (!std::getenv("STRATA_NO_AVX2")) {
            if (__builtin_cpu_supports("avx512f") && !std::getenv("STRATA_NO_AVX512"))
                return Kernels{16, avx512::forwardImage, avx512::backwardDataImage, avx512::backwardFilterImage};
            if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
                return Kernels{8, avx2::forwardImage, avx2::backwardDataImage, avx2::backwardFilterImage};
        }
#endif
        return Kernels{4, baseline::forwardImage, baseline::backwardDataImage, baseline::backwardFilterImage};
    }();
    return chosen;
}

// xpad[c][i][j] = x[c][i - padH][j - padW], zero outside the image.
void padInput(float* xpad, const float* x, const NarrowPlan& p) {
    std::memset(xpad, 0, p.xpadFloats() * sizeof(float));
    const int j0 = std::max(0, p.padW), colsFrom = std::max(0, -p.padW);
    const int cols = std::clamp(std::min(p.W - colsFrom, p.PW - j0), 0, p.W);
    for (int c = 0; c < p.C; ++c)
        for (int i = 0; i < p.PH; ++i) {
            const int ih = i - p.padH;
            if (ih < 0 || ih >= p.H || cols == 0) continue;
            std::memcpy(xpad + (static_cast<size_t>(c) * p.PH + i) * p.PW + j0,
                        x + static_cast<size_t>(c) * p.inPlane() + static_cast<size_t>(ih) * p.W + colsFrom,
                        static_cast<size_t>(cols) * sizeof(float));
        }
}

// dypad[i][j] = dy[i - (R-1-padH)][j - (S-1-padW)], zero outside.
void padGradient(float* dypad, const float* dy, const NarrowPlan& p) {
    std::memset(dypad, 0, static_cast<size_t>(p.QH) * p.QW * sizeof(float));
    const int offH = p.R - 1 - p.padH, offW = p.S - 1 - p.padW;
    for (int i = 0; i < p.QH; ++i) {
        const int oh = i - offH;
        if (oh < 0 || oh >= p.OH) continue;
        for (int j = std::max(0, offW); j < p.QW && j - offW < p.OW; ++j)
            dypad[static_cast<size_t>(i) * p.QW + j] = dy[static_cast<size_t>(oh) * p.OW + (j - offW)];
    }
}

// dyp[oh][ow] = dy[oh][ow] for ow < OW, zero up to OWr.
void padGradientColumns(float* dyp, const float* dy, const NarrowPlan& p) {
    for (int oh = 0; oh < p.OH; ++oh) {
        float* row = dyp + static_cast<size_t>(oh) * p.OWr;
        std::memcpy(row, dy + static_cast<size_t>(oh) * p.OW, static_cast<size_t>(p.OW) * sizeof(float));
        std::fill(row + p.OW, row + p.OWr, 0.0f);
    }
}

}  // namespace

bool narrowConvApplies(const Workspace& ws, const ConvDesc& d) {
    return ws.useNarrowConv && d.k == 1 && d.groups == 1 && d.srcBlock == 0 && d.dstBlock == 0 && d.strideH == 1 &&
           d.strideW == 1 && d.dilationH == 1 && d.dilationW == 1 && d.r * d.s <= kNarrowMaxTaps && d.padH >= 0 &&
           d.padW >= 0 && d.outH() >= 1 && d.outW() >= 1 &&
           static_cast<double>(d.n) * d.c * d.r * d.s * d.outH() * d.outW() >= kMinMacs;
}

void narrowConvForward(int threads, Workspace& ws, float* y, const float* x, const float* w, const float* bias,
                       bool relu, const ConvDesc& d) {
    const Kernels& k = kernels();
    const NarrowPlan p(d, k.lanes);
    ++ws.narrowConvs;
    const int parts = parallelParts(threads, d.n, 1);
    ws.prepare(0, parts, p.xpadFloats());
    const float b = bias ? bias[0] : 0.0f;
    parallelFor(threads, d.n, 1, [&](int64_t i0, int64_t i1, int part) {
        float* xpad = ws.slot(part);
        for (int64_t i = i0; i < i1; ++i) {
            padInput(xpad, x + static_cast<size_t>(i) * p.C * p.inPlane(), p);
            k.forward(y + static_cast<size_t>(i) * p.outPlane(), xpad, w, b, relu, p);
        }
    });
}

void narrowConvBackwardData(int threads, Workspace& ws, float* dx, const float* dy, const float* w, const ConvDesc& d,
                            bool overwrite) {
    const Kernels& k = kernels();
    const NarrowPlan p(d, k.lanes);
    ++ws.narrowConvs;
    const int parts = parallelParts(threads, d.n, 1);
    ws.prepare(0, parts, p.gradFloats());
    parallelFor(threads, d.n, 1, [&](int64_t i0, int64_t i1, int part) {
        float* dypad = ws.slot(part);
        for (int64_t i = i0; i < i1; ++i) {
            padGradient(dypad, dy + static_cast<size_t>(i) * p.outPlane(), p);
            k.backwardData(dx + static_cast<size_t>(i) * p.C * p.inPlane(), dypad, w, overwrite, p);
        }
    });
}

void narrowConvBackwardFilter(int threads, Workspace& ws, float* dw, float* dbias, const float* dy, const float* x,
                              const ConvDesc& d) {
    if (!dw && !dbias) return;
    const Kernels& k = kernels();
    const NarrowPlan p(d, k.lanes);
    ++ws.narrowConvs;
    const int parts = parallelParts(threads, d.n, 1);
    const size_t taps = static_cast<size_t>(p.R) * p.S, sumsPerPart = static_cast<size_t>(p.C) * taps + 1;
    // Slots [0, parts): padded inputs; [parts, 2*parts): the output gradient's rows padded to whole vectors.
    ws.prepare(0, parts, p.xpadFloats());
    ws.prepare(parts, parts, p.gradFloats());
    ws.narrowSums.assign(static_cast<size_t>(parts) * sumsPerPart, 0.0);
    parallelFor(threads, d.n, 1, [&](int64_t i0, int64_t i1, int part) {
        float* xpad = ws.slot(part);
        float* dyp = ws.slot(parts + part);
        double* sums = ws.narrowSums.data() + static_cast<size_t>(part) * sumsPerPart;
        for (int64_t i = i0; i < i1; ++i) {
            padGradientColumns(dyp, dy + static_cast<size_t>(i) * p.outPlane(), p);
            if (dw) {
                padInput(xpad, x + static_cast<size_t>(i) * p.C * p.inPlane(), p);
                k.backwardFilter(sums, dyp, xpad, dbias != nullptr, p);
            } else {
                NarrowPlan biasOnly = p;
                biasOnly.C = 0;
                k.backwardFilter(sums + static_cast<size_t>(p.C) * taps, dyp, xpad, true, biasOnly);
            }
        }
    });
    // Thread parts' sums added in part order, then once into the gradients.
    for (size_t j = 0; j < sumsPerPart; ++j) {
        double total = 0.0;
        for (int part = 0; part < parts; ++part) total += ws.narrowSums[static_cast<size_t>(part) * sumsPerPart + j];
        if (j + 1 < sumsPerPart) {
            if (dw) dw[j] += static_cast<float>(total);
        } else if (dbias) {
            dbias[0] += static_cast<float>(total);
        }
    }
}

}  // namespace strata::cpu
