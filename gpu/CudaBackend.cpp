// CudaBackend: lifetime, memory, uploads, and the ops built on our kernels and cuBLAS.
// The cuDNN ops (convolution, pooling, batch norm, softmax) are in CudaDnn.cpp.
#include "gpu/CudaBackend.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include <cuda_runtime_api.h>

#include "core/backend/BackendChecks.h"
#include "gpu/ActivationKernels.cuh"
#include "gpu/CastKernels.cuh"
#include "gpu/CudaAllocator.h"
#include "gpu/CudaDnnPlans.h"
#include "gpu/CudaLibCheck.h"
#include "gpu/DeviceErrorFlag.h"
#include "gpu/DropoutKernels.cuh"
#include "gpu/ElementwiseKernels.cuh"
#include "gpu/EmbeddingKernels.cuh"
#include "gpu/LayerNormKernels.cuh"
#include "gpu/LossKernels.cuh"
#include "gpu/OptimizerKernels.cuh"
#include "gpu/PoolingKernels.cuh"
#include "gpu/ReduceKernels.cuh"
#include "gpu/SequenceKernels.cuh"
#include "gpu/UpsampleKernels.cuh"

namespace strata::gpu {

namespace {

bool tf32Allowed(const BackendOptions& options) {
    if (options.allowTf32) return *options.allowTf32;
    const char* v = std::getenv("STRATA_CUDA_TF32");
    return !(v && std::string(v) == "0");
}

}  // namespace

// ---- lifetime -------------------------------------------------------------------

CudaBackend::CudaBackend(int index, const BackendOptions& options)
    : Backend(Traits{"cuda", /*reducedPrecision=*/true, /*alwaysDeterministic=*/false, /*hostMemory=*/false}, options),
      m_index(index),
      m_label("cuda:" + std::to_string(index)) {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        throw BackendError(
            m_label + ": no CUDA driver or device (cudaGetDeviceCount: " + std::string(cudaGetErrorString(err)) + ")");
    }
    if (index < 0 || index >= count)
        throw BackendError(m_label + ": no such device (" + std::to_string(count) + " CUDA device" +
                           (count == 1 ? "" : "s") + " present)");
    m_allowTf32 = tf32Allowed(options);
    try {
        CUDA_CHECK(cudaSetDevice(m_index));
        m_allocator = std::make_unique<CudaAllocator>(m_label);
        m_plans = std::make_unique<ConvPlanCache>();
        CUDA_CHECK(cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking));
        CUDA_CHECK(cudaStreamCreateWithFlags(&m_copyStream, cudaStreamNonBlocking));
        CUDA_CHECK(cudaEventCreateWithFlags(&m_computeMark, cudaEventDisableTiming));
        for (Staging& s : m_staging) CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
        CUBLAS_CHECK(cublasCreate(&m_cublas));
        CUBLAS_CHECK(cublasSetStream(m_cublas, m_stream));
        CUBLAS_CHECK(cublasSetMathMode(m_cublas, m_allowTf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
        CUDNN_CHECK(cudnnCreate(&m_cudnn));
        CUDNN_CHECK(cudnnSetStream(m_cudnn, m_stream));
        CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&m_errorFlag), kDeviceErrorWords * sizeof(int)));
        // On the compute stream: a non-blocking stream is not ordered after the legacy default stream.
        CUDA_CHECK(cudaMemsetAsync(m_errorFlag, 0, kDeviceErrorWords * sizeof(int), m_stream));
        CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&m_errorHost), kDeviceErrorWords * sizeof(int)));
        CUDA_CHECK(
            cudaMalloc(reinterpret_cast<void**>(&m_reduceScratch), (reduceScratchDoubles() + 2) * sizeof(double)));
        CUDA_CHECK(cudaMallocHost(&m_resultHost, 16));
    } catch (...) {
        release();
        throw;
    }
}

CudaBackend::~CudaBackend() { release(); }

