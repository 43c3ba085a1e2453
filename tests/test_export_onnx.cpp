// ONNX export: every layer type alone and in whole networks. Each file must
// (1) read back with the same weights bit for bit, (2) pass the reference
// onnx.checker (tools/check_onnx.py through /usr/bin/python3; skipped when
// python3-onnx is missing) and (3) give the same outputs as Strata when run by
// an independent runtime, OpenCV's DNN module (max abs difference 1e-4), on raw
// inputs: the normalization is inside the exported graph. Also checkExport and
// `predict` on ONNX files, which run the graph in OpenCV through OnnxRunner.
#include <QProcess>
#include <QtTest>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "app/CliCommands.h"
#include "core/backend/Backend.h"
#include "core/data/Dataset.h"
#include "core/export/ExportModel.h"
#include "core/export/Onnx.h"
#include "core/export/OnnxLayers.h"
#include "core/graph/Model.h"
#include "core/infer/ExportCheck.h"
#include "core/infer/OnnxRunner.h"
#include "core/layers/LayerRegistry.h"
#include "tests/support/OnnxRuntime.h"
#include "tests/support/TestBackends.h"

#ifdef STRATA_HAVE_OPENCV_DNN
#include <opencv2/core/utils/logger.hpp>
#include <opencv2/dnn.hpp>
#endif

using namespace strata;

