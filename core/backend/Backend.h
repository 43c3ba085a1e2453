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
// assume valid arguments. Every op is declared once, with its documentation,
// in BackendOps.def: the public op, its do* virtual, the registry of
// BackendOps.h and each backend's overrides are expanded from that list.
#pragma once

#include <chrono>
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

// HardSwish: x * min(max(x + 3, 0), 6) / 6 (MobileNetV3's; no parameter).
enum class Activation { ReLU, LeakyReLU, GELU, Sigmoid, Tanh, HardSwish };

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

// 2-D upsampling of NCHW [N, C, H, W] by whole factors to [N, C, H * scaleH, W * scaleW], with PyTorch's
// definitions (torch.nn.Upsample): nearest takes source pixel floor(dst / scale); bilinear reads source
// coordinate (dst + 0.5) / scale - 0.5 (clamped at 0), or dst * (in - 1) / (out - 1) with alignCorners, and
// mixes the two neighbours on each axis (the last one repeated at the edge).
struct UpsampleDesc {
    int n = 1, c = 1, h = 1, w = 1;
    int scaleH = 2, scaleW = 2;
    bool bilinear = false;
    bool alignCorners = false;  // bilinear only
    int outH() const { return h * scaleH; }
    int outW() const { return w * scaleW; }
    int64_t inputSize() const { return int64_t(n) * c * h * w; }
    int64_t outputSize() const { return int64_t(n) * c * outH() * outW(); }
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

    // The products' clock (the profile's): while set, the matrix products (gemm, gemmStridedBatched) and the
    // convolutions (conv2dForward, conv2dBackwardData, conv2dBackwardFilter and their fused forms, whose bias,
    // ReLU and bias gradient count with them) each add their wall milliseconds to *ms, timed between two
    // synchronize() calls so an asynchronous device's time is its own. They are the ops a compute precision
    // (ComputePrecision) changes; every other op runs the same in any. nullptr (the default): not timed.
    void setProductClock(double* ms) { m_productMs = ms; }

    // Helpers built on the above.
    Tensor empty(const Shape& shape, DType dtype = DType::F32);
    Tensor zeros(const Shape& shape, DType dtype = DType::F32);
    Tensor fromHost(const Shape& shape, const float* hostData);
    void toHost(const Tensor& t, float* hostDst);

    // A training step's metrics in one host result: stepMetrics (BackendOps.def).
    struct StepMetrics {
        double lossSum = 0;
        int64_t correct = 0;
    };

    // ---- the ops ------------------------------------------------------------------------------------------
    // Every op, declared and documented in BackendOps.def (element-wise, linear algebra, convolution and
    // pooling, activations and softmax, losses, normalization, dropout, embedding, data movement, reductions,
    // optimizer updates): `Ret name(parameters);` here, checked in Backend.cpp.
#define STRATA_DEFAULT(value) = value
#define STRATA_BACKEND_OP(Name, Ret, name, params) Ret name params;
#include "core/backend/BackendOps.def"

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

    // The ops, called by the public ones above after their checks, with the same arguments (so they may assume:
    // sizes >= 0, valid descriptors, required pointers present, on a host-memory backend indices in range); pure
    // but for the composed ops' defaults (Backend.cpp). A backend declares its overrides: BackendOpOverrides.def.
    // NOLINTBEGIN(bugprone-macro-parentheses): Ret is a type, which parentheses would not parse as
#define STRATA_BACKEND_OP(Name, Ret, name, params) virtual Ret do##Name params = 0;
#define STRATA_BACKEND_COMPOSED_OP(Name, Ret, name, params) virtual Ret do##Name params;
    // NOLINTEND(bugprone-macro-parentheses)
#include "core/backend/BackendOps.def"

private:
    std::string m_name;
    ComputePrecision m_precision;
    bool m_deterministic;
    bool m_eagerIndexChecks;
    bool m_hostMemory;
    double* m_productMs = nullptr;
    std::chrono::steady_clock::time_point productStart();
    void productEnd(std::chrono::steady_clock::time_point start);
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
