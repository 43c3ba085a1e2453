// LrFinder: the learning-rate range test (Training > Find Learning Rate, strata-train lr-find). Trains a copy of
// the model for a few hundred steps while the learning rate grows exponentially from a tiny value to a large one,
// records the loss at each rate, and suggests a rate: where the smoothed loss falls fastest against log(rate)
// (steepest descent, the first tenth of the sweep left out), and a tenth of the rate at the smoothed loss's
// minimum. The model it starts from (the
// project's seeded initial weights, a checkpoint's, or a Model's) is copied first and never written.
//
// Each step is the Trainer's TrainingStep with the project's data, loss, precision and optimizer; the schedule,
// warm-up and divergence checks are replaced by the sweep (its loss is meant to blow up at the end). The sweep
// ends early once the smoothed loss passes `stopFactor` times its minimum or a loss is not finite.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/graph/Project.h"

namespace strata {

class Backend;
class Model;

struct LrFindOptions {
    double minLearningRate = 1e-7, maxLearningRate = 10;
    int steps = 200;
    int batch = 0;  // 0: the project's batch size
    // The exponential moving average's weight of the past (bias-corrected); 0: none. fast.ai's 0.98 lags about 50
    // steps, two decades of a 200-step sweep over eight, which moves the suggestion up by as much; 0.9 lags 10.
    double smoothing = 0.9;
    double stopFactor = 4;       // end once the smoothed loss exceeds this times its minimum so far
    Model* startFrom = nullptr;  // read only: its weights are copied (same graph); null: initFrom, else the seeded ones
    std::string initFrom;        // a checkpoint file or folder whose weights to start from (by name and shape)
    // Called after every step on the thread running the sweep; return false to stop it (the points so far are
    // kept and the suggestion made from them).
    std::function<bool(int step, double learningRate, double loss)> progress;
};

struct LrFindPoint {
    double learningRate = 0, loss = 0, smoothedLoss = 0;
};

struct LrSuggestion {
    // NaN when the curve has too few points (fewer than 3) or never descends.
    double steepest = 0;   // the rate where the smoothed loss falls fastest against log(rate)
    double minimum = 0;    // the rate at the smoothed loss's minimum
    double minOver10 = 0;  // minimum / 10
    int steepestIndex = -1, minimumIndex = -1;
};

struct LrFindResult {
    std::vector<LrFindPoint> points;
    LrSuggestion suggestion;
    bool stoppedEarly = false;  // diverged (stopFactor or a non-finite loss) or cancelled
    std::string stopReason;
    int batch = 0;
    std::string device;
};

// The learning rate of step `i` of `steps`: minLr * (maxLr / minLr)^(i / (steps - 1)).
double lrFindRate(const LrFindOptions& options, int i);
// The suggestion from a curve: points in increasing learning rate, their smoothedLoss used. Steepest descent is
// the most negative central difference d(smoothed loss) / d(ln rate) among the points up to the minimum, after
// the first tenth of the points.
LrSuggestion suggestLearningRate(const std::vector<LrFindPoint>& points);

// Throws as a training run would (DataError, GraphError, BackendError ...), or std::invalid_argument for options
// out of range, naming what is wrong.
LrFindResult findLearningRate(const Project& project, const std::string& projectPath, Backend& backend,
                              const LrFindOptions& options = {});
Json lrFindToJson(const LrFindResult& result);
std::string formatLrFind(const LrFindResult& result);  // what strata-train lr-find prints

}  // namespace strata
