#include "core/data/Dataset.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <numeric>
#include <unordered_map>

#include "core/data/CsvReader.h"
#include "core/data/DataRandom.h"
#include "core/data/IdxReader.h"
#include "core/data/ImageFolder.h"
#include "core/data/ImageStream.h"
#include "core/data/SubwordTokenizer.h"
#include "core/data/TextEncoder.h"
#include "core/io/FileIo.h"

namespace strata {

namespace {

std::string fileName(const std::string& path) {
    std::string name = std::filesystem::path(path).filename().string();
    return name.empty() ? path : name;
}

// "1 field", "3 fields": a CSV row's field count in an error message.
std::string fieldCount(size_t n) { return std::to_string(n) + (n == 1 ? " field" : " fields"); }

}  // namespace

DataError DataError::inFile(const std::string& path, const std::string& what) {
    return DataError(path, -1, -1, fileName(path) + ": " + what);
}

DataError DataError::atByte(const std::string& path, int64_t byteOffset, const std::string& what) {
    return DataError(path, byteOffset, -1, fileName(path) + ": byte " + std::to_string(byteOffset) + ": " + what);
}

DataError DataError::atLine(const std::string& path, int64_t line, const std::string& what) {
    return DataError(path, -1, line, fileName(path) + ": line " + std::to_string(line) + ": " + what);
}

namespace {

// The held-out split and the synthetic set use fixed seeds: DatasetSettings
// carries none, and a project must name the same validation set on every run.
constexpr uint64_t kSplitSeed = 0x5A17D47Aull;
constexpr uint64_t kSyntheticSeed = 0x5EEDB10Bull;

std::string trim(const std::string& s) {
    size_t b = 0, e = s.size();
    while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
    while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
    return s.substr(b, e - b);
}

std::string lower(std::string s) {
    for (char& c : s)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return s;
}

std::string joinNames(const std::vector<std::string>& names, size_t maxShown = 12) {
    std::string out;
    for (size_t i = 0; i < names.size() && i < maxShown; ++i) out += (i ? ", " : "") + names[i];
    if (names.size() > maxShown) out += ", ...";
    return out;
}

bool parseNonNegativeInt(const std::string& s, int64_t& value) {
    if (s.empty()) return false;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    return ec == std::errc() && p == s.data() + s.size() && value >= 0;
}

// A raw split before normalization: values are raw numbers (pixels 0..255, CSV values).
struct RawSplit {
    Shape shape;
    std::vector<float> values;
    std::vector<int32_t> labels;
    int64_t count() const { return static_cast<int64_t>(labels.size()); }
};

RawSplit gather(const RawSplit& src, const std::vector<int64_t>& rows) {
    RawSplit out;
    out.shape = src.shape;
    const int64_t n = src.shape.numel();
    out.values.resize(static_cast<size_t>(n) * rows.size());
    out.labels.resize(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
        std::copy_n(src.values.begin() + rows[i] * n, n, out.values.begin() + static_cast<int64_t>(i) * n);
        out.labels[i] = src.labels[static_cast<size_t>(rows[i])];
    }
    return out;
}

void checkSplitFraction(double fraction) {
    if (!(fraction >= 0.0 && fraction < 1.0))
        throw DataError("dataset.validation_split: " + std::to_string(fraction) + " is outside [0, 1)");
}

// Row indices of a seeded hold-out: (train, validation), each in file order.
std::pair<std::vector<int64_t>, std::vector<int64_t>> holdOut(int64_t count, double fraction) {
    checkSplitFraction(fraction);
    std::vector<int64_t> perm(static_cast<size_t>(count));
    std::iota(perm.begin(), perm.end(), 0);
    uint64_t rng = data::mixSeed(kSplitSeed, static_cast<uint64_t>(count));
    for (int64_t i = count - 1; i > 0; --i)
        std::swap(perm[static_cast<size_t>(i)], perm[data::randomBelow(rng, static_cast<uint64_t>(i + 1))]);
    auto nVal = static_cast<int64_t>(std::llround(fraction * static_cast<double>(count)));
    if (fraction > 0 && nVal == 0) nVal = 1;
    if (nVal >= count)
        throw DataError("dataset.validation_split " + std::to_string(fraction) + " leaves no training samples out of " +
                        std::to_string(count));
    std::vector<int64_t> val(perm.begin(), perm.begin() + nVal);
    std::vector<int64_t> train(perm.begin() + nVal, perm.end());
    std::sort(val.begin(), val.end());
    std::sort(train.begin(), train.end());
    return {train, val};
}

std::vector<int64_t> firstRows(int64_t count, int64_t limit) {
    int64_t n = (limit > 0 && limit < count) ? limit : count;
    std::vector<int64_t> rows(static_cast<size_t>(n));
    std::iota(rows.begin(), rows.end(), 0);
    return rows;
}

// Splits (when there is no validation set) and applies the limits.
void splitAndLimit(RawSplit& train, RawSplit& validation, bool haveValidation, const DatasetSettings& s) {
    if (!haveValidation && s.validationSplit > 0.0) {
        auto [trainRows, valRows] = holdOut(train.count(), s.validationSplit);
        validation = gather(train, valRows);
        train = gather(train, trainRows);
    } else {
        checkSplitFraction(s.validationSplit);
    }
    if (s.trainLimit > 0 && s.trainLimit < train.count()) train = gather(train, firstRows(train.count(), s.trainLimit));
    if (s.validationLimit > 0 && s.validationLimit < validation.count())
        validation = gather(validation, firstRows(validation.count(), s.validationLimit));
    if (validation.shape.empty()) validation.shape = train.shape;
}

// Fills `norm` from the training split and applies it to both splits in place.
void normalize(RawSplit& train, RawSplit& validation, NormalizationMode mode, bool images, Normalization& norm) {
    norm = Normalization{};
    norm.mode = settingName(mode);
    if (mode == NormalizationMode::None) return;
    norm.scale = images ? 1.0f / 255.0f : 1.0f;
    const int64_t n = train.shape.numel();
    if (mode == NormalizationMode::Standardize && train.count() > 0) {
        if (images) {
            double sum = 0, sumSq = 0;
            for (float v : train.values) {
                double x = double(v) * norm.scale;
                sum += x;
                sumSq += x * x;
            }
            double count = double(train.values.size());
            double mean = sum / count;
            double var = std::max(0.0, sumSq / count - mean * mean);
            norm.mean = float(mean);
            norm.std = var > 1e-24 ? float(std::sqrt(var)) : 1.0f;
        } else {
            // Tabular columns carry different units: one mean and std per feature.
            std::vector<double> sum(static_cast<size_t>(n), 0.0), sumSq(static_cast<size_t>(n), 0.0);
            for (int64_t r = 0; r < train.count(); ++r)
                for (int64_t j = 0; j < n; ++j) {
                    double x = train.values[static_cast<size_t>(r * n + j)];
                    sum[static_cast<size_t>(j)] += x;
                    sumSq[static_cast<size_t>(j)] += x * x;
                }
            norm.featureMean.resize(static_cast<size_t>(n));
            norm.featureStd.resize(static_cast<size_t>(n));
            for (size_t j = 0; j < static_cast<size_t>(n); ++j) {
                double mean = sum[j] / double(train.count());
                double var = std::max(0.0, sumSq[j] / double(train.count()) - mean * mean);
                norm.featureMean[j] = float(mean);
                norm.featureStd[j] = var > 1e-24 ? float(std::sqrt(var)) : 1.0f;
            }
        }
    }
    applyNormalization(norm, train.values.data(), train.count(), n);
    applyNormalization(norm, validation.values.data(), validation.count(), n);
}

DataSplit toSplit(RawSplit&& raw) {
    DataSplit s;
    s.sampleShape = raw.shape;
    s.count = raw.count();
    s.inputs = std::move(raw.values);
    s.labels = std::move(raw.labels);
    return s;
}

// ---------------------------------------------------------------- IDX

const std::vector<std::string> kFashionClasses = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                  "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

RawSplit loadIdxPair(const std::string& imagesPath, const std::string& labelsPath, int numClasses) {
    data::IdxArray images = data::readIdxU8(imagesPath, 3);
    data::IdxArray labels = data::readIdxU8(labelsPath, 1);
    if (images.dims[0] != labels.dims[0])
        throw DataError::atByte(labelsPath, 4,
                                "count mismatch: " + std::to_string(labels.dims[0]) + " labels, but " +
                                    fileName(imagesPath) + " holds " + std::to_string(images.dims[0]) + " images");
    RawSplit raw;
    raw.shape = Shape{1, images.dims[1], images.dims[2]};
    const int64_t count = images.dims[0];
    raw.labels.resize(static_cast<size_t>(count));
    const uint8_t* l = labels.data();
    for (int64_t i = 0; i < count; ++i) {
        if (l[i] >= numClasses)
            throw DataError::atByte(
                labelsPath, labels.dataOffset + i,
                "label " + std::to_string(l[i]) + " out of range (0.." + std::to_string(numClasses - 1) + ")");
        raw.labels[static_cast<size_t>(i)] = l[i];
    }
    const int64_t total = count * raw.shape.numel();
    raw.values.resize(static_cast<size_t>(total));
    const uint8_t* p = images.data();
    for (int64_t i = 0; i < total; ++i) raw.values[static_cast<size_t>(i)] = float(p[i]);
    return raw;
}

DatasetBundle loadIdx(const DatasetSettings& s, const std::string& projectPath) {
    if (s.trainImages.empty()) throw DataError("dataset.train_images is empty (idx datasets need an image file)");
    if (s.trainLabels.empty()) throw DataError("dataset.train_labels is empty (idx datasets need a label file)");
    if (s.validationImages.empty() != s.validationLabels.empty())
        throw DataError(s.validationImages.empty() ? "dataset.validation_images is empty but validation_labels is set"
                                                   : "dataset.validation_labels is empty but validation_images is set");
    const std::string trainImages = resolveDatasetPath(projectPath, s.trainImages);
    const std::string lowerPath = lower(trainImages);
    const bool fashion = lowerPath.find("fashion") != std::string::npos;
    DatasetBundle b;
    if (!s.classNames.empty()) {
        b.classNames = s.classNames;
    } else if (fashion) {
        b.classNames = kFashionClasses;
    } else {
        for (int i = 0; i < 10; ++i) b.classNames.push_back(std::to_string(i));
    }
    b.numClasses = static_cast<int>(b.classNames.size());
    if (b.numClasses > 256) throw DataError("dataset.class_names: idx labels are bytes; at most 256 classes");

    // Decompression dominates: the validation files load on a second thread meanwhile.
    const bool haveValidation = !s.validationImages.empty();
    const std::string valImages = resolveDatasetPath(projectPath, s.validationImages);
    const std::string valLabels = resolveDatasetPath(projectPath, s.validationLabels);
    std::future<RawSplit> pending;
    if (haveValidation)
        pending = std::async(std::launch::async, [&] { return loadIdxPair(valImages, valLabels, b.numClasses); });
    RawSplit train = loadIdxPair(trainImages, resolveDatasetPath(projectPath, s.trainLabels), b.numClasses);
    RawSplit validation;
    if (haveValidation) {
        validation = pending.get();
        if (validation.shape != train.shape)
            throw DataError::atByte(valImages, 8,
                                    "image size " + validation.shape.toString() + " differs from the training images " +
                                        train.shape.toString());
    }
    splitAndLimit(train, validation, haveValidation, s);
    normalize(train, validation, s.normalization, true, b.normalization);
    const std::string name = fashion ? "Fashion-MNIST" : lowerPath.find("mnist") != std::string::npos ? "MNIST" : "IDX";
    b.description = name + " (idx): " + std::to_string(train.count()) + " train, " +
                    std::to_string(validation.count()) + " validation, " + std::to_string(b.numClasses) + " classes";
    b.train = toSplit(std::move(train));
    b.validation = toSplit(std::move(validation));
    return b;
}

// ---------------------------------------------------------------- class labels (CSV, text)

struct LabelText {
    std::string path;
    int64_t line;
    std::string text;
};

// Maps label texts to class indices (see loadDataset in Dataset.h for the rules).
class LabelMapper {
public:
    LabelMapper(const std::vector<LabelText>& trainLabels, const std::vector<std::string>& classNames) {
        for (const LabelText& l : trainLabels)
            if (l.text.empty()) throw DataError::atLine(l.path, l.line, "empty label");
        if (!classNames.empty()) {
            m_names = classNames;
            for (size_t i = 0; i < classNames.size(); ++i) m_index[classNames[i]] = static_cast<int32_t>(i);
            m_acceptIntegers = true;
            return;
        }
        int64_t maxLabel = -1;
        bool allIntegers = !trainLabels.empty();
        for (const LabelText& l : trainLabels) {
            int64_t v = 0;
            if (!parseNonNegativeInt(l.text, v) || v > 100000) {
                allIntegers = false;
                break;
            }
            maxLabel = std::max(maxLabel, v);
        }
        if (allIntegers) {
            for (int64_t i = 0; i <= maxLabel; ++i) m_names.push_back(std::to_string(i));
            m_acceptIntegers = true;
            return;
        }
        for (const LabelText& l : trainLabels)
            if (m_index.emplace(l.text, static_cast<int32_t>(m_names.size())).second) m_names.push_back(l.text);
    }

