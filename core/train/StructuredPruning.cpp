#include "core/train/StructuredPruning.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <stdexcept>

#include "core/layers/LayerRegistry.h"

namespace strata {

namespace {

using Weights = std::map<std::string, std::vector<float>>;

// A layer that takes the pruned channels as its input: `group` inputs per channel (height x width after a Flatten).
struct Consumer {
    int node = -1;
    int64_t group = 1;
};

struct Fanout {
    std::vector<Consumer> consumers;
    std::vector<int> perChannel;  // nodes on the way with per-channel parameters (BatchNorm)
    std::string blocker;          // why the layer cannot be pruned; empty when it can
};

class Pruner {
public:
    Pruner(const Project& project, Weights weights)
        : m_project(project), m_graph(m_project.graph), m_weights(std::move(weights)) {
        m_analysis = analyzeGraph(m_graph);
        if (!m_analysis.ok())
            throw std::invalid_argument("the graph is invalid: " + m_analysis.problems.front().message);
        checkWeights();
    }

    StructuredPruneResult run(const StructuredPruneOptions& options) {
        StructuredPruneResult result;
        result.parametersBefore = parameterValues();
        bool any = false;
        for (int id : m_graph.topologicalOrder()) {
            const Node& n = *m_graph.node(id);
            const ChannelFacts channels = facts(id);
            if (channels.countParam.empty()) continue;
            PrunedLayer layer;
            layer.node = n.name;
            layer.type = n.type;
            layer.unit = channels.unitName;
            layer.before = layer.after = outputs(id);
            const Fanout f = fanout(id);
            layer.skipped = channels.fixed.empty() ? f.blocker : channels.fixed;
            if (layer.skipped.empty()) {
                const int64_t keep =
                    std::max<int64_t>(1, std::llround(static_cast<double>(layer.before) * (1.0 - options.fraction)));
                if (keep < layer.before) {
                    const std::vector<int64_t> kept = strongest(id, keep, options.norm);
                    prune(id, kept, f);
                    layer.after = keep;
                    any = true;
                } else {
                    layer.skipped = "too few " + channels.unitName + " to remove any";
                }
            }
            result.layers.push_back(layer);
        }
        if (!any) {
            std::string why;
            for (const PrunedLayer& l : result.layers) why += "; " + l.node + ": " + l.skipped;
            throw std::invalid_argument("structured pruning: no layer's filters or units can be pruned" + why);
        }
        const GraphAnalysis after = analyzeGraph(m_graph);
        if (!after.ok())
            throw std::logic_error("structured pruning left an invalid graph: " + after.problems.front().message);
        result.project = m_project;
        result.weights = std::move(m_weights);
        m_weights.clear();
        result.parametersAfter = 0;
        for (const auto& [name, values] : result.weights) result.parametersAfter += static_cast<int64_t>(values.size());
        return result;
    }

private:
    const std::string& name(int id) const { return m_graph.node(id)->name; }

    // What the layer's type says about its channels, for the graph as it was analyzed (pruning changes only
    // counts, which no fact depends on).
    ChannelFacts facts(int id) const { return channelFactsOf(m_graph, m_analysis, id); }

    // The filters or units a layer has now.
    int64_t outputs(int id) const {
        const std::string& count = facts(id).countParam;
        return m_graph.node(id)->params.value(count, m_analysis.params.at(id).at(count).get<int64_t>());
    }

    std::vector<float>& tensor(int id, const std::string& p) { return m_weights.at(name(id) + "." + p); }

    int64_t parameterValues() const {
        int64_t n = 0;
        for (const auto& [key, values] : m_weights) n += static_cast<int64_t>(values.size());
        return n;
    }

    // Every parameter of the graph present with its size, and nothing else.
    void checkWeights() const {
        std::set<std::string> expected;
        for (int id : m_graph.topologicalOrder()) {
            const Node& n = *m_graph.node(id);
            const LayerType* type = layerRegistry().find(n.type);
            std::vector<Shape> inputs;
            for (const std::string& port : m_graph.inputPorts(id))
                inputs.push_back(m_analysis.outputShapes.at(m_graph.edgeInto({id, port})->from.node));
            for (const ParameterSpec& s : type->parameterSpecs(m_analysis.params.at(id), inputs)) {
                const std::string key = n.name + "." + s.name;
                expected.insert(key);
                auto it = m_weights.find(key);
                if (it == m_weights.end()) throw std::runtime_error("weights for '" + key + "' are missing");
                if (static_cast<int64_t>(it->second.size()) != s.shape.numel())
                    throw std::runtime_error("weights for '" + key + "' have " + std::to_string(it->second.size()) +
                                             " values, the graph expects " + s.shape.toString());
            }
        }
        for (const auto& [key, values] : m_weights)
            if (!expected.count(key)) throw std::runtime_error("tensor '" + key + "' is not a parameter of the graph");
    }