void CudaBackend::release() noexcept {
    // Teardown reports nothing: a destructor cannot throw, and a failed context has nothing left to free.
    (void)cudaSetDevice(m_index);
    if (m_stream) (void)cudaStreamSynchronize(m_stream);
    if (m_copyStream) (void)cudaStreamSynchronize(m_copyStream);
    m_plans.reset();
    if (m_workspace && m_allocator) {
        try {
            m_allocator->deallocate(m_workspace);
        } catch (...) {
        }
    }
    m_workspace = nullptr;
    m_allocator.reset();  // frees every device block (ones/zeros vectors included)
    if (m_cudnn) (void)cudnnDestroy(m_cudnn);
    if (m_cublas) (void)cublasDestroy(m_cublas);
    for (Staging& s : m_staging) {
        if (s.host) (void)cudaFreeHost(s.host);
        if (s.done) (void)cudaEventDestroy(s.done);
        s = Staging{};
    }
    if (m_computeMark) (void)cudaEventDestroy(m_computeMark);
    if (m_errorFlag) (void)cudaFree(m_errorFlag);
    if (m_errorHost) (void)cudaFreeHost(m_errorHost);
    if (m_reduceScratch) (void)cudaFree(m_reduceScratch);
    if (m_resultHost) (void)cudaFreeHost(m_resultHost);
    if (m_copyStream) (void)cudaStreamDestroy(m_copyStream);
    if (m_stream) (void)cudaStreamDestroy(m_stream);
    m_cudnn = nullptr;
    m_cublas = nullptr;
    m_computeMark = nullptr;
    m_errorFlag = nullptr;
    m_errorHost = nullptr;
    m_reduceScratch = nullptr;
    m_resultHost = nullptr;
    m_copyStream = nullptr;
    m_stream = nullptr;
    (void)cudaGetLastError();
}

void CudaBackend::activate() const { CUDA_CHECK(cudaSetDevice(m_index)); }

// ---- rounded operands ---------------------------------------------------------------

CudaBackend::RoundedOperand::RoundedOperand(CudaBackend& backend, const float* src, int64_t count)
    : m_backend(backend), m_src(src) {
    if (backend.computePrecision() == ComputePrecision::F32 || count <= 0) return;
    m_rounded = static_cast<float*>(backend.m_allocator->allocate(static_cast<size_t>(count) * sizeof(float)));
    try {
        launchRoundFloat(backend.m_stream, m_rounded, src, count, backend.computePrecision() == ComputePrecision::BF16);
    } catch (...) {
        backend.m_allocator->deallocate(m_rounded);
        throw;
    }
}

CudaBackend::RoundedOperand::~RoundedOperand() {
    if (!m_rounded) return;
    try {
        m_backend.m_allocator->deallocate(m_rounded);
    } catch (...) {
    }
}

float* CudaBackend::workspace(size_t bytes) {
    if (bytes == 0) return nullptr;
    if (bytes > m_workspaceBytes) {
        if (m_workspace) m_allocator->deallocate(m_workspace);
        m_workspace = nullptr;
        m_workspaceBytes = 0;
        m_workspace = static_cast<float*>(m_allocator->allocate(bytes));
        m_workspaceBytes = bytes;
    }
    return m_workspace;
}

// ---- memory -----------------------------------------------------------------------

void* CudaBackend::allocate(size_t bytes) {
    activate();
    return m_allocator->allocate(bytes);
}

void CudaBackend::deallocate(void* ptr, size_t) { m_allocator->deallocate(ptr); }

size_t CudaBackend::bytesInUse() const { return m_allocator->bytesInUse(); }
size_t CudaBackend::peakBytes() const { return m_allocator->peakBytes(); }
void CudaBackend::copyFromHost(void* dst, const void* hostSrc, size_t bytes) {
    if (bytes == 0) return;
    activate();
    // From pageable memory the driver stages the data before returning, so hostSrc is free to reuse at once.
    CUDA_CHECK(cudaMemcpyAsync(dst, hostSrc, bytes, cudaMemcpyHostToDevice, m_stream));
}

void CudaBackend::copyToHost(void* hostDst, const void* src, size_t bytes) {
    activate();
    if (bytes > 0) CUDA_CHECK(cudaMemcpyAsync(hostDst, src, bytes, cudaMemcpyDeviceToHost, m_stream));
    syncAndCheck();
}

