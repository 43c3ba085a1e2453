// Trainer: epochs of steps, validation, checkpoints, early stopping and the
// requests a GUI or a signal handler makes between steps. Batches come from a
// BatchStager, checkpoint files and run progress from CheckpointPolicy.
#include "core/train/Trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <new>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "core/backend/Backend.h"
#include "core/backend/BackendRegistry.h"
#include "core/data/DataLoader.h"
#include "core/data/Dataset.h"
#include "core/dist/Communicator.h"
#include "core/dist/DeviceCommunicator.h"
#include "core/graph/Model.h"
#include "core/train/BackendOptionsFor.h"
#include "core/train/BatchStager.h"
#include "core/train/Checkpoint.h"
#include "core/train/CheckpointPolicy.h"
#include "core/train/DataCheck.h"
#include "core/train/Divergence.h"
#include "core/train/DynamicLossScale.h"
#include "core/train/GradientBuckets.h"
#include "core/train/LrSchedule.h"
#include "core/train/MemoryEstimate.h"
#include "core/train/Optimizer.h"
#include "core/train/ProjectFingerprint.h"
#include "core/train/Pruning.h"
#include "core/train/RunAgreement.h"
#include "core/train/TelemetrySampler.h"

namespace strata {

using Clock = std::chrono::steady_clock;
using Staged = BatchStager::Staged;

namespace {

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

uint64_t mixSeed(uint64_t seed, uint64_t step) { return dropoutHash(seed, step); }

std::string formatScale(double scale) {
    std::ostringstream s;
    s << scale;
    return s.str();
}

TrainingObserver g_nullObserver;

// An error every rank of a data-parallel job raises at the same point (a project that differs between
// ranks): each ends on its own, no rank is left waiting, so no abort is needed.
struct CollectiveError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// BatchNorm's cross-replica sums (LayerContext::replicas) over a communicator.
class CommunicatorSum : public ReplicaSum {
public:
    explicit CommunicatorSum(Communicator& comm) : m_comm(comm) {}
    void sum(double* values, int64_t count) override {
        m_comm.setActivity("BatchNorm's global sums");
        m_comm.allReduce(values, count, ReduceOp::Sum);
    }

private:
    Communicator& m_comm;
};

// Data parallel across processes: the newest telemetry sample of this rank's device, packed into a slot of
// the per-step stop vote (stopAgreed), so that rank 0 can report every rank's device as "<device> (rank R)".
// A slot is sent once per new sample; an empty slot (word 0 is 0) reports nothing.
constexpr size_t kTelemetryWords = 9;

class TelemetryTap : public TrainingObserver {
public:
    void forwardTo(TrainingObserver* to) { m_to = to; }
    void onTelemetry(const TelemetryEvent& e) override {
        {
            std::lock_guard lock(m_mutex);
            m_latest = e;
            m_fresh = e.available;
        }
        if (m_to) m_to->onTelemetry(e);
    }
    void pack(double* slot) {
        std::lock_guard lock(m_mutex);
        if (!m_fresh) return;
        m_fresh = false;
        Device d = Device::cpu();
        try {
            d = Device::parse(m_latest.device);
        } catch (const std::exception&) {
            return;  // a source naming no device of ours: nothing to send
        }
        const double words[kTelemetryWords] = {1.0,
                                               d.isCpu() ? 0.0 : 1.0,
                                               static_cast<double>(d.index),
                                               m_latest.utilizationPercent,
                                               m_latest.memoryUsedBytes,
                                               m_latest.memoryTotalBytes,
                                               m_latest.temperatureC,
                                               m_latest.powerWatts,
                                               m_latest.timeSeconds};
        std::copy(words, words + kTelemetryWords, slot);
    }
    static void report(const double* slot, int rank, TrainingObserver& to) {
        if (slot[0] != 1.0) return;
        TelemetryEvent e;
        const Device d = slot[1] == 0.0 ? Device::cpu() : Device::cuda(static_cast<int>(slot[2]));
        e.device = d.toString() + " (rank " + std::to_string(rank) + ")";
        e.utilizationPercent = slot[3];
        e.memoryUsedBytes = slot[4];
        e.memoryTotalBytes = slot[5];
        e.temperatureC = slot[6];
        e.powerWatts = slot[7];
        e.timeSeconds = slot[8];
        to.onTelemetry(e);
    }

private:
    std::mutex m_mutex;
    TelemetryEvent m_latest;
    bool m_fresh = false;
    TrainingObserver* m_to = nullptr;
};

// Test hooks (tests/dist): STRATA_TEST_FAIL_STEP=N makes rank STRATA_TEST_FAIL_RANK (default 0) throw at the
// start of step N, as a failing rank would; STRATA_TEST_STALL_STEP=N makes rank STRATA_TEST_STALL_RANK (default
// 1) stop there, as a hung rank would, until the job fails (or two minutes pass).
int64_t envInt(const char* name, int64_t otherwise) {
    const char* v = std::getenv(name);
    return v && *v ? std::atoll(v) : otherwise;
}

// Samples per second over windows of at least half a second, for the step events.
class RateMeter {
public:
    double add(int64_t samples) {
        m_samples += samples;
        const double sec = secondsSince(m_start);
        if (sec >= 0.5 || m_rate == 0) {
            m_rate = m_samples / std::max(sec, 1e-9);
            m_start = Clock::now();
            m_samples = 0;
        }
        return m_rate;
    }

private:
    Clock::time_point m_start = Clock::now();
    int64_t m_samples = 0;
    double m_rate = 0;
};

}  // namespace

struct Trainer::Impl {
    Project project;
    Backend& backend;
    TrainingObserver* obs;
    TrainerOptions opt;

    std::atomic<bool> stopRequested{false};
    std::atomic<bool> checkpointRequested{false};
    mutable std::mutex pauseMutex;
    std::condition_variable pauseCv;
    bool pauseRequested = false;

    DatasetBundle data;
    std::unique_ptr<Model> model;
    std::unique_ptr<Optimizer> optimizer;
    std::unique_ptr<BatchStager> stager;
    Tensor lossBuf, dlogitsBuf;  // for a whole batch
    int numClasses = 0;
    ComputePrecision precision = ComputePrecision::F32;
    std::unique_ptr<DynamicLossScale> lossScaler;  // fp16 only
    std::unique_ptr<PruningMasks> pruner;          // a pruning run only
    std::unique_ptr<DivergenceMonitor> divergence;

    RunProgress progress;  // saved in checkpoints
    CheckpointPolicy checkpoints{""};
    int64_t stepsPerEpoch = 0;
    bool reachedMaxSteps = false;
    Clock::time_point runStart;