namespace {

struct Case {
    std::string name;
    Project project;
    Normalization norm;
    bool ids = false;  // the input holds token ids (0..vocab-1) instead of pixel values
    int64_t vocab = 0;
};

// Builder for small graphs: a chain from an Input, with optional side branches.
struct GraphBuilder {
    Project p;
    int add(const std::string& type, const std::string& name, Json params, std::vector<int> from = {},
            std::vector<std::string> ports = {"in"}) {
        const int id = p.graph.addNode(type, name, params);
        for (size_t i = 0; i < from.size(); ++i) p.graph.connect(from[i], id, ports[i]);
        return id;
    }
};

Normalization imageNorm() {
    Normalization n;
    n.mode = "standardize";
    n.scale = 1.f / 255.f;
    n.mean = 0.286f;
    n.std = 0.353f;
    return n;
}

// One case per layer type (the type under test sits between an Input and the output).
std::vector<Case> layerCases() {
    std::vector<Case> cases;
    auto single = [&](const std::string& name, std::vector<int64_t> inShape, const std::string& type, Json params) {
        GraphBuilder g;
        const int in = g.add("Input", "input", {{"shape", inShape}});
        g.add(type, "layer", params, {in});
        g.p.name = name;
        cases.push_back({name, g.p, imageNorm()});
    };
    single("Dense", {12}, "Dense", {{"units", 5}});
    single("Dense_nobias", {12}, "Dense", {{"units", 7}, {"use_bias", false}});
    single("Conv2D", {3, 8, 8}, "Conv2D", {{"filters", 4}, {"kernel", {3, 3}}, {"padding", {1, 1}}});
    single("Conv2D_strided_dilated_grouped", {4, 9, 10}, "Conv2D",
           {{"filters", 6},
            {"kernel", {3, 2}},
            {"stride", {2, 1}},
            {"padding", {1, 0}},
            {"dilation", {2, 1}},
            {"groups", 2},
            {"use_bias", false}});
    single("Conv2D_depthwise", {32, 6, 5}, "Conv2D",
           {{"filters", 32}, {"kernel", {3, 3}}, {"padding", {1, 1}}, {"groups", 32}});
    single("Conv2D_groups4", {8, 6, 6}, "Conv2D", {{"filters", 12}, {"kernel", {3, 3}}, {"groups", 4}});
    single("ConvTranspose2D", {3, 5, 4}, "ConvTranspose2D",
           {{"filters", 4}, {"kernel", {4, 4}}, {"stride", {2, 2}}, {"padding", {1, 1}}});
    single("ConvTranspose2D_grouped_dilated", {4, 5, 6}, "ConvTranspose2D",
           {{"filters", 6},
            {"kernel", {3, 2}},
            {"stride", {2, 3}},
            {"padding", {1, 0}},
            {"output_padding", {1, 2}},
            {"dilation", {1, 2}},
            {"groups", 2},
            {"use_bias", false}});
    single("Upsample2D_nearest", {2, 3, 4}, "Upsample2D", Json::object());
    single("Upsample2D_bilinear", {2, 3, 4}, "Upsample2D", {{"scale", {2, 3}}, {"mode", "bilinear"}});
    single("Upsample2D_bilinear_corners", {2, 3, 4}, "Upsample2D",
           {{"scale", {3}}, {"mode", "bilinear"}, {"align_corners", true}});
    single("MaxPool2D", {2, 7, 7}, "MaxPool2D", {{"kernel", {3, 3}}, {"stride", {2, 2}}, {"padding", {1, 1}}});
    single("MaxPool2D_default", {2, 8, 6}, "MaxPool2D", Json::object());
    single("AvgPool2D", {2, 7, 7}, "AvgPool2D", {{"kernel", {3, 3}}, {"stride", {2, 2}}, {"padding", {1, 1}}});
    single("GlobalAvgPool", {3, 5, 4}, "GlobalAvgPool", Json::object());
    single("Flatten", {2, 3, 4}, "Flatten", Json::object());
    single("Reshape", {24}, "Reshape", {{"shape", {2, -1, 3}}});
    single("ReLU", {10}, "ReLU", Json::object());
    single("LeakyReLU", {10}, "LeakyReLU", {{"alpha", 0.2}});
    single("GELU", {10}, "GELU", Json::object());
    single("Sigmoid", {10}, "Sigmoid", Json::object());
    single("Tanh", {10}, "Tanh", Json::object());
    single("Clip_relu6", {2, 4, 4}, "Clip", Json::object());
    single("Clip_narrow", {10}, "Clip", {{"min", -0.25}, {"max", 0.5}});
    single("HardSwish", {3, 4, 4}, "HardSwish", Json::object());
    single("Softmax", {3, 7}, "Softmax", Json::object());
    single("BatchNorm_image", {4, 5, 5}, "BatchNorm", {{"eps", 1e-3}});
    single("BatchNorm_flat", {6}, "BatchNorm", Json::object());
    single("LayerNorm", {3, 8}, "LayerNorm", Json::object());
    {
        GraphBuilder g;  // Dropout inside the graph (removed) and as the output (Identity)
        const int in = g.add("Input", "input", {{"shape", {10}}});
        const int d = g.add("Dropout", "drop", {{"rate", 0.5}}, {in});
        const int fc = g.add("Dense", "fc", {{"units", 4}}, {d});
        g.add("Dropout", "drop_out", {{"rate", 0.3}}, {fc});
        g.p.name = "Dropout";
        cases.push_back({"Dropout", g.p, imageNorm()});
    }
    {
        GraphBuilder g;
        const int in = g.add("Input", "input", {{"shape", {6}}});
        const int a = g.add("Dense", "a", {{"units", 5}}, {in});
        const int b = g.add("Dense", "b", {{"units", 5}}, {in});
        const int c = g.add("Dense", "c", {{"units", 5}}, {in});
        g.add("Add", "sum", {{"inputs", 3}}, {a, b, c}, {"in0", "in1", "in2"});
        g.p.name = "Add";
        cases.push_back({"Add", g.p, imageNorm()});
    }
    {
        GraphBuilder g;
        const int in = g.add("Input", "input", {{"shape", {2, 6, 6}}});
        const int a = g.add("Conv2D", "a", {{"filters", 3}, {"kernel", {3, 3}}, {"padding", {1, 1}}}, {in});
        const int b = g.add("Conv2D", "b", {{"filters", 2}, {"kernel", {1, 1}}}, {in});
        g.add("Concat", "cat", {{"axis", 0}}, {a, b}, {"in0", "in1"});
        g.p.name = "Concat";
        cases.push_back({"Concat", g.p, imageNorm()});
    }
    {
        GraphBuilder g;
        const int in = g.add("Input", "input", {{"shape", {3, 4}}});
        const int a = g.add("Tanh", "a", Json::object(), {in});
        g.add("Concat", "cat", {{"axis", 1}}, {in, a}, {"in0", "in1"});
        g.p.name = "Concat_axis1";
        cases.push_back({"Concat_axis1", g.p, imageNorm()});
    }
    {
        GraphBuilder g;
        const int in = g.add("Input", "tokens", {{"shape", {5}}});
        g.add("Embedding", "embed", {{"vocab", 11}, {"dim", 4}}, {in});
        g.p.name = "Embedding";
        cases.push_back({"Embedding", g.p, Normalization{}, true, 11});
    }
    {
        GraphBuilder g;
        const int in = g.add("Input", "tokens", {{"shape", {6}}});
        const int e = g.add("Embedding", "embed", {{"vocab", 9}, {"dim", 8}}, {in});
        const int m = g.add("SequenceMeanPool", "pool", Json::object(), {e});
        g.add("Dense", "fc", {{"units", 3}}, {m});
        g.p.name = "SequenceMeanPool";
        cases.push_back({"SequenceMeanPool", g.p, Normalization{}, true, 9});
    }
    {
        GraphBuilder g;  // Dense over a sequence (MatMul with the transposed weight, with and without a bias), and
                         // the learned positions added before it
        const int in = g.add("Input", "tokens", {{"shape", {7}}});
        const int e = g.add("Embedding", "embed", {{"vocab", 12}, {"dim", 5}}, {in});
        const int pe = g.add("PositionalEmbedding", "positions", Json::object(), {e});
        const int cv = g.add("Conv1D", "ngrams", {{"filters", 6}, {"kernel", 3}, {"padding", 1}}, {pe});
        const int cv2 =
            g.add("Conv1D", "strided",
                  {{"filters", 5}, {"kernel", 2}, {"stride", 2}, {"dilation", 2}, {"use_bias", false}}, {cv});
        const int d1 = g.add("Dense", "per_token", {{"units", 6}}, {cv2});
        const int d2 = g.add("Dense", "per_token_nobias", {{"units", 4}, {"use_bias", false}}, {d1});
        const int m = g.add("SequenceMeanPool", "pool", Json::object(), {d2});
        g.add("Dense", "fc", {{"units", 3}}, {m});
        g.p.name = "Dense_sequence";
        cases.push_back({"Dense_sequence", g.p, Normalization{}, true, 12});
    }
    {
        GraphBuilder g;  // masked and unmasked pooling over the sequence
        const int in = g.add("Input", "tokens", {{"shape", {7}}});
        const int e = g.add("Embedding", "embed", {{"vocab", 6}, {"dim", 5}}, {in});
        const int mx = g.add("SequenceMaxPool", "max", {{"masked", true}}, {e, in}, {"in", "mask"});
        const int mean = g.add("SequenceMeanPool", "mean", {{"masked", true}}, {e, in}, {"in", "mask"});
        const int plain = g.add("SequenceMaxPool", "max_all", Json::object(), {e});
        const int a = g.add("Add", "sum", {{"inputs", 3}}, {mx, mean, plain}, {"in0", "in1", "in2"});
        g.add("Dense", "fc", {{"units", 3}}, {a});
        g.p.name = "SequencePool_masked";
        cases.push_back({"SequencePool_masked", g.p, Normalization{}, true, 6});
    }
    {
        GraphBuilder g;  // attention with the padding mask (vocab 4: many padding ids), and without it, no bias
        const int in = g.add("Input", "tokens", {{"shape", {6}}});
        const int e = g.add("Embedding", "embed", {{"vocab", 4}, {"dim", 8}}, {in});
        const int att = g.add("MultiHeadSelfAttention", "attention", {{"heads", 2}, {"masked", true}, {"dropout", 0.1}},
                              {e, in}, {"in", "mask"});
        const int att2 = g.add("MultiHeadSelfAttention", "attention_open", {{"heads", 4}, {"use_bias", false}}, {att});
        const int m = g.add("SequenceMeanPool", "pool", {{"masked", true}}, {att2, in}, {"in", "mask"});
        g.add("Dense", "fc", {{"units", 3}}, {m});
        g.p.name = "MultiHeadSelfAttention";
        cases.push_back({"MultiHeadSelfAttention", g.p, Normalization{}, true, 4});
    }
    return cases;
}

// Whole networks like the examples: an MLP and a CNN for Fashion-MNIST, a residual block, a text classifier.
std::vector<Case> networkCases() {
    std::vector<Case> cases;
    {
        GraphBuilder g;
        const int in = g.add("Input", "image", {{"shape", {1, 28, 28}}});
        const int f = g.add("Flatten", "flatten", Json::object(), {in});
        const int d1 = g.add("Dense", "fc1", {{"units", 64}}, {f});
        const int r = g.add("ReLU", "relu1", Json::object(), {d1});
        const int dr = g.add("Dropout", "drop", {{"rate", 0.2}}, {r});
        g.add("Dense", "fc2", {{"units", 10}}, {dr});
        g.p.name = "fashion_mlp";
        cases.push_back({"net_mlp", g.p, imageNorm()});
    }
    {
        GraphBuilder g;
        const int in = g.add("Input", "image", {{"shape", {1, 28, 28}}});
        const int c1 = g.add("Conv2D", "conv1", {{"filters", 8}, {"kernel", {3, 3}}, {"padding", {1, 1}}}, {in});
        const int b1 = g.add("BatchNorm", "bn1", Json::object(), {c1});
        const int r1 = g.add("ReLU", "relu1", Json::object(), {b1});
        const int p1 = g.add("MaxPool2D", "pool1", Json::object(), {r1});
        const int c2 = g.add("Conv2D", "conv2", {{"filters", 16}, {"kernel", {3, 3}}, {"padding", {1, 1}}}, {p1});
        const int r2 = g.add("LeakyReLU", "lrelu2", Json::object(), {c2});
        const int p2 = g.add("AvgPool2D", "pool2", Json::object(), {r2});
        const int fl = g.add("Flatten", "flatten", Json::object(), {p2});
        const int d1 = g.add("Dense", "fc1", {{"units", 32}}, {fl});
        const int s1 = g.add("Sigmoid", "sig", Json::object(), {d1});
        const int d2 = g.add("Dense", "fc2", {{"units", 10}}, {s1});
        g.add("Softmax", "probs", Json::object(), {d2});
        g.p.name = "fashion_cnn";
        cases.push_back({"net_cnn", g.p, imageNorm()});
    }
    {
        GraphBuilder g;
        const int in = g.add("Input", "image", {{"shape", {3, 8, 8}}});
        const int c1 = g.add("Conv2D", "conv1", {{"filters", 4}, {"kernel", {3, 3}}, {"padding", {1, 1}}}, {in});
        const int r1 = g.add("ReLU", "relu1", Json::object(), {c1});
        const int c2 = g.add("Conv2D", "conv2", {{"filters", 4}, {"kernel", {3, 3}}, {"padding", {1, 1}}}, {r1});
        const int a = g.add("Add", "residual", Json::object(), {c1, c2}, {"in0", "in1"});
        const int gp = g.add("GlobalAvgPool", "gap", Json::object(), {a});
        const int rs = g.add("Reshape", "rs", {{"shape", {2, 2}}}, {gp});
        const int ln = g.add("LayerNorm", "ln", Json::object(), {rs});
        const int ge = g.add("GELU", "gelu", Json::object(), {ln});
        const int fl = g.add("Flatten", "flat", Json::object(), {ge});
        g.add("Dense", "head", {{"units", 3}}, {fl});
        g.p.name = "residual";
        cases.push_back({"net_residual", g.p, imageNorm()});
    }
    {
        GraphBuilder g;
        const int in = g.add("Input", "tokens", {{"shape", {12}}});
        const int e = g.add("Embedding", "embed", {{"vocab", 50}, {"dim", 16}}, {in});
        const int ln = g.add("LayerNorm", "ln", Json::object(), {e});
        const int m = g.add("SequenceMeanPool", "pool", Json::object(), {ln});
        const int d = g.add("Dense", "fc", {{"units", 8}}, {m});
        const int t = g.add("Tanh", "tanh", Json::object(), {d});
        g.add("Dense", "out", {{"units", 4}}, {t});
        g.p.name = "text";
        cases.push_back({"net_text", g.p, Normalization{}, true, 50});
    }
    // The example projects, when the tree has them.
    const std::filesystem::path examples = test::sourcePath("examples");
    std::error_code ec;
    if (std::filesystem::is_directory(examples, ec)) {
        for (const auto& e : std::filesystem::directory_iterator(examples, ec)) {
            if (e.path().extension() != ".strata") continue;
            Case c;
            c.name = "example_" + e.path().stem().string();
            c.project = readProject(e.path().string());
            c.ids = c.project.dataset.kind == DatasetKind::Text;
            if (c.ids) {
                c.vocab = c.project.dataset.maxVocab;
                for (const Node* n : c.project.graph.nodes())
                    if (n->type == "Embedding") c.vocab = std::min<int64_t>(c.vocab, n->params.value("vocab", 10000));
            } else {
                c.norm = imageNorm();
            }
            cases.push_back(c);
        }
    }
    return cases;
}

// A trained-looking model: random weights (positive running variances), exported as ExportModel.
ExportModel randomModel(const Case& c, Backend& backend, std::unique_ptr<Model>& model, unsigned seed) {
    model = compile(c.project.graph, backend, seed);
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.f, 0.4f);
    std::uniform_real_distribution<float> pos(0.5f, 1.5f);
    ExportModel m;
    m.project = c.project;
    m.normalization = c.norm;
    m.classNames = {"a", "b"};
    // Weight matrices keep their seeded He/Xavier values (outputs stay O(1), like a trained model's);
    // biases and normalization parameters and statistics become non-trivial.
    m.weights = modelWeights(*model);
    auto endsWith = [](const std::string& s, const std::string& tail) {
        return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
    };
    for (auto& [name, values] : m.weights) {
        for (float& v : values) {
            if (endsWith(name, ".running_var"))
                v = pos(rng);
            else if (endsWith(name, ".gamma"))
                v = 1.f + 0.25f * nd(rng);
            else if (endsWith(name, ".bias") || endsWith(name, ".beta") || endsWith(name, ".running_mean"))
                v = 0.25f * nd(rng);
        }
    }
    applyWeights(*model, m.weights);
    return m;
}

