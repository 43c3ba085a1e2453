// BatchLoss: the training loss (training.loss) of a batch of logits against its class labels, the logits'
// gradient for backward, and the batch's metrics (loss sum and correct predictions). The one implementation
// of the loss: the Trainer's steps and validation and Profile's steps use it.
//
// Cross-entropy reads the labels on the device; MSE and BCE train against one-hot targets of the labels,
// made from the batch's host labels (no device round trip). Tasks other than classification (Task.h) train against
// the batch's float targets (Batch::targets), uploaded here; their metrics count no correct predictions (the task's
// own metrics are TaskMetrics', over a whole split). Buffers are allocated once, for a whole batch.
#pragma once

#include <cstdint>
#include <vector>

#include "core/backend/Backend.h"
#include "core/graph/Settings.h"
#include "core/tensor/Tensor.h"

namespace strata {

struct Batch;

class BatchLoss {
public:
    // For batches of up to maxBatch samples whose logits are outputShape each (per sample); numClasses: the
    // columns the metrics compare. Throws OutOfMemoryError naming the loss buffers.
    // huberDelta: the Huber loss's.
    BatchLoss(Backend& backend, LossKind kind, const Shape& outputShape, int64_t maxBatch, int numClasses,
              TaskKind task = TaskKind::Classification, float huberDelta = 1.0f);

    // Fills the per-sample losses (and, when withGrad, the logits' gradient, times gradScale / batch size).
    // Nothing is read back here: the loss sum comes with metrics(), once the step's work is called.
    void compute(const Tensor& logits, const Batch& batch, const Tensor& labels, bool withGrad, float gradScale = 1.0f);
    // The logits' gradient of the last compute with withGrad, as [rows, ...outputShape].
    Tensor gradient(int64_t rows) const { return m_dlogits.view(m_outputShape.withBatch(rows)); }
    // The batch's loss sum (of the last compute) and correct predictions: the one point per step where the
    // host waits for the device.
    Backend::StepMetrics metrics(const Tensor& logits, const Batch& batch, const Tensor& labels);

private:
    void oneHot(const Batch& batch, int cols);
    void uploadTargets(const Batch& batch, int cols);

    Backend& m_backend;
    LossKind m_kind;
    TaskKind m_task;
    float m_huberDelta;
    Shape m_outputShape;
    int m_numClasses;
    Tensor m_losses, m_dlogits;
    Tensor m_targets;  // MSE and BCE
    std::vector<float> m_targetsHost;
};

}  // namespace strata