    // Data parallel: dp when the job has more than one rank.
    Communicator* comm = nullptr;
    std::unique_ptr<Communicator> deviceComm;  // a GPU rank's (NCCL over opt.communicator)
    bool dp = false;
    int rank = 0, ranks = 1;
    std::unique_ptr<CommunicatorSum> replicaSum;
    TelemetryTap telemetryTap;                   // this rank's newest device sample, for stopAgreed
    std::vector<double> stopVote;                // stopAgreed's buffer, kept between steps
    std::unique_ptr<GradientBuckets> buckets;    // sync mode
    std::unique_ptr<AsyncGradients> asyncGrads;  // async mode
    double localSamplesSinceAverage = 0;         // local SGD
    int64_t failStep = 0, failRank = 0;          // the STRATA_TEST_FAIL_* hook
    int64_t stallStep = 0, stallRank = 1;        // the STRATA_TEST_STALL_* hook

    Impl(Project p, Backend& b, TrainingObserver* o, TrainerOptions op)
        : project(std::move(p)), backend(b), obs(o ? o : &g_nullObserver), opt(std::move(op)) {
        comm = opt.communicator;
        if (comm) {
            rank = comm->rank();
            ranks = comm->size();
            dp = ranks > 1 || opt.dataParallelWithOneRank;
            comm->setTimeout(opt.collectiveTimeoutSeconds);
            comm->setStep(0);
        }
        failStep = envInt("STRATA_TEST_FAIL_STEP", 0);
        failRank = envInt("STRATA_TEST_FAIL_RANK", 0);
        stallStep = envInt("STRATA_TEST_STALL_STEP", 0);
        stallRank = envInt("STRATA_TEST_STALL_RANK", 1);
    }

    // What the next collectives are for, and the step, for the message of a wait that runs out. On the host
    // communicator too when a device communicator (NCCL) sends host values through it.
    void at(const char* what) {
        comm->setActivity(what);
        if (opt.communicator && opt.communicator != comm) opt.communicator->setActivity(what);
    }
    void atStep(int64_t step) {
        comm->setStep(step);
        if (opt.communicator && opt.communicator != comm) opt.communicator->setStep(step);
    }

    // The STRATA_TEST_STALL_* hook: this rank stops answering until the job has failed (a job of threads says
    // so; processes are ended by the launcher when another rank aborts).
    void stallForTest() {
        const auto start = Clock::now();
        while (comm->jobFailure().empty() && secondsSince(start) < 120)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }

    // Data parallel: every rank compares what shapes its run (RunAgreement.h) before the first collective that
    // depends on it; a difference stops every rank here, naming the rank, the setting and both values.
    void agreeOnRun() {
        at("the start-up comparison of the ranks' settings");
        const std::string difference = compareAcrossRanks(*comm, runAgreementFields(project, opt));
        if (!difference.empty()) throw CollectiveError("data parallel: " + difference);
    }

    bool localSgd() const { return dp && opt.distMode == DistMode::LocalSgd; }
    bool asyncMode() const { return dp && opt.distMode == DistMode::Async; }

    // Whether the run stops here: a request on this process, or data parallel on any rank. An all-reduce,
    // called at the same points on every rank, so that every rank takes the same branch.
    // With telemetry gathered (TrainerOptions::gatherTelemetry), every rank's newest device sample rides on
    // the same all-reduce, each rank in its own slot, and rank 0 reports the others' samples.
    bool stopAgreed() {
        if (!dp) return stopRequested;
        at("the stop vote");
        const bool gather = opt.gatherTelemetry && opt.telemetryIntervalMs > 0;
        std::vector<double>& vote = stopVote;
        vote.assign(1 + (gather ? static_cast<size_t>(ranks) * kTelemetryWords : 0), 0.0);
        vote[0] = stopRequested ? 1.0 : 0.0;
        if (gather) telemetryTap.pack(vote.data() + 1 + static_cast<size_t>(rank) * kTelemetryWords);
        comm->allReduce(vote.data(), static_cast<int64_t>(vote.size()), ReduceOp::Sum);
        if (gather && rank == 0)
            for (int r = 1; r < ranks; ++r)
                TelemetryTap::report(vote.data() + 1 + static_cast<size_t>(r) * kTelemetryWords, r, *obs);
        const bool any = vote[0] > 0;
        if (any) stopRequested = true;
        return any;
    }

    // Data parallel: the ranks whose `value` differs from rank 0's (every rank gets the list).
    std::vector<int> ranksDiffering(uint64_t value) {
        uint64_t root = value;
        comm->broadcast(&root, sizeof root, 0);
        std::vector<double> differs(static_cast<size_t>(ranks), 0.0);
        differs[static_cast<size_t>(rank)] = root == value ? 0.0 : 1.0;
        comm->allReduce(differs.data(), ranks, ReduceOp::Sum);
        std::vector<int> out;
        for (int r = 0; r < ranks; ++r)
            if (differs[static_cast<size_t>(r)] > 0) out.push_back(r);
        return out;
    }

    // Data parallel: every rank must train on the same data (the project and options were compared before,
    // agreeOnRun); a difference stops every rank at start, naming the ranks.
    void checkRanksAgree() {
        at("the comparison of the ranks' data");
        uint64_t dataHash = fnv1a64(&data.train.count, sizeof data.train.count);
        for (const DataSplit* split : {&data.train, &data.validation}) {
            dataHash = fnv1a64(split->inputs.data(), split->inputs.size() * sizeof(float), dataHash);
            if (split->streamed()) {
                const uint64_t files = split->source->fingerprint();
                dataHash = fnv1a64(&files, sizeof files, dataHash);
            }
            dataHash = fnv1a64(split->labels.data(), split->labels.size() * sizeof(int32_t), dataHash);
        }
        auto list = [](const std::vector<int>& r) {
            std::string s;
            for (int x : r) s += (s.empty() ? "" : ", ") + std::to_string(x);
            return s;
        };
        const std::vector<int> dataDiffers = ranksDiffering(dataHash);
        if (!dataDiffers.empty())
            throw CollectiveError("data parallel: the data set loaded by rank(s) " + list(dataDiffers) +
                                  " differs from rank 0's: every rank must read the same files");
    }

    // Data parallel: rank 0's weights and state (BatchNorm statistics) to every rank.
    void broadcastWeights() {
        at("the broadcast of rank 0's weights");
        std::map<std::string, std::vector<float>> w = modelWeights(*model);
        for (auto& [name, v] : w) comm->broadcast(v.data(), static_cast<int64_t>(v.size() * sizeof(float)), 0);
        applyWeights(*model, w);
    }

