// Fast paths of CpuBackend other than convolution (see CpuFast.h): GEMM split
// across threads over single-threaded oneDNN or OpenBLAS calls, and parallel, vectorizable
// loops. Where an op is independent per row, channel or element range, the
// reference loop itself runs on disjoint chunks, which keeps the result
// bit-identical to the reference.
#include "core/backend/CpuFast.h"

#include <cblas.h>

#ifdef STRATA_HAVE_ONEDNN
#include <dnnl.h>
#endif

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "core/backend/CpuBf16.h"
#include "core/backend/CpuParallel.h"
#include "core/backend/CpuReference.h"

namespace strata::cpu {

namespace {

// Items per thread below which splitting costs more than it saves.
constexpr int64_t kElementGrain = 1 << 15;

// Rows per part such that each part has about kElementGrain elements.
int64_t rowGrain(int64_t cols) { return std::max<int64_t>(1, kElementGrain / std::max<int64_t>(1, cols)); }

// ---- float math that vectorizes (branch-free, no library calls), for GELU and softmax ----------------------
// The reference (CpuReference.cpp) computes these in double through std::exp / std::erf; the fast paths stay
// within the op tolerances of tests/test_backend_ops.cpp (a few float ulps).

// exp(x) for x clamped to [-87, 88]: 2^n * e^r with n = round(x / ln 2) and |r| <= ln 2 / 2, e^r by Cephes'
// expf polynomial (relative error about 1e-7). The rounding adds and subtracts 1.5 * 2^23, which rounds to
// nearest in float arithmetic without a call to nearbyint.
[[gnu::always_inline]] inline float expFast(float x) {
    x = x < -87.0f ? -87.0f : x;  // value selects (std::min returns a reference, which does not vectorize)
    x = x > 88.0f ? 88.0f : x;
    const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    return p * std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
}

// Phi(x), the standard normal CDF, as 1 - erfc(z)/2 or erfc(z)/2 with z = |x| / sqrt 2, and erfc by the
// Chebyshev fit of Numerical Recipes (fractional error below 1.2e-7 for every z >= 0).
[[gnu::always_inline]] inline float normalCdf(float x) {
    const float z = std::fabs(x) * 0.70710678118654752f;
    const float t = 1.0f / (1.0f + 0.5f * z);
    float q = 0.17087277f;
    q = q * t - 0.82215223f;
    q = q * t + 1.48851587f;
    q = q * t - 1.13520398f;
    q = q * t + 0.27886807f;
    q = q * t - 0.18628806f;
    q = q * t + 0.09678418f;
    q = q * t + 0.37409196f;
    q = q * t + 1.00002368f;
    q = q * t - 1.26551223f;
    const float half = 0.5f * t * expFast(q - z * z);
    return x >= 0.0f ? 1.0f - half : half;
}

// GELU (exact, erf form) and its derivative Phi(x) + x phi(x).
[[gnu::always_inline]] inline float geluFast(float x) { return x * normalCdf(x); }
[[gnu::always_inline]] inline float geluDerivativeFast(float x) {
    return normalCdf(x) + x * 0.39894228040143268f * expFast(-0.5f * x * x);
}

// Softmax of one row; keep (may be null) excludes columns where it is 0 (they get 0; no kept column: all 0).
[[gnu::always_inline]] inline void softmaxRow(float* y, const float* x, const float* keep, int cols) {
    constexpr float kLowest = -3.4e38f;
    float mx = kLowest;
    if (keep) {
        STRATA_SIMD_MAX(mx)
        for (int c = 0; c < cols; ++c) {
            const float xc = x[c];  // loaded unconditionally: a conditional load does not vectorize
            const float v = keep[c] != 0.0f ? xc : kLowest;
            mx = v > mx ? v : mx;
        }
    } else {
        STRATA_SIMD_MAX(mx)
        for (int c = 0; c < cols; ++c) mx = x[c] > mx ? x[c] : mx;
    }
    float total = 0.0f;
    if (keep) {
        STRATA_SIMD_SUM(total)
        for (int c = 0; c < cols; ++c) {
            const float all = expFast(x[c] - mx);
            const float e = keep[c] != 0.0f ? all : 0.0f;
            y[c] = e;
            total += e;
        }
    } else {
        STRATA_SIMD_SUM(total)
        for (int c = 0; c < cols; ++c) {
            const float e = expFast(x[c] - mx);
            y[c] = e;
            total += e;
        }
    }
    const float inv = total > 0.0f ? 1.0f / total : 0.0f;
    STRATA_SIMD
    for (int c = 0; c < cols; ++c) y[c] *= inv;
}

// The loops over these, as ranges. On x86-64 each is compiled twice, for the baseline the build targets (SSE2)
// and for AVX2 with FMA, and the CPU picks at run time: the polynomials run 8 lanes wide with fused
// multiply-adds (GELU about 2x faster on an AVX2 machine). Values differ from the baseline's by float
// rounding only; both stay within the op tolerances against the double reference.
[[gnu::always_inline]] inline void geluForwardLoop(float* y, const float* x, int64_t n) {
    STRATA_SIMD
    for (int64_t i = 0; i < n; ++i) y[i] = geluFast(x[i]);
}
[[gnu::always_inline]] inline void geluBackwardLoop(float* dx, const float* dy, const float* x, int64_t n) {
    STRATA_SIMD
    for (int64_t i = 0; i < n; ++i) dx[i] += dy[i] * geluDerivativeFast(x[i]);
}
// Rows [r0, r1) of [rows, cols]; keep (may be null) holds a mask row per group of rowsPerGroup rows.
[[gnu::always_inline]] inline void softmaxRowsLoop(float* y, const float* x, const float* keep, int64_t r0, int64_t r1,
                                                   int rowsPerGroup, int cols) {
    for (int64_t r = r0; r < r1; ++r)
        softmaxRow(y + r * cols, x + r * cols, keep ? keep + (r / rowsPerGroup) * cols : nullptr, cols);
}

// LayerNorm of rows [0, rows) in float (the reference accumulates in double): two passes for the mean and the
// variance, then the affine map; gamma and beta may be null. Backward adds into dx (may be null) and into the
// per-column partial sums dgamma and dbeta, as the reference does.
[[gnu::always_inline]] inline void layerNormForwardLoop(float* y, float* mean, float* rstd, const float* x,
                                                        const float* gamma, const float* beta, int64_t rows, int cols,
                                                        float eps) {
    const float inv = 1.0f / static_cast<float>(cols);
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        float sum = 0.0f;
        STRATA_SIMD_SUM(sum)
        for (int c = 0; c < cols; ++c) sum += xr[c];
        const float mu = sum * inv;
        float sq = 0.0f;
        STRATA_SIMD_SUM(sq)
        for (int c = 0; c < cols; ++c) {
            const float d = xr[c] - mu;
            sq += d * d;
        }
        const float rs = 1.0f / std::sqrt(sq * inv + eps);
        if (gamma && beta) {
            STRATA_SIMD
            for (int c = 0; c < cols; ++c) yr[c] = (xr[c] - mu) * rs * gamma[c] + beta[c];
        } else {
            for (int c = 0; c < cols; ++c)
                yr[c] = (xr[c] - mu) * rs * (gamma ? gamma[c] : 1.0f) + (beta ? beta[c] : 0.0f);
        }
        if (mean) mean[r] = mu;
        if (rstd) rstd[r] = rs;
    }
}
[[gnu::always_inline]] inline void layerNormBackwardLoop(float* dx, float* dgamma, float* dbeta, const float* dy,
                                                         const float* x, const float* gamma, const float* mean,
                                                         const float* rstd, int64_t rows, int cols) {
    const float inv = 1.0f / static_cast<float>(cols);
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        const float* gr = dy + r * cols;
        const float mu = mean[r], rs = rstd[r];
        float sumG = 0.0f, sumGXhat = 0.0f;
        if (gamma) {
            STRATA_SIMD_SUM(sumG, sumGXhat)
            for (int c = 0; c < cols; ++c) {
                const float xhat = (xr[c] - mu) * rs;
                const float g = gr[c] * gamma[c];
                sumG += g;
                sumGXhat += g * xhat;
                dbeta[c] += gr[c];
                dgamma[c] += gr[c] * xhat;
            }
        } else {
            STRATA_SIMD_SUM(sumG, sumGXhat)
            for (int c = 0; c < cols; ++c) {
                const float xhat = (xr[c] - mu) * rs;
                sumG += gr[c];
                sumGXhat += gr[c] * xhat;
                dbeta[c] += gr[c];
                dgamma[c] += gr[c] * xhat;
            }
        }
        if (!dx) continue;
        float* dr = dx + r * cols;
        const float meanG = sumG * inv, meanGXhat = sumGXhat * inv;
        STRATA_SIMD
        for (int c = 0; c < cols; ++c) {
            const float xhat = (xr[c] - mu) * rs;
            const float g = gr[c] * (gamma ? gamma[c] : 1.0f);
            dr[c] += rs * (g - meanG - xhat * meanGXhat);
        }
    }
}

// Column sums of rows [0, rows) over columns [c0, c1) (at most 64), added to dbias: double accumulators on the
// stack, one row after another.
[[gnu::always_inline]] inline void sumRowsTileLoop(float* dbias, const float* dy, int rows, int cols, int c0, int c1) {
    double acc[64] = {};
    const int width = c1 - c0;
    for (int r = 0; r < rows; ++r) {
        const float* row = dy + static_cast<size_t>(r) * cols + c0;
        STRATA_SIMD
        for (int c = 0; c < width; ++c) acc[c] += row[c];
    }
    for (int c = 0; c < width; ++c) dbias[c0 + c] += static_cast<float>(acc[c]);
}

