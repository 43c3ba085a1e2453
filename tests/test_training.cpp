// Training end to end: the loss falls, checkpoint + resume equals one long run,
// NaN stops with a message naming the layer, requests between steps, early stopping.
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <new>
#include <random>
#include <thread>

#include "core/backend/CpuBackend.h"
#include "core/export/ExportModel.h"
#include "core/graph/Model.h"
#include "core/graph/Project.h"
#include "core/train/Checkpoint.h"
#include "core/train/LrSchedule.h"
#include "core/train/Optimizer.h"
#include "core/train/RunFolder.h"
#include "core/train/Trainer.h"
#include "tests/support/TestBackends.h"
#include "tests/support/TestProjects.h"

using namespace strata;

namespace {

struct Recorder : TrainingObserver {
    std::vector<StepEvent> steps;
    std::vector<EpochEvent> epochs;
    std::vector<CheckpointEvent> checkpoints;
    std::vector<std::string> errors;
    bool finished = false;
    FinishedEvent fin;
    std::function<void(const StepEvent&)> stepHook;
    void onStep(const StepEvent& e) override {
        steps.push_back(e);
        if (stepHook) stepHook(e);
    }
    void onEpoch(const EpochEvent& e) override { epochs.push_back(e); }
    void onCheckpoint(const CheckpointEvent& e) override { checkpoints.push_back(e); }
    void onFinished(const FinishedEvent& e) override {
        finished = true;
        fin = e;
    }
    void onError(const std::string& m) override { errors.push_back(m); }
    std::vector<std::string> logs;
    void onLog(const std::string& m) override { logs.push_back(m); }
    bool logged(const std::string& part) const {
        for (const std::string& l : logs)
            if (l.find(part) != std::string::npos) return true;
        return false;
    }
};

// A CPU backend that counts the calls where the host waits for the device (a host result, a copy back,
// synchronize) and a few per-step ops, so the step's shape can be checked without a GPU: on a GPU each
// wait drains the queue, and each call is a launch.
class CountingBackend : public CpuBackend {
    int m_depth = 0;  // a wait inside another (stepMetrics' default calls sum) counts once
    template <class F>
    auto waitFor(F&& f) {
        if (m_depth++ == 0) ++waits;
        struct Leave {
            int& d;
            ~Leave() { --d; }
        } leave{m_depth};
        return f();
    }
    template <class F>
    void wait(F&& f) {
        waitFor([&] {
            f();
            return 0;
        });
    }

public:
    int waits = 0, zeros = 0, updates = 0, uploads = 0;

    void synchronize() override {
        wait([&] { CpuBackend::synchronize(); });
    }
    void copyToHost(void* dst, const void* src, size_t bytes) override {
        wait([&] { CpuBackend::copyToHost(dst, src, bytes); });
    }
    UploadTicket uploadAsync(void* dst, const void* hostSrc, size_t bytes) override {
        ++uploads;
        return CpuBackend::uploadAsync(dst, hostSrc, bytes);
    }

protected:
    // The ops, counted where the backend runs them (the public ops are the seam's checks, then these).
    double doSum(const float* x, int64_t n) override {
        return waitFor([&] { return CpuBackend::doSum(x, n); });
    }
    double doSumSquares(const float* x, int64_t n) override {
        return waitFor([&] { return CpuBackend::doSumSquares(x, n); });
    }
    bool doAllFinite(const float* x, int64_t n) override {
        return waitFor([&] { return CpuBackend::doAllFinite(x, n); });
    }
    int64_t doCountCorrect(const float* logits, const int32_t* labels, int rows, int cols) override {
        return waitFor([&] { return CpuBackend::doCountCorrect(logits, labels, rows, cols); });
    }
    StepMetrics doStepMetrics(const float* losses, const float* logits, const int32_t* labels, int rows,
                              int cols) override {
        return waitFor([&] { return CpuBackend::doStepMetrics(losses, logits, labels, rows, cols); });
    }
    void doZero(void* y, size_t bytes) override {
        ++zeros;
        CpuBackend::doZero(y, bytes);
    }
    void doSgdUpdate(float* w, float* velocity, const float* grad, int64_t n, const SgdParams& p) override {
        ++updates;
        CpuBackend::doSgdUpdate(w, velocity, grad, n, p);
    }
};

// A CPU backend with a small memory: an allocation larger than `limit` bytes fails as a GPU's would.
class SmallMemoryBackend : public CpuBackend {
public:
    explicit SmallMemoryBackend(size_t limit) : limit(limit) {}
    size_t limit;
    void* allocate(size_t bytes) override {
        if (bytes > limit)
            throw OutOfMemoryError("small: out of memory allocating " + std::to_string(bytes) + " bytes", bytes);
        return CpuBackend::allocate(bytes);
    }
};

// Input [16] -> Dense 32 -> ReLU -> Dropout -> Dense classes on synthetic blobs.
// A CPU backend whose every GEMM takes at least `delay`: a deliberately slow step (several seconds), to see
// that Stop ends it between layers.
class SlowGemmBackend : public CpuBackend {
public:
    explicit SlowGemmBackend(std::chrono::milliseconds delay) : m_delay(delay) {}
    void doGemm(bool transA, bool transB, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                int ldb, float beta, float* c, int ldc) override {
        std::this_thread::sleep_for(m_delay);
        CpuBackend::doGemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    }

private:
    std::chrono::milliseconds m_delay;
};

Project syntheticProject(int classes = 4, bool dropout = false) {
    Project p = test::blobsMlpProject("synthetic", 16, classes, dropout);
    p.training.momentum = 0.9;
    p.training.epochs = 2;
    p.training.threads = 0;
    return p;
}

}  // namespace

