// Weight and gradient histograms (core/train/ParameterHistograms): bins, moments and counts against a hand
// count; the heat map's re-binning by hand; the per-layer verdicts (vanishing, exploding, dead ReLU) on made-up
// samples; and a training run sampling every N steps, to its observer and to the run folder's histograms.jsonl
// (read back equal), with a ReLU made dead by its weights reported dead and its layer's gradient vanishing.
#include <QDir>
#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <fstream>

#include "core/backend/BackendRegistry.h"
#include "core/graph/Model.h"
#include "core/train/Checkpoint.h"
#include "core/train/ParameterHistograms.h"
#include "core/train/Trainer.h"
#include "tests/support/TestProjects.h"

using namespace strata;

namespace {

struct Samples : TrainingObserver {
    std::vector<HistogramSample> samples;
    std::string error;
    void onHistograms(const HistogramSample& s) override { samples.push_back(s); }
    void onError(const std::string& m) override { error = m; }
};

ParameterSample param(int node, double gradRms, int64_t n = 10) {
    ParameterSample p;
    p.node = node;
    p.layer = "layer" + std::to_string(node);
    p.parameter = "weight";
    p.gradients.count = n;
    p.gradients.rms = gradRms;
    p.gradients.counts = {uint32_t(n)};
    return p;
}

}  // namespace

class TestParameterHistograms : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

