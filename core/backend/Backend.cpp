// The Backend seam: every op's argument checks, once for all backends, then the backend's do* virtual;
// and the default compositions of the fused and host-result ops. The checks are O(1) on sizes and
// descriptors, plus the host index checks of host-memory backends (O(rows), as before).
#include "core/backend/Backend.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/backend/BackendChecks.h"
#include "core/backend/BackendOps.h"

namespace strata {

namespace {

[[noreturn, gnu::noinline]] void fail(BackendOp op, const std::string& what) {
    throw BackendError(std::string(backendOpName(op)) + ": " + what);
}

[[noreturn, gnu::noinline]] void failNegative(BackendOp op, const char* what, int64_t value) {
    fail(op, std::string(what) + " is " + std::to_string(value) + "; sizes must be >= 0");
}

[[noreturn, gnu::noinline]] void failNull(BackendOp op, const char* what) {
    fail(op, std::string(what) + " must not be null");
}

inline void size(BackendOp op, const char* what, int64_t value) {
    if (value < 0) [[unlikely]]
        failNegative(op, what, value);
}

inline void pointer(BackendOp op, const char* what, const void* p) {
    if (!p) [[unlikely]]
        failNull(op, what);
}

inline void atLeastOneColumn(BackendOp op, int cols) {
    if (cols < 1) [[unlikely]]
        fail(op, "needs at least one column, got " + std::to_string(cols));
}

void checkConv(BackendOp op, const ConvDesc& d, int block = 0) {
    if ((d.srcBlock != 0 && d.srcBlock != block) || (d.dstBlock != 0 && d.dstBlock != block)) [[unlikely]]
        fail(op, "blocked layout " + std::to_string(d.srcBlock ? d.srcBlock : d.dstBlock) +
                     (block ? " (this backend's block is " + std::to_string(block) + ")"
                            : std::string(" (this op, on this backend, takes NCHW only)")));
    if ((d.srcBlock && d.c % d.srcBlock != 0) || (d.dstBlock && d.k % d.dstBlock != 0)) [[unlikely]]
        fail(op, "blocked layout needs channel counts divisible by the block");
    if (d.n < 1 || d.c < 1 || d.h < 1 || d.w < 1 || d.k < 1 || d.r < 1 || d.s < 1 || d.strideH < 1 || d.strideW < 1 ||
        d.dilationH < 1 || d.dilationW < 1 || d.groups < 1 || d.padH < 0 || d.padW < 0) [[unlikely]]
        fail(op, "invalid descriptor (sizes, strides, dilations and groups must be >= 1, padding >= 0)");
    if (d.c % d.groups != 0 || d.k % d.groups != 0) [[unlikely]]
        fail(op, std::to_string(d.c) + " input and " + std::to_string(d.k) +
                     " output channels must both be divisible by " + std::to_string(d.groups) + " groups");
    if (d.outH() < 1 || d.outW() < 1) [[unlikely]]
        fail(op, "a " + std::to_string(d.r) + "x" + std::to_string(d.s) + " kernel does not fit a " +
                     std::to_string(d.h) + "x" + std::to_string(d.w) + " input with this padding and dilation");
}

// A normalization's channel block: 0, or the backend's own block dividing c.
void checkNormBlock(BackendOp op, int block, int c, int backendBlock) {
    if (block != 0 && (block != backendBlock || c % block != 0)) [[unlikely]]
        fail(op, "blocked layout " + std::to_string(block) + " needs the backend's block (" +
                     std::to_string(backendBlock) + ") and channels divisible by it (c = " + std::to_string(c) + ")");
}

void checkPool(BackendOp op, const PoolDesc& d, int block) {
    if (d.block != 0 && (d.block != block || d.c % d.block != 0 || !d.isPlain2x2Max())) [[unlikely]]
        fail(op, "blocked layout " + std::to_string(d.block) +
                     " needs 2x2 stride-2 max pooling without padding, channels divisible by the block, and the "
                     "backend's block (" +
                     std::to_string(block) + ")");
    if (d.n < 1 || d.c < 1 || d.h < 1 || d.w < 1 || d.kernelH < 1 || d.kernelW < 1 || d.strideH < 1 || d.strideW < 1 ||
        d.padH < 0 || d.padW < 0) [[unlikely]]
        fail(op, "invalid descriptor (sizes, kernel and strides must be >= 1, padding >= 0)");
    // A window made of padding only would have no maximum and no average.
    if (d.padH >= d.kernelH || d.padW >= d.kernelW) [[unlikely]]
        fail(op, "padding must be smaller than the kernel");
    if (d.outH() < 1 || d.outW() < 1) [[unlikely]]
        fail(op, "a " + std::to_string(d.kernelH) + "x" + std::to_string(d.kernelW) + " window does not fit a " +
                     std::to_string(d.h) + "x" + std::to_string(d.w) + " input");
}

void checkClipBounds(BackendOp op, float lo, float hi) {
    if (!(lo <= hi)) [[unlikely]]
        fail(op, "bounds " + std::to_string(lo) + " and " + std::to_string(hi) +
                     " are not in order (lo must be <= hi, neither NaN)");
}

void checkUpsample(BackendOp op, const UpsampleDesc& d) {
    if (d.n < 1 || d.c < 1 || d.h < 1 || d.w < 1 || d.scaleH < 1 || d.scaleW < 1) [[unlikely]]
        fail(op, "invalid descriptor (sizes and scales must be >= 1)");
    constexpr int64_t kMaxSide = std::numeric_limits<int>::max();
    if (int64_t(d.h) * d.scaleH > kMaxSide || int64_t(d.w) * d.scaleW > kMaxSide) [[unlikely]]
        fail(op, "the output's height or width does not fit an int");
    if (d.alignCorners && !d.bilinear) [[unlikely]]
        fail(op, "alignCorners applies to bilinear upsampling only");
}

// A row-major operand stored as `rows` rows of `cols` used elements needs ld >= max(1, cols).
inline void leadingDimension(BackendOp op, const char* name, int ld, int cols, const char* matrix) {
    if (ld < 1 || ld < cols) [[unlikely]]
        fail(op, std::string(name) + " " + std::to_string(ld) + " is less than the " + std::to_string(cols) +
                     " elements of a row of " + matrix + " (and 1)");
}

inline void dropoutProbability(BackendOp op, float p) {
    if (!(p >= 0.0f && p <= 1.0f)) [[unlikely]]
        fail(op, "probability " + std::to_string(p) + " not in [0, 1]");
}

}  // namespace

const char* computePrecisionName(ComputePrecision p) {
    switch (p) {
        case ComputePrecision::BF16: return "bf16";
        case ComputePrecision::F16: return "fp16";
        case ComputePrecision::F32: break;
    }
    return "fp32";
}

ComputePrecision parseComputePrecision(const std::string& text) {
    if (text == "fp32" || text == "f32") return ComputePrecision::F32;
    if (text == "bf16") return ComputePrecision::BF16;
    if (text == "fp16") return ComputePrecision::F16;
    throw std::invalid_argument("unknown precision '" + text + "' (expected fp32, bf16 or fp16)");
}

Backend::Backend(const Traits& traits, const BackendOptions& options)
    : m_name(traits.name),
      m_precision(options.precision),
      m_deterministic(options.deterministic || traits.alwaysDeterministic),
      m_eagerIndexChecks(options.eagerIndexChecks || traits.hostMemory),
      m_hostMemory(traits.hostMemory) {
    if (options.precision != ComputePrecision::F32 && !traits.reducedPrecision)
        throw BackendError("the " + traits.name + " backend cannot compute gemm and convolutions in " +
                           computePrecisionName(options.precision) + "; use fp32");
}

// The products' clock (setProductClock): a product op's start, and its time added at its end. Not on an error:
// an op that throws adds nothing.
std::chrono::steady_clock::time_point Backend::productStart() {
    if (m_productMs) synchronize();
    return std::chrono::steady_clock::now();
}

void Backend::productEnd(std::chrono::steady_clock::time_point start) {
    if (!m_productMs) return;
    synchronize();
    *m_productMs += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

Backend::UploadTicket Backend::uploadAsync(void* dst, const void* hostSrc, size_t bytes) {
    copyFromHost(dst, hostSrc, bytes);
    return 0;
}

Tensor Backend::empty(const Shape& shape, DType dtype) {
    const size_t bytes = static_cast<size_t>(shape.numel()) * dtypeSize(dtype);
    void* p = allocate(bytes == 0 ? 4 : bytes);
    const auto release = [](Backend* owner, void* ptr, size_t size) { owner->deallocate(ptr, size); };
    return Tensor(shape, dtype, std::make_shared<Storage>(this, device(), p, bytes == 0 ? 4 : bytes, release));
}

Tensor Backend::zeros(const Shape& shape, DType dtype) {
    Tensor t = empty(shape, dtype);
    zero(t.raw(), t.bytes());
    return t;
}

Tensor Backend::fromHost(const Shape& shape, const float* hostData) {
    Tensor t = empty(shape, DType::F32);
    copyFromHost(t.raw(), hostData, t.bytes());
    return t;
}

void Backend::toHost(const Tensor& t, float* hostDst) { copyToHost(hostDst, t.raw(), t.bytes()); }

// ---- element-wise ---------------------------------------------------------------

void Backend::fill(float* y, float value, int64_t n) {
    constexpr BackendOp op = BackendOp::Fill;
    size(op, "n", n);
    if (n > 0) pointer(op, "y", y);
    doFill(y, value, n);
}

void Backend::zero(void* y, size_t bytes) {
    if (bytes > 0) pointer(BackendOp::Zero, "y", y);
    doZero(y, bytes);
}

void Backend::scale(float* y, float alpha, int64_t n) {
    constexpr BackendOp op = BackendOp::Scale;
    size(op, "n", n);
    if (n > 0) pointer(op, "y", y);
    doScale(y, alpha, n);
}

void Backend::axpy(float* y, float alpha, const float* x, int64_t n) {
    constexpr BackendOp op = BackendOp::Axpy;
    size(op, "n", n);
    if (n > 0) {
        pointer(op, "y", y);
        pointer(op, "x", x);
    }
    doAxpy(y, alpha, x, n);
}

void Backend::add(float* y, const float* a, const float* b, int64_t n) {
    constexpr BackendOp op = BackendOp::Add;
    size(op, "n", n);
    if (n > 0) {
        pointer(op, "y", y);
        pointer(op, "a", a);
        pointer(op, "b", b);
    }
    doAdd(y, a, b, n);
}

void Backend::mul(float* y, const float* a, const float* b, int64_t n) {
    constexpr BackendOp op = BackendOp::Mul;
    size(op, "n", n);
    if (n > 0) {
        pointer(op, "y", y);
        pointer(op, "a", a);
        pointer(op, "b", b);
    }
    doMul(y, a, b, n);
}

// ---- linear algebra -----------------------------------------------------------------

void Backend::gemm(bool transA, bool transB, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                   int ldb, float beta, float* c, int ldc) {
    constexpr BackendOp op = BackendOp::Gemm;
    if (m < 0 || n < 0 || k < 0) [[unlikely]]
        fail(op,
             "negative size (m " + std::to_string(m) + ", n " + std::to_string(n) + ", k " + std::to_string(k) + ")");
    if (m == 0 || n == 0) return;
    leadingDimension(op, "lda", lda, transA ? m : k, "A");
    leadingDimension(op, "ldb", ldb, transB ? k : n, "B");
    leadingDimension(op, "ldc", ldc, n, "C");
    pointer(op, "c", c);
    if (k > 0) {
        pointer(op, "a", a);
        pointer(op, "b", b);
    }
    const auto started = productStart();
    doGemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    productEnd(started);
}

void Backend::gemmStridedBatched(bool transA, bool transB, int m, int n, int k, float alpha, const float* a, int lda,
                                 int64_t strideA, const float* b, int ldb, int64_t strideB, float beta, float* c,
                                 int ldc, int64_t strideC, int count) {
    constexpr BackendOp op = BackendOp::GemmStridedBatched;
    if (m < 0 || n < 0 || k < 0) [[unlikely]]
        fail(op,
             "negative size (m " + std::to_string(m) + ", n " + std::to_string(n) + ", k " + std::to_string(k) + ")");
    size(op, "count", count);
    size(op, "strideA", strideA);
    size(op, "strideB", strideB);
    size(op, "strideC", strideC);
    if (m == 0 || n == 0 || count == 0) return;
    leadingDimension(op, "lda", lda, transA ? m : k, "A");
    leadingDimension(op, "ldb", ldb, transB ? k : n, "B");
    leadingDimension(op, "ldc", ldc, n, "C");
    // Products written in parallel must not share elements of C.
    if (count > 1 && strideC < int64_t(m - 1) * ldc + n) [[unlikely]]
        fail(op, "strideC " + std::to_string(strideC) + " makes the " + std::to_string(m) + "x" + std::to_string(n) +
                     " results overlap (ldc " + std::to_string(ldc) + ")");
    pointer(op, "c", c);
    if (k > 0) {
        pointer(op, "a", a);
        pointer(op, "b", b);
    }
    const auto started = productStart();
    doGemmStridedBatched(transA, transB, m, n, k, alpha, a, lda, strideA, b, ldb, strideB, beta, c, ldc, strideC,
                         count);
    productEnd(started);
}

void Backend::addBiasRows(float* y, const float* bias, int rows, int cols) {
    constexpr BackendOp op = BackendOp::AddBiasRows;
    size(op, "rows", rows);
    size(op, "cols", cols);
    if (rows > 0 && cols > 0) {
        pointer(op, "y", y);
        pointer(op, "bias", bias);
    }
    doAddBiasRows(y, bias, rows, cols);
}

void Backend::sumRows(float* dbias, const float* dy, int rows, int cols) {
    constexpr BackendOp op = BackendOp::SumRows;
    size(op, "rows", rows);
    size(op, "cols", cols);
    if (rows > 0 && cols > 0) {
        pointer(op, "dbias", dbias);
        pointer(op, "dy", dy);
    }
    doSumRows(dbias, dy, rows, cols);
}

void Backend::addBiasChannels(float* y, const float* bias, int n, int c, int inner) {
    constexpr BackendOp op = BackendOp::AddBiasChannels;
    size(op, "n", n);
    size(op, "c", c);
    size(op, "inner", inner);
    if (n > 0 && c > 0 && inner > 0) {
        pointer(op, "y", y);
        pointer(op, "bias", bias);
    }
    doAddBiasChannels(y, bias, n, c, inner);
}

void Backend::sumChannels(float* dbias, const float* dy, int n, int c, int inner) {
    constexpr BackendOp op = BackendOp::SumChannels;
    size(op, "n", n);
    size(op, "c", c);
    size(op, "inner", inner);
    if (n > 0 && c > 0 && inner > 0) {
        pointer(op, "dbias", dbias);
        pointer(op, "dy", dy);
    }
    doSumChannels(dbias, dy, n, c, inner);
}

// ---- convolution and pooling ------------------------------------------------------------

void Backend::conv2dForward(float* y, const float* x, const float* w, const ConvDesc& d) {
    constexpr BackendOp op = BackendOp::Conv2dForward;
    checkConv(op, d);
    pointer(op, "y", y);
    pointer(op, "x", x);
    pointer(op, "w", w);
    const auto started = productStart();
    doConv2dForward(y, x, w, d);
    productEnd(started);
}

void Backend::conv2dBackwardData(float* dx, const float* dy, const float* w, const ConvDesc& d) {
    constexpr BackendOp op = BackendOp::Conv2dBackwardData;
    checkConv(op, d);
    pointer(op, "dx", dx);
    pointer(op, "dy", dy);
    pointer(op, "w", w);
    const auto started = productStart();
    doConv2dBackwardData(dx, dy, w, d);
    productEnd(started);
}

void Backend::conv2dBackwardFilter(float* dw, const float* dy, const float* x, const ConvDesc& d) {
    constexpr BackendOp op = BackendOp::Conv2dBackwardFilter;
    checkConv(op, d);
    pointer(op, "dw", dw);
    pointer(op, "dy", dy);
    pointer(op, "x", x);
    const auto started = productStart();
    doConv2dBackwardFilter(dw, dy, x, d);
    productEnd(started);
}

void Backend::conv2dForwardFused(float* y, const float* x, const float* w, const float* bias, bool relu,
                                 const ConvDesc& d) {
    constexpr BackendOp op = BackendOp::Conv2dForwardFused;
    checkConv(op, d, activationBlock());
    pointer(op, "y", y);
    pointer(op, "x", x);
    pointer(op, "w", w);
    const auto started = productStart();
    doConv2dForwardFused(y, x, w, bias, relu, d);
    productEnd(started);
}

void Backend::conv2dBackwardFused(float* dx, float* dw, float* dbias, const float* dy, const float* x, const float* w,
                                  const ConvDesc& d, bool overwriteDx) {
    constexpr BackendOp op = BackendOp::Conv2dBackwardFused;
    checkConv(op, d, activationBlock());
    pointer(op, "dy", dy);
    if (dx) pointer(op, "w (needed for dx)", w);
    if (dw) pointer(op, "x (needed for dw)", x);
    const auto started = productStart();
    doConv2dBackwardFused(dx, dw, dbias, dy, x, w, d, overwriteDx);
    productEnd(started);
}

void Backend::upsample2dForward(float* y, const float* x, const UpsampleDesc& d) {
    constexpr BackendOp op = BackendOp::Upsample2dForward;
    checkUpsample(op, d);
    pointer(op, "y", y);
    pointer(op, "x", x);
    doUpsample2dForward(y, x, d);
}

void Backend::upsample2dBackward(float* dx, const float* dy, const UpsampleDesc& d, bool overwriteDx) {
    constexpr BackendOp op = BackendOp::Upsample2dBackward;
    checkUpsample(op, d);
    pointer(op, "dx", dx);
    pointer(op, "dy", dy);
    doUpsample2dBackward(dx, dy, d, overwriteDx);
}

void Backend::pool2dForward(float* y, const float* x, const PoolDesc& d) {
    constexpr BackendOp op = BackendOp::Pool2dForward;
    checkPool(op, d, activationBlock());
    pointer(op, "y", y);
    pointer(op, "x", x);
    doPool2dForward(y, x, d);
}

void Backend::pool2dBackward(float* dx, const float* dy, const float* x, const float* y, const PoolDesc& d,
                             bool overwriteDx) {
    constexpr BackendOp op = BackendOp::Pool2dBackward;
    checkPool(op, d, activationBlock());
    pointer(op, "dx", dx);
    pointer(op, "dy", dy);
    pointer(op, "x", x);
    if (d.mode == PoolMode::Average && !y) [[unlikely]]
        fail(op, "average pooling needs the forward output y");
    doPool2dBackward(dx, dy, x, y, d, overwriteDx);
}

void Backend::maxPool2dReLUBackward(float* dx, const float* dy, const float* x, const float* y, const PoolDesc& d,
                                    bool overwriteDx) {
    constexpr BackendOp op = BackendOp::MaxPool2dReLUBackward;
    if (d.mode != PoolMode::Max) [[unlikely]]
        fail(op, "the pooling must be max pooling");
    checkPool(op, d, activationBlock());
    pointer(op, "dx", dx);
    pointer(op, "dy", dy);
    pointer(op, "x", x);
    pointer(op, "y", y);
    doMaxPool2dReLUBackward(dx, dy, x, y, d, overwriteDx);
}

namespace {

void checkMeanPool(BackendOp op, const float* out, const float* in, const char* outName, const char* inName, int outer,
                   int len, int inner) {
    if (len < 1) [[unlikely]]
        fail(op, "length must be >= 1, got " + std::to_string(len));
    size(op, "outer", outer);
    size(op, "inner", inner);
    if (outer > 0 && inner > 0) {
        pointer(op, outName, out);
        pointer(op, inName, in);
    }
}

}  // namespace

void Backend::meanPoolForward(float* y, const float* x, int outer, int len, int inner) {
    checkMeanPool(BackendOp::MeanPoolForward, y, x, "y", "x", outer, len, inner);
    doMeanPoolForward(y, x, outer, len, inner);
}

void Backend::meanPoolBackward(float* dx, const float* dy, int outer, int len, int inner) {
    checkMeanPool(BackendOp::MeanPoolBackward, dx, dy, "dx", "dy", outer, len, inner);
    doMeanPoolBackward(dx, dy, outer, len, inner);
}

void Backend::sequencePoolForward(float* y, const float* x, const float* keep, int batch, int len, int dim,
                                  PoolMode mode) {
    checkMeanPool(BackendOp::SequencePoolForward, y, x, "y", "x", batch, len, dim);
    doSequencePoolForward(y, x, keep, batch, len, dim, mode);
}

void Backend::sequencePoolBackward(float* dx, const float* dy, const float* x, const float* y, const float* keep,
                                   int batch, int len, int dim, PoolMode mode) {
    constexpr BackendOp op = BackendOp::SequencePoolBackward;
    checkMeanPool(op, dx, dy, "dx", "dy", batch, len, dim);
    if (mode == PoolMode::Max && batch > 0 && dim > 0) {
        pointer(op, "x", x);
        pointer(op, "y", y);
    }
    doSequencePoolBackward(dx, dy, x, y, keep, batch, len, dim, mode);
}

// ---- activations and softmax ----------------------------------------------------------------

void Backend::activationForward(float* y, const float* x, int64_t n, Activation act, float alpha) {
    constexpr BackendOp op = BackendOp::ActivationForward;
    size(op, "n", n);
    if (n > 0) {
        pointer(op, "y", y);
        pointer(op, "x", x);
    }
    doActivationForward(y, x, n, act, alpha);
}

void Backend::activationBackward(float* dx, const float* dy, const float* x, const float* y, int64_t n, Activation act,
                                 float alpha, bool overwriteDx) {
    constexpr BackendOp op = BackendOp::ActivationBackward;
    const bool needsX = act == Activation::LeakyReLU || act == Activation::GELU || act == Activation::HardSwish ||
                        (act == Activation::ReLU && !y);
    if ((needsX && !x) || (!x && !y)) [[unlikely]]
        fail(op, "this activation needs its input x");
    size(op, "n", n);
    if (n > 0) {
        pointer(op, "dx", dx);
        pointer(op, "dy", dy);
    }
    doActivationBackward(dx, dy, x, y, n, act, alpha, overwriteDx);
}

void Backend::clipForward(float* y, const float* x, int64_t n, float lo, float hi) {
    constexpr BackendOp op = BackendOp::ClipForward;
    checkClipBounds(op, lo, hi);
    size(op, "n", n);
    if (n > 0) {
        pointer(op, "y", y);
        pointer(op, "x", x);
    }
    doClipForward(y, x, n, lo, hi);
}

void Backend::clipBackward(float* dx, const float* dy, const float* x, int64_t n, float lo, float hi,
                           bool overwriteDx) {
    constexpr BackendOp op = BackendOp::ClipBackward;
    checkClipBounds(op, lo, hi);
    size(op, "n", n);
    if (n > 0) {
        pointer(op, "dx", dx);
        pointer(op, "dy", dy);
        pointer(op, "x", x);
    }
    doClipBackward(dx, dy, x, n, lo, hi, overwriteDx);
}

void Backend::maskedSoftmaxForward(float* y, const float* x, const float* keep, int groups, int rowsPerGroup,
                                   int cols) {
    constexpr BackendOp op = BackendOp::MaskedSoftmaxForward;
    atLeastOneColumn(op, cols);
    size(op, "groups", groups);
    size(op, "rowsPerGroup", rowsPerGroup);
    if (int64_t(groups) * rowsPerGroup > 0) {
        pointer(op, "y", y);
        pointer(op, "x", x);
        pointer(op, "keep", keep);
    }
    doMaskedSoftmaxForward(y, x, keep, groups, rowsPerGroup, cols);
}

void Backend::softmaxForward(float* y, const float* x, int rows, int cols) {
    constexpr BackendOp op = BackendOp::SoftmaxForward;
    atLeastOneColumn(op, cols);
    size(op, "rows", rows);
    if (rows > 0) {
        pointer(op, "y", y);
        pointer(op, "x", x);
    }
    doSoftmaxForward(y, x, rows, cols);
}

void Backend::softmaxBackward(float* dx, const float* dy, const float* y, int rows, int cols) {
    constexpr BackendOp op = BackendOp::SoftmaxBackward;
    atLeastOneColumn(op, cols);
    size(op, "rows", rows);
    if (rows > 0) {
        pointer(op, "dx", dx);
        pointer(op, "dy", dy);
        pointer(op, "y", y);
    }
    doSoftmaxBackward(dx, dy, y, rows, cols);
}

// ---- losses -------------------------------------------------------------------------------------

void Backend::softmaxCrossEntropy(float* losses, float* dlogits, const float* logits, const int32_t* labels, int rows,
                                  int cols, float gradScale) {
    constexpr BackendOp op = BackendOp::SoftmaxCrossEntropy;
    atLeastOneColumn(op, cols);
    size(op, "rows", rows);
    if (rows > 0) {
        pointer(op, "logits", logits);
        pointer(op, "labels", labels);
        if (m_hostMemory) checkLabelsOnHost(op, device().toString(), labels, rows, cols);
    }
    doSoftmaxCrossEntropy(losses, dlogits, logits, labels, rows, cols, gradScale);
}

void Backend::mseLoss(float* losses, float* dpred, const float* pred, const float* target, int rows, int cols,
                      float gradScale) {
    constexpr BackendOp op = BackendOp::MseLoss;
    atLeastOneColumn(op, cols);
    size(op, "rows", rows);
    if (rows > 0) {
        pointer(op, "pred", pred);
        pointer(op, "target", target);
    }
    doMseLoss(losses, dpred, pred, target, rows, cols, gradScale);
}

void Backend::robustLoss(float* losses, float* dpred, const float* pred, const float* target, int rows, int cols,
                         float delta, float gradScale) {
    constexpr BackendOp op = BackendOp::RobustLoss;
    atLeastOneColumn(op, cols);
    size(op, "rows", rows);
    if (!(delta >= 0.0f) || !std::isfinite(delta))
        fail(op, "delta " + std::to_string(delta) + " must be finite and 0 (mean absolute error) or above (Huber)");
    if (rows > 0) {
        pointer(op, "pred", pred);
        pointer(op, "target", target);
    }
    doRobustLoss(losses, dpred, pred, target, rows, cols, delta, gradScale);
}

void Backend::bceWithLogits(float* losses, float* dlogits, const float* logits, const float* target, int rows, int cols,
                            float gradScale) {
    constexpr BackendOp op = BackendOp::BceWithLogits;
    atLeastOneColumn(op, cols);
    size(op, "rows", rows);
    if (rows > 0) {
        pointer(op, "logits", logits);
        pointer(op, "target", target);
    }
    doBceWithLogits(losses, dlogits, logits, target, rows, cols, gradScale);
}

int64_t Backend::countCorrect(const float* logits, const int32_t* labels, int rows, int cols) {
    constexpr BackendOp op = BackendOp::CountCorrect;
    size(op, "rows", rows);
    if (rows == 0) return 0;
    atLeastOneColumn(op, cols);
    pointer(op, "logits", logits);
    pointer(op, "labels", labels);
    if (m_hostMemory) checkLabelsOnHost(op, device().toString(), labels, rows, cols);
    return doCountCorrect(logits, labels, rows, cols);
}

Backend::StepMetrics Backend::stepMetrics(const float* losses, const float* logits, const int32_t* labels, int rows,
                                          int cols) {
    constexpr BackendOp op = BackendOp::StepMetrics;
    size(op, "rows", rows);
    if (rows == 0) return {};
    pointer(op, "losses", losses);
    if (labels) {
        atLeastOneColumn(op, cols);
        pointer(op, "logits", logits);
        // The labels are countCorrect's: reported as its, as a device backend's kernel reports them.
        if (m_hostMemory) checkLabelsOnHost(BackendOp::CountCorrect, device().toString(), labels, rows, cols);
    }
    return doStepMetrics(losses, logits, labels, rows, cols);
}

// ---- normalization ----------------------------------------------------------------------------------

namespace {

void checkNormSizes(BackendOp op, int a, const char* aName, int b, const char* bName) {
    size(op, aName, a);
    size(op, bName, b);
}

}  // namespace

void Backend::batchNormForwardTraining(float* y, float* saveMean, float* saveInvStd, float* runningMean,
                                       float* runningVar, const float* x, const float* gamma, const float* beta, int n,
                                       int c, int inner, float momentum, float eps, bool relu, int block) {
    constexpr BackendOp op = BackendOp::BatchNormForwardTraining;
    checkNormSizes(op, n, "n", c, "c");
    checkNormBlock(op, block, c, activationBlock());
    size(op, "inner", inner);
    if (static_cast<int64_t>(n) * inner < 2) [[unlikely]]
        fail(op, "training needs more than one value per channel (batch " + std::to_string(n) + ", " +
                     std::to_string(inner) + " values per sample)");
    if ((runningMean == nullptr) != (runningVar == nullptr)) [[unlikely]]
        fail(op, "runningMean and runningVar must both be given or both be null");
    if ((saveMean == nullptr) != (saveInvStd == nullptr)) [[unlikely]]
        fail(op, "saveMean and saveInvStd must both be given or both be null");
    if (c > 0) {
        pointer(op, "y", y);
        pointer(op, "x", x);
    }
    doBatchNormForwardTraining(y, saveMean, saveInvStd, runningMean, runningVar, x, gamma, beta, n, c, inner, momentum,
                               eps, relu, block);
}

void Backend::batchNormForwardInference(float* y, const float* x, const float* gamma, const float* beta,
                                        const float* runningMean, const float* runningVar, int n, int c, int inner,
                                        float eps, bool relu, int block) {
    constexpr BackendOp op = BackendOp::BatchNormForwardInference;
    checkNormSizes(op, n, "n", c, "c");
    checkNormBlock(op, block, c, activationBlock());
    size(op, "inner", inner);
    if (n > 0 && c > 0 && inner > 0) {
        pointer(op, "y", y);
        pointer(op, "x", x);
        pointer(op, "runningMean", runningMean);
        pointer(op, "runningVar", runningVar);
    }
    doBatchNormForwardInference(y, x, gamma, beta, runningMean, runningVar, n, c, inner, eps, relu, block);
}

void Backend::batchNormBackward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                                const float* gamma, const float* saveMean, const float* saveInvStd, int n, int c,
                                int inner, const float* reluOutput, bool overwriteDx, int block) {
    constexpr BackendOp op = BackendOp::BatchNormBackward;
    checkNormSizes(op, n, "n", c, "c");
    checkNormBlock(op, block, c, activationBlock());
    size(op, "inner", inner);
    if (!saveMean || !saveInvStd) [[unlikely]]
        fail(op, "needs saveMean and saveInvStd (from batchNormForwardTraining)");
    if (n > 0 && c > 0 && inner > 0) {
        pointer(op, "dy", dy);
        pointer(op, "x", x);
    }
    doBatchNormBackward(dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd, n, c, inner, reluOutput, overwriteDx,
                        block);
}

void Backend::layerNormForward(float* y, float* mean, float* rstd, const float* x, const float* gamma,
                               const float* beta, int rows, int cols, float eps) {
    constexpr BackendOp op = BackendOp::LayerNormForward;
    atLeastOneColumn(op, cols);
    size(op, "rows", rows);
    if (rows > 0) {
        pointer(op, "y", y);
        pointer(op, "x", x);
    }
    doLayerNormForward(y, mean, rstd, x, gamma, beta, rows, cols, eps);
}

void Backend::layerNormBackward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                                const float* gamma, const float* mean, const float* rstd, int rows, int cols) {
    constexpr BackendOp op = BackendOp::LayerNormBackward;
    checkNormSizes(op, rows, "rows", cols, "cols");
    pointer(op, "mean", mean);
    pointer(op, "rstd", rstd);
    if (rows > 0 && cols > 0) {
        pointer(op, "dy", dy);
        pointer(op, "x", x);
    }
    doLayerNormBackward(dx, dgamma, dbeta, dy, x, gamma, mean, rstd, rows, cols);
}