// Raw inputs (what the exported file takes) and the normalized inputs Strata's model takes.
void makeInputs(const Case& c, const Shape& inShape, int64_t batch, unsigned seed, std::vector<float>& raw,
                std::vector<float>& normalized) {
    std::mt19937 rng(seed);
    raw.resize(static_cast<size_t>(batch * inShape.numel()));
    if (c.ids) {
        std::uniform_int_distribution<int> id(0, static_cast<int>(c.vocab - 1));
        for (float& v : raw) v = static_cast<float>(id(rng));
    } else {
        std::uniform_int_distribution<int> px(0, 255);
        for (float& v : raw) v = static_cast<float>(px(rng));
    }
    normalized = raw;
    if (c.norm.mode != "none")
        for (float& v : normalized) v = (v * c.norm.scale - c.norm.mean) / c.norm.std;
}

// Runs tools/check_onnx.py on files; returns "" when all are valid, "SKIP: ..." when python3-onnx is
// missing, else the checker's report.
std::string pythonCheck(const QStringList& files) {
    if (!QFileInfo::exists("/usr/bin/python3")) return "SKIP: /usr/bin/python3 is missing";
    QProcess p;
    p.start("/usr/bin/python3", QStringList{QString::fromStdString(test::sourcePath("tools/check_onnx.py"))} + files);
    if (!p.waitForFinished(300000)) return "check_onnx.py did not finish";
    const QString output = QString::fromUtf8(p.readAllStandardOutput() + p.readAllStandardError());
    if (p.exitCode() == 3) return "SKIP: " + output.toStdString();
    if (p.exitStatus() != QProcess::NormalExit || p.exitCode() != 0) return output.toStdString();
    return "";
}

// Runs the exported file in tools/run_onnx_numpy.py on raw inputs; "SKIP: ..." when numpy/onnx are missing.
std::string numpyRun(const std::string& file, const std::vector<float>& raw, const std::vector<int64_t>& dims,
                     std::vector<float>& out) {
    if (!QFileInfo::exists("/usr/bin/python3")) return "SKIP: /usr/bin/python3 is missing";
    const std::string in = file + ".in.f32", outFile = file + ".out.f32";
    std::ofstream(in, std::ios::binary)
        .write(reinterpret_cast<const char*>(raw.data()), static_cast<std::streamsize>(raw.size() * 4));
    QStringList args{QString::fromStdString(test::sourcePath("tools/run_onnx_numpy.py")), QString::fromStdString(file),
                     QString::fromStdString(in), QString::fromStdString(outFile)};
    for (int64_t d : dims) args << QString::number(d);
    QProcess p;
    p.start("/usr/bin/python3", args);
    if (!p.waitForFinished(120000)) return "run_onnx_numpy.py did not finish";
    const std::string output = QString::fromUtf8(p.readAllStandardOutput() + p.readAllStandardError()).toStdString();
    if (p.exitCode() == 3) return "SKIP: " + output;
    if (p.exitStatus() != QProcess::NormalExit || p.exitCode() != 0) return "run_onnx_numpy.py failed: " + output;
    std::ifstream f(outFile, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(f)), {});
    out.resize(bytes.size() / 4);
    std::memcpy(out.data(), bytes.data(), out.size() * 4);
    return "";
}

double maxAbsDiff(const float* got, const std::vector<float>& expected) {
    double worst = 0;
    for (size_t i = 0; i < expected.size(); ++i) worst = std::max(worst, double(std::fabs(got[i] - expected[i])));
    return worst;
}

// What OpenCV 4.6's DNN module cannot run, found by running this test: LayerNormalization (opset 17)
// is not implemented; Gather only takes constant indices (our Embedding gathers rows by the input ids);
// Sub/Div/Mul fail on operands of different computed shapes (the LayerNorm decomposition below opset 17).
// Those cases run in tools/run_onnx_numpy.py instead, a NumPy interpreter written from the ONNX spec.
bool hasType(const Case& c, const std::string& type) {
    for (const Node* n : c.project.graph.nodes())
        if (n->type == type) return true;
    return false;
}

std::string openCvCannotImport(const Case& c, int opset) {
    for (const Node* n : c.project.graph.nodes()) {
        if (n->type == "Embedding") return "Gather with runtime indices (Embedding)";
        if (n->type == "Clip") return "Clip with its bounds as inputs (OpenCV 4.6 reads opset 6's attributes only)";
        if (n->type == "ConvTranspose2D" && n->params.value("groups", 1) != 1)
            return "ConvTranspose with groups, dilation and output padding (OpenCV 4.6 gives another output size)";
        if (n->type == "LayerNorm")
            return opset >= 17 ? "LayerNormalization"
                               : "broadcasting between computed tensors, as in Sub([N, T, D], [N, T, 1])";
    }
    return {};
}

Case networkCase(const std::string& name) {
    for (const Case& c : networkCases())
        if (c.name == name) return c;
    throw std::runtime_error("no network case " + name);
}

// IDX u8 images [count, h, w] (what `predict` reads, like Fashion-MNIST's files).
void writeIdxImages(const std::string& path, const std::vector<float>& raw, int64_t count, int64_t h, int64_t w) {
    std::ofstream f(path, std::ios::binary);
    const unsigned char magic[4] = {0, 0, 8, 3};
    f.write(reinterpret_cast<const char*>(magic), 4);
    for (int64_t d : {count, h, w}) {
        const unsigned char be[4] = {static_cast<unsigned char>(d >> 24), static_cast<unsigned char>(d >> 16),
                                     static_cast<unsigned char>(d >> 8), static_cast<unsigned char>(d)};
        f.write(reinterpret_cast<const char*>(be), 4);
    }
    for (float v : raw) f.put(static_cast<char>(static_cast<unsigned char>(v)));
}

// The per-class probabilities `predict --top <all>` printed, one map per sample line.
std::vector<std::map<std::string, double>> predictedProbabilities(const std::string& text) {
    std::vector<std::map<std::string, double>> samples;
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
        if (line.rfind("sample ", 0) != 0) continue;
        std::map<std::string, double> probs;
        std::string rest = line.substr(line.find(": ") + 2);
        size_t start = 0;
        while (start < rest.size()) {
            const size_t end = std::min(rest.find(", ", start), rest.size());
            const std::string item = rest.substr(start, end - start);
            const size_t space = item.rfind(' ');
            probs[item.substr(0, space)] = std::stod(item.substr(space + 1));
            start = end + 2;
        }
        samples.push_back(probs);
    }
    return samples;
}

}  // namespace