void CudaBackend::copy(void* dst, const void* src, size_t bytes) {
    if (bytes == 0 || dst == src) return;
    activate();
    const auto d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
    if (d < s + bytes && s < d + bytes) {
        // Overlapping ranges (memmove on the CPU): cudaMemcpyAsync leaves them undefined, so go through a copy.
        void* tmp = m_allocator->allocate(bytes);
        try {
            CUDA_CHECK(cudaMemcpyAsync(tmp, src, bytes, cudaMemcpyDeviceToDevice, m_stream));
            CUDA_CHECK(cudaMemcpyAsync(dst, tmp, bytes, cudaMemcpyDeviceToDevice, m_stream));
        } catch (...) {
            m_allocator->deallocate(tmp);
            throw;
        }
        m_allocator->deallocate(tmp);  // stream order keeps it valid for the queued copies
        return;
    }
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, m_stream));
}

void CudaBackend::synchronize() {
    activate();
    syncAndCheck();
}

void CudaBackend::syncAndCheck() {
    if (m_errorArmed) {
        CUDA_CHECK(cudaMemcpyAsync(m_errorHost, m_errorFlag, kDeviceErrorWords * sizeof(int), cudaMemcpyDeviceToHost,
                                   m_stream));
    }
    CUDA_CHECK(cudaStreamSynchronize(m_stream));
    if (m_errorArmed) checkDeviceErrors();
}

void CudaBackend::checkDeviceErrors() {
    m_errorArmed = false;
    const int code = m_errorHost[0];
    if (code == kDeviceOk) return;
    const int value = m_errorHost[1], position = m_errorHost[2], limit = m_errorHost[3];
    std::memset(m_errorHost, 0, kDeviceErrorWords * sizeof(int));
    CUDA_CHECK(cudaMemsetAsync(m_errorFlag, 0, kDeviceErrorWords * sizeof(int), m_stream));
    CUDA_CHECK(cudaStreamSynchronize(m_stream));
    // The same words as the CPU's host checks (core/backend/BackendChecks.h).
    switch (code) {
        case kEmbeddingForwardId:
        case kEmbeddingBackwardId:
            throw BackendError(
                badIdMessage(code == kEmbeddingForwardId ? BackendOp::EmbeddingForward : BackendOp::EmbeddingBackward,
                             m_label, std::bit_cast<float>(value), position, limit));
        case kCrossEntropyLabel:
            throw BackendError(badLabelMessage(BackendOp::SoftmaxCrossEntropy, m_label, value, position, limit));
        case kGatherRowIndex:
            throw BackendError(badRowIndexMessage(BackendOp::GatherRows, m_label, value, position, limit));
        case kCountCorrectLabel:
            throw BackendError(badLabelMessage(BackendOp::CountCorrect, m_label, value, position, limit));
        default: throw BackendError(m_label + ": a kernel reported error code " + std::to_string(code));
    }
}

// ---- uploads ------------------------------------------------------------------------

CudaBackend::UploadTicket CudaBackend::uploadAsync(void* deviceDst, const void* hostSrc, size_t bytes) {
    activate();
    Staging& slot = m_staging[m_nextStaging];
    m_nextStaging ^= 1;
    // The slot's previous copy must have left the staging buffer before it is refilled.
    if (slot.ticket != 0) CUDA_CHECK(cudaEventSynchronize(slot.done));
    if (slot.capacity < bytes) {
        if (slot.host) CUDA_CHECK(cudaFreeHost(slot.host));
        slot.host = nullptr;
        slot.capacity = 0;
        const size_t cap = CudaAllocator::roundSize(bytes);
        CUDA_CHECK(cudaMallocHost(&slot.host, cap));
        slot.capacity = cap;
    }
    if (bytes > 0) std::memcpy(slot.host, hostSrc, bytes);
    // Double-buffer rule: wait for the compute work queued before the previous upload, then mark now.
    // That covers every reader of deviceDst only when the uploads alternate strictly (deviceDst is the
    // destination before last, not the last one too). Otherwise wait for all compute work queued so far:
    // a first upload, a new buffer (maybe a cached block that queued work still uses), the same buffer
    // twice in a row (the ops reading the last upload were queued after the mark), or a buffer gatherRows
    // filled since (see there).
    const bool alternating = m_computeMarked && deviceDst == m_uploadDst[1] && deviceDst != m_uploadDst[0];
    if (!alternating) CUDA_CHECK(cudaEventRecord(m_computeMark, m_stream));
    CUDA_CHECK(cudaStreamWaitEvent(m_copyStream, m_computeMark, 0));
    CUDA_CHECK(cudaEventRecord(m_computeMark, m_stream));
    m_computeMarked = true;
    m_uploadDst[1] = m_uploadDst[0];
    m_uploadDst[0] = deviceDst;
    if (bytes > 0) CUDA_CHECK(cudaMemcpyAsync(deviceDst, slot.host, bytes, cudaMemcpyHostToDevice, m_copyStream));
    CUDA_CHECK(cudaEventRecord(slot.done, m_copyStream));
    CUDA_CHECK(cudaStreamWaitEvent(m_stream, slot.done, 0));
    slot.ticket = ++m_lastTicket;
    return slot.ticket;
}