// ---- dropout -------------------------------------------------------------------------------------------

void Backend::dropoutForward(float* y, const float* x, int64_t n, float p, uint64_t seed, uint64_t first) {
    constexpr BackendOp op = BackendOp::DropoutForward;
    dropoutProbability(op, p);
    size(op, "n", n);
    if (n > 0) {
        pointer(op, "y", y);
        pointer(op, "x", x);
    }
    doDropoutForward(y, x, n, p, seed, first);
}

void Backend::dropoutBackward(float* dx, const float* dy, int64_t n, float p, uint64_t seed, uint64_t first) {
    constexpr BackendOp op = BackendOp::DropoutBackward;
    dropoutProbability(op, p);
    size(op, "n", n);
    if (n > 0) {
        pointer(op, "dx", dx);
        pointer(op, "dy", dy);
    }
    doDropoutBackward(dx, dy, n, p, seed, first);
}

// ---- embedding -------------------------------------------------------------------------------------------

namespace {

void checkEmbedding(BackendOp op, const void* out, const char* outName, const void* in, const char* inName,
                    const float* ids, int64_t count, int dim, int vocab) {
    size(op, "count", count);
    size(op, "dim", dim);
    size(op, "vocab", vocab);
    if (count > 0) {
        pointer(op, "ids", ids);
        if (dim > 0) {
            pointer(op, outName, out);
            pointer(op, inName, in);
        }
    }
}

}  // namespace