// STRATA_NO_AVX2 (any value) keeps the baseline, so that tests can check both on one machine. Elsewhere than
// x86-64 the "Avx2" copies are plain ones that are never called.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define STRATA_AVX2_FMA [[gnu::target("avx2,fma")]]
bool hasAvx2Fma() {
    static const bool yes =
        __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && std::getenv("STRATA_NO_AVX2") == nullptr;
    return yes;
}
#else
#define STRATA_AVX2_FMA
bool hasAvx2Fma() { return false; }
#endif
STRATA_AVX2_FMA void geluForwardAvx2(float* y, const float* x, int64_t n) { geluForwardLoop(y, x, n); }
STRATA_AVX2_FMA void geluBackwardAvx2(float* dx, const float* dy, const float* x, int64_t n) {
    geluBackwardLoop(dx, dy, x, n);
}
STRATA_AVX2_FMA void softmaxRowsAvx2(float* y, const float* x, const float* keep, int64_t r0, int64_t r1,
                                     int rowsPerGroup, int cols) {
    softmaxRowsLoop(y, x, keep, r0, r1, rowsPerGroup, cols);
}
STRATA_AVX2_FMA void layerNormForwardAvx2(float* y, float* mean, float* rstd, const float* x, const float* gamma,
                                          const float* beta, int64_t rows, int cols, float eps) {
    layerNormForwardLoop(y, mean, rstd, x, gamma, beta, rows, cols, eps);
}
STRATA_AVX2_FMA void layerNormBackwardAvx2(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                                           const float* gamma, const float* mean, const float* rstd, int64_t rows,
                                           int cols) {
    layerNormBackwardLoop(dx, dgamma, dbeta, dy, x, gamma, mean, rstd, rows, cols);
}
STRATA_AVX2_FMA void sumRowsTileAvx2(float* dbias, const float* dy, int rows, int cols, int c0, int c1) {
    sumRowsTileLoop(dbias, dy, rows, cols, c0, c1);
}
#undef STRATA_AVX2_FMA

void geluForwardRange(float* y, const float* x, int64_t n) {
    if (hasAvx2Fma())
        geluForwardAvx2(y, x, n);
    else
        geluForwardLoop(y, x, n);
}
void geluBackwardRange(float* dx, const float* dy, const float* x, int64_t n) {
    if (hasAvx2Fma())
        geluBackwardAvx2(dx, dy, x, n);
    else
        geluBackwardLoop(dx, dy, x, n);
}
void sumRowsTile(float* dbias, const float* dy, int rows, int cols, int c0, int c1) {
    if (hasAvx2Fma())
        sumRowsTileAvx2(dbias, dy, rows, cols, c0, c1);
    else
        sumRowsTileLoop(dbias, dy, rows, cols, c0, c1);
}
void layerNormForwardRows(float* y, float* mean, float* rstd, const float* x, const float* gamma, const float* beta,
                          int64_t rows, int cols, float eps) {
    if (hasAvx2Fma())
        layerNormForwardAvx2(y, mean, rstd, x, gamma, beta, rows, cols, eps);
    else
        layerNormForwardLoop(y, mean, rstd, x, gamma, beta, rows, cols, eps);
}
void layerNormBackwardRows(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x, const float* gamma,
                           const float* mean, const float* rstd, int64_t rows, int cols) {
    if (hasAvx2Fma())
        layerNormBackwardAvx2(dx, dgamma, dbeta, dy, x, gamma, mean, rstd, rows, cols);
    else
        layerNormBackwardLoop(dx, dgamma, dbeta, dy, x, gamma, mean, rstd, rows, cols);
}
void softmaxRows(float* y, const float* x, const float* keep, int64_t r0, int64_t r1, int rowsPerGroup, int cols) {
    if (hasAvx2Fma())
        softmaxRowsAvx2(y, x, keep, r0, r1, rowsPerGroup, cols);
    else
        softmaxRowsLoop(y, x, keep, r0, r1, rowsPerGroup, cols);
}

}  // namespace

// ---- workspace ----------------------------------------------------------------

Workspace::~Workspace() {
    for (Block& b : m_blocks) std::free(b.ptr);
    destroyDnnlCache(dnnl);
    destroyBf16Cache(bf16Cache);
}

void Workspace::prepare(int first, int count, size_t floats) {
    const size_t end = static_cast<size_t>(first + count);
    if (m_blocks.size() < end) m_blocks.resize(end);
    for (size_t i = static_cast<size_t>(first); i < end; ++i) {
        Block& b = m_blocks[i];
        if (b.floats >= floats) continue;
        std::free(b.ptr);
        b = Block{};
        const size_t bytes = (std::max<size_t>(floats, 1) * sizeof(float) + 63) / 64 * 64;
        b.ptr = static_cast<float*>(std::aligned_alloc(64, bytes));
        if (!b.ptr)
            throw OutOfMemoryError("cpu: out of memory for a " + std::to_string(bytes) + "-byte scratch buffer", bytes);
        b.floats = floats;
    }
}

// ---- GEMM -----------------------------------------------------------------------

void blasSingleThreaded() {
    static std::once_flag once;
    std::call_once(once, [] { openblas_set_num_threads(1); });
}

namespace {

#if defined(STRATA_HAVE_ONEDNN) && defined(_OPENMP)
// Restores the OpenMP thread count after a call that must run on the calling thread.
class SerialOmp {
public:
    SerialOmp() : m_saved(omp_in_parallel() ? 0 : omp_get_max_threads()) {
        if (m_saved > 1) omp_set_num_threads(1);
    }
    ~SerialOmp() {
        if (m_saved > 1) omp_set_num_threads(m_saved);
    }
    SerialOmp(const SerialOmp&) = delete;
    SerialOmp& operator=(const SerialOmp&) = delete;

private:
    int m_saved;
};
#endif

}  // namespace

bool sgemmOnThisThread(bool useOneDnn, bool transA, bool transB, int m, int n, int k, float alpha, const float* a,
                       int lda, const float* b, int ldb, float beta, float* c, int ldc) {
#ifdef STRATA_HAVE_ONEDNN
    // oneDNN's sgemm picks its kernels from the CPU's feature flags; OpenBLAS 0.3.21 names its
    // kernels by CPU model and falls back to generic SSE3 code on models it does not know
    // (a 5-8x slower GEMM on this project's AVX-512 machines), so oneDNN goes first.
    if (useOneDnn && k > 0) {
#ifdef _OPENMP
        SerialOmp serial;  // inside a parallel region oneDNN already runs on the calling thread
#endif
        return dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) ==
               dnnl_success;
    }
#else
    (void)useOneDnn;
#endif
    blasSingleThreaded();
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, m, n, k, alpha,
                a, lda, b, ldb, beta, c, ldc);
    return true;
}

namespace {
// Operands this large are read from memory rather than cache, whatever the FLOPs (see gemm).
constexpr double kStreamedOperandBytes = 1 << 20;
}  // namespace

void gemm(int threads, bool useOneDnn, bool transA, bool transB, int m, int n, int k, float alpha, const float* a,
          int lda, const float* b, int ldb, float beta, float* c, int ldc) {
    std::atomic<bool> ok{true};
    // Below a few MFLOP a second thread costs more than it brings, unless the operands are large: a product
    // with one row (a Dense layer at batch 1) streams its weights from memory, and two threads stream twice as
    // fast (measured, bench_inference at batch 1: 1x3136 by 3136x128 18 -> 9.5 us, by 3136x256 37 -> 21 us).
    const double flops = 2.0 * m * n * k;
    const double operandBytes = 4.0 * (static_cast<double>(m) * k + static_cast<double>(k) * n);
    if (threads <= 1 || (flops < 4e6 && operandBytes < kStreamedOperandBytes)) {
        ok = sgemmOnThisThread(useOneDnn, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    } else if (n >= m) {
        // Split the longer of M and N into blocks of 16 (whole register tiles), one part per thread.
        constexpr int kBlock = 16;
        const int64_t blocks = (n + kBlock - 1) / kBlock;
        parallelFor(threads, blocks, 1, [&](int64_t b0, int64_t b1, int) {
            const int j0 = static_cast<int>(b0 * kBlock), j1 = std::min(n, static_cast<int>(b1 * kBlock));
            const float* bj = transB ? b + static_cast<size_t>(j0) * ldb : b + j0;
            if (!sgemmOnThisThread(useOneDnn, transA, transB, m, j1 - j0, k, alpha, a, lda, bj, ldb, beta, c + j0, ldc))
                ok = false;
        });
    } else {
        constexpr int kBlock = 16;
        const int64_t blocks = (m + kBlock - 1) / kBlock;
        parallelFor(threads, blocks, 1, [&](int64_t b0, int64_t b1, int) {
            const int i0 = static_cast<int>(b0 * kBlock), i1 = std::min(m, static_cast<int>(b1 * kBlock));
            const float* ai = transA ? a + i0 : a + static_cast<size_t>(i0) * lda;
            if (!sgemmOnThisThread(useOneDnn, transA, transB, i1 - i0, n, k, alpha, ai, lda, b, ldb, beta,
                                   c + static_cast<size_t>(i0) * ldc, ldc))
                ok = false;
        });
    }
    if (!ok)
        throw BackendError("gemm: oneDNN's sgemm rejected a " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                           std::to_string(k) + " product");
}

void gemmStridedBatched(int threads, bool useOneDnn, bool transA, bool transB, int m, int n, int k, float alpha,
                        const float* a, int lda, int64_t strideA, const float* b, int ldb, int64_t strideB, float beta,
                        float* c, int ldc, int64_t strideC, int count) {
    if (threads <= 1 || count < threads) {
        for (int i = 0; i < count; ++i)
            gemm(threads, useOneDnn, transA, transB, m, n, k, alpha, a + i * strideA, lda, b + i * strideB, ldb, beta,
                 c + i * strideC, ldc);
        return;
    }
    std::atomic<bool> ok{true};
    parallelFor(threads, count, 1, [&](int64_t i0, int64_t i1, int) {
        for (int64_t i = i0; i < i1; ++i)
            if (!sgemmOnThisThread(useOneDnn, transA, transB, m, n, k, alpha, a + i * strideA, lda, b + i * strideB,
                                   ldb, beta, c + i * strideC, ldc))
                ok = false;
    });
    if (!ok)
        throw BackendError("gemmStridedBatched: oneDNN's sgemm rejected a " + std::to_string(m) + "x" +
                           std::to_string(n) + "x" + std::to_string(k) + " product");
}

// ---- element-wise -----------------------------------------------------------------

void fill(int threads, float* y, float value, int64_t n) {
    parallelFor(threads, n, kElementGrain, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) y[i] = value;
    });
}

void scale(int threads, float* y, float alpha, int64_t n) {
    parallelFor(threads, n, kElementGrain, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) y[i] *= alpha;
    });
}

void axpy(int threads, float* y, float alpha, const float* x, int64_t n) {
    parallelFor(threads, n, kElementGrain, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) y[i] += alpha * x[i];
    });
}

void add(int threads, float* y, const float* a, const float* b, int64_t n) {
    parallelFor(threads, n, kElementGrain, [&](int64_t b0, int64_t e, int) {
        for (int64_t i = b0; i < e; ++i) y[i] = a[i] + b[i];
    });
}

