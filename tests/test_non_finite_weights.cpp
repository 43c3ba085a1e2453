// NaN and inf weights are refused on load in every format, naming the tensor, how many values and the first
// (issue 35: they loaded and predicted "-nan", or plausible output where a ReLU absorbed them); the allow option
// (--allow-non-finite) loads them anyway. An export's normalization with a std of 0 or NaN is refused as a
// checkpoint's is.
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>

#include "app/CliCommands.h"
#include "core/export/ExportModel.h"
#include "core/export/Gguf.h"
#include "core/export/Onnx.h"
#include "core/infer/OnnxRunner.h"
#include "core/infer/Predict.h"
#include "core/io/NonFinite.h"
#include "core/io/Safetensors.h"
#include "core/train/Checkpoint.h"
#include "core/train/Trainer.h"
#include "tests/support/TestBackends.h"
#include "tests/support/TestProjects.h"

using namespace strata;

namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

const WeightLoadOptions kAllow{true};

}  // namespace

class TestNonFiniteWeights : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;
    std::string path(const std::string& name) const { return (m_dir.path() + "/").toStdString() + name; }

    // Expects `load` to throw a FormatError naming `file` and containing `needle`.
    void expectRefused(const std::function<void()>& load, const std::string& file, const std::string& needle) {
        try {
            load();
            QFAIL(("loaded: " + file).c_str());
        } catch (const FormatError& e) {
            QVERIFY2(contains(e.what(), file) && contains(e.what(), needle), e.what());
        }
    }

    // Input [32] -> Dense 32 -> ReLU -> Dense 3: both weights have rows of 32 (Q8_0 blocks).
    static ExportModel model() { return untrainedExportModel(test::blobsMlpProject("nan", 32, 3), ""); }