class TestTraining : public QObject {
    Q_OBJECT
private slots:
    void lossFallsOnSyntheticData() {
        auto backend = test::makeCpuBackend();
        Project p = syntheticProject(4);
        p.training.epochs = 4;
        Recorder rec;
        Trainer t(p, *backend, &rec, {});
        QVERIFY2(t.run(), rec.errors.empty() ? "" : rec.errors.front().c_str());
        QCOMPARE(rec.epochs.size(), size_t(4));
        QVERIFY(rec.finished);
        // 900 training samples / 32 -> 29 steps per epoch, 116 in all.
        QCOMPARE(rec.steps.size(), size_t(116));
        double first = 0, last = 0;
        for (int i = 0; i < 10; ++i) first += rec.steps[size_t(i)].loss / 10;
        for (size_t i = rec.steps.size() - 10; i < rec.steps.size(); ++i) last += rec.steps[i].loss / 10;
        QVERIFY2(last < 0.5 * first, qPrintable(QString("loss %1 -> %2").arg(first).arg(last)));
        // Chance is 25%; blobs are separable well beyond that.
        QVERIFY2(rec.epochs.back().valAccuracy > 0.6, qPrintable(QString::number(rec.epochs.back().valAccuracy)));
        QVERIFY(rec.epochs.back().hasValidation);
        // The training accuracy is measured against each batch's own labels (the next batch is staged
        // before a step's metrics are read): it tracks the validation accuracy, far from chance.
        const double trainAcc = rec.epochs.back().trainAccuracy, valAcc = rec.epochs.back().valAccuracy;
        QVERIFY2(trainAcc > 0.6 && std::abs(trainAcc - valAcc) < 0.2,
                 qPrintable(QString("train accuracy %1, validation %2").arg(trainAcc).arg(valAcc)));
    }

    void fashionMnistSubsetLearns() {
        const std::string images = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";
        if (!std::filesystem::exists(images)) QSKIP("Fashion-MNIST is not installed (dataset-fashion-mnist)");
        Project p = readProject(test::sourcePath("examples/fashion_mlp.strata"));
        p.dataset.trainLimit = 6400;
        p.dataset.validationLimit = 2000;
        p.training.epochs = 3;  // 300 steps
        auto backend = test::makeCpuBackend();
        Recorder rec;
        TrainerOptions o;
        o.projectPath = test::sourcePath("examples/fashion_mlp.strata");
        Trainer t(p, *backend, &rec, o);
        QVERIFY2(t.run(), rec.errors.empty() ? "" : rec.errors.front().c_str());
        QCOMPARE(rec.steps.size(), size_t(300));
        QVERIFY(rec.epochs.back().trainLoss < rec.epochs.front().trainLoss);
        // Chance is 10%.
        QVERIFY2(rec.epochs.back().valAccuracy > 0.70, qPrintable(QString::number(rec.epochs.back().valAccuracy)));
    }

    // Training data held in backend memory gives the same batches, in the same order, as the host
    // loader: every step's loss and accuracy, and the epochs, are bit-identical (cross-entropy with
    // dropout, and MSE, whose one-hot targets come from the batch's host labels).
    void residentDataMatchesTheLoader() {
        for (const LossKind loss : {LossKind::CrossEntropy, LossKind::Mse}) {
            Project p = syntheticProject(4, true);
            p.training.loss = loss;
            p.training.batchSize = 50;  // 900 samples: a short last batch
            std::vector<Recorder> runs(2);
            for (int r = 0; r < 2; ++r) {
                auto backend = test::makeCpuBackend();
                TrainerOptions o;
                o.residentData = r == 0 ? TrainerOptions::ResidentData::Off : TrainerOptions::ResidentData::On;
                Trainer t(p, *backend, &runs[size_t(r)], o);
                QVERIFY2(t.run(), runs[size_t(r)].errors.empty() ? "" : runs[size_t(r)].errors.front().c_str());
            }
            const Recorder &host = runs[0], &dev = runs[1];
            QCOMPARE(dev.steps.size(), host.steps.size());
            QCOMPARE(host.steps.size(), size_t(2 * 18));
            for (size_t i = 0; i < host.steps.size(); ++i) {
                QVERIFY2(host.steps[i].loss == dev.steps[i].loss && host.steps[i].accuracy == dev.steps[i].accuracy,
                         qPrintable(QString("%1 step %2: loss %3 / %4, accuracy %5 / %6")
                                        .arg(QString::fromStdString(settingName(loss)))
                                        .arg(i)
                                        .arg(host.steps[i].loss)
                                        .arg(dev.steps[i].loss)
                                        .arg(host.steps[i].accuracy)
                                        .arg(dev.steps[i].accuracy)));
            }
            QCOMPARE(dev.epochs.back().valLoss, host.epochs.back().valLoss);
            QVERIFY(dev.epochs.back().trainAccuracy > 0.5);
        }
    }