class TestExportOnnx : public QObject {
    Q_OBJECT

private:
    QTemporaryDir m_dir;
    QStringList m_files;  // every exported file, for the reference checker
    // Every layer and network case's file with its raw inputs, run in onnxruntime by the last slot but one.
    test::OnnxRuntimeBatch m_ort;
    std::vector<std::vector<float>> m_ortExpected;

    void runCase(const Case& c, int opset) {
        auto backend = test::makeReferenceBackend();
        std::unique_ptr<Model> model;
        const ExportModel m = randomModel(c, *backend, model, 1234);
        const std::string file =
            (m_dir.path() + "/" + QString::fromStdString(c.name) + "_" + QString::number(opset) + ".onnx")
                .toStdString();
        OnnxExportOptions options;
        options.opset = opset;
        writeOnnx(file, m, options);

        // (1) Read back: structure and bit-exact weights.
        const OnnxModelInfo info = readOnnx(file);
        QCOMPARE(info.opset, opset);
        QCOMPARE(info.producerName, std::string("strata"));
        QVERIFY(info.metadata.count("strata.class_labels"));
        QCOMPARE(info.inputDims.front(), int64_t(-1));  // symbolic batch
        QCOMPARE(static_cast<int>(info.inputDims.size()), model->inputShape().rank() + 1);
        QCOMPARE(static_cast<int>(info.outputDims.size()), model->outputShape().rank() + 1);
        for (const auto& [name, values] : m.weights) {
            const TensorRecord* t = info.initializer(name);
            QVERIFY2(t, name.c_str());
            QCOMPARE(recordToFloats(*t).size(), values.size());
            QVERIFY2(std::memcmp(recordToFloats(*t).data(), values.data(), values.size() * 4) == 0, name.c_str());
        }
        for (const OnnxNodeInfo& n : info.nodes) QVERIFY2(n.opType != "Dropout", "Dropout must be removed");
        checkImport(m, info, opset);
        if (QTest::currentTestFailed()) return;
        // The exported file loads back into a runnable model with identical weights.
        const ExportModel back = loadModelFile(file);
        QVERIFY(back.weights == m.weights);
        QCOMPARE(back.normalization, m.normalization);

        // (2) The reference checker runs once over every file (referenceCheckerAcceptsEveryFile).
        m_files << QString::fromStdString(file);

        // (3) An independent runtime on raw inputs against Strata on normalized inputs.
        const int64_t batch = 3;
        std::vector<float> raw, normalized;
        makeInputs(c, model->inputShape(), batch, 99, raw, normalized);
        const Tensor x = backend->fromHost(model->inputShape().withBatch(batch), normalized.data());
        const Tensor& y = model->forward(x, false);
        std::vector<float> expected(static_cast<size_t>(y.numel()));
        backend->toHost(y, expected.data());
        std::vector<int64_t> dims{batch};
        for (int64_t d : model->inputShape().dims()) dims.push_back(d);
        m_ort.add(file, raw, dims);
        m_ortExpected.push_back(expected);

        std::string why = openCvCannotImport(c, opset);
#ifdef STRATA_HAVE_OPENCV_DNN
        if (why.empty()) {
            cv::dnn::Net net;
            try {
                net = cv::dnn::readNetFromONNX(file);
            } catch (const cv::Exception& e) {
                QFAIL(qPrintable(QString::fromStdString(c.name + ": OpenCV cannot import: " + e.what())));
            }
            std::vector<int> cvDims(dims.begin(), dims.end());
            cv::Mat blob(static_cast<int>(cvDims.size()), cvDims.data(), CV_32F, raw.data());
            net.setInput(blob);
            cv::Mat out;
            try {
                out = net.forward();
            } catch (const cv::Exception& e) {
                QFAIL(qPrintable(QString::fromStdString(c.name + ": OpenCV forward failed: " + e.what())));
            }
            QCOMPARE(static_cast<size_t>(out.total()), expected.size());
            QVERIFY(out.isContinuous());
            const double worst = maxAbsDiff(out.ptr<float>(), expected);
            QVERIFY2(worst <= 1e-4, qPrintable(QString("%1 opset %2: OpenCV max abs difference %3")
                                                   .arg(QString::fromStdString(c.name))
                                                   .arg(opset)
                                                   .arg(worst)));
            // OpenCV 4.6 ignores AveragePool's count_include_pad (it always excludes padding), so it
            // cannot catch a wrong attribute there; average pooling also goes through NumPy.
            if (!hasType(c, "AvgPool2D")) return;
            why = "count_include_pad is ignored by OpenCV";
        }
#else
        why = "built without OpenCV DNN";
#endif
        std::vector<float> got;
        const std::string err = numpyRun(file, raw, dims, got);
        if (err.rfind("SKIP", 0) == 0) QSKIP(qPrintable(QString::fromStdString(c.name + ": " + why + "; " + err)));
        QVERIFY2(err.empty(), err.c_str());
        QCOMPARE(got.size(), expected.size());
        const double worst = maxAbsDiff(got.data(), expected);
        qInfo("%s opset %d: NumPy interpreter (%s): max abs difference %.3g", c.name.c_str(), opset, why.c_str(),
              worst);
        QVERIFY2(worst <= 1e-4, qPrintable(QString("%1 opset %2: NumPy max abs difference %3")
                                               .arg(QString::fromStdString(c.name))
                                               .arg(opset)
                                               .arg(worst)));
    }

