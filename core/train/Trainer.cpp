// Trainer: epochs of steps, validation, checkpoints, early stopping and the
// requests a GUI or a signal handler makes between steps.
#include "core/train/Trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>
#include <thread>

#include "core/backend/Backend.h"
#include "core/backend/BackendRegistry.h"
#include "core/data/DataLoader.h"
#include "core/data/Dataset.h"
#include "core/graph/Model.h"
#include "core/train/Checkpoint.h"
#include "core/train/DynamicLossScale.h"
#include "core/train/LrSchedule.h"
#include "core/train/Optimizer.h"

namespace strata {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

uint64_t mixSeed(uint64_t seed, uint64_t step) { return dropoutHash(seed, step); }

// Polls a TelemetrySource on its own thread until stopped.
class TelemetrySampler {
public:
    TelemetrySampler(std::unique_ptr<TelemetrySource> source, TrainingObserver* observer, int intervalMs)
        : m_source(std::move(source)), m_observer(observer), m_intervalMs(intervalMs) {
        if (m_source && m_observer && m_intervalMs > 0) m_thread = std::thread([this] { loop(); });
    }
    ~TelemetrySampler() {
        {
            std::lock_guard lock(m_mutex);
            m_stop = true;
        }
        m_wake.notify_all();
        if (m_thread.joinable()) m_thread.join();
    }

private:
    void loop() {
        const auto start = Clock::now();
        bool reportedUnavailable = false;
        std::unique_lock lock(m_mutex);
        while (!m_stop) {
            lock.unlock();
            TelemetryEvent e = m_source->sample();
            e.timeSeconds = secondsSince(start);
            if (e.available || !reportedUnavailable) m_observer->onTelemetry(e);
            reportedUnavailable = reportedUnavailable || !e.available;
            lock.lock();
            m_wake.wait_for(lock, std::chrono::milliseconds(m_intervalMs), [this] { return m_stop; });
        }
    }
    std::unique_ptr<TelemetrySource> m_source;
    TrainingObserver* m_observer;
    int m_intervalMs;
    std::mutex m_mutex;
    std::condition_variable m_wake;
    bool m_stop = false;
    std::thread m_thread;
};

TrainingObserver g_nullObserver;

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
    // Two input and two label buffers used in turn: the next batch uploads into one pair while the
    // step reads the other (Backend::uploadAsync). The step's labels are read once more after the
    // next batch is staged, by its metrics (batchMetrics), so they need a pair too.
    Tensor inputBufs[2], labelBufs[2], lossBuf, dlogitsBuf;
    int nextSlot = 0;
    int64_t capacity = 0;
    int numClasses = 0;
    ComputePrecision precision = ComputePrecision::F32;
    std::unique_ptr<DynamicLossScale> lossScaler;  // fp16 only

    // Progress and best-epoch tracking (saved in checkpoints).
    int epochsDone = 0;
    int64_t globalStep = 0;
    int64_t stepInEpoch = 0;
    int bestEpoch = 0;
    double bestMetric = std::numeric_limits<double>::quiet_NaN();
    double bestValLoss = 0, bestValAcc = 0;
    int epochsWithoutImprovement = 0;
    double lastValLoss = 0, lastValAcc = 0;
    bool lastHasValidation = false;
    std::string lastGoodCheckpoint;

    Impl(Project p, Backend& b, TrainingObserver* o, TrainerOptions op)
        : project(std::move(p)), backend(b), obs(o ? o : &g_nullObserver), opt(std::move(op)) {}

    const TrainingSettings& ts() const { return project.training; }

    void ensureCapacity(int64_t batch) {
        if (batch <= capacity) return;
        // Sized for the configured batch at once: a buffer replaced later could still be read by
        // queued work while an asynchronous upload reuses its memory.
        batch = std::max<int64_t>(batch, ts().batchSize);
        try {
            for (Tensor& t : inputBufs) t = backend.empty(model->inputShape().withBatch(batch));
            for (Tensor& t : labelBufs) t = backend.empty(Shape{batch}, DType::I32);
            lossBuf = backend.empty(Shape{batch});
            dlogitsBuf = backend.empty(model->outputShape().withBatch(batch));
        } catch (const OutOfMemoryError& e) {
            throw OutOfMemoryError("the input buffers for batch " + std::to_string(batch) + ": " + e.what(), e.bytes());
        }
        capacity = batch;
    }

