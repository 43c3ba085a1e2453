// Model: compile a Graph for a Backend and run it forward and backward.
#include "core/graph/Model.h"

#include <algorithm>
#include <cmath>
#include <new>
#include <random>
#include <string>

#include "core/layers/LayerRegistry.h"

namespace strata {

struct Model::Step {
    int node = -1;
    const LayerType* type = nullptr;
    std::unique_ptr<Layer> layer;
    bool isInput = false;
    Shape outShape;                       // per sample
    std::vector<int> inputs;              // indices into m_steps, in port order
    bool needsGrad = false;               // some trainable parameter at or before this step
    bool frozenStatistics = false;        // a frozen normalization: runs as at inference, even in training
    int fusedFrom = -1;                   // a ReLU computed by this step of m_steps: output shares its memory
    bool reluAbsorbed = false;            // a ReLU whose backward its single consumer does (no grad of its own)
    int reluBackwardFrom = -1;            // its fused ReLU (index), whose backward this step does with its own
    bool reluBackwardInProducer = false;  // a fused ReLU whose backward its producer does (reluBackwardFrom)
    uint32_t overwriteInputs = 0;         // bit k: its backward writes input k's gradient (LayerContext)
    bool gradOverwritten = false;         // its gradient is written by its first writer in backward: not zeroed
    int block = 0;                        // its output's (and gradient's) layout: 0 NCHW, else blocked by it
    Tensor outputStorage, gradStorage;    // capacity for m_capacity samples
    Tensor output, grad;                  // views for the current batch
};

Model::~Model() = default;

void Model::freezeWeights() {
    // Ids are never reused, so a backend's copy for one model can never stand in for another's weights.
    static std::atomic<uint64_t> nextId{1};
    m_frozenWeights = nextId.fetch_add(m_steps.size() + 1);
}

namespace {

std::string layerPrefix(const Graph& graph, int node, const char* what) {
    const Node* n = graph.node(node);
    return "layer '" + (n ? n->name : std::to_string(node)) + "' (" + (n ? n->type : std::string("?")) + ") " + what +
           ": ";
}

void initParameter(Backend& backend, Parameter& p, const ParameterSpec& spec, std::mt19937_64& rng) {
    std::vector<float> host(static_cast<size_t>(spec.shape.numel()));
    switch (spec.init) {
        case Init::Zeros: std::fill(host.begin(), host.end(), 0.0f); break;
        case Init::Ones: std::fill(host.begin(), host.end(), 1.0f); break;
        case Init::HeUniform:
        case Init::XavierUniform: {
            const double bound =
                spec.init == Init::HeUniform
                    ? std::sqrt(6.0 / static_cast<double>(std::max<int64_t>(1, spec.fanIn)))
                    : std::sqrt(6.0 / static_cast<double>(std::max<int64_t>(1, spec.fanIn + spec.fanOut)));
            std::uniform_real_distribution<double> dist(-bound, bound);
            for (auto& v : host) v = static_cast<float>(dist(rng));
            break;
        }
        case Init::Normal: {
            std::normal_distribution<double> dist(0.0, spec.std);
            for (auto& v : host) v = static_cast<float>(dist(rng));
            break;
        }
    }
    p.name = spec.name;
    p.trainable = spec.trainable;
    p.value = backend.fromHost(spec.shape, host.data());
    if (spec.trainable) p.grad = backend.zeros(spec.shape);
}

// Runs `f`, which works for one layer, so that a backend error (out of memory above all) names that layer:
// "layer 'conv1' (Conv2D) forward: cuda:0: out of memory allocating 123 bytes ...". The byte count of an
// OutOfMemoryError is kept.
template <class F>
void forLayer(const Graph& graph, int node, const char* what, F&& f) {
    try {
        f();
    } catch (const OutOfMemoryError& e) {
        throw OutOfMemoryError(layerPrefix(graph, node, what) + e.what(), e.bytes());
    } catch (const BackendError& e) {
        throw BackendError(layerPrefix(graph, node, what) + e.what());
    } catch (const std::bad_alloc&) {
        // A host allocation of the layer's own (a std::vector, a library's buffer): reported as the backend's
        // out of memory is, so the Trainer adds the batch that fits (issue 17).
        throw OutOfMemoryError(layerPrefix(graph, node, what) + "out of host memory (std::bad_alloc)", 0);
    }
}

// Tensors packed into one block (parameters, activation gradients) start on 64-element boundaries:
// 256 bytes, what cuBLAS/cuDNN and AVX-512 like.
int64_t alignUp(int64_t elements) {
    constexpr int64_t kAlign = 64;
    return (elements + kAlign - 1) / kAlign * kAlign;
}

// A view of the first `batch` samples of a tensor allocated for more.
Tensor batchView(const Tensor& storage, const Shape& perSample, int64_t batch) {
    return storage.view(perSample.withBatch(batch));
}

}  // namespace

std::unique_ptr<Model> compile(const Graph& graph, Backend& backend, uint64_t seed, bool fuse, bool blockedLayout) {
    const GraphAnalysis analysis = analyzeGraph(graph);
    if (!analysis.ok()) {
        const Problem& p = analysis.problems.front();
        throw GraphError(p.node, p.port, p.message);
    }
    std::unique_ptr<Model> model(new Model());
    model->m_backend = &backend;
    model->m_graph = graph;

    const std::vector<int> order = graph.topologicalOrder();
    std::map<int, int> stepOf;
    std::mt19937_64 rng(seed ^ 0x5EEDC0DEull);
    std::vector<int> consumers(order.size(), 0);

    for (int id : order) {
        const Node* node = graph.node(id);
        auto step = std::make_unique<Model::Step>();
        step->node = id;
        step->type = layerRegistry().find(node->type);
        const Json& params = analysis.params.at(id);
        std::vector<Shape> inShapes;
        for (const std::string& port : step->type->inputPorts(params)) {
            const auto edge = graph.edgeInto({id, port});
            if (!edge) throw GraphError(id, port, node->name + ": input '" + port + "' is not connected");
            const int producer = stepOf.at(edge->from.node);
            step->inputs.push_back(producer);
            consumers[static_cast<size_t>(producer)]++;
            inShapes.push_back(*analysis.shapeOf(edge->from.node));
        }
        step->outShape = *analysis.shapeOf(id);
        step->isInput = step->inputs.empty();
        step->layer = step->type->create(params, inShapes, step->outShape);
        bool trainable = false;
        for (ParameterSpec spec : step->type->parameterSpecs(params, inShapes)) {
            // A frozen node's weights become state: no gradient tensor, not packed, so the optimizer never
            // sees them and the layer's backward skips their gradient (gradOf is null). Its initial values
            // draw from rng as a trainable node's would, so freezing changes no other node's weights.
            const bool frozen = !node->trainable && spec.trainable;
            if (frozen) spec.trainable = false;
            Parameter p;
            forLayer(graph, id, ("parameter " + spec.name).c_str(), [&] { initParameter(backend, p, spec, rng); });
            p.frozen = frozen;
            trainable = trainable || spec.trainable;
            step->layer->parameters().push_back(std::move(p));
        }
        // A frozen BatchNorm normalizes with its running statistics and leaves them as they are (as Keras does
        // for a non-trainable BatchNormalization): a frozen backbone then computes what it computed where it
        // was trained, whatever the new data's batches hold.
        step->frozenStatistics = !node->trainable && step->type->foldableNormalization();
        // Nothing at or before this step learns: backward skips it whole, its input gradient too.
        step->needsGrad = trainable;
        for (int in : step->inputs)
            step->needsGrad = step->needsGrad || model->m_steps[static_cast<size_t>(in)]->needsGrad;
        if (step->isInput) model->m_inputShape = step->outShape;
        stepOf[id] = static_cast<int>(model->m_steps.size());
        model->m_steps.push_back(std::move(step));
    }
    model->m_outputShape = model->m_steps.back()->outShape;
    if (fuse) {
        for (auto& step : model->m_steps) {
            if (step->isInput || step->inputs.size() != 1 || step->type->activation() != Activation::ReLU) continue;
            const int producer = step->inputs[0];
            Model::Step& from = *model->m_steps[static_cast<size_t>(producer)];
            if (from.isInput || consumers[static_cast<size_t>(producer)] != 1) continue;
            if (from.layer->fuseReLU()) step->fusedFrom = producer;
        }
        for (auto& step : model->m_steps) {
            if (step->isInput || step->inputs.size() != 1) continue;
            const int reluIndex = step->inputs[0];
            Model::Step& relu = *model->m_steps[static_cast<size_t>(reluIndex)];
            if (relu.isInput || relu.type->activation() != Activation::ReLU ||
                consumers[static_cast<size_t>(reluIndex)] != 1)
                continue;
            if (step->layer->absorbReLUBackward()) relu.reluAbsorbed = true;
        }
        // A fused ReLU whose backward no consumer took: its producer may do it (never the last step's, whose
        // gradient is backward's argument).
        for (size_t i = 0; i + 1 < model->m_steps.size(); ++i) {
            Model::Step& relu = *model->m_steps[i];
            if (relu.fusedFrom < 0 || relu.reluAbsorbed) continue;
            Model::Step& from = *model->m_steps[static_cast<size_t>(relu.fusedFrom)];
            if (!from.needsGrad || !from.layer->absorbFusedReLUBackward()) continue;
            relu.reluBackwardInProducer = true;
            from.reluBackwardFrom = static_cast<int>(i);
        }
        // A gradient whose first writer in the backward pass (its last consumer in topological order) can write it
        // instead of adding to it, on one port: neither zeroed nor read first; later writers add to it.
        for (size_t t = 0; t + 1 < model->m_steps.size(); ++t) {
            Model::Step& grad = *model->m_steps[t];
            if (grad.isInput || !Model::hasOwnGrad(grad)) continue;
            for (size_t w = model->m_steps.size(); w-- > t + 1;) {
                Model::Step& writer = *model->m_steps[w];
                const std::vector<int> ports = model->portsWriting(writer, static_cast<int>(t));
                if (ports.empty()) continue;
                if (ports.size() == 1 && ports[0] < 32 && writer.layer->overwritesInputGradient()) {
                    writer.overwriteInputs |= 1u << ports[0];
                    grad.gradOverwritten = true;
                }
                break;
            }
        }
        if (blockedLayout && backend.activationBlock() > 0) model->chooseLayouts(backend.activationBlock());
    }
    model->packParameters();
    return model;
}

// Tensors that must share a layout (an element-wise step's inputs and output; a fused ReLU's output is its
// producer's memory, and the ReLU is element-wise) form groups; a group is blocked when every member can be:
// a [C, H, W] output with C divisible by the block, made by a layer that takes blocked tensors, read only by
// such layers, and not the model's output (the loss reads that).
void Model::chooseLayouts(int block) {
    const size_t count = m_steps.size();
    std::vector<size_t> parent(count);
    for (size_t i = 0; i < count; ++i) parent[i] = i;
    const auto root = [&](size_t i) {
        while (parent[i] != i) i = parent[i] = parent[parent[i]];
        return i;
    };
    const auto rule = [](const Step& s) { return s.isInput ? Layer::LayoutRule::NchwOnly : s.layer->layoutRule(); };
    std::vector<bool> can(count);
    for (size_t i = 0; i < count; ++i) {
        const Step& s = *m_steps[i];
        can[i] = rule(s) != Layer::LayoutRule::NchwOnly && i + 1 < count && s.outShape.rank() == 3 &&
                 s.outShape[0] % block == 0;
        if (rule(s) == Layer::LayoutRule::Elementwise)
            for (int in : s.inputs) parent[root(static_cast<size_t>(in))] = root(i);
    }
    for (const auto& s : m_steps)
        if (rule(*s) == Layer::LayoutRule::NchwOnly)
            for (int in : s->inputs) can[static_cast<size_t>(in)] = false;
    std::vector<bool> groupCan(count, true);
    for (size_t i = 0; i < count; ++i)
        if (!can[i]) groupCan[root(i)] = false;
    for (size_t i = 0; i < count; ++i) m_steps[i]->block = groupCan[root(i)] ? block : 0;
    for (auto& s : m_steps) {
        if (rule(*s) == Layer::LayoutRule::NchwOnly) continue;
        std::vector<int> inputs;
        for (int in : s->inputs) inputs.push_back(m_steps[static_cast<size_t>(in)]->block);
        s->layer->setLayouts(inputs, s->block);
    }
}

void Model::allocateFor(int64_t batch) {
    if (batch <= m_capacity) {
        if (batch == m_batch) return;
    } else {
        // Everything is allocated before anything is replaced, so a failure (out of memory, naming the
        // layer) leaves the model as it was, usable at its old capacity.
        // The activation gradients that backward zeroes each step share one block, so that is one call.
        // (The last step's gradient is backward's dOutput argument, never zeroed: it stays apart.)
        auto zeroedGrad = [&](const Step& s) {
            return hasOwnGrad(s) && !s.gradOverwritten && &s != m_steps.back().get();
        };
        std::vector<Tensor> outputs(m_steps.size()), grads(m_steps.size());
        int64_t total = 0, largest = 0;
        const Step* largestStep = nullptr;
        for (size_t i = 0; i < m_steps.size(); ++i) {
            Step& s = *m_steps[i];
            if (s.isInput) continue;
            if (s.fusedFrom < 0)
                forLayer(m_graph, s.node, "output",
                         [&] { outputs[i] = m_backend->empty(s.outShape.withBatch(batch)); });
            if (zeroedGrad(s)) {
                const int64_t n = s.outShape.numel() * batch;
                total = alignUp(total) + n;
                if (n > largest) largest = n, largestStep = &s;
            } else if (hasOwnGrad(s)) {
                forLayer(m_graph, s.node, "output gradient",
                         [&] { grads[i] = m_backend->empty(s.outShape.withBatch(batch)); });
            }
        }
        Tensor block;
        if (total > 0) {
            try {
                block = m_backend->empty(Shape{total});
            } catch (const OutOfMemoryError& e) {
                throw OutOfMemoryError("the activation gradients for batch " + std::to_string(batch) +
                                           " (the largest: " + layerPrefix(m_graph, largestStep->node, "output") +
                                           std::to_string(largest * 4) + " bytes): " + e.what(),
                                       e.bytes());
            } catch (const std::bad_alloc&) {
                throw OutOfMemoryError("the activation gradients for batch " + std::to_string(batch) +
                                           " (the largest: " + layerPrefix(m_graph, largestStep->node, "output") +
                                           std::to_string(largest * 4) + " bytes): out of host memory",
                                       0);
            }
        }
        m_capacity = batch;
        m_activationGrads = block;
        int64_t offset = 0;
        for (size_t i = 0; i < m_steps.size(); ++i) {
            Step& s = *m_steps[i];
            if (s.isInput) continue;
            s.outputStorage = s.fusedFrom >= 0 ? outputs[static_cast<size_t>(s.fusedFrom)] : outputs[i];
            if (zeroedGrad(s)) {
                offset = alignUp(offset);
                s.gradStorage = m_activationGrads.slice(offset, s.outShape.withBatch(batch));
                offset += s.outShape.numel() * batch;
            } else if (hasOwnGrad(s)) {
                s.gradStorage = grads[i];
            }
        }
    }
    m_batch = batch;
    for (auto& s : m_steps) {
        if (s->isInput) continue;
        s->output = batchView(s->outputStorage, s->outShape, batch);
        if (hasOwnGrad(*s)) s->grad = batchView(s->gradStorage, s->outShape, batch);
    }
}

const Tensor& Model::forward(const Tensor& input, bool training, uint64_t seed, int64_t firstSample) {
    if (input.shape().rank() != m_inputShape.rank() + 1 || input.shape().dropFirst() != m_inputShape)
        throw std::invalid_argument("model input must be [N, " + m_inputShape.toString().substr(1) + ", got " +
                                    input.shape().toString());
    const int64_t batch = input.shape()[0];
    allocateFor(batch);
    m_lastTraining = training;
    m_lastSeed = seed;
    m_lastFirstSample = firstSample;
    std::vector<const Tensor*> ins;
    for (auto& s : m_steps) {
        if (s->isInput) {
            s->output = input;
            continue;
        }
        if (s->fusedFrom >= 0) continue;  // the producer already wrote the ReLU's output
        if (m_interrupt && m_interrupt->load(std::memory_order_relaxed)) throw ModelInterrupted();
        ins.clear();
        for (int i : s->inputs) ins.push_back(&m_steps[static_cast<size_t>(i)]->output);
        LayerContext ctx{*m_backend, training && !s->frozenStatistics,
                         seed ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(s->node)), firstSample, m_replicas};
        if (m_frozenWeights != 0) ctx.weightsVersion = m_frozenWeights + static_cast<uint64_t>(&s - m_steps.data());
        if (m_innerHook) {
            ctx.innerHook = &m_innerHook;
            ctx.node = s->node;
        }
        if (m_layerHook) m_layerHook(s->node, false, true);
        forLayer(m_graph, s->node, "forward", [&] { s->layer->forward(ctx, ins, s->output); });
        if (m_layerHook) m_layerHook(s->node, false, false);
        if (m_forwardHook) m_forwardHook(s->node, s->output);
    }
    return m_steps.back()->output;
}

