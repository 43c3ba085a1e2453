// Layer types and executable layers.
//
// A LayerType is the static description of one kind of layer: its
// parameters (with allowed ranges), its input ports, its shape rule, its
// learnable tensors, a factory for executable Layers, and the facts other
// folders ask of it (its cost, what pruning and quantization may do to it, its
// role in a graph), so that no code outside this folder compares type names.
// One file per layer type in this folder; all types are listed in
// LayerRegistry.cpp. Its ONNX mapping is the one fact kept elsewhere, in
// core/export/OnnxLayers.cpp (it builds on the export's types).
//
// Shapes given to and returned by a LayerType are per sample (no batch
// dimension). Tensors passed to Layer::forward/backward carry the batch as
// their first dimension.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/backend/Backend.h"
#include "core/tensor/Shape.h"
#include "core/tensor/Tensor.h"

namespace strata {

using Json = nlohmann::ordered_json;

// A user-settable parameter of a layer type ("units", "kernel", ...).
struct ParamSpec {
    enum class Kind { Int, Float, Bool, Choice, IntList };
    std::string name;
    Kind kind = Kind::Int;
    Json defaultValue;
    double min = 0;  // Int, Float, and each IntList element
    double max = 0;
    std::vector<std::string> choices;  // Choice
    std::string help;
    int minItems = 0, maxItems = 0;  // IntList length bounds
    // "1 to 65536", "one of: he, xavier", ...
    std::string allowedText() const;
};

// A bad parameter value: names the parameter and its allowed range.
class ParamError : public std::runtime_error {
public:
    ParamError(std::string param, const std::string& what) : std::runtime_error(what), m_param(std::move(param)) {}
    const std::string& param() const { return m_param; }

private:
    std::string m_param;
};

// An input shape the layer cannot take: names the input port.
class ShapeError : public std::runtime_error {
public:
    ShapeError(std::string port, const std::string& what) : std::runtime_error(what), m_port(std::move(port)) {}
    const std::string& port() const { return m_port; }

private:
    std::string m_port;
};

enum class Init { Zeros, Ones, HeUniform, XavierUniform, Normal };

// A tensor a layer owns: a learnable weight, or state such as running statistics.
struct ParameterSpec {
    std::string name;  // "weight", "bias", "running_mean"
    Shape shape;
    Init init = Init::Zeros;
    int64_t fanIn = 1, fanOut = 1;
    float std = 0.02f;      // Init::Normal
    bool trainable = true;  // false: state kept in checkpoints and exports, never updated by optimizers
};

struct Parameter {
    std::string name;
    Tensor value;
    Tensor grad;  // undefined for non-trainable state
    bool trainable = true;
    // A learnable weight of a frozen node (Node::trainable false): not trainable, and never changed by anything
    // (data-parallel averaging of state included); checkpoints and exports keep it like any weight.
    bool frozen = false;
};

// Data-parallel training (core/dist, the Trainer): sums values over every replica's copy of the layer, an
// all-reduce in the same order on every replica. BatchNorm in training sums its per-channel statistics
// through it, so each replica normalizes its slice with the statistics of the GLOBAL batch.
class ReplicaSum {
public:
    virtual ~ReplicaSum() = default;
    virtual void sum(double* values, int64_t count) = 0;
};

// Sees a tensor inside a layer's forward (LayerType::int8InnerTensors: the attention's Q, K, V, softmax weights and
// heads' context), which it
// may change in place: the int8 calibration's ranges, the simulation's rounding (Model::setInnerHook).
using InnerTensorHook = std::function<void(int node, const std::string& tensor, Tensor& values)>;

struct LayerContext {
    Backend& backend;
    bool training = false;
    uint64_t seed = 0;  // per step and per node; dropout derives its mask from it
    // Data parallel: where this replica's batch starts in the global batch (dropout draws each sample's
    // mask by its global index), and the cross-replica sum (null: this batch is the whole batch).
    int64_t firstSample = 0;
    ReplicaSum* replicas = nullptr;
    // Backward: bit k set: dInputs[k] is written, not added to: its buffer was not zeroed, and this layer is the
    // first to write it in the backward pass (set by the Model for a layer that agreed,
    // Layer::overwritesInputGradient; later writers add to it).
    uint32_t overwriteInputGrads = 0;
    // Nonzero: this layer's weights are frozen under this id (Model::freezeWeights); layers pass it on to the
    // backend (ConvDesc::weightsVersion).
    uint64_t weightsVersion = 0;
    bool overwritesInputGrad(size_t k) const { return k < 32 && (overwriteInputGrads >> k) & 1u; }
    // Forward: the Model's inner-tensor hook (null: none) and this layer's node id, for innerTensor.
    const InnerTensorHook* innerHook = nullptr;
    int node = -1;
    // A layer calls this with each of its int8InnerTensors once computed, before it reads them on.
    void innerTensor(const std::string& tensor, Tensor& values) const {
        if (innerHook && *innerHook) (*innerHook)(node, tensor, values);
    }
};

// An executable layer, created by LayerType::create for fixed per-sample shapes.
class Layer {
public:
    virtual ~Layer() = default;
    // Inputs and output are batched tensors allocated by the caller.
    virtual void forward(LayerContext& ctx, const std::vector<const Tensor*>& inputs, Tensor& output) = 0;
    // Accumulates (+=) into dInputs[i] (null where no gradient is wanted) and into parameter grads.
    // Called after forward with the same inputs and output.
    virtual void backward(LayerContext& ctx, const std::vector<const Tensor*>& inputs, const Tensor& output,
                          const Tensor& dOutput, const std::vector<Tensor*>& dInputs) = 0;

