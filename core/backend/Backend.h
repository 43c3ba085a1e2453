// Backend: the seam between layers and hardware (see shared/DESIGN.md).
//
// Layers are written once against this interface. A backend owns memory
// (allocate, copy, synchronize) and provides the primitive float32 ops.
// Conventions, in the spirit of llm.c:
//   - arguments: outputs first, then inputs, then sizes;
//   - every pointer is a pointer into this backend's memory (device memory
//     on a GPU backend), except where a parameter says "host";
//   - layouts are row-major; images are NCHW;
//   - every backward op ACCUMULATES (+=) into its gradient outputs, so a
//     tensor used by several consumers simply receives several backward calls.
//     The Trainer zeroes gradients once per step.
// A backend that cannot run an op throws BackendError; it never falls back
// to another backend silently.
//
// The ops are non-virtual: each checks its arguments once, here in the seam
// (Backend.cpp: sizes, descriptors, pointers, and labels and ids wherever the
// backend's memory is host memory), then calls the backend's protected
// virtual of the same name with a "do" prefix (gemm -> doGemm), which may
// assume valid arguments. Every op is listed in BackendOps.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "core/tensor/Tensor.h"

namespace strata {

class BackendError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Thrown when the backend runs out of memory; says how many bytes were asked for.
class OutOfMemoryError : public BackendError {
public:
    OutOfMemoryError(const std::string& what, size_t bytes) : BackendError(what), m_bytes(bytes) {}
    size_t bytes() const { return m_bytes; }

private:
    size_t m_bytes;
};

enum class Activation { ReLU, LeakyReLU, GELU, Sigmoid, Tanh };

// Arithmetic precision of the matrix products, the same definition on every backend. Storage,
// activations and master weights stay float32. In BF16 / F16, gemm and the three convolutions (forward,
// backward-data, backward-filter) round each element of their two inputs to bfloat16 / IEEE binary16
// (round to nearest even; binary16 overflows to +-inf and keeps subnormals), multiply, and accumulate in
// float32; alpha, beta, C and the outputs are float32. Every other op is unchanged.
enum class ComputePrecision { F32, BF16, F16 };
// "fp32", "bf16", "fp16": the spelling of the project file's training.precision.
const char* computePrecisionName(ComputePrecision p);
// Accepts "fp32" (or "f32"), "bf16", "fp16"; throws std::invalid_argument naming the accepted values.
ComputePrecision parseComputePrecision(const std::string& text);

// 2-D convolution, NCHW input [N, C, H, W], weights [K, C/groups, R, S], output [N, K, OH, OW].
// srcBlock / dstBlock: the input (and its gradient) or the output (and its gradient) is stored blocked instead,
// "nChwBc" with B = the block: [N, C/B, H, W, B], B channels of one position adjacent (oneDNN's layout; C % B == 0).
// Only the fused ops take blocked tensors, and only in the block the backend names (activationBlock).
// weightsVersion: 0, the weights may change between calls (training); else an id that stays with these weights'
// values, never reused for others (Model::freezeWeights): a backend may keep a copy it prepared from them
// (oneDNN's reordered weights) and use it in later calls with the same id instead of the pointer's contents.
struct ConvDesc {
    int n = 1, c = 1, h = 1, w = 1;  // input
    int k = 1, r = 1, s = 1;         // output channels, kernel height, kernel width
    int strideH = 1, strideW = 1;
    int padH = 0, padW = 0;
    int dilationH = 1, dilationW = 1;
    int groups = 1;
    int srcBlock = 0, dstBlock = 0;  // 0: NCHW
    uint64_t weightsVersion = 0;
    int outH() const { return (h + 2 * padH - dilationH * (r - 1) - 1) / strideH + 1; }
    int outW() const { return (w + 2 * padW - dilationW * (s - 1) - 1) / strideW + 1; }
    // Element counts of x, w and y.
    int64_t inputSize() const { return int64_t(n) * c * h * w; }
    int64_t weightSize() const { return int64_t(k) * (c / groups) * r * s; }
    int64_t outputSize() const { return int64_t(n) * k * outH() * outW(); }
};

enum class PoolMode { Max, Average };

// 2-D pooling over NCHW. Average pooling divides by the number of in-bounds
// elements (padding excluded), as cuDNN's EXCLUDE_PADDING mode does.
// block: x, y and their gradients stored blocked (ConvDesc::srcBlock), in the backend's activationBlock; only
// 2x2, stride-2 max pooling without padding takes it.
struct PoolDesc {
    PoolMode mode = PoolMode::Max;
    int n = 1, c = 1, h = 1, w = 1;
    int block = 0;
    int kernelH = 2, kernelW = 2;
    int strideH = 2, strideW = 2;
    int padH = 0, padW = 0;
    int outH() const { return (h + 2 * padH - kernelH) / strideH + 1; }
    int outW() const { return (w + 2 * padW - kernelW) / strideW + 1; }
    // 2x2, stride-2 max pooling without padding (the case with fast paths, and the one that takes blocks).
    bool isPlain2x2Max() const {
        return mode == PoolMode::Max && kernelH == 2 && kernelW == 2 && strideH == 2 && strideW == 2 && padH == 0 &&
               padW == 0;
    }
};

struct SgdParams {
    float lr = 0.01f;
    float momentum = 0.0f;
    float weightDecay = 0.0f;
    bool nesterov = false;
};

struct AdamParams {
    float lr = 1e-3f;
    float beta1 = 0.9f;
    float beta2 = 0.999f;
    float eps = 1e-8f;
    float weightDecay = 0.0f;
    bool decoupled = false;  // true: AdamW (decay applied to weights, not gradients)
    int64_t step = 1;        // 1-based step for bias correction
};

// How a backend runs, fixed when it is made (BackendRegistry::create, a backend's constructor);
// core/train/BackendOptionsFor.h derives them from a project's training settings.
struct BackendOptions {
    // CPU worker threads; <= 0: one per hardware thread. A GPU backend ignores it.
    int threads = 0;
    // The same inputs give bit-identical results run to run (no atomics in reductions, deterministic
    // algorithms). The CPU backends are deterministic for a fixed thread count either way.
    bool deterministic = false;
    // See ComputePrecision. A backend that cannot compute a precision throws BackendError when made.
    ComputePrecision precision = ComputePrecision::F32;
    // Ops that read indices (labels, embedding ids, gathered rows) check them. Eager: a bad index throws
    // BackendError at the call. A backend that checks on the device may, with eager checks off, report it
    // at the next point where the host waits for the device (synchronize, copyToHost, an op with a host
    // result), still naming the op, instead of waiting at every such call. The CPU always checks at the call.
    bool eagerIndexChecks = true;
    // CUDA: float32 gemm and convolutions may use TF32 tensor cores. Unset: on, unless the environment
    // variable STRATA_CUDA_TF32 is "0" (the test suite sets it for its float32 tolerances).
    std::optional<bool> allowTf32;
};

class Backend {
public:
    virtual ~Backend() = default;
    Backend(const Backend&) = delete;
    Backend& operator=(const Backend&) = delete;

