// Saliency: Grad-CAM and token saliency through a Model compiled for it (unfused, all trainable, logits out).
#include "core/infer/Saliency.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <zlib.h>

#include "core/backend/Backend.h"
#include "core/export/ExportModel.h"
#include "core/graph/Graph.h"
#include "core/graph/Model.h"
#include "core/io/FileIo.h"
#include "core/layers/Layer.h"
#include "core/train/Checkpoint.h"

namespace strata {

namespace {

std::string inQuotes(const std::string& s) { return "'" + s + "'"; }

// The graph as saliency runs it: every node trainable (backward then reaches every layer) and the final Softmax
// removed (the class score is its input, the logit).
Graph saliencyGraph(const Graph& source) {
    Graph g = source;
    for (const Node* n : source.nodes()) g.setTrainable(n->id, true);
    for (const Node* n : source.nodes()) {
        if (!g.edgesFrom(n->id).empty()) continue;
        const LayerType* type = g.layerType(n->id);
        if (type && type->outputsProbabilities() && g.inputPorts(n->id).size() == 1 &&
            g.edgeInto({n->id, g.inputPorts(n->id)[0]}))
            g.removeNode(n->id);
        break;
    }
    return g;
}

std::vector<float> download(Backend& backend, const Tensor& t) {
    std::vector<float> host(static_cast<size_t>(t.numel()));
    backend.toHost(t, host.data());
    return host;
}

}  // namespace

std::vector<std::string> gradCamLayerNames(const Graph& graph) {
    std::vector<std::string> names;
    for (int id : graph.topologicalOrder())
        if (graph.node(id)->type == "Conv2D") names.push_back(graph.node(id)->name);
    return names;
}

bool takesTokens(const Graph& graph) {
    for (const Node* n : graph.nodes()) {
        if (n->type != "Embedding") continue;
        const auto edge = graph.edgeInto({n->id, "in"});
        const LayerType* from = edge ? graph.layerType(edge->from.node) : nullptr;
        if (from && from->isGraphInput()) return true;
    }
    return false;
}

std::vector<float> upsampleBilinear(const std::vector<float>& src, int64_t h, int64_t w, int64_t outH, int64_t outW) {
    if (h <= 0 || w <= 0 || outH <= 0 || outW <= 0 || static_cast<int64_t>(src.size()) != h * w)
        throw std::invalid_argument("upsampleBilinear: " + std::to_string(src.size()) + " values for [" +
                                    std::to_string(h) + ", " + std::to_string(w) + "] to [" + std::to_string(outH) +
                                    ", " + std::to_string(outW) + "]");
    // Source coordinate of an output pixel's centre, clamped to the outermost source centres.
    auto axis = [](int64_t i, int64_t in, int64_t out, int64_t& lo, int64_t& hi, double& frac) {
        double s = (static_cast<double>(i) + 0.5) * static_cast<double>(in) / static_cast<double>(out) - 0.5;
        s = std::clamp(s, 0.0, static_cast<double>(in - 1));
        lo = static_cast<int64_t>(std::floor(s));
        hi = std::min(lo + 1, in - 1);
        frac = s - static_cast<double>(lo);
    };
    std::vector<float> out(static_cast<size_t>(outH * outW));
    for (int64_t y = 0; y < outH; ++y) {
        int64_t y0 = 0, y1 = 0;
        double fy = 0;
        axis(y, h, outH, y0, y1, fy);
        for (int64_t x = 0; x < outW; ++x) {
            int64_t x0 = 0, x1 = 0;
            double fx = 0;
            axis(x, w, outW, x0, x1, fx);
            auto at = [&](int64_t r, int64_t c) { return static_cast<double>(src[static_cast<size_t>(r * w + c)]); };
            const double top = at(y0, x0) * (1 - fx) + at(y0, x1) * fx;
            const double bottom = at(y1, x0) * (1 - fx) + at(y1, x1) * fx;
            out[static_cast<size_t>(y * outW + x)] = static_cast<float>(top * (1 - fy) + bottom * fy);
        }
    }
    return out;
}

void writeGradCamPng(const std::string& path, const GradCam& cam) {
    if (cam.height <= 0 || cam.width <= 0 || static_cast<int64_t>(cam.map.size()) != cam.height * cam.width)
        throw std::invalid_argument(path + ": no Grad-CAM map to write");
    // One filter byte (0: none) before each row, as PNG's scanlines have.
    std::vector<unsigned char> rows;
    for (int64_t y = 0; y < cam.height; ++y) {
        rows.push_back(0);
        for (int64_t x = 0; x < cam.width; ++x) {
            const float v = cam.map[static_cast<size_t>(y * cam.width + x)];
            rows.push_back(static_cast<unsigned char>(std::lround(255.0 * std::clamp(double(v), 0.0, 1.0))));
        }
    }
    uLongf packedSize = compressBound(static_cast<uLong>(rows.size()));
    std::vector<unsigned char> packed(packedSize);
    if (compress2(packed.data(), &packedSize, rows.data(), static_cast<uLong>(rows.size()), 9) != Z_OK)
        throw std::runtime_error(path + ": zlib could not compress the map");
    packed.resize(packedSize);
    auto be32 = [](std::string& out, uint32_t v) {
        for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xFF));
    };
    auto chunk = [&](std::ostream& out, const char* type, const std::string& data) {
        std::string body(type, 4);
        body += data;
        std::string length;
        be32(length, static_cast<uint32_t>(data.size()));
        std::string crc;
        be32(crc, static_cast<uint32_t>(
                      crc32(0, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size()))));
        out << length << body << crc;
    };
    std::string header;
    be32(header, static_cast<uint32_t>(cam.width));
    be32(header, static_cast<uint32_t>(cam.height));
    header += std::string("\x08\x00\x00\x00\x00", 5);  // 8 bits, grayscale, deflate, adaptive filters, no interlace
    writeFileAtomically(path, [&](std::ostream& out) {
        out << std::string("\x89PNG\r\n\x1a\n", 8);
        chunk(out, "IHDR", header);
        chunk(out, "IDAT", std::string(packed.begin(), packed.end()));
        chunk(out, "IEND", {});
    });
}

