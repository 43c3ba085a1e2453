// CpuInt8: oneDNN int8 convolution, matmul and max pooling, and Strata's own VNNI convolution (see CpuInt8.h).
//
// The scales are fixed when a primitive is built (oneDNN 2.6's int8 kernels take no runtime output scales); the
// zero points are runtime arguments, the only form its jit kernels accept for the source's. The source zero point
// stays oneDNN's to apply rather than being folded into the bias (w (q - zp) = w q - zp sum w): at a padded border
// the fold would count the padding's taps, which are real zeros, as -zp.
#include "core/backend/CpuInt8.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

#include <immintrin.h>

#include "core/backend/CpuFast.h"

#ifdef _OPENMP
#include <omp.h>
#else
inline int omp_get_max_threads() { return 1; }
#endif

namespace strata::cpu {

namespace {

template <class Out>
void tabulate(int threads, const uint8_t* src, Out* dst, int64_t outer, int64_t channels, int64_t inner,
              const Out* tables) {
    // Measured (fashion_cnn_bn, batch 256, 6.4 M values, one thread): a modulo per value 12 ns a value, channels in
    // order 1.1 ns, and channel-last rows (inner 1) as one flat run with the tables' offsets precomputed 0.5 ns.
    if (inner == 1) {
        std::vector<int32_t> offset(static_cast<size_t>(channels));
        for (int64_t c = 0; c < channels; ++c) offset[static_cast<size_t>(c)] = static_cast<int32_t>(c * 256);
        const int32_t* off = offset.data();
#pragma omp parallel for num_threads(threads > 0 ? threads : omp_get_max_threads()) if (threads != 1) schedule(static)
        for (int64_t o = 0; o < outer; ++o) {
            const uint8_t* s = src + o * channels;
            Out* d = dst + o * channels;
            for (int64_t c = 0; c < channels; ++c) d[c] = tables[off[c] + s[c]];
        }
        return;
    }
#pragma omp parallel for num_threads(threads > 0 ? threads : omp_get_max_threads()) if (threads != 1) schedule(static)
    for (int64_t o = 0; o < outer; ++o)
        for (int64_t c = 0; c < channels; ++c) {
            const Out* t = tables + c * 256;
            const int64_t base = (o * channels + c) * inner;
            for (int64_t i = 0; i < inner; ++i) dst[base + i] = t[src[base + i]];
        }
}

}  // namespace

void applyChannelTables(int threads, const uint8_t* src, uint8_t* dst, int64_t outer, int64_t channels, int64_t inner,
                        const uint8_t* tables) {
    tabulate(threads, src, dst, outer, channels, inner, tables);
}
void applyChannelTablesF32(int threads, const uint8_t* src, float* dst, int64_t outer, int64_t channels, int64_t inner,
                           const float* tables) {
    tabulate(threads, src, dst, outer, channels, inner, tables);
}

uint8_t onGrid(float x, Grid g) {
    return static_cast<uint8_t>(std::clamp(std::nearbyint(x / g.scale) + float(g.zeroPoint), 0.0f, 255.0f));
}

namespace {

int threadCount(int threads) { return threads > 0 ? threads : omp_get_max_threads(); }

// fn(begin, end) for each thread's part of [0, count), in whole 64-value blocks but the last.
template <class Fn>
void inParts(int threads, int64_t count, Fn&& fn) {
    const int parts = threadCount(threads);
    if (parts == 1) {  // no OpenMP region at all (a one-thread one inside another costs a microsecond)
        if (count > 0) fn(int64_t(0), count);
        return;
    }
    const int64_t blocks = (count + 63) / 64, per = (blocks + parts - 1) / parts;
#pragma omp parallel for num_threads(parts) schedule(static)
    for (int t = 0; t < parts; ++t) {
        const int64_t begin = std::min(count, t * per * 64), end = std::min(count, (t + 1) * per * 64);
        if (begin < end) fn(begin, end);
    }
}

float dq(uint8_t v, Grid g) { return float(int(v) - g.zeroPoint) * g.scale; }

namespace scalar {

void add(const uint8_t* a, Grid ga, const uint8_t* b, Grid gb, uint8_t* dst, Grid out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) dst[i] = onGrid(dq(a[i], ga) + dq(b[i], gb), out);
}
void quantize(const float* src, uint8_t* dst, int64_t n, Grid g) {
    for (int64_t i = 0; i < n; ++i) dst[i] = onGrid(src[i], g);
}
void dequantize(const uint8_t* src, float* dst, int64_t n, Grid g) {
    for (int64_t i = 0; i < n; ++i) dst[i] = dq(src[i], g);
}
void sums(const uint8_t* src, int64_t positions, int64_t channels, int zeroPoint, int64_t* out) {
    for (int64_t c = 0; c < channels; ++c) out[c] = 0;
    for (int64_t p = 0; p < positions; ++p)
        for (int64_t c = 0; c < channels; ++c) out[c] += src[p * channels + c] - zeroPoint;
}

}  // namespace scalar

namespace avx512 {

#define STRATA_INT8_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define STRATA_INT8_VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))

// A product kept apart from the addition after it: the compiler may not fuse them into one rounding.
STRATA_INT8_TARGET inline __m512 unfused(__m512 v) {
    __asm__("" : "+v"(v));
    return v;
}

// GCC 12 warns that the intrinsics' unused merge sources are uninitialized (as in CpuBf16.cpp); they are not used.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"  // _mm512_reduce_max_ps in GCC 12's header
#endif

STRATA_INT8_TARGET inline __m512i widen(__m128i bytes) { return _mm512_cvtepu8_epi32(bytes); }

STRATA_INT8_TARGET inline __m512 dequantize16(__m128i bytes, __m512i zero, __m512 scale) {
    const __m512i v = _mm512_sub_epi32(widen(bytes), zero);
    return unfused(_mm512_mul_ps(_mm512_cvtepi32_ps(v), scale));
}

STRATA_INT8_TARGET inline __m128i onGrid16(__m512 x, __m512 scale, __m512 zero) {
    __m512 q = _mm512_add_ps(
        _mm512_roundscale_ps(_mm512_div_ps(x, scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), zero);
    q = _mm512_min_ps(_mm512_max_ps(q, _mm512_setzero_ps()), _mm512_set1_ps(255.0f));
    return _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(q));
}

STRATA_INT8_TARGET void add(const uint8_t* a, Grid ga, const uint8_t* b, Grid gb, uint8_t* dst, Grid out, int64_t n) {
    const __m512i za = _mm512_set1_epi32(ga.zeroPoint), zb = _mm512_set1_epi32(gb.zeroPoint);
    const __m512 sa = _mm512_set1_ps(ga.scale), sb = _mm512_set1_ps(gb.scale), so = _mm512_set1_ps(out.scale),
                 zo = _mm512_set1_ps(float(out.zeroPoint));
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 x = _mm512_add_ps(dequantize16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)), za, sa),
                                       dequantize16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)), zb, sb));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), onGrid16(x, so, zo));
    }
    if (i < n) {
        const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
        const __m512 x = _mm512_add_ps(dequantize16(_mm_maskz_loadu_epi8(m, a + i), za, sa),
                                       dequantize16(_mm_maskz_loadu_epi8(m, b + i), zb, sb));
        _mm_mask_storeu_epi8(dst + i, m, onGrid16(x, so, zo));
    }
}

