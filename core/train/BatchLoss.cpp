// BatchLoss: see BatchLoss.h.
#include "core/train/BatchLoss.h"

#include <stdexcept>
#include <string>

#include "core/data/DataLoader.h"
#include "core/graph/Task.h"

namespace strata {

BatchLoss::BatchLoss(Backend& backend, LossKind kind, const Shape& outputShape, int64_t maxBatch, int numClasses,
                     TaskKind task, float huberDelta)
    : m_backend(backend),
      m_kind(kind),
      m_task(task),
      m_huberDelta(huberDelta),
      m_outputShape(outputShape),
      m_numClasses(numClasses) {
    if (!taskAllows(task, kind))
        throw std::invalid_argument(taskSettingsProblem(
            [&] {
                DatasetSettings d;
                d.task = task;
                return d;
            }(),
            [&] {
                TrainingSettings t;
                t.loss = kind;
                return t;
            }()));
    try {
        m_losses = backend.empty(Shape{maxBatch});
        m_dlogits = backend.empty(outputShape.withBatch(maxBatch));
    } catch (const OutOfMemoryError& e) {
        throw OutOfMemoryError("the loss buffers for batch " + std::to_string(maxBatch) + ": " + e.what(), e.bytes());
    }
}

void BatchLoss::compute(const Tensor& logits, const Batch& batch, const Tensor& labels, bool withGrad,
                        float gradScale) {
    const int rows = static_cast<int>(batch.size);
    const int cols = static_cast<int>(m_outputShape.numel());
    const float scale = gradScale / static_cast<float>(batch.size);
    float* dl = withGrad ? m_dlogits.f32() : nullptr;
    if (m_kind == LossKind::CrossEntropy) {
        m_backend.softmaxCrossEntropy(m_losses.f32(), dl, logits.f32(), labels.i32(), rows, cols, scale);
        return;
    }
    if (taskHasClasses(m_task))
        oneHot(batch, cols);
    else
        uploadTargets(batch, cols);
    if (m_kind == LossKind::Mae || m_kind == LossKind::Huber)
        m_backend.robustLoss(m_losses.f32(), dl, logits.f32(), m_targets.f32(), rows, cols,
                             m_kind == LossKind::Mae ? 0.0f : m_huberDelta, scale);
    else if (m_kind == LossKind::Mse)
        m_backend.mseLoss(m_losses.f32(), dl, logits.f32(), m_targets.f32(), rows, cols, scale);
    else
        m_backend.bceWithLogits(m_losses.f32(), dl, logits.f32(), m_targets.f32(), rows, cols, scale);
}

Backend::StepMetrics BatchLoss::metrics(const Tensor& logits, const Batch& batch, const Tensor& labels) {
    return m_backend.stepMetrics(m_losses.f32(), logits.f32(), taskHasClasses(m_task) ? labels.i32() : nullptr,
                                 static_cast<int>(batch.size), m_numClasses);
}

void BatchLoss::uploadTargets(const Batch& batch, int cols) {
    const int64_t n = batch.size;
    if (static_cast<int64_t>(batch.targets.size()) != n * cols)
        throw std::invalid_argument("the batch holds " + std::to_string(batch.targets.size()) + " targets for " +
                                    std::to_string(n) + " samples of " + std::to_string(cols) +
                                    " outputs: the data's targets and the model's output differ in size");
    if (!m_targets.defined() || m_targets.numel() < n * cols) m_targets = m_backend.empty(Shape{n, cols});
    m_backend.copyFromHost(m_targets.raw(), batch.targets.data(), batch.targets.size() * sizeof(float));
}

void BatchLoss::oneHot(const Batch& batch, int cols) {
    const int64_t n = batch.size;
    if (!m_targets.defined() || m_targets.numel() < n * cols) m_targets = m_backend.empty(Shape{n, cols});
    m_targetsHost.assign(static_cast<size_t>(n * cols), 0.0f);
    for (int64_t r = 0; r < n; ++r)
        m_targetsHost[static_cast<size_t>(r * cols + batch.labels[static_cast<size_t>(r)])] = 1.0f;
    m_backend.copyFromHost(m_targets.raw(), m_targetsHost.data(), m_targetsHost.size() * sizeof(float));
}

}  // namespace strata
