// Evaluation and ExportCheck: predictions, confusion matrix and accuracy of a
// model with hand-set weights against values worked out by hand; the accuracy
// of a trained model equals the Trainer's own (Backend::countCorrect) figure;
// and the export check on a trained model: F32 files reproduce the live
// outputs (ONNX files run in OpenCV DNN), Q8_0 differs a little, a wrong
// normalization in the file and a broken file are caught.
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/backend/BackendRegistry.h"
#include "core/data/Dataset.h"
#include "core/export/ExportModel.h"
#include "core/graph/Model.h"
#include "core/infer/Evaluation.h"
#include "core/infer/ExportCheck.h"
#include "core/infer/OnnxRunner.h"
#include "core/train/Checkpoint.h"
#include "core/train/Trainer.h"
#include "tests/support/TestBackends.h"
#include "tests/support/TestProjects.h"

using namespace strata;

namespace {

// Input [inputs] -> Dense 32 -> ReLU -> Dense 4 on synthetic blobs; 300 of 1200 samples held out.
Project tinyProject(int inputs) {
    Project p = test::blobsMlpProject("tiny", inputs);
    p.training.seed = 3;
    return p;
}

// Trains one epoch and returns the checkpoint it wrote (best.safetensors of `dir`).
Checkpoint trainTiny(const Project& project, const QString& dir) {
    Project p = project;
    p.training.checkpointDir = dir.toStdString();
    if (const std::string why = test::trainQuietly(p); !why.empty()) throw std::runtime_error(why);
    return loadCheckpoint(dir.toStdString());
}

}  // namespace

class TestEvaluation : public QObject {
    Q_OBJECT
private slots:
    // Dense 2 -> 3 with W = [[1,0],[0,1],[-1,-1]], b = 0: the logits are (x, y, -x-y).
    void confusionMatrixOfKnownWeights() {
        Graph g;
        const int in = g.addNode("Input", "input", Json{{"shape", {2}}});
        const int d = g.addNode("Dense", "dense", Json{{"units", 3}});
        g.connect(in, d);
        auto backend = test::makeReferenceBackend();
        auto model = compile(g, *backend, 0);
        applyWeights(*model, {{"dense.weight", {1, 0, 0, 1, -1, -1}}, {"dense.bias", {0, 0, 0}}});

        const std::vector<float> x{2, 1, 0, 3, -1, -2, 1, 2, -3, 1, 0.5f, 0.2f};
        const std::vector<int32_t> labels{0, 1, 2, 0, 1, 0};
        // Predictions by hand: (2,1,-3)->0, (0,3,-3)->1, (-1,-2,3)->2, (1,2,-3)->1, (-3,1,2)->2, (.5,.2,-.7)->0.
        DataSplit split;
        split.sampleShape = Shape{2};
        split.count = 6;
        split.inputs = x;
        split.labels = labels;
        int calls = 0;
        const SplitEvaluation e = evaluateSplit(*model, split, 0, 4, [&](int64_t done, int64_t total) {
            ++calls;
            return total == 6 && (done == 4 || done == 6);
        });
        QCOMPARE(calls, 2);  // batches of 4 and 2
        QCOMPARE(e.predictions.predicted, (std::vector<int32_t>{0, 1, 2, 1, 2, 0}));
        const ConfusionMatrix& m = e.confusion;
        QCOMPARE(m.classes, 3);
        QCOMPARE(m.counts, (std::vector<int64_t>{2, 1, 0, 0, 1, 1, 0, 0, 1}));
        QCOMPARE(m.total(), int64_t(6));
        QCOMPARE(m.correct(), int64_t(4));
        QCOMPARE(m.accuracy(), 4.0 / 6.0);
        QCOMPARE(m.recall(0), 2.0 / 3.0);
        QCOMPARE(m.recall(1), 0.5);
        QCOMPARE(m.recall(2), 1.0);
        QCOMPARE(m.columnTotal(2), int64_t(2));
        // Sample 0's probabilities: softmax(2, 1, -3).
        const double z = std::exp(2.0) + std::exp(1.0) + std::exp(-3.0);
        const float* p0 = e.predictions.probabilitiesOf(0);
        QVERIFY(std::fabs(p0[0] - std::exp(2.0) / z) < 1e-6);
        QVERIFY(std::fabs(p0[1] - std::exp(1.0) / z) < 1e-6);
        QVERIFY(std::fabs(p0[2] - std::exp(-3.0) / z) < 1e-6);
        for (int64_t s = 0; s < 6; ++s) {
            double sum = 0;
            for (int k = 0; k < 3; ++k) sum += e.predictions.probabilitiesOf(s)[k];
            QVERIFY(std::fabs(sum - 1.0) < 1e-6);
        }

        // Cancelling stops the run.
        QVERIFY_THROWS_EXCEPTION(EvaluationCancelled,
                                 evaluateSplit(*model, split, 0, 4, [](int64_t, int64_t) { return false; }));
        // A class with no samples has no recall; bad labels name the sample.
        const ConfusionMatrix small = confusionMatrix({0, 0}, {0, 1}, 3);
        QVERIFY(std::isnan(small.recall(2)));
        try {
            confusionMatrix({0, 5}, {0, 1}, 3);
            QFAIL("no exception for label 5 of 3 classes");
        } catch (const std::out_of_range& err) {
            QVERIFY2(QString(err.what()).contains("sample 1"), err.what());
        }
    }

