#include "core/train/CheckpointPolicy.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/train/Checkpoint.h"

namespace strata {

namespace fs = std::filesystem;

bool RunProgress::recordValidation(int epoch, double valLoss, double valAccuracy, bool byAccuracy) {
    lastHasValidation = true;
    lastValLoss = valLoss;
    lastValAccuracy = valAccuracy;
    const double metric = byAccuracy ? -valAccuracy : valLoss;
    if (std::isnan(bestMetric) || metric < bestMetric) {
        bestMetric = metric;
        bestEpoch = epoch;
        bestValLoss = valLoss;
        bestValAccuracy = valAccuracy;
        epochsWithoutImprovement = 0;
        return true;
    }
    ++epochsWithoutImprovement;
    return false;
}

void RunProgress::writeState(Json& j) const {
    j["best_epoch"] = bestEpoch;
    j["best_metric"] = std::isnan(bestMetric) ? Json(nullptr) : Json(bestMetric);
    j["best_val_loss"] = bestValLoss;
    j["best_val_accuracy"] = bestValAccuracy;
    j["epochs_without_improvement"] = epochsWithoutImprovement;
}

void RunProgress::readState(const Json& st) {
    bestEpoch = st.value("best_epoch", 0);
    bestMetric = st.contains("best_metric") && st["best_metric"].is_number() ? st["best_metric"].get<double>()
                                                                             : std::numeric_limits<double>::quiet_NaN();
    bestValLoss = st.value("best_val_loss", 0.0);
    bestValAccuracy = st.value("best_val_accuracy", 0.0);
    epochsWithoutImprovement = st.value("epochs_without_improvement", 0);
}

CheckpointPolicy::CheckpointPolicy(std::string folder) : m_folder(std::move(folder)) {}

std::string CheckpointPolicy::save(const Checkpoint& c, bool best, bool midEpoch) {
    char name[64];
    if (midEpoch)
        std::snprintf(name, sizeof name, "step-%08lld.safetensors", static_cast<long long>(c.step));
    else
        std::snprintf(name, sizeof name, "epoch-%03d.safetensors", c.epoch);
    std::string file = (fs::path(m_folder) / name).string();
    saveCheckpoint(c, file);
    saveCheckpoint(c, (fs::path(m_folder) / "latest.safetensors").string());
    if (best) saveCheckpoint(c, (fs::path(m_folder) / "best.safetensors").string());
    m_lastSaved = file;
    return file;
}

}  // namespace strata
