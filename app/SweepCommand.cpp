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
#include <sstream>

#include "app/CliArgs.h"
#include "app/CliCommands.h"
#include "core/history/Sweep.h"
#include "core/train/Trainer.h"

namespace strata {

namespace {

using cli::UsageError;

const char* kSweepUsage =
    "usage: strata-train sweep PROJECT.strata [--history DB|off] [--state FILE] [--parallel N]\n"
    "                          [--devices cpu,cuda:0,...] [--quiet]\n"
    "  Runs the project's \"sweep\" (grid or random search, optional successive halving), each trial a run in\n"
    "  the run history; interrupted (Ctrl+C, a crash), it resumes from the state file (default\n"
    "  PROJECT.strata.sweep-state.json) without redoing finished trials. --parallel N runs N trials at once\n"
    "  (CPU trials split the cores); --devices runs one trial per listed device at once.\n";

constexpr int kMaxSlots = 64;

std::array<std::atomic<Trainer*>, kMaxSlots> g_sweepTrainers{};
std::atomic<bool> g_sweepStop{false};

void onSweepSignal(int) {
    g_sweepStop = true;
    for (std::atomic<Trainer*>& slot : g_sweepTrainers)
        if (Trainer* t = slot.load()) t->requestStop();
}

int sweepCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
    std::string projectPath, historyPath = history::RunStore::defaultPath(), statePath;
    bool quiet = false;
    int parallel = 1;
    std::vector<std::string> devices;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto value = [&]() -> const std::string& {
            if (i + 1 >= args.size()) throw UsageError(a + " needs a value");
            return args[++i];
        };
        if (a == "--history")
            historyPath = value();
        else if (a == "--state")
            statePath = value();
        else if (a == "--parallel") {
            const std::string& v = value();
            try {
                size_t used = 0;
                parallel = std::stoi(v, &used);
                if (used != v.size()) throw std::invalid_argument(v);
            } catch (const std::exception&) {
                throw UsageError("--parallel expects a number, got '" + v + "'");
            }
            if (parallel < 1 || parallel > kMaxSlots)
                throw UsageError("--parallel expects 1 to " + std::to_string(kMaxSlots));
        } else if (a == "--devices") {
            std::stringstream list(value());
            for (std::string dev; std::getline(list, dev, ',');)
                if (!dev.empty()) devices.push_back(dev);
            if (devices.empty() || devices.size() > size_t(kMaxSlots))
                throw UsageError("--devices expects 1 to " + std::to_string(kMaxSlots) + " devices, e.g. cpu,cuda:0");
        } else if (a == "--quiet")
            quiet = true;
        else if (!a.empty() && a[0] == '-')
            throw UsageError("unknown option " + a);
        else if (projectPath.empty())
            projectPath = a;
        else
            throw UsageError("unexpected argument '" + a + "'");
    }
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

int runSweepCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
    try {
        return sweepCommand(args, out, err);
    } catch (const UsageError& e) {
        err << "strata-train sweep: " << e.what() << "\n" << kSweepUsage;
        return 2;
    } catch (const std::exception& e) {
        err << "strata-train sweep: " << e.what() << "\n";
        return 1;
    }
}

}  // namespace strata
