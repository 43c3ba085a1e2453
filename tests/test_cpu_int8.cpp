// The int8 engine (core/infer/Int8Engine, core/backend/CpuInt8): each op against simulateInt8, the float
// simulation of the same QDQ file, on the uint8 grid of every quantized tensor; the whole fashion_cnn_bn model;
// the int8 kernels (oneDNN's VNNI ones and Strata's own) counted and named; refused on a CPU without AVX512-VNNI
// (oneDNN capped by DNNL_MAX_CPU_ISA in a child process); a Transformer's float islands.
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>

#include "core/backend/CpuInt8.h"
#include "core/data/Dataset.h"
#include "core/export/FoldBatchNorm.h"
#include "core/export/Onnx.h"
#include "core/export/Quantize.h"
#include "core/graph/Model.h"
#include "core/infer/Evaluation.h"
#include "core/infer/ExportCheck.h"
#include "core/infer/Int8Engine.h"
#include "core/infer/Predict.h"
#include "tests/support/TestBackends.h"
#include "tests/support/TestProjects.h"

using namespace strata;

namespace {

std::vector<float> uniform(int64_t n, float lo, float hi, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = d(rng);
    return v;
}

// Biases and BatchNorm parameters and statistics away from their initial 0 and 1, so that each takes part.
void perturb(ExportModel& m, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(-0.5f, 0.5f);
    for (auto& [name, values] : m.weights) {
        const bool var = name.ends_with(".running_var");
        if (!(name.ends_with(".bias") || name.ends_with(".beta") || name.ends_with(".gamma") ||
              name.ends_with(".running_mean") || var))
            continue;
        for (float& v : values) v = var || name.ends_with(".gamma") ? 1.0f + d(rng) : d(rng);
    }
}

struct Int8File {
    ExportModel file;  // as loadModelFile reads the int8 ONNX file back
    std::vector<float> inputs;
    int64_t count = 0;
};

// `project` exported as int8 (calibrated on `calibration`, normalized samples) and read back. `folded`: as the
// export writes it (prepareInt8Export: BatchNorms folded first; the list in `folds`); otherwise the graph as
// drawn, as a file with BatchNorms that cannot be folded has them.
Int8File int8File(const Project& project, const std::string& path, const DataSplit& calibration,
                  std::vector<float> inputs, unsigned seed = 1, bool folded = false,
                  std::vector<FoldedBatchNorm>* folds = nullptr, ExportModel* floatModel = nullptr) {
    ExportModel m = untrainedExportModel(project, "");
    perturb(m, seed);
    if (folded) {
        QuantizationOptions o;
        o.calibrationSamples = calibration.count;
        const Int8Export e = prepareInt8Export(m, calibration, o);
        OnnxExportOptions options;
        options.int8 = &e.calibration;
        writeOnnx(path, e.model, options);
        if (folds) *folds = e.folded;
    } else {
        test::writeInt8Onnx(path, m, calibration);
    }
    if (floatModel) *floatModel = m;
    Int8File f;
    f.file = loadModelFile(path);
    f.count = static_cast<int64_t>(inputs.size()) / calibration.sampleShape.numel();
    f.inputs = std::move(inputs);
    return f;
}

DataSplit randomSplit(const Shape& sample, int64_t count, unsigned seed) {
    DataSplit s;
    s.sampleShape = sample;
    s.count = count;
    // Mostly positive, so the input's zero point is neither 0 nor 128.
    s.inputs = uniform(count * sample.numel(), -0.7f, 2.0f, seed);
    s.labels.assign(static_cast<size_t>(count), 0);
    return s;
}

// How far the engine's values of each quantized tensor are from the simulation's, in steps of its grid.
struct GridAgreement {
    int64_t values = 0, exact = 0;
    int64_t maxSteps = 0;
};

struct Compared {
    std::map<std::string, GridAgreement> nodes;
    std::vector<float> engine, simulated;  // outputs
};

Compared compare(const Int8File& f, int threads = 2) {
    Compared c;
    std::map<std::string, std::vector<float>> tapped;
    // One batch: the engine keeps the last batch of each node.
    c.simulated =
        simulateInt8(f.file, f.file.int8Activations, f.inputs.data(), f.count, int(f.count),
                     [&](const std::string& node, const float* v, int64_t n) { tapped[node].assign(v, v + n); });
    Int8Engine engine(f.file, f.file.int8Activations, threads);
    c.engine = engine.run(f.inputs.data(), f.count, int(f.count));
    for (const auto& [node, q] : f.file.int8Activations) {
        if (!tapped.count(node)) continue;  // a Dropout's: the simulation never sees it
        std::vector<float> got;
        try {
            got = engine.nodeValues(node);
        } catch (const std::invalid_argument&) {
            continue;  // a table the max pooling after it applies: never materialized (its pooling is compared)
        }
        const std::vector<float>& want = tapped.at(node);
        GridAgreement& a = c.nodes[node];
        if (got.size() != want.size()) {
            a.maxSteps = 1 << 30;
            continue;
        }
        for (size_t i = 0; i < got.size(); ++i) {
            const auto steps = static_cast<int64_t>(std::lround(std::fabs(got[i] - want[i]) / q.scale));
            a.values++;
            a.exact += steps == 0;
            a.maxSteps = std::max(a.maxSteps, steps);
        }
    }
    return c;
}

void expectGrid(const Compared& c, const std::string& node, int64_t maxSteps, double minExact) {
    QVERIFY2(c.nodes.count(node), qPrintable(QString::fromStdString("no quantized tensor " + node)));
    const GridAgreement& a = c.nodes.at(node);
    const double exact = a.values ? double(a.exact) / double(a.values) : 0.0;
    qInfo("%s: %lld values, %.4f%% exactly equal, at most %lld step(s) apart", node.c_str(),
          static_cast<long long>(a.values), 100.0 * exact, static_cast<long long>(a.maxSteps));
    QVERIFY2(a.values > 0, node.c_str());
    QVERIFY2(a.maxSteps <= maxSteps,
             qPrintable(QString::fromStdString(node + ": " + std::to_string(a.maxSteps) + " steps")));
    QVERIFY2(exact >= minExact, qPrintable(QString::fromStdString(node + ": " + std::to_string(exact))));
}

// expectGrid's QVERIFYs return from it only: stop the test too.
#define EXPECT_GRID(...)                        \
    do {                                        \
        expectGrid(__VA_ARGS__);                \
        if (QTest::currentTestFailed()) return; \
    } while (false)

double maxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
    double worst = a.size() == b.size() ? 0.0 : 1e30;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) worst = std::max(worst, double(std::fabs(a[i] - b[i])));
    return worst;
}

double range(const std::vector<float>& v) {
    return double(*std::max_element(v.begin(), v.end())) - double(*std::min_element(v.begin(), v.end()));
}

Project chainProject(const std::vector<test::LayerDef>& layers, const std::vector<int64_t>& shape) {
    Project p;
    p.name = "int8";
    test::addChain(p.graph, layers);
    test::useBlobs(p, 64, 3, shape);
    return p;
}

}  // namespace

