// CudaBackend: Backend on one CUDA GPU (cuBLAS, cuDNN 9 and our kernels).
//
// All work runs in order on one compute stream owned by the backend; cuBLAS
// and cuDNN are bound to it. Memory comes from a caching allocator
// (CudaAllocator.h). Every CUDA, cuBLAS and cuDNN status is checked and
// turned into BackendError (CudaCheck.h); there is no fallback to the CPU.
// Arguments are checked by the Backend seam before any do* function here runs.
//
// Numerics (BackendOptions, fixed when the backend is made):
//   - GEMM and convolutions may use TF32 tensor cores (allowTf32; unset: on unless
//     the environment variable STRATA_CUDA_TF32 is "0").
//   - precision BF16 / F16, Backend.h's definition: gemm and the three
//     convolutions first round both inputs with our kernel (launchRoundFloat:
//     __float2bfloat16_rn / __float2half_rn, widened back to float32) into blocks of
//     the caching allocator, then run on float32 data:
//       gemm: cublasGemmEx, A/B/C CUDA_R_32F, compute CUBLAS_COMPUTE_32F_FAST_16BF /
//         _FAST_16F (bf16 / fp16 tensor cores, float32 accumulation). The inputs are
//         already exact in the 16-bit type, so however cuBLAS converts them, nothing
//         more is rounded.
//       convolutions: cuDNN on float32 descriptors with TF32 tensor-op math allowed
//         whatever allowTf32 says: every bf16 and fp16 value is exact in TF32 (10
//         mantissa bits, 8 exponent bits), so the products are those of the rounded
//         inputs and sums stay float32. The algorithm search skips FFT and Winograd,
//         which would round transformed values instead of the inputs. So bf16 and fp16
//         convolutions run at TF32 speed, not at 16-bit tensor-core speed; the results
//         are float32 (cuDNN's bf16 data path would also round the outputs to bf16).
//   - deterministic: cuDNN algorithms restricted to deterministic ones,
//     embedding backward by sorted segments instead of atomics. Reductions
//     (sum, sumSquares, allFinite, bias and norm gradients) never use atomics.
//   - Bad indices (labels, embedding ids, gathered rows) are found by the kernels
//     themselves (DeviceErrorFlag.h); the ops that take indices (softmaxCrossEntropy,
//     countCorrect, embeddingForward/Backward, gatherRows) therefore wait for their
//     kernel and throw BackendError at the call, naming the op in the words of
//     core/backend/BackendChecks.h, as the CPU does. That costs one stream
//     synchronization per such call; eagerIndexChecks = false defers the report to the
//     next synchronization point (synchronize, copyToHost, a host-result op), still
//     naming the op.
//
// Asynchronous uploads (double-buffered batch input), for the trainer:
//   UploadTicket t = backend.uploadAsync(deviceDst, hostSrc, bytes);
// copies hostSrc into one of two pinned staging buffers (so hostSrc may be
// reused at once), starts the host-to-device copy on a dedicated copy
// stream, and makes the compute stream wait for it: every op queued after
// uploadAsync sees the data. The copy itself waits only for the compute work
// that was queued before the PREVIOUS uploadAsync call, so with two device
// buffers used alternately (upload batch k+1 into B while step k reads A)
// the copy overlaps compute and never overwrites a buffer still being read.
// So deviceDst should be one of two LONG-LIVED device buffers used in strict
// turn. Any other destination (a first upload, the same buffer twice in a row, a
// buffer just allocated, which may be a cached block that queued work still uses,
// or one that gatherRows filled since) makes the copy wait for all compute work
// queued so far instead, so it is safe but not overlapped.
// waitUpload(t) blocks the host until that copy is done.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/backend/Backend.h"
#include "core/backend/CudaMemoryClasses.h"

// Opaque CUDA library handle types (cudaStream_t is CUstream_st*, and so on), so that this header needs no
// CUDA include path.
struct CUstream_st;
struct CUevent_st;
struct cublasContext;
struct cudnnContext;

namespace strata::gpu {

class CudaAllocator;
struct ConvPlanCache;

class CudaBackend : public Backend {
public:
    // Opens GPU `index`; throws BackendError when there is no driver or no such device.
    explicit CudaBackend(int index, const BackendOptions& options = {});
    ~CudaBackend() override;

    bool allowTf32() const { return m_allowTf32; }
    // The stream all of this backend's work runs on, in order (a collective that reads its results waits for
    // it: gpu/NcclCommunicator.h).
    CUstream_st* computeStream() const { return m_stream; }
    // Makes this backend's GPU the calling thread's current device.
    void activate() const;

    // ---- Backend ----
    Device device() const override { return Device::cuda(m_index); }

