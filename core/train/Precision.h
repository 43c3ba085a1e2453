// Precision: a run's arithmetic precision and what it asks of the step. The precision is the backend's
// (training.precision, checked by checkBackendFor): GEMM and convolution inputs rounded to bf16 or fp16, float32
// accumulation and float32 weights. fp16's 5-bit exponent underflows small gradients, so an fp16 run scales its
// loss gradient up before backward and unscales the gradients after it (DynamicLossScale.h): a step whose
// gradients are not all finite is skipped and the scale backs off. The scale travels in checkpoints.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/backend/Backend.h"
#include "core/graph/Settings.h"
#include "core/train/DynamicLossScale.h"

namespace strata {

class Model;
struct StepEvent;

class Precision {
public:
    // The backend's precision; an fp16 one scales the loss from initialLossScale, doubling it after
    // growthInterval finite steps in a row.
    Precision(Backend& backend, float initialLossScale, int growthInterval);

    ComputePrecision compute() const { return m_precision; }
    bool scalesLoss() const { return m_scaler != nullptr; }
    // The line the run logs at its start; empty for fp32.
    std::string description() const;

    // The factor of this step's loss gradient (1 without scaling).
    float lossScale() const { return m_scaler ? m_scaler->scale() : 1.0f; }
    // After backward, with the gradients of a loss scaled by lossScale: unscales every trainable gradient and
    // tells the scale whether all are finite. Returns whether the optimizer step may be applied (always,
    // without scaling).
    bool unscaleGradients(Model& model, float lossScale);

    // The checkpoint's trainer state: the precision and the scale. A run saved in another precision (no scale)
    // starts from the initial scale.
    void writeState(Json& state) const;
    void readState(const Json& state);

    // A step's event fields (nothing without scaling) and the line logged when its update was skipped.
    void describeStep(StepEvent& event, float lossScale, bool applied) const;
    std::string skippedStepLine(int64_t step, float lossScale) const;

private:
    Backend& m_backend;
    ComputePrecision m_precision;
    std::unique_ptr<DynamicLossScale> m_scaler;  // fp16 only
};

}  // namespace strata
