#include "core/infer/Predict.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>

#include <unistd.h>
#include <zlib.h>

#include "core/backend/BackendRegistry.h"
#include "core/data/CsvReader.h"
#include "core/data/Dataset.h"
#include "core/data/IdxReader.h"
#include "core/data/ImageFile.h"
#include "core/data/TextEncoder.h"
#include "core/export/FoldBatchNorm.h"
#include "core/graph/Model.h"
#include "core/infer/ExportCheck.h"
#include "core/infer/Int8Engine.h"
#include "core/infer/OnnxRunner.h"
#include "core/io/InputFile.h"

namespace strata {

namespace {

namespace fs = std::filesystem;

PredictInputs readIdxImages(const std::string& path, int64_t limit) {
    const data::IdxArray a = data::readIdxU8(path, 3);
    PredictInputs in;
    in.count = std::min<int64_t>(a.dims[0], limit);
    in.sampleDims = {a.dims[1], a.dims[2]};
    const size_t n = static_cast<size_t>(in.count * a.dims[1] * a.dims[2]);
    in.values.assign(a.data(), a.data() + n);
    return in;
}

// The encoder of a text model (TextEncoder: its tokenizer, vocabulary or SentencePiece model).
TextEncoder encoderOf(const ExportModel& model) {
    const DatasetSettings& ds = model.project.dataset;
    if (ds.kind != DatasetKind::Text || model.vocabulary.empty())
        throw std::invalid_argument("this model does not take text (its dataset is not a text CSV with a vocabulary)");
    return TextEncoder(ds.tokenizer, ds.maxTokens, model.vocabulary, model.tokenizerModel);
}

void appendEncoded(PredictInputs& in, const std::string& text, const TextEncoder& encoder) {
    const std::vector<float> sample = encoder.encode(text);
    in.values.insert(in.values.end(), sample.begin(), sample.end());
    ++in.count;
}

PredictInputs readTextCsv(const std::vector<data::CsvRecord>& rows, const ExportModel& model, int64_t limit) {
    // "label,text" rows like the training file; an optional header row is skipped.
    const TextEncoder encoder = encoderOf(model);
    PredictInputs in;
    in.sampleDims = {model.project.dataset.maxTokens};
    for (const data::CsvRecord& r : rows) {
        if (in.count >= limit) break;
        if (r.line == rows.front().line && r.fields.size() >= 2 && r.fields[0] == "label" && r.fields[1] == "text")
            continue;
        const std::string text = r.fields.size() >= 2 ? r.fields[1] : r.fields[0];
        if (r.fields.size() >= 2) in.labels.push_back(r.fields[0]);
        appendEncoded(in, text, encoder);
    }
    return in;
}

PredictInputs readCsvInputs(const std::string& path, const ExportModel& model, int64_t limit) {
    const std::vector<data::CsvRecord> rows = data::readCsvFile(path);
    if (rows.empty()) throw std::runtime_error(path + ": no rows");
    const DatasetSettings& ds = model.project.dataset;
    if (ds.kind == DatasetKind::Text) return readTextCsv(rows, model, limit);
    const std::vector<std::string>& header = rows.front().fields;
    int labelCol = -1;
    // Regression and multi-label columns are targets, kept apart like a class label (and a regression has no
    // label column).
    const bool targetColumns = ds.task != TaskKind::Classification && !ds.targetColumns.empty();
    std::vector<int> targetIndex(header.size(), -1);
    int targets = 0;
    for (size_t i = 0; i < header.size(); ++i) {
        if (header[i] == ds.labelColumn && ds.task != TaskKind::Regression && !targetColumns)
            labelCol = static_cast<int>(i);
        if (targetColumns)
            for (size_t k = 0; k < ds.targetColumns.size(); ++k)
                if (header[i] == ds.targetColumns[k]) {
                    targetIndex[i] = static_cast<int>(k);
                    ++targets;
                }
    }
    const bool withTargets = targetColumns && targets == static_cast<int>(ds.targetColumns.size());
    if (targetColumns && targets > 0 && !withTargets)
        throw std::runtime_error(path + ": line " + std::to_string(rows.front().line) + ": holds " +
                                 std::to_string(targets) + " of the model's " +
                                 std::to_string(ds.targetColumns.size()) +
                                 " target columns; give all of them (to compare) or none (to predict)");
    PredictInputs in;
    in.sampleDims = {static_cast<int64_t>(header.size()) - (labelCol >= 0 ? 1 : 0) - targets};
    for (size_t r = 1; r < rows.size() && in.count < limit; ++r) {
        const data::CsvRecord& row = rows[r];
        if (row.fields.size() != header.size())
            throw std::runtime_error(path + ": line " + std::to_string(row.line) + ": " +
                                     std::to_string(row.fields.size()) + " fields, the header has " +
                                     std::to_string(header.size()));
        for (size_t c = 0; c < row.fields.size(); ++c) {
            if (static_cast<int>(c) == labelCol) {
                in.labels.push_back(row.fields[c]);
                continue;
            }
            const std::string& f = row.fields[c];
            if (targetIndex[c] >= 0) {
                if (in.targets.size() < static_cast<size_t>((in.count + 1) * targets))
                    in.targets.resize(static_cast<size_t>((in.count + 1) * targets));
                char* end = nullptr;
                const float v = std::strtof(f.c_str(), &end);
                if (f.empty() || end != f.c_str() + f.size())
                    throw std::runtime_error(path + ": line " + std::to_string(row.line) + ": target column '" +
                                             header[c] + "' holds '" + f + "', not a number");
                in.targets[static_cast<size_t>(in.count * targets + targetIndex[c])] = v;
                continue;
            }
            char* end = nullptr;
            const float v = std::strtof(f.c_str(), &end);
            if (f.empty() || end != f.c_str() + f.size())
                throw std::runtime_error(path + ": line " + std::to_string(row.line) + ": column '" + header[c] +
                                         "' holds '" + f + "', not a number");
            in.values.push_back(v);
        }
        ++in.count;
    }
    return in;
}

PredictInputs readImageInputs(const std::string& path, const Shape& inputShape, data::ResizePolicy policy) {
    const std::vector<int64_t>& dims = inputShape.dims();
    data::DecodeHint hint;
    if (dims.size() >= 2) hint = {dims[dims.size() - 2], dims.back(), policy};
    const data::Image image = data::readImageFile(path, hint);
    data::FittedImage fit;
    try {
        fit = data::fitImageToInput(image, inputShape, policy);
    } catch (const std::invalid_argument& e) {
        throw std::runtime_error(path + ": " + e.what());
    }
    PredictInputs in;
    in.count = 1;
    in.sampleDims = inputShape.dims();
    in.values = std::move(fit.values);
    in.notes = std::move(fit.notes);
    return in;
}

}  // namespace

PredictInputs encodeTexts(const std::vector<std::string>& texts, const ExportModel& model) {
    const TextEncoder encoder = encoderOf(model);
    PredictInputs in;
    in.sampleDims = {model.project.dataset.maxTokens};
    for (const std::string& t : texts) appendEncoded(in, t, encoder);
    return in;
}

std::vector<std::string> readTextLines(const std::string& path, int64_t limit) {
    InputStream f(path, kMaxDataFileBytes, "a text file");
    std::vector<std::string> lines;
    std::string line;
    for (int64_t n = 1; static_cast<int64_t>(lines.size()) < limit && std::getline(f, line); ++n) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.find('\0') != std::string::npos)
            throw std::runtime_error(path + ": line " + std::to_string(n) +
                                     " holds a NUL byte; --text-file takes UTF-8 text, one sample a line");
        lines.push_back(std::move(line));
    }
    if (f.bad()) throw std::runtime_error(path + ": read error");
    return lines;
}