class TestCpuInt8 : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;
    std::string path(const std::string& name) const {
        return (m_dir.path() + "/" + QString::fromStdString(name)).toStdString();
    }

private slots:
    void init() {
        if (std::string(QTest::currentTestFunction()) == "refusedWithoutAvx512Vnni") return;  // any CPU
        const std::string why = cpu::int8Unavailable();
        if (!why.empty()) QSKIP(qPrintable("no native int8 here: " + QString::fromStdString(why)));
    }

    // Conv2D (padded, strided, with a bias) and Dense after a Flatten of its NHWC output. The input's rounding is
    // the same expression in both: exact. The convolution's int32 sum is exact where the simulation sums float
    // products in its own order and adds the bias in float: a value within float error of a rounding boundary
    // lands one step away, nothing else differs.
    void convolutionAndDense() {
        const Project p = chainProject(
            {{"Input", "input", Json{{"shape", {3, 11, 11}}}},
             {"Conv2D", "conv", Json{{"filters", 8}, {"kernel", {3, 3}}, {"padding", {1, 1}}, {"stride", {2, 2}}}},
             {"Conv2D", "conv_b", Json{{"filters", 16}, {"kernel", {3, 3}}, {"padding", {1, 1}}}},
             {"Flatten", "flatten"},
             {"Dense", "fc", Json{{"units", 24}}},
             {"Dense", "logits", Json{{"units", 5}}}},
            {3, 11, 11});
        const Shape shape{3, 11, 11};
        const Int8File f =
            int8File(p, path("conv.onnx"), randomSplit(shape, 200, 1), randomSplit(shape, 300, 2).inputs);
        const cpu::Int8Counters before = cpu::int8Counters();
        const Compared c = compare(f);
        const cpu::Int8Counters after = cpu::int8Counters();
        QCOMPARE(after.convolutions - before.convolutions, int64_t(2));
        QCOMPARE(after.matmuls - before.matmuls, int64_t(2));
        EXPECT_GRID(c, "input", 0, 1.0);
        EXPECT_GRID(c, "conv", 1, 0.999);
        // conv_b reads conv's values: where those differ by a step, its sum differs by one weight's worth.
        EXPECT_GRID(c, "conv_b", 3, 0.99);
        EXPECT_GRID(c, "fc", 3, 0.99);
        // The logits (float32 in the file): within a few of fc's steps times logits' weights.
        QVERIFY2(maxAbsDiff(c.engine, c.simulated) <= 0.02 * range(c.simulated),
                 qPrintable(QString::number(maxAbsDiff(c.engine, c.simulated))));
    }

    // Dense on a vector input with a fused ReLU (its producer's grid starts at 0, so the clamp is the ReLU), and a
    // ReLU that is not fused (its producer feeds two layers): on the grid, max(q, zero point).
    void denseAndReLU() {
        Project p;
        p.name = "mlp";
        const std::vector<int> ids = test::addChain(p.graph, {{"Input", "input", Json{{"shape", {40}}}},
                                                              {"Dense", "fc1", Json{{"units", 32}}},
                                                              {"ReLU", "relu1"},
                                                              {"Dense", "fc2", Json{{"units", 32}}},
                                                              {"ReLU", "relu2"}});
        // add = relu2 + fc2: fc2 feeds two layers, so it keeps its own (signed) range.
        const int add = p.graph.addNode("Add", "add", Json{{"inputs", 2}});
        const int logits = p.graph.addNode("Dense", "logits", Json{{"units", 3}});
        p.graph.connect(ids[4], add, "in0");
        p.graph.connect(ids[3], add, "in1");
        p.graph.connect(add, logits);
        test::useBlobs(p, 64, 3, {40});
        const Int8File f =
            int8File(p, path("mlp.onnx"), randomSplit(Shape{40}, 200, 3), randomSplit(Shape{40}, 256, 4).inputs);
        const Compared c = compare(f);
        EXPECT_GRID(c, "fc1", 1, 0.99);
        EXPECT_GRID(c, "relu1", 1, 0.99);
        QVERIFY(f.file.int8Activations.at("fc2").zeroPoint > 0);
        EXPECT_GRID(c, "fc2", 3, 0.98);
        // The ReLU on fc2's grid then requantized, and the Add on dequantized values: the same float expression
        // as the simulation on equal inputs, so they add no step of their own.
        EXPECT_GRID(c, "relu2", 3, 0.98);
        EXPECT_GRID(c, "add", 4, 0.98);
        QVERIFY(maxAbsDiff(c.engine, c.simulated) <= 0.02 * range(c.simulated));
    }

    // Max pooling keeps its input's grid: oneDNN's u8 max of equal values is exact. Average pooling and the
    // global average sum the integers exactly and divide once; the simulation sums floats: at most one step.
    void pooling() {
        const Shape shape{4, 12, 12};
        const Project p =
            chainProject({{"Input", "input", Json{{"shape", {4, 12, 12}}}},
                          {"MaxPool2D", "max", Json{{"kernel", {2, 2}}}},
                          {"AvgPool2D", "avg", Json{{"kernel", {3, 3}}, {"stride", {1, 1}}, {"padding", {1, 1}}}},
                          {"GlobalAvgPool", "gap"},
                          {"Dense", "logits", Json{{"units", 3}}}},
                         {4, 12, 12});
        const Int8File f =
            int8File(p, path("pool.onnx"), randomSplit(shape, 100, 5), randomSplit(shape, 128, 6).inputs);
        const cpu::Int8Counters before = cpu::int8Counters();
        const Compared c = compare(f);
        QCOMPARE(cpu::int8Counters().poolings - before.poolings, int64_t(1));
        EXPECT_GRID(c, "max", 0, 1.0);
        EXPECT_GRID(c, "avg", 1, 0.99);
        EXPECT_GRID(c, "gap", 1, 0.98);
    }

    // BatchNorm alone on a quantized input: a table per channel from the input's grid to the output's, in double
    // where the CPU backend computes in float: at most one step.
    void batchNorm() {
        const Shape shape{4, 6, 6};
        const Project p = chainProject({{"Input", "input", Json{{"shape", {4, 6, 6}}}},
                                        {"BatchNorm", "bn"},
                                        {"Flatten", "flatten"},
                                        {"Dense", "logits", Json{{"units", 3}}}},
                                       {4, 6, 6});
        const Int8File f =
            int8File(p, path("bn.onnx"), randomSplit(shape, 100, 11), randomSplit(shape, 128, 12).inputs);
        const Compared c = compare(f);
        EXPECT_GRID(c, "bn", 1, 0.999);
    }

    // BatchNorm -> ReLU -> MaxPool: with every gamma positive the pooling runs before the BatchNorm's table
    // (max T(x) = T(max x) for a table that never decreases), with one negative it cannot; both as simulated.
    void maxPoolAfterBatchNorm_data() {
        QTest::addColumn<bool>("negativeGamma");
        QTest::newRow("gamma > 0: pooled first") << false;
        QTest::newRow("a gamma < 0: table first") << true;
    }
    void maxPoolAfterBatchNorm() {
        QFETCH(bool, negativeGamma);
        const Shape shape{2, 8, 8};
        const Project p =
            chainProject({{"Input", "input", Json{{"shape", {2, 8, 8}}}},
                          {"Conv2D", "conv", Json{{"filters", 6}, {"kernel", {3, 3}}, {"padding", {1, 1}}}},
                          {"BatchNorm", "bn"},
                          {"ReLU", "relu"},
                          {"MaxPool2D", "pool", Json{{"kernel", {2, 2}}}},
                          {"Flatten", "flatten"},
                          {"Dense", "logits", Json{{"units", 3}}}},
                         {2, 8, 8});
        ExportModel m = untrainedExportModel(p, "");
        perturb(m, 13);
        if (negativeGamma) m.weights.at("bn.gamma")[2] = -0.8f;
        const DataSplit calibration = randomSplit(shape, 100, 14);
        test::writeInt8Onnx(path("bnpool.onnx"), m, calibration);
        Int8File f;
        f.file = loadModelFile(path("bnpool.onnx"));
        f.inputs = randomSplit(shape, 128, 15).inputs;
        f.count = 128;
        const Compared c = compare(f);
        EXPECT_GRID(c, "conv", 1, 0.999);
        EXPECT_GRID(c, "pool", 2, 0.999);
        Int8Engine engine(f.file, f.file.int8Activations);
        bool pooledFirst = false;
        for (const std::string& line : engine.plan())
            pooledFirst = pooledFirst || line.find("never decreases") != std::string::npos;
        QCOMPARE(pooledFirst, !negativeGamma);
    }

    // A residual block: conv -> ReLU, added to the block's input.
    void residualAdd() {
        Project p;
        p.name = "residual";
        const std::vector<int> ids =
            test::addChain(p.graph, {{"Input", "input", Json{{"shape", {4, 8, 8}}}},
                                     {"Conv2D", "conv", Json{{"filters", 4}, {"kernel", {3, 3}}, {"padding", {1, 1}}}},
                                     {"ReLU", "relu"}});
        const int add = p.graph.addNode("Add", "add", Json{{"inputs", 2}});
        const std::vector<int> tail =
            test::addChain(p.graph, {{"Flatten", "flatten"}, {"Dense", "logits", Json{{"units", 3}}}});
        p.graph.connect(ids[2], add, "in0");
        p.graph.connect(ids[0], add, "in1");
        p.graph.connect(add, tail[0]);
        test::useBlobs(p, 64, 3, {4, 8, 8});
        const Shape shape{4, 8, 8};
        const Int8File f = int8File(p, path("res.onnx"), randomSplit(shape, 100, 7), randomSplit(shape, 128, 8).inputs);
        const Compared c = compare(f);
        EXPECT_GRID(c, "relu", 1, 0.99);
        EXPECT_GRID(c, "add", 2, 0.99);
    }

    // The whole fashion_cnn_bn model (BatchNorm as a table per channel between the conv's grid and the ReLU's)
    // on Fashion-MNIST images: a step of difference early moves later sums by a weight's worth, so later layers
    // may differ by a few steps at a few values; the classes agree.
    void fashionCnnBn() {
        Project p = readProject(test::sourcePath("examples/fashion_cnn_bn.strata"));
        p.dataset.trainLimit = 300;
        p.dataset.validationLimit = 256;
        const DatasetBundle data = loadDataset(p.dataset, "");
        const Int8File f = int8File(p, path("fashion_cnn_bn.onnx"), data.train, data.validation.inputs);
        const cpu::Int8Counters before = cpu::int8Counters();
        const Compared c = compare(f);
        const cpu::Int8Counters after = cpu::int8Counters();
        QCOMPARE(after.convolutions - before.convolutions, int64_t(4));
        QCOMPARE(after.matmuls - before.matmuls, int64_t(2));
        QCOMPARE(after.poolings - before.poolings, int64_t(2));
        EXPECT_GRID(c, "input", 0, 1.0);
        EXPECT_GRID(c, "conv1", 1, 0.999);
        // bn1 scales conv1's one-step differences by its gamma / std in bn1's steps.
        EXPECT_GRID(c, "bn1", 4, 0.999);
        EXPECT_GRID(c, "pool1", 4, 0.999);
        EXPECT_GRID(c, "pool2", 8, 0.99);
        EXPECT_GRID(c, "fc1", 8, 0.95);
        const auto a = argmaxRows(c.engine.data(), f.count, 10), b = argmaxRows(c.simulated.data(), f.count, 10);
        int64_t same = 0;
        for (size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
        qInfo("fashion_cnn_bn: %lld of %lld classes agree; logits %.3g apart (range %.3g)",
              static_cast<long long>(same), static_cast<long long>(f.count), maxAbsDiff(c.engine, c.simulated),
              range(c.simulated));
        QVERIFY(same >= f.count * 98 / 100);
        QVERIFY(maxAbsDiff(c.engine, c.simulated) <= 0.05 * range(c.simulated));

        // oneDNN's VNNI kernels ran, not its reference code (conv1, on one channel, runs Strata's own VNNI kernel:
        // fewChannelConvEqualsOneDnn); the ReLUs cost nothing.
        Int8Engine engine(f.file, f.file.int8Activations, 2);
        engine.run(f.inputs.data(), 1, 1);
        int vnni = 0, fused = 0, own = 0;
        for (const std::string& line : engine.plan()) {
            qInfo("%s", line.c_str());
            if (line.find(": int8 convolution") != std::string::npos ||
                line.find(": int8 matmul") != std::string::npos) {
                const bool mine = line.rfind("conv1: int8 convolution (strata:avx512_vnni", 0) == 0;
                QVERIFY2(mine || line.find("avx512_core_vnni") != std::string::npos, line.c_str());
                QVERIFY2(line.find("ref") == std::string::npos, line.c_str());
                ++vnni;
                own += mine;
            }
            fused += line.find("fused") != std::string::npos;
        }
        QCOMPARE(vnni, 6);
        QCOMPARE(own, 1);
        QCOMPARE(fused, 5);
        // Both max poolings pool the convolution's values and apply the BatchNorm's table after (gamma > 0 here).
        const std::vector<std::string> plan = engine.plan();
        QVERIFY(std::count_if(plan.begin(), plan.end(), [](const std::string& l) {
                    return l.find("table, which never decreases") != std::string::npos;
                }) == 2);
    }

    // fashion_cnn_bn as `export --quantize int8` writes it: every BatchNorm folded into the Conv2D or Dense
    // before it, so each convolution's output is rounded once, the engine runs no table, and the poolings pool
    // the convolutions' own values. Against the simulation of the same file as above; against the float model
    // the classes agree as the export's accuracy report says.
    void fashionCnnBnFolded() {
        Project p = readProject(test::sourcePath("examples/fashion_cnn_bn.strata"));
        p.dataset.trainLimit = 300;
        p.dataset.validationLimit = 256;
        const DatasetBundle data = loadDataset(p.dataset, "");
        std::vector<FoldedBatchNorm> folds;
        ExportModel floatModel;
        const Int8File f = int8File(p, path("fashion_cnn_bn_folded.onnx"), data.train, data.validation.inputs, 1, true,
                                    &folds, &floatModel);
        QCOMPARE(folds.size(), size_t(5));
        for (const Node* n : f.file.project.graph.nodes()) QVERIFY2(n->type != "BatchNorm", n->name.c_str());
        QVERIFY(!f.file.int8Activations.count("bn1"));
        const Compared c = compare(f);
        EXPECT_GRID(c, "input", 0, 1.0);
        EXPECT_GRID(c, "conv1", 1, 0.999);
        EXPECT_GRID(c, "pool1", 2, 0.999);
        EXPECT_GRID(c, "pool2", 8, 0.99);
        EXPECT_GRID(c, "fc1", 8, 0.95);
        QVERIFY(maxAbsDiff(c.engine, c.simulated) <= 0.05 * range(c.simulated));

        Int8Engine engine(f.file, f.file.int8Activations, 2);
        engine.run(f.inputs.data(), 1, 1);
        for (const std::string& line : engine.plan()) {
            qInfo("%s", line.c_str());
            QVERIFY2(line.find("table") == std::string::npos, line.c_str());
        }

        auto backend = test::makeReferenceBackend();
        auto compiled = compileExportModel(floatModel, *backend);
        const Predictions fp = predictSamples(*compiled, f.inputs.data(), f.count);
        const auto q = argmaxRows(c.engine.data(), f.count, 10);
        int64_t same = 0;
        for (size_t i = 0; i < q.size(); ++i) same += q[i] == fp.predicted[i];
        qInfo("folded int8 against the float model: %lld of %lld classes agree", static_cast<long long>(same),
              static_cast<long long>(f.count));
        QVERIFY(same >= f.count * 95 / 100);

        // The Export dialog's and the Optimize panel's writer folds them the same way and says which.
        const ExportWriteResult w = writeExport(path("fashion_cnn_bn_dialog.onnx"), floatModel,
                                                {ExportFormat::Onnx, ExportPrecision::Int8, 13}, &data.train);
        QCOMPARE(w.folded.size(), size_t(5));
        QCOMPARE(w.folded[0].batchNorm + ">" + w.folded[0].into, std::string("bn1>conv1"));
        for (const OnnxNodeInfo& node : readOnnx(path("fashion_cnn_bn_dialog.onnx")).nodes)
            QVERIFY2(node.opType != "BatchNormalization", node.name.c_str());
    }

    // The element-wise steps' AVX-512 path against their one-value-at-a-time path (STRATA_NO_AVX512): every pair
    // of uint8 values through Add for grids with zero points at both ends, floats on and between rounding
    // boundaries and outside the grid, channel sums with ragged channel groups and odd position counts; and the
    // 2x2 max pooling's own loop against oneDNN's.
    void elementwiseSimdEqualsScalar() {
        QVERIFY(cpu::int8SimdInUse());
        std::vector<uint8_t> a(65536 + 13), b(a.size());
        for (size_t i = 0; i < a.size(); ++i) {
            a[i] = uint8_t(i >> 8);
            b[i] = uint8_t(i);
        }
        std::vector<float> f = uniform(4099, -3.0f, 5.0f, 3);
        const cpu::Grid fg{0.03125f, 77};  // a power of two: the ties below are exact
        for (int k = -300; k < 300; ++k) f.push_back((float(k) + 0.5f) * fg.scale);  // ties: to even
        // A scale whose reciprocal is inexact: values on and one and two floats around each half-step (where a
        // product by the reciprocal would round differently from the division), and far off the grid.
        const cpu::Grid ig{0.0071f, 131};
        std::vector<float> fi = uniform(20000, -2.5f, 2.5f, 9);
        for (int k = -400; k < 400; ++k) {
            const float x = (float(k) + 0.5f) * ig.scale;
            fi.push_back(x);
            float up = x, down = x;
            for (int n = 0; n < 2; ++n) {
                up = std::nextafter(up, 1e9f);
                down = std::nextafter(down, -1e9f);
                fi.push_back(up);
                fi.push_back(down);
            }
        }
        for (const float far : {1e30f, -1e30f, 3.0e5f, -2.0f, 1e-40f, std::numeric_limits<float>::infinity()})
            fi.push_back(far);
        std::vector<uint8_t> pos(7 * 31 * 20);
        for (size_t i = 0; i < pos.size(); ++i) pos[i] = uint8_t((i * 2654435761u) >> 13);

        struct Outputs {
            bool simd = false;
            int ownPools = 0;
            std::vector<std::vector<uint8_t>> first;
            std::vector<int64_t> second;
        };
        std::vector<std::vector<float>> dequantized;  // the last run's
        auto run = [&](bool simd) {
            if (!simd) setenv("STRATA_NO_AVX512", "1", 1);
            const bool used = cpu::int8SimdInUse();
            int ownPools = 0;
            std::vector<std::vector<uint8_t>> sums8;
            dequantized.clear();
            const cpu::Grid grids[][3] = {{{0.05f, 0}, {0.031f, 255}, {0.07f, 128}},
                                          {{0.013f, 200}, {0.013f, 3}, {0.021f, 0}},
                                          {{1.0f, 0}, {1.0f, 0}, {1.0f, 0}}};
            for (const auto& g : grids) {
                std::vector<uint8_t> out(a.size());
                cpu::addOnGrids(2, a.data(), g[0], b.data(), g[1], out.data(), g[2], int64_t(a.size()));
                sums8.push_back(out);
            }
            std::vector<uint8_t> q(f.size());
            cpu::quantizeToGrid(2, f.data(), q.data(), int64_t(f.size()), fg);
            sums8.push_back(q);
            std::vector<uint8_t> qi(fi.size());
            cpu::quantizeToGrid(2, fi.data(), qi.data(), int64_t(fi.size()), ig);
            sums8.push_back(qi);
            // Dequantized (a float island's input), compared as bytes: every uint8 value on three grids, a ragged
            // tail.
            for (const cpu::Grid g : {grids[0][1], grids[1][0], cpu::Grid{0.0071f, 131}}) {
                std::vector<float> d(a.size());
                cpu::dequantizeFromGrid(2, b.data(), d.data(), int64_t(b.size()), g);
                std::vector<uint8_t> bytes(d.size() * sizeof(float));
                std::memcpy(bytes.data(), d.data(), bytes.size());
                sums8.push_back(bytes);
                dequantized.push_back(d);
            }
            // 2x2 max pooling: Strata's loop, or oneDNN's kernel under STRATA_NO_AVX512; odd sizes (the last row
            // and column dropped), channel runs of one partial and of one whole and one partial 64-byte vector.
            for (const int channels : {20, 80}) {
                cpu::Int8MaxPoolSpec spec;
                spec.channels = channels;
                spec.height = 7;
                spec.width = 9;
                auto pool = cpu::makeInt8MaxPool(spec);
                ownPools += pool->implementation().find("strata") != std::string::npos ? 1 : 0;
                std::vector<uint8_t> in(size_t(3 * 7 * 9 * channels)), out(size_t(3 * 3 * 4 * channels));
                for (size_t i = 0; i < in.size(); ++i) in[i] = uint8_t((i * 2246822519u) >> 11);
                pool->run(2, 3, in.data(), out.data());
                sums8.push_back(out);
            }
            std::vector<int64_t> sums;
            for (int64_t channels : {20, 16, 3}) {
                std::vector<int64_t> s(size_t(7 * channels));
                cpu::channelSums(2, pos.data(), 7, int64_t(pos.size()) / 7 / channels, channels, 19, s.data());
                sums.insert(sums.end(), s.begin(), s.end());
            }
            unsetenv("STRATA_NO_AVX512");
            return Outputs{used, ownPools, sums8, sums};
        };
        const Outputs fast = run(true), plain = run(false);
        QVERIFY(fast.simd && !plain.simd);
        QCOMPARE(fast.ownPools, 2);
        QCOMPARE(plain.ownPools, 0);
        for (size_t k = 0; k < fast.first.size(); ++k) {
            int64_t differ = 0;
            for (size_t i = 0; i < fast.first[k].size(); ++i) differ += fast.first[k][i] != plain.first[k][i];
            QVERIFY2(differ == 0, qPrintable(QString("output %1: %2 values differ").arg(k).arg(differ)));
        }
        QVERIFY(fast.second == plain.second);
        // Not vacuous: the sums hold the zero point's offset, the ties rounded to even, Add clamped at both ends.
        QCOMPARE(plain.second[0], [&] {
            int64_t sum = 0;
            for (int64_t p = 0; p < 31; ++p) sum += pos[size_t(p * 20)] - 19;
            return sum;
        }());
        QCOMPARE(plain.first[3][4099 + 300], uint8_t(77));  // 0.5 steps -> 0 steps (even) + 77
        QCOMPARE(plain.first[3][4099 + 301], uint8_t(79));  // 1.5 steps -> 2
        QVERIFY(std::count(plain.first[1].begin(), plain.first[1].end(), uint8_t(0)) > 0);
        QVERIFY(std::count(plain.first[0].begin(), plain.first[0].end(), uint8_t(255)) > 0);
        // The scalar dequantization is the file's: (q - zero point) x scale, the tail included.
        for (size_t i : {size_t(0), size_t(77), a.size() - 1})
            QCOMPARE(dequantized[2][i], float(int(b[i]) - 131) * 0.0071f);
    }

    // Strata's own convolution kernel (CpuInt8's VnniConv: on 1 to 4 channels, kernel rows of at most 16 bytes, or
    // channels in fours for 16 filters) against oneDNN's kernel for the same spec (made under STRATA_INT8_ONEDNN):
    // equal at every value.
    // The specs cover 1 to 4 words a kernel row, strides, padding of either size, a taller dilation, a source zero
    // point (whose padding adds nothing), float32 output, several groups of 16 filters, and both thread splits (a
    // sample per thread; one sample's rows in blocks, above a million multiply-adds).
    void fewChannelConvEqualsOneDnn_data() {
        QTest::addColumn<QVector<int>>(
            "geometry");  // channels, height, width, filters, kernel h, w, stride, pad h, w, dilation h, w
        QTest::addColumn<int>("srcZeroPoint");
        QTest::addColumn<bool>("f32Output");
        QTest::addColumn<int>("batch");
        QTest::newRow("stem 1x28x28, 3x3") << QVector<int>{1, 28, 28, 16, 3, 3, 1, 1, 1, 1, 1} << 0 << false << 1;
        QTest::newRow("rgb, stride 2, zero point")
            << QVector<int>{3, 17, 19, 32, 3, 3, 2, 1, 1, 1, 1} << 7 << false << 3;
        QTest::newRow("2 channels 5x5, dilated rows, f32")
            << QVector<int>{2, 15, 13, 16, 5, 5, 1, 2, 2, 2, 1} << 0 << true << 2;
        QTest::newRow("4 channels, no padding") << QVector<int>{4, 9, 21, 48, 3, 3, 1, 0, 0, 1, 1} << 3 << false << 5;
        QTest::newRow("7x7 stride 2, odd padding")
            << QVector<int>{1, 30, 26, 16, 7, 7, 2, 3, 2, 1, 1} << 128 << false << 2;
        QTest::newRow("one sample, rows in blocks")
            << QVector<int>{1, 64, 64, 64, 3, 3, 1, 1, 1, 1, 1} << 0 << false << 1;
        QTest::newRow("16 -> 16, rows of 28") << QVector<int>{16, 28, 28, 16, 3, 3, 1, 1, 1, 1, 1} << 128 << false << 1;
        QTest::newRow("8 -> 16, strided, zero point")
            << QVector<int>{8, 19, 23, 16, 3, 3, 2, 1, 1, 1, 1} << 5 << false << 3;
        QTest::newRow("32 -> 16, 5x3, dilated, f32")
            << QVector<int>{32, 12, 31, 16, 5, 3, 1, 2, 1, 2, 2} << 0 << true << 2;
    }
    void fewChannelConvEqualsOneDnn() {
        QFETCH(QVector<int>, geometry);
        QFETCH(int, srcZeroPoint);
        QFETCH(bool, f32Output);
        QFETCH(int, batch);
        cpu::Int8ConvSpec spec;
        spec.channels = geometry[0];
        spec.height = geometry[1];
        spec.width = geometry[2];
        spec.filters = geometry[3];
        spec.kernelH = geometry[4];
        spec.kernelW = geometry[5];
        spec.strideH = spec.strideW = geometry[6];
        spec.padH = geometry[7];
        spec.padW = geometry[8];
        spec.dilationH = geometry[9];
        spec.dilationW = geometry[10];
        spec.srcZeroPoint = srcZeroPoint;
        spec.dstZeroPoint = 9;
        spec.f32Output = f32Output;
        std::mt19937 rng(11);
        const size_t taps = size_t(spec.channels) * spec.kernelH * spec.kernelW;
        for (size_t i = 0; i < size_t(spec.filters) * taps; ++i) spec.weights.push_back(int8_t(int(rng() % 256) - 128));
        for (int f = 0; f < spec.filters; ++f) {
            spec.bias.push_back(int32_t(rng() % 20001) - 10000);
            // Scales from a quarter to four times one that spreads a filter's sums over about the grid's range:
            // values clamped at both ends.
            const double spread = std::exp2(double(rng() % 1000) / 250.0 - 2.0);
            spec.scales.push_back(float(spread * 255.0 / (96.0 * double(taps) * 64.0)));
        }
        const int outH = (spec.height + 2 * spec.padH - spec.dilationH * (spec.kernelH - 1) - 1) / spec.strideH + 1;
        const int outW = (spec.width + 2 * spec.padW - spec.dilationW * (spec.kernelW - 1) - 1) / spec.strideW + 1;
        std::vector<uint8_t> in(size_t(batch) * spec.height * spec.width * spec.channels);
        for (auto& v : in) v = uint8_t(rng());
        const size_t outValues = size_t(batch) * outH * outW * spec.filters, outBytes = outValues * (f32Output ? 4 : 1);
        auto own = cpu::makeInt8Conv(spec);
        setenv("STRATA_INT8_ONEDNN", "1", 1);
        auto onednn = cpu::makeInt8Conv(spec);
        unsetenv("STRATA_INT8_ONEDNN");
        QVERIFY2(own->implementation().find("strata:avx512_vnni") == 0, own->implementation().c_str());
        std::vector<uint8_t> a(outBytes, 1), b(outBytes, 2);
        own->run(2, batch, in.data(), a.data());
        onednn->run(2, batch, in.data(), b.data());
        QVERIFY2(onednn->implementation().find("vnni") != std::string::npos, onednn->implementation().c_str());
        int64_t differ = 0, low = 0, high = 0;
        for (size_t i = 0; i < outValues; ++i) {
            if (f32Output) {
                float x = 0.0f, y = 0.0f;
                std::memcpy(&x, a.data() + 4 * i, 4);
                std::memcpy(&y, b.data() + 4 * i, 4);
                differ += x != y;
                low += x < 0.0f;
                high += x > 0.0f;
            } else {
                differ += a[i] != b[i];
                low += a[i] == 0;
                high += a[i] == 255;
            }
        }
        QVERIFY2(differ == 0, qPrintable(QString("%1 of %2 values differ").arg(differ).arg(outValues)));
        QVERIFY(low > 0 && high > 0);  // not vacuous: both ends of the range reached
    }

    // A matmul pass of fewer than 4096 multiply-adds runs Strata's own loop instead of oneDNN's call: equal to
    // oneDNN's kernel (STRATA_INT8_ONEDNN) at every value, with and without the source's zero point (folded into
    // the bias), float32 or uint8 output; a larger batch of the same layer runs oneDNN's kernel.
    void tinyMatmulEqualsOneDnn_data() {
        QTest::addColumn<int>("inputs");
        QTest::addColumn<int>("outputs");
        QTest::addColumn<int>("srcZeroPoint");
        QTest::addColumn<bool>("f32Output");
        QTest::addColumn<bool>("ties");
        QTest::newRow("classifier 16 -> 10, f32") << 16 << 10 << 0 << true << false;
        QTest::newRow("64 -> 24, zero point") << 64 << 24 << 37 << false << false;
        QTest::newRow("100 -> 7, f32, zero point") << 100 << 7 << 200 << true << false;
        QTest::newRow("ties, odd zero point") << 16 << 24 << 0 << false << true;
    }
    void tinyMatmulEqualsOneDnn() {
        QFETCH(int, inputs);
        QFETCH(int, outputs);
        QFETCH(int, srcZeroPoint);
        QFETCH(bool, f32Output);
        QFETCH(bool, ties);
        cpu::Int8MatmulSpec spec;
        spec.inputs = inputs;
        spec.outputs = outputs;
        spec.srcZeroPoint = srcZeroPoint;
        spec.dstZeroPoint = 101;
        spec.f32Output = f32Output;
        std::mt19937 rng(5);
        for (int i = 0; i < inputs * outputs; ++i) spec.weights.push_back(int8_t(ties ? 0 : int(rng() % 256) - 128));
        for (int o = 0; o < outputs; ++o) {
            // ties: no weights, and biases that scale to k + 1/2, which round with the zero point added (to even).
            spec.bias.push_back(ties ? (2 * (o - 12) + 1) * 256 : int32_t(rng() % 4001) - 2000);
            spec.scales.push_back(
                ties ? 1.0f / 512.0f
                     : float(std::exp2(double(rng() % 1000) / 250.0 - 2.0) * 255.0 / (96.0 * inputs * 64.0)));
        }
        auto own = cpu::makeInt8Matmul(spec);
        setenv("STRATA_INT8_ONEDNN", "1", 1);
        auto onednn = cpu::makeInt8Matmul(spec);
        unsetenv("STRATA_INT8_ONEDNN");
        QVERIFY(own->implementation().find("Strata's loop") != std::string::npos);
        QVERIFY(onednn->implementation().find("Strata's loop") == std::string::npos);
        for (const int batch : {1, 2, 300}) {  // 300: oneDNN's kernel in both
            std::vector<uint8_t> in(size_t(batch) * inputs);
            for (auto& v : in) v = uint8_t(rng());
            const size_t values = size_t(batch) * outputs, bytes = values * (f32Output ? 4 : 1);
            std::vector<uint8_t> a(bytes, 1), b(bytes, 2);
            own->run(1, batch, in.data(), a.data());
            onednn->run(1, batch, in.data(), b.data());
            QVERIFY2(a == b, qPrintable(QString("batch %1 differs").arg(batch)));
            if (ties) {  // -11.5 + 101 -> 89.5 -> 90 (even); 0.5 + 101 -> 102
                QCOMPARE(a[0], uint8_t(90));
                QCOMPARE(a[12], uint8_t(102));
            } else if (!f32Output) {  // not vacuous: both ends of the grid reached
                QVERIFY(std::count(a.begin(), a.end(), uint8_t(0)) > 0 || batch < 300);
                QVERIFY(std::count(a.begin(), a.end(), uint8_t(255)) > 0 || batch < 300);
            }
        }
    }

    // The element-wise activations besides ReLU as tables on their input's grid: each of them between Dense
    // layers against the simulation of the same file (the same backend function on the same dequantized values:
    // exact, or one step where the backend's vector and scalar paths round a value differently).
    void activationsAsTables() {
        const Project p = chainProject({{"Input", "input", Json{{"shape", {8}}}},
                                        {"Dense", "fc1", Json{{"units", 16}}},
                                        {"Sigmoid", "sigmoid"},
                                        {"Dense", "fc2", Json{{"units", 16}}},
                                        {"Tanh", "tanh"},
                                        {"Dense", "fc3", Json{{"units", 16}}},
                                        {"LeakyReLU", "leaky", Json{{"alpha", 0.2}}},
                                        {"Dense", "fc4", Json{{"units", 16}}},
                                        {"GELU", "gelu"},
                                        {"Dense", "fc5", Json{{"units", 16}}},
                                        {"HardSwish", "hardswish"},
                                        {"Dense", "logits", Json{{"units", 3}}}},
                                       {8});
        const Int8File f =
            int8File(p, path("activations.onnx"), randomSplit(Shape{8}, 200, 9), randomSplit(Shape{8}, 300, 10).inputs);
        const Compared c = compare(f);
        for (const char* node : {"sigmoid", "tanh", "leaky", "gelu", "hardswish"}) EXPECT_GRID(c, node, 1, 0.99);
        Int8Engine engine(f.file, f.file.int8Activations, 1);
        int tables = 0;
        for (const std::string& line : engine.plan()) tables += line.find("as a table on the uint8 grid") != line.npos;
        QCOMPARE(tables, 5);
        QVERIFY(maxAbsDiff(c.engine, c.simulated) <= 0.05 * range(c.simulated));
    }

    // A Transformer: the Dense layers and the attention's Q, K, V projection run as int8 matmuls over every
    // position's row; the ids, the Embedding, the positional embedding, LayerNorm, the rest of the masked
    // attention, masked sequence pooling and Softmax are float islands (each its own layer in float32 between the
    // grids). Every quantized tensor against the simulation.
    void transformerFloatIslands() {
        const int64_t length = 10, vocab = 30;
        const Project p = test::smallTransformerProject(length, vocab);
        const Int8File f = int8File(p, path("transformer.onnx"), test::tokenIdSplit(200, length, vocab, 21),
                                    test::tokenIdSplit(300, length, vocab, 22).inputs);
        const Compared c = compare(f);
        // The int8 matmuls sum exactly where the simulation sums float products; a value on the other side of a
        // rounding boundary there moves what the islands after it compute by a step.
        // "attention/qkv", "attention/context": the Q, K, V projection and the heads' context inside the attention,
        // which the file rounds (LayerType::int8InnerTensors; the softmax weights too, which the engine keeps per
        // head).
        for (const char* node : {"words", "positions", "attention/qkv", "attention/context", "attention", "residual1",
                                 "norm1", "ff1", "gelu", "ff2", "residual2", "mean", "logits"})
            EXPECT_GRID(c, node, 2, 0.97);
        // The logits are the last quantized tensor; the softmax's output is float32.
        QVERIFY2(maxAbsDiff(c.engine, c.simulated) <= 0.02,
                 qPrintable(QString::number(maxAbsDiff(c.engine, c.simulated))));
        Int8Engine engine(f.file, f.file.int8Activations, 1);
        std::map<std::string, std::string> how;
        for (const std::string& line : engine.plan()) how[line.substr(0, line.find(':'))] = line;
        for (const char* node : {"ff1", "ff2", "logits"})
            QVERIFY2(how[node].find("int8 matmul") != std::string::npos, how[node].c_str());
        for (const char* node : {"positions", "norm1", "probs"})
            QVERIFY2(how[node].find("float32 (its own layer") != std::string::npos, how[node].c_str());
        // The embedding's rows and the masked mean in integers.
        QVERIFY2(how["words"].find("uint8 rows of its table") != std::string::npos, how["words"].c_str());
        QVERIFY2(how["mean"].find("integer sums of uint8 values over the kept positions") != std::string::npos,
                 how["mean"].c_str());
        // The attention in integers: its Q, K, V and output projections (int8 in the file) and its scores and
        // weighted values (u8 x s8 per head); only the softmax float32.
        QVERIFY2(how["attention"].find("'in_weight' projection onto its Q, K, V grid") != std::string::npos &&
                     how["attention"].find("u8 x s8 sums per head") != std::string::npos &&
                     how["attention"].find("'out_weight' projection") != std::string::npos,
                 how["attention"].c_str());
        QVERIFY2(how["gelu"].find("as a table") != std::string::npos, how["gelu"].c_str());
        // predict says which layers ran in float32.
        const Predictor predictor(path("transformer.onnx"));
        QVERIFY2(predictor.runtimeDescription().find("Strata int8 engine") != std::string::npos &&
                     predictor.runtimeDescription().find("; 3 layers in float32 between the grids, as the file has "
                                                         "them (positions, norm1, probs)") != std::string::npos,
                 predictor.runtimeDescription().c_str());
        // A product weight the file holds in float32 (its values not int8 times one scale per channel) runs in
        // float32, as the file computes it: the attention's projection and a Dense layer, nudged off their grids.
        ExportModel floats = f.file;
        floats.weights.at("attention.in_weight")[5] += 1e-3f;
        floats.weights.at("ff1.weight")[3] += 1e-3f;
        Int8Engine mixed(floats, floats.int8Activations, 1);
        for (const std::string& line : mixed.plan())
            if (line.rfind("attention:", 0) == 0 || line.rfind("ff1:", 0) == 0)
                QVERIFY2(
                    line.find("int8 matmul") == std::string::npos && line.find("float32 (its own layer") != line.npos,
                    line.c_str());
        const std::vector<float> want = simulateInt8(floats, floats.int8Activations, f.inputs.data(), f.count);
        const std::vector<float> got = mixed.run(f.inputs.data(), f.count);
        QVERIFY2(maxAbsDiff(got, want) <= 0.02, qPrintable(QString::number(maxAbsDiff(got, want))));
        // The output projection alone in float32 in the file: Q, K, V, the weights and the context are still rounded
        // (as the simulation does) around float32 products; a file without the inner grids (written before they were
        // quantized) runs the rest of the attention in float32; one with the context's grid alone (written between
        // the two) the output projection in int8 and the core in float32: each as the simulation of that file.
        ExportModel outFloat = f.file;
        outFloat.weights.at("attention.out_weight")[7] += 1e-3f;
        ExportModel older = f.file;
        for (const char* inner : {"attention/qkv", "attention/probs", "attention/context"})
            QVERIFY(older.int8Activations.erase(inner) == 1);
        ExportModel contextOnly = f.file;
        for (const char* inner : {"attention/qkv", "attention/probs"})
            QVERIFY(contextOnly.int8Activations.erase(inner));
        for (const ExportModel* variant : {&outFloat, &older, &contextOnly}) {
            Int8Engine e(*variant, variant->int8Activations, 1);
            for (const std::string& line : e.plan())
                if (line.rfind("attention:", 0) == 0)
                    QVERIFY2(line.find("'in_weight' projection") != line.npos && line.find("u8 x s8") == line.npos &&
                                 (line.find("'out_weight' projection") != line.npos) == (variant == &contextOnly),
                             line.c_str());
            const std::vector<float> simulated =
                simulateInt8(*variant, variant->int8Activations, f.inputs.data(), f.count);
            const std::vector<float> ran = e.run(f.inputs.data(), f.count);
            QVERIFY2(maxAbsDiff(ran, simulated) <= 0.02, qPrintable(QString::number(maxAbsDiff(ran, simulated))));
        }
        // An id outside the vocabulary is refused by the embedding's name, as the float32 engine refuses it.
        std::vector<float> badIds(f.inputs.begin(), f.inputs.begin() + 2 * length);
        badIds[size_t(length + 3)] = float(vocab);
        try {
            engine.run(badIds.data(), 2);
            QFAIL("no error");
        } catch (const std::runtime_error& e) {
            QVERIFY2(std::string(e.what()).find("node 'words' (Embedding)") != std::string::npos &&
                         std::string(e.what()).find(std::to_string(vocab)) != std::string::npos,
                     e.what());
        }
        // The file's weights are what an island runs on: one it lacks is refused by name.
        ExportModel broken = f.file;
        QVERIFY(broken.weights.erase("norm1.gamma") == 1);
        try {
            Int8Engine refused(broken, broken.int8Activations);
            QFAIL("no error");
        } catch (const std::runtime_error& e) {
            QVERIFY2(std::string(e.what()).find("node 'norm1' (LayerNorm) has no 'gamma'") != std::string::npos,
                     e.what());
        }
    }

    // The integer attention core without a mask, with 4 heads of width 4, and with one head wider (16) than the
    // sequence is long (3): every tensor on the simulation's grid.
    void unmaskedAttentionCore_data() {
        QTest::addColumn<int>("length");
        QTest::addColumn<int>("heads");
        QTest::newRow("9 positions, 4 heads") << 9 << 4;
        QTest::newRow("3 positions, 1 head") << 3 << 1;
    }
    void unmaskedAttentionCore() {
        QFETCH(int, length);
        QFETCH(int, heads);
        const int64_t vocab = 20;
        Project p = test::smallTransformerProject(length, vocab, false);
        const int attention = p.graph.nodeByName("attention")->id;
        Json params = p.graph.node(attention)->params;
        params["heads"] = heads;
        p.graph.setParams(attention, params);
        const Int8File f = int8File(p, path("unmasked.onnx"), test::tokenIdSplit(200, length, vocab, 61),
                                    test::tokenIdSplit(300, length, vocab, 62).inputs);
        const Compared c = compare(f);
        for (const char* node : {"attention/qkv", "attention/context", "attention", "norm1", "logits"})
            EXPECT_GRID(c, node, 2, 0.97);
        QVERIFY2(maxAbsDiff(c.engine, c.simulated) <= 0.02,
                 qPrintable(QString::number(maxAbsDiff(c.engine, c.simulated))));
        Int8Engine engine(f.file, f.file.int8Activations, 1);
        bool core = false;
        for (const std::string& line : engine.plan())
            core = core || (line.rfind("attention:", 0) == 0 && line.find("u8 x s8 sums per head") != line.npos);
        QVERIFY(core);
        // The core's scalar twin (CpuFast's softmax, then the rounding; without AVX-512) on the same grids.
        setenv("STRATA_NO_AVX512", "1", 1);
        const Compared plain = compare(f);
        unsetenv("STRATA_NO_AVX512");
        for (const char* node : {"attention/context", "attention", "logits"}) EXPECT_GRID(plain, node, 2, 0.97);
    }

    // A text CNN: each Conv1D (its weight int8 in the file, one scale per filter on axis 1 of [kernel, filters,
    // channels]) runs as an int8 convolution of height 1 on the channels-last sequence, strided and dilated too.
    void textConv1D() {
        const int64_t length = 12, vocab = 25;
        const Int8File f =
            int8File(test::smallTextCnnProject(length, vocab), path("textcnn.onnx"),
                     test::tokenIdSplit(200, length, vocab, 51), test::tokenIdSplit(300, length, vocab, 52).inputs);
        const Compared c = compare(f);
        for (const char* node : {"words", "trigrams", "skips", "mean"}) EXPECT_GRID(c, node, 1, 0.99);
        QVERIFY(maxAbsDiff(c.engine, c.simulated) <= 0.02 * range(c.simulated));
        Int8Engine engine(f.file, f.file.int8Activations, 1);
        int convolutions = 0;
        for (const std::string& line : engine.plan())
            convolutions += (line.rfind("trigrams:", 0) == 0 || line.rfind("skips:", 0) == 0) &&
                            line.find("int8 convolution") != line.npos;
        QCOMPARE(convolutions, 2);
    }

    // Image layers without an integer path between int8 convolutions: the islands take channel-last uint8 values
    // in the graph's NCHW order and give theirs back channels last (a transposition missed either way moves
    // values by many steps). Upsample2D, ConvTranspose2D and Concat of two grids.
    void imageFloatIslands() {
        Project p;
        p.name = "int8 image islands";
        Graph& g = p.graph;
        const int in = g.addNode("Input", "input", Json{{"shape", {3, 6, 5}}});
        const int c1 = g.addNode("Conv2D", "conv1", Json{{"filters", 6}, {"kernel", {3, 3}}, {"padding", {1, 1}}});
        const int up = g.addNode("Upsample2D", "up", Json{{"scale", {2, 2}}, {"mode", "bilinear"}});
        const int tr =
            g.addNode("ConvTranspose2D", "deconv", Json{{"filters", 6}, {"kernel", {2, 2}}, {"stride", {2, 2}}});
        const int cat = g.addNode("Concat", "cat", Json::object());
        const int c2 = g.addNode("Conv2D", "conv2", Json{{"filters", 5}, {"kernel", {3, 3}}});
        const int flat = g.addNode("Flatten", "flatten", Json::object());
        const int fc = g.addNode("Dense", "logits", Json{{"units", 3}});
        g.connect(in, c1);
        g.connect(c1, up);
        g.connect(c1, tr);
        g.connect(up, cat, "in0");
        g.connect(tr, cat, "in1");
        g.connect(cat, c2);
        g.connect(c2, flat);
        g.connect(flat, fc);
        test::useBlobs(p, 64, 3, {3, 6, 5});
        const Int8File f = int8File(p, path("image_islands.onnx"), randomSplit(Shape{3, 6, 5}, 100, 41),
                                    randomSplit(Shape{3, 6, 5}, 200, 42).inputs);
        const Compared c = compare(f);
        for (const char* node : {"conv1", "up", "deconv", "cat", "conv2"}) EXPECT_GRID(c, node, 1, 0.99);
        QVERIFY(maxAbsDiff(c.engine, c.simulated) <= 0.02 * range(c.simulated));
        Int8Engine engine(f.file, f.file.int8Activations, 1);
        int islands = 0;
        for (const std::string& line : engine.plan()) islands += line.find("float32 (its own layer") != line.npos;
        QCOMPARE(islands, 3);
    }

    // What a CPU without the flag gets, simulated by capping oneDNN's ISA in a child process.
    void refusedWithoutAvx512Vnni() {
        const Project p =
            chainProject({{"Input", "input", Json{{"shape", {8}}}}, {"Dense", "logits", Json{{"units", 3}}}}, {8});
        int8File(p, path("capped.onnx"), randomSplit(Shape{8}, 50, 10), {});
        const std::string csv = path("capped.csv");
        {
            std::ofstream out(csv);
            out << "a,b,c,d,e,f,g,h\n1,2,3,4,5,6,7,8\n";
        }
        QProcess predict;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("DNNL_MAX_CPU_ISA", "AVX512_CORE");
        predict.setProcessEnvironment(env);
        predict.start(QStringLiteral(STRATA_TRAIN_EXE), {"predict", QString::fromStdString(path("capped.onnx")),
                                                         QString::fromStdString(csv), "--runtime", "int8"});
        QVERIFY(predict.waitForFinished(120000));
        const QString err = QString::fromUtf8(predict.readAllStandardError());
        QVERIFY2(predict.exitCode() != 0, qPrintable(err));
        QVERIFY2(err.contains("avx512_vnni") && err.contains("DNNL_MAX_CPU_ISA") && err.contains("--runtime strata"),
                 qPrintable(err));
        // Uncapped, where the CPU has it, the same command runs on the int8 engine.
        if (!cpu::int8Unavailable().empty()) return;
        QProcess plain;
        plain.start(QStringLiteral(STRATA_TRAIN_EXE), {"predict", QString::fromStdString(path("capped.onnx")),
                                                       QString::fromStdString(csv), "--runtime", "int8"});
        QVERIFY(plain.waitForFinished(120000));
        const QString out = QString::fromUtf8(plain.readAllStandardOutput());
        QVERIFY2(plain.exitCode() == 0, qPrintable(QString::fromUtf8(plain.readAllStandardError())));
        QVERIFY2(out.contains("int8 engine"), qPrintable(out));
    }
};

QTEST_MAIN(TestCpuInt8)
#include "test_cpu_int8.moc"
