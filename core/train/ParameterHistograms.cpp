// ParameterHistograms: see ParameterHistograms.h.
#include "core/train/ParameterHistograms.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <stdexcept>

#include "core/data/DataLoader.h"
#include "core/graph/Graph.h"
#include "core/graph/Model.h"
#include "core/io/JsonInput.h"

namespace strata {

ValueHistogram histogramOf(const float* v, int64_t n, int bins) {
    if (bins < 1) throw std::invalid_argument("a histogram needs at least 1 bin");
    ValueHistogram h;
    h.counts.assign(size_t(bins), 0);
    float lo = std::numeric_limits<float>::infinity(), hi = -lo;
    double sum = 0, sumSq = 0;
    for (int64_t i = 0; i < n; ++i) {
        const float x = v[i];
        if (!std::isfinite(x)) {
            ++h.nonFinite;
            continue;
        }
        lo = std::min(lo, x);
        hi = std::max(hi, x);
        sum += x;
        sumSq += double(x) * x;
        h.zeros += x == 0.0f;
        ++h.count;
    }
    if (h.count == 0) return h;
    h.lo = lo;
    h.hi = hi;
    h.mean = sum / double(h.count);
    h.rms = std::sqrt(sumSq / double(h.count));
    if (!(hi > lo)) {
        h.counts[size_t(bins / 2)] = uint32_t(h.count);
        return h;
    }
    const double scale = bins / (double(hi) - double(lo));
    for (int64_t i = 0; i < n; ++i) {
        const float x = v[i];
        if (!std::isfinite(x)) continue;
        const int b = std::min(bins - 1, int((double(x) - lo) * scale));
        ++h.counts[size_t(b)];
    }
    return h;
}

namespace {

Json histogramToJson(const ValueHistogram& h) {
    return Json{{"lo", h.lo},     {"hi", h.hi},   {"count", h.count},  {"zeros", h.zeros}, {"non_finite", h.nonFinite},
                {"mean", h.mean}, {"rms", h.rms}, {"counts", h.counts}};
}

template <class T>
T field(const Json& j, const char* name, const std::string& where) {
    if (!j.is_object() || !j.contains(name)) throw std::invalid_argument(where + ": no '" + name + "'");
    try {
        return j.at(name).get<T>();
    } catch (const std::exception&) {
        throw std::invalid_argument(where + ": '" + name + "' has the wrong type");
    }
}

ValueHistogram histogramFromJson(const Json& j, const std::string& where) {
    ValueHistogram h;
    h.lo = field<float>(j, "lo", where);
    h.hi = field<float>(j, "hi", where);
    h.count = field<int64_t>(j, "count", where);
    h.zeros = field<int64_t>(j, "zeros", where);
    h.nonFinite = field<int64_t>(j, "non_finite", where);
    h.mean = field<double>(j, "mean", where);
    h.rms = field<double>(j, "rms", where);
    h.counts = field<std::vector<uint32_t>>(j, "counts", where);
    if (h.counts.empty()) throw std::invalid_argument(where + ": 'counts' is empty");
    return h;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

}  // namespace

Json histogramSampleToJson(const HistogramSample& s) {
    Json params = Json::array();
    for (const ParameterSample& p : s.parameters)
        params.push_back({{"node", p.node},
                          {"layer", p.layer},
                          {"parameter", p.parameter},
                          {"values", histogramToJson(p.values)},
                          {"gradients", histogramToJson(p.gradients)}});
    Json relus = Json::array();
    for (const ReluSample& r : s.relus)
        relus.push_back({{"node", r.node}, {"layer", r.layer}, {"units", r.units}, {"dead_fraction", r.deadFraction}});
    return Json{{"step", s.step}, {"epoch", s.epoch}, {"parameters", params}, {"relus", relus}};
}

HistogramSample histogramSampleFromJson(const Json& j) {
    HistogramSample s;
    s.step = field<int64_t>(j, "step", "histogram sample");
    s.epoch = field<int>(j, "epoch", "histogram sample");
    const Json params = field<Json>(j, "parameters", "histogram sample");
    const Json relus = field<Json>(j, "relus", "histogram sample");
    if (!params.is_array() || !relus.is_array())
        throw std::invalid_argument("histogram sample: 'parameters' and 'relus' must be arrays");
    for (size_t i = 0; i < params.size(); ++i) {
        const std::string where = "histogram sample, parameter " + std::to_string(i);
        const Json& p = params[i];
        s.parameters.push_back({field<int>(p, "node", where), field<std::string>(p, "layer", where),
                                field<std::string>(p, "parameter", where),
                                histogramFromJson(field<Json>(p, "values", where), where + " values"),
                                histogramFromJson(field<Json>(p, "gradients", where), where + " gradients")});
    }
    for (size_t i = 0; i < relus.size(); ++i) {
        const std::string where = "histogram sample, relu " + std::to_string(i);
        const Json& r = relus[i];
        s.relus.push_back({field<int>(r, "node", where), field<std::string>(r, "layer", where),
                           field<int64_t>(r, "units", where), field<double>(r, "dead_fraction", where)});
    }
    return s;
}

std::vector<HistogramSample> readHistogramFile(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read '" + path + "'");
    std::vector<HistogramSample> out;
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
        if (line.empty()) continue;
        const bool last = in.peek() == std::char_traits<char>::eof();
        try {
            out.push_back(histogramSampleFromJson(parseJson<Json>(line, path + " line " + std::to_string(n))));
        } catch (const std::exception& e) {
            if (last) break;  // torn by a crash mid-write: the samples before it stand
            throw std::runtime_error(path + " line " + std::to_string(n) + ": " + e.what());
        }
    }
    return out;
}

std::vector<std::string> histogramTensorNames(const std::vector<HistogramSample>& samples) {
    std::vector<std::string> names;
    for (const HistogramSample& s : samples)
        for (const ParameterSample& p : s.parameters)
            if (std::string name = p.layer + "." + p.parameter;
                std::find(names.begin(), names.end(), name) == names.end())
                names.push_back(std::move(name));
    return names;
}

RunHistograms readRunHistograms(const std::string& label, const std::string& runFolder) {
    RunHistograms r;
    r.label = label;
    if (runFolder.empty()) {
        r.missing = "no run folder recorded (a run of an older Strata, or one without checkpoints)";
        return r;
    }
    const std::filesystem::path file = std::filesystem::path(runFolder) / kHistogramFileName;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec)) {
        r.missing = std::string("no ") + kHistogramFileName + " in " + runFolder +
                    " (histograms are kept by runs trained in the workbench with histograms on)";
        return r;
    }
    try {
        r.samples = readHistogramFile(file.string());
        if (r.samples.empty()) r.missing = file.string() + " holds no samples";
    } catch (const std::exception& e) {
        r.missing = e.what();
    }
    return r;
}