void Model::backward(const Tensor& dOutput) {
    Step& last = *m_steps.back();
    if (dOutput.shape() != last.output.shape())
        throw std::invalid_argument("output gradient must be " + last.output.shape().toString() + ", got " +
                                    dOutput.shape().toString());
    // Every gradient but the last step's accumulates from zero (the block holds them all).
    if (m_activationGrads.defined()) m_backend->zero(m_activationGrads.raw(), m_activationGrads.bytes());
    std::vector<const Tensor*> ins;
    std::vector<Tensor*> dins;
    for (auto it = m_steps.rbegin(); it != m_steps.rend(); ++it) {
        Step& s = **it;
        if (s.isInput || !s.needsGrad || s.reluAbsorbed || s.reluBackwardInProducer) continue;
        if (m_interrupt && m_interrupt->load(std::memory_order_relaxed)) throw ModelInterrupted();
        ins.clear();
        dins.clear();
        for (size_t k = 0; k < s.inputs.size(); ++k) {
            Step& in = *m_steps[static_cast<size_t>(s.inputs[k])];
            ins.push_back(&in.output);
            // An absorbed ReLU's backward is done here: its input's gradient is the target.
            Step& target = in.reluAbsorbed ? *m_steps[static_cast<size_t>(in.inputs[0])] : in;
            const bool wanted = target.needsGrad && s.type->inputDifferentiable(static_cast<int>(k));
            dins.push_back(wanted ? &target.grad : nullptr);
        }
        LayerContext ctx{*m_backend,
                         m_lastTraining && !s.frozenStatistics,
                         m_lastSeed ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(s.node)),
                         m_lastFirstSample,
                         m_replicas,
                         s.overwriteInputs};
        if (m_layerHook) m_layerHook(s.node, true, true);
        forLayer(m_graph, s.node, "backward",
                 [&] { s.layer->backward(ctx, ins, s.output, outputGrad(s, dOutput), dins); });
        if (m_layerHook) m_layerHook(s.node, true, false);
        gradientsReadyAfter(s);
    }
}

