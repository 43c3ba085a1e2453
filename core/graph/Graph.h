// Graph: the one model of a network, edited by the GUI and compiled by the
// engine. Nodes have stable integer ids; edges join a node's output port
// ("out") to a named input port of another node. An input port takes at most
// one edge. The Graph holds no shapes: analyzeGraph() derives them.
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/layers/Layer.h"

namespace strata {

struct PortRef {
    int node = -1;
    std::string port;
    bool operator==(const PortRef& o) const { return node == o.node && port == o.port; }
};

struct Edge {
    PortRef from;  // from.port is "out"
    PortRef to;
    bool operator==(const Edge& o) const { return from == o.from && to == o.to; }
};

struct Node {
    int id = -1;
    std::string type;  // LayerType name
    std::string name;  // unique, user-visible ("conv1")
    Json params = Json::object();
    double x = 0, y = 0;  // canvas position
    // False: the node's weights are frozen (transfer learning): compile makes them non-trainable state, so the
    // optimizer never sees them and backward computes no gradient for them (Model::frozenParameterCount).
    bool trainable = true;
    bool operator==(const Node& o) const {
        return id == o.id && type == o.type && name == o.name && params == o.params && x == o.x && y == o.y &&
               trainable == o.trainable;
    }
};

// A structural error (cycle, missing node, bad port); names the node and port when known.
class GraphError : public std::runtime_error {
public:
    GraphError(int node, std::string port, const std::string& what)
        : std::runtime_error(what), m_node(node), m_port(std::move(port)) {}
    int node() const { return m_node; }
    const std::string& port() const { return m_port; }

private:
    int m_node;
    std::string m_port;
};

class Graph {
public:
    // Adds a node with a fresh id and returns the id. An empty name becomes "<type lowercased><n>".
    int addNode(const std::string& type, const std::string& name = {}, const Json& params = Json::object(),
                double x = 0, double y = 0);
    // Inserts a node with its own id (file loading, undo). Throws if the id or name is taken, or the name is
    // empty or longer than kMaxNodeNameBytes (core/io/InputLimits.h).
    void insertNode(const Node& node);
    // Removes the node and every edge touching it; returns the removed edges (for undo).
    std::vector<Edge> removeNode(int id);

    // Connects from.node's output to to.node's input port. Throws GraphError if a node is missing,
    // the port is unknown for the node's type, the port is already connected, or from == to.
    void connect(const PortRef& from, const PortRef& to);
    void connect(int fromNode, int toNode, const std::string& toPort = "in") {
        connect({fromNode, "out"}, {toNode, toPort});
    }
    // Removes the edge into `to`; returns it, or nothing if there was none.
    std::optional<Edge> disconnect(const PortRef& to);

    const Node* node(int id) const;
    // For changing params and position in place; a name changes only through rename() (the name index).
    Node* node(int id);
    const Node* nodeByName(const std::string& name) const;
    // Nodes in increasing id order.
    std::vector<const Node*> nodes() const;
    const std::vector<Edge>& edges() const { return m_edges; }
    // The edge feeding an input port, if any.
    std::optional<Edge> edgeInto(const PortRef& to) const;
    // Edges leaving a node's output.
    std::vector<Edge> edgesFrom(int node) const;
    // A node's layer type, for its facts (LayerType::isGraphInput ...); null for an unknown type or node.
    const LayerType* layerType(int node) const;
    // Input port names of a node (from its type and params); empty for unknown types.
    std::vector<std::string> inputPorts(int node) const;

    // Replaces the params. When the new params are valid and give the node fewer input ports (Add "inputs"),
    // edges into ports that no longer exist are removed; with invalid params every edge stays. Undo code
    // that needs those edges reads edgeInto() for each port first.
    void setParams(int id, const Json& params);
    void setPosition(int id, double x, double y);
    void setTrainable(int id, bool trainable);     // Node::trainable
    void rename(int id, const std::string& name);  // throws if taken, empty or too long
    int nextId() const { return m_nextId; }
    bool empty() const { return m_nodes.empty(); }
    void clear();

    // Node ids so that every edge goes forward. Throws GraphError naming a node on a cycle.
    std::vector<int> topologicalOrder() const;
    // The ids along one cycle in edge order, starting at its lowest id; empty when there is none.
    std::vector<int> findCycle() const;

    bool operator==(const Graph& o) const { return m_nodes == o.m_nodes && m_edges == o.m_edges; }

private:
    void indexEdge(const Edge& e);
    void unindexEdge(const Edge& e);
    void checkName(int id, const std::string& name, const std::string& doing) const;

    std::map<int, Node> m_nodes;
    std::vector<Edge> m_edges;
    int m_nextId = 1;
    // Indexes over m_nodes and m_edges, kept in step by every function that changes them, so nodeByName,
    // edgeInto and edgesFrom take constant or logarithmic time: with linear scans, loading and analysing a
    // graph of n nodes took n^2 steps (100,000 layers: 90 s; 10,000 unnamed ones: over 10 minutes).
    std::unordered_map<std::string, int> m_idByName;
    std::map<std::pair<int, std::string>, int> m_sourceOf;      // (node, input port) -> node feeding it
    std::unordered_map<int, std::vector<PortRef>> m_targetsOf;  // node -> the inputs it feeds, in m_edges order
};

// One thing wrong with a graph, for the problems list and the error colour.
struct Problem {
    int node = -1;        // -1: the graph as a whole
    std::string port;     // empty: the node itself
    std::string message;  // names the node ("conv1: ...")
};

struct GraphAnalysis {
    std::map<int, Shape> outputShapes;  // per-sample output shape of every node whose shape is known
    std::map<int, Json> params;         // normalized params of every node whose params are valid
    std::vector<Problem> problems;
    bool ok() const { return problems.empty(); }
    const Shape* shapeOf(int node) const;
    // The per-sample shapes feeding a node's input ports, in port order; nothing when one is not known.
    std::optional<std::vector<Shape>> inputShapesOf(const Graph& graph, int node) const;
    int64_t parameterCount = 0;  // learnable scalars in nodes with known shapes
};

// A node's channel facts (LayerType::channelFacts) for its analyzed params and shapes; the conservative
// answer (mixes channels, has none of its own) when its type, params or shapes are not known.
ChannelFacts channelFactsOf(const Graph& graph, const GraphAnalysis& analysis, int node);

// Shape inference and validation through the whole graph. Never throws; every problem
// (unknown type, bad parameter with its allowed range, unconnected input, cycle,
// shape mismatch with both shapes, no Input, more than one output) is listed.
GraphAnalysis analyzeGraph(const Graph& graph);

}  // namespace strata