    void softmaxOutputIsNotSoftmaxedTwice() {
        Graph g;
        const int in = g.addNode("Input", "input", Json{{"shape", {2}}});
        const int d = g.addNode("Dense", "dense", Json{{"units", 2}});
        const int s = g.addNode("Softmax", "softmax");
        g.connect(in, d);
        g.connect(d, s);
        QVERIFY(graphEndsInSoftmax(g));
        auto backend = test::makeReferenceBackend();
        auto model = compile(g, *backend, 0);
        applyWeights(*model, {{"dense.weight", {1, 0, 0, 1}}, {"dense.bias", {0, 0}}});
        const std::vector<float> x{1, 0};
        const Predictions p = predictSamples(*model, x.data(), 1);
        const double e1 = std::exp(1.0) / (std::exp(1.0) + 1.0);
        QVERIFY(std::fabs(p.probabilities[0] - e1) < 1e-6);
        QCOMPARE(p.probabilities, p.outputs);
    }

    // Where a text model looked: the hand-weighted one-head model gives "good" 4/6 and every other real token 1/6
    // (padding none); a model without attention has none; an attention over a sequence longer than the input (a
    // padded Conv1D before it) averages over every query instead of reading ids that do not exist.
    void tokenAttentionFollowsTheRealTokens() {
        auto backend = test::makeReferenceBackend();
        const ExportModel m = test::sentimentAttentionModel();
        auto model = compile(m.project.graph, *backend, 0);
        applyWeights(*model, m.weights);
        const std::vector<float> ids{2, 3, 1, 0};  // good, bad, <unk>, padding
        predictSamples(*model, ids.data(), 1);
        const TokenAttention a = lastTokenAttention(*model, 0, ids.data());
        QCOMPARE(a.layerName, std::string("attn"));
        QCOMPARE(a.heads, 1);
        const std::vector<double> expected{4.0 / 6, 1.0 / 6, 1.0 / 6, 0.0};
        QCOMPARE(a.weights.size(), expected.size());
        for (size_t i = 0; i < expected.size(); ++i)
            QVERIFY2(std::fabs(a.weights[i] - expected[i]) < 1e-5, qPrintable(QString::number(a.weights[i])));

        const ExportModel plain = test::sentimentTextModel();
        auto noAttention = compile(plain.project.graph, *backend, 0);
        applyWeights(*noAttention, plain.weights);
        predictSamples(*noAttention, ids.data(), 1);
        QVERIFY(lastTokenAttention(*noAttention, 0, ids.data()).layerName.empty());

        Graph g;
        const int in = g.addNode("Input", "tokens", Json{{"shape", {4}}});
        const int e = g.addNode("Embedding", "embed", Json{{"vocab", 5}, {"dim", 2}});
        const int cv = g.addNode("Conv1D", "widen", Json{{"filters", 2}, {"kernel", 1}, {"padding", 1}});
        const int at = g.addNode("MultiHeadSelfAttention", "attn", Json{{"heads", 1}});
        const int pool = g.addNode("SequenceMeanPool", "mean");
        const int fc = g.addNode("Dense", "fc", Json{{"units", 2}});
        g.connect(in, e);
        g.connect(e, cv);
        g.connect(cv, at);
        g.connect(at, pool);
        g.connect(pool, fc);
        auto longer = compile(g, *backend, 3);
        predictSamples(*longer, ids.data(), 1);
        const TokenAttention w = lastTokenAttention(*longer, 0, ids.data());
        QCOMPARE(w.weights.size(), size_t(6));
        double total = 0;
        for (float v : w.weights) total += v;
        QVERIFY(std::fabs(total - 1.0) < 1e-5);
    }

