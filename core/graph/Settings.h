// Settings: a project's dataset and training settings, and the one table that describes them.
//
// Every setting is described once, in the tables of Settings.cpp: its JSON key, the member it
// maps to, its kind, its range or choices, a label and help text for the panels, and the
// strata-train flag that overrides it. The project file (Project.cpp), the dataset and training
// panels (ui/SettingWidgets) and strata-train's overrides take their limits from there, so they
// cannot drift apart. Choices are enums; their spellings ("adamw", "cross_entropy") live only in
// the table and are parsed once, where a value comes in (file, command line, widget). The table also
// says when a setting has an effect (momentum with SGD only): the panels enable an editor by it and
// strata-train warns about a flag whose setting has none.
// The defaults are the member initializers below.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/backend/Backend.h"  // ComputePrecision: training.precision

namespace strata {

using Json = nlohmann::ordered_json;

enum class DatasetKind { Idx, Csv, Text, Synthetic, ImageFolder };
// image_folder: how an image of another size becomes the dataset's image_shape (core/data ResizePolicy).
enum class ImageResize { Stretch, CenterCrop };
// image_folder: decode every image once into memory at the start (Memory), or stream batches from disk
// with worker threads, decoding every epoch (Stream) or once into a uint8 cache (Cache: in memory when it
// fits in cacheMemoryMb, else a memory-mapped file in .strata-cache beside the project).
enum class ImageLoading { Memory, Stream, Cache };
enum class Tokenizer { Char, Word, SentencePiece };
// How a dataset's inputs are normalized (the statistics a run found are core/data's Normalization).
enum class NormalizationMode { None, Scale, Standardize };
enum class OptimizerKind { Sgd, Adam, AdamW };
// What the network learns (core/graph/Task.h: the losses, metrics and targets of each): one class per sample, numbers
// (CSV target columns), several labels at once (sigmoid per label), or an image from an image.
enum class TaskKind { Classification, Regression, MultiLabel, ImageToImage };
// image_to_image: the target of an input image: the image itself (autoencoder), the clean image while the input gets
// noise on the fly (denoising), or the image of the same name in a second folder.
enum class ImageTarget { Input, Denoise, Folder };
// Mae (L1) and Huber: robustLoss (BackendOps.def).
enum class LossKind { CrossEntropy, Mse, BceLogits, Mae, Huber };
enum class ScheduleKind { Constant, Step, Cosine, OneCycle };
enum class EarlyStoppingMetric { ValLoss, ValAcc };
// Data parallel (mpirun, or several devices): how the ranks combine their work (core/train/Trainer.h).
enum class DistMode { Sync, LocalSgd, Async };

struct DatasetSettings {
    TaskKind task = TaskKind::Classification;
    DatasetKind kind = DatasetKind::Idx;
    // idx: image and label files; csv/text: trainPath (+ validationPath); image_folder: trainPath is a
    // folder with one subfolder per class or a CSV of path,label (+ validationPath, the same). Relative
    // paths are resolved against the project file's folder.
    std::string trainImages, trainLabels, validationImages, validationLabels;
    std::string trainPath, validationPath;
    std::string labelColumn = "label";      // csv: name of the label column
    Tokenizer tokenizer = Tokenizer::Char;  // text
    int maxTokens = 32;                     // text: sequence length (padded/truncated)
    int maxVocab = 20000;                   // text
    // text, sentencepiece: a trained SentencePiece .model file; empty: one is trained on the training split
    std::string tokenizerModel;
    double validationSplit = 0.0;  // fraction of the training file held out when there is no validation file
    NormalizationMode normalization = NormalizationMode::Scale;
    // Augmentation (images, training split only).
    int cropPadding = 0;
    bool horizontalFlip = false;
    float noiseStd = 0.0f;
    double resizedCropMinArea = 0.0;              // random resized crop: smallest area fraction; 0: off
    double rotationDegrees = 0.0;                 // random rotation within +-degrees
    double brightness = 0.0, contrast = 0.0;      // random jitter: +- fraction of the pixel range; 1 +- factor
    int64_t trainLimit = 0, validationLimit = 0;  // >0: use only the first N samples
    std::vector<std::string> classNames;
    // synthetic: samples, classes and per-sample shape
    int64_t syntheticSamples = 1024;
    int syntheticClasses = 4;
    std::vector<int64_t> syntheticShape{16};
    // image_folder: every image becomes [C, H, W] (C = 1 gray or 3 RGB), resized by imageResize; a bad
    // file is skipped and reported unless strictImages; decodeThreads 0: one per core.
    std::vector<int64_t> imageShape;
    ImageResize imageResize = ImageResize::Stretch;
    bool strictImages = false;
    int decodeThreads = 0;
    // image_folder: streaming (core/data/ImageStream.h). loaderBatches bounds the decoded batches the loader
    // holds ready (its memory budget); cacheMemoryMb the in-memory decoded cache (Cache), larger goes to a file.
    ImageLoading imageLoading = ImageLoading::Memory;
    int loaderBatches = 4;
    int64_t cacheMemoryMb = 2048;
    // Tasks other than classification (Task.h). regression: the CSV columns predicted (the other columns but the
    // label column are features), standardized with the training split's statistics unless standardizeTargets is
    // off; multi_label: one 0/1 column per label, or, when empty, labelColumn holds a sample's labels separated by
    // labelSeparator. threshold: multi_label's decision threshold on each label's probability.
    std::vector<std::string> targetColumns;
    bool standardizeTargets = true;
    std::string labelSeparator = ";";
    double threshold = 0.5;
    // image_to_image: where targets come from; denoise adds noise_std Gaussian noise and sets maskingFraction of
    // the pixels to zero, on the fly, in both splits (validation with a fixed seed); folder: targetPath (and
    // validationTargetPath) hold an image of the same file name for every input image.
    ImageTarget imageTarget = ImageTarget::Input;
    double maskingFraction = 0.0;
    std::string targetPath, validationTargetPath;
    bool operator==(const DatasetSettings&) const = default;
};

struct TrainingSettings {
    OptimizerKind optimizer = OptimizerKind::Sgd;
    double learningRate = 0.01;
    double momentum = 0.9;
    bool nesterov = false;
    double weightDecay = 0.0;
    double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
    LossKind loss = LossKind::CrossEntropy;
    double huberDelta = 1.0;  // huber: where the loss turns from squared to linear (in standardized target units)
    ScheduleKind schedule = ScheduleKind::Constant;
    int stepEpochs = 1;  // step: decay every N epochs
    double stepGamma = 0.1;
    int warmupSteps = 0;           // linear warm-up, combined with any schedule
    double minLearningRate = 0.0;  // cosine floor
    int epochs = 3;
    int batchSize = 64;
    uint64_t seed = 42;
    bool deterministic = false;
    ComputePrecision precision = ComputePrecision::F32;
    double clipNorm = 0.0;          // 0: no clipping
    int earlyStoppingPatience = 0;  // 0: off
    EarlyStoppingMetric earlyStoppingMetric = EarlyStoppingMetric::ValLoss;
    std::string checkpointDir;
    // A checkpoint whose weights a new run starts from (by name and shape, as --init-from) when neither
    // --init-from nor --resume is given; relative to the project file's folder. The ONNX importer sets it.
    std::string initFrom;
    std::string device = "cpu";
    int threads = 0;  // 0: all cores
    // Data parallel only (one process on one device ignores them): sync, local SGD averaging every
    // localSgdSteps steps, or async.
    DistMode distMode = DistMode::Sync;
    int localSgdSteps = 8;
    bool operator==(const TrainingSettings&) const = default;
};

// A choice's spelling in the project file and on the command line ("adamw"), from the table.
const std::string& settingName(TaskKind v);
const std::string& settingName(ImageTarget v);
const std::string& settingName(DatasetKind v);
const std::string& settingName(Tokenizer v);
const std::string& settingName(ImageResize v);
const std::string& settingName(ImageLoading v);
const std::string& settingName(NormalizationMode v);
const std::string& settingName(OptimizerKind v);
const std::string& settingName(LossKind v);
const std::string& settingName(ScheduleKind v);
const std::string& settingName(EarlyStoppingMetric v);
const std::string& settingName(ComputePrecision v);
const std::string& settingName(DistMode v);

// ---- the table -------------------------------------------------------------------------------

enum class SettingGroup { Dataset, Training };  // the project file's "dataset" and "training" objects

// The member's type decides the kind (Settings.cpp): int -> Int, int64_t -> Int64, an enum -> Choice...
enum class SettingKind {
    Int,     // int, intMin..intMax
    Int64,   // int64_t, intMin..intMax
    UInt64,  // uint64_t, always 0..2^64-1
    Double,  // double, min..max (max excluded when maxOpen)
    Float,   // float, min..max; written as the float's shortest decimal
    Bool,
    String,
    Path,    // a file or folder; the dataset's are relative to the project file's folder
    Choice,  // an enum; one of `choices`
    StringList,
    IntList,  // minItems..maxItems integers, each intMin..intMax
};

struct SettingChoice {
    std::string name;   // in the file and on the command line: "cross_entropy"
    int value = 0;      // the enum's value
    std::string label;  // in a widget: "cross-entropy"
    std::string help;   // tooltip; may be empty
    // Non-empty: the choice may also be written "name:V", V being the value of this setting (of the same
    // group): "local-sgd:8" is dist_mode local-sgd with local_sgd_steps 8, as files and flags wrote it before.
    std::string argumentKey;
};

// One condition for a setting to have an effect (SettingInfo::appliesWhen).
struct SettingCondition {
    enum class Kind {
        OneOf,         // the setting `key` (same group) is one of `values`, a Choice's enum values
        Positive,      // the setting `key` (same group) is above 0
        DataParallel,  // the run is data parallel: several ranks (mpirun), or several devices in training.device
    };
    Kind kind = Kind::OneOf;
    std::string key;
    std::vector<int> values;
};

// What a setting is, without the struct it lives in (widgets, messages and tests need only this).
struct SettingInfo {
    SettingGroup group = SettingGroup::Training;
    std::string key;  // JSON key inside its group: "batch_size"
    SettingKind kind = SettingKind::Int;
    int64_t intMin = 0, intMax = 0;      // Int, Int64, IntList elements
    double min = 0, max = 0;             // Double, Float
    bool maxOpen = false;                // Double: max itself is excluded
    bool nonEmpty = false;               // String, Path
    size_t minItems = 0, maxItems = 0;   // IntList
    std::vector<SettingChoice> choices;  // Choice, in widget order
    std::string label;                   // "Batch size"
    std::string help;                    // one sentence: tooltip and --help
    std::string flag;                    // strata-train's override ("--batch"); empty: none
    std::string flagValue;               // the flag's value in --help ("N"); empty for a Bool flag (no value)
    // When the setting has an effect: all must hold; empty: always.
    std::vector<SettingCondition> appliesWhen;
    // Left out of the project file while it holds its default: settings added after files existed, so that a file
    // without them loads and saves byte for byte as before (the task's settings).
    bool omittedWhenDefault = false;

