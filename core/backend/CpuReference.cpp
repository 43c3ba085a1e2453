// Reference loops of CpuReferenceBackend (see CpuReference.h). Clarity first: each op
// is written the way its formula reads, with double accumulators for sums.
#include "core/backend/CpuReference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace strata::cpuref {

namespace {

inline size_t idx4(int a, int b, int c, int d, int B, int C, int D) {
    return ((static_cast<size_t>(a) * B + b) * C + c) * D + d;
}

}  // namespace

// ---- element-wise ----------------------------------------------------------

void fill(float* y, float value, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = value;
}

void scale(float* y, float alpha, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] *= alpha;
}

void axpy(float* y, float alpha, const float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void add(float* y, const float* a, const float* b, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void mul(float* y, const float* a, const float* b, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}

// ---- linear algebra -------------------------------------------------------

void gemm(bool transA, bool transB, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
          float beta, float* c, int ldc) {
    for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
            double acc = 0.0;
            for (int p = 0; p < k; ++p) {
                const float av = transA ? a[static_cast<size_t>(p) * lda + i] : a[static_cast<size_t>(i) * lda + p];
                const float bv = transB ? b[static_cast<size_t>(j) * ldb + p] : b[static_cast<size_t>(p) * ldb + j];
                acc += static_cast<double>(av) * bv;
            }
            float& out = c[static_cast<size_t>(i) * ldc + j];
            // As in BLAS, beta == 0 means C is not read (so NaN garbage in C does not leak through).
            out = beta == 0.0f ? static_cast<float>(alpha * acc) : static_cast<float>(alpha * acc + beta * out);
        }
    }
}

void addBiasRows(float* y, const float* bias, int rows, int cols) {
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) y[static_cast<size_t>(r) * cols + c] += bias[c];
}

void sumRows(float* dbias, const float* dy, int rows, int cols) {
    for (int c = 0; c < cols; ++c) {
        double acc = 0.0;
        for (int r = 0; r < rows; ++r) acc += dy[static_cast<size_t>(r) * cols + c];
        dbias[c] += static_cast<float>(acc);
    }
}

void addBiasChannels(float* y, const float* bias, int n, int c, int inner) {
    for (int b = 0; b < n; ++b)
        for (int ch = 0; ch < c; ++ch) {
            float* row = y + (static_cast<size_t>(b) * c + ch) * inner;
            for (int i = 0; i < inner; ++i) row[i] += bias[ch];
        }
}

void sumChannels(float* dbias, const float* dy, int n, int c, int inner) {
    for (int ch = 0; ch < c; ++ch) {
        double acc = 0.0;
        for (int b = 0; b < n; ++b) {
            const float* row = dy + (static_cast<size_t>(b) * c + ch) * inner;
            for (int i = 0; i < inner; ++i) acc += row[i];
        }
        dbias[ch] += static_cast<float>(acc);
    }
}

// ---- convolution ----------------------------------------------------------
// y[n,k,oh,ow] = sum_{c,r,s} x[n, g*Cg + c, oh*sh - ph + r*dh, ow*sw - pw + s*dw] * w[k, c, r, s],
// where g = k / Kg is the group of output channel k (Cg = C/groups, Kg = K/groups).

void conv2dForward(float* y, const float* x, const float* w, const ConvDesc& d) {
    const int OH = d.outH(), OW = d.outW();
    const int Cg = d.c / d.groups, Kg = d.k / d.groups;
    for (int n = 0; n < d.n; ++n)
        for (int k = 0; k < d.k; ++k) {
            const int g = k / Kg;
            for (int oh = 0; oh < OH; ++oh)
                for (int ow = 0; ow < OW; ++ow) {
                    double acc = 0.0;
                    for (int c = 0; c < Cg; ++c)
                        for (int r = 0; r < d.r; ++r) {
                            const int ih = oh * d.strideH - d.padH + r * d.dilationH;
                            if (ih < 0 || ih >= d.h) continue;
                            for (int s = 0; s < d.s; ++s) {
                                const int iw = ow * d.strideW - d.padW + s * d.dilationW;
                                if (iw < 0 || iw >= d.w) continue;
                                acc += static_cast<double>(x[idx4(n, g * Cg + c, ih, iw, d.c, d.h, d.w)]) *
                                       w[idx4(k, c, r, s, Cg, d.r, d.s)];
                            }
                        }
                    y[idx4(n, k, oh, ow, d.k, OH, OW)] = static_cast<float>(acc);
                }
        }
}

