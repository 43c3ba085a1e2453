// CudaBackend's cuDNN ops: convolution (algorithm found once per shape and cached), pooling,
// batch norm and softmax. Backward ops accumulate (beta = 1).
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "gpu/CudaAllocator.h"
#include "gpu/CudaBackend.h"
#include "gpu/CudaDnnPlans.h"
#include "gpu/CudaLibCheck.h"
#include "gpu/ElementwiseKernels.cuh"
#include "gpu/PoolingKernels.cuh"

namespace strata::gpu {

namespace {

const float kOne = 1.0f;
const float kZero = 0.0f;

class TensorDesc {
public:
    TensorDesc(int n, int c, int h, int w) {
        CUDNN_CHECK(cudnnCreateTensorDescriptor(&m_desc));
        try {
            CUDNN_CHECK(cudnnSetTensor4dDescriptor(m_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
        } catch (...) {
            (void)cudnnDestroyTensorDescriptor(m_desc);
            throw;
        }
    }
    ~TensorDesc() { (void)cudnnDestroyTensorDescriptor(m_desc); }
    TensorDesc(const TensorDesc&) = delete;
    TensorDesc& operator=(const TensorDesc&) = delete;
    operator cudnnTensorDescriptor_t() const { return m_desc; }

private:
    cudnnTensorDescriptor_t m_desc = nullptr;
};

class PoolingDesc {
public:
    explicit PoolingDesc(const PoolDesc& d) {
        CUDNN_CHECK(cudnnCreatePoolingDescriptor(&m_desc));
        try {
            // Max pooling never sees padding; average pooling excludes it from the count: the CPU's definition.
            const cudnnPoolingMode_t mode =
                d.mode == PoolMode::Max ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
            CUDNN_CHECK(cudnnSetPooling2dDescriptor(m_desc, mode, CUDNN_PROPAGATE_NAN, d.kernelH, d.kernelW, d.padH,
                                                    d.padW, d.strideH, d.strideW));
        } catch (...) {
            (void)cudnnDestroyPoolingDescriptor(m_desc);
            throw;
        }
    }
    ~PoolingDesc() { (void)cudnnDestroyPoolingDescriptor(m_desc); }
    PoolingDesc(const PoolingDesc&) = delete;
    PoolingDesc& operator=(const PoolingDesc&) = delete;
    operator cudnnPoolingDescriptor_t() const { return m_desc; }

private:
    cudnnPoolingDescriptor_t m_desc = nullptr;
};

std::string convText(const ConvDesc& d) {
    return "conv2d [" + std::to_string(d.n) + "," + std::to_string(d.c) + "," + std::to_string(d.h) + "," +
           std::to_string(d.w) + "] -> " + std::to_string(d.k) + " channels, " + std::to_string(d.r) + "x" +
           std::to_string(d.s) + " kernel, groups " + std::to_string(d.groups);
}

// FFT and Winograd transform their inputs first; under TF32 math the transformed values are rounded,
// which breaks the bf16 / fp16 definition (round the inputs, nothing else).
bool transformsInputs(cudnnConvolutionFwdAlgo_t a) {
    return a == CUDNN_CONVOLUTION_FWD_ALGO_FFT || a == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
           a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
bool transformsInputs(cudnnConvolutionBwdDataAlgo_t a) {
    return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
           a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}
bool transformsInputs(cudnnConvolutionBwdFilterAlgo_t a) {
    return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
           a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

std::string precisionText(ComputePrecision p) {
    return p == ComputePrecision::F32
               ? std::string()
               : std::string(" for ") + computePrecisionName(p) + " inputs (no FFT or Winograd algorithms)";
}

// Convolution math per plan: float32 FMA only, TF32 allowed, or bf16/fp16 (inputs pre-rounded, TF32 allowed
// because it is exact for them, no input-transforming algorithms).
enum ConvMath { kMathFma = 0, kMathTf32 = 1, kMathRounded = 2 };

// Deterministic mode picks from cuDNN's heuristic list (cudnnGet*_v7) and never times candidates
// (cudnnFind*): a timed choice can differ between two runs, and another algorithm sums in another order, so
// two runs with one seed would not give identical losses. The heuristic order depends only on the GPU, the
// cuDNN version and the shape. (PyTorch does the same with cudnn.deterministic and benchmark off.)
// Picks the first usable result of a cudnnFind* list (sorted by measured time) or a cudnnGet*_v7 list
// (sorted by expected speed).
template <typename Perf>
bool pickAlgo(const Perf* perf, int count, size_t workspaceLimit, bool deterministic, int math, ConvAlgoChoice& out) {
    const bool allowTf32 = math != kMathFma;
    for (int i = 0; i < count; ++i) {
        const Perf& p = perf[i];
        if (p.status != CUDNN_STATUS_SUCCESS || p.memory > workspaceLimit) continue;
        if (deterministic && p.determinism != CUDNN_DETERMINISTIC) continue;
        // ALLOW_CONVERSION would round bf16-exact inputs again, to fp16 (range 65504).
        if (math == kMathRounded && (transformsInputs(p.algo) || p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))
            continue;
        if (!allowTf32 && p.mathType != CUDNN_FMA_MATH && p.mathType != CUDNN_DEFAULT_MATH) continue;
        out.chosen = true;
        out.algo = static_cast<int>(p.algo);
        // CUDNN_DEFAULT_MATH lets float32 run on TF32 tensor cores (Ampere and newer): with TF32 off the
        // choice must run with FMA math whatever the result reported.
        out.math = math == kMathFma ? CUDNN_FMA_MATH : p.mathType;
        out.workspace = p.memory;
        return true;
    }
    return false;
}

// The largest workspace among heuristic candidates within the limit: what a cudnnFind*Ex call needs.
template <typename Perf>
size_t candidateWorkspace(const Perf* perf, int count, size_t limit) {
    size_t ws = 0;
    for (int i = 0; i < count; ++i)
        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= limit) ws = std::max(ws, perf[i].memory);
    return ws;
}

}  // namespace

ConvPlan::ConvPlan() {
    try {
        CUDNN_CHECK(cudnnCreateTensorDescriptor(&x));
        CUDNN_CHECK(cudnnCreateTensorDescriptor(&y));
        CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
        CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv));
        CUDNN_CHECK(cudnnCreateTensorDescriptor(&bias));
        CUDNN_CHECK(cudnnCreateActivationDescriptor(&relu));
        CUDNN_CHECK(cudnnCreateActivationDescriptor(&identity));
        // NOT_PROPAGATE_NAN: a NaN pre-activation gives 0, as Strata's ReLU (x > 0 ? x : 0) does. coef is a
        // ceiling only for CLIPPED_RELU; the largest double keeps it harmless should a kernel read it anyway.
        CUDNN_CHECK(cudnnSetActivationDescriptor(relu, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN,
                                                 std::numeric_limits<double>::max()));
        CUDNN_CHECK(cudnnSetActivationDescriptor(identity, CUDNN_ACTIVATION_IDENTITY, CUDNN_NOT_PROPAGATE_NAN,
                                                 std::numeric_limits<double>::max()));
    } catch (...) {
        destroy();
        throw;
    }
}

ConvPlan::~ConvPlan() { destroy(); }

void ConvPlan::destroy() noexcept {
    if (identity) (void)cudnnDestroyActivationDescriptor(identity);
    if (relu) (void)cudnnDestroyActivationDescriptor(relu);
    if (bias) (void)cudnnDestroyTensorDescriptor(bias);
    if (conv) (void)cudnnDestroyConvolutionDescriptor(conv);
    if (w) (void)cudnnDestroyFilterDescriptor(w);
    if (y) (void)cudnnDestroyTensorDescriptor(y);
    if (x) (void)cudnnDestroyTensorDescriptor(x);
    identity = relu = nullptr;
    bias = y = x = nullptr;
    conv = nullptr;
    w = nullptr;
}

namespace {

ConvPlan& planFor(ConvPlanCache& cache, const ConvDesc& d, int math) {
    const ConvPlanCache::Key key{d.n,       d.c,    d.h,    d.w,         d.k,         d.r,      d.s, d.strideH,
                                 d.strideW, d.padH, d.padW, d.dilationH, d.dilationW, d.groups, math};
    auto it = cache.plans.find(key);
    if (it != cache.plans.end()) return *it->second;
    auto plan = std::make_unique<ConvPlan>();
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, d.n, d.c, d.h, d.w));
    CUDNN_CHECK(
        cudnnSetFilter4dDescriptor(plan->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, d.k, d.c / d.groups, d.r, d.s));
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(plan->conv, d.padH, d.padW, d.strideH, d.strideW, d.dilationH,
                                                d.dilationW, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CUDNN_CHECK(cudnnSetConvolutionGroupCount(plan->conv, d.groups));
    CUDNN_CHECK(cudnnSetConvolutionMathType(plan->conv, math != kMathFma ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    int n = 0, c = 0, h = 0, w = 0;
    CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(plan->conv, plan->x, plan->w, &n, &c, &h, &w));
    if (n != d.n || c != d.k || h != d.outH() || w != d.outW())
        throw BackendError(convText(d) + ": cuDNN computes a " + std::to_string(h) + "x" + std::to_string(w) +
                           " output, Strata expects " + std::to_string(d.outH()) + "x" + std::to_string(d.outW()));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan->bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, d.k, 1, 1));
    ConvPlan& ref = *plan;
    cache.plans.emplace(key, std::move(plan));
    return ref;
}

// Finds the forward algorithm of `plan` once: cudnnFind times the candidates on the caller's x and w
// (already rounded for bf16 / fp16), writing y, and pickAlgo keeps the fastest allowed one.
template <typename WorkspaceFn>
void chooseForward(cudnnHandle_t handle, ConvPlan& plan, const ConvDesc& d, const float* x, const float* w, float* y,
                   size_t workspaceLimit, bool deterministic, int math, ComputePrecision precision,
                   WorkspaceFn&& workspaceOf) {
    constexpr int kMax = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
    cudnnConvolutionFwdAlgoPerf_t perf[kMax];
    int found = 0;
    CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle, plan.x, plan.w, plan.conv, plan.y, kMax, &found, perf));
    int count = found;
    size_t limit = workspaceLimit;
    if (!deterministic) {  // timed choice; deterministic mode keeps the heuristic list (see pickAlgo)
        limit = candidateWorkspace(perf, found, workspaceLimit);
        CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(handle, plan.x, x, plan.w, w, plan.conv, plan.y, y, kMax,
                                                           &count, perf, workspaceOf(limit), limit));
    }
    if (!pickAlgo(perf, count, limit, deterministic, math, plan.forward))
        throw BackendError(convText(d) + ": no usable cuDNN forward algorithm" +
                           (deterministic ? " in deterministic mode" : "") + precisionText(precision) +
                           " within a workspace of " + std::to_string(workspaceLimit) + " bytes");
}

}  // namespace