STRATA_INT8_TARGET void quantize(const float* src, uint8_t* dst, int64_t n, Grid g) {
    const __m512 s = _mm512_set1_ps(g.scale), z = _mm512_set1_ps(float(g.zeroPoint));
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), onGrid16(_mm512_loadu_ps(src + i), s, z));
    if (i < n) {
        const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
        _mm_mask_storeu_epi8(dst + i, m, onGrid16(_mm512_maskz_loadu_ps(m, src + i), s, z));
    }
}

// Channels in groups of 16 (the last masked), int32 sums per group over the positions (255 x positions fits
// below 2^31 for any image this engine takes), the zero point taken off once at the end.
STRATA_INT8_TARGET void sums(const uint8_t* src, int64_t positions, int64_t channels, int zeroPoint, int64_t* out) {
    for (int64_t c = 0; c < channels; c += 16) {
        const int64_t left = std::min<int64_t>(16, channels - c);
        const __mmask16 m = left == 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << left) - 1u);
        __m512i acc0 = _mm512_setzero_si512(), acc1 = _mm512_setzero_si512();
        int64_t p = 0;
        for (; p + 2 <= positions; p += 2) {
            acc0 = _mm512_add_epi32(acc0, widen(_mm_maskz_loadu_epi8(m, src + p * channels + c)));
            acc1 = _mm512_add_epi32(acc1, widen(_mm_maskz_loadu_epi8(m, src + (p + 1) * channels + c)));
        }
        if (p < positions) acc0 = _mm512_add_epi32(acc0, widen(_mm_maskz_loadu_epi8(m, src + p * channels + c)));
        alignas(64) int32_t lanes[16];
        _mm512_store_si512(lanes, _mm512_add_epi32(acc0, acc1));
        for (int64_t k = 0; k < left; ++k) out[c + k] = int64_t(lanes[k]) - int64_t(zeroPoint) * positions;
    }
}

// 2x2 windows, stride 2, no padding, channels last: each output position the maximum of four runs of `channels`
// bytes, 64 at a time (the last run masked). Rows [rowBegin, rowEnd) of the batch's outH-row outputs.
STRATA_INT8_TARGET void maxPool2x2(const uint8_t* src, uint8_t* dst, int64_t rowBegin, int64_t rowEnd, int64_t height,
                                   int64_t width, int64_t channels, int64_t outH, int64_t outW) {
    for (int64_t row = rowBegin; row < rowEnd; ++row) {
        const int64_t n = row / outH, oy = row % outH;
        const uint8_t* top = src + ((n * height + 2 * oy) * width) * channels;
        const uint8_t* bottom = top + width * channels;
        uint8_t* out = dst + row * outW * channels;
        for (int64_t ox = 0; ox < outW; ++ox) {
            const uint8_t* a = top + 2 * ox * channels;
            const uint8_t* b = bottom + 2 * ox * channels;
            for (int64_t c = 0; c < channels; c += 64) {
                const int64_t left = std::min<int64_t>(64, channels - c);
                const __mmask64 m = left == 64 ? ~__mmask64(0) : (__mmask64(1) << left) - 1;
                const __m512i top2 =
                    _mm512_max_epu8(_mm512_maskz_loadu_epi8(m, a + c), _mm512_maskz_loadu_epi8(m, a + channels + c));
                const __m512i bottom2 =
                    _mm512_max_epu8(_mm512_maskz_loadu_epi8(m, b + c), _mm512_maskz_loadu_epi8(m, b + channels + c));
                _mm512_mask_storeu_epi8(out + ox * channels + c, m, _mm512_max_epu8(top2, bottom2));
            }
        }
    }
}

STRATA_INT8_TARGET void dequantize(const uint8_t* src, float* dst, int64_t n, Grid g) {
    const __m512i z = _mm512_set1_epi32(g.zeroPoint);
    const __m512 s = _mm512_set1_ps(g.scale);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, dequantize16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)), z, s));
    if (i < n) {
        const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
        _mm512_mask_storeu_ps(dst + i, m, dequantize16(_mm_maskz_loadu_epi8(m, src + i), z, s));
    }
}

// CpuFast's expFast 16 lanes wide: the same range reduction and polynomial.
STRATA_INT8_TARGET inline __m512 expFast(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(88.0f));
    const __m512 magic = _mm512_set1_ps(12582912.0f);
    const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), magic), magic);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

STRATA_INT8_TARGET inline __mmask16 tailMask(int c, int n) {
    return c + 16 <= n ? __mmask16(0xFFFF) : __mmask16((1u << (n - c)) - 1u);
}
// Of the lanes in `m`, those whose key is kept (keep != 0; all without `keep`).
STRATA_INT8_TARGET inline __mmask16 keptLanes(const float* keep, int c, __mmask16 m) {
    return keep ? _mm512_mask_cmp_ps_mask(m, _mm512_maskz_loadu_ps(m, keep + c), _mm512_setzero_ps(), _CMP_NEQ_OQ) : m;
}