void CudaBackend::waitUpload(UploadTicket ticket) {
    activate();
    for (Staging& s : m_staging)
        if (s.ticket == ticket) {
            CUDA_CHECK(cudaEventSynchronize(s.done));
            return;
        }
    // An older ticket: its slot has been reused, which already waited for it.
}

// ---- element-wise ---------------------------------------------------------------------

void CudaBackend::doFill(float* y, float value, int64_t n) {
    activate();
    launchFill(m_stream, y, value, n);
}

void CudaBackend::doZero(void* y, size_t bytes) {
    if (bytes == 0) return;
    activate();
    CUDA_CHECK(cudaMemsetAsync(y, 0, bytes, m_stream));
}

void CudaBackend::doScale(float* y, float alpha, int64_t n) {
    activate();
    launchScale(m_stream, y, alpha, n);
}

void CudaBackend::doAxpy(float* y, float alpha, const float* x, int64_t n) {
    activate();
    launchAxpy(m_stream, y, alpha, x, n);
}

void CudaBackend::doAdd(float* y, const float* a, const float* b, int64_t n) {
    activate();
    launchAdd(m_stream, y, a, b, n);
}

void CudaBackend::doMul(float* y, const float* a, const float* b, int64_t n) {
    activate();
    launchMul(m_stream, y, a, b, n);
}

// ---- linear algebra --------------------------------------------------------------------

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands, keep the flags.
void CudaBackend::doGemm(bool transA, bool transB, int m, int n, int k, float alpha, const float* a, int lda,
                         const float* b, int ldb, float beta, float* c, int ldc) {
    activate();
    const ComputePrecision precision = computePrecision();
    if (precision != ComputePrecision::F32) {
        // Spans of row-major operands with leading dimensions: (rows - 1) * ld + used columns.
        const int64_t spanA = k == 0 ? 0 : int64_t(transA ? k : m) * lda - lda + (transA ? m : k);
        const int64_t spanB = k == 0 ? 0 : int64_t(transB ? n : k) * ldb - ldb + (transB ? k : n);
        RoundedOperand ra(*this, a, spanA), rb(*this, b, spanB);
        const cublasComputeType_t compute =
            precision == ComputePrecision::BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F_FAST_16F;
        try {
            CUBLAS_CHECK(cublasGemmEx(m_cublas, transB ? CUBLAS_OP_T : CUBLAS_OP_N, transA ? CUBLAS_OP_T : CUBLAS_OP_N,
                                      n, m, k, &alpha, rb.get(), CUDA_R_32F, ldb, ra.get(), CUDA_R_32F, lda, &beta, c,
                                      CUDA_R_32F, ldc, compute, CUBLAS_GEMM_DEFAULT));
        } catch (const BackendError& e) {
            // Say which op and precision failed (CUBLAS_STATUS_NOT_SUPPORTED on a GPU without 16-bit tensor cores).
            throw BackendError("gemm in " + std::string(computePrecisionName(precision)) + " on " + m_label + ": " +
                               e.what());
        }
        return;
    }
    CUBLAS_CHECK(cublasSgemm(m_cublas, transB ? CUBLAS_OP_T : CUBLAS_OP_N, transA ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
                             &alpha, b, ldb, a, lda, &beta, c, ldc));
}