void Model::gradientsReadyAfter(const Step& s) {
    if (!m_gradientsReady) return;
    int64_t from = -1;
    for (const Parameter& p : s.layer->parameters())
        if (p.trainable && p.grad.defined()) {
            const int64_t o = packedOffset(p);
            if (o >= 0 && (from < 0 || o < from)) from = o;
        }
    if (from >= 0) m_gradientsReady(from);
}

void Model::idleStep(uint64_t seed) {
    m_lastTraining = true;
    m_lastSeed = seed;
    m_lastFirstSample = 0;
    for (auto& s : m_steps) {
        if (s->isInput || s->fusedFrom >= 0) continue;
        if (m_interrupt && m_interrupt->load(std::memory_order_relaxed)) throw ModelInterrupted();
        LayerContext ctx{*m_backend, !s->frozenStatistics,
                         seed ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(s->node)), 0, m_replicas};
        forLayer(m_graph, s->node, "forward", [&] { s->layer->idleForward(ctx); });
    }
    for (auto it = m_steps.rbegin(); it != m_steps.rend(); ++it) {
        Step& s = **it;
        if (s.isInput || !s.needsGrad || s.reluAbsorbed || s.reluBackwardInProducer) continue;
        if (m_interrupt && m_interrupt->load(std::memory_order_relaxed)) throw ModelInterrupted();
        LayerContext ctx{*m_backend, !s.frozenStatistics,
                         seed ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(s.node)), 0, m_replicas};
        forLayer(m_graph, s.node, "backward", [&] { s.layer->idleBackward(ctx); });
        gradientsReadyAfter(s);
    }
}

