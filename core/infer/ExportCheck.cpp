#include "core/infer/ExportCheck.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <stdexcept>

#include "core/backend/BackendRegistry.h"
#include "core/data/Dataset.h"
#include "core/export/Gguf.h"
#include "core/export/Onnx.h"
#include "core/graph/Model.h"
#include "core/graph/Task.h"
#include "core/infer/Evaluation.h"
#include "core/infer/Int8Engine.h"
#include "core/infer/OnnxRunner.h"
#include "core/train/TaskMetrics.h"

namespace strata {

namespace {

namespace fs = std::filesystem;

uint64_t sizeOf(const std::string& path) {
    std::error_code ec;
    const auto n = fs::file_size(path, ec);
    return ec ? 0 : static_cast<uint64_t>(n);
}

std::string methodText(ExportFormat format, const std::string& path) {
    const std::string name = fs::path(path).filename().string();
    switch (format) {
        case ExportFormat::Onnx:
            return "the initializers and embedded project of " + name +
                   " were rebuilt into a Strata model on the CPU "
                   "backend; the file's normalization metadata was applied to the raw inputs.";
        case ExportFormat::Gguf:
            return name +
                   " was read back with the GGUF reader (F16, Q8_0 and Q4_0 tensors dequantized), compiled from its "
                   "embedded project and run on the CPU backend with its stored normalization.";
        case ExportFormat::Safetensors:
            return name +
                   " was read back with the safetensors reader (F16 tensors widened), compiled from its embedded "
                   "project and run on the CPU backend with its stored normalization.";
    }
    return {};
}

std::string onnxRanText(const std::string& path, bool normalizationInGraph) {
    return "ran the ONNX graph in " + onnxRunnerName() +
           " (an ONNX runtime Strata did not write): " + fs::path(path).filename().string() +
           " was imported by OpenCV and run on the raw inputs" +
           (normalizationInGraph ? ", the dataset normalization inside the graph."
                                 : " normalized with the file's stored normalization (the graph has none).");
}

// Stated, not silent: the fallback names what could not run and why.
std::string onnxFallbackText(const std::string& path, const std::string& reason) {
    const std::string why = onnxRunnerAvailable() ? onnxRunnerName() + " cannot run " +
                                                        fs::path(path).filename().string() + " (" + reason + ")"
                                                  : reason;
    return "the ONNX graph was NOT executed: " + why + ". Instead, as Strata has no ONNX runtime of its own, " +
           methodText(ExportFormat::Onnx, path);
}

std::string onnxInt8FallbackText(const std::string& path, const std::string& reason, size_t tensors) {
    const std::string why = onnxRunnerAvailable() ? onnxRunnerName() + " cannot run " +
                                                        fs::path(path).filename().string() + " (" + reason + ")"
                                                  : reason;
    return "the int8 ONNX graph was NOT executed by an ONNX runtime: " + why +
           ". Instead Strata simulated it on the CPU backend: the file's int8 weights and int32 biases dequantized, "
           "and the " +
           std::to_string(tensors) +
           " activations it quantizes rounded to their uint8 scale and zero point after each layer, which is "
           "what onnxruntime's integer kernels compute up to rounding ties.";
}

ExportFormat formatOfFile(const std::string& path) {
    const std::string ext = fs::path(path).extension().string();
    if (ext == ".onnx") return ExportFormat::Onnx;
    if (ext == ".gguf") return ExportFormat::Gguf;
    return ExportFormat::Safetensors;
}

}  // namespace

const std::vector<ExportFormat>& exportFormats() {
    static const std::vector<ExportFormat> all{ExportFormat::Onnx, ExportFormat::Gguf, ExportFormat::Safetensors};
    return all;
}

const std::vector<ExportPrecision>& exportPrecisions() {
    static const std::vector<ExportPrecision> all{ExportPrecision::F32, ExportPrecision::F16, ExportPrecision::Q8_0,
                                                  ExportPrecision::Q4_0, ExportPrecision::Int8};
    return all;
}

const char* exportFormatName(ExportFormat format) {
    switch (format) {
        case ExportFormat::Onnx: return "ONNX";
        case ExportFormat::Gguf: return "GGUF";
        case ExportFormat::Safetensors: return "safetensors";
    }
    return "?";
}

const char* exportFormatExtension(ExportFormat format) {
    switch (format) {
        case ExportFormat::Onnx: return ".onnx";
        case ExportFormat::Gguf: return ".gguf";
        case ExportFormat::Safetensors: return ".safetensors";
    }
    return "";
}

const char* exportPrecisionName(ExportPrecision precision) {
    switch (precision) {
        case ExportPrecision::F32: return "F32";
        case ExportPrecision::F16: return "F16";
        case ExportPrecision::Q8_0: return "Q8_0";
        case ExportPrecision::Q4_0: return "Q4_0";
        case ExportPrecision::Int8: return "int8";
    }
    return "?";
}

bool exportFormatSupports(ExportFormat format, ExportPrecision precision) {
    switch (format) {
        case ExportFormat::Onnx: return precision == ExportPrecision::F32 || precision == ExportPrecision::Int8;
        case ExportFormat::Safetensors: return precision == ExportPrecision::F32 || precision == ExportPrecision::F16;
        case ExportFormat::Gguf: return precision != ExportPrecision::Int8;
    }
    return false;
}

ExportWriteResult writeExport(const std::string& path, const ExportModel& model, const ExportRequest& request,
                              const DataSplit* calibration, const QuantizationOptions& quantization) {
    if (!exportFormatSupports(request.format, request.precision))
        throw std::invalid_argument(std::string(exportFormatName(request.format)) + " exports have no " +
                                    exportPrecisionName(request.precision) + " tensors");
    ExportWriteResult r;
    switch (request.format) {
        case ExportFormat::Onnx: {
            if (request.opset < kOnnxMinOpset || request.opset > kOnnxMaxOpset)
                throw std::invalid_argument("ONNX opset " + std::to_string(request.opset) + " is outside " +
                                            std::to_string(kOnnxMinOpset) + ".." + std::to_string(kOnnxMaxOpset));
            OnnxExportOptions o;
            o.opset = request.opset;
            Int8Export int8;
            if (request.precision == ExportPrecision::Int8) {
                if (!calibration || calibration->count == 0)
                    throw std::invalid_argument("int8 quantization needs training samples to calibrate on");
                int8 = prepareInt8Export(model, *calibration, quantization);
                o.int8 = &int8.calibration;
                r.folded = int8.folded;
            }
            writeOnnx(path, request.precision == ExportPrecision::Int8 ? int8.model : model, o);
            // The writer gives no summary; read the file back for one, which also proves it parses.
            const OnnxModelInfo info = readOnnx(path);
            for (const TensorRecord& t : info.initializers)
                r.summary.tensors.push_back(t.name + " " + t.shape.toString() + " F32");
            for (const auto& [name, t] : info.integerInitializers)
                r.summary.tensors.push_back(name + " " + Shape(t.dims).toString() + " " + t.type);
            r.summary.bytes = sizeOf(path);
            return r;
        }
        case ExportFormat::Gguf: r.summary = writeGgufExport(path, model, request.precision); break;
        case ExportFormat::Safetensors: r.summary = writeSafetensorsExport(path, model, request.precision); break;
    }
    return r;
}

std::unique_ptr<Model> compileExportModel(const ExportModel& model, Backend& backend) {
    auto m = compile(model.project.graph, backend, 0);
    applyWeights(*m, model.weights);
    m->freezeWeights();
    return m;
}

ExportCheckResult checkExport(const ExportModel& live, const std::string& exportedPath, const DataSplit& data,
                              const Normalization& dataNormalization, int64_t limit, const WeightLoadOptions& options) {
    ExportCheckResult r;
    r.path = exportedPath;
    const ExportFormat format = formatOfFile(exportedPath);
    const ExportModel loaded = loadModelFile(exportedPath, options);

    auto backend = backendRegistry().create(Device::cpu());
    auto liveModel = compileExportModel(live, *backend);
    auto fileModel = compileExportModel(loaded, *backend);
    if (fileModel->inputShape() != liveModel->inputShape() || fileModel->outputShape() != liveModel->outputShape())
        throw std::runtime_error(exportedPath + ": the file's model maps " + fileModel->inputShape().toString() +
                                 " to " + fileModel->outputShape().toString() + ", the live model " +
                                 liveModel->inputShape().toString() + " to " + liveModel->outputShape().toString());

    const int64_t count = std::min<int64_t>(limit > 0 ? limit : data.count, data.count);
    if (count == 0) throw std::runtime_error("no samples to check the export on");
    const int64_t per = data.sampleShape.numel();
    const std::vector<float> liveInputs(data.inputs.begin(), data.inputs.begin() + count * per);
    std::vector<float> rawInputs = liveInputs;
    undoNormalization(rawInputs, dataNormalization);

    const Predictions a = predictSamples(*liveModel, liveInputs.data(), count);
    std::vector<float> fileOutputs;
    if (format == ExportFormat::Onnx) {
        try {
            OnnxRunner runner(exportedPath, options);
            if (runner.inputSize() != per)
                throw std::runtime_error(exportedPath + ": the ONNX graph takes " + std::to_string(runner.inputSize()) +
                                         " values per sample, the data has " + std::to_string(per));
            std::vector<float> inputs = rawInputs;
            if (!runner.normalizationInGraph()) applyNormalization(inputs, loaded.normalization);
            fileOutputs = runner.run(inputs.data(), count);
            r.method = onnxRanText(exportedPath, runner.normalizationInGraph());
            r.runtime = onnxRunnerName();
        } catch (const OnnxRunError& e) {
            r.fallbackReason = e.reason();
        }
    }
    if (r.runtime.empty()) {
        std::vector<float> fileInputs = rawInputs;
        applyNormalization(fileInputs, loaded.normalization);
        if (!loaded.int8Activations.empty()) {
            const std::vector<float> simulated = simulateInt8(loaded, loaded.int8Activations, fileInputs.data(), count);
            r.method = onnxInt8FallbackText(exportedPath, r.fallbackReason, loaded.int8Activations.size());
            try {
                Int8Engine engine(loaded, loaded.int8Activations);
                fileOutputs = engine.run(fileInputs.data(), count);
                const int classes = static_cast<int>(fileModel->outputShape().numel());
                const auto e = argmaxRows(fileOutputs.data(), count, classes);
                const auto s = argmaxRows(simulated.data(), count, classes);
                r.int8SameAsSimulation = 0;
                for (size_t i = 0; i < e.size(); ++i) r.int8SameAsSimulation += e[i] == s[i];
                for (size_t i = 0; i < simulated.size(); ++i)
                    r.int8MaxDiffFromSimulation =
                        std::max(r.int8MaxDiffFromSimulation, std::fabs(double(fileOutputs[i]) - double(simulated[i])));
                r.runtime = "Strata int8 engine";
                r.method =
                    "the int8 ONNX file ran on Strata's int8 engine: its int8 weights and int32 biases on "
                    "oneDNN's u8 x s8 kernels, every activation it quantizes kept on its uint8 scale and zero "
                    "point. Against the float simulation of the same file: the same class for " +
                    std::to_string(r.int8SameAsSimulation) + " of " + std::to_string(count) +
                    " samples, outputs at most " + std::to_string(r.int8MaxDiffFromSimulation) + " apart.";
            } catch (const std::runtime_error& e) {
                fileOutputs = simulated;
                r.runtime = "Strata CPU backend (int8 simulated)";
                r.method += std::string(" (Not on Strata's int8 engine: ") + e.what() + ")";
            }
        } else {
            fileOutputs = predictSamples(*fileModel, fileInputs.data(), count).outputs;
            r.method = format == ExportFormat::Onnx ? onnxFallbackText(exportedPath, r.fallbackReason)
                                                    : methodText(format, exportedPath);
            r.runtime = "Strata CPU backend";
        }
    }
    if (fileOutputs.size() != a.outputs.size())
        throw std::runtime_error(exportedPath + ": " + std::to_string(fileOutputs.size()) + " outputs for " +
                                 std::to_string(count) + " samples, the live model gives " +
                                 std::to_string(a.outputs.size()));
    r.samples = count;
    for (size_t i = 0; i < a.outputs.size(); ++i) {
        r.maxAbsOutput = std::max(r.maxAbsOutput, std::fabs(double(a.outputs[i])));
        const double d = std::fabs(double(a.outputs[i]) - double(fileOutputs[i]));
        // NaN must not hide as "no difference".
        if (!(d <= r.maxAbsDiff)) r.maxAbsDiff = std::isnan(d) ? d : std::max(r.maxAbsDiff, d);
    }
    const TaskKind task = live.project.dataset.task;
    if (!taskHasClasses(task)) {
        if (data.targetSize() != a.classes)
            throw std::runtime_error(exportedPath + ": the data has " + std::to_string(data.targetSize()) +
                                     " targets per sample, the model " + std::to_string(a.classes) + " outputs");
        std::vector<float> targets(static_cast<size_t>(count * a.classes));
        for (int64_t s = 0; s < count; ++s) data.copyTargets(s, targets.data() + s * a.classes);
        std::vector<float> liveOut = a.outputs;
        // Regression: everything in the data's units, each model's outputs by its own statistics.
        if (task == TaskKind::Regression) {
            undoNormalization(targets, live.targetNormalization);
            undoNormalization(liveOut, live.targetNormalization);
            undoNormalization(fileOutputs, loaded.targetNormalization);
        }
        auto score = [&](const std::vector<float>& outputs) {
            TaskMetrics m(task, a.classes, live.classNames, {}, live.project.dataset.threshold, dataNormalization);
            m.add(outputs.data(), targets.data(), count);
            return m.score();
        };
        r.scoreName = taskScoreName(task);
        r.liveScore = score(liveOut);
        r.fileScore = score(fileOutputs);
        return r;
    }
    const std::vector<int32_t> filePredicted = argmaxRows(fileOutputs.data(), count, a.classes);
    r.classes = a.classes;
    int64_t liveCorrect = 0, fileCorrect = 0;
    for (int64_t s = 0; s < count; ++s) {
        const size_t i = static_cast<size_t>(s);
        const int32_t label = data.labels[i];
        liveCorrect += a.predicted[i] == label;
        fileCorrect += filePredicted[i] == label;
        r.samePrediction += a.predicted[i] == filePredicted[i];
    }
    r.liveAccuracy = static_cast<double>(liveCorrect) / static_cast<double>(count);
    r.fileAccuracy = static_cast<double>(fileCorrect) / static_cast<double>(count);
    return r;
}

}  // namespace strata
