// Activations: what a trained model computes inside, for the workbench's feature-map dock. ActivationProbe compiles a
// model (an ExportModel, as loadModelFile reads a checkpoint or export) on the CPU without fusion, so every node keeps
// its own output (a Conv2D's, not that of the ReLU a fused model runs inside it), and hands back the outputs of named
// nodes for one sample: a Conv2D's feature maps [C, H, W], a Dense's vector, an attention layer's [T, D]; or a
// histogram of one node's outputs over many samples (histogramOf's equal bins). convFilters reads a Conv2D's filters
// [out, in, kh, kw] from the weights, with each filter's range. No Qt here.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/export/ExportModel.h"
#include "core/train/ParameterHistograms.h"

namespace strata {

class Backend;
class Model;

struct NodeActivation {
    std::string node;
    Shape shape;                // per sample: [C, H, W] for a Conv2D
    std::vector<float> values;  // shape.numel(), row-major
};

struct NodeHistogram {
    ValueHistogram values;
    int64_t samples = 0;  // the samples it covers: the first `samples` of those given
    Shape shape;          // the node's output, per sample
};

class ActivationProbe {
public:
    // Values a histogram keeps at most (64 MiB): all are kept until the range, and so the bins, are known.
    static constexpr int64_t kMaxHistogramValues = int64_t(1) << 24;

    // Compiles the model's graph unfused on a CPU backend with its weights. BatchNorm is not folded (Predictor folds
    // it), so every node of the project has an output to show. Throws as compile and applyWeights do.
    explicit ActivationProbe(const ExportModel& model);
    ~ActivationProbe();
    ActivationProbe(const ActivationProbe&) = delete;
    ActivationProbe& operator=(const ActivationProbe&) = delete;

    const Shape& inputShape() const;  // per sample
    const Graph& graph() const;
    // The model's node of that name; throws std::invalid_argument naming it when the model has none.
    const Node& node(const std::string& name) const;

    // The outputs of `nodes` for one sample (`input`: inputShape().numel() values, normalized as in training), in
    // the order asked; the Input node's is the sample itself. One forward pass for all of them. Throws
    // std::invalid_argument naming a node the model lacks. Not thread-safe: one call at a time per probe.
    std::vector<NodeActivation> capture(const float* input, const std::vector<std::string>& nodes);
    NodeActivation captureOne(const float* input, const std::string& node);

    // histogramOf (`bins` equal bins over the finite range) of every value `node` outputs for the first of the `count`
    // samples at `inputs` (each inputShape().numel() values, normalized), run at most `batchSize` at a time: all
    // `count`, or as many as give at most `maxValues` values (at least one sample), so a large feature map covers
    // fewer samples and memory stays bounded. Throws std::invalid_argument naming a node the model lacks, or for
    // count < 1.
    NodeHistogram histogram(const float* inputs, int64_t count, const std::string& node, int bins, int batchSize = 32,
                            int64_t maxValues = kMaxHistogramValues);

    // A flag (a job's cancel request) checked before each layer: once raised, the pass under way ends with
    // ModelInterrupted (Model::setInterruptFlag). Null: never. The flag must outlive its use or be reset first.
    void setInterruptFlag(const std::atomic<bool>* flag);

private:
    // The first `batch` samples' values of node `id` from the last forward pass.
    std::vector<float> outputOf(int id, const float* inputs, int64_t batch, Shape* perSample) const;

    std::unique_ptr<Backend> m_backend;
    std::unique_ptr<Model> m_model;
};

struct ConvFilters {
    std::string node;
    int64_t out = 0, in = 0, kh = 0, kw = 0;  // in: the input channels each filter sees (C / groups)
    std::vector<float> values;                // out * in * kh * kw, the weight's layout (PyTorch's)
    std::vector<float> min, max;              // per filter, over its in * kh * kw values
    const float* filter(int64_t k) const { return values.data() + k * in * kh * kw; }
};

// A Conv2D's filters from `model.weights` ("<node>.weight"). Throws std::invalid_argument naming the node when the
// model has no node of that name, when it is not a Conv2D, or when the weights lack its tensor or hold one of another
// size.
ConvFilters convFilters(const ExportModel& model, const std::string& node);
// Filter k's kh x kw values averaged over its input channels: what one tile of the dock's filter grid shows (for
// one input channel, the filter itself). Throws std::out_of_range for k outside 0..out-1.
std::vector<float> filterMeanOverInputs(const ConvFilters& filters, int64_t k);

}  // namespace strata