void Model::zeroGrad() {
    if (m_packedGrads.defined()) m_backend->zero(m_packedGrads.raw(), m_packedGrads.bytes());
}

// Moves every trainable parameter into one value block and one gradient block (see packedValues).
void Model::packParameters() {
    std::vector<Parameter*> params;
    int64_t total = 0;
    for (auto& s : m_steps)
        for (Parameter& p : s->layer->parameters())
            if (p.trainable && p.grad.defined()) {
                params.push_back(&p);
                total = alignUp(total) + p.value.numel();
            }
    if (params.empty()) return;
    try {
        m_packedValues = m_backend->zeros(Shape{total});
        m_packedGrads = m_backend->zeros(Shape{total});
    } catch (const OutOfMemoryError& e) {
        throw OutOfMemoryError("the " + std::to_string(params.size()) + " trainable parameters (" +
                                   std::to_string(total) + " values and their gradients): " + e.what(),
                               e.bytes());
    }
    int64_t offset = 0;
    for (Parameter* p : params) {
        offset = alignUp(offset);
        Tensor value = m_packedValues.slice(offset, p->value.shape());
        m_backend->copy(value.raw(), p->value.raw(), p->value.bytes());
        p->value = value;
        p->grad = m_packedGrads.slice(offset, p->grad.shape());
        m_packedOffsets.emplace_back(p, offset);
        offset += p->value.numel();
    }
}

