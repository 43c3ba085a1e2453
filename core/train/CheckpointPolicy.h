// CheckpointPolicy: which checkpoint files a run writes and where, and RunProgress, where a run stands
// (epochs, steps, the best epoch and early stopping), which checkpoints carry so a resumed run continues
// exactly.
//
// A checkpoint folder holds epoch-NNN.safetensors after each epoch (step-NNNNNNNN.safetensors for a save
// requested mid-epoch), latest.safetensors (the newest of them) and best.safetensors (the best epoch by the
// early-stopping metric, when validation ran).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/graph/Project.h"

namespace strata {

struct Checkpoint;

struct RunProgress {
    int epochsDone = 0;
    int64_t globalStep = 0;
    int64_t stepInEpoch = 0;  // steps done in the current, unfinished epoch
    int bestEpoch = 0;
    double bestMetric = std::numeric_limits<double>::quiet_NaN();  // lower is better (accuracy negated)
    double bestValLoss = 0, bestValAccuracy = 0;
    int epochsWithoutImprovement = 0;
    bool lastHasValidation = false;
    double lastValLoss = 0, lastValAccuracy = 0;

    // Records a finished epoch's validation; true when it is the best so far (by accuracy when `byAccuracy`,
    // else by loss).
    bool recordValidation(int epoch, double valLoss, double valAccuracy, bool byAccuracy);
    // The trainer-state JSON fields of the progress (best epoch, early stopping), and back.
    void writeState(Json& state) const;
    void readState(const Json& state);
};

class CheckpointPolicy {
public:
    // `folder` is resolved already; empty: the run writes no checkpoints.
    explicit CheckpointPolicy(std::string folder);
    bool enabled() const { return !m_folder.empty(); }
    const std::string& folder() const { return m_folder; }

    // Writes `checkpoint` as epoch-NNN (or step-N when `midEpoch`), then latest, and best when `best` (the
    // checkpoint's own `best` flag should say the same); returns the epoch or step file. Throws (naming the file) when
    // a write fails.
    std::string save(const Checkpoint& checkpoint, bool best, bool midEpoch);
    // Before the first epoch: creates the folder, checks that it is writable (throws naming it otherwise) and
    // deletes temporary files that killed writers left behind. Returns lines for the log.
    std::vector<std::string> prepare();
    // Resuming from `from` (read from `fromFile`): moves the folder's checkpoints that are later than it (epoch
    // and step files past it; latest and best when they hold more steps or do not load) into a folder
    // "superseded-at-step-N" beside them, so the continued run never mixes with them. Returns the new paths.
    std::vector<std::string> setAsideLaterThan(const Checkpoint& from, const std::string& fromFile);
    // The last file save() wrote; empty before the first.
    const std::string& lastSaved() const { return m_lastSaved; }

private:
    std::string m_folder;
    std::string m_lastSaved;
};

}  // namespace strata
