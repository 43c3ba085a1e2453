// Small projects the tests train: synthetic blobs (no files needed) through a few layers. Each test sets what
// it needs on top of these defaults. And what a test keeps of a run (RecordedRun).
#pragma once

#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/data/Dataset.h"
#include "core/export/ExportModel.h"
#include "core/graph/Project.h"
#include "core/train/Trainer.h"

namespace strata::test {

struct LayerDef {
    std::string type, name;
    Json params = Json::object();
};
// Adds the layers to `graph`, each connected to the one before; returns their ids in order.
std::vector<int> addChain(Graph& graph, const std::vector<LayerDef>& layers);

// The synthetic blobs dataset: `samples` samples of `shape` in `classes` classes, a quarter held out, no
// normalization.
void useBlobs(Project& project, int64_t samples, int classes, const std::vector<int64_t>& shape);

// Input [inputs] -> Dense 32 -> ReLU [-> Dropout 0.2] -> Dense classes (nodes input, dense1, relu1,
// [dropout,] dense2) on 1200 blobs, a quarter held out; SGD, learning rate 0.05, batch 32, one epoch,
// seed 7, one thread.
Project blobsMlpProject(const std::string& name = "tiny", int inputs = 16, int classes = 4, bool dropout = false);

// Input [1, 12, 12] -> Conv2D 8 (3x3, padded) -> BatchNorm -> ReLU -> Flatten -> Dropout 0.2 -> Dense 4 on 1000
// synthetic samples in 4 classes, a fifth held out; SGD, learning rate 0.05, batch 60, one epoch, seed 3,
// deterministic: the data-parallel checks' model (every layer whose data-parallel path differs).
Project convBatchNormProject();

// What a test keeps of a training run: each step's loss, the log lines, the first error and the devices that
// sent telemetry (thread-safe: telemetry arrives from sampler threads).
struct RecordedRun : TrainingObserver {
    std::vector<double> steps;
    std::string error, log;
    std::set<std::string> telemetryDevices;
    std::mutex mutex;
    RecordedRun() = default;
    RecordedRun(const RecordedRun& o)
        : steps(o.steps), error(o.error), log(o.log), telemetryDevices(o.telemetryDevices) {}
    void onStep(const StepEvent& e) override { steps.push_back(e.loss); }
    void onError(const std::string& m) override {
        if (error.empty()) error = m;
    }
    void onLog(const std::string& m) override { log += m + "\n"; }
    void onTelemetry(const TelemetryEvent& e) override {
        std::lock_guard lock(mutex);
        telemetryDevices.insert(e.device);
    }
};

// Options for the data-parallel path in a job of one rank (TrainerOptions::dataParallelWithOneRank) over
// `single` (a single-rank communicator), with gradient buckets of `bucketBytes`; no telemetry.
TrainerOptions oneRankDataParallel(Communicator& single, int64_t bucketBytes, bool async = false);

// examples/<file>'s graph and settings on `device` without a checkpoint folder; an image example trains on
// 512 blobs of its input shape in 10 classes (no data set files needed: a model's allocations do not depend
// on the values).
Project exampleOnBlobs(const std::string& file, const std::string& device = "cpu");

// A hand-weighted text model: word ids [4] -> Embedding 2 (<pad> (100, 100), <unk> (0, 0), good (1, 0),
// bad (0, 1), fine (0.5, 0.5)) -> masked sequence mean -> Dense 2 (identity, no bias): classes pos, neg with
// logits equal to the mean embedding of the real tokens (the padding row would dominate if it were not masked).
ExportModel sentimentTextModel();
// The same vocabulary and embedding with a masked one-head attention before the pool, weighted so that every
// query gives a "good" key 4 times the weight of any other real token (score ln 4 against 0) and padding none;
// values and the output projection are the identity, so "good bad zzz" gives logits (2/3, 1/6).
ExportModel sentimentAttentionModel();

// A one-block Transformer over `length` word ids of a `vocab`-word vocabulary (id 0 padding), 4 classes: ids ->
// Embedding "words" (16) -> PositionalEmbedding "positions" -> masked 2-head attention "attention" -> Add
// "residual1" -> LayerNorm "norm1" -> Dense "ff1" (32) -> GELU "gelu" -> Dense "ff2" (16) -> Add "residual2" ->
// masked SequenceMeanPool "mean" -> Dense "logits" -> Softmax "probs"; trained on blobs (set the data for real use).
// maskedAttention false: a 4-head attention that attends to padding too.
Project smallTransformerProject(int64_t length, int64_t vocab, bool maskedAttention = true);
// A text CNN over the same ids, 3 classes: Embedding "words" (8) -> Conv1D "trigrams" (6 filters, kernel 3, padding
// 1) -> ReLU "relu" -> Conv1D "skips" (5 filters, kernel 2, stride 2, dilation 2, no bias) -> SequenceMeanPool
// "mean" -> Dense "logits".
Project smallTextCnnProject(int64_t length, int64_t vocab);
// `count` samples of such ids: 3 to `length` real words each, then padding.
DataSplit tokenIdSplit(int64_t count, int64_t length, int64_t vocab, unsigned seed);

// `model` written to `path` as an int8 QDQ ONNX file (not BatchNorm-folded), calibrated (min-max) on every
// sample of `calibration`.
void writeInt8Onnx(const std::string& path, const ExportModel& model, const DataSplit& calibration);

// A TrainingObserver for tests that train without output: it keeps the errors a run reports, in order.
struct QuietObserver : TrainingObserver {
    std::vector<std::string> errors;
    void onError(const std::string& m) override { errors.push_back(m); }
};

// Trains `project` to its end on a CPU backend made with `options`, quietly: "" when it finished, else its first
// error (or "training failed").
std::string trainQuietly(const Project& project, const BackendOptions& options = {});

}  // namespace strata::test
