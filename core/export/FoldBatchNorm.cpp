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
        if (bnNode->type != "BatchNorm") continue;
        const int bn = bnNode->id;
        const std::vector<std::string> ports = graph.inputPorts(bn);
        if (ports.size() != 1) continue;
        const auto in = graph.edgeInto({bn, ports.front()});
        if (!in) continue;
        const int layer = in->from.node;
        const Node* layerNode = graph.node(layer);
        if (!layerNode || (layerNode->type != "Conv2D" && layerNode->type != "Dense")) continue;
        // A Dense over a sequence has its units on the last axis; the BatchNorm's channels are the first.
        if (layerNode->type == "Dense" && analysis.outputShapes.at(layer).rank() != 1) continue;
        if (graph.edgesFrom(layer).size() != 1) continue;  // its raw output is used elsewhere too

        const Json& layerParams = analysis.params.at(layer);
        const double eps = analysis.params.at(bn).at("eps").get<double>();
        const std::string bnName = bnNode->name, layerName = layerNode->name;
        const std::vector<float>& gamma = weightsOf(out, bnName + ".gamma");
        const std::vector<float>& beta = weightsOf(out, bnName + ".beta");
        const std::vector<float>& mean = weightsOf(out, bnName + ".running_mean");
        const std::vector<float>& var = weightsOf(out, bnName + ".running_var");
        std::vector<float>& w = out.weights.at(layerName + ".weight");
        const size_t channels = gamma.size();
        if (channels == 0 || w.size() % channels != 0 || beta.size() != channels || mean.size() != channels ||
            var.size() != channels)
            throw std::runtime_error("fold BatchNorm: " + bnName + " has " + std::to_string(channels) +
                                     " channels, which do not divide " + layerName + "'s " + std::to_string(w.size()) +
                                     " weights");
        const size_t per = w.size() / channels;
        const bool hadBias = layerParams.at("use_bias").get<bool>();
        std::vector<float> bias = hadBias ? weightsOf(out, layerName + ".bias") : std::vector<float>(channels, 0.0f);
        if (bias.size() != channels)
            throw std::runtime_error("fold BatchNorm: " + layerName + " has " + std::to_string(bias.size()) +
                                     " biases for " + std::to_string(channels) + " channels of " + bnName);
        for (size_t k = 0; k < channels; ++k) {
            const double s = double(gamma[k]) / std::sqrt(double(var[k]) + eps);
            for (size_t i = 0; i < per; ++i) w[k * per + i] = static_cast<float>(double(w[k * per + i]) * s);
            bias[k] = static_cast<float>((double(bias[k]) - double(mean[k])) * s + double(beta[k]));
        }
        out.weights[layerName + ".bias"] = std::move(bias);
        for (const char* p : {".gamma", ".beta", ".running_mean", ".running_var"}) out.weights.erase(bnName + p);

        // The BatchNorm's consumers now read the layer; the layer gets a bias.
        const std::vector<Edge> consumers = graph.edgesFrom(bn);
        graph.removeNode(bn);
        for (const Edge& e : consumers) graph.connect({layer, in->from.port}, e.to);
        Json params = graph.node(layer)->params;
        params["use_bias"] = true;
        graph.setParams(layer, params);
        if (folded) folded->push_back({bnName, layerName});
    }
    return out;
}

}  // namespace strata
