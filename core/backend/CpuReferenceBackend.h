// CpuReferenceBackend: the plain, single-threaded loops of CpuReference.h
// (double accumulators for long sums), the ground truth of the test suite.
// Every other backend, CpuBackend's fast paths included, is tested against
// it (tests/test_backend_ops.cpp). Not a device of the registry: tests make it.
#pragma once

#include "core/backend/CpuMemoryBackend.h"

namespace strata {

class CpuReferenceBackend : public CpuMemoryBackend {
public:
    // options.threads is ignored: the reference runs on the calling thread.
    explicit CpuReferenceBackend(const BackendOptions& options = {});

protected:
    // The same loops with other traits (a test's backend without reduced precision).
    CpuReferenceBackend(const Traits& traits, const BackendOptions& options);

    void doFill(float* y, float value, int64_t n) override;
    void doScale(float* y, float alpha, int64_t n) override;
    void doAxpy(float* y, float alpha, const float* x, int64_t n) override;
    void doAdd(float* y, const float* a, const float* b, int64_t n) override;
    void doMul(float* y, const float* a, const float* b, int64_t n) override;

    void doGemm(bool transA, bool transB, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                int ldb, float beta, float* c, int ldc) override;
    void doGemmStridedBatched(bool transA, bool transB, int m, int n, int k, float alpha, const float* a, int lda,
                              int64_t strideA, const float* b, int ldb, int64_t strideB, float beta, float* c, int ldc,
                              int64_t strideC, int count) override;
    void doAddBiasRows(float* y, const float* bias, int rows, int cols) override;
    void doSumRows(float* dbias, const float* dy, int rows, int cols) override;
    void doAddBiasChannels(float* y, const float* bias, int n, int c, int inner) override;
    void doSumChannels(float* dbias, const float* dy, int n, int c, int inner) override;

    void doConv2dForward(float* y, const float* x, const float* w, const ConvDesc& d) override;
    void doConv2dBackwardData(float* dx, const float* dy, const float* w, const ConvDesc& d) override;
    void doConv2dBackwardFilter(float* dw, const float* dy, const float* x, const ConvDesc& d) override;
    void doPool2dForward(float* y, const float* x, const PoolDesc& d) override;
    void doPool2dBackward(float* dx, const float* dy, const float* x, const float* y, const PoolDesc& d,
                          bool overwriteDx) override;
    void doMeanPoolForward(float* y, const float* x, int outer, int len, int inner) override;
    void doMeanPoolBackward(float* dx, const float* dy, int outer, int len, int inner) override;
    void doSequencePoolForward(float* y, const float* x, const float* keep, int batch, int len, int dim,
                               PoolMode mode) override;
    void doSequencePoolBackward(float* dx, const float* dy, const float* x, const float* y, const float* keep,
                                int batch, int len, int dim, PoolMode mode) override;

    void doActivationForward(float* y, const float* x, int64_t n, Activation act, float alpha) override;
    void doActivationBackward(float* dx, const float* dy, const float* x, const float* y, int64_t n, Activation act,
                              float alpha, bool overwriteDx) override;
    void doSoftmaxForward(float* y, const float* x, int rows, int cols) override;
    void doSoftmaxBackward(float* dx, const float* dy, const float* y, int rows, int cols) override;
    void doMaskedSoftmaxForward(float* y, const float* x, const float* keep, int groups, int rowsPerGroup,
                                int cols) override;

    void doSoftmaxCrossEntropy(float* losses, float* dlogits, const float* logits, const int32_t* labels, int rows,
                               int cols, float gradScale) override;
    void doMseLoss(float* losses, float* dpred, const float* pred, const float* target, int rows, int cols,
                   float gradScale) override;
    void doBceWithLogits(float* losses, float* dlogits, const float* logits, const float* target, int rows, int cols,
                         float gradScale) override;
    int64_t doCountCorrect(const float* logits, const int32_t* labels, int rows, int cols) override;

    void doBatchNormForwardTraining(float* y, float* saveMean, float* saveInvStd, float* runningMean, float* runningVar,
                                    const float* x, const float* gamma, const float* beta, int n, int c, int inner,
                                    float momentum, float eps, bool relu, int block) override;
    void doBatchNormForwardInference(float* y, const float* x, const float* gamma, const float* beta,
                                     const float* runningMean, const float* runningVar, int n, int c, int inner,
                                     float eps, bool relu, int block) override;
    void doBatchNormBackward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                             const float* gamma, const float* saveMean, const float* saveInvStd, int n, int c,
                             int inner, const float* reluOutput, bool overwriteDx, int block) override;
    void doLayerNormForward(float* y, float* mean, float* rstd, const float* x, const float* gamma, const float* beta,
                            int rows, int cols, float eps) override;
    void doLayerNormBackward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                             const float* gamma, const float* mean, const float* rstd, int rows, int cols) override;

    void doDropoutForward(float* y, const float* x, int64_t n, float p, uint64_t seed, uint64_t first) override;
    void doDropoutBackward(float* dx, const float* dy, int64_t n, float p, uint64_t seed, uint64_t first) override;

    void doEmbeddingForward(float* y, const float* table, const float* ids, int64_t count, int dim, int vocab) override;
    void doEmbeddingBackward(float* dtable, const float* dy, const float* ids, int64_t count, int dim,
                             int vocab) override;

    void doReblock(float* dst, int dstBlock, const float* src, int srcBlock, int n, int c, int64_t inner,
                   bool accumulate) override;
    void doCopyBlocks(float* dst, int64_t dstStride, const float* src, int64_t srcStride, int64_t blockLen,
                      int64_t count, bool accumulate) override;
    void doGatherRows(void* dst, const void* src, int64_t srcRows, const int32_t* indices, int64_t count,
                      int64_t rowWords) override;

    double doSum(const float* x, int64_t n) override;
    double doSumSquares(const float* x, int64_t n) override;
    bool doAllFinite(const float* x, int64_t n) override;

    void doSgdUpdate(float* w, float* velocity, const float* grad, int64_t n, const SgdParams& p) override;
    void doAdamUpdate(float* w, float* m, float* v, const float* grad, int64_t n, const AdamParams& p) override;
};

}  // namespace strata
