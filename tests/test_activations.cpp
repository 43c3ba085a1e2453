// ActivationProbe and convFilters (core/infer/Activations): a hand-weighted Conv2D -> ReLU -> Flatten -> Dense
// model's captured outputs equal a direct computation and what the model cut at that node outputs (the Conv2D's own
// output, negatives and all, though a compiled model runs the ReLU inside it); histograms of a node over several
// batches equal the histogram of the directly computed values and a count by hand; an attention layer gives [T, D]; a
// trained checkpoint's filters are its weights, and its last node's capture is what Predict computes; errors name the
// node.
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>

#include "core/backend/BackendRegistry.h"
#include "core/graph/Model.h"
#include "core/infer/Activations.h"
#include "core/infer/Evaluation.h"
#include "core/infer/ExportCheck.h"
#include "core/train/Checkpoint.h"
#include "core/train/Trainer.h"
#include "tests/support/TestBackends.h"
#include "tests/support/TestProjects.h"

using namespace strata;

namespace {

constexpr int kH = 4, kW = 4, kFilters = 2, kUnits = 3;

// Input [1, 4, 4] -> Conv2D conv (2 filters 3x3, padding 1) -> ReLU relu -> Flatten flat -> Dense dense (3). With
// `cutAt`, the graph ends at that node (the truncated model).
Graph convGraph(const std::string& cutAt = {}) {
    Graph g;
    std::vector<test::LayerDef> chain{
        {"Input", "input", Json{{"shape", {1, kH, kW}}}},
        {"Conv2D", "conv", Json{{"filters", kFilters}, {"kernel", {3, 3}}, {"padding", {1, 1}}}},
        {"ReLU", "relu"},
        {"Flatten", "flat"},
        {"Dense", "dense", Json{{"units", kUnits}}}};
    if (!cutAt.empty())
        for (size_t i = 0; i < chain.size(); ++i)
            if (chain[i].name == cutAt) chain.resize(i + 1);
    test::addChain(g, chain);
    return g;
}

// Small integers and halves: every sum is exact in float, so the backend's order of additions cannot matter.
std::map<std::string, std::vector<float>> convWeights() {
    std::map<std::string, std::vector<float>> w;
    w["conv.weight"] = {1,    0,    -1,   2, 0, -2, 1,     0,     -1,  // a Sobel filter: gives negatives
                        0.5f, 0.5f, 0.5f, 0, 1, 0,  -0.5f, -0.5f, -0.5f};
    w["conv.bias"] = {0.5f, -1};
    std::vector<float> dense(size_t(kUnits * kFilters * kH * kW));
    for (size_t i = 0; i < dense.size(); ++i) dense[i] = float(int(i % 7) - 3) * 0.5f;
    w["dense.weight"] = dense;
    w["dense.bias"] = {1, 0, -1};
    return w;
}

ExportModel convModel() {
    ExportModel m;
    m.project.graph = convGraph();
    m.weights = convWeights();
    return m;
}

// Sample s: integer pixels, some negative.
std::vector<float> samples(int count) {
    std::vector<float> x(size_t(count * kH * kW));
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int((i * 7 + 3) % 11) - 5);
    return x;
}

// The convolution by its definition: [filters, H, W] for one sample.
std::vector<float> directConv(const float* x, const std::map<std::string, std::vector<float>>& w) {
    const std::vector<float>& k = w.at("conv.weight");
    std::vector<float> y(size_t(kFilters * kH * kW));
    for (int f = 0; f < kFilters; ++f)
        for (int r = 0; r < kH; ++r)
            for (int c = 0; c < kW; ++c) {
                float s = w.at("conv.bias")[size_t(f)];
                for (int i = 0; i < 3; ++i)
                    for (int j = 0; j < 3; ++j) {
                        const int rr = r + i - 1, cc = c + j - 1;
                        if (rr < 0 || rr >= kH || cc < 0 || cc >= kW) continue;
                        s += k[size_t(f * 9 + i * 3 + j)] * x[rr * kW + cc];
                    }
                y[size_t((f * kH + r) * kW + c)] = s;
            }
    return y;
}

std::vector<float> directDense(const std::vector<float>& conv, const std::map<std::string, std::vector<float>>& w) {
    std::vector<float> y(kUnits);
    const size_t n = conv.size();
    for (size_t u = 0; u < kUnits; ++u) {
        float s = w.at("dense.bias")[u];
        for (size_t i = 0; i < n; ++i) s += w.at("dense.weight")[u * n + i] * std::max(0.0f, conv[i]);
        y[u] = s;
    }
    return y;
}