void Backend::embeddingForward(float* y, const float* table, const float* ids, int64_t count, int dim, int vocab) {
    constexpr BackendOp op = BackendOp::EmbeddingForward;
    checkEmbedding(op, y, "y", table, "table", ids, count, dim, vocab);
    if (m_hostMemory) checkIdsOnHost(op, device().toString(), ids, count, vocab);
    doEmbeddingForward(y, table, ids, count, dim, vocab);
}

void Backend::embeddingBackward(float* dtable, const float* dy, const float* ids, int64_t count, int dim, int vocab) {
    constexpr BackendOp op = BackendOp::EmbeddingBackward;
    checkEmbedding(op, dtable, "dtable", dy, "dy", ids, count, dim, vocab);
    if (m_hostMemory) checkIdsOnHost(op, device().toString(), ids, count, vocab);
    doEmbeddingBackward(dtable, dy, ids, count, dim, vocab);
}

// ---- data movement -----------------------------------------------------------------------------------------

void Backend::copyBlocks(float* dst, int64_t dstStride, const float* src, int64_t srcStride, int64_t blockLen,
                         int64_t count, bool accumulate) {
    constexpr BackendOp op = BackendOp::CopyBlocks;
    size(op, "blockLen", blockLen);
    size(op, "count", count);
    if (blockLen > 0 && count > 0) {
        pointer(op, "dst", dst);
        pointer(op, "src", src);
    }
    doCopyBlocks(dst, dstStride, src, srcStride, blockLen, count, accumulate);
}

