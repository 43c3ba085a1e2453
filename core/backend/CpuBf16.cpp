// CpuBf16: bf16 GEMMs through oneDNN's matmul, and the CPU's bf16 capability (see CpuBf16.h).
//
// Each operand op(A), op(B) is converted to a dense row-major bf16 copy (round to nearest even) by a oneDNN
// reorder, or by transposedToBf16 where it is transposed, so the matmul always sees the plain layout its bf16
// kernels are fastest on;
// the result is float32, written in place with alpha as an output scale and beta C as a sum post-op.
// Primitives are built once per shape and kept in the Workspace's Bf16Cache.
#include "core/backend/CpuBf16.h"

#include "core/backend/CpuFast.h"
#include "core/backend/CpuParallel.h"

#ifdef STRATA_HAVE_ONEDNN

#include <array>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include <dnnl.hpp>
#include <omp.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define STRATA_BF16_X86 1
#include <immintrin.h>
#endif

namespace strata::cpu {

namespace {

using dnnl::memory;
using DType = dnnl::memory::data_type;

// Restores the OpenMP thread count oneDNN reads (omp_get_max_threads) after a call.
class OmpThreads {
public:
    explicit OmpThreads(int threads) : m_saved(omp_get_max_threads()) { omp_set_num_threads(threads); }
    ~OmpThreads() { omp_set_num_threads(m_saved); }

private:
    int m_saved;
};

// A logical [count, rows, cols] float32 operand at these strides (batch, row, column).
using OperandKey = std::array<int64_t, 6>;
// count, m, n, k, ldc, strideC, alpha's and beta's bits.
using MatmulKey = std::array<int64_t, 8>;

}  // namespace

struct Bf16Cache {
    dnnl::engine engine{dnnl::engine::kind::cpu, 0};
    dnnl::stream stream{engine};
    std::map<OperandKey, dnnl::reorder> reorders;
    std::map<MatmulKey, dnnl::matmul> matmuls;
    std::map<MatmulKey, bool> unsupported;
    std::vector<uint16_t> a, b;  // the bf16 copies of op(A) and op(B)
    int64_t transposed = 0;      // operands converted by transposedToBf16
};

int64_t bf16TransposedOperands(const Workspace& ws) { return ws.bf16Cache ? ws.bf16Cache->transposed : 0; }

void destroyBf16Cache(Bf16Cache* cache) { delete cache; }

std::string bf16Unavailable() {
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
    if ((isa & bf16) == bf16) return {};  // AVX512-BF16, or AMX (whose ISA value contains it)
    return "this CPU has neither AVX512-BF16 (lscpu flag avx512_bf16) nor AMX (amx_bf16)" +
           std::string(std::getenv("DNNL_MAX_CPU_ISA") ? " within DNNL_MAX_CPU_ISA" : "");
}

namespace {

#ifdef STRATA_BF16_X86

// v rounded to bf16 (to nearest even), NaNs kept NaN.
inline uint16_t bf16Bits(float v) {
    uint32_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
    return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

// GCC 12 warns that the unpack intrinsics' unused merge sources are uninitialized (as for _mm512_max_ps in
// CpuWinogradKernels.h); they are not used.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// r[i] = row i of a 16 x 16 block, turned into column i: unpacks of pairs, of pairs of pairs, then 128-bit lanes.
__attribute__((target("avx512f"))) inline void transpose16(__m512* r) {
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        const __m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 1]), c = _mm512_castps_pd(t[i + 2]),
                      d = _mm512_castps_pd(t[i + 3]);
        r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    for (int h = 0; h < 16; h += 8)
        for (int i = 0; i < 4; ++i) {
            t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0x88);
            t[h + i + 4] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0xdd);
        }
    for (int i = 0; i < 8; ++i) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    }
}

// Columns [16 cb, 16 cb + 16) of the rows [0, rows - rows % 16) of one transposed [rows, cols] operand (its rows
// contiguous in memory, columns colStride apart) into the dense row-major bf16 copy `to`, 16 x 16 blocks at a time.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void transposeBlock(uint16_t* to, const float* from, int rows,
                                                                           int cols, int cb, int64_t colStride) {
    const float* column = from + int64_t(cb) * 16 * colStride;
    for (int r0 = 0; r0 + 16 <= rows; r0 += 16) {
        __m512 v[16];
        for (int i = 0; i < 16; ++i) v[i] = _mm512_loadu_ps(column + i * colStride + r0);
        transpose16(v);
        for (int j = 0; j < 16; ++j)
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(to + int64_t(r0 + j) * cols + cb * 16),
                                reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v[j])));
    }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// dst[b][r][c] = bf16(src[b * batchStride + r + c * colStride]): a transposed operand copied into a dense
// row-major bf16 [count, rows, cols]. oneDNN 2.6's reorder does this transposition at a tenth of a plain
// conversion's speed (256 x 128 x 128: 6.2 ms against 0.4 ms of CPU time; bench_cpu_bf16's "dv x256" ran at
// 0.66x float32).
void transposedToBf16(int threads, uint16_t* dst, const float* src, int count, int rows, int cols, int64_t batchStride,
                      int64_t colStride) {
    const int blocks = cols / 16, edge = rows - rows % 16;
    parallelFor(threads, int64_t(count) * (blocks + 1), 1, [&](int64_t begin, int64_t end, int) {
        for (int64_t item = begin; item < end; ++item) {
            const int64_t b = item / (blocks + 1);
            const int cb = static_cast<int>(item % (blocks + 1));
            const float* from = src + b * batchStride;
            uint16_t* to = dst + b * int64_t(rows) * cols;
            // The block's last rows % 16 rows, or the last cols % 16 columns of every row, one by one.
            const int c0 = cb < blocks ? cb * 16 : blocks * 16, c1 = cb < blocks ? c0 + 16 : cols;
            if (cb < blocks) transposeBlock(to, from, rows, cols, cb, colStride);
            for (int r = cb < blocks ? edge : 0; r < rows; ++r)
                for (int c = c0; c < c1; ++c) to[int64_t(r) * cols + c] = bf16Bits(from[r + c * colStride]);
        }
    });
}

