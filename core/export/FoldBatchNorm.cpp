// FoldBatchNorm: see FoldBatchNorm.h.
#include "core/export/FoldBatchNorm.h"

#include <cmath>
#include <stdexcept>

namespace strata {

namespace {

const std::vector<float>& weightsOf(const ExportModel& model, const std::string& name) {
    const auto it = model.weights.find(name);
    if (it == model.weights.end()) throw std::runtime_error("fold BatchNorm: the model has no tensor '" + name + "'");
    return it->second;
}

}  // namespace

ExportModel foldBatchNorm(const ExportModel& model, std::vector<FoldedBatchNorm>* folded) {
    if (folded) folded->clear();
    ExportModel out = model;
    // An int8 model's activation grids are by node name, computed for the graph as it is.
    if (!model.int8Activations.empty()) return out;
    const GraphAnalysis analysis = analyzeGraph(model.project.graph);
    if (!analysis.ok()) return out;  // nothing is folded in a graph that does not analyze; compile names why
    Graph& graph = out.project.graph;
    for (const Node* bnNode : model.project.graph.nodes()) {
        const int bn = bnNode->id;
        const LayerType* bnType = graph.layerType(bn);
        if (!bnType || !bnType->foldableNormalization()) continue;
        const std::vector<std::string> ports = graph.inputPorts(bn);
        if (ports.size() != 1) continue;
        const auto in = graph.edgeInto({bn, ports.front()});
        if (!in) continue;
        const int layer = in->from.node;
        const Node* layerNode = graph.node(layer);
        if (!layerNode) continue;
        // Its output channels rows of its weight (not a Dense over a sequence, whose units are the last axis).
        const ChannelFacts facts = channelFactsOf(model.project.graph, analysis, layer);
        if (!facts.takesFoldedNormalization) continue;
        if (graph.edgesFrom(layer).size() != 1) continue;  // its raw output is used elsewhere too

        const double eps = analysis.params.at(bn).at("eps").get<double>();
        const std::string bnName = bnNode->name, layerName = layerNode->name;
        const std::vector<float>& gamma = weightsOf(out, bnName + ".gamma");
        const std::vector<float>& beta = weightsOf(out, bnName + ".beta");
        const std::vector<float>& mean = weightsOf(out, bnName + ".running_mean");
        const std::vector<float>& var = weightsOf(out, bnName + ".running_var");
        std::vector<float>& w = out.weights.at(layerName + "." + facts.weight);
        const size_t channels = gamma.size();
        if (channels == 0 || w.size() % channels != 0 || beta.size() != channels || mean.size() != channels ||
            var.size() != channels)
            throw std::runtime_error("fold BatchNorm: " + bnName + " has " + std::to_string(channels) +
                                     " channels, which do not divide " + layerName + "'s " + std::to_string(w.size()) +
                                     " weights");
        const size_t per = w.size() / channels;
        const bool hadBias = !facts.bias.empty();
        const std::string biasName = layerName + "." + (hadBias ? facts.bias : std::string("bias"));
        std::vector<float> bias = hadBias ? weightsOf(out, biasName) : std::vector<float>(channels, 0.0f);
        if (bias.size() != channels)
            throw std::runtime_error("fold BatchNorm: " + layerName + " has " + std::to_string(bias.size()) +
                                     " biases for " + std::to_string(channels) + " channels of " + bnName);
        for (size_t k = 0; k < channels; ++k) {
            const double s = double(gamma[k]) / std::sqrt(double(var[k]) + eps);
            for (size_t i = 0; i < per; ++i) w[k * per + i] = static_cast<float>(double(w[k * per + i]) * s);
            bias[k] = static_cast<float>((double(bias[k]) - double(mean[k])) * s + double(beta[k]));
        }
        out.weights[biasName] = std::move(bias);
        for (const char* p : {".gamma", ".beta", ".running_mean", ".running_var"}) out.weights.erase(bnName + p);

        // The BatchNorm's consumers now read the layer; the layer gets a bias.
        const std::vector<Edge> consumers = graph.edgesFrom(bn);
        graph.removeNode(bn);
        for (const Edge& e : consumers) graph.connect({layer, in->from.port}, e.to);
        Json params = graph.node(layer)->params;
        params["use_bias"] = true;  // the parameter of Conv2D and Dense that gives them a bias
        graph.setParams(layer, params);
        if (folded) folded->push_back({bnName, layerName});
    }
    return out;
}

Int8Export prepareInt8Export(const ExportModel& model, const DataSplit& data, const QuantizationOptions& options) {
    Int8Export r;
    r.model = foldBatchNorm(model, &r.folded);
    r.calibration = calibrateInt8(r.model, data, options);
    return r;
}

}  // namespace strata
