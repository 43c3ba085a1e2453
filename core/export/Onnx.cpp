#include "core/export/Onnx.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include "core/export/OnnxLayers.h"
#include "core/io/Base64.h"
#include "core/io/FileIo.h"
#include "core/io/InputFile.h"
#include "core/io/InputLimits.h"

namespace strata {

namespace {

// IR version that goes with each opset (ONNX 1.8: opset 13 / IR 7, 1.9: 14 / 7, 1.10+: 15..17 / 8).
int64_t irVersionFor(int opset) { return opset <= 14 ? 7 : 8; }

std::string versionString() { return "0.1.0"; }

// Builds the ONNX graph node by node; names every intermediate "<node>/<what>".
class OnnxBuilder {
public:
    OnnxBuilder(onnx::GraphProto& graph, int opset) : m_graph(graph), m_opset(opset) {}

    int opset() const { return m_opset; }

    onnx::NodeProto& node(const std::string& op, const std::string& name, const std::vector<std::string>& inputs,
                          const std::string& output) {
        onnx::NodeProto* n = m_graph.add_node();
        n->set_op_type(op);
        n->set_name(name);
        for (const std::string& i : inputs) n->add_input(i);
        n->add_output(output);
        return *n;
    }

    static void attr(onnx::NodeProto& n, const std::string& name, int64_t v) {
        onnx::AttributeProto* a = n.add_attribute();
        a->set_name(name);
        a->set_type(onnx::AttributeProto::INT);
        a->set_i(v);
    }
    static void attr(onnx::NodeProto& n, const std::string& name, float v) {
        onnx::AttributeProto* a = n.add_attribute();
        a->set_name(name);
        a->set_type(onnx::AttributeProto::FLOAT);
        a->set_f(v);
    }
    static void attr(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
        onnx::AttributeProto* a = n.add_attribute();
        a->set_name(name);
        a->set_type(onnx::AttributeProto::INTS);
        for (int64_t x : v) a->add_ints(x);
    }
    static void attr(onnx::NodeProto& n, const std::string& name, const std::string& v) {
        onnx::AttributeProto* a = n.add_attribute();
        a->set_name(name);
        a->set_type(onnx::AttributeProto::STRING);
        a->set_s(v);
    }

    void floatInit(const std::string& name, const Shape& shape, const std::vector<float>& values) {
        onnx::TensorProto* t = m_graph.add_initializer();
        t->set_name(name);
        t->set_data_type(onnx::TensorProto::FLOAT);
        for (int64_t d : shape.dims()) t->add_dims(d);
        t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
    }
    // A scalar float constant (rank 0), broadcast against anything.
    std::string scalar(const std::string& name, float v) {
        floatInit(name, Shape{}, {v});
        return name;
    }
    // Integer data of ONNX type `type` (INT8, UINT8, INT32) with these dims; `values` already in range.
    template <class T>
    std::string intInit(const std::string& name, int type, const std::vector<int64_t>& dims,
                        const std::vector<T>& values) {
        onnx::TensorProto* t = m_graph.add_initializer();
        t->set_name(name);
        t->set_data_type(type);
        for (int64_t d : dims) t->add_dims(d);
        t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T)));
        return name;
    }
    std::string int64Init(const std::string& name, const std::vector<int64_t>& values) {
        onnx::TensorProto* t = m_graph.add_initializer();
        t->set_name(name);
        t->set_data_type(onnx::TensorProto::INT64);
        t->add_dims(static_cast<int64_t>(values.size()));
        t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t)));
        return name;
    }

    // What a layer's writer added (OnnxLayers.h): its initializers, then its nodes in order.
    void add(const OnnxLayerWriter& w) {
        for (const OnnxInitializer& i : w.initializers) {
            if (i.type == OnnxInitializer::Type::Int64) {
                int64Init(i.name, i.ints);
            } else {
                floatInit(i.name, Shape(i.dims), i.floats);
            }
        }
        for (const OnnxNodeInfo& n : w.nodes) {
            onnx::NodeProto& proto = node(n.opType, n.name, n.inputs, n.outputs.at(0));
            for (size_t k = 1; k < n.outputs.size(); ++k) proto.add_output(n.outputs[k]);
            for (const auto& [key, v] : n.intAttributes) attr(proto, key, v);
            for (const auto& [key, v] : n.floatAttributes) attr(proto, key, v);
            for (const auto& [key, v] : n.intsAttributes) attr(proto, key, v);
            for (const auto& [key, v] : n.stringAttributes) attr(proto, key, v);
        }
    }

    void valueInfo(onnx::ValueInfoProto* vi, const std::string& name, const Shape& perSample) {
        vi->set_name(name);
        onnx::TypeProto_Tensor* tt = vi->mutable_type()->mutable_tensor_type();
        tt->set_elem_type(onnx::TensorProto::FLOAT);
        onnx::TensorShapeProto* sh = tt->mutable_shape();
        sh->add_dim()->set_dim_param("N");
        for (int64_t d : perSample.dims()) sh->add_dim()->set_dim_value(d);
    }