    int32_t map(const LabelText& l) const {
        if (l.text.empty()) throw DataError::atLine(l.path, l.line, "empty label");
        auto it = m_index.find(l.text);
        if (it != m_index.end()) return it->second;
        int64_t v = 0;
        if (m_acceptIntegers && parseNonNegativeInt(l.text, v)) {
            if (v < static_cast<int64_t>(m_names.size())) return static_cast<int32_t>(v);
            throw DataError::atLine(
                l.path, l.line, "label " + l.text + " out of range (0.." + std::to_string(m_names.size() - 1) + ")");
        }
        if (m_acceptIntegers && m_index.empty())
            throw DataError::atLine(
                l.path, l.line,
                "label '" + l.text + "' is not a class index (0.." + std::to_string(m_names.size() - 1) + ")");
        throw DataError::atLine(l.path, l.line,
                                "label '" + l.text + "' is not one of the classes (" + joinNames(m_names) + ")");
    }

    const std::vector<std::string>& names() const { return m_names; }

private:
    std::vector<std::string> m_names;
    std::unordered_map<std::string, int32_t> m_index;
    bool m_acceptIntegers = false;
};

// ---------------------------------------------------------------- CSV tabular

struct CsvTable {
    std::vector<std::string> featureNames;
    std::vector<float> values;
    std::vector<LabelText> labels;
};

CsvTable readCsvTable(const std::string& path, const std::string& labelColumn,
                      const std::vector<std::string>* expectedFeatures) {
    std::vector<data::CsvRecord> records = data::readCsvFile(path);
    const data::CsvRecord& header = records[0];
    std::vector<std::string> columns;
    for (const std::string& c : header.fields) columns.push_back(trim(c));
    int labelIndex = -1;
    for (size_t i = 0; i < columns.size(); ++i) {
        if (columns[i] == labelColumn) {
            if (labelIndex >= 0) throw DataError::atLine(path, header.line, "two columns named '" + labelColumn + "'");
            labelIndex = static_cast<int>(i);
        }
    }
    if (labelIndex < 0)
        throw DataError::atLine(
            path, header.line,
            "no column named '" + labelColumn + "' (the label column; columns: " + joinNames(columns) + ")");
    CsvTable t;
    // Where each feature (in training-file order) sits in this file's rows.
    std::vector<size_t> featureColumns;
    if (expectedFeatures) {
        t.featureNames = *expectedFeatures;
        for (const std::string& f : *expectedFeatures) {
            auto it = std::find(columns.begin(), columns.end(), f);
            if (it == columns.end())
                throw DataError::atLine(path, header.line, "no column named '" + f + "' (the training file has it)");
            featureColumns.push_back(static_cast<size_t>(it - columns.begin()));
        }
        if (columns.size() != expectedFeatures->size() + 1)
            throw DataError::atLine(path, header.line,
                                    std::to_string(columns.size()) + " columns, the training file has " +
                                        std::to_string(expectedFeatures->size() + 1));
    } else {
        for (size_t i = 0; i < columns.size(); ++i) {
            if (static_cast<int>(i) == labelIndex) continue;
            t.featureNames.push_back(columns[i]);
            featureColumns.push_back(i);
        }
        if (t.featureNames.empty())
            throw DataError::atLine(path, header.line,
                                    "no feature columns besides the label column '" + labelColumn + "'");
    }
    if (records.size() < 2) throw DataError::atLine(path, header.line + 1, "no data rows after the header");
    const size_t width = columns.size();
    t.values.reserve((records.size() - 1) * featureColumns.size());
    t.labels.reserve(records.size() - 1);
    for (size_t r = 1; r < records.size(); ++r) {
        const data::CsvRecord& rec = records[r];
        if (rec.fields.size() != width)
            throw DataError::atLine(path, rec.line,
                                    fieldCount(rec.fields.size()) + ", expected " + std::to_string(width));
        for (size_t f = 0; f < featureColumns.size(); ++f) {
            const std::string v = trim(rec.fields[featureColumns[f]]);
            float x = 0;
            auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
            if (v.empty() || ec != std::errc() || p != v.data() + v.size() || !std::isfinite(x))
                throw DataError::atLine(path, rec.line,
                                        "column '" + t.featureNames[f] + "': " +
                                            (v.empty() ? std::string("empty value") : "'" + v + "' is not a number"));
            t.values.push_back(x);
        }
        t.labels.push_back({path, rec.line, trim(rec.fields[static_cast<size_t>(labelIndex)])});
    }
    return t;
}

RawSplit tableToSplit(const CsvTable& t, const LabelMapper& mapper) {
    RawSplit raw;
    raw.shape = Shape{static_cast<int64_t>(t.featureNames.size())};
    raw.values = t.values;
    raw.labels.reserve(t.labels.size());
    for (const LabelText& l : t.labels) raw.labels.push_back(mapper.map(l));
    return raw;
}

DatasetBundle loadCsv(const DatasetSettings& s, const std::string& projectPath) {
    if (s.trainPath.empty()) throw DataError("dataset.train_path is empty (csv datasets need a training file)");
    const std::string trainPath = resolveDatasetPath(projectPath, s.trainPath);
    CsvTable trainTable = readCsvTable(trainPath, s.labelColumn, nullptr);
    LabelMapper mapper(trainTable.labels, s.classNames);
    RawSplit train = tableToSplit(trainTable, mapper);
    RawSplit validation;
    const bool haveValidation = !s.validationPath.empty();
    if (haveValidation) {
        CsvTable valTable =
            readCsvTable(resolveDatasetPath(projectPath, s.validationPath), s.labelColumn, &trainTable.featureNames);
        validation = tableToSplit(valTable, mapper);
    }
    DatasetBundle b;
    b.classNames = mapper.names();
    b.numClasses = static_cast<int>(b.classNames.size());
    splitAndLimit(train, validation, haveValidation, s);
    normalize(train, validation, s.normalization, false, b.normalization);
    b.description = "CSV " + fileName(trainPath) + ": " + std::to_string(train.count()) + " train, " +
                    std::to_string(validation.count()) + " validation, " + std::to_string(b.numClasses) + " classes, " +
                    std::to_string(trainTable.featureNames.size()) + " features";
    b.train = toSplit(std::move(train));
    b.validation = toSplit(std::move(validation));
    return b;
}

// ---------------------------------------------------------------- CSV text

struct TextRows {
    std::vector<std::string> texts;
    std::vector<LabelText> labels;
    std::string warning;  // invalid UTF-8: how many lines, the first one
    std::string column;   // the text column as errors name it: "column 'text'", or "column 2" without a header
};

// Strict UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool validUtf8(const std::string& text) {
    size_t i = 0;
    while (i < text.size()) {
        const auto b = static_cast<unsigned char>(text[i]);
        int len = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
        if (len == 0 || i + static_cast<size_t>(len) > text.size()) return false;
        uint32_t cp = len == 1 ? b : b & (0x7F >> len);
        for (int k = 1; k < len; ++k) {
            const auto c = static_cast<unsigned char>(text[i + static_cast<size_t>(k)]);
            if ((c & 0xC0) != 0x80) return false;
            cp = cp << 6 | (c & 0x3F);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += static_cast<size_t>(len);
    }
    return true;
}

TextRows readTextRows(const std::string& path, const std::string& labelColumn) {
    std::vector<data::CsvRecord> records = data::readCsvFile(path);
    TextRows rows;
    int64_t invalid = 0;
    size_t first = 0;
    const auto& head = records[0].fields;
    if (head.size() == 2 && (lower(trim(head[0])) == "label" || trim(head[0]) == labelColumn) &&
        lower(trim(head[1])) == "text")
        first = 1;
    rows.column = first == 1 ? "column '" + trim(head[1]) + "'" : std::string("column 2 (the text)");
    for (size_t r = first; r < records.size(); ++r) {
        data::CsvRecord& rec = records[r];
        if (rec.fields.size() != 2)
            throw DataError::atLine(
                path, rec.line,
                fieldCount(rec.fields.size()) + ", expected 2 (label,text; quote text that contains commas)");
        rows.labels.push_back({path, rec.line, trim(rec.fields[0])});
        rows.texts.push_back(std::move(rec.fields[1]));  // moved: a long text is held once, not twice
        if (!validUtf8(rows.texts.back())) {
            if (rows.warning.empty()) rows.warning = "line " + std::to_string(rec.line);
            ++invalid;
        }
    }
    if (invalid > 0)
        rows.warning = "warning: " + fileName(path) + ": " + std::to_string(invalid) +
                       " line(s) hold invalid UTF-8, read as U+FFFD (first: " + rows.warning + ")";
    if (rows.texts.empty()) throw DataError::atLine(path, records[0].line + 1, "no data rows after the header");
    return rows;
}

TextRows gatherText(const TextRows& src, const std::vector<int64_t>& rows) {
    TextRows out;
    out.column = src.column;
    for (int64_t r : rows) {
        out.texts.push_back(src.texts[static_cast<size_t>(r)]);
        out.labels.push_back(src.labels[static_cast<size_t>(r)]);
    }
    return out;
}

// True for a text SentencePiece's normalization (nmt_nfkc) leaves empty: nothing but whitespace (ASCII, no-break and
// the Unicode spaces), control characters, zero-width characters, its own space mark U+2581, and bytes that are not
// UTF-8 (read as U+FFFD, which it turns into a space). Erring towards "blank" is safe, as only a split whose every
// text is blank is refused; the other way is not: libsentencepiece 0.1.97 ends the process (a failed CHECK,
// "required_chars_.empty()") when its normalization leaves no character at all.
bool blankText(const std::string& text) {
    size_t i = 0;
    while (i < text.size()) {
        const auto b = static_cast<unsigned char>(text[i]);
        if (b <= 0x20 || b == 0x7f) {
            ++i;
            continue;
        }
        if (b < 0x80) return false;
        const int len = (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
        bool valid = len > 0 && i + static_cast<size_t>(len) <= text.size();
        uint32_t cp = b & (0x7F >> len);
        for (int k = 1; valid && k < len; ++k) {
            const auto c = static_cast<unsigned char>(text[i + static_cast<size_t>(k)]);
            valid = (c & 0xC0) == 0x80;
            cp = cp << 6 | (c & 0x3F);
        }
        if (!valid) {  // U+FFFD to SentencePiece
            ++i;
            continue;
        }
        const bool blank = (cp >= 0x80 && cp <= 0xA0) || cp == 0xAD || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200F) ||
                           (cp >= 0x2028 && cp <= 0x202F) || (cp >= 0x205F && cp <= 0x206F) || cp == 0x2581 ||
                           cp == 0x3000 || cp == 0xFEFF || cp == 0xFFFD;
        if (!blank) return false;
        i += static_cast<size_t>(len);
    }
    return true;
}

// A training split whose every text is empty leaves nothing to learn a vocabulary (or pieces) from, and a model
// that would see padding only: said before SentencePiece is asked (whose own words are "Internal:
// trainer_interface.cc(428)").
[[noreturn]] void noTextToLearn(const std::string& trainPath, const TextRows& train, const std::string& what) {
    throw DataError::inFile(trainPath, train.column + ": every one of the " + std::to_string(train.texts.size()) +
                                           " training texts " + what +
                                           ": there is nothing to learn a vocabulary from (is the text in the second "
                                           "column, label,text?)");
}

DatasetBundle loadText(const DatasetSettings& s, const std::string& projectPath) {
    if (s.trainPath.empty()) throw DataError("dataset.train_path is empty (text datasets need a training file)");
    if (s.maxTokens < 1)
        throw DataError("dataset.max_tokens: " + std::to_string(s.maxTokens) + " (must be at least 1)");
    if (s.maxVocab < 3)
        throw DataError("dataset.max_vocab: " + std::to_string(s.maxVocab) +
                        " (must be at least 3: padding, unknown and one token)");
    if (s.normalization == NormalizationMode::Standardize)
        throw DataError("dataset.normalization: text inputs are token ids; use none (standardize does not apply)");

    const std::string trainPath = resolveDatasetPath(projectPath, s.trainPath);
    TextRows train = readTextRows(trainPath, s.labelColumn);
    std::string warnings = train.warning.empty() ? "" : "\n" + train.warning;
    LabelMapper mapper(train.labels, s.classNames);
    TextRows validation;
    const bool haveValidation = !s.validationPath.empty();
    if (haveValidation) {
        validation = readTextRows(resolveDatasetPath(projectPath, s.validationPath), s.labelColumn);
        if (!validation.warning.empty()) warnings += "\n" + validation.warning;
    } else if (s.validationSplit > 0.0) {
        auto [trainRows, valRows] = holdOut(static_cast<int64_t>(train.texts.size()), s.validationSplit);
        validation = gatherText(train, valRows);
        train = gatherText(train, trainRows);
    }
    checkSplitFraction(s.validationSplit);
    if (s.trainLimit > 0 && s.trainLimit < static_cast<int64_t>(train.texts.size()))
        train = gatherText(train, firstRows(static_cast<int64_t>(train.texts.size()), s.trainLimit));
    if (s.validationLimit > 0 && s.validationLimit < static_cast<int64_t>(validation.texts.size()))
        validation =
            gatherText(validation, firstRows(static_cast<int64_t>(validation.texts.size()), s.validationLimit));

    // Vocabulary from the training split only, so validation measures unseen text honestly. No text is held as a
    // list of tokens: the vocabulary counts them one at a time, and encoding makes only the first max_tokens.
    DatasetBundle b;
    std::unique_ptr<TextEncoder> encoder;
    if (s.tokenizer == Tokenizer::SentencePiece) {
        if (s.tokenizerModel.empty() && std::all_of(train.texts.begin(), train.texts.end(), blankText))
            noTextToLearn(trainPath, train, "is empty or only whitespace and control characters");
        SubwordTokenizer subword;
        try {
            subword = s.tokenizerModel.empty()
                          ? SubwordTokenizer::train(train.texts, s.maxVocab)
                          : SubwordTokenizer::fromFile(resolveDatasetPath(projectPath, s.tokenizerModel));
        } catch (const std::runtime_error& e) {
            throw DataError((s.tokenizerModel.empty() ? "dataset.max_vocab: " : "dataset.tokenizer_model: ") +
                            std::string(e.what()) +
                            (s.tokenizerModel.empty() ? " (fewer pieces, or more training text, may do)" : ""));
        }
        b.vocabulary = subword.vocabulary();
        b.tokenizerModel = subword.serialized();
        encoder = std::make_unique<TextEncoder>(subword, s.maxTokens);
        b.textLengths.reserve(train.texts.size());
        for (const std::string& t : train.texts) b.textLengths.push_back(encoder->countTokens(t));
    } else {
        std::unordered_map<std::string, int64_t> counts;
        b.textLengths.reserve(train.texts.size());
        for (const std::string& t : train.texts)
            b.textLengths.push_back(static_cast<int64_t>(forEachToken(t, s.tokenizer, [&](const std::string& tok) {
                ++counts[tok];
                return true;
            })));
        if (counts.empty())
            noTextToLearn(trainPath, train,
                          s.tokenizer == Tokenizer::Word ? "holds no word (letters or digits)" : "is empty");
        std::vector<std::pair<std::string, int64_t>> byCount(counts.begin(), counts.end());
        std::sort(byCount.begin(), byCount.end(), [](const auto& a, const auto& c) {
            return a.second != c.second ? a.second > c.second : a.first < c.first;
        });
        b.vocabulary = {"<pad>", "<unk>"};
        for (const auto& [tok, n] : byCount) {
            if (static_cast<int>(b.vocabulary.size()) >= s.maxVocab) break;
            b.vocabulary.push_back(tok);
        }
        encoder = std::make_unique<TextEncoder>(s.tokenizer, s.maxTokens, b.vocabulary, std::string());
    }

    auto encode = [&](const TextRows& rows) {
        DataSplit split;
        split.sampleShape = Shape{s.maxTokens};
        split.count = static_cast<int64_t>(rows.texts.size());
        split.inputs.reserve(static_cast<size_t>(split.count) * static_cast<size_t>(s.maxTokens));
        split.labels.reserve(rows.texts.size());
        for (size_t r = 0; r < rows.texts.size(); ++r) {
            split.labels.push_back(mapper.map(rows.labels[r]));
            const std::vector<float> ids = encoder->encode(rows.texts[r]);
            split.inputs.insert(split.inputs.end(), ids.begin(), ids.end());
        }
        return split;
    };
    b.train = encode(train);
    b.validation = encode(validation);
    int64_t cut = 0, longest = 0;
    for (const int64_t length : b.textLengths) {
        cut += length > s.maxTokens ? 1 : 0;
        longest = std::max(longest, length);
    }
    const auto texts = static_cast<int64_t>(b.textLengths.size());
    if (texts > 0 && cut * 10 > texts)
        warnings += "\nwarning: " + std::to_string(cut) + " of " + std::to_string(texts) + " training texts (" +
                    std::to_string(cut * 100 / texts) + "%) have more than max_tokens " + std::to_string(s.maxTokens) +
                    " tokens and are cut (the longest has " + std::to_string(longest) +
                    "); a larger max_tokens keeps more of them";
    b.classNames = mapper.names();
    b.numClasses = static_cast<int>(b.classNames.size());
    b.normalization.mode = "none";  // token ids go to an Embedding untouched
    b.description = "Text " + fileName(trainPath) + " (" + settingName(s.tokenizer) + ", " +
                    std::to_string(s.maxTokens) + " tokens): " + std::to_string(b.train.count) + " train, " +
                    std::to_string(b.validation.count) + " validation, " + std::to_string(b.numClasses) +
                    " classes, vocabulary " + std::to_string(b.vocabulary.size()) + warnings;
    return b;
}

// ---------------------------------------------------------------- synthetic

// The synthetic data set lives in memory whole: at most 2^30 floats (4 GiB) in all.
constexpr int64_t kMaxSyntheticValues = int64_t{1} << 30;

DatasetBundle loadSynthetic(const DatasetSettings& s) {
    if (s.syntheticClasses < 2)
        throw DataError("dataset.synthetic_classes: " + std::to_string(s.syntheticClasses) + " (must be at least 2)");
    if (s.syntheticSamples < 2)
        throw DataError("dataset.synthetic_samples: " + std::to_string(s.syntheticSamples) + " (must be at least 2)");
    if (s.syntheticShape.empty()) throw DataError("dataset.synthetic_shape is empty");
    for (int64_t d : s.syntheticShape)
        if (d < 1) throw DataError("dataset.synthetic_shape: every dimension must be at least 1");
    RawSplit train;
    train.shape = Shape(s.syntheticShape);
    int64_t n = 1, total = 0;
    for (int64_t d : s.syntheticShape)
        if (__builtin_mul_overflow(n, d, &n) || n > kMaxSampleElements)
            throw DataError("dataset.synthetic_shape " + train.shape.toString() + ": more than " +
                            std::to_string(kMaxSampleElements) + " values per sample");
    if (__builtin_mul_overflow(n, s.syntheticSamples, &total) || total > kMaxSyntheticValues)
        throw DataError("dataset.synthetic_samples: " + std::to_string(s.syntheticSamples) + " samples of " +
                        train.shape.toString() + " exceed " + std::to_string(kMaxSyntheticValues) +
                        " values (4 GiB); use fewer or smaller samples");
    if (__builtin_mul_overflow(n, int64_t{s.syntheticClasses}, &total) || total > kMaxSyntheticValues)
        throw DataError("dataset.synthetic_classes: " + std::to_string(s.syntheticClasses) + " class centers of " +
                        train.shape.toString() + " exceed " + std::to_string(kMaxSyntheticValues) + " values");
    const int classes = s.syntheticClasses;
    // One Gaussian blob per class: centers ~ N(0, 1) per element, samples ~ center + N(0, 1).
    // Centers are about sqrt(2n) apart against unit noise: learnable, not instantly.
    uint64_t rng = data::mixSeed(kSyntheticSeed, static_cast<uint64_t>(n * 1000 + classes));
    std::vector<float> centers(static_cast<size_t>(n) * static_cast<size_t>(classes));
    for (float& c : centers) c = static_cast<float>(data::randomNormal(rng));
    train.values.resize(static_cast<size_t>(n * s.syntheticSamples));
    train.labels.resize(static_cast<size_t>(s.syntheticSamples));
    for (int64_t i = 0; i < s.syntheticSamples; ++i) {
        const int32_t label = static_cast<int32_t>(data::randomBelow(rng, static_cast<uint64_t>(classes)));
        train.labels[static_cast<size_t>(i)] = label;
        const float* c = centers.data() + static_cast<int64_t>(label) * n;
        float* dst = train.values.data() + i * n;
        for (int64_t j = 0; j < n; ++j) dst[j] = c[j] + static_cast<float>(data::randomNormal(rng));
    }
    RawSplit validation;
    splitAndLimit(train, validation, false, s);
    DatasetBundle b;
    normalize(train, validation, s.normalization, false, b.normalization);
    b.numClasses = classes;
    if (!s.classNames.empty() && static_cast<int>(s.classNames.size()) == classes) {
        b.classNames = s.classNames;
    } else {
        for (int c = 0; c < classes; ++c) b.classNames.push_back("class " + std::to_string(c));
    }
    b.description = "Synthetic blobs " + train.shape.toString() + ": " + std::to_string(train.count()) + " train, " +
                    std::to_string(validation.count()) + " validation, " + std::to_string(classes) + " classes";
    b.train = toSplit(std::move(train));
    b.validation = toSplit(std::move(validation));
    return b;
}

// ---------------------------------------------------------------- image folder

// Indices of a seeded random subset of `count` of size `limit` (all when limit is 0 or >= count), in order.
std::vector<int64_t> randomSubset(int64_t count, int64_t limit, uint64_t salt) {
    std::vector<int64_t> rows(static_cast<size_t>(count));
    std::iota(rows.begin(), rows.end(), 0);
    if (limit <= 0 || limit >= count) return rows;
    uint64_t rng = data::mixSeed(kSplitSeed ^ salt, static_cast<uint64_t>(count));
    for (int64_t i = count - 1; i > 0; --i)
        std::swap(rows[static_cast<size_t>(i)], rows[data::randomBelow(rng, static_cast<uint64_t>(i + 1))]);
    rows.resize(static_cast<size_t>(limit));
    std::sort(rows.begin(), rows.end());
    return rows;
}

data::ImageList pickImages(const data::ImageList& list, const std::vector<int64_t>& rows) {
    data::ImageList out;
    out.classNames = list.classNames;
    for (int64_t r : rows) {
        out.paths.push_back(list.paths[static_cast<size_t>(r)]);
        out.labels.push_back(list.labels[static_cast<size_t>(r)]);
    }
    return out;
}

// Stratified hold-out: in every class, the same seeded fraction (at least one image when the class has two
// or more and the fraction is not 0) goes to validation. Returns (train, validation) rows in list order.
std::pair<std::vector<int64_t>, std::vector<int64_t>> stratifiedHoldOut(const data::ImageList& list, double fraction) {
    checkSplitFraction(fraction);
    std::vector<std::vector<int64_t>> byClass(list.classNames.size());
    for (size_t i = 0; i < list.labels.size(); ++i)
        byClass[static_cast<size_t>(list.labels[i])].push_back(static_cast<int64_t>(i));
    std::vector<int64_t> train, val;
    for (size_t c = 0; c < byClass.size(); ++c) {
        std::vector<int64_t>& rows = byClass[c];
        const auto count = static_cast<int64_t>(rows.size());
        uint64_t rng = data::mixSeed(kSplitSeed + c, static_cast<uint64_t>(count));
        for (int64_t i = count - 1; i > 0; --i)
            std::swap(rows[static_cast<size_t>(i)], rows[data::randomBelow(rng, static_cast<uint64_t>(i + 1))]);
        auto nVal = static_cast<int64_t>(std::llround(fraction * static_cast<double>(count)));
        if (fraction > 0 && nVal == 0 && count >= 2) nVal = 1;
        if (nVal >= count && count > 0) nVal = count - 1;
        val.insert(val.end(), rows.begin(), rows.begin() + nVal);
        train.insert(train.end(), rows.begin() + nVal, rows.end());
    }
    std::sort(train.begin(), train.end());
    std::sort(val.begin(), val.end());
    return {train, val};
}

// Skipped files marked with the split they were left out of, appended to `to`.
void addSkipped(std::vector<SkippedFile>& to, std::vector<SkippedFile> files, const char* split) {
    for (SkippedFile& f : files) {
        f.split = split;
        to.push_back(std::move(f));
    }
}

RawSplit decodeSplit(const data::ImageList& list, const Shape& shape, const DatasetSettings& s, const char* split,
                     std::vector<SkippedFile>& skipped, std::map<std::pair<int64_t, int64_t>, int64_t>& sizes) {
    data::DecodedImages d =
        data::decodeImages(list.paths, shape, data::resizePolicyFor(s), s.decodeThreads, s.strictImages);
    RawSplit raw;
    raw.shape = shape;
    raw.values = std::move(d.values);
    for (int64_t k : d.kept) raw.labels.push_back(list.labels[static_cast<size_t>(k)]);
    addSkipped(skipped, std::move(d.skipped), split);
    for (const auto& size : d.sizes) ++sizes[size];
    return raw;
}

// RGB images: one mean and standard deviation per channel, measured on the training split (in 0..255
// units). Stored as per-feature statistics (the channel's value at each of its pixels), the form
// checkpoints, exports and predict already carry, so nothing downstream needs to know about channels.
void standardizePerChannel(RawSplit& train, RawSplit& validation, Normalization& norm) {
    norm = Normalization{};
    norm.mode = settingName(NormalizationMode::Standardize);
    const int64_t channels = train.shape.dims()[0], plane = train.shape.numel() / channels;
    std::vector<double> sum(static_cast<size_t>(channels), 0.0), sumSq(static_cast<size_t>(channels), 0.0);
    for (int64_t r = 0; r < train.count(); ++r)
        for (int64_t c = 0; c < channels; ++c) {
            const float* p = train.values.data() + (r * channels + c) * plane;
            for (int64_t i = 0; i < plane; ++i) {
                sum[static_cast<size_t>(c)] += p[i];
                sumSq[static_cast<size_t>(c)] += double(p[i]) * p[i];
            }
        }
    const double n = double(std::max<int64_t>(1, train.count())) * double(plane);
    norm.featureMean.resize(static_cast<size_t>(channels * plane));
    norm.featureStd.resize(static_cast<size_t>(channels * plane));
    for (int64_t c = 0; c < channels; ++c) {
        const double mean = sum[static_cast<size_t>(c)] / n;
        const double var = std::max(0.0, sumSq[static_cast<size_t>(c)] / n - mean * mean);
        const auto sd = var > 1e-12 ? float(std::sqrt(var)) : 1.0f;
        std::fill_n(norm.featureMean.begin() + c * plane, plane, float(mean));
        std::fill_n(norm.featureStd.begin() + c * plane, plane, sd);
    }
    const int64_t f = channels * plane;
    for (RawSplit* split : {&train, &validation})
        for (size_t i = 0; i < split->values.size(); ++i)
            split->values[i] = (split->values[i] - norm.featureMean[i % static_cast<size_t>(f)]) /
                               norm.featureStd[i % static_cast<size_t>(f)];
}

// Streamed image folders: the normalization statistics come from this many training images (a seeded
// sample), decoded at the start.
constexpr int64_t kStreamStatsImages = 2000;

// Where a split's decoded bytes go (image_loading cache): memory while `memoryLeft` allows, else a file in
// .strata-cache beside the project, named after the folder, the split and the layout key (the paths, shape and
// resize; earlier files of the same folder and split, for other files or shapes, are removed, and so are
// temporaries of runs that died while creating one). What reusing a file found (images decoded again, a rebuild)
// goes to `notes`, one line each.
std::unique_ptr<data::DecodedCache> makeImageCache(const DatasetSettings& s, const std::string& projectPath,
                                                   const std::string& folder, const std::string& splitName,
                                                   const data::ImageList& list, const Shape& shape,
                                                   const std::vector<data::SourceStamp>& stamps, int64_t& memoryLeft,
                                                   std::string& where, std::string& notes) {
    namespace fs = std::filesystem;
    const auto count = static_cast<int64_t>(list.paths.size());
    const int64_t bytes = count * shape.numel();
    if (s.imageLoading != ImageLoading::Cache || count == 0) return nullptr;
    if (bytes <= memoryLeft) {
        memoryLeft -= bytes;
        where += (where.empty() ? "" : ", ") + splitName + " cache in memory (" +
                 std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB)";
        return data::DecodedCache::inMemory(count, shape.numel());
    }
    std::string base = fileName(folder);
    for (char& c : base)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
    const std::string prefix = base + "-" + splitName + "-";
    const uint64_t key = data::imageListLayoutKey(list.paths, shape, data::resizePolicyFor(s));
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(key));
    const fs::path dir = resolveDatasetPath(projectPath, ".strata-cache");
    const fs::path file = dir / (prefix + hex + ".u8");
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.starts_with(prefix) && name.ends_with(".u8") && it->path() != file) fs::remove(it->path(), ec);
    }
    if (fs::is_directory(dir, ec)) removeOrphanedTemporaryFiles(dir.string());
    auto cache = data::DecodedCache::inFile(file.string(), key, list.paths, stamps, shape.numel());
    where += (where.empty() ? "" : ", ") + splitName + " cache in " + file.string() +
             (cache->reused() ? " (reused: " + std::to_string(cache->readyCount()) + " images decoded before)" : "");
    if (!cache->report().empty()) notes += "\n" + splitName + " image cache " + file.string() + ": " + cache->report();
    return cache;
}