// One row of the int8 attention's softmax: int32 scores times `scale`, keys whose `keep` is 0 weighing 0 (no
// `keep`: none), the weights onto grid `g`; `tmp` holds n floats.
STRATA_INT8_TARGET void softmaxToGrid(const int32_t* s, const float* keep, int n, float scale, float* tmp, uint8_t* dst,
                                      Grid g) {
    const __m512 vs = _mm512_set1_ps(scale), lowest = _mm512_set1_ps(-3.4e38f);
    __m512 mx = lowest;
    for (int c = 0; c < n; c += 16) {
        const __mmask16 m = tailMask(c, n);
        const __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_maskz_loadu_epi32(m, s + c)), vs);
        _mm512_mask_storeu_ps(tmp + c, m, v);
        mx = _mm512_mask_max_ps(mx, keptLanes(keep, c, m), mx, v);
    }
    const __m512 top = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    __m512 total = _mm512_setzero_ps();
    for (int c = 0; c < n; c += 16) {
        const __mmask16 m = tailMask(c, n);
        const __m512 e =
            _mm512_maskz_mov_ps(keptLanes(keep, c, m), expFast(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, tmp + c), top)));
        _mm512_mask_storeu_ps(tmp + c, m, e);
        total = _mm512_add_ps(total, e);
    }
    const float sum = _mm512_reduce_add_ps(total);
    const __m512 inv = _mm512_set1_ps(sum > 0.0f ? 1.0f / sum : 0.0f);
    for (int c = 0; c < n; c += 16) {
        const __mmask16 m = tailMask(c, n);
        _mm512_mask_storeu_ps(tmp + c, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, tmp + c), inv));
    }
    quantize(tmp, dst, n, g);
}

// Strata's own int8 direct convolution (CpuInt8.h says where it runs). Each kernel row of an output pixel is read
// as `words` 32-bit words of its channels-last input: for channels in fours, word (kx, c4) is the 4 channels c4 of
// tap kx; for 1 to 4 channels (a stem), the kernel row's kernelW x channels bytes are contiguous and read 4 at a
// time (the bytes past the last meet zero weights). Each word is broadcast and meets 16 filters' 4 weights in one
// VNNI dot product (u8 x s8 pairs summed into int32), for blocks of up to 14 pixels that share the weights' load. The
// source is read from a copy of the rows a block of output rows reads, its padding filled with the zero point
// (whose taps then add nothing, as oneDNN counts them).
struct VnniConv {
    int channels = 0, height = 0, width = 0, filters = 0, kernelH = 0, kernelW = 0, strideH = 1, strideW = 1;
    int padH = 0, padW = 0, dilationH = 1, outH = 0, outW = 0;
    int srcZeroPoint = 0, dstZeroPoint = 0;
    bool f32Output = false;
    std::vector<int32_t> wordOffset;  // [words]: each word's first byte, from the pixel's first byte
    std::vector<int32_t> weights;     // [filters / 16][kernelH][words][16]: 4 s8 weights of one filter per lane
    std::vector<int32_t> offset;      // [filters]: bias - srcZeroPoint x the filter's weight sum
    std::vector<float> scales;        // [filters]
    int words() const { return static_cast<int>(wordOffset.size()); }
    // A padded row, and 4 bytes for the few-channel words' reads past its end.
    int64_t paddedWidth() const { return int64_t(width + 2 * padW) * channels + 4; }
};

STRATA_INT8_VNNI_TARGET inline void vnniStore(const VnniConv& k, __m512i acc, __m512 scale, void* dst, int64_t at) {
    const __m512 y = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), scale);
    if (k.f32Output) {
        _mm512_storeu_ps(static_cast<float*>(dst) + at, y);
        return;
    }
    // Plus the zero point, then rounded half to even (the default rounding mode) and saturated, as oneDNN's
    // kernels do (a tie rounds with the zero point added).
    const __m512i q = _mm512_cvtps_epi32(_mm512_add_ps(y, _mm512_set1_ps(float(k.dstZeroPoint))));
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(static_cast<uint8_t*>(dst) + at),
        _mm512_cvtepi32_epi8(_mm512_min_epi32(_mm512_max_epi32(q, _mm512_setzero_si512()), _mm512_set1_epi32(255))));
}

// acc += the VNNI dot products of a's u8 and b's s8 fours. In assembly: GCC 12 copies every accumulator of a block
// around each intrinsic _mm512_dpbusd_epi32 (two moves per product): 274 GMAC/s with it, 352 with this
// (bench_int8_conv, 16 -> 16 at 28 x 28, one thread).
STRATA_INT8_VNNI_TARGET inline void dot4(__m512i& acc, __m512i a, __m512i b) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
}

// Pixels [ox, ox + P) of one output row for 16 filters (weights `w`, [kernelH][words][16]). row: the padded row
// under the kernel's top row; at: the row's first output value.
template <int P>
STRATA_INT8_VNNI_TARGET inline void vnniPixels(const VnniConv& k, const uint8_t* row, const int32_t* w, __m512i offset,
                                               __m512 scale, void* dst, int64_t at, int ox) {
    const int64_t step = int64_t(k.strideW) * k.channels, down = k.paddedWidth() * k.dilationH;
    const int words = k.words();
    const int32_t* wordOffset = k.wordOffset.data();
    __m512i acc[P];
#pragma GCC unroll 14
    for (int p = 0; p < P; ++p) acc[p] = offset;
    const uint8_t* top = row + ox * step;
    for (int ky = 0; ky < k.kernelH; ++ky) {
        const uint8_t* r = top + ky * down;
        const int32_t* wk = w + int64_t(ky) * words * 16;
        for (int j = 0; j < words; ++j) {
            const __m512i wv = _mm512_loadu_si512(wk + j * 16);
            const uint8_t* q = r + wordOffset[j];
#pragma GCC unroll 14
            for (int p = 0; p < P; ++p) dot4(acc[p], _mm512_broadcastd_epi32(_mm_loadu_si32(q + p * step)), wv);
        }
    }
#pragma GCC unroll 14
    for (int p = 0; p < P; ++p) vnniStore(k, acc[p], scale, dst, at + int64_t(ox + p) * k.filters);
}

// A block of 14 pixels' sums in 14 registers hides the dot products' latency (bench_int8_conv, 16 -> 16, one thread:
// 8 pixels 303 GMAC/s, 14 352, 16 158 as registers spill).
constexpr int kMostPixels = 14;
// vnniPixels<n> for n in 1..N.
template <int N>
STRATA_INT8_VNNI_TARGET inline void vnniBlock(int n, const VnniConv& k, const uint8_t* row, const int32_t* w,
                                              __m512i offset, __m512 scale, void* dst, int64_t at, int ox) {
    if (n == N) {
        vnniPixels<N>(k, row, w, offset, scale, dst, at, ox);
    } else if constexpr (N > 1) {
        vnniBlock<N - 1>(n, k, row, w, offset, scale, dst, at, ox);
    }
}