    // The training split in backend memory (TrainerOptions::residentData), and this epoch's order.
    struct Resident {
        Tensor inputs, labels, order;  // [count * sample] f32, [count] i32, [count] i32
        std::vector<int64_t> hostOrder;
        int64_t nextBatch = 0, begin = 0;  // the batch nextTrainBatch hands out next; the last one's start
    };
    std::unique_ptr<Resident> resident;
    std::unique_ptr<DataLoader> trainLoader;  // when the split is not resident

    // Decides where training batches come from and, for resident data, uploads the split once.
    void setUpTrainingData() {
        const Augmentation aug = trainingAugmentation(project.dataset, data.normalization);
        const DataSplit& split = data.train;
        const int64_t bytes = split.count * (split.sampleShape.numel() + 1) * 4;
        bool use = false;
        switch (opt.residentData) {
            case TrainerOptions::ResidentData::Off: break;
            case TrainerOptions::ResidentData::On: use = true; break;
            case TrainerOptions::ResidentData::Auto:
                use = !backend.device().isCpu() && bytes <= opt.residentDataMaxBytes;
                break;
        }
        if (use && aug.active()) {
            use = false;  // augmentation runs on the host, per sample
            if (opt.residentData == TrainerOptions::ResidentData::On)
                obs->onLog("training data stays on the host: augmentation runs there");
        }
        if (use && split.count > std::numeric_limits<int32_t>::max()) use = false;
        if (!use) {
            trainLoader = std::make_unique<DataLoader>(split, ts().batchSize, true, ts().seed, aug);
            return;
        }
        resident = std::make_unique<Resident>();
        try {
            resident->inputs = backend.fromHost(Shape{split.count * split.sampleShape.numel()}, split.inputs.data());
            resident->labels = backend.empty(Shape{split.count}, DType::I32);
            backend.copyFromHost(resident->labels.raw(), split.labels.data(), split.labels.size() * sizeof(int32_t));
            resident->order = backend.empty(Shape{split.count}, DType::I32);
        } catch (const OutOfMemoryError& e) {
            resident.reset();
            if (opt.residentData == TrainerOptions::ResidentData::On)
                throw OutOfMemoryError("the training data in " + backend.device().toString() + " memory: " + e.what(),
                                       e.bytes());
            // Auto: the same batches, cut on the host instead.
            obs->onLog("the training data (" + std::to_string((bytes + (1 << 20) - 1) >> 20) +
                       " MiB) does not fit in " + backend.device().toString() + " memory (" + e.what() +
                       "): batches come from the host");
            trainLoader = std::make_unique<DataLoader>(split, ts().batchSize, true, ts().seed, aug);
            return;
        }
        obs->onLog("training data held in " + backend.device().toString() + " memory (" +
                   std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB): batches are gathered there");
    }

    int64_t trainBatchesPerEpoch() const {
        if (trainLoader) return trainLoader->batchesPerEpoch();
        return (data.train.count + ts().batchSize - 1) / ts().batchSize;
    }

    void startTrainEpoch(int epoch) {
        if (trainLoader) return trainLoader->startEpoch(epoch);
        resident->hostOrder = epochOrder(data.train.count, true, ts().seed, epoch);
        std::vector<int32_t> order(resident->hostOrder.begin(), resident->hostOrder.end());
        backend.copyFromHost(resident->order.raw(), order.data(), order.size() * sizeof(int32_t));
        resident->nextBatch = 0;
    }

