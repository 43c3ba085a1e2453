// oneDNN convolutions for CpuBackend's fast path (optional: CMake option
// STRATA_ONEDNN, defined STRATA_HAVE_ONEDNN when libdnnl is found).
//
// oneDNN picks its own blocked memory formats; user tensors (NCHW, or already
// blocked: ConvDesc::srcBlock, dstBlock) are reordered in and out where the
// formats differ. Backward ops must accumulate (+=) into our gradients, so their
// results go to a scratch memory and are added back by a reorder with a sum
// post-op. A plan (primitive descriptors, primitives and scratch memories) is
// built once per convolution shape and cached in the backend's Workspace.
// oneDNN runs on the same OpenMP runtime as the rest of the fast path.
#include "core/backend/CpuFast.h"

#ifdef STRATA_HAVE_ONEDNN

#include <array>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>

#include <dnnl.hpp>
#include <omp.h>

namespace strata::cpu {

namespace {

using dnnl::memory;
using Tag = dnnl::memory::format_tag;
using DType = dnnl::memory::data_type;

using ConvKey = std::array<int, 16>;

ConvKey keyOf(const ConvDesc& d) {
    return {d.n,       d.c,    d.h,    d.w,         d.k,         d.r,      d.s,        d.strideH,
            d.strideW, d.padH, d.padW, d.dilationH, d.dilationW, d.groups, d.srcBlock, d.dstBlock};
}

// The user-side format of an activation stored with this block (ConvDesc::srcBlock, dstBlock).
Tag activationTag(int block) {
    switch (block) {
        case 0: return Tag::nchw;
        case 8: return Tag::nChw8c;
        case 16: return Tag::nChw16c;
        default: throw BackendError("cpu: no oneDNN format for channel block " + std::to_string(block));
    }
}

struct ConvPlan {
    memory::desc userX, userW, userY;
    // The type of the primitives' inputs (src, weights, diff_dst): f32, or bf16 with Workspace::bf16. Results
    // (dst, diff_src, diff_weights, diff_bias) are float32 either way: float32 accumulation.
    DType in = DType::f32;
    dnnl::convolution_forward::primitive_desc fwdPd;
    dnnl::convolution_forward fwd;
    dnnl::convolution_backward_data::primitive_desc dataPd;
    dnnl::convolution_backward_data bwdData;
    dnnl::convolution_backward_weights::primitive_desc weightsPd;
    dnnl::convolution_backward_weights bwdWeights;
    // Forward with bias and/or a ReLU post-op, by variant (1: bias, 2: ReLU), created on first use.
    struct Fused {
        dnnl::convolution_forward::primitive_desc pd;
        dnnl::convolution_forward prim;
    };
    std::map<int, Fused> fused;
    // Backward weights that also computes the bias gradient, created on first use.
    bool haveWeightsBias = false;
    dnnl::convolution_backward_weights::primitive_desc weightsBiasPd;
    dnnl::convolution_backward_weights bwdWeightsBias;
    memory::desc biasDesc;
    memory::dims strides, dilates, padL, padR;
    // Scratch memories in oneDNN's formats, by role; created on first use.
    std::map<int, memory> scratch;
};

// Restores the OpenMP thread count oneDNN reads (omp_get_max_threads) after a call.
class OmpThreads {
public:
    explicit OmpThreads(int threads) : m_saved(omp_get_max_threads()) { omp_set_num_threads(threads); }
    ~OmpThreads() { omp_set_num_threads(m_saved); }

private:
    int m_saved;
};

}  // namespace

struct DnnlCache {
    dnnl::engine engine{dnnl::engine::kind::cpu, 0};
    dnnl::stream stream{engine};
    std::map<ConvKey, std::unique_ptr<ConvPlan>> plans;
    std::map<ConvKey, bool> unsupported;
    // Frozen weights (ConvDesc::weightsVersion) reordered into oneDNN's format, by id; the oldest are dropped
    // beyond kMaxFrozenWeights (ids of models long gone stay until then).
    std::map<uint64_t, memory> frozenWeights;
    std::deque<uint64_t> frozenOrder;
};

bool oneDnnAvailable() { return true; }

int dnnlPreferredBlock() {
    // What oneDNN picks for a typical float32 3x3 convolution (16 -> 16 channels, 28 x 28, batch 32).
    try {
        const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
        const memory::dims x{32, 16, 28, 28}, w{16, 16, 3, 3};
        const memory::desc anyX(x, DType::f32, Tag::any), anyW(w, DType::f32, Tag::any);
        dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                             anyX, anyW, anyX, {1, 1}, {0, 0}, {1, 1}, {1, 1});
        const memory::desc src = dnnl::convolution_forward::primitive_desc(desc, engine).src_desc();
        for (int block : {16, 8})
            if (src == memory::desc(x, DType::f32, activationTag(block))) return block;
    } catch (const dnnl::error&) {
    }
    return 0;
}