void conv2dBackwardData(float* dx, const float* dy, const float* w, const ConvDesc& d) {
    const int OH = d.outH(), OW = d.outW();
    const int Cg = d.c / d.groups, Kg = d.k / d.groups;
    for (int n = 0; n < d.n; ++n)
        for (int ci = 0; ci < d.c; ++ci) {
            const int g = ci / Cg, c = ci % Cg;
            for (int ih = 0; ih < d.h; ++ih)
                for (int iw = 0; iw < d.w; ++iw) {
                    // Gather every (k, r, s) whose output position reads this input element.
                    double acc = 0.0;
                    for (int k = g * Kg; k < (g + 1) * Kg; ++k)
                        for (int r = 0; r < d.r; ++r) {
                            const int th = ih + d.padH - r * d.dilationH;
                            if (th < 0 || th % d.strideH != 0) continue;
                            const int oh = th / d.strideH;
                            if (oh >= OH) continue;
                            for (int s = 0; s < d.s; ++s) {
                                const int tw = iw + d.padW - s * d.dilationW;
                                if (tw < 0 || tw % d.strideW != 0) continue;
                                const int ow = tw / d.strideW;
                                if (ow >= OW) continue;
                                acc += static_cast<double>(dy[idx4(n, k, oh, ow, d.k, OH, OW)]) *
                                       w[idx4(k, c, r, s, Cg, d.r, d.s)];
                            }
                        }
                    dx[idx4(n, ci, ih, iw, d.c, d.h, d.w)] += static_cast<float>(acc);
                }
        }
}

void conv2dBackwardFilter(float* dw, const float* dy, const float* x, const ConvDesc& d) {
    const int OH = d.outH(), OW = d.outW();
    const int Cg = d.c / d.groups, Kg = d.k / d.groups;
    for (int k = 0; k < d.k; ++k) {
        const int g = k / Kg;
        for (int c = 0; c < Cg; ++c)
            for (int r = 0; r < d.r; ++r)
                for (int s = 0; s < d.s; ++s) {
                    double acc = 0.0;
                    for (int n = 0; n < d.n; ++n)
                        for (int oh = 0; oh < OH; ++oh) {
                            const int ih = oh * d.strideH - d.padH + r * d.dilationH;
                            if (ih < 0 || ih >= d.h) continue;
                            for (int ow = 0; ow < OW; ++ow) {
                                const int iw = ow * d.strideW - d.padW + s * d.dilationW;
                                if (iw < 0 || iw >= d.w) continue;
                                acc += static_cast<double>(dy[idx4(n, k, oh, ow, d.k, OH, OW)]) *
                                       x[idx4(n, g * Cg + c, ih, iw, d.c, d.h, d.w)];
                            }
                        }
                    dw[idx4(k, c, r, s, Cg, d.r, d.s)] += static_cast<float>(acc);
                }
    }
}

// ---- pooling --------------------------------------------------------------
// Windows are clipped to the image: padding never wins a max and never counts in an average.

void pool2dForward(float* y, const float* x, const PoolDesc& d) {
    const int OH = d.outH(), OW = d.outW();
    for (int p = 0; p < d.n * d.c; ++p) {
        const float* img = x + static_cast<size_t>(p) * d.h * d.w;
        for (int oh = 0; oh < OH; ++oh)
            for (int ow = 0; ow < OW; ++ow) {
                const int h0 = oh * d.strideH - d.padH, w0 = ow * d.strideW - d.padW;
                float best = -std::numeric_limits<float>::infinity();
                double acc = 0.0;
                int count = 0;
                for (int ih = h0; ih < h0 + d.kernelH; ++ih) {
                    if (ih < 0 || ih >= d.h) continue;
                    for (int iw = w0; iw < w0 + d.kernelW; ++iw) {
                        if (iw < 0 || iw >= d.w) continue;
                        const float v = img[static_cast<size_t>(ih) * d.w + iw];
                        if (count == 0 || v > best) best = v;
                        acc += v;
                        ++count;
                    }
                }
                y[(static_cast<size_t>(p) * OH + oh) * OW + ow] =
                    d.mode == PoolMode::Max ? best : static_cast<float>(acc / count);
            }
    }
}

