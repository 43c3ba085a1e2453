// Optimizers over a Model's trainable parameters: SGD (momentum, Nesterov,
// weight decay), Adam and AdamW, each one fused backend op over the packed
// parameter block (Model::packedValues).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/graph/Model.h"
#include "core/graph/Project.h"

namespace strata {

class Optimizer {
public:
    Optimizer(Model& model, const TrainingSettings& settings);

    // One update with the given learning rate; `step` counts updates from 1 (Adam bias correction).
    void step(double learningRate);
    int64_t steps() const { return m_steps; }

    // Clips the global gradient norm to maxNorm; returns the norm before clipping (NaN/Inf propagate).
    double clipGradNorm(double maxNorm);
    double gradNorm();

    // Slots by "<slot>.<param name>" ("velocity.dense1.weight", "m.dense1.weight", "v....") and the step count.
    std::map<std::string, std::vector<float>> state();
    void loadState(const std::map<std::string, std::vector<float>>& state, int64_t steps);

private:
    struct Slot {
        std::string name;
        Parameter* param;
        Tensor a, b;  // SGD: a = velocity; Adam: a = m, b = v
    };
    Model& m_model;
    TrainingSettings m_settings;
    std::vector<Slot> m_slots;  // per-parameter views into the packed state blocks, for state()/loadState
    Tensor m_packedA, m_packedB;
    int64_t m_steps = 0;
};

}  // namespace strata