// Output rows [oy0, oy1) of one sample; `padded` is resized to hold the rows they read.
STRATA_INT8_VNNI_TARGET void vnniConv(const VnniConv& k, const uint8_t* src, void* dst, int64_t sample, int oy0,
                                      int oy1, std::vector<uint8_t>& padded) {
    // The rows read, padW pixels of zero points left and right, rows above and below the image all zero points.
    const int64_t rowBytes = k.paddedWidth(), imageRow = int64_t(k.width) * k.channels;
    const int first = oy0 * k.strideH - k.padH, rows = (oy1 - 1 - oy0) * k.strideH + (k.kernelH - 1) * k.dilationH + 1;
    padded.assign(static_cast<size_t>(rows * rowBytes), uint8_t(k.srcZeroPoint));
    for (int r = 0; r < rows; ++r)
        if (first + r >= 0 && first + r < k.height)
            std::copy_n(src + (sample * k.height + first + r) * imageRow, imageRow,
                        padded.data() + r * rowBytes + int64_t(k.padW) * k.channels);
    for (int oy = oy0; oy < oy1; ++oy)
        for (int g = 0; g < k.filters / 16; ++g) {
            const uint8_t* row = padded.data() + int64_t(oy - oy0) * k.strideH * rowBytes;
            const int32_t* w = k.weights.data() + int64_t(g) * k.kernelH * k.words() * 16;
            const __m512i offset = _mm512_loadu_si512(k.offset.data() + g * 16);
            const __m512 scale = _mm512_loadu_ps(k.scales.data() + g * 16);
            const int64_t at = ((sample * k.outH + oy) * k.outW) * k.filters + g * 16;
            // The row in blocks of at most 14 pixels, as even as they come (28: 14 + 14; 32: 11 + 11 + 10).
            const int blocks = (k.outW + kMostPixels - 1) / kMostPixels;
            for (int b = 0, ox = 0; b < blocks; ++b) {
                const int n = k.outW / blocks + (b < k.outW % blocks ? 1 : 0);
                vnniBlock<kMostPixels>(n, k, row, w, offset, scale, dst, at, ox);
                ox += n;
            }
        }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#undef STRATA_INT8_TARGET
#undef STRATA_INT8_VNNI_TARGET

}  // namespace avx512

bool useSimd() {
    static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    return yes && !std::getenv("STRATA_NO_AVX512");
}

}  // namespace

bool int8SimdInUse() { return useSimd(); }

void addOnGrids(int threads, const uint8_t* a, Grid ga, const uint8_t* b, Grid gb, uint8_t* dst, Grid out,
                int64_t count) {
    const auto add = useSimd() ? avx512::add : scalar::add;
    inParts(threads, count,
            [&](int64_t begin, int64_t end) { add(a + begin, ga, b + begin, gb, dst + begin, out, end - begin); });
}

void quantizeToGrid(int threads, const float* src, uint8_t* dst, int64_t count, Grid g) {
    const auto quantize = useSimd() ? avx512::quantize : scalar::quantize;
    inParts(threads, count, [&](int64_t begin, int64_t end) { quantize(src + begin, dst + begin, end - begin, g); });
}

void dequantizeFromGrid(int threads, const uint8_t* src, float* dst, int64_t count, Grid g) {
    const auto dequantize = useSimd() ? avx512::dequantize : scalar::dequantize;
    inParts(threads, count, [&](int64_t begin, int64_t end) { dequantize(src + begin, dst + begin, end - begin, g); });
}

void channelSums(int threads, const uint8_t* src, int64_t samples, int64_t positions, int64_t channels, int zeroPoint,
                 int64_t* sums) {
    const bool simd = useSimd();
    // A thread a sample at most: one sample (a batch-1 pass) opens no region, which would cost about what its sums do.
    const int parts = int(std::min<int64_t>(threadCount(threads), samples));
#pragma omp parallel for num_threads(parts) if (parts > 1) schedule(static)
    for (int64_t s = 0; s < samples; ++s)
        (simd ? avx512::sums : scalar::sums)(src + s * positions * channels, positions, channels, zeroPoint,
                                             sums + s * channels);
}

}  // namespace strata::cpu

#ifdef STRATA_HAVE_ONEDNN

#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>

#include <dnnl.hpp>
#include <omp.h>

namespace strata::cpu {

namespace {

using dnnl::memory;
using DType = memory::data_type;
using Tag = memory::format_tag;

std::atomic<int64_t> g_convs{0}, g_matmuls{0}, g_pools{0};

// Restores the OpenMP thread count oneDNN reads (omp_get_max_threads) after a call.
class OmpThreads {
public:
    explicit OmpThreads(int threads) : m_saved(omp_get_max_threads()) {
        if (threads > 0) omp_set_num_threads(threads);
    }
    ~OmpThreads() { omp_set_num_threads(m_saved); }
    OmpThreads(const OmpThreads&) = delete;
    OmpThreads& operator=(const OmpThreads&) = delete;

private:
    int m_saved;
};

dnnl::engine& cpuEngine() {
    static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    return engine;
}

// oneDNN's per-call objects (a stream, a memory object per argument) cost microseconds each, as much as a small
// layer's arithmetic at batch 1 (measured on the quiet 2-core VM: the residual template's int8 pass 0.032 ->
// 0.025 ms, fashion_cnn_bn's 0.044 -> 0.037 ms with them kept): one stream per thread, and each primitive keeps
// its argument memories, of which only the data pointers change between runs.
dnnl::stream& cpuStream() {
    static thread_local dnnl::stream stream(cpuEngine());
    return stream;
}

// The primitive and the weights reordered for it, for one batch size, and its arguments once it has run.
struct Built {
    dnnl::primitive primitive;
    memory weights;
    std::string implementation;
    std::unordered_map<int, memory> args;
};

// Runs `b` on `src` and `dst`, its other arguments made by `others` at the first run.
template <class Others>
void runBuilt(Built& b, const memory::desc& srcDesc, const void* src, const memory::desc& dstDesc, void* dst,
              Others&& others) {
    if (b.args.empty()) {
        b.args = {{DNNL_ARG_SRC, memory(srcDesc, cpuEngine(), const_cast<void*>(src))},
                  {DNNL_ARG_DST, memory(dstDesc, cpuEngine(), dst)}};
        others(b.args);
    } else {
        b.args.at(DNNL_ARG_SRC).set_data_handle(const_cast<void*>(src));
        b.args.at(DNNL_ARG_DST).set_data_handle(dst);
    }
    b.primitive.execute(cpuStream(), b.args);
    cpuStream().wait();
}

// STRATA_INT8_ONEDNN=1: every convolution and matmul on oneDNN's kernels, none of Strata's own (read when a kernel
// is made; the tests and bench_int8_conv compare the two).
bool oneDnnOnly() { return std::getenv("STRATA_INT8_ONEDNN") != nullptr; }

// What every kernel shares: a primitive per batch size, built on first use.
class CachedKernel : public Int8Kernel {
public:
    std::string implementation() const override { return m_implementation; }

protected:
    // Under the OmpThreads scope of the run: oneDNN's jit kernels split the work between the threads there are
    // when the primitive is built, and would wake them all at every run whatever the thread count then.
    Built& builtFor(int64_t batch) {
        const std::pair<int64_t, int> key{batch, omp_get_max_threads()};
        auto it = m_built.find(key);
        if (it == m_built.end()) {
            try {
                it = m_built.emplace(key, build(batch)).first;
            } catch (const dnnl::error& e) {
                throw std::runtime_error(std::string("oneDNN has no int8 primitive for this layer: ") + e.what());
            }
            m_implementation = it->second.implementation;
        }
        return it->second;
    }
    virtual Built build(int64_t batch) = 0;

