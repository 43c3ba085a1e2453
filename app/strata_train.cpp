// strata-train: the headless trainer. Wiring only: parse the command line,
// pick a backend, run core::Trainer, print progress and write metrics.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "app/Cli.h"
#include "app/OpenMpWaitPolicy.h"
#include "core/backend/BackendRegistry.h"
#include "core/dist/MpiCommunicator.h"
#include "core/export/OnnxWeights.h"
#include "core/graph/Project.h"
#include "core/graph/Transfer.h"
#include "core/history/RunRecorder.h"
#include "core/train/BackendOptionsFor.h"
#include "core/train/ReplicaRun.h"
#include "core/train/RunFolder.h"
#include "core/train/Trainer.h"
#ifdef STRATA_CUDA_PLUGIN
#include "core/backend/CudaPlugin.h"
#elif defined(STRATA_HAVE_CUDA)
#include "gpu/CudaProvider.h"
#endif

namespace {

std::atomic<strata::Trainer*> g_trainer{nullptr};
std::atomic<strata::ReplicaRun*> g_replicas{nullptr};

void onSignal(int) {
    if (strata::Trainer* t = g_trainer.load()) t->requestStop();
    if (strata::ReplicaRun* r = g_replicas.load()) r->requestStop();
}

// Under mpirun: the GPU of this rank's place on its machine (the launcher's local rank), modulo the GPUs
// this machine has; 0 when neither is known.
int gpuOfLocalRank() {
    int local = 0;
    for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID", "PMI_LOCAL_RANK"})
        if (const char* text = std::getenv(v); text && *text) {
            local = std::atoi(text);
            break;
        }
    int gpus = 0;
    for (const strata::DeviceInfo& d : strata::backendRegistry().devices())
        gpus += d.device.type == strata::DeviceType::Cuda ? 1 : 0;
    return gpus > 0 ? std::max(0, local) % gpus : 0;
}

std::string formatDuration(double s) {
    if (!std::isfinite(s) || s < 0) return "--:--";
    const long t = std::lround(s);
    char buf[32];
    if (t >= 3600)
        std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
    else
        std::snprintf(buf, sizeof buf, "%02ld:%02ld", t / 60, t % 60);
    return buf;
}

// One line of the metrics file. A path in an event (a checkpoint's file, under a folder whose name is not UTF-8)
// cannot be JSON as it is: its bad bytes become U+FFFD, where dump() threw after the epoch had trained.
std::string metricsLine(const strata::Json& j) {
    return j.dump(-1, ' ', false, strata::Json::error_handler_t::replace);
}

// Prints progress and writes the metrics file. Step and epoch events arrive on the
// engine thread, telemetry on the sampler thread: one mutex orders the writes.
class CliObserver : public strata::TrainingObserver {
public:
    CliObserver(std::ostream* metrics, bool quiet, int totalEpochs)
        : m_metrics(metrics), m_quiet(quiet), m_tty(isatty(STDERR_FILENO) != 0), m_epochs(totalEpochs) {}

    void onStep(const strata::StepEvent& e) override {
        std::lock_guard lock(m_mutex);
        m_lossSum += e.loss;
        m_accSum += e.accuracy;
        ++m_count;
        if (m_metrics) {
            strata::Json j;
            j["event"] = "step";
            j["epoch"] = e.epoch;
            j["step"] = e.step;
            j["loss"] = e.loss;
            j["accuracy"] = e.accuracy;
            j["lr"] = e.learningRate;
            j["samples_per_s"] = e.samplesPerSecond;
            if (e.ranks > 1) {
                j["ranks"] = e.ranks;
                j["compute_s"] = e.computeSeconds;
                j["comm_s"] = e.commSeconds;
                j["exposed_comm_s"] = e.exposedCommSeconds;
                j["hidden_fraction"] = e.hiddenFraction;
            }
            if (e.lossScale > 0) {
                j["loss_scale"] = e.lossScale;
                j["skipped"] = e.skipped;
                j["skipped_steps"] = e.skippedSteps;
            }
            *m_metrics << metricsLine(j) << '\n';
        }
        if (m_quiet || !m_tty) return;
        const auto now = std::chrono::steady_clock::now();
        if (e.stepInEpoch != e.stepsPerEpoch && now - m_lastDraw < std::chrono::milliseconds(100)) return;
        m_lastDraw = now;
        const double frac = static_cast<double>(e.stepInEpoch) / static_cast<double>(e.stepsPerEpoch);
        const int width = 30;
        const int filled = static_cast<int>(frac * width);
        const double eta = e.samplesPerSecond > 0
                               ? (e.stepsPerEpoch - e.stepInEpoch) * (e.elapsedSeconds / std::max<int64_t>(1, e.step))
                               : NAN;
        std::fprintf(stderr, "\repoch %d/%d [%s%s] %5.1f%% loss %.4f acc %.3f %7.0f samples/s ETA %s ", e.epoch,
                     m_epochs, std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(), frac * 100,
                     m_lossSum / m_count, m_accSum / m_count, e.samplesPerSecond, formatDuration(eta).c_str());
        std::fflush(stderr);
    }