// ---- convolution ------------------------------------------------------------------------------------------

void CudaBackend::doConv2dForward(float* y, const float* x, const float* w, const ConvDesc& d) {
    doConv2dForwardFused(y, x, w, nullptr, false, d);
}

// The convolution layer's forward, y = relu(conv(x, w) + bias), in one cuDNN call where that costs nothing:
//   - no bias, no ReLU (conv2dForward): cudnnConvolutionForward.
//   - ReLU (bias or not): cudnnConvolutionBiasActivationForward with CUDNN_ACTIVATION_RELU and the forward
//     algorithm the plan already found for the plain convolution (the documentation ties only IDENTITY to
//     one algorithm; RELU needs reluNanOpt = CUDNN_NOT_PROPAGATE_NAN, which ConvPlan sets). It always
//     reads a bias, so a layer without one passes a cached vector of K zeros.
//   - bias without ReLU: cuDNN's documentation allows CUDNN_ACTIVATION_IDENTITY with
//     CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM only. Forcing that algorithm could cost far more than
//     the one bias pass it saves (the plan's choice was timed against it by cudnnFind), so the fused call
//     is made only when the plan chose IMPLICIT_PRECOMP_GEMM anyway; otherwise convolution, then our bias
//     kernel.
//   - when cuDNN answers NOT_SUPPORTED for a plan (some shape, group count or algorithm the fused kernels
//     lack), that plan remembers it and runs convolution, bias kernel and ReLU kernel: the same GPU and
//     the same math in more passes, never the CPU.
// In every case the algorithm is the plan's, so deterministic mode and the bf16 / fp16 rules (inputs
// rounded first, no FFT or Winograd) hold as for conv2dForward; bias and ReLU stay float32. The fused
// call's z input is y with alpha2 = 0, as cuDNN's users (TensorFlow, ONNX Runtime) pass it.
void CudaBackend::doConv2dForwardFused(float* y, const float* x, const float* w, const float* bias, bool relu,
                                       const ConvDesc& d) {
    activate();
    const int math = computePrecision() != ComputePrecision::F32 ? kMathRounded : m_allowTf32 ? kMathTf32 : kMathFma;
    const RoundedOperand rx(*this, x, d.inputSize());
    const RoundedOperand rw(*this, w, d.weightSize());
    x = rx.get();
    w = rw.get();
    ConvPlan& plan = planFor(*m_plans, d, math);
    // The timing runs write y, which this call overwrites anyway.
    if (!plan.forward.chosen)
        chooseForward(m_cudnn, plan, d, x, w, y, kConvWorkspaceLimit, deterministic(), math, computePrecision(),
                      [this](size_t bytes) { return workspace(bytes); });
    const auto algo = static_cast<cudnnConvolutionFwdAlgo_t>(plan.forward.algo);
    CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv, plan.forward.math));
    void* ws = workspace(plan.forward.workspace);
    const bool fuse =
        relu ? !plan.fusedReluUnsupported
             : bias && algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM && !plan.fusedIdentityUnsupported;
    if (fuse) {
        const float* b = bias ? bias : constantVector(0.0f, d.k, &m_zeros, &m_zerosSize);
        const cudnnStatus_t st = cudnnConvolutionBiasActivationForward(
            m_cudnn, &kOne, plan.x, x, plan.w, w, plan.conv, algo, ws, plan.forward.workspace, &kZero, plan.y, y,
            plan.bias, b, relu ? plan.relu : plan.identity, plan.y, y);
        if (st == CUDNN_STATUS_SUCCESS) return;
        if (CUDNN_STATUS_CATEGORY(st) != CUDNN_STATUS_NOT_SUPPORTED)
            throwCudaFailure("cuDNN", cudnnGetErrorString(st),
                             ("cudnnConvolutionBiasActivationForward for " + convText(d)).c_str(), __FILE__, __LINE__);
        (relu ? plan.fusedReluUnsupported : plan.fusedIdentityUnsupported) = true;
    }
    CUDNN_CHECK(cudnnConvolutionForward(m_cudnn, &kOne, plan.x, x, plan.w, w, plan.conv, algo, ws,
                                        plan.forward.workspace, &kZero, plan.y, y));
    const int inner = d.outH() * d.outW();
    if (bias) doAddBiasChannels(y, bias, d.n, d.k, inner);
    if (relu) doActivationForward(y, y, d.outputSize(), Activation::ReLU, 0.0f);
}

