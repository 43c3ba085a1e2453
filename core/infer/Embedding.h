// Embedding: what the embedding projector plots. The activations of the penultimate layer (the node feeding the
// graph's output node) for many samples, one flattened row per sample, with the model's predictions for the same
// samples, so a point can show its sample and prediction. Projected by Pca (Pca.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/infer/Evaluation.h"

namespace strata {

class Graph;
class Model;

// The node whose output feeds the graph's output node (its first input port); -1 when the output node has no
// input (a graph of one node).
int penultimateNode(const Graph& graph);

struct Embeddings {
    int node = -1;
    std::string layer;  // the penultimate node's name
    int64_t count = 0, dim = 0;
    std::vector<float> rows;  // count x dim
    Predictions predictions;
};

// Runs `count` samples (the model's input layout, normalized) in inference mode, `batchSize` at a time, keeping
// each sample's penultimate activations and the model's outputs. Throws std::invalid_argument naming the node
// when the penultimate layer's output cannot be read per sample (none, or kept in a blocked layout).
Embeddings embedSamples(Model& model, const float* inputs, int64_t count, int batchSize = 256);

}  // namespace strata