    void onEpoch(const strata::EpochEvent& e) override {
        std::lock_guard lock(m_mutex);
        m_lossSum = m_accSum = 0;
        m_count = 0;
        if (m_metrics) {
            strata::Json j;
            j["event"] = "epoch";
            j["epoch"] = e.epoch;
            j["train_loss"] = e.trainLoss;
            j["train_acc"] = e.trainAccuracy;
            j["val_loss"] = e.hasValidation ? strata::Json(e.valLoss) : strata::Json(nullptr);
            j["val_acc"] = e.hasValidation ? strata::Json(e.valAccuracy) : strata::Json(nullptr);
            j["seconds"] = e.seconds;
            j["samples_per_s"] = e.samplesPerSecond;
            j["best"] = e.best;
            j["ranks"] = e.ranks;
            for (const strata::NamedMetric& m : e.valMetrics) j["val_" + m.name] = m.value;
            *m_metrics << metricsLine(j) << std::endl;
        }
        if (m_quiet) return;
        if (m_tty) std::fputs("\n", stderr);
        if (!e.valMetrics.empty()) {
            // Tasks other than classification: the task's metrics in place of accuracy; per target or label ones
            // ("r2[price]") only when they are few (--metrics-out has them all).
            std::string metrics;
            const bool few = e.valMetrics.size() <= 6;
            for (const strata::NamedMetric& m : e.valMetrics)
                if (few || m.name.find('[') == std::string::npos)
                    metrics += " " + m.name + " " + strata::formatMetric(m.value);
            std::fprintf(stderr, "epoch %d: train loss %.4f | val loss %.4f%s%s | %.1f s, %.0f samples/s\n", e.epoch,
                         e.trainLoss, e.valLoss, metrics.c_str(), e.best ? " (best)" : "", e.seconds,
                         e.samplesPerSecond);
        } else if (std::isnan(e.trainAccuracy)) {
            std::fprintf(stderr, "epoch %d: train loss %.4f | %.1f s, %.0f samples/s\n", e.epoch, e.trainLoss,
                         e.seconds, e.samplesPerSecond);
        } else if (e.hasValidation)
            std::fprintf(stderr,
                         "epoch %d: train loss %.4f acc %.4f | val loss %.4f acc %.4f%s | %.1f s, %.0f samples/s\n",
                         e.epoch, e.trainLoss, e.trainAccuracy, e.valLoss, e.valAccuracy, e.best ? " (best)" : "",
                         e.seconds, e.samplesPerSecond);
        else
            std::fprintf(stderr, "epoch %d: train loss %.4f acc %.4f | %.1f s, %.0f samples/s\n", e.epoch, e.trainLoss,
                         e.trainAccuracy, e.seconds, e.samplesPerSecond);
    }

    void onTelemetry(const strata::TelemetryEvent& e) override {
        std::lock_guard lock(m_mutex);
        if (!e.available && !m_quiet)
            std::fprintf(stderr, "telemetry for %s unavailable: %s\n", e.device.c_str(), e.reason.c_str());
        if (!m_metrics) return;
        strata::Json j;
        j["event"] = "telemetry";
        j["device"] = e.device;
        j["available"] = e.available;
        if (!e.available) j["reason"] = e.reason;
        j["time_s"] = e.timeSeconds;
        j["utilization"] = e.utilizationPercent;
        j["memory_used"] = e.memoryUsedBytes;
        j["memory_total"] = e.memoryTotalBytes;
        if (e.temperatureC >= 0) j["temperature_c"] = e.temperatureC;
        if (e.powerWatts >= 0) j["power_w"] = e.powerWatts;
        if (e.smClockMHz >= 0) j["sm_clock_mhz"] = e.smClockMHz;
        *m_metrics << metricsLine(j) << '\n';
    }