HistogramComparison compareRunHistograms(const std::vector<RunHistograms>& runs, const std::string& tensor,
                                         bool gradients, int64_t step, int bins) {
    HistogramComparison c;
    c.tensor = tensor;
    c.gradients = gradients;
    std::vector<ValueHistogram> chosen;
    for (const RunHistograms& run : runs) {
        const ParameterSample* found = nullptr;
        int64_t at = -1;
        for (const HistogramSample& s : run.samples) {
            if (step >= 0 && s.step > step) break;  // samples are in step order
            for (const ParameterSample& p : s.parameters)
                if (p.layer + "." + p.parameter == tensor) {
                    found = &p;
                    at = s.step;
                }
        }
        c.steps.push_back(found ? at : -1);
        if (!run.missing.empty())
            c.missing.push_back(run.missing);
        else if (!found)
            c.missing.push_back(step >= 0 && !run.samples.empty() && run.samples.front().step > step
                                    ? "no sample at or before step " + std::to_string(step + 1)
                                    : "no tensor named '" + tensor + "'");
        else
            c.missing.emplace_back();
        chosen.push_back(found ? (gradients ? found->gradients : found->values) : ValueHistogram{});
    }
    c.shares = heatMap(chosen, bins);
    return c;
}

std::vector<LayerHealth> assessLayers(const HistogramSample& s) {
    // Per node: the RMS over all its trainable parameters' gradients (weights and biases together).
    std::map<int, LayerHealth> byNode;
    std::map<int, double> sumSq, count;
    std::vector<int> order;
    for (const ParameterSample& p : s.parameters) {
        if (!byNode.count(p.node)) {
            order.push_back(p.node);
            LayerHealth h;
            h.node = p.node;
            h.layer = p.layer;
            byNode[p.node] = h;
        }
        const ValueHistogram& g = p.gradients;
        if (g.nonFinite > 0) sumSq[p.node] = std::numeric_limits<double>::infinity();
        sumSq[p.node] += g.rms * g.rms * double(g.count);
        count[p.node] += double(g.count);
    }
    std::vector<double> rmsList;
    for (int node : order) {
        LayerHealth& h = byNode[node];
        h.gradientRms = count[node] > 0 ? std::sqrt(sumSq[node] / count[node]) : 0;
        if (std::isfinite(h.gradientRms)) rmsList.push_back(h.gradientRms);
    }
    const double mid = rmsList.empty() ? 0 : median(rmsList);
    char buf[200];
    for (int node : order) {
        LayerHealth& h = byNode[node];
        if (!std::isfinite(h.gradientRms) || (rmsList.size() > 1 && h.gradientRms > kExplodingRatio * mid)) {
            h.gradient = GradientHealth::Exploding;
            std::snprintf(buf, sizeof buf,
                          "exploding gradient: RMS %.3g, over %.0fx the layers' median %.3g; lower the learning rate "
                          "or set a gradient clip norm",
                          h.gradientRms, kExplodingRatio, mid);
            h.text = buf;
        } else if (h.gradientRms == 0 || (rmsList.size() > 1 && h.gradientRms < kVanishingRatio * mid)) {
            h.gradient = GradientHealth::Vanishing;
            std::snprintf(buf, sizeof buf,
                          "vanishing gradient: RMS %.3g, under %gx the layers' median %.3g; try a normalization "
                          "layer, a residual connection or another initialization",
                          h.gradientRms, kVanishingRatio, mid);
            h.text = buf;
        }
    }
    std::vector<LayerHealth> out;
    for (int node : order) out.push_back(byNode[node]);
    for (const ReluSample& r : s.relus) {
        LayerHealth h;
        h.node = r.node;
        h.layer = r.layer;
        h.deadFraction = r.deadFraction;
        h.dead = r.deadFraction >= kDeadReluFraction;
        if (h.dead) {
            std::snprintf(buf, sizeof buf,
                          "dead ReLU: %.0f%% of its %lld units gave 0 for the whole batch; lower the learning rate or "
                          "try LeakyReLU/GELU",
                          100 * r.deadFraction, static_cast<long long>(r.units));
            h.text = buf;
        }
        out.push_back(h);
    }
    return out;
}