void Backend::reblock(float* dst, int dstBlock, const float* src, int srcBlock, int n, int c, int64_t inner,
                      bool accumulate) {
    constexpr BackendOp op = BackendOp::Reblock;
    size(op, "n", n);
    size(op, "c", c);
    size(op, "inner", inner);
    size(op, "dstBlock", dstBlock);
    size(op, "srcBlock", srcBlock);
    for (int b : {dstBlock, srcBlock})
        if (b > 0 && c % b != 0)
            throw BackendError(std::string(backendOpName(op)) + ": c = " + std::to_string(c) +
                               " is not a multiple of the block " + std::to_string(b));
    if (int64_t(n) * c * inner == 0) return;
    pointer(op, "dst", dst);
    pointer(op, "src", src);
    doReblock(dst, dstBlock, src, srcBlock, n, c, inner, accumulate);
}

void Backend::gatherRows(void* dst, const void* src, int64_t srcRows, const int32_t* indices, int64_t count,
                         int64_t rowWords) {
    constexpr BackendOp op = BackendOp::GatherRows;
    size(op, "srcRows", srcRows);
    size(op, "count", count);
    size(op, "rowWords", rowWords);
    if (count == 0 || rowWords == 0) return;
    pointer(op, "dst", dst);
    pointer(op, "src", src);
    pointer(op, "indices", indices);
    // Every index first: a bad one leaves dst untouched.
    if (m_hostMemory) checkRowIndicesOnHost(op, device().toString(), indices, count, srcRows);
    doGatherRows(dst, src, srcRows, indices, count, rowWords);
}

