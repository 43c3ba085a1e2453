#include "core/export/Quantize.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "core/backend/BackendRegistry.h"
#include "core/data/Dataset.h"
#include "core/export/ExportModel.h"
#include "core/graph/Model.h"

namespace strata {

namespace {

// A fact of a node's type; false for a node of an unknown type.
template <class Fact>
bool typeSays(const Graph& graph, int node, Fact fact) {
    const LayerType* type = graph.layerType(node);
    return type && fact(*type);
}

bool isDropout(const Graph& graph, int node) {  // the identity at inference
    return typeSays(graph, node, [](const LayerType& t) { return t.identityAtInference(); });
}

int producerOf(const Graph& graph, int node) {
    const std::vector<std::string> ports = graph.inputPorts(node);
    if (ports.empty()) return -1;
    const auto e = graph.edgeInto({node, ports.front()});
    return e ? e->from.node : -1;
}

// The node whose output a consumer of `node` really reads: Dropout passes its input on.
int valueSource(const Graph& graph, int node) {
    while (node >= 0 && isDropout(graph, node)) node = producerOf(graph, node);
    return node;
}

// Per-tensor statistics over the calibration samples.
struct RangeStats {
    float lo = std::numeric_limits<float>::infinity();
    float hi = -std::numeric_limits<float>::infinity();
    std::vector<int64_t> histogram;  // Percentile, second pass: kBins over [lo, hi]
    int64_t count = 0;
    static constexpr int kBins = 2048;

    void addRange(const float* x, int64_t n) {
        for (int64_t i = 0; i < n; ++i) {
            lo = std::min(lo, x[i]);
            hi = std::max(hi, x[i]);
        }
    }
    void addHistogram(const float* x, int64_t n) {
        if (histogram.empty()) histogram.assign(kBins, 0);
        const double width = hi > lo ? (static_cast<double>(hi) - lo) / kBins : 1.0;
        for (int64_t i = 0; i < n; ++i) {
            const auto bin = static_cast<int64_t>((static_cast<double>(x[i]) - lo) / width);
            ++histogram[static_cast<size_t>(std::clamp<int64_t>(bin, 0, kBins - 1))];
        }
        count += n;
    }
    // The values at the (100 - p)th and p-th percentiles (bin edges, so the range never cuts inside a bin).
    std::pair<float, float> percentileRange(double p) const {
        if (histogram.empty() || count == 0 || !(hi > lo)) return {lo, hi};
        const double width = (static_cast<double>(hi) - lo) / kBins;
        const auto tail = static_cast<int64_t>(std::floor(static_cast<double>(count) * (1.0 - p / 100.0)));
        int64_t below = 0;
        int first = 0;
        while (first < kBins - 1 && below + histogram[static_cast<size_t>(first)] <= tail)
            below += histogram[static_cast<size_t>(first++)];
        int64_t above = 0;
        int last = kBins - 1;
        while (last > first && above + histogram[static_cast<size_t>(last)] <= tail)
            above += histogram[static_cast<size_t>(last--)];
        return {static_cast<float>(lo + first * width), static_cast<float>(lo + (last + 1) * width)};
    }
};

std::unique_ptr<Backend> cpuBackend() { return backendRegistry().create(Device::cpu()); }

std::unique_ptr<Model> compiledUnfused(const ExportModel& model, Backend& backend) {
    auto m = compile(model.project.graph, backend, 0, /*fuse=*/false);
    applyWeights(*m, model.weights);
    return m;
}

}  // namespace

ActivationQuant symmetricActivationQuantFor(float lo, float hi) {
    const float m = std::max(std::fabs(lo), std::fabs(hi));
    ActivationQuant q;
    q.scale = m > 0 && std::isfinite(m) ? m / 127.0f : 1.0f;
    q.zeroPoint = 128;
    return q;
}

ActivationQuant activationQuantFor(float lo, float hi) {
    lo = std::min(lo, 0.0f);
    hi = std::max(hi, 0.0f);
    ActivationQuant q;
    if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi)) return q;  // all zero (or nothing seen)
    q.scale = (hi - lo) / 255.0f;
    q.zeroPoint = static_cast<int>(std::clamp(std::nearbyint(-lo / q.scale), 0.0f, 255.0f));
    return q;
}

void fakeQuantize(float* x, int64_t n, const ActivationQuant& q) {
    const float zp = static_cast<float>(q.zeroPoint);
    for (int64_t i = 0; i < n; ++i) {
        const float v = std::clamp(std::nearbyint(x[i] / q.scale) + zp, 0.0f, 255.0f);
        x[i] = (v - zp) * q.scale;
    }
}