    // Where the layer's channels go, through the layers that keep them apart.
    Fanout fanout(int id) const {
        Fanout f;
        std::vector<std::pair<int, int64_t>> todo{{id, 1}};
        while (!todo.empty() && f.blocker.empty()) {
            const auto [from, group] = todo.back();
            todo.pop_back();
            const std::vector<Edge> out = m_graph.edgesFrom(from);
            if (out.empty()) {
                f.blocker = from == id ? "the graph's output layer (its size is fixed)"
                                       : "its channels reach the graph's output through '" + name(from) + "'";
                break;
            }
            for (const Edge& e : out) {
                const int to = e.to.node;
                const ChannelFacts c = facts(to);
                if (c.input == ChannelFacts::Input::Weighs) {
                    f.consumers.push_back({to, group});
                } else if (c.input == ChannelFacts::Input::PerChannel || c.input == ChannelFacts::Input::Flattens) {
                    int64_t g = group;
                    if (c.input == ChannelFacts::Input::Flattens) {
                        const Shape& in = m_analysis.outputShapes.at(from);
                        g *= in.rank() > 1 ? in.numel() / in[0] : 1;
                    }
                    if (!c.perChannel.empty()) f.perChannel.push_back(to);
                    todo.emplace_back(to, g);
                } else {
                    f.blocker = "it feeds '" + name(to) + "' (" + m_graph.node(to)->type + "), which mixes channels";
                    break;
                }
            }
        }
        return f;
    }

    // Indices of the `keep` filters or units with the largest norm, in their original order.
    std::vector<int64_t> strongest(int id, int64_t keep, FilterNorm norm) {
        const std::vector<float>& w = tensor(id, facts(id).weight);
        const int64_t count = outputs(id), row = static_cast<int64_t>(w.size()) / count;
        std::vector<double> score(static_cast<size_t>(count), 0.0);
        for (int64_t k = 0; k < count; ++k) {
            double s = 0;
            for (int64_t i = 0; i < row; ++i) {
                const double v = w[static_cast<size_t>(k * row + i)];
                s += norm == FilterNorm::L1 ? std::fabs(v) : v * v;
            }
            score[static_cast<size_t>(k)] = s;
        }
        std::vector<int64_t> order(static_cast<size_t>(count));
        std::iota(order.begin(), order.end(), 0);
        // Largest first; equal norms keep the earlier filter, so the choice is deterministic.
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
            return score[static_cast<size_t>(a)] > score[static_cast<size_t>(b)];
        });
        order.resize(static_cast<size_t>(keep));
        std::sort(order.begin(), order.end());
        return order;
    }

    // Keeps the rows `kept` of a [rows, rowLen] tensor.
    static void keepRows(std::vector<float>& t, const std::vector<int64_t>& kept, int64_t rowLen) {
        std::vector<float> out;
        out.reserve(kept.size() * static_cast<size_t>(rowLen));
        for (int64_t r : kept) out.insert(out.end(), t.begin() + r * rowLen, t.begin() + (r + 1) * rowLen);
        t = std::move(out);
    }

    // Keeps, in each of `outer` blocks of `channels` x `inner` values, the channels `kept`.
    static void keepInner(std::vector<float>& t, const std::vector<int64_t>& kept, int64_t channels, int64_t inner) {
        const int64_t block = channels * inner, outer = static_cast<int64_t>(t.size()) / block;
        std::vector<float> out;
        out.reserve(static_cast<size_t>(outer) * kept.size() * static_cast<size_t>(inner));
        for (int64_t o = 0; o < outer; ++o)
            for (int64_t c : kept) {
                auto from = t.begin() + o * block + c * inner;
                out.insert(out.end(), from, from + inner);
            }
        t = std::move(out);
    }

    void prune(int id, const std::vector<int64_t>& kept, const Fanout& f) {
        const int64_t count = outputs(id);
        const ChannelFacts own = facts(id);
        std::vector<float>& w = tensor(id, own.weight);
        keepRows(w, kept, static_cast<int64_t>(w.size()) / count);
        if (!own.bias.empty()) keepRows(tensor(id, own.bias), kept, 1);
        m_graph.node(id)->params[own.countParam] = static_cast<int64_t>(kept.size());
        for (int node : f.perChannel)
            for (const std::string& p : facts(node).perChannel) keepRows(tensor(node, p), kept, 1);
        for (const Consumer& c : f.consumers) {
            // Each row of the consumer's weight holds inputBlock values per input channel (a Conv2D's
            // [K, C, R, S]: R x S), and each channel stands for `group` inputs after a Flatten.
            const ChannelFacts in = facts(c.node);
            keepInner(tensor(c.node, in.weight), kept, count, in.inputBlock * c.group);
        }
    }

    Project m_project;
    Graph& m_graph;
    Weights m_weights;
    GraphAnalysis m_analysis;
};

}  // namespace

const char* filterNormName(FilterNorm norm) { return norm == FilterNorm::L2 ? "l2" : "l1"; }

FilterNorm parseFilterNorm(const std::string& text) {
    if (text == "l1" || text == "L1") return FilterNorm::L1;
    if (text == "l2" || text == "L2") return FilterNorm::L2;
    throw std::invalid_argument("unknown filter norm '" + text + "' (l1 or l2)");
}

StructuredPruneResult pruneStructured(const Project& project, const std::map<std::string, std::vector<float>>& weights,
                                      const StructuredPruneOptions& options) {
    if (!(options.fraction > 0.0 && options.fraction < 1.0))
        throw std::invalid_argument("structured pruning: the fraction of filters to remove must be in (0, 1), got " +
                                    std::to_string(options.fraction));
    return Pruner(project, weights).run(options);
}

}  // namespace strata
