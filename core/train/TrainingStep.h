// TrainingStep: one optimizer step on one batch, the same for every caller (the Trainer's epochs, Profile's
// timed steps): forward -> loss -> zero the gradients -> backward -> the ranks' exchange (DataParallel.h) ->
// unscale (Precision.h) -> clip -> optimizer update -> hooks -> the step's metrics read back and summed over
// the ranks -> hooks. The parts it calls each do one job; it holds only the order. The epoch loop, events,
// checkpoints and requests are the Trainer's.
//
// Hooks (StepHooks.h) are small objects the step calls at two points: after the update (pruning masks) and
// after the metrics (the divergence checks, which may end the run by throwing).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "core/backend/Backend.h"

namespace strata {

class BatchLoss;
class DataParallel;
class Model;
class Optimizer;
class Precision;
struct Batch;

struct StepInput {
    const Batch& batch;    // this rank's shard of the global batch (host side: sizes, labels)
    const Tensor& input;   // the batch staged in backend memory
    const Tensor& labels;  // in backend memory
    int64_t index = 0;     // the run's step, 0-based (pruning schedules, local SGD's averaging)
    int epoch = 0;         // 1-based, for messages
    double learningRate = 0;
    uint64_t seed = 0;  // dropout's for this step
};

struct StepOutcome {
    Backend::StepMetrics metrics;  // loss sum and correct predictions over the global batch
    int64_t samples = 0;           // in the global batch
    double loss = 0;               // mean over the global batch
    float lossScale = 1.0f;        // the factor the loss gradient was scaled by (fp16)
    bool haveGradients = true;     // false: nothing to apply (async's first step of an epoch)
    bool applied = false;          // the update was applied (not skipped for non-finite fp16 gradients)
    double gradNorm = std::numeric_limits<double>::quiet_NaN();  // measured where clipping measures it
};

class StepHook {
public:
    virtual ~StepHook() = default;
    // After the optimizer update (applied or skipped), before the metrics are read back.
    virtual void afterUpdate(const StepInput&) {}
    // After the step's metrics were read back and summed; throws to end the run.
    virtual void afterMetrics(const StepInput&, const StepOutcome&) {}
};

// Dropout's seed for step `index` (0-based) of a run seeded `runSeed`, so that the same step of a run draws the
// same masks whoever runs it.
inline uint64_t stepSeed(uint64_t runSeed, int64_t index) { return dropoutHash(runSeed, static_cast<uint64_t>(index)); }

// A step's phases in the order they run, for a phase hook (Profile times them).
enum class StepPhase { Forward, Loss, ZeroGrad, Backward, Update, Metrics };
constexpr size_t kStepPhases = 6;

class TrainingStep {
public:
    // clipNorm: training.clip_norm (0: no clipping).
    TrainingStep(Model& model, Optimizer& optimizer, BatchLoss& loss, Precision& precision, DataParallel& parallel,
                 double clipNorm);

    // Called in the order added; not owned.
    void addHook(StepHook* hook) { m_hooks.push_back(hook); }
    // Called as each phase's work has been called (not necessarily done on an asynchronous device).
    using PhaseHook = std::function<void(StepPhase)>;
    void setPhaseHook(PhaseHook hook) { m_phaseHook = std::move(hook); }

    // One step. inputConsumed, when given, is called once every op reading the step's input and labels has been
    // called: the next batch may be staged into their buffers from then on, behind the rest of the step.
    StepOutcome run(const StepInput& in, const std::function<void()>& inputConsumed = {});

private:
    void phase(StepPhase p) {
        if (m_phaseHook) m_phaseHook(p);
    }

    Model& m_model;
    Optimizer& m_optimizer;
    BatchLoss& m_loss;
    Precision& m_precision;
    DataParallel& m_parallel;
    double m_clipNorm;
    std::vector<StepHook*> m_hooks;
    PhaseHook m_phaseHook;
};

}  // namespace strata
