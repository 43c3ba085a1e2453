// Model: a Graph compiled for one Backend. Layers in topological order with
// their parameters allocated and initialized (seeded), activations and
// gradients allocated per batch size. One Input node, one output node.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/graph/Graph.h"

namespace strata {

// Thrown by Model::forward and backward when the interrupt flag was raised (setInterruptFlag): the pass
// ended between two layers, its results are partial and must not be used.
struct ModelInterrupted : std::runtime_error {
    ModelInterrupted() : std::runtime_error("interrupted between layers") {}
};

class Model {
public:
    ~Model();
    Model(const Model&) = delete;
    Model& operator=(const Model&) = delete;

    Backend& backend() const { return *m_backend; }
    const Graph& graph() const { return m_graph; }
    const Shape& inputShape() const { return m_inputShape; }    // per sample
    const Shape& outputShape() const { return m_outputShape; }  // per sample

    // Runs every layer on a batched input [N, ...inputShape] in backend memory.
    // `seed` makes dropout masks reproducible (the Trainer passes one per step).
    // `firstSample`: data parallel, where this batch starts in the global batch (LayerContext::firstSample).
    const Tensor& forward(const Tensor& input, bool training, uint64_t seed = 0, int64_t firstSample = 0);
    // Backpropagates dOutput [N, ...outputShape] through the last forward; accumulates parameter grads.
    void backward(const Tensor& dOutput);
    void zeroGrad();

    // Data parallel: the cross-replica sum layers use in training (BatchNorm's global statistics), or null
    // (the default: the batch is the whole batch). Must outlive the model or be reset first.
    void setReplicaSum(ReplicaSum* sum) { m_replicas = sum; }
    // Data parallel, a replica with no sample in this step's global batch: stands in for forward(training)
    // and backward, joining every collective the other replicas' layers make, in the same order, and
    // calling the gradients-ready hook as backward would. Gradients are left as they are (zeroGrad first).
    void idleStep(uint64_t seed);

    // Called during backward after each layer with trainable parameters has written its gradients, with
    // the packed offset (elements) from which every gradient is now final: parameters are packed in
    // topological order and backward runs in reverse, so [from, packedGradients().numel()) is done. The
    // data-parallel Trainer starts a bucket's all-reduce there, while backward goes on.
    using GradientsReadyHook = std::function<void(int64_t from)>;
    void setGradientsReadyHook(GradientsReadyHook hook) { m_gradientsReady = std::move(hook); }

    // Called by forward after each layer (not the Input) with its node id and batched output, which the
    // hook may change in place: activation ranges for int8 calibration, simulated quantization. Compile
    // with fuse = false so every layer's own output is seen (a fused ReLU's producer shows the ReLU's).
    using ForwardHook = std::function<void(int node, Tensor& output)>;
    void setForwardHook(ForwardHook hook) { m_forwardHook = std::move(hook); }
    // Called by forward with each tensor inside a layer that LayerType::int8InnerTensors names (the attention's
    // Q, K, V, softmax weights and heads' context), by node id and tensor name, which the hook may change in place as
    // the forward hook may.
    void setInnerHook(InnerTensorHook hook) { m_innerHook = std::move(hook); }
    // Called just before (begin = true) and just after each layer's forward or backward call, with its node
    // id: the per-layer profile (core/train/Profile) times layers through it. A fused ReLU has no call of
    // its own (its work is timed with its producer's), nor has an absorbed ReLU's backward.
    using LayerHook = std::function<void(int node, bool backward, bool begin)>;
    void setLayerHook(LayerHook hook) { m_layerHook = std::move(hook); }

    // A flag (the Trainer's stop request) that forward and backward check before each layer: when it is
    // set they throw ModelInterrupted, so a stop takes effect within one layer even inside a long step.
    // Null: never interrupted. The flag must outlive the model or be reset first.
    void setInterruptFlag(const std::atomic<bool>* flag) { m_interrupt = flag; }

    // Every parameter and state tensor, named "<node name>.<param>" (e.g. "conv1.weight").
    struct NamedParameter {
        std::string name;
        int node;
        Parameter* param;
    };
    std::vector<NamedParameter> namedParameters();
    int64_t parameterCount() const;        // trainable scalars
    int64_t frozenParameterCount() const;  // scalars of frozen nodes' weights (Node::trainable)
    // Layers whose backward runs: a layer with nothing trainable at or before it has none.
    int backwardLayerCount() const;

    // Inference: the caller promises that the parameters keep their values until thawWeights() or the next
    // freezeWeights() (call it again after changing them; applyWeights does for a frozen model). Layers may
    // then let the backend keep copies it prepared from them (ConvDesc::weightsVersion: oneDNN's reordered
    // convolution weights), once per model instead of once per forward. Each call takes fresh ids.
    void freezeWeights();
    void thawWeights() { m_frozenWeights = 0; }
    bool weightsFrozen() const { return m_frozenWeights != 0; }