// One cuBLAS call for the whole batch (row-major as column-major with A and B swapped, as doGemm).
void CudaBackend::doGemmStridedBatched(bool transA, bool transB, int m, int n, int k, float alpha, const float* a,
                                       int lda, int64_t strideA, const float* b, int ldb, int64_t strideB, float beta,
                                       float* c, int ldc, int64_t strideC, int count) {
    activate();
    const ComputePrecision precision = computePrecision();
    if (precision != ComputePrecision::F32) {
        // The rounded copies keep the operands' layout: spans of every product, strides included.
        const int64_t spanA = k == 0 ? 0 : int64_t(transA ? k : m) * lda - lda + (transA ? m : k);
        const int64_t spanB = k == 0 ? 0 : int64_t(transB ? n : k) * ldb - ldb + (transB ? k : n);
        RoundedOperand ra(*this, a, spanA == 0 ? 0 : spanA + (count - 1) * strideA),
            rb(*this, b, spanB == 0 ? 0 : spanB + (count - 1) * strideB);
        const cublasComputeType_t compute =
            precision == ComputePrecision::BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F_FAST_16F;
        try {
            CUBLAS_CHECK(cublasGemmStridedBatchedEx(m_cublas, transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                                                    transA ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, rb.get(),
                                                    CUDA_R_32F, ldb, strideB, ra.get(), CUDA_R_32F, lda, strideA, &beta,
                                                    c, CUDA_R_32F, ldc, strideC, count, compute, CUBLAS_GEMM_DEFAULT));
        } catch (const BackendError& e) {
            throw BackendError("gemmStridedBatched in " + std::string(computePrecisionName(precision)) + " on " +
                               m_label + ": " + e.what());
        }
        return;
    }
    CUBLAS_CHECK(cublasSgemmStridedBatched(m_cublas, transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                                           transA ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb, strideB, a, lda,
                                           strideA, &beta, c, ldc, strideC, count));
}

void CudaBackend::doAddBiasRows(float* y, const float* bias, int rows, int cols) {
    activate();
    launchAddBiasRows(m_stream, y, bias, rows, cols);
}

// Bias gradients are column sums, done as matrix-vector products with a vector of ones: cuBLAS spreads
// them over the whole GPU (a kernel with one thread per column would walk thousands of rows serially),
// and its gemv is deterministic (no atomics) and runs in plain float32 whatever the TF32 setting.
void CudaBackend::doSumRows(float* dbias, const float* dy, int rows, int cols) {
    if (rows <= 0 || cols <= 0) return;
    activate();
    const float* ones = constantVector(1.0f, rows, &m_ones, &m_onesSize);
    const float one = 1.0f;
    // Row-major dy [rows, cols] is column-major cols x rows: dbias (+)= dy_cm * ones.
    CUBLAS_CHECK(cublasSgemv(m_cublas, CUBLAS_OP_N, cols, rows, &one, dy, cols, ones, 1, &one, dbias, 1));
}

void CudaBackend::doAddBiasChannels(float* y, const float* bias, int n, int c, int inner) {
    activate();
    launchAddBiasChannels(m_stream, y, bias, n, c, inner);
}

void CudaBackend::doSumChannels(float* dbias, const float* dy, int n, int c, int inner) {
    if (n <= 0 || c <= 0 || inner <= 0) return;
    if (inner == 1) return doSumRows(dbias, dy, n, c);
    activate();
    // Two column sums: over the positions of each (image, channel) row of [n*c, inner], then over images.
    const int64_t rows = int64_t(n) * c;
    if (rows > std::numeric_limits<int>::max()) throw BackendError("sumChannels: n * c is too large");
    const float* ones = constantVector(1.0f, std::max(inner, n), &m_ones, &m_onesSize);
    float* perRow = static_cast<float*>(m_allocator->allocate(size_t(rows) * sizeof(float)));
    const float one = 1.0f, zero = 0.0f;
    try {
        // Row-major [n*c, inner] is column-major inner x (n*c): perRow = dy_cm^T * ones.
        CUBLAS_CHECK(cublasSgemv(m_cublas, CUBLAS_OP_T, inner, int(rows), &one, dy, inner, ones, 1, &zero, perRow, 1));
        // perRow is row-major [n, c], column-major c x n: dbias (+)= perRow_cm * ones.
        CUBLAS_CHECK(cublasSgemv(m_cublas, CUBLAS_OP_N, c, n, &one, perRow, c, ones, 1, &one, dbias, 1));
    } catch (...) {
        m_allocator->deallocate(perRow);
        throw;
    }
    m_allocator->deallocate(perRow);  // stream order keeps it valid for the queued gemv
}