    // The next training batch: from the loader, or (resident data) its size and host labels only; the
    // inputs are gathered on the device by stageTrain.
    bool nextTrainBatch(Batch& b) {
        if (trainLoader) return trainLoader->next(b);
        if (resident->nextBatch >= trainBatchesPerEpoch()) return false;
        const int64_t begin = resident->nextBatch++ * ts().batchSize;
        b.size = std::min<int64_t>(ts().batchSize, data.train.count - begin);
        b.inputs.clear();
        b.labels.resize(static_cast<size_t>(b.size));
        for (int64_t i = 0; i < b.size; ++i)
            b.labels[static_cast<size_t>(i)] =
                data.train.labels[static_cast<size_t>(resident->hostOrder[static_cast<size_t>(begin + i)])];
        resident->begin = begin;
        return true;
    }

    // A batch on the device: views of one slot's input and label buffers.
    struct Staged {
        Tensor input, labels;
    };

    // Views of the slot the current step does not use, for a batch of `size`; the next call gives the other.
    Staged takeSlot(int64_t size) {
        ensureCapacity(size);
        Staged st{inputBufs[nextSlot].view(model->inputShape().withBatch(size)), labelBufs[nextSlot].view(Shape{size})};
        nextSlot ^= 1;
        return st;
    }

    // Starts the upload of the batch that runs next into the slot the current step does not use. Call
    // it after the ops of the current step that read its input (forward, backward): the upload may
    // overlap the rest of the step.
    Staged stage(const Batch& b) {
        const Staged st = takeSlot(b.size);
        backend.uploadAsync(st.input.raw(), b.inputs.data(), st.input.bytes());
        backend.copyFromHost(st.labels.raw(), b.labels.data(), static_cast<size_t>(b.size) * sizeof(int32_t));
        return st;
    }

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

    // stage() for the batch nextTrainBatch just gave: resident data is gathered on the device.
    Staged stageTrain(const Batch& b) {
        if (!resident) return stage(b);
        const Staged st = takeSlot(b.size);
        const int32_t* rows = resident->order.i32() + resident->begin;
        backend.gatherRows(st.input.raw(), resident->inputs.raw(), data.train.count, rows, b.size,
                           data.train.sampleShape.numel());
        backend.gatherRows(st.labels.raw(), resident->labels.raw(), data.train.count, rows, b.size, 1);
        return st;
    }

    // The batch's loss sum (of lossBuf) and correct predictions: the one point per step where the host
    // waits for the device.
    Backend::StepMetrics batchMetrics(const Tensor& logits, const Batch& batch, const Tensor& labels) {
        return backend.stepMetrics(lossBuf.f32(), logits.f32(), labels.i32(), static_cast<int>(batch.size),
                                   numClasses);
    }

    Tensor targetBuf;
    std::vector<float> targetHost;
    // One-hot targets from the batch's host labels (no device round trip).
    void oneHot(const Batch& batch, int cols) {
        const int64_t n = batch.size;
        if (!targetBuf.defined() || targetBuf.numel() < n * cols) targetBuf = backend.empty(Shape{n, cols});
        targetHost.assign(static_cast<size_t>(n * cols), 0.0f);
        for (int64_t r = 0; r < n; ++r) targetHost[static_cast<size_t>(r * cols + batch.labels[static_cast<size_t>(r)])] = 1.0f;
        backend.copyFromHost(targetBuf.raw(), targetHost.data(), targetHost.size() * sizeof(float));
    }

    std::string nodeLabel(int id) const {
        const Node* n = project.graph.node(id);
        return n ? "'" + n->name + "' (" + n->type + ")" : "#" + std::to_string(id);
    }