void pool2dBackward(float* dx, const float* dy, const float* x, const PoolDesc& d) {
    const int OH = d.outH(), OW = d.outW();
    for (int p = 0; p < d.n * d.c; ++p) {
        const float* img = x + static_cast<size_t>(p) * d.h * d.w;
        float* dimg = dx + static_cast<size_t>(p) * d.h * d.w;
        for (int oh = 0; oh < OH; ++oh)
            for (int ow = 0; ow < OW; ++ow) {
                const float g = dy[(static_cast<size_t>(p) * OH + oh) * OW + ow];
                const int h0 = oh * d.strideH - d.padH, w0 = ow * d.strideW - d.padW;
                const int hBegin = h0 < 0 ? 0 : h0, hEnd = h0 + d.kernelH > d.h ? d.h : h0 + d.kernelH;
                const int wBegin = w0 < 0 ? 0 : w0, wEnd = w0 + d.kernelW > d.w ? d.w : w0 + d.kernelW;
                if (d.mode == PoolMode::Max) {
                    // The first maximal element in row-major window order receives the gradient.
                    size_t arg = static_cast<size_t>(hBegin) * d.w + wBegin;
                    for (int ih = hBegin; ih < hEnd; ++ih)
                        for (int iw = wBegin; iw < wEnd; ++iw) {
                            const size_t i = static_cast<size_t>(ih) * d.w + iw;
                            if (img[i] > img[arg]) arg = i;
                        }
                    dimg[arg] += g;
                } else {
                    const float share = g / static_cast<float>((hEnd - hBegin) * (wEnd - wBegin));
                    for (int ih = hBegin; ih < hEnd; ++ih)
                        for (int iw = wBegin; iw < wEnd; ++iw) dimg[static_cast<size_t>(ih) * d.w + iw] += share;
                }
            }
    }
}

void meanPoolForward(float* y, const float* x, int outer, int len, int inner) {
    for (int o = 0; o < outer; ++o)
        for (int i = 0; i < inner; ++i) {
            double acc = 0.0;
            for (int l = 0; l < len; ++l) acc += x[(static_cast<size_t>(o) * len + l) * inner + i];
            y[static_cast<size_t>(o) * inner + i] = static_cast<float>(acc / len);
        }
}

void meanPoolBackward(float* dx, const float* dy, int outer, int len, int inner) {
    for (int o = 0; o < outer; ++o)
        for (int l = 0; l < len; ++l)
            for (int i = 0; i < inner; ++i)
                dx[(static_cast<size_t>(o) * len + l) * inner + i] +=
                    dy[static_cast<size_t>(o) * inner + i] / static_cast<float>(len);
}

void sequencePoolForward(float* y, const float* x, const float* keep, int batch, int len, int dim, PoolMode mode) {
    for (int b = 0; b < batch; ++b)
        for (int i = 0; i < dim; ++i) {
            double acc = 0.0;
            float best = 0.0f;
            int counted = 0;
            for (int l = 0; l < len; ++l) {
                if (keep && keep[static_cast<size_t>(b) * len + l] == 0.0f) continue;
                const float v = x[(static_cast<size_t>(b) * len + l) * dim + i];
                acc += v;
                if (counted == 0 || v > best) best = v;
                ++counted;
            }
            float& out = y[static_cast<size_t>(b) * dim + i];
            if (counted == 0)
                out = 0.0f;
            else
                out = mode == PoolMode::Max ? best : static_cast<float>(acc / counted);
        }
}

void sequencePoolBackward(float* dx, const float* dy, const float* x, const float* y, const float* keep, int batch,
                          int len, int dim, PoolMode mode) {
    auto kept = [&](int b, int l) { return !keep || keep[static_cast<size_t>(b) * len + l] != 0.0f; };
    for (int b = 0; b < batch; ++b) {
        int counted = 0;
        for (int l = 0; l < len; ++l) counted += kept(b, l) ? 1 : 0;
        if (counted == 0) continue;
        for (int i = 0; i < dim; ++i) {
            const float g = dy[static_cast<size_t>(b) * dim + i];
            if (mode == PoolMode::Average) {
                for (int l = 0; l < len; ++l)
                    if (kept(b, l)) dx[(static_cast<size_t>(b) * len + l) * dim + i] += g / static_cast<float>(counted);
                continue;
            }
            const float best = y[static_cast<size_t>(b) * dim + i];
            for (int l = 0; l < len; ++l) {
                const size_t at = (static_cast<size_t>(b) * len + l) * dim + i;
                if (kept(b, l) && x[at] == best) {
                    dx[at] += g;
                    break;
                }
            }
        }
    }
}

// ---- activations ----------------------------------------------------------

float geluForward(float x) {
    const double xd = x;
    return static_cast<float>(0.5 * xd * (1.0 + std::erf(xd * M_SQRT1_2)));
}

float geluDerivative(float x) {
    // d/dx [x * Phi(x)] = Phi(x) + x * phi(x)
    const double xd = x;
    const double cdf = 0.5 * (1.0 + std::erf(xd * M_SQRT1_2));
    const double pdf = std::exp(-0.5 * xd * xd) * (0.5 * M_2_SQRTPI * M_SQRT1_2);
    return static_cast<float>(cdf + xd * pdf);
}