    std::string name() const { return m_name; }  // "cpu", "cpu-reference", "cuda"
    virtual Device device() const = 0;

    // How this backend was made (BackendOptions). deterministic() and eagerIndexChecks() say what it does:
    // true on a backend that always behaves so (the CPU's), whatever the options asked.
    ComputePrecision computePrecision() const { return m_precision; }
    bool deterministic() const { return m_deterministic; }
    bool eagerIndexChecks() const { return m_eagerIndexChecks; }
    // The channel block in which this backend's fused convolutions read and write activations fastest
    // (ConvDesc::srcBlock, dstBlock; Model's layout pass keeps such tensors blocked between layers), or 0:
    // NCHW only. The CPU backend with oneDNN: oneDNN's own block for float32 (16 with AVX-512, 8 with AVX2),
    // unless the environment variable STRATA_BLOCKED_LAYOUT is "0". Default: 0.
    virtual int activationBlock() const { return 0; }

    // ---- memory -----------------------------------------------------------
    virtual void* allocate(size_t bytes) = 0;  // throws OutOfMemoryError
    virtual void deallocate(void* ptr, size_t bytes) = 0;
    virtual void copyFromHost(void* dst, const void* hostSrc, size_t bytes) = 0;
    virtual void copyToHost(void* hostDst, const void* src, size_t bytes) = 0;
    virtual void copy(void* dst, const void* src, size_t bytes) = 0;  // within this backend
    virtual void synchronize() = 0;

