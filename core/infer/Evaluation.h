// Evaluation: a compiled Model run in inference mode over many samples, and
// what the Predict panel, the Export dialog and `predict` show from it:
// per-sample class probabilities (softmax over the outputs, unless the graph
// already ends in a Softmax), the predicted class, a confusion matrix and the
// accuracy. Also the dataset normalization in both directions, so raw
// data-file values (an image file) and the dataset's normalized inputs can be
// turned into each other. No Qt here.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/train/Checkpoint.h"

namespace strata {

class Graph;
class Model;
struct DataSplit;
struct Normalization;

// True when the graph's output node (the one no edge leaves) gives probabilities already (a Softmax:
// LayerType::outputsProbabilities).
bool graphEndsInSoftmax(const Graph& graph);

// Softmax of each row of `values` [rows, cols] (computed in double, max-shifted).
std::vector<float> softmaxRows(const float* values, int64_t rows, int64_t cols);
// Index of the largest value of each row; the first of equal values wins, as in Backend::countCorrect.
std::vector<int32_t> argmaxRows(const float* values, int64_t rows, int64_t cols);

struct Predictions {
    int64_t count = 0;
    int classes = 0;
    std::vector<float> outputs;        // count * classes: the model's outputs as they are (logits, or probabilities)
    std::vector<float> probabilities;  // count * classes; each row sums to 1
    std::vector<int32_t> predicted;    // argmax of each row of outputs
    const float* probabilitiesOf(int64_t sample) const { return probabilities.data() + sample * classes; }
};

// Called after each batch with (samples done, total). Returning false cancels: the run throws EvaluationCancelled.
using EvaluationProgress = std::function<bool(int64_t done, int64_t total)>;

class EvaluationCancelled : public std::runtime_error {
public:
    EvaluationCancelled() : std::runtime_error("evaluation cancelled") {}
};

// Predictions from outputs already computed (e.g. by another runtime): probabilities are the outputs when
// `outputsAreProbabilities` (the graph ends in a Softmax), else their softmax.
Predictions predictionsFromOutputs(std::vector<float> outputs, int64_t count, int classes,
                                   bool outputsAreProbabilities);

// Runs `count` samples (in the model's input layout, already normalized) through the model in inference mode,
// `batchSize` at a time; classes is the output's value count per sample, whatever its shape. Throws
// std::invalid_argument when count or batchSize do not fit.
Predictions predictSamples(Model& model, const float* inputs, int64_t count, int batchSize = 256,
                           const EvaluationProgress& progress = {});

// Where a text model looked: the last attention layer (in topological order) of the model's last forward pass,
// for one sample of that batch. weights[k] is the attention key position k received, averaged over the heads and
// over the query positions holding a real token (tokenIds[q] != 0, the model's [T] input; every position when
// tokenIds is null, all padding, or the attention's length is not the input's); the weights sum to 1 over the
// positions. Empty (no layer name) when the model has no attention layer.
struct TokenAttention {
    std::string layerName;  // the attention node's name
    int heads = 0;
    std::vector<float> weights;       // one per sequence position
    bool positionsAreTokens = false;  // the attention's positions are the input's tokens (same length)
};
TokenAttention lastTokenAttention(const Model& model, int64_t sample, const float* tokenIds);

// Row = true class, column = predicted class.
struct ConfusionMatrix {
    int classes = 0;
    std::vector<int64_t> counts;  // classes * classes

    int64_t at(int trueClass, int predictedClass) const;
    int64_t rowTotal(int trueClass) const;  // samples of a true class
    int64_t columnTotal(int predictedClass) const;
    int64_t total() const;
    int64_t correct() const;  // the diagonal
    double accuracy() const;  // correct / total; 0 when empty
    // at(c, c) / rowTotal(c); NaN when the class has no samples.
    double recall(int c) const;
};

// Throws std::out_of_range naming the sample whose label or prediction is outside 0..classes-1, and
// std::invalid_argument when the two lists differ in length.
ConfusionMatrix confusionMatrix(const std::vector<int32_t>& labels, const std::vector<int32_t>& predicted, int classes);

struct SplitEvaluation {
    Predictions predictions;
    ConfusionMatrix confusion;
};

// The first `limit` samples of the split (all when limit <= 0). Classes: the model's output size.
SplitEvaluation evaluateSplit(Model& model, const DataSplit& split, int64_t limit = 0, int batchSize = 256,
                              const EvaluationProgress& progress = {});

}  // namespace strata