    // The weights in the layout the primitive chose, from plain user memory.
    static memory reordered(const memory::desc& user, const void* data, const memory::desc& wanted) {
        dnnl::stream stream(cpuEngine());
        memory from(user, cpuEngine(), const_cast<void*>(data)), to(wanted, cpuEngine());
        dnnl::reorder(from, to).execute(stream, from, to);
        stream.wait();
        return to;
    }

private:
    std::map<std::pair<int64_t, int>, Built> m_built;  // by batch size and threads
    std::string m_implementation;
};

// srcZeroPoint: whether the source has one (a matmul folds its own into the bias).
dnnl::primitive_attr quantizedAttr(const std::vector<float>& scales, bool f32Output, bool srcZeroPoint = true) {
    dnnl::primitive_attr attr;
    attr.set_output_scales(1 << 1, scales);  // dimension 1: the output channel
    if (srcZeroPoint) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    if (!f32Output) attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
    return attr;
}

// Runs `b` with the source, weights, bias and destination and the zero points.
void execute(Built& b, const memory::desc& srcDesc, const uint8_t* src, const memory::desc& dstDesc, void* dst,
             const memory* bias, int srcZeroPoint, int dstZeroPoint, bool f32Output) {
    runBuilt(b, srcDesc, src, dstDesc, dst, [&](std::unordered_map<int, memory>& args) {
        const memory::desc one({1}, DType::s32, Tag::x);
        auto zeroPoint = [&](int value) {
            memory m(one, cpuEngine());  // its own buffer: the value outlives this call
            *static_cast<int32_t*>(m.get_data_handle()) = value;
            return m;
        };
        args[DNNL_ARG_WEIGHTS] = b.weights;
        if (srcZeroPoint != 0) args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC] = zeroPoint(srcZeroPoint);
        if (bias) args[DNNL_ARG_BIAS] = *bias;
        if (!f32Output) args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST] = zeroPoint(dstZeroPoint);
    });
}