void CudaBackend::doConv2dBackwardData(float* dx, const float* dy, const float* w, const ConvDesc& d) {
    activate();
    const int math = computePrecision() != ComputePrecision::F32 ? kMathRounded : m_allowTf32 ? kMathTf32 : kMathFma;
    const RoundedOperand rdy(*this, dy, int64_t(d.n) * d.k * d.outH() * d.outW());
    const RoundedOperand rw(*this, w, int64_t(d.k) * (d.c / d.groups) * d.r * d.s);
    dy = rdy.get();
    w = rw.get();
    ConvPlan& plan = planFor(*m_plans, d, math);
    if (!plan.backwardData.chosen) {
        constexpr int kMax = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
        cudnnConvolutionBwdDataAlgoPerf_t perf[kMax];
        int found = 0;
        CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(m_cudnn, plan.w, plan.y, plan.conv, plan.x, kMax,
                                                                &found, perf));
        int count = found;
        size_t limit = kConvWorkspaceLimit;
        if (!deterministic()) {  // timed choice; deterministic mode keeps the heuristic list (see pickAlgo)
            limit = candidateWorkspace(perf, found, kConvWorkspaceLimit);
            // dx accumulates, so the timing runs write a scratch buffer instead.
            const size_t dxBytes = size_t(d.n) * d.c * d.h * d.w * sizeof(float);
            void* scratch = m_allocator->allocate(dxBytes);
            try {
                CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(m_cudnn, plan.w, w, plan.y, dy, plan.conv,
                                                                        plan.x, scratch, kMax, &count, perf,
                                                                        workspace(limit), limit));
            } catch (...) {
                m_allocator->deallocate(scratch);
                throw;
            }
            m_allocator->deallocate(scratch);
        }
        if (!pickAlgo(perf, count, limit, deterministic(), math, plan.backwardData))
            throw BackendError(convText(d) + ": no usable cuDNN backward-data algorithm" +
                               (deterministic() ? " in deterministic mode" : "") + precisionText(computePrecision()) +
                               " within a workspace of " + std::to_string(kConvWorkspaceLimit) + " bytes");
    }
    CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv, plan.backwardData.math));
    CUDNN_CHECK(cudnnConvolutionBackwardData(m_cudnn, &kOne, plan.w, w, plan.y, dy, plan.conv,
                                             static_cast<cudnnConvolutionBwdDataAlgo_t>(plan.backwardData.algo),
                                             workspace(plan.backwardData.workspace), plan.backwardData.workspace, &kOne,
                                             plan.x, dx));
}