private:
    onnx::GraphProto& m_graph;
    int m_opset;
};

std::string jsonArray(const std::vector<std::string>& items) { return nlohmann::json(items).dump(); }

// QuantizeLinear -> DequantizeLinear of `value` with uint8 parameters named after `prefix`; returns the
// dequantized value.
std::string addQdq(OnnxBuilder& b, const std::string& value, const ActivationQuant& q, const std::string& prefix) {
    const std::string scale = b.scalar(prefix + "/scale", q.scale);
    const std::string zp =
        b.intInit(prefix + "/zero_point", onnx::TensorProto::UINT8, {}, std::vector<uint8_t>{uint8_t(q.zeroPoint)});
    b.node("QuantizeLinear", prefix + "/quantize", {value, scale, zp}, prefix + "/uint8");
    b.node("DequantizeLinear", prefix + "/dequantize", {prefix + "/uint8", scale, zp}, prefix + "/dequantized");
    return prefix + "/dequantized";
}

}  // namespace

void writeOnnx(const std::string& path, const ExportModel& model, const OnnxExportOptions& options) {
    if (options.opset < kOnnxMinOpset || options.opset > kOnnxMaxOpset)
        throw std::invalid_argument("ONNX opset " + std::to_string(options.opset) + " is not supported (" +
                                    std::to_string(kOnnxMinOpset) + " to " + std::to_string(kOnnxMaxOpset) + ")");
    const Graph& graph = model.project.graph;
    const std::vector<ExportParameter> params = exportParameters(graph);
    checkExportWeights(model, params);
    const GraphAnalysis analysis = analyzeGraph(graph);

    onnx::ModelProto proto;
    proto.set_ir_version(irVersionFor(options.opset));
    proto.set_producer_name("strata");
    proto.set_producer_version(versionString());
    proto.set_model_version(1);
    proto.set_doc_string("Exported by Strata from project '" + model.project.name + "'");
    onnx::OperatorSetIdProto* opsetId = proto.add_opset_import();
    opsetId->set_domain("");
    opsetId->set_version(options.opset);
    auto meta = [&](const std::string& k, const std::string& v) {
        onnx::StringStringEntryProto* e = proto.add_metadata_props();
        e->set_key(k);
        e->set_value(v);
    };
    meta("strata.version", versionString());
    meta(kMetaClassLabels, jsonArray(model.classNames));
    if (!model.vocabulary.empty()) meta(kMetaVocabulary, jsonArray(model.vocabulary));
    if (!model.tokenizerModel.empty()) meta(kMetaTokenizerModel, base64Encode(model.tokenizerModel));
    if (const std::string t = targetNormalizationText(model); !t.empty()) meta(kMetaTargetNormalization, t);
    checkNormalization(model.normalization, graph);
    nlohmann::json normMeta{{"mode", model.normalization.mode},
                            {"scale", model.normalization.scale},
                            {"mean", model.normalization.mean},
                            {"std", model.normalization.std},
                            {"in_graph", options.includeNormalization}};
    if (!model.normalization.featureMean.empty()) {
        normMeta["feature_mean"] = model.normalization.featureMean;
        normMeta["feature_std"] = model.normalization.featureStd;
    }
    meta("strata.normalization", normMeta.dump());
    meta(kMetaProject, projectToJson(model.project).dump());
    const Int8Calibration* int8 = options.int8;
    std::set<int> quantized;
    if (int8) {
        meta("strata.quantization",
             nlohmann::json{{"scheme", "int8 QDQ"},
                            {"weights",
                             "int8, symmetric, one scale per output channel (Conv2D, Conv1D, Dense, the attention's Q, "
                             "K, V and output projections)"},
                            {"activations", "uint8, affine, one scale and zero point per tensor"},
                            {"calibration", calibrationMethodName(int8->options.method)},
                            {"calibration_samples", int8->samples},
                            {"percentile", int8->options.percentile}}
                 .dump());
        quantized = quantizedOutputs(graph);
    }

    onnx::GraphProto& g = *proto.mutable_graph();
    g.set_name(model.project.name.empty() ? "strata" : model.project.name);
    OnnxBuilder b(g, options.opset);

    // The ONNX value that carries each Strata node's output (Dropout aliases its input).
    std::map<int, std::string> valueOf;
    const std::vector<int> order = graph.topologicalOrder();
    std::set<int> hasConsumer;
    for (const Edge& e : graph.edges()) hasConsumer.insert(e.from.node);
    int outputNode = -1;
    for (int id : order)
        if (!hasConsumer.count(id) && !(graph.layerType(id) && graph.layerType(id)->isGraphInput())) outputNode = id;

    // The activation quantization of each node's output value as its consumers read it (int8 only).
    std::map<int, ActivationQuant> quantOf;
    auto activationOf = [&](const Node& n) -> const ActivationQuant& {
        auto it = int8->activations.find(n.name);
        if (it == int8->activations.end())
            throw OnnxExportError(n.name + ": the int8 calibration has no range for its output");
        return it->second;
    };
    // The int8 weight and int32 bias of a layer's compressible weight (a Conv2D's or a Dense's) whose input is
    // quantized, behind DequantizeLinear.
    auto quantizedWeights = [&](const Node& n, const CompressibleWeight& cw, bool useBias,
                                const ActivationQuant& input) {
        std::vector<std::string> names;
        const std::string w = n.name + "." + cw.weight;
        const ExportParameter* spec = nullptr;
        for (const ExportParameter& p : params)
            if (p.name == w) spec = &p;
        if (!spec) throw OnnxExportError(n.name + ": parameter '" + cw.weight + "' is missing");
        const int64_t channels = spec->shape[cw.axis];
        const ChannelQuantized q = quantizeWeightAlongAxis(model.weights.at(w), spec->shape, cw.axis);
        const std::vector<int8_t> zeros(static_cast<size_t>(channels), 0);
        b.intInit(w + "/int8", onnx::TensorProto::INT8, spec->shape.dims(), q.values);
        b.floatInit(w + "/scale", Shape{channels}, q.scales);
        b.intInit(w + "/zero_point", onnx::TensorProto::INT8, {channels}, zeros);
        OnnxBuilder::attr(
            b.node("DequantizeLinear", w + "/dequantize", {w + "/int8", w + "/scale", w + "/zero_point"}, w), "axis",
            int64_t{cw.axis});
        names.push_back(w);
        if (useBias) {
            const std::string bias = n.name + "." + cw.bias;
            std::vector<float> scales(q.scales.size());
            for (size_t c = 0; c < scales.size(); ++c) scales[c] = input.scale * q.scales[c];
            b.intInit(bias + "/int32", onnx::TensorProto::INT32, {channels},
                      quantizeBias(model.weights.at(bias), input.scale, q.scales));
            b.floatInit(bias + "/scale", Shape{channels}, scales);
            b.intInit(bias + "/zero_point", onnx::TensorProto::INT32, {channels},
                      std::vector<int32_t>(zeros.size(), 0));
            OnnxBuilder::attr(b.node("DequantizeLinear", bias + "/dequantize",
                                     {bias + "/int32", bias + "/scale", bias + "/zero_point"}, bias),
                              "axis", int64_t{0});
            names.push_back(bias);
        }
        return names;
    };
    // The producer whose value a node's first input reads (Dropout passes its input on).
    auto inputQuant = [&](int id) -> const ActivationQuant* {
        const auto ports = graph.inputPorts(id);
        if (ports.empty()) return nullptr;
        int from = graph.edgeInto({id, ports.front()})->from.node;
        while (graph.layerType(from)->identityAtInference())
            from = graph.edgeInto({from, graph.inputPorts(from).front()})->from.node;
        auto it = quantOf.find(from);
        return it == quantOf.end() ? nullptr : &it->second;
    };

    auto weightOf = [&](const Node& n, const std::string& param) -> std::string {
        std::string name = n.name + "." + param;
        for (const ExportParameter& p : params)
            if (p.name == name) {
                b.floatInit(name, p.shape, model.weights.at(name));
                return name;
            }
        throw OnnxExportError(n.name + ": parameter '" + param + "' is missing");
    };

    auto hasParameter = [&](const std::string& name) {
        for (const ExportParameter& p : params)
            if (p.name == name) return true;
        return false;
    };

    // Each node through its type's writer (OnnxLayers.cpp), then the quantization of its output (int8).
    for (int id : order) {
        const Node& n = *graph.node(id);
        const LayerType* type = graph.layerType(id);
        const OnnxLayerMapping* mapping = onnxLayerMapping(n.type);
        if (!type || !mapping) throw OnnxExportError(n.name + ": layer type '" + n.type + "' has no ONNX mapping");
        OnnxLayerWriter w;
        w.name = n.name;
        w.params = analysis.params.at(id);
        for (const std::string& port : graph.inputPorts(id)) {
            const auto e = graph.edgeInto({id, port});
            if (!e) throw OnnxExportError(n.name + ": input port '" + port + "' is not connected");
            w.inputs.push_back(valueOf.at(e->from.node));
            w.inputShapes.push_back(analysis.outputShapes.at(e->from.node));
        }
        w.outputShape = analysis.outputShapes.at(id);
        w.opset = options.opset;
        w.graphOutput = id == outputNode;
        if (type->isGraphInput()) {
            b.valueInfo(g.add_input(), n.name, w.outputShape);
            if (options.includeNormalization && model.normalization.mode != "none")
                w.normalization = &model.normalization;
        }
        const ActivationQuant* inQuant = int8 ? inputQuant(id) : nullptr;
        w.weight = [&](const std::string& param) { return weightOf(n, param); };
        w.int8Weights = [&]() {
            const CompressibleWeight cw = type->int8Weight();
            const bool bias = !cw.bias.empty() && hasParameter(n.name + "." + cw.bias);
            if (inQuant) return quantizedWeights(n, cw, bias, *inQuant);
            std::vector<std::string> names{weightOf(n, cw.weight)};
            if (bias) names.push_back(weightOf(n, cw.bias));
            return names;
        };
        // The layer's inner tensors quantized so far (quantizedInner), for innerInt8Weights.
        std::map<std::string, ActivationQuant> innerQuant;
        auto innerWeight = [&](const std::string& tensor) -> CompressibleWeight {
            for (const LayerType::InnerInt8Tensor& t : type->int8InnerTensors())
                if (t.name == tensor) return t.weight;
            throw OnnxExportError(n.name + ": its layer type has no inner tensor '" + tensor + "'");
        };
        w.quantizedInner = [&](const std::string& tensor, const std::string& value) -> std::string {
            (void)innerWeight(tensor);
            if (!inQuant) return value;
            const std::string key = innerTensorKey(n.name, tensor);
            auto it = int8->activations.find(key);
            if (it == int8->activations.end()) throw OnnxExportError(key + ": the int8 calibration has no range");
            innerQuant[tensor] = it->second;
            const std::string scale = b.scalar(key + "/scale", it->second.scale);
            const std::string zp = b.intInit(key + "/zero_point", onnx::TensorProto::UINT8, {},
                                             std::vector<uint8_t>{uint8_t(it->second.zeroPoint)});
            w.node("QuantizeLinear", key + "/quantize", {value, scale, zp}, key + "/uint8");
            w.node("DequantizeLinear", key + "/dequantize", {key + "/uint8", scale, zp}, key + "/dequantized");
            return key + "/dequantized";
        };
        w.innerInt8Weights = [&](const std::string& tensor) {
            const CompressibleWeight cw = innerWeight(tensor);
            const bool bias = !cw.bias.empty() && hasParameter(n.name + "." + cw.bias);
            if (auto it = innerQuant.find(tensor); it != innerQuant.end())
                return quantizedWeights(n, cw, bias, it->second);
            std::vector<std::string> names{weightOf(n, cw.weight)};
            if (bias) names.push_back(weightOf(n, cw.bias));
            return names;
        };
        mapping->write(w);
        b.add(w);
        valueOf[id] = w.output.empty() ? n.name : w.output;
        if (quantized.count(id)) {
            quantOf[id] = activationOf(n);
            valueOf[id] = addQdq(b, valueOf[id], quantOf[id], n.name);
        }
    }
    if (outputNode < 0) throw OnnxExportError("the graph has no output node");
    b.valueInfo(g.add_output(), valueOf.at(outputNode), analysis.outputShapes.at(outputNode));

    try {
        onnx::checker::check_model(proto);
    } catch (const std::exception& e) {
        throw OnnxExportError(std::string("the exported model fails onnx::checker: ") + e.what());
    }

    writeFileAtomically(path, [&proto](std::ostream& out) {
        if (!proto.SerializeToOstream(&out)) out.setstate(std::ios::failbit);
    });
}

