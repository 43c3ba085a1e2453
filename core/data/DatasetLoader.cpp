#include "core/data/DatasetLoader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "core/data/DataRandom.h"

namespace strata::data {

std::string fileName(const std::string& path) {
    std::string name = std::filesystem::path(path).filename().string();
    return name.empty() ? path : name;
}

std::string fieldCount(size_t n) { return std::to_string(n) + (n == 1 ? " field" : " fields"); }

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

std::string joinNames(const std::vector<std::string>& names, size_t maxShown) {
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

RawSplit gather(const RawSplit& src, const std::vector<int64_t>& rows) {
    RawSplit out;
    out.shape = src.shape;
    const int64_t n = src.shape.numel();
    out.values.resize(static_cast<size_t>(n) * rows.size());
    out.labels.resize(rows.size());
    out.targetSize = src.targetSize;
    const int64_t t = src.targetSize;
    out.targets.resize(static_cast<size_t>(t) * rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
        std::copy_n(src.values.begin() + rows[i] * n, n, out.values.begin() + static_cast<int64_t>(i) * n);
        out.labels[i] = src.labels[static_cast<size_t>(rows[i])];
        if (t > 0) std::copy_n(src.targets.begin() + rows[i] * t, t, out.targets.begin() + static_cast<int64_t>(i) * t);
    }
    return out;
}

void checkSplitFraction(double fraction) {
    if (!(fraction >= 0.0 && fraction < 1.0))
        throw DataError("dataset.validation_split: " + std::to_string(fraction) + " is outside [0, 1)");
}

std::pair<std::vector<int64_t>, std::vector<int64_t>> holdOut(int64_t count, double fraction) {
    checkSplitFraction(fraction);
    std::vector<int64_t> perm(static_cast<size_t>(count));
    std::iota(perm.begin(), perm.end(), 0);
    uint64_t rng = mixSeed(kSplitSeed, static_cast<uint64_t>(count));
    for (int64_t i = count - 1; i > 0; --i)
        std::swap(perm[static_cast<size_t>(i)], perm[randomBelow(rng, static_cast<uint64_t>(i + 1))]);
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
    validation.targetSize = train.targetSize;
}

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
    if (raw.targetSize > 0) {
        s.targetShape = Shape{raw.targetSize};
        s.targets = std::move(raw.targets);
    }
    return s;
}

void standardizeTargets(RawSplit& train, RawSplit& validation, bool standardize, Normalization& norm) {
    // The targets as splits of their own, so that they are standardized exactly as tabular features are.
    auto asSplit = [](RawSplit& s) {
        RawSplit t;
        t.shape = Shape{s.targetSize};
        t.values = std::move(s.targets);
        t.labels.assign(s.labels.size(), 0);
        return t;
    };
    RawSplit t = asSplit(train), v = asSplit(validation);
    normalize(t, v, standardize ? NormalizationMode::Standardize : NormalizationMode::None, false, norm);
    train.targets = std::move(t.values);
    validation.targets = std::move(v.values);
}

MultiLabelTargets multiLabelTargets(const std::vector<LabelText>& train, const std::vector<LabelText>& validation,
                                    const std::string& separator, const std::vector<std::string>& names) {
    if (separator.empty()) throw DataError("dataset.label_separator is empty");
    MultiLabelTargets out;
    std::unordered_map<std::string, size_t> index;
    for (const std::string& n : names) index.emplace(n, index.size());
    out.names = names;
    auto split = [&](const LabelText& l) {
        std::vector<std::string> parts;
        size_t from = 0;
        while (from <= l.text.size()) {
            size_t at = l.text.find(separator, from);
            if (at == std::string::npos) at = l.text.size();
            const std::string part = trim(l.text.substr(from, at - from));
            if (!part.empty()) parts.push_back(part);
            from = at + separator.size();
        }
        return parts;
    };
    const bool learn = names.empty();
    for (const LabelText& l : train)
        for (const std::string& p : split(l))
            if (learn && index.emplace(p, index.size()).second) out.names.push_back(p);
    if (out.names.empty())
        throw DataError(train.empty() ? "no training rows"
                                      : DataError::inFile(train.front().path,
                                                          "no label in any row "
                                                          "of the label column (separated by '" +
                                                              separator + "')")
                                            .what());
    const size_t k = out.names.size();
    auto encode = [&](const std::vector<LabelText>& rows, bool validationRows) {
        std::vector<float> t(rows.size() * k, 0.0f);
        for (size_t r = 0; r < rows.size(); ++r)
            for (const std::string& p : split(rows[r])) {
                auto it = index.find(p);
                if (it == index.end())
                    throw DataError::atLine(rows[r].path, rows[r].line,
                                            "label '" + p + "' is not one of the " +
                                                (validationRows && learn ? std::string("training split's labels")
                                                                         : std::string("dataset.class_names")) +
                                                " (" + joinNames(out.names) + ")");
                t[r * k + it->second] = 1.0f;
            }
        return t;
    };
    out.train = encode(train, false);
    out.validation = encode(validation, true);
    return out;
}

std::string splitCounts(int64_t train, int64_t validation, int classes) {
    return std::to_string(train) + " train, " + std::to_string(validation) + " validation, " + std::to_string(classes) +
           " classes";
}

void addSkipped(std::vector<SkippedFile>& to, std::vector<SkippedFile> files, const char* split) {
    for (SkippedFile& f : files) {
        f.split = split;
        to.push_back(std::move(f));
    }
}

LabelMapper::LabelMapper(const std::vector<LabelText>& trainLabels, const std::vector<std::string>& classNames) {
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

int32_t LabelMapper::map(const LabelText& l) const {
    if (l.text.empty()) throw DataError::atLine(l.path, l.line, "empty label");
    auto it = m_index.find(l.text);
    if (it != m_index.end()) return it->second;
    int64_t v = 0;
    if (m_acceptIntegers && parseNonNegativeInt(l.text, v)) {
        if (v < static_cast<int64_t>(m_names.size())) return static_cast<int32_t>(v);
        throw DataError::atLine(l.path, l.line,
                                "label " + l.text + " out of range (0.." + std::to_string(m_names.size() - 1) + ")");
    }
    if (m_acceptIntegers && m_index.empty())
        throw DataError::atLine(
            l.path, l.line,
            "label '" + l.text + "' is not a class index (0.." + std::to_string(m_names.size() - 1) + ")");
    throw DataError::atLine(l.path, l.line,
                            "label '" + l.text + "' is not one of the classes (" + joinNames(m_names) + ")");
}

}  // namespace strata::data
