// DynamicLossScale: the loss-scale policy for fp16/bf16 training (host side).
//
// The loss gradient is multiplied by scale() before backward; the gradients are
// then unscaled (times 1 / scale()) and checked (Backend::allFinite), and
// update() is told whether they were all finite:
//   - not finite: skip this optimizer step and halve the scale (backoff);
//   - finite growthInterval times in a row: double the scale (growth).
// The defaults are PyTorch's GradScaler's. The Trainer uses it for fp16 runs
// (bf16 has float32's exponent range and needs no scaling).
#pragma once

#include <cstdint>

namespace strata {

class DynamicLossScale {
public:
    explicit DynamicLossScale(float initialScale = 65536.0f, float growthFactor = 2.0f, float backoffFactor = 0.5f,
                              int growthInterval = 2000);

    float scale() const { return m_scale; }
    // Returns whether the optimizer step should be applied (the gradients were finite).
    bool update(bool gradientsFinite);
    int64_t skippedSteps() const { return m_skipped; }
    // For checkpoints: resuming continues with the same scale and growth count.
    int goodSteps() const { return m_goodSteps; }
    void restore(float scale, int goodSteps, int64_t skipped);

private:
    float m_scale;
    float m_growth, m_backoff;
    int m_interval;
    int m_goodSteps = 0;
    int64_t m_skipped = 0;
};

}  // namespace strata
