// Compression study: what the Optimize panel runs after training. From a trained checkpoint it makes the
// variants asked for, each as `strata-train prune` / `export --quantize int8` would (PruneRun, Quantize.h):
// magnitude pruning to each sparsity and structured pruning, each fine-tuned, and int8 ONNX files of the
// original and of every pruned variant. It measures the original and every variant the same way, on the
// same validation samples: accuracy, parameters (and how many are non-zero), each weight's sparsity, the
// ONNX file as written and deflate-compressed (which is where zeros pay on disk), and the time of a forward
// pass in Strata's CPU engine at batch 1 and batch 256. An int8 variant is measured through its file:
// accuracy by simulateInt8, and time in the int8 engine (core/infer/Int8Engine) where it runs (a CPU with
// AVX512-VNNI, layers it has int8 paths for), else none, the variant's note saying why. Runs on the caller's thread
// (the GUI's engine thread); stops between steps when asked.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/export/Quantize.h"
#include "core/train/Pruning.h"

namespace strata {

class Int8Engine;
class Trainer;
class TrainingObserver;

struct CompressionRequest {
    std::string checkpoint;          // the trained model: a checkpoint file or folder
    std::string projectPath;         // resolves the dataset's relative paths ("" : the working directory)
    std::string outputDir;           // every variant's folder and files go here
    std::vector<double> sparsities;  // one magnitude-pruned variant per target, e.g. {0.5, 0.8}
    PruningScope scope = PruningScope::PerLayer;
    double structuredFraction = 0.0;  // > 0: a variant with this fraction of filters and units removed
    bool int8 = false;                // an int8 ONNX file of the original and of each pruned variant
    int fineTuneEpochs = 2;
    int64_t evaluationSamples = 0;  // validation samples measured; 0: all
    QuantizationOptions quantization;
    int threads = 0;  // CPU threads for fine-tuning and timing; 0: the project's setting
};

struct CompressionVariant {
    std::string name;  // "original", "80% sparse", "structured 50%", "int8", "80% sparse + int8"
    enum class Kind { Original, Sparse, Structured, Int8 } kind = Kind::Original;
    std::string checkpoint;   // a checkpoint file of the variant's weights (Int8: the float model it came from)
    std::string projectFile;  // a project that trains or exports it further ("" for the original and int8)
    std::string onnxFile;     // the variant as ONNX (float32, or the int8 QDQ file)
    double accuracy = 0;      // 0..1 on `samples` validation samples
    int64_t samples = 0;
    int64_t parameters = 0, nonZero = 0;  // values of every parameter tensor; those not exactly zero
    uint64_t fileBytes = 0, compressedBytes = 0;
    bool timed = false;        // false for an int8 file the int8 engine cannot run (see above)
    double msPerBatch1 = 0;    // one sample per forward pass
    double msPerBatch256 = 0;  // a forward pass of 256 samples
    std::vector<LayerSparsity> layers;
    std::string note;  // what the numbers are, where they need saying
};

const char* compressionKindName(CompressionVariant::Kind kind);  // "original", "sparse", "structured", "int8"

class CompressionStudy {
public:
    // `progress(stage, fraction)` after each stage and fine-tuning step (fraction of the whole study, 0..1);
    // `variant` once per measured variant, in order; `training` receives the fine-tuning runs' events.
    using Progress = std::function<void(const std::string& stage, double fraction)>;
    using VariantReady = std::function<void(const CompressionVariant& variant)>;
    CompressionStudy(CompressionRequest request, Progress progress, VariantReady variant,
                     TrainingObserver* training = nullptr);
    ~CompressionStudy();
    CompressionStudy(const CompressionStudy&) = delete;
    CompressionStudy& operator=(const CompressionStudy&) = delete;

    // Every variant, the original first. Throws (naming the file or option) on errors; after a stop request,
    // returns what was measured so far. Thread-safe requestStop from any thread.
    std::vector<CompressionVariant> run();
    void requestStop();
    bool stopRequested() const { return m_stop.load(); }

private:
    struct Impl;
    CompressionRequest m_request;
    Progress m_progress;
    VariantReady m_variant;
    TrainingObserver* m_training;
    std::atomic<bool> m_stop{false};
    std::mutex m_trainerMutex;
    Trainer* m_trainer = nullptr;  // the fine-tuning run in progress, for requestStop
};

// Milliseconds of one forward pass at `batch` samples (the median of repeated runs after a warm-up) of the
// checkpoint-shaped model on Strata's CPU backend with `threads` threads (0: all), with BatchNorm folded into
// the layer before it as Predict runs it (`fold` false: the graph as drawn).
double timeForwardMs(const Project& project, const std::map<std::string, std::vector<float>>& weights, int64_t batch,
                     int threads, bool fold = true);
// The same for an int8 engine made from `project`'s file (Int8Engine::run of `batch` samples, quantizing the input
// included), on the same input values. Both feed values in [0, 1), or word ids over the vocabulary where the
// input feeds an Embedding.
double timeInt8Ms(Int8Engine& engine, const Project& project, int64_t batch);

}  // namespace strata
