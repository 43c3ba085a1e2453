// The settings tables (see Settings.h). Each entry: key, member, range or choices, label, help, flag.
//
// Limits settled here when the project file, the panels and strata-train disagreed (issue 16): the
// project file's limit wherever it was sensible: max_tokens 1 to 2^20 (the dataset panel said
// 100000), batch_size 1 to 2^24 (panel 10^6; strata-train took any int and wrapped), epochs,
// step_epochs, warmup_steps and patience up to INT_MAX, threads 0 to 4096 (panel 1024),
// crop_padding 0 to 1024 (panel 64), validation_split [0, 1) (panel 0.9), the learning rate and
// other doubles any finite number >= 0, seed all of uint64 (strata-train stopped at 2^63).
// Where the file's limit was not sensible: max_vocab from 3, synthetic_classes and
// synthetic_samples from 2 (the loader refused less anyway: padding, unknown and one token; two
// classes), and noise_std up to 10^6 (FLT_MAX could not even round-trip: it is written as
// 3.4028235e+38, which reads back above FLT_MAX).
#include "core/graph/Settings.h"

#include <algorithm>
#include <cfloat>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include "core/graph/Project.h"  // checkSettingValue, ProjectError
#include "core/io/InputLimits.h"
#include "core/tensor/Device.h"