    // Local SGD: the parameters and BatchNorm running statistics become the average over the ranks, each
    // weighted by the samples it trained on since the last average (host memory: CPU backend).
    void averageReplicas(bool statisticsOnly = false) {
        at("the averaging of the replicas");
        double total = localSamplesSinceAverage;
        comm->allReduce(&total, 1, ReduceOp::Sum);
        const float weight = total > 0 ? static_cast<float>(localSamplesSinceAverage / total) : 0.0f;
        localSamplesSinceAverage = 0;
        if (total <= 0) return;
        auto average = [&](const Tensor& t) {
            if (!t.defined() || t.numel() == 0) return;
            backend.scale(t.f32(), weight, t.numel());
            backend.synchronize();
            comm->allReduce(t.f32(), t.numel(), ReduceOp::Sum);
        };
        if (!statisticsOnly) average(model->packedValues());
        for (const auto& np : model->namedParameters())
            if (!np.param->trainable) average(np.param->value);
    }

    const TrainingSettings& ts() const { return project.training; }

    // Fills lossBuf (and dlogits, times gradScale, when `withGrad`). Nothing is read back here: the
    // loss sum comes with the step's other metrics (batchMetrics), once the step's work is called.
    void computeLoss(const Tensor& logits, const Batch& batch, const Tensor& labels, bool withGrad,
                     float gradScale = 1.0f) {
        const int64_t n = batch.size;
        const int rows = static_cast<int>(n);
        const int cols = static_cast<int>(model->outputShape().numel());
        const float scale = gradScale / static_cast<float>(n);
        float* dl = withGrad ? dlogitsBuf.f32() : nullptr;
        const LossKind loss = ts().loss;
        if (loss == LossKind::CrossEntropy) {
            backend.softmaxCrossEntropy(lossBuf.f32(), dl, logits.f32(), labels.i32(), rows, cols, scale);
        } else {
            // MSE and BCE train against one-hot targets of the class labels.
            oneHot(batch, cols);
            if (loss == LossKind::Mse)
                backend.mseLoss(lossBuf.f32(), dl, logits.f32(), targetBuf.f32(), rows, cols, scale);
            else
                backend.bceWithLogits(lossBuf.f32(), dl, logits.f32(), targetBuf.f32(), rows, cols, scale);
        }
    }

    // The batch's loss sum (of lossBuf) and correct predictions: the one point per step where the host
    // waits for the device.
    Backend::StepMetrics batchMetrics(const Tensor& logits, const Batch& batch, const Tensor& labels) {
        return backend.stepMetrics(lossBuf.f32(), logits.f32(), labels.i32(), static_cast<int>(batch.size), numClasses);
    }

    Tensor targetBuf;
    std::vector<float> targetHost;
    // One-hot targets from the batch's host labels (no device round trip).
    void oneHot(const Batch& batch, int cols) {
        const int64_t n = batch.size;
        if (!targetBuf.defined() || targetBuf.numel() < n * cols) targetBuf = backend.empty(Shape{n, cols});
        targetHost.assign(static_cast<size_t>(n * cols), 0.0f);
        for (int64_t r = 0; r < n; ++r)
            targetHost[static_cast<size_t>(r * cols + batch.labels[static_cast<size_t>(r)])] = 1.0f;
        backend.copyFromHost(targetBuf.raw(), targetHost.data(), targetHost.size() * sizeof(float));
    }

    std::string nodeLabel(int id) const {
        const Node* n = project.graph.node(id);
        return n ? "'" + n->name + "' (" + n->type + ")" : "#" + std::to_string(id);
    }

    // Every way the data and the graph disagree (shape, classes, an Embedding smaller than the vocabulary),
    // listed at once before anything is allocated for the model: the run is refused before its first step.
    void checkData() const {
        const std::vector<DataMismatch> mismatches = checkDataAgainstGraph(project.graph, dataFactsOf(data));
        if (!mismatches.empty()) throw std::invalid_argument(dataMismatchText(mismatches));
    }

    void validateSetup() {
        const TrainingSettings& s = ts();
        if (s.batchSize < 1) throw std::invalid_argument("training.batch_size must be at least 1");
        if (s.epochs < 1) throw std::invalid_argument("training.epochs must be at least 1");
        if (data.train.count == 0) throw std::invalid_argument("the training split is empty");
        numClasses = data.numClasses;  // the data against the graph: checkData, before the model was built
    }

    // The loss and output-gradient buffers, for a whole batch at once (see BatchStager on why).
    void allocateLossBuffers() {
        const int64_t batch = ts().batchSize;
        try {
            lossBuf = backend.empty(Shape{batch});
            dlogitsBuf = backend.empty(model->outputShape().withBatch(batch));
        } catch (const OutOfMemoryError& e) {
            throw OutOfMemoryError("the loss buffers for batch " + std::to_string(batch) + ": " + e.what(), e.bytes());
        }
    }

    // The run's compute precision (the backend's, checked by checkBackendFor), and the loss scaler
    // for fp16, whose 5-bit exponent underflows small gradients without one.
    void setUpPrecision() {
        precision = backend.computePrecision();
        if (precision == ComputePrecision::F16)
            lossScaler =
                std::make_unique<DynamicLossScale>(opt.initialLossScale, 2.0f, 0.5f, opt.lossScaleGrowthInterval);
        if (precision != ComputePrecision::F32)
            obs->onLog(
                std::string("precision ") + computePrecisionName(precision) +
                ": GEMM and convolution inputs rounded to " + computePrecisionName(precision) +
                ", float32 accumulation and float32 weights" +
                (lossScaler ? ", dynamic loss scaling from " + formatScale(lossScaler->scale()) : std::string()));
    }

    // Unscales every trainable gradient by 1/lossScale and tells the scaler whether all are finite;
    // returns whether the optimizer step may be applied.
    bool unscaleGradients(float lossScale) {
        const Tensor& g = model->packedGradients();
        bool finite = true;
        if (g.defined()) {  // every trainable gradient, in one block
            backend.scale(g.f32(), 1.0f / lossScale, g.numel());
            finite = backend.allFinite(g.f32(), g.numel());
        }
        return lossScaler->update(finite);
    }

    Json trainerState() const {
        Json j;
        progress.writeState(j);
        j["optimizer_steps"] = optimizer->steps();
        j["precision"] = computePrecisionName(precision);
        if (lossScaler) {
            j["loss_scale"] = lossScaler->scale();
            j["loss_scale_good_steps"] = lossScaler->goodSteps();
            j["skipped_steps"] = lossScaler->skippedSteps();
        }
        if (pruner) j["pruning"] = pruner->state();
        if (divergence && divergence->startLoss() > 0) j["divergence_start_loss"] = divergence->startLoss();
        return j;
    }

