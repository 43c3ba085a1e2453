#include "core/export/ExportModel.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>

#include "core/backend/BackendRegistry.h"
#include "core/data/Dataset.h"
#include "core/data/SubwordTokenizer.h"
#include "core/export/Gguf.h"
#include "core/export/Onnx.h"
#include "core/graph/Model.h"
#include "core/io/Base64.h"
#include "core/io/Half.h"
#include "core/io/InputFile.h"
#include "core/io/JsonInput.h"
#include "core/io/Safetensors.h"
#include "core/layers/LayerRegistry.h"

namespace strata {

namespace {

namespace fs = std::filesystem;

constexpr const char* kMetaNormalization = "strata.normalization";
constexpr const char* kGgufFeatureMean = "strata.normalization.feature_mean";
constexpr const char* kGgufFeatureStd = "strata.normalization.feature_std";

Json normalizationJson(const Normalization& n) {
    Json j{{"mode", n.mode}, {"scale", n.scale}, {"mean", n.mean}, {"std", n.std}};
    if (!n.featureMean.empty()) {
        j["feature_mean"] = n.featureMean;
        j["feature_std"] = n.featureStd;
    }
    return j;
}

Normalization normalizationFromJson(const Json& j) {
    Normalization n;
    n.mode = j.at("mode").get<std::string>();
    n.scale = j.at("scale").get<float>();
    n.mean = j.at("mean").get<float>();
    n.std = j.at("std").get<float>();
    n.featureMean = j.value("feature_mean", std::vector<float>{});
    n.featureStd = j.value("feature_std", std::vector<float>{});
    return n;
}

// The loaders check statistics read from a file (a std of 0 or NaN would divide every input by it) and against the
// graph the file carries.
void checkLoadedNormalization(const ExportModel& m, const std::string& path) {
    try {
        checkNormalization(m.normalization, m.project.graph);
    } catch (const std::exception& e) {
        throw FormatError(path, e.what());
    }
}

Project projectFromText(const std::string& text, const std::string& path) {
    try {
        return parseProject(text, path);
    } catch (const std::exception& e) {
        throw FormatError(path, std::string("the embedded project is invalid: ") + e.what());
    }
}

// The SentencePiece model of a file's metadata (base64).
std::string decodedModel(const std::string& text, const std::string& path) {
    try {
        return base64Decode(text);
    } catch (const std::invalid_argument& e) {
        throw FormatError(path, std::string(kMetaTokenizerModel) + " is not valid: " + e.what());
    }
}

std::vector<std::string> stringArray(const std::string& text, const std::string& path, const std::string& key) {
    try {
        return parseJson<Json>(text, path).get<std::vector<std::string>>();
    } catch (const std::exception& e) {
        throw FormatError(path, key + " is not a JSON array of strings: " + e.what());
    }
}

std::string shapeLine(const std::string& name, const Shape& shape, const char* type) {
    return name + " " + shape.toString() + " " + type;
}

uint64_t fileSize(const std::string& path) {
    std::error_code ec;
    const auto n = fs::file_size(path, ec);
    return ec ? 0 : static_cast<uint64_t>(n);
}

// Shapes come from the graph; weights from the file must match them exactly, and be finite (as dequantized: a
// Q8_0 or Q4_0 block's f16 scale can be inf or NaN) unless the options allow otherwise.
ExportModel withWeightsChecked(ExportModel model, const std::string& path, const WeightLoadOptions& options) {
    checkLoadedNormalization(model, path);
    try {
        checkExportWeights(model, exportParameters(model.project.graph));
    } catch (const std::exception& e) {
        throw FormatError(path, e.what());
    }
    for (const auto& [name, values] : model.weights)
        if (std::string problem = nonFiniteProblem(name, values, options); !problem.empty())
            throw FormatError(path, problem);
    return model;
}

ExportModel loadSafetensorsExport(const std::string& path, const SafetensorsContents& contents,
                                  const WeightLoadOptions& options) {
    auto meta = [&](const char* key) -> const std::string* {
        auto it = contents.metadata.find(key);
        return it == contents.metadata.end() ? nullptr : &it->second;
    };
    if (!meta(kMetaProject))
        throw FormatError(path,
                          "a safetensors file without Strata metadata (no 'strata.project' or "
                          "'strata.checkpoint'): not a Strata export or checkpoint");
    ExportModel m;
    m.project = projectFromText(*meta(kMetaProject), path);
    if (const std::string* s = meta(kMetaClassLabels)) m.classNames = stringArray(*s, path, kMetaClassLabels);
    if (const std::string* s = meta(kMetaVocabulary)) m.vocabulary = stringArray(*s, path, kMetaVocabulary);
    if (const std::string* s = meta(kMetaTokenizerModel)) m.tokenizerModel = decodedModel(*s, path);
    if (const std::string* s = meta(kMetaTargetNormalization)) readTargetNormalization(m, *s, path);
    if (const std::string* s = meta(kMetaNormalization)) {
        try {
            m.normalization = normalizationFromJson(parseJson<Json>(*s, path));
        } catch (const std::exception& e) {
            throw FormatError(path, std::string("strata.normalization is invalid: ") + e.what());
        }
    }
    for (const TensorRecord& t : contents.tensors) {
        try {
            m.weights[t.name] = recordToFloats(t);
        } catch (const std::exception& e) {
            throw FormatError(path, e.what());
        }
    }
    return withWeightsChecked(std::move(m), path, options);
}

ExportModel loadGgufExport(const std::string& path, const WeightLoadOptions& options) {
    const GgufFile g = readGguf(path);
    ExportModel m;
    try {
        const std::string arch = g.getString("general.architecture");
        if (arch != "strata")
            throw std::runtime_error("general.architecture is '" + arch + "', not 'strata': not a Strata export");
        m.project = projectFromText(g.getString(kMetaProject), path);
        if (g.find(kMetaClassLabels)) m.classNames = g.getStringArray(kMetaClassLabels);
        if (g.find("tokenizer.ggml.tokens"))
            m.vocabulary = g.getStringArray("tokenizer.ggml.tokens");
        else if (g.find(kMetaVocabulary))
            m.vocabulary = g.getStringArray(kMetaVocabulary);
        if (g.find(kMetaTokenizerModel)) m.tokenizerModel = decodedModel(g.getString(kMetaTokenizerModel), path);
        if (g.find(kMetaTargetNormalization)) readTargetNormalization(m, g.getString(kMetaTargetNormalization), path);
        if (g.find("strata.normalization.mode")) {
            m.normalization.mode = g.getString("strata.normalization.mode");
            m.normalization.scale = g.getFloat32("strata.normalization.scale");
            m.normalization.mean = g.getFloat32("strata.normalization.mean");
            m.normalization.std = g.getFloat32("strata.normalization.std");
            if (g.find(kGgufFeatureMean)) m.normalization.featureMean = g.getFloat32Array(kGgufFeatureMean);
            if (g.find(kGgufFeatureStd)) m.normalization.featureStd = g.getFloat32Array(kGgufFeatureStd);
        }
        for (const GgufTensor& t : g.tensors()) m.weights[t.name] = g.tensorFloats(t.name);
    } catch (const FormatError&) {
        throw;
    } catch (const std::exception& e) {
        throw FormatError(path, e.what());
    }
    return withWeightsChecked(std::move(m), path, options);
}

// A parameter stored as integers behind a DequantizeLinear (an int8 file): (q - zero point) * scale, per
// channel of its axis (0 for most; Conv1D's filters are axis 1) or per tensor.
std::vector<float> dequantizedInitializer(const OnnxModelInfo& info, const OnnxNodeInfo& dq, const ExportParameter& p,
                                          const std::string& path) {
    const std::string where = "'" + p.name + "' (" + dq.name + "): ";
    if (dq.inputs.size() != 3) throw FormatError(path, where + "DequantizeLinear without scale and zero point");
    auto q = info.integerInitializers.find(dq.inputs[0]);
    auto zp = info.integerInitializers.find(dq.inputs[2]);
    const TensorRecord* scaleRecord = info.initializer(dq.inputs[1]);
    if (q == info.integerInitializers.end() || zp == info.integerInitializers.end() || !scaleRecord)
        throw FormatError(path, where + "its integer data, scale or zero point is not an initializer");
    const std::vector<float> scale = recordToFloats(*scaleRecord);
    const std::vector<int32_t>& qv = q->second.values;
    const std::vector<int32_t>& zv = zp->second.values;
    if (static_cast<int64_t>(qv.size()) != p.shape.numel())
        throw FormatError(path, where + std::to_string(qv.size()) + " values, the graph expects " + p.shape.toString());
    const auto axisIt = dq.intAttributes.find("axis");
    const int64_t axis = axisIt == dq.intAttributes.end() ? 1 : axisIt->second;  // ONNX's default axis is 1
    const int64_t channels = scale.size() == 1 ? 1 : axis >= 0 && axis < p.shape.rank() ? p.shape[axis] : -1;
    if (scale.size() != zv.size() || (scale.size() != 1 && static_cast<int64_t>(scale.size()) != channels))
        throw FormatError(path, where + std::to_string(scale.size()) +
                                    " scales: expected one, or one per channel of its axis (" + std::to_string(axis) +
                                    ")");
    std::vector<float> out(qv.size());
    // The channel of value i: (i / inner) % channels, inner the values after the axis.
    const size_t inner =
        scale.size() == 1 ? out.size() : static_cast<size_t>(p.shape.product(axis + 1, p.shape.rank()));
    for (size_t i = 0; i < out.size(); ++i) {
        const size_t c = scale.size() == 1 ? 0 : (i / inner) % static_cast<size_t>(channels);
        out[i] = static_cast<float>(qv[i] - zv[c]) * scale[c];
    }
    return out;
}

ExportModel loadOnnxExport(const std::string& path, const WeightLoadOptions& options) {
    const OnnxModelInfo info = readOnnx(path);
    auto it = info.metadata.find(kMetaProject);
    if (it == info.metadata.end())
        throw FormatError(path, "an ONNX file without 'strata.project' metadata: not written by Strata");
    ExportModel m;
    m.project = projectFromText(it->second, path);
    if (auto c = info.metadata.find(kMetaClassLabels); c != info.metadata.end())
        m.classNames = stringArray(c->second, path, kMetaClassLabels);
    if (auto v = info.metadata.find(kMetaVocabulary); v != info.metadata.end())
        m.vocabulary = stringArray(v->second, path, kMetaVocabulary);
    if (auto t = info.metadata.find(kMetaTokenizerModel); t != info.metadata.end())
        m.tokenizerModel = decodedModel(t->second, path);
    if (auto t = info.metadata.find(kMetaTargetNormalization); t != info.metadata.end())
        readTargetNormalization(m, t->second, path);
    if (auto n = info.metadata.find(kMetaNormalization); n != info.metadata.end()) {
        try {
            m.normalization = normalizationFromJson(parseJson<Json>(n->second, path));
        } catch (const std::exception& e) {
            throw FormatError(path, std::string("strata.normalization is invalid: ") + e.what());
        }
    }
    // Only the model's own parameters: the graph also holds constants (normalization, GELU, shapes).
    for (const ExportParameter& p : exportParameters(m.project.graph)) {
        if (const TensorRecord* t = info.initializer(p.name)) {
            m.weights[p.name] = recordToFloats(*t);
            continue;
        }
        const OnnxNodeInfo* dq = nullptr;
        for (const OnnxNodeInfo& n : info.nodes)
            if (n.opType == "DequantizeLinear" && n.outputs.size() == 1 && n.outputs[0] == p.name) dq = &n;
        if (!dq) throw FormatError(path, "initializer '" + p.name + "' is missing");
        m.weights[p.name] = dequantizedInitializer(info, *dq, p, path);
    }
    // An int8 file's activations: the parameters of each "<node>/quantize".
    for (const OnnxNodeInfo& n : info.nodes) {
        const std::string suffix = "/quantize";
        if (n.opType != "QuantizeLinear" || n.name.size() <= suffix.size() ||
            n.name.compare(n.name.size() - suffix.size(), suffix.size(), suffix) != 0)
            continue;
        if (n.inputs.size() != 3) throw FormatError(path, n.name + ": QuantizeLinear without scale and zero point");
        const TensorRecord* scale = info.initializer(n.inputs[1]);
        auto zp = info.integerInitializers.find(n.inputs[2]);
        if (!scale || zp == info.integerInitializers.end() || recordToFloats(*scale).size() != 1 ||
            zp->second.values.size() != 1)
            throw FormatError(path, n.name + ": expected a scalar scale and uint8 zero point");
        ActivationQuant q;
        q.scale = recordToFloats(*scale)[0];
        q.zeroPoint = zp->second.values[0];
        if (!(q.scale > 0) || !std::isfinite(q.scale) || q.zeroPoint < 0 || q.zeroPoint > 255)
            throw FormatError(path, n.name + ": scale " + std::to_string(q.scale) + " and zero point " +
                                        std::to_string(q.zeroPoint) + " are not uint8 quantization parameters");
        m.int8Activations[n.name.substr(0, n.name.size() - suffix.size())] = q;
    }
    return withWeightsChecked(std::move(m), path, options);
}

}  // namespace

std::string targetNormalizationText(const ExportModel& model) {
    return model.targetNormalization.mode == "none" ? std::string()
                                                    : normalizationJson(model.targetNormalization).dump();
}

void readTargetNormalization(ExportModel& model, const std::string& text, const std::string& path) {
    try {
        model.targetNormalization = normalizationFromJson(parseJson<Json>(text, path));
        checkNormalizationValues(model.targetNormalization);
    } catch (const std::exception& e) {
        throw FormatError(path, std::string(kMetaTargetNormalization) + " is invalid: " + e.what());
    }
}

std::vector<ExportParameter> exportParameters(const Graph& graph) {
    const GraphAnalysis analysis = analyzeGraph(graph);
    if (!analysis.ok()) throw std::runtime_error("the graph is invalid: " + analysis.problems.front().message);
    std::vector<ExportParameter> out;
    for (int id : graph.topologicalOrder()) {
        const Node& n = *graph.node(id);
        const LayerType* type = layerRegistry().find(n.type);
        if (!type) throw std::runtime_error(n.name + ": unknown layer type '" + n.type + "'");
        std::vector<Shape> inputs;
        for (const std::string& port : graph.inputPorts(id))
            inputs.push_back(analysis.outputShapes.at(graph.edgeInto({id, port})->from.node));
        for (const ParameterSpec& s : type->parameterSpecs(analysis.params.at(id), inputs))
            out.push_back({n.name + "." + s.name, id, s.name, s.shape, s.trainable});
    }
    return out;
}

void checkExportWeights(const ExportModel& model, const std::vector<ExportParameter>& params) {
    std::set<std::string> expected;
    for (const ExportParameter& p : params) {
        expected.insert(p.name);
        auto it = model.weights.find(p.name);
        if (it == model.weights.end()) throw std::runtime_error("weights for '" + p.name + "' are missing");
        if (static_cast<int64_t>(it->second.size()) != p.shape.numel())
            throw std::runtime_error("weights for '" + p.name + "' have " + std::to_string(it->second.size()) +
                                     " values, the graph expects " + p.shape.toString());
    }
    for (const auto& [name, values] : model.weights)
        if (!expected.count(name)) throw std::runtime_error("tensor '" + name + "' is not a parameter of the graph");
}

ExportModel untrainedExportModel(const Project& project, const std::string& projectPath) {
    ExportModel m;
    m.project = project;
    BackendOptions oneThread;
    oneThread.threads = 1;
    auto backend = backendRegistry().create(Device::cpu(), oneThread);
    auto model = compile(project.graph, *backend, project.training.seed);
    m.weights = modelWeights(*model);
    const DatasetBundle data = loadDataset(project.dataset, projectPath);
    m.normalization = data.normalization;
    m.targetNormalization = data.targetNormalization;
    m.classNames = data.classNames;
    m.vocabulary = data.vocabulary;
    m.tokenizerModel = data.tokenizerModel;
    return m;
}

ExportModel exportModelFromCheckpoint(const Checkpoint& c) {
    checkNormalization(c.normalization, c.project.graph);
    ExportModel m;
    m.project = c.project;
    m.weights = c.weights;
    m.normalization = c.normalization;
    m.targetNormalization = c.targetNormalization;
    m.classNames = c.classNames;
    m.vocabulary = c.vocabulary;
    m.tokenizerModel = c.tokenizerModel;
    return m;
}

void checkNormalization(const Normalization& norm, const Graph& graph) {
    try {
        checkNormalizationValues(norm);
    } catch (const std::invalid_argument& e) {
        throw std::runtime_error(e.what());
    }
    if (norm.featureMean.empty() && norm.featureStd.empty()) return;
    if (norm.featureMean.size() != norm.featureStd.size())
        throw std::runtime_error("per-feature normalization has " + std::to_string(norm.featureMean.size()) +
                                 " means but " + std::to_string(norm.featureStd.size()) + " standard deviations");
    const GraphAnalysis analysis = analyzeGraph(graph);
    if (!analysis.ok()) throw std::runtime_error("the graph is invalid: " + analysis.problems.front().message);
    for (const Node* n : graph.nodes()) {
        if (!graph.layerType(n->id)->isGraphInput()) continue;  // analyzed: every type is known
        const Shape& shape = analysis.outputShapes.at(n->id);
        if (static_cast<int64_t>(norm.featureMean.size()) != shape.numel())
            throw std::runtime_error("per-feature normalization has " + std::to_string(norm.featureMean.size()) +
                                     " features, the input '" + n->name + "' takes " + shape.toString());
    }
    for (size_t j = 0; j < norm.featureStd.size(); ++j)
        if (!(norm.featureStd[j] > 0.f) || !std::isfinite(norm.featureMean[j]))
            throw std::runtime_error("per-feature normalization: feature " + std::to_string(j) + " has mean " +
                                     std::to_string(norm.featureMean[j]) + " and std " +
                                     std::to_string(norm.featureStd[j]));
}

ExportPrecision parseExportPrecision(const std::string& text) {
    if (text == "f32") return ExportPrecision::F32;
    if (text == "f16") return ExportPrecision::F16;
    if (text == "q8_0") return ExportPrecision::Q8_0;
    if (text == "q4_0") return ExportPrecision::Q4_0;
    if (text == "int8") return ExportPrecision::Int8;
    throw std::invalid_argument("unknown precision '" + text + "' (expected f32, f16, q8_0, q4_0 or int8)");
}

ExportSummary writeSafetensorsExport(const std::string& path, const ExportModel& model, ExportPrecision precision) {
    if (precision == ExportPrecision::Q8_0 || precision == ExportPrecision::Q4_0)
        throw std::invalid_argument(
            "safetensors has no Q8_0 or Q4_0 type; use --format gguf for those, or --quantize f16");
    if (precision == ExportPrecision::Int8)
        throw std::invalid_argument("int8 quantization writes ONNX (--format onnx); safetensors takes f32 or f16");
    const std::vector<ExportParameter> params = exportParameters(model.project.graph);
    checkExportWeights(model, params);
    checkNormalization(model.normalization, model.project.graph);
    ExportSummary summary;
    std::vector<TensorRecord> records;
    for (const ExportParameter& p : params) {
        TensorRecord r = makeF32Record(p.name, p.shape, model.weights.at(p.name));
        if (precision == ExportPrecision::F16 && p.shape.rank() >= 2) {
            const std::vector<float>& v = model.weights.at(p.name);
            r.dtype = DType::F16;
            r.data.resize(v.size() * 2);
            for (size_t i = 0; i < v.size(); ++i) {
                const uint16_t h = floatToHalf(v[i]);
                r.data[2 * i] = static_cast<uint8_t>(h & 0xff);
                r.data[2 * i + 1] = static_cast<uint8_t>(h >> 8);
            }
        }
        summary.tensors.push_back(shapeLine(p.name, p.shape, safetensorsDTypeName(r.dtype)));
        records.push_back(std::move(r));
    }
    std::map<std::string, std::string> meta{
        {"format", "pt"},
        {kMetaProject, projectToJson(model.project).dump()},
        {kMetaClassLabels, Json(model.classNames).dump()},
        {kMetaVocabulary, Json(model.vocabulary).dump()},
        {kMetaNormalization, normalizationJson(model.normalization).dump()},
    };
    if (!model.tokenizerModel.empty()) meta[kMetaTokenizerModel] = base64Encode(model.tokenizerModel);
    if (const std::string t = targetNormalizationText(model); !t.empty()) meta[kMetaTargetNormalization] = t;
    writeSafetensors(path, records, meta);
    summary.bytes = fileSize(path);
    return summary;
}

ExportSummary writeGgufExport(const std::string& path, const ExportModel& model, ExportPrecision precision) {
    if (precision == ExportPrecision::Int8)
        throw std::invalid_argument("int8 quantization writes ONNX (--format onnx); GGUF's 8-bit type is q8_0");
    const std::vector<ExportParameter> params = exportParameters(model.project.graph);
    checkExportWeights(model, params);
    checkNormalization(model.normalization, model.project.graph);
    GgufFile g;
    g.setString("general.architecture", "strata");
    g.setString("general.name", model.project.name.empty() ? "strata-model" : model.project.name);
    g.setUInt32("general.alignment", kGgufDefaultAlignment);
    // llama.cpp's LLAMA_FTYPE: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q4_0 2, MOSTLY_Q8_0 7.
    g.setUInt32("general.file_type", precision == ExportPrecision::F32    ? 0u
                                     : precision == ExportPrecision::F16  ? 1u
                                     : precision == ExportPrecision::Q4_0 ? 2u
                                                                          : 7u);
    g.setString(kMetaProject, projectToJson(model.project).dump());
    g.setStringArray(kMetaClassLabels, model.classNames);
    if (const std::string t = targetNormalizationText(model); !t.empty()) g.setString(kMetaTargetNormalization, t);
    if (!model.vocabulary.empty()) {
        // The tokenizer, in the keys llama.cpp reads a model's tokenizer from.
        // SentencePiece as llama.cpp keeps it ("llama": unigram pieces with their scores); ours, by name.
        const bool pieces = model.project.dataset.tokenizer == Tokenizer::SentencePiece;
        g.setString("tokenizer.ggml.model", pieces                                               ? "llama"
                                            : model.project.dataset.tokenizer == Tokenizer::Char ? "strata-char"
                                                                                                 : "strata-word");
        g.setStringArray("tokenizer.ggml.tokens", model.vocabulary);
        if (pieces) {
            g.setFloat32Array("tokenizer.ggml.scores",
                              SubwordTokenizer::fromSerialized(model.tokenizerModel, path).scores());
            g.setString(kMetaTokenizerModel, base64Encode(model.tokenizerModel));
        }
        g.setUInt32("tokenizer.ggml.padding_token_id", 0);
        g.setUInt32("tokenizer.ggml.unknown_token_id", 1);
    }
    g.setString("strata.normalization.mode", model.normalization.mode);
    g.setFloat32("strata.normalization.scale", model.normalization.scale);
    g.setFloat32("strata.normalization.mean", model.normalization.mean);
    g.setFloat32("strata.normalization.std", model.normalization.std);
    if (!model.normalization.featureMean.empty()) {
        g.setFloat32Array(kGgufFeatureMean, model.normalization.featureMean);
        g.setFloat32Array(kGgufFeatureStd, model.normalization.featureStd);
    }
    ExportSummary summary;
    for (const ExportParameter& p : params) {
        GgufTensorType type = GgufTensorType::F32;
        const bool blocks = precision == ExportPrecision::Q8_0 || precision == ExportPrecision::Q4_0;
        if (p.shape.rank() >= 2 && precision != ExportPrecision::F32) {
            if (!blocks || !q8Compatible(p.shape))
                type = GgufTensorType::F16;
            else
                type = precision == ExportPrecision::Q8_0 ? GgufTensorType::Q8_0 : GgufTensorType::Q4_0;
        }
        if (blocks && type == GgufTensorType::F16) summary.fallbacks.push_back(p);
        g.addTensor(p.name, p.shape, model.weights.at(p.name), type);
        summary.tensors.push_back(shapeLine(p.name, p.shape, ggufTensorTypeName(type)));
    }
    setGgufChecksums(g);
    writeGguf(path, g);
    summary.bytes = fileSize(path);
    return summary;
}

ExportModel loadModelFile(const std::string& path, const WeightLoadOptions& options) {
    std::error_code ec;
    if (!fs::exists(path, ec)) throw std::runtime_error(path + ": no such file or folder");
    if (fs::is_directory(path, ec)) return exportModelFromCheckpoint(loadCheckpoint(path, options));
    char magic[4] = {};
    InputFile(path, kMaxModelFileBytes, "a model file").read(magic, 4);  // refuses a FIFO or device at once
    if (std::string(magic, 4) == "GGUF") return loadGgufExport(path, options);
    if (fs::path(path).extension() == ".onnx") return loadOnnxExport(path, options);
    const SafetensorsContents contents = readSafetensors(path);
    if (contents.metadata.count("strata.checkpoint")) return exportModelFromCheckpoint(loadCheckpoint(path, options));
    return loadSafetensorsExport(path, contents, options);
}

}  // namespace strata
