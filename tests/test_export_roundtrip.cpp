// Every export format and precision the exporter declares (exportFormats x exportPrecisions), written from one
// model and read back twice: by Strata's own loader, whose outputs must match the live model's within the
// format's tolerance (checkExport), and by a reference reader in the test venv (llama.cpp's gguf package, numpy
// on the safetensors layout, onnxruntime), which must read the same values. Issue 34: a Q4_0 file written by
// Strata could not be read back by Strata, and no test caught it. A format or precision added without a case here
// fails the walk.
#include <QtTest>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

#include "core/backend/BackendRegistry.h"
#include "core/data/Dataset.h"
#include "core/export/ExportModel.h"
#include "core/export/Gguf.h"
#include "core/graph/Model.h"
#include "core/infer/Evaluation.h"
#include "core/infer/ExportCheck.h"
#include "core/io/Safetensors.h"
#include "tests/support/OnnxRuntime.h"
#include "tests/support/TestBackends.h"
#include "tests/support/TestProjects.h"

using namespace strata;

namespace {

std::vector<float> readFloats(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
    std::vector<float> out(bytes.size() / sizeof(float));
    if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
    return out;
}

double maxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return INFINITY;
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::fabs(a[i] - b[i])));
    return worst;
}

std::string caseName(ExportFormat f, ExportPrecision p) {
    return std::string(exportFormatName(f)) + " " + exportPrecisionName(p);
}

}  // namespace

class TestExportRoundTrip : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;
    std::string path(const std::string& name) const { return (m_dir.path() + "/").toStdString() + name; }

