// Trainer: the start-up (data, model, the ranks' agreement, resume), epochs of steps, validation, events,
// checkpoints, early stopping and the requests a GUI or a signal handler makes between steps. One step is
// TrainingStep's; batches come from a BatchStager, checkpoint files and run progress from CheckpointPolicy.
#include "core/train/Trainer.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <limits>
#include <new>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "core/backend/Backend.h"
#include "core/backend/BackendRegistry.h"
#include "core/data/DataLoader.h"
#include "core/data/Dataset.h"
#include "core/dist/Communicator.h"
#include "core/graph/Model.h"
#include "core/graph/Task.h"
#include "core/graph/Transfer.h"
#include "core/train/BackendOptionsFor.h"
#include "core/train/BatchLoss.h"
#include "core/train/BatchStager.h"
#include "core/train/Checkpoint.h"
#include "core/train/CheckpointPolicy.h"
#include "core/train/DataCheck.h"
#include "core/train/DataParallel.h"
#include "core/train/LrSchedule.h"
#include "core/train/MemoryEstimate.h"
#include "core/train/Optimizer.h"
#include "core/train/ParameterHistograms.h"
#include "core/train/Precision.h"
#include "core/train/ProjectFingerprint.h"
#include "core/train/RankGroup.h"
#include "core/train/RunAgreement.h"
#include "core/train/StepHooks.h"
#include "core/train/TaskMetrics.h"
#include "core/train/TelemetrySampler.h"
#include "core/train/TrainingStep.h"

namespace strata {

using Clock = std::chrono::steady_clock;
using Staged = BatchStager::Staged;

namespace {

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

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

// The requests a GUI or a signal handler makes, from any thread; the loop checks them between steps.
class Requests {
public:
    void pause() {
        std::lock_guard lock(m_mutex);
        m_pause = true;
    }
    void resume() {
        {
            std::lock_guard lock(m_mutex);
            m_pause = false;
        }
        m_cv.notify_all();
    }
    void stop() {
        {
            // Under the lock, so a thread about to wait in waitWhilePaused cannot miss the wake-up.
            std::lock_guard lock(m_mutex);
            m_stop = true;
        }
        m_cv.notify_all();
    }
    void checkpoint() { m_checkpoint = true; }

    bool paused() const {
        std::lock_guard lock(m_mutex);
        return m_pause;
    }
    // Also the model's interrupt flag, and set when another rank stops (RankGroup::agreeOnStop).
    std::atomic<bool>& stopFlag() { return m_stop; }
    bool stopped() const { return m_stop; }
    // Whether a checkpoint was asked for since the last call.
    bool takeCheckpoint() { return m_checkpoint.exchange(false); }

    // Blocks while paused; returns false when a stop was requested. `pausing` is told when a wait starts and
    // ends (data parallel: the other ranks' waits for this one do not time out meanwhile).
    template <typename F>
    bool waitWhilePaused(F pausing) {
        std::unique_lock lock(m_mutex);
        const bool waits = m_pause && !m_stop;
        if (waits) pausing(true);
        m_cv.wait(lock, [this] { return !m_pause || m_stop; });
        if (waits) pausing(false);
        return !m_stop;
    }

private:
    std::atomic<bool> m_stop{false};
    std::atomic<bool> m_checkpoint{false};
    mutable std::mutex m_mutex;
    std::condition_variable m_cv;
    bool m_pause = false;
};

}  // namespace

struct Trainer::Impl {
    Project project;
    Backend& backend;
    TrainingObserver* obs;
    TrainerOptions opt;

    Requests requests;

    DatasetBundle data;
    std::unique_ptr<Model> model;
    std::unique_ptr<Optimizer> optimizer;
    std::unique_ptr<BatchStager> stager;
    std::unique_ptr<BatchLoss> batchLoss;
    std::unique_ptr<Precision> precision;
    std::unique_ptr<PruningHook> pruning;  // a pruning run only
    std::unique_ptr<DivergenceHook> divergence;
    std::unique_ptr<HistogramHook> histograms;  // with opt.histogramEvery, rank 0
    std::unique_ptr<std::ofstream> histogramFile;
    std::unique_ptr<TrainingStep> step;