void CudaBackend::doConv2dBackwardFilter(float* dw, const float* dy, const float* x, const ConvDesc& d) {
    activate();
    const int math = computePrecision() != ComputePrecision::F32 ? kMathRounded : m_allowTf32 ? kMathTf32 : kMathFma;
    const RoundedOperand rdy(*this, dy, int64_t(d.n) * d.k * d.outH() * d.outW());
    const RoundedOperand rx(*this, x, int64_t(d.n) * d.c * d.h * d.w);
    dy = rdy.get();
    x = rx.get();
    ConvPlan& plan = planFor(*m_plans, d, math);
    if (!plan.backwardFilter.chosen) {
        constexpr int kMax = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
        cudnnConvolutionBwdFilterAlgoPerf_t perf[kMax];
        int found = 0;
        CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(m_cudnn, plan.x, plan.y, plan.conv, plan.w, kMax,
                                                                  &found, perf));
        int count = found;
        size_t limit = kConvWorkspaceLimit;
        if (!deterministic()) {  // timed choice; deterministic mode keeps the heuristic list (see pickAlgo)
            limit = candidateWorkspace(perf, found, kConvWorkspaceLimit);
            const size_t dwBytes = size_t(d.k) * (d.c / d.groups) * d.r * d.s * sizeof(float);
            void* scratch = m_allocator->allocate(dwBytes);
            try {
                CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(m_cudnn, plan.x, x, plan.y, dy, plan.conv,
                                                                          plan.w, scratch, kMax, &count, perf,
                                                                          workspace(limit), limit));
            } catch (...) {
                m_allocator->deallocate(scratch);
                throw;
            }
            m_allocator->deallocate(scratch);
        }
        if (!pickAlgo(perf, count, limit, deterministic(), math, plan.backwardFilter))
            throw BackendError(convText(d) + ": no usable cuDNN backward-filter algorithm" +
                               (deterministic() ? " in deterministic mode" : "") + precisionText(computePrecision()) +
                               " within a workspace of " + std::to_string(kConvWorkspaceLimit) + " bytes");
    }
    CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv, plan.backwardFilter.math));
    CUDNN_CHECK(cudnnConvolutionBackwardFilter(m_cudnn, &kOne, plan.x, x, plan.y, dy, plan.conv,
                                               static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan.backwardFilter.algo),
                                               workspace(plan.backwardFilter.workspace), plan.backwardFilter.workspace,
                                               &kOne, plan.w, dw));
}