    // Asynchronous upload for double-buffered batches. The data is visible to every op called after
    // uploadAsync returns, and hostSrc may be reused at once. The copy may overlap ops called
    // before this call, except those called before the PREVIOUS uploadAsync call, which it waits
    // for. So: keep two long-lived destination buffers and alternate; upload batch k+1 into one
    // after the ops of step k that read the other have been called. waitUpload blocks the host
    // until that copy is done (never needed for ordering with later ops). The default is
    // copyFromHost (synchronous on the CPU: no extra copy) and a ticket of 0.
    using UploadTicket = uint64_t;
    virtual UploadTicket uploadAsync(void* dst, const void* hostSrc, size_t bytes);
    virtual void waitUpload(UploadTicket /*ticket*/) {}

    // Bytes currently allocated and the peak since creation (0 if not tracked).
    virtual size_t bytesInUse() const { return 0; }
    virtual size_t peakBytes() const { return 0; }

    // Helpers built on the above.
    Tensor empty(const Shape& shape, DType dtype = DType::F32);
    Tensor zeros(const Shape& shape, DType dtype = DType::F32);
    Tensor fromHost(const Shape& shape, const float* hostData);
    void toHost(const Tensor& t, float* hostDst);

    // ---- element-wise -----------------------------------------------------
    void fill(float* y, float value, int64_t n);
    void zero(void* y, size_t bytes);
    void scale(float* y, float alpha, int64_t n);                   // y *= alpha
    void axpy(float* y, float alpha, const float* x, int64_t n);    // y += alpha * x
    void add(float* y, const float* a, const float* b, int64_t n);  // y = a + b
    // y = a * b element by element; y may be a or b (a pruning mask applied in place).
    void mul(float* y, const float* a, const float* b, int64_t n);

    // ---- linear algebra ---------------------------------------------------
    // C[M,N] = alpha * op(A) * op(B) + beta * C, row-major; op(A) is [M,K], op(B) is [K,N]. Each leading
    // dimension is at least the length of the stored rows (and 1). With beta == 0, C is not read.
    void gemm(bool transA, bool transB, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
              int ldb, float beta, float* c, int ldc);
    // `count` independent products, each as gemm: C_i = alpha * op(A_i) * op(B_i) + beta * C_i with
    // A_i = a + i * strideA, B_i = b + i * strideB, C_i = c + i * strideC (cuBLAS's strided-batched GEMM).
    // Strides are >= 0; the C_i must not overlap. Multi-head attention makes one call per head over the batch.
    void gemmStridedBatched(bool transA, bool transB, int m, int n, int k, float alpha, const float* a, int lda,
                            int64_t strideA, const float* b, int ldb, int64_t strideB, float beta, float* c, int ldc,
                            int64_t strideC, int count);
    // y[r, c] += bias[c] for a [rows, cols] matrix.
    void addBiasRows(float* y, const float* bias, int rows, int cols);
    // dbias[c] += sum_r dy[r, c].
    void sumRows(float* dbias, const float* dy, int rows, int cols);
    // y[n, c, i] += bias[c] for y of [n, c, inner].
    void addBiasChannels(float* y, const float* bias, int n, int c, int inner);
    // dbias[c] += sum_{n,i} dy[n, c, i].
    void sumChannels(float* dbias, const float* dy, int n, int c, int inner);

