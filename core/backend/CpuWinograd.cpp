// Winograd F(4x4, 3x3) convolutions of CpuBackend, for 3x3 stride-1 convolutions on tensors in oneDNN's
// blocked layout: nChw16c with AVX-512, nChw8c with AVX2 and FMA (the kernels, CpuWinogradKernels.h, are
// compiled once for each). The forward pass and the gradients of the input and of the weights (with the bias's).
//
// Each 4x4 patch of the output is computed from a 6x6 patch of the input (Lavin and Gray, "Fast Algorithms
// for Convolutional Neural Networks", 2016):
//   Y = A^T [ U (.) V ] A,   U = G g G^T (per output and input channel),   V = B^T d B (per input channel)
// where (.) is a product per position of the 6x6 patch summed over input channels: for each of the 36
// positions a [tiles x C] x [C x K] product. That is 36 multiplies per input and output channel for 16
// outputs, where the direct convolution does 144. Measured against oneDNN's direct AVX-512 convolution on this
// project's 2-core VM (batch 64, activations too large for the caches, forward and input gradient): 1.4x
// faster with 16 channels at 28x28, 1.9x with 32 channels at 28x28, 1.6x with 64 at 14x14, 1.3x at 7x7
// (bench/bench_conv_winograd).
// With AVX2 (oneDNN kept to it on the same VM): 1.7-2.7x its direct AVX2 convolution.
// Its rounding differs from the direct sum's by a few units in the last place of the largest terms.
//
// The vectors hold one block of channels: the input transform runs on whole blocks, and the products
// broadcast one transformed input value against a block of output channels of U. Seven consecutive tiles of the
// batch (a work item) share each load of U; the next item's rows are prefetched while one computes.
// The gradient of the input is the same convolution of dy with the kernels turned 180 degrees and their
// channels swapped, with padding 2 - pad, so it runs through the same code. The weights' gradient reads the
// transforms the other way (see filterItems): measured like the above, 1.2-1.4x (16 channels) to 1.9x (32).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/backend/CpuFast.h"
#include "core/backend/CpuParallel.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define STRATA_WINOGRAD_X86 1
#include <immintrin.h>
#endif

namespace strata::cpu {

namespace {

constexpr int kPatch = 36;  // 6x6 positions
// G, the 6x3 weight transform for the points 0, 1, -1, 2, -2 and infinity.
constexpr float kG[6][3] = {{0.25f, 0.0f, 0.0f},
                            {-1.0f / 6, -1.0f / 6, -1.0f / 6},
                            {-1.0f / 6, 1.0f / 6, -1.0f / 6},
                            {1.0f / 24, 1.0f / 12, 1.0f / 6},
                            {1.0f / 24, -1.0f / 12, 1.0f / 6},
                            {0.0f, 0.0f, 1.0f}};
constexpr int kTileGroup = 7;  // tiles sharing each load of the transformed weights
// Frozen weights' transforms kept (four times the weights' size), the oldest ids dropped beyond this.
constexpr size_t kMaxFrozenFloats = size_t(64) << 20;  // 256 MiB
constexpr int64_t kMinTiles = 64;                      // without frozen weights (winogradApplies)
constexpr int64_t kMaxChannelProduct = 256 * 256;

// The convolution as the kernel sees it: `in` channels of an inH x inW input, `out` channels of outH x outW.
struct Geometry {
    int block = 0;  // channels per block of both tensors (16 or 8), so which kernels run
    int n = 0, in = 0, out = 0, inH = 0, inW = 0, outH = 0, outW = 0, padH = 0, padW = 0;
    int tilesW = 0, tiles = 0;  // per image
    int64_t allTiles = 0;       // of the batch

