#include "core/train/PruneRun.h"

#include <cmath>
#include <filesystem>
#include <stdexcept>

namespace strata {

namespace {

namespace fs = std::filesystem;

std::string fileStem(const Project& project) {
    std::string stem;
    for (char c : project.name.empty() ? std::string("model") : project.name) {
        const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                           c == '_' || c == '.';
        stem += plain ? c : '_';
    }
    return stem;
}

// Relative dataset paths resolved against the project file they were written for (or the working
// directory), so the pruned project, written elsewhere, still finds its data.
void makeDatasetPathsAbsolute(Project& project, const std::string& projectPath) {
    for (const auto& spec : datasetSettingSpecs()) {
        if (spec.kind != SettingKind::Path) continue;
        const std::string path = spec.get(project.dataset).get<std::string>();
        if (path.empty() || fs::path(path).is_absolute()) continue;
        const std::string resolved =
            projectPath.empty() ? fs::absolute(path).lexically_normal().string()
                                : fs::absolute(resolveDatasetPath(projectPath, path)).lexically_normal().string();
        spec.set(project.dataset, Json(resolved));
    }
}

}  // namespace

PrunePlan planPruning(const Checkpoint& source, const std::string& projectPath, const PruneOptions& options,
                      const std::string& outputDir) {
    if (outputDir.empty()) throw std::invalid_argument("no output folder given for the pruned model");
    if (options.fineTuneEpochs < 1)
        throw std::invalid_argument("the fine-tuning needs at least 1 epoch, got " +
                                    std::to_string(options.fineTuneEpochs));
    if (!(options.learningRate >= 0.0))
        throw std::invalid_argument("the learning rate must be positive, got " + std::to_string(options.learningRate));
    PrunePlan plan;
    plan.project = source.project;
    plan.project.id = newProjectId();  // another model: a project of its own, with runs of its own
    makeDatasetPathsAbsolute(plan.project, projectPath);
    const std::string suffix = options.structured ? "-pruned-structured" : "-pruned";
    plan.project.name = (source.project.name.empty() ? "model" : source.project.name) + " (" +
                        (options.structured ? "structured, " : "") +
                        std::to_string(std::lround(options.sparsity * 100)) + "% pruned)";
    TrainingSettings& ts = plan.project.training;
    ts.epochs = options.fineTuneEpochs;
    ts.earlyStoppingPatience = 0;
    if (options.learningRate > 0) ts.learningRate = options.learningRate;
    const fs::path dir = fs::absolute(outputDir).lexically_normal();
    ts.checkpointDir = dir.string();
    plan.projectFile = (dir / (fileStem(source.project) + suffix + ".strata")).string();

    if (options.structured) {
        StructuredPruneOptions so;
        so.fraction = options.sparsity;
        so.norm = options.norm;
        plan.structured = pruneStructured(plan.project, source.weights, so);
        plan.trainer.initialWeights = std::move(plan.structured.weights);
        plan.structured.weights.clear();
        plan.project.graph = plan.structured.project.graph;
    } else {
        PruningSettings p;
        p.scope = options.scope;
        p.schedule.initialSparsity = options.initialSparsity;
        p.schedule.finalSparsity = options.sparsity;
        p.schedule.beginStep = options.beginStep;
        p.schedule.endStep = options.endStep;
        p.schedule.frequency = options.frequency;
        p.schedule.power = options.power;
        // The end step is resolved when the run knows its step count; check the rest now.
        PruningSchedule checked = p.schedule;
        if (checked.endStep < 0) checked.endStep = checked.beginStep;
        checked.check();
        plan.trainer.initialWeights = source.weights;
        plan.trainer.pruning = p;
    }
    return plan;
}

void writePrunePlan(const PrunePlan& plan) {
    fs::create_directories(fs::path(plan.projectFile).parent_path());
    writeProject(plan.project, plan.projectFile);
}

}  // namespace strata