    RunProgress progress;  // saved in checkpoints
    CheckpointPolicy checkpoints{""};
    int64_t stepsPerEpoch = 0;
    bool reachedMaxSteps = false;
    Clock::time_point runStart;

    RankGroup ranks;  // this process's place in a data-parallel job (rank 0 of 1 alone)
    std::unique_ptr<DataParallel> parallel;

    Impl(Project p, Backend& b, TrainingObserver* o, TrainerOptions op)
        : project(std::move(p)),
          backend(b),
          obs(o ? o : &g_nullObserver),
          opt(std::move(op)),
          ranks(opt.communicator, opt.dataParallelWithOneRank, opt.collectiveTimeoutSeconds) {}

    bool dp() const { return ranks.dataParallel(); }

    // Data parallel: every rank compares what shapes its run (RunAgreement.h) before the first collective that
    // depends on it; a difference stops every rank here, naming the rank, the setting and both values.
    void agreeOnRun() {
        ranks.at("the start-up comparison of the ranks' settings");
        const std::string difference = compareAcrossRanks(ranks.comm(), runAgreementFields(project, opt));
        if (!difference.empty()) throw CollectiveError("data parallel: " + difference);
    }

    // Whether the run stops here: a request on this process, or data parallel on any rank (RankGroup).
    bool stopAgreed() {
        return ranks.agreeOnStop(requests.stopFlag(), opt.gatherTelemetry && opt.telemetryIntervalMs > 0, *obs);
    }

    // Data parallel: every rank must train on the same data (the project and options were compared before,
    // agreeOnRun); a difference stops every rank at start, naming the ranks.
    void checkRanksAgree() {
        ranks.at("the comparison of the ranks' data");
        uint64_t dataHash = fnv1a64(&data.train.count, sizeof data.train.count);
        for (const DataSplit* split : {&data.train, &data.validation}) {
            dataHash = fnv1a64(split->inputs.data(), split->inputs.size() * sizeof(float), dataHash);
            if (split->streamed()) {
                const uint64_t files = split->source->fingerprint();
                dataHash = fnv1a64(&files, sizeof files, dataHash);
            }
            dataHash = fnv1a64(split->labels.data(), split->labels.size() * sizeof(int32_t), dataHash);
            dataHash = fnv1a64(split->targets.data(), split->targets.size() * sizeof(float), dataHash);
        }
        auto list = [](const std::vector<int>& r) {
            std::string s;
            for (int x : r) s += (s.empty() ? "" : ", ") + std::to_string(x);
            return s;
        };
        const std::vector<int> dataDiffers = ranks.ranksDiffering(dataHash);
        if (!dataDiffers.empty())
            throw CollectiveError("data parallel: the data set loaded by rank(s) " + list(dataDiffers) +
                                  " differs from rank 0's: every rank must read the same files");
    }

    const TrainingSettings& ts() const { return project.training; }

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
        checkTaskSettings(project.dataset, s);
    }

    Json trainerState() const {
        Json j;
        progress.writeState(j);
        j["optimizer_steps"] = optimizer->steps();
        precision->writeState(j);
        if (pruning) j["pruning"] = pruning->masks().state();
        if (divergence && divergence->monitor().startLoss() > 0)
            j["divergence_start_loss"] = divergence->monitor().startLoss();
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
        c.targetNormalization = data.targetNormalization;
        c.classNames = data.classNames;
        c.vocabulary = data.vocabulary;
        c.tokenizerModel = data.tokenizerModel;
        c.trainerState = trainerState();
        c.weights = modelWeights(*model);
        c.optimizerState = optimizer->state();
        if (pruning) c.masks = pruning->masks().masks();
        const std::string file = checkpoints.save(c, best, midEpoch);
        obs->onCheckpoint({file, progress.epochsDone, progress.globalStep, best});
    }