    // ---- convolution and pooling -------------------------------------------
    void conv2dForward(float* y, const float* x, const float* w, const ConvDesc& d);
    void conv2dBackwardData(float* dx, const float* dy, const float* w, const ConvDesc& d);
    void conv2dBackwardFilter(float* dw, const float* dy, const float* x, const ConvDesc& d);
    // A convolution layer's forward in one call: y = conv(x, w), plus bias[k] (bias may be null), then
    // ReLU in place when relu is true. The default runs conv2dForward, addBiasChannels and
    // activationForward; a backend may fuse them (the CPU does: bias and ReLU applied while the
    // output is still in cache). Results may differ from the separate ops by float rounding only.
    void conv2dForwardFused(float* y, const float* x, const float* w, const float* bias, bool relu, const ConvDesc& d);
    // A convolution layer's backward from one dy: dx += ..., dw += ..., dbias[k] += sum of dy over
    // n, h, w; any of the three may be null. The default runs conv2dBackwardData,
    // conv2dBackwardFilter and sumChannels; a backend may share work between them. overwriteDx: dx is
    // written (dx = ...), its old contents ignored, so it need not be zeroed first (the default zeroes it).
    void conv2dBackwardFused(float* dx, float* dw, float* dbias, const float* dy, const float* x, const float* w,
                             const ConvDesc& d, bool overwriteDx = false);
    void pool2dForward(float* y, const float* x, const PoolDesc& d);
    // Max pooling routes each output gradient to the first maximal input of its window. y, the forward
    // output, is required for average pooling (cuDNN's backward reads it) and ignored for max pooling.
    // overwriteDx (here and in maxPool2dReLUBackward): dx is written, every element (those no window routes a
    // gradient to get 0), its old contents ignored, so it need not be zeroed first.
    void pool2dBackward(float* dx, const float* dy, const float* x, const float* y, const PoolDesc& d,
                        bool overwriteDx = false);
    // Max pooling's backward followed by the backward of the ReLU that produced x: dx += routed dy
    // where x > 0 (y is the pooling's forward output), which is what pool2dBackward into a zeroed buffer
    // and then activationBackward (ReLU, gate x) into dx compute, in one pass. Max pooling only. The
    // default runs exactly those two ops through a temporary buffer; a backend may fuse them (the CPU
    // does for 2x2 windows).
    void maxPool2dReLUBackward(float* dx, const float* dy, const float* x, const float* y, const PoolDesc& d,
                               bool overwriteDx = false);
    // y[o, i] = mean_l x[o, l, i] for x of [outer, len, inner] (global average pool, sequence mean).
    void meanPoolForward(float* y, const float* x, int outer, int len, int inner);
    void meanPoolBackward(float* dx, const float* dy, int outer, int len, int inner);
    // Pooling over the sequence axis of x [batch, len, dim] to y [batch, dim] that counts only the positions
    // with keep[b * len + t] != 0 (a padding mask; token ids serve as one, id 0 being padding); keep may be
    // null: every position counts. Average: the mean of the counted positions; Max: their maximum. A sample
    // without a counted position gives 0 (and no gradient).
    void sequencePoolForward(float* y, const float* x, const float* keep, int batch, int len, int dim, PoolMode mode);
    // dx += y's gradient: spread evenly over the counted positions (Average), or routed to the first counted
    // position whose x equals y (Max; x and y required, and y must be sequencePoolForward's output).
    void sequencePoolBackward(float* dx, const float* dy, const float* x, const float* y, const float* keep, int batch,
                              int len, int dim, PoolMode mode);

    // ---- activations and softmax -------------------------------------------
    // alpha is the negative slope for LeakyReLU and ignored otherwise. GELU is the exact (erf) form.
    void activationForward(float* y, const float* x, int64_t n, Activation act, float alpha);
    // Reads x for ReLU/LeakyReLU/GELU and y for Sigmoid/Tanh; either may be null when the other one
    // determines the derivative (ReLU from y, Sigmoid/Tanh from x). overwriteDx: dx = ..., its old
    // contents ignored (else dx += ...).
    void activationBackward(float* dx, const float* dy, const float* x, const float* y, int64_t n, Activation act,
                            float alpha, bool overwriteDx = false);
    // Softmax over the last axis of [rows, cols].
    void softmaxForward(float* y, const float* x, int rows, int cols);
    void softmaxBackward(float* dx, const float* dy, const float* y, int rows, int cols);
    // Softmax over the last axis of [groups * rowsPerGroup, cols] in which column j of every row of group g
    // takes part only where keep[g * cols + j] != 0 (attention's padding mask over the keys, one group per
    // sample); the other columns get probability exactly 0, and a row without a kept column is all zeros.
    // Its backward is softmaxBackward: the masked columns have y == 0, so their gradient is 0.
    void maskedSoftmaxForward(float* y, const float* x, const float* keep, int groups, int rowsPerGroup, int cols);