void destroyDnnlCache(DnnlCache* cache) { delete cache; }

namespace {

// The plan for a descriptor, or null when oneDNN cannot run it.
ConvPlan* planFor(Workspace& ws, const ConvDesc& d) {
    if (!ws.dnnl) ws.dnnl = new DnnlCache();
    DnnlCache& cache = *ws.dnnl;
    const ConvKey key = keyOf(d);
    if (auto it = cache.plans.find(key); it != cache.plans.end()) return it->second.get();
    if (cache.unsupported.count(key)) return nullptr;
    // oneDNN wants explicit right/bottom padding such that the output size comes out exactly.
    const int padB = (d.outH() - 1) * d.strideH + (d.r - 1) * d.dilationH + 1 - d.h - d.padH;
    const int padR = (d.outW() - 1) * d.strideW + (d.s - 1) * d.dilationW + 1 - d.w - d.padW;
    // With very few input channels per group and an NCHW output, oneDNN's reorders dominate and im2col + GEMM
    // wins (measured on conv 1->32 3x3 28x28, batch 64: 24 ms vs 9 ms forward). Writing a blocked output it is
    // the other way round (conv 1->16 3x3 28x28, batch 64: 0.05 ms forward and 0.05 ms weight gradient,
    // against 0.28 and 0.31 ms for im2col, measured).
    if (padB < 0 || padR < 0 || (d.c / d.groups < 4 && d.dstBlock == 0)) {
        cache.unsupported[key] = true;
        return nullptr;
    }
    try {
        auto plan = std::make_unique<ConvPlan>();
        const memory::dims xDims{d.n, d.c, d.h, d.w}, yDims{d.n, d.k, d.outH(), d.outW()};
        const memory::dims wDims = d.groups == 1 ? memory::dims{d.k, d.c, d.r, d.s}
                                                 : memory::dims{d.groups, d.k / d.groups, d.c / d.groups, d.r, d.s};
        plan->userX = memory::desc(xDims, DType::f32, activationTag(d.srcBlock));
        plan->userY = memory::desc(yDims, DType::f32, activationTag(d.dstBlock));
        plan->userW = memory::desc(wDims, DType::f32, d.groups == 1 ? Tag::oihw : Tag::goihw);
        plan->in = ws.bf16 ? DType::bf16 : DType::f32;
        // Inputs in plan->in, results in float32 (the same descriptors in float32).
        const memory::desc anyX(xDims, plan->in, Tag::any), anyY(yDims, plan->in, Tag::any),
            anyW(wDims, plan->in, Tag::any), outX(xDims, DType::f32, Tag::any), outY(yDims, DType::f32, Tag::any),
            outW(wDims, DType::f32, Tag::any);
        const memory::dims strides{d.strideH, d.strideW}, dilates{d.dilationH - 1, d.dilationW - 1},
            padL{d.padH, d.padW}, padRight{padB, padR};
        plan->strides = strides;
        plan->dilates = dilates;
        plan->padL = padL;
        plan->padR = padRight;
        plan->biasDesc = memory::desc({d.k}, DType::f32, Tag::a);
        const auto algo = dnnl::algorithm::convolution_direct;
        dnnl::convolution_forward::desc fwdDesc(dnnl::prop_kind::forward_training, algo, anyX, anyW, outY, strides,
                                                dilates, padL, padRight);
        plan->fwdPd = dnnl::convolution_forward::primitive_desc(fwdDesc, cache.engine);
        plan->fwd = dnnl::convolution_forward(plan->fwdPd);
        dnnl::convolution_backward_data::desc dataDesc(algo, outX, anyW, anyY, strides, dilates, padL, padRight);
        plan->dataPd = dnnl::convolution_backward_data::primitive_desc(dataDesc, cache.engine, plan->fwdPd);
        plan->bwdData = dnnl::convolution_backward_data(plan->dataPd);
        dnnl::convolution_backward_weights::desc weightsDesc(algo, anyX, outW, anyY, strides, dilates, padL, padRight);
        plan->weightsPd = dnnl::convolution_backward_weights::primitive_desc(weightsDesc, cache.engine, plan->fwdPd);
        plan->bwdWeights = dnnl::convolution_backward_weights(plan->weightsPd);
        ConvPlan* raw = plan.get();
        cache.plans[key] = std::move(plan);
        return raw;
    } catch (const dnnl::error&) {
        cache.unsupported[key] = true;  // e.g. a shape oneDNN has no implementation for: use im2col
        return nullptr;
    }
}

// `user` in the format `want`: itself when the formats agree, else a reorder into scratch slot `role`.
memory asFormat(DnnlCache& cache, ConvPlan& plan, int role, memory user, const memory::desc& want) {
    if (user.get_desc() == want) return user;
    memory& buf = plan.scratch[role];
    if (!buf || buf.get_desc() != want) buf = memory(want, cache.engine);
    dnnl::reorder(user, buf).execute(cache.stream, user, buf);
    return buf;
}

constexpr size_t kMaxFrozenWeights = 1024;

// The forward's weights in the format `want`: frozen weights (version != 0) are reordered once per id and format
// and kept; others as asFormat does, every call.
memory weightsFor(DnnlCache& cache, ConvPlan& plan, int role, memory user, const memory::desc& want, uint64_t version) {
    if (version == 0 || user.get_desc() == want) return asFormat(cache, plan, role, user, want);
    auto it = cache.frozenWeights.find(version);
    if (it != cache.frozenWeights.end() && it->second.get_desc() == want) return it->second;
    memory kept(want, cache.engine);
    dnnl::reorder(user, kept).execute(cache.stream, user, kept);
    if (it != cache.frozenWeights.end()) {
        it->second = kept;  // the same weights wanted in another format (another batch size's primitive)
    } else {
        cache.frozenWeights.emplace(version, kept);
        cache.frozenOrder.push_back(version);
        if (cache.frozenOrder.size() > kMaxFrozenWeights) {
            cache.frozenWeights.erase(cache.frozenOrder.front());
            cache.frozenOrder.pop_front();
        }
    }
    return kept;
}

memory scratchFor(DnnlCache& cache, ConvPlan& plan, int role, const memory::desc& want) {
    memory& buf = plan.scratch[role];
    if (!buf || buf.get_desc() != want) buf = memory(want, cache.engine);
    return buf;
}

// user += result, converting from oneDNN's format (a reorder with a sum post-op); in the same format (a blocked
// tensor) a plain vector add, several times faster than that reorder.
void accumulateInto(int threads, DnnlCache& cache, memory& result, memory& user) {
    if (result.get_desc() == user.get_desc()) {
        cache.stream.wait();
        axpy(threads, static_cast<float*>(user.get_data_handle()), 1.0f,
             static_cast<const float*>(result.get_data_handle()),
             static_cast<int64_t>(user.get_desc().get_size() / sizeof(float)));
        return;
    }
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    dnnl::reorder::primitive_desc pd(cache.engine, result.get_desc(), cache.engine, user.get_desc(), attr);
    dnnl::reorder(pd).execute(cache.stream, result, user);
}

// One scratch memory per role, so formats that differ between primitives never make them reallocate.
enum Role {
    kSrc,
    kWeights,
    kDst,
    kDiffSrc,
    kDiffDstData,
    kWeightsData,
    kSrcWeights,
    kDiffDstWeights,
    kDiffWeights,
    kFusedDst,
    kDiffBias
};

// The forward primitive with bias (variant bit 1) and/or a ReLU post-op (bit 2).
ConvPlan::Fused& fusedFor(DnnlCache& cache, ConvPlan& plan, bool bias, bool relu) {
    const int variant = (bias ? 1 : 0) | (relu ? 2 : 0);
    auto it = plan.fused.find(variant);
    if (it != plan.fused.end()) return it->second;
    const memory::desc anyX(plan.userX.dims(), plan.in, Tag::any), anyY(plan.userY.dims(), DType::f32, Tag::any),
        anyW(plan.userW.dims(), plan.in, Tag::any);
    const auto algo = dnnl::algorithm::convolution_direct;
    dnnl::primitive_attr attr;
    if (relu) {
        dnnl::post_ops ops;
        ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
        attr.set_post_ops(ops);
    }
    dnnl::convolution_forward::desc desc =
        bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algo, anyX, anyW, plan.biasDesc, anyY,
                                               plan.strides, plan.dilates, plan.padL, plan.padR)
             : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algo, anyX, anyW, anyY, plan.strides,
                                               plan.dilates, plan.padL, plan.padR);
    ConvPlan::Fused f;
    f.pd = dnnl::convolution_forward::primitive_desc(desc, attr, cache.engine);
    f.prim = dnnl::convolution_forward(f.pd);
    return plan.fused.emplace(variant, std::move(f)).first->second;
}