    void validateSetup() {
        const TrainingSettings& s = ts();
        if (s.batchSize < 1) throw std::invalid_argument("training.batch_size must be at least 1");
        if (s.epochs < 1) throw std::invalid_argument("training.epochs must be at least 1");
        if (data.train.count == 0) throw std::invalid_argument("the training split is empty");
        if (data.train.sampleShape != model->inputShape()) {
            std::string inputName;
            for (const Node* n : project.graph.nodes())
                if (n->type == "Input") inputName = n->name;
            throw std::invalid_argument("the data's samples are " + data.train.sampleShape.toString() +
                                        " but Input '" + inputName + "' expects " +
                                        model->inputShape().toString());
        }
        numClasses = data.numClasses;
        if (model->outputShape().rank() != 1 || model->outputShape()[0] != numClasses) {
            const std::vector<int> order = model->order();
            throw std::invalid_argument("the model's output " + nodeLabel(order.back()) + " is " +
                                        model->outputShape().toString() + " but the data has " +
                                        std::to_string(numClasses) + " classes: make it [" +
                                        std::to_string(numClasses) + "]");
        }
    }

    // The run's compute precision on the backend (set every run: a backend may be reused), and the
    // loss scaler for fp16, whose 5-bit exponent underflows small gradients without one.
    void setUpPrecision() {
        precision = ts().precision;
        backend.setComputePrecision(precision);
        if (precision == ComputePrecision::F16)
            lossScaler =
                std::make_unique<DynamicLossScale>(opt.initialLossScale, 2.0f, 0.5f, opt.lossScaleGrowthInterval);
        if (precision != ComputePrecision::F32)
            obs->onLog(std::string("precision ") + computePrecisionName(precision) +
                       ": GEMM and convolution inputs rounded to " + computePrecisionName(precision) +
                       ", float32 accumulation and float32 weights" +
                       (lossScaler ? ", dynamic loss scaling from " + formatScale(lossScaler->scale())
                                   : std::string()));
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

    static std::string formatScale(double scale) {
        std::ostringstream s;
        s << scale;
        return s.str();
    }

    std::string checkpointDir() const {
        if (ts().checkpointDir.empty()) return {};
        return resolveDatasetPath(opt.projectPath, ts().checkpointDir);
    }

    Json trainerState() const {
        Json j;
        j["best_epoch"] = bestEpoch;
        j["best_metric"] = std::isnan(bestMetric) ? Json(nullptr) : Json(bestMetric);
        j["best_val_loss"] = bestValLoss;
        j["best_val_accuracy"] = bestValAcc;
        j["epochs_without_improvement"] = epochsWithoutImprovement;
        j["optimizer_steps"] = optimizer->steps();
        j["precision"] = computePrecisionName(precision);
        if (lossScaler) {
            j["loss_scale"] = lossScaler->scale();
            j["loss_scale_good_steps"] = lossScaler->goodSteps();
            j["skipped_steps"] = lossScaler->skippedSteps();
        }
        return j;
    }

    std::string saveCheckpointAs(const std::string& file, bool best) {
        Checkpoint c;
        c.project = project;
        c.epoch = epochsDone;
        c.step = globalStep;
        c.stepInEpoch = stepInEpoch;
        c.hasValidation = lastHasValidation;
        c.valLoss = lastValLoss;
        c.valAccuracy = lastValAcc;
        c.best = best;
        c.normalization = {data.normalization.mode,        data.normalization.scale,
                           data.normalization.mean,        data.normalization.std,
                           data.normalization.featureMean, data.normalization.featureStd};
        c.classNames = data.classNames;
        c.vocabulary = data.vocabulary;
        c.trainerState = trainerState();
        c.weights = modelWeights(*model);
        c.optimizerState = optimizer->state();
        saveCheckpoint(c, file);
        return file;
    }

    // Writes epoch-NNN (or step-N for a mid-epoch save), latest, and best when `best`.
    void checkpoint(bool best, bool midEpoch) {
        const std::string dir = checkpointDir();
        if (dir.empty()) {
            if (midEpoch) obs->onLog("save checkpoint: no checkpoint folder is set in the training settings");
            return;
        }
        char name[64];
        if (midEpoch)
            std::snprintf(name, sizeof name, "step-%08lld.safetensors", static_cast<long long>(globalStep));
        else
            std::snprintf(name, sizeof name, "epoch-%03d.safetensors", epochsDone);
        const std::string file = (fs::path(dir) / name).string();
        saveCheckpointAs(file, best);
        saveCheckpointAs((fs::path(dir) / "latest.safetensors").string(), best);
        if (best) saveCheckpointAs((fs::path(dir) / "best.safetensors").string(), true);
        lastGoodCheckpoint = file;
        obs->onCheckpoint({file, epochsDone, globalStep, best});
    }

    void resume(const std::string& path) {
        Checkpoint c = loadCheckpoint(path);
        applyWeights(*model, c.weights);
        const Json& st = c.trainerState;
        optimizer->loadState(c.optimizerState, st.value("optimizer_steps", c.step));
        epochsDone = c.epoch;
        globalStep = c.step;
        stepInEpoch = c.stepInEpoch;
        bestEpoch = st.value("best_epoch", 0);
        bestMetric = st.contains("best_metric") && st["best_metric"].is_number() ? st["best_metric"].get<double>()
                                                                                 : std::numeric_limits<double>::quiet_NaN();
        bestValLoss = st.value("best_val_loss", 0.0);
        bestValAcc = st.value("best_val_accuracy", 0.0);
        epochsWithoutImprovement = st.value("epochs_without_improvement", 0);
        // An fp16 run continues with its loss scale; a run saved in another precision starts from the initial one.
        if (lossScaler && st.contains("loss_scale"))
            lossScaler->restore(st["loss_scale"].get<float>(), st.value("loss_scale_good_steps", 0),
                                st.value("skipped_steps", int64_t(0)));
        obs->onLog("resumed from " + resolveCheckpointPath(path) + " at epoch " + std::to_string(epochsDone) +
                   ", step " + std::to_string(globalStep));
    }

    // Returns {loss, accuracy} over a split in evaluation mode.
    std::pair<double, double> evaluate(const DataSplit& split) {
        DataLoader loader(split, ts().batchSize, false, ts().seed);
        loader.startEpoch(0);
        Batch b, pending;
        Staged staged;
        bool havePending = loader.next(pending);
        if (havePending) staged = stage(pending);
        double lossSum = 0;
        int64_t correct = 0, seen = 0;
        while (havePending) {
            if (stopRequested) break;
            std::swap(b, pending);
            const Staged cur = staged;
            const Tensor& logits = model->forward(cur.input, false);
            computeLoss(logits, b, cur.labels, false);
            const Backend::StepMetrics m = batchMetrics(logits, b, cur.labels);
            lossSum += m.lossSum;
            correct += m.correct;
            seen += b.size;
            havePending = loader.next(pending);
            if (havePending) staged = stage(pending);
        }
        if (seen == 0) return {0, 0};
        return {lossSum / static_cast<double>(seen), static_cast<double>(correct) / static_cast<double>(seen)};
    }

    // Blocks while paused; returns false when a stop was requested.
    bool waitWhilePaused() {
        std::unique_lock lock(pauseMutex);
        pauseCv.wait(lock, [this] { return !pauseRequested || stopRequested; });
        return !stopRequested;
    }

    bool run() {
        const auto runStart = Clock::now();
        try {
            backend.setDeterministic(ts().deterministic);
            // Labels are checked when the data loads, so the device need not stop at every loss to check
            // them again: a bad one still throws, naming the op, at the step's metrics read-back.
            struct RestoreEagerChecks {
                Backend& b;
                bool was;
                ~RestoreEagerChecks() { b.setEagerIndexChecks(was); }
            } restoreEagerChecks{backend, backend.eagerIndexChecks()};
            backend.setEagerIndexChecks(false);
            obs->onLog("loading data");
            data = loadDataset(project.dataset, opt.projectPath);
            obs->onLog(data.description);
            model = compile(project.graph, backend, ts().seed);
            validateSetup();
            setUpPrecision();
            optimizer = std::make_unique<Optimizer>(*model, ts());
            if (!opt.resumeFrom.empty()) resume(opt.resumeFrom);

            TelemetrySampler sampler(backendRegistry().telemetry(backend.device()), obs, opt.telemetryIntervalMs);

            setUpTrainingData();
            const int64_t stepsPerEpoch = trainBatchesPerEpoch();

            bool earlyStopped = false;
            bool reachedMaxSteps = false;
            Batch batch, pending;
            Staged staged;
            while (epochsDone < ts().epochs && !stopRequested && !reachedMaxSteps) {
                const int epoch = epochsDone + 1;
                const auto epochStart = Clock::now();
                startTrainEpoch(epoch);
                // A checkpoint saved mid-epoch resumes after the batches it had seen.
                for (int64_t skip = 0; skip < stepInEpoch && nextTrainBatch(batch); ++skip) {
                }
                bool havePending = nextTrainBatch(pending);
                if (havePending) staged = stageTrain(pending);
                double lossSum = 0;
                int64_t correct = 0, seen = 0;
                double recentRate = 0;
                auto windowStart = Clock::now();
                int64_t windowSamples = 0;
                while (!stopRequested) {
                    if (!waitWhilePaused()) break;
                    if (opt.maxSteps > 0 && globalStep >= opt.maxSteps) {
                        reachedMaxSteps = true;
                        break;
                    }
                    if (!havePending) break;
                    std::swap(batch, pending);
                    const Staged cur = staged;
                    const double lr = learningRateAt(ts(), globalStep, stepsPerEpoch);
                    const Tensor& logits =
                        model->forward(cur.input, true, mixSeed(ts().seed, static_cast<uint64_t>(globalStep)));
                    const float lossScale = lossScaler ? lossScaler->scale() : 1.0f;
                    computeLoss(logits, batch, cur.labels, true, lossScale);
                    model->zeroGrad();
                    model->backward(dlogitsBuf.view(model->outputShape().withBatch(batch.size)));
                    // Every op reading this step's input has been called: the next batch may upload now.
                    havePending = nextTrainBatch(pending);
                    if (havePending) staged = stageTrain(pending);
                    const bool apply = !lossScaler || unscaleGradients(lossScale);
                    if (apply) {
                        if (ts().clipNorm > 0) optimizer->clipGradNorm(ts().clipNorm);
                        optimizer->step(lr);
                    }
                    // The step's whole work has been called; now its metrics are read back. A non-finite
                    // loss therefore stops the run after its update, but the layer outputs examined are
                    // still this step's (the backward pass and the update do not write them).
                    const Backend::StepMetrics metrics = batchMetrics(logits, batch, cur.labels);
                    const double loss = metrics.lossSum / static_cast<double>(batch.size);
                    const int64_t batchCorrect = metrics.correct;
                    if (!std::isfinite(loss)) {
                        const int bad = model->firstNonFiniteNode();
                        std::ostringstream msg;
                        msg << "step " << (globalStep + 1) << " (epoch " << epoch << "): the loss is "
                            << (std::isnan(loss) ? "NaN" : "infinite");
                        msg << (bad >= 0 ? "; the first layer whose output is not finite is " + nodeLabel(bad)
                                         : "; every layer output is finite, so the loss itself overflowed");
                        if (!lastGoodCheckpoint.empty()) msg << "; the last good checkpoint is " << lastGoodCheckpoint;
                        throw std::runtime_error(msg.str());
                    }
                    if (!apply)
                        obs->onLog("step " + std::to_string(globalStep + 1) +
                                   ": fp16 gradients are not finite at loss scale " + formatScale(lossScale) +
                                   "; update skipped, loss scale now " + formatScale(lossScaler->scale()));
                    ++globalStep;
                    ++stepInEpoch;
                    lossSum += loss * static_cast<double>(batch.size);
                    correct += batchCorrect;
                    seen += batch.size;
                    windowSamples += batch.size;
                    const double windowSec = secondsSince(windowStart);
                    if (windowSec >= 0.5 || recentRate == 0) {
                        recentRate = windowSamples / std::max(windowSec, 1e-9);
                        windowStart = Clock::now();
                        windowSamples = 0;
                    }
                    StepEvent ev;
                    ev.epoch = epoch;
                    ev.step = globalStep;
                    ev.stepInEpoch = stepInEpoch;
                    ev.stepsPerEpoch = stepsPerEpoch;
                    ev.loss = loss;
                    ev.accuracy = static_cast<double>(batchCorrect) / static_cast<double>(batch.size);
                    ev.learningRate = lr;
                    ev.samplesPerSecond = recentRate;
                    ev.elapsedSeconds = secondsSince(runStart);
                    if (lossScaler) {
                        ev.lossScale = lossScale;
                        ev.skipped = !apply;
                        ev.skippedSteps = lossScaler->skippedSteps();
                    }
                    obs->onStep(ev);
                    if (checkpointRequested.exchange(false)) checkpoint(false, true);
                }
                if (stepInEpoch < stepsPerEpoch) break;  // stopped mid-epoch

                // End of epoch: validation, events, checkpoints, early stopping.
                const double trainSeconds = secondsSince(epochStart);
                EpochEvent ev;
                ev.epoch = epoch;
                ev.trainLoss = seen ? lossSum / static_cast<double>(seen) : 0;
                ev.trainAccuracy = seen ? static_cast<double>(correct) / static_cast<double>(seen) : 0;
                ev.samplesPerSecond = seen / std::max(trainSeconds, 1e-9);
                ev.hasValidation = data.validation.count > 0;
                if (ev.hasValidation) {
                    std::tie(ev.valLoss, ev.valAccuracy) = evaluate(data.validation);
                    if (stopRequested) break;
                } else {
                    ev.valLoss = ev.valAccuracy = std::numeric_limits<double>::quiet_NaN();
                }
                epochsDone = epoch;
                stepInEpoch = 0;
                lastHasValidation = ev.hasValidation;
                lastValLoss = ev.valLoss;
                lastValAcc = ev.valAccuracy;
                if (ev.hasValidation) {
                    const bool byAcc = ts().earlyStoppingMetric == EarlyStoppingMetric::ValAcc;
                    const double metric = byAcc ? -ev.valAccuracy : ev.valLoss;
                    if (std::isnan(bestMetric) || metric < bestMetric) {
                        bestMetric = metric;
                        bestEpoch = epoch;
                        bestValLoss = ev.valLoss;
                        bestValAcc = ev.valAccuracy;
                        epochsWithoutImprovement = 0;
                        ev.best = true;
                    } else {
                        ++epochsWithoutImprovement;
                    }
                }
                ev.seconds = secondsSince(epochStart);
                obs->onEpoch(ev);
                checkpoint(ev.best, false);
                if (checkpointRequested.exchange(false) && checkpointDir().empty()) checkpoint(false, true);
                if (ts().earlyStoppingPatience > 0 && epochsWithoutImprovement >= ts().earlyStoppingPatience) {
                    obs->onLog("early stopping: no improvement in " + settingName(ts().earlyStoppingMetric) + " for " +
                               std::to_string(epochsWithoutImprovement) + " epochs; best epoch " +
                               std::to_string(bestEpoch));
                    earlyStopped = true;
                    break;
                }
            }
            backend.synchronize();
            FinishedEvent fin;
            fin.stoppedByUser = stopRequested;
            fin.earlyStopped = earlyStopped;
            fin.epochsCompleted = epochsDone;
            fin.bestEpoch = bestEpoch;
            fin.bestValLoss = bestValLoss;
            fin.bestValAccuracy = bestValAcc;
            fin.seconds = secondsSince(runStart);
            obs->onFinished(fin);
            return true;
        } catch (const std::exception& e) {
            // Let queued work finish before reporting: with deferred index checks a device error flag may
            // still be armed by this run, and must not surface later in someone else's call.
            try {
                backend.synchronize();
            } catch (const std::exception&) {
                // Already failing: the first error is the one to report.
            }
            obs->onError(e.what());
            return false;
        }
    }
};

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