    // Saves the run as it stands (see CheckpointPolicy for the files) and reports it.
    void checkpoint(bool best, bool midEpoch) {
        if (!checkpoints.enabled()) {
            if (midEpoch) obs->onLog("save checkpoint: no checkpoint folder is set in the training settings");
            return;
        }
        Checkpoint c;
        c.project = project;
        c.epoch = progress.epochsDone;
        c.step = progress.globalStep;
        c.stepInEpoch = progress.stepInEpoch;
        c.hasValidation = progress.lastHasValidation;
        c.valLoss = progress.lastValLoss;
        c.valAccuracy = progress.lastValAccuracy;
        c.best = best;
        c.normalization = data.normalization;
        c.classNames = data.classNames;
        c.vocabulary = data.vocabulary;
        c.tokenizerModel = data.tokenizerModel;
        c.trainerState = trainerState();
        c.weights = modelWeights(*model);
        c.optimizerState = optimizer->state();
        if (pruner) c.masks = pruner->masks();
        const std::string file = checkpoints.save(c, best, midEpoch);
        obs->onCheckpoint({file, progress.epochsDone, progress.globalStep, best});
    }

    void resume(const std::string& path) {
        // Data parallel: rank 0 chooses the file (a folder's newest or best) and sets later ones aside; the
        // others read the file it chose (every rank must see it: a shared file system).
        std::string file = path;
        bool best = opt.resumeBest;
        if (dp) {
            if (rank == 0) file = findResumePoint(path, opt.resumeBest).file;
            at("the broadcast of the checkpoint rank 0 resumes from");
            comm->broadcast(file, 0);
            best = false;
        }
        ResumePoint point = findResumePoint(file, best, WeightLoadOptions{false, ""});
        // Every rank read the file rank 0 chose; its copy must hold the same progress and state (a file system
        // that is not shared, or a file replaced meanwhile, would give another one).
        if (dp) {
            at("the comparison of the ranks' resume points");
            const std::string difference = compareAcrossRanks(*comm, resumeAgreementFields(point.checkpoint));
            if (!difference.empty())
                throw CollectiveError("data parallel: resuming from " + point.file + ": " + difference);
        }
        for (const std::string& why : point.skipped)
            obs->onLog("resume: skipped a checkpoint that does not load: " + why);
        // Another project's checkpoint of the same shapes would load and train on the wrong classes or inputs;
        // refused before anything is moved aside.
        checkBelongsToProject(point.file, point.checkpoint.project.name, checkpointFingerprint(point.checkpoint),
                              projectFingerprint(project, data.classNames, data.normalization, data.vocabulary),
                              "To start a new run from its weights, use --init-from " + point.file +
                                  " (copies every tensor whose name and shape match)");
        for (const std::string& moved : checkpoints.setAsideLaterThan(point.checkpoint, point.file))
            obs->onLog("resume: moved a later checkpoint aside to " + moved);
        Checkpoint c = std::move(point.checkpoint);
        applyWeights(*model, c.weights);
        const Json& st = c.trainerState;
        optimizer->loadState(c.optimizerState, st.value("optimizer_steps", c.step));
        progress.epochsDone = c.epoch;
        progress.globalStep = c.step;
        progress.stepInEpoch = c.stepInEpoch;
        progress.readState(st);
        if (st.contains("divergence_start_loss") && st["divergence_start_loss"].is_number())
            divergence->setReferenceLoss(st["divergence_start_loss"].get<double>());
        // An fp16 run continues with its loss scale; a run saved in another precision starts from the initial one.
        if (lossScaler && st.contains("loss_scale"))
            lossScaler->restore(st["loss_scale"].get<float>(), st.value("loss_scale_good_steps", 0),
                                st.value("skipped_steps", int64_t(0)));
        if (st.contains("pruning")) {
            if (!pruner) pruner = std::make_unique<PruningMasks>(*model, pruningSettingsFromJson(st["pruning"]));
            pruner->restore(c.masks, st["pruning"]);
        }
        obs->onLog("resumed from " + point.file + " at epoch " + std::to_string(progress.epochsDone) + ", step " +
                   std::to_string(progress.globalStep));
    }

    // A new run from another checkpoint's weights, where name and shape match (transfer learning).
    void initFrom(const std::string& path) {
        const std::string file = resolveCheckpointPath(path);
        const InitFromReport r = initFromCheckpoint(*model, loadCheckpoint(file, WeightLoadOptions{false, ""}));
        obs->onLog("init-from " + file + ": copied " + std::to_string(r.copied.size()) + " tensor(s), skipped " +
                   std::to_string(r.skipped.size()) + "; a new run from step 0 with a fresh optimizer");
        for (const std::string& t : r.copied) obs->onLog("  copied " + t);
        for (const std::string& t : r.skipped) obs->onLog("  skipped " + t);
        for (const std::string& t : r.unused) obs->onLog("  not used (no parameter of that name) " + t);
        if (r.copied.empty())
            throw std::runtime_error(file +
                                     ": --init-from copied no tensor: no parameter of this model has a name and "
                                     "shape that the checkpoint holds");
    }

    // Files a split left out (bad images found while loading, or while training when streamed), said once each
    // (a file the streamed statistics sample found bad is not named again when training meets it); rank 0 alone.
    void logSkipped(const std::vector<SkippedFile>& files, const std::string& split) {
        if (files.empty() || rank != 0) return;
        std::vector<SkippedFile> fresh;
        for (const SkippedFile& f : files)
            if (skippedLogged.insert(f.path).second) fresh.push_back(f);
        for (const std::string& line : skippedFileLines(fresh, split)) obs->onLog(line);
    }
    std::set<std::string> skippedLogged;

    // Returns {loss, accuracy} over a split in evaluation mode.
    // Data parallel: each rank evaluates its shard of every batch, and the sums are reduced.
    std::pair<double, double> evaluate(const DataSplit& split) {
        DataLoader loader(split, ts().batchSize, false, ts().seed);
        if (dp) loader.setShard(rank, ranks);
        loader.startEpoch(0);
        Batch b, pending;
        Staged staged;
        bool havePending = loader.next(pending);
        if (havePending && pending.size > 0) staged = stager->stage(pending);
        double lossSum = 0;
        int64_t correct = 0, seen = 0;
        while (havePending) {
            if (stopRequested && !dp) break;  // data parallel: the ranks agree on stopping after validation
            std::swap(b, pending);
            const Staged cur = staged;
            if (b.size > 0) {
                const Tensor& logits = model->forward(cur.input, false);
                computeLoss(logits, b, cur.labels, false);
                const Backend::StepMetrics m = batchMetrics(logits, b, cur.labels);
                lossSum += m.lossSum;
                correct += m.correct;
                seen += b.size;
            }
            havePending = loader.next(pending);
            if (havePending && pending.size > 0) staged = stager->stage(pending);
        }
        logSkipped(loader.takeSkipped(), "validation");
        if (dp) {
            at("the validation sums");
            double sums[3] = {lossSum, static_cast<double>(correct), static_cast<double>(seen)};
            comm->allReduce(sums, 3, ReduceOp::Sum);
            lossSum = sums[0];
            correct = static_cast<int64_t>(sums[1]);
            seen = static_cast<int64_t>(sums[2]);
        }
        if (seen == 0) return {0, 0};
        return {lossSum / static_cast<double>(seen), static_cast<double>(correct) / static_cast<double>(seen)};
    }