    // Asks the layer to apply ReLU to its own output at the end of forward, so that the ReLU layer
    // that follows it can skip its forward (Model's fusion; the ReLU's output then shares this
    // layer's output memory, and the ReLU's backward still masks the gradient). Only a layer whose
    // backward never reads its own output may agree. Returns whether it did; default: no.
    virtual bool fuseReLU() { return false; }

    // Asks the layer, whose input is the output of a ReLU that feeds nothing else, to also do that
    // ReLU's backward: its dIn[0] is then the ReLU's INPUT gradient, to which it adds its own input
    // gradient masked by (input > 0); the Model skips the ReLU's backward. Returns whether it did;
    // default: no (max pooling agrees: Backend::maxPool2dReLUBackward).
    virtual bool absorbReLUBackward() { return false; }

    // Asks a layer that agreed to fuseReLU to also do that ReLU's backward, when the ReLU's consumers did
    // not take it (absorbReLUBackward): backward's dOutput is then the ReLU's OUTPUT gradient, which the
    // layer gates by its own output (the ReLU's: > 0 exactly where the ReLU passed) in its own passes; the
    // Model skips the ReLU's backward, and the layer has no output gradient buffer of its own (nothing to
    // zero). Returns whether it did; default: no (BatchNorm and Add agree).
    virtual bool absorbFusedReLUBackward() { return false; }

    // Whether the layer's backward can WRITE an input gradient (dIn[k] = ..., every element) when
    // LayerContext::overwriteInputGrads says so. The Model asks the layer whose backward is the first to write
    // that gradient (the input's last consumer in topological order), when the input feeds it on one port
    // only; the gradient is then not zeroed, and any later writer adds to it (Conv2D agrees: its data
    // gradient lands with a plain reorder instead of an accumulating one; Add, for each input). Default: no.
    virtual bool overwritesInputGradient() { return false; }

    // Memory layout (Model's layout pass, on a backend with an activation block: Backend::activationBlock): a
    // per-sample [C, H, W] activation may be stored blocked ("nChwBc", ConvDesc::srcBlock), which that
    // backend's convolutions read and write without reordering; its gradient then has the same layout. How a
    // layer takes blocked tensors:
    //   NchwOnly (the default): it does not; its inputs and output are NCHW.
    //   Elementwise: in any layout, so long as its inputs and its output share it (activations, Add, BatchNorm,
    //     2x2 max pooling).
    //   Any: each input and the output in the layout compile picks (Conv2D, GlobalAvgPool, Flatten).
    enum class LayoutRule { NchwOnly, Elementwise, Any };
    virtual LayoutRule layoutRule() const { return LayoutRule::NchwOnly; }
    // Called once by compile on a layer whose rule is not NchwOnly: each input's block and the output's (0:
    // NCHW). Default: ignored (an element-wise layer need not know).
    virtual void setLayouts(const std::vector<int>& /*inputBlocks*/, int /*outputBlock*/) {}

    // Data parallel, a replica whose slice of a step's global batch is empty: forward and backward are not
    // called, these are, in their place, so that the layer joins the collectives of ctx.replicas the other
    // replicas' layers make (with nothing to add). Default: a layer that makes none does nothing.
    virtual void idleForward(LayerContext& /*ctx*/) {}
    virtual void idleBackward(LayerContext& /*ctx*/) {}

