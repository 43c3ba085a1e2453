// Accuracy cost of quantized exports on Fashion-MNIST: trains a small MLP for
// 300 steps (one epoch over 19,200 images), exports GGUF as F32, F16 and Q8_0,
// reloads each file into a runnable model and measures validation accuracy on
// the 10,000 test images. Skipped when the data set is not installed.
//
// Q8_0 applies to weights whose innermost dimension is a multiple of 32
// (here fc2 [64, 128] and fc3 [10, 64]); fc1 [128, 784] has 784 = 24.5 * 32
// inputs and falls back to F16 (see Gguf.h). So that the fallback hides no loss, the
// test also measures every weight matrix through Q8_0 blocks with zero-padded rows.
#include <QtTest>
#include <filesystem>

#include "core/backend/Backend.h"
#include "core/data/Dataset.h"
#include "core/export/ExportModel.h"
#include "core/export/Gguf.h"
#include "core/graph/Model.h"
#include "core/train/Checkpoint.h"
#include "core/train/Trainer.h"
#include "tests/support/TestBackends.h"

using namespace strata;

namespace {

const char* kData = "/usr/share/datasets/fashion-mnist/";

double accuracy(const ExportModel& m, const DataSplit& split, Backend& backend) {
    auto model = compile(m.project.graph, backend, 0);
    applyWeights(*model, m.weights);
    const int64_t per = split.sampleShape.numel(), batch = 500;
    int64_t correct = 0;
    std::vector<float> out;
    for (int64_t s = 0; s < split.count; s += batch) {
        const int64_t n = std::min(batch, split.count - s);
        const Tensor x = backend.fromHost(split.sampleShape.withBatch(n), split.inputs.data() + s * per);
        const Tensor& y = model->forward(x, false);
        out.resize(static_cast<size_t>(y.numel()));
        backend.toHost(y, out.data());
        const int64_t classes = y.numel() / n;
        for (int64_t i = 0; i < n; ++i) {
            const float* row = out.data() + i * classes;
            const int64_t pred = std::max_element(row, row + classes) - row;
            correct += pred == split.labels[static_cast<size_t>(s + i)];
        }
    }
    return double(correct) / double(split.count);
}

// Every rank >= 2 tensor through Q8_0 blocks along its rows, each row's last block zero-padded to 32 values:
// what Q8_0 would cost without the multiple-of-32 rule (GGUF keeps such tensors F16, as llama.cpp does).
ExportModel q8Everywhere(ExportModel m) {
    for (const ExportParameter& p : exportParameters(m.project.graph)) {
        if (p.shape.rank() < 2) continue;
        std::vector<float>& v = m.weights.at(p.name);
        const size_t inner = static_cast<size_t>(p.shape.dims().back());
        const size_t padded = (inner + kQ8BlockSize - 1) / kQ8BlockSize * kQ8BlockSize;
        for (size_t row = 0; row < v.size() / inner; ++row) {
            std::vector<float> r(padded, 0.f);
            std::copy(v.begin() + static_cast<long>(row * inner), v.begin() + static_cast<long>((row + 1) * inner),
                      r.begin());
            const std::vector<float> back = dequantizeQ8_0(quantizeQ8_0(r).data(), padded);
            std::copy(back.begin(), back.begin() + static_cast<long>(inner),
                      v.begin() + static_cast<long>(row * inner));
        }
    }
    return m;
}

class NullObserver : public TrainingObserver {};

}  // namespace

class TestExportQuantization : public QObject {
    Q_OBJECT

private slots:
    void accuracyLoss() {
        if (!std::filesystem::exists(std::string(kData) + "train-images-idx3-ubyte.gz"))
            QSKIP("Fashion-MNIST is not installed (dataset-fashion-mnist)");
        QTemporaryDir dir;
        Project p;
        p.name = "fashion_mlp_quant";
        Graph& g = p.graph;
        const int in = g.addNode("Input", "image", {{"shape", {1, 28, 28}}});
        const int f = g.addNode("Flatten", "flatten");
        const int d1 = g.addNode("Dense", "fc1", {{"units", 128}});
        const int r1 = g.addNode("ReLU", "relu1");
        const int d2 = g.addNode("Dense", "fc2", {{"units", 64}});
        const int r2 = g.addNode("ReLU", "relu2");
        const int d3 = g.addNode("Dense", "fc3", {{"units", 10}});
        g.connect(in, f);
        g.connect(f, d1);
        g.connect(d1, r1);
        g.connect(r1, d2);
        g.connect(d2, r2);
        g.connect(r2, d3);
        p.dataset.kind = DatasetKind::Idx;
        p.dataset.trainImages = std::string(kData) + "train-images-idx3-ubyte.gz";
        p.dataset.trainLabels = std::string(kData) + "train-labels-idx1-ubyte.gz";
        p.dataset.validationImages = std::string(kData) + "t10k-images-idx3-ubyte.gz";
        p.dataset.validationLabels = std::string(kData) + "t10k-labels-idx1-ubyte.gz";
        p.dataset.normalization = NormalizationMode::Standardize;
        p.dataset.trainLimit = 300 * 64;
        p.training.epochs = 1;
        p.training.batchSize = 64;
        p.training.learningRate = 0.05;
        p.training.checkpointDir = dir.path().toStdString();
        p.training.seed = 7;

        auto backend = test::makeCpuBackend();
        NullObserver obs;
        TrainerOptions opt;
        opt.telemetryIntervalMs = 0;
        Trainer trainer(p, *backend, &obs, opt);
        QVERIFY(trainer.run());
        const ExportModel trained = exportModelFromCheckpoint(loadCheckpoint(dir.path().toStdString()));

        const DatasetBundle data = loadDataset(p.dataset, "");
        QCOMPARE(data.validation.count, int64_t(10000));
        const double f32 = accuracy(trained, data.validation, *backend);
        QVERIFY2(f32 > 0.75, qPrintable(QString("the trained model only reaches %1").arg(f32)));

        double results[3];
        const char* names[3] = {"f32", "f16", "q8_0"};
        for (int k = 0; k < 3; ++k) {
            const std::string file = dir.path().toStdString() + "/m_" + names[k] + ".gguf";
            writeGgufExport(file, trained, parseExportPrecision(names[k]));
            results[k] = accuracy(loadModelFile(file), data.validation, *backend);
            qInfo("GGUF %-5s %8llu bytes  accuracy %.2f%%  (checkpoint %.2f%%)", names[k],
                  static_cast<unsigned long long>(std::filesystem::file_size(file)), 100 * results[k], 100 * f32);
        }
        const ExportModel everywhere = q8Everywhere(trained);
        QVERIFY(everywhere.weights.at("fc1.weight") != trained.weights.at("fc1.weight"));
        const double q8All = accuracy(everywhere, data.validation, *backend);
        qInfo("Q8_0 on every weight matrix (fc1 rows zero-padded, not a GGUF layout): accuracy %.2f%%", 100 * q8All);
        QVERIFY(std::fabs(q8All - f32) <= 0.005);
        QCOMPARE(results[0], f32);                      // F32 export is exact
        QVERIFY(std::fabs(results[1] - f32) <= 0.002);  // at most 20 of 10,000 images change
        QVERIFY(std::fabs(results[2] - f32) <= 0.005);
    }
};

QTEST_GUILESS_MAIN(TestExportQuantization)
#include "test_export_quantization.moc"
