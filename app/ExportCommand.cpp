// strata-train export: options declared and results printed here; the writers are core/export's.
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <memory>
#include <sstream>

#include "app/Cli.h"
#include "core/backend/BackendRegistry.h"
#include "core/data/Dataset.h"
#include "core/export/ExportModel.h"
#include "core/export/FoldBatchNorm.h"
#include "core/export/Gguf.h"
#include "core/export/Onnx.h"
#include "core/export/Quantize.h"
#include "core/graph/Model.h"
#include "core/graph/Project.h"
#include "core/infer/Evaluation.h"
#include "core/infer/ExportCheck.h"
#include "core/train/ProjectFingerprint.h"
#include "core/train/RunFolder.h"

namespace strata {

namespace {

namespace fs = std::filesystem;
using cli::looksLikeProjectFile;
using cli::UsageError;

std::string pct(double fraction) {
    std::ostringstream s;
    s << std::fixed << std::setprecision(2) << fraction * 100 << "%";
    return s.str();
}

// The int8 file against the float model on the whole validation split (the training split when there is
// none): the file's weights and activation grid simulated in Strata (Quantize.h), as onnxruntime computes it.
void reportInt8Accuracy(const ExportModel& floatModel, const std::string& path, const DatasetBundle& data,
                        const WeightLoadOptions& options, std::ostream& out) {
    const bool validation = data.validation.count > 0;
    const DataSplit& split = validation ? data.validation : data.train;
    const ExportModel file = loadModelFile(path, options);
    auto backend = backendRegistry().create(Device::cpu());
    auto compiled = compileExportModel(floatModel, *backend);
    const Predictions f = predictSamples(*compiled, split.inputs.data(), split.count);
    const std::vector<float> q = simulateInt8(file, file.int8Activations, split.inputs.data(), split.count);
    const std::vector<int32_t> qp = argmaxRows(q.data(), split.count, f.classes);
    int64_t floatCorrect = 0, int8Correct = 0, same = 0;
    for (size_t i = 0; i < qp.size(); ++i) {
        floatCorrect += f.predicted[i] == split.labels[i];
        int8Correct += qp[i] == split.labels[i];
        same += qp[i] == f.predicted[i];
    }
    const double n = static_cast<double>(split.count);
    out << (validation ? "validation" : "training") << " accuracy on " << split.count << " samples: float "
        << pct(floatCorrect / n) << ", int8 " << pct(int8Correct / n) << " (" << std::showpos << std::fixed
        << std::setprecision(2) << (int8Correct - floatCorrect) / n * 100 << std::noshowpos << std::defaultfloat
        << " points); same class for " << pct(same / n) << "\n"
        << "  (int8 simulated in Strata from the file's int8 weights and " << file.int8Activations.size()
        << " activation scales, as onnxruntime's integer kernels compute it)\n";
}

std::string upper(std::string s) {
    for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
}

// A project file: the best checkpoint of its checkpoint folder, checked to belong to the project, or with
// --untrained its initial weights.
ExportModel modelFromProject(const std::string& path, bool untrained, const WeightLoadOptions& options,
                             std::ostream& out) {
    const Project project = readProject(path);
    if (untrained) {
        ExportModel m = untrainedExportModel(project, path);
        out << "exporting untrained weights (seed " << project.training.seed << ")\n";
        return m;
    }
    if (project.training.checkpointDir.empty() && latestRunFolder(project, path, {}).empty() &&
        !project.training.initFrom.empty()) {
        // Not trained yet: the weights it starts from (an imported model's, `strata-train import`).
        const std::string file = resolveCheckpointPath(resolveDatasetPath(path, project.training.initFrom));
        out << "using training.init_from " << file << " (the project has no checkpoint of its own yet)\n";
        const Checkpoint c = loadCheckpoint(file, options);
        checkBelongsToProject(file, c.project.name, checkpointFingerprint(c), projectSettingsFingerprint(project),
                              "Train the project first, or export the checkpoint itself");
        return exportModelFromCheckpoint(c);
    }
    if (project.training.checkpointDir.empty() && latestRunFolder(project, path, {}).empty())
        throw std::runtime_error(path +
                                 ": the project names no checkpoint folder (training.checkpointDir) and has no "
                                 "run folder with a checkpoint; pass a checkpoint, or --untrained to export the "
                                 "initial weights");
    const std::string file = projectCheckpointFile(project, path);
    out << "using checkpoint " << file << "\n";
    const Checkpoint c = loadCheckpoint(file, options);
    checkBelongsToProject(file, c.project.name, checkpointFingerprint(c), projectSettingsFingerprint(project),
                          "To export it as it is, give the checkpoint instead of the project");
    return exportModelFromCheckpoint(c);
}

struct ExportArgs {
    std::string source, format, output, quantize = "f32";
    int opset = kOnnxDefaultOpset;
    QuantizationOptions quantization;
    bool calibrationGiven = false;
    bool untrained = false, noNormalization = false;
    WeightLoadOptions loadOptions;
};

int exportCommand(const ExportArgs& a, std::ostream& out) {
    const std::string &source = a.source, &format = a.format, &output = a.output, &quantize = a.quantize;
    const int opset = a.opset;
    const QuantizationOptions& quantization = a.quantization;
    const bool calibrationGiven = a.calibrationGiven, untrained = a.untrained, normalization = !a.noNormalization;
    const WeightLoadOptions& loadOptions = a.loadOptions;
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
    if (format == "onnx" && precision != ExportPrecision::F32 && precision != ExportPrecision::Int8)
        throw UsageError("--quantize " + quantize + " applies to gguf (and f16 to safetensors); ONNX takes int8");
    if (format != "onnx" && precision == ExportPrecision::Int8)
        throw UsageError("--quantize int8 writes an ONNX QDQ graph: use --format onnx (GGUF's 8-bit type is q8_0)");
    if (format == "safetensors" && (precision == ExportPrecision::Q8_0 || precision == ExportPrecision::Q4_0))
        throw UsageError("--quantize " + quantize + " needs --format gguf (safetensors has no block types); f16 works");
    if (calibrationGiven && precision != ExportPrecision::Int8)
        throw UsageError("--calibration-samples, --calibration and --percentile apply to --quantize int8");
    if (!normalization && format != "onnx") throw UsageError("--no-normalization applies to onnx only");

    ExportModel model;
    std::error_code ec;
    std::string projectPath;  // resolves relative dataset paths (int8 calibration)
    if (!fs::is_directory(source, ec) && looksLikeProjectFile(source)) {
        model = modelFromProject(source, untrained, loadOptions, out);
        projectPath = source;
    } else if (untrained)
        throw UsageError("--untrained needs a project file");
    else
        model = exportModelFromCheckpoint(loadCheckpoint(source, loadOptions));

    if (format == "onnx") {
        OnnxExportOptions o;
        o.opset = opset;
        o.includeNormalization = normalization;
        Int8Export int8;
        DatasetBundle data;
        if (precision == ExportPrecision::Int8) {
            try {
                data = loadDataset(model.project.dataset, projectPath);
            } catch (const DataError& e) {
                // A checkpoint does not say where its project file was: relative data paths are the current
                // folder's.
                if (!projectPath.empty() || fs::path(e.path()).is_absolute()) throw;
                throw std::runtime_error(std::string(e.what()) +
                                         " (--quantize int8 calibrates on the training data: '" + e.path() +
                                         "', as the checkpoint's project names it, was looked for from the current "
                                         "folder; export from the project's folder, or give the project file)");
            }
            int8 = prepareInt8Export(model, data.train, quantization);
            o.int8 = &int8.calibration;
            for (const FoldedBatchNorm& f : int8.folded)
                out << "int8: folded " << f.batchNorm << " into " << f.into << "\n";
            out << "int8: calibrated " << int8.calibration.activations.size() << " activations on "
                << int8.calibration.samples << " training samples (" << calibrationMethodName(quantization.method);
            if (quantization.method == CalibrationMethod::Percentile) out << " " << quantization.percentile;
            out << ")\n";
        }
        writeOnnx(output, precision == ExportPrecision::Int8 ? int8.model : model, o);
        const OnnxModelInfo info = readOnnx(output);
        out << "wrote " << output << " (ONNX opset " << opset << ", " << info.nodes.size() << " nodes, "
            << info.initializers.size() + info.integerInitializers.size() << " initializers, input '" << info.inputName
            << "', output '" << info.outputName << "', " << fs::file_size(output) << " bytes)\n";
        if (precision == ExportPrecision::Int8) {
            OnnxExportOptions f = o;
            f.int8 = nullptr;
            const std::string floatPath = output + ".float-tmp.onnx";
            writeOnnx(floatPath, model, f);
            const auto floatBytes = fs::file_size(floatPath);
            fs::remove(floatPath, ec);
            out << "int8 file: " << fs::file_size(output) << " bytes, " << std::fixed << std::setprecision(2)
                << static_cast<double>(fs::file_size(output)) / static_cast<double>(floatBytes) << std::defaultfloat
                << "x the float32 file (" << floatBytes << " bytes)\n";
            reportInt8Accuracy(model, output, data, loadOptions, out);
        }
        return 0;
    }
    const ExportSummary summary =
        format == "gguf" ? writeGgufExport(output, model, precision) : writeSafetensorsExport(output, model, precision);
    out << "wrote " << output << " (" << format << ", " << summary.bytes << " bytes)\n";
    for (const std::string& line : summary.tensors) out << "  " << line << "\n";
    for (const ExportParameter& p : summary.fallbacks)
        out << "note: " << p.name << " " << p.shape.toString() << " stored as F16, not " << upper(quantize)
            << ": its innermost dimension " << p.shape.dims().back() << " is not a multiple of " << kQ8BlockSize << " ("
            << upper(quantize) << " blocks run along it)\n";
    if (!summary.fallbacks.empty())
        out << "note: " << summary.fallbacks.size() << " tensor(s) fell back from " << upper(quantize)
            << " to F16 (as llama.cpp does)\n";
    return 0;
}

}  // namespace

cli::CommandRun cli::declareExport(CLI::App& app) {
    auto a = std::make_shared<ExportArgs>();
    app.footer(
        "SOURCE: a checkpoint file, a checkpoint folder (its best checkpoint), or a project file (its checkpoint "
        "folder's best checkpoint, refused when it belongs to another project; with --untrained, the seeded "
        "initial weights).");
    app.add_option("source", a->source, "The checkpoint (file or folder) or project to export.")
        ->type_name("PROJECT_OR_CHECKPOINT");
    app.add_option("--format", a->format, "The file format.")->type_name("onnx|gguf|safetensors");
    app.add_option("-o,--output", a->output, "The file to write.")->type_name("FILE");
    app.add_option("--quantize", a->quantize,
                   "Weights as f16, q8_0 or q4_0 (gguf; safetensors f16), or int8 (onnx: a QDQ graph); default f32.")
        ->type_name("f16|q8_0|q4_0|int8");
    CLI::Option* samples = addIntegerOption(app, "--calibration-samples", a->quantization.calibrationSamples, 1,
                                            100000000, "--quantize int8: training samples to calibrate on.");
    CLI::Option* method = addParsedOption<CalibrationMethod>(
        app, "--calibration", a->quantization.method, parseCalibrationMethod,
        "--quantize int8: how activation ranges are found: minmax (default) or percentile.");
    method->type_name("minmax|percentile");
    CLI::Option* percentile =
        addNumberOption(app, "--percentile", a->quantization.percentile,
                        {50, 100, true, false, "above 50 and at most 100"},
                        "--calibration percentile: the percentile of each range's ends (default 99.999).")
            ->type_name("P");
    addIntegerOption(app, "--opset", a->opset, kOnnxMinOpset, kOnnxMaxOpset, "onnx: the opset (default 13).");
    app.add_flag("--no-normalization", a->noNormalization,
                 "onnx: leave the input normalization out of the graph (feed normalized inputs).");
    app.add_flag("--untrained", a->untrained, "A project's seeded initial weights, not a checkpoint's.");
    app.add_flag("--allow-non-finite", a->loadOptions.allowNonFinite,
                 "Load a checkpoint whose weights hold NaN or inf (refused otherwise, naming the tensor).");
    return [a, samples, method, percentile](std::ostream& out, std::ostream&) {
        a->calibrationGiven = samples->count() + method->count() + percentile->count() > 0;
        return exportCommand(*a, out);
    };
}

}  // namespace strata