void ensureWeightsBias(DnnlCache& cache, ConvPlan& plan) {
    if (plan.haveWeightsBias) return;
    const memory::desc anyX(plan.userX.dims(), plan.in, Tag::any), anyY(plan.userY.dims(), plan.in, Tag::any),
        anyW(plan.userW.dims(), DType::f32, Tag::any);
    const auto algo = dnnl::algorithm::convolution_direct;
    ConvPlan::Fused& hint = fusedFor(cache, plan, true, false);
    dnnl::convolution_backward_weights::desc desc(algo, anyX, anyW, plan.biasDesc, anyY, plan.strides, plan.dilates,
                                                  plan.padL, plan.padR);
    plan.weightsBiasPd = dnnl::convolution_backward_weights::primitive_desc(desc, cache.engine, hint.pd);
    plan.bwdWeightsBias = dnnl::convolution_backward_weights(plan.weightsBiasPd);
    plan.haveWeightsBias = true;
}

template <class Body>
bool runGuarded(const char* op, Body&& body) {
    try {
        body();
        return true;
    } catch (const dnnl::error& e) {
        throw BackendError(std::string("cpu: oneDNN ") + op + " failed: " + e.what());
    }
}

}  // namespace

bool dnnlConv2dForward(int threads, Workspace& ws, float* y, const float* x, const float* w, const ConvDesc& d) {
    ConvPlan* plan = planFor(ws, d);
    if (!plan) return false;
    DnnlCache& cache = *ws.dnnl;
    return runGuarded("convolution forward", [&] {
        OmpThreads scope(threads);
        memory xm(plan->userX, cache.engine, const_cast<float*>(x)),
            wm(plan->userW, cache.engine, const_cast<float*>(w)), ym(plan->userY, cache.engine, y);
        memory src = asFormat(cache, *plan, kSrc, xm, plan->fwdPd.src_desc());
        memory wts = weightsFor(cache, *plan, kWeights, wm, plan->fwdPd.weights_desc(), d.weightsVersion);
        const bool direct = plan->fwdPd.dst_desc() == plan->userY;
        memory dst = direct ? ym : scratchFor(cache, *plan, kDst, plan->fwdPd.dst_desc());
        plan->fwd.execute(cache.stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wts}, {DNNL_ARG_DST, dst}});
        if (!direct) dnnl::reorder(dst, ym).execute(cache.stream, dst, ym);
        cache.stream.wait();
    });
}

