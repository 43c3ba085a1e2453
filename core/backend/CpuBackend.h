// CpuBackend: the CPU implementation of Backend, and the reference every
// other backend is tested against.
//
// Two modes share one class:
//   - reference mode: plain, readable, single-threaded loops (double
//     accumulators for long sums). This is the ground truth of the test suite.
//   - fast mode (default): OpenBLAS GEMM, oneDNN or im2col+GEMM convolution, and
//     OpenMP-parallel element-wise/normalization/optimizer loops. Every fast
//     path is tested against the reference (tests/test_backend_ops.cpp).
// Memory is ordinary host memory, 64-byte aligned, with usage tracked.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/Backend.h"

namespace strata {

namespace cpu {
class Workspace;  // per-thread scratch buffers of the fast paths (CpuFast.cpp)
}

class CpuBackend : public Backend {
public:
    // threads <= 0: one per hardware thread. reference: start in reference mode.
    explicit CpuBackend(int threads = 0, bool reference = false);
    ~CpuBackend() override;
    CpuBackend(const CpuBackend&) = delete;
    CpuBackend& operator=(const CpuBackend&) = delete;

    void setThreads(int threads);  // <= 0: one per hardware thread
    int threads() const { return m_threads; }
    void setReferenceMode(bool reference) { m_reference = reference; }
    bool referenceMode() const { return m_reference; }
    // Fast-path convolutions through oneDNN (on by default when this build has it; otherwise
    // im2col + OpenBLAS). Shapes oneDNN cannot run use im2col either way.
    static bool oneDnnAvailable();
    void setOneDnn(bool on);
    bool oneDnn() const;

    // BF16 / F16: gemm and convolution inputs rounded into scratch copies (CpuPrecision.h).
    void setComputePrecision(ComputePrecision precision) override { m_precision = precision; }
    ComputePrecision computePrecision() const override { return m_precision; }

    std::string name() const override { return "cpu"; }
    Device device() const override { return Device::cpu(); }

    // ---- memory ----
    void* allocate(size_t bytes) override;
    void deallocate(void* ptr, size_t bytes) override;
    void copyFromHost(void* dst, const void* hostSrc, size_t bytes) override;
    void copyToHost(void* hostDst, const void* src, size_t bytes) override;
    void copy(void* dst, const void* src, size_t bytes) override;
    void synchronize() override {}
    size_t bytesInUse() const override { return m_bytesInUse.load(); }
    size_t peakBytes() const override { return m_peakBytes.load(); }

    // ---- element-wise ----
    void fill(float* y, float value, int64_t n) override;
    void zero(void* y, size_t bytes) override;
    void scale(float* y, float alpha, int64_t n) override;
    void axpy(float* y, float alpha, const float* x, int64_t n) override;
    void add(float* y, const float* a, const float* b, int64_t n) override;

    // ---- linear algebra ----
    void gemm(bool transA, bool transB, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
              int ldb, float beta, float* c, int ldc) override;
    void addBiasRows(float* y, const float* bias, int rows, int cols) override;
    void sumRows(float* dbias, const float* dy, int rows, int cols) override;
    void addBiasChannels(float* y, const float* bias, int n, int c, int inner) override;
    void sumChannels(float* dbias, const float* dy, int n, int c, int inner) override;

    // ---- convolution and pooling ----
    void conv2dForward(float* y, const float* x, const float* w, const ConvDesc& d) override;
    void conv2dBackwardData(float* dx, const float* dy, const float* w, const ConvDesc& d) override;
    void conv2dBackwardFilter(float* dw, const float* dy, const float* x, const ConvDesc& d) override;
    // Fused in fast mode with float32 compute; reference mode and bf16/fp16 run the composed default.
    void conv2dForwardFused(float* y, const float* x, const float* w, const float* bias, bool relu,
                            const ConvDesc& d) override;
    void conv2dBackwardFused(float* dx, float* dw, float* dbias, const float* dy, const float* x, const float* w,
                             const ConvDesc& d) override;
    void pool2dForward(float* y, const float* x, const PoolDesc& d) override;
    void pool2dBackward(float* dx, const float* dy, const float* x, const float* y, const PoolDesc& d) override;
    void maxPool2dReLUBackward(float* dx, const float* dy, const float* x, const float* y,
                               const PoolDesc& d) override;
    void meanPoolForward(float* y, const float* x, int outer, int len, int inner) override;
    void meanPoolBackward(float* dx, const float* dy, int outer, int len, int inner) override;