ChannelQuantized quantizeWeightPerChannel(const std::vector<float>& values, int64_t channels) {
    if (channels < 1 || values.size() % static_cast<size_t>(channels) != 0)
        throw std::invalid_argument("int8 weights: " + std::to_string(values.size()) + " values are not " +
                                    std::to_string(channels) + " channels");
    const size_t per = values.size() / static_cast<size_t>(channels);
    ChannelQuantized q;
    q.values.resize(values.size());
    q.scales.resize(static_cast<size_t>(channels));
    for (size_t c = 0; c < static_cast<size_t>(channels); ++c) {
        const float* w = values.data() + c * per;
        float amax = 0.0f;
        for (size_t i = 0; i < per; ++i) amax = std::max(amax, std::fabs(w[i]));
        const float scale = amax > 0.0f ? amax / float(kInt8WeightMax) : 1.0f;
        q.scales[c] = scale;
        for (size_t i = 0; i < per; ++i)
            q.values[c * per + i] = static_cast<int8_t>(
                std::clamp(std::nearbyint(w[i] / scale), -float(kInt8WeightMax), float(kInt8WeightMax)));
    }
    return q;
}

ChannelQuantized quantizeWeightAlongAxis(const std::vector<float>& values, const Shape& shape, int axis) {
    if (axis < 0 || axis >= shape.rank() || shape.numel() != static_cast<int64_t>(values.size()))
        throw std::invalid_argument("int8 weights: " + std::to_string(values.size()) + " values are not " +
                                    shape.toString() + " with channels on axis " + std::to_string(axis));
    if (axis == 0) return quantizeWeightPerChannel(values, shape[0]);
    // Gathered channel by channel, quantized as axis 0, and put back in place.
    const int64_t channels = shape[axis], inner = shape.product(axis + 1, shape.rank()),
                  outer = shape.numel() / (channels * inner);
    std::vector<float> gathered(values.size());
    auto at = [&](int64_t o, int64_t c, int64_t i) { return static_cast<size_t>((o * channels + c) * inner + i); };
    auto slot = [&](int64_t o, int64_t c, int64_t i) { return static_cast<size_t>((c * outer + o) * inner + i); };
    for (int64_t o = 0; o < outer; ++o)
        for (int64_t c = 0; c < channels; ++c)
            for (int64_t i = 0; i < inner; ++i) gathered[slot(o, c, i)] = values[at(o, c, i)];
    const ChannelQuantized g = quantizeWeightPerChannel(gathered, channels);
    ChannelQuantized q;
    q.scales = g.scales;
    q.values.resize(values.size());
    for (int64_t o = 0; o < outer; ++o)
        for (int64_t c = 0; c < channels; ++c)
            for (int64_t i = 0; i < inner; ++i) q.values[at(o, c, i)] = g.values[slot(o, c, i)];
    return q;
}

std::vector<int32_t> quantizeBias(const std::vector<float>& bias, float inputScale,
                                  const std::vector<float>& weightScales) {
    if (bias.size() != weightScales.size())
        throw std::invalid_argument("int8 bias: " + std::to_string(bias.size()) + " values for " +
                                    std::to_string(weightScales.size()) + " channels");
    std::vector<int32_t> out(bias.size());
    constexpr double kMax = std::numeric_limits<int32_t>::max();
    for (size_t c = 0; c < bias.size(); ++c) {
        // The scale as the file stores it (float32), so dequantizing gives back what this rounded.
        const float scale = inputScale * weightScales[c];
        out[c] = static_cast<int32_t>(std::clamp(std::nearbyint(static_cast<double>(bias[c]) / scale), -kMax, kMax));
    }
    return out;
}

const char* calibrationMethodName(CalibrationMethod method) {
    return method == CalibrationMethod::Percentile ? "percentile" : "minmax";
}

CalibrationMethod parseCalibrationMethod(const std::string& text) {
    if (text == "minmax" || text == "min-max") return CalibrationMethod::MinMax;
    if (text == "percentile") return CalibrationMethod::Percentile;
    throw std::invalid_argument("unknown calibration method '" + text + "' (minmax or percentile)");
}

bool readsIds(const Graph& graph, const Edge& e) {
    const LayerType* type = graph.layerType(e.to.node);
    if (!type) return false;
    const std::vector<std::string> ports = graph.inputPorts(e.to.node);
    for (size_t k = 0; k < ports.size(); ++k)
        if (ports[k] == e.to.port) return !type->inputDifferentiable(static_cast<int>(k));
    return false;
}