    // The attention weights of the last forward pass, per sample [heads, length, length] (a row per query, a
    // column per key, each row summing to 1; before dropout), samples one after another from the start (the
    // buffer may hold more than the last batch), in backend memory; for layers that attend
    // (MultiHeadSelfAttention), null for the others. The Predict dock's heat strip reads them.
    virtual const Tensor* attentionWeights() const { return nullptr; }

    // Set by whoever creates the layer, in the order of LayerType::parameterSpecs.
    std::vector<Parameter>& parameters() { return m_params; }
    const std::vector<Parameter>& parameters() const { return m_params; }

protected:
    std::vector<Parameter> m_params;
};

// A layer whose forward starts by projecting its first input's rows by its int8Weight (x W^T + b, one row per
// position: MultiHeadSelfAttention's packed Q, K, V): the int8 engine (core/infer/Int8Engine) computes that product
// in integers into projection(), then has the layer do the rest (inference).
class ProjectingLayer {
public:
    virtual ~ProjectingLayer() = default;
    // Where the projection goes for `batch` samples: float32 [batch x rows per sample, projected width].
    virtual float* projection(Backend& backend, int64_t batch) = 0;
    // forward, given the projection already in projection(): the same output. inputs[0] is read for its shape.
    virtual void forwardFromProjection(LayerContext& ctx, const std::vector<const Tensor*>& inputs, Tensor& output) = 0;
    // forwardFromProjection up to its inner tensor (LayerType::int8InnerTensors, the heads' context: [batch x rows,
    // width]), which the caller then multiplies by that tensor's weight itself (the output projection, in int8).
    virtual const Tensor& innerFromProjection(LayerContext& ctx, const std::vector<const Tensor*>& inputs) = 0;
};

// The work and memory traffic of a layer, estimated from its shapes (Profile, MemoryEstimate).
struct LayerCost {
    // Per sample: floating-point operations (a multiply-add counts 2) of forward, and of backward (input and
    // parameter gradients).
    double forwardFlops = 0, backwardFlops = 0;
    // Per sample: bytes of activations forward reads and writes (inputs, output), and backward (the output
    // gradient, the inputs, the input gradients). Parameters come on top, once per call whatever the batch.
    double forwardBytes = 0, backwardBytes = 0;
    // Buffers the layer allocates for itself in training, beyond its output and its gradients (which the
    // Model allocates): the floats per sample of each (a batch of N allocates N times that). The second list
    // only when its input's gradient is computed.
    std::vector<int64_t> scratchFloats, inputGradientScratchFloats;
    // It runs the backend's 2-D convolutions (for which cuDNN takes a workspace).
    bool convolution = false;
};

// The one weight of a layer type that magnitude pruning thins (core/train/Pruning) and int8 export stores as
// int8 with one scale per slice along `axis` (core/export/Quantize: its output channels), its bias as int32;
// an empty `weight`: the layer has none, its parameters stay float32 and whole.
struct CompressibleWeight {
    std::string weight;  // "weight"
    int axis = 0;
    std::string bias;  // "bias" (quantized when the layer has it)
};

// How a layer treats channels, for structured pruning (core/train/StructuredPruning): the first axis of a
// per-sample [channels, height, width], or the features of a [features].
struct ChannelFacts {
    // Its own output channels, which structured pruning may remove: the parameter that counts them
    // ("filters", "units"; empty: it has none), what messages call them, the weight whose rows (axis 0) they
    // are and the bias with one value each (empty: no bias).
    std::string countParam, unitName, weight, bias;
    // Why they cannot be removed with these parameters ("a grouped convolution (groups 2)"); empty: they can.
    std::string fixed;
    // They are the first axis of its output (the channels a BatchNorm normalizes), each computed by its row of
    // `weight` and its entry of `bias` alone, so a BatchNorm after it folds into them (core/export/FoldBatchNorm).
    bool takesFoldedNormalization = false;
    // What it does with its input's channels.
    enum class Input {
        Mixes,       // combines them (Add, Concat, Reshape, LayerNorm, Softmax): a pruned layer may not feed it
        PerChannel,  // output channel c depends on input channel c alone (activations, pooling, BatchNorm)
        Flattens,    // as PerChannel, each channel becoming a block of consecutive values of a flat output
        Weighs,      // weighs them in `weight`: `inputBlock` consecutive values of each row per input channel
    };
    Input input = Input::Mixes;
    int64_t inputBlock = 1;
    // PerChannel: parameters with one value per channel, removed with it (BatchNorm's gamma, beta, statistics).
    std::vector<std::string> perChannel;
};

class LayerType {
public:
    virtual ~LayerType() = default;
    virtual std::string name() const = 0;      // "Conv2D"
    virtual std::string category() const = 0;  // palette group: "Input", "Core", "Convolution", ...
    virtual std::string description() const = 0;
    virtual std::vector<ParamSpec> paramSpecs() const = 0;
    // Input port names for these params; default one port "in". The output port is always "out".
    virtual std::vector<std::string> inputPorts(const Json& params) const;
    // False for inputs that carry ids rather than values (Embedding).
    virtual bool inputDifferentiable(int /*index*/) const { return true; }
    // Per-sample output shape; throws ShapeError (port and both shapes) or ParamError.
    // params have passed normalizeParams.
    virtual Shape inferShape(const Json& params, const std::vector<Shape>& inputs) const = 0;
    virtual std::vector<ParameterSpec> parameterSpecs(const Json& /*params*/,
                                                      const std::vector<Shape>& /*inputs*/) const {
        return {};
    }
    virtual std::unique_ptr<Layer> create(const Json& params, const std::vector<Shape>& inputs,
                                          const Shape& output) const = 0;

