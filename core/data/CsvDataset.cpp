// CsvDataset: the csv loader. A header row names the columns; the label column is the class, every other
// column a numeric feature (a validation file must have the same columns, in any order). Parsing is
// CsvReader's; the labels become classes through the shared LabelMapper (DatasetLoader.h).
#include <algorithm>
#include <charconv>
#include <cmath>

#include "core/data/CsvReader.h"
#include "core/data/DatasetLoader.h"

namespace strata::data {

namespace {

struct CsvTable {
    std::vector<std::string> featureNames;
    std::vector<float> values;
    std::vector<LabelText> labels;
};

CsvTable readCsvTable(const std::string& path, const std::string& labelColumn,
                      const std::vector<std::string>* expectedFeatures) {
    std::vector<CsvRecord> records = readCsvFile(path);
    const CsvRecord& header = records[0];
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
        const CsvRecord& rec = records[r];
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

}  // namespace

DatasetBundle loadCsvDataset(const DatasetSettings& s, const std::string& projectPath, Streaming /*streaming*/) {
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
    b.description = "CSV " + fileName(trainPath) + ": " + splitCounts(train.count(), validation.count(), b.numClasses) +
                    ", " + std::to_string(trainTable.featureNames.size()) + " features";
    b.train = toSplit(std::move(train));
    b.validation = toSplit(std::move(validation));
    return b;
}

}  // namespace strata::data