DataSplit streamSplit(const data::ImageList& list, const Shape& shape, const DatasetSettings& s,
                      const Normalization& norm, uint64_t fp, std::unique_ptr<data::DecodedCache> cache) {
    DataSplit split;
    split.sampleShape = shape;
    split.count = static_cast<int64_t>(list.paths.size());
    split.labels = list.labels;
    data::ImageStream::Options o;
    o.shape = shape;
    o.policy = data::resizePolicyFor(s);
    o.strict = s.strictImages;
    o.threads = s.decodeThreads;
    o.queuedBatches = s.loaderBatches;
    o.normalization = norm;
    o.filesFingerprint = fp;
    split.source = std::make_shared<data::ImageStream>(list.paths, std::move(o), std::move(cache));
    return split;
}

DataError noImageDecoded(const std::string& trainPath, const std::vector<SkippedFile>& skipped) {
    return DataError::inFile(trainPath, "no training image decoded; first problem: " +
                                            (skipped.empty() ? std::string("none listed")
                                                             : skipped.front().path + ": " + skipped.front().reason));
}

// The normalization of image samples (0..255): standardize on RGB is per channel, anything else as for
// every image set; the class names with it.
void normalizeImages(const DatasetSettings& s, RawSplit& train, RawSplit& validation, const data::ImageList& list,
                     DatasetBundle& b) {
    if (s.normalization == NormalizationMode::Standardize && train.shape.dims()[0] == 3) {
        standardizePerChannel(train, validation, b.normalization);
    } else {
        normalize(train, validation, s.normalization, true, b.normalization);
    }
    b.classNames = list.classNames;
    b.numClasses = static_cast<int>(b.classNames.size());
}