bool isIdxImages(const std::string& path) {
    // Checked before zlib opens it: gzopen would wait forever on a FIFO.
    InputFile file(path, kMaxDataFileBytes, "a data file");
    const int fd = file.release();
    gzFile f = gzdopen(fd, "rb");
    if (!f) {
        ::close(fd);
        return false;
    }
    unsigned char b[4] = {};
    const int n = gzread(f, b, 4);
    gzclose(f);
    return n == 4 && b[0] == 0 && b[1] == 0 && b[2] == 0x08 && b[3] == 3;
}

std::vector<std::string> readIdxLabels(const std::string& path, int64_t count) {
    const data::IdxArray a = data::readIdxU8(path, 1);
    if (a.dims[0] < count)
        throw std::runtime_error(path + ": " + std::to_string(a.dims[0]) + " labels for " + std::to_string(count) +
                                 " samples");
    std::vector<std::string> labels;
    for (int64_t i = 0; i < count; ++i) labels.push_back(std::to_string(a.data()[i]));
    return labels;
}

PredictInputs readPredictInputs(const std::string& path, const ExportModel& model, const Shape& inputShape,
                                int64_t limit) {
    if (data::isImageFileName(path))
        return readImageInputs(path, inputShape, data::resizePolicyFor(model.project.dataset));
    if (isIdxImages(path)) return readIdxImages(path, limit);
    return readCsvInputs(path, model, limit);
}