    // ---- losses (fused; dlogits/dpred are WRITTEN, not accumulated; losses and gradients may be null) ----
    // losses[r] = -log softmax(logits[r])[labels[r]]; dlogits = (softmax - onehot) * gradScale.
    // labels is an int32 array in backend memory; a label outside [0, cols) throws BackendError naming
    // the row (when, eagerIndexChecks() says).
    void softmaxCrossEntropy(float* losses, float* dlogits, const float* logits, const int32_t* labels, int rows,
                             int cols, float gradScale);
    // losses[r] = sum_c (pred - target)^2 / cols; dpred = 2 (pred - target) / cols * gradScale.
    void mseLoss(float* losses, float* dpred, const float* pred, const float* target, int rows, int cols,
                 float gradScale);
    // Binary cross-entropy with logits, numerically stable; per element max(x,0) - x*t + log1p(exp(-|x|)),
    // losses[r] = mean over cols; dlogits = (sigmoid(x) - t) / cols * gradScale.
    void bceWithLogits(float* losses, float* dlogits, const float* logits, const float* target, int rows, int cols,
                       float gradScale);
    // Host result: rows whose argmax equals labels[r] (ties: first maximal index).
    int64_t countCorrect(const float* logits, const int32_t* labels, int rows, int cols);
    // A training step's metrics in one host result: lossSum = sum(losses[0..rows)) (as sum()) and
    // correct = countCorrect(logits, labels, rows, cols), or 0 when labels is null. Waiting for the
    // device once per step, after the step's other work has been called, lets an asynchronous
    // device run the whole step without stalls. The default calls sum and countCorrect.
    struct StepMetrics {
        double lossSum = 0;
        int64_t correct = 0;
    };
    StepMetrics stepMetrics(const float* losses, const float* logits, const int32_t* labels, int rows, int cols);