    void onCheckpoint(const strata::CheckpointEvent& e) override {
        std::lock_guard lock(m_mutex);
        if (m_metrics) {
            strata::Json j{
                {"event", "checkpoint"}, {"path", e.path}, {"epoch", e.epoch}, {"step", e.step}, {"best", e.best}};
            *m_metrics << metricsLine(j) << '\n';
        }
    }

    void onFinished(const strata::FinishedEvent& e) override {
        std::lock_guard lock(m_mutex);
        if (m_metrics) {
            strata::Json j{{"event", "finished"},        {"epochs", e.epochsCompleted},     {"best_epoch", e.bestEpoch},
                           {"stopped", e.stoppedByUser}, {"early_stopped", e.earlyStopped}, {"seconds", e.seconds}};
            *m_metrics << metricsLine(j) << std::endl;
        }
        if (!m_quiet)
            std::fprintf(stderr, "%s after %d epoch(s) in %s%s\n", e.stoppedByUser ? "stopped" : "finished",
                         e.epochsCompleted, formatDuration(e.seconds).c_str(),
                         e.bestEpoch > 0 ? (", best epoch " + std::to_string(e.bestEpoch)).c_str() : "");
    }

    void onError(const std::string& message) override {
        std::lock_guard lock(m_mutex);
        m_error = message;
        if (m_metrics) *m_metrics << metricsLine(strata::Json{{"event", "error"}, {"message", message}}) << std::endl;
    }

    void onLog(const std::string& message) override {
        std::lock_guard lock(m_mutex);
        if (!m_quiet) std::fprintf(stderr, "%s\n", message.c_str());
    }

    const std::string& error() const { return m_error; }

private:
    std::mutex m_mutex;
    std::ostream* m_metrics;
    bool m_quiet, m_tty;
    int m_epochs;
    double m_lossSum = 0, m_accSum = 0;
    int64_t m_count = 0;
    std::chrono::steady_clock::time_point m_lastDraw{};
    std::string m_error;
};

// A failure of the run: strata::cli::runCommandLine prints it as "strata-train: reason" and exits 1. It
// returns int so that `return fail(...)` reads as the exit it is.
[[noreturn]] int fail(const std::string& reason) { throw std::runtime_error(reason); }

int listDevices() {
    auto& reg = strata::backendRegistry();
    for (const strata::DeviceInfo& d : reg.devices()) {
        std::printf("%-8s %s", d.device.toString().c_str(), d.name.c_str());
        if (d.totalMemoryBytes)
            std::printf(", %.1f GiB total, %.1f GiB free", d.totalMemoryBytes / 1073741824.0,
                        d.freeMemoryBytes / 1073741824.0);
        if (d.device.type == strata::DeviceType::Cuda)
            std::printf(", compute %d.%d, %d SMs, PCI %s", d.computeMajor, d.computeMinor, d.multiprocessors,
                        d.pciBusId.c_str());
        std::printf("\n");
    }
    strata::BackendProvider* cuda = reg.provider(strata::DeviceType::Cuda);
    if (!cuda)
        std::printf("no CUDA GPUs: this build has no CUDA support\n");
    else if (!cuda->unavailableReason().empty())
        std::printf("no CUDA GPUs: %s\n", cuda->unavailableReason().c_str());
    return 0;
}

}  // namespace

