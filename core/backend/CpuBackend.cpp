// CpuBackend: memory, argument checks, and the choice between the reference
// loops (CpuReference.cpp) and the fast paths (CpuFast*.cpp).
#include "core/backend/CpuBackend.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>

#include "core/backend/CpuFast.h"
#include "core/backend/CpuPrecision.h"
#include "core/backend/CpuReference.h"

namespace strata {

namespace {

int defaultThreads(int threads) {
    if (threads > 0) return threads;
    const unsigned hw = std::thread::hardware_concurrency();
    return hw > 0 ? static_cast<int>(hw) : 1;
}

void checkConv(const ConvDesc& d) {
    if (d.n < 1 || d.c < 1 || d.h < 1 || d.w < 1 || d.k < 1 || d.r < 1 || d.s < 1 || d.strideH < 1 ||
        d.strideW < 1 || d.dilationH < 1 || d.dilationW < 1 || d.groups < 1 || d.padH < 0 || d.padW < 0)
        throw BackendError("conv2d: invalid descriptor (sizes, strides, dilations and groups must be >= 1, "
                           "padding >= 0)");
    if (d.c % d.groups != 0 || d.k % d.groups != 0)
        throw BackendError("conv2d: " + std::to_string(d.c) + " input and " + std::to_string(d.k) +
                           " output channels must both be divisible by " + std::to_string(d.groups) + " groups");
    if (d.outH() < 1 || d.outW() < 1)
        throw BackendError("conv2d: a " + std::to_string(d.r) + "x" + std::to_string(d.s) + " kernel does not fit a " +
                           std::to_string(d.h) + "x" + std::to_string(d.w) + " input with this padding and dilation");
}

void checkPool(const PoolDesc& d) {
    if (d.n < 1 || d.c < 1 || d.h < 1 || d.w < 1 || d.kernelH < 1 || d.kernelW < 1 || d.strideH < 1 ||
        d.strideW < 1 || d.padH < 0 || d.padW < 0)
        throw BackendError("pool2d: invalid descriptor (sizes, kernel and strides must be >= 1, padding >= 0)");
    // A window made of padding only would have no maximum and no average.
    if (d.padH >= d.kernelH || d.padW >= d.kernelW)
        throw BackendError("pool2d: padding must be smaller than the kernel");
    if (d.outH() < 1 || d.outW() < 1)
        throw BackendError("pool2d: a " + std::to_string(d.kernelH) + "x" + std::to_string(d.kernelW) +
                           " window does not fit a " + std::to_string(d.h) + "x" + std::to_string(d.w) + " input");
}

void checkLabels(const char* op, const int32_t* labels, int rows, int cols) {
    for (int r = 0; r < rows; ++r)
        if (labels[r] < 0 || labels[r] >= cols)
            throw BackendError(std::string(op) + ": label " + std::to_string(labels[r]) + " of row " +
                               std::to_string(r) + " is outside [0, " + std::to_string(cols) + ")");
}

std::string formatId(float id) {
    std::ostringstream s;
    s << id;
    return s.str();
}

void checkIds(const char* op, const float* ids, int64_t count, int vocab) {
    for (int64_t i = 0; i < count; ++i) {
        const float id = ids[i];
        if (!(id >= 0.0f && id < static_cast<float>(vocab)) || id != std::floor(id))
            throw BackendError(std::string(op) + ": id " + formatId(id) + " at position " + std::to_string(i) +
                               " is not an integer in [0, " + std::to_string(vocab) + ") (vocabulary size " +
                               std::to_string(vocab) + ")");
    }
}

}  // namespace

CpuBackend::CpuBackend(int threads, bool reference)
    : m_threads(defaultThreads(threads)), m_reference(reference), m_workspace(std::make_unique<cpu::Workspace>()) {
    m_workspace->useOneDnn = cpu::oneDnnAvailable();
}

bool CpuBackend::oneDnnAvailable() { return cpu::oneDnnAvailable(); }
void CpuBackend::setOneDnn(bool on) { m_workspace->useOneDnn = on && cpu::oneDnnAvailable(); }
bool CpuBackend::oneDnn() const { return m_workspace->useOneDnn; }

CpuBackend::~CpuBackend() = default;

void CpuBackend::setThreads(int threads) { m_threads = defaultThreads(threads); }

// ---- memory ---------------------------------------------------------------

void* CpuBackend::allocate(size_t bytes) {
    // aligned_alloc needs a multiple of the alignment; 64 bytes is one cache line and one AVX-512 vector.
    const size_t rounded = ((bytes == 0 ? 1 : bytes) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p)
        throw OutOfMemoryError("cpu: out of memory allocating " + std::to_string(bytes) + " bytes (" +
                                   std::to_string(m_bytesInUse.load()) + " bytes in use)",
                               bytes);
    const size_t now = m_bytesInUse.fetch_add(bytes) + bytes;
    size_t peak = m_peakBytes.load();
    while (now > peak && !m_peakBytes.compare_exchange_weak(peak, now)) {
    }
    return p;
}

void CpuBackend::deallocate(void* ptr, size_t bytes) {
    if (!ptr) return;
    std::free(ptr);
    m_bytesInUse.fetch_sub(bytes);
}

void CpuBackend::copyFromHost(void* dst, const void* hostSrc, size_t bytes) {
    if (bytes) std::memcpy(dst, hostSrc, bytes);
}
void CpuBackend::copyToHost(void* hostDst, const void* src, size_t bytes) {
    if (bytes) std::memcpy(hostDst, src, bytes);
}
void CpuBackend::copy(void* dst, const void* src, size_t bytes) {
    if (bytes && dst != src) std::memmove(dst, src, bytes);
}

// ---- element-wise ---------------------------------------------------------

void CpuBackend::fill(float* y, float value, int64_t n) {
    if (m_reference)
        for (int64_t i = 0; i < n; ++i) y[i] = value;
    else
        cpu::fill(m_threads, y, value, n);
}
void CpuBackend::zero(void* y, size_t bytes) {
    if (bytes) std::memset(y, 0, bytes);
}
void CpuBackend::scale(float* y, float alpha, int64_t n) {
    if (m_reference)
        for (int64_t i = 0; i < n; ++i) y[i] *= alpha;
    else
        cpu::scale(m_threads, y, alpha, n);
}
void CpuBackend::axpy(float* y, float alpha, const float* x, int64_t n) {
    if (m_reference)
        for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
    else
        cpu::axpy(m_threads, y, alpha, x, n);
}
void CpuBackend::add(float* y, const float* a, const float* b, int64_t n) {
    if (m_reference)
        for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
    else
        cpu::add(m_threads, y, a, b, n);
}

// ---- linear algebra ---------------------------------------------------------

void CpuBackend::gemm(bool transA, bool transB, int m, int n, int k, float alpha, const float* a, int lda,
                      const float* b, int ldb, float beta, float* c, int ldc) {
    if (m < 0 || n < 0 || k < 0) throw BackendError("gemm: negative size");
    if (m == 0 || n == 0) return;
    if (m_precision != ComputePrecision::F32) {
        a = cpu::roundedCopy(m_roundedA, a, cpu::operandSpan(transA ? k : m, transA ? m : k, lda), m_precision,
                             m_threads);
        b = cpu::roundedCopy(m_roundedB, b, cpu::operandSpan(transB ? n : k, transB ? k : n, ldb), m_precision,
                             m_threads);
    }
    if (m_reference)
        cpuref::gemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else
        cpu::gemm(m_threads, m_workspace->useOneDnn, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void CpuBackend::addBiasRows(float* y, const float* bias, int rows, int cols) {
    if (m_reference)
        cpuref::addBiasRows(y, bias, rows, cols);
    else
        cpu::addBiasRows(m_threads, y, bias, rows, cols);
}
void CpuBackend::sumRows(float* dbias, const float* dy, int rows, int cols) {
    if (m_reference)
        cpuref::sumRows(dbias, dy, rows, cols);
    else
        cpu::sumRows(m_threads, dbias, dy, rows, cols);
}
void CpuBackend::addBiasChannels(float* y, const float* bias, int n, int c, int inner) {
    if (m_reference)
        cpuref::addBiasChannels(y, bias, n, c, inner);
    else
        cpu::addBiasChannels(m_threads, y, bias, n, c, inner);
}
void CpuBackend::sumChannels(float* dbias, const float* dy, int n, int c, int inner) {
    if (m_reference)
        cpuref::sumChannels(dbias, dy, n, c, inner);
    else
        cpu::sumChannels(m_threads, dbias, dy, n, c, inner);
}

// ---- convolution and pooling ------------------------------------------------

void CpuBackend::conv2dForward(float* y, const float* x, const float* w, const ConvDesc& d) {
    checkConv(d);
    if (m_precision != ComputePrecision::F32) {
        x = cpu::roundedCopy(m_roundedA, x, int64_t(d.n) * d.c * d.h * d.w, m_precision, m_threads);
        w = cpu::roundedCopy(m_roundedB, w, int64_t(d.k) * (d.c / d.groups) * d.r * d.s, m_precision, m_threads);
    }
    if (m_reference)
        cpuref::conv2dForward(y, x, w, d);
    else
        cpu::conv2dForward(m_threads, *m_workspace, y, x, w, d);
}
void CpuBackend::conv2dBackwardData(float* dx, const float* dy, const float* w, const ConvDesc& d) {
    checkConv(d);
    if (m_precision != ComputePrecision::F32) {
        dy = cpu::roundedCopy(m_roundedA, dy, int64_t(d.n) * d.k * d.outH() * d.outW(), m_precision, m_threads);
        w = cpu::roundedCopy(m_roundedB, w, int64_t(d.k) * (d.c / d.groups) * d.r * d.s, m_precision, m_threads);
    }
    if (m_reference)
        cpuref::conv2dBackwardData(dx, dy, w, d);
    else
        cpu::conv2dBackwardData(m_threads, *m_workspace, dx, dy, w, d);
}
void CpuBackend::conv2dBackwardFilter(float* dw, const float* dy, const float* x, const ConvDesc& d) {
    checkConv(d);
    if (m_precision != ComputePrecision::F32) {
        dy = cpu::roundedCopy(m_roundedA, dy, int64_t(d.n) * d.k * d.outH() * d.outW(), m_precision, m_threads);
        x = cpu::roundedCopy(m_roundedB, x, int64_t(d.n) * d.c * d.h * d.w, m_precision, m_threads);
    }
    if (m_reference)
        cpuref::conv2dBackwardFilter(dw, dy, x, d);
    else
        cpu::conv2dBackwardFilter(m_threads, *m_workspace, dw, dy, x, d);
}
void CpuBackend::conv2dForwardFused(float* y, const float* x, const float* w, const float* bias, bool relu,
                                    const ConvDesc& d) {
    if (m_reference || m_precision != ComputePrecision::F32) return Backend::conv2dForwardFused(y, x, w, bias, relu, d);
    checkConv(d);
    cpu::conv2dForwardFused(m_threads, *m_workspace, y, x, w, bias, relu, d);
}
void CpuBackend::conv2dBackwardFused(float* dx, float* dw, float* dbias, const float* dy, const float* x,
                                     const float* w, const ConvDesc& d) {
    if (m_reference || m_precision != ComputePrecision::F32)
        return Backend::conv2dBackwardFused(dx, dw, dbias, dy, x, w, d);
    checkConv(d);
    cpu::conv2dBackwardFused(m_threads, *m_workspace, dx, dw, dbias, dy, x, w, d);
}
void CpuBackend::pool2dForward(float* y, const float* x, const PoolDesc& d) {
    checkPool(d);
    if (m_reference)
        cpuref::pool2dForward(y, x, d);
    else
        cpu::pool2dForward(m_threads, y, x, d);
}
void CpuBackend::pool2dBackward(float* dx, const float* dy, const float* x, const float*, const PoolDesc& d) {
    checkPool(d);
    if (m_reference)
        cpuref::pool2dBackward(dx, dy, x, d);
    else
        cpu::pool2dBackward(m_threads, dx, dy, x, d);
}
void CpuBackend::maxPool2dReLUBackward(float* dx, const float* dy, const float* x, const float* y,
                                       const PoolDesc& d) {
    checkPool(d);
    if (!m_reference && d.mode == PoolMode::Max && cpu::maxPool2dReLUBackward(m_threads, dx, dy, x, y, d)) return;
    Backend::maxPool2dReLUBackward(dx, dy, x, y, d);
}
void CpuBackend::meanPoolForward(float* y, const float* x, int outer, int len, int inner) {
    if (len < 1) throw BackendError("meanPool: length must be >= 1");
    if (m_reference)
        cpuref::meanPoolForward(y, x, outer, len, inner);
    else
        cpu::meanPoolForward(m_threads, y, x, outer, len, inner);
}
void CpuBackend::meanPoolBackward(float* dx, const float* dy, int outer, int len, int inner) {
    if (len < 1) throw BackendError("meanPool: length must be >= 1");
    if (m_reference)
        cpuref::meanPoolBackward(dx, dy, outer, len, inner);
    else
        cpu::meanPoolBackward(m_threads, dx, dy, outer, len, inner);
}

// ---- activations and softmax -------------------------------------------------

void CpuBackend::activationForward(float* y, const float* x, int64_t n, Activation act, float alpha) {
    if (m_reference)
        cpuref::activationForward(y, x, n, act, alpha);
    else
        cpu::activationForward(m_threads, y, x, n, act, alpha);
}
void CpuBackend::activationBackward(float* dx, const float* dy, const float* x, const float* y, int64_t n,
                                    Activation act, float alpha) {
    const bool needsX = act == Activation::LeakyReLU || act == Activation::GELU || (act == Activation::ReLU && !y);
    if ((needsX && !x) || (!x && !y)) throw BackendError("activationBackward: this activation needs its input x");
    if (m_reference)
        cpuref::activationBackward(dx, dy, x, y, n, act, alpha);
    else
        cpu::activationBackward(m_threads, dx, dy, x, y, n, act, alpha);
}
void CpuBackend::softmaxForward(float* y, const float* x, int rows, int cols) {
    if (cols < 1) throw BackendError("softmax: needs at least one column");
    if (m_reference)
        cpuref::softmaxForward(y, x, rows, cols);
    else
        cpu::softmaxForward(m_threads, y, x, rows, cols);
}
void CpuBackend::softmaxBackward(float* dx, const float* dy, const float* y, int rows, int cols) {
    if (m_reference)
        cpuref::softmaxBackward(dx, dy, y, rows, cols);
    else
        cpu::softmaxBackward(m_threads, dx, dy, y, rows, cols);
}

// ---- losses -------------------------------------------------------------------

void CpuBackend::softmaxCrossEntropy(float* losses, float* dlogits, const float* logits, const int32_t* labels,
                                     int rows, int cols, float gradScale) {
    checkLabels("softmaxCrossEntropy", labels, rows, cols);
    if (m_reference)
        cpuref::softmaxCrossEntropy(losses, dlogits, logits, labels, rows, cols, gradScale);
    else
        cpu::softmaxCrossEntropy(m_threads, losses, dlogits, logits, labels, rows, cols, gradScale);
}
void CpuBackend::mseLoss(float* losses, float* dpred, const float* pred, const float* target, int rows, int cols,
                         float gradScale) {
    if (m_reference)
        cpuref::mseLoss(losses, dpred, pred, target, rows, cols, gradScale);
    else
        cpu::mseLoss(m_threads, losses, dpred, pred, target, rows, cols, gradScale);
}
void CpuBackend::bceWithLogits(float* losses, float* dlogits, const float* logits, const float* target, int rows,
                               int cols, float gradScale) {
    if (m_reference)
        cpuref::bceWithLogits(losses, dlogits, logits, target, rows, cols, gradScale);
    else
        cpu::bceWithLogits(m_threads, losses, dlogits, logits, target, rows, cols, gradScale);
}
int64_t CpuBackend::countCorrect(const float* logits, const int32_t* labels, int rows, int cols) {
    checkLabels("countCorrect", labels, rows, cols);
    return cpuref::countCorrect(logits, labels, rows, cols);
}

// ---- normalization ------------------------------------------------------------

void CpuBackend::batchNormForwardTraining(float* y, float* saveMean, float* saveInvStd, float* runningMean,
                                          float* runningVar, const float* x, const float* gamma, const float* beta,
                                          int n, int c, int inner, float momentum, float eps) {
    if (static_cast<int64_t>(n) * inner < 2)
        throw BackendError("batchNorm: training needs more than one value per channel (batch " + std::to_string(n) +
                           ", " + std::to_string(inner) + " values per sample)");
    if (m_reference)
        cpuref::batchNormForwardTraining(y, saveMean, saveInvStd, runningMean, runningVar, x, gamma, beta, n, c, inner,
                                     momentum, eps);
    else
        cpu::batchNormForwardTraining(m_threads, y, saveMean, saveInvStd, runningMean, runningVar, x, gamma, beta, n, c, inner,
                                     momentum, eps);
}
void CpuBackend::batchNormForwardInference(float* y, const float* x, const float* gamma, const float* beta,
                                           const float* runningMean, const float* runningVar, int n, int c, int inner,
                                           float eps) {
    if (m_reference)
        cpuref::batchNormForwardInference(y, x, gamma, beta, runningMean, runningVar, n, c, inner, eps);
    else
        cpu::batchNormForwardInference(m_threads, y, x, gamma, beta, runningMean, runningVar, n, c, inner, eps);
}
void CpuBackend::batchNormBackward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                                   const float* gamma, const float* saveMean, const float* saveInvStd, int n, int c,
                                   int inner) {
    if (m_reference)
        cpuref::batchNormBackward(dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd, n, c, inner);
    else
        cpu::batchNormBackward(m_threads, dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd, n, c, inner);
}
void CpuBackend::layerNormForward(float* y, float* mean, float* rstd, const float* x, const float* gamma,
                                  const float* beta, int rows, int cols, float eps) {
    if (cols < 1) throw BackendError("layerNorm: needs at least one column");
    if (m_reference)
        cpuref::layerNormForward(y, mean, rstd, x, gamma, beta, rows, cols, eps);
    else
        cpu::layerNormForward(m_threads, y, mean, rstd, x, gamma, beta, rows, cols, eps);
}
void CpuBackend::layerNormBackward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                                   const float* gamma, const float* mean, const float* rstd, int rows, int cols) {
    if (m_reference)
        cpuref::layerNormBackward(dx, dgamma, dbeta, dy, x, gamma, mean, rstd, rows, cols);
    else
        cpu::layerNormBackward(m_threads, *m_workspace, dx, dgamma, dbeta, dy, x, gamma, mean, rstd, rows, cols);
}

// ---- dropout ------------------------------------------------------------------

void CpuBackend::dropoutForward(float* y, const float* x, int64_t n, float p, uint64_t seed) {
    if (!(p >= 0.0f && p <= 1.0f)) throw BackendError("dropout: probability " + std::to_string(p) + " not in [0, 1]");
    if (m_reference)
        cpuref::dropoutForward(y, x, n, p, seed);
    else
        cpu::dropoutForward(m_threads, y, x, n, p, seed);
}
void CpuBackend::dropoutBackward(float* dx, const float* dy, int64_t n, float p, uint64_t seed) {
    if (!(p >= 0.0f && p <= 1.0f)) throw BackendError("dropout: probability " + std::to_string(p) + " not in [0, 1]");
    if (m_reference)
        cpuref::dropoutBackward(dx, dy, n, p, seed);
    else
        cpu::dropoutBackward(m_threads, dx, dy, n, p, seed);
}

// ---- embedding ----------------------------------------------------------------
// Every id is checked before anything is written, so a bad batch leaves the outputs untouched.

void CpuBackend::embeddingForward(float* y, const float* table, const float* ids, int64_t count, int dim,
                                  int vocab) {
    checkIds("embedding", ids, count, vocab);
    for (int64_t i = 0; i < count; ++i)
        std::memcpy(y + i * dim, table + static_cast<int64_t>(ids[i]) * dim, sizeof(float) * static_cast<size_t>(dim));
}
void CpuBackend::embeddingBackward(float* dtable, const float* dy, const float* ids, int64_t count, int dim,
                                   int vocab) {
    checkIds("embedding backward", ids, count, vocab);
    for (int64_t i = 0; i < count; ++i) {
        float* row = dtable + static_cast<int64_t>(ids[i]) * dim;
        for (int j = 0; j < dim; ++j) row[j] += dy[i * dim + j];
    }
}

// ---- data movement --------------------------------------------------------------

void CpuBackend::gatherRows(void* dst, const void* src, int64_t srcRows, const int32_t* indices, int64_t count,
                            int64_t rowWords) {
    if (count <= 0 || rowWords <= 0) return;
    for (int64_t i = 0; i < count; ++i)  // every index first: a bad one leaves dst untouched
        if (indices[i] < 0 || indices[i] >= srcRows)
            throw BackendError("gatherRows: index " + std::to_string(indices[i]) + " at position " +
                               std::to_string(i) + " is outside [0, " + std::to_string(srcRows) + ")");
    const size_t rowBytes = static_cast<size_t>(rowWords) * 4;
    for (int64_t i = 0; i < count; ++i)
        std::memcpy(static_cast<char*>(dst) + static_cast<size_t>(i) * rowBytes,
                    static_cast<const char*>(src) + static_cast<size_t>(indices[i]) * rowBytes, rowBytes);
}

void CpuBackend::copyBlocks(float* dst, int64_t dstStride, const float* src, int64_t srcStride, int64_t blockLen,
                            int64_t count, bool accumulate) {
    if (!m_reference) {
        cpu::copyBlocks(m_threads, dst, dstStride, src, srcStride, blockLen, count, accumulate);
        return;
    }
    for (int64_t o = 0; o < count; ++o) {
        float* d = dst + o * dstStride;
        const float* s = src + o * srcStride;
        if (accumulate)
            for (int64_t j = 0; j < blockLen; ++j) d[j] += s[j];
        else
            std::memmove(d, s, sizeof(float) * static_cast<size_t>(blockLen));
    }
}

// ---- reductions -----------------------------------------------------------------

double CpuBackend::sum(const float* x, int64_t n) {
    if (!m_reference) return cpu::sum(m_threads, x, n);
    double acc = 0.0;
    for (int64_t i = 0; i < n; ++i) acc += x[i];
    return acc;
}
double CpuBackend::sumSquares(const float* x, int64_t n) {
    if (!m_reference) return cpu::sumSquares(m_threads, x, n);
    double acc = 0.0;
    for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(x[i]) * x[i];
    return acc;
}
bool CpuBackend::allFinite(const float* x, int64_t n) {
    if (!m_reference) return cpu::allFinite(m_threads, x, n);
    for (int64_t i = 0; i < n; ++i)
        if (!std::isfinite(x[i])) return false;
    return true;
}

// ---- optimizers -----------------------------------------------------------------

void CpuBackend::sgdUpdate(float* w, float* velocity, const float* grad, int64_t n, const SgdParams& p) {
    if (p.momentum != 0.0f && !velocity) throw BackendError("sgdUpdate: momentum needs a velocity buffer");
    if (m_reference)
        cpuref::sgdUpdate(w, velocity, grad, n, p);
    else
        cpu::sgdUpdate(m_threads, w, velocity, grad, n, p);
}
void CpuBackend::adamUpdate(float* w, float* m, float* v, const float* grad, int64_t n, const AdamParams& p) {
    if (p.step < 1) throw BackendError("adamUpdate: step is 1-based, got " + std::to_string(p.step));
    if (m_reference)
        cpuref::adamUpdate(w, m, v, grad, n, p);
    else
        cpu::adamUpdate(m_threads, w, m, v, grad, n, p);
}

}  // namespace strata