    // ---- facts (params have passed normalizeParams; shapes per sample, as inferShape takes them) ----
    virtual LayerCost cost(const Json& params, const std::vector<Shape>& inputs, const Shape& output) const = 0;
    virtual CompressibleWeight compressibleWeight() const = 0;
    // The weight an int8 export stores as int8 (and its bias as int32) when the layer's input is quantized
    // (core/export/Quantize), and the int8 engine multiplies in integers: the compressible one, and for
    // MultiHeadSelfAttention its packed Q, K, V projection (which pruning leaves whole).
    virtual CompressibleWeight int8Weight() const { return compressibleWeight(); }
    // Tensors inside the layer that an int8 export quantizes too (calibrated as "<node>/<name>"), in the order the
    // layer computes them, each with the weight that multiplies it next where one does (int8 in the file and the
    // int8 engine). MultiHeadSelfAttention: its Q, K, V projection ("qkv", on a grid symmetric about zero point 128,
    // so the int8 engine multiplies K and V as signed bytes), its softmax weights ("probs") and its heads' context
    // ("context", then the output projection). None for most types.
    struct InnerInt8Tensor {
        std::string name;
        CompressibleWeight weight;  // empty: none
        bool symmetric = false;     // zero point 128, scale max |x| / 127
    };
    virtual std::vector<InnerInt8Tensor> int8InnerTensors() const { return {}; }
    virtual ChannelFacts channelFacts(const Json& params, const std::vector<Shape>& inputs,
                                      const Shape& output) const = 0;
    // Roles in a graph, false (none) for most types:
    // where the data enters (Input: the graph's input, normalized by the exporters);
    virtual bool isGraphInput() const { return false; }
    // the identity at inference (Dropout: exporters and int8 calibration pass its input on);
    virtual bool identityAtInference() const { return false; }
    // an element-wise activation, which the Model fuses into its producer (ReLU) and int8 quantizes onto
    // its producer's output;
    virtual std::optional<Activation> activation() const { return std::nullopt; }
    // its output values a subset of its input's (max pooling, Flatten, Reshape: int8 gives them its input's
    // grid);
    virtual bool keepsInputValues() const { return false; }
    // at inference a per-channel affine map, (x - running_mean) / sqrt(running_var + eps) * gamma + beta
    // (BatchNorm: export may fold it into the layer before it, ChannelFacts::takesFoldedNormalization);
    virtual bool foldableNormalization() const { return false; }
    // its output a probability distribution (Softmax: evaluation reads it as probabilities, not logits);
    virtual bool outputsProbabilities() const { return false; }
    // the parameter that bounds the token ids it reads (Embedding's "vocab"); empty: it reads none.
    virtual std::string vocabularyParam() const { return {}; }

    // Fills defaults and checks every value against paramSpecs(); throws ParamError.
    // Unknown keys are an error too.
    Json normalizeParams(const Json& params) const;
};

}  // namespace strata
