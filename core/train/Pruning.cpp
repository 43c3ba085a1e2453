#include "core/train/Pruning.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/backend/Backend.h"
#include "core/graph/Model.h"

namespace strata {

namespace {

// How many of `count` values a sparsity zeroes.
int64_t prunedCount(int64_t count, double sparsity) {
    return std::clamp<int64_t>(std::llround(static_cast<double>(count) * sparsity), 0, count);
}

}  // namespace

// ---- schedule ----------------------------------------------------------------------------------

double PruningSchedule::sparsityAt(int64_t step) const {
    if (step <= beginStep) return initialSparsity;
    if (step >= endStep) return finalSparsity;
    const double progress = static_cast<double>(step - beginStep) / static_cast<double>(endStep - beginStep);
    return finalSparsity + (initialSparsity - finalSparsity) * std::pow(1.0 - progress, power);
}

bool PruningSchedule::prunesAt(int64_t step) const {
    if (step < beginStep || step > endStep) return false;
    return step == endStep || (step - beginStep) % frequency == 0;
}

void PruningSchedule::check() const {
    auto fraction = [](const char* name, double v) {
        if (!(v >= 0.0 && v < 1.0))
            throw std::invalid_argument(std::string(name) + " must be in [0, 1), got " + std::to_string(v));
    };
    fraction("initial sparsity", initialSparsity);
    fraction("final sparsity", finalSparsity);
    if (initialSparsity > finalSparsity)
        throw std::invalid_argument("the initial sparsity " + std::to_string(initialSparsity) +
                                    " is above the final sparsity " + std::to_string(finalSparsity));
    if (beginStep < 0) throw std::invalid_argument("the begin step must be >= 0, got " + std::to_string(beginStep));
    if (endStep < beginStep)
        throw std::invalid_argument("the end step " + std::to_string(endStep) + " is before the begin step " +
                                    std::to_string(beginStep));
    if (frequency < 1) throw std::invalid_argument("the frequency must be >= 1, got " + std::to_string(frequency));
    if (!(power > 0.0)) throw std::invalid_argument("the power must be > 0, got " + std::to_string(power));
}

const char* pruningScopeName(PruningScope scope) { return scope == PruningScope::Global ? "global" : "per-layer"; }

PruningScope parsePruningScope(const std::string& text) {
    if (text == "per-layer" || text == "layer") return PruningScope::PerLayer;
    if (text == "global") return PruningScope::Global;
    throw std::invalid_argument("unknown pruning scope '" + text + "' (per-layer or global)");
}

PruningSettings pruningForRun(PruningSettings settings, int64_t totalSteps) {
    PruningSchedule& s = settings.schedule;
    if (s.endStep < 0) s.endStep = std::max(s.beginStep, totalSteps * 3 / 4);
    if (s.endStep >= totalSteps)
        throw std::invalid_argument("pruning: the schedule ends at step " + std::to_string(s.endStep) +
                                    " but the run has " + std::to_string(totalSteps) +
                                    " steps, so the final sparsity would never be reached; end it earlier or train "
                                    "for more epochs");
    s.check();
    return settings;
}

Json pruningSettingsToJson(const PruningSettings& s) {
    return Json{{"schedule", "polynomial"},
                {"initial_sparsity", s.schedule.initialSparsity},
                {"final_sparsity", s.schedule.finalSparsity},
                {"begin_step", s.schedule.beginStep},
                {"end_step", s.schedule.endStep},
                {"frequency", s.schedule.frequency},
                {"power", s.schedule.power},
                {"scope", pruningScopeName(s.scope)}};
}

PruningSettings pruningSettingsFromJson(const Json& j) {
    PruningSettings s;
    try {
        if (j.value("schedule", std::string("polynomial")) != "polynomial")
            throw std::invalid_argument("unknown schedule '" + j.at("schedule").get<std::string>() + "'");
        s.schedule.initialSparsity = j.at("initial_sparsity").get<double>();
        s.schedule.finalSparsity = j.at("final_sparsity").get<double>();
        s.schedule.beginStep = j.at("begin_step").get<int64_t>();
        s.schedule.endStep = j.at("end_step").get<int64_t>();
        s.schedule.frequency = j.at("frequency").get<int64_t>();
        s.schedule.power = j.at("power").get<double>();
        s.scope = parsePruningScope(j.at("scope").get<std::string>());
    } catch (const Json::exception& e) {
        throw std::invalid_argument(std::string("pruning settings: ") + e.what());
    }
    s.schedule.check();
    return s;
}

// ---- masks from magnitudes -------------------------------------------------------------------

std::vector<std::string> prunableWeights(const Graph& graph) {
    std::vector<std::string> names;
    for (int id : graph.topologicalOrder()) {
        const LayerType* type = graph.layerType(id);
        const std::string weight = type ? type->compressibleWeight().weight : std::string();
        // A frozen node's weights are kept as they are (Node::trainable), pruning's masks included.
        if (!weight.empty() && graph.node(id)->trainable) names.push_back(graph.node(id)->name + "." + weight);
    }
    return names;
}

std::vector<LayerSparsity> weightSparsity(const Graph& graph,
                                          const std::map<std::string, std::vector<float>>& weights) {
    std::vector<LayerSparsity> out;
    for (const std::string& name : prunableWeights(graph)) {
        auto it = weights.find(name);
        if (it == weights.end()) continue;
        LayerSparsity s;
        s.name = name;
        s.total = static_cast<int64_t>(it->second.size());
        s.zeros = std::count(it->second.begin(), it->second.end(), 0.0f);
        out.push_back(s);
    }
    return out;
}

double overallSparsity(const std::vector<LayerSparsity>& layers) {
    int64_t zeros = 0, total = 0;
    for (const LayerSparsity& l : layers) zeros += l.zeros, total += l.total;
    return total ? static_cast<double>(zeros) / static_cast<double>(total) : 0.0;
}

std::map<std::string, std::vector<float>> magnitudeMasks(const std::map<std::string, std::vector<float>>& weights,
                                                         const std::vector<std::string>& names, double sparsity,
                                                         PruningScope scope) {
    std::vector<const std::vector<float>*> values;
    std::map<std::string, std::vector<float>> masks;
    for (const std::string& name : names) {
        auto it = weights.find(name);
        if (it == weights.end()) throw std::runtime_error("pruning: weights for '" + name + "' are missing");
        values.push_back(&it->second);
        masks[name].assign(it->second.size(), 1.0f);
    }
    // Zeroes the `k` smallest magnitudes among `group` (pairs of weight index and element index).
    auto pruneSmallest = [&](std::vector<std::pair<uint32_t, uint32_t>>& group, int64_t k) {
        if (k <= 0) return;
        auto magnitude = [&](const std::pair<uint32_t, uint32_t>& e) {
            return std::fabs((*values[e.first])[e.second]);
        };
        auto less = [&](const auto& a, const auto& b) {
            const float ma = magnitude(a), mb = magnitude(b);
            return ma < mb || (ma == mb && a < b);
        };
        std::nth_element(group.begin(), group.begin() + (k - 1), group.end(), less);
        for (int64_t i = 0; i < k; ++i) {
            const auto& e = group[static_cast<size_t>(i)];
            masks[names[e.first]][e.second] = 0.0f;
        }
    };
    std::vector<std::pair<uint32_t, uint32_t>> group;
    for (size_t w = 0; w < values.size(); ++w) {
        for (uint32_t i = 0; i < values[w]->size(); ++i) group.emplace_back(static_cast<uint32_t>(w), i);
        if (scope == PruningScope::PerLayer) {
            pruneSmallest(group, prunedCount(static_cast<int64_t>(group.size()), sparsity));
            group.clear();
        }
    }
    if (scope == PruningScope::Global) pruneSmallest(group, prunedCount(static_cast<int64_t>(group.size()), sparsity));
    return masks;
}

// ---- PruningMasks --------------------------------------------------------------------------------

PruningMasks::PruningMasks(Model& model, PruningSettings settings) : m_model(model), m_settings(settings) {
    m_settings.schedule.check();
    const std::vector<std::string> names = prunableWeights(model.graph());
    Backend& backend = model.backend();
    for (const Model::NamedParameter& np : model.namedParameters()) {
        if (std::find(names.begin(), names.end(), np.name) == names.end()) continue;
        Entry e;
        e.name = np.name;
        e.param = np.param;
        e.mask = backend.empty(np.param->value.shape());
        backend.fill(e.mask.f32(), 1.0f, e.mask.numel());
        m_entries.push_back(std::move(e));
    }
    if (m_entries.empty()) throw std::invalid_argument("pruning: the graph has no Conv2D or Dense weight to prune");
}

PruningMasks::~PruningMasks() = default;

bool PruningMasks::afterStep(int64_t step) {
    const bool update = m_settings.schedule.prunesAt(step);
    if (update) {
        prune(m_settings.schedule.sparsityAt(step));
    } else {
        apply();
    }
    return update;
}

void PruningMasks::prune(double sparsity) {
    Backend& backend = m_model.backend();
    std::map<std::string, std::vector<float>> weights;
    std::vector<std::string> names;
    for (const Entry& e : m_entries) {
        std::vector<float>& host = weights[e.name];
        host.resize(static_cast<size_t>(e.param->value.numel()));
        backend.toHost(e.param->value, host.data());
        names.push_back(e.name);
    }
    const auto masks = magnitudeMasks(weights, names, sparsity, m_settings.scope);
    for (Entry& e : m_entries) backend.copyFromHost(e.mask.raw(), masks.at(e.name).data(), e.mask.bytes());
    m_sparsity = sparsity;
    apply();
}

void PruningMasks::apply() {
    Backend& backend = m_model.backend();
    for (Entry& e : m_entries) backend.mul(e.param->value.f32(), e.param->value.f32(), e.mask.f32(), e.mask.numel());
}

bool PruningMasks::reachedFinalSparsity() const { return m_sparsity >= m_settings.schedule.finalSparsity - 1e-12; }

std::map<std::string, std::vector<float>> PruningMasks::masks() const {
    std::map<std::string, std::vector<float>> out;
    for (const Entry& e : m_entries) {
        std::vector<float>& host = out[e.name];
        host.resize(static_cast<size_t>(e.mask.numel()));
        m_model.backend().toHost(e.mask, host.data());
    }
    return out;
}

Json PruningMasks::state() const {
    Json j = pruningSettingsToJson(m_settings);
    j["current_sparsity"] = m_sparsity;
    return j;
}

void PruningMasks::restore(const std::map<std::string, std::vector<float>>& masks, const Json& state) {
    m_settings = pruningSettingsFromJson(state);
    for (Entry& e : m_entries) {
        auto it = masks.find(e.name);
        if (it == masks.end())
            throw std::runtime_error("the checkpoint of a pruning run has no mask for '" + e.name + "'");
        if (static_cast<int64_t>(it->second.size()) != e.mask.numel())
            throw std::runtime_error("the pruning mask of '" + e.name + "' has " + std::to_string(it->second.size()) +
                                     " values, the weight " + std::to_string(e.mask.numel()));
        m_model.backend().copyFromHost(e.mask.raw(), it->second.data(), e.mask.bytes());
    }
    m_sparsity = state.value("current_sparsity", 0.0);
    apply();
}

}  // namespace strata
