// CpuBackend: the CPU's fast paths. OpenBLAS GEMM, oneDNN or im2col+GEMM
// convolution, and OpenMP-parallel element-wise, normalization and optimizer
// loops (CpuFast.h). Every fast path is tested against CpuReferenceBackend,
// the plain loops (tests/test_backend_ops.cpp). The "cpu" device of the
// registry. Memory and the bf16 / fp16 rounding: CpuMemoryBackend.
#pragma once

#include <memory>

#include "core/backend/CpuMemoryBackend.h"

namespace strata {

namespace cpu {
class Workspace;  // per-thread scratch buffers of the fast paths (CpuFast.cpp)
}

class CpuBackend : public CpuMemoryBackend {
public:
    // options.threads <= 0: one per hardware thread.
    explicit CpuBackend(const BackendOptions& options = {});
    ~CpuBackend() override;

    // Fast-path convolutions through oneDNN (on by default when this build has it; otherwise
    // im2col + OpenBLAS). Shapes oneDNN cannot run use im2col either way.
    static bool oneDnnAvailable();
    void setOneDnn(bool on);
    bool oneDnn() const;
    // Winograd F(4x4, 3x3) for 3x3 stride-1 convolutions on blocked tensors (cpu::winogradApplies), where the CPU
    // runs it for the activation block (16 channels: AVX-512; 8: AVX2 and FMA); on by default there, unless
    // STRATA_WINOGRAD=0 (for comparisons). winogradRuns: whether this backend
    // runs this descriptor that way.
    static bool winogradAvailable();
    void setWinograd(bool on);
    bool winogradRuns(const ConvDesc& d) const;
    // oneDNN's block (cpu::dnnlPreferredBlock) in float32, unless STRATA_BLOCKED_LAYOUT=0; the same with
    // oneDNN switched off (setOneDnn), whose im2col path takes blocked tensors through NCHW copies.
    int activationBlock() const override;

protected:
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
    // Fused with float32 compute; bf16 / fp16 run Backend's composition (rounded operands).
    void doConv2dForwardFused(float* y, const float* x, const float* w, const float* bias, bool relu,
                              const ConvDesc& d) override;
    void doConv2dBackwardFused(float* dx, float* dw, float* dbias, const float* dy, const float* x, const float* w,
                               const ConvDesc& d, bool overwriteDx) override;
    void doPool2dForward(float* y, const float* x, const PoolDesc& d) override;
    void doPool2dBackward(float* dx, const float* dy, const float* x, const float* y, const PoolDesc& d,
                          bool overwriteDx) override;
    // One pass for 2x2 stride-2 windows without padding; Backend's composition for other shapes.
    void doMaxPool2dReLUBackward(float* dx, const float* dy, const float* x, const float* y, const PoolDesc& d,
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

private:
    std::unique_ptr<cpu::Workspace> m_workspace;
};

}  // namespace strata
