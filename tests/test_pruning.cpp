// Pruning: the polynomial schedule against TF Model Optimization's formula, magnitude masks (per layer and
// global, exact counts), masks held through training (pruned weights stay exactly zero under momentum), a
// pruning run resumed from its checkpoint equal to one long run, structured pruning that removes zeroed
// filters without changing a single output (through Flatten and BatchNorm, refusing what mixes channels),
// and `strata-train prune` end to end on synthetic data.
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <sstream>

#include "app/CliCommands.h"
#include "core/backend/Backend.h"
#include "core/graph/Model.h"
#include "core/train/Checkpoint.h"
#include "core/train/PruneRun.h"
#include "core/train/Pruning.h"
#include "core/train/StructuredPruning.h"
#include "core/train/Trainer.h"
#include "tests/support/TestBackends.h"
#include "tests/support/TestProjects.h"

using namespace strata;
using test::addChain;
using test::LayerDef;

namespace {

using Weights = std::map<std::string, std::vector<float>>;

// One thread: OpenMP workers spinning on a busy 2-core machine cost more than these tiny models gain.
std::unique_ptr<Backend> cpu() {
    BackendOptions o;
    o.threads = 1;
    return test::makeCpuBackend(o);
}

struct Recorder : TrainingObserver {
    std::vector<StepEvent> steps;
    std::vector<EpochEvent> epochs;
    std::vector<std::string> errors, logs;
    void onStep(const StepEvent& e) override { steps.push_back(e); }
    void onEpoch(const EpochEvent& e) override { epochs.push_back(e); }
    void onError(const std::string& m) override { errors.push_back(m); }
    void onLog(const std::string& m) override { logs.push_back(m); }
};

// Input [1, 8, 8] -> conv1 (6) -> ReLU -> MaxPool -> conv2 (4) -> ReLU -> Flatten -> fc1 (8) -> ReLU -> fc2 (3),
// on image-shaped blobs.
Project smallCnn() {
    Project p;
    p.name = "small cnn";
    addChain(p.graph, {{"Input", "input", Json{{"shape", {1, 8, 8}}}},
                       {"Conv2D", "conv1", Json{{"filters", 6}, {"kernel", {3, 3}}, {"padding", {1, 1}}}},
                       {"ReLU", "relu1"},
                       {"MaxPool2D", "pool1", Json{{"kernel", {2, 2}}}},
                       {"Conv2D", "conv2", Json{{"filters", 4}, {"kernel", {3, 3}}, {"padding", {1, 1}}}},
                       {"ReLU", "relu2"},
                       {"Flatten", "flatten"},
                       {"Dense", "fc1", Json{{"units", 8}}},
                       {"ReLU", "relu3"},
                       {"Dense", "fc2", Json{{"units", 3}}}});
    test::useBlobs(p, 480, 3, {1, 8, 8});
    p.training.optimizer = OptimizerKind::Sgd;
    p.training.learningRate = 0.05;
    p.training.momentum = 0.9;
    p.training.batchSize = 32;
    p.training.epochs = 2;
    p.training.seed = 11;
    p.training.threads = 1;
    p.training.deterministic = true;
    return p;
}

Weights initialWeights(const Project& p) {
    auto backend = cpu();
    auto model = compile(p.graph, *backend, p.training.seed);
    return modelWeights(*model);
}

std::vector<float> outputsOf(const Project& p, const Weights& w, const std::vector<float>& inputs, int64_t n) {
    auto backend = cpu();
    auto model = compile(p.graph, *backend, 0);
    applyWeights(*model, w);
    const Tensor x = backend->fromHost(model->inputShape().withBatch(n), inputs.data());
    const Tensor& y = model->forward(x, false);
    std::vector<float> out(static_cast<size_t>(y.numel()));
    backend->toHost(y, out.data());
    return out;
}

std::vector<float> randomInputs(size_t count, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    std::vector<float> v(count);
    for (float& x : v) x = d(rng);
    return v;
}

int64_t zeros(const std::vector<float>& v) { return std::count(v.begin(), v.end(), 0.0f); }

// Zeroes filter (row) `k` of a [rows, ...] weight.
void zeroRow(std::vector<float>& w, int64_t rows, int64_t k) {
    const int64_t len = static_cast<int64_t>(w.size()) / rows;
    std::fill(w.begin() + k * len, w.begin() + (k + 1) * len, 0.0f);
}

}  // namespace

