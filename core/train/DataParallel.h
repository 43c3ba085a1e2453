// DataParallel: how the ranks of a data-parallel job combine each step's work; one strategy per mode
// (training.dist_mode), chosen once when the run is set up (makeDataParallel):
//   - a run of one process (this base class): nothing to combine;
//   - sync: each rank's loss gradient is scaled by its share of the global batch and the gradients are summed
//     in buckets while backward runs (GradientBuckets.h); BatchNorm uses the global batch's statistics. Equals
//     one process on the global batch;
//   - local SGD (local-sgd:K): each rank steps on its own shard; parameters and BatchNorm running statistics
//     are averaged every K steps and at each epoch's end, each rank weighted by the samples it trained on;
//   - async: each step applies the previous step's gradients, summed while this one computed
//     (AsyncGradients); BatchNorm running statistics are averaged at each epoch's end.
//
// The step (TrainingStep.h) calls a strategy in this order: lossShare, beginBackward, backward (on a rank with
// no sample in the global batch: Model::idleStep when idlesOnEmptyShard), finishBackward, exchange, the update
// (on such a rank only when updatesOnEmptyShard), afterUpdate, reduceMetrics; the epoch loop calls endEpoch.
// Who the ranks are and the Trainer's other collectives are RankGroup's (RankGroup.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/backend/Backend.h"
#include "core/train/GradientBuckets.h"

namespace strata {

class Model;
class Optimizer;
class RankGroup;
struct Batch;

// The base class is a run of one process: nothing to combine.
class DataParallel {
public:
    virtual ~DataParallel() = default;

    // The line the run logs when it sets up; empty for a run of one process.
    virtual std::string description() const { return {}; }
    // The samples of the step's global batch (this process's batch when it runs alone).
    virtual int64_t globalSamples(const Batch& batch) const;
    // The factor of this rank's loss gradient (its share of the global batch when the gradients are summed).
    virtual float lossShare(const Batch&) const { return 1.0f; }
    // After the gradients were zeroed, before backward.
    virtual void beginBackward(const Batch&) {}
    // Whether a rank with no sample in this step's global batch runs Model::idleStep (joining the collectives of
    // the others' backward) instead of nothing.
    virtual bool idlesOnEmptyShard() const { return false; }
    // After backward's work has been called: waits for the gradients' sum where it must.
    virtual void finishBackward() {}
    // Whether the model's gradient block now holds gradients to apply, and with which learning rate (async:
    // the previous step's).
    virtual bool exchange(double learningRate, double& applyWith) {
        applyWith = learningRate;
        return true;
    }
    // Whether a rank with no sample in this step's global batch applies the update.
    virtual bool updatesOnEmptyShard() const { return true; }
    // After the update of step `step` (0-based) on `batch`.
    virtual void afterUpdate(int64_t /*step*/, const Batch&) {}
    // The step's loss sum and correct predictions over the global batch.
    virtual void reduceMetrics(Backend::StepMetrics&) {}
    // After an epoch's steps (all of them, or a stop), on every rank alike: what is still owed to the weights.
    virtual void endEpoch() {}
    // The last step's gradient communication (window and exposed time), or null where there is none.
    virtual const GradientBuckets::StepTimes* communication() const { return nullptr; }
};

struct DataParallelSettings {
    int localSgdSteps = 0;    // > 0: local SGD (TrainerOptions::distMode LocalSgd, its localSgdSteps)
    bool async = false;       // TrainerOptions::distMode Async
    int64_t bucketBytes = 0;  // sync; 0: autoBucketBytes
    int64_t globalBatch = 0;  // training.batch_size, for the log
    double clipNorm = 0;      // training.clip_norm, for async's last update of an epoch
    bool scalesLoss = false;  // fp16: refused with async
    bool prunes = false;      // refused with async
};

// The strategy for `ranks`: a run of one process gets the base class, which does nothing; data parallel, rank 0's
// weights (and BatchNorm statistics) are broadcast to every rank first, then the mode is set up on `model` (its
// gradients-ready hook, BatchNorm's cross-replica sums). Throws std::invalid_argument for a mode that cannot
// run with the settings (async with fp16 or pruning).
std::unique_ptr<DataParallel> makeDataParallel(RankGroup& ranks, Model& model, Optimizer& optimizer,
                                               const DataParallelSettings& settings);

}  // namespace strata