Predictor::Predictor(const std::string& modelPath, PredictRuntime runtime, const WeightLoadOptions& options)
    : m_path(modelPath), m_runtime(runtime), m_runtimeLine("runtime: Strata CPU backend") {
    const bool onnxFile = fs::path(modelPath).extension() == ".onnx";
    if (runtime == PredictRuntime::OpenCv && !onnxFile)
        throw std::invalid_argument("--runtime opencv runs .onnx files; " + modelPath + " is not one");
    m_file = loadModelFile(modelPath, options);
    m_backend = backendRegistry().create(Device::cpu());
    // For inference only: BatchNorm folded into the layer before it (the same outputs, one pass fewer).
    m_model = compileExportModel(foldBatchNorm(m_file), *m_backend);
    const bool int8File = !m_file.int8Activations.empty();
    if (runtime == PredictRuntime::Int8 && !int8File)
        throw std::invalid_argument("--runtime int8 runs int8 ONNX files (strata-train export --quantize int8); " +
                                    modelPath + " is not one");
    if (int8File && (runtime == PredictRuntime::Int8 || runtime == PredictRuntime::Auto)) {
        try {
            m_int8 = std::make_unique<Int8Engine>(m_file, m_file.int8Activations);
            m_runtimeLine =
                "runtime: Strata int8 engine (u8 x s8 VNNI kernels, oneDNN's and Strata's, on the file's integers)";
            if (const std::vector<std::string>& islands = m_int8->floatIslands(); !islands.empty()) {
                constexpr size_t kNamed = 6;
                std::string names;
                for (size_t i = 0; i < islands.size() && i < kNamed; ++i) names += (i ? ", " : "") + islands[i];
                if (islands.size() > kNamed) names += ", ...";
                m_runtimeLine += "; " + std::to_string(islands.size()) + " layer" + (islands.size() == 1 ? "" : "s") +
                                 " in float32 between the grids, as the file has them (" + names + ")";
            }
            return;
        } catch (const std::runtime_error& e) {
            if (runtime == PredictRuntime::Int8) throw std::runtime_error(modelPath + ": " + e.what());
            m_runtimeLine +=
                " in float32 on the file's dequantized weights; not the int8 engine: " + std::string(e.what());
            return;  // OpenCV 4.6 cannot import QDQ graphs
        }
    }
    if (!onnxFile || runtime == PredictRuntime::Strata) return;
    if (runtime == PredictRuntime::OpenCv || onnxRunnerAvailable()) {
        try {
            m_runner = std::make_unique<OnnxRunner>(modelPath, options);
        } catch (const OnnxRunError& e) {
            if (runtime == PredictRuntime::OpenCv) throw;
            m_runtimeLine +=
                " on the file's weights and embedded project; the ONNX graph was not executed: " + onnxRunnerName() +
                " cannot run it (" + e.reason() + ")";
        }
    } else {
        m_runtimeLine +=
            " on the file's weights and embedded project; the ONNX graph was not executed: this build "
            "has no OpenCV DNN (STRATA_OPENCV)";
    }
    if (m_runner) {
        const int64_t per = inputShape().numel();
        if (m_runner->inputSize() != per)
            throw std::runtime_error(modelPath + ": the ONNX graph takes " + std::to_string(m_runner->inputSize()) +
                                     " values per sample, the project's model " + std::to_string(per));
        m_runtimeLine = "runtime: " + onnxRunnerName() + " (ran the ONNX graph)";
    }
}

