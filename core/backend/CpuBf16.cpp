// CpuBf16: bf16 GEMMs through oneDNN's matmul, and the CPU's bf16 capability (see CpuBf16.h).
//
// Each operand op(A), op(B) is converted to a dense row-major bf16 copy by a oneDNN reorder (round to nearest
// even, transposition included), so the matmul always sees the plain layout its bf16 kernels are fastest on;
// the result is float32, written in place with alpha as an output scale and beta C as a sum post-op.
// Primitives are built once per shape and kept in the Workspace's Bf16Cache.
#include "core/backend/CpuBf16.h"

#include "core/backend/CpuFast.h"

#ifdef STRATA_HAVE_ONEDNN

#include <array>
#include <bit>
#include <cstdlib>
#include <map>
#include <vector>

#include <dnnl.hpp>
#include <omp.h>

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
};

void destroyBf16Cache(Bf16Cache* cache) { delete cache; }

std::string bf16Unavailable() {
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
    if ((isa & bf16) == bf16) return {};  // AVX512-BF16, or AMX (whose ISA value contains it)
    return "this CPU has neither AVX512-BF16 (lscpu flag avx512_bf16) nor AMX (amx_bf16)" +
           std::string(std::getenv("DNNL_MAX_CPU_ISA") ? " within DNNL_MAX_CPU_ISA" : "");
}

namespace {

// The dense bf16 copy of a logical [count, rows, cols] operand (strides: batch, row, column) in buf.
memory toBf16(Bf16Cache& cache, std::vector<uint16_t>& buf, const float* src, int count, int rows, int cols,
              int64_t batchStride, int64_t rowStride, int64_t colStride) {
    const memory::dims dims{count, rows, cols};
    const memory::desc from(dims, DType::f32, memory::dims{batchStride, rowStride, colStride});
    const memory::desc to(dims, DType::bf16, memory::format_tag::abc);
    const size_t need = static_cast<size_t>(count) * rows * cols;
    if (buf.size() < need) buf.resize(need);
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
            memory am = toBf16(cache, cache.a, a, count, m, k, strideA, transA ? 1 : lda, transA ? lda : 1);
            memory bm = toBf16(cache, cache.b, b, count, k, n, strideB, transB ? 1 : ldb, transB ? ldb : 1);
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
std::string bf16Unavailable() { return "this build of Strata has no oneDNN (libdnnl-dev), which runs CPU bf16"; }
bool bf16Gemm(int, Workspace&, bool, bool, int, int, int, float, const float*, int, int64_t, const float*, int, int64_t,
              float, float*, int, int64_t, int) {
    return false;
}

}  // namespace strata::cpu

#endif