    void normalizationRoundTrip() {
        Normalization n;
        n.mode = "standardize";
        n.scale = 1.f / 255.f;
        n.mean = 0.3f;
        n.std = 0.25f;
        std::vector<float> v{0, 51, 255};
        applyNormalization(v, n);
        QVERIFY(std::fabs(v[1] - (0.2f - 0.3f) / 0.25f) < 1e-6);
        undoNormalization(v, n);
        QVERIFY(std::fabs(v[2] - 255.f) < 1e-3);
        Normalization f;
        f.mode = "standardize";
        f.featureMean = {1, 2};
        f.featureStd = {2, 4};
        std::vector<float> w{3, 6, 5, 2};
        applyNormalization(w, f);
        QCOMPARE(w, (std::vector<float>{1, 1, 2, 0}));
        undoNormalization(w, f);
        QCOMPARE(w, (std::vector<float>{3, 6, 5, 2}));
        std::vector<float> odd{1, 2, 3};
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, applyNormalization(odd, f));
    }

    // The accuracy from the confusion matrix is the Trainer's validation accuracy (Backend::countCorrect).
    void accuracyMatchesTrainer() {
        QTemporaryDir dir;
        const Project p = tinyProject(16);
        const Checkpoint c = trainTiny(p, dir.path());
        QVERIFY(c.hasValidation);
        const DatasetBundle data = loadDataset(p.dataset, "");
        auto backend = test::makeCpuBackend();
        auto model = compile(c.project.graph, *backend, 0);
        applyWeights(*model, c.weights);
        const SplitEvaluation e = evaluateSplit(*model, data.validation, 0, 64);
        QCOMPARE(e.confusion.total(), data.validation.count);
        QCOMPARE(e.confusion.total(), int64_t(300));
        QVERIFY2(std::fabs(e.confusion.accuracy() - c.valAccuracy) < 1e-12,
                 qPrintable(QString("confusion %1, trainer %2").arg(e.confusion.accuracy()).arg(c.valAccuracy)));
        // And directly against countCorrect on the same outputs.
        const int64_t viaBackend =
            backend->countCorrect(e.predictions.outputs.data(), data.validation.labels.data(), 300, 4);
        QCOMPARE(e.confusion.correct(), viaBackend);
        QVERIFY(e.confusion.accuracy() > 0.5);  // trained: well above chance (0.25)
    }

    void exportCheckOnTrainedModel() {
        QTemporaryDir dir;
        const Project p = tinyProject(16);
        const Checkpoint c = trainTiny(p, dir.filePath("ckpt"));
        const DatasetBundle data = loadDataset(p.dataset, "");
        const Normalization norm = data.normalization;
        const ExportModel live = exportModelFromCheckpoint(c);

        struct Case {
            const char* file;
            ExportRequest request;
        };
        const Case f32Cases[] = {
            {"m.onnx", {ExportFormat::Onnx, ExportPrecision::F32, 13}},
            {"m17.onnx", {ExportFormat::Onnx, ExportPrecision::F32, 17}},
            {"m.gguf", {ExportFormat::Gguf, ExportPrecision::F32, 13}},
            {"m.safetensors", {ExportFormat::Safetensors, ExportPrecision::F32, 13}},
        };
        for (const Case& k : f32Cases) {
            const std::string path = dir.filePath(k.file).toStdString();
            const ExportWriteResult w = writeExport(path, live, k.request);
            QVERIFY(w.summary.bytes > 0);
            QCOMPARE(w.summary.bytes, uint64_t(std::filesystem::file_size(path)));
            QVERIFY(!w.summary.tensors.empty());
            QVERIFY(w.summary.fallbacks.empty());
            const ExportCheckResult r = checkExport(live, path, data.validation, norm, 256);
            QCOMPARE(r.samples, int64_t(256));
            QCOMPARE(r.classes, 4);
            QVERIFY2(r.maxAbsDiff <= 1e-4, qPrintable(QString("%1: %2").arg(k.file).arg(r.maxAbsDiff)));
            QCOMPARE(r.fileAccuracy, r.liveAccuracy);
            QCOMPARE(r.samePrediction, int64_t(256));
            QVERIFY(r.liveAccuracy > 0.5);
            QVERIFY(!r.method.empty());
        }
        // The ONNX check runs the file's operator graph in OpenCV DNN, and says so; without OpenCV it says
        // that the graph was not executed.
        for (const char* file : {"m.onnx", "m17.onnx"}) {
            const ExportCheckResult r = checkExport(live, dir.filePath(file).toStdString(), data.validation, norm, 8);
            const QString method = QString::fromStdString(r.method);
            if (onnxRunnerAvailable()) {
                QCOMPARE(r.runtime, onnxRunnerName());
                QVERIFY2(method.startsWith("ran the ONNX graph in OpenCV DNN"), qPrintable(method));
            } else {
                QCOMPARE(r.runtime, std::string("Strata CPU backend"));
                QVERIFY2(method.contains("NOT executed"), qPrintable(method));
            }
        }

        // Q8_0: dense1.weight [32, 16] cannot be Q8_0 (16 is not a multiple of 32) and falls back to F16;
        // dense2.weight [4, 32] is quantized. The outputs move a little, not a lot.
        const std::string q8 = dir.filePath("m-q8.gguf").toStdString();
        const ExportWriteResult w = writeExport(q8, live, {ExportFormat::Gguf, ExportPrecision::Q8_0, 13});
        QCOMPARE(w.summary.fallbacks.size(), size_t(1));
        QCOMPARE(w.summary.fallbacks[0].name, std::string("dense1.weight"));
        QCOMPARE(w.summary.fallbacks[0].shape, (Shape{32, 16}));
        QVERIFY(std::find(w.summary.tensors.begin(), w.summary.tensors.end(), "dense2.weight [4, 32] Q8_0") !=
                w.summary.tensors.end());
        const ExportCheckResult r = checkExport(live, q8, data.validation, norm, 256);
        // Q8_0 keeps about 2 significant digits per weight: the outputs move by well under 2% of their range.
        QVERIFY2(r.maxAbsDiff > 0 && r.maxAbsDiff < 0.02 * r.maxAbsOutput,
                 qPrintable(QString("%1 of %2").arg(r.maxAbsDiff).arg(r.maxAbsOutput)));
        QVERIFY(std::fabs(r.fileAccuracy - r.liveAccuracy) <= 0.02);

        // A precision the format lacks is refused before anything is written.
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, writeExport(dir.filePath("x.onnx").toStdString(), live,
                                                                    {ExportFormat::Onnx, ExportPrecision::Q8_0, 13}));
        QVERIFY(!QFile::exists(dir.filePath("x.onnx")));
    }

    // A file whose stored normalization is not the data's shows a large difference; a broken file throws
    // an error that names it.
    void exportCheckCatchesWrongNormalizationAndBadFiles() {
        QTemporaryDir dir;
        const Project p = tinyProject(16);
        const Checkpoint c = trainTiny(p, dir.filePath("ckpt"));
        const DatasetBundle data = loadDataset(p.dataset, "");
        ExportModel live = exportModelFromCheckpoint(c);
        // Pretend the data was standardized: the check maps inputs back to raw and through the file's
        // normalization, which is the same here, so the outputs still agree.
        Normalization std1;
        std1.mode = "standardize";
        std1.mean = 0.5f;
        std1.std = 2.f;
        live.normalization = std1;
        const std::string good = dir.filePath("good.gguf").toStdString();
        writeExport(good, live, {ExportFormat::Gguf, ExportPrecision::F32, 13});
        QVERIFY(checkExport(live, good, data.validation, std1, 128).maxAbsDiff <= 1e-4);
        ExportModel wrong = live;
        wrong.normalization.mean = 1.5f;
        const std::string bad = dir.filePath("wrong-norm.gguf").toStdString();
        writeExport(bad, wrong, {ExportFormat::Gguf, ExportPrecision::F32, 13});
        QVERIFY(checkExport(live, bad, data.validation, std1, 128).maxAbsDiff > 1e-2);

        const std::string missing = dir.filePath("missing.gguf").toStdString();
        try {
            checkExport(live, missing, data.validation, std1, 8);
            QFAIL("no exception for a missing file");
        } catch (const std::exception& e) {
            QVERIFY2(QString(e.what()).contains("missing.gguf"), e.what());
        }
        const std::string truncated = dir.filePath("truncated.gguf").toStdString();
        {
            std::ifstream in(good, std::ios::binary);
            std::string bytes((std::istreambuf_iterator<char>(in)), {});
            std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
        }
        try {
            checkExport(live, truncated, data.validation, std1, 8);
            QFAIL("no exception for a truncated file");
        } catch (const std::exception& e) {
            QVERIFY2(QString(e.what()).contains("truncated.gguf"), e.what());
        }
    }
};

QTEST_GUILESS_MAIN(TestEvaluation)
#include "test_evaluation.moc"