std::string imageFolderDescription(const DatasetSettings& s, const std::string& trainPath, const Shape& shape,
                                   int64_t train, int64_t validation, const DatasetBundle& b) {
    return "Image folder " + fileName(trainPath) + " (" + shape.toString() + ", " + settingName(s.imageResize) +
           "): " + std::to_string(train) + " train, " + std::to_string(validation) + " validation, " +
           std::to_string(b.numClasses) + " classes" +
           (b.skipped.empty() ? "" : ", " + std::to_string(b.skipped.size()) + " skipped");
}

// image_loading stream or cache: labels now, images while training. The normalization statistics (and the
// size histogram) come from a seeded sample of the training images, rounded to bytes as the stream
// delivers them.
DatasetBundle streamImageFolder(const DatasetSettings& s, const std::string& projectPath, const std::string& trainPath,
                                const Shape& shape, const data::ImageList& trainList, const data::ImageList& valList,
                                DatasetBundle b) {
    const data::ImageList sampleList =
        pickImages(trainList, randomSubset(static_cast<int64_t>(trainList.paths.size()), kStreamStatsImages, 3));
    RawSplit sample = decodeSplit(sampleList, shape, s, "training", b.skipped, b.imageSizes);
    if (sample.count() == 0) throw noImageDecoded(trainPath, b.skipped);
    for (float& v : sample.values) v = std::clamp(std::round(v), 0.0f, 255.0f);
    RawSplit none;
    none.shape = shape;
    normalizeImages(s, sample, none, trainList, b);
    int64_t memoryLeft = s.cacheMemoryMb << 20;
    std::string where;
    // One stat() of every file: the stamps go into the stream's fingerprint and into the cache's slots.
    const std::vector<data::SourceStamp> trainStamps = data::stampFiles(trainList.paths);
    const std::vector<data::SourceStamp> valStamps = data::stampFiles(valList.paths);
    const uint64_t trainFp = data::imageListFingerprint(trainList.paths, trainStamps, shape, data::resizePolicyFor(s));
    const uint64_t valFp = data::imageListFingerprint(valList.paths, valStamps, shape, data::resizePolicyFor(s));
    std::string notes;
    auto trainCache =
        makeImageCache(s, projectPath, trainPath, "train", trainList, shape, trainStamps, memoryLeft, where, notes);
    auto valCache =
        makeImageCache(s, projectPath, trainPath, "validation", valList, shape, valStamps, memoryLeft, where, notes);
    b.train = streamSplit(trainList, shape, s, b.normalization, trainFp, std::move(trainCache));
    b.validation = streamSplit(valList, shape, s, b.normalization, valFp, std::move(valCache));
    b.description = imageFolderDescription(s, trainPath, shape, b.train.count, b.validation.count, b) + "; streamed (" +
                    settingName(s.imageLoading) + ": " + (where.empty() ? std::string("decoded every epoch") : where) +
                    "), " + std::to_string(s.loaderBatches) + " batches held ready, statistics from " +
                    std::to_string(sample.count()) + " sampled images" + notes;
    return b;
}