SaliencyModel::SaliencyModel(const Graph& graph, const std::map<std::string, std::vector<float>>& weights,
                             Backend& backend)
    : m_backend(backend) {
    m_model = compile(saliencyGraph(graph), backend, 0, /*fuse=*/false, /*blockedLayout=*/false);
    applyWeights(*m_model, weights);
    if (m_model->outputShape().rank() != 1) {
        const std::vector<int> order = m_model->order();
        throw std::invalid_argument("saliency explains a classifier's class scores; the output node " +
                                    inQuotes(m_model->graph().node(order.back())->name) + " gives " +
                                    m_model->outputShape().toString() + ", not one score per class [K]");
    }
}

SaliencyModel::SaliencyModel(const ExportModel& model, Backend& backend)
    : SaliencyModel(model.project.graph, model.weights, backend) {}

SaliencyModel::~SaliencyModel() = default;

int SaliencyModel::classes() const { return static_cast<int>(m_model->outputShape().numel()); }

const Shape& SaliencyModel::inputShape() const { return m_model->inputShape(); }

std::vector<GradCamLayer> SaliencyModel::gradCamLayers() const {
    const Graph& g = m_model->graph();
    const GraphAnalysis analysis = analyzeGraph(g);
    std::vector<GradCamLayer> layers;
    for (const std::string& name : gradCamLayerNames(g)) {
        const int id = g.nodeByName(name)->id;
        layers.push_back({name, id, *analysis.shapeOf(id)});
    }
    return layers;
}

bool SaliencyModel::takesTokens() const { return strata::takesTokens(m_model->graph()); }

float SaliencyModel::scoreAndBackward(const float* input, int classIndex) {
    const int k = classes();
    if (classIndex < 0 || classIndex >= k)
        throw std::invalid_argument("class " + std::to_string(classIndex) + " is out of range: the model has " +
                                    std::to_string(k) + " classes (0 to " + std::to_string(k - 1) + ")");
    const Tensor x = m_backend.fromHost(inputShape().withBatch(1), input);
    const Tensor& out = m_model->forward(x, /*training=*/false);
    const std::vector<float> scores = download(m_backend, out);
    std::vector<float> oneHot(static_cast<size_t>(k), 0.0f);
    oneHot[static_cast<size_t>(classIndex)] = 1.0f;
    const Tensor dOut = m_backend.fromHost(out.shape(), oneHot.data());
    m_model->zeroGrad();
    m_model->backward(dOut);
    m_backend.synchronize();
    return scores[static_cast<size_t>(classIndex)];
}