private slots:
    // {-1, 0, 0.5, 1, 2, NaN} in 3 bins over [-1, 2] (width 1): [-1, 0) holds -1; [0, 1) holds 0 and 0.5; the
    // last, [1, 2] with its end, 1 and 2. Mean 2.5 / 5, RMS sqrt(6.25 / 5).
    void binsAndMomentsByHand() {
        const float nan = std::numeric_limits<float>::quiet_NaN();
        const std::vector<float> v{-1, 0, 0.5f, 1, 2, nan};
        const ValueHistogram h = histogramOf(v.data(), int64_t(v.size()), 3);
        QCOMPARE(h.counts, (std::vector<uint32_t>{1, 2, 2}));
        QCOMPARE(h.lo, -1.0f);
        QCOMPARE(h.hi, 2.0f);
        QCOMPARE(h.count, int64_t(5));
        QCOMPARE(h.zeros, int64_t(1));
        QCOMPARE(h.nonFinite, int64_t(1));
        QVERIFY(std::abs(h.mean - 0.5) < 1e-12);
        QVERIFY(std::abs(h.rms - std::sqrt(1.25)) < 1e-12);
        // All equal: one value range of width 0, every value in the middle bin.
        const std::vector<float> same(7, 0.25f);
        const ValueHistogram s = histogramOf(same.data(), 7, 5);
        QCOMPARE(s.counts, (std::vector<uint32_t>{0, 0, 7, 0, 0}));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, histogramOf(same.data(), 7, 0));
    }

    // Two histograms onto 4 rows over their shared range [0, 4] (rows 1 wide): the first, [0, 2] in 2 bins of 2
    // values each, puts half in row 0 and half in row 1; the second, [0, 4] in one bin of 4, a quarter in each.
    void heatMapRebinsByOverlap() {
        ValueHistogram a, b;
        a.lo = 0, a.hi = 2, a.counts = {2, 2}, a.count = 4;
        b.lo = 0, b.hi = 4, b.counts = {4}, b.count = 4;
        const HeatMap m = heatMap({a, b, ValueHistogram{}}, 4);
        QCOMPARE(m.columns, 3);
        QCOMPARE(m.lo, 0.0f);
        QCOMPARE(m.hi, 4.0f);
        const float want[4][2] = {{0.5f, 0.25f}, {0.5f, 0.25f}, {0, 0.25f}, {0, 0.25f}};
        for (int r = 0; r < 4; ++r) {
            for (int c = 0; c < 2; ++c)
                QVERIFY2(std::abs(m.at(r, c) - want[r][c]) < 1e-6, qPrintable(QString::number(r)));
            QCOMPARE(m.at(r, 2), 0.0f);  // an empty histogram: an empty column
        }
    }

    // Gradient RMS 1, 1e-5, 1, 1e4: the median is 1, so the second vanishes (under 1e-3) and the fourth explodes
    // (over 1e3); a gradient of exactly 0 vanishes; a ReLU 60% dead is dead, one 40% dead is not.
    void verdictsOnMadeUpSamples() {
        HistogramSample s;
        s.parameters = {param(1, 1), param(2, 1e-5), param(3, 1), param(4, 1e4), param(5, 0)};
        s.relus = {{6, "relu_a", 100, 0.6}, {7, "relu_b", 100, 0.4}};
        const std::vector<LayerHealth> h = assessLayers(s);
        QCOMPARE(int(h.size()), 7);
        QCOMPARE(h[0].gradient, GradientHealth::Ok);
        QCOMPARE(h[1].gradient, GradientHealth::Vanishing);
        QVERIFY(h[1].text.find("vanishing") != std::string::npos);
        QCOMPARE(h[2].gradient, GradientHealth::Ok);
        QCOMPARE(h[3].gradient, GradientHealth::Exploding);
        QVERIFY(h[3].text.find("lower the learning rate") != std::string::npos);
        QCOMPARE(h[4].gradient, GradientHealth::Vanishing);
        QVERIFY(h[5].dead && h[5].text.find("60%") != std::string::npos);
        QVERIFY(!h[6].dead && h[6].text.empty());
        // Two parameters of one node: one RMS over both (weights of 10 values RMS 3, bias of 10 values RMS 1 ->
        // sqrt((90 + 10) / 20)).
        HistogramSample two;
        two.parameters = {param(1, 3), param(1, 1)};
        QVERIFY(std::abs(assessLayers(two)[0].gradientRms - std::sqrt(5.0)) < 1e-12);
    }

    // A run sampling every 5 steps: the observer and histograms.jsonl get the same samples, at steps 0, 5, 10...;
    // dense1's weights and bias start at 0 and -1, so relu1 gives 0 for every input (dead, and no gradient reaches
    // dense1: vanishing), while dense2 learns.
    // Runs compared: each run's last sample at or before the step, on one shared range; runs without histograms
    // (no folder, no file) and a step before a run's first sample say so.
    void comparesRunsOnASharedRange() {
        auto sample = [](int64_t step, float lo, float hi, std::vector<uint32_t> counts, float gradLo) {
            HistogramSample s;
            s.step = step;
            ParameterSample p;
            p.node = 1;
            p.layer = "dense";
            p.parameter = "weight";
            p.values.lo = lo;
            p.values.hi = hi;
            p.values.counts = counts;
            for (uint32_t c : counts) p.values.count += c;
            p.gradients = p.values;
            p.gradients.lo = gradLo;
            p.gradients.hi = gradLo + 1;
            s.parameters.push_back(p);
            return s;
        };
        auto write = [this](const QString& name, const std::vector<HistogramSample>& samples) {
            QDir().mkpath(m_dir.filePath(name));
            std::ofstream f(m_dir.filePath(name + "/histograms.jsonl").toStdString());
            for (const HistogramSample& s : samples) f << histogramSampleToJson(s).dump() << "\n";
            return m_dir.filePath(name).toStdString();
        };
        const std::string a =
            write("cmpA", {sample(0, 5, 6, {1}, 0), sample(10, 0, 1, {4}, 0), sample(20, 0, 1, {4}, 0)});
        const std::string b = write("cmpB", {sample(10, 2, 3, {2, 2}, 2), sample(30, 9, 10, {1}, 2)});
        QDir().mkpath(m_dir.filePath("cmpC"));
        std::vector<RunHistograms> runs{readRunHistograms("run A", a), readRunHistograms("run B", b),
                                        readRunHistograms("run C", m_dir.filePath("cmpC").toStdString()),
                                        readRunHistograms("run D", "")};
        QCOMPARE(int(runs[0].samples.size()), 3);
        QVERIFY(runs[0].missing.empty());
        QVERIFY2(runs[2].missing.find("no histograms.jsonl in") != std::string::npos, runs[2].missing.c_str());
        QVERIFY2(runs[3].missing.find("no run folder") != std::string::npos, runs[3].missing.c_str());
        QCOMPARE(histogramTensorNames(runs[0].samples), std::vector<std::string>{"dense.weight"});

        // At step 20: A's sample of step 20 ([0, 1]), B's of step 10 ([2, 3]); 3 shared bins over [0, 3].
        HistogramComparison c = compareRunHistograms(runs, "dense.weight", false, 20, 3);
        QCOMPARE(c.steps, (std::vector<int64_t>{20, 10, -1, -1}));
        QCOMPARE(c.shares.columns, 4);
        QCOMPARE(c.shares.lo, 0.0f);
        QCOMPARE(c.shares.hi, 3.0f);
        QCOMPARE(c.shares.at(0, 0), 1.0f);
        QCOMPARE(c.shares.at(2, 0), 0.0f);
        QCOMPARE(c.shares.at(2, 1), 1.0f);
        QCOMPARE(c.shares.at(0, 1), 0.0f);
        for (int r = 0; r < 3; ++r) QCOMPARE(c.shares.at(r, 2) + c.shares.at(r, 3), 0.0f);
        QVERIFY(c.missing[0].empty() && c.missing[1].empty());
        QCOMPARE(c.missing[2], runs[2].missing);
        // The last samples (step -1): A's 20, B's 30 ([9, 10]): the range widens to [0, 10].
        c = compareRunHistograms(runs, "dense.weight", false, -1, 10);
        QCOMPARE(c.steps[1], int64_t(30));
        QCOMPARE(c.shares.hi, 10.0f);
        QCOMPARE(c.shares.at(9, 1), 1.0f);
        // Gradients are their own histograms.
        c = compareRunHistograms(runs, "dense.weight", true, 20, 3);
        QCOMPARE(c.shares.lo, 0.0f);
        QCOMPARE(c.shares.at(2, 1), 1.0f);
        // Before B's first sample; a tensor no run has.
        c = compareRunHistograms(runs, "dense.weight", false, 5, 3);
        QCOMPARE(c.steps[0], int64_t(0));
        QCOMPARE(c.steps[1], int64_t(-1));
        QVERIFY2(c.missing[1].find("no sample at or before step 6") != std::string::npos, c.missing[1].c_str());
        c = compareRunHistograms(runs, "conv.weight", false, -1, 3);
        QVERIFY2(c.missing[0].find("no tensor named 'conv.weight'") != std::string::npos, c.missing[0].c_str());
    }

    void trainingRunSamplesEveryNSteps() {
        Project project = test::blobsMlpProject("hist", 16, 4);
        const QString folder = m_dir.filePath("run");
        project.training.checkpointDir = folder.toStdString();
        auto backend = backendRegistry().create(Device::parse("cpu"), BackendOptions{});
        std::unique_ptr<Model> m = compile(project.graph, *backend, project.training.seed);
        auto weights = modelWeights(*m);
        std::fill(weights["dense1.weight"].begin(), weights["dense1.weight"].end(), 0.0f);
        std::fill(weights["dense1.bias"].begin(), weights["dense1.bias"].end(), -1.0f);
        TrainerOptions opt;
        opt.initialWeights = weights;
        opt.histogramEvery = 5;
        opt.histogramBins = 16;
        opt.maxSteps = 12;
        opt.telemetryIntervalMs = 0;
        Samples obs;
        Trainer trainer(project, *backend, &obs, opt);
        QVERIFY2(trainer.run(), obs.error.c_str());
        QCOMPARE(int(obs.samples.size()), 3);
        QCOMPARE(obs.samples[0].step, int64_t(0));
        QCOMPARE(obs.samples[2].step, int64_t(10));
        const HistogramSample& s = obs.samples[2];
        QCOMPARE(int(s.parameters.size()), 4);  // dense1 and dense2, weight and bias
        QCOMPARE(s.parameters[0].values.count, int64_t(16 * 32));
        QCOMPARE(int(s.parameters[0].values.counts.size()), 16);
        QCOMPARE(int(s.relus.size()), 1);
        QCOMPARE(s.relus[0].layer, std::string("relu1"));
        QCOMPARE(s.relus[0].units, int64_t(32));
        QCOMPARE(s.relus[0].deadFraction, 1.0);
        const std::vector<LayerHealth> health = assessLayers(s);
        QCOMPARE(health[0].layer, std::string("dense1"));
        QCOMPARE(health[0].gradient, GradientHealth::Vanishing);
        QCOMPARE(health[1].gradient, GradientHealth::Ok);
        QVERIFY(health[2].dead);
        const std::vector<HistogramSample> file = readHistogramFile((folder + "/histograms.jsonl").toStdString());
        QCOMPARE(int(file.size()), 3);
        for (size_t i = 0; i < file.size(); ++i) {
            // JSON keeps doubles to the last bit (nlohmann writes the shortest round-trip form).
            QCOMPARE(file[i].step, obs.samples[i].step);
            QVERIFY(file[i] == obs.samples[i]);
        }
        // A torn last line (a crash mid-write) is skipped; a bad line before the end is an error naming it.
        {
            std::ofstream torn((folder + "/histograms.jsonl").toStdString(), std::ios::app);
            torn << "{\"step\": 15, \"epo";
        }
        QCOMPARE(int(readHistogramFile((folder + "/histograms.jsonl").toStdString()).size()), 3);
        const std::string bad = m_dir.filePath("bad.jsonl").toStdString();
        {
            std::ofstream f(bad);
            f << "{\"step\": 1}\n" << histogramSampleToJson(s).dump() << "\n";
        }
        try {
            readHistogramFile(bad);
            QFAIL("a bad first line should be refused");
        } catch (const std::runtime_error& e) {
            QVERIFY2(std::string(e.what()).find("line 1") != std::string::npos, e.what());
        }
    }
};

QTEST_MAIN(TestParameterHistograms)
#include "test_parameter_histograms.moc"