Predictor::~Predictor() = default;

const Shape& Predictor::inputShape() const { return m_model->inputShape(); }
const Shape& Predictor::outputShape() const { return m_model->outputShape(); }
int Predictor::classes() const { return static_cast<int>(m_model->outputShape().numel()); }

std::string Predictor::className(size_t k) const {
    const std::vector<std::string>& names = m_file.classNames;
    return k < names.size() && !names[k].empty() ? names[k] : "class " + std::to_string(k);
}

bool Predictor::labelIsClass(const std::string& label, size_t k) const {
    return label == std::to_string(k) || (k < m_file.classNames.size() && label == m_file.classNames[k]);
}

std::vector<float> Predictor::regressionValues(const Predictions& p) const {
    std::vector<float> v = p.outputs;
    undoNormalization(v, m_file.targetNormalization);
    return v;
}

std::vector<float> Predictor::labelProbabilities(const Predictions& p) {
    std::vector<float> v(p.outputs.size());
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(1.0 / (1.0 + std::exp(-double(p.outputs[i]))));
    return v;
}

Predictions Predictor::run(std::vector<float> raw, int64_t count, int batchSize) {
    const int64_t per = inputShape().numel();
    if (count < 0 || static_cast<int64_t>(raw.size()) != count * per)
        throw std::invalid_argument("Predictor::run: " + std::to_string(raw.size()) + " values for " +
                                    std::to_string(count) + " samples of " + std::to_string(per));
    // An ONNX graph that normalizes its input itself takes the raw values.
    std::vector<float> onnxInputs;
    if (m_runner && m_runner->normalizationInGraph()) onnxInputs = raw;
    applyNormalization(raw, m_file.normalization);
    if (m_int8)
        return predictionsFromOutputs(m_int8->run(raw.data(), count, batchSize), count,
                                      static_cast<int>(m_model->outputShape().numel()),
                                      graphEndsInSoftmax(m_file.project.graph));
    if (m_runner) {
        const std::vector<float>& x = m_runner->normalizationInGraph() ? onnxInputs : raw;
        std::vector<float> outputs;
        try {
            outputs = m_runner->run(x.data(), count, batchSize);
        } catch (const OnnxRunError& e) {
            if (m_runtime == PredictRuntime::OpenCv) throw;
            m_runner.reset();
            m_runtimeLine =
                "runtime: Strata CPU backend on the file's weights and embedded project; the ONNX graph "
                "was not executed: " +
                onnxRunnerName() + " failed to run it (" + e.reason() + ")";
        }
        if (m_runner) {
            const int64_t classes = m_model->outputShape().numel();
            if (static_cast<int64_t>(outputs.size()) != count * classes)
                throw std::runtime_error(m_path + ": the ONNX graph gives " + std::to_string(outputs.size()) +
                                         " values for " + std::to_string(count) + " samples, the project's model " +
                                         m_model->outputShape().toString() + " per sample");
            return predictionsFromOutputs(std::move(outputs), count, static_cast<int>(classes),
                                          graphEndsInSoftmax(m_file.project.graph));
        }
    }
    return predictSamples(*m_model, raw.data(), count, batchSize);
}

}  // namespace strata