int64_t Model::packedOffset(const Parameter& p) const {
    for (const auto& [param, offset] : m_packedOffsets)
        if (param == &p) return offset;
    return -1;
}

std::vector<Model::NamedParameter> Model::namedParameters() {
    std::vector<NamedParameter> out;
    for (auto& s : m_steps) {
        const std::string& nodeName = m_graph.node(s->node)->name;
        for (Parameter& p : s->layer->parameters()) out.push_back({nodeName + "." + p.name, s->node, &p});
    }
    return out;
}

int64_t Model::frozenParameterCount() const {
    int64_t n = 0;
    for (const auto& s : m_steps)
        for (const Parameter& p : s->layer->parameters())
            if (p.frozen) n += p.value.numel();
    return n;
}

int64_t Model::parameterCount() const {
    int64_t n = 0;
    for (const auto& s : m_steps)
        for (const Parameter& p : s->layer->parameters())
            if (p.trainable) n += p.value.numel();
    return n;
}

const Tensor* Model::nodeOutput(int node) const {
    for (const auto& s : m_steps)
        if (s->node == node) return s->output.defined() ? &s->output : nullptr;
    return nullptr;
}

const Tensor* Model::nodeGradient(int node) const {
    for (const auto& s : m_steps)
        if (s->node == node) {
            const bool own = !s->isInput && hasOwnGrad(*s) && s.get() != m_steps.back().get();
            return own && s->grad.defined() ? &s->grad : nullptr;
        }
    return nullptr;
}

