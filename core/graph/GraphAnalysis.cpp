// analyzeGraph(): shape inference and validation over a whole Graph (see Graph.h).
// It never throws: every failure becomes a Problem, and shapes keep flowing
// through every node whose inputs are known, so one bad node does not blank
// out the rest of the canvas.
#include <algorithm>
#include <functional>
#include <queue>
#include <set>

#include "core/graph/Graph.h"
#include "core/layers/LayerRegistry.h"

namespace strata {

namespace {

std::string joined(const std::vector<std::string>& items) {
    std::string s;
    for (size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + items[i];
    return s;
}

// Strongly connected components with more than one node (Tarjan, iterative). Each is a set of nodes
// that lie on at least one cycle; connect() refuses self-loops, so single nodes never do.
std::vector<std::vector<int>> cyclicComponents(const Graph& graph) {
    std::map<int, std::vector<int>> succ;
    for (const Edge& e : graph.edges()) succ[e.from.node].push_back(e.to.node);
    std::map<int, int> index, low;
    std::set<int> onStack;
    std::vector<int> stack;
    int counter = 0;
    std::vector<std::vector<int>> out;
    for (const Node* root : graph.nodes()) {
        if (index.count(root->id)) continue;
        std::vector<std::pair<int, size_t>> work{{root->id, 0}};
        index[root->id] = low[root->id] = counter++;
        stack.push_back(root->id);
        onStack.insert(root->id);
        while (!work.empty()) {
            const int v = work.back().first;
            const std::vector<int>& s = succ[v];
            if (work.back().second < s.size()) {
                const int w = s[work.back().second++];
                if (!index.count(w)) {
                    index[w] = low[w] = counter++;
                    stack.push_back(w);
                    onStack.insert(w);
                    work.push_back({w, 0});
                } else if (onStack.count(w)) {
                    low[v] = std::min(low[v], index[w]);
                }
                continue;
            }
            work.pop_back();
            if (!work.empty()) low[work.back().first] = std::min(low[work.back().first], low[v]);
            if (low[v] == index[v]) {
                std::vector<int> comp;
                int w = -1;
                do {
                    w = stack.back();
                    stack.pop_back();
                    onStack.erase(w);
                    comp.push_back(w);
                } while (w != v);
                if (comp.size() > 1) {
                    std::sort(comp.begin(), comp.end());
                    out.push_back(std::move(comp));
                }
            }
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

// One cycle inside a component, starting at its lowest id: follow the lowest successor inside the
// component until a node repeats.
std::vector<int> cycleIn(const Graph& graph, const std::vector<int>& comp) {
    const std::set<int> members(comp.begin(), comp.end());
    std::vector<int> path;
    std::map<int, size_t> seenAt;
    int v = comp.front();
    while (!seenAt.count(v)) {
        seenAt[v] = path.size();
        path.push_back(v);
        int next = -1;
        for (const Edge& e : graph.edgesFrom(v))
            if (members.count(e.to.node) && (next < 0 || e.to.node < next)) next = e.to.node;
        if (next < 0) break;  // cannot happen in a strongly connected component
        v = next;
    }
    std::vector<int> cycle(path.begin() + static_cast<std::ptrdiff_t>(seenAt.count(v) ? seenAt[v] : 0), path.end());
    return cycle;
}

// ParamError texts start with the parameter name ("units: 0 is out of range (1 to 65536)").
std::string paramMessage(const std::string& node, const ParamError& e) {
    return node + (e.param().empty() ? ": " : ": parameter ") + e.what();
}

}  // namespace

const Shape* GraphAnalysis::shapeOf(int node) const {
    auto it = outputShapes.find(node);
    return it == outputShapes.end() ? nullptr : &it->second;
}

std::optional<std::vector<Shape>> GraphAnalysis::inputShapesOf(const Graph& graph, int node) const {
    std::vector<Shape> shapes;
    for (const std::string& port : graph.inputPorts(node)) {
        const std::optional<Edge> in = graph.edgeInto({node, port});
        const Shape* s = in ? shapeOf(in->from.node) : nullptr;
        if (!s) return std::nullopt;
        shapes.push_back(*s);
    }
    return shapes;
}

ChannelFacts channelFactsOf(const Graph& graph, const GraphAnalysis& analysis, int node) {
    const LayerType* type = graph.layerType(node);
    const auto params = analysis.params.find(node);
    const Shape* out = analysis.shapeOf(node);
    const std::optional<std::vector<Shape>> in = analysis.inputShapesOf(graph, node);
    if (!type || params == analysis.params.end() || !out || !in) return {};
    return type->channelFacts(params->second, *in, *out);
}

GraphAnalysis analyzeGraph(const Graph& graph) {
    GraphAnalysis a;
    auto problem = [&](int node, std::string port, std::string message) {
        a.problems.push_back({node, std::move(port), std::move(message)});
    };
    try {
        if (graph.empty()) {
            problem(-1, {}, "the graph is empty: add an Input node and the layers after it");
            return a;
        }
        const LayerRegistry& registry = layerRegistry();
        auto nameOf = [&](int id) {
            const Node* n = graph.node(id);
            if (n) return n->name;
            std::string s("#");  // written out: GCC 12 warns falsely (-Wrestrict) on "#" + std::string
            s += std::to_string(id);
            return s;
        };

        // Types and parameters, node by node.
        std::map<int, const LayerType*> types;
        std::map<int, std::vector<std::string>> ports;
        for (const Node* n : graph.nodes()) {
            const LayerType* type = registry.find(n->type);
            if (!type) {
                problem(
                    n->id, {},
                    n->name + ": unknown layer type '" + n->type + "' (known types: " + joined(registry.names()) + ")");
                continue;
            }
            types[n->id] = type;
            try {
                Json params = type->normalizeParams(n->params);
                ports[n->id] = type->inputPorts(params);
                a.params[n->id] = std::move(params);
            } catch (const ParamError& e) {
                problem(n->id, {}, paramMessage(n->name, e));
                ports[n->id] = graph.inputPorts(n->id);  // best guess, to still report unconnected inputs
            } catch (const std::exception& e) {
                problem(n->id, {}, n->name + ": bad parameters: " + e.what());
                ports[n->id] = graph.inputPorts(n->id);
            }
        }

        // Edges into ports a node does not have (only possible after hand edits of a file).
        for (const Edge& e : graph.edges()) {
            auto it = ports.find(e.to.node);
            if (it == ports.end()) continue;
            if (std::find(it->second.begin(), it->second.end(), e.to.port) == it->second.end())
                problem(e.to.node, e.to.port,
                        nameOf(e.to.node) + ": input '" + e.to.port + "' does not exist (ports: " +
                            (it->second.empty() ? std::string("none") : joined(it->second)) + ")");
        }

        // Cycles: name the nodes on one cycle of each cyclic component, and mark each of them.
        for (const std::vector<int>& comp : cyclicComponents(graph)) {
            const std::vector<int> cycle = cycleIn(graph, comp);
            std::string path;
            for (int id : cycle) path += nameOf(id) + " -> ";
            path += nameOf(cycle.front());
            for (int id : cycle) problem(id, {}, nameOf(id) + ": on a cycle: " + path);
        }

        // Shapes in topological order; nodes on or after a cycle never become ready and keep no shape.
        std::map<int, int> indegree;
        for (const Node* n : graph.nodes()) indegree[n->id] = 0;
        for (const Edge& e : graph.edges()) ++indegree[e.to.node];
        std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
        for (const auto& [id, d] : indegree)
            if (d == 0) ready.push(id);
        while (!ready.empty()) {
            const int id = ready.top();
            ready.pop();
            for (const Edge& e : graph.edgesFrom(id))
                if (--indegree[e.to.node] == 0) ready.push(e.to.node);

            const Node* n = graph.node(id);
            auto typeIt = types.find(id);
            if (typeIt == types.end()) continue;
            auto paramsIt = a.params.find(id);
            std::vector<Shape> inputs;
            bool known = true;
            for (const std::string& port : ports[id]) {
                const auto edge = graph.edgeInto({id, port});
                if (!edge) {
                    problem(id, port, n->name + ": input '" + port + "' is not connected");
                    known = false;
                    continue;
                }
                const Shape* s = a.shapeOf(edge->from.node);
                if (!s) {
                    known = false;
                    continue;
                }
                inputs.push_back(*s);
            }
            if (!known || paramsIt == a.params.end()) continue;
            try {
                Shape out = typeIt->second->inferShape(paramsIt->second, inputs);
                for (const ParameterSpec& p : typeIt->second->parameterSpecs(paramsIt->second, inputs))
                    if (p.trainable) a.parameterCount += p.shape.numel();
                a.outputShapes[id] = std::move(out);
            } catch (const ShapeError& e) {
                // Layer texts usually start with the port ("in1: Add expects ..."); add it when they do not.
                const std::string what = e.what();
                const bool named = e.port().empty() || what.rfind(e.port() + ":", 0) == 0;
                problem(id, e.port(), n->name + ": " + (named ? what : "input '" + e.port() + "': " + what));
            } catch (const ParamError& e) {
                problem(id, {}, paramMessage(n->name, e));
            } catch (const std::exception& e) {
                problem(id, {}, n->name + ": " + e.what());
            }
        }

        // Whole-graph rules: the engine trains one Input to one output.
        std::vector<const Node*> inputs;
        std::vector<std::string> sinks;
        for (const Node* n : graph.nodes()) {
            if (const auto t = types.find(n->id); t != types.end() && t->second->isGraphInput()) inputs.push_back(n);
            if (graph.edgesFrom(n->id).empty()) sinks.push_back(n->name);
        }
        if (inputs.empty()) problem(-1, {}, "the graph has no Input node");
        for (size_t i = 1; i < inputs.size(); ++i)
            problem(inputs[i]->id, {},
                    inputs[i]->name + ": a second Input node (the engine takes one input; '" + inputs[0]->name +
                        "' is already one)");
        if (sinks.size() > 1)
            problem(-1, {},
                    "the graph has " + std::to_string(sinks.size()) + " outputs (" + joined(sinks) +
                        "); the engine takes one: connect or remove the extra ones");
    } catch (const std::exception& e) {
        problem(-1, {}, std::string("graph analysis failed: ") + e.what());
    } catch (...) {
        problem(-1, {}, "graph analysis failed");
    }
    return a;
}

}  // namespace strata
