#include "core/infer/Evaluation.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/backend/Backend.h"
#include "core/data/Dataset.h"
#include "core/graph/Graph.h"
#include "core/graph/Model.h"

namespace strata {

bool graphEndsInSoftmax(const Graph& graph) {
    for (const Node* n : graph.nodes())
        if (graph.edgesFrom(n->id).empty()) {
            const LayerType* type = graph.layerType(n->id);
            return type && type->outputsProbabilities();
        }
    return false;
}

std::vector<float> softmaxRows(const float* values, int64_t rows, int64_t cols) {
    std::vector<float> out(static_cast<size_t>(rows * cols));
    std::vector<double> e(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = values + r * cols;
        const double mx = *std::max_element(row, row + cols);
        double sum = 0;
        for (int64_t k = 0; k < cols; ++k) sum += e[static_cast<size_t>(k)] = std::exp(double(row[k]) - mx);
        for (int64_t k = 0; k < cols; ++k)
            out[static_cast<size_t>(r * cols + k)] = float(e[static_cast<size_t>(k)] / sum);
    }
    return out;
}

std::vector<int32_t> argmaxRows(const float* values, int64_t rows, int64_t cols) {
    std::vector<int32_t> out(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = values + r * cols;
        int32_t best = 0;
        for (int64_t k = 1; k < cols; ++k)
            if (row[k] > row[best]) best = static_cast<int32_t>(k);
        out[static_cast<size_t>(r)] = best;
    }
    return out;
}

Predictions predictSamples(Model& model, const float* inputs, int64_t count, int batchSize,
                           const EvaluationProgress& progress) {
    if (count < 0) throw std::invalid_argument("predictSamples: negative sample count");
    if (batchSize < 1) throw std::invalid_argument("predictSamples: batch size must be at least 1");
    const int64_t inSize = model.inputShape().numel();
    // Every value of the output per sample: a class's score, a regression target, a label's logit, or a pixel
    // (image to image, whose probabilities and argmax mean nothing: its callers read the outputs).
    const int64_t classes = model.outputShape().numel();
    Predictions p;
    p.count = count;
    p.classes = static_cast<int>(classes);
    p.outputs.resize(static_cast<size_t>(count * classes));
    Backend& backend = model.backend();
    for (int64_t start = 0; start < count; start += batchSize) {
        const int64_t n = std::min<int64_t>(batchSize, count - start);
        const Tensor x = backend.fromHost(model.inputShape().withBatch(n), inputs + start * inSize);
        const Tensor& y = model.forward(x, false);
        backend.toHost(y, p.outputs.data() + start * classes);
        if (progress && !progress(start + n, count)) throw EvaluationCancelled();
    }
    return predictionsFromOutputs(std::move(p.outputs), count, p.classes, graphEndsInSoftmax(model.graph()));
}

TokenAttention lastTokenAttention(const Model& model, int64_t sample, const float* tokenIds) {
    TokenAttention a;
    int node = -1;
    const Tensor* probs = nullptr;
    for (int id : model.order())
        if (const Tensor* t = model.attentionWeights(id)) {
            node = id;
            probs = t;
        }
    if (!probs) return a;
    const Node* n = model.graph().node(node);
    a.layerName = n ? n->name : std::to_string(node);
    const Shape& s = probs->shape();  // [capacity, heads, T, T]
    if (s.rank() != 4 || sample < 0 || sample >= s[0])
        throw std::invalid_argument("lastTokenAttention: no sample " + std::to_string(sample) + " in " + s.toString());
    const int64_t heads = s[1], T = s[2], per = heads * T * T;
    std::vector<float> host(static_cast<size_t>(per));
    model.backend().copyToHost(host.data(), probs->f32() + sample * per, host.size() * sizeof(float));
    std::vector<bool> query(static_cast<size_t>(T), true);
    // The ids mark the queries only where the attention's positions are the input's (a [T] token input).
    a.positionsAreTokens = model.inputShape().rank() == 1 && model.inputShape()[0] == T;
    if (tokenIds && a.positionsAreTokens && std::any_of(tokenIds, tokenIds + T, [](float id) { return id != 0.0f; }))
        for (int64_t q = 0; q < T; ++q) query[static_cast<size_t>(q)] = tokenIds[q] != 0.0f;
    std::vector<double> sum(static_cast<size_t>(T), 0.0);
    double rows = 0;
    for (int64_t h = 0; h < heads; ++h)
        for (int64_t q = 0; q < T; ++q) {
            if (!query[static_cast<size_t>(q)]) continue;
            const float* row = host.data() + (h * T + q) * T;
            for (int64_t k = 0; k < T; ++k) sum[static_cast<size_t>(k)] += row[k];
            rows += 1;
        }
    a.heads = static_cast<int>(heads);
    a.weights.resize(static_cast<size_t>(T));
    for (int64_t k = 0; k < T; ++k)
        a.weights[static_cast<size_t>(k)] = static_cast<float>(sum[static_cast<size_t>(k)] / std::max(rows, 1.0));
    return a;
}

Predictions predictionsFromOutputs(std::vector<float> outputs, int64_t count, int classes,
                                   bool outputsAreProbabilities) {
    if (count < 0 || classes < 1 || static_cast<int64_t>(outputs.size()) != count * classes)
        throw std::invalid_argument("predictionsFromOutputs: " + std::to_string(outputs.size()) + " outputs for " +
                                    std::to_string(count) + " samples of " + std::to_string(classes) + " classes");
    Predictions p;
    p.count = count;
    p.classes = classes;
    p.outputs = std::move(outputs);
    p.probabilities = outputsAreProbabilities ? p.outputs : softmaxRows(p.outputs.data(), count, classes);
    p.predicted = argmaxRows(p.outputs.data(), count, classes);
    return p;
}

int64_t ConfusionMatrix::at(int t, int pr) const { return counts[static_cast<size_t>(t * classes + pr)]; }

int64_t ConfusionMatrix::rowTotal(int t) const {
    int64_t s = 0;
    for (int k = 0; k < classes; ++k) s += at(t, k);
    return s;
}

int64_t ConfusionMatrix::columnTotal(int pr) const {
    int64_t s = 0;
    for (int k = 0; k < classes; ++k) s += at(k, pr);
    return s;
}

int64_t ConfusionMatrix::total() const {
    int64_t s = 0;
    for (int64_t c : counts) s += c;
    return s;
}

int64_t ConfusionMatrix::correct() const {
    int64_t s = 0;
    for (int k = 0; k < classes; ++k) s += at(k, k);
    return s;
}

double ConfusionMatrix::accuracy() const {
    const int64_t n = total();
    return n == 0 ? 0.0 : static_cast<double>(correct()) / static_cast<double>(n);
}

double ConfusionMatrix::recall(int c) const {
    const int64_t n = rowTotal(c);
    return n == 0 ? std::numeric_limits<double>::quiet_NaN() : static_cast<double>(at(c, c)) / static_cast<double>(n);
}

ConfusionMatrix confusionMatrix(const std::vector<int32_t>& labels, const std::vector<int32_t>& predicted,
                                int classes) {
    if (labels.size() != predicted.size())
        throw std::invalid_argument("confusion matrix: " + std::to_string(labels.size()) + " labels but " +
                                    std::to_string(predicted.size()) + " predictions");
    if (classes < 1) throw std::invalid_argument("confusion matrix: no classes");
    ConfusionMatrix m;
    m.classes = classes;
    m.counts.assign(static_cast<size_t>(classes) * static_cast<size_t>(classes), 0);
    for (size_t i = 0; i < labels.size(); ++i) {
        if (labels[i] < 0 || labels[i] >= classes)
            throw std::out_of_range("sample " + std::to_string(i) + ": label " + std::to_string(labels[i]) +
                                    " is outside 0.." + std::to_string(classes - 1));
        if (predicted[i] < 0 || predicted[i] >= classes)
            throw std::out_of_range("sample " + std::to_string(i) + ": prediction " + std::to_string(predicted[i]) +
                                    " is outside 0.." + std::to_string(classes - 1));
        ++m.counts[static_cast<size_t>(labels[i] * classes + predicted[i])];
    }
    return m;
}

SplitEvaluation evaluateSplit(Model& model, const DataSplit& split, int64_t limit, int batchSize,
                              const EvaluationProgress& progress) {
    const int64_t count = limit > 0 ? std::min(limit, split.count) : split.count;
    if (split.sampleShape.numel() != model.inputShape().numel())
        throw std::invalid_argument("the data's samples " + split.sampleShape.toString() +
                                    " do not fit the model input " + model.inputShape().toString());
    SplitEvaluation e;
    e.predictions = predictSamples(model, split.inputs.data(), count, batchSize, progress);
    const std::vector<int32_t> labels(split.labels.begin(), split.labels.begin() + count);
    e.confusion = confusionMatrix(labels, e.predictions.predicted, e.predictions.classes);
    return e;
}

}  // namespace strata