void activationForward(float* y, const float* x, int64_t n, Activation act, float alpha) {
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        switch (act) {
            case Activation::ReLU: y[i] = v > 0.0f ? v : 0.0f; break;
            case Activation::LeakyReLU: y[i] = v > 0.0f ? v : alpha * v; break;
            case Activation::GELU: y[i] = geluForward(v); break;
            case Activation::Sigmoid: y[i] = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(v)))); break;
            case Activation::Tanh: y[i] = std::tanh(v); break;
            case Activation::HardSwish: y[i] = v * std::min(std::max(v + 3.0f, 0.0f), 6.0f) / 6.0f; break;
        }
    }
}

void activationBackward(float* dx, const float* dy, const float* x, const float* y, int64_t n, Activation act,
                        float alpha) {
    for (int64_t i = 0; i < n; ++i) {
        float deriv = 0.0f;
        switch (act) {
            case Activation::ReLU: deriv = (x ? x[i] : y[i]) > 0.0f ? 1.0f : 0.0f; break;
            case Activation::LeakyReLU: deriv = x[i] > 0.0f ? 1.0f : alpha; break;
            case Activation::GELU: deriv = geluDerivative(x[i]); break;
            case Activation::Sigmoid: {
                const float s = y ? y[i] : static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(x[i]))));
                deriv = s * (1.0f - s);
                break;
            }
            case Activation::Tanh: {
                const float t = y ? y[i] : std::tanh(x[i]);
                deriv = 1.0f - t * t;
                break;
            }
            // PyTorch's hardswish_backward: x / 3 + 1 / 2 on [-3, 3].
            case Activation::HardSwish: deriv = x[i] < -3.0f ? 0.0f : x[i] <= 3.0f ? x[i] / 3.0f + 0.5f : 1.0f; break;
        }
        dx[i] += dy[i] * deriv;
    }
}

// ---- softmax and losses -----------------------------------------------------

void clipForward(float* y, const float* x, int64_t n, float lo, float hi) {
    for (int64_t i = 0; i < n; ++i) y[i] = std::min(std::max(x[i], lo), hi);
}

void clipBackward(float* dx, const float* dy, const float* x, int64_t n, float lo, float hi) {
    for (int64_t i = 0; i < n; ++i)
        if (x[i] > lo && x[i] < hi) dx[i] += dy[i];
}

UpsampleTap upsampleTap(int dst, int in, int out, int scale, bool bilinear, bool alignCorners) {
    if (!bilinear) return {dst / scale, dst / scale, 0.0f};
    float src = 0.0f;
    if (alignCorners)
        src = out > 1 ? static_cast<float>(dst) * static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f;
    else
        src = std::max((static_cast<float>(dst) + 0.5f) / static_cast<float>(scale) - 0.5f, 0.0f);
    const int i0 = std::min(static_cast<int>(src), in - 1);
    return {i0, std::min(i0 + 1, in - 1), src - static_cast<float>(i0)};
}

// Each output pixel from its (up to) four taps: the plain loop both directions of upsampling are checked against.
void upsample2dForward(float* y, const float* x, const UpsampleDesc& d) {
    const int oh = d.outH(), ow = d.outW();
    for (int64_t p = 0; p < int64_t(d.n) * d.c; ++p) {
        const float* xp = x + p * d.h * d.w;
        float* yp = y + p * oh * ow;
        for (int i = 0; i < oh; ++i) {
            const UpsampleTap ty = upsampleTap(i, d.h, oh, d.scaleH, d.bilinear, d.alignCorners);
            for (int j = 0; j < ow; ++j) {
                const UpsampleTap tx = upsampleTap(j, d.w, ow, d.scaleW, d.bilinear, d.alignCorners);
                const float top = (1.0f - tx.frac) * xp[ty.i0 * d.w + tx.i0] + tx.frac * xp[ty.i0 * d.w + tx.i1];
                const float bottom = (1.0f - tx.frac) * xp[ty.i1 * d.w + tx.i0] + tx.frac * xp[ty.i1 * d.w + tx.i1];
                yp[i * ow + j] = (1.0f - ty.frac) * top + ty.frac * bottom;
            }
        }
    }
}

void upsample2dBackward(float* dx, const float* dy, const UpsampleDesc& d) {
    const int oh = d.outH(), ow = d.outW();
    for (int64_t p = 0; p < int64_t(d.n) * d.c; ++p) {
        float* dxp = dx + p * d.h * d.w;
        const float* dyp = dy + p * oh * ow;
        for (int i = 0; i < oh; ++i) {
            const UpsampleTap ty = upsampleTap(i, d.h, oh, d.scaleH, d.bilinear, d.alignCorners);
            for (int j = 0; j < ow; ++j) {
                const UpsampleTap tx = upsampleTap(j, d.w, ow, d.scaleW, d.bilinear, d.alignCorners);
                const float g = dyp[i * ow + j];
                dxp[ty.i0 * d.w + tx.i0] += (1.0f - ty.frac) * (1.0f - tx.frac) * g;
                dxp[ty.i0 * d.w + tx.i1] += (1.0f - ty.frac) * tx.frac * g;
                dxp[ty.i1 * d.w + tx.i0] += ty.frac * (1.0f - tx.frac) * g;
                dxp[ty.i1 * d.w + tx.i1] += ty.frac * tx.frac * g;
            }
        }
    }
}