    // compile packs every trainable parameter (value and gradient) into one block each, on 64-element
    // boundaries, leaving state such as batch-norm running statistics out; one optimizer update over the
    // block is bit-identical to one update per tensor, and the zeros between tensors stay zero.
    void parametersArePackedForOneUpdate() {
        Graph g;
        const int in = g.addNode("Input", "input", Json{{"shape", {10}}});
        const int d1 = g.addNode("Dense", "dense1", Json{{"units", 7}});  // 70 + 7: offsets 0, 128
        const int bn = g.addNode("BatchNorm", "bn");
        const int d2 = g.addNode("Dense", "dense2", Json{{"units", 3}});
        g.connect(in, d1);
        g.connect(d1, bn);
        g.connect(bn, d2);
        auto backend = test::makeCpuBackend();
        std::unique_ptr<Model> model = compile(g, *backend, 11);
        const Tensor& values = model->packedValues();
        const Tensor& grads = model->packedGradients();
        QVERIFY(values.defined() && grads.defined());
        std::mt19937 rng(3);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        int packed = 0, state = 0;
        std::vector<std::pair<Parameter*, std::vector<float>>> startValues;
        for (const auto& np : model->namedParameters()) {
            Parameter& p = *np.param;
            const int64_t offset = model->packedOffset(p);
            if (!p.trainable) {
                QCOMPARE(offset, int64_t(-1));  // running statistics are state, not packed
                ++state;
                continue;
            }
            ++packed;
            QVERIFY2(offset >= 0 && offset % 64 == 0, np.name.c_str());
            QCOMPARE(p.value.raw(), static_cast<void*>(values.f32() + offset));
            QCOMPARE(p.grad.raw(), static_cast<void*>(grads.f32() + offset));
            std::vector<float> gh(static_cast<size_t>(p.grad.numel()));
            for (float& v : gh) v = u(rng);
            backend->copyFromHost(p.grad.raw(), gh.data(), p.grad.bytes());
            std::vector<float> vh(static_cast<size_t>(p.value.numel()));
            backend->toHost(p.value, vh.data());
            startValues.emplace_back(&p, vh);
        }
        QCOMPARE(packed, 6);  // dense1, bn (gamma, beta), dense2: weight and bias each
        QVERIFY(state >= 2);
        // The same AdamW step per tensor, on copies.
        TrainingSettings ts;
        ts.optimizer = OptimizerKind::AdamW;
        ts.weightDecay = 0.1;
        AdamParams ap;
        ap.lr = 0.01f, ap.beta1 = float(ts.beta1), ap.beta2 = float(ts.beta2), ap.eps = float(ts.eps);
        ap.weightDecay = 0.1f, ap.decoupled = true, ap.step = 1;
        std::vector<std::vector<float>> want;
        for (auto& [p, start] : startValues) {
            Tensor w = backend->fromHost(p->value.shape(), start.data()), m = backend->zeros(p->value.shape()),
                   v = backend->zeros(p->value.shape());
            backend->adamUpdate(w.f32(), m.f32(), v.f32(), p->grad.f32(), w.numel(), ap);
            std::vector<float> out(static_cast<size_t>(w.numel()));
            backend->toHost(w, out.data());
            want.push_back(out);
        }
        Optimizer opt(*model, ts);
        opt.step(0.01);
        for (size_t i = 0; i < startValues.size(); ++i) {
            std::vector<float> got(want[i].size());
            backend->toHost(startValues[i].first->value, got.data());
            QVERIFY2(got == want[i], startValues[i].first->name.c_str());
        }
        std::vector<float> all(static_cast<size_t>(values.numel()));
        backend->toHost(values, all.data());
        QCOMPARE(all[100], 0.0f);  // between dense1.weight (0..69) and dense1.bias (128..134)
        model->zeroGrad();
        std::vector<float> g0(static_cast<size_t>(grads.numel()));
        backend->toHost(grads, g0.data());
        QVERIFY(std::all_of(g0.begin(), g0.end(), [](float x) { return x == 0.0f; }));
    }

