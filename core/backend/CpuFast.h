// Fast paths of CpuBackend: OpenBLAS GEMM, im2col+GEMM convolution and
// OpenMP-parallel loops. Each function computes what its namesake in
// CpuReference.h computes (within float rounding; many are bit-identical
// because they run the reference loop on disjoint chunks) and is tested
// against it in tests/test_backend_ops.cpp. Internal to core/backend.
//
// Threading: only OpenMP threads run in parallel. OpenBLAS (or oneDNN) is kept at one
// thread and large GEMMs are split across OpenMP threads instead, so two
// thread pools never spin against each other on a small machine. Work is
// split statically and partial sums are combined in thread order, so results
// are bit-identical from run to run for a fixed thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "core/backend/Backend.h"

namespace strata::cpu {

struct DnnlCache;

// Scratch memory reused across calls (im2col columns, per-thread partial
// gradients), grown on demand and never shrunk, so steady-state training does
// not allocate. prepare() must be called outside parallel regions; slot()
// is then safe from any thread.
class Workspace {
public:
    Workspace() = default;
    ~Workspace();
    Workspace(const Workspace&) = delete;
    Workspace& operator=(const Workspace&) = delete;

    // Ensures `count` slots of at least `floats` floats each, starting at slot `first`.
    void prepare(int first, int count, size_t floats);
    float* slot(int index) const { return m_blocks[static_cast<size_t>(index)].ptr; }