bool dnnlConv2dBackwardData(int threads, Workspace& ws, float* dx, const float* dy, const float* w, const ConvDesc& d) {
    ConvPlan* plan = planFor(ws, d);
    if (!plan) return false;
    DnnlCache& cache = *ws.dnnl;
    return runGuarded("convolution backward data", [&] {
        OmpThreads scope(threads);
        memory dym(plan->userY, cache.engine, const_cast<float*>(dy)),
            wm(plan->userW, cache.engine, const_cast<float*>(w)), dxm(plan->userX, cache.engine, dx);
        memory diffDst = asFormat(cache, *plan, kDiffDstData, dym, plan->dataPd.diff_dst_desc());
        memory wts = asFormat(cache, *plan, kWeightsData, wm, plan->dataPd.weights_desc());
        memory diffSrc = scratchFor(cache, *plan, kDiffSrc, plan->dataPd.diff_src_desc());
        plan->bwdData.execute(cache.stream,
                              {{DNNL_ARG_DIFF_DST, diffDst}, {DNNL_ARG_WEIGHTS, wts}, {DNNL_ARG_DIFF_SRC, diffSrc}});
        accumulateInto(threads, cache, diffSrc, dxm);
        cache.stream.wait();
    });
}

bool dnnlConv2dBackwardFilter(int threads, Workspace& ws, float* dw, const float* dy, const float* x,
                              const ConvDesc& d) {
    ConvPlan* plan = planFor(ws, d);
    if (!plan) return false;
    DnnlCache& cache = *ws.dnnl;
    return runGuarded("convolution backward weights", [&] {
        OmpThreads scope(threads);
        memory dym(plan->userY, cache.engine, const_cast<float*>(dy)),
            xm(plan->userX, cache.engine, const_cast<float*>(x)), dwm(plan->userW, cache.engine, dw);
        memory diffDst = asFormat(cache, *plan, kDiffDstWeights, dym, plan->weightsPd.diff_dst_desc());
        memory src = asFormat(cache, *plan, kSrcWeights, xm, plan->weightsPd.src_desc());
        memory diffW = scratchFor(cache, *plan, kDiffWeights, plan->weightsPd.diff_weights_desc());
        plan->bwdWeights.execute(cache.stream,
                                 {{DNNL_ARG_DIFF_DST, diffDst}, {DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_WEIGHTS, diffW}});
        accumulateInto(threads, cache, diffW, dwm);
        cache.stream.wait();
    });
}