// ---- reductions ---------------------------------------------------------------------------------------------

double Backend::sum(const float* x, int64_t n) {
    size(BackendOp::Sum, "n", n);
    if (n > 0) pointer(BackendOp::Sum, "x", x);
    return doSum(x, n);
}

double Backend::sumSquares(const float* x, int64_t n) {
    size(BackendOp::SumSquares, "n", n);
    if (n > 0) pointer(BackendOp::SumSquares, "x", x);
    return doSumSquares(x, n);
}

bool Backend::allFinite(const float* x, int64_t n) {
    size(BackendOp::AllFinite, "n", n);
    if (n > 0) pointer(BackendOp::AllFinite, "x", x);
    return doAllFinite(x, n);
}

// ---- optimizers ---------------------------------------------------------------------------------------------

void Backend::sgdUpdate(float* w, float* velocity, const float* grad, int64_t n, const SgdParams& p) {
    constexpr BackendOp op = BackendOp::SgdUpdate;
    if (p.momentum != 0.0f && !velocity) [[unlikely]]
        fail(op, "momentum needs a velocity buffer");
    size(op, "n", n);
    if (n > 0) {
        pointer(op, "w", w);
        pointer(op, "grad", grad);
    }
    doSgdUpdate(w, velocity, grad, n, p);
}