private slots:
    void messageNamesTheTensorAndTheFirstValue() {
        std::vector<float> v(20, 1.f);
        QVERIFY(nonFiniteProblem("w", v, {}).empty());
        v[17] = kNan;
        v[18] = -kInf;
        v[19] = kNan;
        QCOMPARE(nonFiniteProblem("fc1.weight", v, {}),
                 std::string("tensor 'fc1.weight' has 3 non-finite values (first at index 17: nan); pass "
                             "--allow-non-finite to load it anyway"));
        QVERIFY(nonFiniteProblem("fc1.weight", v, kAllow).empty());
        QCOMPARE(nonFiniteProblem("b", {1.f, -kInf}, WeightLoadOptions{false, ""}),
                 std::string("tensor 'b' has 1 non-finite value (first at index 1: -inf)"));
    }

    void checkpoint() {
        Project p = test::blobsMlpProject("ck", 8, 3);
        p.training.epochs = 2;
        p.training.checkpointDir = path("ck");
        test::RecordedRun rec;
        {
            auto backend = test::makeCpuBackend();
            Trainer t(p, *backend, &rec, {});
            QVERIFY2(t.run(), rec.error.c_str());
        }
        // A diverged run's weights, written as the trainer writes them (checksums and all).
        SafetensorsContents c = readSafetensors(p.training.checkpointDir + "/epoch-002.safetensors");
        for (TensorRecord& t : c.tensors)
            if (t.name == "dense1.weight") {
                std::vector<float> v = recordToFloats(t);
                v[5] = kNan;
                v[9] = kInf;
                t = makeF32Record(t.name, t.shape, v);
            }
        for (const std::string name : {"/latest.safetensors", "/epoch-002.safetensors"})
            writeSafetensors(p.training.checkpointDir + name, c.tensors, c.metadata);
        const std::string file = p.training.checkpointDir + "/latest.safetensors";
        expectRefused([&] { loadCheckpoint(file); }, file,
                      "tensor 'dense1.weight' has 2 non-finite values (first at index 5: nan); pass "
                      "--allow-non-finite to load it anyway");
        QVERIFY(std::isnan(loadCheckpoint(file, kAllow).weights.at("dense1.weight")[5]));
        expectRefused([&] { loadModelFile(file); }, file, "tensor 'dense1.weight' has 2 non-finite values");

        // The export command: refused, and written with --allow-non-finite.
        std::ostringstream out, err;
        QCOMPARE(runExportCommand({file, "--format", "gguf", "-o", path("ck.gguf")}, out, err), 1);
        QVERIFY2(contains(err.str(), "tensor 'dense1.weight' has 2 non-finite values"), err.str().c_str());
        QCOMPARE(runExportCommand({file, "--format", "gguf", "--allow-non-finite", "-o", path("ck.gguf")}, out, err),
                 0);
        expectRefused([&] { loadModelFile(path("ck.gguf")); }, path("ck.gguf"), "tensor 'dense1.weight'");

        // A resume skips them for the newest good checkpoint, and says why (no flag to pass there).
        TrainerOptions o;
        o.resumeFrom = p.training.checkpointDir;
        Project more = p;
        more.training.epochs = 3;
        test::RecordedRun resumed;
        {
            auto backend = test::makeCpuBackend();
            Trainer t(more, *backend, &resumed, o);
            QVERIFY2(t.run(), resumed.error.c_str());
        }
        QVERIFY2(contains(resumed.log, "skipped a checkpoint that does not load: " + file) &&
                     contains(resumed.log, "(first at index 5: nan)\n"),
                 resumed.log.c_str());
        QVERIFY2(contains(resumed.log, "epoch-001.safetensors at epoch 1"), resumed.log.c_str());
    }

    void safetensorsExport() {
        ExportModel m = model();
        m.weights.at("dense2.weight")[3] = kInf;
        writeSafetensorsExport(path("m.safetensors"), m, ExportPrecision::F32);
        expectRefused([&] { loadModelFile(path("m.safetensors")); }, path("m.safetensors"),
                      "tensor 'dense2.weight' has 1 non-finite value (first at index 3: inf)");
        QCOMPARE(loadModelFile(path("m.safetensors"), kAllow).weights.at("dense2.weight")[3], kInf);
        // F16 keeps inf as inf.
        writeSafetensorsExport(path("h.safetensors"), m, ExportPrecision::F16);
        expectRefused([&] { loadModelFile(path("h.safetensors")); }, path("h.safetensors"), "(first at index 3: inf)");
    }

    void ggufF32AndQ8BlockScale() {
        ExportModel m = model();
        m.weights.at("dense1.bias")[0] = -kInf;
        writeGgufExport(path("m.gguf"), m, ExportPrecision::F32);
        expectRefused([&] { loadModelFile(path("m.gguf")); }, path("m.gguf"),
                      "tensor 'dense1.bias' has 1 non-finite value (first at index 0: -inf)");
        QCOMPARE(loadModelFile(path("m.gguf"), kAllow).weights.at("dense1.bias")[0], -kInf);

        // Finite weights, but a Q8_0 block whose f16 scale is inf: every value of the block dequantizes to inf or
        // NaN. Written as a writer would (checksums over the bytes as they are), so only the values are wrong.
        writeGgufExport(path("q8.gguf"), model(), ExportPrecision::Q8_0);
        const GgufFile q8 = readGguf(path("q8.gguf"));
        QCOMPARE(q8.findTensor("dense1.weight")->type, GgufTensorType::Q8_0);
        GgufFile bad;
        for (const auto& [key, value] : q8.metadata()) bad.setValue(key, value);
        for (GgufTensor t : q8.tensors()) {
            if (t.name == "dense1.weight") {
                const uint16_t infHalf = 0x7C00;
                std::memcpy(t.data.data() + 34, &infHalf, 2);  // the second block's scale
            }
            bad.addRawTensor(t);
        }
        setGgufChecksums(bad);
        writeGguf(path("q8-inf.gguf"), bad);
        expectRefused([&] { loadModelFile(path("q8-inf.gguf")); }, path("q8-inf.gguf"),
                      "tensor 'dense1.weight' has 32 non-finite values (first at index 32: ");
        const ExportModel loaded = loadModelFile(path("q8-inf.gguf"), kAllow);
        QVERIFY(!std::isfinite(loaded.weights.at("dense1.weight")[32]));
        QVERIFY(std::isfinite(loaded.weights.at("dense1.weight")[31]));
    }

    void onnxInitializer() {
        ExportModel m = model();
        m.weights.at("dense1.bias")[7] = kNan;
        writeOnnx(path("m.onnx"), m);
        expectRefused([&] { loadModelFile(path("m.onnx")); }, path("m.onnx"),
                      "tensor 'dense1.bias' has 1 non-finite value (first at index 7: nan)");
        QVERIFY(std::isnan(loadModelFile(path("m.onnx"), kAllow).weights.at("dense1.bias")[7]));
        if (onnxRunnerAvailable()) {
            // What runs the graph itself checks every float initializer too.
            expectRefused([&] { OnnxRunner r(path("m.onnx")); }, path("m.onnx"), "tensor 'dense1.bias'");
            OnnxRunner allowed(path("m.onnx"), kAllow);
            QCOMPARE(allowed.inputSize(), int64_t(32));
        }
        expectRefused([&] { Predictor p(path("m.onnx")); }, path("m.onnx"), "tensor 'dense1.bias'");

        // The predict command: refused naming the tensor and the flag; with the flag it runs.
        std::ofstream csv(path("rows.csv"));
        for (int j = 0; j < 32; ++j) csv << (j ? "," : "") << "f" << j;
        csv << "\n";
        for (int j = 0; j < 32; ++j) csv << (j ? "," : "") << 0.1 * j;
        csv << "\n";
        csv.close();
        std::ostringstream out, err;
        QCOMPARE(runPredictCommand({path("m.onnx"), path("rows.csv")}, out, err), 1);
        QVERIFY2(contains(err.str(),
                          "tensor 'dense1.bias' has 1 non-finite value (first at index 7: nan); pass "
                          "--allow-non-finite to load it anyway"),
                 err.str().c_str());
        QCOMPARE(runPredictCommand({path("m.onnx"), path("rows.csv"), "--allow-non-finite"}, out, err), 0);
        QVERIFY2(contains(out.str(), "1 sample(s)"), out.str().c_str());
    }

    // Checkpoints refuse a normalization std of 0 or NaN; a GGUF or safetensors export's loaded (and divided by it).
    void exportNormalizationChecked() {
        ExportModel m = model();
        m.normalization.mode = "standardize";
        m.normalization.mean = 0.5f;
        m.normalization.std = 0.25f;
        writeGgufExport(path("n.gguf"), m, ExportPrecision::F32);
        QCOMPARE(loadModelFile(path("n.gguf")).normalization.std, 0.25f);
        for (float std : {0.f, kNan, kInf, -1.f}) {
            GgufFile g = readGguf(path("n.gguf"));
            g.setFloat32("strata.normalization.std", std);
            writeGguf(path("n-bad.gguf"), g);
            expectRefused([&] { loadModelFile(path("n-bad.gguf")); }, path("n-bad.gguf"), "normalization std ");
        }
        // The writers refuse it too, rather than write a file that cannot be loaded back.
        m.normalization.std = 0;
        try {
            writeSafetensorsExport(path("n.safetensors"), m, ExportPrecision::F32);
            QFAIL("wrote a normalization std of 0");
        } catch (const std::runtime_error& e) {
            QVERIFY2(contains(e.what(), "normalization std 0"), e.what());
        }
        // A safetensors export edited to std 0.
        m.normalization.std = 0.25f;
        writeSafetensorsExport(path("n.safetensors"), m, ExportPrecision::F32);
        SafetensorsContents s = readSafetensors(path("n.safetensors"));
        s.metadata["strata.normalization"] = R"({"mode":"standardize","scale":1,"mean":0.5,"std":0})";
        writeSafetensors(path("n-bad.safetensors"), s.tensors, s.metadata);
        expectRefused([&] { loadModelFile(path("n-bad.safetensors")); }, path("n-bad.safetensors"),
                      "normalization std 0");
    }
};

QTEST_GUILESS_MAIN(TestNonFiniteWeights)
#include "test_non_finite_weights.moc"