std::set<int> quantizedOutputs(const Graph& graph) {
    std::set<int> out, hasConsumer;
    for (const Edge& e : graph.edges()) hasConsumer.insert(e.from.node);
    for (const Node* n : graph.nodes()) {
        if (!hasConsumer.count(n->id) || isDropout(graph, n->id)) continue;
        bool feedsIds = false;
        for (const Edge& e : graph.edgesFrom(n->id)) {
            const int consumer = e.to.node;
            feedsIds = feedsIds || readsIds(graph, e);
            // Through a Dropout to an Embedding.
            if (isDropout(graph, consumer))
                for (const Edge& d : graph.edgesFrom(consumer)) feedsIds = feedsIds || readsIds(graph, d);
        }
        if (!feedsIds) out.insert(n->id);
    }
    return out;
}

std::string innerTensorKey(const std::string& node, const std::string& tensor) { return node + "/" + tensor; }

std::set<std::string> quantizedInnerTensors(const Graph& graph) {
    const std::set<int> quantized = quantizedOutputs(graph);
    std::set<std::string> out;
    for (const Node* n : graph.nodes()) {
        const LayerType* type = graph.layerType(n->id);
        if (!type || type->int8InnerTensors().empty()) continue;
        if (!quantized.count(valueSource(graph, producerOf(graph, n->id)))) continue;
        for (const LayerType::InnerInt8Tensor& t : type->int8InnerTensors())
            out.insert(innerTensorKey(n->name, t.name));
    }
    return out;
}

Int8Calibration calibrateInt8(const ExportModel& model, const DataSplit& data, const QuantizationOptions& options) {
    if (data.count == 0) throw std::invalid_argument("int8 calibration: the training split is empty");
    if (options.calibrationSamples < 1)
        throw std::invalid_argument("int8 calibration needs at least 1 sample, got " +
                                    std::to_string(options.calibrationSamples));
    if (options.method == CalibrationMethod::Percentile && !(options.percentile > 50.0 && options.percentile <= 100.0))
        throw std::invalid_argument("int8 calibration: the percentile must be above 50 and at most 100, got " +
                                    std::to_string(options.percentile));
    const Graph& graph = model.project.graph;
    auto backend = cpuBackend();
    auto m = compiledUnfused(model, *backend);
    if (data.sampleShape != m->inputShape())
        throw std::invalid_argument("int8 calibration: the data's samples are " + data.sampleShape.toString() +
                                    ", the model takes " + m->inputShape().toString());
    const std::set<int> quantized = quantizedOutputs(graph);
    const std::set<std::string> inner = quantizedInnerTensors(graph);
    int inputNode = -1;
    for (const Node* n : graph.nodes())
        if (typeSays(graph, n->id, [](const LayerType& t) { return t.isGraphInput(); })) inputNode = n->id;

    const int64_t n = std::min(options.calibrationSamples, data.count);
    const int64_t per = data.sampleShape.numel();
    std::map<int, RangeStats> stats;
    std::map<std::string, RangeStats> innerStats;
    std::set<std::string> symmetric;
    for (const Node* node : graph.nodes())
        if (const LayerType* type = graph.layerType(node->id))
            for (const LayerType::InnerInt8Tensor& t : type->int8InnerTensors())
                if (t.symmetric) symmetric.insert(innerTensorKey(node->name, t.name));
    std::vector<float> host, batch;
    bool histogramPass = false;
    auto observe = [&](RangeStats& s, const Tensor& t) {
        host.resize(static_cast<size_t>(t.numel()));
        backend->toHost(t, host.data());
        if (histogramPass)
            s.addHistogram(host.data(), t.numel());
        else
            s.addRange(host.data(), t.numel());
    };
    m->setForwardHook([&](int node, Tensor& out) {
        if (quantized.count(node)) observe(stats[node], out);
    });
    m->setInnerHook([&](int node, const std::string& tensor, Tensor& values) {
        const std::string key = innerTensorKey(graph.node(node)->name, tensor);
        if (inner.count(key)) observe(innerStats[key], values);
    });
    const int passes = options.method == CalibrationMethod::Percentile ? 2 : 1;
    constexpr int64_t kBatch = 256;
    for (int pass = 0; pass < passes; ++pass) {
        histogramPass = pass == 1;
        for (int64_t start = 0; start < n; start += kBatch) {
            const int64_t b = std::min(kBatch, n - start);
            batch.resize(static_cast<size_t>(b * per));
            // Samples spread evenly over the split, so a sorted data set still gives every class.
            for (int64_t i = 0; i < b; ++i) {
                const int64_t sample = (start + i) * data.count / n;
                std::copy_n(data.inputs.begin() + sample * per, per, batch.begin() + i * per);
            }
            if (quantized.count(inputNode)) {
                RangeStats& s = stats[inputNode];
                if (histogramPass)
                    s.addHistogram(batch.data(), b * per);
                else
                    s.addRange(batch.data(), b * per);
            }
            const Tensor x = backend->fromHost(data.sampleShape.withBatch(b), batch.data());
            m->forward(x, false);
        }
    }

    auto quantFor = [&](const RangeStats& s, bool symmetricGrid = false) {
        const auto [lo, hi] = options.method == CalibrationMethod::Percentile ? s.percentileRange(options.percentile)
                                                                              : std::pair{s.lo, s.hi};
        return symmetricGrid ? symmetricActivationQuantFor(lo, hi) : activationQuantFor(lo, hi);
    };
    std::map<int, ActivationQuant> params;
    for (const auto& [node, s] : stats) params[node] = quantFor(s);
    const std::vector<int> order = graph.topologicalOrder();
    // A layer feeding only a ReLU quantizes onto the ReLU's range: its QuantizeLinear does the ReLU.
    for (int id : order) {
        const bool relu = typeSays(graph, id, [](const LayerType& t) { return t.activation() == Activation::ReLU; });
        if (!relu || !params.count(id)) continue;
        const int from = producerOf(graph, id);
        if (from >= 0 && params.count(from) && graph.edgesFrom(from).size() == 1) params[from] = params[id];
    }
    for (int id : order) {
        // Its output a subset of its input's values (max, copy, reshape): it takes its input's parameters, so
        // onnxruntime runs it on the uint8 values directly.
        if (!typeSays(graph, id, [](const LayerType& t) { return t.keepsInputValues(); }) || !params.count(id))
            continue;
        const int from = valueSource(graph, producerOf(graph, id));
        if (from >= 0 && params.count(from)) params[id] = params[from];
    }
    Int8Calibration c;
    c.options = options;
    c.samples = n;
    for (const auto& [node, q] : params) c.activations[graph.node(node)->name] = q;
    for (const auto& [key, s] : innerStats) c.activations[key] = quantFor(s, symmetric.count(key) > 0);
    return c;
}

