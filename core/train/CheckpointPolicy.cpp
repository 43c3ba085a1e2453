#include "core/train/CheckpointPolicy.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <unistd.h>

#include "core/io/FileIo.h"
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

std::vector<std::string> CheckpointPolicy::prepare() {
    std::vector<std::string> notes;
    if (!enabled()) return notes;
    std::error_code ec;
    fs::create_directories(m_folder, ec);
    if (!fs::is_directory(m_folder, ec))
        throw std::runtime_error("checkpoint folder " + m_folder + " cannot be created" +
                                 (ec ? ": " + ec.message() : std::string()));
    // A probe file, so an unwritable folder fails now rather than after the first epoch's work.
    const std::string probe = (fs::path(m_folder) / ".write-test").string() + ".tmp-" + std::to_string(::getpid());
    {
        std::ofstream out(probe, std::ios::binary | std::ios::trunc);
        out << "strata";
        out.flush();
        if (!out) {
            out.close();
            fs::remove(probe, ec);
            throw std::runtime_error("checkpoint folder " + m_folder + " is not writable");
        }
    }
    fs::remove(probe, ec);
    if (const int n = removeOrphanedTemporaryFiles(m_folder))
        notes.push_back("removed " + std::to_string(n) + " temporary file(s) left in " + m_folder +
                        " by an interrupted write");
    return notes;
}

std::vector<std::string> CheckpointPolicy::setAsideLaterThan(const Checkpoint& from, const std::string& fromFile) {
    std::vector<std::string> moved;
    if (!enabled()) return moved;
    std::error_code ec;
    if (!fs::is_directory(m_folder, ec)) return moved;
    std::vector<fs::path> later;
    for (const NumberedCheckpoint& f : numberedCheckpoints(m_folder))
        if (f.isStep ? f.number > from.step : f.number > from.epoch) later.push_back(f.path);
    // latest and best: later when they hold more steps than the resume point, or when they do not load.
    for (const char* name : {"latest.safetensors", "best.safetensors"}) {
        const fs::path p = fs::path(m_folder) / name;
        if (!fs::exists(p, ec) || fs::equivalent(p, fromFile, ec)) continue;
        try {
            const Checkpoint c = loadCheckpoint(p.string());
            if (c.step > from.step) later.push_back(p);
        } catch (const std::exception&) {
            later.push_back(p);
        }
    }
    if (later.empty()) return moved;
    // Not deleted: a person may still want them. One folder per resume, named after the resume point.
    fs::path aside = fs::path(m_folder) / ("superseded-at-step-" + std::to_string(from.step));
    for (int i = 2; fs::exists(aside, ec); ++i)
        aside = fs::path(m_folder) / ("superseded-at-step-" + std::to_string(from.step) + "-" + std::to_string(i));
    fs::create_directories(aside, ec);
    if (ec) throw std::runtime_error("cannot create " + aside.string() + ": " + ec.message());
    for (const fs::path& p : later) {
        const fs::path to = aside / p.filename();
        fs::rename(p, to, ec);
        if (ec) throw std::runtime_error("cannot move " + p.string() + " to " + to.string() + ": " + ec.message());
        moved.push_back(to.string());
    }
    syncPath(m_folder, true);
    return moved;
}

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
