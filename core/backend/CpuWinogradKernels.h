// The kernels of CpuWinograd.cpp for one vector width, with no include guard: CpuWinograd.cpp includes this file
// twice, inside namespace avx512 (STRATA_WINOGRAD_LANES 16, nChw16c, target "avx512f") and inside namespace
// avx2 (8, nChw8c, target "avx2,fma"), after defining Geometry, Job, kG, kPatch and kTileGroup. Every function here
// carries the target attribute, so each copy is compiled for its own instruction set and the binary still runs
// on a CPU with neither (CpuWinograd.cpp picks a copy at run time). Only for CpuWinograd.cpp.

constexpr int kLanes = STRATA_WINOGRAD_LANES;  // channels per block, per vector

#if STRATA_WINOGRAD_LANES == 16
using Vec = __m512;
using Mask = __mmask16;
STRATA_WINOGRAD_TARGET inline Vec vload(const float* p) { return _mm512_loadu_ps(p); }
STRATA_WINOGRAD_TARGET inline void vstore(float* p, Vec v) { _mm512_storeu_ps(p, v); }
STRATA_WINOGRAD_TARGET inline Vec vadd(Vec a, Vec b) { return _mm512_add_ps(a, b); }
STRATA_WINOGRAD_TARGET inline Vec vsub(Vec a, Vec b) { return _mm512_sub_ps(a, b); }
STRATA_WINOGRAD_TARGET inline Vec vmul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
STRATA_WINOGRAD_TARGET inline Vec vfmadd(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
STRATA_WINOGRAD_TARGET inline Vec vfnmadd(Vec a, Vec b, Vec c) { return _mm512_fnmadd_ps(a, b, c); }
STRATA_WINOGRAD_TARGET inline Vec vset1(float v) { return _mm512_set1_ps(v); }
STRATA_WINOGRAD_TARGET inline Vec vzero() { return _mm512_setzero_ps(); }
// (The masked form: GCC 12 warns that _mm512_max_ps's unused source is uninitialized.)
STRATA_WINOGRAD_TARGET inline Vec vrelu(Vec v) {
    return _mm512_maskz_max_ps(static_cast<Mask>(0xFFFF), v, _mm512_setzero_ps());
}
STRATA_WINOGRAD_TARGET inline Mask allLanes() { return static_cast<Mask>(0xFFFF); }
STRATA_WINOGRAD_TARGET inline Mask noLanes() { return 0; }
STRATA_WINOGRAD_TARGET inline Mask maskAnd(Mask a, Mask b) { return static_cast<Mask>(a & b); }
// Lanes of a masked-out load read as zeros, and its address is not touched.
STRATA_WINOGRAD_TARGET inline Vec vmaskload(Mask m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
#elif STRATA_WINOGRAD_LANES == 8
using Vec = __m256;
using Mask = __m256i;
STRATA_WINOGRAD_TARGET inline Vec vload(const float* p) { return _mm256_loadu_ps(p); }
STRATA_WINOGRAD_TARGET inline void vstore(float* p, Vec v) { _mm256_storeu_ps(p, v); }
STRATA_WINOGRAD_TARGET inline Vec vadd(Vec a, Vec b) { return _mm256_add_ps(a, b); }
STRATA_WINOGRAD_TARGET inline Vec vsub(Vec a, Vec b) { return _mm256_sub_ps(a, b); }
STRATA_WINOGRAD_TARGET inline Vec vmul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
STRATA_WINOGRAD_TARGET inline Vec vfmadd(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
STRATA_WINOGRAD_TARGET inline Vec vfnmadd(Vec a, Vec b, Vec c) { return _mm256_fnmadd_ps(a, b, c); }
STRATA_WINOGRAD_TARGET inline Vec vset1(float v) { return _mm256_set1_ps(v); }
STRATA_WINOGRAD_TARGET inline Vec vzero() { return _mm256_setzero_ps(); }
STRATA_WINOGRAD_TARGET inline Vec vrelu(Vec v) { return _mm256_max_ps(v, _mm256_setzero_ps()); }
STRATA_WINOGRAD_TARGET inline Mask allLanes() { return _mm256_set1_epi32(-1); }
STRATA_WINOGRAD_TARGET inline Mask noLanes() { return _mm256_setzero_si256(); }
STRATA_WINOGRAD_TARGET inline Mask maskAnd(Mask a, Mask b) { return _mm256_and_si256(a, b); }
// Lanes of a masked-out load read as zeros, and its address is not touched.
STRATA_WINOGRAD_TARGET inline Vec vmaskload(Mask m, const float* p) { return _mm256_maskload_ps(p, m); }
#else
#error "STRATA_WINOGRAD_LANES must be 16 or 8"
#endif

// U[p][ob][i][lane] = (G g G^T)[p] for output channel ob * kLanes + lane and input channel i, where
// kernel(o, i, rs) gives g's 9 values (G: kG).
// (Compiled for the kernels' instruction set: its lane loops are one vector each.)
template <class Kernel>
STRATA_WINOGRAD_TARGET void transformWeights(float* u, int in, int out, const Kernel& kernel) {
    const int blocks = out / kLanes;
    for (int ob = 0; ob < blocks; ++ob)
        for (int i = 0; i < in; ++i) {
            float g[9][kLanes];
            for (int rs = 0; rs < 9; ++rs)
                for (int l = 0; l < kLanes; ++l) g[rs][l] = kernel(ob * kLanes + l, i, rs);
            float t[6][3][kLanes];  // G g
            for (int a = 0; a < 6; ++a)
                for (int b = 0; b < 3; ++b)
                    for (int l = 0; l < kLanes; ++l)
                        t[a][b][l] = kG[a][0] * g[b][l] + kG[a][1] * g[3 + b][l] + kG[a][2] * g[6 + b][l];
            for (int a = 0; a < 6; ++a)
                for (int b = 0; b < 6; ++b) {
                    float* dst = u + ((static_cast<size_t>(a * 6 + b) * blocks + ob) * in + i) * kLanes;
                    for (int l = 0; l < kLanes; ++l)
                        dst[l] = t[a][0][l] * kG[b][0] + t[a][1][l] * kG[b][1] + t[a][2][l] * kG[b][2];
                }
        }
}

// The input transform B^T of six vectors d[0], d[ds], ..., d[5 ds] into r[0], r[s], ..., r[5s].
STRATA_WINOGRAD_TARGET inline void inputTransform(const Vec* d, int ds, Vec* r, int s) {
    const Vec d0 = d[0], d1 = d[ds], d2 = d[2 * ds], d3 = d[3 * ds], d4 = d[4 * ds], d5 = d[5 * ds];
    const Vec four = vset1(4.0f), five = vset1(5.0f), two = vset1(2.0f);
    r[0] = vadd(vfnmadd(five, d2, vmul(four, d0)), d4);
    const Vec a = vfnmadd(four, d2, d4), b = vfnmadd(four, d1, d3);
    r[s] = vadd(a, b);
    r[2 * s] = vsub(a, b);
    const Vec c = vsub(d4, d2), e = vmul(two, vsub(d3, d1));
    r[3 * s] = vadd(c, e);
    r[4 * s] = vsub(c, e);
    r[5 * s] = vadd(vfnmadd(five, d3, vmul(four, d1)), d5);
}

// The output transform A^T of six vectors m[0], m[ms], ..., m[5 ms] into four, o[0], ..., o[3s].
STRATA_WINOGRAD_TARGET inline void outputTransform(const Vec* m, int ms, Vec* o, int s) {
    const Vec a = vadd(m[ms], m[2 * ms]), b = vsub(m[ms], m[2 * ms]);
    const Vec c = vadd(m[3 * ms], m[4 * ms]), d = vsub(m[3 * ms], m[4 * ms]);
    o[0] = vadd(vadd(m[0], a), c);
    o[s] = vfmadd(vset1(2.0f), d, b);
    o[2 * s] = vfmadd(vset1(4.0f), c, a);
    o[3 * s] = vadd(vfmadd(vset1(8.0f), d, b), m[5 * ms]);
}

// Transformed input of tile `tile` of image `img`, every channel block, into v[p * in + channel].
STRATA_WINOGRAD_TARGET void transformInputTile(const Job& job, int img, int tile, float* v) {
    const Geometry& g = *job.g;
    const int ih0 = (tile / g.tilesW) * 4 - g.padH, iw0 = (tile % g.tilesW) * 4 - g.padW;
    // Positions outside the input read as zeros: masked loads from a clamped address, without branches.
    int rowOffset[6], colOffset[6];
    Mask rowMask[6], colMask[6];
    for (int i = 0; i < 6; ++i) {
        const int ih = ih0 + i, iw = iw0 + i;
        rowOffset[i] = std::clamp(ih, 0, g.inH - 1) * g.inW * kLanes;
        colOffset[i] = std::clamp(iw, 0, g.inW - 1) * kLanes;
        rowMask[i] = ih >= 0 && ih < g.inH ? allLanes() : noLanes();
        colMask[i] = iw >= 0 && iw < g.inW ? allLanes() : noLanes();
    }
    const int blocks = g.in / kLanes;
    const size_t plane = static_cast<size_t>(g.inH) * g.inW * kLanes;
    for (int cb = 0; cb < blocks; ++cb) {
        const float* xp = job.x + (static_cast<size_t>(img) * blocks + cb) * plane;
        // Along each row as it is loaded (six vectors live at a time), then down each column into v.
        Vec r[kPatch];
        for (int i = 0; i < 6; ++i) {
            Vec d[6];
            for (int j = 0; j < 6; ++j)
                d[j] = vmaskload(maskAnd(rowMask[i], colMask[j]), xp + rowOffset[i] + colOffset[j]);
            inputTransform(d, 1, r + i * 6, 1);
        }
        float* out = v + cb * kLanes;
        const size_t stride = g.in;
        for (int j = 0; j < 6; ++j) {
            Vec c[6];
            inputTransform(r + j, 6, c, 1);
            for (int i = 0; i < 6; ++i) vstore(out + (i * 6 + j) * stride, c[i]);
        }
    }
}

// Prefetches the input rows and output rows of a work item a few cache lines at a time, so that the next item's
// memory arrives while this one computes: in a training step the activations are not in cache, and without
// this the kernel waited on memory longer than it computed (0.76 ms against 0.51 ms for oneDNN's direct
// convolution, 16 channels, 28x28, batch 64, buffers larger than L3).
class Prefetcher {
public:
    Prefetcher(const Job& job, int64_t item) {
        const Geometry& g = *job.g;
        // The rows of each tile row the group touches (a group may end one tile row, or image, and begin the next).
        int64_t last = -1;
        for (int t = 0; t < g.groupSize(item); ++t) {
            const int64_t tile = item * kTileGroup + t, row = tile / g.tilesW;
            if (row != last)
                addTileRow(g, job, static_cast<int>(tile / g.tiles), static_cast<int>(row % (g.tiles / g.tilesW)));
            last = row;
        }
    }
    size_t lines() const { return m_total; }
    // The next `count` cache lines.
    STRATA_WINOGRAD_TARGET void step(size_t count) {
        for (; count > 0 && m_range < m_count; --count) {
            const Range& r = m_ranges[m_range];
            _mm_prefetch(r.begin + m_line * kLine, _MM_HINT_T0);
            if (++m_line == r.lines) m_line = 0, ++m_range;
        }
    }

private:
    static constexpr size_t kLine = 64;
    struct Range {
        const char* begin = nullptr;
        size_t lines = 0;
    };
    void addTileRow(const Geometry& g, const Job& job, int img, int th) {
        const int in0 = std::max(0, th * 4 - g.padH), in1 = std::min(g.inH, th * 4 - g.padH + 6);
        const int out0 = th * 4, out1 = std::min(g.outH, th * 4 + 4);
        const size_t inRow = static_cast<size_t>(g.inW) * kLanes, outRow = static_cast<size_t>(g.outW) * kLanes;
        const int inBlocks = g.in / kLanes, outBlocks = g.out / kLanes;
        for (int cb = 0; cb < inBlocks && in1 > in0; ++cb)
            add(job.x + ((static_cast<size_t>(img) * inBlocks + cb) * g.inH + in0) * inRow, (in1 - in0) * inRow);
        for (int ob = 0; ob < outBlocks; ++ob)
            add(job.y + ((static_cast<size_t>(img) * outBlocks + ob) * g.outH + out0) * outRow, (out1 - out0) * outRow);
    }
    void add(const float* p, size_t floats) {
        if (m_count == kMaxRanges) return;
        const size_t lines = (floats * sizeof(float) + kLine - 1) / kLine;
        m_ranges[m_count++] = {reinterpret_cast<const char*>(p), lines};
        m_total += lines;
    }
    static constexpr int kMaxRanges = 64;
    Range m_ranges[kMaxRanges];
    int m_count = 0, m_range = 0;
    size_t m_line = 0, m_total = 0;
};

STRATA_WINOGRAD_TARGET void runItems(const Job& job, int64_t begin, int64_t end, float* scratch) {
    const Geometry& g = *job.g;
    const int outBlocks = g.out / kLanes;
    const size_t perTile = static_cast<size_t>(kPatch) * g.in;
    const size_t outPlane = static_cast<size_t>(g.outH) * g.outW * kLanes;
    for (int64_t item = begin; item < end; ++item) {
        const int count = g.groupSize(item);
        // Tile t of the group: image tileImage[t], tile tileIndex[t] of that image.
        int tileImage[kTileGroup], tileIndex[kTileGroup];
        for (int t = 0; t < count; ++t) {
            const int64_t tile = item * kTileGroup + t;
            tileImage[t] = static_cast<int>(tile / g.tiles);
            tileIndex[t] = static_cast<int>(tile % g.tiles);
        }
        Prefetcher next(job, item + 1 < end ? item + 1 : item);
        const size_t perStep = (next.lines() + kPatch * outBlocks - 1) / (kPatch * outBlocks);
        for (int t = 0; t < count; ++t) transformInputTile(job, tileImage[t], tileIndex[t], scratch + t * perTile);
        // A short last group: the missing tiles' products are computed from zeros and dropped.
        if (count < kTileGroup)
            std::memset(scratch + count * perTile, 0, (kTileGroup - count) * perTile * sizeof(float));
        for (int ob = 0; ob < outBlocks; ++ob) {
            Vec m[kTileGroup][kPatch];
            for (int p = 0; p < kPatch; ++p) {
                next.step(perStep);
                Vec acc[kTileGroup];
                for (Vec& a : acc) a = vzero();
                const float* up = job.u + (static_cast<size_t>(p) * outBlocks + ob) * g.in * kLanes;
                const float* vp = scratch + static_cast<size_t>(p) * g.in;
#pragma GCC unroll 4
                for (int i = 0; i < g.in; ++i) {
                    const Vec w = vload(up + static_cast<size_t>(i) * kLanes);
                    for (int t = 0; t < kTileGroup; ++t) acc[t] = vfmadd(vset1(vp[t * perTile + i]), w, acc[t]);
                }
                for (int t = 0; t < kTileGroup; ++t) m[t][p] = acc[t];
            }
            const Vec bias = job.bias ? vload(job.bias + ob * kLanes) : vzero();
            for (int t = 0; t < count; ++t) {
                float* yp = job.y + (static_cast<size_t>(tileImage[t]) * outBlocks + ob) * outPlane;
                // Along each row of the 6x6 patch (r: 6 rows of 4), then down each column to the outputs.
                Vec r[24];
                for (int u = 0; u < 6; ++u) outputTransform(m[t] + u * 6, 1, r + u * 4, 1);
                const int tile = tileIndex[t];
                const int oh0 = (tile / g.tilesW) * 4, ow0 = (tile % g.tilesW) * 4;
                const int rows = std::min(4, g.outH - oh0), cols = std::min(4, g.outW - ow0);
                for (int j = 0; j < cols; ++j) {
                    Vec o[4];
                    outputTransform(r + j, 4, o, 1);
                    for (int i = 0; i < rows; ++i) {
                        float* dst = yp + (static_cast<size_t>(oh0 + i) * g.outW + ow0 + j) * kLanes;
                        Vec val = vadd(o[i], bias);
                        if (job.relu) val = vrelu(val);
                        if (job.accumulate) val = vadd(val, vload(dst));
                        vstore(dst, val);
                    }
                }
            }
        }
    }
}

// ---- the weights' gradient ----
// dW[k][c] = G^T [ sum over tiles of (A dy A^T)[k] (.) (B^T d B)[c] ] G: the same transforms read the other way
// (the 4x4 tile of dy takes the place of the kernel), each tile adding a [C x tiles] x [tiles x K] product per
// position into a sum M[p][c][k] that is turned into the 3x3 gradients once, after the batch.

// A (6x4: the transpose of the output transform) on four vectors d[0], d[s], d[2s], d[3s] into six, z[0..5s].
STRATA_WINOGRAD_TARGET inline void gradientTransform(const Vec* d, Vec* z, int s) {
    const Vec d0 = d[0], d1 = d[s], d2 = d[2 * s], d3 = d[3 * s];
    const Vec even = vadd(d0, d2), odd = vadd(d1, d3);
    const Vec even4 = vfmadd(vset1(4.0f), d2, d0), odd2 = vfmadd(vset1(4.0f), d3, d1);
    z[0] = d0;
    z[s] = vadd(even, odd);
    z[2 * s] = vsub(even, odd);
    z[3 * s] = vfmadd(vset1(2.0f), odd2, even4);
    z[4 * s] = vfnmadd(vset1(2.0f), odd2, even4);
    z[5 * s] = d3;
}

// The transformed gradient of output tile `tile` of image `img`, every channel block, into z[p * out + channel];
// outputs beyond the edge count as zeros. Adds the tile's dy to bias[out] when bias is not null.
STRATA_WINOGRAD_TARGET void transformGradientTile(const Job& job, int img, int tile, float* z, float* bias) {
    const Geometry& g = *job.g;
    const int oh0 = (tile / g.tilesW) * 4, ow0 = (tile % g.tilesW) * 4;
    const int rows = std::min(4, g.outH - oh0), cols = std::min(4, g.outW - ow0);
    const int blocks = g.out / kLanes;
    const size_t plane = static_cast<size_t>(g.outH) * g.outW * kLanes;
    for (int kb = 0; kb < blocks; ++kb) {
        const float* yp = job.y + (static_cast<size_t>(img) * blocks + kb) * plane;
        Vec d[16], r[24], zz[kPatch];
        for (int i = 0; i < 4; ++i)
            for (int j = 0; j < 4; ++j)
                d[i * 4 + j] = i < rows && j < cols
                                   ? vload(yp + (static_cast<size_t>(oh0 + i) * g.outW + ow0 + j) * kLanes)
                                   : vzero();
        if (bias) {
            Vec sum = vload(bias + kb * kLanes);
            for (const Vec& v : d) sum = vadd(sum, v);
            vstore(bias + kb * kLanes, sum);
        }
        for (int j = 0; j < 4; ++j) gradientTransform(d + j, r + j, 4);           // down each column: r[6][4]
        for (int i = 0; i < 6; ++i) gradientTransform(r + i * 4, zz + i * 6, 1);  // along each row
        for (int p = 0; p < kPatch; ++p) vstore(z + static_cast<size_t>(p) * g.out + kb * kLanes, zz[p]);
    }
}

// One part's sums over its items: m[(p * in + c) * out + k] (zeroed here) and bias[out] (when not null).
STRATA_WINOGRAD_TARGET void filterItems(const Job& job, int64_t begin, int64_t end, float* scratch, float* m,
                                        float* bias) {
    const Geometry& g = *job.g;
    const int outBlocks = g.out / kLanes;
    const size_t perTileV = static_cast<size_t>(kPatch) * g.in, perTileZ = static_cast<size_t>(kPatch) * g.out;
    float* v = scratch;
    float* z = scratch + kTileGroup * perTileV;
    std::memset(m, 0, static_cast<size_t>(kPatch) * g.in * g.out * sizeof(float));
    if (bias) std::memset(bias, 0, static_cast<size_t>(g.out) * sizeof(float));
    for (int64_t item = begin; item < end; ++item) {
        const int count = g.groupSize(item);
        Prefetcher next(job, item + 1 < end ? item + 1 : item);
        const size_t perStep = (next.lines() + kPatch * outBlocks - 1) / (kPatch * outBlocks);
        for (int t = 0; t < count; ++t) {
            const int64_t tile = item * kTileGroup + t;
            const int img = static_cast<int>(tile / g.tiles), index = static_cast<int>(tile % g.tiles);
            transformInputTile(job, img, index, v + t * perTileV);
            transformGradientTile(job, img, index, z + t * perTileZ, bias);
        }
        // A short last group: its missing tiles add products of zeros.
        if (count < kTileGroup) {
            std::memset(v + count * perTileV, 0, (kTileGroup - count) * perTileV * sizeof(float));
            std::memset(z + count * perTileZ, 0, (kTileGroup - count) * perTileZ * sizeof(float));
        }
        for (int p = 0; p < kPatch; ++p)
            for (int kb = 0; kb < outBlocks; ++kb) {
                next.step(perStep);
                Vec zt[kTileGroup];
                for (int t = 0; t < kTileGroup; ++t)
                    zt[t] = vload(z + t * perTileZ + static_cast<size_t>(p) * g.out + kb * kLanes);
                const float* vp = v + static_cast<size_t>(p) * g.in;
                float* mp = m + static_cast<size_t>(p) * g.in * g.out + kb * kLanes;
                // Four input channels at a time: four independent sums, each over the group's tiles.
                for (int c = 0; c < g.in; c += 4) {
                    Vec acc[4];
                    for (int j = 0; j < 4; ++j) acc[j] = vload(mp + static_cast<size_t>(c + j) * g.out);
                    for (int t = 0; t < kTileGroup; ++t)
                        for (int j = 0; j < 4; ++j) acc[j] = vfmadd(vset1(vp[t * perTileV + c + j]), zt[t], acc[j]);
                    for (int j = 0; j < 4; ++j) vstore(mp + static_cast<size_t>(c + j) * g.out, acc[j]);
                }
            }
    }
}

// dw[k][c][3x3] += G^T M[.][c][k] G, one block of output channels at a time.
STRATA_WINOGRAD_TARGET void filterFromSums(float* dw, const float* m, int in, int out) {
    for (int c = 0; c < in; ++c)
        for (int kb = 0; kb < out / kLanes; ++kb) {
            float t[6][3][kLanes];  // M G, by rows of the 6x6 patch
            for (int u = 0; u < 6; ++u)
                for (int b = 0; b < 3; ++b)
                    for (int l = 0; l < kLanes; ++l) {
                        float sum = 0.0f;
                        for (int v = 0; v < 6; ++v)
                            sum += m[(static_cast<size_t>(u * 6 + v) * in + c) * out + kb * kLanes + l] * kG[v][b];
                        t[u][b][l] = sum;
                    }
            for (int a = 0; a < 3; ++a)
                for (int b = 0; b < 3; ++b)
                    for (int l = 0; l < kLanes; ++l) {
                        float sum = 0.0f;
                        for (int u = 0; u < 6; ++u) sum += kG[u][a] * t[u][b][l];
                        dw[(static_cast<size_t>(kb * kLanes + l) * in + c) * 9 + a * 3 + b] += sum;
                    }
        }
}