void softmaxForward(float* y, const float* x, int rows, int cols) {
    for (int r = 0; r < rows; ++r) {
        const float* xr = x + static_cast<size_t>(r) * cols;
        float* yr = y + static_cast<size_t>(r) * cols;
        float mx = xr[0];
        for (int c = 1; c < cols; ++c) mx = xr[c] > mx ? xr[c] : mx;
        double total = 0.0;
        for (int c = 0; c < cols; ++c) total += std::exp(static_cast<double>(xr[c]) - mx);
        for (int c = 0; c < cols; ++c) yr[c] = static_cast<float>(std::exp(static_cast<double>(xr[c]) - mx) / total);
    }
}

void softmaxBackward(float* dx, const float* dy, const float* y, int rows, int cols) {
    for (int r = 0; r < rows; ++r) {
        const size_t o = static_cast<size_t>(r) * cols;
        double dot = 0.0;
        for (int c = 0; c < cols; ++c) dot += static_cast<double>(dy[o + c]) * y[o + c];
        for (int c = 0; c < cols; ++c) dx[o + c] += static_cast<float>(y[o + c] * (dy[o + c] - dot));
    }
}

void maskedSoftmaxForward(float* y, const float* x, const float* keep, int groups, int rowsPerGroup, int cols) {
    for (int g = 0; g < groups; ++g) {
        const float* kg = keep + static_cast<size_t>(g) * cols;
        for (int r = 0; r < rowsPerGroup; ++r) {
            const size_t o = (static_cast<size_t>(g) * rowsPerGroup + r) * cols;
            bool any = false;
            float mx = 0.0f;
            for (int c = 0; c < cols; ++c)
                if (kg[c] != 0.0f) {
                    mx = any ? (x[o + c] > mx ? x[o + c] : mx) : x[o + c];
                    any = true;
                }
            double total = 0.0;
            for (int c = 0; c < cols; ++c)
                if (kg[c] != 0.0f) total += std::exp(static_cast<double>(x[o + c]) - mx);
            for (int c = 0; c < cols; ++c)
                y[o + c] =
                    kg[c] != 0.0f ? static_cast<float>(std::exp(static_cast<double>(x[o + c]) - mx) / total) : 0.0f;
        }
    }
}

void softmaxCrossEntropy(float* losses, float* dlogits, const float* logits, const int32_t* labels, int rows, int cols,
                         float gradScale) {
    for (int r = 0; r < rows; ++r) {
        const float* xr = logits + static_cast<size_t>(r) * cols;
        float mx = xr[0];
        for (int c = 1; c < cols; ++c) mx = xr[c] > mx ? xr[c] : mx;
        double total = 0.0;
        for (int c = 0; c < cols; ++c) total += std::exp(static_cast<double>(xr[c]) - mx);
        const double logZ = std::log(total) + mx;
        if (losses) losses[r] = static_cast<float>(logZ - xr[labels[r]]);
        if (dlogits) {
            float* dr = dlogits + static_cast<size_t>(r) * cols;
            for (int c = 0; c < cols; ++c) {
                const double p = std::exp(static_cast<double>(xr[c]) - logZ);
                dr[c] = static_cast<float>((p - (c == labels[r] ? 1.0 : 0.0)) * gradScale);
            }
        }
    }
}

void mseLoss(float* losses, float* dpred, const float* pred, const float* target, int rows, int cols, float gradScale) {
    for (int r = 0; r < rows; ++r) {
        const size_t o = static_cast<size_t>(r) * cols;
        double acc = 0.0;
        for (int c = 0; c < cols; ++c) {
            const double diff = static_cast<double>(pred[o + c]) - target[o + c];
            acc += diff * diff;
            if (dpred) dpred[o + c] = static_cast<float>(2.0 * diff / cols * gradScale);
        }
        if (losses) losses[r] = static_cast<float>(acc / cols);
    }
}

