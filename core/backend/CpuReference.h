// The reference loops of CpuReferenceBackend: plain, single-threaded, readable.
// They define what every op computes; the fast paths (CpuFast.h) and the GPU
// backend are tested against them. Internal to core/backend.
//
// Arguments are valid here: the Backend seam (Backend.cpp) has checked sizes,
// descriptors, pointers and every label, id and row index.
#pragma once

#include <cstdint>

#include "core/backend/Backend.h"

namespace strata::cpuref {

void fill(float* y, float value, int64_t n);
void scale(float* y, float alpha, int64_t n);
void axpy(float* y, float alpha, const float* x, int64_t n);
void add(float* y, const float* a, const float* b, int64_t n);
void mul(float* y, const float* a, const float* b, int64_t n);

void gemm(bool transA, bool transB, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
          float beta, float* c, int ldc);
void addBiasRows(float* y, const float* bias, int rows, int cols);
void sumRows(float* dbias, const float* dy, int rows, int cols);
void addBiasChannels(float* y, const float* bias, int n, int c, int inner);
void sumChannels(float* dbias, const float* dy, int n, int c, int inner);

void conv2dForward(float* y, const float* x, const float* w, const ConvDesc& d);
void conv2dBackwardData(float* dx, const float* dy, const float* w, const ConvDesc& d);
void conv2dBackwardFilter(float* dw, const float* dy, const float* x, const ConvDesc& d);
void pool2dForward(float* y, const float* x, const PoolDesc& d);
void pool2dBackward(float* dx, const float* dy, const float* x, const PoolDesc& d);
void meanPoolForward(float* y, const float* x, int outer, int len, int inner);
void meanPoolBackward(float* dx, const float* dy, int outer, int len, int inner);
void sequencePoolForward(float* y, const float* x, const float* keep, int batch, int len, int dim, PoolMode mode);
void sequencePoolBackward(float* dx, const float* dy, const float* x, const float* y, const float* keep, int batch,
                          int len, int dim, PoolMode mode);

void activationForward(float* y, const float* x, int64_t n, Activation act, float alpha);
void activationBackward(float* dx, const float* dy, const float* x, const float* y, int64_t n, Activation act,
                        float alpha);
void clipForward(float* y, const float* x, int64_t n, float lo, float hi);
void clipBackward(float* dx, const float* dy, const float* x, int64_t n, float lo, float hi);
// Where output index dst of an upsampled axis (in -> out, by `scale`) reads: source i0 with weight 1 - frac and
// i1 with weight frac (nearest: i0 == i1, frac 0). Shared by the CPU paths.
struct UpsampleTap {
    int i0, i1;
    float frac;
};
UpsampleTap upsampleTap(int dst, int in, int out, int scale, bool bilinear, bool alignCorners);
void upsample2dForward(float* y, const float* x, const UpsampleDesc& d);
void upsample2dBackward(float* dx, const float* dy, const UpsampleDesc& d);
void softmaxForward(float* y, const float* x, int rows, int cols);
void softmaxBackward(float* dx, const float* dy, const float* y, int rows, int cols);
void maskedSoftmaxForward(float* y, const float* x, const float* keep, int groups, int rowsPerGroup, int cols);

void softmaxCrossEntropy(float* losses, float* dlogits, const float* logits, const int32_t* labels, int rows, int cols,
                         float gradScale);
void mseLoss(float* losses, float* dpred, const float* pred, const float* target, int rows, int cols, float gradScale);
void robustLoss(float* losses, float* dpred, const float* pred, const float* target, int rows, int cols, float delta,
                float gradScale);
void bceWithLogits(float* losses, float* dlogits, const float* logits, const float* target, int rows, int cols,
                   float gradScale);
int64_t countCorrect(const float* logits, const int32_t* labels, int rows, int cols);

void batchNormForwardTraining(float* y, float* saveMean, float* saveInvStd, float* runningMean, float* runningVar,
                              const float* x, const float* gamma, const float* beta, int n, int c, int inner,
                              float momentum, float eps, bool relu);
void batchNormForwardInference(float* y, const float* x, const float* gamma, const float* beta,
                               const float* runningMean, const float* runningVar, int n, int c, int inner, float eps,
                               bool relu);
void batchNormBackward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x, const float* gamma,
                       const float* saveMean, const float* saveInvStd, int n, int c, int inner,
                       const float* reluOutput);
void layerNormForward(float* y, float* mean, float* rstd, const float* x, const float* gamma, const float* beta,
                      int rows, int cols, float eps);
void layerNormBackward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x, const float* gamma,
                       const float* mean, const float* rstd, int rows, int cols);

void dropoutForward(float* y, const float* x, int64_t n, float p, uint64_t seed, uint64_t first = 0);
void dropoutBackward(float* dx, const float* dy, int64_t n, float p, uint64_t seed, uint64_t first = 0);

// CpuBackend runs embeddingForward, embeddingBackward and gatherRows as they are (no faster path).
void embeddingForward(float* y, const float* table, const float* ids, int64_t count, int dim);
void embeddingBackward(float* dtable, const float* dy, const float* ids, int64_t count, int dim);
void reblock(float* dst, int dstBlock, const float* src, int srcBlock, int n, int c, int64_t inner, bool accumulate);
void copyBlocks(float* dst, int64_t dstStride, const float* src, int64_t srcStride, int64_t blockLen, int64_t count,
                bool accumulate);
void gatherRows(void* dst, const void* src, const int32_t* indices, int64_t count, int64_t rowWords);
// Double accumulators, in index order.
double sum(const float* x, int64_t n);
double sumSquares(const float* x, int64_t n);
bool allFinite(const float* x, int64_t n);

void sgdUpdate(float* w, float* velocity, const float* grad, int64_t n, const SgdParams& p);
void adamUpdate(float* w, float* m, float* v, const float* grad, int64_t n, const AdamParams& p);

// Scalar helpers shared with the fast paths so both compute identical element values.
float geluForward(float x);
float geluDerivative(float x);
// Scale of the kept elements, 1/(1-p); 0 when p >= 1 (everything dropped).
float dropoutScale(float p);

}  // namespace strata::cpuref
