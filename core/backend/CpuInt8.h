// CpuInt8: oneDNN's integer (VNNI) primitives for the int8 engine (core/infer/Int8Engine): u8 x s8 convolution
// and matmul with an int32 accumulator, int32 bias, one float scale per output channel, the source's zero point
// and the destination's (uint8 output) or a float32 output, and u8 max pooling. Activations are NHWC (channels
// innermost), the layout oneDNN's int8 kernels run fastest on. Each kernel is built for one layer and keeps one
// oneDNN primitive per batch size, with the weights reordered once for it; some convolutions run Strata's own VNNI
// kernel instead, and the smallest matmul passes a plain loop (below), each giving oneDNN's values.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace strata::cpu {

// Empty when oneDNN runs int8 natively on this CPU (AVX512-VNNI or AMX, as oneDNN sees it: DNNL_MAX_CPU_ISA caps
// it); else why not. Without VNNI oneDNN would emulate the u8 x s8 dot products with several instructions each.
std::string int8Unavailable();

// Executions of each kind of kernel since the process started (all threads): proof that an int8 kernel ran
// (oneDNN's or Strata's own, which implementation() names).
struct Int8Counters {
    int64_t convolutions = 0, matmuls = 0, poolings = 0;
};
Int8Counters int8Counters();

// One layer's integer kernel. run() takes `batch` samples of uint8 input and writes uint8 (or float32) output,
// both NHWC / [batch, features]; `threads` OpenMP threads (0: all).
class Int8Kernel {
public:
    virtual ~Int8Kernel() = default;
    virtual void run(int threads, int64_t batch, const uint8_t* src, void* dst) = 0;
    // oneDNN's implementation ("jit_int8:avx512_core_vnni"), known after the first run.
    virtual std::string implementation() const = 0;
};

// y = scales[k] * (sum over the window of w * (x - srcZeroPoint) + bias[k]) plus dstZeroPoint, rounded half to even
// (a tie rounds with the zero point added, as oneDNN's kernels round) and saturated to 0..255 (f32Output: the
// scaled value as float32, dstZeroPoint unused). Where the CPU has AVX512-VNNI and int8SimdInUse, a convolution on
// 1 to 4 channels whose kernel rows hold at most 16 bytes (an image model's stem), or one with 16 filters on
// channels in fours, runs Strata's own VNNI kernel, faster there than oneDNN's (bench_int8_conv), giving oneDNN's
// values; STRATA_INT8_ONEDNN=1 (read when a kernel is made) keeps every convolution and matmul on oneDNN's.
struct Int8ConvSpec {
    int channels = 0, height = 0, width = 0, filters = 0, kernelH = 1, kernelW = 1;
    int strideH = 1, strideW = 1, padH = 0, padW = 0, dilationH = 1, dilationW = 1, groups = 1;
    std::vector<int8_t> weights;  // [filters, channels / groups, kernelH, kernelW]
    std::vector<int32_t> bias;    // [filters], or empty
    std::vector<float> scales;    // [filters]
    int srcZeroPoint = 0, dstZeroPoint = 0;
    bool f32Output = false;
};
// The same for a dense layer: x [batch, inputs], weights [outputs, inputs]. A pass of fewer than 4096
// multiply-adds (a classifier at batch 1) runs a plain loop, oneDNN's call costing more than its arithmetic.
struct Int8MatmulSpec {
    int inputs = 0, outputs = 0;
    std::vector<int8_t> weights;
    std::vector<int32_t> bias;
    std::vector<float> scales;
    int srcZeroPoint = 0, dstZeroPoint = 0;
    bool f32Output = false;
};
// Max pooling of uint8 values (its output on its input's grid; 2x2 windows of stride 2 in Strata's own loop where
// int8SimdInUse, oneDNN's otherwise); padding never wins (oneDNN pads with the lowest value).
struct Int8MaxPoolSpec {
    int channels = 0, height = 0, width = 0, kernelH = 2, kernelW = 2, strideH = 2, strideW = 2, padH = 0, padW = 0;
};

// dst[i] = tables[channel of i][src[i]] for values laid out [outer, channels, inner] (NHWC: inner 1), on
// `threads` OpenMP threads: an element-wise float32 layer (BatchNorm, a ReLU on a grid not starting at 0) from one
// uint8 grid to another, tabulated for each of the 256 values per channel (tables: channels x 256). The F32 form
// writes float32 values (the layer's output is not quantized).
void applyChannelTables(int threads, const uint8_t* src, uint8_t* dst, int64_t outer, int64_t channels, int64_t inner,
                        const uint8_t* tables);