    // Every trainable parameter's value and gradient lives in one block each (packed by compile), each
    // tensor starting on a 64-element boundary with zeros between them: one zeroGrad, one optimizer
    // update and one gradient norm cover them all. Undefined when there is no trainable parameter.
    const Tensor& packedValues() const { return m_packedValues; }
    const Tensor& packedGradients() const { return m_packedGrads; }
    // Where a trainable parameter starts in the packed blocks (elements), or -1.
    int64_t packedOffset(const Parameter& p) const;

    // Output of a node from the last forward (for the NaN report and the GUI). A layer fused with the
    // ReLU after it (see compile) shows the ReLU's output.
    const Tensor* nodeOutput(int node) const;
    // Gradient of the loss (of backward's dOutput) w.r.t. a node's output, from the last backward: saliency
    // (core/infer/Saliency) reads it. Null for the Input, the output node (its gradient is dOutput), a node
    // backward does not reach (nothing trainable at or before it) and one with no gradient of its own (a ReLU
    // whose backward another layer does: compile with fuse = false to have every layer's).
    const Tensor* nodeGradient(int node) const;
    // A node's attention weights from the last forward (Layer::attentionWeights), or null.
    const Tensor* attentionWeights(int node) const;
    // ReLUs whose forward runs inside the layer before them, ReLUs whose backward runs inside the max
    // pooling after them, and fused ReLUs whose backward runs inside the layer before them (compile's fusion).
    int fusedReLUCount() const;
    int absorbedReLUCount() const;
    int reluBackwardsInProducers() const;
    // Activation gradients written by their first writer in backward (Layer::overwritesInputGradient), not zeroed.
    int overwrittenGradCount() const;
    // Layers whose output (and its gradient) is stored blocked (compile's layout pass), and a node's block
    // (0: NCHW; nodeOutput is then in that order: Layer::LayoutRule).
    int blockedOutputCount() const;
    int outputBlock(int node) const;
    // The node whose output is first non-finite in topological order, or -1.
    int firstNonFiniteNode() const;
    std::vector<int> order() const;

private:
    friend std::unique_ptr<Model> compile(const Graph& graph, Backend& backend, uint64_t seed, bool fuse,
                                          bool blockedLayout);
    void chooseLayouts(int block);
    Model() = default;
    struct Step;
    void allocateFor(int64_t batch);
    void packParameters();
    // Whether a step has an output gradient buffer of its own (it has none when a ReLU's backward is
    // done elsewhere), and the gradient its backward receives.
    static bool hasOwnGrad(const Step& s);
    // The ports on which a step's backward writes the gradient of step `target` (both indices into m_steps).
    std::vector<int> portsWriting(const Step& s, int target) const;
    const Tensor& outputGrad(const Step& s, const Tensor& dOutput) const;

    Backend* m_backend = nullptr;
    Graph m_graph;
    Shape m_inputShape, m_outputShape;
    std::vector<std::unique_ptr<Step>> m_steps;  // topological order
    int64_t m_batch = -1;
    int64_t m_capacity = 0;  // samples the activation buffers hold
    bool m_lastTraining = false;
    uint64_t m_lastSeed = 0;
    int64_t m_lastFirstSample = 0;
    uint64_t m_frozenWeights = 0;  // freezeWeights: the first of the steps' ids (step i: + i), or 0
    ReplicaSum* m_replicas = nullptr;
    GradientsReadyHook m_gradientsReady;
    void gradientsReadyAfter(const Step& s);
    Tensor m_packedValues, m_packedGrads;
    ForwardHook m_forwardHook;
    InnerTensorHook m_innerHook;
    LayerHook m_layerHook;
    const std::atomic<bool>* m_interrupt = nullptr;
    Tensor m_activationGrads;  // the activation gradients backward zeroes, at capacity (allocateFor)
    std::vector<std::pair<const Parameter*, int64_t>> m_packedOffsets;  // element offsets in the blocks
};

// Validates (throws GraphError naming the first problem's node and port), then builds the model.
// Weights: He-uniform or Xavier-uniform by layer type, biases zero; deterministic for a seed.
// fuse: a ReLU whose input comes from a layer that can apply it itself (Conv2D) and feeds nothing
// else runs inside that layer's forward (Layer::fuseReLU): one pass over the activation less, and
// bias and ReLU applied while the output is in cache. Same results up to float rounding; the
// ReLU's backward runs as before, unless the ReLU feeds only a max pooling: then the pooling's
// backward applies the ReLU's mask and writes the ReLU's input gradient (Layer::absorbReLUBackward),
// two passes and a zeroed buffer less; else the layer that fused it may gate its own backward by the
// ReLU's mask (Layer::absorbFusedReLUBackward: BatchNorm, Add), the same saving.
// blockedLayout (with fuse, on a backend with an activation block): activations between layers that can take
// the backend's blocked layout are kept in it (Layer::LayoutRule), so the convolutions reorder only where a
// layer that reads NCHW begins or ends a run of them. Same results up to float rounding.
std::unique_ptr<Model> compile(const Graph& graph, Backend& backend, uint64_t seed = 0, bool fuse = true,
                               bool blockedLayout = true);

}  // namespace strata
