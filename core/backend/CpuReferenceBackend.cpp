// CpuReferenceBackend: each op is its CpuReference.h loop, after the operand rounding of bf16 / fp16.
#include "core/backend/CpuReferenceBackend.h"

#include <algorithm>
#include <cstring>

#include "core/backend/CpuReference.h"

namespace strata {

CpuReferenceBackend::CpuReferenceBackend(const BackendOptions& options)
    : CpuMemoryBackend("cpu-reference", options, 1) {}

CpuReferenceBackend::CpuReferenceBackend(const Traits& traits, const BackendOptions& options)
    : CpuMemoryBackend(traits, options, 1) {}

void CpuReferenceBackend::doFill(float* y, float value, int64_t n) { cpuref::fill(y, value, n); }
void CpuReferenceBackend::doZero(void* y, size_t bytes) {
    if (bytes) std::memset(y, 0, bytes);
}
void CpuReferenceBackend::doScale(float* y, float alpha, int64_t n) { cpuref::scale(y, alpha, n); }
void CpuReferenceBackend::doAxpy(float* y, float alpha, const float* x, int64_t n) { cpuref::axpy(y, alpha, x, n); }
void CpuReferenceBackend::doAdd(float* y, const float* a, const float* b, int64_t n) { cpuref::add(y, a, b, n); }
void CpuReferenceBackend::doMul(float* y, const float* a, const float* b, int64_t n) { cpuref::mul(y, a, b, n); }

void CpuReferenceBackend::doGemm(bool transA, bool transB, int m, int n, int k, float alpha, const float* a, int lda,
                                 const float* b, int ldb, float beta, float* c, int ldc) {
    roundGemmOperands(transA, transB, m, n, k, a, lda, b, ldb);
    cpuref::gemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
// Product by product through doGemm, so that bf16 / fp16 round each product's operands as gemm does.
void CpuReferenceBackend::doGemmStridedBatched(bool transA, bool transB, int m, int n, int k, float alpha,
                                               const float* a, int lda, int64_t strideA, const float* b, int ldb,
                                               int64_t strideB, float beta, float* c, int ldc, int64_t strideC,
                                               int count) {
    for (int i = 0; i < count; ++i)
        doGemm(transA, transB, m, n, k, alpha, a + i * strideA, lda, b + i * strideB, ldb, beta, c + i * strideC, ldc);
}
void CpuReferenceBackend::doAddBiasRows(float* y, const float* bias, int rows, int cols) {
    cpuref::addBiasRows(y, bias, rows, cols);
}
void CpuReferenceBackend::doSumRows(float* dbias, const float* dy, int rows, int cols) {
    cpuref::sumRows(dbias, dy, rows, cols);
}
void CpuReferenceBackend::doAddBiasChannels(float* y, const float* bias, int n, int c, int inner) {
    cpuref::addBiasChannels(y, bias, n, c, inner);
}
void CpuReferenceBackend::doSumChannels(float* dbias, const float* dy, int n, int c, int inner) {
    cpuref::sumChannels(dbias, dy, n, c, inner);
}

void CpuReferenceBackend::doConv2dForward(float* y, const float* x, const float* w, const ConvDesc& d) {
    cpuref::conv2dForward(y, rounded(0, x, d.inputSize()), rounded(1, w, d.weightSize()), d);
}
void CpuReferenceBackend::doConv2dBackwardData(float* dx, const float* dy, const float* w, const ConvDesc& d) {
    cpuref::conv2dBackwardData(dx, rounded(0, dy, d.outputSize()), rounded(1, w, d.weightSize()), d);
}
void CpuReferenceBackend::doConv2dBackwardFilter(float* dw, const float* dy, const float* x, const ConvDesc& d) {
    cpuref::conv2dBackwardFilter(dw, rounded(0, dy, d.outputSize()), rounded(1, x, d.inputSize()), d);
}
void CpuReferenceBackend::doPool2dForward(float* y, const float* x, const PoolDesc& d) {
    cpuref::pool2dForward(y, x, d);
}
void CpuReferenceBackend::doPool2dBackward(float* dx, const float* dy, const float* x, const float*, const PoolDesc& d,
                                           bool overwriteDx) {
    if (overwriteDx) std::fill_n(dx, static_cast<size_t>(d.n) * d.c * d.h * d.w, 0.0f);
    cpuref::pool2dBackward(dx, dy, x, d);
}
void CpuReferenceBackend::doMeanPoolForward(float* y, const float* x, int outer, int len, int inner) {
    cpuref::meanPoolForward(y, x, outer, len, inner);
}
void CpuReferenceBackend::doMeanPoolBackward(float* dx, const float* dy, int outer, int len, int inner) {
    cpuref::meanPoolBackward(dx, dy, outer, len, inner);
}

void CpuReferenceBackend::doSequencePoolForward(float* y, const float* x, const float* keep, int batch, int len,
                                                int dim, PoolMode mode) {
    cpuref::sequencePoolForward(y, x, keep, batch, len, dim, mode);
}
void CpuReferenceBackend::doSequencePoolBackward(float* dx, const float* dy, const float* x, const float* y,
                                                 const float* keep, int batch, int len, int dim, PoolMode mode) {
    cpuref::sequencePoolBackward(dx, dy, x, y, keep, batch, len, dim, mode);
}

void CpuReferenceBackend::doActivationForward(float* y, const float* x, int64_t n, Activation act, float alpha) {
    cpuref::activationForward(y, x, n, act, alpha);
}
void CpuReferenceBackend::doActivationBackward(float* dx, const float* dy, const float* x, const float* y, int64_t n,
                                               Activation act, float alpha, bool overwriteDx) {
    if (overwriteDx) std::fill_n(dx, n, 0.0f);
    cpuref::activationBackward(dx, dy, x, y, n, act, alpha);
}
void CpuReferenceBackend::doClipForward(float* y, const float* x, int64_t n, float lo, float hi) {
    cpuref::clipForward(y, x, n, lo, hi);
}
void CpuReferenceBackend::doClipBackward(float* dx, const float* dy, const float* x, int64_t n, float lo, float hi,
                                         bool overwriteDx) {
    if (overwriteDx) std::fill_n(dx, n, 0.0f);
    cpuref::clipBackward(dx, dy, x, n, lo, hi);
}
void CpuReferenceBackend::doUpsample2dForward(float* y, const float* x, const UpsampleDesc& d) {
    cpuref::upsample2dForward(y, x, d);
}
void CpuReferenceBackend::doUpsample2dBackward(float* dx, const float* dy, const UpsampleDesc& d, bool overwriteDx) {
    if (overwriteDx) std::fill_n(dx, d.inputSize(), 0.0f);
    cpuref::upsample2dBackward(dx, dy, d);
}
void CpuReferenceBackend::doSoftmaxForward(float* y, const float* x, int rows, int cols) {
    cpuref::softmaxForward(y, x, rows, cols);
}
void CpuReferenceBackend::doMaskedSoftmaxForward(float* y, const float* x, const float* keep, int groups,
                                                 int rowsPerGroup, int cols) {
    cpuref::maskedSoftmaxForward(y, x, keep, groups, rowsPerGroup, cols);
}
void CpuReferenceBackend::doSoftmaxBackward(float* dx, const float* dy, const float* y, int rows, int cols) {
    cpuref::softmaxBackward(dx, dy, y, rows, cols);
}

void CpuReferenceBackend::doSoftmaxCrossEntropy(float* losses, float* dlogits, const float* logits,
                                                const int32_t* labels, int rows, int cols, float gradScale) {
    cpuref::softmaxCrossEntropy(losses, dlogits, logits, labels, rows, cols, gradScale);
}
void CpuReferenceBackend::doMseLoss(float* losses, float* dpred, const float* pred, const float* target, int rows,
                                    int cols, float gradScale) {
    cpuref::mseLoss(losses, dpred, pred, target, rows, cols, gradScale);
}
void CpuReferenceBackend::doRobustLoss(float* losses, float* dpred, const float* pred, const float* target, int rows,
                                       int cols, float delta, float gradScale) {
    cpuref::robustLoss(losses, dpred, pred, target, rows, cols, delta, gradScale);
}
void CpuReferenceBackend::doBceWithLogits(float* losses, float* dlogits, const float* logits, const float* target,
                                          int rows, int cols, float gradScale) {
    cpuref::bceWithLogits(losses, dlogits, logits, target, rows, cols, gradScale);
}
int64_t CpuReferenceBackend::doCountCorrect(const float* logits, const int32_t* labels, int rows, int cols) {
    return cpuref::countCorrect(logits, labels, rows, cols);
}

void CpuReferenceBackend::doBatchNormForwardTraining(float* y, float* saveMean, float* saveInvStd, float* runningMean,
                                                     float* runningVar, const float* x, const float* gamma,
                                                     const float* beta, int n, int c, int inner, float momentum,
                                                     float eps, bool relu, int /*block: 0, the seam refuses others*/) {
    cpuref::batchNormForwardTraining(y, saveMean, saveInvStd, runningMean, runningVar, x, gamma, beta, n, c, inner,
                                     momentum, eps, relu);
}
void CpuReferenceBackend::doBatchNormForwardInference(float* y, const float* x, const float* gamma, const float* beta,
                                                      const float* runningMean, const float* runningVar, int n, int c,
                                                      int inner, float eps, bool relu,
                                                      int /*block: 0, the seam refuses others*/) {
    cpuref::batchNormForwardInference(y, x, gamma, beta, runningMean, runningVar, n, c, inner, eps, relu);
}
void CpuReferenceBackend::doBatchNormBackward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                                              const float* gamma, const float* saveMean, const float* saveInvStd, int n,
                                              int c, int inner, const float* reluOutput, bool overwriteDx,
                                              int /*block: 0, the seam refuses others*/) {
    if (dx && overwriteDx) std::fill_n(dx, static_cast<size_t>(n) * c * inner, 0.0f);
    cpuref::batchNormBackward(dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd, n, c, inner, reluOutput);
}
void CpuReferenceBackend::doLayerNormForward(float* y, float* mean, float* rstd, const float* x, const float* gamma,
                                             const float* beta, int rows, int cols, float eps) {
    cpuref::layerNormForward(y, mean, rstd, x, gamma, beta, rows, cols, eps);
}
void CpuReferenceBackend::doLayerNormBackward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                                              const float* gamma, const float* mean, const float* rstd, int rows,
                                              int cols) {
    cpuref::layerNormBackward(dx, dgamma, dbeta, dy, x, gamma, mean, rstd, rows, cols);
}

