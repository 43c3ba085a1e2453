// strata-train prune: options parsed and results printed here; the pruning and fine-tuning are core/train's
// (PruneRun, Pruning, StructuredPruning, Trainer) and the before/after measurement core/infer's.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "app/CliArgs.h"
#include "app/CliCommands.h"
#include "core/backend/BackendRegistry.h"
#include "core/data/Dataset.h"
#include "core/export/ExportModel.h"
#include "core/graph/Model.h"
#include "core/infer/Evaluation.h"
#include "core/infer/ExportCheck.h"
#include "core/train/BackendOptionsFor.h"
#include "core/train/PruneRun.h"

namespace strata {

namespace {

namespace fs = std::filesystem;
using cli::looksLikeProjectFile;
using cli::UsageError;

const char* kPruneUsage =
    "usage: strata-train prune PROJECT_OR_CHECKPOINT --sparsity S -o DIR [--structured] [--fine-tune-epochs N]\n"
    "         [--schedule polynomial] [--scope per-layer|global] [--initial-sparsity S] [--begin-step N]\n"
    "         [--end-step N] [--frequency N] [--power P] [--norm l1|l2] [--lr X] [--device D] [--threads N]\n"
    "         [--quiet]\n";

const char* kPruneHelp =
    "Fine-tunes a trained model while pruning it, and writes DIR/<name>-pruned.strata with its checkpoints in DIR.\n"
    "  --sparsity S           unstructured: final fraction of zero weights in each Conv2D and Dense weight;\n"
    "                         --structured: fraction of Conv2D filters and Dense units removed (0 to 1)\n"
    "  --structured           remove whole filters and units (smallest --norm) and shrink the graph\n"
    "  --fine-tune-epochs N   epochs of fine-tuning (default 2)\n"
    "  --schedule polynomial  PolynomialDecay from --initial-sparsity (0) to S between --begin-step (0) and\n"
    "                         --end-step (default: 3/4 of the fine-tuning steps), masks recomputed every\n"
    "                         --frequency steps (100) with exponent --power (3)\n"
    "  --scope per-layer|global  each weight to S on its own (default), or one threshold over all of them\n"
    "  --norm l1|l2           how --structured ranks filters (default l1)\n"
    "  --lr X                 learning rate of the fine-tuning (default: the project's)\n"
    "  --device D, --threads N  where it trains (default: the project's settings)\n"
    "A stopped run continues with `strata-train DIR/<name>-pruned.strata --resume DIR`.\n";

std::atomic<Trainer*> g_pruneTrainer{nullptr};

void onPruneSignal(int) {
    if (Trainer* t = g_pruneTrainer.load()) t->requestStop();
}

double parseNumber(const std::string& flag, const std::string& text, double min, double max, bool maxOpen) {
    try {
        size_t used = 0;
        const double v = std::stod(text, &used);
        if (used == text.size() && v >= min && (maxOpen ? v < max : v <= max)) return v;
    } catch (const std::exception&) {
        // Reported below with the limits.
    }
    std::ostringstream s;
    s << flag << ": '" << text << "' is not a number from " << min << " to " << max << (maxOpen ? " (excluded)" : "");
    throw UsageError(s.str());
}

std::string pct(double fraction, int decimals = 1) {
    std::ostringstream s;
    s << std::fixed << std::setprecision(decimals) << fraction * 100 << "%";
    return s.str();
}

// Prints the fine-tuning's epochs and log lines; the progress within an epoch only on a terminal.
class PruneObserver : public TrainingObserver {
public:
    PruneObserver(std::ostream& out, bool quiet) : m_out(out), m_quiet(quiet) {}
    void onEpoch(const EpochEvent& e) override {
        if (m_quiet) return;
        m_out << "fine-tuning epoch " << e.epoch << ": train loss " << std::fixed << std::setprecision(4) << e.trainLoss
              << " acc " << e.trainAccuracy;
        if (e.hasValidation)
            m_out << " | val loss " << e.valLoss << " acc " << e.valAccuracy << (e.best ? " (best)" : "");
        m_out << " | " << std::setprecision(1) << e.seconds << " s\n" << std::defaultfloat;
        m_out.flush();
    }
    void onLog(const std::string& line) override {
        if (!m_quiet) m_out << line << "\n";
    }
    void onError(const std::string& message) override { m_error = message; }
    void onFinished(const FinishedEvent& e) override { m_stopped = e.stoppedByUser; }
    const std::string& error() const { return m_error; }
    bool stopped() const { return m_stopped; }

private:
    std::ostream& m_out;
    bool m_quiet;
    std::string m_error;
    bool m_stopped = false;
};

double validationAccuracy(const ExportModel& model, const DataSplit& validation) {
    BackendOptions options;
    auto backend = backendRegistry().create(Device::cpu(), options);
    auto compiled = compileExportModel(model, *backend);
    return evaluateSplit(*compiled, validation).confusion.accuracy();
}

int pruneCommand(const std::vector<std::string>& args, std::ostream& out) {
    std::string source, output, device, schedule = "polynomial";
    PruneOptions o;
    bool haveSparsity = false, quiet = false;
    int threads = -1;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto value = [&]() -> const std::string& {
            if (i + 1 >= args.size()) throw UsageError(a + " needs a value");
            return args[++i];
        };
        if (a == "--help" || a == "-h") {
            out << kPruneUsage << kPruneHelp;
            return 0;
        }
        if (a == "--sparsity") {
            o.sparsity = parseNumber(a, value(), 0.0, 1.0, true);
            haveSparsity = true;
        } else if (a == "--structured") {
            o.structured = true;
        } else if (a == "--fine-tune-epochs") {
            o.fineTuneEpochs = cli::parseInt(a, value(), 1, 100000);
        } else if (a == "--schedule") {
            schedule = value();
        } else if (a == "--scope") {
            try {
                o.scope = parsePruningScope(value());
            } catch (const std::invalid_argument& e) {
                throw UsageError(std::string("--scope: ") + e.what());
            }
        } else if (a == "--initial-sparsity") {
            o.initialSparsity = parseNumber(a, value(), 0.0, 1.0, true);
        } else if (a == "--begin-step") {
            o.beginStep = cli::parseInteger(a, value(), 0, int64_t(1) << 40);
        } else if (a == "--end-step") {
            o.endStep = cli::parseInteger(a, value(), 0, int64_t(1) << 40);
        } else if (a == "--frequency") {
            o.frequency = cli::parseInteger(a, value(), 1, int64_t(1) << 40);
        } else if (a == "--power") {
            o.power = parseNumber(a, value(), 1e-6, 100.0, false);
        } else if (a == "--norm") {
            try {
                o.norm = parseFilterNorm(value());
            } catch (const std::invalid_argument& e) {
                throw UsageError(std::string("--norm: ") + e.what());
            }
        } else if (a == "--lr") {
            o.learningRate = parseNumber(a, value(), 1e-12, 1e6, false);
        } else if (a == "--device") {
            device = value();
        } else if (a == "--threads") {
            threads = cli::parseInt(a, value(), 0, 4096);
        } else if (a == "--quiet") {
            quiet = true;
        } else if (a == "-o" || a == "--output") {
            output = value();
        } else if (!a.empty() && a[0] == '-') {
            throw UsageError("unknown option " + a);
        } else if (source.empty()) {
            source = a;
        } else {
            throw UsageError("unexpected argument '" + a + "'");
        }
    }
    if (source.empty()) throw UsageError("no project or checkpoint given");
    if (output.empty()) throw UsageError("no output folder given (-o DIR)");
    if (!haveSparsity)
        throw UsageError(
            "no --sparsity given (the fraction of weights, or with --structured of "
            "filters and units, to remove, e.g. 0.8)");
    if (schedule != "polynomial") throw UsageError("--schedule: unknown schedule '" + schedule + "' (polynomial)");
    if (o.structured &&
        (o.initialSparsity > 0 || o.beginStep > 0 || o.endStep >= 0 || o.scope != PruningScope::PerLayer))
        throw UsageError(
            "--structured removes whole filters at once: the schedule options apply to unstructured "
            "pruning only");