    // The shape of a training step as a GPU sees it: the host waits for the device once per step (the
    // step's metrics, read after the update is queued), zeroes gradients in two calls (the packed
    // parameter gradients, the activation gradients) and updates every parameter in one call. With
    // resident data nothing is uploaded per step.
    void aStepWaitsForTheDeviceOnce() {
        for (const bool resident : {false, true}) {
            Project p = syntheticProject(4);
            p.training.epochs = 1;  // 900 training samples / 32: 29 steps
            CountingBackend backend;
            Recorder rec;
            // Counts between the first step's report and the last one's: 28 whole steps.
            std::array<int, 4> first{}, last{};
            rec.stepHook = [&](const StepEvent& e) {
                const std::array<int, 4> now{backend.waits, backend.zeros, backend.updates, backend.uploads};
                if (e.step == 1) first = now;
                last = now;
            };
            TrainerOptions o;
            o.residentData = resident ? TrainerOptions::ResidentData::On : TrainerOptions::ResidentData::Off;
            Trainer t(p, backend, &rec, o);
            QVERIFY2(t.run(), rec.errors.empty() ? "" : rec.errors.front().c_str());
            QCOMPARE(rec.steps.size(), size_t(29));
            const int steps = 28;
            const char* names[] = {"host waits", "zero calls", "optimizer updates", "uploads"};
            // Each step uploads the batch after it; the epoch's last step has none.
            const std::array<int, 4> want{steps, 2 * steps, steps, resident ? 0 : steps - 1};
            for (size_t k = 0; k < want.size(); ++k)
                QVERIFY2(last[k] - first[k] == want[k], qPrintable(QString("%1 data: %2 %3 in %4 steps, expected %5")
                                                                       .arg(resident ? "resident" : "uploaded")
                                                                       .arg(last[k] - first[k])
                                                                       .arg(names[k])
                                                                       .arg(steps)
                                                                       .arg(want[k])));
        }
    }

    // Out of memory names the layer and the bytes, stops the run with an error (no crash), and the same
    // backend then trains with a batch that fits.
    void outOfMemoryNamesTheLayer() {
        Project p = syntheticProject(4);
        p.training.epochs = 1;
        p.training.batchSize = 1024;  // one batch of all 900 samples: dense1's output is 900 x 32 floats
        SmallMemoryBackend backend(100000);
        {
            Recorder rec;
            Trainer t(p, backend, &rec, {});
            QVERIFY(!t.run());
            QCOMPARE(rec.errors.size(), size_t(1));
            const QString msg = QString::fromStdString(rec.errors.front());
            QVERIFY2(msg.contains("'dense1' (Dense)") && msg.contains("115200 bytes"), qPrintable(msg));
            QVERIFY2(msg.contains("; try batch size "), qPrintable(msg));  // issue 17: a suggestion
        }
        p.training.batchSize = 256;
        Recorder rec;
        Trainer t(p, backend, &rec, {});
        QVERIFY2(t.run(), rec.errors.empty() ? "" : rec.errors.front().c_str());
        QCOMPARE(rec.epochs.size(), size_t(1));
    }

    // Issue 17: a host allocation that fails inside a layer (std::bad_alloc, not the backend's own error) is a
    // clean error too: it names the layer and suggests a batch, not a bare "std::bad_alloc".
    void hostAllocationFailureNamesTheLayer() {
        struct BadAllocBackend : CpuBackend {
            void* allocate(size_t bytes) override {
                if (bytes > 100000) throw std::bad_alloc();
                return CpuBackend::allocate(bytes);
            }
        };
        Project p = syntheticProject(4);
        p.training.epochs = 1;
        p.training.batchSize = 1024;
        BadAllocBackend backend;
        Recorder rec;
        Trainer t(p, backend, &rec, {});
        QVERIFY(!t.run());
        QCOMPARE(rec.errors.size(), size_t(1));
        const QString msg = QString::fromStdString(rec.errors.front());
        QVERIFY2(msg.contains("'dense1' (Dense)") && msg.contains("out of host memory"), qPrintable(msg));
        QVERIFY2(msg.contains("; try batch size "), qPrintable(msg));
    }