const Tensor* Model::attentionWeights(int node) const {
    for (const auto& s : m_steps)
        if (s->node == node && s->layer) return s->layer->attentionWeights();
    return nullptr;
}

namespace {

// How many of a model's steps a predicate holds for.
template <class Steps, class Pred>
int countSteps(const Steps& steps, Pred pred) {
    return static_cast<int>(std::count_if(steps.begin(), steps.end(), [&](const auto& s) { return pred(*s); }));
}

}  // namespace

int Model::fusedReLUCount() const {
    return countSteps(m_steps, [](const Step& s) { return s.fusedFrom >= 0; });
}

int Model::absorbedReLUCount() const {
    return countSteps(m_steps, [](const Step& s) { return s.reluAbsorbed; });
}

int Model::reluBackwardsInProducers() const {
    return countSteps(m_steps, [](const Step& s) { return s.reluBackwardInProducer; });
}

int Model::backwardLayerCount() const {
    return countSteps(m_steps, [](const Step& s) {
        return !s.isInput && s.needsGrad && !s.reluAbsorbed && !s.reluBackwardInProducer;
    });
}

int Model::overwrittenGradCount() const {
    return countSteps(m_steps, [](const Step& s) { return s.gradOverwritten; });
}

int Model::blockedOutputCount() const {
    return countSteps(m_steps, [](const Step& s) { return s.block > 0; });
}