    void* allocate(size_t bytes) override;
    void deallocate(void* ptr, size_t bytes) override;
    void copyFromHost(void* dst, const void* hostSrc, size_t bytes) override;
    void copyToHost(void* hostDst, const void* src, size_t bytes) override;
    void copy(void* dst, const void* src, size_t bytes) override;
    void synchronize() override;
    size_t bytesInUse() const override;
    size_t peakBytes() const override;
    // Upper bound of the cuDNN workspace (and of the algorithms considered); MemoryEstimate counts it.
    static constexpr size_t kConvWorkspaceLimit = kCudaConvWorkspaceLimit;
    // The workspace allocated so far: the largest any chosen algorithm asked for.
    size_t workspaceBytes() const { return m_workspaceBytes; }
    // See the header comment.
    UploadTicket uploadAsync(void* deviceDst, const void* hostSrc, size_t bytes) override;
    void waitUpload(UploadTicket ticket) override;

protected:
    // Every op of core/backend/BackendOps.def without a default: `Ret doName(parameters) override;`.
#include "core/backend/BackendOpOverrides.def"

    // The ops with a default in Backend that run their own way here.
    // One cudnnConvolutionBiasActivationForward where cuDNN allows it (CudaDnn.cpp says which cases).
    void doConv2dForwardFused(float* y, const float* x, const float* w, const float* bias, bool relu,
                              const ConvDesc& d) override;
    // Our max-pool backward kernel with the ReLU mask applied in the same pass (no temporary).
    void doMaxPool2dReLUBackward(float* dx, const float* dy, const float* x, const float* y, const PoolDesc& d,
                                 bool overwriteDx) override;
    // Both reductions queued, then one 16-byte copy and one stream synchronization.
    StepMetrics doStepMetrics(const float* losses, const float* logits, const int32_t* labels, int rows,
                              int cols) override;
    // One gather kernel that checks the indices on the device (DeviceErrorFlag.h).
    void doGatherRows(void* dst, const void* src, int64_t srcRows, const int32_t* indices, int64_t count,
                      int64_t rowWords) override;

private:
    struct Staging {
        void* host = nullptr;
        size_t capacity = 0;
        CUevent_st* done = nullptr;
        UploadTicket ticket = 0;
    };

    // A gemm/convolution input rounded to m_precision in an allocator block (or the input itself in F32),
    // freed at scope exit: stream order keeps the block valid for the work already queued on it.
    class RoundedOperand {
    public:
        RoundedOperand(CudaBackend& backend, const float* src, int64_t count);
        ~RoundedOperand();
        RoundedOperand(const RoundedOperand&) = delete;
        RoundedOperand& operator=(const RoundedOperand&) = delete;
        const float* get() const { return m_rounded ? m_rounded : m_src; }

    private:
        CudaBackend& m_backend;
        const float* m_src;
        float* m_rounded = nullptr;
    };

    void release() noexcept;
    void syncAndCheck();  // stream sync, then report kernel-detected errors
    void checkDeviceErrors();
    double reduce(const float* x, int64_t n, int op);
    float* workspace(size_t bytes);
    // Per-channel constants for cuDNN batch norm when gamma or beta is null.
    const float* constantVector(float value, int c, float** holder, int* holderSize);

    int m_index = 0;
    std::string m_label;  // "cuda:0"
    bool m_allowTf32 = true;

    std::unique_ptr<CudaAllocator> m_allocator;
    std::unique_ptr<ConvPlanCache> m_plans;
    CUstream_st* m_stream = nullptr;
    CUstream_st* m_copyStream = nullptr;
    CUevent_st* m_computeMark = nullptr;
    bool m_computeMarked = false;
    const void* m_uploadDst[2] = {nullptr, nullptr};  // the last two uploadAsync destinations
    cublasContext* m_cublas = nullptr;
    cudnnContext* m_cudnn = nullptr;

    int* m_errorFlag = nullptr;         // device, kDeviceErrorWords ints
    int* m_errorHost = nullptr;         // pinned
    bool m_errorArmed = false;          // a validating kernel ran since the last check
    double* m_reduceScratch = nullptr;  // device partials, then two result words (a double, a count)
    void* m_resultHost = nullptr;       // pinned, 16 bytes
    float* m_workspace = nullptr;
    size_t m_workspaceBytes = 0;
    float* m_ones = nullptr;
    int m_onesSize = 0;
    float* m_zeros = nullptr;
    int m_zerosSize = 0;

    Staging m_staging[2];
    int m_nextStaging = 0;
    UploadTicket m_lastTicket = 0;
};

}  // namespace strata::gpu
