// PruneRun: turns a trained checkpoint and what `strata-train prune` (or the Optimize panel) asks for into a
// fine-tuning run for the Trainer: magnitude pruning on a polynomial schedule (Pruning.h) or a graph with
// fewer filters and units (StructuredPruning.h), starting from the checkpoint's weights, writing its
// checkpoints and a project file into one output folder. The result is an ordinary project and checkpoint
// folder: `strata-train export DIR`, `strata-train PROJECT --resume DIR` and the workbench take it as it is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/train/Checkpoint.h"
#include "core/train/Pruning.h"
#include "core/train/StructuredPruning.h"
#include "core/train/Trainer.h"

namespace strata {

struct PruneOptions {
    // Unstructured: the final fraction of zero weights. Structured: the fraction of filters and units removed.
    double sparsity = 0.8;
    bool structured = false;
    int fineTuneEpochs = 2;
    double learningRate = 0.0;  // > 0: replaces the project's learning rate for the fine-tuning
    // Unstructured only: the schedule. endStep < 0: three quarters of the fine-tuning steps (the last
    // quarter trains at the final sparsity).
    PruningScope scope = PruningScope::PerLayer;
    double initialSparsity = 0.0;
    int64_t beginStep = 0;
    int64_t endStep = -1;
    int64_t frequency = 100;
    double power = 3.0;
    // Structured only: how filters are ranked.
    FilterNorm norm = FilterNorm::L1;
};

struct PrunePlan {
    Project project;                   // what fine-tunes: checkpoint_dir = the output folder, epochs = fineTuneEpochs
    TrainerOptions trainer;            // initialWeights, and pruning for an unstructured run
    std::string projectFile;           // where writePrunePlan puts the project: <dir>/<source name>-pruned.strata
    StructuredPruneResult structured;  // a structured run: what was removed (weights moved into trainer)
};

// `projectPath` resolves the checkpoint project's relative dataset paths (the project file it was trained
// from; empty: the working directory); the plan's project names them absolutely so it works from `outputDir`.
// Throws std::invalid_argument for options out of range, naming the option.
PrunePlan planPruning(const Checkpoint& source, const std::string& projectPath, const PruneOptions& options,
                      const std::string& outputDir);

// Creates the output folder and writes the plan's project file into it.
void writePrunePlan(const PrunePlan& plan);

}  // namespace strata
