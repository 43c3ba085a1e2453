// Embedding: see Embedding.h.
#include "core/infer/Embedding.h"

#include <algorithm>
#include <stdexcept>

#include "core/graph/Graph.h"
#include "core/graph/Model.h"

namespace strata {

int penultimateNode(const Graph& g) {
    // The output node: the one no edge leaves (the last such in id order, as a graph has one).
    int output = -1;
    for (const Node* n : g.nodes()) {
        bool leaves = false;
        for (const Node* m : g.nodes())
            for (const std::string& port : g.inputPorts(m->id))
                if (const auto e = g.edgeInto({m->id, port}); e && e->from.node == n->id) leaves = true;
        if (!leaves) output = n->id;
    }
    if (output < 0) return -1;
    for (const std::string& port : g.inputPorts(output))
        if (const auto e = g.edgeInto({output, port})) return e->from.node;
    return -1;
}

Embeddings embedSamples(Model& model, const float* inputs, int64_t count, int batchSize) {
    if (count < 0 || batchSize < 1) throw std::invalid_argument("embedSamples: a negative count or a batch under 1");
    const Graph& g = model.graph();
    Embeddings e;
    e.node = penultimateNode(g);
    const Node* node = e.node >= 0 ? g.node(e.node) : nullptr;
    if (!node) throw std::invalid_argument("the model has no layer before its output to take embeddings from");
    e.layer = node->name;
    if (model.outputBlock(e.node) > 0)
        throw std::invalid_argument("layer '" + e.layer +
                                    "' keeps its output in a blocked layout; add a Flatten "
                                    "before the last layer to take embeddings from it");
    e.count = count;
    const int64_t inSize = model.inputShape().numel();
    const int64_t classes = model.outputShape().numel();
    std::vector<float> outputs(size_t(count * classes)), host;
    Backend& backend = model.backend();
    for (int64_t start = 0; start < count; start += batchSize) {
        const int64_t n = std::min<int64_t>(batchSize, count - start);
        const Tensor x = backend.fromHost(model.inputShape().withBatch(n), inputs + start * inSize);
        const Tensor& y = model.forward(x, false);
        const Tensor* act = model.nodeOutput(e.node);
        if (!act || act->shape().rank() < 1 || act->shape()[0] < n)
            throw std::invalid_argument("layer '" + e.layer + "' kept no output to take embeddings from");
        // The model's buffers may hold more rows than this batch (its capacity): the first n are this batch's.
        const int64_t dim = act->numel() / act->shape()[0];
        if (e.dim == 0) {
            e.dim = dim;
            e.rows.resize(size_t(count * dim));
        }
        host.resize(size_t(act->numel()));
        backend.toHost(*act, host.data());
        std::copy(host.begin(), host.begin() + n * dim, e.rows.begin() + start * dim);
        host.resize(size_t(y.numel()));
        backend.toHost(y, host.data());
        std::copy(host.begin(), host.begin() + n * classes, outputs.begin() + start * classes);
    }
    e.predictions = predictionsFromOutputs(std::move(outputs), count, int(classes), graphEndsInSoftmax(g));
    return e;
}

}  // namespace strata