// The outputs of a model compiled as Predict compiles it (fused), for one sample.
std::vector<float> runCompiled(const Graph& g, const std::map<std::string, std::vector<float>>& weights,
                               const float* x) {
    auto backend = backendRegistry().create(Device::cpu());
    auto model = compile(g, *backend, 0);
    std::map<std::string, std::vector<float>> own;
    for (const Model::NamedParameter& p : model->namedParameters()) own[p.name] = weights.at(p.name);
    applyWeights(*model, own);
    return predictSamples(*model, x, 1).outputs;
}

template <typename F>
QString errorOf(F&& f) {
    try {
        f();
    } catch (const std::invalid_argument& e) {
        return QString::fromStdString(e.what());
    }
    return QStringLiteral("no error");
}

}  // namespace

class TestActivations : public QObject {
    Q_OBJECT
private slots:
    void captureEqualsDirectComputationAndTruncatedModel() {
        const ExportModel m = convModel();
        ActivationProbe probe(m);
        QCOMPARE(probe.inputShape(), (Shape{1, kH, kW}));
        const std::vector<float> x = samples(3);
        for (int s = 0; s < 3; ++s) {
            const float* xs = x.data() + s * kH * kW;
            const std::vector<NodeActivation> a = probe.capture(xs, {"conv", "relu", "dense", "input"});
            QCOMPARE(a.size(), size_t(4));
            QCOMPARE(a[0].node, std::string("conv"));
            QCOMPARE(a[0].shape, (Shape{kFilters, kH, kW}));
            const std::vector<float> conv = directConv(xs, m.weights);
            QCOMPARE(a[0].values, conv);
            // The Conv2D's own output, before the ReLU that a compiled model runs inside it.
            QVERIFY(std::any_of(conv.begin(), conv.end(), [](float v) { return v < 0; }));
            QCOMPARE(a[0].values, runCompiled(convGraph("conv"), m.weights, xs));
            QCOMPARE(a[1].values, runCompiled(convGraph("relu"), m.weights, xs));
            QVERIFY(std::all_of(a[1].values.begin(), a[1].values.end(), [](float v) { return v >= 0; }));
            QCOMPARE(a[2].shape, (Shape{kUnits}));
            QCOMPARE(a[2].values, directDense(conv, m.weights));
            QCOMPARE(a[2].values, runCompiled(convGraph(), m.weights, xs));
            QCOMPARE(a[3].shape, (Shape{1, kH, kW}));
            QCOMPARE(a[3].values, std::vector<float>(xs, xs + kH * kW));
        }
    }

    // An attention layer's output is [T, D]: for "good bad zzz" every real query gives "good" 4 times the weight of
    // the other real tokens and padding none, so its row is (4/6) good + (1/6) bad + (1/6) <unk> = (2/3, 1/6).
    void attentionOutputIsTimeByDim() {
        ActivationProbe probe(test::sentimentAttentionModel());
        const std::vector<float> ids{2, 3, 1, 0};
        const std::vector<NodeActivation> a = probe.capture(ids.data(), {"attn", "mean"});
        QCOMPARE(a[0].shape, (Shape{4, 2}));
        for (int t = 0; t < 3; ++t) {
            QVERIFY(std::abs(a[0].values[size_t(2 * t)] - 2.0f / 3) < 1e-5f);
            QVERIFY(std::abs(a[0].values[size_t(2 * t + 1)] - 1.0f / 6) < 1e-5f);
        }
        QCOMPARE(a[1].shape, (Shape{2}));
        QVERIFY(std::abs(a[1].values[0] - 2.0f / 3) < 1e-5f);
    }