DatasetBundle loadImageFolder(const DatasetSettings& s, const std::string& projectPath, bool stream) {
    if (s.trainPath.empty())
        throw DataError("dataset.train_path is empty (image_folder datasets need a folder of class folders or a CSV)");
    if (s.imageShape.size() != 3 || (s.imageShape[0] != 1 && s.imageShape[0] != 3))
        throw DataError(
            "dataset.image_shape: image_folder datasets need [C, H, W] with C = 1 (gray) or 3 (RGB), "
            "e.g. 1,28,28: the Input node's shape");
    const Shape shape(s.imageShape);
    const std::string trainPath = resolveDatasetPath(projectPath, s.trainPath);
    DatasetBundle b;
    data::ImageList trainList = data::listImages(trainPath, s.classNames, s.strictImages);
    addSkipped(b.skipped, trainList.skipped, "training");
    data::ImageList valList;
    const bool haveValidation = !s.validationPath.empty();
    if (haveValidation) {
        valList =
            data::listImages(resolveDatasetPath(projectPath, s.validationPath), trainList.classNames, s.strictImages);
        addSkipped(b.skipped, valList.skipped, "validation");
    } else if (s.validationSplit > 0.0) {
        auto [trainRows, valRows] = stratifiedHoldOut(trainList, s.validationSplit);
        valList = pickImages(trainList, valRows);
        trainList = pickImages(trainList, trainRows);
    } else {
        checkSplitFraction(s.validationSplit);
    }
    // Limits before decoding, so a quick run on a big folder decodes only what it uses.
    trainList = pickImages(trainList, randomSubset(static_cast<int64_t>(trainList.paths.size()), s.trainLimit, 1));
    valList = pickImages(valList, randomSubset(static_cast<int64_t>(valList.paths.size()), s.validationLimit, 2));
    valList.classNames = trainList.classNames;
    if (stream) return streamImageFolder(s, projectPath, trainPath, shape, trainList, valList, std::move(b));

    RawSplit train = decodeSplit(trainList, shape, s, "training", b.skipped, b.imageSizes);
    RawSplit validation = decodeSplit(valList, shape, s, "validation", b.skipped, b.imageSizes);
    if (train.count() == 0) throw noImageDecoded(trainPath, b.skipped);
    normalizeImages(s, train, validation, trainList, b);
    b.description = imageFolderDescription(s, trainPath, shape, train.count(), validation.count(), b);
    b.train = toSplit(std::move(train));
    b.validation = toSplit(std::move(validation));
    return b;
}

}  // namespace