    void resume(const std::string& path) {
        // Data parallel: rank 0 chooses the file (a folder's newest or best) and sets later ones aside; the
        // others read the file it chose (every rank must see it: a shared file system).
        std::string file = path;
        bool best = opt.resumeBest;
        if (dp()) {
            if (ranks.rank() == 0) file = findResumePoint(path, opt.resumeBest).file;
            ranks.at("the broadcast of the checkpoint rank 0 resumes from");
            ranks.comm().broadcast(file, 0);
            best = false;
        }
        ResumePoint point = findResumePoint(file, best, WeightLoadOptions{false, ""});
        // Every rank read the file rank 0 chose; its copy must hold the same progress and state (a file system
        // that is not shared, or a file replaced meanwhile, would give another one).
        if (dp()) {
            ranks.at("the comparison of the ranks' resume points");
            const std::string difference = compareAcrossRanks(ranks.comm(), resumeAgreementFields(point.checkpoint));
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
            divergence->monitor().setReferenceLoss(st["divergence_start_loss"].get<double>());
        precision->readState(st);
        if (st.contains("pruning")) {
            if (!pruning) pruning = makePruning(pruningSettingsFromJson(st["pruning"]));
            pruning->masks().restore(c.masks, st["pruning"]);
        }
        obs->onLog("resumed from " + point.file + " at epoch " + std::to_string(progress.epochsDone) + ", step " +
                   std::to_string(progress.globalStep));
    }

    // A new run from another checkpoint's or an ONNX file's weights, where name and shape match (transfer
    // learning). What did not match is listed, in the summary line and one per line after it.
    void initFrom(const std::string& path) {
        WeightSource source;
        if (isOnnxPath(path)) {
            if (!opt.readModelWeights)
                throw std::runtime_error(path +
                                         ": --init-from an ONNX file needs the ONNX reader, which strata-train and "
                                         "the workbench pass in (TrainerOptions::readModelWeights)");
            source = opt.readModelWeights(path);
        } else {
            const std::string file = resolveCheckpointPath(path);
            source = checkpointWeightSource(loadCheckpoint(file, WeightLoadOptions{false, ""}), file);
        }
        const InitFromReport r = initFromWeights(*model, source);
        obs->onLog("init-from " + source.file + ": " + r.summary(source.file) +
                   "; a new run from step 0 with a fresh optimizer");
        for (const std::string& t : r.copied) obs->onLog("  copied " + t);
        for (const std::string& t : r.skipped) obs->onLog("  not matched " + t);
        for (const std::string& t : r.unused) obs->onLog("  not used (no parameter of that name) " + t);
        if (r.copied.empty())
            throw std::runtime_error(source.file + ": --init-from copied no tensor: no parameter of this model has a " +
                                     "name and shape that the " + source.kind + " holds" +
                                     (source.noMatchHint.empty() ? std::string() : "; " + source.noMatchHint));
    }

    static bool isOnnxPath(const std::string& path) {
        std::string lower;
        for (char c : path) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        return lower.size() > 5 && lower.compare(lower.size() - 5, 5, ".onnx") == 0;
    }

    // Files a split left out (bad images found while loading, or while training when streamed), said once each
    // (a file the streamed statistics sample found bad is not named again when training meets it); rank 0 alone.
    void logSkipped(const std::vector<SkippedFile>& files, const std::string& split) {
        if (files.empty() || ranks.rank() != 0) return;
        std::vector<SkippedFile> fresh;
        for (const SkippedFile& f : files)
            if (skippedLogged.insert(f.path).second) fresh.push_back(f);
        for (const std::string& line : skippedFileLines(fresh, split)) obs->onLog(line);
    }
    std::set<std::string> skippedLogged;

    bool classes() const { return taskHasClasses(project.dataset.task); }

    // Returns {loss, accuracy} over a split in evaluation mode; tasks other than classification: {loss, the task's
    // score}, and every metric of the task in `metrics`.
    // Data parallel: each rank evaluates its shard of every batch, and the sums are reduced; the task's metrics
    // take every rank's outputs of each batch (gatherTaskRows), so they are the whole split's on every rank.
    std::pair<double, double> evaluate(const DataSplit& split, std::vector<NamedMetric>* metrics = nullptr,
                                       ImageStrip* strip = nullptr) {
        DataLoader loader(split, ts().batchSize, false, ts().seed,
                          validationAugmentation(project.dataset, data.normalization));
        std::optional<TaskMetrics> task;
        std::vector<float> outputs;
        if (!classes())
            task.emplace(project.dataset.task, model->outputShape().numel(), data.classNames, data.targetNormalization,
                         project.dataset.threshold, data.normalization);
        if (dp()) loader.setShard(ranks.rank(), ranks.size());
        loader.startEpoch(0);
        Batch b, pending;
        Staged staged;
        bool havePending = loader.next(pending);
        if (havePending && pending.size > 0) staged = stager->stage(pending);
        double lossSum = 0;
        int64_t correct = 0, seen = 0;
        while (havePending) {
            if (requests.stopped() && !dp()) break;  // data parallel: the ranks agree on stopping after validation
            std::swap(b, pending);
            const Staged cur = staged;
            if (b.size > 0) {
                const Tensor& logits = model->forward(cur.input, false);
                batchLoss->compute(logits, b, cur.labels, false);
                const Backend::StepMetrics m = batchLoss->metrics(logits, b, cur.labels);
                if (task) {
                    outputs.resize(static_cast<size_t>(b.size * model->outputShape().numel()));
                    backend.copyToHost(outputs.data(), logits.raw(), outputs.size() * sizeof(float));
                    if (!dp()) task->add(outputs.data(), b.targets.data(), b.size);
                    if (strip && project.dataset.task == TaskKind::ImageToImage) addToStrip(*strip, b, outputs);
                }
                lossSum += m.lossSum;
                correct += m.correct;
                seen += b.size;
            }
            // Every rank joins, also one whose shard of this batch is empty.
            if (task && dp()) gatherTaskRows(b, outputs, *task);
            havePending = loader.next(pending);
            if (havePending && pending.size > 0) staged = stager->stage(pending);
        }
        logSkipped(loader.takeSkipped(), "validation");
        if (dp()) {
            double sums[3] = {lossSum, static_cast<double>(correct), static_cast<double>(seen)};
            ranks.sum(sums, 3, "the validation sums");
            lossSum = sums[0];
            correct = static_cast<int64_t>(sums[1]);
            seen = static_cast<int64_t>(sums[2]);
        }
        if (seen == 0) return {0, 0};
        if (task) {
            if (metrics) *metrics = task->all();
            return {lossSum / static_cast<double>(seen), task->score()};
        }
        return {lossSum / static_cast<double>(seen), static_cast<double>(correct) / static_cast<double>(seen)};
    }

    // Data parallel: adds every rank's rows of batch `b` (outputs and targets) to `task`, in the global batch's
    // order (the shards are contiguous, in rank order), so that each rank's TaskMetrics holds what one process's
    // would: the best thresholds need every output of the split, and sums taken in one order give the same
    // rounding. One all-reduce of doubles per batch: each rank fills its own slot (its row count, then room for
    // its shard's full count of rows) and leaves the others zero.
    void gatherTaskRows(const Batch& b, const std::vector<float>& outputs, TaskMetrics& task) {
        const int64_t per = model->outputShape().numel();
        const int n = ranks.size();
        std::vector<int64_t> capacity(static_cast<size_t>(n)), slot(static_cast<size_t>(n) + 1, n);
        for (int r = 0; r < n; ++r) {
            capacity[size_t(r)] = batchShard(b.globalSize, r, n).count;
            slot[size_t(r) + 1] = slot[size_t(r)] + 2 * capacity[size_t(r)] * per;
        }
        const auto me = static_cast<size_t>(ranks.rank());
        if (b.size > capacity[me] || static_cast<int64_t>(b.targets.size()) < b.size * per)
            throw std::logic_error("validation batch: " + std::to_string(b.size) + " rows for a shard of " +
                                   std::to_string(capacity[me]) + " with " + std::to_string(per) + " outputs each");
        std::vector<double> buf(static_cast<size_t>(slot[size_t(n)]), 0.0);
        buf[me] = static_cast<double>(b.size);
        const int64_t values = b.size * per;
        std::copy_n(outputs.data(), values, buf.begin() + slot[me]);
        std::copy_n(b.targets.data(), values, buf.begin() + slot[me] + capacity[me] * per);
        ranks.sum(buf.data(), static_cast<int64_t>(buf.size()), "the validation outputs of the task's metrics");
        std::vector<float> out, target;
        for (int r = 0; r < n; ++r) {
            const auto rows = static_cast<int64_t>(buf[size_t(r)]);
            if (rows == 0) continue;
            const auto from = buf.begin() + slot[size_t(r)];
            out.assign(from, from + rows * per);
            target.assign(from + capacity[size_t(r)] * per, from + (capacity[size_t(r)] + rows) * per);
            task.add(out.data(), target.data(), rows);
        }
    }

    // Blocks while paused; returns false when a stop was requested. Data parallel, the other ranks' waits for
    // this one do not time out meanwhile (Communicator::setPaused).
    bool waitWhilePaused() {
        return requests.waitWhilePaused([this](bool paused) { ranks.setPaused(paused); });
    }

    // The strip's images from a validation batch, until it holds kStripImages, as raw pixels.
    void addToStrip(ImageStrip& strip, const Batch& b, const std::vector<float>& outputs) const {
        constexpr int kStripImages = 4;
        const Shape& shape = model->outputShape();
        const int64_t per = shape.numel();
        if (strip.count == 0) strip.dims = shape.dims();
        const int64_t take = std::min<int64_t>(kStripImages - strip.count, b.size);
        if (take <= 0 || static_cast<int64_t>(b.inputs.size()) < take * per) return;
        auto append = [&](std::vector<float>& to, const float* from) {
            std::vector<float> v(from, from + take * per);
            undoNormalization(v, data.normalization);
            to.insert(to.end(), v.begin(), v.end());
        };
        append(strip.inputs, b.inputs.data());
        append(strip.outputs, outputs.data());
        append(strip.targets, b.targets.data());
        strip.count += static_cast<int>(take);
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
            if (dp()) ranks.atStep(progress.globalStep + 1);
            if (stopAgreed()) break;
            // Data parallel, a stop that wakes a paused rank is agreed at the next step's start (every rank
            // takes this step, then stops together); a rank that is not paused meanwhile waits in the step's
            // first collective, so pausing one rank pauses the job.
            if (dp())
                (void)waitWhilePaused();
            else if (!waitWhilePaused())
                break;
            if (opt.maxSteps > 0 && progress.globalStep >= opt.maxSteps) {
                reachedMaxSteps = true;
                break;
            }
            if (!havePending) break;
            ranks.injectTestFaults(progress.globalStep + 1);
            std::swap(batch, pending);
            const Staged cur = staged;
            if (!dp() && batch.size == 0) {
                // A streamed batch whose every file was bad: no step (the epoch still counts it).
                ++progress.stepInEpoch;
                havePending = stager->nextTrainBatch(pending);
                if (havePending && pending.size > 0) staged = stager->stageTrain(pending);
                continue;
            }
            const auto stepStart = Clock::now();
            const StepInput in{.batch = batch,
                               .input = cur.input,
                               .labels = cur.labels,
                               .index = progress.globalStep,
                               .epoch = epoch,
                               .learningRate = learningRateAt(ts(), progress.globalStep, stepsPerEpoch),
                               .seed = stepSeed(ts().seed, progress.globalStep)};
            // Once every op reading this step's input has been called, the next batch may upload.
            const StepOutcome out = step->run(in, [&] {
                havePending = stager->nextTrainBatch(pending);
                if (havePending && pending.size > 0) staged = stager->stageTrain(pending);
            });
            if (!out.applied && out.haveGradients)
                obs->onLog(precision->skippedStepLine(progress.globalStep + 1, out.lossScale));
            ++progress.globalStep;
            ++progress.stepInEpoch;
            totals.lossSum += out.loss * static_cast<double>(out.samples);
            totals.correct += out.metrics.correct;
            totals.seen += out.samples;
            StepEvent ev;
            ev.epoch = epoch;
            ev.step = progress.globalStep;
            ev.stepInEpoch = progress.stepInEpoch;
            ev.stepsPerEpoch = stepsPerEpoch;
            ev.loss = out.loss;
            ev.accuracy = classes() ? static_cast<double>(out.metrics.correct) / static_cast<double>(out.samples)
                                    : std::numeric_limits<double>::quiet_NaN();
            ev.learningRate = in.learningRate;
            ev.samplesPerSecond = rate.add(out.samples);
            ev.ranks = ranks.size();
            if (const GradientBuckets::StepTimes* t = parallel->communication()) {
                ev.commSeconds = t->windowSeconds;
                ev.exposedCommSeconds = t->exposedSeconds;
                ev.hiddenFraction = t->hiddenFraction();
            }
            ev.computeSeconds = secondsSince(stepStart) - ev.exposedCommSeconds;
            ev.elapsedSeconds = secondsSince(runStart);
            precision->describeStep(ev, out.lossScale, out.applied);
            obs->onStep(ev);
            if (requests.takeCheckpoint()) checkpoint(false, true);
        }
        // Async: the last step's gradients; local SGD and async: the replicas' average.
        parallel->endEpoch();
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
        ev.trainAccuracy = !classes()    ? std::numeric_limits<double>::quiet_NaN()
                           : totals.seen ? static_cast<double>(totals.correct) / static_cast<double>(totals.seen)
                                         : 0;
        ev.samplesPerSecond = totals.seen / std::max(trainSeconds, 1e-9);
        ev.hasValidation = data.validation.count > 0;
        ev.ranks = ranks.size();
        if (ev.hasValidation) {
            std::tie(ev.valLoss, ev.valAccuracy) = evaluate(data.validation, &ev.valMetrics, &ev.strip);
            if (stopAgreed()) return false;
        } else {
            ev.valLoss = ev.valAccuracy = std::numeric_limits<double>::quiet_NaN();
        }
        progress.epochsDone = epoch;
        progress.stepInEpoch = 0;
        progress.lastHasValidation = ev.hasValidation;
        progress.lastValLoss = ev.valLoss;
        progress.lastValAccuracy = ev.valAccuracy;
        if (ev.hasValidation && (!pruning || pruning->masks().reachedFinalSparsity()))
            ev.best = progress.recordValidation(epoch, ev.valLoss, ev.valAccuracy,
                                                ts().earlyStoppingMetric == EarlyStoppingMetric::ValAcc);
        ev.seconds = secondsSince(epochStart);
        obs->onEpoch(ev);
        checkpoint(ev.best, false);
        if (requests.takeCheckpoint() && !checkpoints.enabled()) checkpoint(false, true);
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
        if (dp()) local.batchSize = (ts().batchSize + ranks.size() - 1) / ranks.size();
        const std::string share = dp() ? "rank " + std::to_string(ranks.rank()) + "'s share of the global batch " +
                                             std::to_string(ts().batchSize) + " over " + std::to_string(ranks.size()) +
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
            if (!dp()) throw;
            throw std::runtime_error(share + e.what());
        }
    }

    // Rank 0's weights everywhere (fresh or resumed), then the mode (DataParallel.h); a run of one process gets
    // the strategy that does nothing.
    void setUpDataParallel() {
        if (dp() && opt.distMode == DistMode::LocalSgd && opt.localSgdSteps < 1)
            throw std::invalid_argument("training.local_sgd_steps: " + std::to_string(opt.localSgdSteps) +
                                        " (local SGD averages every K >= 1 steps)");
        DataParallelSettings s;
        s.localSgdSteps = opt.distMode == DistMode::LocalSgd ? opt.localSgdSteps : 0;
        s.async = opt.distMode == DistMode::Async;
        s.bucketBytes = opt.bucketBytes;
        s.globalBatch = ts().batchSize;
        s.clipNorm = ts().clipNorm;
        s.scalesLoss = precision->scalesLoss();
        s.prunes = opt.pruning || pruning;
        parallel = makeDataParallel(ranks, *model, *optimizer, s);
        if (dp()) obs->onLog(parallel->description());
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
        if (dp()) {
            checkRanksAgree();
            if (!backend.device().isCpu()) ranks.useDeviceCommunicator(backend);
        }
        if (opt.replaceHead) {
            if (!opt.resumeFrom.empty())
                throw std::invalid_argument("--replace-head starts from a new head; --resume continues a run");
            obs->onLog(replaceHead(project.graph, data.numClasses).summary());
        }
        checkData();
        model = compile(project.graph, backend, ts().seed);
        // Stop ends even a long step between two layers; data parallel, only between steps, where the ranks
        // agree on it (a rank leaving mid-step would leave the others in a collective).
        if (!dp()) model->setInterruptFlag(&requests.stopFlag());
        validateSetup();
        precision = std::make_unique<Precision>(backend, opt.initialLossScale, opt.lossScaleGrowthInterval);
        if (const std::string line = precision->description(); !line.empty()) obs->onLog(line);
        optimizer = std::make_unique<Optimizer>(*model, ts());
        // Data parallel: rank 0 alone writes checkpoints.
        checkpoints =
            CheckpointPolicy(ranks.rank() != 0            ? std::string()
                             : ts().checkpointDir.empty() ? opt.runFolder
                                                          : resolveDatasetPath(opt.projectPath, ts().checkpointDir));
        if (checkpoints.enabled()) obs->onLog("checkpoints go to " + checkpoints.folder());
        for (const std::string& line : checkpoints.prepare()) obs->onLog(line);
        divergence = std::make_unique<DivergenceHook>(*model, project.graph, data.numClasses,
                                                      [this] { return checkpoints.lastSaved(); });
        if (!opt.resumeFrom.empty() && !opt.initFrom.empty())
            throw std::invalid_argument("--init-from starts a new run and --resume continues one: give one of them");
        if (!opt.resumeFrom.empty())
            resume(opt.resumeFrom);
        else if (!opt.initFrom.empty())
            initFrom(opt.initFrom);
        else if (!opt.initialWeights.empty())
            applyWeights(*model, opt.initialWeights);
        else if (!ts().initFrom.empty())
            initFrom(resolveDatasetPath(opt.projectPath, ts().initFrom));  // the project's training.init_from
        setUpDataParallel();
        // For a whole batch at once (see BatchStager on why).
        batchLoss =
            std::make_unique<BatchLoss>(backend, ts().loss, model->outputShape(), ts().batchSize, data.numClasses,
                                        project.dataset.task, static_cast<float>(ts().huberDelta));
        stager = std::make_unique<BatchStager>(backend, model->inputShape(), ts().batchSize);
        if (dp()) stager->setShard(ranks.rank(), ranks.size());
        stager->setUpTraining(data.train, trainingAugmentation(project.dataset, data.normalization), ts().seed,
                              opt.residentData, opt.residentDataMaxBytes,
                              [this](const std::string& line) { obs->onLog(line); });
        stepsPerEpoch = stager->trainBatchesPerEpoch();
        if (progress.stepInEpoch >= stepsPerEpoch && progress.stepInEpoch > 0)
            throw std::runtime_error("the checkpoint was saved at step " + std::to_string(progress.stepInEpoch) +
                                     " of an epoch, but an epoch of this data set has " +
                                     std::to_string(stepsPerEpoch) + " steps");
        if (opt.pruning && !pruning) {
            const PruningSettings s = pruningForRun(*opt.pruning, stepsPerEpoch * ts().epochs);
            pruning = makePruning(s);
            obs->onLog(std::string("pruning: ") + pruningScopeName(s.scope) + " magnitude pruning to sparsity " +
                       formatScale(s.schedule.finalSparsity) + " over steps " + std::to_string(s.schedule.beginStep) +
                       " to " + std::to_string(s.schedule.endStep) + ", every " + std::to_string(s.schedule.frequency) +
                       " steps");
        }
        step = std::make_unique<TrainingStep>(*model, *optimizer, *batchLoss, *precision, *parallel, ts().clipNorm);
        if (pruning) step->addHook(pruning.get());
        step->addHook(divergence.get());
        if (opt.histogramEvery > 0 && ranks.rank() == 0) setUpHistograms();
    }

    // After the divergence check's hook, so a step that ends the run is not sampled. A line per sample is
    // appended and flushed: a crash loses at most the line being written (readHistogramFile skips it).
    void setUpHistograms() {
        if (checkpoints.enabled()) {
            const std::string path = checkpoints.folder() + "/" + kHistogramFileName;
            histogramFile = std::make_unique<std::ofstream>(path, std::ios::app);
            if (!*histogramFile) {
                obs->onLog("histograms: cannot write " + path + "; they go to the workbench only");
                histogramFile.reset();
            }
        }
        histograms = std::make_unique<HistogramHook>(
            *model, project.graph, opt.histogramEvery, opt.histogramBins, [this](const HistogramSample& s) {
                if (histogramFile) *histogramFile << histogramSampleToJson(s).dump() << "\n" << std::flush;
                obs->onHistograms(s);
            });
        step->addHook(histograms.get());
    }

    std::unique_ptr<PruningHook> makePruning(const PruningSettings& s) {
        return std::make_unique<PruningHook>(*model, s, [this](const std::string& line) { obs->onLog(line); });
    }

    bool run() {
        runStart = Clock::now();
        try {
            if (dp()) agreeOnRun();
            checkBackendFor(backend, ts());
            checkMemory();
            setUp();
            ranks.telemetryTap().forwardTo(obs);
            TelemetrySampler sampler(backendRegistry().telemetry(backend.device()), &ranks.telemetryTap(),
                                     opt.telemetryIntervalMs);
            obs->onTrainingStarted();
            bool earlyStopped = false;
            try {
                while (progress.epochsDone < ts().epochs && !reachedMaxSteps && !stopAgreed()) {
                    const int epoch = progress.epochsDone + 1;
                    const auto epochStart = Clock::now();
                    EpochTotals totals;
                    const bool whole = trainEpoch(epoch, totals);
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
            fin.stoppedByUser = requests.stopped();
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
            ranks.abortJob(message);
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

void Trainer::requestPause() { m_impl->requests.pause(); }
void Trainer::requestResume() { m_impl->requests.resume(); }
void Trainer::requestStop() { m_impl->requests.stop(); }
void Trainer::requestCheckpoint() { m_impl->requests.checkpoint(); }
bool Trainer::paused() const { return m_impl->requests.paused(); }

}  // namespace strata