void robustLoss(float* losses, float* dpred, const float* pred, const float* target, int rows, int cols, float delta,
                float gradScale) {
    for (int r = 0; r < rows; ++r) {
        const size_t o = static_cast<size_t>(r) * cols;
        double acc = 0.0;
        for (int c = 0; c < cols; ++c) {
            const double d = static_cast<double>(pred[o + c]) - target[o + c];
            const double a = std::fabs(d);
            const double sign = d > 0.0 ? 1.0 : (d < 0.0 ? -1.0 : 0.0);
            double g = 0.0;
            if (delta <= 0.0f) {
                acc += a;
                g = sign;
            } else if (a <= delta) {
                acc += 0.5 * d * d;
                g = d;
            } else {
                acc += delta * (a - 0.5 * delta);
                g = delta * sign;
            }
            if (dpred) dpred[o + c] = static_cast<float>(g / cols * gradScale);
        }
        if (losses) losses[r] = static_cast<float>(acc / cols);
    }
}

void bceWithLogits(float* losses, float* dlogits, const float* logits, const float* target, int rows, int cols,
                   float gradScale) {
    for (int r = 0; r < rows; ++r) {
        const size_t o = static_cast<size_t>(r) * cols;
        double acc = 0.0;
        for (int c = 0; c < cols; ++c) {
            const double x = logits[o + c], t = target[o + c];
            // log(1 + exp(-|x|)) never overflows; max(x, 0) - x*t completes the stable form.
            acc += (x > 0.0 ? x : 0.0) - x * t + std::log1p(std::exp(-std::fabs(x)));
            if (dlogits) {
                const double sig = 1.0 / (1.0 + std::exp(-x));
                dlogits[o + c] = static_cast<float>((sig - t) / cols * gradScale);
            }
        }
        if (losses) losses[r] = static_cast<float>(acc / cols);
    }
}

int64_t countCorrect(const float* logits, const int32_t* labels, int rows, int cols) {
    int64_t correct = 0;
    for (int r = 0; r < rows; ++r) {
        const float* xr = logits + static_cast<size_t>(r) * cols;
        int best = 0;
        for (int c = 1; c < cols; ++c)
            if (xr[c] > xr[best]) best = c;
        if (best == labels[r]) ++correct;
    }
    return correct;
}

// ---- normalization --------------------------------------------------------

void batchNormForwardTraining(float* y, float* saveMean, float* saveInvStd, float* runningMean, float* runningVar,
                              const float* x, const float* gamma, const float* beta, int n, int c, int inner,
                              float momentum, float eps, bool relu) {
    const double count = static_cast<double>(n) * inner;
    for (int ch = 0; ch < c; ++ch) {
        double acc = 0.0;
        for (int b = 0; b < n; ++b)
            for (int i = 0; i < inner; ++i) acc += x[(static_cast<size_t>(b) * c + ch) * inner + i];
        const double mean = acc / count;
        double sq = 0.0;
        for (int b = 0; b < n; ++b)
            for (int i = 0; i < inner; ++i) {
                const double diff = x[(static_cast<size_t>(b) * c + ch) * inner + i] - mean;
                sq += diff * diff;
            }
        const double var = sq / count;  // biased: normalizes this batch
        const double invStd = 1.0 / std::sqrt(var + eps);
        const double g = gamma ? gamma[ch] : 1.0, bt = beta ? beta[ch] : 0.0;
        for (int b = 0; b < n; ++b)
            for (int i = 0; i < inner; ++i) {
                const size_t k = (static_cast<size_t>(b) * c + ch) * inner + i;
                const float v = static_cast<float>((x[k] - mean) * invStd * g + bt);
                y[k] = relu && !(v > 0.0f) ? 0.0f : v;
            }
        if (saveMean) saveMean[ch] = static_cast<float>(mean);
        if (saveInvStd) saveInvStd[ch] = static_cast<float>(invStd);
        if (runningMean) runningMean[ch] = static_cast<float>((1.0 - momentum) * runningMean[ch] + momentum * mean);
        if (runningVar) {
            const double unbiased = sq / (count - 1.0);
            runningVar[ch] = static_cast<float>((1.0 - momentum) * runningVar[ch] + momentum * unbiased);
        }
    }
}

void batchNormForwardInference(float* y, const float* x, const float* gamma, const float* beta,
                               const float* runningMean, const float* runningVar, int n, int c, int inner, float eps,
                               bool relu) {
    for (int ch = 0; ch < c; ++ch) {
        const double invStd = 1.0 / std::sqrt(static_cast<double>(runningVar[ch]) + eps);
        const double g = gamma ? gamma[ch] : 1.0, bt = beta ? beta[ch] : 0.0;
        for (int b = 0; b < n; ++b)
            for (int i = 0; i < inner; ++i) {
                const size_t k = (static_cast<size_t>(b) * c + ch) * inner + i;
                const float v = static_cast<float>((x[k] - runningMean[ch]) * invStd * g + bt);
                y[k] = relu && !(v > 0.0f) ? 0.0f : v;
            }
    }
}