    // ---- normalization ------------------------------------------------------
    // Batch norm over x of [n, c, inner] per channel c. Training: uses batch statistics, writes
    // saveMean/saveInvStd [c], and updates running stats: r = (1-momentum) r + momentum * batch
    // (running variance uses the unbiased batch variance). gamma/beta may be null (1 and 0); the
    // running stats may be null together (not updated), and saveMean/saveInvStd together. Training
    // needs n*inner > 1 (the unbiased variance is undefined otherwise), as in PyTorch. relu: y = max(y, 0)
    // in the same pass (a ReLU fused after the normalization; y may then be x's own ReLU'd copy only).
    // block (all three ops): x, y, dy and dx stored blocked, [n, c/B, inner, B] (ConvDesc::srcBlock), in the
    // backend's activationBlock and with c % B == 0; a backend without a block refuses it.
    void batchNormForwardTraining(float* y, float* saveMean, float* saveInvStd, float* runningMean, float* runningVar,
                                  const float* x, const float* gamma, const float* beta, int n, int c, int inner,
                                  float momentum, float eps, bool relu = false, int block = 0);
    void batchNormForwardInference(float* y, const float* x, const float* gamma, const float* beta,
                                   const float* runningMean, const float* runningVar, int n, int c, int inner,
                                   float eps, bool relu = false, int block = 0);
    // Needs saveMean and saveInvStd; dx, dgamma and dbeta may be null. reluOutput (null: none): the output of
    // a ReLU fused after the normalization, dy being that ReLU's output gradient; dy is then taken as
    // dy * (reluOutput > 0), the ReLU's backward done in the same passes. overwriteDx: dx is written, its
    // old contents ignored (else added to).
    void batchNormBackward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x, const float* gamma,
                           const float* saveMean, const float* saveInvStd, int n, int c, int inner,
                           const float* reluOutput = nullptr, bool overwriteDx = false, int block = 0);
    // Layer norm over the last axis of [rows, cols]; mean/rstd are [rows] (may be null in the forward).
    void layerNormForward(float* y, float* mean, float* rstd, const float* x, const float* gamma, const float* beta,
                          int rows, int cols, float eps);
    void layerNormBackward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x, const float* gamma,
                           const float* mean, const float* rstd, int rows, int cols);

    // ---- dropout (counter-based RNG: element i is kept iff dropoutKeep(seed, first + i, p)) ----
    // `first`: the counter of element 0, so that a slice of a batch (one rank's shard of a data-parallel
    // step) draws the same mask as the whole batch would there.
    void dropoutForward(float* y, const float* x, int64_t n, float p, uint64_t seed, uint64_t first = 0);
    void dropoutBackward(float* dx, const float* dy, int64_t n, float p, uint64_t seed, uint64_t first = 0);

    // ---- embedding (indices are float32 holding integer ids in [0, vocab)) ----
    // A bad id throws BackendError naming it and the vocabulary size; on the CPU before anything is written.
    void embeddingForward(float* y, const float* table, const float* ids, int64_t count, int dim, int vocab);
    void embeddingBackward(float* dtable, const float* dy, const float* ids, int64_t count, int dim, int vocab);

    // ---- data movement ---------------------------------------------------------
    // For o < count, j < blockLen: dst[o*dstStride + j] (+)= src[o*srcStride + j]. Concat and its backward.
    void copyBlocks(float* dst, int64_t dstStride, const float* src, int64_t srcStride, int64_t blockLen, int64_t count,
                    bool accumulate);
    // dst (+)= src for an [n, c, inner] tensor between layouts: block 0 is NCHW, a block B > 0 "nChwBc" ([n, c/B,
    // inner, B], ConvDesc::srcBlock); c % B == 0. A layer that reads NCHW after a blocked one (Flatten) and its
    // backward. Any blocks on every backend (the blocked ops themselves take only activationBlock's).
    void reblock(float* dst, int dstBlock, const float* src, int srcBlock, int n, int c, int64_t inner,
                 bool accumulate);
    // Rows by index (a batch from a dataset held in backend memory): for i < count, row i of dst is row
    // indices[i] of src, rows of rowWords 4-byte words (float32 or int32 data alike). indices is int32 in
    // backend memory; each must be in [0, srcRows), else BackendError names it (a device backend may
    // report it as eagerIndexChecks says). The default copies row by row with copy().
    void gatherRows(void* dst, const void* src, int64_t srcRows, const int32_t* indices, int64_t count,
                    int64_t rowWords);

    // ---- reductions (host results) -------------------------------------------
    double sum(const float* x, int64_t n);
    double sumSquares(const float* x, int64_t n);  // NaN/Inf propagate
    bool allFinite(const float* x, int64_t n);

    // ---- fused optimizer updates ------------------------------------------------
    // SGD as in PyTorch: g' = g + wd*w; v = momentum*v + g'; step = nesterov ? g' + momentum*v : v;
    // w -= lr * step. velocity may be null when momentum == 0.
    void sgdUpdate(float* w, float* velocity, const float* grad, int64_t n, const SgdParams& p);
    // Adam / AdamW as in PyTorch.
    void adamUpdate(float* w, float* m, float* v, const float* grad, int64_t n, const AdamParams& p);

