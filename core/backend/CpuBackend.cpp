// CpuBackend: each op is its CpuFast.h path (after the operand rounding of bf16 / fp16); the few ops
// without a faster path run their CpuReference.h loop.
#include "core/backend/CpuBackend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/backend/CpuBf16.h"
#include "core/backend/CpuFast.h"
#include "core/backend/CpuReference.h"

namespace strata {

namespace {

// The float32 activation block of this process (see activationBlock).
int f32Block() {
    static const int block = [] {
        const char* env = std::getenv("STRATA_BLOCKED_LAYOUT");
        return env && std::string(env) == "0" ? 0 : cpu::dnnlPreferredBlock();
    }();
    return block;
}

// Native bf16 runs an op on bf16 primitives only where they pay. A product with fewer than 16 rows, columns or
// summed terms (a classifier's last layer and its gradients) and a convolution with fewer than 4 input channels per
// group (a first layer over grey or colour images) take the float32 kernels on rounded copies instead, the same
// definition (rounded inputs, float32 sums): oneDNN's bf16 kernels were slower there than float32 ones (measured
// in strata-train profile on the 2-core VM: the residual template's 1-channel stem 0.56 ms a step against 0.23,
// fashion_cnn_bn's conv1 1.25 against 0.86, a 10-unit Dense 0.09-0.13 against 0.02-0.04).
bool bf16GemmPays(int m, int n, int k) { return std::min({m, n, k}) >= 16; }
bool bf16ConvPays(const ConvDesc& d) { return d.c / std::max(d.groups, 1) >= 4; }

}  // namespace

CpuBackend::CpuBackend(const BackendOptions& options)
    : CpuMemoryBackend("cpu", options, options.threads), m_workspace(std::make_unique<cpu::Workspace>()) {
    m_workspace->useOneDnn = cpu::oneDnnAvailable();
    const char* winograd = std::getenv("STRATA_WINOGRAD");
    m_workspace->useWinograd = !(winograd && std::string(winograd) == "0");
    const char* narrow = std::getenv("STRATA_NARROW_CONV");
    m_workspace->useNarrowConv = !(narrow && std::string(narrow) == "0");
    // bf16 runs natively or not at all: rounding copies for a float32 GEMM would be slower than fp32 itself.
    if (options.precision == ComputePrecision::BF16) {
        const std::string why = cpu::bf16Unavailable();
        if (!why.empty())
            throw BackendError("cpu: precision bf16 needs a CPU that computes bf16 natively, and " + why +
                               "; use precision fp32 here, or bf16 on a GPU");
        m_workspace->bf16 = true;
        // STRATA_WINOGRAD_BF16=0: the 3x3 convolutions as before (oneDNN's bf16 forward, float32 Winograd on
        // rounded copies backward), to compare.
        const char* products = std::getenv("STRATA_WINOGRAD_BF16");
        m_workspace->winogradBf16 = winogradBf16Available() && !(products && std::string(products) == "0");
    }
}

CpuBackend::~CpuBackend() = default;

bool CpuBackend::oneDnnAvailable() { return cpu::oneDnnAvailable(); }
void CpuBackend::setOneDnn(bool on) { m_workspace->useOneDnn = on && cpu::oneDnnAvailable(); }
bool CpuBackend::oneDnn() const { return m_workspace->useOneDnn; }
bool CpuBackend::winogradAvailable() { return f32Block() != 0 && cpu::winogradAvailable(f32Block()); }
bool CpuBackend::winogradBf16Available() { return f32Block() == 16 && cpu::winogradBf16Available(); }
void CpuBackend::setWinograd(bool on) { m_workspace->useWinograd = on; }
bool CpuBackend::winogradRuns(const ConvDesc& d) const { return cpu::winogradApplies(*m_workspace, d); }
void CpuBackend::setNarrowConv(bool on) { m_workspace->useNarrowConv = on; }
bool CpuBackend::narrowConvRuns(const ConvDesc& d) const { return cpu::narrowConvApplies(*m_workspace, d); }
int64_t CpuBackend::narrowConvCalls() const { return m_workspace->narrowConvs; }

int CpuBackend::activationBlock() const {
    return computePrecision() == ComputePrecision::F32 || m_workspace->bf16 ? f32Block() : 0;
}

// ---- element-wise ---------------------------------------------------------

void CpuBackend::doFill(float* y, float value, int64_t n) { cpu::fill(threads(), y, value, n); }
void CpuBackend::doZero(void* y, size_t bytes) {
    if (bytes) std::memset(y, 0, bytes);
}
void CpuBackend::doScale(float* y, float alpha, int64_t n) { cpu::scale(threads(), y, alpha, n); }
void CpuBackend::doAxpy(float* y, float alpha, const float* x, int64_t n) { cpu::axpy(threads(), y, alpha, x, n); }
void CpuBackend::doAdd(float* y, const float* a, const float* b, int64_t n) { cpu::add(threads(), y, a, b, n); }
void CpuBackend::doMul(float* y, const float* a, const float* b, int64_t n) { cpu::mul(threads(), y, a, b, n); }

// ---- linear algebra ---------------------------------------------------------

void CpuBackend::doGemm(bool transA, bool transB, int m, int n, int k, float alpha, const float* a, int lda,
                        const float* b, int ldb, float beta, float* c, int ldc) {
    if (m_workspace->bf16 && bf16GemmPays(m, n, k) &&
        cpu::bf16Gemm(threads(), *m_workspace, transA, transB, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0,
                      1))
        return;
    roundGemmOperands(transA, transB, m, n, k, a, lda, b, ldb);
    cpu::gemm(threads(), m_workspace->useOneDnn, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void CpuBackend::doGemmStridedBatched(bool transA, bool transB, int m, int n, int k, float alpha, const float* a,
                                      int lda, int64_t strideA, const float* b, int ldb, int64_t strideB, float beta,
                                      float* c, int ldc, int64_t strideC, int count) {
    if (m_workspace->bf16 && bf16GemmPays(m, n, k) &&
        cpu::bf16Gemm(threads(), *m_workspace, transA, transB, m, n, k, alpha, a, lda, strideA, b, ldb, strideB, beta,
                      c, ldc, strideC, count))
        return;
    if (computePrecision() != ComputePrecision::F32) {  // each product's operands rounded as gemm rounds them
        for (int i = 0; i < count; ++i)
            doGemm(transA, transB, m, n, k, alpha, a + i * strideA, lda, b + i * strideB, ldb, beta, c + i * strideC,
                   ldc);
        return;
    }
    cpu::gemmStridedBatched(threads(), m_workspace->useOneDnn, transA, transB, m, n, k, alpha, a, lda, strideA, b, ldb,
                            strideB, beta, c, ldc, strideC, count);
}
void CpuBackend::doAddBiasRows(float* y, const float* bias, int rows, int cols) {
    cpu::addBiasRows(threads(), y, bias, rows, cols);
}
void CpuBackend::doSumRows(float* dbias, const float* dy, int rows, int cols) {
    cpu::sumRows(threads(), dbias, dy, rows, cols);
}
void CpuBackend::doAddBiasChannels(float* y, const float* bias, int n, int c, int inner) {
    cpu::addBiasChannels(threads(), y, bias, n, c, inner);
}
void CpuBackend::doSumChannels(float* dbias, const float* dy, int n, int c, int inner) {
    cpu::sumChannels(threads(), dbias, dy, n, c, inner);
}

// ---- convolution and pooling ------------------------------------------------

// Native bf16 hands the float32 operands to oneDNN's bf16 primitives, which convert them; shapes oneDNN does not
// take run the float32 path on rounded copies, the same definition.
bool CpuBackend::bf16Dnnl() const { return m_workspace->bf16 && m_workspace->useOneDnn; }
void CpuBackend::countBf16Conv() { ++m_workspace->bf16Convs; }
CpuBackend::Bf16Runs CpuBackend::bf16Runs() const {
    return {m_workspace->bf16Gemms, m_workspace->bf16Convs, m_workspace->bf16WinogradBackward,
            m_workspace->bf16WinogradRuns, cpu::bf16TransposedOperands(*m_workspace)};
}
// The bf16 Winograd kernel takes the float32 tensors as they are (it rounds the transformed operands itself).
bool CpuBackend::bf16Winograd(const ConvDesc& d) const {
    return m_workspace->winogradBf16 && cpu::winogradApplies(*m_workspace, d);
}

bool CpuBackend::bf16Skipped(const ConvDesc& d) const { return m_workspace->bf16 && !bf16ConvPays(d); }

namespace {

// The workspace as float32 for one call on rounded copies: the float32 paths read Workspace::bf16 too (oneDNN's
// convolutions take bf16 inputs under it, CpuDnnl.cpp).
class Float32Call {
public:
    explicit Float32Call(cpu::Workspace& ws) : m_ws(ws), m_bf16(ws.bf16), m_winograd(ws.winogradBf16) {
        ws.bf16 = ws.winogradBf16 = false;
    }
    ~Float32Call() {
        m_ws.bf16 = m_bf16;
        m_ws.winogradBf16 = m_winograd;
    }
    Float32Call(const Float32Call&) = delete;
    Float32Call& operator=(const Float32Call&) = delete;

private:
    cpu::Workspace& m_ws;
    bool m_bf16, m_winograd;
};

}  // namespace

void CpuBackend::doConv2dForward(float* y, const float* x, const float* w, const ConvDesc& d) {
    if (bf16Skipped(d)) {
        Float32Call f32(*m_workspace);
        return cpu::conv2dForward(threads(), *m_workspace, y, rounded(0, x, d.inputSize()),
                                  rounded(1, w, d.weightSize()), d);
    }
    if (bf16Winograd(d)) return cpu::winogradForward(threads(), *m_workspace, y, x, w, nullptr, false, d);
    if (bf16Dnnl() && cpu::dnnlConv2dForward(threads(), *m_workspace, y, x, w, d)) return countBf16Conv();
    cpu::conv2dForward(threads(), *m_workspace, y, rounded(0, x, d.inputSize()), rounded(1, w, d.weightSize()), d);
}
void CpuBackend::doConv2dBackwardData(float* dx, const float* dy, const float* w, const ConvDesc& d) {
    if (bf16Skipped(d)) {
        Float32Call f32(*m_workspace);
        return cpu::conv2dBackwardData(threads(), *m_workspace, dx, rounded(0, dy, d.outputSize()),
                                       rounded(1, w, d.weightSize()), d);
    }
    if (bf16Winograd(d)) return cpu::winogradBackwardData(threads(), *m_workspace, dx, dy, w, d, false);
    if (bf16Dnnl() && cpu::dnnlConv2dBackwardData(threads(), *m_workspace, dx, dy, w, d)) return countBf16Conv();
    cpu::conv2dBackwardData(threads(), *m_workspace, dx, rounded(0, dy, d.outputSize()), rounded(1, w, d.weightSize()),
                            d);
}
void CpuBackend::doConv2dBackwardFilter(float* dw, const float* dy, const float* x, const ConvDesc& d) {
    if (bf16Skipped(d)) {
        Float32Call f32(*m_workspace);
        return cpu::conv2dBackwardFilter(threads(), *m_workspace, dw, rounded(0, dy, d.outputSize()),
                                         rounded(1, x, d.inputSize()), d);
    }
    if (bf16Winograd(d)) return cpu::winogradBackwardFilter(threads(), *m_workspace, dw, nullptr, dy, x, d);
    if (bf16Dnnl() && cpu::dnnlConv2dBackwardFilter(threads(), *m_workspace, dw, dy, x, d)) return countBf16Conv();
    cpu::conv2dBackwardFilter(threads(), *m_workspace, dw, rounded(0, dy, d.outputSize()), rounded(1, x, d.inputSize()),
                              d);
}
void CpuBackend::doConv2dForwardFused(float* y, const float* x, const float* w, const float* bias, bool relu,
                                      const ConvDesc& d) {
    if (m_workspace->bf16) {
        if (bf16Skipped(d)) {
            Float32Call f32(*m_workspace);
            return cpu::conv2dForwardFused(threads(), *m_workspace, y, rounded(0, x, d.inputSize()),
                                           rounded(1, w, d.weightSize()), bias, relu, d);
        }
        if (bf16Winograd(d)) return cpu::winogradForward(threads(), *m_workspace, y, x, w, bias, relu, d);
        if (bf16Dnnl() && cpu::dnnlConv2dForwardFused(threads(), *m_workspace, y, x, w, bias, relu, d))
            return countBf16Conv();
        return cpu::conv2dForwardFused(threads(), *m_workspace, y, rounded(0, x, d.inputSize()),
                                       rounded(1, w, d.weightSize()), bias, relu, d);
    }
    if (computePrecision() != ComputePrecision::F32) return Backend::doConv2dForwardFused(y, x, w, bias, relu, d);
    cpu::conv2dForwardFused(threads(), *m_workspace, y, x, w, bias, relu, d);
}
void CpuBackend::doConv2dBackwardFused(float* dx, float* dw, float* dbias, const float* dy, const float* x,
                                       const float* w, const ConvDesc& d, bool overwriteDx) {
    if (m_workspace->bf16) {
        if (bf16Skipped(d)) {
            Float32Call f32(*m_workspace);
            return cpu::conv2dBackwardFused(threads(), *m_workspace, dx, dw, dbias, rounded(0, dy, d.outputSize()),
                                            dw ? rounded(1, x, d.inputSize()) : x,
                                            dx ? rounded(2, w, d.weightSize()) : w, d, overwriteDx);
        }
        if ((dx || dw) && bf16Winograd(d)) {
            // Winograd with bf16 products: the gradients from the float32 tensors as they are (the kernels round
            // the transformed operands), the bias's summed in float32 along the way.
            if (dw) cpu::winogradBackwardFilter(threads(), *m_workspace, dw, dbias, dy, x, d);
            if (dx) cpu::winogradBackwardData(threads(), *m_workspace, dx, dy, w, d, overwriteDx);
            if (!dbias || dw) return;
            dx = nullptr;
        } else if ((dx || dw) && cpu::winogradApplies(*m_workspace, d)) {
            // (STRATA_WINOGRAD_BF16=0) The gradients by Winograd on rounded copies: the same definition, and faster
            // than oneDNN's bf16 direct ones on this project's machines (bench_cpu_bf16, bench/RESULTS.md); the
            // bias's as below.
            const float* roundedDy = rounded(0, dy, d.outputSize());
            if (dw)
                cpu::winogradBackwardFilter(threads(), *m_workspace, dw, nullptr, roundedDy,
                                            rounded(1, x, d.inputSize()), d);
            if (dx)
                cpu::winogradBackwardData(threads(), *m_workspace, dx, roundedDy, rounded(2, w, d.weightSize()), d,
                                          overwriteDx);
            ++m_workspace->bf16WinogradBackward;
            if (!dbias) return;
            dx = dw = nullptr;
        }
        if (bf16Dnnl() &&
            cpu::dnnlConv2dBackwardFused(threads(), *m_workspace, dx, dw, dbias, dy, x, w, d, overwriteDx)) {
            if (dx || dw) countBf16Conv();
            return;
        }
        return cpu::conv2dBackwardFused(threads(), *m_workspace, dx, dw, dbias, rounded(0, dy, d.outputSize()),
                                        dw ? rounded(1, x, d.inputSize()) : x, dx ? rounded(2, w, d.weightSize()) : w,
                                        d, overwriteDx);
    }
    if (computePrecision() != ComputePrecision::F32)
        return Backend::doConv2dBackwardFused(dx, dw, dbias, dy, x, w, d, overwriteDx);
    cpu::conv2dBackwardFused(threads(), *m_workspace, dx, dw, dbias, dy, x, w, d, overwriteDx);
}
void CpuBackend::doPool2dForward(float* y, const float* x, const PoolDesc& d) {
    cpu::pool2dForward(threads(), y, x, d);
}
void CpuBackend::doPool2dBackward(float* dx, const float* dy, const float* x, const float*, const PoolDesc& d,
                                  bool overwriteDx) {
    cpu::pool2dBackward(threads(), dx, dy, x, d, overwriteDx);
}
void CpuBackend::doMaxPool2dReLUBackward(float* dx, const float* dy, const float* x, const float* y, const PoolDesc& d,
                                         bool overwriteDx) {
    if (cpu::maxPool2dReLUBackward(threads(), dx, dy, x, y, d, overwriteDx)) return;
    Backend::doMaxPool2dReLUBackward(dx, dy, x, y, d, overwriteDx);
}
void CpuBackend::doMeanPoolForward(float* y, const float* x, int outer, int len, int inner) {
    cpu::meanPoolForward(threads(), y, x, outer, len, inner);
}
void CpuBackend::doMeanPoolBackward(float* dx, const float* dy, int outer, int len, int inner) {
    cpu::meanPoolBackward(threads(), dx, dy, outer, len, inner);
}

void CpuBackend::doSequencePoolForward(float* y, const float* x, const float* keep, int batch, int len, int dim,
                                       PoolMode mode) {
    cpu::sequencePoolForward(threads(), y, x, keep, batch, len, dim, mode);
}
void CpuBackend::doSequencePoolBackward(float* dx, const float* dy, const float* x, const float* y, const float* keep,
                                        int batch, int len, int dim, PoolMode mode) {
    cpu::sequencePoolBackward(threads(), dx, dy, x, y, keep, batch, len, dim, mode);
}

// ---- activations and softmax -------------------------------------------------

void CpuBackend::doActivationForward(float* y, const float* x, int64_t n, Activation act, float alpha) {
    cpu::activationForward(threads(), y, x, n, act, alpha);
}
// Overwriting dx: ReLU writes in its own pass; the others zero dx first.
void CpuBackend::doActivationBackward(float* dx, const float* dy, const float* x, const float* y, int64_t n,
                                      Activation act, float alpha, bool overwriteDx) {
    if (overwriteDx && act == Activation::ReLU) return cpu::reluBackwardWrite(threads(), dx, dy, x ? x : y, n);
    if (overwriteDx && n > 0) doZero(dx, static_cast<size_t>(n) * sizeof(float));
    cpu::activationBackward(threads(), dx, dy, x, y, n, act, alpha);
}
void CpuBackend::doClipForward(float* y, const float* x, int64_t n, float lo, float hi) {
    cpu::clipForward(threads(), y, x, n, lo, hi);
}
void CpuBackend::doClipBackward(float* dx, const float* dy, const float* x, int64_t n, float lo, float hi,
                                bool overwriteDx) {
    if (overwriteDx && n > 0) doZero(dx, static_cast<size_t>(n) * sizeof(float));
    cpu::clipBackward(threads(), dx, dy, x, n, lo, hi);
}
void CpuBackend::doUpsample2dForward(float* y, const float* x, const UpsampleDesc& d) {
    cpu::upsample2dForward(threads(), y, x, d);
}
void CpuBackend::doUpsample2dBackward(float* dx, const float* dy, const UpsampleDesc& d, bool overwriteDx) {
    if (overwriteDx) doZero(dx, static_cast<size_t>(d.inputSize()) * sizeof(float));
    cpu::upsample2dBackward(threads(), dx, dy, d);
}
void CpuBackend::doSoftmaxForward(float* y, const float* x, int rows, int cols) {
    cpu::softmaxForward(threads(), y, x, rows, cols);
}
void CpuBackend::doSoftmaxBackward(float* dx, const float* dy, const float* y, int rows, int cols) {
    cpu::softmaxBackward(threads(), dx, dy, y, rows, cols);
}
void CpuBackend::doMaskedSoftmaxForward(float* y, const float* x, const float* keep, int groups, int rowsPerGroup,
                                        int cols) {
    cpu::maskedSoftmaxForward(threads(), y, x, keep, groups, rowsPerGroup, cols);
}

// ---- losses -------------------------------------------------------------------

void CpuBackend::doSoftmaxCrossEntropy(float* losses, float* dlogits, const float* logits, const int32_t* labels,
                                       int rows, int cols, float gradScale) {
    cpu::softmaxCrossEntropy(threads(), losses, dlogits, logits, labels, rows, cols, gradScale);
}
void CpuBackend::doMseLoss(float* losses, float* dpred, const float* pred, const float* target, int rows, int cols,
                           float gradScale) {
    cpu::mseLoss(threads(), losses, dpred, pred, target, rows, cols, gradScale);
}
void CpuBackend::doRobustLoss(float* losses, float* dpred, const float* pred, const float* target, int rows, int cols,
                              float delta, float gradScale) {
    cpu::robustLoss(threads(), losses, dpred, pred, target, rows, cols, delta, gradScale);
}
void CpuBackend::doBceWithLogits(float* losses, float* dlogits, const float* logits, const float* target, int rows,
                                 int cols, float gradScale) {
    cpu::bceWithLogits(threads(), losses, dlogits, logits, target, rows, cols, gradScale);
}
int64_t CpuBackend::doCountCorrect(const float* logits, const int32_t* labels, int rows, int cols) {
    return cpuref::countCorrect(logits, labels, rows, cols);
}

// ---- normalization ------------------------------------------------------------

void CpuBackend::doBatchNormForwardTraining(float* y, float* saveMean, float* saveInvStd, float* runningMean,
                                            float* runningVar, const float* x, const float* gamma, const float* beta,
                                            int n, int c, int inner, float momentum, float eps, bool relu, int block) {
    cpu::batchNormForwardTraining(threads(), y, saveMean, saveInvStd, runningMean, runningVar, x, gamma, beta, n, c,
                                  inner, momentum, eps, relu, block);
}
void CpuBackend::doBatchNormForwardInference(float* y, const float* x, const float* gamma, const float* beta,
                                             const float* runningMean, const float* runningVar, int n, int c, int inner,
                                             float eps, bool relu, int block) {
    cpu::batchNormForwardInference(threads(), y, x, gamma, beta, runningMean, runningVar, n, c, inner, eps, relu,
                                   block);
}
void CpuBackend::doBatchNormBackward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                                     const float* gamma, const float* saveMean, const float* saveInvStd, int n, int c,
                                     int inner, const float* reluOutput, bool overwriteDx, int block) {
    cpu::batchNormBackward(threads(), dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd, n, c, inner, reluOutput,
                           overwriteDx, block);
}
void CpuBackend::doLayerNormForward(float* y, float* mean, float* rstd, const float* x, const float* gamma,
                                    const float* beta, int rows, int cols, float eps) {
    cpu::layerNormForward(threads(), y, mean, rstd, x, gamma, beta, rows, cols, eps);
}
void CpuBackend::doLayerNormBackward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                                     const float* gamma, const float* mean, const float* rstd, int rows, int cols) {
    cpu::layerNormBackward(threads(), *m_workspace, dx, dgamma, dbeta, dy, x, gamma, mean, rstd, rows, cols);
}

// ---- dropout ------------------------------------------------------------------

void CpuBackend::doDropoutForward(float* y, const float* x, int64_t n, float p, uint64_t seed, uint64_t first) {
    cpu::dropoutForward(threads(), y, x, n, p, seed, first);
}
void CpuBackend::doDropoutBackward(float* dx, const float* dy, int64_t n, float p, uint64_t seed, uint64_t first) {
    cpu::dropoutBackward(threads(), dx, dy, n, p, seed, first);
}

// ---- embedding and data movement --------------------------------------------------

void CpuBackend::doEmbeddingForward(float* y, const float* table, const float* ids, int64_t count, int dim, int) {
    cpuref::embeddingForward(y, table, ids, count, dim);
}
void CpuBackend::doEmbeddingBackward(float* dtable, const float* dy, const float* ids, int64_t count, int dim, int) {
    cpuref::embeddingBackward(dtable, dy, ids, count, dim);
}
void CpuBackend::doCopyBlocks(float* dst, int64_t dstStride, const float* src, int64_t srcStride, int64_t blockLen,
                              int64_t count, bool accumulate) {
    cpu::copyBlocks(threads(), dst, dstStride, src, srcStride, blockLen, count, accumulate);
}
void CpuBackend::doReblock(float* dst, int dstBlock, const float* src, int srcBlock, int n, int c, int64_t inner,
                           bool accumulate) {
    cpu::reblock(threads(), dst, dstBlock, src, srcBlock, n, c, inner, accumulate);
}

// ---- reductions -----------------------------------------------------------------

double CpuBackend::doSum(const float* x, int64_t n) { return cpu::sum(threads(), x, n); }
double CpuBackend::doSumSquares(const float* x, int64_t n) { return cpu::sumSquares(threads(), x, n); }
bool CpuBackend::doAllFinite(const float* x, int64_t n) { return cpu::allFinite(threads(), x, n); }

// ---- optimizers -----------------------------------------------------------------

void CpuBackend::doSgdUpdate(float* w, float* velocity, const float* grad, int64_t n, const SgdParams& p) {
    cpu::sgdUpdate(threads(), w, velocity, grad, n, p);
}
void CpuBackend::doAdamUpdate(float* w, float* m, float* v, const float* grad, int64_t n, const AdamParams& p) {
    cpu::adamUpdate(threads(), w, m, v, grad, n, p);
}

}  // namespace strata