void batchNormBackward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x, const float* gamma,
                       const float* saveMean, const float* saveInvStd, int n, int c, int inner,
                       const float* reluOutput) {
    const double count = static_cast<double>(n) * inner;
    // With a ReLU fused after the normalization, dy is the ReLU's output gradient: masked by its output first.
    std::vector<float> masked;
    if (reluOutput) {
        const size_t total = static_cast<size_t>(n) * static_cast<size_t>(c) * static_cast<size_t>(inner);
        masked.assign(dy, dy + total);
        for (size_t k = 0; k < total; ++k)
            if (!(reluOutput[k] > 0.0f)) masked[k] = 0.0f;
        dy = masked.data();
    }
    for (int ch = 0; ch < c; ++ch) {
        const double mean = saveMean[ch], invStd = saveInvStd[ch], g = gamma ? gamma[ch] : 1.0;
        double sumDy = 0.0, sumDyXhat = 0.0;
        for (int b = 0; b < n; ++b)
            for (int i = 0; i < inner; ++i) {
                const size_t k = (static_cast<size_t>(b) * c + ch) * inner + i;
                sumDy += dy[k];
                sumDyXhat += dy[k] * (x[k] - mean) * invStd;
            }
        if (dbeta) dbeta[ch] += static_cast<float>(sumDy);
        if (dgamma) dgamma[ch] += static_cast<float>(sumDyXhat);
        if (!dx) continue;
        // dx = g * invStd * (dy - mean(dy) - xhat * mean(dy * xhat))
        for (int b = 0; b < n; ++b)
            for (int i = 0; i < inner; ++i) {
                const size_t k = (static_cast<size_t>(b) * c + ch) * inner + i;
                const double xhat = (x[k] - mean) * invStd;
                dx[k] += static_cast<float>(g * invStd * (dy[k] - sumDy / count - xhat * sumDyXhat / count));
            }
    }
}

void layerNormForward(float* y, float* mean, float* rstd, const float* x, const float* gamma, const float* beta,
                      int rows, int cols, float eps) {
    for (int r = 0; r < rows; ++r) {
        const size_t o = static_cast<size_t>(r) * cols;
        double acc = 0.0;
        for (int c = 0; c < cols; ++c) acc += x[o + c];
        const double mu = acc / cols;
        double sq = 0.0;
        for (int c = 0; c < cols; ++c) sq += (x[o + c] - mu) * (x[o + c] - mu);
        const double rs = 1.0 / std::sqrt(sq / cols + eps);
        for (int c = 0; c < cols; ++c)
            y[o + c] = static_cast<float>((x[o + c] - mu) * rs * (gamma ? gamma[c] : 1.0) + (beta ? beta[c] : 0.0));
        if (mean) mean[r] = static_cast<float>(mu);
        if (rstd) rstd[r] = static_cast<float>(rs);
    }
}

void layerNormBackward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x, const float* gamma,
                       const float* mean, const float* rstd, int rows, int cols) {
    for (int r = 0; r < rows; ++r) {
        const size_t o = static_cast<size_t>(r) * cols;
        const double mu = mean[r], rs = rstd[r];
        double sumG = 0.0, sumGXhat = 0.0;  // g = dy * gamma, the gradient w.r.t. xhat
        for (int c = 0; c < cols; ++c) {
            const double xhat = (x[o + c] - mu) * rs;
            const double g = dy[o + c] * (gamma ? gamma[c] : 1.0);
            sumG += g;
            sumGXhat += g * xhat;
            if (dbeta) dbeta[c] += dy[o + c];
            if (dgamma) dgamma[c] += static_cast<float>(dy[o + c] * xhat);
        }
        if (!dx) continue;
        for (int c = 0; c < cols; ++c) {
            const double xhat = (x[o + c] - mu) * rs;
            const double g = dy[o + c] * (gamma ? gamma[c] : 1.0);
            dx[o + c] += static_cast<float>(rs * (g - sumG / cols - xhat * sumGXhat / cols));
        }
    }
}

// ---- dropout --------------------------------------------------------------

float dropoutScale(float p) { return p >= 1.0f ? 0.0f : 1.0f / (1.0f - p); }

void dropoutForward(float* y, const float* x, int64_t n, float p, uint64_t seed, uint64_t first) {
    const float keepScale = dropoutScale(p);
    for (int64_t i = 0; i < n; ++i)
        y[i] = dropoutKeep(seed, first + static_cast<uint64_t>(i), p) ? x[i] * keepScale : 0.0f;
}

void dropoutBackward(float* dx, const float* dy, int64_t n, float p, uint64_t seed, uint64_t first) {
    const float keepScale = dropoutScale(p);
    for (int64_t i = 0; i < n; ++i)
        if (dropoutKeep(seed, first + static_cast<uint64_t>(i), p)) dx[i] += dy[i] * keepScale;
}

// ---- optimizers -------------------------------------------------------------

