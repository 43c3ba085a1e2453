// The ONNX importer (OnnxImport.h): foreign forms rewritten, layers read through the mapping table, the graph
// built, checked and laid out, the weights kept.
#include "core/export/OnnxImport.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/export/ExportModel.h"
#include "core/export/OnnxLayers.h"
#include "core/io/FormatError.h"
#include "core/io/InputLimits.h"
#include "core/layers/LayerRegistry.h"
#include "core/train/Checkpoint.h"

namespace strata {

namespace {

namespace fs = std::filesystem;

constexpr int64_t kOnnxInt64Type = 7;  // TensorProto::INT64, Cast's "to"

std::string nodeLabel(const OnnxNodeInfo& n, size_t index) {
    return n.name.empty() ? "#" + std::to_string(index) : cutForMessage(n.name, 120);
}

// A float initializer by name (the vector may grow, so no pointer is kept across additions).
const TensorRecord* floatInit(const OnnxModelInfo& info, const std::string& name) { return info.initializer(name); }

bool isConstant(const OnnxModelInfo& info, const std::string& v) {
    return info.initializer(v) || info.int64Initializers.count(v) || info.integerInitializers.count(v);
}

std::string freshValueName(const OnnxModelInfo& info, const std::set<std::string>& used, const std::string& base) {
    std::string name = base;
    for (int k = 2; used.count(name) || isConstant(info, name); ++k) name = base + "_" + std::to_string(k);
    return name;
}

// Rewrites the forms other exporters write into the forms the mapping table reads (see OnnxImport.h).
void rewriteForeignForms(OnnxModelInfo& info, std::vector<std::string>& absorbed) {
    std::set<std::string> used;
    for (const OnnxNodeInfo& n : info.nodes) {
        used.insert(n.inputs.begin(), n.inputs.end());
        used.insert(n.outputs.begin(), n.outputs.end());
    }
    used.insert(info.inputName);
    // Identity: its readers read its input instead (chains resolved); one at the graph's output whose input is
    // a node's output moves the graph's output there.
    std::map<std::string, std::string> alias;
    auto resolve = [&](std::string v) {
        for (auto it = alias.find(v); it != alias.end(); it = alias.find(v)) v = it->second;
        return v;
    };
    std::vector<OnnxNodeInfo> kept;
    int identities = 0;
    for (OnnxNodeInfo& n : info.nodes) {
        for (std::string& in : n.inputs) in = resolve(in);
        if (n.opType == "Identity" && n.inputs.size() == 1 && n.outputs.size() == 1) {
            const bool graphOutput = n.outputs[0] == info.outputName;
            if (!graphOutput || (!isConstant(info, n.inputs[0]) && n.inputs[0] != info.inputName)) {
                alias[n.outputs[0]] = n.inputs[0];
                if (graphOutput) info.outputName = n.inputs[0];
                ++identities;
                continue;
            }
        }
        kept.push_back(std::move(n));
    }
    if (identities)
        absorbed.push_back(std::to_string(identities) + " Identity node(s): their readers read their inputs");
    if (info.constantNodes)
        absorbed.push_back(std::to_string(info.constantNodes) + " Constant node(s): read as the constants they hold");

    std::vector<OnnxNodeInfo> out;
    out.reserve(kept.size());
    int swapped = 0, gemms = 0, matmuls = 0, casts = 0;
    for (OnnxNodeInfo& n : kept) {
        const std::string label = n.name.empty() ? n.opType : n.name;
        // Add and Mul are commutative: the table's readers expect the constant second.
        if ((n.opType == "Add" || n.opType == "Mul") && n.inputs.size() == 2 && isConstant(info, n.inputs[0]) &&
            !isConstant(info, n.inputs[1])) {
            std::swap(n.inputs[0], n.inputs[1]);
            ++swapped;
        }
        // Gemm: Strata's Dense is x W^T + b with W [out, in]: transB 0 transposes the weight, alpha and beta scale
        // weight and bias.
        if (n.opType == "Gemm" && n.inputs.size() >= 2 && n.intAttr("transA", 0) == 0) {
            const TensorRecord* w = floatInit(info, n.inputs[1]);
            const float alpha = n.floatAttr("alpha", 1.f), beta = n.floatAttr("beta", 1.f);
            const bool transpose = n.intAttr("transB", 0) == 0;
            if (w && w->shape.rank() == 2 && (transpose || alpha != 1.f || beta != 1.f)) {
                std::vector<float> v = recordToFloats(*w);
                Shape s = w->shape;
                if (transpose) {
                    std::vector<float> t(v.size());
                    const int64_t rows = s[0], cols = s[1];
                    for (int64_t i = 0; i < rows; ++i)
                        for (int64_t j = 0; j < cols; ++j)
                            t[static_cast<size_t>(j * rows + i)] = v[static_cast<size_t>(i * cols + j)];
                    v = std::move(t);
                    s = Shape{cols, rows};
                }
                for (float& x : v) x *= alpha;
                const std::string name = freshValueName(info, used, n.inputs[1] + "/out_in");
                used.insert(name);
                info.initializers.push_back(makeF32Record(name, s, v));
                n.inputs[1] = name;
                if (beta != 1.f && n.inputs.size() > 2 && floatInit(info, n.inputs[2])) {
                    std::vector<float> b = recordToFloats(*floatInit(info, n.inputs[2]));
                    const Shape bs = floatInit(info, n.inputs[2])->shape;
                    for (float& x : b) x *= beta;
                    const std::string bn = freshValueName(info, used, n.inputs[2] + "/scaled");
                    used.insert(bn);
                    info.initializers.push_back(makeF32Record(bn, bs, b));
                    n.inputs[2] = bn;
                }
                n.intAttributes["transB"] = 1;
                n.floatAttributes.erase("alpha");
                if (beta == 1.f || n.inputs.size() > 2) n.floatAttributes.erase("beta");
                ++gemms;
            }
        }
        // MatMul by a constant [in, out] matrix (torch's Linear over a sequence): Strata's Dense reads
        // Transpose([out, in]) + MatMul; the weight is stored transposed and the Transpose added before.
        if (n.opType == "MatMul" && n.inputs.size() == 2 && !isConstant(info, n.inputs[0])) {
            const TensorRecord* w = floatInit(info, n.inputs[1]);
            if (w && w->shape.rank() == 2) {
                const std::vector<float> v = recordToFloats(*w);
                const int64_t rows = w->shape[0], cols = w->shape[1];
                std::vector<float> t(v.size());
                for (int64_t i = 0; i < rows; ++i)
                    for (int64_t j = 0; j < cols; ++j)
                        t[static_cast<size_t>(j * rows + i)] = v[static_cast<size_t>(i * cols + j)];
                const std::string base = n.outputs.empty() ? label : n.outputs[0];
                const std::string wName = freshValueName(info, used, base + "/weight_out_in");
                used.insert(wName);
                info.initializers.push_back(makeF32Record(wName, Shape{cols, rows}, t));
                const std::string tOut = freshValueName(info, used, base + "/weight_t");
                used.insert(tOut);
                OnnxNodeInfo& tr = out.emplace_back();
                tr.opType = "Transpose";
                tr.name = label + "/weight_t";
                tr.inputs = {wName};
                tr.outputs = {tOut};
                tr.intsAttributes["perm"] = {1, 0};
                n.inputs[1] = tOut;
                ++matmuls;
            }
        }
        // Token ids as the graph's integer input straight into Gather: Strata's Embedding reads float ids
        // through Cast to int64.
        if (n.opType == "Gather" && n.inputs.size() == 2 && n.inputs[1] == info.inputName &&
            floatInit(info, n.inputs[0]) && n.intAttr("axis", 0) == 0) {
            const std::string ids = freshValueName(info, used, info.inputName + "/ids");
            used.insert(ids);
            OnnxNodeInfo& cast = out.emplace_back();
            cast.opType = "Cast";
            cast.name = label + "/ids";
            cast.inputs = {info.inputName};
            cast.outputs = {ids};
            cast.intAttributes["to"] = kOnnxInt64Type;
            n.inputs[1] = ids;
            ++casts;
        }
        out.push_back(std::move(n));
    }
    info.nodes = std::move(out);
    if (swapped) absorbed.push_back(std::to_string(swapped) + " Add/Mul node(s): constant operand moved second");
    if (gemms)
        absorbed.push_back(std::to_string(gemms) + " Gemm node(s): weight transposed or scaled to Dense's [out, in]");
    if (matmuls)
        absorbed.push_back(std::to_string(matmuls) +
                           " MatMul node(s) by a constant [in, out] matrix: its transpose stored, as Dense keeps it");
    if (casts) absorbed.push_back(std::to_string(casts) + " Gather of the integer input: read as Embedding of ids");
}

// The nodes no layer read that only compute arguments of nodes a layer read (the Reshape shapes and Slice bounds
// of PyTorch's attention, from Shape, Gather, Concat ...): every output read only by read nodes or by other such
// nodes. A node whose output a layer reads as data is never one of them: that layer's input then has no producer
// and is reported. ONNX files list nodes in topological order, so one backward pass decides.
std::vector<bool> absorbableShapeArithmetic(const OnnxModelInfo& info, const OnnxLayerImports& imports) {
    static const std::set<std::string> ops{"Shape", "Gather",    "Unsqueeze", "Squeeze", "Concat", "Cast",
                                           "Slice", "Div",       "Mul",       "Add",     "Sub",    "Floor",
                                           "Ceil",  "Range",     "Expand",    "Equal",   "Where",  "ConstantOfShape",
                                           "Sqrt",  "ReduceProd"};
    const size_t n = info.nodes.size();
    std::vector<bool> taken(n, false), absorbable(n, false);
    for (const OnnxLayerImport& r : imports.layers)
        for (int k : r.nodes) taken[static_cast<size_t>(k)] = true;
    std::map<std::string, std::vector<size_t>> readers;
    for (size_t i = 0; i < n; ++i)
        for (const std::string& v : info.nodes[i].inputs) readers[v].push_back(i);
    for (size_t i = n; i-- > 0;) {
        const OnnxNodeInfo& node = info.nodes[i];
        if (taken[i] || !ops.count(node.opType)) continue;
        bool onlyArguments = true, read = false;
        for (const std::string& out : node.outputs) {
            if (out == info.outputName) onlyArguments = false;
            for (size_t r : readers[out]) {
                read = true;
                onlyArguments = onlyArguments && (taken[r] || absorbable[r]);
            }
        }
        absorbable[i] = onlyArguments && read;
    }
    return absorbable;
}

// What the table can make of an operator, for the message about a node no layer read.
std::string whyUnmapped(const OnnxNodeInfo& n) {
    static const std::map<std::string, std::string> hints{
        {"Conv", "only 2-D convolutions with symmetric padding and constant weights map to Conv2D"},
        {"Gemm", "Dense needs a constant 2-D weight and transA 0"},
        {"MatMul",
         "Dense needs a constant 2-D weight as the second operand; a product of two computed values is "
         "only read as part of a recognized attention block"},
        {"BatchNormalization", "BatchNorm needs constant scale, bias, mean and variance and inference mode"},
        {"MaxPool", "MaxPool2D needs 2-D kernels, symmetric padding, ceil_mode 0 and no dilation"},
        {"AveragePool",
         "AvgPool2D needs 2-D kernels, symmetric padding and ceil_mode 0, and leaves padding out of "
         "the count"},
        {"Flatten", "Flatten maps with axis 1 only"},
        {"Reshape",
         "Reshape maps with a constant shape that keeps the batch (-1 first); shapes computed at run time "
         "(Shape, Gather, Concat) are not folded"},
        {"Softmax", "Softmax maps over the last axis only"},
        {"Concat", "Concat maps 2 to 8 computed inputs along a non-batch axis"},
        {"Add", "Add maps sums of computed values, or a constant [T, D] table (PositionalEmbedding)"},
        {"Clip", "Clip maps with constant min and max"},
        {"Resize", "Upsample2D maps Resize of NCHW by constant integer scales (nearest or linear)"},
        {"Gather", "Embedding maps Gather of a constant 2-D table by the ids of the input along axis 0"},
        {"Shape",
         "shape arithmetic computed at run time is not folded; export with constant shapes "
         "(do_constant_folding=True and a fixed input size) or use Flatten"},
    };
    const auto it = hints.find(n.opType);
    if (it != hints.end()) return "no Strata layer reads this form: " + it->second;
    return "no Strata layer maps the operator " + cutForMessage(n.opType, 60) +
           " (README, \"Importing a model\", lists the operators that map)";
}

// A readable node name from an exporter's node name: "/layer1/layer1.0/conv1/Conv" -> "layer1.0.conv1.Conv".
std::string readableName(const std::string& onnxName) {
    std::vector<std::string> parts;
    size_t start = 0;
    while (start <= onnxName.size()) {
        const size_t slash = onnxName.find('/', start);
        const std::string part = onnxName.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
        if (!part.empty()) {
            // torch names each scope after its whole path: "layer1" then "layer1.0".
            if (!parts.empty() && part.rfind(parts.back() + ".", 0) == 0) parts.pop_back();
            parts.push_back(part);
        }
        if (slash == std::string::npos) break;
        start = slash + 1;
    }
    std::string name;
    for (const std::string& p : parts) name += (name.empty() ? "" : ".") + p;
    if (name.size() > kMaxNodeNameBytes - 16) name = name.substr(name.size() - (kMaxNodeNameBytes - 16));
    return name;
}

// Layered layout: a node's row is its depth (the longest path from the input), the nodes of a row side by side
// in the order they were added, centered; rows 110 apart and columns 200 apart, as the example projects are.
void layOut(Graph& graph) {
    std::map<int, int> depth;
    for (int id : graph.topologicalOrder()) {
        int d = 0;
        for (const std::string& port : graph.inputPorts(id))
            if (const auto e = graph.edgeInto({id, port}))
                if (const auto it = depth.find(e->from.node); it != depth.end()) d = std::max(d, it->second + 1);
        depth[id] = d;
    }
    std::map<int, std::vector<int>> rows;
    for (const Node* n : graph.nodes()) rows[depth.count(n->id) ? depth[n->id] : 0].push_back(n->id);
    for (const auto& [row, ids] : rows) {
        const double left = -100.0 * static_cast<double>(ids.size() - 1);
        for (size_t k = 0; k < ids.size(); ++k)
            graph.setPosition(ids[k], left + 200.0 * static_cast<double>(k), 110.0 * row);
    }
}

// The Strata normalization written after the graph's input (Mul, Sub, Div by "<input>/norm_*" constants), as
// readInput takes it: read back so that the checkpoint and the export carry it again.
Normalization normalizationOf(const OnnxModelInfo& info, const OnnxLayerImport& input) {
    Normalization norm;
    for (int k : input.nodes) {
        const OnnxNodeInfo& n = info.nodes.at(static_cast<size_t>(k));
        const TensorRecord* c = info.initializer(n.inputs.at(1));
        if (!c) throw FormatError(info.inputName, "node '" + n.name + "': normalization constant is not a float");
        const std::vector<float> v = recordToFloats(*c);
        if (v.size() == 1) {
            (n.opType == "Mul" ? norm.scale : n.opType == "Sub" ? norm.mean : norm.std) = v[0];
        } else {
            (n.opType == "Sub" ? norm.featureMean : norm.featureStd) = v;
        }
    }
    if (!input.nodes.empty())
        norm.mode = norm.featureMean.empty() && norm.mean == 0.f && norm.std == 1.f ? "scale" : "standardize";
    return norm;
}

}  // namespace

OnnxImport importOnnxModel(const OnnxModelInfo& original, const std::string& source, const OnnxImportOptions& options) {
    auto progress = [&](double f, const std::string& what) {
        if (options.progress) options.progress(f, what);
    };
    const int64_t nodeCount = static_cast<int64_t>(original.nodes.size()) + original.constantNodes;
    if (nodeCount > kMaxOnnxImportNodes)
        throw FormatError(source, std::to_string(nodeCount) + " nodes; the importer takes at most " +
                                      std::to_string(kMaxOnnxImportNodes) + " (InputLimits.h)");
    if (original.opset != 0 && (original.opset < kOnnxImportMinOpset || original.opset > kOnnxImportMaxOpset))
        throw FormatError(source, "opset " + std::to_string(original.opset) + "; the importer reads opsets " +
                                      std::to_string(kOnnxImportMinOpset) + " to " +
                                      std::to_string(kOnnxImportMaxOpset) +
                                      " (convert it with onnx.version_converter)");
    if (original.inputDims.size() < 2)
        throw FormatError(source, "graph input '" + cutForMessage(original.inputName) +
                                      "' has no batch and sample dimensions (rank " +
                                      std::to_string(original.inputDims.size()) + "); Strata's input is [N, ...]");
    for (size_t k = 1; k < original.inputDims.size(); ++k)
        if (original.inputDims[k] < 1)
            throw FormatError(source, "graph input '" + cutForMessage(original.inputName) + "': dimension " +
                                          std::to_string(k) +
                                          " is symbolic; Strata needs a fixed per-sample shape (only the batch, "
                                          "dimension 0, may vary): export with a fixed input size");

    OnnxImport result;
    result.onnxNodes = static_cast<int>(nodeCount);
    progress(0.1, "rewriting exporter forms");
    OnnxModelInfo info = original;
    rewriteForeignForms(info, result.absorbed);
    progress(0.3, "mapping nodes to layers");
    const OnnxLayerImports imports = importOnnxLayers(info);
    const std::vector<bool> shapeArithmetic = absorbableShapeArithmetic(info, imports);
    int shapeNodes = 0;
    for (int k : imports.unread) {
        const OnnxNodeInfo& n = info.nodes.at(static_cast<size_t>(k));
        if (shapeArithmetic[static_cast<size_t>(k)]) {
            ++shapeNodes;
            continue;
        }
        result.unmapped.push_back({nodeLabel(n, static_cast<size_t>(k)), n.opType, whyUnmapped(n)});
    }
    if (shapeNodes)
        result.absorbed.push_back(std::to_string(shapeNodes) +
                                  " shape-arithmetic node(s) (Shape, Gather, Unsqueeze, Concat ...) that only compute "
                                  "the Reshape and Slice arguments of blocks read as layers");
    if (imports.layers.empty() || imports.layers.front().type != "Input") {
        result.unmapped.insert(result.unmapped.begin(), {cutForMessage(original.inputName), "graph input",
                                                         "not a float tensor [N, ...] that an Input layer reads"});
        throw OnnxImportError(source + ": the graph's input cannot be mapped", result.unmapped);
    }

    progress(0.6, "building the graph");
    Graph& graph = result.project.graph;
    const LayerRegistry& registry = layerRegistry();
    std::map<std::string, int> producerOf;  // ONNX value -> node id
    std::set<std::string> names;
    std::vector<std::pair<int, const OnnxLayerImport*>> built;
    for (const OnnxLayerImport& r : imports.layers) {
        // The input keeps the graph input's name (its nodes, if any, are Strata's normalization).
        const OnnxNodeInfo* last =
            r.nodes.empty() || r.type == "Input" ? nullptr : &info.nodes.at(static_cast<size_t>(r.nodes.back()));
        // A Strata file names a layer's output value after the layer ("conv1"); other exporters name values by
        // path ("/layer1/layer1.0/conv1/Conv_output_0") and nodes readably: the node's name then.
        const bool plainValue = !r.output.empty() && r.output.find_first_of("/:") == std::string::npos;
        const std::string base =
            last == nullptr || plainValue || last->name.empty() ? readableName(r.name) : readableName(last->name);
        std::string name = base.empty() ? r.type : base;
        for (int k = 2; names.count(name); ++k) name = (base.empty() ? r.type : base) + "_" + std::to_string(k);
        const LayerType* type = registry.find(r.type);
        try {
            if (!type) throw std::runtime_error("layer type " + r.type + " is not registered");
            (void)type->normalizeParams(r.params);
        } catch (const std::exception& e) {
            const size_t at = r.nodes.empty() ? 0 : static_cast<size_t>(r.nodes.front());
            result.unmapped.push_back({last ? nodeLabel(*last, at) : r.name, last ? last->opType : "graph input",
                                       "read as " + r.type + " with params " + cutForMessage(r.params.dump(), 200) +
                                           ", which the layer refuses: " + e.what()});
            continue;
        }
        names.insert(name);
        const int id = graph.addNode(r.type, name, r.params);
        producerOf[r.output] = id;
        built.emplace_back(id, &r);
        for (const auto& [param, values] : r.weights) result.weights[name + "." + param] = values;
    }
    for (const auto& [id, r] : built) {
        const std::vector<std::string> ports = graph.inputPorts(id);
        for (size_t k = 0; k < r->inputs.size() && k < ports.size(); ++k) {
            const auto it = producerOf.find(r->inputs[k]);
            if (it != producerOf.end()) {
                graph.connect(it->second, id, ports[k]);
                continue;
            }
            const Node& node = *graph.node(id);
            const size_t at = r->nodes.empty() ? 0 : static_cast<size_t>(r->nodes.front());
            const std::string why = "its input '" + cutForMessage(r->inputs[k], 120) +
                                    "' is given by no mapped node; layer '" + node.name + "' left with port '" +
                                    ports[k] + "' unconnected";
            result.unmapped.push_back({r->nodes.empty() ? node.name : nodeLabel(info.nodes.at(at), at),
                                       r->nodes.empty() ? "graph input" : info.nodes.at(at).opType, why});
        }
    }
    if (!producerOf.count(info.outputName))
        result.unmapped.push_back(
            {cutForMessage(info.outputName), "graph output", "no mapped layer gives the graph's output"});

    if (!result.unmapped.empty() && !options.partial) {
        std::string text = source + ": " + std::to_string(result.unmapped.size()) +
                           " node(s) cannot be mapped to Strata layers (import with --partial to build the project "
                           "from the rest):";
        for (const OnnxImportIssue& i : result.unmapped) text += "\n  " + i.text();
        throw OnnxImportError(text, result.unmapped);
    }

    progress(0.8, "checking shapes and weights");
    const GraphAnalysis analysis = analyzeGraph(graph);
    if (analysis.ok()) {
        ExportModel model;
        model.project.graph = graph;
        model.weights = result.weights;
        checkExportWeights(model, exportParameters(graph));
    } else if (!options.partial) {
        std::string text = source + ": the imported graph does not analyze:";
        std::vector<OnnxImportIssue> issues;
        for (const Problem& p : analysis.problems) {
            const Node* n = graph.node(p.node);
            issues.push_back({n ? n->name : "graph", n ? n->type : "", p.message});
            text += "\n  " + p.message;
        }
        throw OnnxImportError(text, issues);
    }

    progress(0.9, "laying out the canvas");
    layOut(graph);

    // Settings: the data set is a synthetic stand-in of the input's shape (the file says nothing about the
    // data); the user points the dataset at real data. Normalization as the file had it (none, unless Strata
    // wrote it).
    Project& p = result.project;
    p.id = newProjectId();
    p.name = cutForMessage(fs::path(source).stem().string(), kMaxProjectNameBytes / 2);
    if (p.name.empty() || !utf8Problem(p.name).empty()) p.name = "imported";
    p.dataset.kind = DatasetKind::Synthetic;
    p.dataset.syntheticShape.assign(original.inputDims.begin() + 1, original.inputDims.end());
    result.normalization = normalizationOf(info, imports.layers.front());
    p.dataset.normalization = result.normalization.mode == "none"    ? NormalizationMode::None
                              : result.normalization.mode == "scale" ? NormalizationMode::Scale
                                                                     : NormalizationMode::Standardize;
    if (analysis.ok()) {
        for (const auto& [id, shape] : analysis.outputShapes)
            if (graph.edgesFrom(id).empty() && shape.rank() == 1 && shape[0] >= 2 && shape[0] <= 1'000'000)
                p.dataset.syntheticClasses = static_cast<int>(shape[0]);
    }
    progress(1.0, "done");
    return result;
}

OnnxImport importOnnxFile(const std::string& path, const OnnxImportOptions& options) {
    if (options.progress) options.progress(0.0, "reading " + path);
    return importOnnxModel(readOnnx(path), path, options);
}

std::string importedWeightsPath(const std::string& projectPath) {
    const fs::path p(projectPath);
    return (p.parent_path() / (p.stem().string() + ".imported.safetensors")).string();
}

void writeImportedProject(OnnxImport& imported, const std::string& projectPath) {
    const std::string weightsPath = importedWeightsPath(projectPath);
    imported.project.training.initFrom = fs::path(weightsPath).filename().string();
    Checkpoint c;
    c.project = imported.project;
    c.normalization = imported.normalization;
    c.weights = imported.weights;
    saveCheckpoint(c, weightsPath);
    writeProject(imported.project, projectPath);
}

}  // namespace strata