    // (4) Every layer reads back through its type's mapping (OnnxLayers.h), taking every node of the file: its
    // type; params that give the same output shape and parameters; its weights bit for bit; its inputs the values
    // of the layers before it; and nodes and constants that its writer, given what was read, makes again exactly.
    void checkImport(const ExportModel& m, const OnnxModelInfo& info, int opset) {
        const OnnxLayerImports imports = importOnnxLayers(info);
        std::string unread;
        for (int i : imports.unread) unread += " " + info.nodes[static_cast<size_t>(i)].name;
        QVERIFY2(unread.empty(), ("nodes no layer reads:" + unread).c_str());
        std::map<std::string, const OnnxLayerImport*> byName;
        for (const OnnxLayerImport& r : imports.layers) byName[r.name] = &r;
        const Graph& graph = m.project.graph;
        const GraphAnalysis analysis = analyzeGraph(graph);
        QVERIFY(analysis.ok());
        std::set<int> hasConsumer;
        for (const Edge& e : graph.edges()) hasConsumer.insert(e.from.node);
        // The ONNX value that carries a node's output, as read back (the identity at inference has none).
        std::function<std::string(int)> valueOf = [&](int id) -> std::string {
            const Node& n = *graph.node(id);
            if (const auto it = byName.find(n.name); it != byName.end()) return it->second->output;
            return valueOf(graph.edgeInto({id, graph.inputPorts(id).front()})->from.node);
        };
        size_t layers = 0;
        for (int id : graph.topologicalOrder()) {
            const Node& n = *graph.node(id);
            const LayerType& type = *graph.layerType(id);
            const bool output = !hasConsumer.count(id);
            if (type.identityAtInference() && !output) {
                QVERIFY2(!byName.count(n.name), (n.name + ": read back, but inference passes its input on").c_str());
                continue;
            }
            const auto it = byName.find(n.name);
            QVERIFY2(it != byName.end(), (n.name + " (" + n.type + "): not read back").c_str());
            const OnnxLayerImport& r = *it->second;
            ++layers;
            const std::string where = n.name + " opset " + std::to_string(opset) + ": ";
            QVERIFY2(r.type == n.type, (where + "read back as " + r.type).c_str());
            Json params;
            try {
                params = type.normalizeParams(r.params);
            } catch (const std::exception& e) {
                QFAIL((where + "params " + r.params.dump() + ": " + e.what()).c_str());
            }
            std::vector<Shape> inShapes;
            const std::vector<std::string> ports = graph.inputPorts(id);
            QCOMPARE(r.inputs.size(), ports.size());
            for (size_t k = 0; k < ports.size(); ++k) {
                const int from = graph.edgeInto({id, ports[k]})->from.node;
                inShapes.push_back(analysis.outputShapes.at(from));
                QVERIFY2(r.inputs[k] == valueOf(from), (where + "input " + ports[k] + " reads " + r.inputs[k]).c_str());
            }
            QCOMPARE(type.inferShape(params, inShapes), analysis.outputShapes.at(id));
            const auto specs = type.parameterSpecs(params, inShapes);
            const auto originalSpecs = type.parameterSpecs(analysis.params.at(id), inShapes);
            QCOMPARE(specs.size(), originalSpecs.size());
            QCOMPARE(r.weights.size(), specs.size());
            for (size_t k = 0; k < specs.size(); ++k) {
                QCOMPARE(specs[k].name, originalSpecs[k].name);
                QCOMPARE(specs[k].shape, originalSpecs[k].shape);
                const auto w = r.weights.find(specs[k].name);
                QVERIFY2(w != r.weights.end(), (where + "no weights for " + specs[k].name).c_str());
                const std::vector<float>& want = m.weights.at(n.name + "." + specs[k].name);
                QVERIFY2(w->second.size() == want.size() &&
                             std::memcmp(w->second.data(), want.data(), want.size() * sizeof(float)) == 0,
                         (where + specs[k].name + " differs").c_str());
            }
            // Written again from what was read: the same nodes and constants.
            OnnxLayerWriter again;
            again.name = n.name;
            again.params = params;
            again.inputs = r.inputs;
            again.inputShapes = inShapes;
            again.outputShape = analysis.outputShapes.at(id);
            again.opset = opset;
            again.graphOutput = output;
            if (type.isGraphInput() && m.normalization.mode != "none") again.normalization = &m.normalization;
            again.weight = [&](const std::string& param) { return n.name + "." + param; };
            again.int8Weights = [&] {
                const CompressibleWeight cw = type.int8Weight();
                std::vector<std::string> names{n.name + "." + cw.weight};
                if (r.weights.count(cw.bias)) names.push_back(n.name + "." + cw.bias);
                return names;
            };
            // A float32 file: inner tensors pass unquantized, their weights as float initializers.
            again.quantizedInner = [](const std::string&, const std::string& value) { return value; };
            again.innerInt8Weights = [&](const std::string& tensor) {
                std::vector<std::string> names;
                for (const LayerType::InnerInt8Tensor& t : type.int8InnerTensors())
                    if (t.name == tensor) {
                        names.push_back(n.name + "." + t.weight.weight);
                        if (r.weights.count(t.weight.bias)) names.push_back(n.name + "." + t.weight.bias);
                    }
                return names;
            };
            onnxLayerMapping(n.type)->write(again);
            std::vector<OnnxNodeInfo> file;
            for (int i : r.nodes) file.push_back(info.nodes[static_cast<size_t>(i)]);
            const std::vector<OnnxNodeInfo> written(again.nodes.begin(), again.nodes.end());
            QVERIFY2(written == file, (where + "its nodes, written again from what was read, differ").c_str());
            QCOMPARE(again.output.empty() ? n.name : again.output, r.output);
            for (const OnnxInitializer& i : again.initializers) {
                if (i.type == OnnxInitializer::Type::Int64) {
                    QVERIFY2(info.int64Initializers.count(i.name) && info.int64Initializers.at(i.name) == i.ints,
                             (where + i.name).c_str());
                } else {
                    const TensorRecord* t = info.initializer(i.name);
                    QVERIFY2(t && recordToFloats(*t) == i.floats && t->shape.dims() == i.dims,
                             (where + i.name).c_str());
                }
            }
        }
        QCOMPARE(imports.layers.size(), layers);
    }

private slots:
    void initTestCase() {
#ifdef STRATA_HAVE_OPENCV_DNN
        cv::utils::logging::setLogLevel(cv::utils::logging::LOG_LEVEL_ERROR);
#endif
    }

    void everyRegisteredTypeHasACase() {
        std::set<std::string> covered;
        for (const Case& c : layerCases())
            for (const Node* n : c.project.graph.nodes()) covered.insert(n->type);
        for (const std::string& type : layerRegistry().names())
            QVERIFY2(covered.count(type), ("no ONNX export case for layer type " + type).c_str());
    }

    // Each layer type has its ONNX mapping both ways, and the table maps no type that does not exist.
    void everyRegisteredTypeHasAnOnnxMapping() {
        for (const std::string& type : layerRegistry().names()) {
            const OnnxLayerMapping* m = onnxLayerMapping(type);
            QVERIFY2(m && m->write && m->read, ("no ONNX mapping for layer type " + type).c_str());
        }
        for (const OnnxLayerMapping& m : onnxLayerTable())
            QVERIFY2(layerRegistry().find(m.type), ("the ONNX table maps an unknown type " + m.type).c_str());
        QCOMPARE(onnxLayerTable().size(), layerRegistry().names().size());
    }

    // Forms other exporters write: ONNX's Dropout with its ratio; Adds that are not one layer's chain stay two.
    void importReadsOtherForms() {
        OnnxModelInfo info;
        info.inputName = "x";
        info.inputDims = {-1, 4};
        info.initializers.push_back(makeF32Record("ratio", Shape{}, {0.25f}));
        OnnxNodeInfo drop;
        drop.name = "drop";
        drop.opType = "Dropout";
        drop.inputs = {"x", "ratio"};
        drop.outputs = {"d", "mask"};
        OnnxNodeInfo add1{"a1", "Add", {"d", "x"}, {"s1"}, {}, {}, {}, {}};
        OnnxNodeInfo add2{"a2", "Add", {"s1", "x"}, {"s2"}, {}, {}, {}, {}};
        info.nodes = {drop, add1, add2};
        OnnxLayerImports r = importOnnxLayers(info);
        QVERIFY(r.unread.empty());
        QCOMPARE(r.layers.size(), size_t(4));
        QCOMPARE(r.layers[0].type, std::string("Input"));
        QCOMPARE(r.layers[0].params, Json({{"shape", {4}}}));
        QCOMPARE(r.layers[1].type, std::string("Dropout"));
        QCOMPARE(r.layers[1].params.at("rate").get<double>(), 0.25);
        QCOMPARE(r.layers[1].output, std::string("d"));
        QCOMPARE(r.layers[2].params.at("inputs").get<int>(), 2);
        QCOMPARE(r.layers[3].inputs, (std::vector<std::string>{"s1", "x"}));
        // Named as Strata names a three-input Add's partial sum, the two are one layer.
        info.nodes[1].outputs = {"s2/sum1"};
        info.nodes[2].inputs = {"s2/sum1", "x"};
        r = importOnnxLayers(info);
        QCOMPARE(r.layers.size(), size_t(3));
        QCOMPARE(r.layers[2].params.at("inputs").get<int>(), 3);
        QCOMPARE(r.layers[2].inputs, (std::vector<std::string>{"d", "x", "x"}));
        // A Gemm without transB = 1 is not a Dense as Strata writes it: left unread, never misread.
        info.initializers.push_back(makeF32Record("w", Shape{4, 3}, std::vector<float>(12, 1.f)));
        info.nodes = {OnnxNodeInfo{"g", "Gemm", {"x", "w"}, {"y"}, {}, {}, {}, {}}};
        r = importOnnxLayers(info);
        QCOMPARE(r.unread, std::vector<int>{0});
    }