    // Blocks while paused; returns false when a stop was requested. Data parallel, the other ranks' waits for
    // this one do not time out meanwhile (Communicator::setPaused).
    bool waitWhilePaused() {
        std::unique_lock lock(pauseMutex);
        const bool pausing = dp && pauseRequested && !stopRequested;
        if (pausing) comm->setPaused(true);
        pauseCv.wait(lock, [this] { return !pauseRequested || stopRequested; });
        if (pausing) comm->setPaused(false);
        return !stopRequested;
    }

    // A non-finite loss ends the run, naming the step, the first layer whose output is not finite and the
    // last good checkpoint.
    [[noreturn]] void reportNonFiniteLoss(double loss, int epoch) {
        const int bad = model->firstNonFiniteNode();
        std::ostringstream msg;
        msg << "step " << (progress.globalStep + 1) << " (epoch " << epoch << "): the loss is "
            << (std::isnan(loss) ? "NaN" : "infinite");
        msg << (bad >= 0 ? "; the first layer whose output is not finite is " + nodeLabel(bad)
                         : "; every layer output is finite, so the loss itself overflowed");
        if (!checkpoints.lastSaved().empty()) msg << "; the last good checkpoint is " << checkpoints.lastSaved();
        throw std::runtime_error(msg.str());
    }

    // A diverging run ends like a NaN one: the step, why, the layer with the largest gradient (the one the
    // explosion runs through) and what to change.
    [[noreturn]] void reportDivergence(const std::string& why, int epoch, double lr) {
        std::ostringstream msg;
        msg << "step " << (progress.globalStep + 1) << " (epoch " << epoch << "): " << why;
        double worst = -1;
        std::string where;
        for (const auto& np : model->namedParameters()) {
            if (!np.param->grad.defined()) continue;
            const double norm = std::sqrt(backend.sumSquares(np.param->grad.f32(), np.param->grad.numel()));
            if (!(norm <= worst)) {
                worst = norm;
                where = nodeLabel(np.node) + " (parameter '" + np.param->name + "', gradient norm " +
                        std::to_string(norm) + ")";
            }
        }
        if (!where.empty()) msg << "; the largest gradient is in layer " << where;
        msg << "; lower the learning rate (now " << lr << ") or set a gradient clip norm";
        if (!checkpoints.lastSaved().empty()) msg << "; the last good checkpoint is " << checkpoints.lastSaved();
        throw std::runtime_error(msg.str());
    }

    // Sums over an epoch's training steps.
    struct EpochTotals {
        double lossSum = 0;
        int64_t correct = 0, seen = 0;
    };

