// Convolution fast paths of CpuBackend: im2col + GEMM, one image per work item.
//
// For image i and group g (Cg = C/groups input and Kg = K/groups output channels):
//   forward:         Y_i,g [Kg, OH*OW]   = W_g [Kg, Cg*R*S] x col(X_i,g) [Cg*R*S, OH*OW]
//   backward data:   col(dX_i,g)        += W_g^T x dY_i,g      (col2im scatters the columns back)
//   backward filter: dW_g               += dY_i,g x col(X_i,g)^T
// Images are split statically across threads; each thread owns an im2col buffer
// (and, for the filter gradient, a partial dW), kept in the backend's Workspace
// so steady-state training does not allocate. Partial dW are added in thread
// order, so results are deterministic for a fixed thread count. When built with
// oneDNN and enabled (the default), oneDNN's convolutions run first (CpuDnnl.cpp).
// A 1x1 kernel
// with stride 1 and no padding needs no im2col: the image is its own column matrix.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/backend/CpuFast.h"
#include "core/backend/CpuParallel.h"

namespace strata::cpu {

namespace {

constexpr const char* kGemmFailed = "conv2d: oneDNN's sgemm rejected an im2col product";
constexpr double kSmallConvFlops = 1e6;

struct ConvGeometry {
    int OH, OW, Cg, Kg;
    size_t ohw, crs, inPlane;
    bool direct;  // 1x1, stride 1, no padding: col(X) is X itself