    const char* groupKey() const { return group == SettingGroup::Dataset ? "dataset" : "training"; }
    std::string jsonPath() const { return std::string("/") + groupKey() + "/" + key; }  // "/training/batch_size"
    std::string dottedName() const { return std::string(groupKey()) + "." + key; }      // "training.batch_size"
    bool isInteger() const { return kind == SettingKind::Int || kind == SettingKind::Int64; }
    bool isNumber() const { return kind == SettingKind::Double || kind == SettingKind::Float; }
    // "1 to 16777216", "0 to 1, excluding 1", "one of: sgd, adam, adamw", "1 to 8 values, each 1 to ..."; "" when any.
    std::string rangeText() const;
    // Choice: the value of a spelling; throws std::invalid_argument "unknown value 'adamm' (one of: sgd, adam, adamw)".
    int parseChoice(const std::string& name) const;
    // Choice: the spelling of a value; throws std::invalid_argument for a value the table does not list.
    const std::string& choiceName(int value) const;
};

// A setting of S (DatasetSettings or TrainingSettings) with its accessors. Values travel as Json:
// numbers, booleans, strings and arrays as in the file, except a Choice, which is the enum's value
// as an integer (its spelling is the table's business).
template <class S>
struct SettingSpec : SettingInfo {
    Json (*get)(const S&) = nullptr;
    void (*set)(S&, const Json&) = nullptr;  // the value must have passed the table's checks
};

// In the order of the file (which is the order written).
const std::vector<SettingSpec<DatasetSettings>>& datasetSettingSpecs();
const std::vector<SettingSpec<TrainingSettings>>& trainingSettingSpecs();
// By JSON key; throws std::invalid_argument for a key the table does not have (a programming error).
const SettingSpec<DatasetSettings>& datasetSetting(const std::string& key);
const SettingSpec<TrainingSettings>& trainingSetting(const std::string& key);

// The range texts of the file's messages and of rangeText(): "1 to 16777216", "0 to 1, excluding 1".
std::string integerRangeText(int64_t min, int64_t max);
std::string numberRangeText(double min, double max, bool maxOpen);

// ---- when a setting applies ------------------------------------------------------------------

// Whether `setting` has an effect with these settings: every condition of its appliesWhen holds. `ranks`: the
// processes of the job; 0 when not known (the workbench edits a project that mpirun may run), which counts as
// data parallel.
bool settingApplies(const SettingInfo& setting, const DatasetSettings& dataset, const TrainingSettings& training,
                    int ranks);
// Why it has none, for a message after "--decode-threads has no effect ": "with dataset.kind idx (it applies
// with image_folder)", "in a run of one process on one device (...)"; empty when it applies.
std::string settingInapplicableReason(const SettingInfo& setting, const DatasetSettings& dataset,
                                      const TrainingSettings& training, int ranks);

// A choice written with its argument ("local-sgd:8", SettingChoice::argumentKey): the choice's value, and the
// argument's setting and text. Nullopt when `text` is not of that form.
struct ChoiceArgument {
    int value = 0;
    const SettingInfo* argument = nullptr;
    std::string argumentText;
};
std::optional<ChoiceArgument> splitChoiceArgument(const SettingInfo& choice, const std::string& text);
// The JSON value a file would hold for a value typed as text (a number as a number, a choice's name as a
// string, "" for a Bool flag as true); unchecked: checkSettingValue (Project.h) checks it. Throws
// std::invalid_argument "N is out of range (...)" for a whole number beyond every integer type.
Json settingJsonFromText(const SettingInfo& setting, const std::string& text);

// ---- strata-train's overrides ----------------------------------------------------------------

// The setting a command-line flag overrides ("--batch"), or nullptr.
const SettingInfo* settingForFlag(const std::string& flag);
// Every setting with a flag, in table order (for --help).
std::vector<const SettingInfo*> settingsWithFlags();
// A checked value of a setting, as SettingSpec::set takes it.
struct SettingValue {
    const SettingInfo* setting = nullptr;
    Json value;
};
// Reads the text given after the setting's flag (a Bool flag takes none: pass "") and checks it as the
// project file does. Throws std::invalid_argument naming the flag and the limit:
// "--batch: 0 is out of range (1 to 16777216)". The first value is the flag's setting's; a choice written
// with its argument ("--dist-mode local-sgd:8") adds its argument's setting and value after it. `flag`: the
// flag's name where a command names it otherwise (prune's --lr); empty: the table's.
std::vector<SettingValue> parseSettingFlag(const SettingInfo& setting, const std::string& text,
                                           const std::string& flag = {});
// Stores a checked value (from parseSettingFlag or checkSettingValue) into the settings.
void applySetting(DatasetSettings& dataset, TrainingSettings& training, const SettingInfo& setting, const Json& value);

}  // namespace strata