// ---- pooling over an axis ---------------------------------------------------------------

void CudaBackend::doMeanPoolForward(float* y, const float* x, int outer, int len, int inner) {
    activate();
    launchMeanPoolForward(m_stream, y, x, outer, len, inner);
}

void CudaBackend::doMeanPoolBackward(float* dx, const float* dy, int outer, int len, int inner) {
    activate();
    launchMeanPoolBackward(m_stream, dx, dy, outer, len, inner);
}

void CudaBackend::doSequencePoolForward(float* y, const float* x, const float* keep, int batch, int len, int dim,
                                        PoolMode mode) {
    activate();
    launchSequencePoolForward(m_stream, y, x, keep, batch, len, dim, mode);
}

void CudaBackend::doSequencePoolBackward(float* dx, const float* dy, const float* x, const float* y, const float* keep,
                                         int batch, int len, int dim, PoolMode mode) {
    activate();
    launchSequencePoolBackward(m_stream, dx, dy, x, y, keep, batch, len, dim, mode);
}

// ---- activations --------------------------------------------------------------------------

void CudaBackend::doActivationForward(float* y, const float* x, int64_t n, Activation act, float alpha) {
    activate();
    launchActivationForward(m_stream, y, x, n, static_cast<int>(act), alpha);
}

void CudaBackend::doActivationBackward(float* dx, const float* dy, const float* x, const float* y, int64_t n,
                                       Activation act, float alpha, bool overwriteDx) {
    activate();
    if (overwriteDx && n > 0) doZero(dx, static_cast<size_t>(n) * sizeof(float));
    launchActivationBackward(m_stream, dx, dy, x, y, n, static_cast<int>(act), alpha);
}

void CudaBackend::doClipForward(float* y, const float* x, int64_t n, float lo, float hi) {
    activate();
    launchClipForward(m_stream, y, x, n, lo, hi);
}

void CudaBackend::doClipBackward(float* dx, const float* dy, const float* x, int64_t n, float lo, float hi,
                                 bool overwriteDx) {
    activate();
    if (overwriteDx && n > 0) doZero(dx, static_cast<size_t>(n) * sizeof(float));
    launchClipBackward(m_stream, dx, dy, x, n, lo, hi);
}

// ---- upsampling -----------------------------------------------------------------------------

void CudaBackend::doUpsample2dForward(float* y, const float* x, const UpsampleDesc& d) {
    activate();
    launchUpsample2dForward(m_stream, y, x, d);
}

void CudaBackend::doUpsample2dBackward(float* dx, const float* dy, const UpsampleDesc& d, bool overwriteDx) {
    activate();
    if (overwriteDx) doZero(dx, static_cast<size_t>(d.inputSize()) * sizeof(float));
    launchUpsample2dBackward(m_stream, dx, dy, d);
}

// ---- losses ---------------------------------------------------------------------------------

void CudaBackend::doMaskedSoftmaxForward(float* y, const float* x, const float* keep, int groups, int rowsPerGroup,
                                         int cols) {
    activate();
    launchMaskedSoftmaxForward(m_stream, y, x, keep, groups, rowsPerGroup, cols);
}

void CudaBackend::doSoftmaxCrossEntropy(float* losses, float* dlogits, const float* logits, const int32_t* labels,
                                        int rows, int cols, float gradScale) {
    activate();
    launchSoftmaxCrossEntropy(m_stream, losses, dlogits, logits, labels, rows, cols, gradScale, m_errorFlag);
    m_errorArmed = true;
    if (eagerIndexChecks()) syncAndCheck();  // a bad label throws here, at the call, as on the CPU
}

void CudaBackend::doMseLoss(float* losses, float* dpred, const float* pred, const float* target, int rows, int cols,
                            float gradScale) {
    activate();
    launchMseLoss(m_stream, losses, dpred, pred, target, rows, cols, gradScale);
}

void CudaBackend::doRobustLoss(float* losses, float* dpred, const float* pred, const float* target, int rows, int cols,
                               float delta, float gradScale) {
    activate();
    launchRobustLoss(m_stream, losses, dpred, pred, target, rows, cols, delta, gradScale);
}

void CudaBackend::doBceWithLogits(float* losses, float* dlogits, const float* logits, const float* target, int rows,
                                  int cols, float gradScale) {
    activate();
    launchBceWithLogits(m_stream, losses, dlogits, logits, target, rows, cols, gradScale);
}