    // The steps of one epoch, from where the progress stands; true when the epoch's steps are all done,
    // false when a stop request or the step limit ended it early. Reaching the step limit sets reachedMaxSteps
    // (an epoch that ends exactly there still counts as done).
    bool trainEpoch(int epoch, EpochTotals& totals) {
        stager->startTrainEpoch(epoch);
        Batch batch, pending;
        // A checkpoint saved mid-epoch resumes after the batches it had seen.
        for (int64_t skip = 0; skip < progress.stepInEpoch && stager->nextTrainBatch(batch); ++skip) {
        }
        bool havePending = stager->nextTrainBatch(pending);
        Staged staged;
        if (havePending && pending.size > 0) staged = stager->stageTrain(pending);
        RateMeter rate;
        while (true) {
            if (dp) atStep(progress.globalStep + 1);
            if (stopAgreed()) break;
            // Data parallel, a stop that wakes a paused rank is agreed at the next step's start (every rank
            // takes this step, then stops together); a rank that is not paused meanwhile waits in the step's
            // first collective, so pausing one rank pauses the job.
            if (dp)
                (void)waitWhilePaused();
            else if (!waitWhilePaused())
                break;
            if (opt.maxSteps > 0 && progress.globalStep >= opt.maxSteps) {
                reachedMaxSteps = true;
                break;
            }
            if (!havePending) break;
            if (failStep > 0 && progress.globalStep + 1 == failStep && rank == failRank)
                throw std::runtime_error("step " + std::to_string(failStep) +
                                         ": failure injected by STRATA_TEST_FAIL_STEP (a test)");
            if (dp && stallStep > 0 && progress.globalStep + 1 == stallStep && rank == stallRank) stallForTest();
            std::swap(batch, pending);
            const Staged cur = staged;
            if (!dp && batch.size == 0) {
                // A streamed batch whose every file was bad: no step (the epoch still counts it).
                ++progress.stepInEpoch;
                havePending = stager->nextTrainBatch(pending);
                if (havePending && pending.size > 0) staged = stager->stageTrain(pending);
                continue;
            }
            const auto stepStart = Clock::now();
            // Data parallel: this rank's shard of a global batch of globalN samples (possibly none).
            const int64_t globalN = dp ? batch.globalSize : batch.size;
            const bool empty = batch.size == 0;
            const double lr = learningRateAt(ts(), progress.globalStep, stepsPerEpoch);
            const uint64_t seed = mixSeed(ts().seed, static_cast<uint64_t>(progress.globalStep));
            const Tensor* logits = empty ? nullptr : &model->forward(cur.input, true, seed, batch.first);
            const float lossScale = lossScaler ? lossScaler->scale() : 1.0f;
            // Sync: each rank's loss gradient is scaled by its share of the global batch, so the sum over the
            // ranks is the gradient of the global batch's mean loss.
            const float share = dp && !localSgd()
                                    ? static_cast<float>(static_cast<double>(batch.size) / static_cast<double>(globalN))
                                    : 1.0f;
            if (!empty) computeLoss(*logits, batch, cur.labels, true, lossScale * share);
            if (asyncMode()) localSamplesSinceAverage += static_cast<double>(batch.size);
            model->zeroGrad();
            if (buckets) buckets->beginStep();
            if (!empty)
                model->backward(dlogitsBuf.view(model->outputShape().withBatch(batch.size)));
            else if (!localSgd())
                model->idleStep(seed);
            // Every op reading this step's input has been called: the next batch may upload now.
            havePending = stager->nextTrainBatch(pending);
            if (havePending && pending.size > 0) staged = stager->stageTrain(pending);
            if (buckets) buckets->finish();
            // Async: the block now holds the previous step's summed gradients (none on the first step), applied
            // with that step's learning rate; this step's are summed while the next one computes.
            const bool haveGradients = !asyncGrads || asyncGrads->exchange(lr);
            const double stepLr = asyncGrads ? asyncGrads->previousLearningRate() : lr;
            const bool apply = haveGradients && (!lossScaler || unscaleGradients(lossScale));
            // The global gradient norm, for the divergence check, where clipping measures it anyway: measuring it
            // otherwise would add a second device wait to every step (the loss check covers those runs).
            double gradNorm = std::numeric_limits<double>::quiet_NaN();
            if (apply && !(localSgd() && empty)) {
                if (ts().clipNorm > 0) gradNorm = optimizer->clipGradNorm(ts().clipNorm);
                optimizer->step(stepLr);
            }
            if (localSgd()) {
                localSamplesSinceAverage += static_cast<double>(batch.size);
                if ((progress.globalStep + 1) % opt.localSgdSteps == 0) averageReplicas();
            }
            if (pruner && pruner->afterStep(progress.globalStep) &&
                progress.globalStep == pruner->settings().schedule.endStep)
                obs->onLog("pruning: the masks reached the final sparsity at step " +
                           std::to_string(progress.globalStep + 1));
            // The step's whole work has been called; now its metrics are read back. A non-finite
            // loss therefore stops the run after its update, but the layer outputs examined are
            // still this step's (the backward pass and the update do not write them).
            Backend::StepMetrics metrics;
            if (!empty) metrics = batchMetrics(*logits, batch, cur.labels);
            if (dp) {
                at("the sums of the step's loss and accuracy");
                double sums[2] = {metrics.lossSum, static_cast<double>(metrics.correct)};
                comm->allReduce(sums, 2, ReduceOp::Sum);
                metrics.lossSum = sums[0];
                metrics.correct = static_cast<int64_t>(sums[1]);
            }
            const double loss = metrics.lossSum / static_cast<double>(globalN);
            if (!std::isfinite(loss)) reportNonFiniteLoss(loss, epoch);
            if (std::string why = divergence->addLoss(loss); !why.empty()) reportDivergence(why, epoch, lr);
            if (std::isfinite(gradNorm))
                if (std::string why = divergence->addGradNorm(gradNorm); !why.empty()) reportDivergence(why, epoch, lr);
            if (!apply && haveGradients)
                obs->onLog("step " + std::to_string(progress.globalStep + 1) +
                           ": fp16 gradients are not finite at loss scale " + formatScale(lossScale) +
                           "; update skipped, loss scale now " + formatScale(lossScaler->scale()));
            ++progress.globalStep;
            ++progress.stepInEpoch;
            totals.lossSum += loss * static_cast<double>(globalN);
            totals.correct += metrics.correct;
            totals.seen += globalN;
            StepEvent ev;
            ev.epoch = epoch;
            ev.step = progress.globalStep;
            ev.stepInEpoch = progress.stepInEpoch;
            ev.stepsPerEpoch = stepsPerEpoch;
            ev.loss = loss;
            ev.accuracy = static_cast<double>(metrics.correct) / static_cast<double>(globalN);
            ev.learningRate = lr;
            ev.samplesPerSecond = rate.add(globalN);
            ev.ranks = ranks;
            if (buckets || asyncGrads) {
                const GradientBuckets::StepTimes& t = buckets ? buckets->lastStep() : asyncGrads->lastStep();
                ev.commSeconds = t.windowSeconds;
                ev.exposedCommSeconds = t.exposedSeconds;
                ev.hiddenFraction = t.hiddenFraction();
            }
            ev.computeSeconds = secondsSince(stepStart) - ev.exposedCommSeconds;
            ev.elapsedSeconds = secondsSince(runStart);
            if (lossScaler) {
                ev.lossScale = lossScale;
                ev.skipped = !apply;
                ev.skippedSteps = lossScaler->skippedSteps();
            }
            obs->onStep(ev);
            if (checkpointRequested.exchange(false)) checkpoint(false, true);
        }
        // Async: the last step's gradients are applied before the epoch (or the run) ends, on every rank alike
        // (the loop ends at the same step everywhere), so validation and checkpoints see every update.
        if (asyncGrads && asyncGrads->drain()) {
            if (ts().clipNorm > 0) optimizer->clipGradNorm(ts().clipNorm);
            optimizer->step(asyncGrads->previousLearningRate());
        }
        logSkipped(stager->takeTrainSkipped(), "training");
        return progress.stepInEpoch >= stepsPerEpoch;  // false: stopped mid-epoch
    }

    // End of an epoch: validation, the event, checkpoints. Returns false when the run should end (a stop
    // request during validation, or early stopping).
    bool finishEpoch(int epoch, const EpochTotals& totals, Clock::time_point epochStart, bool& earlyStopped) {
        const double trainSeconds = secondsSince(epochStart);
        EpochEvent ev;
        ev.epoch = epoch;
        ev.trainLoss = totals.seen ? totals.lossSum / static_cast<double>(totals.seen) : 0;
        ev.trainAccuracy = totals.seen ? static_cast<double>(totals.correct) / static_cast<double>(totals.seen) : 0;
        ev.samplesPerSecond = totals.seen / std::max(trainSeconds, 1e-9);
        ev.hasValidation = data.validation.count > 0;
        ev.ranks = ranks;
        if (ev.hasValidation) {
            std::tie(ev.valLoss, ev.valAccuracy) = evaluate(data.validation);
            if (stopAgreed()) return false;
        } else {
            ev.valLoss = ev.valAccuracy = std::numeric_limits<double>::quiet_NaN();
        }
        progress.epochsDone = epoch;
        progress.stepInEpoch = 0;
        progress.lastHasValidation = ev.hasValidation;
        progress.lastValLoss = ev.valLoss;
        progress.lastValAccuracy = ev.valAccuracy;
        if (ev.hasValidation && (!pruner || pruner->reachedFinalSparsity()))
            ev.best = progress.recordValidation(epoch, ev.valLoss, ev.valAccuracy,
                                                ts().earlyStoppingMetric == EarlyStoppingMetric::ValAcc);
        ev.seconds = secondsSince(epochStart);
        obs->onEpoch(ev);
        checkpoint(ev.best, false);
        if (checkpointRequested.exchange(false) && !checkpoints.enabled()) checkpoint(false, true);
        if (ts().earlyStoppingPatience > 0 && progress.epochsWithoutImprovement >= ts().earlyStoppingPatience) {
            obs->onLog("early stopping: no improvement in " + settingName(ts().earlyStoppingMetric) + " for " +
                       std::to_string(progress.epochsWithoutImprovement) + " epochs; best epoch " +
                       std::to_string(progress.bestEpoch));
            earlyStopped = true;
            return false;
        }
        return true;
    }