class TestPruning : public QObject {
    Q_OBJECT

private slots:
    // ---- schedule ------------------------------------------------------------------------------

    void polynomialScheduleMatchesTheFormula() {
        PruningSchedule s;
        s.initialSparsity = 0.2;
        s.finalSparsity = 0.8;
        s.beginStep = 100;
        s.endStep = 300;
        s.frequency = 50;
        s.power = 3;
        // TF-MOT PolynomialDecay: final + (initial - final) * (1 - (step - begin) / (end - begin))^power.
        QCOMPARE(s.sparsityAt(0), 0.2);
        QCOMPARE(s.sparsityAt(100), 0.2);
        QVERIFY(std::abs(s.sparsityAt(200) - (0.8 - 0.6 * 0.125)) < 1e-12);  // half way: 0.725
        QVERIFY(std::abs(s.sparsityAt(250) - (0.8 - 0.6 / 64)) < 1e-12);
        QCOMPARE(s.sparsityAt(300), 0.8);
        QCOMPARE(s.sparsityAt(5000), 0.8);
        // Monotone, as the masks only ever grow.
        for (int64_t t = 100; t < 300; ++t) QVERIFY(s.sparsityAt(t + 1) >= s.sparsityAt(t));
        std::vector<int64_t> prunes;
        for (int64_t t = 0; t < 400; ++t)
            if (s.prunesAt(t)) prunes.push_back(t);
        QCOMPARE(prunes, (std::vector<int64_t>{100, 150, 200, 250, 300}));
        // An end step off the frequency grid is still a pruning step, so the final sparsity is reached.
        s.endStep = 320;
        QVERIFY(s.prunesAt(320));
        QVERIFY(!s.prunesAt(321));
    }

