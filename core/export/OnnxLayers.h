// The ONNX mapping of every layer type, both ways: for each type one function that writes a node of that type
// as ONNX nodes, and one that reads those nodes back as the layer (its type, params, weights, inputs), listed
// in onnxLayerTable() (OnnxLayers.cpp), the one place that knows which ONNX operators stand for a layer type.
// writeOnnx (Onnx.h) writes every node through its type's writer; importOnnxLayers reads a model's layers
// back from its nodes, as Strata writes them (the structure, not the names, is matched), for the model
// importer to build a graph from.
//
// A layer's nodes and initializers are named after its node: its output value is its name ("conv1"), the
// intermediates "<name>/<what>" ("attn/scores"), its parameters "<name>.<param>" ("conv1.weight").
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/data/Normalization.h"
#include "core/export/Onnx.h"

namespace strata {

// An initializer a layer's writer adds besides its parameters (scalars, shapes).
struct OnnxInitializer {
    enum class Type { Float, Int64 };
    std::string name;
    Type type = Type::Float;
    std::vector<int64_t> dims;
    std::vector<float> floats;  // Float
    std::vector<int64_t> ints;  // Int64
};

// What a layer type's writer gets and fills: the node to write, and the ONNX nodes and initializers it adds.
class OnnxLayerWriter {
public:
    // The node being written.
    std::string name;                 // its Strata name: its output value's name
    Json params;                      // normalized
    std::vector<std::string> inputs;  // the ONNX values that feed its input ports, in port order
    std::vector<Shape> inputShapes;   // per sample, as those of `inputs`
    Shape outputShape;                // per sample
    int opset = kOnnxDefaultOpset;
    bool graphOutput = false;  // its output is the graph's output
    // The graph input's normalization when the graph includes it (the Input's writer adds it); else null.
    const Normalization* normalization = nullptr;

    // The value that carries the node's output when it is not `name` (set by a writer that adds no node of its
    // own: Dropout passes its input on; the Input its normalized value).
    std::string output;

    // Adds a node (its attributes set on the returned reference, which stays valid).
    OnnxNodeInfo& node(const std::string& op, const std::string& nodeName, std::vector<std::string> in,
                       const std::string& out);
    // Initializers; each returns its name.
    std::string scalar(const std::string& initName, float value);  // rank 0, broadcast against anything
    std::string int64s(const std::string& initName, const std::vector<int64_t>& values);  // rank 1
    std::string floats(const std::string& initName, const Shape& shape, std::vector<float> values);

    // The layer's parameter "<name>.<param>", as the value to read it from (a float initializer).
    std::function<std::string(const std::string& param)> weight;
    // Its int8 weight and, when it has one, its bias (LayerType::int8Weight: Conv2D's and Dense's weight, the
    // attention's Q, K, V projection), as the values to read them from: float initializers, or int8 and int32 ones
    // behind DequantizeLinear in an int8 export.
    std::function<std::vector<std::string>()> int8Weights;
    // In an int8 export whose calibration quantizes the layer's inner tensor `tensor` (LayerType::int8InnerTensors,
    // the attention's "qkv", "probs", "context"): `value` through QuantizeLinear -> DequantizeLinear on its grid (nodes
    // "<node>/<tensor>/quantize" and "/dequantize"), returning the value to read on; else `value` itself.
    std::function<std::string(const std::string& tensor, const std::string& value)> quantizedInner;
    // The weight (and bias) that multiplies that inner tensor next, as int8Weights gives the layer's int8 weight:
    // int8 behind DequantizeLinear where quantizedInner quantized the tensor, float initializers otherwise.
    std::function<std::vector<std::string>(const std::string& tensor)> innerInt8Weights;

    std::deque<OnnxNodeInfo> nodes;  // what it added, in order
    std::vector<OnnxInitializer> initializers;
};

// The nodes of a model as an import reads them: who produces and who reads each value.
class OnnxGraphView {
public:
    static constexpr int kGraphInput = -1;  // `first` of the read that stands for the graph's input

    explicit OnnxGraphView(const OnnxModelInfo& info);
    const OnnxModelInfo& info() const { return m_info; }
    const OnnxNodeInfo& node(int index) const { return m_info.nodes.at(static_cast<size_t>(index)); }
    int nodeCount() const { return static_cast<int>(m_info.nodes.size()); }
    // The node that gives a value; -1 for the graph's input, an initializer, or a value no node gives.
    int producer(const std::string& value) const;
    // The nodes that read a value, in file order.
    const std::vector<int>& consumers(const std::string& value) const;
    // The node that reads `value` when it is its only reader and of type `op`; -1 otherwise.
    int onlyConsumer(const std::string& value, const std::string& op) const;
    // The node of type `op` among the readers of `value`; -1 when there is none.
    int consumer(const std::string& value, const std::string& op) const;
    // A float initializer's values and shape; null when `value` is none.
    const TensorRecord* floatInitializer(const std::string& value) const;
    const std::vector<int64_t>* int64Initializer(const std::string& value) const;
    // A float initializer holding one value.
    std::optional<float> scalar(const std::string& value) const;
    bool isInitializer(const std::string& value) const;

private:
    const OnnxModelInfo& m_info;
    std::map<std::string, std::vector<int>> m_consumers;
    std::map<std::string, int> m_producer;
    std::map<std::string, const TensorRecord*> m_floats;
};

// One layer read back from ONNX nodes.
struct OnnxLayerImport {
    std::string type;  // the layer type
    std::string name;  // its output value's name (the graph input's, for the Input): the node's name in a Strata file
    Json params;       // what the nodes say; the others take their defaults (LayerType::normalizeParams)
    std::map<std::string, std::vector<float>> weights;  // its parameters, by name ("weight"), as Strata lays them out
    std::vector<std::string> inputs;                    // the ONNX values that feed its input ports, in port order
    std::string output;                                 // the ONNX value that is its output
    std::vector<int> nodes;                             // the ONNX nodes it stands for (indices, file order)
};

struct OnnxLayerMapping {
    std::string type;  // the layer type's name
    // Writes a node of this type.
    void (*write)(OnnxLayerWriter& w);
    // Reads a layer of this type whose ONNX nodes start at node `first`; nothing when they are not this type's.
    // The graph input's type (LayerType::isGraphInput) is asked with OnnxGraphView::kGraphInput, the others with
    // nodes.
    std::optional<OnnxLayerImport> (*read)(const OnnxGraphView& g, int first);
};

// Every layer type's mapping, one entry per type (the tests check that every registered type has one).
const std::vector<OnnxLayerMapping>& onnxLayerTable();
// The mapping of a layer type; null when there is none.
const OnnxLayerMapping* onnxLayerMapping(const std::string& type);

struct OnnxLayerImports {
    std::vector<OnnxLayerImport> layers;  // the graph input's first, then in file order
    std::vector<int> unread;              // nodes no mapping took (indices)
};

// Reads the layers of a model: the graph input, then, from each node no layer has taken yet (in file order),
// the mapping that takes the most nodes. The int8 graph's quantize and dequantize nodes are not read.
OnnxLayerImports importOnnxLayers(const OnnxModelInfo& info);

}  // namespace strata