    // Resident data that does not fit: with Auto the batches come from the host instead (said in the log),
    // with On the run stops naming the training data. The backend poses as a GPU so that Auto tries.
    void residentDataThatDoesNotFit() {
        struct SmallGpu : SmallMemoryBackend {
            SmallGpu() : SmallMemoryBackend(40000) {}  // the split is 900 x 17 x 4 = 61200 bytes
            Device device() const override { return Device::cuda(0); }
        };
        Project p = syntheticProject(4);
        p.training.epochs = 1;
        {
            SmallGpu backend;
            Recorder rec;
            Trainer t(p, backend, &rec, {});
            QVERIFY2(t.run(), rec.errors.empty() ? "" : rec.errors.front().c_str());
            QVERIFY(rec.logged("does not fit in cuda:0 memory"));
            QVERIFY(!rec.logged("batches are gathered there"));
            QCOMPARE(rec.steps.size(), size_t(29));
        }
        SmallGpu backend;
        Recorder rec;
        TrainerOptions o;
        o.residentData = TrainerOptions::ResidentData::On;
        Trainer t(p, backend, &rec, o);
        QVERIFY(!t.run());
        QVERIFY2(
            !rec.errors.empty() && rec.errors.front().find("the training data in cuda:0 memory") != std::string::npos,
            rec.errors.empty() ? "" : rec.errors.front().c_str());
    }

    // A model whose activations did not fit stays usable at the capacity it had.
    void failedAllocationLeavesTheModelUsable() {
        Project p = syntheticProject(4);
        SmallMemoryBackend backend(1 << 20);
        std::unique_ptr<Model> model = compile(p.graph, backend, 1);
        std::vector<float> x(size_t(8) * 16, 0.5f);
        Tensor small = backend.fromHost(Shape{8, 16}, x.data());
        model->forward(small, false);
        std::vector<float> big(size_t(64) * 16, 0.5f);
        Tensor bigIn = backend.fromHost(Shape{64, 16}, big.data());
        backend.limit = 2000;  // the larger batch cannot get its activations
        QVERIFY_THROWS_EXCEPTION(OutOfMemoryError, model->forward(bigIn, false));
        // A batch between the old capacity and the failed one must allocate again, not reuse half-replaced
        // buffers.
        backend.limit = 1 << 20;
        std::vector<float> mid(size_t(16) * 16, 0.5f);
        Tensor midIn = backend.fromHost(Shape{16, 16}, mid.data());
        const Tensor& out = model->forward(midIn, false);
        QCOMPARE(out.shape(), (Shape{16, 4}));
        QVERIFY(backend.allFinite(out.f32(), out.numel()));
    }

    void resumeEqualsOneLongRun_data() {
        QTest::addColumn<QString>("optimizer");
        QTest::newRow("sgd") << "sgd";
        QTest::newRow("adamw") << "adamw";
    }
    void resumeEqualsOneLongRun() {
        QFETCH(QString, optimizer);
        QTemporaryDir dir;
        Project p = syntheticProject(3, true);
        p.training.optimizer = OptimizerKind(trainingSetting("optimizer").parseChoice(optimizer.toStdString()));
        p.training.learningRate = optimizer == "sgd" ? 0.05 : 0.003;
        p.training.deterministic = true;
        p.training.schedule = ScheduleKind::Cosine;
        p.training.warmupSteps = 5;
        p.dataset.noiseStd = 0.1f;  // augmentation RNG must continue too

        Recorder whole;
        {
            auto backend = test::makeCpuBackend();
            Trainer t(p, *backend, &whole, {});
            QVERIFY(t.run());
        }
        Recorder first, second;
        const std::string ckdir = (dir.path() + "/ck").toStdString();
        {
            // The same 2-epoch run, stopped after its first epoch.
            Project p1 = p;
            p1.training.checkpointDir = ckdir;
            auto backend = test::makeCpuBackend();
            TrainerOptions o;
            o.maxSteps = whole.steps.front().stepsPerEpoch;
            Trainer t(p1, *backend, &first, o);
            QVERIFY(t.run());
            QCOMPARE(first.checkpoints.size(), size_t(1));
        }
        {
            auto backend = test::makeCpuBackend();
            TrainerOptions o;
            o.resumeFrom = ckdir + "/epoch-001.safetensors";
            Trainer t(p, *backend, &second, o);
            QVERIFY2(t.run(), second.errors.empty() ? "" : second.errors.front().c_str());
        }
        QCOMPARE(first.steps.size() + second.steps.size(), whole.steps.size());
        for (size_t i = 0; i < whole.steps.size(); ++i) {
            const StepEvent& a = whole.steps[i];
            const StepEvent& b = i < first.steps.size() ? first.steps[i] : second.steps[i - first.steps.size()];
            QCOMPARE(b.step, a.step);
            QVERIFY2(std::abs(a.loss - b.loss) <= 1e-6,
                     qPrintable(QString("step %1: %2 vs %3").arg(a.step).arg(a.loss).arg(b.loss)));
            QCOMPARE(b.learningRate, a.learningRate);
        }
        QVERIFY(std::abs(whole.epochs.back().valLoss - second.epochs.back().valLoss) <= 1e-6);
    }