    // What the run may take on its device: the option, else the device's free memory now (0: unknown).
    uint64_t availableMemory() const {
        if (opt.availableMemoryBytes > 0) return opt.availableMemoryBytes;
        for (const DeviceInfo& d : backendRegistry().devices())
            if (d.device == backend.device()) return d.freeMemoryBytes;
        return 0;
    }

    // An allocation failed although the estimate fitted (other programs took memory, or a backend limit):
    // suggest a batch size.
    std::string outOfMemoryAdvice() const {
        const int64_t batch = ts().batchSize;
        int64_t fits = 0;
        try {
            const uint64_t available = availableMemory();
            if (available > 0)
                fits = largestBatchThatFits(project.graph, ts(), available, backend.device().type == DeviceType::Cpu,
                                            batch);
        } catch (const std::exception&) {
            // No estimate: the plain advice below.
        }
        const int64_t suggest = fits > 0 && fits < batch ? fits : std::max<int64_t>(1, batch / 2);
        return batch > 1 ? "; try batch size " + std::to_string(suggest) + " (now " + std::to_string(batch) + ")"
                         : "; even batch size 1 does not fit: make the model smaller";
    }

    // Refuses a run whose predicted peak memory exceeds what the device has free (MemoryEstimate.h).
    // Data parallel, a rank holds its share of the global batch (at most ceil(batch / ranks)), so that is what
    // must fit on its device.
    void checkMemory() {
        const uint64_t available = availableMemory();
        if (available == 0) return;  // unknown: nothing to compare with
        TrainingSettings local = ts();
        if (dp) local.batchSize = (ts().batchSize + ranks - 1) / ranks;
        const std::string share = dp ? "rank " + std::to_string(rank) + "'s share of the global batch " +
                                           std::to_string(ts().batchSize) + " over " + std::to_string(ranks) +
                                           " ranks, " + std::to_string(local.batchSize) + ": "
                                     : std::string();
        try {
            const MemoryEstimate e = checkTrainingFits(project.graph, local, backend.device().toString(), available);
            obs->onLog("memory: " + share + "about " +
                       formatBytes(e.totalOn(backend.device().type == DeviceType::Cpu)) + " of " +
                       formatBytes(available) + " available on " + backend.device().toString());
        } catch (const GraphError&) {
            // compile names the problem with its node and port.
        } catch (const std::runtime_error& e) {
            if (!dp) throw;
            throw std::runtime_error(share + e.what());
        }
    }

    // Rank 0's weights everywhere (fresh or resumed), then the mode: sync (BatchNorm over the global batch,
    // gradient buckets) or local SGD.
    void setUpDataParallel() {
        broadcastWeights();
        std::ostringstream msg;
        msg << "data parallel: rank " << rank << " of " << ranks << " (" << comm->name() << "), global batch "
            << ts().batchSize << ", ";
        if (localSgd()) {
            if (opt.localSgdSteps < 1)
                throw std::invalid_argument("training.local_sgd_steps: " + std::to_string(opt.localSgdSteps) +
                                            " (local SGD averages every K >= 1 steps)");
            msg << "local SGD: parameters averaged every " << opt.localSgdSteps << " step(s) and at each epoch's end";
        } else if (asyncMode()) {
            if (lossScaler)
                throw std::invalid_argument(
                    "training.dist_mode async: not with fp16 precision (the loss scale "
                    "of a step would be undone on the next one's gradients); use sync");
            if (opt.pruning || pruner)
                throw std::invalid_argument("training.dist_mode async: not with pruning; use sync");
            asyncGrads = std::make_unique<AsyncGradients>(*comm, *model);
            model->setGradientsReadyHook([this](int64_t) { asyncGrads->progress(); });
            msg << "async: each step applies the previous step's gradients, summed while it computed "
                   "(BatchNorm on each rank's own shard)";
        } else {
            replicaSum = std::make_unique<CommunicatorSum>(*comm);
            model->setReplicaSum(replicaSum.get());
            const Tensor& grads = model->packedGradients();
            const int64_t bucketBytes =
                opt.bucketBytes > 0 ? opt.bucketBytes
                                    : autoBucketBytes(grads.defined() ? grads.numel() * int64_t(sizeof(float)) : 0);
            buckets = std::make_unique<GradientBuckets>(*comm, *model, bucketBytes);
            model->setGradientsReadyHook([this](int64_t from) { buckets->ready(from); });
            msg << "sync: gradients summed in " << buckets->bucketCount() << " bucket(s) of up to "
                << formatBytes(static_cast<uint64_t>(bucketBytes)) << (opt.bucketBytes > 0 ? "" : " (automatic)")
                << " while backward runs";
        }
        obs->onLog(msg.str());
    }

