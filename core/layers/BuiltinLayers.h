// Internal to core/layers: the small helpers the layer type files share (parameter spec builders, shape
// errors, facts, reusable executable layers). Nothing outside core/layers includes this header.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/layers/Layer.h"

namespace strata::layers {

// ---- factories ---------------------------------------------------------------------------------------------
// Each type's file defines layers::make<Type>(), listed (and declared) in LayerRegistry.cpp.
// MaxPool2D and AvgPool2D share one implementation (Pool2D.cpp).
std::unique_ptr<LayerType> makePool2DType(PoolMode mode, const std::string& name, const std::string& description);

// ---- parameter spec builders -------------------------------------------------
ParamSpec intParam(const std::string& name, int64_t def, int64_t min, int64_t max, const std::string& help);
ParamSpec floatParam(const std::string& name, double def, double min, double max, const std::string& help);
ParamSpec boolParam(const std::string& name, bool def, const std::string& help);
ParamSpec choiceParam(const std::string& name, const std::string& def, std::vector<std::string> choices,
                      const std::string& help);
ParamSpec intListParam(const std::string& name, const std::vector<int64_t>& def, int minItems, int maxItems,
                       int64_t min, int64_t max, const std::string& help);

// The "init" parameter of layers with weights, and its mapping to Init.
ParamSpec weightInitParam();
Init weightInit(const Json& params);

// A 1- or 2-element IntList param as (height, width); an empty list gives `fallback`.
std::pair<int, int> pairParam(const Json& params, const char* key, std::pair<int, int> fallback = {1, 1});

// ---- convolutions ---------------------------------------------------------------
// What Conv2D and ConvTranspose2D read alike: the input [c, h, w] and the parameters filters (k), kernel (r, s),
// stride, padding, dilation and groups. descFor fills a ConvDesc for a batch of n with these kernel settings and
// the given convolution input and output channels (ConvTranspose2D's convolution runs from its output to its
// input, so it passes them the other way round).
struct ConvSettings {
    int c, h, w, k, r, s, strideH, strideW, padH, padW, dilH, dilW, groups;
    ConvDesc descFor(int n, int inChannels, int inH, int inW, int outChannels) const;
};
ConvSettings convSettings(const Json& params, const Shape& in);
// inferShape's common part for both: one input of rank 3 [channels, height, width] (else ShapeError suggesting
// a Reshape), its settings read, and channels and filters both divisible by groups (else ShapeError / ParamError).
ConvSettings checkedConvSettings(const std::string& layer, const Json& params, const std::vector<Shape>& inputs);

// ---- shapes -------------------------------------------------------------------
// "in: Dense expects <expected>, got [1, 28, 28]<hint>"
[[noreturn]] void throwShapeError(const std::string& port, const std::string& layer, const Shape& got,
                                  const std::string& expected, const std::string& hint = {});
// Throws unless exactly `ports.size()` input shapes were given.
void expectInputCount(const std::string& layer, const std::vector<std::string>& ports,
                      const std::vector<Shape>& inputs);
// The one input of a sequence layer: a per-sample [length, `features`] (throws otherwise, suggesting an
// Embedding for a rank-1 input), with length x features an int.
const Shape& expectSequence(const std::string& layer, const std::vector<Shape>& inputs, const std::string& features);
// Sequence layers with an optional padding mask: the bool parameter "masked" (maskedParam) adds a second input
// port "mask", [length] values per sample where 0 marks a padding position (the token ids the Embedding read:
// id 0 is padding). hasMaskPort reads raw params too (the graph editor's): anything but true is no mask.
ParamSpec maskedParam();
bool hasMaskPort(const Json& params);
std::vector<std::string> maskedSequencePorts(const Json& params);
// expectSequence for such a layer: the sequence on "in" and, when masked, a [length] mask on "mask".
const Shape& expectMaskedSequence(const std::string& layer, const Json& params, const std::vector<Shape>& inputs,
                                  const std::string& features);
// A dimension passed to a Backend op (int); throws ShapeError when it does not fit.
int toInt(int64_t v, const std::string& port, const std::string& what);
// Ports "in0".."in{n-1}" for layers with a variable number of inputs.
std::vector<std::string> numberedPorts(const Json& params);

// ---- facts -------------------------------------------------------------------
// A cost with these FLOPs per sample and the bytes every layer moves: forward reads its inputs and writes its
// output, backward reads the output gradient and the inputs and writes the input gradients (4 bytes a value).
LayerCost streamingCost(const std::vector<Shape>& inputs, const Shape& output, double forwardFlops,
                        double backwardFlops);
// One operation per output element, forward and backward (activations, normalization, Add).
LayerCost elementwiseCost(const std::vector<Shape>& inputs, const Shape& output);
// Channel facts of a layer whose output channel c depends on its input channel c alone.
ChannelFacts perChannelFacts(std::vector<std::string> perChannelParams = {});
// Channel facts of a layer that combines its input's channels (the conservative answer).
inline ChannelFacts mixingFacts() { return {}; }

// ---- runtime helpers ----------------------------------------------------------
// Makes `buf` hold at least shape.numel() floats on this backend, allocating only when it is
// smaller (its shape is then `shape`; otherwise it keeps its own). Layers call it in forward and
// backward so scratch memory is allocated once for the largest batch and then reused.
void ensureBuffer(Backend& backend, Tensor& buf, const Shape& shape);
inline int64_t batchOf(const Tensor& t) { return t.shape().rank() > 0 ? t.shape()[0] : 1; }
// The gradient tensor of a parameter, or null when it has none (frozen or state).
float* gradOf(Parameter& p);

// An element-wise activation over the whole tensor (ReLU, GELU, ...).
std::unique_ptr<Layer> makeActivationLayer(Activation act, float alpha);
// Output = input (Flatten, Reshape): a copy forward, an accumulate backward.
std::unique_ptr<Layer> makeCopyLayer();

}  // namespace strata::layers