    void checkpointRoundTripsWeights() {
        QTemporaryDir dir;
        Project p = syntheticProject(4);
        p.training.epochs = 1;
        p.training.checkpointDir = (dir.path() + "/ck").toStdString();
        auto backend = test::makeCpuBackend();
        Recorder rec;
        Trainer t(p, *backend, &rec, {});
        QVERIFY(t.run());
        // A folder resolves to its best checkpoint; the file holds project, weights and optimizer state.
        Checkpoint c = loadCheckpoint(p.training.checkpointDir);
        QVERIFY(resolveCheckpointPath(p.training.checkpointDir).ends_with("best.safetensors"));
        QCOMPARE(c.epoch, 1);
        QVERIFY(c.project.graph == p.graph);
        QCOMPARE(c.weights.size(), size_t(4));  // two Dense layers, weight + bias
        QCOMPARE(c.weights.at("dense1.weight").size(), size_t(16 * 32));
        QCOMPARE(c.optimizerState.size(), size_t(4));
        QCOMPARE(c.classNames.size(), size_t(4));
        // No temporary files are left behind.
        for (const auto& e : std::filesystem::directory_iterator(p.training.checkpointDir))
            QVERIFY2(e.path().extension() == ".safetensors", e.path().c_str());
    }

    void perFeatureStandardizationIsKeptAndExported() {
        QTemporaryDir dir;
        const QString csv = dir.path() + "/t.csv";
        {
            QFile f(csv);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write("a,b,label\n");
            for (int i = 0; i < 64; ++i)
                f.write(QByteArray::number(i) + "," + QByteArray::number(1000 + 3 * i) + "," +
                        QByteArray::number(i % 2) + "\n");
        }
        Project p = syntheticProject(2);
        p.graph.setParams(p.graph.nodeByName("input")->id, Json{{"shape", {2}}});
        p.dataset = DatasetSettings{};
        p.dataset.kind = DatasetKind::Csv;
        p.dataset.trainPath = csv.toStdString();
        p.dataset.normalization = NormalizationMode::Standardize;
        p.training.epochs = 1;
        p.training.checkpointDir = (dir.path() + "/ck").toStdString();
        auto backend = test::makeCpuBackend();
        Recorder rec;
        Trainer t(p, *backend, &rec, {});
        QVERIFY2(t.run(), rec.errors.empty() ? "" : rec.errors.front().c_str());
        Checkpoint c;
        try {
            c = loadCheckpoint(p.training.checkpointDir);
        } catch (const std::exception& e) {
            QFAIL(e.what());
        }
        QCOMPARE(c.normalization.featureMean.size(), size_t(2));
        QVERIFY(std::abs(c.normalization.featureMean[1] - 1094.5f) < 1e-2);
        // Exports carry it too (each format's writer and loader are tested in test_export_onnx).
        const ExportModel exported = exportModelFromCheckpoint(c);
        QCOMPARE(exported.normalization.featureMean, c.normalization.featureMean);
        QCOMPARE(exported.normalization.featureStd, c.normalization.featureStd);
    }

    void nanLossNamesStepAndLayer() {
        QTemporaryDir dir;
        Project p = syntheticProject(4);
        p.dataset.normalization = NormalizationMode::None;
        // Overflows to a non-finite loss at once (at 1e6 the divergence check ends the run first: test_hardening).
        p.training.learningRate = 1e30;
        p.training.momentum = 0.9;
        p.training.epochs = 3;
        p.training.checkpointDir = (dir.path() + "/ck").toStdString();
        auto backend = test::makeCpuBackend();
        Recorder rec;
        Trainer t(p, *backend, &rec, {});
        QVERIFY(!t.run());
        QCOMPARE(rec.errors.size(), size_t(1));
        const QString msg = QString::fromStdString(rec.errors.front());
        QVERIFY2(msg.contains("step "), qPrintable(msg));
        QVERIFY2(msg.contains("NaN") || msg.contains("infinite"), qPrintable(msg));
        QVERIFY2(msg.contains("'dense1' (Dense)") || msg.contains("'dense2' (Dense)") || msg.contains("'relu1'"),
                 qPrintable(msg));
        QVERIFY(!rec.finished);
    }

    void stopPauseResumeBetweenSteps() {
        Project p = syntheticProject(4);
        p.training.epochs = 50;
        auto backend = test::makeCpuBackend();
        Recorder rec;
        Trainer t(p, *backend, &rec, {});
        std::atomic<int> seen{0};
        rec.stepHook = [&](const StepEvent&) { ++seen; };
        std::thread runner([&] { t.run(); });
        while (seen < 5) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        t.requestPause();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        const int atPause = seen;
        std::this_thread::sleep_for(std::chrono::milliseconds(150));
        QVERIFY(seen <= atPause + 1);  // at most the step in flight finishes
        QVERIFY(t.paused());
        t.requestResume();
        while (seen < atPause + 10) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        t.requestStop();
        runner.join();
        QVERIFY(rec.finished);
        QVERIFY(rec.fin.stoppedByUser);
        QVERIFY(rec.fin.epochsCompleted < 50);
    }

