// CsvDataset: the csv loader. A header row names the columns; the label column is the class, every other
// column a numeric feature (a validation file must have the same columns, in any order). Parsing is
// CsvReader's; the labels become classes through the shared LabelMapper (DatasetLoader.h). Regression: the
// target columns are numbers to predict (no label column); multi-label: the target columns are 0/1 per label, or
// the label column lists a row's labels.
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
    std::vector<float> targets;  // rows * targetColumns (regression, multi-label 0/1 columns)
};

float parseNumber(const std::string& path, int64_t line, const std::string& column, const std::string& text) {
    const std::string v = trim(text);
    float x = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
    if (v.empty() || ec != std::errc() || p != v.data() + v.size() || !std::isfinite(x))
        throw DataError::atLine(
            path, line,
            "column '" + column + "': " + (v.empty() ? std::string("empty value") : "'" + v + "' is not a number"));
    return x;
}

// targetColumns: the float targets (regression, multi-label columns); then no label column is read unless
// `withLabels`. binaryTargets: each must be 0 or 1.
CsvTable readCsvTable(const std::string& path, const std::string& labelColumn,
                      const std::vector<std::string>* expectedFeatures,
                      const std::vector<std::string>& targetColumns = {}, bool withLabels = true,
                      bool binaryTargets = false) {
    std::vector<CsvRecord> records = readCsvFile(path);
    const CsvRecord& header = records[0];
    std::vector<std::string> columns;
    for (const std::string& c : header.fields) columns.push_back(trim(c));
    int labelIndex = -1;
    for (size_t i = 0; i < columns.size() && withLabels; ++i) {
        if (columns[i] == labelColumn) {
            if (labelIndex >= 0) throw DataError::atLine(path, header.line, "two columns named '" + labelColumn + "'");
            labelIndex = static_cast<int>(i);
        }
    }
    std::vector<size_t> targetIndex;
    for (const std::string& t : targetColumns) {
        const auto n = std::count(columns.begin(), columns.end(), t);
        if (n != 1)
            throw DataError::atLine(path, header.line,
                                    (n == 0 ? "no column named '" : "two columns named '") + t +
                                        "' (a target column, dataset.target_columns; columns: " + joinNames(columns) +
                                        ")");
        targetIndex.push_back(static_cast<size_t>(std::find(columns.begin(), columns.end(), t) - columns.begin()));
    }
    auto isTarget = [&](size_t i) { return std::find(targetIndex.begin(), targetIndex.end(), i) != targetIndex.end(); };
    if (withLabels && labelIndex < 0)
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
        const size_t expected = expectedFeatures->size() + (withLabels ? 1 : 0) + targetColumns.size();
        if (columns.size() != expected)
            throw DataError::atLine(
                path, header.line,
                std::to_string(columns.size()) + " columns, the training file has " + std::to_string(expected));
    } else {
        for (size_t i = 0; i < columns.size(); ++i) {
            if (static_cast<int>(i) == labelIndex || isTarget(i)) continue;
            t.featureNames.push_back(columns[i]);
            featureColumns.push_back(i);
        }
        if (t.featureNames.empty())
            throw DataError::atLine(path, header.line,
                                    withLabels ? "no feature columns besides the label column '" + labelColumn + "'"
                                               : "no feature columns besides the target columns");
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
        for (size_t f = 0; f < featureColumns.size(); ++f)
            t.values.push_back(parseNumber(path, rec.line, t.featureNames[f], rec.fields[featureColumns[f]]));
        for (size_t k = 0; k < targetIndex.size(); ++k) {
            const float y = parseNumber(path, rec.line, targetColumns[k], rec.fields[targetIndex[k]]);
            if (binaryTargets && y != 0.0f && y != 1.0f)
                throw DataError::atLine(path, rec.line,
                                        "column '" + targetColumns[k] + "': a label column holds 0 or 1, not " +
                                            trim(rec.fields[targetIndex[k]]));
            t.targets.push_back(y);
        }
        if (withLabels)
            t.labels.push_back({path, rec.line, trim(rec.fields[static_cast<size_t>(labelIndex)])});
        else
            t.labels.push_back({path, rec.line, {}});
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

// Regression and multi-label: float targets per row instead of a class.
DatasetBundle loadCsvTargets(const DatasetSettings& s, const std::string& projectPath) {
    const bool regression = s.task == TaskKind::Regression;
    const bool labelList = !regression && s.targetColumns.empty();  // multi-label, labels listed in one column
    const std::string trainPath = resolveDatasetPath(projectPath, s.trainPath);
    CsvTable trainTable = readCsvTable(trainPath, s.labelColumn, nullptr, s.targetColumns, labelList, !regression);
    CsvTable valTable;
    const bool haveValidation = !s.validationPath.empty();
    if (haveValidation)
        valTable = readCsvTable(resolveDatasetPath(projectPath, s.validationPath), s.labelColumn,
                                &trainTable.featureNames, s.targetColumns, labelList, !regression);
    DatasetBundle b;
    auto raw = [](CsvTable& t, std::vector<float> targets, int64_t size) {
        RawSplit r;
        r.shape = Shape{static_cast<int64_t>(t.featureNames.size())};
        r.values = std::move(t.values);
        r.labels.assign(t.labels.size(), 0);
        r.targetSize = size;
        r.targets = std::move(targets);
        return r;
    };
    RawSplit train, validation;
    if (labelList) {
        MultiLabelTargets m = multiLabelTargets(trainTable.labels, valTable.labels, s.labelSeparator, s.classNames);
        b.classNames = m.names;
        const auto k = static_cast<int64_t>(m.names.size());
        train = raw(trainTable, std::move(m.train), k);
        validation = raw(valTable, std::move(m.validation), k);
    } else {
        b.classNames = s.targetColumns;
        const auto k = static_cast<int64_t>(s.targetColumns.size());
        train = raw(trainTable, std::move(trainTable.targets), k);
        validation = raw(valTable, std::move(valTable.targets), k);
    }
    b.numClasses = static_cast<int>(b.classNames.size());
    splitAndLimit(train, validation, haveValidation, s);
    normalize(train, validation, s.normalization, false, b.normalization);
    if (regression) standardizeTargets(train, validation, s.standardizeTargets, b.targetNormalization);
    b.description = "CSV " + fileName(trainPath) + ": " + std::to_string(train.count()) + " train, " +
                    std::to_string(validation.count()) + " validation, " + std::to_string(b.numClasses) +
                    (regression ? " target(s) (" : " labels (") + joinNames(b.classNames, 6) + "), " +
                    std::to_string(trainTable.featureNames.size()) + " features";
    b.train = toSplit(std::move(train));
    b.validation = toSplit(std::move(validation));
    return b;
}

DatasetBundle loadCsvDataset(const DatasetSettings& s, const std::string& projectPath, Streaming /*streaming*/) {
    if (s.trainPath.empty()) throw DataError("dataset.train_path is empty (csv datasets need a training file)");
    if (s.task == TaskKind::Regression || s.task == TaskKind::MultiLabel) return loadCsvTargets(s, projectPath);
    const std::string trainPath = resolveDatasetPath(projectPath, s.trainPath);
    CsvTable trainTable = readCsvTable(trainPath, s.labelColumn, nullptr);  // classification
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
