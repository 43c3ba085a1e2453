#include "core/train/LrSchedule.h"

#include <algorithm>
#include <cmath>

namespace strata {

namespace {
constexpr double kPi = 3.14159265358979323846;

double cosineBetween(double from, double to, double t) {
    t = std::clamp(t, 0.0, 1.0);
    return to + (from - to) * 0.5 * (1.0 + std::cos(kPi * t));
}
}  // namespace

double learningRateAt(const TrainingSettings& s, int64_t step, int64_t stepsPerEpoch) {
    const double base = s.learningRate;
    const int64_t perEpoch = std::max<int64_t>(1, stepsPerEpoch);
    const int64_t total = std::max<int64_t>(1, perEpoch * std::max(1, s.epochs));
    double lr = base;
    if (s.schedule == ScheduleKind::Step) {
        const int64_t epoch = step / perEpoch;
        lr = base * std::pow(s.stepGamma, static_cast<double>(epoch / std::max(1, s.stepEpochs)));
    } else if (s.schedule == ScheduleKind::Cosine) {
        lr = cosineBetween(base, s.minLearningRate, static_cast<double>(step) / static_cast<double>(total));
    } else if (s.schedule == ScheduleKind::OneCycle) {
        const double peakAt = 0.3 * static_cast<double>(total);
        const double t = static_cast<double>(step);
        if (t < peakAt)
            lr = cosineBetween(base / 25.0, base, t / peakAt);
        else
            lr = cosineBetween(base, base / 1e4, (t - peakAt) / (static_cast<double>(total) - peakAt));
    }
    if (s.warmupSteps > 0 && step < s.warmupSteps)
        lr *= static_cast<double>(step + 1) / static_cast<double>(s.warmupSteps);
    return lr;
}

}  // namespace strata