void Backend::adamUpdate(float* w, float* m, float* v, const float* grad, int64_t n, const AdamParams& p) {
    constexpr BackendOp op = BackendOp::AdamUpdate;
    if (p.step < 1) [[unlikely]]
        fail(op, "step is 1-based, got " + std::to_string(p.step));
    size(op, "n", n);
    if (n > 0) {
        pointer(op, "w", w);
        pointer(op, "m", m);
        pointer(op, "v", v);
        pointer(op, "grad", grad);
    }
    doAdamUpdate(w, m, v, grad, n, p);
}

// ---- default compositions -------------------------------------------------------------------------------------
// They call the do* functions directly: the public op has checked the arguments they pass on.

void Backend::doConv2dForwardFused(float* y, const float* x, const float* w, const float* bias, bool relu,
                                   const ConvDesc& d) {
    doConv2dForward(y, x, w, d);
    const int inner = d.outH() * d.outW();
    if (bias) doAddBiasChannels(y, bias, d.n, d.k, inner);
    if (relu) doActivationForward(y, y, d.outputSize(), Activation::ReLU, 0.0f);
}

void Backend::doConv2dBackwardFused(float* dx, float* dw, float* dbias, const float* dy, const float* x, const float* w,
                                    const ConvDesc& d, bool overwriteDx) {
    if (dx && overwriteDx) doZero(dx, static_cast<size_t>(d.n) * d.c * d.h * d.w * sizeof(float));
    if (dx) doConv2dBackwardData(dx, dy, w, d);
    if (dw) doConv2dBackwardFilter(dw, dy, x, d);
    if (dbias) doSumChannels(dbias, dy, d.n, d.k, d.outH() * d.outW());
}

