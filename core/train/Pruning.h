// Magnitude pruning while a model fine-tunes: the sparsity schedule (TF Model Optimization's
// PolynomialDecay) and PruningMasks, which hold a 0/1 mask per pruned weight in backend memory, recompute
// them from the weights' magnitudes on the schedule and multiply them into the weights after every
// optimizer step (Backend::mul), so pruned weights stay exactly zero. The Trainer's PruningHook calls afterStep; its
// checkpoints carry the masks ("mask.<param>") and state() (the schedule and where it stands), so a
// resumed run continues the same schedule.
//
// What is pruned: each layer's compressible weight (LayerType::compressibleWeight: a Conv2D's or a Dense's
// weight; biases, norms and embeddings are not), each to the target on its own (per layer) or all together
// under one magnitude threshold (global).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/graph/Project.h"
#include "core/tensor/Tensor.h"

namespace strata {

class Model;
struct Parameter;

// sparsity(step) = final + (initial - final) * (1 - (step - begin) / (end - begin))^power for begin <= step <=
// end; `initial` before begin, `final` after end. Masks are recomputed at steps begin, begin + frequency, ...
// while step <= end, and at end itself, so the final sparsity is reached whatever the frequency. A step is
// the index of an optimizer step of the run (0 for the first), counted by the Trainer's global step.
struct PruningSchedule {
    double initialSparsity = 0.0;
    double finalSparsity = 0.8;
    int64_t beginStep = 0;
    int64_t endStep = -1;  // < 0: three quarters of the run's steps (pruningForRun)
    int64_t frequency = 100;
    double power = 3.0;

    double sparsityAt(int64_t step) const;
    bool prunesAt(int64_t step) const;
    // Throws std::invalid_argument naming the field: sparsities outside [0, 1), initial above final,
    // end before begin, frequency < 1, power <= 0.
    void check() const;
    bool operator==(const PruningSchedule&) const = default;
};

enum class PruningScope { PerLayer, Global };
const char* pruningScopeName(PruningScope scope);  // "per-layer", "global"
PruningScope parsePruningScope(const std::string& text);

struct PruningSettings {
    PruningSchedule schedule;
    PruningScope scope = PruningScope::PerLayer;
    bool operator==(const PruningSettings&) const = default;
};

// The settings for a run of `totalSteps` optimizer steps: an end step < 0 becomes three quarters of them (the
// last quarter fine-tunes at the final sparsity). Throws std::invalid_argument when the schedule ends after
// the run's last step, so the final sparsity would never be reached.
PruningSettings pruningForRun(PruningSettings settings, int64_t totalSteps);

Json pruningSettingsToJson(const PruningSettings& settings);
// Throws std::invalid_argument naming the field.
PruningSettings pruningSettingsFromJson(const Json& json);

// The names ("conv1.weight") of the weights magnitude pruning applies to, in topological order (not a frozen
// node's: Node::trainable).
std::vector<std::string> prunableWeights(const Graph& graph);

// Zeros among the values of each prunable weight, from host weights (a checkpoint's, an export's).
struct LayerSparsity {
    std::string name;  // "conv1.weight"
    int64_t zeros = 0, total = 0;
    double sparsity() const { return total ? static_cast<double>(zeros) / static_cast<double>(total) : 0.0; }
};
std::vector<LayerSparsity> weightSparsity(const Graph& graph, const std::map<std::string, std::vector<float>>& weights);
// Zeros over every prunable weight together.
double overallSparsity(const std::vector<LayerSparsity>& layers);

// Masks that keep, per group (one weight, or all of them under Global), the largest-magnitude weights, as
// many as round(count * (1 - sparsity)); ties broken by position, so the result is deterministic.
std::map<std::string, std::vector<float>> magnitudeMasks(const std::map<std::string, std::vector<float>>& weights,
                                                         const std::vector<std::string>& names, double sparsity,
                                                         PruningScope scope);

class PruningMasks {
public:
    // Masks of ones for every prunable weight of `model`; throws std::invalid_argument when the schedule is
    // invalid or the graph has no weight to prune.
    PruningMasks(Model& model, PruningSettings settings);
    ~PruningMasks();
    PruningMasks(const PruningMasks&) = delete;
    PruningMasks& operator=(const PruningMasks&) = delete;

    // After optimizer step `step` (0-based): recomputes the masks when the schedule prunes at this step,
    // then multiplies every mask into its weight. Returns whether the masks changed.
    bool afterStep(int64_t step);
    // Recomputes the masks for `sparsity` from the current weights and applies them.
    void prune(double sparsity);
    void apply();

    const PruningSettings& settings() const { return m_settings; }
    // The sparsity the masks were last computed for (0 before the first pruning step).
    double currentSparsity() const { return m_sparsity; }
    bool reachedFinalSparsity() const;

    // For checkpoints: the masks by weight name, and the settings plus the current sparsity.
    std::map<std::string, std::vector<float>> masks() const;
    Json state() const;
    // Restores masks and sparsity saved by masks() and state(); throws std::runtime_error naming a missing
    // or mis-sized mask.
    void restore(const std::map<std::string, std::vector<float>>& masks, const Json& state);

private:
    struct Entry {
        std::string name;
        Parameter* param = nullptr;
        Tensor mask;
    };
    Model& m_model;
    PruningSettings m_settings;
    std::vector<Entry> m_entries;
    double m_sparsity = 0.0;
};

}  // namespace strata