    void histogramOverBatchesEqualsDirectValues() {
        const ExportModel m = convModel();
        ActivationProbe probe(m);
        constexpr int kSamples = 5;
        const std::vector<float> x = samples(kSamples);
        // First one sample, so the model's buffers are larger than the last batch of 2 and 1 (capacity rows).
        probe.captureOne(x.data(), "conv");
        probe.histogram(x.data(), 4, "conv", 8, 4);
        const NodeHistogram nh = probe.histogram(x.data(), kSamples, "conv", 12, 2);
        QCOMPARE(nh.samples, int64_t(kSamples));
        QCOMPARE(nh.shape, (Shape{kFilters, kH, kW}));
        const ValueHistogram& h = nh.values;
        std::vector<float> direct;
        for (int s = 0; s < kSamples; ++s) {
            const std::vector<float> c = directConv(x.data() + s * kH * kW, m.weights);
            direct.insert(direct.end(), c.begin(), c.end());
        }
        QCOMPARE(h.count, int64_t(kSamples * kFilters * kH * kW));
        int64_t sum = 0;
        for (uint32_t c : h.counts) sum += c;
        QCOMPARE(sum, h.count);
        QCOMPARE(h, histogramOf(direct.data(), int64_t(direct.size()), 12));

        // At most 100 values: the conv gives 32 per sample, so 3 samples are counted, the first 3.
        const NodeHistogram capped = probe.histogram(x.data(), kSamples, "conv", 12, 4, 100);
        QCOMPARE(capped.samples, int64_t(3));
        QCOMPARE(capped.values, histogramOf(direct.data(), 3 * kFilters * kH * kW, 12));
        // One sample even when it alone is over the limit.
        QCOMPARE(probe.histogram(x.data(), kSamples, "conv", 12, 4, 10).samples, int64_t(1));
    }

    // A raised interrupt flag ends the pass; lowered, the probe works again.
    void interruptFlagEndsThePass() {
        ActivationProbe probe(convModel());
        const std::vector<float> x = samples(2);
        std::atomic<bool> stop{true};
        probe.setInterruptFlag(&stop);
        QVERIFY_THROWS_EXCEPTION(ModelInterrupted, probe.captureOne(x.data(), "dense"));
        QVERIFY_THROWS_EXCEPTION(ModelInterrupted, probe.histogram(x.data(), 2, "conv", 8));
        stop = false;
        QCOMPARE(probe.captureOne(x.data(), "dense").values,
                 directDense(directConv(x.data(), convWeights()), convWeights()));
        probe.setInterruptFlag(nullptr);
    }

    // Dense 2 -> 2, the identity: over samples (0, 1), (2, 3), (4, 8) its outputs are 0, 1, 2, 3, 4, 8; four bins
    // of width 2 over [0, 8] hold {0, 1}, {2, 3}, {4}, {8}.
    void histogramCountedByHand() {
        ExportModel m;
        test::addChain(m.project.graph,
                       {{"Input", "input", Json{{"shape", {2}}}}, {"Dense", "identity", Json{{"units", 2}}}});
        m.weights = {{"identity.weight", {1, 0, 0, 1}}, {"identity.bias", {0, 0}}};
        ActivationProbe probe(m);
        const std::vector<float> x{0, 1, 2, 3, 4, 8};
        const ValueHistogram h = probe.histogram(x.data(), 3, "identity", 4, 2).values;
        QCOMPARE(h.counts, (std::vector<uint32_t>{2, 2, 1, 1}));
        QCOMPARE(h.lo, 0.0f);
        QCOMPARE(h.hi, 8.0f);
        QCOMPARE(h.count, int64_t(6));
        QCOMPARE(h.zeros, int64_t(1));
        QCOMPARE(h.mean, 3.0);
    }

    void filtersOfHandWeights() {
        const ExportModel m = convModel();
        const ConvFilters f = convFilters(m, "conv");
        QCOMPARE(f.out, int64_t(kFilters));
        QCOMPARE(f.in, int64_t(1));
        QCOMPARE(f.kh, int64_t(3));
        QCOMPARE(f.kw, int64_t(3));
        QCOMPARE(f.values, m.weights.at("conv.weight"));
        QCOMPARE(f.min, (std::vector<float>{-2, -0.5f}));
        QCOMPARE(f.max, (std::vector<float>{2, 1}));
        QCOMPARE(f.filter(1)[4], 1.0f);
    }

    // Two input channels of a 1x2 filter: the tile shows their mean.
    void filterMeanOverInputChannels() {
        ConvFilters f;
        f.node = "conv";
        f.out = 2;
        f.in = 2;
        f.kh = 1;
        f.kw = 2;
        f.values = {1, 2, 3, 6, -1, 0, 1, 4};
        QCOMPARE(filterMeanOverInputs(f, 0), (std::vector<float>{2, 4}));
        QCOMPARE(filterMeanOverInputs(f, 1), (std::vector<float>{0, 2}));
        QVERIFY_THROWS_EXCEPTION(std::out_of_range, filterMeanOverInputs(f, 2));
    }