    void maxStepsStopsCleanly() {
        Project p = syntheticProject(4);
        auto backend = test::makeCpuBackend();
        Recorder rec;
        TrainerOptions o;
        o.maxSteps = 7;
        Trainer t(p, *backend, &rec, o);
        QVERIFY(t.run());
        QCOMPARE(rec.steps.size(), size_t(7));
        QVERIFY(!rec.fin.stoppedByUser);
    }

    // A project without a checkpoint folder still keeps its weights: in a run folder of its own beside the
    // project, written as the step limit stops the run mid-epoch; the newest such folder is found again.
    void runWithoutFolderKeepsWeights() {
        QTemporaryDir dir;
        const std::string projectPath = (dir.path() + "/proj.strata").toStdString();
        Project p = syntheticProject(4);
        p.name = "my model";
        QVERIFY(p.training.checkpointDir.empty());
        const auto now = std::chrono::system_clock::now();
        const std::string folder = newRunFolder(p, projectPath, {}, now);
        QVERIFY2(folder.starts_with((dir.path() + "/runs/my_model-").toStdString()), folder.c_str());
        QCOMPARE(latestRunFolder(p, projectPath, {}), std::string());
        auto backend = test::makeCpuBackend();
        Recorder rec;
        TrainerOptions o;
        o.projectPath = projectPath;
        o.runFolder = folder;
        o.maxSteps = 7;  // mid-epoch 1
        {
            Trainer t(p, *backend, &rec, o);
            QVERIFY(t.run());
        }
        QVERIFY(rec.logged("checkpoints go to " + folder));
        QCOMPARE(rec.checkpoints.size(), size_t(1));
        QVERIFY(std::filesystem::exists(folder + "/latest.safetensors"));
        const Checkpoint c = loadCheckpoint(folder);
        QCOMPARE(c.step, int64_t(7));
        QCOMPARE(c.stepInEpoch, int64_t(7));
        QCOMPARE(latestRunFolder(p, projectPath, {}), folder);
        // A second run started in the same second gets its own folder, and is then the latest.
        const std::string second = newRunFolder(p, projectPath, {}, now);
        QCOMPARE(second, folder + "-2");
        o.runFolder = second;
        Recorder rec2;
        {
            Trainer t(p, *backend, &rec2, o);
            QVERIFY(t.run());
        }
        QCOMPARE(latestRunFolder(p, projectPath, {}), second);
        Project other = p;
        other.name = "other";
        QCOMPARE(latestRunFolder(other, projectPath, {}), std::string());
        // An unsaved project's runs go under the per-user folder given.
        QCOMPARE(runsPlace(p, {}, "/data/strata").folder, std::string("/data/strata/runs"));
        // The configured folder wins over a run folder.
        p.training.checkpointDir = "ck";
        QCOMPARE(checkpointFolderForRun(p, projectPath, {}, now), (dir.path() + "/ck").toStdString());
    }

    // Stop mid-epoch keeps the weights of the steps done.
    void stopSavesLastWeights() {
        QTemporaryDir dir;
        Project p = syntheticProject(4);
        p.training.epochs = 50;
        p.training.checkpointDir = (dir.path() + "/ck").toStdString();
        auto backend = test::makeCpuBackend();
        Recorder rec;
        Trainer t(p, *backend, &rec, {});
        rec.stepHook = [&](const StepEvent& e) {
            if (e.step == e.stepsPerEpoch + 5) t.requestStop();  // step 5 of epoch 2
        };
        QVERIFY(t.run());
        QVERIFY(rec.fin.stoppedByUser);
        QCOMPARE(rec.checkpoints.size(), size_t(2));  // epoch 1, then the stop
        const Checkpoint c = loadCheckpoint(p.training.checkpointDir + "/latest.safetensors");
        QCOMPARE(c.step, rec.steps.front().stepsPerEpoch + 5);
        QCOMPARE(c.stepInEpoch, int64_t(5));
    }