void mul(int threads, float* y, const float* a, const float* b, int64_t n) {
    parallelFor(threads, n, kElementGrain, [&](int64_t b0, int64_t e, int) {
        for (int64_t i = b0; i < e; ++i) y[i] = a[i] * b[i];
    });
}

void addBiasRows(int threads, float* y, const float* bias, int rows, int cols) {
    parallelFor(threads, rows, rowGrain(cols), [&](int64_t b, int64_t e, int) {
        for (int64_t r = b; r < e; ++r) {
            float* row = y + r * cols;
            for (int c = 0; c < cols; ++c) row[c] += bias[c];
        }
    });
}

void sumRows(int threads, float* dbias, const float* dy, int rows, int cols) {
    // Columns in tiles: each tile sums all rows into double accumulators kept on the stack.
    constexpr int kTile = 64;
    const int64_t tiles = (cols + kTile - 1) / kTile;
    parallelFor(threads, tiles, std::max<int64_t>(1, kElementGrain / (static_cast<int64_t>(rows) * kTile)),
                [&](int64_t t0, int64_t t1, int) {
                    for (int64_t t = t0; t < t1; ++t) {
                        const int c0 = static_cast<int>(t * kTile);
                        sumRowsTile(dbias, dy, rows, cols, c0, std::min(cols, c0 + kTile));
                    }
                });
}

void addBiasChannels(int threads, float* y, const float* bias, int n, int c, int inner) {
    const int64_t planes = static_cast<int64_t>(n) * c;
    parallelFor(threads, planes, rowGrain(inner), [&](int64_t b, int64_t e, int) {
        for (int64_t p = b; p < e; ++p) {
            float* plane = y + p * inner;
            const float v = bias[p % c];
            for (int i = 0; i < inner; ++i) plane[i] += v;
        }
    });
}

namespace {

// Sum of a contiguous float range: vectorized float partial sums (OpenMP simd fixes the order).
inline float planeSum(const float* x, int n) {
    float s = 0.0f;
    STRATA_SIMD_SUM(s)
    for (int i = 0; i < n; ++i) s += x[i];
    return s;
}

}  // namespace

void sumChannels(int threads, float* dbias, const float* dy, int n, int c, int inner) {
    parallelFor(threads, c, std::max<int64_t>(1, kElementGrain / (static_cast<int64_t>(n) * inner)),
                [&](int64_t c0, int64_t c1, int) {
                    for (int64_t ch = c0; ch < c1; ++ch) {
                        double acc = 0.0;
                        for (int b = 0; b < n; ++b)
                            acc += planeSum(dy + (static_cast<size_t>(b) * c + ch) * inner, inner);
                        dbias[ch] += static_cast<float>(acc);
                    }
                });
}

void copyBlocks(int threads, float* dst, int64_t dstStride, const float* src, int64_t srcStride, int64_t blockLen,
                int64_t count, bool accumulate) {
    parallelFor(threads, count, rowGrain(blockLen), [&](int64_t b, int64_t e, int) {
        for (int64_t o = b; o < e; ++o) {
            float* d = dst + o * dstStride;
            const float* s = src + o * srcStride;
            if (accumulate)
                for (int64_t j = 0; j < blockLen; ++j) d[j] += s[j];
            else
                std::memmove(d, s, sizeof(float) * static_cast<size_t>(blockLen));
        }
    });
}

// ---- reductions ----------------------------------------------------------------------
// Per-part double partials, added in part order: deterministic for a fixed thread count.

namespace {

template <class PartFn>
double reduceParts(int threads, int64_t n, PartFn&& part) {
    constexpr int kMaxParts = 64;
    double partial[kMaxParts] = {};
    parallelFor(std::min(threads, kMaxParts), n, kElementGrain,
                [&](int64_t b, int64_t e, int p) { partial[p] = part(b, e); });
    double total = 0.0;
    for (double v : partial) total += v;
    return total;
}

}  // namespace

void reblock(int threads, float* dst, int dstBlock, const float* src, int srcBlock, int n, int c, int64_t hw,
             bool accumulate) {
    // Element (image, channel ch, position p) lives at ((image * C/B + ch / B) * hw + p) * B + ch % B when
    // blocked by B, at (image * C + ch) * hw + p in NCHW (B = 1 gives the same formula). Work items: one
    // image's group of g channels (g the larger block).
    const int64_t sb = srcBlock > 0 ? srcBlock : 1, db = dstBlock > 0 ? dstBlock : 1, g = std::max(sb, db);
    const int64_t groups = c / g;
    parallelFor(threads, int64_t(n) * groups, rowGrain(g * hw), [&](int64_t r0, int64_t r1, int) {
        for (int64_t r = r0; r < r1; ++r) {
            // The group's g channels start at the same offset in both layouts: (image * C + ch0) * hw.
            const int64_t start = r * g * hw;
            const float* s = src + start;
            float* d = dst + start;
            if (sb == 1 && db == g) {  // NCHW rows -> one block
                for (int64_t p = 0; p < hw; ++p)
                    for (int64_t j = 0; j < g; ++j) d[p * g + j] = (accumulate ? d[p * g + j] : 0.0f) + s[j * hw + p];
            } else if (db == 1 && sb == g) {  // one block -> NCHW rows
                for (int64_t j = 0; j < g; ++j)
                    for (int64_t p = 0; p < hw; ++p) d[j * hw + p] = (accumulate ? d[j * hw + p] : 0.0f) + s[p * g + j];
            } else {
                for (int64_t j = 0; j < g; ++j)
                    for (int64_t p = 0; p < hw; ++p) {
                        const float v = s[(j / sb * hw + p) * sb + j % sb];
                        float& out = d[(j / db * hw + p) * db + j % db];
                        out = accumulate ? out + v : v;
                    }
            }
        }
    });
}

double sum(int threads, const float* x, int64_t n) {
    return reduceParts(threads, n, [&](int64_t b, int64_t e) {
        double acc = 0.0;
        for (int64_t i = b; i < e; i += 1024) acc += planeSum(x + i, static_cast<int>(std::min<int64_t>(1024, e - i)));
        return acc;
    });
}

double sumSquares(int threads, const float* x, int64_t n) {
    return reduceParts(threads, n, [&](int64_t b, int64_t e) {
        double acc = 0.0;
        for (int64_t i = b; i < e; i += 1024) {
            const int64_t end = std::min<int64_t>(e, i + 1024);
            float s = 0.0f;
            STRATA_SIMD_SUM(s)
            for (int64_t j = i; j < end; ++j) s += x[j] * x[j];
            acc += s;
        }
        return acc;
    });
}

bool allFinite(int threads, const float* x, int64_t n) {
    // x * 0 is 0 for finite x and NaN for Inf/NaN, so one NaN test per block finds both.
    const double bad = reduceParts(threads, n, [&](int64_t b, int64_t e) {
        float s = 0.0f;
        STRATA_SIMD_SUM(s)
        for (int64_t i = b; i < e; ++i) s += x[i] * 0.0f;
        return std::isnan(s) ? 1.0 : 0.0;
    });
    return bad == 0.0;
}

// ---- pooling ---------------------------------------------------------------------------

namespace {

// Index (0..3) of the first maximal element of a 2x2 window in row-major order, as the reference picks it:
// the first maximum of each pair, then the second pair only if strictly greater. Written as selects, not
// branches, because on real data the winner is unpredictable. (With NaN in the window the choice may
// differ from the sequential scan; training has already failed then.)
inline int argmax4(float a, float b, float c, float d, float& best) {
    const bool pickB = b > a, pickD = d > c;
    const float m01 = pickB ? b : a, m23 = pickD ? d : c;
    const int i01 = pickB ? 1 : 0, i23 = pickD ? 3 : 2;
    const bool second = m23 > m01;
    best = second ? m23 : m01;
    return second ? i23 : i01;
}

}  // namespace