void Backend::doMaxPool2dReLUBackward(float* dx, const float* dy, const float* x, const float* y, const PoolDesc& d,
                                      bool overwriteDx) {
    const int64_t n = static_cast<int64_t>(d.n) * d.c * d.h * d.w;
    if (overwriteDx) doZero(dx, static_cast<size_t>(n) * sizeof(float));
    Tensor routed = zeros(Shape{n});
    doPool2dBackward(routed.f32(), dy, x, y, d, false);
    doActivationBackward(dx, routed.f32(), x, nullptr, n, Activation::ReLU, 0.0f, false);
}

Backend::StepMetrics Backend::doStepMetrics(const float* losses, const float* logits, const int32_t* labels, int rows,
                                            int cols) {
    StepMetrics m;
    m.lossSum = doSum(losses, rows);
    if (labels) m.correct = doCountCorrect(logits, labels, rows, cols);
    return m;
}

void Backend::doGatherRows(void* dst, const void* src, int64_t srcRows, const int32_t* indices, int64_t count,
                           int64_t rowWords) {
    std::vector<int32_t> host(static_cast<size_t>(count));
    copyToHost(host.data(), indices, host.size() * sizeof(int32_t));
    checkRowIndicesOnHost(BackendOp::GatherRows, device().toString(), host.data(), count, srcRows);
    const size_t rowBytes = static_cast<size_t>(rowWords) * 4;
    for (int64_t i = 0; i < count; ++i)
        copy(static_cast<char*>(dst) + static_cast<size_t>(i) * rowBytes,
             static_cast<const char*>(src) + static_cast<size_t>(host[static_cast<size_t>(i)]) * rowBytes, rowBytes);
}

}  // namespace strata