// ---- pooling ------------------------------------------------------------------------------------------------

void CudaBackend::doPool2dForward(float* y, const float* x, const PoolDesc& d) {
    activate();
    PoolingDesc pool(d);
    TensorDesc xd(d.n, d.c, d.h, d.w), yd(d.n, d.c, d.outH(), d.outW());
    int n = 0, c = 0, h = 0, w = 0;
    CUDNN_CHECK(cudnnGetPooling2dForwardOutputDim(pool, xd, &n, &c, &h, &w));
    if (h != d.outH() || w != d.outW())
        throw BackendError("pool2d: cuDNN computes a " + std::to_string(h) + "x" + std::to_string(w) +
                           " output, Strata expects " + std::to_string(d.outH()) + "x" + std::to_string(d.outW()));
    CUDNN_CHECK(cudnnPoolingForward(m_cudnn, pool, &kOne, xd, x, &kZero, yd, y));
}

void CudaBackend::doPool2dBackward(float* dx, const float* dy, const float* x, const float* y, const PoolDesc& d,
                                   bool overwriteDx) {
    activate();
    if (overwriteDx) doZero(dx, size_t(d.n) * d.c * d.h * d.w * sizeof(float));
    if (d.mode == PoolMode::Max) {
        // Our kernel: cuDNN does not promise which of several equal maxima gets the gradient; the CPU gives it
        // to the first in row-major window order.
        launchMaxPoolBackward(m_stream, dx, dy, x, d.n, d.c, d.h, d.w, d.kernelH, d.kernelW, d.strideH, d.strideW,
                              d.padH, d.padW, d.outH(), d.outW());
        return;
    }
    PoolingDesc pool(d);
    TensorDesc xd(d.n, d.c, d.h, d.w), yd(d.n, d.c, d.outH(), d.outW());
    CUDNN_CHECK(cudnnPoolingBackward(m_cudnn, pool, &kOne, yd, y, yd, dy, xd, x, &kOne, xd, dx));
}