    // The checkpoint, and the project file that resolves its relative dataset paths.
    std::string projectPath, checkpointFile;
    std::error_code ec;
    if (!fs::is_directory(source, ec) && looksLikeProjectFile(source)) {
        const Project project = readProject(source);
        if (project.training.checkpointDir.empty())
            throw std::runtime_error(source +
                                     ": the project names no checkpoint folder (training.checkpointDir); "
                                     "pass a checkpoint of the trained model");
        projectPath = source;
        checkpointFile = resolveCheckpointPath(resolveDatasetPath(source, project.training.checkpointDir));
    } else {
        checkpointFile = resolveCheckpointPath(source);
    }
    if (fs::exists(fs::path(output) / "latest.safetensors", ec))
        throw std::runtime_error(output + " already holds a run's checkpoints: continue it with `strata-train " +
                                 "<its .strata file> --resume " + output + "`, or choose another folder");
    const Checkpoint checkpoint = loadCheckpoint(checkpointFile);
    out << "pruning " << checkpointFile << " (epoch " << checkpoint.epoch << ")\n";

    PrunePlan plan = planPruning(checkpoint, projectPath, o, output);
    if (!device.empty()) plan.project.training.device = device;
    if (threads >= 0) plan.project.training.threads = threads;
    if (o.structured) {
        out << "structured pruning (" << filterNormName(o.norm) << " norm): " << plan.structured.parametersBefore
            << " -> " << plan.structured.parametersAfter << " parameters\n";
        for (const PrunedLayer& l : plan.structured.layers) {
            out << "  " << l.node << " (" << l.type << "): ";
            if (l.skipped.empty())
                out << l.before << " -> " << l.after << " " << l.unit << "\n";
            else
                out << "kept " << l.before << ": " << l.skipped << "\n";
        }
    }
    writePrunePlan(plan);

