#include "core/export/ExportCommands.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <zlib.h>

#include "core/backend/BackendRegistry.h"
#include "core/data/CsvReader.h"
#include "core/data/Dataset.h"
#include "core/data/IdxReader.h"
#include "core/data/PngReader.h"
#include "core/export/ExportModel.h"
#include "core/export/Gguf.h"
#include "core/export/Onnx.h"
#include "core/export/OnnxRunner.h"
#include "core/export/Safetensors.h"
#include "core/graph/Model.h"
#include "core/train/Evaluation.h"

namespace strata {

namespace {

namespace fs = std::filesystem;

class UsageError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

const char* kExportUsage =
    "usage: strata-train export PROJECT_OR_CHECKPOINT --format onnx|gguf|safetensors [--quantize q8_0|f16]\n"
    "                           [--opset N] [--no-normalization] [--untrained] -o FILE\n";
const char* kPredictUsage =
    "usage: strata-train predict MODEL_FILE INPUT [--top K] [--count N] [--labels IDX_LABELS] [--quiet]\n"
    "                            [--runtime strata|opencv]\n";

int parseInt(const std::string& flag, const std::string& text, int min, int max) {
    size_t used = 0;
    int v = 0;
    try {
        v = std::stoi(text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != text.size() || v < min || v > max)
        throw UsageError(flag + ": '" + text + "' is not a whole number from " + std::to_string(min) + " to " +
                         std::to_string(max));
    return v;
}

bool looksLikeProjectFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    char c = 0;
    while (in.get(c))
        if (!std::isspace(static_cast<unsigned char>(c))) return c == '{';
    return false;
}

// A project file: the best checkpoint of its checkpoint folder, or with --untrained its initial weights.
ExportModel modelFromProject(const std::string& path, bool untrained, std::ostream& out) {
    const Project project = readProject(path);
    if (!untrained) {
        if (project.training.checkpointDir.empty())
            throw std::runtime_error(path + ": the project names no checkpoint folder (training.checkpointDir); "
                                            "pass a checkpoint, or --untrained to export the initial weights");
        const std::string dir = resolveDatasetPath(path, project.training.checkpointDir);
        const std::string file = resolveCheckpointPath(dir);
        out << "using checkpoint " << file << "\n";
        return exportModelFromCheckpoint(loadCheckpoint(file));
    }
    ExportModel m;
    m.project = project;
    auto backend = backendRegistry().create(Device::cpu(), 1);
    auto model = compile(project.graph, *backend, project.training.seed);
    m.weights = modelWeights(*model);
    const DatasetBundle data = loadDataset(project.dataset, path);
    m.normalization = checkpointNormalizationOf(data.normalization);
    m.classNames = data.classNames;
    m.vocabulary = data.vocabulary;
    out << "exporting untrained weights (seed " << project.training.seed << ")\n";
    return m;
}

int exportCommand(const std::vector<std::string>& args, std::ostream& out) {
    std::string source, format, output, quantize = "f32";
    int opset = kOnnxDefaultOpset;
    bool untrained = false, normalization = true;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto value = [&]() -> const std::string& {
            if (i + 1 >= args.size()) throw UsageError(a + " needs a value");
            return args[++i];
        };
        if (a == "--format") format = value();
        else if (a == "--quantize") quantize = value();
        else if (a == "--opset") opset = parseInt(a, value(), kOnnxMinOpset, kOnnxMaxOpset);
        else if (a == "-o" || a == "--output") output = value();
        else if (a == "--untrained") untrained = true;
        else if (a == "--no-normalization") normalization = false;
        else if (!a.empty() && a[0] == '-') throw UsageError("unknown option " + a);
        else if (source.empty()) source = a;
        else throw UsageError("unexpected argument '" + a + "'");
    }
    if (source.empty()) throw UsageError("no project or checkpoint given");
    if (output.empty()) throw UsageError("no output file given (-o FILE)");
    if (format != "onnx" && format != "gguf" && format != "safetensors")
        throw UsageError(format.empty() ? "no --format given" : "unknown format '" + format + "'");
    ExportPrecision precision;
    try {
        precision = parseExportPrecision(quantize);
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--quantize: ") + e.what());
    }
    if (format == "onnx" && precision != ExportPrecision::F32)
        throw UsageError("--quantize applies to gguf and safetensors; ONNX exports are float32");
    if (format == "safetensors" && precision == ExportPrecision::Q8_0)
        throw UsageError("--quantize q8_0 needs --format gguf (safetensors has no Q8_0 type); f16 works");
    if (!normalization && format != "onnx") throw UsageError("--no-normalization applies to onnx only");