    // Data, model, optimizer and batches, in that order; resumes when asked.
    void setUp() {
        obs->onLog("loading data");
        // An allocation that fails while reading becomes an error naming the data, not a bare library message
        // ("std::bad_alloc", "vector::_M_default_append").
        const DatasetSettings& ds = project.dataset;
        const std::string dataName = !ds.trainImages.empty() ? ds.trainImages
                                     : !ds.trainPath.empty() ? ds.trainPath
                                                             : std::string("the synthetic data set");
        try {
            data = loadDataset(ds, opt.projectPath, Streaming::Allowed);
        } catch (const std::bad_alloc&) {
            throw std::runtime_error(dataName +
                                     ": out of memory while loading the data set (use train_limit, or "
                                     "a smaller data set)");
        } catch (const std::length_error& e) {
            throw std::runtime_error(dataName + ": the data set is too large to hold in memory (" + e.what() + ")");
        }
        obs->onLog(data.description);
        for (const char* split : {"training", "validation"}) {
            std::vector<SkippedFile> files;
            for (const SkippedFile& f : data.skipped)
                if (f.split == split || (f.split.empty() && split == std::string("training"))) files.push_back(f);
            logSkipped(files, split);
        }
        if (dp) {
            checkRanksAgree();
            // A GPU's gradients are summed where they live: NCCL over this communicator (gpu/), made by
            // every rank at this point.
            if (!backend.device().isCpu()) {
                at("setting up the device communicator (NCCL)");
                deviceComm = makeDeviceCommunicator(*comm, backend);
                comm = deviceComm.get();
                comm->setTimeout(opt.collectiveTimeoutSeconds);
            }
        }
        checkData();
        model = compile(project.graph, backend, ts().seed);
        // Stop ends even a long step between two layers; data parallel, only between steps, where the ranks
        // agree on it (a rank leaving mid-step would leave the others in a collective).
        if (!dp) model->setInterruptFlag(&stopRequested);
        validateSetup();
        setUpPrecision();
        optimizer = std::make_unique<Optimizer>(*model, ts());
        // Data parallel: rank 0 alone writes checkpoints.
        checkpoints =
            CheckpointPolicy(rank != 0                    ? std::string()
                             : ts().checkpointDir.empty() ? opt.runFolder
                                                          : resolveDatasetPath(opt.projectPath, ts().checkpointDir));
        if (checkpoints.enabled()) obs->onLog("checkpoints go to " + checkpoints.folder());
        for (const std::string& line : checkpoints.prepare()) obs->onLog(line);
        divergence = std::make_unique<DivergenceMonitor>(numClasses);
        if (!opt.resumeFrom.empty() && !opt.initFrom.empty())
            throw std::invalid_argument("--init-from starts a new run and --resume continues one: give one of them");
        if (!opt.resumeFrom.empty())
            resume(opt.resumeFrom);
        else if (!opt.initFrom.empty())
            initFrom(opt.initFrom);
        else if (!opt.initialWeights.empty())
            applyWeights(*model, opt.initialWeights);
        if (dp) setUpDataParallel();
        allocateLossBuffers();
        stager = std::make_unique<BatchStager>(backend, model->inputShape(), ts().batchSize);
        if (dp) stager->setShard(rank, ranks);
        stager->setUpTraining(data.train, trainingAugmentation(project.dataset, data.normalization), ts().seed,
                              opt.residentData, opt.residentDataMaxBytes,
                              [this](const std::string& line) { obs->onLog(line); });
        stepsPerEpoch = stager->trainBatchesPerEpoch();
        if (progress.stepInEpoch >= stepsPerEpoch && progress.stepInEpoch > 0)
            throw std::runtime_error("the checkpoint was saved at step " + std::to_string(progress.stepInEpoch) +
                                     " of an epoch, but an epoch of this data set has " +
                                     std::to_string(stepsPerEpoch) + " steps");
        if (opt.pruning && !pruner) {
            const PruningSettings s = pruningForRun(*opt.pruning, stepsPerEpoch * ts().epochs);
            pruner = std::make_unique<PruningMasks>(*model, s);
            obs->onLog(std::string("pruning: ") + pruningScopeName(s.scope) + " magnitude pruning to sparsity " +
                       formatScale(s.schedule.finalSparsity) + " over steps " + std::to_string(s.schedule.beginStep) +
                       " to " + std::to_string(s.schedule.endStep) + ", every " + std::to_string(s.schedule.frequency) +
                       " steps");
        }
    }

    bool run() {
        runStart = Clock::now();
        try {
            if (dp) agreeOnRun();
            checkBackendFor(backend, ts());
            checkMemory();
            setUp();
            telemetryTap.forwardTo(obs);
            TelemetrySampler sampler(backendRegistry().telemetry(backend.device()), &telemetryTap,
                                     opt.telemetryIntervalMs);
            obs->onTrainingStarted();
            bool earlyStopped = false;
            try {
                while (progress.epochsDone < ts().epochs && !reachedMaxSteps && !stopAgreed()) {
                    const int epoch = progress.epochsDone + 1;
                    const auto epochStart = Clock::now();
                    EpochTotals totals;
                    const bool whole = trainEpoch(epoch, totals);
                    if (localSgd()) averageReplicas();       // every rank validates and saves the same weights
                    if (asyncMode()) averageReplicas(true);  // BatchNorm's running statistics
                    if (!whole) break;
                    if (!finishEpoch(epoch, totals, epochStart, earlyStopped)) break;
                }
            } catch (const ModelInterrupted&) {
                // Stop arrived inside a step (or a validation batch): that step is dropped before its update,
                // so the weights and progress are those of the last whole step.
            }
            backend.synchronize();
            // A run stopped mid-epoch (Stop, the step limit) keeps the weights it has as it ends.
            if (checkpoints.enabled() && progress.stepInEpoch > 0) checkpoint(false, true);
            FinishedEvent fin;
            fin.stoppedByUser = stopRequested;
            fin.earlyStopped = earlyStopped;
            fin.epochsCompleted = progress.epochsDone;
            fin.bestEpoch = progress.bestEpoch;
            fin.bestValLoss = progress.bestValLoss;
            fin.bestValAccuracy = progress.bestValAccuracy;
            fin.seconds = secondsSince(runStart);
            obs->onFinished(fin);
            return true;
        } catch (const CollectiveError& e) {
            // Every rank raised it at the same point: each ends on its own.
            obs->onError(e.what());
            return false;
        } catch (const std::exception& e) {
            // Let queued work finish before reporting: with deferred index checks a device error flag may
            // still be armed by this run, and must not surface later in someone else's call.
            try {
                backend.synchronize();
            } catch (const std::exception&) {
                // Already failing: the first error is the one to report.
            }
            std::string message = e.what();
            // std::bad_alloc outside a layer (batch staging, the loss, the optimizer's host side) says only
            // "std::bad_alloc": said in words, with the advice an out-of-memory error gets.
            const bool hostAlloc = dynamic_cast<const std::bad_alloc*>(&e) != nullptr;
            if (hostAlloc) message = "out of host memory while training (std::bad_alloc)";
            if (hostAlloc || dynamic_cast<const OutOfMemoryError*>(&e)) message += outOfMemoryAdvice();
            obs->onError(message);
            // Data parallel: the other ranks may wait in a collective this rank will never join; end the job.
            if (dp) comm->abortJob(message);
            return false;
        }
    }
};

int64_t autoBucketBytes(int64_t gradientBytes) {
    return std::clamp<int64_t>(gradientBytes / 8, int64_t(256) << 10, int64_t(25) << 20);
}

Trainer::Trainer(Project project, Backend& backend, TrainingObserver* observer, TrainerOptions options)
    : m_impl(std::make_unique<Impl>(std::move(project), backend, observer, std::move(options))) {}

Trainer::~Trainer() = default;

bool Trainer::run() { return m_impl->run(); }

void Trainer::requestPause() {
    std::lock_guard lock(m_impl->pauseMutex);
    m_impl->pauseRequested = true;
}

void Trainer::requestResume() {
    {
        std::lock_guard lock(m_impl->pauseMutex);
        m_impl->pauseRequested = false;
    }
    m_impl->pauseCv.notify_all();
}

void Trainer::requestStop() {
    {
        // Under the lock, so a thread about to wait in waitWhilePaused cannot miss the wake-up.
        std::lock_guard lock(m_impl->pauseMutex);
        m_impl->stopRequested = true;
    }
    m_impl->pauseCv.notify_all();
}

void Trainer::requestCheckpoint() { m_impl->checkpointRequested = true; }

bool Trainer::paused() const {
    std::lock_guard lock(m_impl->pauseMutex);
    return m_impl->pauseRequested;
}

}  // namespace strata
