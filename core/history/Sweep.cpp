// Sweep: see Sweep.h.
#include "core/history/Sweep.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "core/backend/BackendRegistry.h"
#include "core/history/RunRecorder.h"
#include "core/io/FileIo.h"
#include "core/io/InputFile.h"
#include "core/io/JsonInput.h"
#include "core/train/BackendOptionsFor.h"
#include "core/train/Trainer.h"

namespace strata::history {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

[[noreturn]] void bad(const std::string& path, const std::string& what) { throw ProjectError("/sweep" + path, what); }

double toScale(double v, bool log) { return log ? std::log(v) : v; }
double fromScale(double v, bool log) { return log ? std::exp(v) : v; }

Json rangeValue(const SweepParameter& p, double v) {
    if (p.integer) return Json(static_cast<int64_t>(std::llround(v)));
    // Grid points print as the numbers a person would type (1e-3, not 0.0010000000000000002).
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return Json(std::stod(buf));
}

// Collects the metric of the last epoch.
class MetricObserver : public TrainingObserver {
public:
    double valAcc = kNaN, valLoss = kNaN;
    std::string error;
    void onEpoch(const EpochEvent& e) override {
        valAcc = e.hasValidation ? e.valAccuracy : kNaN;
        valLoss = e.hasValidation ? e.valLoss : kNaN;
    }
    void onError(const std::string& m) override { error = m; }
};

Json resultToJson(const TrialResult& r) {
    return Json{{"trial", r.trial},
                {"rung", r.rung},
                {"epochs", r.epochs},
                {"assignment", r.assignment},
                {"status", r.status},
                {"run", r.runId},
                {"metric", std::isfinite(r.metric) ? Json(r.metric) : Json(nullptr)},
                {"message", r.message},
                {"device", r.device},
                {"resumed_from", r.resumedFrom}};
}

TrialResult resultFromJson(const Json& j) {
    TrialResult r;
    r.trial = j.at("trial").get<int>();
    r.rung = j.at("rung").get<int>();
    r.epochs = j.at("epochs").get<int>();
    r.assignment = j.at("assignment");
    r.status = j.at("status").get<std::string>();
    r.runId = j.at("run").get<int64_t>();
    r.metric = j.at("metric").is_number() ? j.at("metric").get<double>() : kNaN;
    r.message = j.value("message", "");
    r.device = j.value("device", "");
    r.resumedFrom = j.value("resumed_from", "");
    return r;
}

std::string describeAssignment(const Json& a) {
    std::string s;
    for (auto it = a.begin(); it != a.end(); ++it) s += (s.empty() ? "" : ", ") + it.key() + "=" + it.value().dump();
    return s;
}

}  // namespace