HeatMap heatMap(const std::vector<ValueHistogram>& hs, int rows) {
    HeatMap m;
    m.rows = std::max(1, rows);
    m.columns = int(hs.size());
    bool any = false;
    for (const ValueHistogram& h : hs) {
        if (h.count == 0) continue;
        m.lo = any ? std::min(m.lo, h.lo) : h.lo;
        m.hi = any ? std::max(m.hi, h.hi) : h.hi;
        any = true;
    }
    m.cells.assign(size_t(m.rows) * size_t(m.columns), 0.0f);
    if (!any) return m;
    if (!(m.hi > m.lo)) {  // every value the same everywhere: one row holds it
        m.hi = m.lo + 1;
        m.lo -= 0;
    }
    const double rowWidth = (double(m.hi) - m.lo) / m.rows;
    for (int c = 0; c < m.columns; ++c) {
        const ValueHistogram& h = hs[size_t(c)];
        if (h.count == 0) continue;
        const int bins = int(h.counts.size());
        const double binWidth = (double(h.hi) - h.lo) / bins;
        for (int b = 0; b < bins; ++b) {
            const double n = h.counts[size_t(b)];
            if (n == 0) continue;
            const double a = h.lo + b * binWidth, z = a + binWidth;
            if (binWidth <= 0) {  // a zero-width histogram: its values sit at lo
                const int r = std::clamp(int((a - m.lo) / rowWidth), 0, m.rows - 1);
                m.cells[size_t(r) * size_t(m.columns) + size_t(c)] += float(n / double(h.count));
                continue;
            }
            const int r0 = std::clamp(int((a - m.lo) / rowWidth), 0, m.rows - 1);
            const int r1 = std::clamp(int((z - m.lo) / rowWidth), 0, m.rows - 1);
            for (int r = r0; r <= r1; ++r) {
                const double ra = m.lo + r * rowWidth, rz = ra + rowWidth;
                const double overlap = std::max(0.0, std::min(z, rz) - std::max(a, ra));
                m.cells[size_t(r) * size_t(m.columns) + size_t(c)] += float(n * overlap / binWidth / double(h.count));
            }
        }
    }
    return m;
}