int64_t CudaBackend::doCountCorrect(const float* logits, const int32_t* labels, int rows, int cols) {
    activate();
    long long* result = reinterpret_cast<long long*>(m_reduceScratch + reduceScratchDoubles());
    launchCountCorrect(m_stream, result, logits, labels, rows, cols, m_errorFlag);
    m_errorArmed = true;
    CUDA_CHECK(cudaMemcpyAsync(m_resultHost, result, sizeof(long long), cudaMemcpyDeviceToHost, m_stream));
    syncAndCheck();
    long long count = 0;
    std::memcpy(&count, m_resultHost, sizeof count);
    return count;
}

Backend::StepMetrics CudaBackend::doStepMetrics(const float* losses, const float* logits, const int32_t* labels,
                                                int rows, int cols) {
    StepMetrics m;
    activate();
    // Result words after the partials: [0] the loss sum (double), [1] the correct count (long long).
    double* results = m_reduceScratch + reduceScratchDoubles();
    launchReduce(m_stream, results, m_reduceScratch, losses, rows, ReduceOp::Sum);
    if (labels) {
        launchCountCorrect(m_stream, reinterpret_cast<long long*>(results + 1), logits, labels, rows, cols,
                           m_errorFlag);
        m_errorArmed = true;
    }
    CUDA_CHECK(cudaMemcpyAsync(m_resultHost, results, labels ? 16 : 8, cudaMemcpyDeviceToHost, m_stream));
    syncAndCheck();  // also reports a bad label found by an earlier op whose check was deferred
    std::memcpy(&m.lossSum, m_resultHost, sizeof m.lossSum);
    if (labels) {
        long long count = 0;
        std::memcpy(&count, static_cast<const char*>(m_resultHost) + 8, sizeof count);
        m.correct = count;
    }
    return m;
}

// ---- layer norm ---------------------------------------------------------------------------------

void CudaBackend::doLayerNormForward(float* y, float* mean, float* rstd, const float* x, const float* gamma,
                                     const float* beta, int rows, int cols, float eps) {
    activate();
    launchLayerNormForward(m_stream, y, mean, rstd, x, gamma, beta, rows, cols, eps);
}

void CudaBackend::doLayerNormBackward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                                      const float* gamma, const float* mean, const float* rstd, int rows, int cols) {
    activate();
    const size_t bytes = dgamma || dbeta ? layerNormBackwardScratchBytes(rows, cols) : 0;
    void* scratch = bytes ? m_allocator->allocate(bytes) : nullptr;
    try {
        launchLayerNormBackward(m_stream, dx, dgamma, dbeta, dy, x, gamma, mean, rstd, rows, cols, scratch, bytes);
    } catch (...) {
        if (scratch) m_allocator->deallocate(scratch);
        throw;
    }
    if (scratch) m_allocator->deallocate(scratch);  // stream order keeps it valid for the queued kernels
}

// ---- dropout --------------------------------------------------------------------------------------

void CudaBackend::doDropoutForward(float* y, const float* x, int64_t n, float p, uint64_t seed, uint64_t first) {
    activate();
    launchDropoutForward(m_stream, y, x, n, p, seed, first);
}

void CudaBackend::doDropoutBackward(float* dx, const float* dy, int64_t n, float p, uint64_t seed, uint64_t first) {
    activate();
    launchDropoutBackward(m_stream, dx, dy, n, p, seed, first);
}

// ---- embedding --------------------------------------------------------------------------------------

void CudaBackend::doEmbeddingForward(float* y, const float* table, const float* ids, int64_t count, int dim,
                                     int vocab) {
    activate();
    launchEmbeddingForward(m_stream, y, table, ids, count, dim, vocab, m_errorFlag);
    m_errorArmed = true;
    if (eagerIndexChecks()) syncAndCheck();  // a bad id throws here, at the call, as on the CPU
}