SweepDefinition parseSweep(const Json& sweep) {
    if (!sweep.is_object()) bad("", "the project has no sweep definition (add a \"sweep\" object; see README)");
    SweepDefinition d;
    static const std::set<std::string> known = {"method", "trials", "seed", "metric", "parameters", "halving"};
    for (auto it = sweep.begin(); it != sweep.end(); ++it)
        if (!known.count(it.key()))
            bad("/" + it.key(), "unknown key (known: halving, method, metric, parameters, seed, trials)");
    d.method = sweep.value("method", "grid");
    if (d.method != "grid" && d.method != "random")
        bad("/method", "unknown value '" + d.method + "' (one of: grid, random)");
    if (sweep.contains("trials")) {
        if (!sweep["trials"].is_number_integer() || sweep["trials"].get<int64_t>() < 1 ||
            sweep["trials"].get<int64_t>() > 100000)
            bad("/trials", "expected an integer from 1 to 100000");
        d.trials = sweep["trials"].get<int>();
    }
    if (d.method == "random" && d.trials < 1) bad("/trials", "random search needs the number of trials");
    if (sweep.contains("seed")) {
        if (!sweep["seed"].is_number_unsigned()) bad("/seed", "expected a non-negative integer");
        d.seed = sweep["seed"].get<uint64_t>();
    }
    d.metric = sweep.value("metric", "val_acc");
    if (d.metric != "val_acc" && d.metric != "val_loss")
        bad("/metric", "unknown value '" + d.metric + "' (one of: val_acc, val_loss)");
    if (!sweep.contains("parameters") || !sweep["parameters"].is_array() || sweep["parameters"].empty())
        bad("/parameters", "expected a non-empty array of parameters");
    for (size_t i = 0; i < sweep["parameters"].size(); ++i) {
        const Json& pj = sweep["parameters"][i];
        const std::string path = "/parameters/" + std::to_string(i);
        if (!pj.is_object()) bad(path, "expected an object");
        SweepParameter p;
        if (!pj.contains("setting") || !pj["setting"].is_string())
            bad(path + "/setting", "missing (e.g. \"training.learning_rate\")");
        p.setting = pj["setting"].get<std::string>();
        if (p.setting.rfind("training.", 0) != 0 && p.setting.rfind("dataset.", 0) != 0 &&
            p.setting.rfind("graph.", 0) != 0)
            bad(path + "/setting", "'" + p.setting + "' is not training.<key>, dataset.<key> or graph.<node>.<param>");
        if (pj.contains("values")) {
            if (!pj["values"].is_array() || pj["values"].empty()) bad(path + "/values", "expected a non-empty array");
            p.values = pj["values"].get<std::vector<Json>>();
        } else {
            p.range = true;
            if (!pj.contains("min") || !pj["min"].is_number() || !pj.contains("max") || !pj["max"].is_number())
                bad(path, "needs \"values\", or \"min\" and \"max\"");
            p.min = pj["min"].get<double>();
            p.max = pj["max"].get<double>();
            const std::string scale = pj.value("scale", "linear");
            if (scale != "linear" && scale != "log")
                bad(path + "/scale", "unknown value '" + scale + "' (one of: linear, log)");
            p.log = scale == "log";
            p.integer = pj.value("integer", false);
            if (!(p.min < p.max)) bad(path + "/max", "must be above min");
            if (p.log && p.min <= 0) bad(path + "/min", "a log range must start above 0");
            const int count = pj.value("count", 3);
            if (count < 2 || count > 1000) bad(path + "/count", "expected 2 to 1000 grid points");
            for (int k = 0; k < count; ++k) {
                const double t = double(k) / double(count - 1);
                const double v =
                    fromScale(toScale(p.min, p.log) + t * (toScale(p.max, p.log) - toScale(p.min, p.log)), p.log);
                const Json jv = rangeValue(p, v);
                if (std::find(p.values.begin(), p.values.end(), jv) == p.values.end()) p.values.push_back(jv);
            }
        }
        d.parameters.push_back(std::move(p));
    }
    if (sweep.contains("halving")) {
        const Json& h = sweep["halving"];
        if (!h.is_object() || !h.contains("rungs") || !h["rungs"].is_array() || h["rungs"].empty())
            bad("/halving/rungs", "expected epochs per rung, e.g. [1, 3]");
        int last = 0;
        for (const Json& r : h["rungs"]) {
            if (!r.is_number_integer() || r.get<int>() <= last)
                bad("/halving/rungs", "expected increasing epoch counts above 0");
            last = r.get<int>();
            d.rungs.push_back(last);
        }
        d.keep = h.value("keep", 0.5);
        if (!(d.keep > 0 && d.keep < 1)) bad("/halving/keep", "expected a fraction between 0 and 1");
    }
    return d;
}

std::vector<Json> sweepAssignments(const SweepDefinition& d) {
    std::vector<Json> out;
    if (d.method == "grid") {
        std::vector<size_t> idx(d.parameters.size(), 0);
        while (true) {
            Json a = Json::object();
            for (size_t i = 0; i < d.parameters.size(); ++i)
                a[d.parameters[i].setting] = d.parameters[i].values[idx[i]];
            out.push_back(std::move(a));
            size_t k = d.parameters.size();
            while (k > 0) {
                --k;
                if (++idx[k] < d.parameters[k].values.size()) break;
                idx[k] = 0;
                if (k == 0) return out;
            }
            if (d.parameters.empty()) return out;
        }
    }
    std::mt19937_64 rng(d.seed);
    for (int t = 0; t < d.trials; ++t) {
        Json a = Json::object();
        for (const SweepParameter& p : d.parameters) {
            if (p.range) {
                std::uniform_real_distribution<double> u(toScale(p.min, p.log), toScale(p.max, p.log));
                a[p.setting] = rangeValue(p, fromScale(u(rng), p.log));
            } else {
                std::uniform_int_distribution<size_t> u(0, p.values.size() - 1);
                a[p.setting] = p.values[u(rng)];
            }
        }
        out.push_back(std::move(a));
    }
    return out;
}

Project applyAssignment(const Project& base, const Json& assignment) {
    Json j = projectToJson(base);
    for (auto it = assignment.begin(); it != assignment.end(); ++it) {
        const std::string& setting = it.key();
        const size_t dot = setting.find('.');
        const std::string group = setting.substr(0, dot), rest = setting.substr(dot + 1);
        if (group == "training" || group == "dataset") {
            j[group][rest] = it.value();
            continue;
        }
        const size_t dot2 = rest.find('.');
        if (dot2 == std::string::npos) throw ProjectError("/sweep", "'" + setting + "': expected graph.<node>.<param>");
        const std::string node = rest.substr(0, dot2), param = rest.substr(dot2 + 1);
        bool found = false;
        for (Json& n : j["graph"]["nodes"])
            if (n.value("name", "") == node) {
                n["params"][param] = it.value();
                found = true;
            }
        if (!found) throw ProjectError("/sweep", "'" + setting + "': the graph has no node named '" + node + "'");
    }
    try {
        return projectFromJson(j);
    } catch (const ProjectError& e) {
        throw ProjectError("sweep assignment " + describeAssignment(assignment), e.jsonPath(), e.message());
    }
}