bool dnnlConv2dForwardFused(int threads, Workspace& ws, float* y, const float* x, const float* w, const float* bias,
                            bool relu, const ConvDesc& d) {
    ConvPlan* plan = planFor(ws, d);
    if (!plan) return false;
    DnnlCache& cache = *ws.dnnl;
    return runGuarded("fused convolution forward", [&] {
        OmpThreads scope(threads);
        ConvPlan::Fused& f = fusedFor(cache, *plan, bias != nullptr, relu);
        memory xm(plan->userX, cache.engine, const_cast<float*>(x));
        memory wm(plan->userW, cache.engine, const_cast<float*>(w)), ym(plan->userY, cache.engine, y);
        memory src = asFormat(cache, *plan, kSrc, xm, f.pd.src_desc());
        memory wts = weightsFor(cache, *plan, kWeights, wm, f.pd.weights_desc(), d.weightsVersion);
        const bool direct = f.pd.dst_desc() == plan->userY;
        memory dst = direct ? ym : scratchFor(cache, *plan, kFusedDst, f.pd.dst_desc());
        std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wts}, {DNNL_ARG_DST, dst}};
        if (bias) args.emplace(DNNL_ARG_BIAS, memory(plan->biasDesc, cache.engine, const_cast<float*>(bias)));
        f.prim.execute(cache.stream, args);
        if (!direct) dnnl::reorder(dst, ym).execute(cache.stream, dst, ym);
        cache.stream.wait();
    });
}

