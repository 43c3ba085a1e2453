// LrFinder: see LrFinder.h.
#include "core/train/LrFinder.h"

#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "core/data/DataLoader.h"
#include "core/data/Dataset.h"
#include "core/graph/Model.h"
#include "core/train/BatchLoss.h"
#include "core/train/BatchStager.h"
#include "core/train/Checkpoint.h"
#include "core/train/DataParallel.h"
#include "core/train/Optimizer.h"
#include "core/train/Precision.h"
#include "core/train/Trainer.h"
#include "core/train/TrainingStep.h"

namespace strata {

double lrFindRate(const LrFindOptions& o, int i) {
    if (o.steps < 2) return o.minLearningRate;
    const double t = static_cast<double>(i) / (o.steps - 1);
    return o.minLearningRate * std::pow(o.maxLearningRate / o.minLearningRate, t);
}

LrSuggestion suggestLearningRate(const std::vector<LrFindPoint>& points) {
    constexpr double nan = std::numeric_limits<double>::quiet_NaN();
    LrSuggestion s{nan, nan, nan, -1, -1};
    const int n = static_cast<int>(points.size());
    if (n < 3) return s;
    int minI = 0;
    for (int i = 1; i < n; ++i)
        if (points[i].smoothedLoss < points[minI].smoothedLoss) minI = i;
    s.minimumIndex = minI;
    s.minimum = points[minI].learningRate;
    s.minOver10 = s.minimum / 10;
    // Past the minimum the loss climbs; the steepest fall is before it. Central differences need a neighbour on
    // each side, so the minimum itself may be the last point looked at. The first tenth is left out: there the
    // moving average has seen few losses and jumps with each (fast.ai skips its first 10 points for the same
    // reason).
    double best = 0;
    for (int i = std::max(1, n / 10); i <= std::min(minI, n - 2); ++i) {
        const double dx = std::log(points[i + 1].learningRate) - std::log(points[i - 1].learningRate);
        if (!(dx > 0)) continue;
        const double slope = (points[i + 1].smoothedLoss - points[i - 1].smoothedLoss) / dx;
        if (slope < best) {
            best = slope;
            s.steepestIndex = i;
        }
    }
    if (s.steepestIndex >= 0) s.steepest = points[s.steepestIndex].learningRate;
    return s;
}

LrFindResult findLearningRate(const Project& projectIn, const std::string& projectPath, Backend& backend,
                              const LrFindOptions& o) {
    if (o.steps < 3 || o.steps > 100000)
        throw std::invalid_argument("the learning-rate finder needs 3 to 100000 steps, not " + std::to_string(o.steps));
    if (!(o.minLearningRate > 0) || !(o.maxLearningRate > o.minLearningRate))
        throw std::invalid_argument("the learning-rate finder's range must be 0 < start < end, not " +
                                    std::to_string(o.minLearningRate) + " to " + std::to_string(o.maxLearningRate));
    if (!(o.smoothing >= 0 && o.smoothing < 1))
        throw std::invalid_argument("the smoothing must be from 0 to 1, excluding 1");
    Project project = projectIn;
    if (o.batch > 0) project.training.batchSize = o.batch;
    const TrainingSettings& ts = project.training;

    LrFindResult result;
    result.batch = ts.batchSize;
    result.device = backend.device().toString();

    const DatasetBundle data = loadDataset(project.dataset, projectPath);
    std::unique_ptr<Model> model = compile(project.graph, backend, ts.seed);
    if (o.startFrom)
        applyWeights(*model, modelWeights(*o.startFrom));  // a copy: the sweep trains its own model only
    else if (!o.initFrom.empty())
        initFromCheckpoint(*model, loadCheckpoint(resolveCheckpointPath(o.initFrom), WeightLoadOptions{false, ""}));
    Optimizer optimizer(*model, ts);
    BatchStager stager(backend, model->inputShape(), ts.batchSize);
    stager.setUpTraining(data.train, trainingAugmentation(project.dataset, data.normalization), ts.seed,
                         ResidentData::Auto, int64_t(4) << 30, [](const std::string&) {});
    BatchLoss batchLoss(backend, ts.loss, model->outputShape(), ts.batchSize, data.numClasses);
    const TrainerOptions defaults;
    Precision precision(backend, defaults.initialLossScale, defaults.lossScaleGrowthInterval);
    DataParallel alone;
    TrainingStep step(*model, optimizer, batchLoss, precision, alone, ts.clipNorm);

    int epoch = 1;
    stager.startTrainEpoch(epoch);
    Batch batch;
    double average = 0, bestSmoothed = std::numeric_limits<double>::infinity();
    for (int i = 0; i < o.steps; ++i) {
        if (!stager.nextTrainBatch(batch)) {
            stager.startTrainEpoch(++epoch);
            if (!stager.nextTrainBatch(batch)) throw std::invalid_argument("the training split is empty");
        }
        const BatchStager::Staged staged = stager.stageTrain(batch);
        const double lr = lrFindRate(o, i);
        const StepOutcome out = step.run(StepInput{.batch = batch,
                                                   .input = staged.input,
                                                   .labels = staged.labels,
                                                   .index = i,
                                                   .epoch = epoch,
                                                   .learningRate = lr,
                                                   .seed = stepSeed(ts.seed, i)});
        if (!std::isfinite(out.loss)) {
            result.stoppedEarly = true;
            result.stopReason = "the loss was not finite at learning rate " + std::to_string(lr);
            break;
        }
        average = o.smoothing * average + (1 - o.smoothing) * out.loss;
        const double smoothed = o.smoothing > 0 ? average / (1 - std::pow(o.smoothing, i + 1)) : out.loss;
        result.points.push_back({lr, out.loss, smoothed});
        bestSmoothed = std::min(bestSmoothed, smoothed);
        if (o.progress && !o.progress(i, lr, out.loss)) {
            result.stoppedEarly = true;
            result.stopReason = "stopped";
            break;
        }
        if (i > 0 && smoothed > o.stopFactor * bestSmoothed) {
            result.stoppedEarly = true;
            std::ostringstream why;
            why << "the smoothed loss passed " << o.stopFactor << " times its minimum at learning rate " << lr;
            result.stopReason = why.str();
            break;
        }
    }
    result.suggestion = suggestLearningRate(result.points);
    return result;
}

Json lrFindToJson(const LrFindResult& r) {
    Json points = Json::array();
    for (const LrFindPoint& p : r.points)
        points.push_back({{"learning_rate", p.learningRate}, {"loss", p.loss}, {"smoothed_loss", p.smoothedLoss}});
    auto num = [](double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); };
    return Json{{"device", r.device},
                {"batch", r.batch},
                {"points", points},
                {"stopped_early", r.stoppedEarly},
                {"stop_reason", r.stopReason},
                {"suggestion",
                 {{"steepest", num(r.suggestion.steepest)},
                  {"minimum", num(r.suggestion.minimum)},
                  {"minimum_over_10", num(r.suggestion.minOver10)}}}};
}