int64_t OnnxNodeInfo::intAttr(const std::string& key, int64_t fallback) const {
    const auto it = intAttributes.find(key);
    return it == intAttributes.end() ? fallback : it->second;
}

float OnnxNodeInfo::floatAttr(const std::string& key, float fallback) const {
    const auto it = floatAttributes.find(key);
    return it == floatAttributes.end() ? fallback : it->second;
}

std::string OnnxNodeInfo::stringAttr(const std::string& key, const std::string& fallback) const {
    const auto it = stringAttributes.find(key);
    return it == stringAttributes.end() ? fallback : it->second;
}

std::vector<int64_t> OnnxNodeInfo::intsAttr(const std::string& key, const std::vector<int64_t>& fallback) const {
    const auto it = intsAttributes.find(key);
    return it == intsAttributes.end() ? fallback : it->second;
}

const TensorRecord* OnnxModelInfo::initializer(const std::string& name) const {
    for (const TensorRecord& t : initializers)
        if (t.name == name) return &t;
    return nullptr;
}

namespace {

// Bytes per element of the tensor types a runtime may copy out of raw_data; 0 for the others.
size_t onnxElementSize(int type) {
    switch (type) {
        case onnx::TensorProto::FLOAT:
        case onnx::TensorProto::INT32:
        case onnx::TensorProto::UINT32: return 4;
        case onnx::TensorProto::DOUBLE:
        case onnx::TensorProto::INT64:
        case onnx::TensorProto::UINT64: return 8;
        case onnx::TensorProto::FLOAT16:
        case onnx::TensorProto::BFLOAT16:
        case onnx::TensorProto::INT16:
        case onnx::TensorProto::UINT16: return 2;
        case onnx::TensorProto::INT8:
        case onnx::TensorProto::UINT8:
        case onnx::TensorProto::BOOL: return 1;
        default: return 0;
    }
}

// Values held in the typed repeated field that ONNX uses for this data type (-1: no such field counted here).
int64_t onnxTypedFieldCount(const onnx::TensorProto& t) {
    switch (t.data_type()) {
        case onnx::TensorProto::FLOAT: return t.float_data_size();
        case onnx::TensorProto::DOUBLE: return t.double_data_size();
        case onnx::TensorProto::INT64: return t.int64_data_size();
        case onnx::TensorProto::UINT32:
        case onnx::TensorProto::UINT64: return t.uint64_data_size();
        case onnx::TensorProto::STRING: return t.string_data_size();
        default: return t.int32_data_size();  // INT32, INT16, INT8, UINT16, UINT8, BOOL, FLOAT16, BFLOAT16
    }
}

// One initializer: exactly one data field, dims not negative, their product representable, and the data
// exactly that many elements (a runtime copies product(dims) elements out of whichever field it picks).
void checkOnnxInitializer(const std::string& path, const onnx::TensorProto& t) {
    const std::string where = "initializer '" + cutForMessage(t.name()) + "': ";
    if (t.data_location() == onnx::TensorProto::EXTERNAL || t.external_data_size() > 0)
        throw FormatError(path, where + "external data is not supported (save the model with its weights inside)");
    int64_t numel = 1;
    for (int64_t d : t.dims()) {
        if (d < 0) throw FormatError(path, where + "negative dimension " + std::to_string(d));
        if (!checkedMul(numel, d, numel)) throw FormatError(path, where + "the dimensions multiply past 2^63 elements");
    }
    int fields = t.has_raw_data() ? 1 : 0;
    fields += t.float_data_size() > 0 ? 1 : 0;
    fields += t.double_data_size() > 0 ? 1 : 0;
    fields += t.int32_data_size() > 0 ? 1 : 0;
    fields += t.int64_data_size() > 0 ? 1 : 0;
    fields += t.uint64_data_size() > 0 ? 1 : 0;
    fields += t.string_data_size() > 0 ? 1 : 0;
    if (fields > 1)
        throw FormatError(path, where + "carries " + std::to_string(fields) + " data fields; exactly one is allowed");
    if (t.has_raw_data()) {
        const size_t width = onnxElementSize(t.data_type());
        if (width == 0)
            throw FormatError(path, where + "raw_data for data type " + std::to_string(t.data_type()) +
                                        ", which has no fixed element size");
        if (static_cast<uint64_t>(numel) > t.raw_data().size() / width || t.raw_data().size() != numel * width)
            throw FormatError(path, where + std::to_string(t.raw_data().size()) + " raw bytes for " +
                                        std::to_string(numel) + " elements of " + std::to_string(width) + " bytes");
        return;
    }
    const int64_t have = onnxTypedFieldCount(t);
    if (have != numel)
        throw FormatError(path, where + std::to_string(have) + " values for dims of " + std::to_string(numel) +
                                    " elements" + (fields == 0 ? " (no data field)" : ""));
}

// The graph's structure, with messages naming the node: every node input defined (graph input, initializer or
// some node's output) and the nodes free of cycles. Subgraphs (If, Loop) are left to onnx::checker.
void checkOnnxGraph(const std::string& path, const onnx::GraphProto& g) {
    std::set<std::string> defined;
    for (const auto& vi : g.input()) defined.insert(vi.name());
    for (const auto& t : g.initializer()) defined.insert(t.name());
    std::map<std::string, int> producer;
    for (int i = 0; i < g.node_size(); ++i)
        for (const std::string& o : g.node(i).output())
            if (!o.empty()) {
                if (defined.count(o) || !producer.emplace(o, i).second)
                    throw FormatError(path, "node '" + cutForMessage(g.node(i).name()) + "' (" +
                                                cutForMessage(g.node(i).op_type()) + "): output '" + cutForMessage(o) +
                                                "' is defined twice");
            }
    auto nodeName = [&](int i) {
        const auto& n = g.node(i);
        return "node '" + cutForMessage(n.name().empty() ? "#" + std::to_string(i) : n.name()) + "' (" +
               cutForMessage(n.op_type()) + ")";
    };
    // Kahn's algorithm over the node -> node edges.
    std::vector<int> waiting(static_cast<size_t>(g.node_size()), 0);
    std::vector<std::vector<int>> users(static_cast<size_t>(g.node_size()));
    for (int i = 0; i < g.node_size(); ++i)
        for (const std::string& in : g.node(i).input()) {
            if (in.empty()) continue;  // an optional input left out
            if (auto it = producer.find(in); it != producer.end()) {
                ++waiting[static_cast<size_t>(i)];
                users[static_cast<size_t>(it->second)].push_back(i);
            } else if (!defined.count(in)) {
                throw FormatError(path,
                                  nodeName(i) + ": input '" + cutForMessage(in) +
                                      "' is not defined (no graph input, initializer or node output has that name)");
            }
        }
    std::vector<int> ready;
    for (int i = 0; i < g.node_size(); ++i)
        if (waiting[static_cast<size_t>(i)] == 0) ready.push_back(i);
    int done = 0;
    while (!ready.empty()) {
        const int i = ready.back();
        ready.pop_back();
        ++done;
        for (int u : users[static_cast<size_t>(i)])
            if (--waiting[static_cast<size_t>(u)] == 0) ready.push_back(u);
    }
    if (done != g.node_size()) {
        for (int i = 0; i < g.node_size(); ++i)
            if (waiting[static_cast<size_t>(i)] > 0)
                throw FormatError(
                    path, "the graph has a cycle: " + nodeName(i) + " depends, through other nodes, on its own output");
    }
    for (const auto& o : g.output())
        if (!defined.count(o.name()) && !producer.count(o.name()))
            throw FormatError(path, "graph output '" + cutForMessage(o.name()) + "' is not produced by any node");
}

// Everything a runtime relies on, checked before any runtime (OpenCV, Strata) sees the file.
void validateOnnxModel(const std::string& path, const onnx::ModelProto& proto) {
    if (!proto.has_graph()) throw FormatError(path, "ONNX model without a graph");
    const onnx::GraphProto& g = proto.graph();
    for (const auto& t : g.initializer()) checkOnnxInitializer(path, t);
    for (const auto& n : g.node())
        for (const auto& a : n.attribute())
            if (a.has_t()) checkOnnxInitializer(path, a.t());
    auto checkDims = [&](const onnx::ValueInfoProto& vi) {
        for (const auto& d : vi.type().tensor_type().shape().dim())
            if (d.has_dim_value() && d.dim_value() < 0)
                throw FormatError(path, "value '" + cutForMessage(vi.name()) + "' has negative dimension " +
                                            std::to_string(d.dim_value()));
    };
    for (const auto& vi : g.input()) checkDims(vi);
    for (const auto& vi : g.output()) checkDims(vi);
    for (const auto& vi : g.value_info()) checkDims(vi);
    checkOnnxGraph(path, g);
    // Then the reference checker: operator schemas (an unknown operator or domain, wrong attribute types or
    // input counts), opset imports, IR version, and what the checks above leave out.
    try {
        onnx::checker::check_model(proto);
    } catch (const std::exception& e) {
        throw FormatError(path, "fails onnx::checker: " + cutForMessage(e.what(), 400));
    }
}

OnnxModelInfo infoFromProto(const std::string& path, const onnx::ModelProto& proto);

}  // namespace

