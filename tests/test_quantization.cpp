// Compression formats against independent implementations: GGUF Q4_0 blocks byte for byte against llama.cpp's
// gguf package (and read back by it), int8 QDQ ONNX files run by onnxruntime, as written and with its
// integer kernels (the optimized graph must hold QLinearConv and QGemm), agreeing with Strata's simulation of
// the file, and pruned models (sparse and structurally smaller) exported to ONNX and run by onnxruntime.
// Also the quantization arithmetic by hand, calibration (min-max, percentile, a ReLU's range taken by the
// layer before it), the loaders, the export check and `export --quantize int8|q4_0`.
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>

#include "app/CliCommands.h"
#include "core/backend/Backend.h"
#include "core/backend/CpuInt8.h"
#include "core/data/Dataset.h"
#include "core/export/ExportModel.h"
#include "core/export/Gguf.h"
#include "core/export/Onnx.h"
#include "core/export/Quantize.h"
#include "core/graph/Model.h"
#include "core/infer/Compression.h"
#include "core/infer/Evaluation.h"
#include "core/infer/ExportCheck.h"
#include "core/train/Checkpoint.h"
#include "core/train/Pruning.h"
#include "core/train/StructuredPruning.h"
#include "core/train/Trainer.h"
#include "tests/support/OnnxRuntime.h"
#include "tests/support/TestBackends.h"
#include "tests/support/TestProjects.h"

using namespace strata;
using test::addChain;
namespace fs = std::filesystem;

namespace {

std::vector<uint8_t> readBytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), {}};
}

void writeFloats(const std::string& path, const std::vector<float>& v) {
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
}

std::vector<float> readFloats(const std::string& path) {
    const std::vector<uint8_t> b = readBytes(path);
    std::vector<float> v(b.size() / 4);
    std::memcpy(v.data(), b.data(), v.size() * 4);
    return v;
}

struct NullObserver : TrainingObserver {
    std::string error;
    void onError(const std::string& m) override { error = m; }
};

// Input [1, 8, 8] -> conv1 (8) -> ReLU -> MaxPool -> conv2 (8) -> ReLU -> Flatten -> fc1 (32) -> ReLU -> fc2 (3),
// on image-shaped blobs with scale normalization, trained one epoch.
struct TrainedCnn {
    Project project;
    ExportModel model;
    DatasetBundle data;
};

TrainedCnn trainedCnn(const std::string& dir) {
    TrainedCnn t;
    Project& p = t.project;
    p.name = "qcnn";
    addChain(p.graph, {{"Input", "input", Json{{"shape", {1, 8, 8}}}},
                       {"Conv2D", "conv1", Json{{"filters", 8}, {"kernel", {3, 3}}, {"padding", {1, 1}}}},
                       {"ReLU", "relu1"},
                       {"MaxPool2D", "pool1", Json{{"kernel", {2, 2}}}},
                       {"Conv2D", "conv2", Json{{"filters", 8}, {"kernel", {3, 3}}, {"padding", {1, 1}}}},
                       {"ReLU", "relu2"},
                       {"Flatten", "flatten"},
                       {"Dense", "fc1", Json{{"units", 32}}},
                       {"ReLU", "relu3"},
                       {"Dense", "fc2", Json{{"units", 3}}}});
    test::useBlobs(p, 600, 3, {1, 8, 8});
    p.dataset.normalization = NormalizationMode::Scale;
    p.training.learningRate = 0.05;
    p.training.batchSize = 32;
    p.training.epochs = 1;
    p.training.seed = 5;
    p.training.threads = 1;
    p.training.checkpointDir = dir;
    BackendOptions one;
    one.threads = 1;
    auto backend = test::makeCpuBackend(one);
    NullObserver obs;
    Trainer trainer(p, *backend, &obs, {});
    if (!trainer.run()) throw std::runtime_error(obs.error);
    t.model = exportModelFromCheckpoint(loadCheckpoint(dir));
    t.data = loadDataset(p.dataset, "");
    return t;
}

