// DivergenceMonitor: tells a run that explodes without ever reaching NaN from one that is learning. A loss of
// 8e33 is finite, so the NaN check alone let such a run finish "successfully".
//
// The reference is the larger of the run's first loss (measured before any update) and log(classes), the
// loss of a uniform guess. The run has diverged when
//   - one step's loss is above kExtremeFactor x reference (1000x: no learning run gets there), or
//   - the loss stays above kLossFactor x reference (3x) for kPatience consecutive steps (worse than guessing,
//     for long), or
//   - the global gradient norm exceeds kGradFactor x (10^4 x) the first measured norm, and 10^3 in absolute.
// Checked on the host from numbers the step reads back anyway: the loss every step, the gradient norm on
// steps that clip gradients (training.clip_norm > 0), which measure it; measuring it on every step would add
// a second device wait per step.
#pragma once

#include <cstdint>
#include <string>

namespace strata {

class DivergenceMonitor {
public:
    static constexpr double kExtremeFactor = 1e3;
    static constexpr double kLossFactor = 3.0;
    static constexpr int kPatience = 50;
    static constexpr double kGradFactor = 1e4;
    static constexpr double kGradFloor = 1e3;

    explicit DivergenceMonitor(int classes);

    // The first loss of the run (a resumed run passes the one its checkpoint recorded); <= 0: not known yet.
    void setReferenceLoss(double startLoss);
    double startLoss() const { return m_start; }

    // A finite training loss of one step; returns why the run diverged, or an empty string.
    std::string addLoss(double loss);
    // A finite global gradient norm of one step; returns why the run diverged, or an empty string.
    std::string addGradNorm(double norm);

private:
    double reference() const;

    double m_logClasses;
    double m_start = 0;
    double m_firstGradNorm = 0;
    int m_above = 0;
};

}  // namespace strata