namespace {

// 2x2, stride-2 max pooling on a blocked tensor (PoolDesc::block = B): per image and channel block, the B
// channels of a position side by side, so each window is four B-vectors; the same winner rule as argmax4.
// Backward adds each dy to its window's winner (kReLUMask: only where the maximum y is positive). Written with
// 4-float vectors (GCC's vector extension, SSE2 in the baseline build): left to itself GCC unrolls the B-long
// channel loops into scalar code (measured 4x slower than the NCHW loops).
using Float4 = float __attribute__((vector_size(16)));
inline Float4 load4(const float* p) {
    Float4 v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
inline void store4(float* p, Float4 v) { std::memcpy(p, &v, sizeof v); }

template <int B>
void maxPool2x2BlockedForward(int threads, float* y, const float* x, const PoolDesc& d) {
    const int OH = d.outH(), OW = d.outW();
    const int64_t planes = int64_t(d.n) * (d.c / B);
    const size_t inPlane = size_t(d.h) * d.w * B, outPlane = size_t(OH) * OW * B;
    parallelFor(threads, planes, rowGrain(static_cast<int64_t>(inPlane)), [&](int64_t b, int64_t e, int) {
        for (int64_t p = b; p < e; ++p)
            for (int oh = 0; oh < OH; ++oh)
                for (int ow = 0; ow < OW; ++ow) {
                    const float* a0 = x + p * inPlane + (size_t(2 * oh) * d.w + 2 * ow) * B;
                    const float* a1 = a0 + size_t(d.w) * B;
                    float* out = y + p * outPlane + (size_t(oh) * OW + ow) * B;
                    for (int j = 0; j < B; j += 4) {
                        const Float4 a = load4(a0 + j), bb = load4(a0 + B + j), c = load4(a1 + j),
                                     ee = load4(a1 + B + j);
                        const Float4 m01 = bb > a ? bb : a, m23 = ee > c ? ee : c;
                        store4(out + j, m23 > m01 ? m23 : m01);
                    }
                }
    });
}

// kOverwrite: each window's four elements are written, not added to (windows that tile the input: even sizes).
template <int B, bool kReLUMask, bool kOverwrite>
void maxPool2x2BlockedBackward(int threads, float* dx, const float* dy, const float* x, const float* y,
                               const PoolDesc& d) {
    const int OH = d.outH(), OW = d.outW();
    const int64_t planes = int64_t(d.n) * (d.c / B);
    const size_t inPlane = size_t(d.h) * d.w * B, outPlane = size_t(OH) * OW * B;
    const Float4 zero{0.0f, 0.0f, 0.0f, 0.0f};
    parallelFor(threads, planes, rowGrain(static_cast<int64_t>(inPlane)), [&](int64_t b, int64_t e, int) {
        for (int64_t p = b; p < e; ++p)
            for (int oh = 0; oh < OH; ++oh)
                for (int ow = 0; ow < OW; ++ow) {
                    const size_t at0 = p * inPlane + (size_t(2 * oh) * d.w + 2 * ow) * B, at1 = at0 + size_t(d.w) * B;
                    const size_t out = p * outPlane + (size_t(oh) * OW + ow) * B;
                    for (int j = 0; j < B; j += 4) {
                        const Float4 a = load4(x + at0 + j), bb = load4(x + at0 + B + j), c = load4(x + at1 + j),
                                     ee = load4(x + at1 + B + j);
                        Float4 v = load4(dy + out + j);
                        if constexpr (kReLUMask) v = load4(y + out + j) > zero ? v : zero;
                        const auto pickB = bb > a, pickE = ee > c;
                        const Float4 m01 = pickB ? bb : a, m23 = pickE ? ee : c;
                        const auto second = m23 > m01;
                        const Float4 first = second ? zero : v, last = second ? v : zero;
                        if constexpr (kOverwrite) {
                            store4(dx + at0 + j, pickB ? zero : first);
                            store4(dx + at0 + B + j, pickB ? first : zero);
                            store4(dx + at1 + j, pickE ? zero : last);
                            store4(dx + at1 + B + j, pickE ? last : zero);
                        } else {
                            store4(dx + at0 + j, load4(dx + at0 + j) + (pickB ? zero : first));
                            store4(dx + at0 + B + j, load4(dx + at0 + B + j) + (pickB ? first : zero));
                            store4(dx + at1 + j, load4(dx + at1 + j) + (pickE ? zero : last));
                            store4(dx + at1 + B + j, load4(dx + at1 + B + j) + (pickE ? last : zero));
                        }
                    }
                }
    });
}

// The blocked pooling for the block in d (16 or 8, what oneDNN picks); false for another block.
bool maxPool2x2Blocked(int threads, float* y, const float* x, const PoolDesc& d) {
    if (d.block == 16) return maxPool2x2BlockedForward<16>(threads, y, x, d), true;
    if (d.block == 8) return maxPool2x2BlockedForward<8>(threads, y, x, d), true;
    return false;
}

// Whether 2x2 stride-2 windows cover every element of the input (even height and width): a backward that
// writes each window whole then writes all of dx.
bool windowsTile(const PoolDesc& d) { return d.isPlain2x2Max() && d.h % 2 == 0 && d.w % 2 == 0; }

// dx = 0 over the whole input, for an overwriting backward whose windows leave elements out.
void zeroInput(int threads, float* dx, const PoolDesc& d) {
    const int64_t n = int64_t(d.n) * d.c * d.h * d.w;
    parallelFor(threads, n, kElementGrain, [&](int64_t b, int64_t e, int) { std::fill(dx + b, dx + e, 0.0f); });
}

template <bool kReLUMask, bool kOverwrite>
bool maxPool2x2BlockedGradAs(int threads, float* dx, const float* dy, const float* x, const float* y,
                             const PoolDesc& d) {
    if (d.block == 16) return maxPool2x2BlockedBackward<16, kReLUMask, kOverwrite>(threads, dx, dy, x, y, d), true;
    if (d.block == 8) return maxPool2x2BlockedBackward<8, kReLUMask, kOverwrite>(threads, dx, dy, x, y, d), true;
    return false;
}

template <bool kReLUMask>
bool maxPool2x2BlockedGrad(int threads, float* dx, const float* dy, const float* x, const float* y, const PoolDesc& d,
                           bool overwrite) {
    if (d.block != 16 && d.block != 8) return false;
    if (overwrite && windowsTile(d)) return maxPool2x2BlockedGradAs<kReLUMask, true>(threads, dx, dy, x, y, d);
    if (overwrite) zeroInput(threads, dx, d);
    return maxPool2x2BlockedGradAs<kReLUMask, false>(threads, dx, dy, x, y, d);
}

}  // namespace

void pool2dForward(int threads, float* y, const float* x, const PoolDesc& d) {
    if (d.block > 0) {
        if (!maxPool2x2Blocked(threads, y, x, d))
            throw BackendError("cpu: max pooling has no path for block " + std::to_string(d.block));
        return;
    }
    const int OH = d.outH(), OW = d.outW();
    const int64_t planes = static_cast<int64_t>(d.n) * d.c;
    const size_t inPlane = static_cast<size_t>(d.h) * d.w, outPlane = static_cast<size_t>(OH) * OW;
    parallelFor(threads, planes, rowGrain(static_cast<int64_t>(inPlane)), [&](int64_t b, int64_t e, int) {
        if (d.isPlain2x2Max()) {
            for (int64_t p = b; p < e; ++p) {
                const float* img = x + p * inPlane;
                float* out = y + p * outPlane;
                for (int oh = 0; oh < OH; ++oh) {
                    const float* r0 = img + static_cast<size_t>(2 * oh) * d.w;
                    const float* r1 = r0 + d.w;
                    for (int ow = 0; ow < OW; ++ow) {
                        float best;
                        argmax4(r0[2 * ow], r0[2 * ow + 1], r1[2 * ow], r1[2 * ow + 1], best);
                        out[static_cast<size_t>(oh) * OW + ow] = best;
                    }
                }
            }
            return;
        }
        PoolDesc part = d;
        part.n = 1;
        part.c = static_cast<int>(e - b);
        cpuref::pool2dForward(y + b * outPlane, x + b * inPlane, part);
    });
}

namespace {

// The 2x2, stride-2 max-pool backward over planes [b, e). With kReLUMask, each routed gradient is
// also multiplied by (x > 0): the backward of the ReLU whose output x is (maxPool2dReLUBackward).
// out[i] = y[i] > 0 ? g[i] : 0, both operands loaded unconditionally so the select vectorizes.
void maskRow(float* __restrict out, const float* __restrict g, const float* __restrict y, int n) {
    for (int i = 0; i < n; ++i) {
        const float v = g[i];
        out[i] = y[i] > 0.0f ? v : 0.0f;
    }
}

// kOverwrite: each window's four elements are written, not added to (windows that tile the input: even sizes).
template <bool kReLUMask, bool kOverwrite>
void maxPool2x2Backward(float* dx, const float* dy, const float* x, const float* y, const PoolDesc& d, int64_t b,
                        int64_t e) {
    const int OH = d.outH(), OW = d.outW();
    const size_t inPlane = static_cast<size_t>(d.h) * d.w, outPlane = static_cast<size_t>(OH) * OW;
    std::vector<float> masked(kReLUMask ? static_cast<size_t>(OW) : 0);
    for (int64_t p = b; p < e; ++p) {
        const float* img = x + p * inPlane;
        float* dimg = dx + p * inPlane;
        const float* g = dy + p * outPlane;
        for (int oh = 0; oh < OH; ++oh) {
            const float* gr = g + static_cast<size_t>(oh) * OW;
            if constexpr (kReLUMask) {
                // The routed element is positive exactly when its window's maximum y is (the ReLU
                // mask): mask the output row first, in a loop that vectorizes, so the window loop
                // below stays the branch-free one of plain max pooling.
                maskRow(masked.data(), gr, y + p * outPlane + static_cast<size_t>(oh) * OW, OW);
                gr = masked.data();
            }
            const size_t r0 = static_cast<size_t>(2 * oh) * d.w, r1 = r0 + d.w;
            // Every window adds to all four of its elements (zero to three of them), so there is
            // no data-dependent address and no branch.
            // The winner is encoded as 0/1 factors (the same rule as argmax4), which GCC
            // keeps free of branches; an integer index led to a mispredicted branch per window.
            const float* x0 = img + r0;
            const float* x1 = img + r1;
            float* d0 = dimg + r0;
            float* d1 = dimg + r1;
            for (int ow = 0; ow < OW; ++ow) {
                const int c0 = 2 * ow;
                const float a = x0[c0], bb = x0[c0 + 1], c = x1[c0], ee = x1[c0 + 1];
                const float pickB = bb > a ? 1.0f : 0.0f, pickE = ee > c ? 1.0f : 0.0f;
                const float m01 = bb > a ? bb : a, m23 = ee > c ? ee : c;
                const float second = m23 > m01 ? 1.0f : 0.0f;
                const float v = gr[ow];
                if constexpr (kOverwrite) {
                    d0[c0] = v * (1.0f - second) * (1.0f - pickB);
                    d0[c0 + 1] = v * (1.0f - second) * pickB;
                    d1[c0] = v * second * (1.0f - pickE);
                    d1[c0 + 1] = v * second * pickE;
                } else {
                    d0[c0] += v * (1.0f - second) * (1.0f - pickB);
                    d0[c0 + 1] += v * (1.0f - second) * pickB;
                    d1[c0] += v * second * (1.0f - pickE);
                    d1[c0 + 1] += v * second * pickE;
                }
            }
        }
    }
}

}  // namespace

void pool2dBackward(int threads, float* dx, const float* dy, const float* x, const PoolDesc& d, bool overwrite) {
    if (d.block > 0) {
        if (!maxPool2x2BlockedGrad<false>(threads, dx, dy, x, nullptr, d, overwrite))
            throw BackendError("cpu: max pooling has no path for block " + std::to_string(d.block));
        return;
    }
    const bool writeWindows = overwrite && windowsTile(d);
    if (overwrite && !writeWindows) zeroInput(threads, dx, d);
    const int OH = d.outH(), OW = d.outW();
    const int64_t planes = static_cast<int64_t>(d.n) * d.c;
    const size_t inPlane = static_cast<size_t>(d.h) * d.w, outPlane = static_cast<size_t>(OH) * OW;
    parallelFor(threads, planes, rowGrain(static_cast<int64_t>(inPlane)), [&](int64_t b, int64_t e, int) {
        if (d.isPlain2x2Max()) {
            if (writeWindows)
                maxPool2x2Backward<false, true>(dx, dy, x, nullptr, d, b, e);
            else
                maxPool2x2Backward<false, false>(dx, dy, x, nullptr, d, b, e);
            return;
        }
        PoolDesc part = d;
        part.n = 1;
        part.c = static_cast<int>(e - b);
        cpuref::pool2dBackward(dx + b * inPlane, dy + b * outPlane, x + b * inPlane, part);
    });
}

bool maxPool2dReLUBackward(int threads, float* dx, const float* dy, const float* x, const float* y, const PoolDesc& d,
                           bool overwrite) {
    if (d.block > 0 && y) return maxPool2x2BlockedGrad<true>(threads, dx, dy, x, y, d, overwrite);
    if (!d.isPlain2x2Max() || y == nullptr) return false;
    const bool writeWindows = overwrite && windowsTile(d);
    if (overwrite && !writeWindows) zeroInput(threads, dx, d);
    const int64_t planes = static_cast<int64_t>(d.n) * d.c;
    parallelFor(threads, planes, rowGrain(static_cast<int64_t>(d.h) * d.w), [&](int64_t b, int64_t e, int) {
        if (writeWindows)
            maxPool2x2Backward<true, true>(dx, dy, x, y, d, b, e);
        else
            maxPool2x2Backward<true, false>(dx, dy, x, y, d, b, e);
    });
    return true;
}

// inner == 1 (GlobalAvgPool: a plane per channel): contiguous vectorized sums and adds; else the reference
// loops per row block.
void meanPoolForward(int threads, float* y, const float* x, int outer, int len, int inner) {
    if (inner == 1) {
        parallelFor(threads, outer, rowGrain(len), [&](int64_t b, int64_t e, int) {
            for (int64_t o = b; o < e; ++o) y[o] = planeSum(x + o * len, len) / static_cast<float>(len);
        });
        return;
    }
    if (inner <= 64) {
        // The inner values side by side (GlobalAvgPool on a blocked tensor: inner = the block): vector sums in
        // float over runs of 64 positions, the runs added in double.
        parallelFor(threads, outer, rowGrain(static_cast<int64_t>(len) * inner), [&](int64_t b, int64_t e, int) {
            for (int64_t o = b; o < e; ++o) {
                const float* xo = x + o * len * inner;
                double acc[64] = {};
                for (int l0 = 0; l0 < len; l0 += 64) {
                    float part[64] = {};
                    const int l1 = std::min(len, l0 + 64);
                    for (int l = l0; l < l1; ++l)
                        for (int i = 0; i < inner; ++i) part[i] += xo[int64_t(l) * inner + i];
                    for (int i = 0; i < inner; ++i) acc[i] += part[i];
                }
                for (int i = 0; i < inner; ++i) y[o * inner + i] = static_cast<float>(acc[i] / len);
            }
        });
        return;
    }
    parallelFor(threads, outer, rowGrain(static_cast<int64_t>(len) * inner), [&](int64_t b, int64_t e, int) {
        cpuref::meanPoolForward(y + b * inner, x + b * len * inner, static_cast<int>(e - b), len, inner);
    });
}

void meanPoolBackward(int threads, float* dx, const float* dy, int outer, int len, int inner) {
    if (inner == 1) {
        parallelFor(threads, outer, rowGrain(len), [&](int64_t b, int64_t e, int) {
            for (int64_t o = b; o < e; ++o) {
                const float g = dy[o] / static_cast<float>(len);
                float* d = dx + o * len;
                for (int l = 0; l < len; ++l) d[l] += g;
            }
        });
        return;
    }
    if (inner <= 64) {
        parallelFor(threads, outer, rowGrain(static_cast<int64_t>(len) * inner), [&](int64_t b, int64_t e, int) {
            for (int64_t o = b; o < e; ++o) {
                float g[64];
                for (int i = 0; i < inner; ++i) g[i] = dy[o * inner + i] / static_cast<float>(len);
                float* d = dx + o * len * inner;
                for (int l = 0; l < len; ++l)
                    for (int i = 0; i < inner; ++i) d[int64_t(l) * inner + i] += g[i];
            }
        });
        return;
    }
    parallelFor(threads, outer, rowGrain(static_cast<int64_t>(len) * inner), [&](int64_t b, int64_t e, int) {
        cpuref::meanPoolBackward(dx + b * len * inner, dy + b * inner, static_cast<int>(e - b), len, inner);
    });
}

void sequencePoolForward(int threads, float* y, const float* x, const float* keep, int batch, int len, int dim,
                         PoolMode mode) {
    parallelFor(threads, batch, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, int64_t(len) * dim)),
                [&](int64_t b, int64_t e, int) {
                    cpuref::sequencePoolForward(y + b * dim, x + b * len * dim, keep ? keep + b * len : nullptr,
                                                static_cast<int>(e - b), len, dim, mode);
                });
}