void sgdUpdate(float* w, float* velocity, const float* grad, int64_t n, const SgdParams& p) {
    for (int64_t i = 0; i < n; ++i) {
        float g = grad[i];
        if (p.weightDecay != 0.0f) g += p.weightDecay * w[i];
        float step = g;
        if (p.momentum != 0.0f) {
            velocity[i] = p.momentum * velocity[i] + g;
            step = p.nesterov ? g + p.momentum * velocity[i] : velocity[i];
        }
        w[i] -= p.lr * step;
    }
}

void adamUpdate(float* w, float* m, float* v, const float* grad, int64_t n, const AdamParams& p) {
    // Scalars in double, as PyTorch computes them in Python before the tensor ops.
    const double bc1 = 1.0 - std::pow(static_cast<double>(p.beta1), static_cast<double>(p.step));
    const double bc2 = 1.0 - std::pow(static_cast<double>(p.beta2), static_cast<double>(p.step));
    const float stepSize = static_cast<float>(p.lr / bc1);
    const float bc2Sqrt = static_cast<float>(std::sqrt(bc2));
    const float decay = static_cast<float>(1.0 - static_cast<double>(p.lr) * p.weightDecay);
    for (int64_t i = 0; i < n; ++i) {
        float g = grad[i];
        if (p.weightDecay != 0.0f) {
            if (p.decoupled)
                w[i] *= decay;
            else
                g += p.weightDecay * w[i];
        }
        m[i] = m[i] * p.beta1 + (1.0f - p.beta1) * g;
        v[i] = v[i] * p.beta2 + (1.0f - p.beta2) * g * g;
        const float denom = std::sqrt(v[i]) / bc2Sqrt + p.eps;
        w[i] += -stepSize * (m[i] / denom);
    }
}

// ---- embedding, data movement, reductions -----------------------------------

void embeddingForward(float* y, const float* table, const float* ids, int64_t count, int dim) {
    for (int64_t i = 0; i < count; ++i)
        std::memcpy(y + i * dim, table + static_cast<int64_t>(ids[i]) * dim, sizeof(float) * static_cast<size_t>(dim));
}

void embeddingBackward(float* dtable, const float* dy, const float* ids, int64_t count, int dim) {
    for (int64_t i = 0; i < count; ++i) {
        float* row = dtable + static_cast<int64_t>(ids[i]) * dim;
        for (int j = 0; j < dim; ++j) row[j] += dy[i * dim + j];
    }
}

void copyBlocks(float* dst, int64_t dstStride, const float* src, int64_t srcStride, int64_t blockLen, int64_t count,
                bool accumulate) {
    for (int64_t o = 0; o < count; ++o) {
        float* d = dst + o * dstStride;
        const float* s = src + o * srcStride;
        if (accumulate)
            for (int64_t j = 0; j < blockLen; ++j) d[j] += s[j];
        else
            std::memmove(d, s, sizeof(float) * static_cast<size_t>(blockLen));
    }
}

void reblock(float* dst, int dstBlock, const float* src, int srcBlock, int n, int c, int64_t inner, bool accumulate) {
    // Element (image i, channel ch, position p): ((i * c / B + ch / B) * inner + p) * B + ch % B blocked by B,
    // (i * c + ch) * inner + p in NCHW.
    auto at = [&](int block, int64_t i, int64_t ch, int64_t p) {
        if (block == 0) return (i * c + ch) * inner + p;
        return ((i * (c / block) + ch / block) * inner + p) * block + ch % block;
    };
    for (int64_t i = 0; i < n; ++i)
        for (int64_t ch = 0; ch < c; ++ch)
            for (int64_t p = 0; p < inner; ++p) {
                const float v = src[at(srcBlock, i, ch, p)];
                float& out = dst[at(dstBlock, i, ch, p)];
                out = accumulate ? out + v : v;
            }
}

void gatherRows(void* dst, const void* src, const int32_t* indices, int64_t count, int64_t rowWords) {
    const size_t rowBytes = static_cast<size_t>(rowWords) * 4;
    for (int64_t i = 0; i < count; ++i)
        std::memcpy(static_cast<char*>(dst) + static_cast<size_t>(i) * rowBytes,
                    static_cast<const char*>(src) + static_cast<size_t>(indices[i]) * rowBytes, rowBytes);
}

double sum(const float* x, int64_t n) {
    double acc = 0.0;
    for (int64_t i = 0; i < n; ++i) acc += x[i];
    return acc;
}

double sumSquares(const float* x, int64_t n) {
    double acc = 0.0;
    for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(x[i]) * x[i];
    return acc;
}

bool allFinite(const float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
        if (!std::isfinite(x[i])) return false;
    return true;
}

}  // namespace strata::cpuref