protected:
    // What a backend is, given by each one to this constructor.
    struct Traits {
        std::string name;                  // name()
        bool reducedPrecision = false;     // computes ComputePrecision::BF16 and F16; else refuses them
        bool alwaysDeterministic = false;  // bit-identical results whatever BackendOptions::deterministic says
        // Backend memory is host memory: the seam checks labels, ids and gathered indices on the host,
        // at the call, before the op runs (so a bad one leaves the outputs untouched).
        bool hostMemory = false;
    };
    // Throws BackendError when options.precision is reduced and traits.reducedPrecision is false.
    Backend(const Traits& traits, const BackendOptions& options);

    // The ops, called by the public ones above after their checks, with the same arguments (so they may
    // assume: sizes >= 0, valid descriptors, required pointers present, and on a host-memory backend
    // indices in range). Ops with a default compose other ops' do* functions.
    virtual void doFill(float* y, float value, int64_t n) = 0;
    virtual void doZero(void* y, size_t bytes) = 0;
    virtual void doScale(float* y, float alpha, int64_t n) = 0;
    virtual void doAxpy(float* y, float alpha, const float* x, int64_t n) = 0;
    virtual void doAdd(float* y, const float* a, const float* b, int64_t n) = 0;
    virtual void doMul(float* y, const float* a, const float* b, int64_t n) = 0;

    // Called only with m > 0 and n > 0.
    virtual void doGemm(bool transA, bool transB, int m, int n, int k, float alpha, const float* a, int lda,
                        const float* b, int ldb, float beta, float* c, int ldc) = 0;
    virtual void doGemmStridedBatched(bool transA, bool transB, int m, int n, int k, float alpha, const float* a,
                                      int lda, int64_t strideA, const float* b, int ldb, int64_t strideB, float beta,
                                      float* c, int ldc, int64_t strideC, int count) = 0;
    virtual void doAddBiasRows(float* y, const float* bias, int rows, int cols) = 0;
    virtual void doSumRows(float* dbias, const float* dy, int rows, int cols) = 0;
    virtual void doAddBiasChannels(float* y, const float* bias, int n, int c, int inner) = 0;
    virtual void doSumChannels(float* dbias, const float* dy, int n, int c, int inner) = 0;

    virtual void doConv2dForward(float* y, const float* x, const float* w, const ConvDesc& d) = 0;
    virtual void doConv2dBackwardData(float* dx, const float* dy, const float* w, const ConvDesc& d) = 0;
    virtual void doConv2dBackwardFilter(float* dw, const float* dy, const float* x, const ConvDesc& d) = 0;
    virtual void doConv2dForwardFused(float* y, const float* x, const float* w, const float* bias, bool relu,
                                      const ConvDesc& d);
    virtual void doConv2dBackwardFused(float* dx, float* dw, float* dbias, const float* dy, const float* x,
                                       const float* w, const ConvDesc& d, bool overwriteDx);
    virtual void doPool2dForward(float* y, const float* x, const PoolDesc& d) = 0;
    virtual void doPool2dBackward(float* dx, const float* dy, const float* x, const float* y, const PoolDesc& d,
                                  bool overwriteDx) = 0;
    // Called only with max pooling.
    virtual void doMaxPool2dReLUBackward(float* dx, const float* dy, const float* x, const float* y, const PoolDesc& d,
                                         bool overwriteDx);
    virtual void doMeanPoolForward(float* y, const float* x, int outer, int len, int inner) = 0;
    virtual void doMeanPoolBackward(float* dx, const float* dy, int outer, int len, int inner) = 0;
    virtual void doSequencePoolForward(float* y, const float* x, const float* keep, int batch, int len, int dim,
                                       PoolMode mode) = 0;
    virtual void doSequencePoolBackward(float* dx, const float* dy, const float* x, const float* y, const float* keep,
                                        int batch, int len, int dim, PoolMode mode) = 0;

    virtual void doActivationForward(float* y, const float* x, int64_t n, Activation act, float alpha) = 0;
    virtual void doActivationBackward(float* dx, const float* dy, const float* x, const float* y, int64_t n,
                                      Activation act, float alpha, bool overwriteDx) = 0;
    virtual void doSoftmaxForward(float* y, const float* x, int rows, int cols) = 0;
    virtual void doSoftmaxBackward(float* dx, const float* dy, const float* y, int rows, int cols) = 0;
    virtual void doMaskedSoftmaxForward(float* y, const float* x, const float* keep, int groups, int rowsPerGroup,
                                        int cols) = 0;

    virtual void doSoftmaxCrossEntropy(float* losses, float* dlogits, const float* logits, const int32_t* labels,
                                       int rows, int cols, float gradScale) = 0;
    virtual void doMseLoss(float* losses, float* dpred, const float* pred, const float* target, int rows, int cols,
                           float gradScale) = 0;
    virtual void doBceWithLogits(float* losses, float* dlogits, const float* logits, const float* target, int rows,
                                 int cols, float gradScale) = 0;
    // Called only with rows > 0.
    virtual int64_t doCountCorrect(const float* logits, const int32_t* labels, int rows, int cols) = 0;
    // Called only with rows > 0.
    virtual StepMetrics doStepMetrics(const float* losses, const float* logits, const int32_t* labels, int rows,
                                      int cols);

    virtual void doBatchNormForwardTraining(float* y, float* saveMean, float* saveInvStd, float* runningMean,
                                            float* runningVar, const float* x, const float* gamma, const float* beta,
                                            int n, int c, int inner, float momentum, float eps, bool relu,
                                            int block) = 0;
    virtual void doBatchNormForwardInference(float* y, const float* x, const float* gamma, const float* beta,
                                             const float* runningMean, const float* runningVar, int n, int c, int inner,
                                             float eps, bool relu, int block) = 0;
    virtual void doBatchNormBackward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                                     const float* gamma, const float* saveMean, const float* saveInvStd, int n, int c,
                                     int inner, const float* reluOutput, bool overwriteDx, int block) = 0;
    virtual void doLayerNormForward(float* y, float* mean, float* rstd, const float* x, const float* gamma,
                                    const float* beta, int rows, int cols, float eps) = 0;
    virtual void doLayerNormBackward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                                     const float* gamma, const float* mean, const float* rstd, int rows, int cols) = 0;

    virtual void doDropoutForward(float* y, const float* x, int64_t n, float p, uint64_t seed, uint64_t first) = 0;
    virtual void doDropoutBackward(float* dx, const float* dy, int64_t n, float p, uint64_t seed, uint64_t first) = 0;

    virtual void doEmbeddingForward(float* y, const float* table, const float* ids, int64_t count, int dim,
                                    int vocab) = 0;
    virtual void doEmbeddingBackward(float* dtable, const float* dy, const float* ids, int64_t count, int dim,
                                     int vocab) = 0;

    virtual void doCopyBlocks(float* dst, int64_t dstStride, const float* src, int64_t srcStride, int64_t blockLen,
                              int64_t count, bool accumulate) = 0;
    virtual void doReblock(float* dst, int dstBlock, const float* src, int srcBlock, int n, int c, int64_t inner,
                           bool accumulate) = 0;
    // Called only with count > 0 and rowWords > 0. The default reads the indices back, checks them and
    // copies row by row.
    virtual void doGatherRows(void* dst, const void* src, int64_t srcRows, const int32_t* indices, int64_t count,
                              int64_t rowWords);

    virtual double doSum(const float* x, int64_t n) = 0;
    virtual double doSumSquares(const float* x, int64_t n) = 0;
    virtual bool doAllFinite(const float* x, int64_t n) = 0;

    virtual void doSgdUpdate(float* w, float* velocity, const float* grad, int64_t n, const SgdParams& p) = 0;
    virtual void doAdamUpdate(float* w, float* m, float* v, const float* grad, int64_t n, const AdamParams& p) = 0;

private:
    std::string m_name;
    ComputePrecision m_precision;
    bool m_deterministic;
    bool m_eagerIndexChecks;
    bool m_hostMemory;
};

// The keep decision shared by every backend, so CPU and GPU drop the same elements.
// Element i is kept with probability 1-p; kept elements are scaled by 1/(1-p).
inline uint64_t dropoutHash(uint64_t seed, uint64_t i) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
inline bool dropoutKeep(uint64_t seed, uint64_t i, float p) {
    // 24 random bits -> uniform in [0, 1).
    const float u = static_cast<float>(dropoutHash(seed, i) >> 40) * (1.0f / 16777216.0f);
    return u >= p;
}

}  // namespace strata
