// Winograd F(4x4, 3x3) convolutions of CpuBackend, for 3x3 stride-1 convolutions on tensors in oneDNN's
// 16-channel blocked layout (nChw16c) with AVX-512: the forward pass and the gradients of the input and of the
// weights (with the bias's).
//
// Each 4x4 patch of the output is computed from a 6x6 patch of the input (Lavin and Gray, "Fast Algorithms
// for Convolutional Neural Networks", 2016):
//   Y = A^T [ U (.) V ] A,   U = G g G^T (per output and input channel),   V = B^T d B (per input channel)
// where (.) is a product per position of the 6x6 patch summed over input channels: for each of the 36
// positions a [tiles x C] x [C x K] product. That is 36 multiplies per input and output channel for 16
// outputs, where the direct convolution does 144. Measured against oneDNN's direct AVX-512 convolution on this
// project's 2-core VM (batch 64, activations too large for the caches, forward and input gradient): 1.3x
// faster with 16 channels at 28x28, 1.8x with 32 channels at 28x28 and 64 at 14x14, 1.3x with 64 at 7x7.
// Its rounding differs from the direct sum's by a few units in the last place of the largest terms.
//
// The vectors hold 16 channels (one block): the input transform runs on whole blocks, and the products
// broadcast one transformed input value against 16 output channels of U. Seven consecutive tiles of the
// batch (a work item) share each load of U; the next item's rows are prefetched while one computes.
// The gradient of the input is the same convolution of dy with the kernels turned 180 degrees and their
// channels swapped, with padding 2 - pad, so it runs through the same code. The weights' gradient reads the
// transforms the other way (see filterItems): measured like the above, 1.1x (16 channels) to 1.8x (32).
#include <algorithm>
#include <cstring>

#include "core/backend/CpuFast.h"
#include "core/backend/CpuParallel.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define STRATA_WINOGRAD_X86 1
#define STRATA_AVX512 __attribute__((target("avx512f")))
#include <immintrin.h>
#else
#define STRATA_AVX512
#endif

namespace strata::cpu {

namespace {

constexpr int kLanes = 16;     // channels per block, per vector
constexpr int kPatch = 36;     // 6x6 positions
constexpr int kTileGroup = 7;  // tiles sharing each load of the transformed weights
// Frozen weights' transforms kept (four times the weights' size), the oldest ids dropped beyond this.
constexpr size_t kMaxFrozenFloats = size_t(64) << 20;  // 256 MiB
constexpr int64_t kMinTiles = 64;                      // without frozen weights (winogradApplies)
constexpr int64_t kMaxChannelProduct = 256 * 256;

// The convolution as the kernel sees it: `in` channels of an inH x inW input, `out` channels of outH x outW.
struct Geometry {
    int n = 0, in = 0, out = 0, inH = 0, inW = 0, outH = 0, outW = 0, padH = 0, padW = 0;
    int tilesW = 0, tiles = 0;  // per image
    int64_t allTiles = 0;       // of the batch