    // A trained checkpoint with a BatchNorm (which Predict folds away): the filters are the checkpoint's weights,
    // every node has an output, and the last node's capture is what Predict's compiled model outputs.
    void trainedCheckpoint() {
        QTemporaryDir dir;
        Project p = test::convBatchNormProject();
        p.training.checkpointDir = dir.path().toStdString();
        auto backend = test::makeCpuBackend();
        test::RecordedRun run;
        Trainer t(p, *backend, &run);
        QVERIFY2(t.run(), run.error.c_str());
        const Checkpoint ckpt = loadCheckpoint(dir.path().toStdString());
        const ExportModel m = loadModelFile(resolveCheckpointPath(dir.path().toStdString()));

        const ConvFilters f = convFilters(m, "conv");
        QCOMPARE(f.out, int64_t(8));
        QCOMPARE(f.values, ckpt.weights.at("conv.weight"));
        for (int64_t k = 0; k < f.out; ++k) {
            const std::vector<float> one(f.filter(k), f.filter(k) + 9);
            QCOMPARE(f.min[size_t(k)], *std::min_element(one.begin(), one.end()));
            QCOMPARE(f.max[size_t(k)], *std::max_element(one.begin(), one.end()));
        }

        ActivationProbe probe(m);
        std::vector<float> x(144);
        for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i) * 0.37f);
        const std::vector<NodeActivation> a = probe.capture(x.data(), {"conv", "bn", "relu", "dense"});
        QCOMPARE(a[0].shape, (Shape{8, 12, 12}));
        QCOMPARE(a[1].shape, (Shape{8, 12, 12}));
        QVERIFY(a[0].values != a[1].values);  // the BatchNorm ran
        auto predictBackend = backendRegistry().create(Device::cpu());
        auto predict = compileExportModel(m, *predictBackend);
        const Predictions out = predictSamples(*predict, x.data(), 1);
        QCOMPARE(a[3].values.size(), out.outputs.size());
        for (size_t i = 0; i < out.outputs.size(); ++i)
            QVERIFY2(std::abs(a[3].values[i] - out.outputs[i]) < 1e-4f * (1 + std::abs(out.outputs[i])),
                     qPrintable(QStringLiteral("output %1: %2 vs %3").arg(i).arg(a[3].values[i]).arg(out.outputs[i])));
    }

    void errorsNameTheNode() {
        const ExportModel m = convModel();
        ActivationProbe probe(m);
        const std::vector<float> x = samples(1);
        QString e = errorOf([&] { probe.capture(x.data(), {"conv", "dense9"}); });
        QVERIFY2(e.startsWith(QStringLiteral("node 'dense9' is not in the model (its nodes: input, conv, relu")),
                 qPrintable(e));
        QVERIFY2(e.contains(QStringLiteral("train the project again")), qPrintable(e));
        e = errorOf([&] { probe.histogram(x.data(), 1, "nope", 8); });
        QVERIFY2(e.startsWith(QStringLiteral("node 'nope' is not in the model")), qPrintable(e));
        e = errorOf([&] { probe.histogram(x.data(), 0, "conv", 8); });
        QVERIFY2(e.contains(QStringLiteral("node 'conv' needs at least one sample")), qPrintable(e));

        e = errorOf([&] { convFilters(m, "dense"); });
        QVERIFY2(
            e == QStringLiteral("node 'dense' is a Dense, not a Conv2D: only a Conv2D's filters are images to show"),
            qPrintable(e));
        e = errorOf([&] { convFilters(m, "conv7"); });
        QVERIFY2(e.startsWith(QStringLiteral("node 'conv7' is not in the model")), qPrintable(e));
        ExportModel noWeights = m;
        noWeights.weights.erase("conv.weight");
        e = errorOf([&] { convFilters(noWeights, "conv"); });
        QVERIFY2(e.startsWith(QStringLiteral("node 'conv' has no weights in the model (no tensor 'conv.weight')")),
                 qPrintable(e));
        ExportModel shortWeights = m;
        shortWeights.weights["conv.weight"].pop_back();
        e = errorOf([&] { convFilters(shortWeights, "conv"); });
        QVERIFY2(
            e.startsWith(QStringLiteral("node 'conv' has 17 weights in the model, its shape [2, 1, 3, 3] needs 18")),
            qPrintable(e));
    }
};

QTEST_GUILESS_MAIN(TestActivations)
#include "test_activations.moc"