    // The image layers' other spellings: Resize as PyTorch writes nn.Upsample (roi an empty input, attributes it
    // leaves at their defaults) and ONNX's own defaults for nearest; HardSigmoid's Mul with its operands swapped;
    // Clip without a max; and what must stay unread: Resize by a fraction, nearest with half-pixel coordinates
    // and floor rounding (which is not floor(dst / scale)), ConvTranspose with an explicit output_shape.
    void importReadsOtherImageForms() {
        auto model = [](std::vector<OnnxNodeInfo> nodes) {
            OnnxModelInfo info;
            info.inputName = "x";
            info.inputDims = {-1, 2, 3, 4};
            info.initializers.push_back(makeF32Record("scales", Shape{4}, {1, 1, 2, 3}));
            info.initializers.push_back(makeF32Record("half", Shape{4}, {1, 1, 1.5f, 2}));
            info.initializers.push_back(makeF32Record("hi", Shape{}, {2.5f}));
            info.initializers.push_back(makeF32Record("w", Shape{2, 3, 2, 2}, std::vector<float>(24, 1.f)));
            info.nodes = std::move(nodes);
            return importOnnxLayers(info);
        };
        OnnxNodeInfo resize{"up", "Resize", {"x", "", "scales"}, {"y"}, {}, {}, {}, {}};
        resize.attr("mode", "linear").attr("coordinate_transformation_mode", "half_pixel");
        OnnxLayerImports r = model({resize});
        QVERIFY(r.unread.empty());
        QCOMPARE(r.layers.at(1).type, std::string("Upsample2D"));
        QCOMPARE(r.layers[1].params, Json({{"scale", {2, 3}}, {"mode", "bilinear"}, {"align_corners", false}}));
        resize.stringAttributes = {{"mode", "nearest"}};  // half_pixel and round_prefer_floor: the defaults
        resize.attr("cubic_coeff_a", -0.75f);
        r = model({resize});
        QVERIFY(r.unread.empty());
        QCOMPARE(r.layers.at(1).params, Json({{"scale", {2, 3}}, {"mode", "nearest"}}));
        resize.attr("nearest_mode", "floor");
        QCOMPARE(model({resize}).unread, std::vector<int>{0});
        resize.stringAttributes = {{"mode", "nearest"}};
        resize.inputs[2] = "half";
        QCOMPARE(model({resize}).unread, std::vector<int>{0});
        // Sizes of the graph's input [2, 3, 4] tripled and doubled; a size that is no whole multiple stays unread.
        resize.inputs = {"x", "", "", "sizes"};
        OnnxModelInfo sized;
        sized.inputName = "x";
        sized.inputDims = {-1, 2, 3, 4};
        sized.int64Initializers["sizes"] = {1, 2, 9, 8};
        sized.nodes = {resize};
        r = importOnnxLayers(sized);
        QVERIFY(r.unread.empty());
        QCOMPARE(r.layers.at(1).params, Json({{"scale", {3, 2}}, {"mode", "nearest"}}));
        sized.int64Initializers["sizes"] = {1, 2, 9, 7};
        QCOMPARE(importOnnxLayers(sized).unread, std::vector<int>{0});

        OnnxNodeInfo gate{"g", "HardSigmoid", {"x"}, {"gate"}, {}, {}, {}, {}};
        gate.attr("alpha", 1.f / 6).attr("beta", 0.5f);
        r = model({gate, OnnxNodeInfo{"m", "Mul", {"gate", "x"}, {"y"}, {}, {}, {}, {}}});
        QVERIFY(r.unread.empty());
        QCOMPARE(r.layers.size(), size_t(2));
        QCOMPARE(r.layers[1].type, std::string("HardSwish"));
        QCOMPARE(r.layers[1].nodes, (std::vector<int>{0, 1}));
        gate.attr("alpha", 0.2f);  // ONNX's default HardSigmoid is not HardSwish's
        QCOMPARE(model({gate, OnnxNodeInfo{"m", "Mul", {"gate", "x"}, {"y"}, {}, {}, {}, {}}}).unread,
                 (std::vector<int>{0, 1}));

        r = model({OnnxNodeInfo{"c", "Clip", {"x", "", "hi"}, {"y"}, {}, {}, {}, {}}});
        QVERIFY(r.unread.empty());
        QCOMPARE(r.layers.at(1).params.at("min").get<double>(), -1e30);
        QCOMPARE(r.layers[1].params.at("max").get<double>(), 2.5);

        OnnxNodeInfo deconv{"d", "ConvTranspose", {"x", "w"}, {"y"}, {}, {}, {}, {}};
        deconv.attr("strides", std::vector<int64_t>{2, 2}).attr("group", int64_t{1});
        r = model({deconv});
        QVERIFY(r.unread.empty());
        QCOMPARE(r.layers.at(1).params.at("filters").get<int>(), 3);
        deconv.attr("output_shape", std::vector<int64_t>{6, 8});
        QCOMPARE(model({deconv}).unread, std::vector<int>{0});
    }

    void layers_data() {
        QTest::addColumn<int>("index");
        QTest::addColumn<int>("opset");
        const auto cases = layerCases();
        for (size_t i = 0; i < cases.size(); ++i)
            for (int opset : {13, 17})
                QTest::newRow((cases[i].name + "_opset" + std::to_string(opset)).c_str()) << int(i) << opset;
    }
    void layers() {
        QFETCH(int, index);
        QFETCH(int, opset);
        runCase(layerCases()[static_cast<size_t>(index)], opset);
    }

    void networks_data() {
        QTest::addColumn<int>("index");
        QTest::addColumn<int>("opset");
        const auto cases = networkCases();
        for (size_t i = 0; i < cases.size(); ++i)
            for (int opset : {13, 15, 17})
                QTest::newRow((cases[i].name + "_opset" + std::to_string(opset)).c_str()) << int(i) << opset;
    }
    void networks() {
        QFETCH(int, index);
        QFETCH(int, opset);
        runCase(networkCases()[static_cast<size_t>(index)], opset);
    }

    void normalizationIsInTheGraph() {
        const Case c = layerCases()[0];  // Dense
        auto backend = test::makeReferenceBackend();
        std::unique_ptr<Model> model;
        const ExportModel m = randomModel(c, *backend, model, 5);
        const std::string file = (m_dir.path() + "/norm.onnx").toStdString();
        writeOnnx(file, m);
        std::vector<std::string> ops;
        for (const OnnxNodeInfo& n : readOnnx(file).nodes) ops.push_back(n.opType);
        QCOMPARE(ops, (std::vector<std::string>{"Mul", "Sub", "Div", "Gemm"}));
        OnnxExportOptions raw;
        raw.includeNormalization = false;
        writeOnnx(file, m, raw);
        QCOMPARE(readOnnx(file).nodes.size(), size_t(1));
    }

    void layerNormDecomposedBelowOpset17() {
        const auto cases = layerCases();
        const auto it = std::find_if(cases.begin(), cases.end(), [](const Case& c) { return c.name == "LayerNorm"; });
        auto backend = test::makeReferenceBackend();
        std::unique_ptr<Model> model;
        const ExportModel m = randomModel(*it, *backend, model, 5);
        const std::string file = (m_dir.path() + "/ln.onnx").toStdString();
        for (int opset : {13, 17}) {
            OnnxExportOptions o;
            o.opset = opset;
            writeOnnx(file, m, o);
            bool fused = false;
            for (const OnnxNodeInfo& n : readOnnx(file).nodes) fused |= n.opType == "LayerNormalization";
            QCOMPARE(fused, opset >= 17);
        }
    }

