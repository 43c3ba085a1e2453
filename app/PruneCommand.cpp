// strata-train prune: options declared and results printed here; the pruning and fine-tuning are core/train's
// (PruneRun, Pruning, StructuredPruning, Trainer) and the before/after measurement core/infer's.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <memory>
#include <sstream>

#include "app/Cli.h"
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

std::atomic<Trainer*> g_pruneTrainer{nullptr};

void onPruneSignal(int) {
    if (Trainer* t = g_pruneTrainer.load()) t->requestStop();
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

struct PruneArgs {
    std::string source, output, schedule = "polynomial";
    PruneOptions options;
    bool haveSparsity = false, quiet = false;
    // --fine-tune-epochs, --lr, --device, --threads: settings of the pruned project, from the settings table.
    std::vector<SettingValue> settings;
};

int pruneCommand(PruneArgs& a, std::ostream& out) {
    const std::string &source = a.source, &output = a.output, &schedule = a.schedule;
    PruneOptions& o = a.options;
    for (const SettingValue& v : a.settings)
        if (v.setting == &trainingSetting("epochs")) o.fineTuneEpochs = v.value.get<int>();
    if (source.empty()) throw UsageError("no project or checkpoint given");
    if (output.empty()) throw UsageError("no output folder given (-o DIR)");
    if (!a.haveSparsity)
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
    for (const SettingValue& v : a.settings)
        applySetting(plan.project.dataset, plan.project.training, *v.setting, v.value);
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
    PruneObserver observer(out, a.quiet);
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

cli::CommandRun cli::declarePrune(CLI::App& app) {
    auto a = std::make_shared<PruneArgs>();
    PruneOptions& o = a->options;
    app.footer(
        "Fine-tunes a trained model while pruning it, and writes DIR/<name>-pruned.strata with its checkpoints in "
        "DIR; prints the validation accuracy before and after, and each layer's sparsity."
        "\nA stopped run continues with `strata-train DIR/<name>-pruned.strata --resume DIR`.");
    app.add_option("source", a->source, "The trained model: a checkpoint (file or folder) or its project file.")
        ->type_name("PROJECT_OR_CHECKPOINT");
    app.add_option("-o,--output", a->output, "The folder of the pruned project and its checkpoints.")->type_name("DIR");
    CLI::Option* sparsity = addNumberOption(app, "--sparsity", o.sparsity, {0, 1, false, true, {}},
                                            "Unstructured: the final fraction of zero weights in each Conv2D and "
                                            "Dense weight; --structured: the fraction of Conv2D filters and Dense "
                                            "units removed.")
                                ->type_name("S");
    app.add_flag("--structured", o.structured,
                 "Remove whole filters and units (smallest --norm) and shrink the graph.");
    addSettingOption(app, trainingSetting("epochs"), a->settings, "--fine-tune-epochs",
                     "Of the fine-tuning (default 2).");
    addChoiceOption(app, "--schedule", a->schedule, {"polynomial"},
                    "PolynomialDecay from --initial-sparsity to S between --begin-step and --end-step, masks "
                    "recomputed every --frequency steps with exponent --power.");
    addParsedOption<PruningScope>(app, "--scope", o.scope, parsePruningScope,
                                  "Each weight to S on its own (per-layer, the default), or one threshold over all "
                                  "of them (global).")
        ->type_name("per-layer|global");
    addNumberOption(app, "--initial-sparsity", o.initialSparsity, {0, 1, false, true, {}},
                    "The schedule's start (default 0).")
        ->type_name("S");
    addIntegerOption(app, "--begin-step", o.beginStep, 0, int64_t(1) << 40, "The schedule's first step (default 0).");
    addIntegerOption(app, "--end-step", o.endStep, 0, int64_t(1) << 40,
                     "The schedule's last step (default: 3/4 of the fine-tuning steps).");
    addIntegerOption(app, "--frequency", o.frequency, 1, int64_t(1) << 40, "Steps between mask updates (default 100).");
    addNumberOption(app, "--power", o.power, {1e-6, 100, false, false, {}}, "The schedule's exponent (default 3).")
        ->type_name("P");
    addParsedOption<FilterNorm>(app, "--norm", o.norm, parseFilterNorm, "How --structured ranks filters (default l1).")
        ->type_name("l1|l2");
    addSettingOption(app, trainingSetting("learning_rate"), a->settings, "--lr",
                     "Of the fine-tuning (default: the project's).");
    addSettingOption(app, trainingSetting("device"), a->settings, {}, "Where it fine-tunes (default: the project's).");
    addSettingOption(app, trainingSetting("threads"), a->settings, {}, "Default: the project's.");
    app.add_flag("--quiet", a->quiet, "No per-epoch lines.");
    return [a, sparsity](std::ostream& out, std::ostream&) {
        a->haveSparsity = sparsity->count() > 0;
        return pruneCommand(*a, out);
    };
}

}  // namespace strata