// One pass, no temporary: each input element gathers the gradients of the windows whose first maximum
// it is, then keeps them only where x > 0 (x is the ReLU's output), as Backend's default does through a
// routed buffer. The same additions in the same order, so the result equals the default's bit for bit.
void CudaBackend::doMaxPool2dReLUBackward(float* dx, const float* dy, const float* x, const float*, const PoolDesc& d,
                                          bool overwriteDx) {
    activate();
    if (overwriteDx) doZero(dx, size_t(d.n) * d.c * d.h * d.w * sizeof(float));
    launchMaxPoolReLUBackward(m_stream, dx, dy, x, d.n, d.c, d.h, d.w, d.kernelH, d.kernelW, d.strideH, d.strideW,
                              d.padH, d.padW, d.outH(), d.outW());
}

// ---- softmax ---------------------------------------------------------------------------------------------------

void CudaBackend::doSoftmaxForward(float* y, const float* x, int rows, int cols) {
    if (rows == 0) return;
    activate();
    TensorDesc desc(rows, cols, 1, 1);
    CUDNN_CHECK(cudnnSoftmaxForward(m_cudnn, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_INSTANCE, &kOne, desc, x,
                                    &kZero, desc, y));
}

void CudaBackend::doSoftmaxBackward(float* dx, const float* dy, const float* y, int rows, int cols) {
    if (rows == 0) return;
    activate();
    TensorDesc desc(rows, cols, 1, 1);
    CUDNN_CHECK(cudnnSoftmaxBackward(m_cudnn, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_INSTANCE, &kOne, desc, y, desc,
                                     dy, &kOne, desc, dx));
}

// ---- batch norm -------------------------------------------------------------------------------------------------

const float* CudaBackend::constantVector(float value, int c, float** holder, int* holderSize) {
    if (*holderSize < c) {
        if (*holder) m_allocator->deallocate(*holder);
        *holder = nullptr;
        *holderSize = 0;
        *holder = static_cast<float*>(m_allocator->allocate(size_t(c) * sizeof(float)));
        *holderSize = c;
        launchFill(m_stream, *holder, value, c);
    }
    return *holder;
}