namespace strata {

namespace {

constexpr double kHuge = DBL_MAX;  // "no upper limit" for a double: any finite number
constexpr int64_t kIntMax = INT_MAX;

// ---- accessors from a pointer to member ----

template <auto Member>
struct FieldAccess;

template <class S, class T, T S::*Member>
struct FieldAccess<Member> {
    using Owner = S;
    using Type = T;
    static Json get(const S& s) {
        if constexpr (std::is_enum_v<T>)
            return Json(static_cast<int>(s.*Member));
        else
            return Json(s.*Member);
    }
    static void set(S& s, const Json& v) {
        if constexpr (std::is_enum_v<T>)
            s.*Member = static_cast<T>(v.get<int>());
        else
            s.*Member = v.get<T>();
    }
};

template <class T>
constexpr SettingKind kindOf() {
    if constexpr (std::is_enum_v<T>)
        return SettingKind::Choice;
    else if constexpr (std::is_same_v<T, bool>)
        return SettingKind::Bool;
    else if constexpr (std::is_same_v<T, int>)
        return SettingKind::Int;
    else if constexpr (std::is_same_v<T, int64_t>)
        return SettingKind::Int64;
    else if constexpr (std::is_same_v<T, uint64_t>)
        return SettingKind::UInt64;
    else if constexpr (std::is_same_v<T, double>)
        return SettingKind::Double;
    else if constexpr (std::is_same_v<T, float>)
        return SettingKind::Float;
    else if constexpr (std::is_same_v<T, std::string>)
        return SettingKind::String;
    else if constexpr (std::is_same_v<T, std::vector<std::string>>)
        return SettingKind::StringList;
    else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
        return SettingKind::IntList;
    else
        static_assert(!sizeof(T), "no setting kind for this member type");
}

// One table entry under construction: `entry<&TrainingSettings::batchSize>("batch_size", ...)`
// takes its kind from the member's type; the calls after it add what that kind needs.
template <auto Member>
class Entry {
    using Access = FieldAccess<Member>;
    using S = typename Access::Owner;
    using T = typename Access::Type;

public:
    Entry(const std::string& key, const std::string& label, const std::string& help) {
        m_spec.group = std::is_same_v<S, DatasetSettings> ? SettingGroup::Dataset : SettingGroup::Training;
        m_spec.key = key;
        m_spec.kind = kindOf<T>();
        m_spec.label = label;
        m_spec.help = help;
        m_spec.get = &Access::get;
        m_spec.set = &Access::set;
    }
    Entry& intRange(int64_t min, int64_t max) {
        m_spec.intMin = min;
        m_spec.intMax = max;
        return *this;
    }
    Entry& numberRange(double min, double max, bool maxOpen = false) {
        m_spec.min = min;
        m_spec.max = max;
        m_spec.maxOpen = maxOpen;
        return *this;
    }
    Entry& items(size_t minItems, size_t maxItems) {
        m_spec.minItems = minItems;
        m_spec.maxItems = maxItems;
        return *this;
    }
    Entry& path() {
        m_spec.kind = SettingKind::Path;
        return *this;
    }
    Entry& nonEmpty() {
        m_spec.nonEmpty = true;
        return *this;
    }
    // (spelling, enum value, widget label, tooltip)
    Entry& choice(std::string name, T value, std::string label, std::string help = {}) {
        m_spec.choices.push_back({std::move(name), static_cast<int>(value), std::move(label), std::move(help), {}});
        return *this;
    }
    // The last choice added may also be written "name:V", V being the value of the setting `key`.
    Entry& choiceArgument(const std::string& key) {
        m_spec.choices.back().argumentKey = key;
        return *this;
    }
    Entry& flag(const std::string& flag, const std::string& value = {}) {
        m_spec.flag = flag;
        m_spec.flagValue = value;
        return *this;
    }
    // Applies only when the Choice setting `key` (of the same group) is one of `values`.
    template <class E>
    Entry& when(const std::string& key, std::initializer_list<E> values) {
        SettingCondition c{SettingCondition::Kind::OneOf, key, {}};
        for (E v : values) c.values.push_back(static_cast<int>(v));
        m_spec.appliesWhen.push_back(std::move(c));
        return *this;
    }
    // Applies only when the number `key` (of the same group) is above 0.
    Entry& whenPositive(const std::string& key) {
        m_spec.appliesWhen.push_back({SettingCondition::Kind::Positive, key, {}});
        return *this;
    }
    Entry& omittedWhenDefault() {
        m_spec.omittedWhenDefault = true;
        return *this;
    }
    Entry& whenDataParallel() {
        m_spec.appliesWhen.push_back({SettingCondition::Kind::DataParallel, {}, {}});
        return *this;
    }
    operator SettingSpec<S>() const { return m_spec; }

private:
    SettingSpec<S> m_spec;
};

using DS = DatasetSettings;
using TS = TrainingSettings;

std::vector<SettingSpec<DS>> makeDatasetSpecs() {
    return {
        Entry<&DS::task>("task", "Task", "What the network learns from the data.")
            .choice("classification", TaskKind::Classification, "classification",
                    "One class per sample: softmax over the classes; accuracy and a confusion matrix.")
            .choice("regression", TaskKind::Regression, "regression",
                    "Numbers: the CSV target columns, standardized; MAE, RMSE and R\u00b2 per target.")
            .choice("multi_label", TaskKind::MultiLabel, "multi-label",
                    "Several labels per sample: a sigmoid per label; F1, precision and recall at a threshold.")
            .choice("image_to_image", TaskKind::ImageToImage, "image to image",
                    "An image from an image (autoencoder, denoising, paired folders); PSNR.")
            .omittedWhenDefault()
            .flag("--task", "classification|regression|multi_label|image_to_image"),
        Entry<&DS::kind>("kind", "Kind", "Where the samples come from.")
            .choice("idx", DatasetKind::Idx, "IDX images (MNIST format)",
                    "Image and label files in the IDX format, gzipped or raw (MNIST, Fashion-MNIST).")
            .choice("csv", DatasetKind::Csv, "CSV table",
                    "A header row; the label column is the class, every other column a numeric feature.")
            .choice("text", DatasetKind::Text, "CSV text (label,text)",
                    "label,text rows, tokenized into ids for an Embedding.")
            .choice("synthetic", DatasetKind::Synthetic, "Synthetic (Gaussian blobs)",
                    "Gaussian blobs, one per class: no files needed.")
            .choice("image_folder", DatasetKind::ImageFolder, "Image folder (one subfolder per class)",
                    "PNG, JPEG, BMP, PGM or PPM files in one subfolder per class, or listed in a CSV of path,label."),
        Entry<&DS::trainImages>("train_images", "Training images", "idx: the training images file.")
            .when("kind", {DatasetKind::Idx})
            .path(),
        Entry<&DS::trainLabels>("train_labels", "Training labels", "idx: the training labels file.")
            .when("kind", {DatasetKind::Idx})
            .path(),
        Entry<&DS::validationImages>("validation_images", "Validation images",
                                     "idx: the validation images file (optional).")
            .when("kind", {DatasetKind::Idx})
            .path(),
        Entry<&DS::validationLabels>("validation_labels", "Validation labels",
                                     "idx: the validation labels file (optional).")
            .when("kind", {DatasetKind::Idx})
            .path(),
        Entry<&DS::trainPath>("train_path", "Training file",
                              "csv and text: the training CSV file; image_folder: the folder of class folders, or a "
                              "CSV of path,label.")
            .when("kind", {DatasetKind::Csv, DatasetKind::Text, DatasetKind::ImageFolder})
            .path(),
        Entry<&DS::validationPath>("validation_path", "Validation file",
                                   "csv and text: the validation CSV file; image_folder: the validation folder or CSV "
                                   "(all optional).")
            .when("kind", {DatasetKind::Csv, DatasetKind::Text, DatasetKind::ImageFolder})
            .path(),
        Entry<&DS::labelColumn>("label_column", "Label column",
                                "csv and text: the name of the column that holds the class.")
            .when("kind", {DatasetKind::Csv, DatasetKind::Text}),
        Entry<&DS::tokenizer>("tokenizer", "Tokenizer", "text: how a text becomes tokens.")
            .when("kind", {DatasetKind::Text})
            .choice("char", Tokenizer::Char, "characters", "One token per character (code point).")
            .choice("word", Tokenizer::Word, "words", "One token per run of letters and digits.")
            .choice("sentencepiece", Tokenizer::SentencePiece, "subwords (SentencePiece)",
                    "Subword pieces of a SentencePiece unigram model: frequent words whole, rare ones in parts, so "
                    "no word is unknown."),
        Entry<&DS::maxTokens>("max_tokens", "Sequence length",
                              "text: tokens per sample; longer texts are truncated, shorter ones padded.")
            .when("kind", {DatasetKind::Text})
            .intRange(1, int64_t(1) << 20),
        Entry<&DS::maxVocab>("max_vocab", "Vocabulary size",
                             "text: the most frequent training tokens kept, padding and unknown included "
                             "(sentencepiece: at most this many pieces).")
            .when("kind", {DatasetKind::Text})
            .intRange(3, kIntMax),
        Entry<&DS::tokenizerModel>("tokenizer_model", "SentencePiece model",
                                   "text, sentencepiece: a trained .model file (padding id 0, unknown id 1); empty: "
                                   "a model is trained on the training split when the data loads.")
            .when("kind", {DatasetKind::Text})
            .when("tokenizer", {Tokenizer::SentencePiece})
            .path(),
        Entry<&DS::validationSplit>("validation_split", "Validation split",
                                    "Fraction of the training file held out when there is no validation file.")
            .numberRange(0.0, 1.0, true),
        Entry<&DS::normalization>("normalization", "Normalization", "How inputs are scaled before training.")
            .choice("none", NormalizationMode::None, "none", "Inputs as they are.")
            .choice("scale", NormalizationMode::Scale, "scale (x/255)", "Images divided by 255; other data as is.")
            .choice("standardize", NormalizationMode::Standardize, "standardize (train mean/std)",
                    "Minus the training split's mean, divided by its standard deviation (per feature unless images)."),
        Entry<&DS::cropPadding>("crop_padding", "Random crop padding",
                                "Images, training split: pad by this many pixels, then crop back at a random offset.")
            .intRange(0, 1024),
        Entry<&DS::horizontalFlip>("horizontal_flip", "Random horizontal flip",
                                   "Images, training split: mirror half of the samples."),
        Entry<&DS::noiseStd>("noise_std", "Gaussian noise std",
                             "Training split: add Gaussian noise of this standard deviation to every input.")
            .numberRange(0.0, 1e6),
        Entry<&DS::resizedCropMinArea>("resized_crop_min_area", "Random resized crop",
                                       "Images, training split: crop a random region of at least this fraction of "
                                       "the area (aspect 3/4 to 4/3) and resize it back; 0: off.")
            .numberRange(0.0, 1.0),
        Entry<&DS::rotationDegrees>("rotation_degrees", "Random rotation",
                                    "Images, training split: rotate by a random angle within +- this many degrees.")
            .numberRange(0.0, 180.0),
        Entry<&DS::brightness>("brightness", "Brightness jitter",
                               "Images, training split: add a random level within +- this fraction of the pixel "
                               "range.")
            .numberRange(0.0, 1.0),
        Entry<&DS::contrast>("contrast", "Contrast jitter",
                             "Images, training split: scale each image's deviations from its mean by 1 +- this.")
            .numberRange(0.0, 1.0),
        Entry<&DS::trainLimit>("train_limit", "Training samples", "Use only the first N training samples; 0: all.")
            .intRange(0, INT64_MAX)
            .flag("--train-limit", "N"),
        Entry<&DS::validationLimit>("validation_limit", "Validation samples",
                                    "Use only the first N validation samples; 0: all.")
            .intRange(0, INT64_MAX),
        Entry<&DS::classNames>("class_names", "Class names",
                               "Names of the classes in label order; empty: from the data."),
        Entry<&DS::syntheticSamples>("synthetic_samples", "Samples", "synthetic: samples to generate.")
            .when("kind", {DatasetKind::Synthetic})
            .intRange(2, INT64_MAX),
        Entry<&DS::syntheticClasses>("synthetic_classes", "Classes", "synthetic: classes (one blob each).")
            .when("kind", {DatasetKind::Synthetic})
            .intRange(2, kIntMax),
        Entry<&DS::syntheticShape>("synthetic_shape", "Sample shape",
                                   "synthetic: per-sample shape, e.g. 16 or 1,28,28.")
            .when("kind", {DatasetKind::Synthetic})
            .items(1, 8)
            .intRange(1, kIntMax),
        Entry<&DS::imageShape>("image_shape", "Image shape",
                               "image_folder: channels (1 gray or 3 RGB), height and width every image becomes; "
                               "the Input node's shape.")
            .when("kind", {DatasetKind::ImageFolder})
            .items(0, 3)
            .intRange(1, 1 << 14),
        Entry<&DS::imageResize>("image_resize", "Resize", "image_folder: how an image of another size is fitted.")
            .when("kind", {DatasetKind::ImageFolder})
            .choice("stretch", ImageResize::Stretch, "stretch", "Each axis scaled on its own (aspect ratio not kept).")
            .choice("center_crop", ImageResize::CenterCrop, "shorter side, centre crop",
                    "The shorter side fits; the longer one is cut evenly at both ends."),
        Entry<&DS::strictImages>("strict_images", "Stop at a bad image",
                                 "image_folder: stop with the file's path instead of skipping and counting it.")
            .when("kind", {DatasetKind::ImageFolder}),
        Entry<&DS::decodeThreads>("decode_threads", "Decode threads",
                                  "image_folder: threads decoding images; 0: one per core.")
            .when("kind", {DatasetKind::ImageFolder})
            .intRange(0, 256)
            .flag("--decode-threads", "N"),
        Entry<&DS::imageLoading>("image_loading", "Loading",
                                 "image_folder: decode every image into memory at the start, or stream batches from "
                                 "disk while training (a folder larger than memory trains).")
            .when("kind", {DatasetKind::ImageFolder})
            .choice("memory", ImageLoading::Memory, "all in memory", "Decode every image once at the start.")
            .choice("stream", ImageLoading::Stream, "stream, decode every epoch",
                    "Worker threads decode each batch from disk; only loader_batches batches are held.")
            .choice("cache", ImageLoading::Cache, "stream, decoded cache",
                    "Stream the first epoch and keep the decoded images as bytes (in memory up to "
                    "cache_memory_mb, else a file in .strata-cache beside the project): later epochs read them.")
            .flag("--image-loading", "memory|stream|cache"),
        Entry<&DS::loaderBatches>("loader_batches", "Batches held ready",
                                  "image_folder, streamed: decoded batches the loader may hold ahead of training "
                                  "(its memory budget).")
            .when("kind", {DatasetKind::ImageFolder})
            .when("image_loading", {ImageLoading::Stream, ImageLoading::Cache})
            .intRange(1, 64),
        Entry<&DS::cacheMemoryMb>("cache_memory_mb", "Cache in memory up to (MB)",
                                  "image_folder, cache: a decoded cache up to this size stays in memory; a larger one "
                                  "is a memory-mapped file in .strata-cache beside the project; 0: always a file.")
            .when("kind", {DatasetKind::ImageFolder})
            .when("image_loading", {ImageLoading::Cache})
            .intRange(0, int64_t(1) << 30),
        Entry<&DS::targetColumns>("target_columns", "Target columns",
                                  "csv regression: the columns predicted (one or several); multi_label: one 0/1 "
                                  "column per label (empty: the label column lists the labels).")
            .when("task", {TaskKind::Regression, TaskKind::MultiLabel})
            .omittedWhenDefault(),
        Entry<&DS::standardizeTargets>("standardize_targets", "Standardize targets",
                                       "regression: train on (target - mean) / std of the training split; "
                                       "predictions are turned back into the data's units.")
            .when("task", {TaskKind::Regression})
            .omittedWhenDefault(),
        Entry<&DS::labelSeparator>("label_separator", "Label separator",
                                   "multi_label without target columns: what separates a sample's labels in the "
                                   "label column.")
            .when("task", {TaskKind::MultiLabel})
            .nonEmpty()
            .omittedWhenDefault(),
        Entry<&DS::threshold>("threshold", "Decision threshold",
                              "multi_label: a label is predicted when its probability is at least this.")
            .when("task", {TaskKind::MultiLabel})
            .numberRange(0.0, 1.0)
            .omittedWhenDefault()
            .flag("--threshold", "P"),
        Entry<&DS::imageTarget>("image_target", "Target image", "image_to_image: what the output should be.")
            .when("task", {TaskKind::ImageToImage})
            .choice("input", ImageTarget::Input, "the input (autoencoder)", "Reconstruct the input image.")
            .choice("denoise", ImageTarget::Denoise, "the clean input (denoising)",
                    "The input gets Gaussian noise (noise_std) and masking (masking_fraction) on the fly; the "
                    "target is the clean image.")
            .choice("folder", ImageTarget::Folder, "an image of the same name (paired folders)",
                    "target_path holds an image named like each input image.")
            .omittedWhenDefault(),
        Entry<&DS::maskingFraction>("masking_fraction", "Masking noise",
                                    "image_to_image, denoise: the fraction of input pixels set to zero at random.")
            .when("task", {TaskKind::ImageToImage})
            .when("image_target", {ImageTarget::Denoise})
            .numberRange(0.0, 1.0, true)
            .omittedWhenDefault(),
        Entry<&DS::targetPath>("target_path", "Target images",
                               "image_to_image, folder: the folder of target images, named like the training "
                               "images.")
            .when("task", {TaskKind::ImageToImage})
            .when("image_target", {ImageTarget::Folder})
            .path()
            .omittedWhenDefault(),
        Entry<&DS::validationTargetPath>("validation_target_path", "Validation target images",
                                         "image_to_image, folder: the target images of the validation folder.")
            .when("task", {TaskKind::ImageToImage})
            .when("image_target", {ImageTarget::Folder})
            .path()
            .omittedWhenDefault(),
    };
}

std::vector<SettingSpec<TS>> makeTrainingSpecs() {
    return {
        Entry<&TS::optimizer>("optimizer", "Optimizer", "How gradients update the weights.")
            .choice("sgd", OptimizerKind::Sgd, "SGD", "Stochastic gradient descent, with optional (Nesterov) momentum.")
            .choice("adam", OptimizerKind::Adam, "Adam", "Adam; weight decay is added to the gradient (L2).")
            .choice("adamw", OptimizerKind::AdamW, "AdamW", "Adam with decoupled weight decay."),
        Entry<&TS::learningRate>("learning_rate", "Learning rate", "The step size (before schedule and warm-up).")
            .numberRange(0.0, kHuge),
        Entry<&TS::momentum>("momentum", "Momentum", "SGD: fraction of the previous update kept.")
            .numberRange(0.0, 1.0, true)
            .when("optimizer", {OptimizerKind::Sgd}),
        Entry<&TS::nesterov>("nesterov", "Nesterov momentum", "SGD: look ahead along the momentum.")
            .when("optimizer", {OptimizerKind::Sgd}),
        Entry<&TS::weightDecay>("weight_decay", "Weight decay", "Pulls every weight towards zero by this factor.")
            .numberRange(0.0, kHuge),
        Entry<&TS::beta1>("beta1", "Adam \u03b21", "Adam: decay of the gradient's running mean.")
            .numberRange(0.0, 1.0, true)
            .when("optimizer", {OptimizerKind::Adam, OptimizerKind::AdamW}),
        Entry<&TS::beta2>("beta2", "Adam \u03b22", "Adam: decay of the squared gradient's running mean.")
            .numberRange(0.0, 1.0, true)
            .when("optimizer", {OptimizerKind::Adam, OptimizerKind::AdamW}),
        Entry<&TS::eps>("eps", "Adam \u03b5", "Adam: added to the denominator.")
            .numberRange(0.0, kHuge)
            .when("optimizer", {OptimizerKind::Adam, OptimizerKind::AdamW}),
        Entry<&TS::loss>("loss", "Loss", "What training minimizes.")
            .choice("cross_entropy", LossKind::CrossEntropy, "cross-entropy", "Softmax cross-entropy over the classes.")
            .choice("mse", LossKind::Mse, "mean squared error",
                    "Classification: against one-hot targets; regression and image to image: against the targets.")
            .choice(
                "bce_logits", LossKind::BceLogits, "binary cross-entropy (logits)",
                "Sigmoid and binary cross-entropy per output: against one-hot targets, or each label (multi-label).")
            .choice("mae", LossKind::Mae, "mean absolute error (L1)", "Regression and image to image.")
            .choice("huber", LossKind::Huber, "Huber",
                    "Regression: squared near the target, linear beyond huber_delta."),
        Entry<&TS::huberDelta>("huber_delta", "Huber delta",
                               "huber: the error (in standardized target units) where the loss turns linear.")
            .numberRange(1e-6, 1e6)
            .when("loss", {LossKind::Huber})
            .omittedWhenDefault(),
        Entry<&TS::schedule>("schedule", "Schedule", "How the learning rate changes over the run.")
            .choice("constant", ScheduleKind::Constant, "constant")
            .choice("step", ScheduleKind::Step, "step decay", "Multiplied by the decay factor every few epochs.")
            .choice("cosine", ScheduleKind::Cosine, "cosine", "A half cosine from the learning rate to the floor.")
            .choice("one_cycle", ScheduleKind::OneCycle, "one-cycle",
                    "Up to the learning rate over the first 30% of the run, then down to 1/10000 of it."),
        Entry<&TS::stepEpochs>("step_epochs", "Decay every", "step: epochs between decays.")
            .intRange(1, kIntMax)
            .when("schedule", {ScheduleKind::Step}),
        Entry<&TS::stepGamma>("step_gamma", "Decay factor", "step: the learning rate is multiplied by this.")
            .numberRange(0.0, kHuge)
            .when("schedule", {ScheduleKind::Step}),
        Entry<&TS::warmupSteps>("warmup_steps", "Linear warm-up",
                                "Steps over which the learning rate rises linearly from zero (with any schedule).")
            .intRange(0, kIntMax),
        Entry<&TS::minLearningRate>("min_learning_rate", "Cosine floor", "cosine: the learning rate at the end.")
            .numberRange(0.0, kHuge)
            .when("schedule", {ScheduleKind::Cosine}),
        Entry<&TS::epochs>("epochs", "Epochs", "Passes over the training split.")
            .intRange(1, kIntMax)
            .flag("--epochs", "N"),
        Entry<&TS::batchSize>("batch_size", "Batch size", "Samples per step.")
            .intRange(1, int64_t(1) << 24)
            .flag("--batch", "N"),
        Entry<&TS::seed>("seed", "Seed", "Random seed of initialization, shuffling, dropout and augmentation.")
            .flag("--seed", "N"),
        Entry<&TS::deterministic>("deterministic", "Deterministic (repeatable, may be slower)",
                                  "Deterministic kernels: the same seed gives the same losses.")
            .flag("--deterministic"),
        Entry<&TS::precision>("precision", "Precision", "Arithmetic precision of matrix products and convolutions.")
            .choice("fp32", ComputePrecision::F32, "fp32", "Float32 everywhere.")
            .choice("bf16", ComputePrecision::BF16, "bf16 (mixed)",
                    "Matrix products and convolutions round their inputs to bfloat16 and sum in float32; weights "
                    "and activations stay float32.")
            .choice("fp16", ComputePrecision::F16, "fp16 (mixed)",
                    "Matrix products and convolutions round their inputs to float16 and sum in float32, with "
                    "dynamic loss scaling (steps whose gradients overflow are skipped); weights and activations "
                    "stay float32.")
            .flag("--precision", "fp32|bf16|fp16"),
        Entry<&TS::clipNorm>("clip_norm", "Clip gradient norm", "Gradients are scaled down to this norm; 0: off.")
            .numberRange(0.0, kHuge),
        Entry<&TS::earlyStoppingPatience>("early_stopping_patience", "Patience",
                                          "Stop after this many epochs without improvement; 0: off.")
            .intRange(0, kIntMax),
        Entry<&TS::earlyStoppingMetric>("early_stopping_metric", "Metric", "What early stopping watches.")
            .choice("val_loss", EarlyStoppingMetric::ValLoss, "validation loss")
            .choice("val_acc", EarlyStoppingMetric::ValAcc, "validation accuracy")
            .whenPositive("early_stopping_patience"),
        Entry<&TS::checkpointDir>("checkpoint_dir", "Checkpoint folder", "Where checkpoints are written; empty: none.")
            .path()
            .flag("--checkpoint-dir", "DIR"),
        Entry<&TS::initFrom>("init_from", "Start from weights",
                             "A checkpoint a new run starts from (tensors matched by name and shape) unless "
                             "--init-from or --resume is given; empty: the seeded initial weights.")
            .path(),
        Entry<&TS::device>("device", "Device", "Where to train: cpu, cuda or cuda:N; several GPUs: cuda:0,cuda:1.")
            .nonEmpty()
            .flag("--device", "cpu|cuda|cuda:N"),
        Entry<&TS::threads>("threads", "CPU threads", "CPU threads; 0: all cores.")
            .intRange(0, 4096)
            .flag("--threads", "N"),
        Entry<&TS::distMode>("dist_mode", "Data-parallel mode",
                             "Under mpirun or on several devices: how the ranks combine their work.")
            .choice("sync", DistMode::Sync, "sync",
                    "Gradients summed every step: equals one process training on the global batch.")
            .choice("local-sgd", DistMode::LocalSgd, "local SGD",
                    "Each rank steps on its own shard; parameters averaged every local_sgd_steps steps (written "
                    "local-sgd:K, K those steps).")
            .choiceArgument("local_sgd_steps")
            .choice("async", DistMode::Async, "async",
                    "Each step applies the previous step's gradients, summed while it computed (one step stale).")
            .whenDataParallel()
            .flag("--dist-mode", "sync|local-sgd[:K]|async"),
        Entry<&TS::localSgdSteps>("local_sgd_steps", "Average every",
                                  "local-sgd: steps between the averages of the ranks' parameters.")
            .intRange(1, kIntMax)
            .whenDataParallel()
            .when("dist_mode", {DistMode::LocalSgd}),
    };
}

template <class S>
const SettingSpec<S>& findSpec(const std::vector<SettingSpec<S>>& specs, const std::string& key) {
    for (const auto& s : specs)
        if (s.key == key) return s;
    throw std::invalid_argument("no setting '" + key + "' in the settings table");
}

// The setting `key` of a group, as the conditions and choice arguments name it.
const SettingInfo& settingOfGroup(SettingGroup group, const std::string& key) {
    if (group == SettingGroup::Dataset) return findSpec(datasetSettingSpecs(), key);
    return findSpec(trainingSettingSpecs(), key);
}

Json valueOf(const SettingInfo& setting, const DatasetSettings& dataset, const TrainingSettings& training) {
    if (setting.group == SettingGroup::Dataset) return findSpec(datasetSettingSpecs(), setting.key).get(dataset);
    return findSpec(trainingSettingSpecs(), setting.key).get(training);
}

bool dataParallel(const TrainingSettings& training, int ranks) {
    if (ranks != 1) return true;
    try {
        return Device::parseList(training.device).size() > 1;
    } catch (const std::exception&) {
        return false;  // a device that does not parse is refused where it is opened
    }
}

// The first condition of `setting` that does not hold, or nullptr.
const SettingCondition* failedCondition(const SettingInfo& setting, const DatasetSettings& dataset,
                                        const TrainingSettings& training, int ranks) {
    for (const SettingCondition& c : setting.appliesWhen) {
        bool holds = true;
        switch (c.kind) {
            case SettingCondition::Kind::OneOf: {
                const int v = valueOf(settingOfGroup(setting.group, c.key), dataset, training).get<int>();
                holds = std::find(c.values.begin(), c.values.end(), v) != c.values.end();
                break;
            }
            case SettingCondition::Kind::Positive:
                holds = valueOf(settingOfGroup(setting.group, c.key), dataset, training).get<double>() > 0;
                break;
            case SettingCondition::Kind::DataParallel: holds = dataParallel(training, ranks); break;
        }
        if (!holds) return &c;
    }
    return nullptr;
}

std::string joined(const std::vector<SettingChoice>& choices) {
    std::string s;
    for (size_t i = 0; i < choices.size(); ++i) s += (i ? ", " : "") + choices[i].name;
    return s;
}

// The enum's spelling via the table entry of the member that holds it.
const std::string& nameIn(const SettingInfo& spec, int value) { return spec.choiceName(value); }

}  // namespace

// ---- SettingInfo ----

std::string integerRangeText(int64_t min, int64_t max) { return std::to_string(min) + " to " + std::to_string(max); }

std::string numberRangeText(double min, double max, bool maxOpen) {
    auto text = [](double v) {
        if (std::floor(v) == v && std::fabs(v) < 1e15) return std::to_string(static_cast<long long>(v));
        std::ostringstream s;
        s << v;
        return s.str();
    };
    return text(min) + " to " + text(max) + (maxOpen ? ", excluding " + text(max) : std::string());
}

std::string SettingInfo::rangeText() const {
    switch (kind) {
        case SettingKind::Int:
        case SettingKind::Int64: return integerRangeText(intMin, intMax);
        case SettingKind::UInt64: return "0 to " + std::to_string(UINT64_MAX);
        case SettingKind::Double:
        case SettingKind::Float: return numberRangeText(min, max, maxOpen);
        case SettingKind::Choice: return "one of: " + joined(choices);
        case SettingKind::IntList:
            return std::to_string(minItems) + " to " + std::to_string(maxItems) + " values, each " +
                   integerRangeText(intMin, intMax);
        case SettingKind::Bool:
        case SettingKind::String:
        case SettingKind::Path:
        case SettingKind::StringList: break;
    }
    return nonEmpty ? "not empty" : "";
}

int SettingInfo::parseChoice(const std::string& name) const {
    for (const SettingChoice& c : choices)
        if (c.name == name) return c.value;
    throw std::invalid_argument("unknown value '" + name + "' (one of: " + joined(choices) + ")");
}

const std::string& SettingInfo::choiceName(int value) const {
    for (const SettingChoice& c : choices)
        if (c.value == value) return c.name;
    throw std::invalid_argument(dottedName() + ": " + std::to_string(value) + " is not one of " + joined(choices));
}

// ---- tables ----

const std::vector<SettingSpec<DatasetSettings>>& datasetSettingSpecs() {
    static const std::vector<SettingSpec<DatasetSettings>> specs = makeDatasetSpecs();
    return specs;
}

const std::vector<SettingSpec<TrainingSettings>>& trainingSettingSpecs() {
    static const std::vector<SettingSpec<TrainingSettings>> specs = makeTrainingSpecs();
    return specs;
}

const SettingSpec<DatasetSettings>& datasetSetting(const std::string& key) {
    return findSpec(datasetSettingSpecs(), key);
}

const SettingSpec<TrainingSettings>& trainingSetting(const std::string& key) {
    return findSpec(trainingSettingSpecs(), key);
}

const std::string& settingName(TaskKind v) { return nameIn(datasetSetting("task"), static_cast<int>(v)); }
const std::string& settingName(ImageTarget v) { return nameIn(datasetSetting("image_target"), static_cast<int>(v)); }
const std::string& settingName(DatasetKind v) { return nameIn(datasetSetting("kind"), static_cast<int>(v)); }
const std::string& settingName(Tokenizer v) { return nameIn(datasetSetting("tokenizer"), static_cast<int>(v)); }
const std::string& settingName(ImageResize v) { return nameIn(datasetSetting("image_resize"), static_cast<int>(v)); }
const std::string& settingName(ImageLoading v) { return nameIn(datasetSetting("image_loading"), static_cast<int>(v)); }
const std::string& settingName(NormalizationMode v) {
    return nameIn(datasetSetting("normalization"), static_cast<int>(v));
}
const std::string& settingName(OptimizerKind v) { return nameIn(trainingSetting("optimizer"), static_cast<int>(v)); }
const std::string& settingName(LossKind v) { return nameIn(trainingSetting("loss"), static_cast<int>(v)); }
const std::string& settingName(ScheduleKind v) { return nameIn(trainingSetting("schedule"), static_cast<int>(v)); }
const std::string& settingName(EarlyStoppingMetric v) {
    return nameIn(trainingSetting("early_stopping_metric"), static_cast<int>(v));
}
const std::string& settingName(ComputePrecision v) { return nameIn(trainingSetting("precision"), static_cast<int>(v)); }
const std::string& settingName(DistMode v) { return nameIn(trainingSetting("dist_mode"), static_cast<int>(v)); }

// ---- when a setting applies ----

bool settingApplies(const SettingInfo& setting, const DatasetSettings& dataset, const TrainingSettings& training,
                    int ranks) {
    return failedCondition(setting, dataset, training, ranks) == nullptr;
}

std::string settingInapplicableReason(const SettingInfo& setting, const DatasetSettings& dataset,
                                      const TrainingSettings& training, int ranks) {
    const SettingCondition* c = failedCondition(setting, dataset, training, ranks);
    if (!c) return {};
    if (c->kind == SettingCondition::Kind::DataParallel)
        return "in a run of one process on one device (it applies to data-parallel runs: under mpirun, or on "
               "several devices in training.device)";
    const SettingInfo& other = settingOfGroup(setting.group, c->key);
    const Json v = valueOf(other, dataset, training);
    if (c->kind == SettingCondition::Kind::Positive)
        return "with " + other.dottedName() + " " + v.dump() + " (it applies when that is above 0)";
    std::string wanted;
    for (size_t i = 0; i < c->values.size(); ++i)
        wanted += (i == 0 ? "" : i + 1 == c->values.size() ? " or " : ", ") + other.choiceName(c->values[i]);
    return "with " + other.dottedName() + " " + other.choiceName(v.get<int>()) + " (it applies with " + wanted + ")";
}

// ---- strata-train ----

std::vector<const SettingInfo*> settingsWithFlags() {
    std::vector<const SettingInfo*> out;
    for (const auto& s : datasetSettingSpecs())
        if (!s.flag.empty()) out.push_back(&s);
    for (const auto& s : trainingSettingSpecs())
        if (!s.flag.empty()) out.push_back(&s);
    return out;
}

const SettingInfo* settingForFlag(const std::string& flag) {
    for (const SettingInfo* s : settingsWithFlags())
        if (s->flag == flag) return s;
    return nullptr;
}

Json settingJsonFromText(const SettingInfo& setting, const std::string& text) {
    if (setting.kind == SettingKind::Bool) return true;
    if (setting.isInteger() || setting.kind == SettingKind::UInt64) {
        int64_t i = 0;
        uint64_t u = 0;
        const char* end = text.data() + text.size();
        const auto r = std::from_chars(text.data(), end, i);
        const auto r2 = std::from_chars(text.data(), end, u);
        // Non-negative numbers as unsigned, as a JSON parser reads them.
        if (r2.ec == std::errc() && r2.ptr == end) return u;
        if (r.ec == std::errc() && r.ptr == end) return i;
        if ((r.ec == std::errc::result_out_of_range && r.ptr == end) ||
            (r2.ec == std::errc::result_out_of_range && r2.ptr == end))
            throw std::invalid_argument(cutForMessage(text) + " is out of range (" + setting.rangeText() + ")");
    } else if (setting.isNumber()) {
        char* used = nullptr;
        const double d = std::strtod(text.c_str(), &used);
        if (!text.empty() && used == text.c_str() + text.size() && std::isfinite(d)) return d;
    }
    return text;  // the checks say what is wrong with it
}

std::optional<ChoiceArgument> splitChoiceArgument(const SettingInfo& choice, const std::string& text) {
    const size_t colon = text.find(':');
    if (choice.kind != SettingKind::Choice || colon == std::string::npos) return std::nullopt;
    for (const SettingChoice& c : choice.choices)
        if (!c.argumentKey.empty() && text.compare(0, colon, c.name) == 0 && colon == c.name.size()) {
            const SettingInfo& argument = settingOfGroup(choice.group, c.argumentKey);
            return ChoiceArgument{c.value, &argument, text.substr(colon + 1)};
        }
    return std::nullopt;
}

std::vector<SettingValue> parseSettingFlag(const SettingInfo& setting, const std::string& text,
                                           const std::string& flagName) {
    const std::string& flag = flagName.empty() ? setting.flag : flagName;
    // The text becomes the JSON value a file would hold, then passes the file's own checks, so a flag
    // and the file refuse the same values with the same words.
    try {
        if (const std::optional<ChoiceArgument> split = splitChoiceArgument(setting, text)) {
            const SettingInfo& argument = *split->argument;
            try {
                return {{&setting, Json(split->value)},
                        {&argument, checkSettingValue(argument, settingJsonFromText(argument, split->argumentText),
                                                      argument.dottedName())}};
            } catch (const std::exception& e) {
                const auto* p = dynamic_cast<const ProjectError*>(&e);
                throw std::invalid_argument(cutForMessage(text) + ": " + argument.dottedName() + " " +
                                            (p ? p->message() : std::string(e.what())));
            }
        }
        return {{&setting, checkSettingValue(setting, settingJsonFromText(setting, text), flag)}};
    } catch (const ProjectError& e) {
        throw std::invalid_argument(flag + ": " + e.message());
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(flag + ": " + e.what());
    }
}

void applySetting(DatasetSettings& dataset, TrainingSettings& training, const SettingInfo& setting, const Json& value) {
    if (setting.group == SettingGroup::Dataset)
        datasetSetting(setting.key).set(dataset, value);
    else
        trainingSetting(setting.key).set(training, value);
}

}  // namespace strata