void applyChannelTablesF32(int threads, const uint8_t* src, float* dst, int64_t outer, int64_t channels, int64_t inner,
                           const float* tables);

// Self-attention's core on uint8 values (the int8 engine's, for an int8 file that quantizes the attention's Q, K,
// V projection on a grid with zero point 128, its softmax weights and its heads' context): for each sample and head
// h, scores = (Q_h - 128)(K_h - 128)^T * qkv.scale^2 * scale, summed in int32 (u8 x s8; oneDNN's
// dnnl_gemm_u8s8s32); the softmax over the keys in float32 (keys whose id in `ids` is 0 weigh 0; no `ids`: none
// masked) with CpuFast's exp polynomial, 16 keys at a time on AVX-512 (CpuFast's own softmax where int8SimdInUse is
// false), its weights rounded onto `probs`; context_h = P_h (V_h - 128) * probs.scale * qkv.scale (int32 sums), rounded
// onto `context`. qkv: [batch, length, 3 x width] (Q, K, V side by side, each `heads` heads of width / heads); ids:
// [batch, length] float32 or null; context: [batch, length, width]. `threads` OpenMP threads over the samples' heads.
struct Int8AttentionSpec {
    int length = 0, width = 0, heads = 1;
    float scale = 1.0f;  // 1 / sqrt(width / heads)
    float qkvScale = 1.0f, probsScale = 1.0f, contextScale = 1.0f;
    int contextZeroPoint = 0;  // the Q, K, V grid's zero point is 128, the weights' 0
};
void int8AttentionCore(int threads, const Int8AttentionSpec& spec, int64_t batch, const uint8_t* qkv, const float* ids,
                       uint8_t* context);

// A uint8 grid: the value q stands for (q - zeroPoint) * scale (Quantize.h's ActivationQuant, which core/backend
// does not see).
struct Grid {
    float scale = 1.0f;
    int zeroPoint = 0;
};
// q = clamp(nearbyint(x / scale) + zeroPoint, 0, 255), as Quantize.h rounds.
uint8_t onGrid(float x, Grid g);

// The element-wise steps below run 16 values at a time on AVX-512 (where the int8 engine runs: AVX512-VNNI
// implies it) and one at a time elsewhere or under STRATA_NO_AVX512 (the tests' reference); both compute the same
// float32 operations in the same order (no fused multiply-adds), so their results are identical.
// dst[i] = onGrid(float(a[i] - za) * sa + float(b[i] - zb) * sb, out) for `count` values: Add of two uint8 grids.
void addOnGrids(int threads, const uint8_t* a, Grid ga, const uint8_t* b, Grid gb, uint8_t* dst, Grid out,
                int64_t count);
// dst[i] = onGrid(src[i], g) for `count` float32 values: the input's quantization (one channel, or channels last).
void quantizeToGrid(int threads, const float* src, uint8_t* dst, int64_t count, Grid g);
// dst[i] = float(src[i] - zeroPoint) * scale for `count` values: a float island's input (core/infer/Int8Engine).
void dequantizeFromGrid(int threads, const uint8_t* src, float* dst, int64_t count, Grid g);
// sums[s * channels + c] = the sum over the `positions` of sample s of (src[(s * positions + p) * channels + c] -
// zeroPoint), for uint8 values laid out [samples, positions, channels] (NHWC): a global average pooling's sums.
void channelSums(int threads, const uint8_t* src, int64_t samples, int64_t positions, int64_t channels, int zeroPoint,
                 int64_t* sums);
bool int8SimdInUse();  // whether the steps above take their AVX-512 path here

// Throw std::runtime_error with oneDNN's reason when it has no primitive for the spec (or no oneDNN in the build).
std::unique_ptr<Int8Kernel> makeInt8Conv(const Int8ConvSpec& spec);
std::unique_ptr<Int8Kernel> makeInt8Matmul(const Int8MatmulSpec& spec);
std::unique_ptr<Int8Kernel> makeInt8MaxPool(const Int8MaxPoolSpec& spec);

}  // namespace strata::cpu