    auto backend = backendRegistry().create(Device::parseFirst(plan.project.training.device),
                                            backendOptionsFor(plan.project.training));
    PruneObserver observer(out, quiet);
    TrainerOptions trainerOptions = plan.trainer;
    trainerOptions.projectPath = plan.projectFile;
    trainerOptions.telemetryIntervalMs = 0;
    bool ok = false;
    {
        Trainer trainer(plan.project, *backend, &observer, std::move(trainerOptions));
        g_pruneTrainer = &trainer;
        const auto previousInt = std::signal(SIGINT, onPruneSignal);
        ok = trainer.run();
        std::signal(SIGINT, previousInt);
        g_pruneTrainer = nullptr;
    }
    if (!ok) throw std::runtime_error(observer.error());
    if (observer.stopped()) {
        out << "stopped; continue with: strata-train " << plan.projectFile << " --resume "
            << plan.project.training.checkpointDir << "\n";
        return 1;
    }

    // Before and after on the same validation samples, on the CPU.
    const Checkpoint result = loadCheckpoint(plan.project.training.checkpointDir);
    const DatasetBundle data = loadDataset(plan.project.dataset, plan.projectFile);
    out << "wrote " << plan.projectFile << " and its checkpoints in " << plan.project.training.checkpointDir << "\n";
    if (data.validation.count > 0) {
        const double dense = validationAccuracy(exportModelFromCheckpoint(checkpoint), data.validation);
        const double pruned = validationAccuracy(exportModelFromCheckpoint(result), data.validation);
        out << "validation accuracy on " << data.validation.count << " samples: original " << pct(dense, 2)
            << ", pruned " << pct(pruned, 2) << " (" << std::showpos << std::fixed << std::setprecision(2)
            << (pruned - dense) * 100 << std::noshowpos << std::defaultfloat << " points)\n";
    }
    if (o.structured) return 0;
    const std::vector<LayerSparsity> layers = weightSparsity(result.project.graph, result.weights);
    out << "weight sparsity " << pct(overallSparsity(layers)) << ":\n";
    for (const LayerSparsity& l : layers)
        out << "  " << l.name << ": " << pct(l.sparsity()) << " zero (" << l.zeros << " of " << l.total << ")\n";
    return 0;
}

}  // namespace

int runPruneCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
    try {
        return pruneCommand(args, out);
    } catch (const UsageError& e) {
        err << "strata-train prune: " << e.what() << "\n" << kPruneUsage;
        return 2;
    } catch (const std::exception& e) {
        err << "strata-train prune: " << e.what() << "\n";
        return 1;
    }
}

}  // namespace strata