class ConvKernel : public CachedKernel {
public:
    explicit ConvKernel(const Int8ConvSpec& spec) : m_spec(spec) {
        m_outH = (spec.height + 2 * spec.padH - spec.dilationH * (spec.kernelH - 1) - 1) / spec.strideH + 1;
        m_outW = (spec.width + 2 * spec.padW - spec.dilationW * (spec.kernelW - 1) - 1) / spec.strideW + 1;
        if (!spec.bias.empty())
            m_bias = memory(memory::desc({spec.filters}, DType::s32, Tag::x), cpuEngine(),
                            const_cast<int32_t*>(m_spec.bias.data()));
        if (ownApplies(spec)) {
            m_own = makeOwn(spec, m_outH, m_outW);
            return;
        }
        OmpThreads scope(1);
        builtFor(1);  // an unsupported layer fails here, naming itself through the caller
    }
    std::string implementation() const override {
        return m_own ? "strata:avx512_vnni, " + std::to_string(m_own->words()) + " word(s) a kernel row"
                     : CachedKernel::implementation();
    }
    void run(int threads, int64_t batch, const uint8_t* src, void* dst) override {
        if (m_own) {
            runOwn(threads, batch, src, dst);
            ++g_convs;
            return;
        }
        OmpThreads scope(threads);
        execute(builtFor(batch), srcDesc(batch), src, dstDesc(batch), dst, m_spec.bias.empty() ? nullptr : &m_bias,
                m_spec.srcZeroPoint, m_spec.dstZeroPoint, m_spec.f32Output);
        ++g_convs;
    }

private:
    memory::desc srcDesc(int64_t n) const {
        return {{n, m_spec.channels, m_spec.height, m_spec.width}, DType::u8, Tag::nhwc};
    }
    memory::desc dstDesc(int64_t n) const {
        return {{n, m_spec.filters, m_outH, m_outW}, m_spec.f32Output ? DType::f32 : DType::u8, Tag::nhwc};
    }
    Built build(int64_t batch) override {
        const Int8ConvSpec& s = m_spec;
        const int g = s.groups;
        const memory::dims wdims = g == 1 ? memory::dims{s.filters, s.channels, s.kernelH, s.kernelW}
                                          : memory::dims{g, s.filters / g, s.channels / g, s.kernelH, s.kernelW};
        const memory::desc wAny(wdims, DType::s8, Tag::any);
        const memory::desc wUser(wdims, DType::s8, g == 1 ? Tag::oihw : Tag::goihw);
        const memory::desc biasDesc = s.bias.empty() ? memory::desc() : memory::desc({s.filters}, DType::s32, Tag::x);
        // oneDNN's dilation counts the gaps between taps: ours minus one.
        const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                                srcDesc(batch), wAny, biasDesc, dstDesc(batch), {s.strideH, s.strideW},
                                                {s.dilationH - 1, s.dilationW - 1}, {s.padH, s.padW}, {s.padH, s.padW});
        const dnnl::convolution_forward::primitive_desc pd(d, quantizedAttr(s.scales, s.f32Output, s.srcZeroPoint != 0),
                                                           cpuEngine());
        return {dnnl::convolution_forward(pd),
                reordered(wUser, s.weights.data(), pd.weights_desc()),
                pd.impl_info_str(),
                {}};
    }

    // Strata's own kernel (VnniConv, CpuInt8.h) where it is faster than oneDNN's (bench_int8_conv, one thread, 3x3,
    // one sample, quiet 2-core VM): on 1 to 4 channels (1 -> 16 filters at 28 x 28: 1.5 against 3.7 us) and for 16
    // filters (16 -> 16: 5.3 against 6.0 us; 1.09x at batch 256; 32 or 64 -> 16 the same speed). oneDNN's is as fast
    // or faster for more filters (16 -> 32: 9.5 against 9.4; 32 -> 64 at 14 x 14: 9.3 against 7.7 in a first
    // version that took them), which it blocks 64 at a time where this kernel re-reads the source per 16.
    static bool ownApplies(const Int8ConvSpec& s) {
        static const bool vnni = __builtin_cpu_supports("avx512vnni") != 0;
        const bool fewChannels = s.channels <= 4 && s.channels * s.kernelW <= 16 && s.dilationW == 1;
        const bool sixteen = s.channels % 4 == 0 && s.filters == 16;
        return vnni && useSimd() && !oneDnnOnly() && s.groups == 1 && s.filters % 16 == 0 && (fewChannels || sixteen);
    }
    static std::unique_ptr<avx512::VnniConv> makeOwn(const Int8ConvSpec& s, int outH, int outW) {
        auto k = std::make_unique<avx512::VnniConv>();
        *k = {s.channels,     s.height,    s.width, s.filters,   s.kernelH, s.kernelW, s.strideH,
              s.strideW,      s.padH,      s.padW,  s.dilationH, outH,      outW,      s.srcZeroPoint,
              s.dstZeroPoint, s.f32Output, {},      {},          {},        s.scales};
        // Each word's bytes as (kx, c) taps of a kernel row: contiguous bytes for few channels, else 4 channels.
        std::vector<std::array<std::pair<int, int>, 4>> wordTaps;
        if (s.channels % 4 == 0) {
            for (int kx = 0; kx < s.kernelW; ++kx)
                for (int c4 = 0; c4 < s.channels; c4 += 4) {
                    k->wordOffset.push_back(kx * s.dilationW * s.channels + c4);
                    wordTaps.push_back({{{kx, c4}, {kx, c4 + 1}, {kx, c4 + 2}, {kx, c4 + 3}}});
                }
        } else {
            const int bytes = s.channels * s.kernelW;
            for (int b = 0; b < bytes; b += 4) {
                k->wordOffset.push_back(b);
                std::array<std::pair<int, int>, 4> taps;
                for (int t = 0; t < 4; ++t)
                    taps[size_t(t)] = b + t < bytes ? std::pair{(b + t) / s.channels, (b + t) % s.channels}
                                                    : std::pair{-1, -1};  // past the row: a zero weight
                wordTaps.push_back(taps);
            }
        }
        const int words = k->words();
        k->weights.assign(static_cast<size_t>(s.filters) * s.kernelH * words, 0);
        k->offset.assign(static_cast<size_t>(s.filters), 0);
        for (int f = 0; f < s.filters; ++f) {
            int64_t sum = 0;
            for (int ky = 0; ky < s.kernelH; ++ky)
                for (int j = 0; j < words; ++j) {
                    uint32_t word = 0;
                    for (int t = 0; t < 4; ++t) {
                        const auto [kx, c] = wordTaps[size_t(j)][size_t(t)];
                        if (kx < 0) continue;
                        const int8_t w = s.weights[((size_t(f) * s.channels + c) * s.kernelH + ky) * s.kernelW + kx];
                        sum += w;
                        word |= uint32_t(uint8_t(w)) << (8 * t);
                    }
                    k->weights[((size_t(f / 16) * s.kernelH + ky) * words + j) * 16 + f % 16] = int32_t(word);
                }
            k->offset[size_t(f)] = int32_t((s.bias.empty() ? 0 : s.bias[size_t(f)]) - sum * s.srcZeroPoint);
        }
        return k;
    }
    // One item a sample, or a sample's rows in blocks when there are fewer samples than threads; one thread below
    // a million multiply-adds (the residual template's stem at batch 1: 0.11 M), where a region costs about what
    // the work does.
    void runOwn(int threads, int64_t batch, const uint8_t* src, void* dst) const {
        const avx512::VnniConv& k = *m_own;
        const double macs = double(batch) * k.outH * k.outW * k.filters * k.kernelH * k.words() * 4;
        const int most = macs < double(1 << 20) ? 1 : threadCount(threads);
        const int64_t blocks = batch >= most ? 1 : std::min<int64_t>(k.outH, (most + batch - 1) / batch);
        const int64_t items = batch * blocks;
        const int parts = int(std::min<int64_t>(most, items));
#pragma omp parallel for num_threads(parts) if (parts > 1) schedule(static)
        for (int64_t item = 0; item < items; ++item) {
            thread_local std::vector<uint8_t> padded;
            const int64_t b = item % blocks;
            avx512::vnniConv(k, src, dst, item / blocks, int(k.outH * b / blocks), int(k.outH * (b + 1) / blocks),
                             padded);
        }
    }

    Int8ConvSpec m_spec;
    int m_outH = 0, m_outW = 0;
    memory m_bias;
    std::unique_ptr<avx512::VnniConv> m_own;
};

