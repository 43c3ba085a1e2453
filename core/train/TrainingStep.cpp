// TrainingStep: see TrainingStep.h.
#include "core/train/TrainingStep.h"

#include "core/data/DataLoader.h"
#include "core/graph/Model.h"
#include "core/train/BatchLoss.h"
#include "core/train/DataParallel.h"
#include "core/train/Optimizer.h"
#include "core/train/Precision.h"

namespace strata {

TrainingStep::TrainingStep(Model& model, Optimizer& optimizer, BatchLoss& loss, Precision& precision,
                           DataParallel& parallel, double clipNorm)
    : m_model(model),
      m_optimizer(optimizer),
      m_loss(loss),
      m_precision(precision),
      m_parallel(parallel),
      m_clipNorm(clipNorm) {}

StepOutcome TrainingStep::run(const StepInput& in, const std::function<void()>& inputConsumed) {
    const Batch& batch = in.batch;
    StepOutcome out;
    out.samples = m_parallel.globalSamples(batch);
    // Data parallel, a rank may have no sample of a small last global batch; it still joins the collectives.
    const bool empty = batch.size == 0;
    const Tensor* logits = empty ? nullptr : &m_model.forward(in.input, true, in.seed, batch.first);
    phase(StepPhase::Forward);
    out.lossScale = m_precision.lossScale();
    if (!empty) m_loss.compute(*logits, batch, in.labels, true, out.lossScale * m_parallel.lossShare(batch));
    phase(StepPhase::Loss);
    m_model.zeroGrad();
    phase(StepPhase::ZeroGrad);
    m_parallel.beginBackward(batch);
    if (!empty)
        m_model.backward(m_loss.gradient(batch.size));
    else if (m_parallel.idlesOnEmptyShard())
        m_model.idleStep(in.seed);
    if (inputConsumed) inputConsumed();
    m_parallel.finishBackward();
    phase(StepPhase::Backward);
    double applyWith = in.learningRate;
    out.haveGradients = m_parallel.exchange(in.learningRate, applyWith);
    out.applied = out.haveGradients && m_precision.unscaleGradients(m_model, out.lossScale);
    // The global gradient norm, for the divergence check, where clipping measures it anyway: measuring it
    // otherwise would add a second device wait to every step (the loss check covers those runs).
    if (out.applied && (!empty || m_parallel.updatesOnEmptyShard())) {
        if (m_clipNorm > 0) out.gradNorm = m_optimizer.clipGradNorm(m_clipNorm);
        m_optimizer.step(applyWith);
    }
    m_parallel.afterUpdate(in.index, batch);
    for (StepHook* h : m_hooks) h->afterUpdate(in);
    phase(StepPhase::Update);
    // The step's whole work has been called; now its metrics are read back. A non-finite loss therefore stops
    // the run after its update, but the layer outputs a hook examines are still this step's (the backward pass
    // and the update do not write them).
    if (!empty) out.metrics = m_loss.metrics(*logits, batch, in.labels);
    m_parallel.reduceMetrics(out.metrics);
    out.loss = out.metrics.lossSum / static_cast<double>(out.samples);
    phase(StepPhase::Metrics);
    for (StepHook* h : m_hooks) h->afterMetrics(in, out);
    return out;
}

}  // namespace strata