void sequencePoolBackward(int threads, float* dx, const float* dy, const float* x, const float* y, const float* keep,
                          int batch, int len, int dim, PoolMode mode) {
    parallelFor(threads, batch, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, int64_t(len) * dim)),
                [&](int64_t b, int64_t e, int) {
                    cpuref::sequencePoolBackward(dx + b * len * dim, dy + b * dim, x ? x + b * len * dim : nullptr,
                                                 y ? y + b * dim : nullptr, keep ? keep + b * len : nullptr,
                                                 static_cast<int>(e - b), len, dim, mode);
                });
}

// ---- activations -------------------------------------------------------------------------

void activationForward(int threads, float* y, const float* x, int64_t n, Activation act, float alpha) {
    // ReLU and LeakyReLU are cheap enough that a GELU-sized grain would leave them single-threaded.
    const int64_t grain = act == Activation::ReLU || act == Activation::LeakyReLU ? kElementGrain : 2048;
    parallelFor(threads, n, grain, [&](int64_t b, int64_t e, int) {
        if (act == Activation::ReLU) {
            for (int64_t i = b; i < e; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
        } else if (act == Activation::LeakyReLU) {
            for (int64_t i = b; i < e; ++i) y[i] = x[i] > 0.0f ? x[i] : alpha * x[i];
        } else if (act == Activation::GELU) {
            geluForwardRange(y + b, x + b, e - b);
        } else if (act == Activation::HardSwish) {
            for (int64_t i = b; i < e; ++i) y[i] = x[i] * std::min(std::max(x[i] + 3.0f, 0.0f), 6.0f) * (1.0f / 6.0f);
        } else {
            cpuref::activationForward(y + b, x + b, e - b, act, alpha);
        }
    });
}

void reluBackwardWrite(int threads, float* dx, const float* dy, const float* gate, int64_t n) {
    parallelFor(threads, n, kElementGrain, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) {
            const float g = dy[i];
            dx[i] = gate[i] > 0.0f ? g : 0.0f;
        }
    });
}

void activationBackward(int threads, float* dx, const float* dy, const float* x, const float* y, int64_t n,
                        Activation act, float alpha) {
    const int64_t grain = act == Activation::ReLU || act == Activation::LeakyReLU ? kElementGrain : 2048;
    parallelFor(threads, n, grain, [&](int64_t b, int64_t e, int) {
        if (act == Activation::ReLU) {
            // Both operands are loaded unconditionally so the select vectorizes (a conditional load
            // of dy would compile to a branch, mispredicted half the time on real activations).
            const float* gate = x ? x : y;  // y > 0 exactly where x > 0
            for (int64_t i = b; i < e; ++i) {
                const float g = dy[i];
                dx[i] += gate[i] > 0.0f ? g : 0.0f;
            }
        } else if (act == Activation::LeakyReLU) {
            for (int64_t i = b; i < e; ++i) {
                const float g = dy[i];
                dx[i] += x[i] > 0.0f ? g : alpha * g;
            }
        } else if (act == Activation::GELU) {
            geluBackwardRange(dx + b, dy + b, x + b, e - b);
        } else if (act == Activation::HardSwish) {
            for (int64_t i = b; i < e; ++i) {
                const float v = x[i];
                dx[i] += dy[i] * (v < -3.0f ? 0.0f : v <= 3.0f ? v * (1.0f / 3.0f) + 0.5f : 1.0f);
            }
        } else {
            cpuref::activationBackward(dx + b, dy + b, x ? x + b : nullptr, y ? y + b : nullptr, e - b, act, alpha);
        }
    });
}

void clipForward(int threads, float* y, const float* x, int64_t n, float lo, float hi) {
    parallelFor(threads, n, kElementGrain, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) y[i] = std::min(std::max(x[i], lo), hi);
    });
}

void clipBackward(int threads, float* dx, const float* dy, const float* x, int64_t n, float lo, float hi) {
    parallelFor(threads, n, kElementGrain, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) {
            const float g = dy[i];
            dx[i] += x[i] > lo && x[i] < hi ? g : 0.0f;
        }
    });
}

// ---- upsampling: one plane (image and channel) per task; the column taps computed once per call -------------

namespace {

std::vector<cpuref::UpsampleTap> upsampleTaps(int in, int out, int scale, const UpsampleDesc& d) {
    std::vector<cpuref::UpsampleTap> taps(static_cast<size_t>(out));
    for (int j = 0; j < out; ++j)
        taps[static_cast<size_t>(j)] = cpuref::upsampleTap(j, in, out, scale, d.bilinear, d.alignCorners);
    return taps;
}

int64_t planeGrain(const UpsampleDesc& d) {
    return std::max<int64_t>(1, kElementGrain / std::max<int64_t>(1, int64_t(d.outH()) * d.outW()));
}

}  // namespace

void upsample2dForward(int threads, float* y, const float* x, const UpsampleDesc& d) {
    const int oh = d.outH(), ow = d.outW();
    const std::vector<cpuref::UpsampleTap> rows = upsampleTaps(d.h, oh, d.scaleH, d),
                                           cols = upsampleTaps(d.w, ow, d.scaleW, d);
    parallelFor(threads, int64_t(d.n) * d.c, planeGrain(d), [&](int64_t b, int64_t e, int) {
        for (int64_t p = b; p < e; ++p) {
            const float* xp = x + p * d.h * d.w;
            float* yp = y + p * oh * ow;
            for (int i = 0; i < oh; ++i) {
                const cpuref::UpsampleTap& ty = rows[static_cast<size_t>(i)];
                float* yr = yp + static_cast<int64_t>(i) * ow;
                if (!d.bilinear) {
                    // Nearest: a row is its source row with each value repeated; the repeats of a row are copies.
                    if (i % d.scaleH != 0) {
                        std::copy_n(yr - ow, ow, yr);
                        continue;
                    }
                    const float* xr = xp + static_cast<int64_t>(ty.i0) * d.w;
                    for (int j = 0; j < ow; ++j) yr[j] = xr[j / d.scaleW];
                    continue;
                }
                const float* r0 = xp + static_cast<int64_t>(ty.i0) * d.w;
                const float* r1 = xp + static_cast<int64_t>(ty.i1) * d.w;
                for (int j = 0; j < ow; ++j) {
                    const cpuref::UpsampleTap& tx = cols[static_cast<size_t>(j)];
                    const float top = (1.0f - tx.frac) * r0[tx.i0] + tx.frac * r0[tx.i1];
                    const float bottom = (1.0f - tx.frac) * r1[tx.i0] + tx.frac * r1[tx.i1];
                    yr[j] = (1.0f - ty.frac) * top + ty.frac * bottom;
                }
            }
        }
    });
}

