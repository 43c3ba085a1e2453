// StepHooks: see StepHooks.h.
#include "core/train/StepHooks.h"

#include <cmath>
#include <sstream>

#include "core/graph/Model.h"

namespace strata {

PruningHook::PruningHook(Model& model, const PruningSettings& settings, Log log)
    : m_masks(model, settings), m_log(std::move(log)) {}

void PruningHook::afterUpdate(const StepInput& in) {
    if (m_masks.afterStep(in.index) && in.index == m_masks.settings().schedule.endStep)
        m_log("pruning: the masks reached the final sparsity at step " + std::to_string(in.index + 1));
}

DivergenceHook::DivergenceHook(Model& model, const Graph& graph, int classes,
                               std::function<std::string()> lastCheckpoint)
    : m_model(model), m_graph(graph), m_monitor(classes), m_lastCheckpoint(std::move(lastCheckpoint)) {}

void DivergenceHook::afterMetrics(const StepInput& in, const StepOutcome& out) {
    if (!std::isfinite(out.loss)) reportNonFiniteLoss(out.loss, in);
    if (std::string why = m_monitor.addLoss(out.loss); !why.empty()) reportDivergence(why, in);
    if (std::isfinite(out.gradNorm))
        if (std::string why = m_monitor.addGradNorm(out.gradNorm); !why.empty()) reportDivergence(why, in);
}

std::string DivergenceHook::nodeLabel(int id) const {
    const Node* n = m_graph.node(id);
    return n ? "'" + n->name + "' (" + n->type + ")" : "#" + std::to_string(id);
}

std::string DivergenceHook::lastCheckpointText() const {
    const std::string last = m_lastCheckpoint ? m_lastCheckpoint() : std::string();
    return last.empty() ? std::string() : "; the last good checkpoint is " + last;
}

void DivergenceHook::reportNonFiniteLoss(double loss, const StepInput& in) const {
    const int bad = m_model.firstNonFiniteNode();
    std::ostringstream msg;
    msg << "step " << (in.index + 1) << " (epoch " << in.epoch << "): the loss is "
        << (std::isnan(loss) ? "NaN" : "infinite");
    msg << (bad >= 0 ? "; the first layer whose output is not finite is " + nodeLabel(bad)
                     : "; every layer output is finite, so the loss itself overflowed");
    msg << lastCheckpointText();
    throw std::runtime_error(msg.str());
}

// A diverging run ends like a NaN one, with the layer whose gradient is largest (the one the explosion runs
// through) and what to change.
void DivergenceHook::reportDivergence(const std::string& why, const StepInput& in) const {
    std::ostringstream msg;
    msg << "step " << (in.index + 1) << " (epoch " << in.epoch << "): " << why;
    double worst = -1;
    std::string where;
    Backend& backend = m_model.backend();
    for (const auto& np : m_model.namedParameters()) {
        if (!np.param->grad.defined()) continue;
        const double norm = std::sqrt(backend.sumSquares(np.param->grad.f32(), np.param->grad.numel()));
        if (!(norm <= worst)) {
            worst = norm;
            where = nodeLabel(np.node) + " (parameter '" + np.param->name + "', gradient norm " + std::to_string(norm) +
                    ")";
        }
    }
    if (!where.empty()) msg << "; the largest gradient is in layer " << where;
    msg << "; lower the learning rate (now " << in.learningRate << ") or set a gradient clip norm";
    msg << lastCheckpointText();
    throw std::runtime_error(msg.str());
}

}  // namespace strata