std::vector<TrialResult> runSweep(const Project& project, const std::string& projectPath, const SweepOptions& options,
                                  std::ostream& log) {
    const SweepDefinition d = parseSweep(project.sweep);
    const std::vector<Json> assignments = sweepAssignments(d);
    for (const Json& a : assignments) applyAssignment(project, a);  // every trial is valid before the first runs
    const std::string statePath = options.statePath.empty() ? projectPath + ".sweep-state.json" : options.statePath;

    // Worker slots and their devices; CPU slots share the cores.
    std::vector<std::string> slotDevices = options.devices;
    if (slotDevices.empty()) slotDevices.assign(size_t(std::max(1, options.parallel)), project.training.device);
    int cpuSlots = 0;
    for (const std::string& dev : slotDevices) {  // a bad name fails before any trial
        try {
            cpuSlots += Device::parseFirst(dev).isCpu() ? 1 : 0;
        } catch (const std::exception& e) {
            throw std::invalid_argument("sweep device '" + dev + "': " + e.what());
        }
    }
    const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
    const int threadsPerCpuTrial = project.training.threads > 0 || slotDevices.size() == 1
                                       ? project.training.threads
                                       : std::max(1, cores / std::max(1, cpuSlots));

    std::vector<TrialResult> results;
    if (std::filesystem::exists(statePath)) {
        Json state;
        try {
            state = parseJson<Json>(readFileText(statePath, kMaxProjectFileBytes, "a sweep state file"), statePath);
            if (state.at("sweep") != project.sweep)
                throw std::runtime_error("it belongs to a different sweep definition (delete it to start over)");
            for (const Json& t : state.at("trials")) results.push_back(resultFromJson(t));
        } catch (const std::exception& e) {
            throw std::runtime_error("sweep state '" + statePath + "': " + e.what());
        }
        log << "resuming: " << results.size() << " trial(s) already done (" << statePath << ")\n";
    }
    std::mutex mutex;  // results, the state file, the log
    auto save = [&] {
        Json trials = Json::array();
        for (const TrialResult& r : results) trials.push_back(resultToJson(r));
        const Json state{{"sweep", project.sweep}, {"trials", trials}};
        writeFileAtomically(statePath, [&](std::ostream& o) { o << state.dump(2) << "\n"; });
    };
    auto find = [&](int trial, int rung) -> const TrialResult* {
        for (const TrialResult& r : results)
            if (r.trial == trial && r.rung == rung) return &r;
        return nullptr;
    };
    auto better = [&](double a, double b) {
        if (!std::isfinite(a)) return false;
        if (!std::isfinite(b)) return true;
        return d.maximize() ? a > b : a < b;
    };
    auto stopped = [&] { return options.stop && options.stop->load(); };

    const std::vector<int> rungs = d.rungs.empty() ? std::vector<int>{project.training.epochs} : d.rungs;
    // Each trial its own checkpoint folder (trials must not overwrite each other's weights); with halving a
    // promoted trial continues from it.
    auto checkpointFolder = [&](int t) -> std::string {
        if (!project.training.checkpointDir.empty())
            return resolveDatasetPath(projectPath, project.training.checkpointDir) + "/sweep-trial-" +
                   std::to_string(t + 1);
        if (rungs.size() < 2) return {};
        std::string base = statePath;
        if (base.size() > 5 && base.compare(base.size() - 5, 5, ".json") == 0) base.resize(base.size() - 5);
        return base + "-checkpoints/trial-" + std::to_string(t + 1);
    };

    auto runTrial = [&](int slot, int t, size_t rung, RunStore* store) {
        Project p = applyAssignment(project, assignments[size_t(t)]);
        p.training.epochs = rungs[rung];
        p.training.device = slotDevices[size_t(slot)];
        if (Device::parseFirst(p.training.device).isCpu()) p.training.threads = threadsPerCpuTrial;
        p.training.checkpointDir = checkpointFolder(t);
        TrialResult r;
        r.trial = t;
        r.rung = int(rung);
        r.epochs = rungs[rung];
        r.assignment = assignments[size_t(t)];
        r.device = p.training.device;
        TrainerOptions to;
        to.projectPath = projectPath;
        std::string note;
        if (rung > 0 && !p.training.checkpointDir.empty()) {
            char name[32];
            std::snprintf(name, sizeof name, "epoch-%03d.safetensors", rungs[rung - 1]);
            const std::string from = p.training.checkpointDir + "/" + name;
            if (std::filesystem::exists(from)) {
                to.resumeFrom = from;
                r.resumedFrom = from;
                note = ", continuing from epoch " + std::to_string(rungs[rung - 1]);
            } else {
                note = ", from scratch: no checkpoint " + from;
            }
        }
        {
            std::lock_guard lock(mutex);
            log << "trial " << t + 1 << "/" << assignments.size()
                << (rungs.size() > 1 ? " rung " + std::to_string(rung + 1) : "") << " on " << r.device << ": "
                << describeAssignment(r.assignment) << ", " << r.epochs << " epoch(s)" << note << std::endl;
        }
        MetricObserver metrics;
        try {
            std::unique_ptr<Backend> backend =
                backendRegistry().create(Device::parseFirst(p.training.device), backendOptionsFor(p.training));
            std::unique_ptr<RunRecorder> recorder;
            if (store) {
                recorder = std::make_unique<RunRecorder>(*store, &metrics, p, projectPath, p.training.device, "sweep");
                r.runId = recorder->runId();
                store->renameRun(r.runId, "sweep trial " + std::to_string(t + 1) +
                                              (rungs.size() > 1 ? " rung " + std::to_string(rung + 1) : ""));
            }
            Trainer trainer(p, *backend, recorder ? static_cast<TrainingObserver*>(recorder.get()) : &metrics, to);
            if (options.onTrainer) options.onTrainer(slot, &trainer);
            const bool ok = trainer.run();
            if (options.onTrainer) options.onTrainer(slot, nullptr);
            if (recorder) recorder->finishIfOpen("failed", metrics.error);
            if (stopped()) return;  // cut off: not recorded as done
            if (!ok) throw std::runtime_error(metrics.error);
            r.metric = d.metric == "val_acc" ? metrics.valAcc : metrics.valLoss;
            if (!std::isfinite(r.metric))
                throw std::runtime_error("no " + d.metric + ": the project has no validation split");
            r.status = "done";
        } catch (const std::exception& e) {
            if (options.onTrainer) options.onTrainer(slot, nullptr);
            r.status = "failed";
            r.metric = kNaN;
            r.message = e.what();
        }
        std::lock_guard lock(mutex);
        log << "  trial " << t + 1 << " -> " << r.status
            << (r.status == "done" ? " " + d.metric + " " + std::to_string(r.metric) : ": " + r.message)
            << (r.runId ? " (run " + std::to_string(r.runId) + ")" : "") << std::endl;
        results.push_back(r);
        save();
    };

    std::vector<int> alive(assignments.size());
    for (size_t i = 0; i < alive.size(); ++i) alive[i] = int(i);
    for (size_t rung = 0; rung < rungs.size(); ++rung) {
        if (rung > 0) {
            // Successive halving: the best `keep` fraction of the last rung goes on.
            std::stable_sort(alive.begin(), alive.end(), [&](int a, int b) {
                const TrialResult* ra = find(a, int(rung) - 1);
                const TrialResult* rb = find(b, int(rung) - 1);
                return better(ra ? ra->metric : kNaN, rb ? rb->metric : kNaN);
            });
            const size_t keep = std::max<size_t>(1, size_t(std::ceil(double(alive.size()) * d.keep)));
            alive.resize(std::min(alive.size(), keep));
            std::sort(alive.begin(), alive.end());
            log << "rung " << rung + 1 << ": " << alive.size() << " trial(s) go on to " << rungs[rung] << " epoch(s)\n";
        }
        std::vector<int> todo;
        for (int t : alive)
            if (!find(t, int(rung))) todo.push_back(t);  // done before an interruption: skipped
        if (slotDevices.size() == 1) {
            for (int t : todo) {
                if (stopped()) return results;
                runTrial(0, t, rung, options.store);
            }
        } else {
            std::atomic<size_t> next{0};
            std::vector<std::thread> workers;
            std::vector<std::string> errors(slotDevices.size());
            for (size_t slot = 0; slot < std::min(slotDevices.size(), todo.size()); ++slot)
                workers.emplace_back([&, slot] {
                    try {
                        // Its own connection: a worker's statements never interleave with another's.
                        std::unique_ptr<RunStore> store;
                        if (options.store) store = std::make_unique<RunStore>(options.store->path());
                        for (size_t i = next++; i < todo.size() && !stopped(); i = next++)
                            runTrial(int(slot), todo[i], rung, store.get());
                    } catch (const std::exception& e) {
                        errors[slot] = e.what();
                        next = todo.size();
                    }
                });
            for (std::thread& w : workers) w.join();
            for (const std::string& e : errors)
                if (!e.empty()) throw std::runtime_error("sweep worker: " + e);
        }
        if (stopped()) return results;
    }
    return results;
}

}  // namespace strata::history
