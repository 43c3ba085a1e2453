// strata-train import: an ONNX model as a Strata project (core/export/OnnxImport.h), its weights in a
// checkpoint beside the project that training.init_from names; what could not be mapped is printed node by node.
#include <chrono>
#include <filesystem>
#include <memory>

#include "app/Cli.h"
#include "core/export/OnnxImport.h"
#include "core/graph/Graph.h"

namespace strata {

namespace {

namespace fs = std::filesystem;
using cli::UsageError;

struct ImportArgs {
    std::string model, output;
    bool partial = false, force = false;
};

int importCommand(const ImportArgs& a, std::ostream& out, std::ostream& err) {
    if (a.model.empty()) throw UsageError("no ONNX model given");
    if (a.output.empty()) throw UsageError("no project file given (-o PROJECT.strata)");
    std::error_code ec;
    if (fs::exists(a.output, ec) && !a.force)
        throw UsageError(a.output + " exists; give --force to replace it (and its imported weights)");
    const auto start = std::chrono::steady_clock::now();
    OnnxImportOptions options;
    options.partial = a.partial;
    OnnxImport imported;
    try {
        imported = importOnnxFile(a.model, options);
    } catch (const OnnxImportError& e) {
        err << e.what() << "\n";
        return cli::kFailureExit;
    }
    writeImportedProject(imported, a.output);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const GraphAnalysis analysis = analyzeGraph(imported.project.graph);
    out << "imported " << a.model << ": " << imported.onnxNodes << " ONNX nodes as "
        << imported.project.graph.nodes().size() << " layers, " << imported.weights.size() << " weight tensors, "
        << analysis.parameterCount << " parameters, in " << seconds << " s\n";
    for (const std::string& line : imported.absorbed) out << "  absorbed: " << line << "\n";
    out << "wrote " << a.output << " and " << importedWeightsPath(a.output) << " (training.init_from)\n";
    if (!imported.unmapped.empty()) {
        err << imported.unmapped.size() << " node(s) not mapped (--partial: the project holds the rest; "
            << "connect or replace what is missing in the editor):\n";
        for (const OnnxImportIssue& i : imported.unmapped) err << "  " << i.text() << "\n";
    }
    for (const Problem& p : analysis.problems) err << "  problem: " << p.message << "\n";
    return 0;
}

}  // namespace

cli::CommandRun cli::declareImport(CLI::App& app) {
    auto a = std::make_shared<ImportArgs>();
    app.footer(
        "Maps ONNX nodes (opsets 13 to 21) to Strata layers, keeps the weights in PROJECT's folder as "
        "<stem>.imported.safetensors (a checkpoint that training.init_from names: training starts from it, and "
        "`strata-train export PROJECT` exports it before any training), lays the graph out by depth, and lists every "
        "node it cannot map with its operator and why (exit status 1 unless --partial).");
    app.add_option("model", a->model, "The ONNX file to import.")->type_name("MODEL.onnx");
    app.add_option("-o,--output", a->output, "The project file to write.")->type_name("PROJECT.strata");
    app.add_flag("--partial", a->partial,
                 "Write the project even when some nodes cannot be mapped (they are listed; the layers after them "
                 "are left unconnected).");
    app.add_flag("--force", a->force, "Replace an existing project file.");
    return [a](std::ostream& out, std::ostream& err) { return importCommand(*a, out, err); };
}

}  // namespace strata