OnnxModelInfo readOnnx(const std::string& path) {
    InputStream in(path, kMaxOnnxFileBytes, "an ONNX file");
    onnx::ModelProto proto;
    if (!proto.ParseFromIstream(&in)) throw FormatError(path, "not an ONNX model (protobuf ModelProto parse failed)");
    return infoFromProto(path, proto);
}

OnnxModelInfo readOnnxBytes(const std::string& name, const void* data, size_t size) {
    onnx::ModelProto proto;
    if (size > static_cast<size_t>(INT32_MAX) || !proto.ParseFromArray(data, static_cast<int>(size)))
        throw FormatError(name, "not an ONNX model (protobuf ModelProto parse failed)");
    return infoFromProto(name, proto);
}

namespace {
OnnxModelInfo infoFromProto(const std::string& path, const onnx::ModelProto& proto) {
    validateOnnxModel(path, proto);
    OnnxModelInfo info;
    info.irVersion = proto.ir_version();
    for (const auto& op : proto.opset_import())
        if (op.domain().empty() || op.domain() == "ai.onnx") info.opset = static_cast<int>(op.version());
    info.producerName = proto.producer_name();
    info.producerVersion = proto.producer_version();
    for (const auto& m : proto.metadata_props()) info.metadata[m.key()] = m.value();
    const onnx::GraphProto& g = proto.graph();
    std::set<std::string> initNames;
    for (const auto& t : g.initializer()) initNames.insert(t.name());
    auto dimsOf = [](const onnx::ValueInfoProto& vi) {
        std::vector<int64_t> dims;
        for (const auto& d : vi.type().tensor_type().shape().dim())
            dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
        return dims;
    };
    std::vector<const onnx::ValueInfoProto*> inputs;
    for (const auto& vi : g.input())
        if (!initNames.count(vi.name())) inputs.push_back(&vi);
    if (inputs.size() != 1 || g.output_size() != 1)
        throw FormatError(path, "expected one graph input and one output, found " + std::to_string(inputs.size()) +
                                    " and " + std::to_string(g.output_size()));
    info.inputName = inputs[0]->name();
    info.inputDims = dimsOf(*inputs[0]);
    info.outputName = g.output(0).name();
    info.outputDims = dimsOf(g.output(0));
    // An initializer, or a Constant node's value under its output's name; other data types are left out.
    auto addInitializer = [&](const onnx::TensorProto& t, const std::string& name) {
        std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
        int64_t numel = 1;
        for (int64_t d : dims) numel *= d;  // validateOnnxModel checked: no negative dims, no overflow
        const std::string where = "initializer '" + name + "': ";
        if (t.data_type() == onnx::TensorProto::FLOAT) {
            std::vector<float> values;
            if (t.has_raw_data()) {
                if (t.raw_data().size() != static_cast<size_t>(numel) * 4)
                    throw FormatError(path, where + std::to_string(t.raw_data().size()) + " raw bytes for " +
                                                std::to_string(numel) + " floats");
                values.resize(static_cast<size_t>(numel));
                std::memcpy(values.data(), t.raw_data().data(), t.raw_data().size());
            } else {
                if (t.float_data_size() != numel) throw FormatError(path, where + "float_data does not match dims");
                values.assign(t.float_data().begin(), t.float_data().end());
            }
            info.initializers.push_back(makeF32Record(name, Shape(dims), values));
        } else if (t.data_type() == onnx::TensorProto::INT64) {
            std::vector<int64_t> values;
            if (t.has_raw_data()) {
                if (t.raw_data().size() != static_cast<size_t>(numel) * 8)
                    throw FormatError(path, where + "raw data does not match dims");
                values.resize(static_cast<size_t>(numel));
                std::memcpy(values.data(), t.raw_data().data(), t.raw_data().size());
            } else {
                if (t.int64_data_size() != numel) throw FormatError(path, where + "int64_data does not match dims");
                values.assign(t.int64_data().begin(), t.int64_data().end());
            }
            info.int64Initializers[name] = std::move(values);
        } else if (t.data_type() == onnx::TensorProto::INT8 || t.data_type() == onnx::TensorProto::UINT8 ||
                   t.data_type() == onnx::TensorProto::INT32) {
            const bool wide = t.data_type() == onnx::TensorProto::INT32;
            std::vector<int32_t> values(static_cast<size_t>(numel));
            if (t.has_raw_data()) {
                const size_t width = wide ? 4 : 1;
                if (t.raw_data().size() != static_cast<size_t>(numel) * width)
                    throw FormatError(path, where + std::to_string(t.raw_data().size()) + " raw bytes for " +
                                                std::to_string(numel) + " values");
                const auto* raw = reinterpret_cast<const uint8_t*>(t.raw_data().data());
                for (size_t i = 0; i < values.size(); ++i) {
                    if (wide)
                        std::memcpy(&values[i], raw + 4 * i, 4);
                    else
                        values[i] = t.data_type() == onnx::TensorProto::INT8 ? static_cast<int8_t>(raw[i]) : raw[i];
                }
            } else {
                if (t.int32_data_size() != numel) throw FormatError(path, where + "int32_data does not match dims");
                values.assign(t.int32_data().begin(), t.int32_data().end());
            }
            OnnxIntegerTensor& it = info.integerInitializers[name];
            it.type = wide ? "INT32" : t.data_type() == onnx::TensorProto::INT8 ? "INT8" : "UINT8";
            it.dims = dims;
            it.values = std::move(values);
        }
    };
    for (const auto& t : g.initializer()) addInitializer(t, t.name());
    for (const auto& n : g.node()) {
        // Exporters (torch.onnx.export) write constants as Constant nodes: read as the initializers they stand
        // for, so that readers find a Reshape's shape or a Clip's bounds the same either way.
        if (n.op_type() == "Constant" && n.output_size() == 1 && n.attribute_size() == 1 &&
            n.attribute(0).name() == "value" && n.attribute(0).has_t() &&
            (n.attribute(0).t().data_type() == onnx::TensorProto::FLOAT ||
             n.attribute(0).t().data_type() == onnx::TensorProto::INT64 ||
             n.attribute(0).t().data_type() == onnx::TensorProto::INT32 ||
             n.attribute(0).t().data_type() == onnx::TensorProto::INT8 ||
             n.attribute(0).t().data_type() == onnx::TensorProto::UINT8)) {
            addInitializer(n.attribute(0).t(), n.output(0));
            ++info.constantNodes;
            continue;
        }
        OnnxNodeInfo ni;
        ni.name = n.name();
        ni.opType = n.op_type();
        ni.inputs.assign(n.input().begin(), n.input().end());
        ni.outputs.assign(n.output().begin(), n.output().end());
        for (const auto& a : n.attribute()) {
            if (a.type() == onnx::AttributeProto::INT) ni.intAttributes[a.name()] = a.i();
            if (a.type() == onnx::AttributeProto::FLOAT) ni.floatAttributes[a.name()] = a.f();
            if (a.type() == onnx::AttributeProto::INTS)
                ni.intsAttributes[a.name()].assign(a.ints().begin(), a.ints().end());
            if (a.type() == onnx::AttributeProto::STRING) ni.stringAttributes[a.name()] = a.s();
        }
        info.nodes.push_back(std::move(ni));
    }
    return info;
}

}  // namespace

}  // namespace strata
