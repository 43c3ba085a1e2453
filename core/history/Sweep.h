// Sweep: hyperparameter search over a project, each trial a recorded run (RunStore), resumable.
//
// The definition lives in the project file under "sweep":
//   {"method": "grid" | "random", "trials": 8 (random), "seed": 1, "metric": "val_acc" | "val_loss",
//    "parameters": [
//      {"setting": "training.learning_rate", "min": 1e-4, "max": 0.1, "scale": "log", "count": 4},
//      {"setting": "training.batch_size", "values": [32, 64]},
//      {"setting": "training.optimizer", "values": ["sgd", "adam"]},
//      {"setting": "graph.dense1.units", "min": 16, "max": 128, "scale": "log", "integer": true, "count": 3}],
//    "halving": {"rungs": [1, 3], "keep": 0.5}}
// A setting is "training.<key>" or "dataset.<key>" (the project file's keys) or "graph.<node>.<param>" (any
// layer parameter: Dense units, Dropout rate, ...). A range is sampled "count" points apart on its scale
// (grid) or drawn uniformly on its scale (random). Grid takes every combination; random draws "trials"
// assignments from a generator seeded by "seed", so a sweep is the same sweep when run again.
// Successive halving: every trial trains for rungs[0] epochs, the best "keep" fraction (at least one) by
// the metric goes on to rungs[1] epochs in all, continuing from its checkpoint of epoch rungs[0] (each trial
// has its own checkpoint folder: <training.checkpoint_dir>/sweep-trial-N, or, without a checkpoint_dir,
// <state file minus .json>-checkpoints/trial-N), and so on; without halving each trial trains the project's
// epochs.
//
// Parallel trials: `parallel` worker threads (or one per entry of `devices`), each trial with its own
// backend on its slot's device and, for CPU slots when training.threads is 0, the machine's cores split
// between the CPU slots so trials do not oversubscribe. Each worker records into its own RunStore
// connection on the same database (SQLite WAL). A rung's trials all finish before the next rung is chosen.
//
// Resume: after each trial the state file (JSON, written atomically) records its assignment, rung, run id,
// status and metric. Run again with the same definition, the sweep skips what the state says is done and
// redoes a trial that was cut off (its run stays in the history with status "running").
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "core/graph/Project.h"
#include "core/history/RunStore.h"

namespace strata {
class Trainer;
}

namespace strata::history {

struct SweepParameter {
    std::string setting;
    std::vector<Json> values;  // explicit values, or the grid points of a range
    bool range = false;
    double min = 0, max = 0;
    bool log = false, integer = false;
};

struct SweepDefinition {
    std::string method = "grid";
    int trials = 0;  // random
    uint64_t seed = 1;
    std::string metric = "val_acc";
    std::vector<SweepParameter> parameters;
    std::vector<int> rungs;  // epochs per rung; empty: no halving
    double keep = 0.5;
    bool maximize() const { return metric == "val_acc"; }
};

// Checks the definition; errors name the JSON path ("/sweep/parameters/1/scale: ...").
SweepDefinition parseSweep(const Json& sweep);
// The trials' assignments: objects {setting: value}, in trial order.
std::vector<Json> sweepAssignments(const SweepDefinition& definition);
// The project with one assignment applied, checked as a project file is (ProjectError naming the setting).
Project applyAssignment(const Project& base, const Json& assignment);

struct TrialResult {
    int trial = 0, rung = 0, epochs = 0;
    Json assignment;
    std::string status;  // done | failed
    int64_t runId = 0;
    double metric = 0;  // NaN when failed
    std::string message;
    std::string device;       // the device it trained on
    std::string resumedFrom;  // a promoted trial: the checkpoint it continued from
};

struct SweepOptions {
    std::string statePath;  // empty: <project>.sweep-state.json beside the project
    RunStore* store = nullptr;
    // Called from a worker with its slot (0 .. slots-1) and the trial's Trainer while it runs (the CLI's
    // Ctrl+C stops it), and with nullptr after.
    std::function<void(int slot, Trainer*)> onTrainer;
    int parallel = 1;                  // worker slots when `devices` is empty
    std::vector<std::string> devices;  // one slot per entry ("cpu", "cuda:0", "cpu" again ...); empty: the project's
    const std::atomic<bool>* stop = nullptr;  // set: no further trial starts
    bool quiet = false;
};

// Runs (or resumes) the sweep; progress lines go to `log`. Returns every trial result of the state, in the order
// the trials finished.
std::vector<TrialResult> runSweep(const Project& project, const std::string& projectPath, const SweepOptions& options,
                                  std::ostream& log);

}  // namespace strata::history