void CpuReferenceBackend::doDropoutForward(float* y, const float* x, int64_t n, float p, uint64_t seed,
                                           uint64_t first) {
    cpuref::dropoutForward(y, x, n, p, seed, first);
}
void CpuReferenceBackend::doDropoutBackward(float* dx, const float* dy, int64_t n, float p, uint64_t seed,
                                            uint64_t first) {
    cpuref::dropoutBackward(dx, dy, n, p, seed, first);
}

void CpuReferenceBackend::doEmbeddingForward(float* y, const float* table, const float* ids, int64_t count, int dim,
                                             int) {
    cpuref::embeddingForward(y, table, ids, count, dim);
}
void CpuReferenceBackend::doEmbeddingBackward(float* dtable, const float* dy, const float* ids, int64_t count, int dim,
                                              int) {
    cpuref::embeddingBackward(dtable, dy, ids, count, dim);
}

void CpuReferenceBackend::doCopyBlocks(float* dst, int64_t dstStride, const float* src, int64_t srcStride,
                                       int64_t blockLen, int64_t count, bool accumulate) {
    cpuref::copyBlocks(dst, dstStride, src, srcStride, blockLen, count, accumulate);
}
void CpuReferenceBackend::doReblock(float* dst, int dstBlock, const float* src, int srcBlock, int n, int c,
                                    int64_t inner, bool accumulate) {
    cpuref::reblock(dst, dstBlock, src, srcBlock, n, c, inner, accumulate);
}

double CpuReferenceBackend::doSum(const float* x, int64_t n) { return cpuref::sum(x, n); }
double CpuReferenceBackend::doSumSquares(const float* x, int64_t n) { return cpuref::sumSquares(x, n); }
bool CpuReferenceBackend::doAllFinite(const float* x, int64_t n) { return cpuref::allFinite(x, n); }

void CpuReferenceBackend::doSgdUpdate(float* w, float* velocity, const float* grad, int64_t n, const SgdParams& p) {
    cpuref::sgdUpdate(w, velocity, grad, n, p);
}
void CpuReferenceBackend::doAdamUpdate(float* w, float* m, float* v, const float* grad, int64_t n,
                                       const AdamParams& p) {
    cpuref::adamUpdate(w, m, v, grad, n, p);
}

}  // namespace strata
