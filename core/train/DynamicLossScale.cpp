// Loss-scale policy (see DynamicLossScale.h).
#include "core/train/DynamicLossScale.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace strata {

DynamicLossScale::DynamicLossScale(float initialScale, float growthFactor, float backoffFactor, int growthInterval)
    : m_scale(initialScale), m_growth(growthFactor), m_backoff(backoffFactor), m_interval(growthInterval) {
    if (!(initialScale > 0.0f) || !(growthFactor > 1.0f) || !(backoffFactor > 0.0f && backoffFactor < 1.0f) ||
        growthInterval < 1)
        throw std::invalid_argument("DynamicLossScale: needs scale > 0, growth > 1, 0 < backoff < 1, interval >= 1");
}

void DynamicLossScale::restore(float scale, int goodSteps, int64_t skipped) {
    if (!(scale > 0.0f) || !std::isfinite(scale) || goodSteps < 0 || skipped < 0)
        throw std::invalid_argument("DynamicLossScale: saved scale " + std::to_string(scale) + ", good steps " +
                                    std::to_string(goodSteps) + " or skipped steps " + std::to_string(skipped) +
                                    " out of range");
    m_scale = scale;
    m_goodSteps = goodSteps;
    m_skipped = skipped;
}

bool DynamicLossScale::update(bool gradientsFinite) {
    if (!gradientsFinite) {
        ++m_skipped;
        m_goodSteps = 0;
        // Never reach 0: a scale that small means the model itself produces non-finite gradients.
        const float next = m_scale * m_backoff;
        m_scale = next > std::numeric_limits<float>::min() ? next : std::numeric_limits<float>::min();
        return false;
    }
    if (++m_goodSteps >= m_interval) {
        m_goodSteps = 0;
        const float next = m_scale * m_growth;
        if (next <= std::numeric_limits<float>::max()) m_scale = next;
    }
    return true;
}

}  // namespace strata
