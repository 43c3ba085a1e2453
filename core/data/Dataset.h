// Dataset: loads a project's dataset (IDX images, CSV tabular, CSV text, an image folder or a
// synthetic set) as ready-to-train float inputs and class labels, split into training and validation.
// Each kind has its own loader (DatasetLoader.h: one file per kind, registered in one table). Every format
// error is a DataError that names the file and the byte offset (binary) or line (text) at fault.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/data/Normalization.h"
#include "core/graph/Project.h"
#include "core/tensor/Shape.h"

namespace strata {

// "train-labels.gz: byte 8: label 12 out of range (0..9)". The message names the
// file by its name; path() keeps the full path.
class DataError : public std::runtime_error {
public:
    // No file involved (bad settings).
    explicit DataError(const std::string& what) : std::runtime_error(what) {}
    static DataError inFile(const std::string& path, const std::string& what);
    static DataError atByte(const std::string& path, int64_t byteOffset, const std::string& what);
    static DataError atLine(const std::string& path, int64_t line, const std::string& what);

    const std::string& path() const { return m_path; }
    int64_t byteOffset() const { return m_byte; }  // -1 when not about a byte
    int64_t line() const { return m_line; }        // 1-based; -1 when not about a line

private:
    DataError(std::string path, int64_t byte, int64_t line, const std::string& message)
        : std::runtime_error(message), m_path(std::move(path)), m_byte(byte), m_line(line) {}
    std::string m_path;
    int64_t m_byte = -1;
    int64_t m_line = -1;
};

// Samples read on demand instead of held in DataSplit::inputs: a streamed image folder
// (core/data/ImageStream.h). The DataLoader reads a batch's samples on its decode threads.
class SampleSource {
public:
    virtual ~SampleSource() = default;
    // Writes sample i (sampleShape.numel() floats, normalized as the split's inputs would be). Returns false
    // with `why` for a sample that cannot be read (a bad file): the loader leaves it out and reports it.
    // Thread-safe. Throws DataError naming the file when the dataset is strict.
    virtual bool read(int64_t i, float* out, std::string& why) const = 0;
    virtual std::string sampleName(int64_t i) const = 0;  // the file sample i comes from
    // Changes when the files, the shape or the normalization do (data-parallel ranks compare it).
    virtual uint64_t fingerprint() const = 0;
    virtual int threads() const = 0;        // decode threads the loader should use (>= 1)
    virtual int queuedBatches() const = 0;  // ready batches the loader may hold (>= 1): its memory budget
    // Image to image with a folder of targets, streamed: whether the source reads each sample's target image too,
    // and sample i's target (the split's targetSize() floats, normalized as the inputs). False with `why` (naming
    // the target file) for a target that cannot be read: the loader leaves the pair out. Thread-safe; throws
    // DataError naming the target file when the dataset is strict. A source without targets throws logic_error.
    virtual bool hasTargets() const { return false; }
    virtual bool readTarget(int64_t i, float* out, std::string& why) const;
};

struct DataSplit {
    Shape sampleShape;  // per sample, e.g. [1,28,28]; text: [maxTokens]
    int64_t count = 0;
    std::vector<float> inputs;                   // count * sampleShape.numel(), already normalized; empty when streamed
    std::vector<int32_t> labels;                 // count (class index)
    std::shared_ptr<const SampleSource> source;  // streamed: the samples come from here, inputs is empty
    bool streamed() const { return source != nullptr; }
    // Tasks other than classification (core/graph/Task.h): float targets of targetShape per sample (regression:
    // standardized values; multi-label: 0/1 per label), or, when targetsAreInputs (image_to_image input and
    // denoise), each sample's own clean input, which the loader copies before any noise is added. labels then
    // hold zeros. targetShape is empty (rank 0) for classification.
    Shape targetShape;
    std::vector<float> targets;  // count * targetShape.numel(); empty when targetsAreInputs
    bool targetsAreInputs = false;
    bool hasTargets() const { return targetShape.rank() > 0; }
    int64_t targetSize() const { return hasTargets() ? targetShape.numel() : 0; }
    // Sample i's targets into dst (targetSize() floats); from the inputs when targetsAreInputs (not streamed).
    void copyTargets(int64_t i, float* dst) const;
};

// A file an image_folder dataset left out, and why ("truncated: ...", "empty class folder").
struct SkippedFile {
    std::string path;
    std::string reason;
    std::string split = {};  // "training" or "validation" (the folder or split it was in); empty: not known
    bool operator==(const SkippedFile&) const = default;
};

// How the log names skipped files, the same for files left out while loading (image_loading memory, the listing,
// the streamed statistics sample) and while training (streamed): "training: skipped PATH: REASON" for the first
// kListedSkippedFiles, then "training: and N more files skipped". `split` is used for files whose own is empty.
constexpr size_t kListedSkippedFiles = 20;
std::vector<std::string> skippedFileLines(const std::vector<SkippedFile>& files, const std::string& split);

struct DatasetBundle {
    DataSplit train, validation;  // validation.count == 0 when none
    TaskKind task = TaskKind::Classification;
    // Classification: the classes. Regression: the target columns; multi-label: the labels (one output each).
    int numClasses = 0;
    std::vector<std::string> classNames;
    // Regression: how data-unit targets became training targets, per target (featureMean/featureStd), measured on
    // the training split; predictions are turned back with undoNormalization. Mode "none" otherwise.
    Normalization targetNormalization;
    Normalization normalization;          // how raw inputs were turned into model inputs (export needs it)
    std::vector<std::string> vocabulary;  // text: id -> token (0 = padding, 1 = unknown)
    std::string tokenizerModel;           // text, sentencepiece: the serialized SentencePiece model
    std::string description;              // "Fashion-MNIST (idx): 60000 train, 10000 validation, 10 classes"
    std::vector<SkippedFile> skipped;     // image_folder: bad files and folders left out, in listing order
    // image_folder: how many images of each file size (width, height) were decoded, both splits.
    std::map<std::pair<int64_t, int64_t>, int64_t> imageSizes;
    // text: the token count of each training text before it was cut to max_tokens (the length distribution; the
    // description warns when more than a tenth of the texts are cut).
    std::vector<int64_t> textLengths;
};

// Loads the dataset the settings describe. Relative paths are resolved against
// the folder of `projectPath` (the .strata file; "" means the current folder).
// - idx: trainImages/trainLabels (+ validationImages/validationLabels), gzipped or raw.
//   Without class names the set has 10 classes (MNIST, Fashion-MNIST).
// - csv: header row; labelColumn is the class, every other column a numeric feature.
//   Integer labels are class indices; otherwise class names are numbered in order of
//   first appearance in the training file (or follow settings.classNames when given).
// - text: "label,text" rows (an optional "label,text" header row is skipped), tokenized
//   by char or word (vocabulary from the training split only) or by SentencePiece (a unigram model trained on
//   the training split with maxVocab pieces, or read from tokenizerModel), padded/truncated to maxTokens.
//   Inputs are token ids; normalization must be none or scale (which changes nothing).
// - synthetic: Gaussian blobs, one per class, of shape syntheticShape (fixed seed).
// - image_folder: trainPath is a folder of class folders or a CSV of path,label (data/ImageFolder.h);
//   every image becomes imageShape [C, H, W] by imageResize. Without a validation folder, the held-out
//   validationSplit is stratified (the same fraction of every class, fixed seed). train_limit and
//   validation_limit take a seeded random subset (a folder lists class by class). Bad files are skipped
//   and listed in `skipped` unless strictImages. standardize on RGB images is per channel (the
//   statistics stored per feature, each channel's at all its pixels); on gray ones one mean and std.
// Without a validation file, validationSplit of the training file is held out (fixed seed).
// Throws DataError.
// Streaming::Allowed: an image_folder whose image_loading is stream or cache comes back streamed
// (DataSplit::source; the normalization statistics measured on a seeded sample of the training images).
// Off (every caller that wants the floats in memory: evaluation, export checks, the panels): it is
// decoded whole, as image_loading memory.
enum class Streaming { Off, Allowed };
DatasetBundle loadDataset(const DatasetSettings& settings, const std::string& projectPath,
                          Streaming streaming = Streaming::Off);

// Tokens of one text: Char gives code points (UTF-8), Word gives runs of
// letters and digits. Both lowercase (ASCII, Latin-1 and Latin Extended-A). SentencePiece needs its model:
// TextEncoder (core/data/TextEncoder.h) tokenizes with any of the three.
std::vector<std::string> tokenizeText(const std::string& text, Tokenizer tokenizer);
// The same tokens one at a time, without a vector of them: `fn` gets each in turn (valid during the call) and
// returns false to stop. Returns how many tokens `fn` was given.
size_t forEachToken(const std::string& text, Tokenizer tokenizer, const std::function<bool(const std::string&)>& fn);

}  // namespace strata
