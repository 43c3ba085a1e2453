// strata-train export: options parsed and results printed here; the writers are core/export's.
#include <cctype>
#include <filesystem>
#include <fstream>

#include "app/CliArgs.h"
#include "app/CliCommands.h"
#include "core/export/ExportModel.h"
#include "core/export/Gguf.h"
#include "core/export/Onnx.h"
#include "core/graph/Project.h"

namespace strata {

namespace {

namespace fs = std::filesystem;
using cli::UsageError;

const char* kExportUsage =
    "usage: strata-train export PROJECT_OR_CHECKPOINT --format onnx|gguf|safetensors [--quantize q8_0|f16]\n"
    "                           [--opset N] [--no-normalization] [--untrained] -o FILE\n";

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
    if (untrained) {
        ExportModel m = untrainedExportModel(project, path);
        out << "exporting untrained weights (seed " << project.training.seed << ")\n";
        return m;
    }
    if (project.training.checkpointDir.empty())
        throw std::runtime_error(path +
                                 ": the project names no checkpoint folder (training.checkpointDir); "
                                 "pass a checkpoint, or --untrained to export the initial weights");
    const std::string dir = resolveDatasetPath(path, project.training.checkpointDir);
    const std::string file = resolveCheckpointPath(dir);
    out << "using checkpoint " << file << "\n";
    return exportModelFromCheckpoint(loadCheckpoint(file));
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
        if (a == "--format")
            format = value();
        else if (a == "--quantize")
            quantize = value();
        else if (a == "--opset")
            opset = cli::parseInt(a, value(), kOnnxMinOpset, kOnnxMaxOpset);
        else if (a == "-o" || a == "--output")
            output = value();
        else if (a == "--untrained")
            untrained = true;
        else if (a == "--no-normalization")
            normalization = false;
        else if (!a.empty() && a[0] == '-')
            throw UsageError("unknown option " + a);
        else if (source.empty())
            source = a;
        else
            throw UsageError("unexpected argument '" + a + "'");
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
    if (!fs::is_directory(source, ec) && looksLikeProjectFile(source))
        model = modelFromProject(source, untrained, out);
    else if (untrained)
        throw UsageError("--untrained needs a project file");
    else
        model = exportModelFromCheckpoint(loadCheckpoint(source));

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
    const ExportSummary summary =
        format == "gguf" ? writeGgufExport(output, model, precision) : writeSafetensorsExport(output, model, precision);
    out << "wrote " << output << " (" << format << ", " << summary.bytes << " bytes)\n";
    for (const std::string& line : summary.tensors) out << "  " << line << "\n";
    for (const ExportParameter& p : summary.fallbacks)
        out << "note: " << p.name << " " << p.shape.toString() << " stored as F16, not Q8_0: its innermost dimension "
            << p.shape.dims().back() << " is not a multiple of " << kQ8BlockSize << " (Q8_0 blocks run along it)\n";
    if (!summary.fallbacks.empty())
        out << "note: " << summary.fallbacks.size() << " tensor(s) fell back from Q8_0 to F16 (as llama.cpp does)\n";
    return 0;
}

}  // namespace

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

}  // namespace strata