bool transposedToBf16Runs() {
    static const bool runs = __builtin_cpu_supports("avx512bf16") != 0 && __builtin_cpu_supports("avx512bw") != 0;
    return runs;
}

#endif

// The dense bf16 copy of a logical [count, rows, cols] operand (strides: batch, row, column) in buf.
memory toBf16(int threads, Bf16Cache& cache, std::vector<uint16_t>& buf, const float* src, int count, int rows,
              int cols, int64_t batchStride, int64_t rowStride, int64_t colStride) {
    const memory::dims dims{count, rows, cols};
    const memory::desc from(dims, DType::f32, memory::dims{batchStride, rowStride, colStride});
    const memory::desc to(dims, DType::bf16, memory::format_tag::abc);
    const size_t need = static_cast<size_t>(count) * rows * cols;
    if (buf.size() < need) buf.resize(need);
#ifdef STRATA_BF16_X86
    if (rowStride == 1 && cols > 1 && transposedToBf16Runs()) {
        transposedToBf16(threads, buf.data(), src, count, rows, cols, batchStride, colStride);
        ++cache.transposed;
        return memory(to, cache.engine, buf.data());
    }
#endif
    const OperandKey key{count, rows, cols, batchStride, rowStride, colStride};
    auto it = cache.reorders.find(key);
    if (it == cache.reorders.end())
        it = cache.reorders
                 .emplace(key, dnnl::reorder(dnnl::reorder::primitive_desc(cache.engine, from, cache.engine, to)))
                 .first;
    memory in(from, cache.engine, const_cast<float*>(src)), out(to, cache.engine, buf.data());
    it->second.execute(cache.stream, in, out);
    return out;
}

}  // namespace

bool bf16Gemm(int threads, Workspace& ws, bool transA, bool transB, int m, int n, int k, float alpha, const float* a,
              int lda, int64_t strideA, const float* b, int ldb, int64_t strideB, float beta, float* c, int ldc,
              int64_t strideC, int count) {
    if (m <= 0 || n <= 0 || count <= 0) return true;
    if (!ws.bf16Cache) ws.bf16Cache = new Bf16Cache();
    Bf16Cache& cache = *ws.bf16Cache;
    if (count == 1) {  // any positive batch stride describes a batch of one
        strideA = int64_t(transA ? k : m) * lda;
        strideB = int64_t(transB ? n : k) * ldb;
    }
    const int64_t cBatch = count == 1 ? int64_t(m) * ldc : strideC;
    const MatmulKey key{count, m, n, k, ldc, cBatch, std::bit_cast<uint32_t>(alpha), std::bit_cast<uint32_t>(beta)};
    if (cache.unsupported.count(key)) return false;
    try {
        auto it = cache.matmuls.find(key);
        if (it == cache.matmuls.end()) {
            const memory::desc src({count, m, k}, DType::bf16, memory::format_tag::abc),
                wei({count, k, n}, DType::bf16, memory::format_tag::abc),
                dst({count, m, n}, DType::f32, memory::dims{cBatch, ldc, 1});
            dnnl::primitive_attr attr;
            if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
            if (beta != 0.0f) {
                dnnl::post_ops ops;
                ops.append_sum(beta);
                attr.set_post_ops(ops);
            }
            const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, wei, dst), attr, cache.engine);
            it = cache.matmuls.emplace(key, dnnl::matmul(pd)).first;
        }
        OmpThreads scope(threads);
        if (k > 0) {
            memory am = toBf16(threads, cache, cache.a, a, count, m, k, strideA, transA ? 1 : lda, transA ? lda : 1);
            memory bm = toBf16(threads, cache, cache.b, b, count, k, n, strideB, transB ? 1 : ldb, transB ? ldb : 1);
            memory cm(memory::desc({count, m, n}, DType::f32, memory::dims{cBatch, ldc, 1}), cache.engine, c);
            it->second.execute(cache.stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
            cache.stream.wait();
            ws.bf16Gemms += count;
            return true;
        }
        return false;  // k == 0: C = beta C, left to the float32 path
    } catch (const dnnl::error&) {
        cache.unsupported[key] = true;
        return false;
    }
}

}  // namespace strata::cpu

#else  // no oneDNN in this build: bf16 is refused on the CPU

namespace strata::cpu {

struct Bf16Cache {};
void destroyBf16Cache(Bf16Cache* cache) { delete cache; }
int64_t bf16TransposedOperands(const Workspace&) { return 0; }
std::string bf16Unavailable() { return "this build of Strata has no oneDNN (libdnnl-dev), which runs CPU bf16"; }
bool bf16Gemm(int, Workspace&, bool, bool, int, int, int, float, const float*, int, int64_t, const float*, int, int64_t,
              float, float*, int, int64_t, int) {
    return false;
}

}  // namespace strata::cpu

#endif