    Geometry(int n_, int in_, int out_, int inH_, int inW_, int padH_, int padW_)
        : n(n_), in(in_), out(out_), inH(inH_), inW(inW_), padH(padH_), padW(padW_) {
        outH = inH + 2 * padH - 2;
        outW = inW + 2 * padW - 2;
        tilesW = (outW + 3) / 4;
        tiles = ((outH + 3) / 4) * tilesW;
        allTiles = int64_t(n) * tiles;
    }
    // Work items: groups of kTileGroup consecutive tiles of the batch (image by image, row by row), so that a
    // small image's few tiles do not leave a group part empty.
    int64_t items() const { return (allTiles + kTileGroup - 1) / kTileGroup; }
    int groupSize(int64_t item) const {
        return static_cast<int>(std::min<int64_t>(kTileGroup, allTiles - item * kTileGroup));
    }
    // Floats of one work part's transformed input.
    size_t scratchFloats() const { return static_cast<size_t>(kTileGroup) * kPatch * in; }
};

// U[p][ob][i][lane] = (G g G^T)[p] for output channel ob * 16 + lane and input channel i, where
// kernel(o, i, rs) gives g's 9 values. G is the 6x3 transform for the points 0, 1, -1, 2, -2 and infinity.
// (Compiled for AVX-512 like the kernels, which it runs before: its 16-lane loops are one vector each.)
template <class Kernel>
STRATA_AVX512 void transformWeights(float* u, int in, int out, const Kernel& kernel) {
    static constexpr float kG[6][3] = {{0.25f, 0.0f, 0.0f},
                                       {-1.0f / 6, -1.0f / 6, -1.0f / 6},
                                       {-1.0f / 6, 1.0f / 6, -1.0f / 6},
                                       {1.0f / 24, 1.0f / 12, 1.0f / 6},
                                       {1.0f / 24, -1.0f / 12, 1.0f / 6},
                                       {0.0f, 0.0f, 1.0f}};
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

size_t weightFloats(int in, int out) { return static_cast<size_t>(kPatch) * in * out; }

#ifdef STRATA_WINOGRAD_X86

constexpr __mmask16 kAllLanes = 0xFFFF;

// The input transform B^T of six vectors d[0], d[ds], ..., d[5 ds] into r[0], r[s], ..., r[5s].
STRATA_AVX512 inline void inputTransform(const __m512* d, int ds, __m512* r, int s) {
    const __m512 d0 = d[0], d1 = d[ds], d2 = d[2 * ds], d3 = d[3 * ds], d4 = d[4 * ds], d5 = d[5 * ds];
    const __m512 four = _mm512_set1_ps(4.0f), five = _mm512_set1_ps(5.0f), two = _mm512_set1_ps(2.0f);
    r[0] = _mm512_add_ps(_mm512_fnmadd_ps(five, d2, _mm512_mul_ps(four, d0)), d4);
    const __m512 a = _mm512_fnmadd_ps(four, d2, d4), b = _mm512_fnmadd_ps(four, d1, d3);
    r[s] = _mm512_add_ps(a, b);
    r[2 * s] = _mm512_sub_ps(a, b);
    const __m512 c = _mm512_sub_ps(d4, d2), e = _mm512_mul_ps(two, _mm512_sub_ps(d3, d1));
    r[3 * s] = _mm512_add_ps(c, e);
    r[4 * s] = _mm512_sub_ps(c, e);
    r[5 * s] = _mm512_add_ps(_mm512_fnmadd_ps(five, d3, _mm512_mul_ps(four, d1)), d5);
}

// The output transform A^T of six vectors m[0], m[ms], ..., m[5 ms] into four, o[0], ..., o[3s].
STRATA_AVX512 inline void outputTransform(const __m512* m, int ms, __m512* o, int s) {
    const __m512 a = _mm512_add_ps(m[ms], m[2 * ms]), b = _mm512_sub_ps(m[ms], m[2 * ms]);
    const __m512 c = _mm512_add_ps(m[3 * ms], m[4 * ms]), d = _mm512_sub_ps(m[3 * ms], m[4 * ms]);
    o[0] = _mm512_add_ps(_mm512_add_ps(m[0], a), c);
    o[s] = _mm512_fmadd_ps(_mm512_set1_ps(2.0f), d, b);
    o[2 * s] = _mm512_fmadd_ps(_mm512_set1_ps(4.0f), c, a);
    o[3 * s] = _mm512_add_ps(_mm512_fmadd_ps(_mm512_set1_ps(8.0f), d, b), m[5 * ms]);
}

struct Job {
    const Geometry* g = nullptr;
    const float* x = nullptr;     // [n, in / 16, inH, inW, 16]
    const float* u = nullptr;     // transformWeights
    const float* bias = nullptr;  // [out] or null
    float* y = nullptr;           // [n, out / 16, outH, outW, 16]
    bool relu = false, accumulate = false;
};

// Transformed input of tile `tile` of image `img`, every channel block, into v[p * in + channel].
STRATA_AVX512 void transformInputTile(const Job& job, int img, int tile, float* v) {
    const Geometry& g = *job.g;
    const int ih0 = (tile / g.tilesW) * 4 - g.padH, iw0 = (tile % g.tilesW) * 4 - g.padW;
    // Positions outside the input read as zeros: masked loads from a clamped address, without branches.
    int rowOffset[6], colOffset[6];
    __mmask16 rowMask[6], colMask[6];
    for (int i = 0; i < 6; ++i) {
        const int ih = ih0 + i, iw = iw0 + i;
        rowOffset[i] = std::clamp(ih, 0, g.inH - 1) * g.inW * kLanes;
        colOffset[i] = std::clamp(iw, 0, g.inW - 1) * kLanes;
        rowMask[i] = ih >= 0 && ih < g.inH ? kAllLanes : 0;
        colMask[i] = iw >= 0 && iw < g.inW ? kAllLanes : 0;
    }
    const int blocks = g.in / kLanes;
    const size_t plane = static_cast<size_t>(g.inH) * g.inW * kLanes;
    for (int cb = 0; cb < blocks; ++cb) {
        const float* xp = job.x + (static_cast<size_t>(img) * blocks + cb) * plane;
        // Along each row as it is loaded (six vectors live at a time), then down each column into v.
        __m512 r[kPatch];
        for (int i = 0; i < 6; ++i) {
            __m512 d[6];
            for (int j = 0; j < 6; ++j)
                d[j] = _mm512_maskz_loadu_ps(rowMask[i] & colMask[j], xp + rowOffset[i] + colOffset[j]);
            inputTransform(d, 1, r + i * 6, 1);
        }
        float* out = v + cb * kLanes;
        const size_t stride = g.in;
        for (int j = 0; j < 6; ++j) {
            __m512 c[6];
            inputTransform(r + j, 6, c, 1);
            for (int i = 0; i < 6; ++i) _mm512_storeu_ps(out + (i * 6 + j) * stride, c[i]);
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
    STRATA_AVX512 void step(size_t count) {
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

STRATA_AVX512 void runItems(const Job& job, int64_t begin, int64_t end, float* scratch) {
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
            __m512 m[kTileGroup][kPatch];
            for (int p = 0; p < kPatch; ++p) {
                next.step(perStep);
                __m512 acc[kTileGroup];
                for (__m512& a : acc) a = _mm512_setzero_ps();
                const float* up = job.u + (static_cast<size_t>(p) * outBlocks + ob) * g.in * kLanes;
                const float* vp = scratch + static_cast<size_t>(p) * g.in;
#pragma GCC unroll 4
                for (int i = 0; i < g.in; ++i) {
                    const __m512 w = _mm512_loadu_ps(up + static_cast<size_t>(i) * kLanes);
                    for (int t = 0; t < kTileGroup; ++t)
                        acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(vp[t * perTile + i]), w, acc[t]);
                }
                for (int t = 0; t < kTileGroup; ++t) m[t][p] = acc[t];
            }
            const __m512 bias = job.bias ? _mm512_loadu_ps(job.bias + ob * kLanes) : _mm512_setzero_ps();
            for (int t = 0; t < count; ++t) {
                float* yp = job.y + (static_cast<size_t>(tileImage[t]) * outBlocks + ob) * outPlane;
                // Along each row of the 6x6 patch (r: 6 rows of 4), then down each column to the outputs.
                __m512 r[24];
                for (int u = 0; u < 6; ++u) outputTransform(m[t] + u * 6, 1, r + u * 4, 1);
                const int tile = tileIndex[t];
                const int oh0 = (tile / g.tilesW) * 4, ow0 = (tile % g.tilesW) * 4;
                const int rows = std::min(4, g.outH - oh0), cols = std::min(4, g.outW - ow0);
                for (int j = 0; j < cols; ++j) {
                    __m512 o[4];
                    outputTransform(r + j, 4, o, 1);
                    for (int i = 0; i < rows; ++i) {
                        float* dst = yp + (static_cast<size_t>(oh0 + i) * g.outW + ow0 + j) * kLanes;
                        __m512 val = _mm512_add_ps(o[i], bias);
                        // (the masked form: GCC 12 warns that _mm512_max_ps's unused source is uninitialized)
                        if (job.relu) val = _mm512_maskz_max_ps(kAllLanes, val, _mm512_setzero_ps());
                        if (job.accumulate) val = _mm512_add_ps(val, _mm512_loadu_ps(dst));
                        _mm512_storeu_ps(dst, val);
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
STRATA_AVX512 inline void gradientTransform(const __m512* d, __m512* z, int s) {
    const __m512 d0 = d[0], d1 = d[s], d2 = d[2 * s], d3 = d[3 * s];
    const __m512 even = _mm512_add_ps(d0, d2), odd = _mm512_add_ps(d1, d3);
    const __m512 even4 = _mm512_fmadd_ps(_mm512_set1_ps(4.0f), d2, d0),
                 odd2 = _mm512_fmadd_ps(_mm512_set1_ps(4.0f), d3, d1);
    z[0] = d0;
    z[s] = _mm512_add_ps(even, odd);
    z[2 * s] = _mm512_sub_ps(even, odd);
    z[3 * s] = _mm512_fmadd_ps(_mm512_set1_ps(2.0f), odd2, even4);
    z[4 * s] = _mm512_fnmadd_ps(_mm512_set1_ps(2.0f), odd2, even4);
    z[5 * s] = d3;
}

// The transformed gradient of output tile `tile` of image `img`, every channel block, into z[p * out + channel];
// outputs beyond the edge count as zeros. Adds the tile's dy to bias[out] when bias is not null.
STRATA_AVX512 void transformGradientTile(const Job& job, int img, int tile, float* z, float* bias) {
    const Geometry& g = *job.g;
    const int oh0 = (tile / g.tilesW) * 4, ow0 = (tile % g.tilesW) * 4;
    const int rows = std::min(4, g.outH - oh0), cols = std::min(4, g.outW - ow0);
    const int blocks = g.out / kLanes;
    const size_t plane = static_cast<size_t>(g.outH) * g.outW * kLanes;
    for (int kb = 0; kb < blocks; ++kb) {
        const float* yp = job.y + (static_cast<size_t>(img) * blocks + kb) * plane;
        __m512 d[16], r[24], zz[kPatch];
        for (int i = 0; i < 4; ++i)
            for (int j = 0; j < 4; ++j)
                d[i * 4 + j] = i < rows && j < cols
                                   ? _mm512_loadu_ps(yp + (static_cast<size_t>(oh0 + i) * g.outW + ow0 + j) * kLanes)
                                   : _mm512_setzero_ps();
        if (bias) {
            __m512 sum = _mm512_loadu_ps(bias + kb * kLanes);
            for (const __m512& v : d) sum = _mm512_add_ps(sum, v);
            _mm512_storeu_ps(bias + kb * kLanes, sum);
        }
        for (int j = 0; j < 4; ++j) gradientTransform(d + j, r + j, 4);           // down each column: r[6][4]
        for (int i = 0; i < 6; ++i) gradientTransform(r + i * 4, zz + i * 6, 1);  // along each row
        for (int p = 0; p < kPatch; ++p) _mm512_storeu_ps(z + static_cast<size_t>(p) * g.out + kb * kLanes, zz[p]);
    }
}

// One part's sums over its items: m[(p * in + c) * out + k] (zeroed here) and bias[out] (when not null).
STRATA_AVX512 void filterItems(const Job& job, int64_t begin, int64_t end, float* scratch, float* m, float* bias) {
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
                __m512 zt[kTileGroup];
                for (int t = 0; t < kTileGroup; ++t)
                    zt[t] = _mm512_loadu_ps(z + t * perTileZ + static_cast<size_t>(p) * g.out + kb * kLanes);
                const float* vp = v + static_cast<size_t>(p) * g.in;
                float* mp = m + static_cast<size_t>(p) * g.in * g.out + kb * kLanes;
                // Four input channels at a time: four independent sums, each over the group's tiles.
                for (int c = 0; c < g.in; c += 4) {
                    __m512 acc[4];
                    for (int j = 0; j < 4; ++j) acc[j] = _mm512_loadu_ps(mp + static_cast<size_t>(c + j) * g.out);
                    for (int t = 0; t < kTileGroup; ++t)
                        for (int j = 0; j < 4; ++j)
                            acc[j] = _mm512_fmadd_ps(_mm512_set1_ps(vp[t * perTileV + c + j]), zt[t], acc[j]);
                    for (int j = 0; j < 4; ++j) _mm512_storeu_ps(mp + static_cast<size_t>(c + j) * g.out, acc[j]);
                }
            }
    }
}

// dw[k][c][3x3] += G^T M[.][c][k] G, 16 output channels at a time.
STRATA_AVX512 void filterFromSums(float* dw, const float* m, int in, int out) {
    static constexpr float kG[6][3] = {{0.25f, 0.0f, 0.0f},
                                       {-1.0f / 6, -1.0f / 6, -1.0f / 6},
                                       {-1.0f / 6, 1.0f / 6, -1.0f / 6},
                                       {1.0f / 24, 1.0f / 12, 1.0f / 6},
                                       {1.0f / 24, -1.0f / 12, 1.0f / 6},
                                       {0.0f, 0.0f, 1.0f}};
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

bool cpuHasAvx512() {
    static const bool has = __builtin_cpu_supports("avx512f") != 0;
    return has;
}

#else

bool cpuHasAvx512() { return false; }

#endif

// The transformed weights for this call: kept by (weightsVersion, direction) for frozen weights, else in the
// workspace's scratch buffer.
template <class Kernel>
const float* transformedWeights(Workspace& ws, uint64_t version, bool backward, int in, int out, const Kernel& kernel) {
    if (version == 0) {
        ws.winogradWeights.resize(weightFloats(in, out));
        transformWeights(ws.winogradWeights.data(), in, out, kernel);
        return ws.winogradWeights.data();
    }
    const uint64_t key = version * 2 + (backward ? 1 : 0);
    auto it = ws.winogradFrozen.find(key);
    if (it != ws.winogradFrozen.end()) return it->second.data();
    size_t kept = weightFloats(in, out);
    for (const auto& entry : ws.winogradFrozen) kept += entry.second.size();
    while (kept > kMaxFrozenFloats && !ws.winogradFrozen.empty()) {
        kept -= ws.winogradFrozen.begin()->second.size();
        ws.winogradFrozen.erase(ws.winogradFrozen.begin());  // the oldest ids (they only grow)
    }
    std::vector<float>& u = ws.winogradFrozen[key];
    u.resize(weightFloats(in, out));
    transformWeights(u.data(), in, out, kernel);
    return u.data();
}

void runWinograd(int threads, Workspace& ws, const Geometry& g, const float* x, const float* u, const float* bias,
                 bool relu, float* y, bool accumulate) {
#ifdef STRATA_WINOGRAD_X86
    Job job;
    job.g = &g, job.x = x, job.u = u, job.bias = bias, job.y = y, job.relu = relu, job.accumulate = accumulate;
    const int parts = parallelParts(threads, g.items(), 1);
    ws.prepare(0, parts, g.scratchFloats());
    parallelFor(threads, g.items(), 1,
                [&](int64_t begin, int64_t end, int part) { runItems(job, begin, end, ws.slot(part)); });
#else
    (void)threads, (void)ws, (void)g, (void)x, (void)u, (void)bias, (void)relu, (void)y, (void)accumulate;
#endif
}

void filterGradient(int threads, Workspace& ws, const Geometry& g, float* dw, float* dbias, const float* dy,
                    const float* x) {
#ifdef STRATA_WINOGRAD_X86
    Job job;
    job.g = &g, job.x = x, job.y = const_cast<float*>(dy);  // dy is only read: the prefetcher's "output" rows
    const int parts = parallelParts(threads, g.items(), 1);
    const size_t sums = static_cast<size_t>(kPatch) * g.in * g.out;
    const size_t perPart = static_cast<size_t>(kTileGroup) * kPatch * (g.in + g.out) + sums + g.out;
    ws.prepare(0, parts, perPart);
    auto sumsOf = [&](int part) { return ws.slot(part) + perPart - sums - g.out; };
    auto biasOf = [&](int part) { return ws.slot(part) + perPart - g.out; };
    parallelFor(threads, g.items(), 1, [&](int64_t begin, int64_t end, int part) {
        filterItems(job, begin, end, ws.slot(part), sumsOf(part), dbias ? biasOf(part) : nullptr);
    });
    // The parts' sums, added in part order (the same result for the same thread count).
    float* m = sumsOf(0);
    for (int part = 1; part < parts; ++part) {
        const float* other = sumsOf(part);
        for (size_t i = 0; i < sums; ++i) m[i] += other[i];
    }
    filterFromSums(dw, m, g.in, g.out);
    if (dbias)
        for (int part = 0; part < parts; ++part)
            for (int k = 0; k < g.out; ++k) dbias[k] += biasOf(part)[k];
#else
    (void)threads, (void)ws, (void)g, (void)dw, (void)dbias, (void)dy, (void)x;
#endif
}

}  // namespace

bool winogradAvailable() { return cpuHasAvx512(); }

bool winogradApplies(const Workspace& ws, const ConvDesc& d) {
    return ws.useWinograd && cpuHasAvx512() && d.r == 3 && d.s == 3 && d.strideH == 1 && d.strideW == 1 &&
           d.dilationH == 1 && d.dilationW == 1 && d.groups == 1 && d.srcBlock == kLanes && d.dstBlock == kLanes &&
           d.c % kLanes == 0 && d.k % kLanes == 0 && d.padH >= 0 && d.padH <= 2 && d.padW >= 0 && d.padW <= 2 &&
           d.outH() >= 1 && d.outW() >= 1 &&
           // Each group of tiles reads all of U (and the weights' gradient adds to sums of its size): measured
           // faster than the direct convolution up to 256 x 256 channels (1.2-1.4x at 7x7); beyond, untried.
           int64_t(d.c) * d.k <= kMaxChannelProduct &&
           // Weights that change between calls are transformed in every call: worth it from a few dozen tiles
           // (32 channels at 28x28, batch 1: 49 tiles, as fast as the direct convolution; 1.7x when frozen).
           (d.weightsVersion != 0 || int64_t(d.n) * ((d.outH() + 3) / 4) * ((d.outW() + 3) / 4) >= kMinTiles);
}

void winogradForward(int threads, Workspace& ws, float* y, const float* x, const float* w, const float* bias, bool relu,
                     const ConvDesc& d) {
    const Geometry g(d.n, d.c, d.k, d.h, d.w, d.padH, d.padW);
    const int c = d.c;
    const float* u = transformedWeights(ws, d.weightsVersion, false, d.c, d.k, [w, c](int o, int i, int rs) {
        return w[(static_cast<size_t>(o) * c + i) * 9 + rs];
    });
    runWinograd(threads, ws, g, x, u, bias, relu, y, false);
}

void winogradBackwardData(int threads, Workspace& ws, float* dx, const float* dy, const float* w, const ConvDesc& d,
                          bool overwrite) {
    // dx = dy correlated with the kernels turned 180 degrees, input and output channels swapped.
    const Geometry g(d.n, d.k, d.c, d.outH(), d.outW(), 2 - d.padH, 2 - d.padW);
    const int c = d.c;
    const float* u = transformedWeights(ws, d.weightsVersion, true, d.k, d.c, [w, c](int o, int i, int rs) {
        return w[(static_cast<size_t>(i) * c + o) * 9 + (8 - rs)];
    });
    runWinograd(threads, ws, g, dy, u, nullptr, false, dx, !overwrite);
}

void winogradBackwardFilter(int threads, Workspace& ws, float* dw, float* dbias, const float* dy, const float* x,
                            const ConvDesc& d) {
    const Geometry g(d.n, d.c, d.k, d.h, d.w, d.padH, d.padW);
    filterGradient(threads, ws, g, dw, dbias, dy, x);
}

}  // namespace strata::cpu
