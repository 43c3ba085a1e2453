#include "core/train/Divergence.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace strata {

namespace {

std::string number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", v);
    return buf;
}

}  // namespace

DivergenceMonitor::DivergenceMonitor(int classes) : m_logClasses(std::log(std::max(2, classes))) {}

void DivergenceMonitor::setReferenceLoss(double startLoss) {
    if (std::isfinite(startLoss) && startLoss > 0) m_start = startLoss;
}

double DivergenceMonitor::reference() const { return std::max(m_start, m_logClasses); }

std::string DivergenceMonitor::addLoss(double loss) {
    if (m_start <= 0) {
        setReferenceLoss(loss);
        return {};
    }
    const std::string ref = "the reference " + number(reference()) + " (the larger of the first loss " +
                            number(m_start) + " and log(classes) = " + number(m_logClasses) + ")";
    if (loss > kExtremeFactor * reference())
        return "the loss diverged to " + number(loss) + ", more than " + number(kExtremeFactor) + " times " + ref;
    m_above = loss > kLossFactor * reference() ? m_above + 1 : 0;
    if (m_above >= kPatience)
        return "the loss diverged: above " + number(kLossFactor) + " times " + ref + " for " + std::to_string(m_above) +
               " steps in a row (now " + number(loss) + ")";
    return {};
}

std::string DivergenceMonitor::addGradNorm(double norm) {
    if (m_firstGradNorm <= 0) {
        if (std::isfinite(norm) && norm > 0) m_firstGradNorm = norm;
        return {};
    }
    if (norm > kGradFactor * m_firstGradNorm && norm > kGradFloor)
        return "the gradient norm exploded to " + number(norm) + ", more than " + number(kGradFactor) +
               " times the first step's " + number(m_firstGradNorm);
    return {};
}

}  // namespace strata
