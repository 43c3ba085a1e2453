// Trainer: the training loop. Runs on the engine thread; everything it
// reports goes through a TrainingObserver. Pause, resume, stop and
// save-now are requests (thread-safe) checked between steps.
//
// The epoch loop is Trainer.cpp; one step, TrainingStep (with its parts: BatchLoss, Precision, the DataParallel
// mode and the step hooks); a rank's place in its job, RankGroup; where batches come from and how they reach the
// device is BatchStager; which checkpoint files are written and what a run's progress is, CheckpointPolicy;
// device telemetry, TelemetrySampler.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/dist/Communicator.h"
#include "core/graph/Project.h"
#include "core/train/Checkpoint.h"
#include "core/train/Pruning.h"
#include "core/train/ResidentData.h"
#include "core/train/TrainingObserver.h"

namespace strata {

class Backend;

struct TrainerOptions {
    std::string projectPath;  // for resolving relative dataset paths
    std::string resumeFrom;   // checkpoint file or folder; empty: fresh run
    bool resumeBest = false;  // a folder resumes from its best checkpoint rather than its newest
    int64_t maxSteps = 0;     // >0: stop after this many steps (tests, screenshots)
    // Where checkpoints go when the training settings name no checkpoint folder (RunFolder.h chooses one);
    // empty: such a run writes no checkpoints.
    std::string runFolder;
    // Memory the run may take on its device (MemoryEstimate.h): a run whose estimate exceeds it is refused
    // with the numbers before anything is loaded. 0: the device's free memory as the registry lists it.
    uint64_t availableMemoryBytes = 0;
    // The Trainer samples the device's telemetry (BackendRegistry::telemetry) on its own thread at
    // this interval and reports it through onTelemetry; 0 turns sampling off.
    int telemetryIntervalMs = 250;
    // Dynamic loss scaling of fp16 runs (training.precision "fp16"): the first scale and the
    // number of finite steps in a row after which it doubles. PyTorch's GradScaler defaults.
    float initialLossScale = 65536.0f;
    int lossScaleGrowthInterval = 2000;
    // Training data held in backend memory (ResidentData.h says when Auto chooses it).
    using ResidentData = ::strata::ResidentData;
    ResidentData residentData = ResidentData::Auto;
    int64_t residentDataMaxBytes = int64_t(4) << 30;
    // --init-from: a new run (step 0, a fresh optimizer) whose parameters start from this checkpoint file or
    // folder's where name and shape match (initFromCheckpoint, Checkpoint.h), logging what was copied and skipped;
    // the checkpoint may be another project's. Not together with resumeFrom.
    std::string initFrom;
    // Reads an --init-from file that is not a checkpoint: a MODEL.onnx (core/export's onnxWeightSource, which the
    // callers above core/train pass in: strata-train, the workbench). Null: such a file is refused, saying so.
    std::function<WeightSource(const std::string& path)> readModelWeights;
    // --replace-head: before compiling, the last Dense layer's units become the data set's number of classes and
    // it is renamed (core/graph/Transfer.h replaceHead), so it starts from new initial weights. A new run only.
    bool replaceHead = false;
    // Fine-tuning: a fresh run (epoch 0, a new optimizer) that starts from these weights, by
    // Model::namedParameters name, instead of the seeded initial ones. Not used when resuming.
    std::map<std::string, std::vector<float>> initialWeights;
    // Weight and gradient histograms (ParameterHistograms.h) every this many steps, to the observer and, with a
    // checkpoint folder, to its histograms.jsonl; 0: none. Rank 0 only.
    int histogramEvery = 0;
    int histogramBins = 32;
    // Magnitude pruning while training (Pruning.h). A run resumed from a pruning run's checkpoint continues
    // its schedule and masks without this. While the masks are below the final sparsity, no epoch is the best.
    std::optional<PruningSettings> pruning;

    // Data parallel (core/dist): this process is rank communicator->rank() of a job of communicator->size()
    // processes running the same project (checked at start). Null or size 1: a run of one process.
    // The project's batch size is the GLOBAL batch: each step, every rank takes its contiguous shard of it
    // (batchShard). Only rank 0 writes checkpoints; every rank reports events (the CLI prints rank 0's).
    Communicator* communicator = nullptr;
    // sync: gradients summed in buckets of this size while backward runs (GradientBuckets.h). 0: automatic,
    // autoBucketBytes of the model's gradient bytes.
    int64_t bucketBytes = 0;
    // training.dist_mode, from the project (strata-train copies it; tests set it). Sync equals one process on
    // the global batch. LocalSgd: each rank steps on its own shard and the parameters (and BatchNorm running
    // statistics) are averaged every localSgdSteps steps, weighted by the samples each rank saw; BatchNorm then
    // uses each rank's own batch statistics. Async: each step applies the previous step's summed gradients
    // while its own are summed behind the next step's compute (AsyncGradients in GradientBuckets.h): staleness
    // one step. BatchNorm uses each rank's own batch statistics; running statistics are averaged at each
    // epoch's end.
    DistMode distMode = DistMode::Sync;
    int localSgdSteps = 8;  // LocalSgd only; at least 1
    // Data parallel: every rank samples its device (telemetryIntervalMs) and rank 0 reports the other ranks'
    // samples too, as "<device> (rank R)" (they travel with the per-step stop vote). ReplicaRun turns it off:
    // its ranks hand their samples to the observer directly.
    bool gatherTelemetry = true;
    // Data parallel: the longest a rank waits in one collective for the others, in seconds (0: forever). Past it
    // the job ends, naming this rank, the step and the collective (a rank stalled, died or left early). Waits
    // while a rank of the job is paused (in-process replicas) do not count.
    double collectiveTimeoutSeconds = kDefaultCollectiveTimeoutSeconds;
    // For checks: take the data-parallel path (broadcast, gradient buckets or async exchange, BatchNorm's
    // global sums, a GPU's NCCL communicator) even in a job of one rank, whose results must then equal a plain
    // run's (sync, local SGD) or be one step stale (async). This is how one GPU exercises NCCL in training.
    bool dataParallelWithOneRank = false;
};

// The automatic gradient bucket size: an eighth of the gradients, at least 256 KiB and at most 25 MiB
// (PyTorch DDP's bucket). A model whose gradients fit one 25 MiB bucket would start its only all-reduce when
// backward has finished, with nothing left to hide it behind; eight buckets start while backward runs (and
// tiny buckets would pay a collective's latency each). Measured in bench/RESULTS.md.
int64_t autoBucketBytes(int64_t gradientBytes);

class Trainer {
public:
    Trainer(Project project, Backend& backend, TrainingObserver* observer, TrainerOptions options = {});
    ~Trainer();

    // Blocking. Returns true when the run finished (or was stopped by a request),
    // false after an error (already reported through onError).
    bool run();

    void requestPause();
    void requestResume();
    void requestStop();
    void requestCheckpoint();
    bool paused() const;

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

}  // namespace strata