int Model::outputBlock(int node) const {
    for (const auto& s : m_steps)
        if (s->node == node) return s->block;
    return 0;
}

std::vector<int> Model::portsWriting(const Step& s, int target) const {
    std::vector<int> ports;
    if (s.isInput || !s.needsGrad || s.reluAbsorbed || s.reluBackwardInProducer) return ports;  // no backward
    for (size_t k = 0; k < s.inputs.size(); ++k) {
        const Step& in = *m_steps[static_cast<size_t>(s.inputs[k])];
        // An absorbed ReLU's backward is done by its consumer: the gradient written is its input's.
        const int written = in.reluAbsorbed ? in.inputs[0] : s.inputs[k];
        const Step& w = *m_steps[static_cast<size_t>(written)];
        if (written == target && w.needsGrad && s.type->inputDifferentiable(static_cast<int>(k)))
            ports.push_back(static_cast<int>(k));
    }
    return ports;
}

bool Model::hasOwnGrad(const Step& s) { return s.needsGrad && !s.reluAbsorbed && s.reluBackwardFrom < 0; }

const Tensor& Model::outputGrad(const Step& s, const Tensor& dOutput) const {
    if (s.reluBackwardFrom >= 0) return m_steps[static_cast<size_t>(s.reluBackwardFrom)]->grad;
    return &s == m_steps.back().get() ? dOutput : s.grad;
}

int Model::firstNonFiniteNode() const {
    for (const auto& s : m_steps)
        if (s->output.defined() && !m_backend->allFinite(s->output.f32(), s->output.numel())) return s->node;
    return -1;
}

std::vector<int> Model::order() const {
    std::vector<int> ids;
    for (const auto& s : m_steps) ids.push_back(s->node);
    return ids;
}

}  // namespace strata