// The training command, once its command line has parsed (app/Cli.cpp declares its options).
int train(const strata::cli::TrainArgs& args) {
    if (args.listDevices) return listDevices();

    // Under an MPI launcher (mpirun, srun): one rank of a data-parallel job. MPI starts first, so that a
    // failure below can still end the whole job.
    std::unique_ptr<strata::Communicator> comm;
    if (strata::launchedByMpi()) {
        try {
            comm = strata::makeMpiCommunicator();
        } catch (const std::exception& e) {
            return fail(e.what());
        }
    }
    const int rank = comm ? comm->rank() : 0;
    const int ranks = comm ? comm->size() : 1;
    // Every rank parses the same command line; an error ends each with its own message (none waits).
    auto failRank = [&](const std::string& reason) {
        return ranks > 1 ? fail("rank " + std::to_string(rank) + " of " + std::to_string(ranks) + ": " + reason)
                         : fail(reason);
    };

    const std::string& projectPath = args.project;
    const std::string &resume = args.resume, &initFrom = args.initFrom;
    std::string metricsPath = args.metricsPath, historyPath = args.history;
    bool quiet = args.quiet;
    if (!resume.empty() && !initFrom.empty())
        return failRank("--init-from starts a new run and --resume continues one: give one of them");
    // Rank 0 alone prints progress and writes metrics, checkpoints and history; every rank samples its device
    // when rank 0 writes metrics (its samples reach rank 0 with the per-step stop vote).
    const int telemetryIntervalMs = metricsPath.empty() ? 0 : 500;
    if (rank != 0) {
        quiet = true;
        metricsPath.clear();
        historyPath = "off";
    }

    strata::Project project;
    try {
        project = strata::readProject(projectPath);
    } catch (const std::exception& e) {
        if (ranks > 1) comm->abortJob(e.what());  // the others would wait for this rank at the start
        return fail(e.what());
    }
    for (const strata::SettingValue& v : args.settings)
        strata::applySetting(project.dataset, project.training, *v.setting, v.value);
    // A flag whose setting has no effect with the others is warned about, not refused: the run is what was asked.
    if (rank == 0)
        for (const std::string& w :
             strata::cli::inapplicableFlags(args.settings, project.dataset, project.training, ranks))
            std::fprintf(stderr, "strata-train: warning: %s\n", w.c_str());
    // Transfer learning: frozen nodes on top of the project's own trainable flags.
    try {
        if (!args.freeze.empty()) strata::freezeNodes(project.graph, args.freeze);
        std::vector<std::string> frozen;
        if (!args.freezeUntil.empty()) frozen = strata::freezeUntil(project.graph, args.freezeUntil);
        if (rank == 0 && (!args.freeze.empty() || !args.freezeUntil.empty())) {
            for (const std::string& n : args.freeze) frozen.push_back(n);
            // A backbone has dozens: its count, the first few and the last.
            std::string list;
            for (size_t i = 0; i < frozen.size(); ++i)
                if (frozen.size() <= 8 || i < 4 || i + 1 == frozen.size())
                    list += (list.empty()                                  ? ""
                             : i + 1 == frozen.size() && frozen.size() > 8 ? ", ..., "
                                                                           : ", ") +
                            frozen[i];
            std::fprintf(stderr, "frozen: %zu node(s)%s%s\n", frozen.size(), list.empty() ? "" : ": ", list.c_str());
        }
    } catch (const std::exception& e) {
        return failRank(e.what());
    }
    if (args.replaceHead && !resume.empty())
        return failRank("--replace-head starts from a new head; --resume continues a run: give one of them");
    const strata::TrainingSettings& ts = project.training;

    // One device, or several of this process (one engine thread each: ReplicaRun). Under mpirun each rank
    // trains on one device; "cuda" there means this rank's GPU, picked by its rank on this machine.
    std::vector<std::unique_ptr<strata::Backend>> backends;
    try {
        std::vector<strata::Device> devices = strata::Device::parseList(ts.device);
        if (devices.size() > 1 && ranks > 1)
            throw std::invalid_argument("--device " + ts.device +
                                        ": under mpirun each rank trains on one device (--device cuda gives each "
                                        "rank the GPU of its local rank)");
        if (ranks > 1 && ts.device == "cuda") devices[0] = strata::Device::cuda(gpuOfLocalRank());
        for (const strata::Device& d : devices)
            backends.push_back(strata::backendRegistry().create(d, strata::backendOptionsFor(ts)));
    } catch (const std::exception& e) {
        if (ranks > 1) comm->abortJob(e.what());
        return fail(e.what());
    }

    std::ofstream metricsFile;
    if (!metricsPath.empty()) {
        metricsFile.open(metricsPath, std::ios::out | std::ios::trunc);
        if (!metricsFile) return fail("cannot write metrics file '" + metricsPath + "'");
    }
    CliObserver observer(metricsPath.empty() ? nullptr : &metricsFile, quiet, ts.epochs);
    strata::TrainerOptions options;
    options.projectPath = projectPath;
    options.resumeFrom = resume;
    options.resumeBest = args.resumeBest;
    options.initFrom = initFrom;
    options.replaceHead = args.replaceHead;
    options.readModelWeights = strata::onnxWeightSource;
    options.maxSteps = args.maxSteps;
    options.residentData = args.residentData == "on"    ? strata::TrainerOptions::ResidentData::On
                           : args.residentData == "off" ? strata::TrainerOptions::ResidentData::Off
                                                        : strata::TrainerOptions::ResidentData::Auto;
    options.telemetryIntervalMs = telemetryIntervalMs;
    options.communicator = comm.get();
    options.bucketBytes = args.bucketMb > 0 ? std::max<int64_t>(1, static_cast<int64_t>(args.bucketMb * 1048576.0)) : 0;
    options.collectiveTimeoutSeconds = args.collectiveTimeout;
    options.distMode = ts.distMode;
    options.localSgdSteps = ts.localSgdSteps;
    // Every run keeps its weights: without --checkpoint-dir, in a run folder beside the project file (rank 0's),
    // or in the per-user data folder, where the workbench looks too, when the project's folder is read-only (an
    // installed example).
    if (ts.checkpointDir.empty() && rank == 0) {
        const strata::RunsPlace place = strata::runsPlace(project, projectPath, {});
        options.runFolder = strata::newRunFolder(project, projectPath, {}, std::chrono::system_clock::now());
        std::fprintf(stderr, "checkpoints: %s (%s)\n", options.runFolder.c_str(),
                     place.perUser ? "the project's folder is not writable" : "no --checkpoint-dir given");
    } else if (rank == 0) {
        if (std::string problem = strata::checkpointFolderProblem(project, projectPath); !problem.empty()) {
            problem +=
                "; give --checkpoint-dir with the absolute path of a folder you can write, or an empty "
                "checkpoint_dir to keep the run in " +
                strata::runsPlace(project, projectPath, {}).folder;
            if (ranks > 1) comm->abortJob(problem);  // the others would wait for rank 0
            return fail(problem);
        }
    }
    // The run history: the same database the workbench writes, so `runs list` and the Runs view show both.
    std::unique_ptr<strata::history::RunStore> store;
    std::unique_ptr<strata::history::RunRecorder> recorder;
    if (historyPath != "off") {
        try {
            store = std::make_unique<strata::history::RunStore>(historyPath);
            // Runs of processes that died (or whose database was locked at their end), before this one starts.
            for (const std::string& line : store->recover())
                if (!quiet) std::fprintf(stderr, "%s\n", line.c_str());
            recorder = std::make_unique<strata::history::RunRecorder>(
                *store, &observer, project, std::filesystem::absolute(projectPath).string(), ts.device, "cli",
                options.runFolder.empty() ? ts.checkpointDir : options.runFolder);
        } catch (const std::exception& e) {
            return fail(std::string(e.what()) + " (--history off trains without recording)");
        }
        if (!quiet)
            std::fprintf(stderr, "run %lld in %s\n", static_cast<long long>(recorder->runId()), historyPath.c_str());
    }
    strata::TrainingObserver* sink = recorder ? static_cast<strata::TrainingObserver*>(recorder.get()) : &observer;
    bool ok = false;
    std::signal(SIGINT, onSignal);
    std::signal(SIGTERM, onSignal);
    if (backends.size() == 1) {
        strata::Trainer trainer(project, *backends[0], sink, options);
        g_trainer = &trainer;
        ok = trainer.run();
        g_trainer = nullptr;
    } else {
        std::vector<strata::Backend*> list;
        for (const auto& b : backends) list.push_back(b.get());
        strata::ReplicaRun replicas(project, std::move(list), sink, options);
        g_replicas = &replicas;
        ok = replicas.run();
        g_replicas = nullptr;
    }
    if (recorder) recorder->finishIfOpen("failed", observer.error());
    if (!ok) return failRank(observer.error());
    return 0;
}

int main(int argc, char** argv) {
    strata::app::ensurePassiveOpenMpWait(argv, /*headless=*/true);
#ifdef STRATA_CUDA_PLUGIN
    strata::loadCudaPlugin(strata::backendRegistry());  // or a "cuda" provider that says what is missing
#elif defined(STRATA_HAVE_CUDA)
    strata::gpu::registerCudaProvider(strata::backendRegistry());
#endif
    return strata::cli::runCommandLine({argv + 1, argv + argc}, train, std::cout, std::cerr);
}
