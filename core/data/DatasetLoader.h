// DatasetLoader: the one interface every dataset kind loads through, the table that registers a loader per
// DatasetKind (Dataset.cpp; loadDataset dispatches through it), and the steps the loaders share: the seeded
// hold-out and the limits, the normalization measured on the training split, label texts to class indices, the
// counts of the description line and the skipped-file lists (DatasetLoader.cpp). One file per loader:
// IdxDataset.cpp, CsvDataset.cpp, TextDataset.cpp, SyntheticDataset.cpp, ImageFolderDataset.cpp. Internal to
// core/data: everyone else calls loadDataset (Dataset.h).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/data/Dataset.h"

namespace strata::data {

// Loads the dataset `settings` describe (paths relative to the folder of `projectPath`), as loadDataset documents
// for its kind; only image folders look at `streaming`. Throws DataError.
using DatasetLoadFunction = DatasetBundle (*)(const DatasetSettings& settings, const std::string& projectPath,
                                              Streaming streaming);

struct DatasetLoader {
    DatasetKind kind;
    DatasetLoadFunction load;
};

// Every registered loader, one per DatasetKind.
const std::vector<DatasetLoader>& datasetLoaders();
// The loader of `kind`; nullptr when none is registered.
const DatasetLoader* findDatasetLoader(DatasetKind kind);

DatasetBundle loadIdxDataset(const DatasetSettings& s, const std::string& projectPath, Streaming streaming);
DatasetBundle loadCsvDataset(const DatasetSettings& s, const std::string& projectPath, Streaming streaming);
DatasetBundle loadTextDataset(const DatasetSettings& s, const std::string& projectPath, Streaming streaming);
DatasetBundle loadSyntheticDataset(const DatasetSettings& s, const std::string& projectPath, Streaming streaming);
DatasetBundle loadImageFolderDataset(const DatasetSettings& s, const std::string& projectPath, Streaming streaming);

// ---------------------------------------------------------------- shared steps

// The held-out split (and the image folder's limits and per-class hold-out, salted) use a fixed seed:
// DatasetSettings carries none, and a project must name the same validation set on every run.
constexpr uint64_t kSplitSeed = 0x5A17D47Aull;

// The file's name (the whole path when it has none): errors and descriptions name files by it.
std::string fileName(const std::string& path);
std::string trim(const std::string& s);  // spaces and tabs at both ends
std::string lower(std::string s);        // ASCII
// "a, b, c, ..." (at most `maxShown` names).
std::string joinNames(const std::vector<std::string>& names, size_t maxShown = 12);
// "1 field", "3 fields": a CSV row's field count in an error message.
std::string fieldCount(size_t n);
bool parseNonNegativeInt(const std::string& s, int64_t& value);

// A raw split before normalization: values are raw numbers (pixels 0..255, CSV values).
struct RawSplit {
    Shape shape;
    std::vector<float> values;
    std::vector<int32_t> labels;
    // Float targets (regression, multi-label), targetSize per row; empty for classification.
    int64_t targetSize = 0;
    std::vector<float> targets;
    int64_t count() const { return static_cast<int64_t>(labels.size()); }
};

// The rows of `src`, in the order given.
RawSplit gather(const RawSplit& src, const std::vector<int64_t>& rows);
// Throws DataError unless 0 <= fraction < 1 (dataset.validation_split).
void checkSplitFraction(double fraction);
// Row indices of a seeded hold-out of `fraction` of `count` rows: (train, validation), each in file order.
std::pair<std::vector<int64_t>, std::vector<int64_t>> holdOut(int64_t count, double fraction);
// The first `limit` of `count` rows (all when limit is 0 or >= count).
std::vector<int64_t> firstRows(int64_t count, int64_t limit);
// Holds out validationSplit of the training rows when there is no validation set, then applies train_limit and
// validation_limit (first rows).
void splitAndLimit(RawSplit& train, RawSplit& validation, bool haveValidation, const DatasetSettings& s);

// Fills `norm` for `mode` from the training split and applies it to both splits in place. Images (0..255) scale
// by 1/255 and standardize with one mean and std; anything else standardizes per feature.
void normalize(RawSplit& train, RawSplit& validation, NormalizationMode mode, bool images, Normalization& norm);

DataSplit toSplit(RawSplit&& raw);

// Regression: standardizes both splits' targets per target with the training split's statistics (mode
// "standardize") or leaves them (mode "none"), recording it in `norm`.
void standardizeTargets(RawSplit& train, RawSplit& validation, bool standardize, Normalization& norm);

// "60000 train, 10000 validation, 10 classes": the counts every description line gives.
std::string splitCounts(int64_t train, int64_t validation, int classes);

// Skipped files marked with the split they were left out of, appended to `to`.
void addSkipped(std::vector<SkippedFile>& to, std::vector<SkippedFile> files, const char* split);

// ---------------------------------------------------------------- class labels (CSV, text)

struct LabelText {
    std::string path;
    int64_t line;
    std::string text;
};

// Maps label texts to class indices: class names from the settings when given (integers accepted as indices),
// else integer labels as class indices, else class names numbered in order of first appearance in the training
// split. map() throws DataError naming the file and line of a label that is none of the classes.
class LabelMapper {
public:
    LabelMapper(const std::vector<LabelText>& trainLabels, const std::vector<std::string>& classNames);
    int32_t map(const LabelText& l) const;
    const std::vector<std::string>& names() const { return m_names; }

private:
    std::vector<std::string> m_names;
    std::unordered_map<std::string, int32_t> m_index;
    bool m_acceptIntegers = false;
};

// Multi-label: each row's labels (texts separated by `separator`, blanks ignored) as 0/1 targets over the label
// names: `names` when given, else every label of the training rows in order of first appearance. A row without a
// label is a sample with none (all zeros). Throws DataError naming the file and line of a label `names` lacks, or
// of a validation label the training rows never had.
struct MultiLabelTargets {
    std::vector<std::string> names;
    std::vector<float> train, validation;  // rows * names.size()
};
MultiLabelTargets multiLabelTargets(const std::vector<LabelText>& train, const std::vector<LabelText>& validation,
                                    const std::string& separator, const std::vector<std::string>& names);

}  // namespace strata::data