void upsample2dBackward(int threads, float* dx, const float* dy, const UpsampleDesc& d) {
    const int oh = d.outH(), ow = d.outW();
    const std::vector<cpuref::UpsampleTap> rows = upsampleTaps(d.h, oh, d.scaleH, d),
                                           cols = upsampleTaps(d.w, ow, d.scaleW, d);
    parallelFor(threads, int64_t(d.n) * d.c, planeGrain(d), [&](int64_t b, int64_t e, int) {
        for (int64_t p = b; p < e; ++p) {
            float* dxp = dx + p * d.h * d.w;
            const float* dyp = dy + p * oh * ow;
            for (int i = 0; i < oh; ++i) {
                const cpuref::UpsampleTap& ty = rows[static_cast<size_t>(i)];
                const float* gr = dyp + static_cast<int64_t>(i) * ow;
                float* r0 = dxp + static_cast<int64_t>(ty.i0) * d.w;
                float* r1 = dxp + static_cast<int64_t>(ty.i1) * d.w;
                if (!d.bilinear) {
                    for (int j = 0; j < ow; ++j) r0[j / d.scaleW] += gr[j];
                    continue;
                }
                for (int j = 0; j < ow; ++j) {
                    const cpuref::UpsampleTap& tx = cols[static_cast<size_t>(j)];
                    const float top = (1.0f - ty.frac) * gr[j], bottom = ty.frac * gr[j];
                    r0[tx.i0] += (1.0f - tx.frac) * top;
                    r0[tx.i1] += tx.frac * top;
                    r1[tx.i0] += (1.0f - tx.frac) * bottom;
                    r1[tx.i1] += tx.frac * bottom;
                }
            }
        }
    });
}

// ---- row-wise ops: the reference loop on disjoint row ranges ----------------------------------

void softmaxForward(int threads, float* y, const float* x, int rows, int cols) {
    parallelFor(threads, rows, rowGrain(cols) / 8 + 1,
                [&](int64_t b, int64_t e, int) { softmaxRows(y, x, nullptr, b, e, 1, cols); });
}

void softmaxBackward(int threads, float* dx, const float* dy, const float* y, int rows, int cols) {
    parallelFor(threads, rows, rowGrain(cols), [&](int64_t b, int64_t e, int) {
        for (int64_t r = b; r < e; ++r) {
            const float* yr = y + r * cols;
            const float* gr = dy + r * cols;
            float* dr = dx + r * cols;
            float dot = 0.0f;
            STRATA_SIMD_SUM(dot)
            for (int c = 0; c < cols; ++c) dot += gr[c] * yr[c];
            STRATA_SIMD
            for (int c = 0; c < cols; ++c) dr[c] += yr[c] * (gr[c] - dot);
        }
    });
}

void maskedSoftmaxForward(int threads, float* y, const float* x, const float* keep, int groups, int rowsPerGroup,
                          int cols) {
    const int64_t rows = int64_t(groups) * rowsPerGroup;
    parallelFor(threads, rows, rowGrain(cols) / 8 + 1,
                [&](int64_t b, int64_t e, int) { softmaxRows(y, x, keep, b, e, rowsPerGroup, cols); });
}

void softmaxCrossEntropy(int threads, float* losses, float* dlogits, const float* logits, const int32_t* labels,
                         int rows, int cols, float gradScale) {
    parallelFor(threads, rows, rowGrain(cols) / 8 + 1, [&](int64_t b, int64_t e, int) {
        cpuref::softmaxCrossEntropy(losses ? losses + b : nullptr, dlogits ? dlogits + b * cols : nullptr,
                                    logits + b * cols, labels + b, static_cast<int>(e - b), cols, gradScale);
    });
}

void mseLoss(int threads, float* losses, float* dpred, const float* pred, const float* target, int rows, int cols,
             float gradScale) {
    parallelFor(threads, rows, rowGrain(cols), [&](int64_t b, int64_t e, int) {
        cpuref::mseLoss(losses ? losses + b : nullptr, dpred ? dpred + b * cols : nullptr, pred + b * cols,
                        target + b * cols, static_cast<int>(e - b), cols, gradScale);
    });
}

void robustLoss(int threads, float* losses, float* dpred, const float* pred, const float* target, int rows, int cols,
                float delta, float gradScale) {
    parallelFor(threads, rows, rowGrain(cols), [&](int64_t b, int64_t e, int) {
        cpuref::robustLoss(losses ? losses + b : nullptr, dpred ? dpred + b * cols : nullptr, pred + b * cols,
                           target + b * cols, static_cast<int>(e - b), cols, delta, gradScale);
    });
}

void bceWithLogits(int threads, float* losses, float* dlogits, const float* logits, const float* target, int rows,
                   int cols, float gradScale) {
    parallelFor(threads, rows, rowGrain(cols) / 8 + 1, [&](int64_t b, int64_t e, int) {
        cpuref::bceWithLogits(losses ? losses + b : nullptr, dlogits ? dlogits + b * cols : nullptr, logits + b * cols,
                              target + b * cols, static_cast<int>(e - b), cols, gradScale);
    });
}

void layerNormForward(int threads, float* y, float* mean, float* rstd, const float* x, const float* gamma,
                      const float* beta, int rows, int cols, float eps) {
    parallelFor(threads, rows, rowGrain(cols), [&](int64_t b, int64_t e, int) {
        layerNormForwardRows(y + b * cols, mean ? mean + b : nullptr, rstd ? rstd + b : nullptr, x + b * cols, gamma,
                             beta, e - b, cols, eps);
    });
}

void layerNormBackward(int threads, Workspace& ws, float* dx, float* dgamma, float* dbeta, const float* dy,
                       const float* x, const float* gamma, const float* mean, const float* rstd, int rows, int cols) {
    // dgamma and dbeta sum over rows: each part sums into its own scratch, added in part order afterwards.
    const int64_t grain = rowGrain(cols);
    const int parts = parallelParts(threads, rows, grain);
    ws.prepare(0, parts, 2 * static_cast<size_t>(cols));
    for (int p = 0; p < parts; ++p) std::memset(ws.slot(p), 0, 2 * static_cast<size_t>(cols) * sizeof(float));
    parallelFor(threads, rows, grain, [&](int64_t b, int64_t e, int p) {
        float* partial = ws.slot(p);
        layerNormBackwardRows(dx ? dx + b * cols : nullptr, partial, partial + cols, dy + b * cols, x + b * cols, gamma,
                              mean + b, rstd + b, e - b, cols);
    });
    for (int p = 0; p < parts; ++p) {
        const float* partial = ws.slot(p);
        for (int c = 0; c < cols; ++c) {
            if (dgamma) dgamma[c] += partial[c];
            if (dbeta) dbeta[c] += partial[cols + c];
        }
    }
}

// ---- batch norm: one channel per work item --------------------------------------------------