private slots:
    void everyFormatAndPrecisionReadsBack() {
        // Input [2048] -> Dense 32 -> ReLU -> Dense 4: dense1.weight [32, 2048] has 65536 values, more than a Q4_0
        // file has bytes (the size guard of issue 34), and both weights have rows of a multiple of 32, so every
        // block type quantizes them (no F16 fallback).
        const Project project = test::blobsMlpProject("roundtrip", 2048, 4);
        const ExportModel model = untrainedExportModel(project, "");
        const DatasetBundle data = loadDataset(project.dataset, "");
        const Normalization norm = data.normalization;
        constexpr int64_t kSamples = 64;

        // The largest output difference from the live model, relative to its largest output, each format and
        // precision may show: exact formats bit for bit (a float tolerance for summation order), the others their
        // rounding. A supported pair missing here fails below.
        const std::map<std::pair<ExportFormat, ExportPrecision>, double> tolerance{
            {{ExportFormat::Onnx, ExportPrecision::F32}, 1e-5},
            {{ExportFormat::Onnx, ExportPrecision::Int8}, 0.06},
            {{ExportFormat::Gguf, ExportPrecision::F32}, 1e-6},
            {{ExportFormat::Gguf, ExportPrecision::F16}, 3e-3},
            {{ExportFormat::Gguf, ExportPrecision::Q8_0}, 2e-2},
            {{ExportFormat::Gguf, ExportPrecision::Q4_0}, 0.2},
            {{ExportFormat::Safetensors, ExportPrecision::F32}, 1e-6},
            {{ExportFormat::Safetensors, ExportPrecision::F16}, 3e-3},
        };

        // The live model's outputs on the raw (here unnormalized) inputs the reference runtime gets.
        auto backend = backendRegistry().create(Device::cpu());
        auto live = compileExportModel(model, *backend);
        const std::vector<float> inputs(data.validation.inputs.begin(),
                                        data.validation.inputs.begin() + kSamples * 2048);
        const std::vector<float> liveOutputs = predictSamples(*live, inputs.data(), kSamples).outputs;
        double liveScale = 0;
        for (float v : liveOutputs) liveScale = std::max(liveScale, double(std::fabs(v)));
        QVERIFY(liveScale > 0);

        test::OnnxRuntimeBatch ort;
        std::vector<std::pair<size_t, double>> ortRuns;  // run index, tolerance
        std::set<GgufTensorType> ggufTypesWritten;
        int cases = 0;
        for (ExportFormat format : exportFormats())
            for (ExportPrecision precision : exportPrecisions()) {
                if (!exportFormatSupports(format, precision)) continue;
                const std::string name = caseName(format, precision);
                auto tol = tolerance.find({format, precision});
                if (tol == tolerance.end())
                    QFAIL(("no round-trip case for " + name + ": add its tolerance and reference reader").c_str());
                ++cases;
                const std::string file = path("m-" + std::to_string(cases) + exportFormatExtension(format));
                ExportRequest request;
                request.format = format;
                request.precision = precision;
                const ExportWriteResult written = writeExport(file, model, request, &data.train);

                // Strata's reader, and the outputs of what it read.
                ExportCheckResult check;
                try {
                    check = checkExport(model, file, data.validation, norm, kSamples);
                } catch (const std::exception& e) {
                    QFAIL((name + ": Strata cannot read its own file back: " + e.what()).c_str());
                }
                const double relative = check.maxAbsDiff / std::max(check.maxAbsOutput, 1e-12);
                qInfo("%s: %llu bytes, outputs within %.3g of the live model's (relative), %s", name.c_str(),
                      static_cast<unsigned long long>(written.summary.bytes), relative, check.runtime.c_str());
                QVERIFY2(relative <= tol->second, qPrintable(QString("%1: relative output difference %2 > %3")
                                                                 .arg(QString::fromStdString(name))
                                                                 .arg(relative)
                                                                 .arg(tol->second)));
                // Quantized formats do change the outputs: the case tests what it names.
                if (tol->second > 1e-5) QVERIFY2(relative > 0, name.c_str());

                // The reference reader.
                const std::string out = file + "-ref";
                std::string listing;
                switch (format) {
                    case ExportFormat::Gguf: {
                        const std::string err = test::runTestPython(
                            {test::sourcePath("tools/gguf_quants.py"), "dequantize", file, out}, &listing);
                        QVERIFY2(err.empty(), (name + ": " + err).c_str());
                        const GgufFile g = readGguf(file);
                        for (const GgufTensor& t : g.tensors()) {
                            ggufTypesWritten.insert(t.type);
                            const std::string line =
                                t.name + " " + ggufTensorTypeName(t.type) + " " + std::to_string(t.shape.numel());
                            QVERIFY2(listing.find(line) != std::string::npos, (name + ": " + listing).c_str());
                            QVERIFY2(readFloats(out + "/" + t.name + ".f32") == g.tensorFloats(t.name),
                                     (name + ": " + t.name).c_str());
                        }
                        if (precision == ExportPrecision::Q4_0 || precision == ExportPrecision::Q8_0)
                            QCOMPARE(g.findTensor("dense1.weight")->type,
                                     precision == ExportPrecision::Q4_0 ? GgufTensorType::Q4_0 : GgufTensorType::Q8_0);
                        break;
                    }
                    case ExportFormat::Safetensors: {
                        const std::string err =
                            test::runTestPython({test::sourcePath("tools/safetensors_numpy.py"), file, out}, &listing);
                        QVERIFY2(err.empty(), (name + ": " + err).c_str());
                        const SafetensorsContents s = readSafetensors(file);
                        QCOMPARE(s.tensors.size(), model.weights.size());
                        for (const TensorRecord& t : s.tensors) {
                            QVERIFY2(listing.find(t.name + " " + safetensorsDTypeName(t.dtype)) != std::string::npos,
                                     (name + ": " + listing).c_str());
                            QVERIFY2(readFloats(out + "/" + t.name + ".f32") == recordToFloats(t),
                                     (name + ": " + t.name).c_str());
                        }
                        break;
                    }
                    case ExportFormat::Onnx:
                        ortRuns.emplace_back(ort.add(file, inputs, {kSamples, 2048}), tol->second);
                        break;
                }
            }
        QCOMPARE(cases, int(tolerance.size()));
        // Every GGUF tensor type the reader knows was written by some precision and read back by both readers.
        for (GgufTensorType t : ggufTensorTypes()) QVERIFY2(ggufTypesWritten.count(t), ggufTensorTypeName(t));

        const std::string err = ort.run();
        QVERIFY2(err.empty(), err.c_str());
        for (const auto& [run, tol] : ortRuns) {
            const double relative = maxAbsDiff(ort.output(run), liveOutputs) / liveScale;
            qInfo("%s in onnxruntime: outputs within %.3g of the live model's (relative)", ort.model(run).c_str(),
                  relative);
            QVERIFY2(relative <= tol, ort.model(run).c_str());
        }
    }
};

QTEST_GUILESS_MAIN(TestExportRoundTrip)
#include "test_export_roundtrip.moc"
