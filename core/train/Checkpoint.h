// Checkpoints: one safetensors file per checkpoint holding the model's
// parameters and state ("<node>.<param>"), the optimizer state
// ("optim.<slot>.<node>.<param>"), the pruning masks of a pruning run ("mask.<node>.<param>") and, in the header's
// __metadata__ under "strata.checkpoint", a JSON document: the project, epoch, step, metrics, RNG state, the dataset
// normalization and class labels, with its checksum under "strata.checkpoint.xxh3_64" (an edit after writing is
// refused on load). Written to a temporary file and renamed, so a crash never leaves a broken checkpoint.
// A checkpoint folder holds epoch-NNN.safetensors files plus best.safetensors
// (when validation ran) and latest.safetensors.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/data/Normalization.h"
#include "core/graph/Project.h"
#include "core/io/NonFinite.h"

namespace strata {

class Model;

struct Checkpoint {
    Project project;
    int epoch = 0;            // epochs completed
    int64_t step = 0;         // global steps completed
    int64_t stepInEpoch = 0;  // >0: saved mid-epoch
    bool hasValidation = false;
    double valLoss = 0, valAccuracy = 0;
    bool best = false;
    Normalization normalization;  // the dataset's, as loadDataset measured it
    // Regression: the targets' standardization (DatasetBundle::targetNormalization), which predict undoes; stored
    // only when its mode is not "none", so checkpoints of the other tasks are as before.
    Normalization targetNormalization;
    std::vector<std::string> classNames;                // regression: the target columns; multi-label: the labels
    std::vector<std::string> vocabulary;                // text data sets
    std::string tokenizerModel;                         // text, sentencepiece: the serialized SentencePiece model
    Json trainerState = Json::object();                 // RNG, scheduler and early-stopping state (Trainer-private)
    std::map<std::string, std::vector<float>> weights;  // by Model::namedParameters name
    std::map<std::string, std::vector<float>> optimizerState;  // by "<slot>.<param name>"
    std::map<std::string, std::vector<float>> masks;           // pruning masks (0/1) by param name; empty: none
};

// Copies every parameter and state tensor of the model to host (weights map).
std::map<std::string, std::vector<float>> modelWeights(Model& model);
// Loads weights into a compiled model; throws std::runtime_error naming a missing or mis-sized tensor.
void applyWeights(Model& model, const std::map<std::string, std::vector<float>>& weights);

// --init-from (transfer learning): a new run that starts from another checkpoint's weights, or an ONNX file's
// initializers. Every parameter and state tensor of the model whose name and shape match one of the source's is
// copied; the others keep their initial values. The report says which were copied, which skipped and why, and
// which of the source's tensors no parameter took. Step, epoch and optimizer state are the caller's (a new run:
// 0 and fresh).
struct InitFromReport {
    std::vector<std::string> copied;   // "dense1.weight [32, 16]"
    std::vector<std::string> skipped;  // "dense2.weight [4, 32]: the checkpoint's is [10, 32]"
    std::vector<std::string> unused;   // "head.weight [10, 32]"
    // "initialized 2 of 4 tensors from FILE; not matched: dense2.weight [4, 32] (the checkpoint's is [10, 32]),
    // ..." (the first few; "all matched" when none is left out).
    std::string summary(const std::string& file) const;
};

// Named tensors with their shapes: what --init-from reads from a checkpoint or a model file.
struct WeightSource {
    std::string file;
    std::string kind = "checkpoint";  // what messages call it: "checkpoint", "ONNX file"
    std::map<std::string, std::vector<float>> values;
    std::map<std::string, Shape> shapes;  // the shape of each of `values` that has a known one
    // Said when no tensor matched (a file from another tool: "import it first with ...").
    std::string noMatchHint;
};
WeightSource checkpointWeightSource(const Checkpoint& checkpoint, const std::string& file);
InitFromReport initFromWeights(Model& model, const WeightSource& source);
InitFromReport initFromCheckpoint(Model& model, const Checkpoint& checkpoint);

// Writes the metadata with its checksum (the key "strata.checkpoint.xxh3_64": XXH3 of the metadata text and of
// each of its fields), so that an edit after writing is refused on load.
void saveCheckpoint(const Checkpoint& checkpoint, const std::string& path);
// `path` is a checkpoint file, or a checkpoint folder (its best checkpoint, else the latest).
// Throws std::runtime_error naming the file and what is wrong: metadata that does not match its checksum (naming
// the fields that changed; files written before the checksum existed have none and load), values out of range, a
// weight, optimizer or mask tensor holding NaN or inf (unless `options` allow it; NonFinite.h).
Checkpoint loadCheckpoint(const std::string& path, const WeightLoadOptions& options = {});
// The file a path stands for (resolves folders as loadCheckpoint does).
std::string resolveCheckpointPath(const std::string& path);

// An epoch-N or step-N file of a checkpoint folder, with its number.
struct NumberedCheckpoint {
    std::string path;
    bool isStep = false;  // step-N (a save mid-epoch, N the global step) rather than epoch-N
    int64_t number = 0;
};
// The folder's epoch files by number (epoch-999 before epoch-1000), then its step files by number.
std::vector<NumberedCheckpoint> numberedCheckpoints(const std::string& folder);

// Where `--resume` continues from. For a file, that file. For a folder: the newest checkpoint that loads (the
// most steps among latest, the highest epoch-N and step-N that load; torn or corrupt files are skipped and
// listed in `skipped`), or best.safetensors when `best`.
struct ResumePoint {
    std::string file;
    Checkpoint checkpoint;
    std::vector<std::string> skipped;  // why each skipped file did not load
};
ResumePoint findResumePoint(const std::string& path, bool best, const WeightLoadOptions& options = {});

}  // namespace strata
