// The per-image kernels of CpuConvNarrow.cpp, included once per instruction set with STRATA_NARROW_LANES
// (floats per vector) and STRATA_NARROW_TARGET (the function attribute) defined, inside a namespace of its own
// (as CpuWinogradKernels.h is). Every input arrives zero-padded (NarrowPlan), so the loops have no bounds
// tests: a vector of output columns is a sum of unaligned loads of padded rows times broadcast weights.
// No include guard: included more than once on purpose.

constexpr int kLanes = STRATA_NARROW_LANES;
using Vec = float __attribute__((vector_size(kLanes * sizeof(float))));

STRATA_NARROW_TARGET inline Vec load(const float* p) {
    Vec v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
STRATA_NARROW_TARGET inline void store(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }
STRATA_NARROW_TARGET inline double lanesSum(Vec v) {
    double total = 0.0;
    for (int j = 0; j < kLanes; ++j) total += v[j];
    return total;
}

// Stores the first `count` lanes of v at p (a whole vector when count == kLanes).
STRATA_NARROW_TARGET inline void storePart(float* p, Vec v, int count) {
    if (count >= kLanes) return store(p, v);
    for (int j = 0; j < count; ++j) p[j] = v[j];
}

// y[oh][ow] = bias + sum_{c,r,s} w[c][r][s] * xpad[c][oh + r][ow + s], then max(0, .) when relu. Four output
// rows at a time, so four independent accumulators hide the multiply-add latency.
STRATA_NARROW_TARGET void forwardImage(float* y, const float* xpad, const float* w, float bias, bool relu,
                                       const NarrowPlan& p) {
    const Vec zero{};
    for (int oh = 0; oh < p.OH; oh += 4) {
        const int rows = std::min(4, p.OH - oh);
        for (int ow0 = 0; ow0 < p.OW; ow0 += kLanes) {
            Vec acc[4] = {zero + bias, zero + bias, zero + bias, zero + bias};
            for (int c = 0; c < p.C; ++c) {
                const float* wc = w + static_cast<size_t>(c) * p.R * p.S;
                const float* base = xpad + (static_cast<size_t>(c) * p.PH + oh) * p.PW + ow0;
                for (int r = 0; r < p.R; ++r)
                    for (int s = 0; s < p.S; ++s) {
                        const float wv = wc[r * p.S + s];
                        const float* at = base + static_cast<size_t>(r) * p.PW + s;
                        if (rows == 4) {
                            acc[0] += wv * load(at);
                            acc[1] += wv * load(at + p.PW);
                            acc[2] += wv * load(at + 2 * static_cast<size_t>(p.PW));
                            acc[3] += wv * load(at + 3 * static_cast<size_t>(p.PW));
                        } else {
                            for (int k = 0; k < rows; ++k) acc[k] += wv * load(at + static_cast<size_t>(k) * p.PW);
                        }
                    }
            }
            for (int k = 0; k < rows; ++k) {
                if (relu) acc[k] = acc[k] > zero ? acc[k] : zero;
                storePart(y + static_cast<size_t>(oh + k) * p.OW + ow0, acc[k], p.OW - ow0);
            }
        }
    }
}

// dx[c][ih][iw] (+)= sum_{r,s} w[c][r][s] * dypad[ih + R-1-r][iw + S-1-s]: the output gradient correlated with
// the kernel turned 180 degrees, one input channel and four input rows at a time.
STRATA_NARROW_TARGET void backwardDataImage(float* dx, const float* dypad, const float* w, bool overwrite,
                                            const NarrowPlan& p) {
    for (int c = 0; c < p.C; ++c) {
        const float* wc = w + static_cast<size_t>(c) * p.R * p.S;
        float* plane = dx + static_cast<size_t>(c) * p.H * p.W;
        for (int ih = 0; ih < p.H; ih += 4) {
            const int rows = std::min(4, p.H - ih);
            for (int iw0 = 0; iw0 < p.W; iw0 += kLanes) {
                const int count = std::min(kLanes, p.W - iw0);
                Vec acc[4] = {};
                if (!overwrite)
                    for (int k = 0; k < rows; ++k) {
                        const float* in = plane + static_cast<size_t>(ih + k) * p.W + iw0;
                        if (count == kLanes) {
                            acc[k] = load(in);
                        } else {
                            for (int j = 0; j < count; ++j) acc[k][j] = in[j];
                        }
                    }
                for (int r = 0; r < p.R; ++r)
                    for (int s = 0; s < p.S; ++s) {
                        const float wv = wc[r * p.S + s];
                        const float* at = dypad + static_cast<size_t>(ih + p.R - 1 - r) * p.QW + iw0 + p.S - 1 - s;
                        if (rows == 4) {
                            acc[0] += wv * load(at);
                            acc[1] += wv * load(at + p.QW);
                            acc[2] += wv * load(at + 2 * static_cast<size_t>(p.QW));
                            acc[3] += wv * load(at + 3 * static_cast<size_t>(p.QW));
                        } else {
                            for (int k = 0; k < rows; ++k) acc[k] += wv * load(at + static_cast<size_t>(k) * p.QW);
                        }
                    }
                for (int k = 0; k < rows; ++k)
                    storePart(plane + static_cast<size_t>(ih + k) * p.W + iw0, acc[k], count);
            }
        }
    }
}

// sums[c * R*S + r*S + s] += sum_{oh,ow} dyp[oh][ow] * xpad[c][oh + r][ow + s] (dyp: the output gradient with
// zero columns up to a whole vector), and sums[C * R*S] += the sum of dyp when withBias. One vector of partial
// sums per tap, added up in double once per channel.
STRATA_NARROW_TARGET void backwardFilterImage(double* sums, const float* dyp, const float* xpad, bool withBias,
                                              const NarrowPlan& p) {
    const int taps = p.R * p.S;
    Vec acc[kNarrowMaxTaps];
    for (int c = 0; c < p.C; ++c) {
        std::fill(acc, acc + taps, Vec{});
        for (int oh = 0; oh < p.OH; ++oh)
            for (int ow0 = 0; ow0 < p.OW; ow0 += kLanes) {
                const Vec g = load(dyp + static_cast<size_t>(oh) * p.OWr + ow0);
                for (int r = 0; r < p.R; ++r) {
                    const float* row = xpad + (static_cast<size_t>(c) * p.PH + oh + r) * p.PW + ow0;
                    for (int s = 0; s < p.S; ++s) acc[r * p.S + s] += g * load(row + s);
                }
            }
        double* out = sums + static_cast<size_t>(c) * taps;
        for (int t = 0; t < taps; ++t) out[t] += lanesSum(acc[t]);
    }
    if (withBias) {
        Vec total{};
        for (int oh = 0; oh < p.OH; ++oh)
            for (int ow0 = 0; ow0 < p.OW; ow0 += kLanes) total += load(dyp + static_cast<size_t>(oh) * p.OWr + ow0);
        sums[static_cast<size_t>(p.C) * taps] += lanesSum(total);
    }
}