// Training forward: one pass for the statistics and one writing y (with the fused ReLU, if any), where the
// two-pass variance read x three times. The sums are of x minus the channel's first value (the shifted-data
// form of the variance), so that a mean far from zero does not cancel the variance away; each plane sums in
// float lanes and the planes in double.
// ---- batch norm on blocked tensors ([n, c/B, inner, B]; Backend's block argument) ----
// Work items are planes, one image's channel block: inner positions of B channels side by side, so the lane
// loops below run over B adjacent floats. Per-channel sums are kept per plane in float (as the NCHW loops keep
// them per image) and added over the images in double, so the statistics match the NCHW ones to rounding.
namespace {

template <int B>
struct BlockedNorm {
    int n, c, inner;
    int blocks() const { return c / B; }
    int64_t planes() const { return int64_t(n) * blocks(); }
    size_t plane() const { return size_t(inner) * B; }
    // Channel k's first value (image 0, position 0): the shift the NCHW loops subtract.
    float first(const float* x, int k) const { return x[size_t(k / B) * plane() + k % B]; }
    // Sum over images of the per-plane values a pass stored for channel k (part 0 or 1 of each plane's 2B).
    double total(const std::vector<double>& perPlane, int k, int part) const {
        double s = 0.0;
        for (int b = 0; b < n; ++b) s += perPlane[size_t((int64_t(b) * blocks() + k / B) * 2 * B + part * B + k % B)];
        return s;
    }
};

// The per-plane sums scratch (2B doubles a plane; 128 KiB for a batch of 128 with 64 channels), kept by the
// calling thread so that a training step's batch norms reuse it instead of allocating it each call. Every
// element is written by the pass that fills it.
std::vector<double>& planeSums(size_t count) {
    thread_local std::vector<double> buffer;
    if (buffer.size() < count) buffer.resize(count);
    return buffer;
}

template <int B>
void batchNormTrainingBlocked(int threads, float* y, float* saveMean, float* saveInvStd, float* runningMean,
                              float* runningVar, const float* x, const float* gamma, const float* beta, int n, int c,
                              int inner, float momentum, float eps, bool relu) {
    const BlockedNorm<B> g{n, c, inner};
    const size_t plane = g.plane();
    std::vector<float> shift(static_cast<size_t>(c)), scale(shift.size()), offset(shift.size());
    for (int k = 0; k < c; ++k) shift[size_t(k)] = g.first(x, k);
    std::vector<double>& sums = planeSums(static_cast<size_t>(g.planes()) * 2 * B);
    parallelFor(threads, g.planes(), rowGrain(static_cast<int64_t>(plane)), [&](int64_t p0, int64_t p1, int) {
        for (int64_t pl = p0; pl < p1; ++pl) {
            const float* xp = x + pl * static_cast<int64_t>(plane);
            const float* sh = shift.data() + (pl % g.blocks()) * B;
            float s[B] = {}, q[B] = {};
            for (int i = 0; i < inner; ++i)
                for (int j = 0; j < B; ++j) {
                    const float d = xp[i * B + j] - sh[j];
                    s[j] += d;
                    q[j] += d * d;
                }
            double* out = sums.data() + pl * 2 * B;
            for (int j = 0; j < B; ++j) out[j] = s[j], out[B + j] = q[j];
        }
    });
    const double count = static_cast<double>(n) * inner;
    for (int k = 0; k < c; ++k) {
        const double sum = g.total(sums, k, 0), sumSq = g.total(sums, k, 1);
        // The NCHW forward's formulas (batchNormForwardTraining).
        const double shiftedMean = sum / count, mean = shift[size_t(k)] + shiftedMean;
        const double sq = std::max(0.0, sumSq - sum * shiftedMean);
        const double invStd = 1.0 / std::sqrt(sq / count + eps);
        const double gm = gamma ? gamma[k] : 1.0, bt = beta ? beta[k] : 0.0;
        scale[size_t(k)] = static_cast<float>(gm * invStd);
        offset[size_t(k)] = static_cast<float>(bt - shiftedMean * gm * invStd);
        if (saveMean) saveMean[k] = static_cast<float>(mean);
        if (saveInvStd) saveInvStd[k] = static_cast<float>(invStd);
        if (runningMean) runningMean[k] = static_cast<float>((1.0 - momentum) * runningMean[k] + momentum * mean);
        if (runningVar)
            runningVar[k] = static_cast<float>((1.0 - momentum) * runningVar[k] + momentum * sq / (count - 1.0));
    }
    parallelFor(threads, g.planes(), rowGrain(static_cast<int64_t>(plane)), [&](int64_t p0, int64_t p1, int) {
        for (int64_t pl = p0; pl < p1; ++pl) {
            const int64_t at = pl * static_cast<int64_t>(plane), first = (pl % g.blocks()) * B;
            const float *xp = x + at, *sh = shift.data() + first, *sc = scale.data() + first,
                        *of = offset.data() + first;
            float* yp = y + at;
            for (int i = 0; i < inner; ++i)
                for (int j = 0; j < B; ++j) {
                    const float v = (xp[i * B + j] - sh[j]) * sc[j] + of[j];
                    yp[i * B + j] = relu && v < 0.0f ? 0.0f : v;
                }
        }
    });
}

template <int B>
void batchNormInferenceBlocked(int threads, float* y, const float* x, const float* gamma, const float* beta,
                               const float* runningMean, const float* runningVar, int n, int c, int inner, float eps,
                               bool relu) {
    const BlockedNorm<B> g{n, c, inner};
    std::vector<float> scale(static_cast<size_t>(c)), shift(scale.size());
    for (int k = 0; k < c; ++k) {
        const double invStd = 1.0 / std::sqrt(static_cast<double>(runningVar[k]) + eps);
        const double gm = gamma ? gamma[k] : 1.0, bt = beta ? beta[k] : 0.0;
        scale[size_t(k)] = static_cast<float>(gm * invStd);
        shift[size_t(k)] = static_cast<float>(bt - runningMean[k] * gm * invStd);
    }
    const size_t plane = g.plane();
    parallelFor(threads, g.planes(), rowGrain(static_cast<int64_t>(plane)), [&](int64_t p0, int64_t p1, int) {
        for (int64_t pl = p0; pl < p1; ++pl) {
            const int64_t at = pl * static_cast<int64_t>(plane), first = (pl % g.blocks()) * B;
            const float *xp = x + at, *sc = scale.data() + first, *sh = shift.data() + first;
            float* yp = y + at;
            for (int i = 0; i < inner; ++i)
                for (int j = 0; j < B; ++j) {
                    const float v = xp[i * B + j] * sc[j] + sh[j];
                    yp[i * B + j] = relu && v < 0.0f ? 0.0f : v;
                }
        }
    });
}

template <int B>
void batchNormBackwardBlocked(int threads, float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                              const float* gamma, const float* saveMean, const float* saveInvStd, int n, int c,
                              int inner, const float* gate, bool overwrite) {
    const BlockedNorm<B> g{n, c, inner};
    const size_t plane = g.plane();
    // Pass 1: per plane, sum dy and sum dy * (x - mean) (dy gated by the fused ReLU's output when given).
    std::vector<double>& sums = planeSums(static_cast<size_t>(g.planes()) * 2 * B);
    parallelFor(threads, g.planes(), rowGrain(static_cast<int64_t>(plane)), [&](int64_t p0, int64_t p1, int) {
        for (int64_t pl = p0; pl < p1; ++pl) {
            const int64_t at = pl * static_cast<int64_t>(plane);
            const float *xp = x + at, *gp = dy + at, *mean = saveMean + (pl % g.blocks()) * B;
            const float* gt = gate ? gate + at : nullptr;
            float s[B] = {}, t[B] = {};
            for (int i = 0; i < inner; ++i)
                for (int j = 0; j < B; ++j) {
                    float d = gp[i * B + j];
                    if (gt) d = gt[i * B + j] > 0.0f ? d : 0.0f;
                    s[j] += d;
                    t[j] += d * (xp[i * B + j] - mean[j]);
                }
            double* out = sums.data() + pl * 2 * B;
            for (int j = 0; j < B; ++j) out[j] = s[j], out[B + j] = t[j];
        }
    });
    // The NCHW backward's coefficients (batchNormBackwardChannel): dx = k1*dy - k2*(x - mean) + k0.
    const double count = static_cast<double>(n) * inner;
    std::vector<float> f1(static_cast<size_t>(c)), f2(f1.size()), f0(f1.size());
    for (int k = 0; k < c; ++k) {
        const double sumDy = g.total(sums, k, 0), sumDyXc = g.total(sums, k, 1), invStd = saveInvStd[k];
        if (dbeta) dbeta[k] += static_cast<float>(sumDy);
        if (dgamma) dgamma[k] += static_cast<float>(sumDyXc * invStd);
        const double gm = gamma ? gamma[k] : 1.0, k1 = gm * invStd;
        f1[size_t(k)] = static_cast<float>(k1);
        f2[size_t(k)] = static_cast<float>(gm * invStd * invStd * invStd * sumDyXc / count);
        f0[size_t(k)] = static_cast<float>(-k1 * sumDy / count);
    }
    if (!dx) return;
    parallelFor(threads, g.planes(), rowGrain(static_cast<int64_t>(plane)), [&](int64_t p0, int64_t p1, int) {
        for (int64_t pl = p0; pl < p1; ++pl) {
            const int64_t at = pl * static_cast<int64_t>(plane), first = (pl % g.blocks()) * B;
            const float *xp = x + at, *gp = dy + at, *mean = saveMean + first, *a = f1.data() + first,
                        *b2 = f2.data() + first, *b0 = f0.data() + first;
            const float* gt = gate ? gate + at : nullptr;
            float* dp = dx + at;
            for (int i = 0; i < inner; ++i)
                for (int j = 0; j < B; ++j) {
                    float d = gp[i * B + j];
                    if (gt) d = gt[i * B + j] > 0.0f ? d : 0.0f;
                    const float v = a[j] * d - b2[j] * (xp[i * B + j] - mean[j]) + b0[j];
                    dp[i * B + j] = overwrite ? v : dp[i * B + j] + v;
                }
        }
    });
}

[[noreturn]] void noBlockedNorm(int block) {
    throw BackendError("cpu: batch norm has no path for block " + std::to_string(block));
}

}  // namespace

void batchNormForwardTraining(int threads, float* y, float* saveMean, float* saveInvStd, float* runningMean,
                              float* runningVar, const float* x, const float* gamma, const float* beta, int n, int c,
                              int inner, float momentum, float eps, bool relu, int block) {
    if (block == 16)
        return batchNormTrainingBlocked<16>(threads, y, saveMean, saveInvStd, runningMean, runningVar, x, gamma, beta,
                                            n, c, inner, momentum, eps, relu);
    if (block == 8)
        return batchNormTrainingBlocked<8>(threads, y, saveMean, saveInvStd, runningMean, runningVar, x, gamma, beta, n,
                                           c, inner, momentum, eps, relu);
    if (block != 0) noBlockedNorm(block);
    const double count = static_cast<double>(n) * inner;
    const size_t cs = static_cast<size_t>(c) * inner;
    parallelFor(threads, c, std::max<int64_t>(1, kElementGrain / (static_cast<int64_t>(n) * inner)),
                [&](int64_t c0, int64_t c1, int) {
                    for (int64_t ch = c0; ch < c1; ++ch) {
                        const float* xc = x + ch * inner;
                        const float shift = xc[0];
                        double sum = 0.0, sumSq = 0.0;
                        for (int b = 0; b < n; ++b) {
                            const float* p = xc + b * cs;
                            float s = 0.0f, q = 0.0f;
                            STRATA_SIMD_SUM(s, q)
                            for (int i = 0; i < inner; ++i) {
                                const float d = p[i] - shift;
                                s += d;
                                q += d * d;
                            }
                            sum += s;
                            sumSq += q;
                        }
                        const double shiftedMean = sum / count;
                        const double mean = shift + shiftedMean;
                        const double sq = std::max(0.0, sumSq - sum * shiftedMean);  // sum of squared deviations
                        const double invStd = 1.0 / std::sqrt(sq / count + eps);
                        const double g = gamma ? gamma[ch] : 1.0, bt = beta ? beta[ch] : 0.0;
                        // y = (x - shift) * scale + offset: x - shift is exact where x is near the mean, so a
                        // large mean does not cancel against the offset either.
                        const float scale = static_cast<float>(g * invStd);
                        const float offset = static_cast<float>(bt - shiftedMean * g * invStd);
                        for (int b = 0; b < n; ++b) {
                            const float* p = xc + b * cs;
                            float* q = y + ch * inner + b * cs;
                            if (relu) {
                                for (int i = 0; i < inner; ++i) {
                                    const float v = (p[i] - shift) * scale + offset;
                                    q[i] = v > 0.0f ? v : 0.0f;
                                }
                            } else {
                                for (int i = 0; i < inner; ++i) q[i] = (p[i] - shift) * scale + offset;
                            }
                        }
                        if (saveMean) saveMean[ch] = static_cast<float>(mean);
                        if (saveInvStd) saveInvStd[ch] = static_cast<float>(invStd);
                        if (runningMean)
                            runningMean[ch] = static_cast<float>((1.0 - momentum) * runningMean[ch] + momentum * mean);
                        if (runningVar)
                            runningVar[ch] =
                                static_cast<float>((1.0 - momentum) * runningVar[ch] + momentum * sq / (count - 1.0));
                    }
                });
}

