// Project: what a *.strata file holds: the graph (with canvas positions),
// the dataset and the training settings. JSON, format_version 1.
// Reading is strict: a newer format_version, a truncated file, a wrong type or
// an unknown layer type is a ProjectError naming the JSON path ("/graph/nodes/3/params/units").
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/graph/Graph.h"

namespace strata {

constexpr int kProjectFormatVersion = 1;

class ProjectError : public std::runtime_error {
public:
    ProjectError(std::string jsonPath, const std::string& what) : ProjectError({}, std::move(jsonPath), what) {}
    // With the file (or other source) in front: "net.strata: /graph/nodes/2/id: expected an integer, got string".
    ProjectError(std::string source, std::string jsonPath, const std::string& what)
        : std::runtime_error((source.empty() ? "" : source + ": ") + (jsonPath.empty() ? "" : jsonPath + ": ") + what),
          m_source(std::move(source)), m_path(std::move(jsonPath)), m_message(what) {}
    const std::string& jsonPath() const { return m_path; }
    const std::string& source() const { return m_source; }
    const std::string& message() const { return m_message; }  // without source and path

private:
    std::string m_source;
    std::string m_path;
    std::string m_message;
};

struct DatasetSettings {
    std::string kind = "idx";  // idx | csv | text | synthetic
    // idx: image and label files; csv/text: trainPath (+ validationPath). Relative paths are
    // resolved against the project file's folder.
    std::string trainImages, trainLabels, validationImages, validationLabels;
    std::string trainPath, validationPath;
    std::string labelColumn = "label";  // csv: name of the label column
    std::string tokenizer = "char";     // text: char | word
    int maxTokens = 32;                 // text: sequence length (padded/truncated)
    int maxVocab = 20000;               // text
    double validationSplit = 0.0;       // fraction of the training file held out when there is no validation file
    std::string normalization = "scale";  // none | scale (x/255) | standardize (train mean/std)
    // Augmentation (images, training split only).
    int cropPadding = 0;
    bool horizontalFlip = false;
    float noiseStd = 0.0f;
    int64_t trainLimit = 0, validationLimit = 0;  // >0: use only the first N samples
    std::vector<std::string> classNames;
    // synthetic: samples, classes and per-sample shape
    int64_t syntheticSamples = 1024;
    int syntheticClasses = 4;
    std::vector<int64_t> syntheticShape{16};
    bool operator==(const DatasetSettings&) const = default;
};

struct TrainingSettings {
    std::string optimizer = "sgd";  // sgd | adam | adamw
    double learningRate = 0.01;
    double momentum = 0.9;
    bool nesterov = false;
    double weightDecay = 0.0;
    double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
    std::string loss = "cross_entropy";  // cross_entropy | mse | bce_logits
    std::string schedule = "constant";   // constant | step | cosine | one_cycle
    int stepEpochs = 1;                  // step: decay every N epochs
    double stepGamma = 0.1;
    int warmupSteps = 0;                 // linear warm-up, combined with any schedule
    double minLearningRate = 0.0;        // cosine floor
    int epochs = 3;
    int batchSize = 64;
    uint64_t seed = 42;
    bool deterministic = false;
    std::string precision = "fp32";  // fp32 | bf16 | fp16
    double clipNorm = 0.0;           // 0: no clipping
    int earlyStoppingPatience = 0;   // 0: off
    std::string earlyStoppingMetric = "val_loss";  // val_loss | val_acc
    std::string checkpointDir;
    std::string device = "cpu";
    int threads = 0;  // 0: all cores
    bool operator==(const TrainingSettings&) const = default;
};

struct Project {
    int formatVersion = kProjectFormatVersion;
    std::string name;
    Graph graph;
    DatasetSettings dataset;
    TrainingSettings training;
    bool operator==(const Project& o) const {
        return formatVersion == o.formatVersion && name == o.name && graph == o.graph && dataset == o.dataset &&
               training == o.training;
    }
};

Json projectToJson(const Project& project);
// `source` names the file in messages. Throws ProjectError.
Project projectFromJson(const Json& json);
Project parseProject(const std::string& text, const std::string& source = "project");
// Reads a file; relative dataset paths stay as written (see resolveDatasetPath).
Project readProject(const std::string& path);
// Writes to a temporary file beside `path` and renames it over `path`. Refuses (ProjectError, file untouched)
// a project that would not read back: non-finite numbers, settings out of range, names that are not UTF-8.
void writeProject(const Project& project, const std::string& path);
// A dataset path resolved against the project file's folder ("" stays "").
std::string resolveDatasetPath(const std::string& projectPath, const std::string& datasetPath);

}  // namespace strata
