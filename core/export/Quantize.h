// Int8 post-training quantization for ONNX: weights int8, symmetric, one scale per output channel;
// activations uint8, affine, one scale and zero point per tensor, calibrated on training samples (their
// min-max, or a percentile that ignores rare outliers). The ONNX writer (Onnx.h) stores the result as a QDQ
// graph: each quantized weight an int8 initializer behind a DequantizeLinear (axis 0), each bias int32 at
// input scale x weight scale, and each activation through QuantizeLinear -> DequantizeLinear, which
// onnxruntime fuses into its int8 kernels (QLinearConv, QGemm, uint8 MaxPool).
//
// Which tensors are quantized, the same in the writer, the calibration and the simulation (quantizedOutputs):
// the normalized input, and the output of every node except the graph's output (logits stay float32), Dropout
// (inference passes its input on) and ids that feed an Embedding or a padding mask; inside a layer whose input is
// quantized, the tensors its type names (LayerType::int8InnerTensors: the attention's Q, K, V on a grid symmetric
// about 128, its softmax weights, and its heads' context, whose output projection is then int8 too). A node whose only
// consumer is a ReLU takes the ReLU's range, so its QuantizeLinear already clamps at zero and onnxruntime drops the
// ReLU. Each layer's int8 weight (LayerType::int8Weight: Conv2D's, Conv1D's and Dense's weight,
// MultiHeadSelfAttention's packed Q, K, V projection) is quantized when its input is, its bias as int32, and so
// is the weight after a quantized inner tensor (the attention's output projection); other parameters (BatchNorm,
// LayerNorm, Embedding) stay float32. The export folds every BatchNorm that follows a Conv2D or Dense into it before
// calibrating (FoldBatchNorm.h's prepareInt8Export), so only the BatchNorms that cannot be folded reach this graph.
// Which layer is which is its type's fact (LayerType), never its name.
//
// simulateInt8 runs exactly that arithmetic in Strata (weights as the file dequantizes them, activations
// rounded to their uint8 grid after each layer): the accuracy the export reports, and the Export dialog's
// check of an int8 file where OpenCV cannot run QDQ graphs. onnxruntime's integer kernels agree with it up to
// rounding ties (tests/test_quantization.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/graph/Graph.h"
#include "core/tensor/Shape.h"

namespace strata {

class Model;
struct DataSplit;
struct ExportModel;

// q = clamp(round_half_even(x / scale) + zeroPoint, 0, 255); the value it stands for is (q - zeroPoint) * scale.
struct ActivationQuant {
    float scale = 1.0f;
    int zeroPoint = 0;  // 0..255
    bool operator==(const ActivationQuant&) const = default;
};
// The parameters that cover [lo, hi] widened to include 0 (which must be exact: zero padding, ReLU).
ActivationQuant activationQuantFor(float lo, float hi);
// The symmetric parameters that cover [lo, hi]: zero point 128, scale max(|lo|, |hi|) / 127 (1 when both are 0),
// so q - 128 is a signed byte (LayerType::InnerInt8Tensor::symmetric).
ActivationQuant symmetricActivationQuantFor(float lo, float hi);
// x -> its quantized value, in place.
void fakeQuantize(float* x, int64_t n, const ActivationQuant& q);

// Weights use 7 of int8's bits (-63..63), as onnxruntime's "reduce range": its u8 x s8 kernels on x86 CPUs
// without VNNI (AVX2, AVX-512F) add two products in int16, and 255 x 127 x 2 overflows it (the file's results
// were off by 2% of the output range on such a CPU); 255 x 63 x 2 does not.
inline constexpr int kInt8WeightMax = 63;
// A [channels, ...] weight as int8 with one symmetric scale per channel: scale = max|w| / kInt8WeightMax (1
// for an all-zero channel), q = round_half_even(w / scale) in -kInt8WeightMax..kInt8WeightMax.
struct ChannelQuantized {
    std::vector<int8_t> values;
    std::vector<float> scales;  // one per channel
};
ChannelQuantized quantizeWeightPerChannel(const std::vector<float>& values, int64_t channels);
// The same with the channels along `axis` of `shape` (values in that shape's row-major order, kept): Conv1D's
// [kernel, filters, channels] weight has its output channels on axis 1.
ChannelQuantized quantizeWeightAlongAxis(const std::vector<float>& values, const Shape& shape, int axis);
// A bias as int32 at scale inputScale * weightScales[c] (a float32 product, as the file stores it), zero point 0
// (saturating).
std::vector<int32_t> quantizeBias(const std::vector<float>& bias, float inputScale,
                                  const std::vector<float>& weightScales);

enum class CalibrationMethod { MinMax, Percentile };
const char* calibrationMethodName(CalibrationMethod method);  // "minmax", "percentile"
CalibrationMethod parseCalibrationMethod(const std::string& text);

struct QuantizationOptions {
    int64_t calibrationSamples = 1000;  // training samples, spread evenly over the split
    CalibrationMethod method = CalibrationMethod::MinMax;
    // Percentile: each tensor's range runs from its (100 - p)th to its p-th percentile value.
    double percentile = 99.999;
};

struct Int8Calibration {
    QuantizationOptions options;
    int64_t samples = 0;                                 // calibrated on
    std::map<std::string, ActivationQuant> activations;  // by node name (the Input: its normalized value)
};

// Whether the edge's consumer reads token ids on that port (an Embedding; LayerType::inputDifferentiable).
bool readsIds(const Graph& graph, const Edge& e);

// The nodes (ids) whose outputs are quantized (see above).
std::set<int> quantizedOutputs(const Graph& graph);

// Runs `model` (float32) on options.calibrationSamples samples of `data` (model inputs, normalized) and derives
// every quantized tensor's parameters. Throws std::invalid_argument when the split is empty or the samples
// do not fit the model.
Int8Calibration calibrateInt8(const ExportModel& model, const DataSplit& data, const QuantizationOptions& options);

// The tensors inside layers that are quantized too (LayerType::int8InnerTensors: the attention's "qkv", "probs"
// and "context"),
// by their activation names "<node>/<tensor>" (innerTensorKey), where the layer's input is quantized.
std::string innerTensorKey(const std::string& node, const std::string& tensor);
std::set<std::string> quantizedInnerTensors(const Graph& graph);

// Called by simulateInt8 with each rounded tensor of a batch: the node's name, its values (NCHW) and their count.
using Int8Tap = std::function<void(const std::string& node, const float* values, int64_t count)>;

// Outputs of `model` on `count` normalized samples with every tensor of `activations` rounded to its grid
// after the layer that produces it (the Input's before the first layer); `model`'s weights are taken as they
// are (an int8 file's, as loadModelFile dequantizes them). Runs on the CPU in batches of `batchSize`; `tap`
// (optional) sees each rounded tensor, for the int8 engine's tests (infer/Int8Engine.h).
std::vector<float> simulateInt8(const ExportModel& model, const std::map<std::string, ActivationQuant>& activations,
                                const float* inputs, int64_t count, int batchSize = 256, const Int8Tap& tap = {});

}  // namespace strata