    // ---- activations and softmax ----
    // Backward reads x for ReLU/LeakyReLU/GELU and y for Sigmoid/Tanh; either may be null
    // when the other one determines the derivative (ReLU from y, Sigmoid/Tanh from x).
    void activationForward(float* y, const float* x, int64_t n, Activation act, float alpha) override;
    void activationBackward(float* dx, const float* dy, const float* x, const float* y, int64_t n, Activation act,
                            float alpha) override;
    void softmaxForward(float* y, const float* x, int rows, int cols) override;
    void softmaxBackward(float* dx, const float* dy, const float* y, int rows, int cols) override;

    // ---- losses ----
    // losses may also be null. A label outside [0, cols) throws BackendError naming the row.
    void softmaxCrossEntropy(float* losses, float* dlogits, const float* logits, const int32_t* labels, int rows,
                             int cols, float gradScale) override;
    void mseLoss(float* losses, float* dpred, const float* pred, const float* target, int rows, int cols,
                 float gradScale) override;
    // Per element: max(x,0) - x*t + log1p(exp(-|x|)); dlogits = (sigmoid(x) - t) / cols * gradScale.
    void bceWithLogits(float* losses, float* dlogits, const float* logits, const float* target, int rows, int cols,
                       float gradScale) override;
    int64_t countCorrect(const float* logits, const int32_t* labels, int rows, int cols) override;

    // ---- normalization ----
    // gamma/beta may be null (1 and 0); running stats may be null (not updated). Training needs
    // n*inner > 1 (the unbiased variance is undefined otherwise), as in PyTorch.
    void batchNormForwardTraining(float* y, float* saveMean, float* saveInvStd, float* runningMean, float* runningVar,
                                  const float* x, const float* gamma, const float* beta, int n, int c, int inner,
                                  float momentum, float eps) override;
    void batchNormForwardInference(float* y, const float* x, const float* gamma, const float* beta,
                                   const float* runningMean, const float* runningVar, int n, int c, int inner,
                                   float eps) override;
    void batchNormBackward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x, const float* gamma,
                           const float* saveMean, const float* saveInvStd, int n, int c, int inner) override;
    void layerNormForward(float* y, float* mean, float* rstd, const float* x, const float* gamma, const float* beta,
                          int rows, int cols, float eps) override;
    void layerNormBackward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                           const float* gamma, const float* mean, const float* rstd, int rows, int cols) override;

    // ---- dropout ----
    void dropoutForward(float* y, const float* x, int64_t n, float p, uint64_t seed) override;
    void dropoutBackward(float* dx, const float* dy, int64_t n, float p, uint64_t seed) override;

    // ---- embedding ----
    void embeddingForward(float* y, const float* table, const float* ids, int64_t count, int dim,
                          int vocab) override;
    void embeddingBackward(float* dtable, const float* dy, const float* ids, int64_t count, int dim,
                           int vocab) override;

    // ---- data movement ----
    void copyBlocks(float* dst, int64_t dstStride, const float* src, int64_t srcStride, int64_t blockLen,
                    int64_t count, bool accumulate) override;
    void gatherRows(void* dst, const void* src, int64_t srcRows, const int32_t* indices, int64_t count,
                    int64_t rowWords) override;

    // ---- reductions ----
    double sum(const float* x, int64_t n) override;
    double sumSquares(const float* x, int64_t n) override;
    bool allFinite(const float* x, int64_t n) override;

    // ---- optimizers ----
    void sgdUpdate(float* w, float* velocity, const float* grad, int64_t n, const SgdParams& p) override;
    void adamUpdate(float* w, float* m, float* v, const float* grad, int64_t n, const AdamParams& p) override;

private:
    int m_threads = 1;
    bool m_reference = false;
    std::atomic<size_t> m_bytesInUse{0};
    std::atomic<size_t> m_peakBytes{0};
    std::unique_ptr<cpu::Workspace> m_workspace;
    ComputePrecision m_precision = ComputePrecision::F32;
    std::vector<float> m_roundedA, m_roundedB;  // rounded operands in BF16 / F16
};

}  // namespace strata
