// Learning-rate schedules: the one formula used by the Trainer and by the
// GUI's preview plot. Steps are 0-based global steps.
#pragma once

#include <cstdint>

#include "core/graph/Project.h"

namespace strata {

// constant | step (x stepGamma every stepEpochs epochs) | cosine (to minLearningRate over the run) |
// one_cycle (cosine from learningRate/25 up to learningRate over the first 30%, then down to learningRate/1e4),
// combined with a linear warm-up over warmupSteps (from 0 to the scheduled rate).
double learningRateAt(const TrainingSettings& settings, int64_t step, int64_t stepsPerEpoch);

}  // namespace strata
