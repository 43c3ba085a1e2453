// Activations: see Activations.h.
#include "core/infer/Activations.h"

#include <algorithm>
#include <stdexcept>

#include "core/backend/BackendRegistry.h"
#include "core/graph/Model.h"

namespace strata {

namespace {

// "the model's nodes: input, conv1, ..." for an error about a node it lacks (the first few).
std::string nodeList(const Graph& g) {
    std::string s;
    int n = 0;
    for (const Node* node : g.nodes()) {
        if (n == 8) return s + ", ...";
        s += (n++ == 0 ? "" : ", ") + node->name;
    }
    return s;
}

std::string notInModel(const std::string& node, const Graph& g) {
    return "node '" + node + "' is not in the model (its nodes: " + nodeList(g) +
           "); a node added after training has no trained output: train the project again";
}

}  // namespace

ActivationProbe::ActivationProbe(const ExportModel& model) : m_backend(backendRegistry().create(Device::cpu())) {
    // Unfused, so no layer's output is overwritten by a ReLU run inside it, and in NCHW (no blocked layout).
    m_model = compile(model.project.graph, *m_backend, 0, false, false);
    applyWeights(*m_model, model.weights);
    m_model->freezeWeights();
}

ActivationProbe::~ActivationProbe() = default;

const Shape& ActivationProbe::inputShape() const { return m_model->inputShape(); }

const Graph& ActivationProbe::graph() const { return m_model->graph(); }

const Node& ActivationProbe::node(const std::string& name) const {
    const Node* n = m_model->graph().nodeByName(name);
    if (!n) throw std::invalid_argument(notInModel(name, m_model->graph()));
    return *n;
}

std::vector<float> ActivationProbe::outputOf(int id, const float* inputs, int64_t batch, Shape* perSample) const {
    const Tensor* t = m_model->nodeOutput(id);
    if (!t) {  // the Input node: no output buffer of its own, its output is the samples
        *perSample = m_model->inputShape();
        return {inputs, inputs + batch * perSample->numel()};
    }
    // The buffers may hold more rows than this batch (the model's capacity): the first `batch` are this one's.
    const std::vector<int64_t>& dims = t->shape().dims();
    *perSample = Shape(std::vector<int64_t>(dims.begin() + 1, dims.end()));
    std::vector<float> host(static_cast<size_t>(t->numel()));
    m_backend->toHost(*t, host.data());
    host.resize(static_cast<size_t>(batch * perSample->numel()));
    return host;
}

std::vector<NodeActivation> ActivationProbe::capture(const float* input, const std::vector<std::string>& nodes) {
    std::vector<int> ids;
    for (const std::string& n : nodes) ids.push_back(node(n).id);
    const Tensor x = m_backend->fromHost(m_model->inputShape().withBatch(1), input);
    m_model->forward(x, false);
    std::vector<NodeActivation> out;
    for (size_t i = 0; i < ids.size(); ++i) {
        NodeActivation a;
        a.node = nodes[i];
        a.values = outputOf(ids[i], input, 1, &a.shape);
        out.push_back(std::move(a));
    }
    return out;
}

NodeActivation ActivationProbe::captureOne(const float* input, const std::string& node) {
    return std::move(capture(input, std::vector<std::string>{node}).front());
}

NodeHistogram ActivationProbe::histogram(const float* inputs, int64_t count, const std::string& node, int bins,
                                         int batchSize, int64_t maxValues) {
    const int id = this->node(node).id;
    if (count < 1 || batchSize < 1)
        throw std::invalid_argument("the histogram of node '" + node + "' needs at least one sample and a batch of 1");
    const int64_t per = m_model->inputShape().numel();
    NodeHistogram h;
    std::vector<float> values;
    // One sample first, to learn the output's size; then batches that stay within maxValues.
    int64_t batch = 1;
    while (h.samples < count) {
        const float* x = inputs + h.samples * per;
        m_model->forward(m_backend->fromHost(m_model->inputShape().withBatch(batch), x), false);
        const std::vector<float> v = outputOf(id, x, batch, &h.shape);
        values.insert(values.end(), v.begin(), v.end());
        h.samples += batch;
        const int64_t room = (maxValues - static_cast<int64_t>(values.size())) / std::max<int64_t>(1, h.shape.numel());
        batch = std::min({static_cast<int64_t>(batchSize), count - h.samples, room});
        if (batch < 1) break;
    }
    h.values = histogramOf(values.data(), static_cast<int64_t>(values.size()), bins);
    return h;
}

void ActivationProbe::setInterruptFlag(const std::atomic<bool>* flag) { m_model->setInterruptFlag(flag); }

ConvFilters convFilters(const ExportModel& model, const std::string& node) {
    const Graph& g = model.project.graph;
    const Node* n = g.nodeByName(node);
    if (!n) throw std::invalid_argument(notInModel(node, g));
    if (n->type != "Conv2D")
        throw std::invalid_argument("node '" + node + "' is a " + n->type +
                                    ", not a Conv2D: only a Conv2D's filters are images to show");
    const std::string name = node + ".weight";
    Shape shape;
    for (const ExportParameter& p : exportParameters(g))
        if (p.name == name) shape = p.shape;
    const auto w = model.weights.find(name);
    if (w == model.weights.end() || shape.rank() != 4)
        throw std::invalid_argument("node '" + node + "' has no weights in the model (no tensor '" + name +
                                    "'); load a checkpoint or export of this project");
    if (static_cast<int64_t>(w->second.size()) != shape.numel())
        throw std::invalid_argument("node '" + node + "' has " + std::to_string(w->second.size()) +
                                    " weights in the model, its shape " + shape.toString() + " needs " +
                                    std::to_string(shape.numel()) + "; the model file does not fit its project");
    ConvFilters f;
    f.node = node;
    f.out = shape[0];
    f.in = shape[1];
    f.kh = shape[2];
    f.kw = shape[3];
    f.values = w->second;
    const int64_t per = f.in * f.kh * f.kw;
    for (int64_t k = 0; k < f.out; ++k) {
        const auto [lo, hi] = std::minmax_element(f.filter(k), f.filter(k) + per);
        f.min.push_back(*lo);
        f.max.push_back(*hi);
    }
    return f;
}

std::vector<float> filterMeanOverInputs(const ConvFilters& filters, int64_t k) {
    if (k < 0 || k >= filters.out)
        throw std::out_of_range("filter " + std::to_string(k) + " of node '" + filters.node + "', which has " +
                                std::to_string(filters.out));
    const int64_t plane = filters.kh * filters.kw;
    std::vector<double> sum(static_cast<size_t>(plane), 0.0);
    const float* w = filters.filter(k);
    for (int64_t c = 0; c < filters.in; ++c)
        for (int64_t i = 0; i < plane; ++i) sum[static_cast<size_t>(i)] += w[c * plane + i];
    std::vector<float> mean(static_cast<size_t>(plane));
    for (size_t i = 0; i < mean.size(); ++i) mean[i] = static_cast<float>(sum[i] / static_cast<double>(filters.in));
    return mean;
}

}  // namespace strata