    // oneDNN convolution plans (CpuDnnl.cpp), created on first use; null without oneDNN.
    bool useOneDnn = false;
    struct DnnlCache* dnnl = nullptr;
    // Native bf16 (CpuBf16.h): oneDNN's convolutions take bf16 inputs and give float32 results, and GEMMs run
    // bf16 matmuls kept in bf16Cache.
    bool bf16 = false;
    struct Bf16Cache* bf16Cache = nullptr;
    // Calls that ran as bf16 oneDNN primitives (GEMM products, convolutions), for the tests to see them run.
    int64_t bf16Gemms = 0, bf16Convs = 0, bf16WinogradBackward = 0;
    // NCHW copies of blocked tensors for the convolutions' im2col path (CpuConv.cpp), by role.
    std::vector<float> plain[3];
    // Winograd convolutions (CpuWinograd.cpp): on where the CPU runs them; the transformed weights of this
    // call, and those of frozen weights by (ConvDesc::weightsVersion, direction).
    bool useWinograd = true;
    std::vector<float> winogradWeights;
    std::map<uint64_t, std::vector<float>> winogradFrozen;
    // bf16 Winograd (with bf16): the 36 products per tile multiply bf16 roundings of the transformed tiles and
    // weights with float32 sums (AVX512-BF16's vdpbf16ps), where the CPU has it (winogradBf16Available); the
    // weights' transform in that form, and the calls that ran it.
    bool winogradBf16 = false;
    std::vector<uint16_t> winogradWeightsBf16;
    int64_t bf16WinogradRuns = 0;
    // Convolutions with one output channel run by CpuConvNarrow.cpp (narrowConvApplies), and how many calls ran
    // there, for the tests to see them run.
    bool useNarrowConv = true;
    int64_t narrowConvs = 0;
    std::vector<double> narrowSums;  // the filter gradient's per-thread sums

private:
    struct Block {
        float* ptr = nullptr;
        size_t floats = 0;
    };
    std::vector<Block> m_blocks;
};

// Keeps OpenBLAS on the calling thread (called once; every BLAS call of CpuBackend goes through here first).
void blasSingleThreaded();

// One GEMM on the calling thread: oneDNN's sgemm when useOneDnn (and this build has oneDNN), else
// OpenBLAS. Returns false when oneDNN reports an error (callers inside parallel regions cannot throw).
bool sgemmOnThisThread(bool useOneDnn, bool transA, bool transB, int m, int n, int k, float alpha, const float* a,
                       int lda, const float* b, int ldb, float beta, float* c, int ldc);
// A GEMM split across `threads` OpenMP threads (blocks of 16 rows or columns), each part on one thread.
void gemm(int threads, bool useOneDnn, bool transA, bool transB, int m, int n, int k, float alpha, const float* a,
          int lda, const float* b, int ldb, float beta, float* c, int ldc);
// The products of a strided batch spread over the threads, each on one thread; a batch smaller than the thread
// count runs product by product, each split as gemm splits it.
void gemmStridedBatched(int threads, bool useOneDnn, bool transA, bool transB, int m, int n, int k, float alpha,
                        const float* a, int lda, int64_t strideA, const float* b, int ldb, int64_t strideB, float beta,
                        float* c, int ldc, int64_t strideC, int count);

// ---- element-wise and bias ----
void fill(int threads, float* y, float value, int64_t n);
void scale(int threads, float* y, float alpha, int64_t n);
void axpy(int threads, float* y, float alpha, const float* x, int64_t n);
void add(int threads, float* y, const float* a, const float* b, int64_t n);
void mul(int threads, float* y, const float* a, const float* b, int64_t n);
void addBiasRows(int threads, float* y, const float* bias, int rows, int cols);
void sumRows(int threads, float* dbias, const float* dy, int rows, int cols);
void addBiasChannels(int threads, float* y, const float* bias, int n, int c, int inner);
void sumChannels(int threads, float* dbias, const float* dy, int n, int c, int inner);
void copyBlocks(int threads, float* dst, int64_t dstStride, const float* src, int64_t srcStride, int64_t blockLen,
                int64_t count, bool accumulate);
double sum(int threads, const float* x, int64_t n);
double sumSquares(int threads, const float* x, int64_t n);
bool allFinite(int threads, const float* x, int64_t n);

// ---- convolution (CpuConv.cpp, CpuDnnl.cpp) and pooling ----
// True when this build has oneDNN (CMake option STRATA_ONEDNN and libdnnl found).
bool oneDnnAvailable();
void destroyDnnlCache(DnnlCache* cache);
// The channel block oneDNN picks for float32 activations on this CPU (16 with AVX-512, 8 with AVX2), or 0
// (no oneDNN, or a plain layout): Backend::activationBlock.
int dnnlPreferredBlock();
// dst = src (accumulate: dst += src) between NCHW (block 0) and nChwBc layouts of an [n, c, hw] tensor.
void reblock(int threads, float* dst, int dstBlock, const float* src, int srcBlock, int n, int c, int64_t hw,
             bool accumulate);
// oneDNN convolutions; return false when oneDNN cannot take this descriptor (the caller then uses im2col).
bool dnnlConv2dForward(int threads, Workspace& ws, float* y, const float* x, const float* w, const ConvDesc& d);
bool dnnlConv2dBackwardData(int threads, Workspace& ws, float* dx, const float* dy, const float* w, const ConvDesc& d);
bool dnnlConv2dBackwardFilter(int threads, Workspace& ws, float* dw, const float* dy, const float* x,
                              const ConvDesc& d);
void conv2dForward(int threads, Workspace& ws, float* y, const float* x, const float* w, const ConvDesc& d);
// Winograd F(4x4, 3x3) (CpuWinograd.cpp): 3x3 stride-1 convolutions without groups or dilation, padding 0 to 2,
// channel counts in whole blocks, input and output in 16-channel blocks with AVX-512 or 8-channel ones with AVX2
// and FMA (winogradApplies). In bf16 (Workspace::bf16) they multiply in bf16 where Workspace::winogradBf16,
// else CpuBackend calls them on rounded copies.
// The forward writes y (with bias and ReLU when given); the backward adds the gradient to dx or overwrites it.
bool winogradAvailable(int block);  // whether this CPU runs the kernels for this block (16: AVX-512; 8: AVX2)
bool winogradApplies(const Workspace& ws, const ConvDesc& d);
// Whether this CPU has the bf16 products' kernel (AVX-512 with AVX512-BF16): Workspace::winogradBf16.
bool winogradBf16Available();
void winogradForward(int threads, Workspace& ws, float* y, const float* x, const float* w, const float* bias, bool relu,
                     const ConvDesc& d);
void winogradBackwardData(int threads, Workspace& ws, float* dx, const float* dy, const float* w, const ConvDesc& d,
                          bool overwrite);
// Adds the weights' gradient to dw and, when dbias is not null, the bias's to dbias.
void winogradBackwardFilter(int threads, Workspace& ws, float* dw, float* dbias, const float* dy, const float* x,
                            const ConvDesc& d);
// One output channel, stride 1, no groups or dilation, NCHW (CpuConvNarrow.cpp): direct loops over the image rows,
// where im2col + GEMM and oneDNN's blocked kernels are matrix-vector products. The forward writes y (with bias
// and ReLU when given); the data gradient adds to dx or overwrites it; the filter gradient adds to dw (and dbias).
bool narrowConvApplies(const Workspace& ws, const ConvDesc& d);
void narrowConvForward(int threads, Workspace& ws, float* y, const float* x, const float* w, const float* bias,
                       bool relu, const ConvDesc& d);
void narrowConvBackwardData(int threads, Workspace& ws, float* dx, const float* dy, const float* w, const ConvDesc& d,
                            bool overwrite);
void narrowConvBackwardFilter(int threads, Workspace& ws, float* dw, float* dbias, const float* dy, const float* x,
                              const ConvDesc& d);
// Backend::conv2dForwardFused / conv2dBackwardFused: oneDNN with bias and a ReLU post-op, or im2col with the
// bias and ReLU applied to each image's output block right after its GEMM.
bool dnnlConv2dForwardFused(int threads, Workspace& ws, float* y, const float* x, const float* w, const float* bias,
                            bool relu, const ConvDesc& d);
bool dnnlConv2dBackwardFused(int threads, Workspace& ws, float* dx, float* dw, float* dbias, const float* dy,
                             const float* x, const float* w, const ConvDesc& d, bool overwriteDx);
void conv2dForwardFused(int threads, Workspace& ws, float* y, const float* x, const float* w, const float* bias,
                        bool relu, const ConvDesc& d);
void conv2dBackwardFused(int threads, Workspace& ws, float* dx, float* dw, float* dbias, const float* dy,
                         const float* x, const float* w, const ConvDesc& d, bool overwriteDx);
void conv2dBackwardData(int threads, Workspace& ws, float* dx, const float* dy, const float* w, const ConvDesc& d);
void conv2dBackwardFilter(int threads, Workspace& ws, float* dw, const float* dy, const float* x, const ConvDesc& d);
void pool2dForward(int threads, float* y, const float* x, const PoolDesc& d);
// overwrite: dx written whole (Backend::pool2dBackward's overwriteDx).
void pool2dBackward(int threads, float* dx, const float* dy, const float* x, const PoolDesc& d, bool overwrite = false);
// Backend::maxPool2dReLUBackward for 2x2 stride-2 windows without padding; false for other shapes (dx untouched).
// y is the pooling's forward output (the window maxima).
bool maxPool2dReLUBackward(int threads, float* dx, const float* dy, const float* x, const float* y, const PoolDesc& d,
                           bool overwrite = false);
void meanPoolForward(int threads, float* y, const float* x, int outer, int len, int inner);
void meanPoolBackward(int threads, float* dx, const float* dy, int outer, int len, int inner);
void sequencePoolForward(int threads, float* y, const float* x, const float* keep, int batch, int len, int dim,
                         PoolMode mode);
void sequencePoolBackward(int threads, float* dx, const float* dy, const float* x, const float* y, const float* keep,
                          int batch, int len, int dim, PoolMode mode);

// ---- activations, softmax, losses ----
void activationForward(int threads, float* y, const float* x, int64_t n, Activation act, float alpha);
// dx = dy where gate > 0, else 0 (a ReLU's backward that writes dx; gate: its input or its output).
void reluBackwardWrite(int threads, float* dx, const float* dy, const float* gate, int64_t n);
void activationBackward(int threads, float* dx, const float* dy, const float* x, const float* y, int64_t n,
                        Activation act, float alpha);
void clipForward(int threads, float* y, const float* x, int64_t n, float lo, float hi);
void clipBackward(int threads, float* dx, const float* dy, const float* x, int64_t n, float lo, float hi);
void upsample2dForward(int threads, float* y, const float* x, const UpsampleDesc& d);
void upsample2dBackward(int threads, float* dx, const float* dy, const UpsampleDesc& d);
void softmaxForward(int threads, float* y, const float* x, int rows, int cols);
void softmaxBackward(int threads, float* dx, const float* dy, const float* y, int rows, int cols);
void maskedSoftmaxForward(int threads, float* y, const float* x, const float* keep, int groups, int rowsPerGroup,
                          int cols);
void softmaxCrossEntropy(int threads, float* losses, float* dlogits, const float* logits, const int32_t* labels,
                         int rows, int cols, float gradScale);
void mseLoss(int threads, float* losses, float* dpred, const float* pred, const float* target, int rows, int cols,
             float gradScale);
void robustLoss(int threads, float* losses, float* dpred, const float* pred, const float* target, int rows, int cols,
                float delta, float gradScale);
void bceWithLogits(int threads, float* losses, float* dlogits, const float* logits, const float* target, int rows,
                   int cols, float gradScale);

// ---- normalization ----
void batchNormForwardTraining(int threads, float* y, float* saveMean, float* saveInvStd, float* runningMean,
                              float* runningVar, const float* x, const float* gamma, const float* beta, int n, int c,
                              int inner, float momentum, float eps, bool relu, int block = 0);
void batchNormForwardInference(int threads, float* y, const float* x, const float* gamma, const float* beta,
                               const float* runningMean, const float* runningVar, int n, int c, int inner, float eps,
                               bool relu, int block = 0);
void batchNormBackward(int threads, float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                       const float* gamma, const float* saveMean, const float* saveInvStd, int n, int c, int inner,
                       const float* reluOutput, bool overwriteDx, int block = 0);
void layerNormForward(int threads, float* y, float* mean, float* rstd, const float* x, const float* gamma,
                      const float* beta, int rows, int cols, float eps);
void layerNormBackward(int threads, Workspace& ws, float* dx, float* dgamma, float* dbeta, const float* dy,
                       const float* x, const float* gamma, const float* mean, const float* rstd, int rows, int cols);

// ---- dropout, optimizers ----
void dropoutForward(int threads, float* y, const float* x, int64_t n, float p, uint64_t seed, uint64_t first);
void dropoutBackward(int threads, float* dx, const float* dy, int64_t n, float p, uint64_t seed, uint64_t first);
void sgdUpdate(int threads, float* w, float* velocity, const float* grad, int64_t n, const SgdParams& p);
void adamUpdate(int threads, float* w, float* m, float* v, const float* grad, int64_t n, const AdamParams& p);

}  // namespace strata::cpu