GradCam SaliencyModel::gradCam(const float* input, int classIndex, const std::string& layer) {
    const Graph& g = m_model->graph();
    const std::vector<GradCamLayer> convs = gradCamLayers();
    std::string names;
    for (const GradCamLayer& c : convs) names += (names.empty() ? "" : ", ") + c.name;
    int node = -1;
    if (layer.empty()) {
        if (convs.empty())
            throw std::invalid_argument(
                "the model has no Conv2D layer, so Grad-CAM has no feature map to look at; name a node whose "
                "output is [C, H, W], or use token saliency for a text model");
        node = convs.back().node;
    } else {
        const Node* n = g.nodeByName(layer);
        if (!n)
            throw std::invalid_argument(
                "no node named " + inQuotes(layer) + " in the model" +
                (names.empty() ? std::string(" (it has no Conv2D layer)") : "; its Conv2D layers: " + names));
        node = n->id;
    }
    const GraphAnalysis analysis = analyzeGraph(g);
    const Node* chosen = g.node(node);
    const Shape shape = *analysis.shapeOf(node);
    if (shape.rank() != 3)
        throw std::invalid_argument("node " + inQuotes(chosen->name) + " (" + chosen->type + ") gives " +
                                    shape.toString() +
                                    ", not a feature map [C, H, W]; Grad-CAM looks at a Conv2D or another layer "
                                    "with a spatial output" +
                                    (names.empty() ? std::string() : " (Conv2D layers: " + names + ")"));
    // The map the rest of the network reads: the activation after the layer (through a BatchNorm between them),
    // when each alone consumes the one before.
    int activation = node;
    for (int at = node;;) {
        const std::vector<Edge> out = g.edgesFrom(at);
        if (out.size() != 1) break;
        const int next = out[0].to.node;
        const LayerType* type = g.layerType(next);
        if (!type || *analysis.shapeOf(next) != shape) break;
        if (type->activation()) activation = next;
        if (!type->foldableNormalization()) break;
        at = next;
    }

    GradCam r;
    r.layer = chosen->name;
    r.activationNode = g.node(activation)->name;
    r.classIndex = classIndex;
    r.score = scoreAndBackward(input, classIndex);
    const Tensor* a = m_model->nodeOutput(activation);
    const Tensor* grad = m_model->nodeGradient(activation);
    if (!a || !grad)
        throw std::invalid_argument("node " + inQuotes(r.activationNode) +
                                    ": no gradient reaches it (nothing learnable at or before it); name a Conv2D");
    const std::vector<float> act = download(m_backend, *a);
    const std::vector<float> grads = download(m_backend, *grad);
    r.channels = shape[0];
    r.featureHeight = shape[1];
    r.featureWidth = shape[2];
    const int64_t plane = r.featureHeight * r.featureWidth;
    std::vector<double> cam(static_cast<size_t>(plane), 0.0);
    for (int64_t c = 0; c < r.channels; ++c) {
        const float* gc = grads.data() + c * plane;
        const float* ac = act.data() + c * plane;
        double sum = 0;
        for (int64_t i = 0; i < plane; ++i) sum += gc[i];
        const double w = sum / static_cast<double>(plane);
        r.weights.push_back(static_cast<float>(w));
        for (int64_t i = 0; i < plane; ++i) cam[static_cast<size_t>(i)] += w * ac[i];
    }
    r.featureMap.resize(static_cast<size_t>(plane));
    for (int64_t i = 0; i < plane; ++i)
        r.featureMap[static_cast<size_t>(i)] = static_cast<float>(std::max(0.0, cam[static_cast<size_t>(i)]));

    const Shape& in = inputShape();
    const bool image = in.rank() == 2 || in.rank() == 3;
    r.height = image ? in[in.rank() - 2] : r.featureHeight;
    r.width = image ? in[in.rank() - 1] : r.featureWidth;
    r.map = upsampleBilinear(r.featureMap, r.featureHeight, r.featureWidth, r.height, r.width);
    const float top = *std::max_element(r.map.begin(), r.map.end());
    r.empty = !(top > 0.0f);
    for (float& v : r.map) v = r.empty ? 0.0f : v / top;
    return r;
}

TokenSaliency SaliencyModel::tokenSaliency(const float* tokenIds, int classIndex, TokenSaliencyMode mode) {
    const Graph& g = m_model->graph();
    int embedding = -1;
    for (int id : m_model->order()) {
        const Node* n = g.node(id);
        if (n->type != "Embedding") continue;
        const auto edge = g.edgeInto({id, "in"});
        const LayerType* from = edge ? g.layerType(edge->from.node) : nullptr;
        if (from && from->isGraphInput()) {
            embedding = id;
            break;
        }
    }
    if (embedding < 0)
        throw std::invalid_argument(
            "the model's input feeds no Embedding layer, so it has no token vectors to explain; token saliency is "
            "for text models (token ids [length] read by an Embedding), Grad-CAM for convolutional ones");
    TokenSaliency r;
    r.embeddingNode = g.node(embedding)->name;
    r.classIndex = classIndex;
    r.mode = mode;
    r.score = scoreAndBackward(tokenIds, classIndex);
    const Tensor* e = m_model->nodeOutput(embedding);
    const Tensor* grad = m_model->nodeGradient(embedding);
    if (!e || !grad) throw std::logic_error("token saliency: no gradient at " + inQuotes(r.embeddingNode));
    const std::vector<float> vectors = download(m_backend, *e);
    const std::vector<float> grads = download(m_backend, *grad);
    const int64_t length = inputShape().numel();
    const int64_t dim = static_cast<int64_t>(vectors.size()) / length;
    double top = 0;
    for (int64_t t = 0; t < length; ++t) {
        const bool token = tokenIds[t] != 0.0f;
        r.isToken.push_back(token);
        double v = 0;
        if (token) {
            const float* gt = grads.data() + t * dim;
            const float* et = vectors.data() + t * dim;
            for (int64_t d = 0; d < dim; ++d)
                v += mode == TokenSaliencyMode::GradientNorm ? double(gt[d]) * gt[d] : double(gt[d]) * et[d];
            if (mode == TokenSaliencyMode::GradientNorm) v = std::sqrt(v);
            top = std::max(top, std::abs(v));
        }
        r.raw.push_back(static_cast<float>(v));
    }
    for (float v : r.raw) r.values.push_back(top > 0 ? static_cast<float>(v / top) : 0.0f);
    return r;
}

}  // namespace strata
