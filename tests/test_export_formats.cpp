// GGUF and safetensors model exports: bit-exact F32 round trips through the
// loaders, F16 and Q8_0 error bounds on the weights and on the outputs of the
// reloaded model, corrupt files, and the `export` / `predict` commands end to end.
#include <QtTest>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include <zlib.h>

#include "app/CliCommands.h"
#include "core/data/ImageFile.h"
#include "core/data/SubwordTokenizer.h"
#include "core/export/ExportModel.h"
#include "core/export/Gguf.h"
#include "core/export/Onnx.h"
#include "core/graph/Model.h"
#include "core/io/Half.h"
#include "core/io/Safetensors.h"
#include "core/train/Checkpoint.h"
#include "tests/support/TestBackends.h"
#include "tests/support/TestFiles.h"
#include "tests/support/TestProjects.h"

using namespace strata;
using test::readBytes;
using test::writeBytes;

namespace {

// Input [1, 8, 8] -> Conv 32 -> ReLU -> Flatten -> Dense 32 -> BatchNorm -> Dense 10.
Project smallCnn() {
    Project p;
    p.name = "small_cnn";
    test::addChain(p.graph, {{"Input", "image", {{"shape", {1, 8, 8}}}},
                             {"Conv2D", "conv", {{"filters", 32}, {"kernel", {3, 3}}, {"padding", {1, 1}}}},
                             {"ReLU", "relu"},
                             {"Flatten", "flat"},
                             {"Dense", "fc1", {{"units", 32}}},
                             {"BatchNorm", "bn"},
                             {"Dense", "fc2", {{"units", 10}}}});
    p.dataset.kind = DatasetKind::Synthetic;
    p.dataset.syntheticShape = {1, 8, 8};
    p.dataset.syntheticClasses = 10;
    p.dataset.normalization = NormalizationMode::None;
    return p;
}

ExportModel randomExport(const Project& project, unsigned seed) {
    auto backend = test::makeReferenceBackend();
    auto model = compile(project.graph, *backend, seed);
    ExportModel m;
    m.project = project;
    m.weights = modelWeights(*model);
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.f, 0.1f);
    for (auto& [name, values] : m.weights) {
        const bool var = name.find("running_var") != std::string::npos;
        for (float& v : values) v = var ? 0.5f + std::fabs(nd(rng)) : nd(rng);
    }
    m.normalization.mode = "scale";
    m.normalization.scale = 1.f / 255.f;
    for (int k = 0; k < 10; ++k) m.classNames.push_back("class_" + std::string(1, char('A' + k)));
    return m;
}

std::vector<float> runModel(const ExportModel& m, const std::vector<float>& input, int64_t batch) {
    auto backend = test::makeReferenceBackend();
    auto model = compile(m.project.graph, *backend, 0);
    applyWeights(*model, m.weights);
    const Tensor x = backend->fromHost(model->inputShape().withBatch(batch), input.data());
    const Tensor& y = model->forward(x, false);
    std::vector<float> out(static_cast<size_t>(y.numel()));
    backend->toHost(y, out.data());
    return out;
}

double maxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::fabs(a[i] - b[i])));
    return worst;
}

// Raw IDX images (u8, big-endian header): count x 8 x 8.
void writeIdx(const std::string& path, const std::vector<uint8_t>& pixels, int count) {
    const uint8_t header[16] = {0, 0, 0x08, 3, 0, 0, 0, static_cast<uint8_t>(count), 0, 0, 0, 8, 0, 0, 0, 8};
    // Reserved first: GCC 12 warns (-Warray-bounds, a false positive) on growing a 16-byte vector here.
    std::vector<uint8_t> b;
    b.reserve(sizeof header + pixels.size());
    b.insert(b.end(), header, header + sizeof header);
    b.insert(b.end(), pixels.begin(), pixels.end());
    writeBytes(path, b);
}

}  // namespace