    void scheduleRefusesNonsense() {
        auto refuses = [](PruningSchedule s, const char* word) {
            try {
                s.check();
            } catch (const std::invalid_argument& e) {
                return QString(e.what()).contains(word);
            }
            return false;
        };
        PruningSchedule valid;
        valid.endStep = 100;
        valid.check();
        PruningSchedule s = valid;
        s.finalSparsity = 1.0;
        QVERIFY(refuses(s, "final sparsity"));
        s = valid;
        s.initialSparsity = 0.9;
        QVERIFY(refuses(s, "above the final"));
        s = valid;
        s.beginStep = 101;
        QVERIFY(refuses(s, "before the begin step"));
        s = valid;
        s.frequency = 0;
        QVERIFY(refuses(s, "frequency"));
        // A schedule that ends after the run never reaches its final sparsity.
        PruningSettings p;
        p.schedule.endStep = 500;
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, pruningForRun(p, 400));
        p.schedule.endStep = -1;
        QCOMPARE(pruningForRun(p, 400).schedule.endStep, int64_t(300));
        // Round trip through a checkpoint's JSON.
        p.schedule.endStep = 77;
        p.scope = PruningScope::Global;
        QVERIFY(pruningSettingsFromJson(pruningSettingsToJson(p)) == p);
    }

    // ---- masks -------------------------------------------------------------------------------

    void magnitudeMasksPerLayerAndGlobal() {
        Weights w{{"a.weight", {0.5f, -0.1f, 0.3f, -0.7f, 0.05f, 0.2f, -0.4f, 0.6f, 0.01f, -0.9f}},
                  {"b.weight", {0.02f, -0.03f, 0.04f, 0.015f}}};
        const std::vector<std::string> names{"a.weight", "b.weight"};
        auto perLayer = magnitudeMasks(w, names, 0.5, PruningScope::PerLayer);
        // Each weight on its own: the 5 (of 10) and 2 (of 4) smallest magnitudes go.
        QCOMPARE(perLayer["a.weight"], (std::vector<float>{1, 0, 0, 1, 0, 0, 1, 1, 0, 1}));
        QCOMPARE(perLayer["b.weight"], (std::vector<float>{0, 1, 1, 0}));
        // One threshold over all 14: 7 go, and b (all small) loses everything.
        auto global = magnitudeMasks(w, names, 0.5, PruningScope::Global);
        QCOMPARE(zeros(global["a.weight"]) + zeros(global["b.weight"]), int64_t(7));
        QCOMPARE(zeros(global["b.weight"]), int64_t(4));
        QCOMPARE(global["a.weight"], (std::vector<float>{1, 0, 1, 1, 0, 1, 1, 1, 0, 1}));
        // Ties are broken by position: exactly round(n * s) zeros even when all values are equal.
        Weights same{{"c.weight", std::vector<float>(9, 0.25f)}};
        auto tied = magnitudeMasks(same, {"c.weight"}, 0.34, PruningScope::PerLayer);
        QCOMPARE(tied["c.weight"], (std::vector<float>{0, 0, 0, 1, 1, 1, 1, 1, 1}));
    }

    void trainingKeepsPrunedWeightsAtZero() {
        Project p = smallCnn();
        PruningSettings s;
        s.schedule.finalSparsity = 0.75;
        s.schedule.frequency = 3;  // 12 steps per epoch, 24 in all: end step 18
        TrainerOptions o;
        o.pruning = s;
        auto backend = cpu();
        Recorder rec;
        QTemporaryDir dir;
        p.training.checkpointDir = (dir.path() + "/ck").toStdString();
        Trainer t(p, *backend, &rec, o);
        QVERIFY2(t.run(), rec.errors.empty() ? "" : rec.errors.front().c_str());
        QCOMPARE(rec.steps.size(), size_t(24));
        const Checkpoint c = loadCheckpoint(p.training.checkpointDir + "/latest.safetensors");
        // Every Conv2D and Dense weight at exactly 75% (momentum keeps pushing the pruned ones; the masks win),
        // biases untouched.
        for (const std::string& name : prunableWeights(p.graph)) {
            const std::vector<float>& v = c.weights.at(name);
            QCOMPARE(zeros(v), std::llround(0.75 * static_cast<double>(v.size())));
            const std::vector<float>& m = c.masks.at(name);
            for (size_t i = 0; i < v.size(); ++i)
                if (m[i] == 0.0f) QCOMPARE(v[i], 0.0f);
        }
        QCOMPARE(zeros(c.weights.at("conv1.bias")), int64_t(0));
        QCOMPARE(c.trainerState.at("pruning").at("current_sparsity").get<double>(), 0.75);
        QCOMPARE(c.trainerState.at("pruning").at("end_step").get<int64_t>(), int64_t(18));
        // The first epoch ended below the final sparsity, so only the second may be the best.
        QVERIFY(!rec.epochs[0].best);
        QVERIFY(rec.epochs[1].best);
        QVERIFY(std::any_of(rec.logs.begin(), rec.logs.end(),
                            [](const std::string& l) { return l.find("final sparsity at step 19") != l.npos; }));
    }

    void resumedPruningRunEqualsOneLongRun() {
        Project p = smallCnn();
        PruningSettings s;
        s.schedule.finalSparsity = 0.6;
        s.schedule.frequency = 4;
        s.scope = PruningScope::Global;
        Recorder whole;
        Weights wholeWeights;
        QTemporaryDir dir;
        {
            Project pw = p;
            pw.training.checkpointDir = (dir.path() + "/whole").toStdString();
            auto backend = cpu();
            TrainerOptions o;
            o.pruning = s;
            Trainer t(pw, *backend, &whole, o);
            QVERIFY(t.run());
            wholeWeights = loadCheckpoint(pw.training.checkpointDir + "/latest.safetensors").weights;
        }
        const std::string ckdir = (dir.path() + "/parts").toStdString();
        Recorder first, second;
        {
            Project p1 = p;
            p1.training.checkpointDir = ckdir;
            auto backend = cpu();
            TrainerOptions o;
            o.pruning = s;
            o.maxSteps = whole.steps.front().stepsPerEpoch;
            Trainer t(p1, *backend, &first, o);
            QVERIFY(t.run());
        }
        {
            // No pruning settings given: the checkpoint's schedule and masks continue.
            Project p2 = p;
            p2.training.checkpointDir = ckdir;
            auto backend = cpu();
            TrainerOptions o;
            o.resumeFrom = ckdir + "/epoch-001.safetensors";
            Trainer t(p2, *backend, &second, o);
            QVERIFY2(t.run(), second.errors.empty() ? "" : second.errors.front().c_str());
        }
        QCOMPARE(first.steps.size() + second.steps.size(), whole.steps.size());
        for (size_t i = 0; i < whole.steps.size(); ++i) {
            const StepEvent& b = i < first.steps.size() ? first.steps[i] : second.steps[i - first.steps.size()];
            QVERIFY2(std::abs(whole.steps[i].loss - b.loss) <= 1e-6, qPrintable(QString("step %1").arg(i + 1)));
        }
        const Weights resumed = loadCheckpoint(ckdir + "/latest.safetensors").weights;
        for (const std::string& name : prunableWeights(p.graph)) {
            const std::vector<float>& a = wholeWeights.at(name);
            const std::vector<float>& b = resumed.at(name);
            QCOMPARE(zeros(a), zeros(b));
            for (size_t i = 0; i < a.size(); ++i) QVERIFY(std::abs(a[i] - b[i]) <= 1e-6f);
        }
    }

    // ---- structured ----------------------------------------------------------------------------

    void structuredRemovesZeroFiltersWithoutChangingOutputs() {
        const Project p = smallCnn();
        Weights w = initialWeights(p);
        // The weakest filters and units are exactly zero (bias too), so removing them must change nothing.
        for (int k : {1, 4, 5}) zeroRow(w.at("conv1.weight"), 6, k), w.at("conv1.bias")[k] = 0;
        for (int k : {0, 3}) zeroRow(w.at("conv2.weight"), 4, k), w.at("conv2.bias")[k] = 0;
        for (int k : {2, 5, 6, 7}) zeroRow(w.at("fc1.weight"), 8, k), w.at("fc1.bias")[k] = 0;

        StructuredPruneOptions o;
        o.fraction = 0.5;
        const StructuredPruneResult r = pruneStructured(p, w, o);
        QCOMPARE(r.layers.size(), size_t(4));
        QCOMPARE(r.layers[0].after, int64_t(3));
        QCOMPARE(r.layers[1].after, int64_t(2));
        QCOMPARE(r.layers[2].after, int64_t(4));
        QCOMPARE(r.layers[3].after, int64_t(3));
        QVERIFY(r.layers[3].skipped.find("output") != std::string::npos);
        QCOMPARE(r.project.graph.nodeByName("conv1")->params.at("filters").get<int>(), 3);
        QCOMPARE(r.project.graph.nodeByName("fc1")->params.at("units").get<int>(), 4);
        // conv2's kept filters keep only conv1's kept input channels: [2, 3, 3, 3] out of [4, 6, 3, 3].
        QCOMPARE(r.weights.at("conv2.weight").size(), size_t(2 * 3 * 9));
        // After the Flatten, each of conv2's channels is 4 x 4 = 16 columns of fc1: [4, 2 * 16].
        QCOMPARE(r.weights.at("fc1.weight").size(), size_t(4 * 32));
        QCOMPARE(r.weights.at("fc2.weight").size(), size_t(3 * 4));
        QVERIFY(r.parametersAfter < r.parametersBefore);
        // Kept rows are the original ones, in order: conv1 keeps filters 0, 2, 3.
        const std::vector<float>& before = w.at("conv1.weight");
        const std::vector<float>& after = r.weights.at("conv1.weight");
        for (int i = 0; i < 9; ++i) {
            QCOMPARE(after[static_cast<size_t>(i)], before[static_cast<size_t>(i)]);
            QCOMPARE(after[static_cast<size_t>(9 + i)], before[static_cast<size_t>(18 + i)]);
            QCOMPARE(after[static_cast<size_t>(18 + i)], before[static_cast<size_t>(27 + i)]);
        }
        const int64_t n = 7;
        const std::vector<float> x = randomInputs(size_t(n) * 64, 3);
        const std::vector<float> a = outputsOf(p, w, x, n), b = outputsOf(r.project, r.weights, x, n);
        QCOMPARE(a.size(), b.size());
        float worst = 0;
        for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
        QVERIFY2(worst <= 1e-5f, qPrintable(QString("largest output difference %1").arg(worst)));
    }

    void structuredSlicesBatchNormAndRanksByNorm() {
        Project p;
        addChain(p.graph, {{"Input", "input", Json{{"shape", {2, 6, 6}}}},
                           {"Conv2D", "conv", Json{{"filters", 4}, {"kernel", {3, 3}}}},
                           {"BatchNorm", "bn"},
                           {"ReLU", "relu"},
                           {"GlobalAvgPool", "gap"},
                           {"Dense", "out", Json{{"units", 3}}}});
        Weights w = initialWeights(p);
        w.at("bn.running_mean") = {10, 11, 12, 13};
        w.at("bn.running_var") = {1, 2, 3, 4};
        w.at("bn.gamma") = {0.5f, 0.6f, 0.7f, 0.8f};
        // L1 and L2 disagree. Filter 0: one 2.0 (L1 2.17, L2 2.0); filter 1: one 1.0 (L1 1.17, L2 1.0);
        // filter 2: eighteen 0.2 (L1 3.6, L2 0.85); filter 3: small. L1 keeps 0 and 2, L2 keeps 0 and 1.
        std::vector<float>& cw = w.at("conv.weight");
        std::fill(cw.begin(), cw.end(), 0.01f);
        cw[0] = 2.0f;
        cw[18] = 1.0f;
        std::fill(cw.begin() + 36, cw.begin() + 54, 0.2f);
        StructuredPruneOptions o;
        o.fraction = 0.5;
        o.norm = FilterNorm::L1;
        StructuredPruneResult l1 = pruneStructured(p, w, o);
        QCOMPARE(l1.weights.at("bn.running_mean"), (std::vector<float>{10, 12}));
        QCOMPARE(l1.weights.at("bn.running_var"), (std::vector<float>{1, 3}));
        QCOMPARE(l1.weights.at("bn.gamma"), (std::vector<float>{0.5f, 0.7f}));
        QCOMPARE(l1.weights.at("out.weight").size(), size_t(3 * 2));
        o.norm = FilterNorm::L2;
        StructuredPruneResult l2 = pruneStructured(p, w, o);
        QCOMPARE(l2.weights.at("bn.running_mean"), (std::vector<float>{10, 11}));
        // The pruned project compiles and runs.
        const std::vector<float> x = randomInputs(2 * 72, 5);
        QCOMPARE(outputsOf(l2.project, l2.weights, x, 2).size(), size_t(6));
    }

    void structuredRefusesWhatMixesChannels() {
        Project p;
        const int in = p.graph.addNode("Input", "input", Json{{"shape", {5}}});
        const int a = p.graph.addNode("Dense", "a", Json{{"units", 6}});
        const int b = p.graph.addNode("Dense", "b", Json{{"units", 6}});
        const int add = p.graph.addNode("Add", "add");
        const int out = p.graph.addNode("Dense", "out", Json{{"units", 2}});
        p.graph.connect(in, a);
        p.graph.connect(in, b);
        p.graph.connect(a, add, "in0");
        p.graph.connect(b, add, "in1");
        p.graph.connect(add, out);
        const Weights w = initialWeights(p);
        try {
            pruneStructured(p, w, {});
            QFAIL("expected a refusal");
        } catch (const std::invalid_argument& e) {
            const QString m = e.what();
            QVERIFY2(m.contains("a: it feeds 'add' (Add)") && m.contains("out: the graph's output layer"), e.what());
        }
        StructuredPruneOptions bad;
        bad.fraction = 1.0;
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, pruneStructured(p, w, bad));
        Weights missing = w;
        missing.erase("a.bias");
        QVERIFY_THROWS_EXCEPTION(std::runtime_error, pruneStructured(p, missing, {}));
    }

    // ---- strata-train prune -------------------------------------------------------------------

    void pruneCommandEndToEnd() {
        QTemporaryDir dir;
        Project p = smallCnn();
        p.id = newProjectId();
        p.training.epochs = 1;
        p.training.checkpointDir = (dir.path() + "/dense").toStdString();
        {
            auto backend = cpu();
            Recorder rec;
            Trainer t(p, *backend, &rec, {});
            QVERIFY(t.run());
        }
        const std::string dense = p.training.checkpointDir, out = (dir.path() + "/p60").toStdString();
        std::ostringstream o, e;
        int rc = runPruneCommand({dense, "--sparsity", "0.6", "--fine-tune-epochs", "2", "--frequency", "5", "--scope",
                                  "global", "--quiet", "-o", out},
                                 o, e);
        QVERIFY2(rc == 0, (o.str() + e.str()).c_str());
        QVERIFY2(o.str().find("weight sparsity 60.0%") != std::string::npos, o.str().c_str());
        QVERIFY2(o.str().find("validation accuracy on 120 samples: original") != std::string::npos, o.str().c_str());
        // An ordinary project and checkpoint folder: the project reads, and its best checkpoint is pruned.
        const Project pruned = readProject(out + "/small_cnn-pruned.strata");
        QCOMPARE(pruned.training.epochs, 2);
        // Another model, another project (issue 34): its runs are not the dense model's.
        QVERIFY(isValidProjectId(pruned.id));
        QVERIFY(pruned.id != p.id);
        const Checkpoint c = loadCheckpoint(out);
        QCOMPARE(c.epoch, 2);
        QVERIFY(std::abs(overallSparsity(weightSparsity(c.project.graph, c.weights)) - 0.6) < 1e-3);
        // The folder is not overwritten by a second run.
        std::ostringstream o2, e2;
        QCOMPARE(runPruneCommand({dense, "--sparsity", "0.6", "-o", out}, o2, e2), 1);
        QVERIFY2(e2.str().find("already holds a run") != std::string::npos, e2.str().c_str());

        const std::string sout = (dir.path() + "/s50").toStdString();
        std::ostringstream so, se;
        rc = runPruneCommand({dense, "--sparsity", "0.5", "--structured", "--fine-tune-epochs", "1", "-o", sout}, so,
                             se);
        QVERIFY2(rc == 0, (so.str() + se.str()).c_str());
        QVERIFY2(so.str().find("conv1 (Conv2D): 6 -> 3 filters") != std::string::npos, so.str().c_str());
        const Checkpoint sc = loadCheckpoint(sout);
        QCOMPARE(sc.project.graph.nodeByName("conv2")->params.at("filters").get<int>(), 2);
        // Usage errors name the option.
        std::ostringstream uo, ue;
        QCOMPARE(runPruneCommand({dense, "--sparsity", "1.5", "-o", sout}, uo, ue), 2);
        QVERIFY2(ue.str().find("--sparsity: '1.5'") != std::string::npos, ue.str().c_str());
        QCOMPARE(runPruneCommand({dense, "--sparsity", "0.5", "--structured", "--end-step", "4", "-o", sout}, uo, ue),
                 2);
    }
};

QTEST_GUILESS_MAIN(TestPruning)
#include "test_pruning.moc"