    ExportModel model;
    std::error_code ec;
    if (!fs::is_directory(source, ec) && looksLikeProjectFile(source)) model = modelFromProject(source, untrained, out);
    else if (untrained) throw UsageError("--untrained needs a project file");
    else model = exportModelFromCheckpoint(loadCheckpoint(source));

    if (format == "onnx") {
        OnnxExportOptions o;
        o.opset = opset;
        o.includeNormalization = normalization;
        writeOnnx(output, model, o);
        const OnnxModelInfo info = readOnnx(output);
        out << "wrote " << output << " (ONNX opset " << opset << ", " << info.nodes.size() << " nodes, "
            << info.initializers.size() << " initializers, input '" << info.inputName << "', output '"
            << info.outputName << "', " << fs::file_size(output) << " bytes)\n";
        return 0;
    }
    const ExportSummary summary = format == "gguf" ? writeGgufExport(output, model, precision)
                                                   : writeSafetensorsExport(output, model, precision);
    out << "wrote " << output << " (" << format << ", " << summary.bytes << " bytes)\n";
    for (const std::string& line : summary.tensors) out << "  " << line << "\n";
    for (const ExportParameter& p : summary.fallbacks)
        out << "note: " << p.name << " " << p.shape.toString() << " stored as F16, not Q8_0: its innermost dimension "
            << p.shape.dims().back() << " is not a multiple of " << kQ8BlockSize << " (Q8_0 blocks run along it)\n";
    if (!summary.fallbacks.empty())
        out << "note: " << summary.fallbacks.size() << " tensor(s) fell back from Q8_0 to F16 (as llama.cpp does)\n";
    return 0;
}

// ---- predict ----

// Samples per forward pass: bounds the activations (a CNN on 10,000 images at once would need gigabytes).
constexpr int64_t kPredictBatch = 256;

PredictInputs readIdxImages(const std::string& path, int64_t limit) {
    const data::IdxArray a = data::readIdxU8(path, 3);
    PredictInputs in;
    in.count = std::min<int64_t>(a.dims[0], limit);
    in.sampleDims = {a.dims[1], a.dims[2]};
    const size_t n = static_cast<size_t>(in.count * a.dims[1] * a.dims[2]);
    in.values.assign(a.data(), a.data() + n);
    return in;
}

// IDX labels (u8 class indices, as Fashion-MNIST's *-labels-idx1-ubyte) for the first `count` samples.
std::vector<std::string> readIdxLabels(const std::string& path, int64_t count) {
    const data::IdxArray a = data::readIdxU8(path, 1);
    if (a.dims[0] < count)
        throw std::runtime_error(path + ": " + std::to_string(a.dims[0]) + " labels for " + std::to_string(count) +
                                 " samples");
    std::vector<std::string> labels;
    for (int64_t i = 0; i < count; ++i) labels.push_back(std::to_string(a.data()[i]));
    return labels;
}

// The first four bytes (gzip undone by zlib's gzread, which also reads plain files) against the IDX u8 rank-3 magic.
bool isIdxImages(const std::string& path) {
    gzFile f = gzopen(path.c_str(), "rb");
    if (!f) return false;
    unsigned char b[4] = {};
    const int n = gzread(f, b, 4);
    gzclose(f);
    return n == 4 && b[0] == 0 && b[1] == 0 && b[2] == 0x08 && b[3] == 3;
}

PredictInputs readCsvInputs(const std::string& path, const Project& project, const std::vector<std::string>& vocab,
                            int64_t limit) {
    const std::vector<data::CsvRecord> rows = data::readCsvFile(path);
    if (rows.empty()) throw std::runtime_error(path + ": no rows");
    const DatasetSettings& ds = project.dataset;
    PredictInputs in;
    if (ds.kind == DatasetKind::Text) {
        // "label,text" rows like the training file; an optional header row is skipped.
        std::map<std::string, int32_t> ids;
        for (size_t i = 0; i < vocab.size(); ++i) ids[vocab[i]] = static_cast<int32_t>(i);
        in.sampleDims = {ds.maxTokens};
        for (const data::CsvRecord& r : rows) {
            if (in.count >= limit) break;
            if (r.line == rows.front().line && r.fields.size() >= 2 && r.fields[0] == "label" && r.fields[1] == "text")
                continue;
            const std::string text = r.fields.size() >= 2 ? r.fields[1] : r.fields[0];
            if (r.fields.size() >= 2) in.labels.push_back(r.fields[0]);
            std::vector<float> sample(static_cast<size_t>(ds.maxTokens), 0.f);
            const std::vector<std::string> toks = tokenizeText(text, ds.tokenizer);
            for (size_t k = 0; k < toks.size() && k < sample.size(); ++k) {
                auto it = ids.find(toks[k]);
                sample[k] = it == ids.end() ? 1.f : static_cast<float>(it->second);
            }
            in.values.insert(in.values.end(), sample.begin(), sample.end());
            ++in.count;
        }
        return in;
    }
    const std::vector<std::string>& header = rows.front().fields;
    int labelCol = -1;
    for (size_t i = 0; i < header.size(); ++i)
        if (header[i] == ds.labelColumn) labelCol = static_cast<int>(i);
    in.sampleDims = {static_cast<int64_t>(header.size()) - (labelCol >= 0 ? 1 : 0)};
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

// One image ([C, H, W], 0..255) fitted to the model's channels: RGB becomes gray by its luma (ITU-R BT.601
// weights, what image libraries call grayscale) for a one-channel model, gray is repeated for a three-channel
// one. A different width or height is an error: resizing would silently change what the model sees.
PredictInputs fitImage(PredictInputs in, const Shape& inShape, const std::string& path, std::ostream& out) {
    const int64_t c = in.sampleDims[0], h = in.sampleDims[1], w = in.sampleDims[2];
    const std::vector<int64_t>& dims = inShape.dims();
    int64_t wantC = 1, wantH = 0, wantW = 0;
    if (dims.size() == 3) {
        wantC = dims[0];
        wantH = dims[1];
        wantW = dims[2];
    } else if (dims.size() == 2) {
        wantH = dims[0];
        wantW = dims[1];
    } else {
        throw std::runtime_error(path + ": an image, but the model input is " + inShape.toString() +
                                 ", not [H, W] or [C, H, W]");
    }
    if (h != wantH || w != wantW)
        throw std::runtime_error(path + ": the image is " + std::to_string(w) + "x" + std::to_string(h) +
                                 " (width x height), the model takes " + std::to_string(wantW) + "x" +
                                 std::to_string(wantH) + "; resize it first");
    const size_t hw = static_cast<size_t>(h * w);
    if (c == 3 && wantC == 1) {
        std::vector<float> gray(hw);
        for (size_t i = 0; i < hw; ++i)
            gray[i] = 0.299f * in.values[i] + 0.587f * in.values[hw + i] + 0.114f * in.values[2 * hw + i];
        in.values = std::move(gray);
        out << "converted the RGB image to gray (luma 0.299 R + 0.587 G + 0.114 B): the model takes 1 channel\n";
    } else if (c == 1 && wantC == 3) {
        in.values.resize(3 * hw);
        std::copy(in.values.begin(), in.values.begin() + static_cast<long>(hw), in.values.begin() + static_cast<long>(hw));
        std::copy(in.values.begin(), in.values.begin() + static_cast<long>(hw),
                  in.values.begin() + static_cast<long>(2 * hw));
        out << "repeated the gray image in 3 channels: the model takes RGB\n";
    } else if (c != wantC) {
        throw std::runtime_error(path + ": the image has " + std::to_string(c) + " channel(s), the model takes " +
                                 std::to_string(wantC));
    }
    in.sampleDims = dims.size() == 3 ? std::vector<int64_t>{wantC, h, w} : std::vector<int64_t>{h, w};
    return in;
}

std::string className(const ExportModel& m, size_t k) {
    return k < m.classNames.size() && !m.classNames[k].empty() ? m.classNames[k] : "class " + std::to_string(k);
}

// A label from the input file names class k when it is k's name or its index (IDX labels, integer CSV labels).
bool labelIsClass(const ExportModel& m, const std::string& label, size_t k) {
    return label == std::to_string(k) || (k < m.classNames.size() && label == m.classNames[k]);
}

int predictCommand(const std::vector<std::string>& args, std::ostream& out) {
    std::string modelPath, inputPath, labelsPath;
    std::string runtime;  // "strata", "opencv", or empty: OpenCV for .onnx files when this build has it
    int top = 3, count = 5;
    bool quiet = false;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto value = [&]() -> const std::string& {
            if (i + 1 >= args.size()) throw UsageError(a + " needs a value");
            return args[++i];
        };
        if (a == "--top") top = parseInt(a, value(), 1, 1000000);
        else if (a == "--count") count = parseInt(a, value(), 1, 100000000);
        else if (a == "--labels") labelsPath = value();
        else if (a == "--quiet") quiet = true;
        else if (a == "--runtime") runtime = value();
        else if (!a.empty() && a[0] == '-') throw UsageError("unknown option " + a);
        else if (modelPath.empty()) modelPath = a;
        else if (inputPath.empty()) inputPath = a;
        else throw UsageError("unexpected argument '" + a + "'");
    }
    if (modelPath.empty() || inputPath.empty()) throw UsageError("predict needs MODEL_FILE and INPUT");
    if (!runtime.empty() && runtime != "strata" && runtime != "opencv")
        throw UsageError("--runtime: '" + runtime + "' is not strata or opencv");
    const bool onnxFile = fs::path(modelPath).extension() == ".onnx";
    if (runtime == "opencv" && !onnxFile)
        throw UsageError("--runtime opencv runs .onnx files; " + modelPath + " is not one");

    const ExportModel m = loadModelFile(modelPath);
    auto backend = backendRegistry().create(Device::cpu(), 0);
    auto model = compile(m.project.graph, *backend, 0);
    applyWeights(*model, m.weights);
    const Shape& inShape = model->inputShape();

    PredictInputs in;
    std::string ext = fs::path(inputPath).extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
    if (ext == ".pgm" || ext == ".ppm" || ext == ".pnm") {
        in = fitImage(readNetpbm(inputPath), inShape, inputPath, out);
    } else if (ext == ".png") {
        in = fitImage(readPngInputs(inputPath), inShape, inputPath, out);
    } else if (isIdxImages(inputPath)) {
        in = readIdxImages(inputPath, count);
    } else {
        in = readCsvInputs(inputPath, m.project, m.vocabulary, count);
    }
    if (!labelsPath.empty()) {
        if (!in.labels.empty()) throw UsageError("--labels: " + inputPath + " holds its own labels");
        in.labels = readIdxLabels(labelsPath, in.count);
    }
    const int64_t per = std::accumulate(in.sampleDims.begin(), in.sampleDims.end(), int64_t{1}, std::multiplies<>());
    if (per != inShape.numel())
        throw std::runtime_error(inputPath + ": samples of shape " + Shape(in.sampleDims).toString() + " (" +
                                 std::to_string(per) + " values) do not fit the model input " + inShape.toString());
    if (in.count == 0) throw std::runtime_error(inputPath + ": no samples");

    // An ONNX file runs in OpenCV DNN: asked for, or by default when this build has it. Asked for, a failure is an
    // error; by default, the Strata CPU backend runs the file's weights instead and the output says why.
    std::unique_ptr<OnnxRunner> runner;
    std::string runtimeLine = "runtime: Strata CPU backend";
    if (onnxFile && runtime != "strata") {
        if (runtime == "opencv" || onnxRunnerAvailable()) {
            try {
                runner = std::make_unique<OnnxRunner>(modelPath);
            } catch (const OnnxRunError& e) {
                if (runtime == "opencv") throw;
                runtimeLine += " on the file's weights and embedded project; the ONNX graph was not executed: " +
                               onnxRunnerName() + " cannot run it (" + e.reason() + ")";
            }
        } else {
            runtimeLine += " on the file's weights and embedded project; the ONNX graph was not executed: this build "
                           "has no OpenCV DNN (STRATA_OPENCV)";
        }
    }
    if (runner) {
        if (runner->inputSize() != per)
            throw std::runtime_error(modelPath + ": the ONNX graph takes " + std::to_string(runner->inputSize()) +
                                     " values per sample, the project's model " + std::to_string(per));
        runtimeLine = "runtime: " + onnxRunnerName() + " (ran the ONNX graph)";
    }
    // The raw values, for an ONNX graph that normalizes its input itself.
    std::vector<float> raw;
    if (runner && runner->normalizationInGraph()) raw = in.values;
    applyNormalization(in.values, m.normalization);
    std::vector<float> onnxOutputs;
    if (runner) {
        const std::vector<float>& x = runner->normalizationInGraph() ? raw : in.values;
        try {
            onnxOutputs = runner->run(x.data(), in.count, kPredictBatch);
        } catch (const OnnxRunError& e) {
            if (runtime == "opencv") throw;
            runner.reset();
            runtimeLine = "runtime: Strata CPU backend on the file's weights and embedded project; the ONNX graph was "
                          "not executed: " + onnxRunnerName() + " failed to run it (" + e.reason() + ")";
        }
    }
    if (runner && static_cast<int64_t>(onnxOutputs.size()) != in.count * model->outputShape().numel())
        throw std::runtime_error(modelPath + ": the ONNX graph gives " + std::to_string(onnxOutputs.size()) +
                                 " values for " + std::to_string(in.count) + " samples, the project's model " +
                                 model->outputShape().toString() + " per sample");

    // The output node's type says whether the model already ends in a softmax.
    bool endsInSoftmax = false;
    for (const Node* n : m.project.graph.nodes())
        if (m.project.graph.edgesFrom(n->id).empty() && n->type == "Softmax") endsInSoftmax = true;
    const size_t classes = static_cast<size_t>(model->outputShape().numel());

    out << "model " << modelPath << " (" << m.project.name << "), input " << inputPath << ": " << in.count
        << " sample(s)\n";
    out << runtimeLine << "\n";
    int64_t labelled = 0, correct = 0;
    std::vector<float> logits;
    for (int64_t first = 0; first < in.count; first += kPredictBatch) {
        const int64_t n = std::min(kPredictBatch, in.count - first);
        if (runner) {
            const auto from = onnxOutputs.begin() + first * static_cast<int64_t>(classes);
            logits.assign(from, from + n * static_cast<int64_t>(classes));
        } else {
            const Tensor x = backend->fromHost(inShape.withBatch(n), in.values.data() + first * per);
            const Tensor& y = model->forward(x, false);
            logits.resize(static_cast<size_t>(y.numel()));
            backend->toHost(y, logits.data());
        }
        for (int64_t b = 0; b < n; ++b) {
            const int64_t s = first + b;
            std::vector<double> p(classes);
            const float* row = logits.data() + b * static_cast<int64_t>(classes);
            if (endsInSoftmax) {
                for (size_t k = 0; k < classes; ++k) p[k] = row[k];
            } else {
                const double mx = *std::max_element(row, row + classes);
                double sum = 0;
                for (size_t k = 0; k < classes; ++k) sum += p[k] = std::exp(double(row[k]) - mx);
                for (double& v : p) v /= sum;
            }
            std::vector<size_t> idx(classes);
            std::iota(idx.begin(), idx.end(), size_t{0});
            const size_t k = std::min<size_t>(static_cast<size_t>(top), classes);
            std::partial_sort(idx.begin(), idx.begin() + static_cast<long>(k), idx.end(),
                              [&](size_t a, size_t c) { return p[a] > p[c]; });
            const bool hasLabel = static_cast<size_t>(s) < in.labels.size();
            if (hasLabel) {
                ++labelled;
                // Ties go to the lower class index, as an argmax would.
                const size_t best = static_cast<size_t>(std::max_element(p.begin(), p.end()) - p.begin());
                if (labelIsClass(m, in.labels[static_cast<size_t>(s)], best)) ++correct;
            }
            if (quiet) continue;
            out << "sample " << s;
            if (hasLabel) out << " (label " << in.labels[static_cast<size_t>(s)] << ")";
            out << ":";
            for (size_t j = 0; j < k; ++j)
                out << (j ? ", " : " ") << className(m, idx[j]) << " " << std::fixed << std::setprecision(4)
                    << p[idx[j]];
            out << "\n";
        }
    }
    if (labelled > 0)
        out << "accuracy " << std::fixed << std::setprecision(2) << 100.0 * double(correct) / double(labelled)
            << "% on " << labelled << " samples (" << correct << " correct)\n";
    return 0;
}

}  // namespace