std::vector<float> rawInputs(const TrainedCnn& t, int64_t n) {
    std::vector<float> raw(t.data.validation.inputs.begin(),
                           t.data.validation.inputs.begin() + n * t.data.validation.sampleShape.numel());
    undoNormalization(raw, t.model.normalization);
    return raw;
}

std::vector<float> floatOutputs(const ExportModel& m, const std::vector<float>& inputs, int64_t n) {
    BackendOptions one;
    one.threads = 1;
    auto backend = test::makeCpuBackend(one);
    auto compiled = compileExportModel(m, *backend);
    return predictSamples(*compiled, inputs.data(), n).outputs;
}

double maxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
    double worst = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) worst = std::max(worst, double(std::fabs(a[i] - b[i])));
    return a.size() == b.size() ? worst : 1e30;
}

int64_t sameArgmax(const std::vector<float>& a, const std::vector<float>& b, int64_t n, int classes) {
    const auto pa = argmaxRows(a.data(), n, classes), pb = argmaxRows(b.data(), n, classes);
    int64_t same = 0;
    for (size_t i = 0; i < pa.size(); ++i) same += pa[i] == pb[i];
    return same;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

class TestQuantization : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;
    std::string path(const std::string& name) const {
        return (m_dir.path() + "/" + QString::fromStdString(name)).toStdString();
    }

private slots:
    // ---- arithmetic by hand ----------------------------------------------------------------------

    void activationQuantByHand() {
        // [-1, 3]: scale 4/255, zero point round(255/4) = 64; 0 is exact, 3 and -1 at the ends.
        const ActivationQuant q = activationQuantFor(-1.0f, 3.0f);
        QCOMPARE(q.scale, 4.0f / 255.0f);
        QCOMPARE(q.zeroPoint, 64);
        std::vector<float> x{0.0f, 3.0f, -1.0f, 10.0f, -5.0f, 0.5f * q.scale};
        fakeQuantize(x.data(), 6, q);
        QCOMPARE(x[0], 0.0f);
        QCOMPARE(x[1], (255 - 64) * q.scale);
        QCOMPARE(x[2], -64 * q.scale);
        QCOMPARE(x[3], x[1]);  // saturates
        QCOMPARE(x[4], x[2]);
        QCOMPARE(x[5], 0.0f);  // half a step rounds to even
        // A range that misses zero is widened to hold it; an all-zero tensor keeps scale 1.
        QCOMPARE(activationQuantFor(2.0f, 5.1f).zeroPoint, 0);
        QCOMPARE(activationQuantFor(0.0f, 0.0f).scale, 1.0f);
        // Per-channel weights: scale max|w| / 63 (7 bits, see Quantize.h), an all-zero channel gets scale 1
        // and stays zero.
        const ChannelQuantized w = quantizeWeightPerChannel({0.63f, -0.315f, 0.0f, 0.0f, 0.1f, -0.2f}, 3);
        QCOMPARE(w.scales, (std::vector<float>{0.01f, 1.0f, 0.2f / 63}));
        QCOMPARE(w.values, (std::vector<int8_t>{63, -32, 0, 0, 32, -63}));  // -31.5 rounds to even
        // Bias at input scale x weight scale.
        QCOMPARE(quantizeBias({0.5f, -0.25f, 0.0f}, 0.5f, w.scales), (std::vector<int32_t>{100, 0, 0}));
    }

    // ---- GGUF Q4_0 -----------------------------------------------------------------------------

    void q4BlocksMatchLlamaCppsPackage() {
        std::mt19937 rng(4);
        std::normal_distribution<float> d(0.0f, 0.3f);
        std::vector<float> v(32 * 40);
        for (float& x : v) x = d(rng);
        std::fill(v.begin() + 64, v.begin() + 96, 0.0f);  // an all-zero block
        v[100] = -2.0f;                                   // a block led by a negative value
        const std::vector<uint8_t> ours = quantizeQ4_0(v);
        QCOMPARE(ours.size(), size_t(40 * 18));
        // Round trip: within half a step of the block's scale (the largest value exactly), except that codes run
        // from -8 to 7 steps, so a value near minus the block's extreme saturates one step short.
        const std::vector<float> back = dequantizeQ4_0(ours.data(), v.size());
        QCOMPARE(back[100], -2.0f);
        for (size_t i = 0; i < v.size(); ++i) {
            const size_t b = i / 32;
            float amax = 0;
            for (size_t j = b * 32; j < b * 32 + 32; ++j) amax = std::max(amax, std::fabs(v[j]));
            QVERIFY2(std::fabs(back[i] - v[i]) <= amax / 8 * 1.001f + 1e-7f, qPrintable(QString::number(i)));
        }
        writeFloats(path("q4.f32"), v);
        const std::string err = test::runTestPython(
            {test::sourcePath("tools/gguf_quants.py"), "quantize", "q4_0", path("q4.f32"), path("q4.ref")});
        QVERIFY2(err.empty(), err.c_str());
        QVERIFY(readBytes(path("q4.ref")) == ours);
    }

    void q4GgufExportReadByLlamaCppsPackage() {
        Project p = test::blobsMlpProject("q4", 64, 4);
        ExportModel m = untrainedExportModel(p, "");
        // dense1.weight [32, 64] forms blocks; dense2.weight [4, 32] too; the fallback needs an odd width.
        Project odd = test::blobsMlpProject("q4odd", 20, 4);
        const ExportSummary s = writeGgufExport(path("q4.gguf"), m, ExportPrecision::Q4_0);
        QVERIFY(s.fallbacks.empty());
        QVERIFY(contains(s.tensors, "dense1.weight [32, 64] Q4_0"));
        QVERIFY(contains(s.tensors, "dense1.bias [32] F32"));
        const ExportSummary so =
            writeGgufExport(path("q4odd.gguf"), untrainedExportModel(odd, ""), ExportPrecision::Q4_0);
        QCOMPARE(so.fallbacks.size(), size_t(1));
        QCOMPARE(so.fallbacks[0].name, std::string("dense1.weight"));  // 20 inputs: F16
        // Our reader and llama.cpp's agree on every value.
        const GgufFile g = readGguf(path("q4.gguf"));
        QCOMPARE(g.findTensor("dense1.weight")->type, GgufTensorType::Q4_0);
        std::string listing;
        const std::string err = test::runTestPython(
            {test::sourcePath("tools/gguf_quants.py"), "dequantize", path("q4.gguf"), path("q4-deq")}, &listing);
        QVERIFY2(err.empty(), err.c_str());
        QVERIFY2(listing.find("dense1.weight Q4_0 2048") != std::string::npos, listing.c_str());
        for (const GgufTensor& t : g.tensors()) {
            const std::vector<float> theirs = readFloats(path("q4-deq/" + t.name + ".f32"));
            QCOMPARE(theirs, g.tensorFloats(t.name));
        }
        // The CLI names the format in its fallback note.
        QTemporaryDir ck;
        Project trained = odd;
        trained.training.checkpointDir = (ck.path() + "/ck").toStdString();
        {
            auto backend = test::makeCpuBackend();
            NullObserver obs;
            Trainer t(trained, *backend, &obs, {});
            QVERIFY(t.run());
        }
        std::ostringstream out, errs;
        QCOMPARE(runExportCommand({trained.training.checkpointDir, "--format", "gguf", "--quantize", "q4_0", "-o",
                                   path("cli-q4.gguf")},
                                  out, errs),
                 0);
        QVERIFY2(out.str().find("note: dense1.weight [32, 20] stored as F16, not Q4_0") != std::string::npos,
                 out.str().c_str());
        QCOMPARE(runExportCommand({trained.training.checkpointDir, "--format", "safetensors", "--quantize", "q4_0",
                                   "-o", path("x.safetensors")},
                                  out, errs),
                 2);
    }

    // ---- int8 ONNX -----------------------------------------------------------------------------

    void calibrationRanges() {
        const TrainedCnn t = trainedCnn(path("calib"));
        QuantizationOptions o;
        o.calibrationSamples = 200;
        const Int8Calibration minmax = calibrateInt8(t.model, t.data.train, o);
        QCOMPARE(minmax.samples, int64_t(200));
        // The input, each layer but the last, and no Dropout: 9 tensors.
        QCOMPARE(minmax.activations.size(), size_t(9));
        QVERIFY(!minmax.activations.count("fc2"));
        // A layer feeding only a ReLU takes the ReLU's range (zero point 0: its QuantizeLinear clamps);
        // MaxPool and Flatten keep their input's.
        QCOMPARE(minmax.activations.at("conv1"), minmax.activations.at("relu1"));
        QCOMPARE(minmax.activations.at("conv1").zeroPoint, 0);
        QCOMPARE(minmax.activations.at("pool1"), minmax.activations.at("relu1"));
        QCOMPARE(minmax.activations.at("flatten"), minmax.activations.at("relu2"));
        // Percentile ignores the tail: never a wider range than min-max.
        o.method = CalibrationMethod::Percentile;
        o.percentile = 99.0;
        const Int8Calibration pct = calibrateInt8(t.model, t.data.train, o);
        for (const auto& [name, q] : pct.activations)
            QVERIFY2(q.scale <= minmax.activations.at(name).scale * 1.001f, name.c_str());
        QVERIFY(pct.activations.at("relu2").scale < minmax.activations.at("relu2").scale);
        DataSplit empty;
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, calibrateInt8(t.model, empty, o));
    }

    void int8FileRunsInOnnxruntimeOnIntegerKernels() {
        const TrainedCnn t = trainedCnn(path("int8"));
        ExportRequest request;
        request.format = ExportFormat::Onnx;
        request.precision = ExportPrecision::Int8;
        QuantizationOptions quantization;
        quantization.calibrationSamples = 300;
        const ExportWriteResult w = writeExport(path("q.onnx"), t.model, request, &t.data.train, quantization);
        QVERIFY(contains(w.summary.tensors, "conv1.weight/int8 [8, 1, 3, 3] INT8"));
        QVERIFY(contains(w.summary.tensors, "fc1.bias/int32 [32] INT32"));
        // The quantized weights are there only as integers: no float copy rides along.
        const OnnxModelInfo info = readOnnx(path("q.onnx"));
        QVERIFY(!info.initializer("conv1.weight") && !info.initializer("fc1.weight"));
        QCOMPARE(info.integerInitializers.at("fc1.weight/int8").values.size(), size_t(32 * 128));

        // Read back: weights dequantized from the file, every activation's grid.
        const ExportModel file = loadModelFile(path("q.onnx"));
        QCOMPARE(file.int8Activations.size(), size_t(9));
        const ChannelQuantized q = quantizeWeightPerChannel(t.model.weights.at("conv2.weight"), 8);
        const std::vector<float>& dq = file.weights.at("conv2.weight");
        for (size_t i = 0; i < dq.size(); ++i) QCOMPARE(dq[i], float(q.values[i]) * q.scales[i / 72]);

        const int64_t n = t.data.validation.count;
        const std::vector<float> raw = rawInputs(t, n);
        const std::vector<float> simulated =
            simulateInt8(file, file.int8Activations, t.data.validation.inputs.data(), n);
        const std::vector<float> floats = floatOutputs(t.model, t.data.validation.inputs, n);
        test::OnnxRuntimeBatch ort;
        ort.add(path("q.onnx"), raw, {n, 1, 8, 8});
        ort.add(path("q.onnx"), raw, {n, 1, 8, 8}, /*optimized=*/true);
        const std::string err = ort.run();
        QVERIFY2(err.empty(), err.c_str());
        // onnxruntime fuses the QDQ graph into its integer kernels.
        for (const char* op : {"QLinearConv", "QGemm"})
            QVERIFY2(contains(ort.ops(1), op), qPrintable(QString("no %1 in the optimized graph").arg(op)));
        QVERIFY(!contains(ort.ops(1), "Conv"));
        // As written, onnxruntime computes what the simulation does (up to float summation order); its integer
        // kernels requantize with their own rounding, so allow a few steps of the output's inputs.
        const double range =
            *std::max_element(floats.begin(), floats.end()) - *std::min_element(floats.begin(), floats.end());
        const double asWritten = maxAbsDiff(ort.output(0), simulated), kernels = maxAbsDiff(ort.output(1), simulated);
        qInfo(
            "int8 on %lld samples: onnxruntime vs simulation %.3g (as written), %.3g (integer kernels); output "
            "range %.3g; vs float %.3g",
            static_cast<long long>(n), asWritten, kernels, range, maxAbsDiff(simulated, floats));
        QVERIFY2(asWritten <= 1e-5 * range, qPrintable(QString::number(asWritten)));
        QVERIFY2(kernels <= 0.01 * range, qPrintable(QString::number(kernels)));
        QCOMPARE(sameArgmax(ort.output(0), simulated, n, 3), n);
        QVERIFY(sameArgmax(ort.output(1), simulated, n, 3) >= n * 99 / 100);
        QVERIFY(sameArgmax(simulated, floats, n, 3) >= n * 97 / 100);

        // The export check runs the file's int8 arithmetic (OpenCV 4.6 cannot import QDQ) and says so.
        const ExportCheckResult c = checkExport(t.model, path("q.onnx"), t.data.validation, t.data.normalization, 100);
        QCOMPARE(c.runtime, std::string(cpu::int8Unavailable().empty() ? "Strata int8 engine"
                                                                       : "Strata CPU backend (int8 simulated)"));
        // On the int8 engine, checked against the simulation of the same file.
        if (cpu::int8Unavailable().empty()) QVERIFY(c.int8SameAsSimulation >= c.samples * 98 / 100);
        QVERIFY2(c.method.find("uint8 scale and zero point") != std::string::npos, c.method.c_str());
        QVERIFY(std::abs(c.fileAccuracy - c.liveAccuracy) <= 0.03);
        // int8 needs calibration data, and only ONNX has it.
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, writeExport(path("x.onnx"), t.model, request));
        request.format = ExportFormat::Gguf;
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, writeExport(path("x.gguf"), t.model, request, &t.data.train));
    }

    // A Transformer's int8 file: passes onnx::checker (its QDQ value names once clashed with the attention's
    // own "<node>/q"), and onnxruntime runs it as the simulation computes it: Dense layers over the sequence and
    // the attention's Q, K, V and output projections quantized, and inside it Q, K, V, the softmax weights and the
    // heads' context rounded; the softmax, LayerNorm, embeddings and pooling float32 between the grids.
    void int8TransformerRunsInOnnxruntime() {
        const int64_t length = 10, vocab = 30;
        const ExportModel m = untrainedExportModel(test::smallTransformerProject(length, vocab), "");
        const DataSplit calibration = test::tokenIdSplit(200, length, vocab, 31),
                        samples = test::tokenIdSplit(100, length, vocab, 32);
        test::writeInt8Onnx(path("transformer.onnx"), m, calibration);
        const OnnxModelInfo info = readOnnx(path("transformer.onnx"));
        for (const char* w : {"ff1.weight/int8", "ff2.weight/int8", "logits.weight/int8", "attention.in_weight/int8",
                              "attention.in_bias/int32", "attention.out_weight/int8", "attention.out_bias/int32"})
            QVERIFY2(info.integerInitializers.count(w), w);
        QVERIFY(!info.initializer("attention.out_weight"));
        QVERIFY(info.initializer("words.weight"));  // the embedding stays float32
        // The heads' context is quantized inside the attention (its own QDQ before the output projection's MatMul),
        // and read back as an activation of the file.
        bool contextQdq = false;
        for (const OnnxNodeInfo& n : info.nodes)
            contextQdq = contextQdq || (n.name == "attention/context/quantize" && n.inputs[0] == "attention/merged");
        QVERIFY(contextQdq);
        const ExportModel file = loadModelFile(path("transformer.onnx"));
        for (const char* inner : {"attention/qkv", "attention/probs", "attention/context"})
            QVERIFY2(file.int8Activations.count(inner), inner);
        QCOMPARE(file.int8Activations.at("attention/qkv").zeroPoint, 128);  // symmetric: K and V as signed bytes
        QCOMPARE(file.int8Activations.at("attention/probs").zeroPoint, 0);
        QCOMPARE(file.int8Activations.size(), quantizedOutputs(file.project.graph).size() + 3);
        // onnxruntime's outputs of an int8 file on the samples into `out`; its error, empty when it ran.
        auto runOnnxruntime = [&](const std::string& file, std::vector<float>& out) {
            test::OnnxRuntimeBatch ort;
            ort.add(file, samples.inputs, {samples.count, length});
            const std::string err = ort.run();
            if (err.empty()) out = ort.output(0);
            return err;
        };
        const std::vector<float> simulated =
            simulateInt8(file, file.int8Activations, samples.inputs.data(), samples.count);
        std::vector<float> ortOut;
        const std::string err = runOnnxruntime(path("transformer.onnx"), ortOut);
        QVERIFY2(err.empty(), err.c_str());
        const double diff = maxAbsDiff(ortOut, simulated);
        qInfo("int8 Transformer on %lld samples: onnxruntime vs simulation %.3g (probabilities)",
              static_cast<long long>(samples.count), diff);
        QVERIFY2(diff <= 1e-4, qPrintable(QString::number(diff)));
        QCOMPARE(sameArgmax(ortOut, simulated, samples.count, 4), samples.count);
        // The Export dialog's check of the file (word ids as the data): on the int8 engine where it runs, against
        // the simulation of the same file.
        const ExportCheckResult check = checkExport(m, path("transformer.onnx"), samples, m.normalization, 100);
        if (cpu::int8Unavailable().empty()) {
            QCOMPARE(check.runtime, std::string("Strata int8 engine"));
            QCOMPARE(check.int8SameAsSimulation, check.samples);
        }
        QCOMPARE(check.samples, int64_t(100));
        // A text CNN: its Conv1D weights int8 with one scale per filter (axis 1 of [kernel, filters, channels]), read
        // back as written, and onnxruntime computes what the simulation does.
        const ExportModel cnn = untrainedExportModel(test::smallTextCnnProject(length, vocab), "");
        test::writeInt8Onnx(path("textcnn.onnx"), cnn, calibration);
        const OnnxModelInfo cnnInfo = readOnnx(path("textcnn.onnx"));
        QCOMPARE(cnnInfo.integerInitializers.at("trigrams.weight/int8").values.size(), size_t(3 * 6 * 8));
        QVERIFY(cnnInfo.integerInitializers.count("trigrams.bias/int32"));
        const ExportModel cnnFile = loadModelFile(path("textcnn.onnx"));
        const ChannelQuantized q = quantizeWeightAlongAxis(cnn.weights.at("skips.weight"), Shape{2, 5, 6}, 1);
        QCOMPARE(q.scales.size(), size_t(5));
        for (size_t i = 0; i < q.values.size(); ++i)
            QCOMPARE(cnnFile.weights.at("skips.weight")[i], float(q.values[i]) * q.scales[(i / 6) % 5]);
        const std::vector<float> cnnSimulated =
            simulateInt8(cnnFile, cnnFile.int8Activations, samples.inputs.data(), samples.count);
        std::vector<float> cnnOrt;
        const std::string cnnErr = runOnnxruntime(path("textcnn.onnx"), cnnOrt);
        QVERIFY2(cnnErr.empty(), cnnErr.c_str());
        QVERIFY2(maxAbsDiff(cnnOrt, cnnSimulated) <= 1e-4,
                 qPrintable(QString::number(maxAbsDiff(cnnOrt, cnnSimulated))));
    }

    void prunedModelsRunInOnnxruntime() {
        const TrainedCnn t = trainedCnn(path("prune"));
        // 70% sparse (masks applied as a pruning run would leave them) and structurally halved.
        ExportModel sparse = t.model;
        const auto masks =
            magnitudeMasks(sparse.weights, prunableWeights(sparse.project.graph), 0.7, PruningScope::Global);
        for (const auto& [name, mask] : masks)
            for (size_t i = 0; i < mask.size(); ++i) sparse.weights.at(name)[i] *= mask[i];
        const StructuredPruneResult s = pruneStructured(t.model.project, t.model.weights, {});
        ExportModel smaller = t.model;
        smaller.project = s.project;
        smaller.weights = s.weights;
        writeOnnx(path("sparse.onnx"), sparse);
        writeOnnx(path("smaller.onnx"), smaller);
        ExportRequest request;
        request.precision = ExportPrecision::Int8;
        writeExport(path("smaller-int8.onnx"), smaller, request, &t.data.train);

        const int64_t n = 64;
        const std::vector<float> raw = rawInputs(t, n);
        test::OnnxRuntimeBatch ort;
        ort.add(path("sparse.onnx"), raw, {n, 1, 8, 8});
        ort.add(path("smaller.onnx"), raw, {n, 1, 8, 8});
        ort.add(path("smaller-int8.onnx"), raw, {n, 1, 8, 8}, true);
        const std::string err = ort.run();
        QVERIFY2(err.empty(), err.c_str());
        QVERIFY(maxAbsDiff(ort.output(0), floatOutputs(sparse, t.data.validation.inputs, n)) <= 1e-4);
        QVERIFY(maxAbsDiff(ort.output(1), floatOutputs(smaller, t.data.validation.inputs, n)) <= 1e-4);
        const ExportModel file = loadModelFile(path("smaller-int8.onnx"));
        const std::vector<float> simulated =
            simulateInt8(file, file.int8Activations, t.data.validation.inputs.data(), n);
        QVERIFY(sameArgmax(ort.output(2), simulated, n, 3) >= n - 2);
        QVERIFY(contains(ort.ops(2), "QLinearConv"));
    }

    void compressionStudyMeasuresEveryVariant() {
        const TrainedCnn t = trainedCnn(path("study"));
        CompressionRequest r;
        r.checkpoint = path("study");
        r.outputDir = path("study-out");
        r.sparsities = {0.8};
        r.structuredFraction = 0.5;
        r.int8 = true;
        r.fineTuneEpochs = 1;
        r.threads = 1;
        r.quantization.calibrationSamples = 200;
        std::vector<double> fractions;
        std::vector<std::string> ready;
        CompressionStudy study(
            r, [&](const std::string&, double f) { fractions.push_back(f); },
            [&](const CompressionVariant& v) { ready.push_back(v.name); });
        const std::vector<CompressionVariant> v = study.run();
        QCOMPARE(ready, (std::vector<std::string>{"original", "80% sparse", "structured 50%", "int8",
                                                  "80% sparse + int8", "structured 50% + int8"}));
        QVERIFY(std::is_sorted(fractions.begin(), fractions.end()));
        const CompressionVariant &original = v[0], &sparse = v[1], &smaller = v[2], &int8 = v[3];
        QCOMPARE(original.samples, int64_t(150));
        QVERIFY(original.accuracy > 0.5);
        // Zeros take as many bytes as any float until compressed; a smaller graph is smaller either way.
        // (Only the metadata differs: the project's name and settings.)
        QVERIFY(std::abs(static_cast<double>(sparse.fileBytes) - static_cast<double>(original.fileBytes)) <
                0.02 * static_cast<double>(original.fileBytes));
        QVERIFY(sparse.compressedBytes < original.compressedBytes * 0.6);
        QVERIFY(std::abs(static_cast<double>(sparse.nonZero) / sparse.parameters - 0.2) < 0.05);
        QVERIFY(std::abs(overallSparsity(sparse.layers) - 0.8) < 1e-3);
        QVERIFY(smaller.parameters < original.parameters / 2);
        QVERIFY(smaller.fileBytes < original.fileBytes);
        QVERIFY(!smaller.projectFile.empty() && readProject(smaller.projectFile).graph.nodeByName("conv1"));
        for (const CompressionVariant& x : {original, sparse, smaller})
            QVERIFY(x.timed && x.msPerBatch1 > 0 && x.msPerBatch256 > 0);
        // Timed in the int8 engine where this CPU runs it (AVX512-VNNI), else not, the note saying why.
        if (cpu::int8Unavailable().empty()) {
            QVERIFY2(int8.timed && int8.msPerBatch1 > 0 && int8.msPerBatch256 > 0, int8.note.c_str());
            QVERIFY(int8.note.find("int8 engine") != std::string::npos);
        } else {
            QVERIFY(!int8.timed);
            QVERIFY(int8.note.find("not timed") != std::string::npos);
        }
        QVERIFY(int8.fileBytes < original.fileBytes);
        QVERIFY(std::abs(int8.accuracy - original.accuracy) <= 0.05);
        QVERIFY(readOnnx(int8.onnxFile).metadata.count("strata.quantization"));
    }

    void exportCommandInt8() {
        const TrainedCnn t = trainedCnn(path("cli"));
        std::ostringstream out, err;
        const int rc =
            runExportCommand({path("cli"), "--format", "onnx", "--quantize", "int8", "--calibration-samples", "100",
                              "--calibration", "percentile", "--percentile", "99.9", "-o", path("cli.onnx")},
                             out, err);
        QVERIFY2(rc == 0, (out.str() + err.str()).c_str());
        const std::string o = out.str();
        QVERIFY2(o.find("int8: calibrated 9 activations on 100 training samples (percentile 99.9)") != o.npos,
                 o.c_str());
        QVERIFY2(o.find("x the float32 file") != o.npos, o.c_str());
        QVERIFY2(o.find("validation accuracy on 150 samples: float ") != o.npos, o.c_str());
        // Refusals name what is wrong.
        QCOMPARE(
            runExportCommand({path("cli"), "--format", "gguf", "--quantize", "int8", "-o", path("x.gguf")}, out, err),
            2);
        QVERIFY(err.str().find("--quantize int8 writes an ONNX QDQ graph") != std::string::npos);
        QCOMPARE(runExportCommand({path("cli"), "--format", "onnx", "--calibration", "minmax", "-o", path("x.onnx")},
                                  out, err),
                 2);
        QCOMPARE(
            runExportCommand({path("cli"), "--format", "onnx", "--quantize", "q8_0", "-o", path("x.onnx")}, out, err),
            2);
        // A checkpoint whose project reads its data from a relative path: the calibration looks in the current
        // folder, and the message says so and what to do.
        Checkpoint relative = loadCheckpoint(path("cli"));
        relative.project.dataset.kind = DatasetKind::Csv;
        relative.project.dataset.trainPath = "data/not_here/train.csv";
        fs::create_directories(path("relative"));
        saveCheckpoint(relative, path("relative/last.safetensors"));
        err.str("");
        QCOMPARE(runExportCommand({path("relative/last.safetensors"), "--format", "onnx", "--quantize", "int8", "-o",
                                   path("relative.onnx")},
                                  out, err),
                 1);
        QVERIFY2(err.str().find("'data/not_here/train.csv', as the checkpoint's project names it, was looked for from "
                                "the current folder; export from the project's folder, or give the project file") !=
                     std::string::npos,
                 err.str().c_str());
    }
};

QTEST_GUILESS_MAIN(TestQuantization)
#include "test_quantization.moc"