std::vector<std::string> skippedFileLines(const std::vector<SkippedFile>& files, const std::string& split) {
    std::vector<std::string> lines;
    for (size_t i = 0; i < files.size() && i < kListedSkippedFiles; ++i)
        lines.push_back((files[i].split.empty() ? split : files[i].split) + ": skipped " + files[i].path + ": " +
                        files[i].reason);
    if (files.size() > kListedSkippedFiles)
        lines.push_back(split + ": and " + std::to_string(files.size() - kListedSkippedFiles) + " more files skipped");
    return lines;
}

DatasetBundle loadDataset(const DatasetSettings& settings, const std::string& projectPath, Streaming streaming) {
    if (settings.trainLimit < 0 || settings.validationLimit < 0)
        throw DataError("dataset.train_limit and validation_limit must not be negative");
    switch (settings.kind) {
        case DatasetKind::Idx: return loadIdx(settings, projectPath);
        case DatasetKind::Csv: return loadCsv(settings, projectPath);
        case DatasetKind::Text: return loadText(settings, projectPath);
        case DatasetKind::Synthetic: return loadSynthetic(settings);
        case DatasetKind::ImageFolder:
            return loadImageFolder(settings, projectPath,
                                   streaming == Streaming::Allowed && settings.imageLoading != ImageLoading::Memory);
    }
    throw DataError("dataset.kind: unknown kind " + std::to_string(static_cast<int>(settings.kind)) + " (" +
                    datasetSetting("kind").rangeText() + ")");
}

}  // namespace strata