void batchNormForwardInference(int threads, float* y, const float* x, const float* gamma, const float* beta,
                               const float* runningMean, const float* runningVar, int n, int c, int inner, float eps,
                               bool relu, int block) {
    if (block == 16)
        return batchNormInferenceBlocked<16>(threads, y, x, gamma, beta, runningMean, runningVar, n, c, inner, eps,
                                             relu);
    if (block == 8)
        return batchNormInferenceBlocked<8>(threads, y, x, gamma, beta, runningMean, runningVar, n, c, inner, eps,
                                            relu);
    if (block != 0) noBlockedNorm(block);
    const int64_t planes = static_cast<int64_t>(n) * c;
    parallelFor(threads, planes, rowGrain(inner), [&](int64_t b, int64_t e, int) {
        for (int64_t p = b; p < e; ++p) {
            const int ch = static_cast<int>(p % c);
            const double invStd = 1.0 / std::sqrt(static_cast<double>(runningVar[ch]) + eps);
            const double g = gamma ? gamma[ch] : 1.0, bt = beta ? beta[ch] : 0.0;
            const float scale = static_cast<float>(g * invStd);
            const float shift = static_cast<float>(bt - runningMean[ch] * g * invStd);
            const float* src = x + p * inner;
            float* dst = y + p * inner;
            if (relu) {
                for (int i = 0; i < inner; ++i) {
                    const float v = src[i] * scale + shift;
                    dst[i] = v > 0.0f ? v : 0.0f;
                }
            } else {
                for (int i = 0; i < inner; ++i) dst[i] = src[i] * scale + shift;
            }
        }
    });
}

namespace {

// One channel's backward over its n planes; Masked: dy is a fused ReLU's output gradient, gated by that
// ReLU's output (the select loads both operands, so it vectorizes); overwrite: dx = ... (not read).
template <bool Masked>
void batchNormBackwardChannel(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                              const float* gate, double g, float mean, double invStd, int n, int inner, size_t cs,
                              double count, bool overwrite) {
    double sumDy = 0.0, sumDyXc = 0.0;  // sum dy and sum dy * (x - mean)
    for (int b = 0; b < n; ++b) {
        const size_t o = b * cs;
        const float *xp = x + o, *gp = dy + o;
        float s = 0.0f, t = 0.0f;
        STRATA_SIMD_SUM(s, t)
        for (int i = 0; i < inner; ++i) {
            float d = gp[i];
            if constexpr (Masked) d = gate[o + i] > 0.0f ? d : 0.0f;
            s += d;
            t += d * (xp[i] - mean);
        }
        sumDy += s;
        sumDyXc += t;
    }
    if (dbeta) *dbeta += static_cast<float>(sumDy);
    if (dgamma) *dgamma += static_cast<float>(sumDyXc * invStd);
    if (!dx) return;
    // dx = g*invStd*(dy - mean(dy) - (x-mean)*invStd^2*mean(dy*(x-mean))) = k1*dy - k2*(x-mean) + k0 (x - mean,
    // not x: exact near the mean, where k2*x and a k0 holding k2*mean would cancel for a large mean)
    const double k1 = g * invStd;
    const double k2 = g * invStd * invStd * invStd * sumDyXc / count;
    const double k0 = -k1 * sumDy / count;
    const float f1 = static_cast<float>(k1), f2 = static_cast<float>(k2), f0 = static_cast<float>(k0);
    for (int b = 0; b < n; ++b) {
        const size_t o = b * cs;
        const float *xp = x + o, *gp = dy + o;
        float* dp = dx + o;
        if (overwrite) {
            for (int i = 0; i < inner; ++i) {
                float d = gp[i];
                if constexpr (Masked) d = gate[o + i] > 0.0f ? d : 0.0f;
                dp[i] = f1 * d - f2 * (xp[i] - mean) + f0;
            }
        } else {
            for (int i = 0; i < inner; ++i) {
                float d = gp[i];
                if constexpr (Masked) d = gate[o + i] > 0.0f ? d : 0.0f;
                dp[i] += f1 * d - f2 * (xp[i] - mean) + f0;
            }
        }
    }
}

}  // namespace

void batchNormBackward(int threads, float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                       const float* gamma, const float* saveMean, const float* saveInvStd, int n, int c, int inner,
                       const float* reluOutput, bool overwriteDx, int block) {
    if (block == 16)
        return batchNormBackwardBlocked<16>(threads, dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd, n, c, inner,
                                            reluOutput, overwriteDx);
    if (block == 8)
        return batchNormBackwardBlocked<8>(threads, dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd, n, c, inner,
                                           reluOutput, overwriteDx);
    if (block != 0) noBlockedNorm(block);
    const double count = static_cast<double>(n) * inner;
    const size_t cs = static_cast<size_t>(c) * inner;
    parallelFor(threads, c, std::max<int64_t>(1, kElementGrain / (static_cast<int64_t>(n) * inner)),
                [&](int64_t c0, int64_t c1, int) {
                    for (int64_t ch = c0; ch < c1; ++ch) {
                        const size_t o = static_cast<size_t>(ch) * inner;
                        float* dxc = dx ? dx + o : nullptr;
                        float* dg = dgamma ? dgamma + ch : nullptr;
                        float* db = dbeta ? dbeta + ch : nullptr;
                        const double g = gamma ? gamma[ch] : 1.0;
                        if (reluOutput)
                            batchNormBackwardChannel<true>(dxc, dg, db, dy + o, x + o, reluOutput + o, g, saveMean[ch],
                                                           saveInvStd[ch], n, inner, cs, count, overwriteDx);
                        else
                            batchNormBackwardChannel<false>(dxc, dg, db, dy + o, x + o, nullptr, g, saveMean[ch],
                                                            saveInvStd[ch], n, inner, cs, count, overwriteDx);
                    }
                });
}

// ---- dropout and optimizers ----------------------------------------------------------------

void dropoutForward(int threads, float* y, const float* x, int64_t n, float p, uint64_t seed, uint64_t first) {
    const float keepScale = cpuref::dropoutScale(p);
    parallelFor(threads, n, kElementGrain / 4, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i)
            y[i] = dropoutKeep(seed, first + static_cast<uint64_t>(i), p) ? x[i] * keepScale : 0.0f;
    });
}

void dropoutBackward(int threads, float* dx, const float* dy, int64_t n, float p, uint64_t seed, uint64_t first) {
    const float keepScale = cpuref::dropoutScale(p);
    parallelFor(threads, n, kElementGrain / 4, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i)
            if (dropoutKeep(seed, first + static_cast<uint64_t>(i), p)) dx[i] += dy[i] * keepScale;
    });
}

namespace {

// The reference update with its per-element branches hoisted out of the loop and the arrays
// declared distinct, so the loop vectorizes; the arithmetic is the reference's, in its order.
template <bool kDecay, bool kMomentum, bool kNesterov>
void sgdKernel(float* __restrict w, float* __restrict velocity, const float* __restrict grad, int64_t n,
               const SgdParams& p) {
    const float lr = p.lr, momentum = p.momentum, decay = p.weightDecay;
    for (int64_t i = 0; i < n; ++i) {
        float g = grad[i];
        if constexpr (kDecay) g += decay * w[i];
        float step = g;
        if constexpr (kMomentum) {
            const float v = momentum * velocity[i] + g;
            velocity[i] = v;
            step = kNesterov ? g + momentum * v : v;
        }
        w[i] -= lr * step;
    }
}

using SgdKernel = void (*)(float*, float*, const float*, int64_t, const SgdParams&);

SgdKernel pickSgdKernel(const SgdParams& p) {
    const bool decay = p.weightDecay != 0.0f, momentum = p.momentum != 0.0f;
    if (!momentum) return decay ? sgdKernel<true, false, false> : sgdKernel<false, false, false>;
    if (p.nesterov) return decay ? sgdKernel<true, true, true> : sgdKernel<false, true, true>;
    return decay ? sgdKernel<true, true, false> : sgdKernel<false, true, false>;
}

}  // namespace

void sgdUpdate(int threads, float* w, float* velocity, const float* grad, int64_t n, const SgdParams& p) {
    const SgdKernel kernel = pickSgdKernel(p);
    parallelFor(threads, n, kElementGrain, [&](int64_t b, int64_t e, int) {
        kernel(w + b, velocity ? velocity + b : nullptr, grad + b, e - b, p);
    });
}

namespace {

// The reference Adam/AdamW update (CpuReference.cpp), branch-free inside the loop so it vectorizes.
template <bool kDecay, bool kDecoupled>
void adamKernel(float* __restrict w, float* __restrict m, float* __restrict v, const float* __restrict grad, int64_t n,
                const AdamParams& p) {
    const double bc1 = 1.0 - std::pow(static_cast<double>(p.beta1), static_cast<double>(p.step));
    const double bc2 = 1.0 - std::pow(static_cast<double>(p.beta2), static_cast<double>(p.step));
    const float stepSize = static_cast<float>(p.lr / bc1);
    const float bc2Sqrt = static_cast<float>(std::sqrt(bc2));
    const float decay = static_cast<float>(1.0 - static_cast<double>(p.lr) * p.weightDecay);
    const float beta1 = p.beta1, beta2 = p.beta2, eps = p.eps, wd = p.weightDecay;
    const float oneMinusBeta1 = 1.0f - beta1, oneMinusBeta2 = 1.0f - beta2;
    for (int64_t i = 0; i < n; ++i) {
        float g = grad[i];
        float wi = w[i];
        if constexpr (kDecay) {
            if constexpr (kDecoupled)
                wi *= decay;
            else
                g += wd * wi;
        }
        const float mi = m[i] * beta1 + oneMinusBeta1 * g;
        const float vi = v[i] * beta2 + oneMinusBeta2 * g * g;
        m[i] = mi;
        v[i] = vi;
        const float denom = std::sqrt(vi) / bc2Sqrt + eps;
        w[i] = wi + -stepSize * (mi / denom);
    }
}

}  // namespace

void adamUpdate(int threads, float* w, float* m, float* v, const float* grad, int64_t n, const AdamParams& p) {
    const bool decay = p.weightDecay != 0.0f;
    auto* kernel = !decay ? adamKernel<false, false> : p.decoupled ? adamKernel<true, true> : adamKernel<true, false>;
    parallelFor(threads, n, kElementGrain / 4,
                [&](int64_t b, int64_t e, int) { kernel(w + b, m + b, v + b, grad + b, e - b, p); });
}

}  // namespace strata::cpu
