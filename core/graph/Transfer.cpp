// Transfer learning edits of a Graph (see Transfer.h).
#include "core/graph/Transfer.h"

#include <algorithm>

#include "core/io/InputLimits.h"

namespace strata {

namespace {

// Whether a node holds learnable weights, from its analysed params and input shapes; a node whose shapes are not
// known counts when its type is one that usually does (so a half-drawn graph still offers it).
bool holdsWeights(const Graph& graph, const GraphAnalysis& analysis, int id) {
    const LayerType* type = graph.layerType(id);
    if (!type) return false;
    auto params = analysis.params.find(id);
    const auto shapes = analysis.inputShapesOf(graph, id);
    if (params == analysis.params.end() || !shapes) return !type->compressibleWeight().weight.empty();
    for (const ParameterSpec& s : type->parameterSpecs(params->second, *shapes))
        if (s.trainable) return true;
    return false;
}

std::string weightNodeList(const Graph& graph) {
    const GraphAnalysis analysis = analyzeGraph(graph);
    std::string list;
    int shown = 0;
    for (const Node* n : graph.nodes()) {
        if (!holdsWeights(graph, analysis, n->id)) continue;
        if (shown++ == 20) {
            list += ", ...";
            break;
        }
        list += (list.empty() ? "" : ", ") + n->name;
    }
    return list.empty() ? "none" : list;
}

const Node& namedNode(const Graph& graph, const std::string& name, const char* flag) {
    const Node* n = graph.nodeByName(name);
    if (!n)
        throw GraphError(-1, {},
                         std::string(flag) + ": no node is named '" + name +
                             "' (nodes with weights: " + weightNodeList(graph) + ")");
    return *n;
}

}  // namespace

std::vector<std::string> freezeNodes(Graph& graph, const std::vector<std::string>& names) {
    std::vector<int> ids;
    for (const std::string& name : names) ids.push_back(namedNode(graph, name, "--freeze").id);
    for (int id : ids) graph.setTrainable(id, false);
    return names;
}

std::vector<std::string> freezeUntil(Graph& graph, const std::string& last) {
    const int lastId = namedNode(graph, last, "--freeze-until").id;
    const GraphAnalysis analysis = analyzeGraph(graph);
    std::vector<std::string> frozen;
    for (int id : graph.topologicalOrder()) {
        graph.setTrainable(id, false);
        if (holdsWeights(graph, analysis, id)) frozen.push_back(graph.node(id)->name);
        if (id == lastId) break;
    }
    return frozen;
}

int headNode(const Graph& graph) {
    int head = -1;
    for (int id : graph.topologicalOrder())
        if (graph.node(id)->type == "Dense") head = id;
    return head;
}

std::string HeadReplacement::summary() const {
    return "head " + oldName + " (Dense, " + std::to_string(oldUnits) + " units) replaced by " + newName + " (" +
           std::to_string(newUnits) + " units): new initial weights";
}

HeadReplacement replaceHead(Graph& graph, int64_t classes) {
    if (classes < 1)
        throw GraphError(-1, {}, "replace the head: " + std::to_string(classes) + " classes; it takes at least 1");
    const int id = headNode(graph);
    if (id < 0)
        throw GraphError(-1, {},
                         "replace the head: the graph has no Dense layer (the head is the last Dense before the "
                         "output); add one");
    Node& node = *graph.node(id);
    HeadReplacement r;
    r.node = id;
    r.oldName = node.name;
    r.oldUnits = node.params.is_object() && node.params.contains("units") && node.params["units"].is_number_integer()
                     ? node.params["units"].get<int64_t>()
                     : graph.layerType(id)->normalizeParams(Json::object()).value("units", int64_t(0));
    r.newUnits = classes;
    // A new name: what loads weights by name (--init-from, training.init_from) then finds none for it. The stem
    // is cut so that the name stays within kMaxNodeNameBytes.
    const std::string stem = node.name.substr(0, std::min(node.name.size(), kMaxNodeNameBytes - 16)) + "_new";
    std::string name = stem;
    for (int k = 2; graph.nodeByName(name); ++k) name = stem + std::to_string(k);
    Json params = node.params.is_object() ? node.params : Json::object();
    params["units"] = classes;
    graph.setParams(id, params);
    graph.rename(id, name);
    graph.setTrainable(id, true);
    r.newName = name;
    return r;
}

}  // namespace strata