    // Stop takes effect within a second even inside a step that takes several: forward and backward check
    // the request between layers. The interrupted step is dropped, so the checkpoint written as the run
    // stops holds the last whole step.
    void stopEndsALongStepBetweenLayers() {
        QTemporaryDir dir;
        Project p = syntheticProject(4);
        p.training.checkpointDir = (dir.path() + "/ck").toStdString();
        SlowGemmBackend backend(std::chrono::milliseconds(300));  // >= 5 GEMMs a step: >= 1.5 s
        Recorder rec;
        TrainerOptions o;
        o.telemetryIntervalMs = 0;
        Trainer t(p, backend, &rec, o);
        std::atomic<int> seen{0};
        rec.stepHook = [&](const StepEvent&) { ++seen; };
        using Clock = std::chrono::steady_clock;
        Clock::time_point returned;
        std::thread runner([&] {
            t.run();
            returned = Clock::now();
        });
        while (seen < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        std::this_thread::sleep_for(std::chrono::milliseconds(100));  // inside step 2
        const Clock::time_point asked = Clock::now();
        t.requestStop();
        runner.join();
        const double seconds = std::chrono::duration<double>(returned - asked).count();
        QVERIFY2(seconds < 1.0, qPrintable(QString("the run ended %1 s after Stop").arg(seconds)));
        QVERIFY2(rec.errors.empty(), rec.errors.empty() ? "" : rec.errors.front().c_str());
        QVERIFY(rec.fin.stoppedByUser);
        QCOMPARE(rec.steps.size(), size_t(1));
        QCOMPARE(loadCheckpoint(p.training.checkpointDir).step, int64_t(1));
    }

    void earlyStoppingKeepsBestEpoch() {
        QTemporaryDir dir;
        Project p = syntheticProject(4);
        p.training.learningRate = 0.0;  // nothing improves after the first epoch
        p.training.momentum = 0.0;
        p.training.epochs = 10;
        p.training.earlyStoppingPatience = 2;
        p.training.checkpointDir = (dir.path() + "/ck").toStdString();
        auto backend = test::makeCpuBackend();
        Recorder rec;
        Trainer t(p, *backend, &rec, {});
        QVERIFY(t.run());
        QVERIFY(rec.fin.earlyStopped);
        QCOMPARE(rec.fin.epochsCompleted, 3);
        QCOMPARE(rec.fin.bestEpoch, 1);
        QCOMPARE(loadCheckpoint(p.training.checkpointDir).epoch, 1);  // best.safetensors
    }

    void setupErrorsAreReported() {
        auto backend = test::makeCpuBackend();
        {
            Project p = syntheticProject(4);
            p.dataset.syntheticClasses = 5;  // output has 4 units
            Recorder rec;
            Trainer t(p, *backend, &rec, {});
            QVERIFY(!t.run());
            QVERIFY2(QString::fromStdString(rec.errors.front()).contains("'dense2' (Dense)"),
                     rec.errors.front().c_str());
        }
        {
            Project p = syntheticProject(4);
            p.dataset.syntheticShape = {8};
            Recorder rec;
            Trainer t(p, *backend, &rec, {});
            QVERIFY(!t.run());
            QVERIFY2(QString::fromStdString(rec.errors.front()).contains("Input 'input' expects [16]"),
                     rec.errors.front().c_str());
        }
        {
            Project p = syntheticProject(4);
            p.dataset.kind = DatasetKind::Idx;
            p.dataset.trainImages = "/nonexistent/images.gz";
            p.dataset.trainLabels = "/nonexistent/labels.gz";
            Recorder rec;
            Trainer t(p, *backend, &rec, {});
            QVERIFY(!t.run());
            QVERIFY2(QString::fromStdString(rec.errors.front()).contains("images.gz"), rec.errors.front().c_str());
        }
    }

    void learningRateSchedules() {
        TrainingSettings s;
        s.learningRate = 0.1;
        s.epochs = 10;
        s.schedule = ScheduleKind::Constant;
        QCOMPARE(learningRateAt(s, 500, 100), 0.1);
        s.schedule = ScheduleKind::Step;
        s.stepEpochs = 3;
        s.stepGamma = 0.5;
        QCOMPARE(learningRateAt(s, 299, 100), 0.1);
        QCOMPARE(learningRateAt(s, 300, 100), 0.05);
        QCOMPARE(learningRateAt(s, 650, 100), 0.025);
        s.schedule = ScheduleKind::Cosine;
        s.minLearningRate = 0.0;
        QCOMPARE(learningRateAt(s, 0, 100), 0.1);
        QVERIFY(std::abs(learningRateAt(s, 500, 100) - 0.05) < 1e-12);
        QVERIFY(learningRateAt(s, 999, 100) < 1e-5);
        s.warmupSteps = 10;
        QVERIFY(std::abs(learningRateAt(s, 0, 100) - 0.01) < 1e-12);
        QVERIFY(std::abs(learningRateAt(s, 4, 100) - 0.05) < 1e-5);
        s.warmupSteps = 0;
        s.schedule = ScheduleKind::OneCycle;
        QVERIFY(std::abs(learningRateAt(s, 0, 100) - 0.004) < 1e-12);
        QVERIFY(std::abs(learningRateAt(s, 300, 100) - 0.1) < 1e-12);
        QVERIFY(learningRateAt(s, 999, 100) < 1e-4);
    }
};

QTEST_GUILESS_MAIN(TestTraining)
#include "test_training.moc"
