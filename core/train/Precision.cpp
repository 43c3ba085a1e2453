// Precision: see Precision.h.
#include "core/train/Precision.h"

#include <sstream>

#include "core/graph/Model.h"
#include "core/train/TrainingObserver.h"

namespace strata {

namespace {

std::string formatScale(double scale) {
    std::ostringstream s;
    s << scale;
    return s.str();
}

}  // namespace

Precision::Precision(Backend& backend, float initialLossScale, int growthInterval)
    : m_backend(backend), m_precision(backend.computePrecision()) {
    if (m_precision == ComputePrecision::F16)
        m_scaler = std::make_unique<DynamicLossScale>(initialLossScale, 2.0f, 0.5f, growthInterval);
}

std::string Precision::description() const {
    if (m_precision == ComputePrecision::F32) return {};
    const std::string name = computePrecisionName(m_precision);
    return "precision " + name + ": GEMM and convolution inputs rounded to " + name +
           ", float32 accumulation and float32 weights" +
           (m_scaler ? ", dynamic loss scaling from " + formatScale(m_scaler->scale()) : std::string());
}

bool Precision::unscaleGradients(Model& model, float lossScale) {
    if (!m_scaler) return true;
    const Tensor& g = model.packedGradients();
    bool finite = true;
    if (g.defined()) {  // every trainable gradient, in one block
        m_backend.scale(g.f32(), 1.0f / lossScale, g.numel());
        finite = m_backend.allFinite(g.f32(), g.numel());
    }
    return m_scaler->update(finite);
}

void Precision::writeState(Json& state) const {
    state["precision"] = computePrecisionName(m_precision);
    if (!m_scaler) return;
    state["loss_scale"] = m_scaler->scale();
    state["loss_scale_good_steps"] = m_scaler->goodSteps();
    state["skipped_steps"] = m_scaler->skippedSteps();
}

void Precision::readState(const Json& state) {
    if (m_scaler && state.contains("loss_scale"))
        m_scaler->restore(state["loss_scale"].get<float>(), state.value("loss_scale_good_steps", 0),
                          state.value("skipped_steps", int64_t(0)));
}

void Precision::describeStep(StepEvent& event, float lossScale, bool applied) const {
    if (!m_scaler) return;
    event.lossScale = lossScale;
    event.skipped = !applied;
    event.skippedSteps = m_scaler->skippedSteps();
}

std::string Precision::skippedStepLine(int64_t step, float lossScale) const {
    return "step " + std::to_string(step) + ": fp16 gradients are not finite at loss scale " + formatScale(lossScale) +
           "; update skipped, loss scale now " + formatScale(m_scaler ? m_scaler->scale() : 1.0f);
}

}  // namespace strata