class MatmulKernel : public CachedKernel {
public:
    explicit MatmulKernel(const Int8MatmulSpec& spec) : m_spec(spec) {
        // No padding here, so the source's zero point folds into the bias exactly, w (q - zp) = w q - zp sum(w):
        // oneDNN's matmul without a source zero point is faster (fashion_cnn_bn's fc1 at batch 256: 5 -> 1.5 ms).
        if (spec.srcZeroPoint != 0) {
            std::vector<int64_t> bias(static_cast<size_t>(spec.outputs), 0);
            bool fits = true;
            for (int o = 0; o < spec.outputs; ++o) {
                int64_t sum = 0;
                for (int k = 0; k < spec.inputs; ++k) sum += spec.weights[static_cast<size_t>(o) * spec.inputs + k];
                const int64_t b = (spec.bias.empty() ? 0 : spec.bias[static_cast<size_t>(o)]) - sum * spec.srcZeroPoint;
                fits = fits && b >= INT32_MIN && b <= INT32_MAX;
                bias[static_cast<size_t>(o)] = b;
            }
            if (fits) {
                m_spec.bias.assign(bias.begin(), bias.end());
                m_spec.srcZeroPoint = 0;
            }
        }
        m_tiny = !oneDnnOnly();
        if (!m_spec.bias.empty())
            m_bias = memory(memory::desc({1, spec.outputs}, DType::s32, Tag::ab), cpuEngine(),
                            const_cast<int32_t*>(m_spec.bias.data()));
        OmpThreads scope(1);
        builtFor(1);
    }
    std::string implementation() const override {
        const std::string onednn = CachedKernel::implementation();
        return m_tiny && int64_t(m_spec.inputs) * m_spec.outputs < kTiny
                   ? onednn + "; Strata's loop for a pass of fewer than " + std::to_string(kTiny) + " multiply-adds"
                   : onednn;
    }
    void run(int threads, int64_t batch, const uint8_t* src, void* dst) override {
        if (m_tiny && batch * m_spec.inputs * m_spec.outputs < kTiny) {
            runTiny(batch, src, dst);
            ++g_matmuls;
            return;
        }
        OmpThreads scope(threads);
        execute(builtFor(batch), {{batch, m_spec.inputs}, DType::u8, Tag::ab}, src, dstDesc(batch), dst,
                m_spec.bias.empty() ? nullptr : &m_bias, m_spec.srcZeroPoint, m_spec.dstZeroPoint, m_spec.f32Output);
        ++g_matmuls;
    }

private:
    // A pass this small (a classifier's 16 x 10 at batch 1: 160) costs oneDNN's call more than its arithmetic
    // (0.6 us against 0.05 for the loop); the loop computes what oneDNN's kernel does (fewChannelConvEqualsOneDnn's
    // twin for matmuls: tinyMatmulEqualsOneDnn).
    static constexpr int64_t kTiny = 4096;
    void runTiny(int64_t batch, const uint8_t* src, void* dst) const {
        const Int8MatmulSpec& s = m_spec;
        for (int64_t b = 0; b < batch; ++b)
            for (int o = 0; o < s.outputs; ++o) {
                const uint8_t* x = src + b * s.inputs;
                const int8_t* w = s.weights.data() + int64_t(o) * s.inputs;
                int32_t acc = s.bias.empty() ? 0 : s.bias[size_t(o)];
                for (int i = 0; i < s.inputs; ++i) acc += (int32_t(x[i]) - s.srcZeroPoint) * int32_t(w[i]);
                const float y = float(acc) * s.scales[size_t(o)];
                const int64_t at = b * s.outputs + o;
                if (s.f32Output)
                    static_cast<float*>(dst)[at] = y;
                else  // as the convolutions round: the zero point added, then to even
                    static_cast<uint8_t*>(dst)[at] =
                        uint8_t(std::clamp(std::nearbyint(y + float(s.dstZeroPoint)), 0.0f, 255.0f));
            }
    }
    memory::desc dstDesc(int64_t n) const {
        return {{n, m_spec.outputs}, m_spec.f32Output ? DType::f32 : DType::u8, Tag::ab};
    }
    Built build(int64_t batch) override {
        const Int8MatmulSpec& s = m_spec;
        // The weights [outputs, inputs] read as the [inputs, outputs] matrix the matmul multiplies by.
        const memory::desc wUser({s.inputs, s.outputs}, DType::s8, Tag::ba);
        const memory::desc wAny({s.inputs, s.outputs}, DType::s8, Tag::any);
        const memory::desc biasDesc =
            s.bias.empty() ? memory::desc() : memory::desc({1, s.outputs}, DType::s32, Tag::ab);
        const dnnl::matmul::desc d(memory::desc({batch, s.inputs}, DType::u8, Tag::ab), wAny, biasDesc, dstDesc(batch));
        const dnnl::matmul::primitive_desc pd(d, quantizedAttr(s.scales, s.f32Output, s.srcZeroPoint != 0),
                                              cpuEngine());
        return {dnnl::matmul(pd), reordered(wUser, s.weights.data(), pd.weights_desc()), pd.impl_info_str(), {}};
    }

    Int8MatmulSpec m_spec;
    memory m_bias;
    bool m_tiny = true;  // runTiny where it applies (STRATA_INT8_ONEDNN: never)
};

class MaxPoolKernel : public CachedKernel {
public:
    explicit MaxPoolKernel(const Int8MaxPoolSpec& spec) : m_spec(spec) {
        m_outH = (spec.height + 2 * spec.padH - spec.kernelH) / spec.strideH + 1;
        m_outW = (spec.width + 2 * spec.padW - spec.kernelW) / spec.strideW + 1;
        OmpThreads scope(1);
        builtFor(1);
    }
    // 2x2 windows of stride 2 without padding (every max pooling of this project's examples) run in Strata's own
    // AVX-512 loop where the element-wise steps do (int8SimdInUse): oneDNN's took 0.92 ms for fashion_cnn_bn's
    // pool1 at batch 256 on one thread, ours 0.3 ms (the quiet 2-core VM). oneDNN's otherwise.
    std::string implementation() const override {
        return own() ? "strata:avx512, 2x2" : CachedKernel::implementation();
    }
    void run(int threads, int64_t batch, const uint8_t* src, void* dst) override {
        if (own()) {
            const Int8MaxPoolSpec& s = m_spec;
            const int64_t rows = batch * m_outH;
            auto* out = static_cast<uint8_t*>(dst);
            const int parts = static_cast<int>(std::min<int64_t>(threadCount(threads), rows));
#pragma omp parallel for num_threads(parts) if (parts > 1) schedule(static)
            for (int t = 0; t < parts; ++t)
                avx512::maxPool2x2(src, out, rows * t / parts, rows * (t + 1) / parts, s.height, s.width, s.channels,
                                   m_outH, m_outW);
        } else {
            OmpThreads scope(threads);
            runBuilt(builtFor(batch), srcDesc(batch), src, dstDesc(batch), dst, [](auto&) {});
        }
        ++g_pools;
    }

private:
    memory::desc srcDesc(int64_t n) const {
        return {{n, m_spec.channels, m_spec.height, m_spec.width}, DType::u8, Tag::nhwc};
    }
    memory::desc dstDesc(int64_t n) const { return {{n, m_spec.channels, m_outH, m_outW}, DType::u8, Tag::nhwc}; }
    Built build(int64_t batch) override {
        const Int8MaxPoolSpec& s = m_spec;
        const dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::pooling_max,
                                               srcDesc(batch), dstDesc(batch), {s.strideH, s.strideW},
                                               {s.kernelH, s.kernelW}, {0, 0}, {s.padH, s.padW}, {s.padH, s.padW});
        const dnnl::pooling_v2_forward::primitive_desc pd(d, cpuEngine());
        return {dnnl::pooling_v2_forward(pd), memory(), pd.impl_info_str(), {}};
    }

    bool own() const {
        const Int8MaxPoolSpec& s = m_spec;
        return s.kernelH == 2 && s.kernelW == 2 && s.strideH == 2 && s.strideW == 2 && s.padH == 0 && s.padW == 0 &&
               useSimd();
    }

    Int8MaxPoolSpec m_spec;
    int m_outH = 0, m_outW = 0;
};

}  // namespace

