// Events out of the training loop. The CLI prints them; the GUI's
// EngineWorker turns them into queued signals. Callbacks run on the engine
// thread (telemetry on the sampler thread) and must return quickly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/backend/Telemetry.h"
#include "core/train/TaskMetrics.h"

namespace strata {

struct HistogramSample;

struct StepEvent {
    int epoch = 0;            // 1-based
    int64_t step = 0;         // global step, 1-based
    int64_t stepInEpoch = 0;  // 1-based
    int64_t stepsPerEpoch = 0;
    double loss = 0;      // this batch
    double accuracy = 0;  // this batch, 0..1 (classification; NaN for other tasks)
    double learningRate = 0;
    double samplesPerSecond = 0;  // recent throughput
    double elapsedSeconds = 0;
    // fp16 runs (dynamic loss scaling): the scale this step's loss gradient was multiplied by,
    // whether its optimizer update was skipped (non-finite gradients), and the steps skipped so
    // far in this run. lossScale is 0 in fp32 and bf16 runs.
    double lossScale = 0;
    bool skipped = false;
    int64_t skippedSteps = 0;
    // Data parallel (ranks > 1): this step's time computing (forward, backward, update: the step's wall time
    // less the exposed communication), its gradient all-reduce window and the part of it the step waited
    // for (not hidden behind backward), and the hidden fraction (1 - exposed / window; 1 with no window).
    // loss, accuracy and samplesPerSecond are then over the global batch.
    int ranks = 1;
    double computeSeconds = 0, commSeconds = 0, exposedCommSeconds = 0, hiddenFraction = 1;
};

// Image to image: the first few validation images each epoch, as raw pixels (the input normalization undone,
// 0..255): what the dashboard's strip shows. Each vector holds `count` images of `dims` ([C, H, W]).
struct ImageStrip {
    std::vector<int64_t> dims;
    int count = 0;
    std::vector<float> inputs, outputs, targets;
};

struct EpochEvent {
    int epoch = 0;
    double trainLoss = 0, trainAccuracy = 0;
    // NaN when there is no validation split. Tasks other than classification (Task.h): valAccuracy is the task's
    // score (taskScoreName: R2, micro F1, PSNR), trainAccuracy NaN, and valMetrics every metric of the task.
    double valLoss = 0, valAccuracy = 0;
    bool hasValidation = false;
    std::vector<NamedMetric> valMetrics;
    ImageStrip strip;  // image to image with validation; empty (count 0) otherwise
    double seconds = 0;
    double samplesPerSecond = 0;
    bool best = false;  // best epoch so far by the early-stopping metric
    int ranks = 1;      // data-parallel processes that trained it (every figure is over all of them)
};

struct CheckpointEvent {
    std::string path;
    int epoch = 0;
    int64_t step = 0;
    bool best = false;
};

struct FinishedEvent {
    bool stoppedByUser = false;
    bool earlyStopped = false;
    int epochsCompleted = 0;
    int bestEpoch = 0;
    double bestValLoss = 0, bestValAccuracy = 0;
    double seconds = 0;
};

class TrainingObserver {
public:
    virtual ~TrainingObserver() = default;
    virtual void onStep(const StepEvent&) {}
    virtual void onEpoch(const EpochEvent&) {}
    virtual void onTelemetry(const TelemetryEvent&) {}
    virtual void onCheckpoint(const CheckpointEvent&) {}
    virtual void onFinished(const FinishedEvent&) {}
    // Set-up is done (data, model, resume, the ranks' comparison) and the first step follows. An error before
    // this is a refusal (the run never trained: bad data, the memory check, ranks that differ), not a failure.
    virtual void onTrainingStarted() {}
    // The run stopped on an error (bad data, NaN loss, out of memory); `message` is one line.
    virtual void onError(const std::string&) {}
    virtual void onLog(const std::string&) {}
    // Every TrainerOptions::histogramEvery steps (ParameterHistograms.h), on the engine thread.
    virtual void onHistograms(const HistogramSample&) {}
};

}  // namespace strata