std::vector<float> simulateInt8(const ExportModel& model, const std::map<std::string, ActivationQuant>& activations,
                                const float* inputs, int64_t count, int batchSize, const Int8Tap& tap) {
    const Graph& graph = model.project.graph;
    auto backend = cpuBackend();
    auto m = compiledUnfused(model, *backend);
    std::map<int, ActivationQuant> byNode;
    const ActivationQuant* inputQuant = nullptr;
    std::string inputName;
    for (const Node* n : graph.nodes()) {
        auto it = activations.find(n->name);
        if (it == activations.end()) continue;
        byNode[n->id] = it->second;
        if (typeSays(graph, n->id, [](const LayerType& t) { return t.isGraphInput(); })) {
            inputQuant = &it->second;
            inputName = n->name;
        }
    }
    std::vector<float> host;
    auto round = [&](const std::string& name, Tensor& t, const ActivationQuant& q) {
        host.resize(static_cast<size_t>(t.numel()));
        backend->toHost(t, host.data());
        fakeQuantize(host.data(), t.numel(), q);
        if (tap) tap(name, host.data(), t.numel());
        backend->copyFromHost(t.raw(), host.data(), t.bytes());
    };
    m->setForwardHook([&](int node, Tensor& out) {
        auto it = byNode.find(node);
        if (it != byNode.end()) round(graph.node(node)->name, out, it->second);
    });
    // The inner tensors the file quantizes (an older file has none: its output projection is float32).
    m->setInnerHook([&](int node, const std::string& tensor, Tensor& values) {
        const std::string key = innerTensorKey(graph.node(node)->name, tensor);
        auto it = activations.find(key);
        if (it != activations.end()) round(key, values, it->second);
    });
    const int64_t per = m->inputShape().numel(), classes = m->outputShape().numel();
    std::vector<float> outputs(static_cast<size_t>(count * classes)), batch;
    for (int64_t start = 0; start < count; start += batchSize) {
        const int64_t b = std::min<int64_t>(batchSize, count - start);
        batch.assign(inputs + start * per, inputs + (start + b) * per);
        if (inputQuant) {
            fakeQuantize(batch.data(), b * per, *inputQuant);
            if (tap) tap(inputName, batch.data(), b * per);
        }
        const Tensor x = backend->fromHost(m->inputShape().withBatch(b), batch.data());
        const Tensor& y = m->forward(x, false);
        backend->toHost(y, outputs.data() + start * classes);
    }
    return outputs;
}

}  // namespace strata