void int8AttentionCore(int threads, const Int8AttentionSpec& s, int64_t batch, const uint8_t* qkv, const float* ids,
                       uint8_t* context) {
    const int64_t t = s.length, d = s.width, dh = s.width / s.heads, row = 3 * d;
    const float scoreScale = s.qkvScale * s.qkvScale * s.scale, contextScale = s.probsScale * s.qkvScale;
    const Grid probsGrid{s.probsScale, 0}, contextGrid{s.contextScale, s.contextZeroPoint};
    const int64_t jobs = batch * s.heads;
    const int parts = int(std::max<int64_t>(1, std::min<int64_t>(threads > 0 ? threads : omp_get_max_threads(), jobs)));
    std::atomic<int> failed{0};
    const bool simd = int8SimdInUse();
#pragma omp parallel num_threads(parts) if (parts > 1)
    {
        // Per thread: K and V of one head as int8 (value - 128); the scores, then the context ([t, t] and [t, dh]:
        // `most` values); the weights as floats (a row, or all of them on the scalar path) and on their grid, then
        // the context on its grid.
        const auto most = size_t(t * std::max(t, dh));
        const auto kBuf = std::make_unique<int8_t[]>(size_t(t * dh)), vBuf = std::make_unique<int8_t[]>(size_t(t * dh));
        const auto sumsBuf = std::make_unique<int32_t[]>(most);
        const auto scoresBuf = std::make_unique<float[]>(most), weightsBuf = std::make_unique<float[]>(size_t(t * t));
        const auto pBuf = std::make_unique<uint8_t[]>(most);
        int8_t *k = kBuf.get(), *v = vBuf.get();
        int32_t* sums = sumsBuf.get();
        float *scores = scoresBuf.get(), *weights = weightsBuf.get();
        uint8_t* p = pBuf.get();
        const int32_t zero = 0;
        // One thread: oneDNN's GEMMs below must not start threads of their own (this region is inactive).
        if (parts == 1) omp_set_num_threads(1);
#pragma omp for schedule(static)
        for (int64_t job = 0; job < jobs; ++job) {
            const int64_t b = job / s.heads, h = job % s.heads;
            const uint8_t* base = qkv + b * t * row;
            for (int64_t i = 0; i < t; ++i)
                for (int64_t c = 0; c < dh; ++c) {
                    k[i * dh + c] = int8_t(int(base[i * row + d + h * dh + c]) - 128);
                    v[i * dh + c] = int8_t(int(base[i * row + 2 * d + h * dh + c]) - 128);
                }
            // (Q - 128) (K - 128)^T: A's offset is its zero point.
            if (dnnl_gemm_u8s8s32('N', 'T', 'F', t, t, dh, 1.0f, base + h * dh, row, 128, k, dh, 0, 0.0f, sums, t,
                                  &zero) != dnnl_success) {
                failed = 1;
                continue;
            }
            if (simd) {
                for (int64_t i = 0; i < t; ++i)
                    avx512::softmaxToGrid(sums + i * t, ids ? ids + b * t : nullptr, int(t), scoreScale, weights,
                                          p + i * t, probsGrid);
            } else {
                for (int64_t i = 0; i < t * t; ++i) scores[i] = float(sums[i]) * scoreScale;
                maskedSoftmaxForward(1, weights, scores, ids ? ids + b * t : nullptr, 1, int(t), int(t));
                quantizeToGrid(1, weights, p, t * t, probsGrid);
            }
            if (dnnl_gemm_u8s8s32('N', 'N', 'F', t, dh, t, 1.0f, p, t, 0, v, dh, 0, 0.0f, sums, dh, &zero) !=
                dnnl_success) {
                failed = 1;
                continue;
            }
            uint8_t* out = context + b * t * d + h * dh;
            for (int64_t i = 0; i < t * dh; ++i) scores[i] = float(sums[i]) * contextScale;
            quantizeToGrid(1, scores, p, t * dh, contextGrid);  // the weights' bytes are free now
            for (int64_t i = 0; i < t; ++i) std::copy_n(p + i * dh, dh, out + i * d);
        }
    }
    if (failed) throw std::runtime_error("int8 attention: oneDNN's u8 x s8 GEMM failed");
}

std::string int8Unavailable() {
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto vnni = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_vnni);
    if ((isa & vnni) == vnni) return {};  // AVX512-VNNI, or AMX (whose ISA value contains it)
    return "this CPU has no AVX512-VNNI (lscpu flag avx512_vnni), on which oneDNN runs int8 natively; without it "
           "oneDNN emulates the u8 x s8 products slowly" +
           std::string(std::getenv("DNNL_MAX_CPU_ISA") ? " (limited by DNNL_MAX_CPU_ISA)" : "");
}

Int8Counters int8Counters() { return {g_convs.load(), g_matmuls.load(), g_pools.load()}; }

std::unique_ptr<Int8Kernel> makeInt8Conv(const Int8ConvSpec& spec) { return std::make_unique<ConvKernel>(spec); }
std::unique_ptr<Int8Kernel> makeInt8Matmul(const Int8MatmulSpec& spec) { return std::make_unique<MatmulKernel>(spec); }
std::unique_ptr<Int8Kernel> makeInt8MaxPool(const Int8MaxPoolSpec& spec) {
    return std::make_unique<MaxPoolKernel>(spec);
}

}  // namespace strata::cpu

#else  // no oneDNN in this build: int8 is refused

namespace strata::cpu {

namespace {
const char* kNoOneDnn = "this build of Strata has no oneDNN (libdnnl-dev), which runs CPU int8";
}

std::string int8Unavailable() { return kNoOneDnn; }
Int8Counters int8Counters() { return {}; }
std::unique_ptr<Int8Kernel> makeInt8Conv(const Int8ConvSpec&) { throw std::runtime_error(kNoOneDnn); }
std::unique_ptr<Int8Kernel> makeInt8Matmul(const Int8MatmulSpec&) { throw std::runtime_error(kNoOneDnn); }
std::unique_ptr<Int8Kernel> makeInt8MaxPool(const Int8MaxPoolSpec&) { throw std::runtime_error(kNoOneDnn); }
void int8AttentionCore(int, const Int8AttentionSpec&, int64_t, const uint8_t*, const float*, uint8_t*) {
    throw std::runtime_error(kNoOneDnn);
}

}  // namespace strata::cpu

#endif