    void rejectsBadInput() {
        const Case c = layerCases()[0];
        auto backend = test::makeReferenceBackend();
        std::unique_ptr<Model> model;
        ExportModel m = randomModel(c, *backend, model, 5);
        const std::string file = (m_dir.path() + "/bad.onnx").toStdString();
        OnnxExportOptions o;
        o.opset = 12;
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, writeOnnx(file, m, o));
        m.weights.erase("layer.bias");
        try {
            writeOnnx(file, m);
            QFAIL("missing weights accepted");
        } catch (const std::runtime_error& e) {
            QVERIFY(std::string(e.what()).find("layer.bias") != std::string::npos);
        }
        // Not an ONNX file.
        const std::string junk = (m_dir.path() + "/junk.onnx").toStdString();
        std::ofstream(junk) << "definitely not protobuf \xff\xff\xff\xff";
        QVERIFY_THROWS_EXCEPTION(FormatError, readOnnx(junk));
    }

    // CSV data standardized per feature: each export carries the statistics (ONNX in the graph as [F]
    // constants, GGUF as f32 arrays, safetensors in its JSON) and gives the training model's outputs on raw rows.
    void perFeatureStandardizationInEveryFormat() {
        const std::string dir = m_dir.path().toStdString() + "/tabular";
        std::filesystem::create_directories(dir);
        // Four features in very different units, so a single mean/std could not standardize them.
        std::mt19937 rng(21);
        std::normal_distribution<float> nd(0.f, 1.f);
        const int64_t rows = 40, features = 4;
        std::vector<float> raw;
        std::ofstream csv(dir + "/train.csv");
        csv << "size,label,ratio,temperature,count\n";
        for (int64_t r = 0; r < rows; ++r) {
            const float v[4] = {1000.f + 300.f * nd(rng), 0.01f + 0.005f * nd(rng), -50.f + 10.f * nd(rng),
                                std::round(3.f + nd(rng))};
            std::ostringstream line;
            line.precision(9);
            line << v[0] << ","
                 << "abc"[r % 3] << "," << v[1] << "," << v[2] << "," << v[3] << "\n";
            csv << line.str();
            raw.insert(raw.end(), v, v + 4);
        }
        csv.close();
        GraphBuilder gb;
        const int in = gb.add("Input", "features", {{"shape", {features}}});
        const int d1 = gb.add("Dense", "fc1", {{"units", 8}}, {in});
        const int act = gb.add("ReLU", "relu", {}, {d1});
        gb.add("Dense", "fc2", {{"units", 3}}, {act});
        Project project = gb.p;
        project.name = "tabular";
        project.dataset.kind = DatasetKind::Csv;
        project.dataset.trainPath = "train.csv";
        project.dataset.labelColumn = "label";
        project.dataset.normalization = NormalizationMode::Standardize;
        project.dataset.validationSplit = 0.0;
        writeProject(project, dir + "/tabular.strata");

        // What training feeds the model: the data set's own standardization, in file order.
        const DatasetBundle data = loadDataset(project.dataset, dir + "/tabular.strata");
        QCOMPARE(data.normalization.featureMean.size(), size_t(features));
        QCOMPARE(data.train.count, rows);
        auto backend = test::makeReferenceBackend();
        auto model = compile(project.graph, *backend, project.training.seed);
        const Tensor x = backend->fromHost(model->inputShape().withBatch(rows), data.train.inputs.data());
        const Tensor& y = model->forward(x, false);
        std::vector<float> expected(static_cast<size_t>(y.numel()));
        backend->toHost(y, expected.data());

        std::string firstPredict;
        for (const std::string format : {"onnx", "gguf", "safetensors"}) {
            const std::string file = dir + "/tabular." + format;
            std::ostringstream out, err;
            QVERIFY2(runExportCommand({dir + "/tabular.strata", "--untrained", "--format", format, "-o", file}, out,
                                      err) == 0,
                     err.str().c_str());
            const ExportModel back = loadModelFile(file);
            QCOMPARE(back.normalization.featureMean, data.normalization.featureMean);
            QCOMPARE(back.normalization.featureStd, data.normalization.featureStd);
            // The loaded statistics turn raw rows into exactly what training fed the model.
            std::vector<float> normalized = raw;
            applyNormalization(normalized, back.normalization);
            QVERIFY(maxAbsDiff(normalized.data(), data.train.inputs) <= 1e-6);
            // Strata on the reloaded weights.
            auto reloaded = compile(back.project.graph, *backend, 0);
            applyWeights(*reloaded, back.weights);
            const Tensor xr = backend->fromHost(reloaded->inputShape().withBatch(rows), normalized.data());
            const Tensor& yr = reloaded->forward(xr, false);
            std::vector<float> got(static_cast<size_t>(yr.numel()));
            backend->toHost(yr, got.data());
            QVERIFY2(maxAbsDiff(got.data(), expected) <= 1e-4, format.c_str());

            if (format == "onnx") {
                m_files << QString::fromStdString(file);
                std::vector<std::string> ops;
                for (const OnnxNodeInfo& n : readOnnx(file).nodes) ops.push_back(n.opType);
                QCOMPARE(ops, (std::vector<std::string>{"Sub", "Div", "Gemm", "Relu", "Gemm"}));
                const std::vector<int64_t> dims{rows, features};
#ifdef STRATA_HAVE_OPENCV_DNN
                // An independent runtime on the raw rows: the standardization is inside the graph.
                cv::dnn::Net net = cv::dnn::readNetFromONNX(file);
                std::vector<int> cvDims(dims.begin(), dims.end());
                cv::Mat blob(2, cvDims.data(), CV_32F, raw.data());
                net.setInput(blob);
                const cv::Mat cvOut = net.forward();
                QCOMPARE(static_cast<size_t>(cvOut.total()), expected.size());
                const double worst = maxAbsDiff(cvOut.ptr<float>(), expected);
                QVERIFY2(worst <= 1e-4, qPrintable(QString("OpenCV max abs difference %1").arg(worst)));
#else
                std::vector<float> viaNumpy;
                const std::string why = numpyRun(file, raw, dims, viaNumpy);
                if (why.empty())
                    QVERIFY(maxAbsDiff(viaNumpy.data(), expected) <= 1e-4);
                else
                    qInfo("no independent ONNX runtime: %s", why.c_str());
#endif
            }

            // predict standardizes raw CSV rows the same way, whatever the file.
            std::ostringstream pout, perr;
            QVERIFY2(runPredictCommand({file, dir + "/train.csv", "--count", "100"}, pout, perr) == 0,
                     perr.str().c_str());
            const std::string text = pout.str();
            QVERIFY2(text.find("accuracy ") != std::string::npos && text.find("on 40 samples") != std::string::npos,
                     text.c_str());
            const std::string samples = text.substr(text.find("sample 0"));
            if (firstPredict.empty()) firstPredict = samples;
            QCOMPARE(samples, firstPredict);
        }
    }

    // The GUI's export check runs the file's ONNX graph in OpenCV DNN for the example-like networks; for a graph
    // OpenCV cannot import it says so, with OpenCV's reason, and checks Strata's reading of the file instead.
    void checkExportRunsTheOnnxGraph_data() {
        QTest::addColumn<QString>("name");
        QTest::addColumn<int>("opset");
        QTest::addColumn<bool>("normalizationInGraph");
        QTest::newRow("mlp") << "net_mlp" << 13 << true;
        QTest::newRow("mlp_normalization_outside") << "net_mlp" << 13 << false;
        QTest::newRow("cnn") << "net_cnn" << 13 << true;
        QTest::newRow("cnn_opset17") << "net_cnn" << 17 << true;
        QTest::newRow("text_gather_fallback") << "net_text" << 13 << true;
        QTest::newRow("layernorm17_fallback") << "net_residual" << 17 << true;
    }
    void checkExportRunsTheOnnxGraph() {
        QFETCH(QString, name);
        QFETCH(int, opset);
        QFETCH(bool, normalizationInGraph);
        const Case c = networkCase(name.toStdString());
        auto backend = test::makeReferenceBackend();
        std::unique_ptr<Model> model;
        const ExportModel m = randomModel(c, *backend, model, 77);
        const std::string file = (m_dir.path() + "/check_" + QTest::currentDataTag() + ".onnx").toStdString();
        OnnxExportOptions options;
        options.opset = opset;
        options.includeNormalization = normalizationInGraph;
        writeOnnx(file, m, options);

        const int64_t count = 40;
        DataSplit split;
        split.sampleShape = model->inputShape();
        split.count = count;
        std::vector<float> raw;
        makeInputs(c, model->inputShape(), count, 5, raw, split.inputs);
        const int classes = static_cast<int>(model->outputShape().numel());
        for (int64_t s = 0; s < count; ++s) split.labels.push_back(static_cast<int32_t>(s % classes));
        const ExportCheckResult r = checkExport(m, file, split, c.norm, count);
        const QString method = QString::fromStdString(r.method);
        QCOMPARE(r.samples, count);
        QVERIFY2(r.maxAbsDiff <= 1e-4, qPrintable(QString("max abs difference %1; %2").arg(r.maxAbsDiff).arg(method)));
        QCOMPARE(r.samePrediction, count);
        QCOMPARE(r.fileAccuracy, r.liveAccuracy);

        if (!onnxRunnerAvailable()) {
            QCOMPARE(r.runtime, std::string("Strata CPU backend"));
            QVERIFY2(method.contains("NOT executed") && method.contains("without OpenCV"), qPrintable(method));
            QVERIFY_THROWS_EXCEPTION(OnnxRunError, OnnxRunner{file});
            return;
        }
        const std::string why = openCvCannotImport(c, opset);
        if (why.empty()) {
            QCOMPARE(r.runtime, onnxRunnerName());
            QVERIFY2(r.fallbackReason.empty(), r.fallbackReason.c_str());
            QVERIFY2(method.startsWith("ran the ONNX graph in OpenCV DNN 4."), qPrintable(method));
            // A graph without the normalization gets the inputs normalized with the file's stored statistics.
            QVERIFY2(method.contains(normalizationInGraph ? "normalization inside the graph"
                                                          : "normalized with the file's stored normalization"),
                     qPrintable(method));
            if (!normalizationInGraph) return;
            // Batches of different sizes through one imported network give the outputs of one big batch.
            OnnxRunner runner(file);
            QCOMPARE(runner.inputSize(), model->inputShape().numel());
            QVERIFY(runner.normalizationInGraph());
            const std::vector<float> whole = runner.run(raw.data(), count, count);
            const std::vector<float> pieces = runner.run(raw.data(), count, 16);
            QCOMPARE(whole.size(), size_t(count * classes));
            QVERIFY(maxAbsDiff(pieces.data(), whole) <= 1e-6);
            return;
        }
        // OpenCV cannot import this graph: stated, with OpenCV's own reason, and Strata ran the file's weights.
        QCOMPARE(r.runtime, std::string("Strata CPU backend"));
        QVERIFY(!r.fallbackReason.empty());
        QVERIFY2(method.startsWith("the ONNX graph was NOT executed: OpenCV DNN 4."), qPrintable(method));
        QVERIFY2(method.contains(QString::fromStdString(r.fallbackReason)), qPrintable(method));
        const QString fileName = QFileInfo(QString::fromStdString(file)).fileName();
        QVERIFY2(method.contains("initializers and embedded project of " + fileName + " were rebuilt into a Strata"),
                 qPrintable(method));
        try {
            OnnxRunner runner(file);
            QFAIL(qPrintable(QString::fromStdString(c.name + ": OpenCV imported a graph with " + why)));
        } catch (const OnnxRunError& e) {
            const QString what = QString::fromUtf8(e.what());
            QVERIFY2(what.contains(QString::fromStdString(file)) && what.contains("cannot import the graph") &&
                         what.contains(QString::fromStdString(e.reason())),
                     e.what());
            QCOMPARE(e.reason(), r.fallbackReason);
        }
    }

    // `predict` on an ONNX file: --runtime opencv runs the graph and agrees with --runtime strata; the default is
    // OpenCV where it can, and a graph it cannot import is run by Strata with the reason printed.
    void predictRuntimes() {
        const Case c = networkCase("net_cnn");
        auto backend = test::makeReferenceBackend();
        std::unique_ptr<Model> model;
        const ExportModel m = randomModel(c, *backend, model, 31);
        const std::string file = (m_dir.path() + "/predict_cnn.onnx").toStdString();
        writeOnnx(file, m);
        const int64_t count = 20;
        std::vector<float> raw, normalized;
        makeInputs(c, model->inputShape(), count, 8, raw, normalized);
        const std::string images = (m_dir.path() + "/images-idx3-ubyte").toStdString();
        writeIdxImages(images, raw, count, 28, 28);

        auto predict = [&](const std::string& modelFile, const std::string& input, std::vector<std::string> extra,
                           std::string& out, std::string& err) {
            std::vector<std::string> args{modelFile, input, "--count", std::to_string(count), "--top", "10"};
            args.insert(args.end(), extra.begin(), extra.end());
            std::ostringstream o, e;
            const int rc = runPredictCommand(args, o, e);
            out = o.str();
            err = e.str();
            return rc;
        };
        std::string strataOut, cvOut, defOut, err;
        QVERIFY2(predict(file, images, {"--runtime", "strata"}, strataOut, err) == 0, err.c_str());
        QVERIFY2(strataOut.find("\nruntime: Strata CPU backend\n") != std::string::npos, strataOut.c_str());
        // OpenCV only runs ONNX files.
        const std::string gguf = (m_dir.path() + "/predict_cnn.gguf").toStdString();
        writeGgufExport(gguf, m, ExportPrecision::F32);
        QCOMPARE(predict(gguf, images, {"--runtime", "opencv"}, defOut, err), 2);
        QVERIFY2(err.find("--runtime opencv runs .onnx files") != std::string::npos, err.c_str());
        QCOMPARE(predict(file, images, {"--runtime", "onnxruntime"}, defOut, err), 2);

        const int cvRc = predict(file, images, {"--runtime", "opencv"}, cvOut, err);
        if (!onnxRunnerAvailable()) {
            QCOMPARE(cvRc, 1);
            QVERIFY2(err.find("without OpenCV") != std::string::npos, err.c_str());
            QSKIP("built without OpenCV DNN: --runtime opencv is refused, as checked");
        }
        QVERIFY2(cvRc == 0, err.c_str());
        QVERIFY2(cvOut.find("\nruntime: " + onnxRunnerName() + " (ran the ONNX graph)\n") != std::string::npos,
                 cvOut.c_str());
        QVERIFY2(predict(file, images, {}, defOut, err) == 0, err.c_str());
        QVERIFY2(defOut.find("\nruntime: " + onnxRunnerName() + " (ran the ONNX graph)\n") != std::string::npos,
                 defOut.c_str());
        const auto a = predictedProbabilities(strataOut), b = predictedProbabilities(cvOut);
        QCOMPARE(a.size(), size_t(count));
        QCOMPARE(b.size(), size_t(count));
        for (size_t s = 0; s < a.size(); ++s) {
            QCOMPARE(a[s].size(), size_t(10));
            for (const auto& [name, p] : a[s]) {
                QVERIFY2(b[s].count(name), name.c_str());
                // Printed with 4 decimals: outputs within 1e-4 print at most one last digit apart.
                const double q = b[s].at(name);
                QVERIFY2(std::fabs(q - p) <= 1e-4 + 1e-9,
                         qPrintable(QString("sample %1 %2: %3 vs %4").arg(s).arg(name.c_str()).arg(p).arg(q)));
            }
        }

        // A graph OpenCV 4.6 cannot import (Gather with runtime indices): by default Strata runs the file and says
        // why; asked for OpenCV, it is an error naming the file.
        const Case t = networkCase("net_text");
        std::unique_ptr<Model> textModel;
        const ExportModel tm = randomModel(t, *backend, textModel, 32);
        const std::string textFile = (m_dir.path() + "/predict_text.onnx").toStdString();
        writeOnnx(textFile, tm);
        const std::string csv = (m_dir.path() + "/tokens.csv").toStdString();
        {
            std::ofstream f(csv);
            for (int i = 0; i < 12; ++i) f << (i ? "," : "") << "t" << i;
            f << "\n";
            for (int r = 0; r < 3; ++r)
                for (int i = 0; i < 12; ++i) f << (7 * r + 3 * i) % 50 << (i == 11 ? "\n" : ",");
        }
        QVERIFY2(predict(textFile, csv, {}, defOut, err) == 0, err.c_str());
        QVERIFY2(defOut.find("\nruntime: Strata CPU backend on the file's weights and embedded project; the ONNX "
                             "graph was not executed: " +
                             onnxRunnerName() + " cannot run it (") != std::string::npos,
                 defOut.c_str());
        QCOMPARE(predictedProbabilities(defOut).size(), size_t(3));
        QCOMPARE(predict(textFile, csv, {"--runtime", "opencv"}, cvOut, err), 1);
        QVERIFY2(err.find(textFile + ": " + onnxRunnerName() + " cannot import the graph: ") != std::string::npos,
                 err.c_str());
    }

    // onnxruntime, a runtime we did not write, on every layer and network case written above (all opsets): the
    // file's outputs on raw inputs equal Strata's on normalized ones. Unlike OpenCV 4.6 it runs every operator
    // we export (Gather, LayerNormalization), so no case falls back to the NumPy interpreter here.
    void onnxruntimeRunsEveryExport() {
        QVERIFY(m_ort.size() > 40);
        const std::string err = m_ort.run();
        QVERIFY2(err.empty(), err.c_str());
        double worstOverall = 0;
        for (size_t i = 0; i < m_ort.size(); ++i) {
            const std::vector<float>& got = m_ort.output(i);
            QVERIFY2(got.size() == m_ortExpected[i].size(), m_ort.model(i).c_str());
            const double worst = maxAbsDiff(got.data(), m_ortExpected[i]);
            worstOverall = std::max(worstOverall, worst);
            QVERIFY2(worst <= 1e-4, qPrintable(QString("%1: onnxruntime max abs difference %2")
                                                   .arg(QString::fromStdString(m_ort.model(i)))
                                                   .arg(worst)));
        }
        qInfo("onnxruntime ran %zu files; largest difference %.3g", m_ort.size(), worstOverall);
    }

    // Last slot: onnx.checker (full check with strict shape inference) over every file written above.
    void referenceCheckerAcceptsEveryFile() {
        QVERIFY(m_files.size() > 50);
        const std::string check = pythonCheck(m_files);
        if (check.rfind("SKIP", 0) == 0) QSKIP(check.c_str());
        QVERIFY2(check.empty(), check.c_str());
    }
};

QTEST_GUILESS_MAIN(TestExportOnnx)
#include "test_export_onnx.moc"