class TestExportFormats : public QObject {
    Q_OBJECT

private:
    QTemporaryDir m_dir;
    std::string path(const std::string& name) const { return (m_dir.path() + "/").toStdString() + name; }

private slots:
    void safetensorsRoundTripBitExact() {
        const ExportModel m = randomExport(smallCnn(), 1);
        writeSafetensorsExport(path("m.safetensors"), m, ExportPrecision::F32);
        const SafetensorsContents raw = readSafetensors(path("m.safetensors"));
        QCOMPARE(raw.find("conv.weight")->shape, (Shape{32, 1, 3, 3}));  // real shapes, not flat
        QCOMPARE(raw.find("fc1.weight")->shape, (Shape{32, 2048}));
        QVERIFY(raw.metadata.count("strata.project"));
        const ExportModel back = loadModelFile(path("m.safetensors"));
        QVERIFY(back.weights == m.weights);
        QCOMPARE(back.classNames, m.classNames);
        QCOMPARE(back.normalization, m.normalization);
        QCOMPARE(back.project, m.project);
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 writeSafetensorsExport(path("q.safetensors"), m, ExportPrecision::Q8_0));
    }

    void safetensorsF16() {
        const ExportModel m = randomExport(smallCnn(), 2);
        writeSafetensorsExport(path("h.safetensors"), m, ExportPrecision::F16);
        const SafetensorsContents raw = readSafetensors(path("h.safetensors"));
        QCOMPARE(raw.find("fc1.weight")->dtype, DType::F16);
        QCOMPARE(raw.find("fc1.bias")->dtype, DType::F32);  // 1-D tensors stay F32
        const ExportModel back = loadModelFile(path("h.safetensors"));
        for (const auto& [name, values] : m.weights)
            for (size_t i = 0; i < values.size(); ++i)
                QVERIFY(std::fabs(back.weights.at(name)[i] - values[i]) <= std::fabs(values[i]) / 2048 + 3e-8);
    }

    void ggufRoundTripBitExact() {
        const ExportModel m = randomExport(smallCnn(), 3);
        writeGgufExport(path("m.gguf"), m, ExportPrecision::F32);
        const GgufFile g = readGguf(path("m.gguf"));
        QCOMPARE(g.getString("general.architecture"), std::string("strata"));
        QCOMPARE(g.getString("general.name"), std::string("small_cnn"));
        QCOMPARE(g.getUInt32("general.alignment"), 32u);
        QCOMPARE(g.getStringArray("strata.class_labels"), m.classNames);
        QCOMPARE(g.getString("strata.normalization.mode"), std::string("scale"));
        QCOMPARE(g.getFloat32("strata.normalization.scale"), 1.f / 255.f);
        QCOMPARE(parseProject(g.getString("strata.project")), m.project);
        const ExportModel back = loadModelFile(path("m.gguf"));
        QVERIFY(back.weights == m.weights);
        QCOMPARE(back.project, m.project);
    }

    void ggufQuantizedModelsStillRun() {
        const ExportModel m = randomExport(smallCnn(), 4);
        std::mt19937 rng(5);
        std::uniform_real_distribution<float> u(0.f, 1.f);
        std::vector<float> input(4 * 64);
        for (float& v : input) v = u(rng);
        const std::vector<float> reference = runModel(m, input, 4);

        const ExportSummary q8 = writeGgufExport(path("q8.gguf"), m, ExportPrecision::Q8_0);
        const GgufFile g = readGguf(path("q8.gguf"));
        QCOMPARE(g.findTensor("fc1.weight")->type, GgufTensorType::Q8_0);  // inner 2048: blocks of 32
        QCOMPARE(g.findTensor("fc2.weight")->type, GgufTensorType::Q8_0);  // inner 32
        QCOMPARE(g.findTensor("conv.weight")->type, GgufTensorType::F16);  // inner 3: F16 fallback
        QCOMPARE(g.findTensor("bn.running_var")->type, GgufTensorType::F32);
        QCOMPARE(q8.tensors.size(), m.weights.size());
        const ExportModel back = loadModelFile(path("q8.gguf"));
        // Q8_0 weight error: at most half a step of the block scale (plus the f16 rounding of the scale).
        const std::vector<float>& w = m.weights.at("fc1.weight");
        const std::vector<float>& wq = back.weights.at("fc1.weight");
        for (size_t b = 0; b < w.size() / 32; ++b) {
            float amax = 0;
            for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(w[b * 32 + j]));
            for (int j = 0; j < 32; ++j)
                QVERIFY(std::fabs(wq[b * 32 + j] - w[b * 32 + j]) <= 0.5f * amax / 127.f * 1.001f + amax / 1024);
        }
        const double q8Diff = maxAbsDiff(runModel(back, input, 4), reference);

        writeGgufExport(path("f16.gguf"), m, ExportPrecision::F16);
        const double f16Diff = maxAbsDiff(runModel(loadModelFile(path("f16.gguf")), input, 4), reference);
        qInfo("output max abs difference vs F32: f16 %.3g, q8_0 %.3g", f16Diff, q8Diff);
        QVERIFY(f16Diff > 0 && f16Diff < 2e-3);
        QVERIFY(q8Diff > f16Diff && q8Diff < 2e-2);
        QVERIFY(std::filesystem::file_size(path("q8.gguf")) < std::filesystem::file_size(path("f16.gguf")));
    }

    void corruptExportsGiveFormatErrors() {
        const ExportModel m = randomExport(smallCnn(), 6);
        writeGgufExport(path("c.gguf"), m, ExportPrecision::F32);
        writeSafetensorsExport(path("c.safetensors"), m, ExportPrecision::F32);
        for (const std::string name : {"c.gguf", "c.safetensors"}) {
            auto b = readBytes(path(name));
            b.resize(b.size() / 2);
            writeBytes(path("trunc_" + name), b);
            try {
                loadModelFile(path("trunc_" + name));
                QFAIL("truncated file accepted");
            } catch (const FormatError& e) {
                QVERIFY2(std::string(e.what()).find("trunc_" + name) != std::string::npos, e.what());
            }
        }
        // A valid safetensors file whose tensor does not fit the graph.
        SafetensorsContents s = readSafetensors(path("c.safetensors"));
        std::vector<TensorRecord> tensors = s.tensors;
        tensors[0] = makeF32Record(tensors[0].name, Shape{3}, {1, 2, 3});
        writeSafetensors(path("wrong.safetensors"), tensors, s.metadata);
        QVERIFY_THROWS_EXCEPTION(FormatError, loadModelFile(path("wrong.safetensors")));
        // A plain safetensors file without Strata metadata.
        writeSafetensors(path("plain.safetensors"), {makeF32Record("w", Shape{1}, {1})}, {});
        QVERIFY_THROWS_EXCEPTION(FormatError, loadModelFile(path("plain.safetensors")));
    }

    void exportAndPredictCommands() {
        // A checkpoint as the trainer writes it.
        const ExportModel m = randomExport(smallCnn(), 7);
        Checkpoint ck;
        ck.project = m.project;
        ck.weights = m.weights;
        ck.normalization = m.normalization;
        ck.classNames = m.classNames;
        ck.epoch = 1;
        saveCheckpoint(ck, path("ckpt/best.safetensors"));

        std::mt19937 rng(8);
        std::uniform_int_distribution<int> px(0, 255);
        std::vector<uint8_t> pixels(3 * 64);
        for (uint8_t& p : pixels) p = static_cast<uint8_t>(px(rng));
        writeIdx(path("images.idx"), pixels, 3);

        // Expected probabilities of the first image, computed directly.
        std::vector<float> x(pixels.begin(), pixels.begin() + 64);
        for (float& v : x) v = v / 255.f;
        const std::vector<float> logits = runModel(m, x, 1);
        std::vector<double> p(10);
        double mx = *std::max_element(logits.begin(), logits.end()), sum = 0;
        for (size_t k = 0; k < 10; ++k) sum += p[k] = std::exp(logits[k] - mx);
        const size_t best = static_cast<size_t>(std::max_element(p.begin(), p.end()) - p.begin());
        char expected[64];
        std::snprintf(expected, sizeof expected, "sample 0: %s %.4f", m.classNames[best].c_str(), p[best] / sum);

        for (const std::string format : {"gguf", "safetensors", "onnx"}) {
            std::ostringstream out, err;
            const std::string file = path("cli." + format);
            const int rc = runExportCommand({path("ckpt"), "--format", format, "-o", file}, out, err);
            QVERIFY2(rc == 0, err.str().c_str());
            QVERIFY(out.str().find("wrote " + file) != std::string::npos);
            std::ostringstream pout, perr;
            const int prc = runPredictCommand({file, path("images.idx"), "--top", "2"}, pout, perr);
            QVERIFY2(prc == 0, perr.str().c_str());
            QVERIFY2(pout.str().find(expected) != std::string::npos, (pout.str() + " lacks " + expected).c_str());
            QVERIFY(pout.str().find("sample 2:") != std::string::npos);
        }
        // The checkpoint folder itself is a model file for predict.
        std::ostringstream pout, perr;
        QCOMPARE(runPredictCommand({path("ckpt"), path("images.idx"), "--count", "1"}, pout, perr), 0);
        QVERIFY(pout.str().find(expected) != std::string::npos);
        QVERIFY(pout.str().find("sample 1:") == std::string::npos);

        // q8_0 through the CLI.
        std::ostringstream out, err;
        QCOMPARE(runExportCommand({path("ckpt/best.safetensors"), "--format", "gguf", "--quantize", "q8_0", "-o",
                                   path("cli_q8.gguf")},
                                  out, err),
                 0);
        QVERIFY(out.str().find("fc1.weight [32, 2048] Q8_0") != std::string::npos);
        // The conv kernel's rows of 3 cannot form Q8_0 blocks: said in a line of its own.
        QVERIFY2(out.str().find("note: conv.weight [32, 1, 3, 3] stored as F16, not Q8_0: its innermost dimension 3 "
                                "is not a multiple of 32") != std::string::npos,
                 out.str().c_str());
        QVERIFY(out.str().find("note: 1 tensor(s) fell back from Q8_0 to F16") != std::string::npos);
    }

    // More samples than one forward batch (256), gzipped IDX images with an IDX label file: the accuracy line
    // counts exactly the samples whose label is the argmax.
    void predictAccuracyOverBatches() {
        const ExportModel m = randomExport(smallCnn(), 17);
        writeGgufExport(path("acc.gguf"), m, ExportPrecision::F32);
        const int count = 600;
        std::mt19937 rng(18);
        std::uniform_int_distribution<int> px(0, 255);
        std::vector<uint8_t> pixels(static_cast<size_t>(count) * 64);
        for (uint8_t& p : pixels) p = static_cast<uint8_t>(px(rng));
        auto be32 = [](std::vector<uint8_t>& b, uint32_t v) {
            for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(v >> s));
        };
        std::vector<uint8_t> images{0, 0, 0x08, 3};
        be32(images, count);
        be32(images, 8);
        be32(images, 8);
        images.insert(images.end(), pixels.begin(), pixels.end());
        gzFile gz = gzopen(path("acc-images.gz").c_str(), "wb");
        QVERIFY(gz);
        QCOMPARE(gzwrite(gz, images.data(), static_cast<unsigned>(images.size())), int(images.size()));
        gzclose(gz);

        std::vector<float> x(pixels.begin(), pixels.end());
        for (float& v : x) v /= 255.f;
        const std::vector<float> logits = runModel(m, x, count);
        std::vector<uint8_t> labels{0, 0, 0x08, 1};
        be32(labels, count);
        int correct = 0;
        for (int i = 0; i < count; ++i) {
            const float* row = logits.data() + i * 10;
            const int best = static_cast<int>(std::max_element(row, row + 10) - row);
            const bool right = i % 3 != 0;  // two thirds labelled with the model's own answer
            labels.push_back(static_cast<uint8_t>(right ? best : (best + 1) % 10));
            correct += right;
        }
        writeBytes(path("acc-labels"), labels);
        std::ostringstream out, err;
        QVERIFY2(runPredictCommand({path("acc.gguf"), path("acc-images.gz"), "--labels", path("acc-labels"), "--count",
                                    "100000", "--quiet"},
                                   out, err) == 0,
                 err.str().c_str());
        char expected[80];
        std::snprintf(expected, sizeof expected, "accuracy %.2f%% on %d samples (%d correct)", 100.0 * correct / count,
                      count, correct);
        QVERIFY2(out.str().find(expected) != std::string::npos, (out.str() + " lacks " + expected).c_str());
        QVERIFY2(out.str().find("sample 0") == std::string::npos, "--quiet prints only the summary");
        // Labels from the same file, per sample, without --quiet.
        std::ostringstream out2, err2;
        QCOMPARE(runPredictCommand(
                     {path("acc.gguf"), path("acc-images.gz"), "--labels", path("acc-labels"), "--count", "300"}, out2,
                     err2),
                 0);
        QVERIFY(out2.str().find("sample 299 (label ") != std::string::npos);
        QVERIFY(out2.str().find("on 300 samples") != std::string::npos);
        // Too few labels.
        labels.resize(8 + 100);
        labels[7] = 100;
        labels[6] = 0;
        writeBytes(path("few-labels"), labels);
        std::ostringstream out3, err3;
        QCOMPARE(runPredictCommand(
                     {path("acc.gguf"), path("acc-images.gz"), "--labels", path("few-labels"), "--count", "300"}, out3,
                     err3),
                 1);
        QVERIFY2(err3.str().find("100 labels for 300 samples") != std::string::npos, err3.str().c_str());
    }

    void predictReadsNetpbm() {
        const ExportModel m = randomExport(smallCnn(), 9);
        writeGgufExport(path("p.gguf"), m, ExportPrecision::F32);
        std::string pgm = "P5\n# a comment\n8 8\n255\n";
        for (int i = 0; i < 64; ++i) pgm.push_back(static_cast<char>(i * 4));
        std::ofstream(path("img.pgm"), std::ios::binary) << pgm;
        std::string ascii = "P2 8 8 255\n";
        for (int i = 0; i < 64; ++i) ascii += std::to_string(i * 4) + " ";
        std::ofstream(path("img_ascii.pgm")) << ascii;
        std::string ppm = "P6 8 8 255\n";  // gray pixels as RGB: the same input after averaging
        for (int i = 0; i < 64; ++i) ppm += std::string(3, static_cast<char>(i * 4));
        std::ofstream(path("img.ppm"), std::ios::binary) << ppm;

        const data::Image a = data::readNetpbm(path("img.pgm"));
        QCOMPARE((std::vector<int64_t>{a.channels, a.height, a.width}), (std::vector<int64_t>{1, 8, 8}));
        QCOMPARE(a.values[63], 252.f);
        QVERIFY(data::readNetpbm(path("img_ascii.pgm")).values == a.values);
        const data::Image c = data::readNetpbm(path("img.ppm"));
        QCOMPARE((std::vector<int64_t>{c.channels, c.height, c.width}), (std::vector<int64_t>{3, 8, 8}));
        QCOMPARE(c.values[64 + 5], 20.f);  // planar: the green plane starts at 64

        std::string outputs[3];
        int k = 0;
        for (const char* img : {"img.pgm", "img_ascii.pgm", "img.ppm"}) {
            std::ostringstream out, err;
            QVERIFY2(runPredictCommand({path("p.gguf"), path(img)}, out, err) == 0, err.str().c_str());
            outputs[k++] = out.str().substr(out.str().find("sample 0"));
        }
        QCOMPARE(outputs[1], outputs[0]);
        QCOMPARE(outputs[2], outputs[0]);

        std::ofstream(path("bad.pgm"), std::ios::binary) << "P5 8 8 255\n" << std::string(10, 'x');
        QVERIFY_THROWS_EXCEPTION(FormatError, data::readNetpbm(path("bad.pgm")));
        std::ofstream(path("bad2.pgm")) << "P7 1 1 255\n";
        QVERIFY_THROWS_EXCEPTION(FormatError, data::readNetpbm(path("bad2.pgm")));
        std::ofstream(path("small.pgm"), std::ios::binary) << "P5 2 2 255\n" << std::string(4, 'x');
        // Another size is resized, as the Predict dock does, and said in a line of its own.
        std::ostringstream out, err;
        QVERIFY2(runPredictCommand({path("p.gguf"), path("small.pgm")}, out, err) == 0, err.str().c_str());
        QVERIFY2(out.str().find("resized the image from 2x2 to 8x8") != std::string::npos, out.str().c_str());
    }

    void predictReadsCsv() {
        Project p;
        p.name = "tabular";
        const int in = p.graph.addNode("Input", "features", {{"shape", {3}}});
        const int d = p.graph.addNode("Dense", "fc", {{"units", 2}});
        p.graph.connect(in, d);
        p.dataset.kind = DatasetKind::Csv;
        p.dataset.labelColumn = "species";
        ExportModel m;
        m.project = p;
        m.weights["fc.weight"] = {1, 0, 0, 0, 1, 0};  // logits = first two features
        m.weights["fc.bias"] = {0, 0};
        m.classNames = {"setosa", "virginica"};
        writeSafetensorsExport(path("tab.safetensors"), m, ExportPrecision::F32);
        std::ofstream(path("rows.csv")) << "a,species,b,c\n2,virginica,0,5\n0,setosa,3,1\n";
        std::ostringstream out, err;
        QVERIFY2(runPredictCommand({path("tab.safetensors"), path("rows.csv"), "--top", "1"}, out, err) == 0,
                 err.str().c_str());
        // Row 1: logits (2, 0) -> setosa 0.8808; row 2: (0, 3) -> virginica 0.9526.
        QVERIFY2(out.str().find("sample 0 (label virginica): setosa 0.8808") != std::string::npos, out.str().c_str());
        QVERIFY2(out.str().find("sample 1 (label setosa): virginica 0.9526") != std::string::npos, out.str().c_str());
    }

    // Typed text through a text model (predict --text / --text-file), from its safetensors and its GGUF file: the
    // tokenizer and vocabulary travel in the file. Padding is masked, so an empty text scores the bias alone; bad
    // input (a 1 MB line, Latin-1 bytes, a NUL byte, a non-text model) is cut, decoded or refused, never a crash.
    void predictTypedText() {
        const ExportModel m = test::sentimentTextModel();
        writeSafetensorsExport(path("text.safetensors"), m, ExportPrecision::F32);
        writeGgufExport(path("text.gguf"), m, ExportPrecision::F32);
        // The tokenizer in llama.cpp's keys.
        const GgufFile gguf = readGguf(path("text.gguf"));
        QCOMPARE(gguf.getString("tokenizer.ggml.model"), std::string("strata-word"));
        QCOMPARE(gguf.getStringArray("tokenizer.ggml.tokens"), m.vocabulary);
        QCOMPARE(gguf.getUInt32("tokenizer.ggml.padding_token_id"), 0u);
        QCOMPARE(gguf.getUInt32("tokenizer.ggml.unknown_token_id"), 1u);
        QVERIFY(!gguf.find("strata.vocabulary"));
        for (const std::string& file : {path("text.safetensors"), path("text.gguf")}) {
            std::ostringstream out, err;
            QVERIFY2(runPredictCommand(
                         {file, "--text", "Good!", "--text", "bad, BAD; unknownword", "--text", "", "--top", "1"}, out,
                         err) == 0,
                     err.str().c_str());
            // good -> (1, 0): pos 0.7311; [bad, bad, <unk>] -> mean (0, 2/3): neg 0.6608; empty -> (0, 0): 0.5.
            const std::string o = out.str();
            QVERIFY2(o.find("sample 0: pos 0.7311") != std::string::npos, o.c_str());
            QVERIFY2(o.find("sample 1: neg 0.6608") != std::string::npos, o.c_str());
            QVERIFY2(o.find("sample 2: pos 0.5000") != std::string::npos, o.c_str());
        }
        // A file: one sample a line (CRLF too); a 1 MB line keeps its first max_tokens words; Latin-1 bytes decode
        // as U+FFFD and split the word ("caf\xe9" -> "caf", unknown).
        std::string big;
        for (int i = 0; i < 200000; ++i) big += "fine ";
        std::ofstream(path("lines.txt"), std::ios::binary) << "bad\r\n" << big << "\ncaf\xe9 good\n";
        std::ostringstream out, err;
        QVERIFY2(runPredictCommand({path("text.gguf"), "--text-file", path("lines.txt"), "--top", "1"}, out, err) == 0,
                 err.str().c_str());
        QVERIFY2(out.str().find("3 sample(s)") != std::string::npos, out.str().c_str());
        QVERIFY2(out.str().find("sample 0: neg 0.7311") != std::string::npos, out.str().c_str());
        QVERIFY2(out.str().find("sample 1: pos 0.5000") != std::string::npos, out.str().c_str());  // (0.5, 0.5)
        QVERIFY2(out.str().find("sample 2: pos 0.6225") != std::string::npos, out.str().c_str());  // (0.5, 0)
        std::ofstream(path("binary.txt"), std::ios::binary) << "good\nba" << std::string(1, '\0') << "d\n";
        std::ostringstream out2, err2;
        QCOMPARE(runPredictCommand({path("text.gguf"), "--text-file", path("binary.txt")}, out2, err2), 1);
        QVERIFY2(err2.str().find("binary.txt: line 2 holds a NUL byte") != std::string::npos, err2.str().c_str());
        // Not a text model; two inputs at once.
        ExportModel cnn = randomExport(smallCnn(), 3);
        writeSafetensorsExport(path("cnn.safetensors"), cnn, ExportPrecision::F32);
        std::ostringstream out3, err3;
        QCOMPARE(runPredictCommand({path("cnn.safetensors"), "--text", "hello"}, out3, err3), 1);
        QVERIFY2(err3.str().find("does not take text") != std::string::npos, err3.str().c_str());
        QCOMPARE(runPredictCommand({path("text.gguf"), path("lines.txt"), "--text", "x"}, out3, err3), 2);
    }

    // A SentencePiece text model: its model travels in safetensors, GGUF (with llama.cpp's "llama" tokenizer keys:
    // pieces and scores) and ONNX metadata, byte for byte, and `predict --text` gives the same result from each.
    void sentencePieceModelTravelsWithTheExport() {
        std::vector<std::string> texts;
        const char* words[] = {"red", "green", "blue", "apple", "grass", "sky", "ripe", "wet", "clear"};
        for (int i = 0; i < 300; ++i)
            texts.push_back(std::string(words[i % 9]) + " " + words[(i * 4 + 1) % 9] + " " + words[(i * 2 + 5) % 9]);
        const SubwordTokenizer sp = SubwordTokenizer::train(texts, 30);
        Project p;
        p.name = "colours";
        const int in = p.graph.addNode("Input", "tokens", {{"shape", {6}}});
        const int e = p.graph.addNode("Embedding", "embed", {{"vocab", 30}, {"dim", 3}});
        p.graph.connect(in, e);
        const int pool = p.graph.addNode("SequenceMaxPool", "max", {{"masked", true}});
        p.graph.connect({e, "out"}, {pool, "in"});
        p.graph.connect({in, "out"}, {pool, "mask"});
        const int d = p.graph.addNode("Dense", "fc", {{"units", 3}});
        p.graph.connect(pool, d);
        p.dataset.kind = DatasetKind::Text;
        p.dataset.tokenizer = Tokenizer::SentencePiece;
        p.dataset.maxTokens = 6;
        ExportModel m = randomExport(p, 5);
        m.normalization = Normalization{};  // token ids: no scaling
        m.normalization.mode = "none";
        m.vocabulary = sp.vocabulary();
        m.tokenizerModel = sp.serialized();
        m.classNames = {"r", "g", "b"};
        writeSafetensorsExport(path("spm.safetensors"), m, ExportPrecision::F32);
        writeGgufExport(path("spm.gguf"), m, ExportPrecision::F32);
        writeOnnx(path("spm.onnx"), m);
        const GgufFile gguf = readGguf(path("spm.gguf"));
        QCOMPARE(gguf.getString("tokenizer.ggml.model"), std::string("llama"));
        QCOMPARE(gguf.getStringArray("tokenizer.ggml.tokens"), m.vocabulary);
        QCOMPARE(gguf.getFloat32Array("tokenizer.ggml.scores"), sp.scores());
        std::string first;
        for (const std::string file : {"spm.safetensors", "spm.gguf", "spm.onnx"}) {
            QCOMPARE(loadModelFile(path(file)).tokenizerModel, m.tokenizerModel);
            std::ostringstream out, err;
            QVERIFY2(
                runPredictCommand({path(file), "--text", "ripe apple, wet grass", "--runtime", "strata", "--top", "3"},
                                  out, err) == 0,
                err.str().c_str());
            const std::string line = out.str().substr(out.str().find("sample 0:"));
            if (first.empty()) first = line;
            QCOMPARE(line, first);
        }
    }

    // Per-feature statistics must match the input: writers refuse a mismatch, loaders report it as a FormatError.
    void perFeatureStatisticsChecked() {
        Project p;
        p.name = "tabular";
        const int in = p.graph.addNode("Input", "features", {{"shape", {3}}});
        const int d = p.graph.addNode("Dense", "fc", {{"units", 2}});
        p.graph.connect(in, d);
        p.dataset.kind = DatasetKind::Csv;
        ExportModel m;
        m.project = p;
        m.weights["fc.weight"] = {1, 0, 0, 0, 1, 0};
        m.weights["fc.bias"] = {0, 0};
        m.normalization.mode = "standardize";
        m.normalization.featureMean = {10, 20, 30};
        m.normalization.featureStd = {2, 4, 0.5f};
        writeSafetensorsExport(path("pf.safetensors"), m, ExportPrecision::F32);
        writeGgufExport(path("pf.gguf"), m, ExportPrecision::Q8_0);
        QCOMPARE(loadModelFile(path("pf.safetensors")).normalization, m.normalization);
        QCOMPARE(loadModelFile(path("pf.gguf")).normalization, m.normalization);
        std::vector<float> raw{12, 24, 31, 10, 20, 30};
        applyNormalization(raw, m.normalization);
        QCOMPARE(raw, (std::vector<float>{1, 1, 2, 0, 0, 0}));

        ExportModel bad = m;
        bad.normalization.featureStd.pop_back();
        QVERIFY_THROWS_EXCEPTION(std::runtime_error, writeGgufExport(path("bad.gguf"), bad, ExportPrecision::F32));
        bad = m;
        bad.normalization.featureMean.push_back(1);
        bad.normalization.featureStd.push_back(1);
        try {
            writeSafetensorsExport(path("bad.safetensors"), bad, ExportPrecision::F32);
            QFAIL("4 feature statistics for 3 inputs accepted");
        } catch (const std::runtime_error& e) {
            QVERIFY2(std::string(e.what()).find("4 features, the input 'features' takes [3]") != std::string::npos,
                     e.what());
        }
        bad = m;
        bad.normalization.featureStd[1] = 0;
        QVERIFY_THROWS_EXCEPTION(std::runtime_error, writeGgufExport(path("bad.gguf"), bad, ExportPrecision::F32));

        // A file whose statistics do not fit its own graph.
        SafetensorsContents c = readSafetensors(path("pf.safetensors"));
        c.metadata["strata.normalization"] =
            R"({"mode":"standardize","scale":1,"mean":0,"std":1,"feature_mean":[1,2],"feature_std":[1,1]})";
        writeSafetensors(path("lying.safetensors"), c.tensors, c.metadata);
        try {
            loadModelFile(path("lying.safetensors"));
            QFAIL("mismatched statistics loaded");
        } catch (const FormatError& e) {
            QCOMPARE(e.file(), path("lying.safetensors"));
            QVERIFY2(std::string(e.what()).find("2 features") != std::string::npos, e.what());
        }
    }

    void usageErrors() {
        std::ostringstream out, err;
        QCOMPARE(runExportCommand({}, out, err), 2);
        QCOMPARE(runExportCommand({"x", "--format", "tflite", "-o", "y"}, out, err), 2);
        QVERIFY(err.str().find("unknown format 'tflite'") != std::string::npos);
        QCOMPARE(runExportCommand({"x", "--format", "onnx", "--opset", "21", "-o", "y"}, out, err), 2);
        QCOMPARE(runExportCommand({"x", "--format", "safetensors", "--quantize", "q8_0", "-o", "y"}, out, err), 2);
        QCOMPARE(runExportCommand({path("missing"), "--format", "gguf", "-o", path("y.gguf")}, out, err), 1);
        QCOMPARE(runPredictCommand({"only-one"}, out, err), 2);
    }

    void exportUntrainedProject() {
        Project p = smallCnn();
        writeProject(p, path("proj.strata"));
        std::ostringstream out, err;
        QVERIFY2(runExportCommand({path("proj.strata"), "--format", "gguf", "-o", path("u.gguf")}, out, err) == 1,
                 "a project without checkpoints needs --untrained");
        QVERIFY(err.str().find("--untrained") != std::string::npos);
        std::ostringstream out2, err2;
        QVERIFY2(runExportCommand({path("proj.strata"), "--untrained", "--format", "gguf", "-o", path("u.gguf")}, out2,
                                  err2) == 0,
                 err2.str().c_str());
        auto backend = test::makeReferenceBackend();
        auto model = compile(p.graph, *backend, p.training.seed);
        QVERIFY(loadModelFile(path("u.gguf")).weights == modelWeights(*model));
    }
};

QTEST_GUILESS_MAIN(TestExportFormats)
#include "test_export_formats.moc"