std::string formatLrFind(const LrFindResult& r) {
    std::ostringstream s;
    char line[160];
    s << "learning-rate finder on " << r.device << ", batch " << r.batch << ", " << r.points.size() << " steps";
    if (r.stoppedEarly) s << " (" << r.stopReason << ")";
    s << "\n";
    std::snprintf(line, sizeof line, "%14s %12s %12s\n", "LEARNING RATE", "LOSS", "SMOOTHED");
    s << line;
    // Every point would be a few hundred lines: about twenty, evenly spread, and the suggestions'.
    const size_t n = r.points.size();
    const size_t every = std::max<size_t>(1, n / 20);
    for (size_t i = 0; i < n; ++i) {
        const bool marked =
            static_cast<int>(i) == r.suggestion.steepestIndex || static_cast<int>(i) == r.suggestion.minimumIndex;
        if (i % every && !marked && i + 1 != n) continue;
        const LrFindPoint& p = r.points[i];
        std::snprintf(line, sizeof line, "%14.4g %12.5g %12.5g%s\n", p.learningRate, p.loss, p.smoothedLoss,
                      static_cast<int>(i) == r.suggestion.steepestIndex  ? "  <- steepest descent"
                      : static_cast<int>(i) == r.suggestion.minimumIndex ? "  <- minimum"
                                                                         : "");
        s << line;
    }
    if (std::isfinite(r.suggestion.steepest) || std::isfinite(r.suggestion.minOver10)) {
        std::snprintf(line, sizeof line, "suggested learning rate: %.3g (steepest descent); %.3g (minimum / 10)\n",
                      r.suggestion.steepest, r.suggestion.minOver10);
        s << line;
    } else {
        s << "no suggestion: the loss never fell; try a wider range (--start, --end) or more steps\n";
    }
    return s.str();
}

}  // namespace strata