void CudaBackend::doEmbeddingBackward(float* dtable, const float* dy, const float* ids, int64_t count, int dim,
                                      int vocab) {
    activate();
    if (!deterministic()) {
        launchEmbeddingBackwardAtomic(m_stream, dtable, dy, ids, count, dim, vocab, m_errorFlag);
    } else {
        const size_t bytes = embeddingBackwardSortedScratchBytes(count, vocab);
        void* scratch = bytes ? m_allocator->allocate(bytes) : nullptr;
        try {
            launchEmbeddingBackwardSorted(m_stream, dtable, dy, ids, count, dim, vocab, m_errorFlag, scratch, bytes);
        } catch (...) {
            m_allocator->deallocate(scratch);
            throw;
        }
        m_allocator->deallocate(scratch);  // stream order makes the block safe to hand out again
    }
    m_errorArmed = true;
    if (eagerIndexChecks()) syncAndCheck();
}

// ---- data movement ------------------------------------------------------------------------------------

void CudaBackend::doCopyBlocks(float* dst, int64_t dstStride, const float* src, int64_t srcStride, int64_t blockLen,
                               int64_t count, bool accumulate) {
    activate();
    launchCopyBlocks(m_stream, dst, dstStride, src, srcStride, blockLen, count, accumulate);
}

void CudaBackend::doReblock(float* dst, int dstBlock, const float* src, int srcBlock, int n, int c, int64_t inner,
                            bool accumulate) {
    activate();
    launchReblock(m_stream, dst, dstBlock, src, srcBlock, n, c, inner, accumulate);
}

void CudaBackend::doGatherRows(void* dst, const void* src, int64_t srcRows, const int32_t* indices, int64_t count,
                               int64_t rowWords) {
    activate();
    // A buffer filled here (the trainer's resident batches) is read by ops that no upload brackets, so
    // uploadAsync's alternation rule no longer covers them: its next upload into dst waits for all work.
    for (const void*& last : m_uploadDst)
        if (last == dst) last = nullptr;
    launchGatherRows(m_stream, dst, src, srcRows, indices, count, rowWords, m_errorFlag);
    m_errorArmed = true;
    if (eagerIndexChecks()) syncAndCheck();  // a bad index throws here, at the call, as on the CPU
}

// ---- reductions ----------------------------------------------------------------------------------------

double CudaBackend::reduce(const float* x, int64_t n, int op) {
    activate();
    double* result = m_reduceScratch + reduceScratchDoubles();
    launchReduce(m_stream, result, m_reduceScratch, x, n, static_cast<ReduceOp>(op));
    CUDA_CHECK(cudaMemcpyAsync(m_resultHost, result, sizeof(double), cudaMemcpyDeviceToHost, m_stream));
    syncAndCheck();
    double value = 0;
    std::memcpy(&value, m_resultHost, sizeof value);
    return value;
}

double CudaBackend::doSum(const float* x, int64_t n) { return reduce(x, n, static_cast<int>(ReduceOp::Sum)); }

double CudaBackend::doSumSquares(const float* x, int64_t n) {
    return reduce(x, n, static_cast<int>(ReduceOp::SumSquares));
}

bool CudaBackend::doAllFinite(const float* x, int64_t n) {
    return reduce(x, n, static_cast<int>(ReduceOp::NonFiniteCount)) == 0.0;
}

// ---- optimizers -------------------------------------------------------------------------------------------

void CudaBackend::doSgdUpdate(float* w, float* velocity, const float* grad, int64_t n, const SgdParams& p) {
    activate();
    launchSgdUpdate(m_stream, w, velocity, grad, n, p.lr, p.momentum, p.weightDecay, p.nesterov);
}

void CudaBackend::doAdamUpdate(float* w, float* m, float* v, const float* grad, int64_t n, const AdamParams& p) {
    activate();
    // Scalars in double, as PyTorch computes them in Python (and as the CPU reference does).
    const double bc1 = 1.0 - std::pow(static_cast<double>(p.beta1), static_cast<double>(p.step));
    const double bc2 = 1.0 - std::pow(static_cast<double>(p.beta2), static_cast<double>(p.step));
    const float stepSize = static_cast<float>(p.lr / bc1);
    const float bc2Sqrt = static_cast<float>(std::sqrt(bc2));
    const float decay = static_cast<float>(1.0 - static_cast<double>(p.lr) * p.weightDecay);
    launchAdamUpdate(m_stream, w, m, v, grad, n, p.beta1, p.beta2, p.eps, p.weightDecay, p.decoupled, stepSize, bc2Sqrt,
                     decay);
}

}  // namespace strata::gpu