    Geometry(int block_, int n_, int in_, int out_, int inH_, int inW_, int padH_, int padW_)
        : block(block_), n(n_), in(in_), out(out_), inH(inH_), inW(inW_), padH(padH_), padW(padW_) {
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

size_t weightFloats(int in, int out) { return static_cast<size_t>(kPatch) * in * out; }

struct Job {
    const Geometry* g = nullptr;
    const float* x = nullptr;     // [n, in / B, inH, inW, B] for the block B
    const float* u = nullptr;     // transformWeights
    const float* bias = nullptr;  // [out] or null
    float* y = nullptr;           // [n, out / B, outH, outW, B]
    bool relu = false, accumulate = false;
};

#ifdef STRATA_WINOGRAD_X86

namespace avx512 {
#define STRATA_WINOGRAD_LANES 16
#define STRATA_WINOGRAD_TARGET __attribute__((target("avx512f")))
#include "core/backend/CpuWinogradKernels.h"
#undef STRATA_WINOGRAD_TARGET
#undef STRATA_WINOGRAD_LANES
}  // namespace avx512

namespace avx2 {
#define STRATA_WINOGRAD_LANES 8
#define STRATA_WINOGRAD_TARGET __attribute__((target("avx2,fma")))
#include "core/backend/CpuWinogradKernels.h"
#undef STRATA_WINOGRAD_TARGET
#undef STRATA_WINOGRAD_LANES
}  // namespace avx2

// The bf16 products (Workspace::winogradBf16): the forward's and input gradient's 36 [tiles x C] x [C x K]
// products with bf16 operands, two input channels per vdpbf16ps (16 lanes of a pair of products each, summed in
// float32), so half the multiply instructions of the float32 kernel and half the bytes of U. The transforms
// stay float32: the float32 transformed tiles and weights are rounded (to nearest even) just before the products.
namespace avx512bf16 {

#define STRATA_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

// dst[2 l] = bf16(lo[l]), dst[2 l + 1] = bf16(hi[l]) for the 16 lanes l: the pairs vdpbf16ps multiplies.
STRATA_BF16_TARGET inline void packPairs(uint16_t* dst, const float* lo, const float* hi) {
    // cvtne2ps_pbh(hi, lo): lo's 16 values in the low half, hi's in the high half; the permutation interleaves them.
    const __m512i halves = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(_mm512_loadu_ps(hi), _mm512_loadu_ps(lo)));
    const __m512i order = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                           21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    _mm512_storeu_si512(dst, _mm512_permutexvar_epi16(order, halves));
}

// ub[((p * blocks + ob) * in / 2 + i / 2) * 32 + lane * 2 + i % 2] = bf16(u[((p * blocks + ob) * in + i) * 16 +
// lane]): each 32-bit lane holds input channels i and i + 1 of one output channel, as vdpbf16ps pairs them.
STRATA_BF16_TARGET void packWeights(uint16_t* ub, const float* u, int in, int out) {
    const size_t rows = static_cast<size_t>(kPatch) * (out / 16);
    for (size_t r = 0; r < rows; ++r)
        for (int i = 0; i < in; i += 2) {
            const float* a = u + (r * in + i) * 16;
            packPairs(ub + (r * in + i) * 16, a, a + 16);
        }
}

// `floats` float32 values (a multiple of 32) rounded to bf16, in order.
STRATA_BF16_TARGET void toBf16(uint16_t* dst, const float* src, size_t floats) {
    for (size_t i = 0; i < floats; i += 32)
        _mm512_storeu_si512(dst + i, reinterpret_cast<__m512i>(
                                         _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + i + 16), _mm512_loadu_ps(src + i))));
}

// avx512::runItems with the products in bf16; ub from packWeights, scratch: the float32 transformed tiles and
// then their bf16 copy.
STRATA_BF16_TARGET void runItems(const Job& job, const uint16_t* ub, int64_t begin, int64_t end, float* scratch) {
    using avx512::Prefetcher;
    using avx512::Vec;
    const Geometry& g = *job.g;
    const int outBlocks = g.out / 16;
    const size_t perTile = static_cast<size_t>(kPatch) * g.in;
    const size_t outPlane = static_cast<size_t>(g.outH) * g.outW * 16;
    uint16_t* vb = reinterpret_cast<uint16_t*>(scratch + kTileGroup * perTile);
    for (int64_t item = begin; item < end; ++item) {
        const int count = g.groupSize(item);
        int tileImage[kTileGroup], tileIndex[kTileGroup];
        for (int t = 0; t < count; ++t) {
            const int64_t tile = item * kTileGroup + t;
            tileImage[t] = static_cast<int>(tile / g.tiles);
            tileIndex[t] = static_cast<int>(tile % g.tiles);
        }
        Prefetcher next(job, item + 1 < end ? item + 1 : item);
        const size_t perStep = (next.lines() + kPatch * outBlocks - 1) / (kPatch * outBlocks);
        for (int t = 0; t < count; ++t)
            avx512::transformInputTile(job, tileImage[t], tileIndex[t], scratch + t * perTile);
        if (count < kTileGroup)
            std::memset(scratch + count * perTile, 0, (kTileGroup - count) * perTile * sizeof(float));
        toBf16(vb, scratch, kTileGroup * perTile);
        for (int ob = 0; ob < outBlocks; ++ob) {
            Vec m[kTileGroup][kPatch];
            for (int p = 0; p < kPatch; ++p) {
                next.step(perStep);
                __m512 acc[kTileGroup];
                for (__m512& a : acc) a = _mm512_setzero_ps();
                const uint16_t* up = ub + (static_cast<size_t>(p) * outBlocks + ob) * g.in * 16;
                const uint16_t* vp = vb + static_cast<size_t>(p) * g.in;
#pragma GCC unroll 4
                for (int i = 0; i < g.in; i += 2) {
                    const __m512bh w = reinterpret_cast<__m512bh>(_mm512_loadu_si512(up + static_cast<size_t>(i) * 16));
                    for (int t = 0; t < kTileGroup; ++t) {
                        int32_t pair;
                        std::memcpy(&pair, vp + t * perTile + i, sizeof pair);
                        acc[t] = _mm512_dpbf16_ps(acc[t], reinterpret_cast<__m512bh>(_mm512_set1_epi32(pair)), w);
                    }
                }
                for (int t = 0; t < kTileGroup; ++t) m[t][p] = acc[t];
            }
            const Vec bias = job.bias ? _mm512_loadu_ps(job.bias + ob * 16) : _mm512_setzero_ps();
            for (int t = 0; t < count; ++t) {
                float* yp = job.y + (static_cast<size_t>(tileImage[t]) * outBlocks + ob) * outPlane;
                Vec r[24];
                for (int u = 0; u < 6; ++u) avx512::outputTransform(m[t] + u * 6, 1, r + u * 4, 1);
                const int tile = tileIndex[t];
                const int oh0 = (tile / g.tilesW) * 4, ow0 = (tile % g.tilesW) * 4;
                const int rows = std::min(4, g.outH - oh0), cols = std::min(4, g.outW - ow0);
                for (int j = 0; j < cols; ++j) {
                    Vec o[4];
                    avx512::outputTransform(r + j, 4, o, 1);
                    for (int i = 0; i < rows; ++i) {
                        float* dst = yp + (static_cast<size_t>(oh0 + i) * g.outW + ow0 + j) * 16;
                        Vec val = _mm512_add_ps(o[i], bias);
                        if (job.relu) val = avx512::vrelu(val);
                        if (job.accumulate) val = _mm512_add_ps(val, _mm512_loadu_ps(dst));
                        _mm512_storeu_ps(dst, val);
                    }
                }
            }
        }
    }
}

// The weights' gradient's products in bf16: avx512::filterItems with the group's tiles in pairs (its seven and a
// zero eighth), tile t and t + 1 of a pair in the two halves of each 32-bit lane: 4 vdpbf16ps where the float32
// kernel does 7 FMAs. scratch: filterScratchFloats.
constexpr int kTilePairs = (kTileGroup + 1) / 2;

size_t filterScratchFloats(const Geometry& g) {
    // float32 transforms of 2 kTilePairs tiles, then their bf16 pairs (half the floats).
    return static_cast<size_t>(3) * kTilePairs * kPatch * (g.in + g.out);
}

STRATA_BF16_TARGET void filterItems(const Job& job, int64_t begin, int64_t end, float* scratch, float* m, float* bias) {
    using avx512::Prefetcher;
    const Geometry& g = *job.g;
    const int outBlocks = g.out / 16;
    const size_t perTileV = static_cast<size_t>(kPatch) * g.in, perTileZ = static_cast<size_t>(kPatch) * g.out;
    constexpr int kTiles = 2 * kTilePairs;
    float* v = scratch;
    float* z = v + kTiles * perTileV;
    // vb[(pair * perTileV + q) * 2 + h] = bf16(v[(2 pair + h) * perTileV + q]); zb likewise.
    uint16_t* vb = reinterpret_cast<uint16_t*>(z + kTiles * perTileZ);
    uint16_t* zb = vb + kTiles * perTileV;
    std::memset(m, 0, static_cast<size_t>(kPatch) * g.in * g.out * sizeof(float));
    if (bias) std::memset(bias, 0, static_cast<size_t>(g.out) * sizeof(float));
    for (int64_t item = begin; item < end; ++item) {
        const int count = g.groupSize(item);
        Prefetcher next(job, item + 1 < end ? item + 1 : item);
        const size_t perStep = (next.lines() + kPatch * outBlocks - 1) / (kPatch * outBlocks);
        for (int t = 0; t < count; ++t) {
            const int64_t tile = item * kTileGroup + t;
            const int img = static_cast<int>(tile / g.tiles), index = static_cast<int>(tile % g.tiles);
            avx512::transformInputTile(job, img, index, v + t * perTileV);
            avx512::transformGradientTile(job, img, index, z + t * perTileZ, bias);
        }
        std::memset(v + count * perTileV, 0, (kTiles - count) * perTileV * sizeof(float));
        std::memset(z + count * perTileZ, 0, (kTiles - count) * perTileZ * sizeof(float));
        for (int pair = 0; pair < kTilePairs; ++pair) {
            for (size_t q = 0; q < perTileV; q += 16)
                packPairs(vb + (pair * perTileV + q) * 2, v + 2 * pair * perTileV + q,
                          v + (2 * pair + 1) * perTileV + q);
            for (size_t q = 0; q < perTileZ; q += 16)
                packPairs(zb + (pair * perTileZ + q) * 2, z + 2 * pair * perTileZ + q,
                          z + (2 * pair + 1) * perTileZ + q);
        }
        for (int p = 0; p < kPatch; ++p)
            for (int kb = 0; kb < outBlocks; ++kb) {
                next.step(perStep);
                __m512bh zt[kTilePairs];
                for (int pair = 0; pair < kTilePairs; ++pair)
                    zt[pair] = reinterpret_cast<__m512bh>(
                        _mm512_loadu_si512(zb + (pair * perTileZ + static_cast<size_t>(p) * g.out + kb * 16) * 2));
                const uint16_t* vp = vb + static_cast<size_t>(p) * g.in * 2;
                float* mp = m + static_cast<size_t>(p) * g.in * g.out + kb * 16;
                for (int c = 0; c < g.in; c += 4) {
                    __m512 acc[4];
                    for (int j = 0; j < 4; ++j) acc[j] = _mm512_loadu_ps(mp + static_cast<size_t>(c + j) * g.out);
                    for (int pair = 0; pair < kTilePairs; ++pair)
                        for (int j = 0; j < 4; ++j) {
                            int32_t tiles;
                            std::memcpy(&tiles, vp + (pair * perTileV + c + j) * 2, sizeof tiles);
                            acc[j] = _mm512_dpbf16_ps(acc[j], reinterpret_cast<__m512bh>(_mm512_set1_epi32(tiles)),
                                                      zt[pair]);
                        }
                    for (int j = 0; j < 4; ++j) _mm512_storeu_ps(mp + static_cast<size_t>(c + j) * g.out, acc[j]);
                }
            }
    }
}

#undef STRATA_BF16_TARGET

}  // namespace avx512bf16

// Whether this CPU runs the kernels for this block: 16 lanes need AVX-512, 8 AVX2 and FMA.
bool cpuRuns(int block) {
    static const bool avx512 = __builtin_cpu_supports("avx512f") != 0;
    static const bool avx2 = __builtin_cpu_supports("avx2") != 0 && __builtin_cpu_supports("fma") != 0;
    return (block == 16 && avx512) || (block == 8 && avx2);
}

#else

bool cpuRuns(int) { return false; }

#endif

// The kernels for the tensors' block (winogradApplies has checked that this CPU runs them).
template <class Kernel>
void transformWeights(int block, float* u, int in, int out, const Kernel& kernel) {
#ifdef STRATA_WINOGRAD_X86
    if (block == 16) return avx512::transformWeights(u, in, out, kernel);
    avx2::transformWeights(u, in, out, kernel);
#else
    (void)block, (void)u, (void)in, (void)out, (void)kernel;
#endif
}

// The transformed weights for this call: kept by (weightsVersion, direction) for frozen weights, else in the
// workspace's scratch buffer.
template <class Kernel>
const float* transformedWeights(Workspace& ws, int block, uint64_t version, bool backward, int in, int out,
                                const Kernel& kernel) {
    if (version == 0) {
        ws.winogradWeights.resize(weightFloats(in, out));
        transformWeights(block, ws.winogradWeights.data(), in, out, kernel);
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
    transformWeights(block, u.data(), in, out, kernel);
    return u.data();
}

void runWinograd(int threads, Workspace& ws, const Geometry& g, const float* x, const float* u, const float* bias,
                 bool relu, float* y, bool accumulate) {
#ifdef STRATA_WINOGRAD_X86
    Job job;
    job.g = &g, job.x = x, job.u = u, job.bias = bias, job.y = y, job.relu = relu, job.accumulate = accumulate;
    const int parts = parallelParts(threads, g.items(), 1);
    if (ws.winogradBf16 && g.block == 16) {
        ws.winogradWeightsBf16.resize(weightFloats(g.in, g.out));
        avx512bf16::packWeights(ws.winogradWeightsBf16.data(), u, g.in, g.out);
        // The float32 transformed tiles, then their bf16 copy (half as many floats).
        ws.prepare(0, parts, g.scratchFloats() + g.scratchFloats() / 2);
        parallelFor(threads, g.items(), 1, [&](int64_t begin, int64_t end, int part) {
            avx512bf16::runItems(job, ws.winogradWeightsBf16.data(), begin, end, ws.slot(part));
        });
        ++ws.bf16WinogradRuns;
        return;
    }
    ws.prepare(0, parts, g.scratchFloats());
    parallelFor(threads, g.items(), 1, [&](int64_t begin, int64_t end, int part) {
        if (g.block == 16)
            avx512::runItems(job, begin, end, ws.slot(part));
        else
            avx2::runItems(job, begin, end, ws.slot(part));
    });
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
    const bool bf16 = ws.winogradBf16 && g.block == 16;
    const size_t transforms =
        bf16 ? avx512bf16::filterScratchFloats(g) : static_cast<size_t>(kTileGroup) * kPatch * (g.in + g.out);
    const size_t perPart = transforms + sums + g.out;
    ws.prepare(0, parts, perPart);
    auto sumsOf = [&](int part) { return ws.slot(part) + perPart - sums - g.out; };
    auto biasOf = [&](int part) { return ws.slot(part) + perPart - g.out; };
    if (bf16) ++ws.bf16WinogradRuns;
    parallelFor(threads, g.items(), 1, [&](int64_t begin, int64_t end, int part) {
        float* bias = dbias ? biasOf(part) : nullptr;
        if (bf16)
            avx512bf16::filterItems(job, begin, end, ws.slot(part), sumsOf(part), bias);
        else if (g.block == 16)
            avx512::filterItems(job, begin, end, ws.slot(part), sumsOf(part), bias);
        else
            avx2::filterItems(job, begin, end, ws.slot(part), sumsOf(part), bias);
    });
    // The parts' sums, added in part order (the same result for the same thread count).
    float* m = sumsOf(0);
    for (int part = 1; part < parts; ++part) {
        const float* other = sumsOf(part);
        for (size_t i = 0; i < sums; ++i) m[i] += other[i];
    }
    if (g.block == 16)
        avx512::filterFromSums(dw, m, g.in, g.out);
    else
        avx2::filterFromSums(dw, m, g.in, g.out);
    if (dbias)
        for (int part = 0; part < parts; ++part)
            for (int k = 0; k < g.out; ++k) dbias[k] += biasOf(part)[k];
#else
    (void)threads, (void)ws, (void)g, (void)dw, (void)dbias, (void)dy, (void)x;
#endif
}

}  // namespace

bool winogradAvailable(int block) { return cpuRuns(block); }

bool winogradBf16Available() {
#ifdef STRATA_WINOGRAD_X86
    static const bool bf16 = cpuRuns(16) && __builtin_cpu_supports("avx512bf16") != 0;
    return bf16;
#else
    return false;
#endif
}

bool winogradApplies(const Workspace& ws, const ConvDesc& d) {
    const int block = d.srcBlock;
    return ws.useWinograd && cpuRuns(block) && d.r == 3 && d.s == 3 && d.strideH == 1 && d.strideW == 1 &&
           d.dilationH == 1 && d.dilationW == 1 && d.groups == 1 && d.srcBlock == block && d.dstBlock == block &&
           d.c % block == 0 && d.k % block == 0 && d.padH >= 0 && d.padH <= 2 && d.padW >= 0 && d.padW <= 2 &&
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
    const Geometry g(d.srcBlock, d.n, d.c, d.k, d.h, d.w, d.padH, d.padW);
    const int c = d.c;
    const float* u = transformedWeights(ws, g.block, d.weightsVersion, false, d.c, d.k, [w, c](int o, int i, int rs) {
        return w[(static_cast<size_t>(o) * c + i) * 9 + rs];
    });
    runWinograd(threads, ws, g, x, u, bias, relu, y, false);
}

void winogradBackwardData(int threads, Workspace& ws, float* dx, const float* dy, const float* w, const ConvDesc& d,
                          bool overwrite) {
    // dx = dy correlated with the kernels turned 180 degrees, input and output channels swapped.
    const Geometry g(d.srcBlock, d.n, d.k, d.c, d.outH(), d.outW(), 2 - d.padH, 2 - d.padW);
    const int c = d.c;
    const float* u = transformedWeights(ws, g.block, d.weightsVersion, true, d.k, d.c, [w, c](int o, int i, int rs) {
        return w[(static_cast<size_t>(i) * c + o) * 9 + (8 - rs)];
    });
    runWinograd(threads, ws, g, dy, u, nullptr, false, dx, !overwrite);
}

void winogradBackwardFilter(int threads, Workspace& ws, float* dw, float* dbias, const float* dy, const float* x,
                            const ConvDesc& d) {
    const Geometry g(d.srcBlock, d.n, d.c, d.k, d.h, d.w, d.padH, d.padW);
    filterGradient(threads, ws, g, dw, dbias, dy, x);
}

}  // namespace strata::cpu