PredictInputs readPngInputs(const std::string& path) {
    data::PngImage img = data::readPng(path);
    PredictInputs in;
    in.count = 1;
    in.sampleDims = {img.channels, img.height, img.width};
    in.values = std::move(img.values);
    return in;
}

PredictInputs readNetpbm(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw FormatError(path, "cannot open file for reading");
    const std::vector<uint8_t> b((std::istreambuf_iterator<char>(f)), {});
    size_t pos = 0;
    auto skipSpace = [&] {
        while (pos < b.size()) {
            if (b[pos] == '#') {
                while (pos < b.size() && b[pos] != '\n') ++pos;
            } else if (std::isspace(b[pos])) {
                ++pos;
            } else {
                break;
            }
        }
    };
    auto number = [&](const char* what) -> int64_t {
        skipSpace();
        const size_t at = pos;
        int64_t v = 0;
        while (pos < b.size() && std::isdigit(b[pos])) {
            v = v * 10 + (b[pos++] - '0');
            if (v > (1 << 24)) throw FormatError(path, static_cast<int64_t>(at), std::string(what) + " is too large");
        }
        if (pos == at) throw FormatError(path, static_cast<int64_t>(at), std::string("expected ") + what);
        return v;
    };
    if (b.size() < 2 || b[0] != 'P' || (b[1] != '2' && b[1] != '3' && b[1] != '5' && b[1] != '6'))
        throw FormatError(path, 0, "not a PGM or PPM image (magic P2, P3, P5 or P6)");
    const bool ascii = b[1] == '2' || b[1] == '3';
    const int64_t channels = (b[1] == '3' || b[1] == '6') ? 3 : 1;
    pos = 2;
    const int64_t w = number("the width"), h = number("the height"), maxval = number("the maximum value");
    if (w < 1 || h < 1) throw FormatError(path, static_cast<int64_t>(pos), "zero width or height");
    if (maxval < 1 || maxval > 65535) throw FormatError(path, static_cast<int64_t>(pos), "maximum value out of 1..65535");
    const size_t n = static_cast<size_t>(w * h * channels);
    std::vector<float> interleaved(n);
    if (ascii) {
        for (size_t i = 0; i < n; ++i) interleaved[i] = static_cast<float>(number("a sample value"));
    } else {
        if (pos >= b.size() || !std::isspace(b[pos]))
            throw FormatError(path, static_cast<int64_t>(pos), "expected one whitespace byte before the pixels");
        ++pos;
        const size_t bytesPer = maxval > 255 ? 2 : 1;
        if (b.size() - pos < n * bytesPer)
            throw FormatError(path, static_cast<int64_t>(pos),
                              "pixel data is " + std::to_string(b.size() - pos) + " bytes, " +
                                  std::to_string(w) + "x" + std::to_string(h) + " needs " + std::to_string(n * bytesPer));
        for (size_t i = 0; i < n; ++i)
            interleaved[i] = bytesPer == 1 ? b[pos + i] : static_cast<float>((b[pos + 2 * i] << 8) | b[pos + 2 * i + 1]);
    }
    for (float v : interleaved)
        if (v > static_cast<float>(maxval)) throw FormatError(path, "a sample exceeds the maximum value");
    PredictInputs in;
    in.count = 1;
    in.sampleDims = {channels, h, w};
    in.values.resize(n);
    const float toByte = maxval == 255 ? 1.f : 255.f / static_cast<float>(maxval);
    // Interleaved RGB to planar CHW.
    for (int64_t c = 0; c < channels; ++c)
        for (int64_t i = 0; i < w * h; ++i)
            in.values[static_cast<size_t>(c * w * h + i)] = interleaved[static_cast<size_t>(i * channels + c)] * toByte;
    return in;
}

int runExportCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
    try {
        return exportCommand(args, out);
    } catch (const UsageError& e) {
        err << "strata-train export: " << e.what() << "\n" << kExportUsage;
        return 2;
    } catch (const std::exception& e) {
        err << "strata-train export: " << e.what() << "\n";
        return 1;
    }
}

int runPredictCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
    try {
        return predictCommand(args, out);
    } catch (const UsageError& e) {
        err << "strata-train predict: " << e.what() << "\n" << kPredictUsage;
        return 2;
    } catch (const std::exception& e) {
        err << "strata-train predict: " << e.what() << "\n";
        return 1;
    }
}

}  // namespace strata