bool dnnlConv2dBackwardFused(int threads, Workspace& ws, float* dx, float* dw, float* dbias, const float* dy,
                             const float* x, const float* w, const ConvDesc& d, bool overwriteDx) {
    ConvPlan* plan = planFor(ws, d);
    if (!plan) return false;
    DnnlCache& cache = *ws.dnnl;
    return runGuarded("fused convolution backward", [&] {
        OmpThreads scope(threads);
        memory dym(plan->userY, cache.engine, const_cast<float*>(dy));
        // dy is reordered once when both backward primitives want the same format (the usual case).
        memory diffDstData;
        if (dx) {
            memory wm(plan->userW, cache.engine, const_cast<float*>(w)), dxm(plan->userX, cache.engine, dx);
            diffDstData = asFormat(cache, *plan, kDiffDstData, dym, plan->dataPd.diff_dst_desc());
            memory wts = asFormat(cache, *plan, kWeightsData, wm, plan->dataPd.weights_desc());
            // Overwriting dx in oneDNN's own format (a blocked tensor): written in place.
            const bool inPlace = overwriteDx && plan->dataPd.diff_src_desc() == plan->userX;
            memory diffSrc = inPlace ? dxm : scratchFor(cache, *plan, kDiffSrc, plan->dataPd.diff_src_desc());
            plan->bwdData.execute(
                cache.stream,
                {{DNNL_ARG_DIFF_DST, diffDstData}, {DNNL_ARG_WEIGHTS, wts}, {DNNL_ARG_DIFF_SRC, diffSrc}});
            // Overwriting: a plain reorder, several times faster than the accumulating one.
            if (!inPlace) {
                if (overwriteDx)
                    dnnl::reorder(diffSrc, dxm).execute(cache.stream, diffSrc, dxm);
                else
                    accumulateInto(threads, cache, diffSrc, dxm);
            }
        }
        // In bf16 the primitive would sum the rounded dy; the bias gradient is no product, so it sums dy in float32.
        float* dnnlBias = plan->in == DType::f32 ? dbias : nullptr;
        if (dw) {
            if (dnnlBias) ensureWeightsBias(cache, *plan);
            const auto& pd = dnnlBias ? plan->weightsBiasPd : plan->weightsPd;
            memory xm(plan->userX, cache.engine, const_cast<float*>(x)), dwm(plan->userW, cache.engine, dw);
            memory diffDst = diffDstData && diffDstData.get_desc() == pd.diff_dst_desc()
                                 ? diffDstData
                                 : asFormat(cache, *plan, kDiffDstWeights, dym, pd.diff_dst_desc());
            memory src = asFormat(cache, *plan, kSrcWeights, xm, pd.src_desc());
            memory diffW = scratchFor(cache, *plan, kDiffWeights, pd.diff_weights_desc());
            std::unordered_map<int, memory> args{
                {DNNL_ARG_DIFF_DST, diffDst}, {DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_WEIGHTS, diffW}};
            memory diffB;
            if (dnnlBias) {
                diffB = scratchFor(cache, *plan, kDiffBias, plan->biasDesc);
                args.emplace(DNNL_ARG_DIFF_BIAS, diffB);
            }
            (dnnlBias ? plan->bwdWeightsBias : plan->bwdWeights).execute(cache.stream, args);
            accumulateInto(threads, cache, diffW, dwm);
            cache.stream.wait();
            if (dnnlBias) {
                const float* db = static_cast<const float*>(diffB.get_data_handle());
                for (int ch = 0; ch < d.k; ++ch) dbias[ch] += db[ch];
            }
        }
        if (dbias && (!dw || !dnnlBias)) {
            cache.stream.wait();
            const int64_t ohw = int64_t(d.outH()) * d.outW();
            if (d.dstBlock == 0) {
                sumChannels(threads, dbias, dy, d.n, d.k, ohw);
            } else {
                // dy blocked: [n, k / B, oh * ow, B] (a frozen kernel with a trained bias, or bf16): the B channels
                // of a block summed side by side, in double as sumChannels does.
                const int b = d.dstBlock;
                for (int i = 0; i < d.n; ++i)
                    for (int kb = 0; kb < d.k / b; ++kb) {
                        const float* p = dy + (static_cast<size_t>(i) * (d.k / b) + kb) * ohw * b;
                        double sums[16] = {};
                        for (int64_t q = 0; q < ohw; ++q)
                            for (int l = 0; l < b; ++l) sums[l] += p[q * b + l];
                        for (int l = 0; l < b; ++l) dbias[kb * b + l] += static_cast<float>(sums[l]);
                    }
            }
        }
        cache.stream.wait();
    });
}

}  // namespace strata::cpu

#else  // no oneDNN in this build: the im2col path runs

namespace strata::cpu {

bool oneDnnAvailable() { return false; }
int dnnlPreferredBlock() { return 0; }
void destroyDnnlCache(DnnlCache*) {}
bool dnnlConv2dForward(int, Workspace&, float*, const float*, const float*, const ConvDesc&) { return false; }
bool dnnlConv2dBackwardData(int, Workspace&, float*, const float*, const float*, const ConvDesc&) { return false; }
bool dnnlConv2dBackwardFilter(int, Workspace&, float*, const float*, const float*, const ConvDesc&) { return false; }
bool dnnlConv2dForwardFused(int, Workspace&, float*, const float*, const float*, const float*, bool, const ConvDesc&) {
    return false;
}
bool dnnlConv2dBackwardFused(int, Workspace&, float*, float*, float*, const float*, const float*, const float*,
                             const ConvDesc&, bool) {
    return false;
}

}  // namespace strata::cpu

#endif