    explicit ConvGeometry(const ConvDesc& d)
        : OH(d.outH()),
          OW(d.outW()),
          Cg(d.c / d.groups),
          Kg(d.k / d.groups),
          ohw(static_cast<size_t>(OH) * OW),
          crs(static_cast<size_t>(Cg) * d.r * d.s),
          inPlane(static_cast<size_t>(d.h) * d.w),
          direct(d.r == 1 && d.s == 1 && d.strideH == 1 && d.strideW == 1 && d.padH == 0 && d.padW == 0) {}
};

// Output columns [lo, hi) whose input column ow*stride + off lies inside [0, width).
void validRange(int off, int stride, int width, int outW, int& lo, int& hi) {
    lo = off >= 0 ? 0 : (-off + stride - 1) / stride;
    hi = width - 1 - off >= 0 ? (width - 1 - off) / stride + 1 : 0;
    lo = std::min(lo, outW);
    hi = std::clamp(hi, lo, outW);
}

// col[(c*R + r)*S + s][oh*OW + ow] = x[c][oh*sh - ph + r*dh][ow*sw - pw + s*dw], 0 outside the image.
void im2col(float* col, const float* x, int channels, const ConvDesc& d, const ConvGeometry& g) {
    for (int c = 0; c < channels; ++c) {
        const float* plane = x + static_cast<size_t>(c) * g.inPlane;
        for (int r = 0; r < d.r; ++r)
            for (int s = 0; s < d.s; ++s) {
                float* row = col + ((static_cast<size_t>(c) * d.r + r) * d.s + s) * g.ohw;
                const int offW = s * d.dilationW - d.padW;
                int lo, hi;
                validRange(offW, d.strideW, d.w, g.OW, lo, hi);
                for (int oh = 0; oh < g.OH; ++oh) {
                    float* out = row + static_cast<size_t>(oh) * g.OW;
                    const int ih = oh * d.strideH - d.padH + r * d.dilationH;
                    if (ih < 0 || ih >= d.h) {
                        std::memset(out, 0, sizeof(float) * static_cast<size_t>(g.OW));
                        continue;
                    }
                    const float* src = plane + static_cast<size_t>(ih) * d.w + offW;
                    for (int ow = 0; ow < lo; ++ow) out[ow] = 0.0f;
                    if (d.strideW == 1)
                        std::memcpy(out + lo, src + lo, sizeof(float) * static_cast<size_t>(hi - lo));
                    else
                        for (int ow = lo; ow < hi; ++ow) out[ow] = src[static_cast<ptrdiff_t>(ow) * d.strideW];
                    for (int ow = hi; ow < g.OW; ++ow) out[ow] = 0.0f;
                }
            }
    }
}

// The adjoint of im2col: dx[c][ih][iw] += every column entry that was read from it.
void col2imAdd(float* dx, const float* col, int channels, const ConvDesc& d, const ConvGeometry& g) {
    for (int c = 0; c < channels; ++c) {
        float* plane = dx + static_cast<size_t>(c) * g.inPlane;
        for (int r = 0; r < d.r; ++r)
            for (int s = 0; s < d.s; ++s) {
                const float* row = col + ((static_cast<size_t>(c) * d.r + r) * d.s + s) * g.ohw;
                const int offW = s * d.dilationW - d.padW;
                int lo, hi;
                validRange(offW, d.strideW, d.w, g.OW, lo, hi);
                for (int oh = 0; oh < g.OH; ++oh) {
                    const int ih = oh * d.strideH - d.padH + r * d.dilationH;
                    if (ih < 0 || ih >= d.h) continue;
                    const float* in = row + static_cast<size_t>(oh) * g.OW;
                    float* dst = plane + static_cast<size_t>(ih) * d.w + offW;
                    if (d.strideW == 1)
                        for (int ow = lo; ow < hi; ++ow) dst[ow] += in[ow];
                    else
                        for (int ow = lo; ow < hi; ++ow) dst[static_cast<ptrdiff_t>(ow) * d.strideW] += in[ow];
                }
            }
    }
}

}  // namespace

namespace {

// Bias and ReLU on one image's [k, inner] output block, applied right after its GEMM wrote it
// (so the block is still in cache). bias may be null.
void epilogue(float* y, const float* bias, int k, size_t inner, bool relu) {
    for (int ch = 0; ch < k; ++ch) {
        float* row = y + static_cast<size_t>(ch) * inner;
        const float b = bias ? bias[ch] : 0.0f;
        if (relu) {
            for (size_t i = 0; i < inner; ++i) {
                const float v = row[i] + b;
                row[i] = v > 0.0f ? v : 0.0f;
            }
        } else if (bias) {
            for (size_t i = 0; i < inner; ++i) row[i] += b;
        }
    }
}

void im2colForward(int threads, Workspace& ws, float* y, const float* x, const float* w, const float* bias, bool relu,
                   const ConvDesc& d) {
    const ConvGeometry g(d);
    const int parts = parallelParts(threads, d.n, 1);
    if (!g.direct) ws.prepare(0, parts, g.crs * g.ohw);
    std::atomic<bool> ok{true};
    parallelFor(threads, d.n, 1, [&](int64_t i0, int64_t i1, int part) {
        float* col = g.direct ? nullptr : ws.slot(part);
        for (int64_t i = i0; i < i1; ++i)
            for (int grp = 0; grp < d.groups; ++grp) {
                const float* xg = x + (static_cast<size_t>(i) * d.c + static_cast<size_t>(grp) * g.Cg) * g.inPlane;
                const float* b = xg;
                if (!g.direct) {
                    im2col(col, xg, g.Cg, d, g);
                    b = col;
                }
                float* yg = y + (static_cast<size_t>(i) * d.k + static_cast<size_t>(grp) * g.Kg) * g.ohw;
                if (!sgemmOnThisThread(ws.useOneDnn, false, false, g.Kg, static_cast<int>(g.ohw),
                                       static_cast<int>(g.crs), 1.0f, w + static_cast<size_t>(grp) * g.Kg * g.crs,
                                       static_cast<int>(g.crs), b, static_cast<int>(g.ohw), 0.0f, yg,
                                       static_cast<int>(g.ohw)))
                    ok = false;
                else if (bias || relu)
                    epilogue(yg, bias ? bias + static_cast<size_t>(grp) * g.Kg : nullptr, g.Kg, g.ohw, relu);
            }
    });
    if (!ok) throw BackendError(kGemmFailed);
}

}  // namespace

namespace {

// Threads for a forward convolution: one for a tiny one, where waking a second thread costs more than it
// brings. Measured (bench_inference, batch 1, 2 threads, oneDNN's blocked layout): fashion_cnn_bn 0.23 ->
// 0.14-0.16 ms and fashion_cnn 0.072 -> 0.047-0.06 ms with 1 MFLOP instead of the 16 MFLOP this was (set when
// batch 1 ran im2col in NCHW); a 1.8 MFLOP convolution alone 8.3 -> 5.2 us, a 0.2 MFLOP one 1.4 us either way.
// A single-threaded layer longer than the OpenMP workers' spin also lets them fall asleep, and the next parallel
// one pays for waking them (~30 us on this project's VMs).
int forwardThreads(int threads, const ConvDesc& d) {
    const double flops = 2.0 * static_cast<double>(d.outputSize()) * (d.c / d.groups) * d.r * d.s;
    return flops < kSmallConvFlops ? 1 : threads;
}

}  // namespace

void conv2dForward(int threads, Workspace& ws, float* y, const float* x, const float* w, const ConvDesc& d) {
    threads = forwardThreads(threads, d);
    if (narrowConvApplies(ws, d)) return narrowConvForward(threads, ws, y, x, w, nullptr, false, d);
    if (ws.useOneDnn && dnnlConv2dForward(threads, ws, y, x, w, d)) return;
    im2colForward(threads, ws, y, x, w, nullptr, false, d);
}

namespace {

// The NCHW copy of a blocked tensor for the im2col path, in the workspace's buffer `role`.
float* plainBuffer(Workspace& ws, int role, int64_t elements) {
    std::vector<float>& buf = ws.plain[role];
    if (buf.size() < static_cast<size_t>(elements)) buf.resize(static_cast<size_t>(elements));
    return buf.data();
}

ConvDesc plainDesc(ConvDesc d) {
    d.srcBlock = d.dstBlock = 0;
    return d;
}

}  // namespace

void conv2dForwardFused(int threads, Workspace& ws, float* y, const float* x, const float* w, const float* bias,
                        bool relu, const ConvDesc& d) {
    threads = forwardThreads(threads, d);
    if (winogradApplies(ws, d)) return winogradForward(threads, ws, y, x, w, bias, relu, d);
    if (narrowConvApplies(ws, d)) return narrowConvForward(threads, ws, y, x, w, bias, relu, d);
    if (ws.useOneDnn && dnnlConv2dForwardFused(threads, ws, y, x, w, bias, relu, d)) return;
    if (d.srcBlock == 0 && d.dstBlock == 0) return im2colForward(threads, ws, y, x, w, bias, relu, d);
    // Blocked tensors on the im2col path (e.g. a first layer with too few channels for oneDNN): through NCHW.
    const int64_t hw = int64_t(d.h) * d.w, ohw = int64_t(d.outH()) * d.outW();
    const float* xs = x;
    if (d.srcBlock) {
        float* p = plainBuffer(ws, 0, d.inputSize());
        reblock(threads, p, 0, x, d.srcBlock, d.n, d.c, hw, false);
        xs = p;
    }
    float* ys = d.dstBlock ? plainBuffer(ws, 1, d.outputSize()) : y;
    im2colForward(threads, ws, ys, xs, w, bias, relu, plainDesc(d));
    if (d.dstBlock) reblock(threads, y, d.dstBlock, ys, 0, d.n, d.k, ohw, false);
}

void conv2dBackwardData(int threads, Workspace& ws, float* dx, const float* dy, const float* w, const ConvDesc& d) {
    if (narrowConvApplies(ws, d)) return narrowConvBackwardData(threads, ws, dx, dy, w, d, false);
    if (ws.useOneDnn && dnnlConv2dBackwardData(threads, ws, dx, dy, w, d)) return;
    const ConvGeometry g(d);
    const int parts = parallelParts(threads, d.n, 1);
    if (!g.direct) ws.prepare(0, parts, g.crs * g.ohw);
    std::atomic<bool> ok{true};
    parallelFor(threads, d.n, 1, [&](int64_t i0, int64_t i1, int part) {
        float* col = g.direct ? nullptr : ws.slot(part);
        for (int64_t i = i0; i < i1; ++i)
            for (int grp = 0; grp < d.groups; ++grp) {
                float* dxg = dx + (static_cast<size_t>(i) * d.c + static_cast<size_t>(grp) * g.Cg) * g.inPlane;
                const float* dyg = dy + (static_cast<size_t>(i) * d.k + static_cast<size_t>(grp) * g.Kg) * g.ohw;
                // Direct: accumulate straight into dx (beta 1); otherwise into the column buffer, then scatter.
                if (!sgemmOnThisThread(ws.useOneDnn, true, false, static_cast<int>(g.crs), static_cast<int>(g.ohw),
                                       g.Kg, 1.0f, w + static_cast<size_t>(grp) * g.Kg * g.crs, static_cast<int>(g.crs),
                                       dyg, static_cast<int>(g.ohw), g.direct ? 1.0f : 0.0f, g.direct ? dxg : col,
                                       static_cast<int>(g.ohw)))
                    ok = false;
                if (!g.direct) col2imAdd(dxg, col, g.Cg, d, g);
            }
    });
    if (!ok) throw BackendError(kGemmFailed);
}

namespace {

// dw += sum_i dY_i x col(X_i)^T and, when dbias is not null, dbias[k] += sum over images and positions
// of dY, both while each image's dY is in cache. Per-part partial sums are added in part order, so
// the result is deterministic for a fixed thread count.
void im2colBackwardFilter(int threads, Workspace& ws, float* dw, float* dbias, const float* dy, const float* x,
                          const ConvDesc& d) {
    const ConvGeometry g(d);
    const int parts = parallelParts(threads, d.n, 1);
    const size_t wsize = static_cast<size_t>(d.k) * g.crs;
    const size_t partialSize = wsize + (dbias ? static_cast<size_t>(d.k) : 0);
    // Slots [0, parts): im2col buffers; [parts, 2*parts): partial filter (and bias) gradients.
    if (!g.direct) ws.prepare(0, parts, g.crs * g.ohw);
    ws.prepare(parts, parts, partialSize);
    std::atomic<bool> ok{true};
    parallelFor(threads, d.n, 1, [&](int64_t i0, int64_t i1, int part) {
        float* col = g.direct ? nullptr : ws.slot(part);
        float* partial = ws.slot(parts + part);
        std::memset(partial, 0, partialSize * sizeof(float));
        for (int64_t i = i0; i < i1; ++i)
            for (int grp = 0; grp < d.groups; ++grp) {
                const float* xg = x + (static_cast<size_t>(i) * d.c + static_cast<size_t>(grp) * g.Cg) * g.inPlane;
                const float* b = xg;
                if (!g.direct) {
                    im2col(col, xg, g.Cg, d, g);
                    b = col;
                }
                const float* dyg = dy + (static_cast<size_t>(i) * d.k + static_cast<size_t>(grp) * g.Kg) * g.ohw;
                if (!sgemmOnThisThread(ws.useOneDnn, false, true, g.Kg, static_cast<int>(g.crs),
                                       static_cast<int>(g.ohw), 1.0f, dyg, static_cast<int>(g.ohw), b,
                                       static_cast<int>(g.ohw), 1.0f, partial + static_cast<size_t>(grp) * g.Kg * g.crs,
                                       static_cast<int>(g.crs)))
                    ok = false;
                if (dbias) {
                    float* pb = partial + wsize + static_cast<size_t>(grp) * g.Kg;
                    for (int ch = 0; ch < g.Kg; ++ch) {
                        const float* row = dyg + static_cast<size_t>(ch) * g.ohw;
                        float acc = 0.0f;
                        STRATA_SIMD_SUM(acc)
                        for (size_t j = 0; j < g.ohw; ++j) acc += row[j];
                        pb[ch] += acc;
                    }
                }
            }
    });
    if (!ok) throw BackendError(kGemmFailed);
    for (int p = 0; p < parts; ++p) {
        const float* partial = ws.slot(parts + p);
        for (size_t j = 0; j < wsize; ++j) dw[j] += partial[j];
        if (dbias)
            for (int ch = 0; ch < d.k; ++ch) dbias[ch] += partial[wsize + static_cast<size_t>(ch)];
    }
}

}  // namespace

void conv2dBackwardFilter(int threads, Workspace& ws, float* dw, const float* dy, const float* x, const ConvDesc& d) {
    if (narrowConvApplies(ws, d)) return narrowConvBackwardFilter(threads, ws, dw, nullptr, dy, x, d);
    if (ws.useOneDnn && dnnlConv2dBackwardFilter(threads, ws, dw, dy, x, d)) return;
    im2colBackwardFilter(threads, ws, dw, nullptr, dy, x, d);
}

void conv2dBackwardFused(int threads, Workspace& ws, float* dx, float* dw, float* dbias, const float* dy,
                         const float* x, const float* w, const ConvDesc& d, bool overwriteDx) {
    if ((dx || dw) && winogradApplies(ws, d)) {
        if (dx) winogradBackwardData(threads, ws, dx, dy, w, d, overwriteDx);
        if (dw) {
            winogradBackwardFilter(threads, ws, dw, dbias, dy, x, d);
        } else if (dbias) {
            conv2dBackwardFused(threads, ws, nullptr, nullptr, dbias, dy, x, w, d, false);
        }
        return;
    }
    if (narrowConvApplies(ws, d)) {
        if (dx) narrowConvBackwardData(threads, ws, dx, dy, w, d, overwriteDx);
        if (dw || dbias) narrowConvBackwardFilter(threads, ws, dw, dbias, dy, x, d);
        return;
    }
    if (ws.useOneDnn && dnnlConv2dBackwardFused(threads, ws, dx, dw, dbias, dy, x, w, d, overwriteDx)) return;
    if (d.srcBlock || d.dstBlock) {
        // Blocked tensors on the im2col path: dy and x through NCHW copies, dx from one.
        const int64_t hw = int64_t(d.h) * d.w, ohw = int64_t(d.outH()) * d.outW();
        const ConvDesc plain = plainDesc(d);
        const float* dys = dy;
        if (d.dstBlock) {
            float* p = plainBuffer(ws, 1, d.outputSize());
            reblock(threads, p, 0, dy, d.dstBlock, d.n, d.k, ohw, false);
            dys = p;
        }
        const float* xs = x;
        if (d.srcBlock && dw) {
            float* p = plainBuffer(ws, 0, d.inputSize());
            reblock(threads, p, 0, x, d.srcBlock, d.n, d.c, hw, false);
            xs = p;
        }
        float* dxs = dx;
        if (d.srcBlock && dx) dxs = plainBuffer(ws, 2, d.inputSize());
        conv2dBackwardFused(threads, ws, dxs, dw, dbias, dys, xs, w, plain, overwriteDx || dxs != dx);
        if (dxs != dx) reblock(threads, dx, d.srcBlock, dxs, 0, d.n, d.c, hw, !overwriteDx);
        return;
    }
    if (dx && overwriteDx) std::memset(dx, 0, static_cast<size_t>(d.n) * d.c * d.h * d.w * sizeof(float));
    if (dx) conv2dBackwardData(threads, ws, dx, dy, w, d);
    if (dw) {
        im2colBackwardFilter(threads, ws, dw, dbias, dy, x, d);
    } else if (dbias) {
        sumChannels(threads, dbias, dy, d.n, d.k, d.outH() * d.outW());
    }
}

}  // namespace strata::cpu
