// ONNX export through the ONNX protobuf definitions (onnx-ml.proto, opsets 13
// to 17), and a reader that parses a file back for round-trip checks.
//
// The exported graph takes raw data-file values (Fashion-MNIST pixels 0..255 as
// float32 NCHW): the dataset normalization x' = (x*scale - mean)/std is part of
// the graph (Mul, Sub, Div after the input; per-feature CSV standardization as Sub and Div
// with sample-shaped ([F]) initializers "<input>/norm_feature_mean", "_std"). The batch dimension is symbolic
// ("N"). Graph input and output are named after the Input node and the output
// node; weights are initializers named "<node>.<param>".
//
// Layer mapping (each type's writer and reader in OnnxLayers.cpp): Dense -> Gemm (transB=1); Conv2D -> Conv; MaxPool2D
// -> MaxPool; AvgPool2D -> AveragePool (count_include_pad=0); GlobalAvgPool -> GlobalAveragePool + Flatten; Flatten ->
// Flatten(axis 1); Reshape -> Reshape (batch -1); activations -> Relu, LeakyRelu, Sigmoid, Tanh; GELU -> the exact erf
// form 0.5*x*(1+erf(x/sqrt 2)) (ONNX Gelu needs opset 20); Softmax -> Softmax(axis -1); BatchNorm -> BatchNormalization
// (inference); LayerNorm -> LayerNormalization at opset >= 17, else ReduceMean/Sub/Mul/Sqrt/Div; Dropout -> removed;
// Add -> Add (chained); Concat -> Concat(axis+1); Embedding -> Cast(int64) + Gather; SequenceMeanPool / SequenceMaxPool
// -> ReduceMean / ReduceMax (axis 1), masked: with the padding mask Sign(Abs(ids)); MultiHeadSelfAttention -> MatMul
// (projections), Split, Reshape + Transpose (heads), MatMul, Mul (scale), Softmax (masked: -1e30 added at padding keys
// and the weights multiplied by the mask), MatMul, Transpose + Reshape, MatMul (output projection).
//
// Int8 (OnnxExportOptions::int8): a QDQ graph. A quantized weight "<node>.weight" is the output of
// DequantizeLinear "<node>.weight/dequantize" (axis 0) of the int8 initializer "<node>.weight/int8" with
// "<node>.weight/scale" and "<node>.weight/zero_point" (biases: "/int32" at input scale x weight scale); a
// quantized activation of node X passes through QuantizeLinear "X/quantize" and DequantizeLinear "X/dequantize"
// (uint8, scalar "X/scale" and "X/zero_point"). Metadata strata.quantization says so; readers dequantize the
// weights and read the activations' parameters back by those names.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/export/ExportModel.h"
#include "core/io/FormatError.h"
#include "core/io/Safetensors.h"

namespace strata {

constexpr int kOnnxDefaultOpset = 13;
constexpr int kOnnxMinOpset = 13;
constexpr int kOnnxMaxOpset = 17;

struct OnnxExportOptions {
    int opset = kOnnxDefaultOpset;
    bool includeNormalization = true;  // false: the file takes already-normalized inputs
    // Set: an int8 QDQ graph with these activation ranges (Quantize.h says what is quantized and how).
    const Int8Calibration* int8 = nullptr;
};

// Thrown for a node the exporter cannot map; names the node.
class OnnxExportError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Builds, checks (onnx::checker) and writes the model ("<path>.tmp-<pid>" renamed over path).
void writeOnnx(const std::string& path, const ExportModel& model, const OnnxExportOptions& options = {});

// A node: what readOnnx finds, and what a layer's writer adds (OnnxLayers.h).
struct OnnxNodeInfo {
    std::string name, opType;
    std::vector<std::string> inputs, outputs;
    std::map<std::string, int64_t> intAttributes;                // INT attributes ("axis")
    std::map<std::string, float> floatAttributes;                // FLOAT ("epsilon")
    std::map<std::string, std::vector<int64_t>> intsAttributes;  // INTS ("kernel_shape")
    std::map<std::string, std::string> stringAttributes;         // STRING ("mode")

    OnnxNodeInfo& attr(const std::string& key, int64_t v) {
        intAttributes[key] = v;
        return *this;
    }
    OnnxNodeInfo& attr(const std::string& key, float v) {
        floatAttributes[key] = v;
        return *this;
    }
    OnnxNodeInfo& attr(const std::string& key, std::vector<int64_t> v) {
        intsAttributes[key] = std::move(v);
        return *this;
    }
    OnnxNodeInfo& attr(const std::string& key, const char* v) {
        stringAttributes[key] = v;
        return *this;
    }
    // An attribute's value, or `fallback` when the node has none of that name and kind.
    int64_t intAttr(const std::string& key, int64_t fallback) const;
    float floatAttr(const std::string& key, float fallback) const;
    std::vector<int64_t> intsAttr(const std::string& key, const std::vector<int64_t>& fallback = {}) const;
    std::string stringAttr(const std::string& key, const std::string& fallback) const;
    bool operator==(const OnnxNodeInfo&) const = default;
};

// An INT8, UINT8 or INT32 initializer (quantized weights, zero points), values widened.
struct OnnxIntegerTensor {
    std::string type;  // "INT8", "UINT8", "INT32"
    std::vector<int64_t> dims;
    std::vector<int32_t> values;
};

// What readOnnx finds in a file.
struct OnnxModelInfo {
    int64_t irVersion = 0;
    int opset = 0;
    std::string producerName, producerVersion;
    std::string inputName, outputName;
    std::vector<int64_t> inputDims, outputDims;  // -1 for a symbolic dimension
    std::vector<OnnxNodeInfo> nodes;
    std::vector<TensorRecord> initializers;                         // float initializers as F32 host bytes
    std::map<std::string, std::vector<int64_t>> int64Initializers;  // shapes, axes
    std::map<std::string, OnnxIntegerTensor> integerInitializers;   // INT8, UINT8 and INT32 (quantized data)
    std::map<std::string, std::string> metadata;
    // Constant nodes with a float, int64, int32, int8 or uint8 tensor value: read as initializers named after their
    // output, not as nodes (exporters write shapes and bounds so).
    int constantNodes = 0;
    const TensorRecord* initializer(const std::string& name) const;
};

// Parses a model file and validates it whole before anything uses it: every initializer holds exactly one
// data field of exactly product(dims) elements, no negative dims or overflowing products, every node input
// defined, no cycle, then onnx::checker (unknown operators, attributes, opsets). Throws FormatError naming the
// file and the initializer or node (not a protobuf ModelProto, no graph, more than one input or output, and
// each of those checks), so no runtime ever reads an invalid graph.
OnnxModelInfo readOnnx(const std::string& path);
// The same on bytes in memory (`name` stands for the file in messages): the fuzz target's entry point.
OnnxModelInfo readOnnxBytes(const std::string& name, const void* data, size_t size);

}  // namespace strata