HistogramHook::HistogramHook(Model& model, const Graph& graph, int every, int bins, Sink sink)
    : m_model(model), m_graph(graph), m_every(std::max(1, every)), m_bins(std::max(1, bins)), m_sink(std::move(sink)) {}

void HistogramHook::afterUpdate(const StepInput& in) {
    if (in.index % m_every != 0) return;
    const HistogramSample s = sample(in);
    if (m_sink) m_sink(s);
}

HistogramSample HistogramHook::sample(const StepInput& in) {
    HistogramSample s;
    s.step = in.index;
    s.epoch = in.epoch;
    Backend& backend = m_model.backend();
    auto host = [&](const Tensor& t) {
        m_host.resize(size_t(t.numel()));
        backend.toHost(t, m_host.data());
        return m_host.data();
    };
    auto name = [&](int id) {
        const Node* n = m_graph.node(id);
        return n ? n->name : "#" + std::to_string(id);
    };
    for (const Model::NamedParameter& np : m_model.namedParameters()) {
        const Parameter& p = *np.param;
        if (!p.trainable || !p.grad.defined()) continue;
        ParameterSample ps;
        ps.node = np.node;
        ps.layer = name(np.node);
        ps.parameter = p.name;
        ps.values = histogramOf(host(p.value), p.value.numel(), m_bins);
        ps.gradients = histogramOf(host(p.grad), p.grad.numel(), m_bins);
        s.parameters.push_back(std::move(ps));
    }
    // A unit is one position of a sample's output; dead when it is 0 (or below: a ReLU gives no negatives) in
    // every sample of the batch. The batch is the step's, so a unit alive only for rare inputs may read dead.
    const int64_t batch = int64_t(in.batch.size);
    for (int id : m_model.order()) {
        const Node* n = m_graph.node(id);
        if (!n || n->type != "ReLU" || batch < 1) continue;
        const Tensor* out = m_model.nodeOutput(id);
        if (!out || out->shape().rank() < 1 || out->shape()[0] < batch) continue;
        // A blocked layout pads channels to its block when they are not a multiple of it: a sample's units are
        // then not numel / N apart. Such an output is left out rather than read wrong.
        const int block = m_model.outputBlock(id);
        if (block > 0 && (out->shape().rank() < 2 || out->shape()[1] % block != 0)) continue;
        const int64_t units = out->numel() / out->shape()[0];
        const float* v = host(*out);
        // Sample by sample, in memory order: unit by unit across the batch missed the cache at every read (132 ms
        // a sample for the Fashion-MNIST CNN on a loaded machine).
        m_alive.assign(size_t(units), 0);
        for (int64_t b = 0; b < batch; ++b) {
            const float* sampleOut = v + b * units;
            for (int64_t u = 0; u < units; ++u) m_alive[size_t(u)] |= uint8_t(sampleOut[u] > 0.0f);
        }
        int64_t dead = 0;
        for (uint8_t a : m_alive) dead += !a;
        s.relus.push_back({id, n->name, units, units ? double(dead) / double(units) : 0.0});
    }
    return s;
}

}  // namespace strata
