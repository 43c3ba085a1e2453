// strata-train sweep: runs (or resumes) the project's hyperparameter sweep (core/history/Sweep), recording
// each trial as a run, and prints the trials sorted by the metric.
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <memory>
#include <sstream>

#include "app/Cli.h"
#include "core/history/Sweep.h"
#include "core/train/Trainer.h"

namespace strata {

namespace {

using cli::UsageError;

constexpr int kMaxSlots = 64;

std::array<std::atomic<Trainer*>, kMaxSlots> g_sweepTrainers{};
std::atomic<bool> g_sweepStop{false};

void onSweepSignal(int) {
    g_sweepStop = true;
    for (std::atomic<Trainer*>& slot : g_sweepTrainers)
        if (Trainer* t = slot.load()) t->requestStop();
}

struct SweepArgs {
    std::string projectPath, historyPath = history::RunStore::defaultPath(), statePath;
    bool quiet = false;
    int parallel = 1;
    std::vector<std::string> devices;
};

int sweepCommand(const SweepArgs& a, std::ostream& out, std::ostream& err) {
    const std::string &projectPath = a.projectPath, &historyPath = a.historyPath, &statePath = a.statePath;
    const bool quiet = a.quiet;
    const int parallel = a.parallel;
    const std::vector<std::string>& devices = a.devices;
    if (projectPath.empty()) throw UsageError("sweep needs a project file");
    const Project project = readProject(projectPath);
    std::unique_ptr<history::RunStore> store;
    if (historyPath != "off") {
        store = std::make_unique<history::RunStore>(historyPath);
        // Runs of processes that ended without recording their end: replayed or marked interrupted.
        for (const std::string& line : store->recover()) err << line << "\n";
    }

    history::SweepOptions options;
    options.statePath = statePath;
    options.store = store.get();
    options.stop = &g_sweepStop;
    options.parallel = parallel;
    options.devices = devices;
    options.onTrainer = [](int slot, Trainer* t) { g_sweepTrainers[size_t(slot)] = t; };
    g_sweepStop = false;
    auto oldInt = std::signal(SIGINT, onSweepSignal);
    auto oldTerm = std::signal(SIGTERM, onSweepSignal);
    std::ostringstream sink;
    std::vector<history::TrialResult> results =
        history::runSweep(project, std::filesystem::absolute(projectPath).string(), options, quiet ? sink : err);
    std::signal(SIGINT, oldInt);
    std::signal(SIGTERM, oldTerm);

    const history::SweepDefinition d = history::parseSweep(project.sweep);
    std::stable_sort(results.begin(), results.end(), [&](const history::TrialResult& a, const history::TrialResult& b) {
        if (a.rung != b.rung) return a.rung > b.rung;  // the longest-trained first
        if (!std::isfinite(a.metric)) return false;
        if (!std::isfinite(b.metric)) return true;
        return d.maximize() ? a.metric > b.metric : a.metric < b.metric;
    });
    out << std::left << std::setw(7) << "TRIAL" << std::setw(6) << "RUNG" << std::setw(8) << "EPOCHS" << std::setw(10)
        << d.metric << std::setw(8) << "RUN"
        << "SETTINGS\n";
    for (const history::TrialResult& r : results) {
        std::string settings;
        for (auto it = r.assignment.begin(); it != r.assignment.end(); ++it)
            settings += (settings.empty() ? "" : ", ") + it.key() + "=" + it.value().dump();
        char metric[32];
        std::snprintf(metric, sizeof metric, "%.4f", r.metric);
        out << std::setw(7) << r.trial + 1 << std::setw(6) << r.rung + 1 << std::setw(8) << r.epochs << std::setw(10)
            << (r.status == "done" ? std::string(metric) : r.status) << std::setw(8) << r.runId << settings << "\n";
    }
    if (g_sweepStop) {
        err << "strata-train sweep: interrupted; run the same command again to resume\n";
        return 130;
    }
    return 0;
}

}  // namespace

cli::CommandRun cli::declareSweep(CLI::App& app) {
    auto a = std::make_shared<SweepArgs>();
    app.footer(
        "Runs the project's \"sweep\" (grid or random search, optional successive halving), each trial a run in "
        "the run history; interrupted (Ctrl+C, a crash), it resumes from the state file without redoing finished "
        "trials.");
    app.add_option("project", a->projectPath, "The project whose sweep runs.")->type_name("PROJECT.strata");
    app.add_option("--history", a->historyPath,
                   "The run history the trials are recorded in (default: the workbench's database); off: none.")
        ->type_name("DB|off");
    app.add_option("--state", a->statePath, "The state file (default PROJECT.strata.sweep-state.json).")
        ->type_name("FILE");
    addIntegerOption(app, "--parallel", a->parallel, 1, kMaxSlots, "Trials at once (CPU trials split the cores).");
    app.add_option_function<std::string>(
           "--devices",
           [a](const std::string& list) {
               std::stringstream in(list);
               a->devices.clear();
               for (std::string dev; std::getline(in, dev, ',');)
                   if (!dev.empty()) a->devices.push_back(dev);
               if (a->devices.empty() || a->devices.size() > size_t(kMaxSlots))
                   throw CLI::ValidationError(
                       "--devices", "expects 1 to " + std::to_string(kMaxSlots) + " devices, e.g. cpu,cuda:0");
           },
           "One trial per listed device at once.")
        ->type_name("cpu,cuda:0,...");
    app.add_flag("--quiet", a->quiet, "No per-trial progress.");
    return [a](std::ostream& out, std::ostream& err) { return sweepCommand(*a, out, err); };
}

}  // namespace strata
