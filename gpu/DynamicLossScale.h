// DynamicLossScale: the loss-scale policy for fp16/bf16 training (host side).
//
// The loss is multiplied by scale() before backward; the gradients are then
// unscaled and checked in one pass (CudaBackend::unscaleAndCheckFinite with
// 1 / scale()), and update() is told whether they were all finite:
//   - not finite: skip this optimizer step and halve the scale (backoff);
//   - finite growthInterval times in a row: double the scale (growth).
// The defaults are PyTorch's GradScaler's. Wiring this into the Trainer is a
// later step; this class only holds the policy.
#pragma once

#include <cstdint>

namespace strata::gpu {

class DynamicLossScale {
public:
    explicit DynamicLossScale(float initialScale = 65536.0f, float growthFactor = 2.0f, float backoffFactor = 0.5f,
                              int growthInterval = 2000);

    float scale() const { return m_scale; }
    // Returns whether the optimizer step should be applied (the gradients were finite).
    bool update(bool gradientsFinite);
    int64_t skippedSteps() const { return m_skipped; }

private:
    float m_scale;
    float m_growth, m_backoff;
    int m_interval;
    int m_goodSteps = 0;
    int64_t m_skipped = 0;
};

}  // namespace strata::gpu
