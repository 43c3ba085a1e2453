// Saliency: where a trained classifier looked for one sample and one class. Grad-CAM for convolutional models
// (the class score's gradient at a spatial feature map, averaged per channel, weighs the channels into a map
// upsampled to the input) and input-gradient saliency for text models (the class score's gradient at the
// embedding vectors, one value per token). What the Predict dock overlays and `strata-train predict --saliency`
// writes. No Qt here.
//
// The model is compiled again for this (SaliencyModel): unfused, so every layer has its own output and gradient;
// every node trainable, so backward reaches the first layer even under a frozen backbone; and without a final
// Softmax, so the class score is the logit (the pre-softmax score, as Grad-CAM defines it). Its weights are the
// file's and are never written: only activation and parameter gradients change.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor/Shape.h"

namespace strata {

class Backend;
class Graph;
class Model;
struct ExportModel;

// A layer Grad-CAM can look at: a Conv2D node and its [C, H, W] output.
struct GradCamLayer {
    std::string name;
    int node = -1;
    Shape shape;
};

struct GradCam {
    std::string layer;           // the Conv2D (or other spatial node) asked for
    std::string activationNode;  // whose output was weighed: the layer's, or the activation right after it
    int classIndex = 0;
    float score = 0;  // the class's logit for this sample
    int64_t channels = 0, featureHeight = 0, featureWidth = 0;
    std::vector<float> weights;     // per channel: the spatial mean of d(score)/d(activation)
    std::vector<float> featureMap;  // ReLU(sum_c w_c A_c), featureHeight x featureWidth, not normalized
    int64_t height = 0, width = 0;  // the input's
    std::vector<float> map;         // featureMap upsampled (bilinear) to height x width, divided by its maximum
    // The map is zero everywhere: no channel's evidence for the class is positive anywhere (map is then all 0).
    bool empty = false;
};

enum class TokenSaliencyMode {
    GradientNorm,       // per token the L2 norm of d(score)/d(embedding vector): 0..1 after normalization
    GradientTimesInput  // per token sum_d grad_d * embedding_d: signed, -1..1 after normalization
};

struct TokenSaliency {
    std::string embeddingNode;  // the Embedding fed by the input
    int classIndex = 0;
    float score = 0;
    TokenSaliencyMode mode = TokenSaliencyMode::GradientNorm;
    std::vector<float> raw;     // per position, before normalization; 0 at padding
    std::vector<float> values;  // raw divided by the largest |raw| over the real tokens; 0 at padding
    std::vector<bool> isToken;  // false at padding (id 0)
};

// The names of the Conv2D nodes of `graph` in topological order: the layers Grad-CAM offers (the last is its
// default).
std::vector<std::string> gradCamLayerNames(const Graph& graph);

// Whether the graph's input is token ids read by an Embedding (the models tokenSaliency explains).
bool takesTokens(const Graph& graph);

// Bilinear upsampling with half-pixel centres (PyTorch's align_corners=False, OpenCV's INTER_LINEAR): source
// [h, w] to [outH, outW], edges clamped.
std::vector<float> upsampleBilinear(const std::vector<float>& src, int64_t h, int64_t w, int64_t outH, int64_t outW);

// The map (height x width, 0..1) as an 8-bit grayscale PNG, 0 black to 1 white, written atomically (temporary
// file, then rename). Throws std::runtime_error naming the file.
void writeGradCamPng(const std::string& path, const GradCam& cam);

class SaliencyModel {
public:
    // Compiles `graph` as described above on `backend` (kept by reference) with `weights` (by
    // Model::namedParameters name, as checkpoints hold them). Throws naming the graph's problem or a missing
    // tensor, and std::invalid_argument for a graph whose output is not one score per class ([K]).
    SaliencyModel(const Graph& graph, const std::map<std::string, std::vector<float>>& weights, Backend& backend);
    SaliencyModel(const ExportModel& model, Backend& backend);
    ~SaliencyModel();
    SaliencyModel(const SaliencyModel&) = delete;
    SaliencyModel& operator=(const SaliencyModel&) = delete;

    int classes() const;
    const Shape& inputShape() const;
    // The Conv2D nodes, in topological order (the layer picker's list); the last is Grad-CAM's default.
    std::vector<GradCamLayer> gradCamLayers() const;
    // Whether the input is token ids feeding an Embedding (tokenSaliency's models).
    bool takesTokens() const;

    // Grad-CAM of class `classIndex` for one sample (`input`: inputShape().numel() values, normalized as the
    // model's inputs are) at `layer` (a node's name; empty: the last Conv2D). The activation weighed is the
    // layer's output, or the output of the activation layer (ReLU, ...) after it, through a BatchNorm between
    // them, each the only consumer of the one before: the feature map the rest of the network reads. Throws
    // std::invalid_argument naming the node when the model has no Conv2D, the node is unknown or its output is not a
    // [C, H, W] map, and the class when it is out of range.
    GradCam gradCam(const float* input, int classIndex, const std::string& layer = {});
    // Input-gradient saliency of class `classIndex` for one sample of token ids. Throws std::invalid_argument
    // when the input does not feed an Embedding, and for a class out of range.
    TokenSaliency tokenSaliency(const float* tokenIds, int classIndex,
                                TokenSaliencyMode mode = TokenSaliencyMode::GradientNorm);

    // The compiled model (tests read its weights and perturb its activations through its forward hook).
    Model& model() { return *m_model; }

private:
    // Runs the sample forward and backpropagates the class's score; returns the score.
    float scoreAndBackward(const float* input, int classIndex);

    Backend& m_backend;
    std::unique_ptr<Model> m_model;
};

}  // namespace strata