void CudaBackend::doBatchNormForwardTraining(float* y, float* saveMean, float* saveInvStd, float* runningMean,
                                             float* runningVar, const float* x, const float* gamma, const float* beta,
                                             int n, int c, int inner, float momentum, float eps, bool relu,
                                             int /*block: 0, the seam refuses others*/) {
    activate();
    const float* g = gamma ? gamma : constantVector(1.0f, c, &m_ones, &m_onesSize);
    const float* b = beta ? beta : constantVector(0.0f, c, &m_zeros, &m_zerosSize);
    TensorDesc xd(n, c, inner, 1), pd(1, c, 1, 1);
    // cuDNN updates running variance with the unbiased batch variance, as the CPU does.
    CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(m_cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, xd, x, xd, y,
                                                       pd, g, b, momentum, runningMean, runningVar, eps, saveMean,
                                                       saveInvStd));
    // cuDNN's fused BN + activation wants NHWC; the ReLU runs after it on the stream.
    if (relu) doActivationForward(y, y, int64_t(n) * c * inner, Activation::ReLU, 0.0f);
}

void CudaBackend::doBatchNormForwardInference(float* y, const float* x, const float* gamma, const float* beta,
                                              const float* runningMean, const float* runningVar, int n, int c,
                                              int inner, float eps, bool relu,
                                              int /*block: 0, the seam refuses others*/) {
    activate();
    const float* g = gamma ? gamma : constantVector(1.0f, c, &m_ones, &m_onesSize);
    const float* b = beta ? beta : constantVector(0.0f, c, &m_zeros, &m_zerosSize);
    TensorDesc xd(n, c, inner, 1), pd(1, c, 1, 1);
    CUDNN_CHECK(cudnnBatchNormalizationForwardInference(m_cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, xd, x, xd, y,
                                                        pd, g, b, runningMean, runningVar, eps));
    if (relu) doActivationForward(y, y, int64_t(n) * c * inner, Activation::ReLU, 0.0f);
}

void CudaBackend::doBatchNormBackward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                                      const float* gamma, const float* saveMean, const float* saveInvStd, int n, int c,
                                      int inner, const float* reluOutput, bool overwriteDx,
                                      int /*block: 0, the seam refuses others*/) {
    activate();
    const float* g = gamma ? gamma : constantVector(1.0f, c, &m_ones, &m_onesSize);
    // cuDNN writes all three gradients; a null one goes to scratch (stream order lets it be freed right after).
    const size_t xBytes = size_t(n) * c * inner * sizeof(float), pBytes = size_t(c) * sizeof(float);
    std::vector<void*> scratch;
    auto orScratch = [&](float* p, size_t bytes) {
        if (p) return p;
        scratch.push_back(m_allocator->allocate(bytes));
        return static_cast<float*>(scratch.back());
    };
    try {
        float* dxp = orScratch(dx, xBytes);
        float* dgp = orScratch(dgamma, pBytes);
        float* dbp = orScratch(dbeta, pBytes);
        if (reluOutput) {
            // The fused ReLU's backward first: dy gated by its output, into scratch (dy itself is left alone).
            float* masked = orScratch(nullptr, xBytes);
            doZero(masked, xBytes);
            doActivationBackward(masked, dy, nullptr, reluOutput, int64_t(n) * c * inner, Activation::ReLU, 0.0f,
                                 false);
            dy = masked;
        }
        TensorDesc xd(n, c, inner, 1), pd(1, c, 1, 1);
        // epsilon is not used when the saved statistics are passed; cuDNN still asks for one.
        // dx: beta 0 writes it (overwriteDx), 1 adds to it; dgamma and dbeta always add.
        CUDNN_CHECK(cudnnBatchNormalizationBackward(m_cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne,
                                                    overwriteDx || !dx ? &kZero : &kOne, &kOne, &kOne, xd, x, xd, dy,
                                                    xd, dxp, pd, g, dgp, dbp, 1e-5, saveMean, saveInvStd));
    } catch (...) {
        for (void* p : scratch) m_allocator->deallocate(p);
        throw;
    }
    for (void* p : scratch) m_allocator->deallocate(p);
}

}  // namespace strata::gpu
