// Transfer learning edits of a Graph: freezing nodes (Node::trainable) by name or up to a node, and replacing
// the head (the last Dense) for another number of classes. strata-train's --freeze, --freeze-until and
// --replace-head and the workbench's property panel make the same edits through these.
#pragma once

#include <string>
#include <vector>

#include "core/graph/Graph.h"

namespace strata {

// Freezes the named nodes. Throws GraphError naming the first unknown name (with the graph's nodes that hold
// weights, to pick from); nothing changes then. Returns the names frozen.
std::vector<std::string> freezeNodes(Graph& graph, const std::vector<std::string>& names);
// Freezes every node from the Input up to and including `last`, in topological order: the backbone below a
// head. Throws GraphError for an unknown name or a graph with a cycle. Returns the names of those frozen that
// hold weights.
std::vector<std::string> freezeUntil(Graph& graph, const std::string& last);

// The head: the last Dense node in topological order, or -1 when the graph has none.
int headNode(const Graph& graph);

// What replaceHead did, for the log and the undo text.
struct HeadReplacement {
    int node = -1;
    std::string oldName, newName;
    int64_t oldUnits = 0, newUnits = 0;
    std::string summary() const;  // "head fc (Dense, 10 units) replaced by fc_new (5 units): new initial weights"
};

// Sets the head's units to `classes` and gives it a new name ("<name>_new", or "<name>_new2", ... when that is
// taken), so that no weights are loaded into it by name (--init-from, a project's training.init_from): it starts
// from new initial weights whatever the number of classes. Its trainable flag is set (a frozen head would never
// learn). Throws GraphError when the graph has no Dense node or `classes` is below 1.
HeadReplacement replaceHead(Graph& graph, int64_t classes);

}  // namespace strata
