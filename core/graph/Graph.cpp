// Graph editing, port checks and topological order (see Graph.h).
#include "core/graph/Graph.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <queue>
#include <set>

#include "core/io/InputLimits.h"
#include "core/layers/LayerRegistry.h"

namespace strata {

namespace {

std::string lowered(const std::string& s) {
    std::string out = s;
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::string nodeLabel(const Node& n) { return "'" + n.name + "' (" + n.type + ", id " + std::to_string(n.id) + ")"; }

std::string joined(const std::vector<std::string>& items) {
    std::string s;
    for (size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + items[i];
    return s;
}

}  // namespace

int Graph::addNode(const std::string& type, const std::string& name, const Json& params, double x, double y) {
    Node n;
    n.id = m_nextId;
    n.type = type;
    n.params = params;
    n.x = x;
    n.y = y;
    if (name.empty()) {
        // The smallest free number, so deleting dense2 and adding a Dense gives dense2 again.
        const std::string stem = lowered(type);
        for (int k = 1;; ++k) {
            n.name = stem + std::to_string(k);
            if (!nodeByName(n.name)) break;
        }
    } else {
        n.name = name;
    }
    insertNode(n);
    return n.id;
}

void Graph::checkName(int id, const std::string& name, const std::string& doing) const {
    if (name.size() > kMaxNodeNameBytes)
        throw GraphError(id, {},
                         doing + ": the name '" + cutForMessage(name, 60) + "' is " + std::to_string(name.size()) +
                             " bytes long; a node name is at most " + std::to_string(kMaxNodeNameBytes) + " bytes");
}

void Graph::insertNode(const Node& node) {
    if (node.id < 0) throw GraphError(node.id, {}, "node id " + std::to_string(node.id) + " is negative");
    if (m_nodes.count(node.id))
        throw GraphError(
            node.id, {},
            "node id " + std::to_string(node.id) + " is already used by " + nodeLabel(m_nodes.at(node.id)));
    if (node.name.empty()) throw GraphError(node.id, {}, "node " + std::to_string(node.id) + " has an empty name");
    checkName(node.id, node.name, "cannot add node " + std::to_string(node.id));
    if (const Node* other = nodeByName(node.name))
        throw GraphError(node.id, {},
                         "the name '" + node.name + "' is already used by node " + std::to_string(other->id));
    m_nodes.emplace(node.id, node);
    m_idByName.emplace(node.name, node.id);
    m_nextId = std::max(m_nextId, node.id + 1);
}

void Graph::indexEdge(const Edge& e) {
    m_sourceOf[{e.to.node, e.to.port}] = e.from.node;
    m_targetsOf[e.from.node].push_back(e.to);
}

void Graph::unindexEdge(const Edge& e) {
    m_sourceOf.erase({e.to.node, e.to.port});
    auto it = m_targetsOf.find(e.from.node);
    if (it == m_targetsOf.end()) return;
    std::vector<PortRef>& targets = it->second;
    targets.erase(std::find(targets.begin(), targets.end(), e.to));
    if (targets.empty()) m_targetsOf.erase(it);
}

std::vector<Edge> Graph::removeNode(int id) {
    auto at = m_nodes.find(id);
    if (at == m_nodes.end()) throw GraphError(id, {}, "no node with id " + std::to_string(id));
    std::vector<Edge> removed;
    std::vector<Edge> kept;
    for (const Edge& e : m_edges) (e.from.node == id || e.to.node == id ? removed : kept).push_back(e);
    m_edges = std::move(kept);
    for (const Edge& e : removed) unindexEdge(e);
    m_idByName.erase(at->second.name);
    m_nodes.erase(at);
    return removed;
}

void Graph::connect(const PortRef& from, const PortRef& to) {
    const Node* src = node(from.node);
    if (!src)
        throw GraphError(from.node, from.port, "cannot connect: no source node with id " + std::to_string(from.node));
    const Node* dst = node(to.node);
    if (!dst) throw GraphError(to.node, to.port, "cannot connect: no target node with id " + std::to_string(to.node));
    if (from.port != "out")
        throw GraphError(
            from.node, from.port,
            "cannot connect from " + nodeLabel(*src) + " port '" + from.port + "': the output port is 'out'");
    if (from.node == to.node) throw GraphError(to.node, to.port, "cannot connect " + nodeLabel(*dst) + " to itself");
    const LayerType* type = layerRegistry().find(dst->type);
    if (!type)
        throw GraphError(to.node, to.port,
                         "cannot connect to " + nodeLabel(*dst) + " port '" + to.port + "': unknown layer type '" +
                             dst->type + "', so its input ports are unknown");
    const std::vector<std::string> ports = inputPorts(to.node);
    if (std::find(ports.begin(), ports.end(), to.port) == ports.end())
        throw GraphError(to.node, to.port,
                         "cannot connect to " + nodeLabel(*dst) + ": it has no input port '" + to.port + "'" +
                             (ports.empty() ? " (it takes no inputs)" : " (ports: " + joined(ports) + ")"));
    if (auto existing = edgeInto(to)) {
        const Node* other = node(existing->from.node);
        throw GraphError(to.node, to.port,
                         "cannot connect to " + nodeLabel(*dst) + " port '" + to.port + "': already fed by '" +
                             (other ? other->name : std::to_string(existing->from.node)) + "'");
    }
    m_edges.push_back({from, to});
    indexEdge(m_edges.back());
}

std::optional<Edge> Graph::disconnect(const PortRef& to) {
    if (!m_sourceOf.count({to.node, to.port})) return std::nullopt;
    for (auto it = m_edges.begin(); it != m_edges.end(); ++it) {
        if (it->to == to) {
            Edge e = *it;
            m_edges.erase(it);
            unindexEdge(e);
            return e;
        }
    }
    return std::nullopt;
}

const Node* Graph::node(int id) const {
    auto it = m_nodes.find(id);
    return it == m_nodes.end() ? nullptr : &it->second;
}

Node* Graph::node(int id) {
    auto it = m_nodes.find(id);
    return it == m_nodes.end() ? nullptr : &it->second;
}

const Node* Graph::nodeByName(const std::string& name) const {
    auto it = m_idByName.find(name);
    return it == m_idByName.end() ? nullptr : node(it->second);
}

std::vector<const Node*> Graph::nodes() const {
    std::vector<const Node*> out;
    out.reserve(m_nodes.size());
    for (const auto& [id, n] : m_nodes) out.push_back(&n);
    return out;
}

std::optional<Edge> Graph::edgeInto(const PortRef& to) const {
    auto it = m_sourceOf.find({to.node, to.port});
    if (it == m_sourceOf.end()) return std::nullopt;
    return Edge{{it->second, "out"}, to};  // connect() takes "out" as the only output port
}

std::vector<Edge> Graph::edgesFrom(int id) const {
    std::vector<Edge> out;
    auto it = m_targetsOf.find(id);
    if (it == m_targetsOf.end()) return out;
    out.reserve(it->second.size());
    for (const PortRef& to : it->second) out.push_back({{id, "out"}, to});
    return out;
}

const LayerType* Graph::layerType(int id) const {
    const Node* n = node(id);
    return n ? layerRegistry().find(n->type) : nullptr;
}

std::vector<std::string> Graph::inputPorts(int id) const {
    const Node* n = node(id);
    if (!n) return {};
    const LayerType* type = layerRegistry().find(n->type);
    if (!type) return {};
    // Port lists are defined for normalized params; with invalid params, try the raw ones as the
    // best guess (the problems list reports the bad value).
    try {
        return type->inputPorts(type->normalizeParams(n->params));
    } catch (const std::exception&) {
    }
    try {
        return type->inputPorts(n->params);
    } catch (const std::exception&) {
        return {};
    }
}

void Graph::setParams(int id, const Json& params) {
    Node* n = node(id);
    if (!n) throw GraphError(id, {}, "no node with id " + std::to_string(id));
    n->params = params;
    const LayerType* type = layerRegistry().find(n->type);
    if (!type) return;
    std::vector<std::string> ports;
    try {
        ports = type->inputPorts(type->normalizeParams(params));
    } catch (const std::exception&) {
        return;  // invalid params: the port list is unknown, keep every edge
    }
    std::vector<Edge> dropped;
    std::erase_if(m_edges, [&](const Edge& e) {
        const bool drop = e.to.node == id && std::find(ports.begin(), ports.end(), e.to.port) == ports.end();
        if (drop) dropped.push_back(e);
        return drop;
    });
    for (const Edge& e : dropped) unindexEdge(e);
}

void Graph::setPosition(int id, double x, double y) {
    Node* n = node(id);
    if (!n) throw GraphError(id, {}, "no node with id " + std::to_string(id));
    n->x = x;
    n->y = y;
}

void Graph::setTrainable(int id, bool trainable) {
    Node* n = node(id);
    if (!n) throw GraphError(id, {}, "no node with id " + std::to_string(id));
    n->trainable = trainable;
}

void Graph::rename(int id, const std::string& name) {
    Node* n = node(id);
    if (!n) throw GraphError(id, {}, "no node with id " + std::to_string(id));
    if (name.empty()) throw GraphError(id, {}, "cannot rename " + nodeLabel(*n) + ": the name is empty");
    checkName(id, name, "cannot rename " + nodeLabel(*n));
    const Node* other = nodeByName(name);
    if (other && other->id != id)
        throw GraphError(id, {},
                         "cannot rename " + nodeLabel(*n) + ": the name '" + name + "' is already used by node " +
                             std::to_string(other->id));
    m_idByName.erase(n->name);
    n->name = name;
    m_idByName.emplace(name, id);
}

void Graph::clear() {
    m_nodes.clear();
    m_edges.clear();
    m_idByName.clear();
    m_sourceOf.clear();
    m_targetsOf.clear();
    m_nextId = 1;
}

std::vector<int> Graph::topologicalOrder() const {
    std::map<int, int> indegree;
    std::map<int, std::vector<int>> successors;
    for (const auto& [id, n] : m_nodes) indegree[id] = 0;
    for (const Edge& e : m_edges) {
        ++indegree[e.to.node];
        successors[e.from.node].push_back(e.to.node);
    }
    // Kahn's algorithm taking the lowest ready id first, so the order depends only on the graph.
    std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
    for (const auto& [id, d] : indegree)
        if (d == 0) ready.push(id);
    std::vector<int> order;
    order.reserve(m_nodes.size());
    while (!ready.empty()) {
        const int id = ready.top();
        ready.pop();
        order.push_back(id);
        for (int s : successors[id])
            if (--indegree[s] == 0) ready.push(s);
    }
    if (order.size() != m_nodes.size()) {
        const std::vector<int> cycle = findCycle();
        std::string path;
        for (int id : cycle) path += node(id)->name + " -> ";
        const int at = cycle.empty() ? -1 : cycle.front();
        path += cycle.empty() ? std::string("?") : node(at)->name;
        throw GraphError(at, {}, "the graph has a cycle: " + path);
    }
    return order;
}

std::vector<int> Graph::findCycle() const {
    // Depth-first search in id order; the first back edge closes a cycle, rotated to start at its lowest id.
    std::map<int, std::vector<int>> successors;
    for (const Edge& e : m_edges) successors[e.from.node].push_back(e.to.node);
    for (auto& [id, s] : successors) std::sort(s.begin(), s.end());
    enum class Mark { White, Grey, Black };
    std::map<int, Mark> mark;
    for (const auto& [id, n] : m_nodes) mark[id] = Mark::White;

    for (const auto& [root, n] : m_nodes) {
        if (mark[root] != Mark::White) continue;
        // Iterative DFS: the stack holds (node, index of the next successor to visit).
        std::vector<std::pair<int, size_t>> stack{{root, 0}};
        mark[root] = Mark::Grey;
        while (!stack.empty()) {
            auto& [id, next] = stack.back();
            const std::vector<int>& succ = successors[id];
            if (next == succ.size()) {
                mark[id] = Mark::Black;
                stack.pop_back();
                continue;
            }
            const int s = succ[next++];
            if (mark[s] == Mark::Grey) {
                std::vector<int> cycle;
                size_t k = stack.size();
                while (k > 0 && stack[k - 1].first != s) --k;
                for (size_t i = k - 1; i < stack.size(); ++i) cycle.push_back(stack[i].first);
                std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
                return cycle;
            }
            if (mark[s] == Mark::White) {
                mark[s] = Mark::Grey;
                stack.push_back({s, 0});
            }
        }
    }
    return {};
}

}  // namespace strata
