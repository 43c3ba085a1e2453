// StepHooks: the small objects the training step calls around its update (TrainingStep.h):
//   - PruningHook: magnitude pruning while training (Pruning.h); after every update it recomputes the masks on
//     the schedule and multiplies them into the weights, so pruned weights stay exactly zero;
//   - DivergenceHook: after the step's metrics, ends the run (by throwing) when the loss is not finite, naming
//     the first layer whose output is not, or when the run diverges without reaching NaN (Divergence.h),
//     naming the layer with the largest gradient. Both messages give the step, the epoch and the last good
//     checkpoint.
#pragma once

#include <functional>
#include <string>

#include "core/train/Divergence.h"
#include "core/train/Pruning.h"
#include "core/train/TrainingStep.h"

namespace strata {

class Backend;
class Graph;
class Model;

class PruningHook : public StepHook {
public:
    using Log = std::function<void(const std::string&)>;
    // Throws std::invalid_argument as PruningMasks does (an invalid schedule, nothing to prune).
    PruningHook(Model& model, const PruningSettings& settings, Log log);

    PruningMasks& masks() { return m_masks; }
    const PruningMasks& masks() const { return m_masks; }
    void afterUpdate(const StepInput& in) override;

private:
    PruningMasks m_masks;
    Log m_log;
};

class DivergenceHook : public StepHook {
public:
    // graph: the project's, whose node names the messages use; lastCheckpoint: the last good checkpoint's file
    // (empty: none yet).
    DivergenceHook(Model& model, const Graph& graph, int classes, std::function<std::string()> lastCheckpoint);

    DivergenceMonitor& monitor() { return m_monitor; }
    const DivergenceMonitor& monitor() const { return m_monitor; }
    void afterMetrics(const StepInput& in, const StepOutcome& out) override;

private:
    [[noreturn]] void reportNonFiniteLoss(double loss, const StepInput& in) const;
    [[noreturn]] void reportDivergence(const std::string& why, const StepInput& in) const;
    std::string nodeLabel(int id) const;
    std::string lastCheckpointText() const;

    Model& m_model;
    const Graph& m_graph;
    DivergenceMonitor m_monitor;
    std::function<std::string()> m_lastCheckpoint;
};

}  // namespace strata
