// Saliency (core/infer/Saliency) and `strata-train predict --saliency`: Grad-CAM's channel weights and map against the
// class score's gradient taken by finite differences at the activation, a hand-built detector model whose two classes
// have their evidence in two corners of the image, token saliency against finite differences at the embedding vectors
// (padding left out), bilinear upsampling on a hand-computed case, weights never written, and the errors.
#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/CliCommands.h"
#include "core/backend/BackendRegistry.h"
#include "core/data/ImageFile.h"
#include "core/export/ExportModel.h"
#include "core/graph/Graph.h"
#include "core/graph/Model.h"
#include "core/infer/Predict.h"
#include "core/infer/Saliency.h"
#include "core/train/Checkpoint.h"
#include "tests/support/TestProjects.h"

using namespace strata;

namespace {

using Weights = std::map<std::string, std::vector<float>>;

std::unique_ptr<Backend> cpu() {
    BackendOptions one;
    one.threads = 1;
    return backendRegistry().create(Device::parse("cpu"), one);
}

int chain(Graph& g, int from, const std::string& type, const std::string& name, const Json& params = Json::object()) {
    const int id = g.addNode(type, name, params);
    if (from >= 0) g.connect(from, id);
    return id;
}

// input [1,6,6] -> conv1 (3) -> relu1 -> conv2 (4) -> relu2 -> pool -> flatten -> dense1 (5) -> tanh -> dense2 (3)
// -> softmax.
Graph tinyConvGraph() {
    Graph g;
    int n = chain(g, -1, "Input", "input", {{"shape", {1, 6, 6}}});
    n = chain(g, n, "Conv2D", "conv1", {{"filters", 3}, {"kernel", {3, 3}}, {"padding", {1, 1}}});
    n = chain(g, n, "ReLU", "relu1");
    n = chain(g, n, "Conv2D", "conv2", {{"filters", 4}, {"kernel", {3, 3}}, {"padding", {1, 1}}});
    n = chain(g, n, "ReLU", "relu2");
    n = chain(g, n, "MaxPool2D", "pool", {{"kernel", {2, 2}}});
    n = chain(g, n, "Flatten", "flatten");
    n = chain(g, n, "Dense", "dense1", {{"units", 5}});
    n = chain(g, n, "Tanh", "tanh");
    n = chain(g, n, "Dense", "dense2", {{"units", 3}});
    chain(g, n, "Softmax", "softmax");
    return g;
}

// The graph's initial weights with every bias made random too (zero biases would leave ReLUs at their kinks).
Weights randomWeights(const Graph& g, Backend& backend, uint64_t seed) {
    auto m = compile(g, backend, seed);
    Weights w = modelWeights(*m);
    std::mt19937 rng(static_cast<unsigned>(seed));
    std::uniform_real_distribution<float> u(-0.3f, 0.3f);
    for (auto& [name, v] : w)
        if (name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0)
            for (float& x : v) x = u(rng);
    return w;
}

std::vector<float> randomInput(int64_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = u(rng);
    return x;
}

int nodeId(const Model& m, const std::string& name) { return m.graph().nodeByName(name)->id; }

// The graph compiled on its own (not through SaliencyModel), unfused so that every layer's forward hook runs.
std::unique_ptr<Model> reference(const Graph& g, const Weights& w, Backend& backend) {
    auto m = compile(g, backend, 0, /*fuse=*/false);
    applyWeights(*m, w);
    return m;
}

// d(score of `cls`)/d(output of `node`) by central differences, the score being output `cls` of node `scoreNode`
// (the logits, before the Softmax): each value of the node's output is moved by +-eps during forward (the model's
// forward hook), the rest of the network runs on it.
std::vector<double> finiteDifferenceGradient(Model& m, Backend& backend, const std::vector<float>& input, int node,
                                             int scoreNode, int cls, double eps) {
    const Tensor x = backend.fromHost(m.inputShape().withBatch(1), input.data());
    m.forward(x, false);
    const int64_t n = m.nodeOutput(node)->numel();
    std::vector<double> grad(static_cast<size_t>(n));
    int64_t index = 0;
    float delta = 0;
    m.setForwardHook([&](int id, Tensor& out) {
        if (id == node) out.f32()[index] += delta;
    });
    auto score = [&] {
        m.forward(x, false);
        const Tensor& out = *m.nodeOutput(scoreNode);
        std::vector<float> s(static_cast<size_t>(out.numel()));
        backend.toHost(out, s.data());
        return double(s[static_cast<size_t>(cls)]);
    };
    for (index = 0; index < n; ++index) {
        delta = float(eps);
        const double up = score();
        delta = float(-eps);
        const double down = score();
        grad[static_cast<size_t>(index)] = (up - down) / (2 * eps);
    }
    m.setForwardHook({});
    m.forward(x, false);
    return grad;
}

std::vector<float> hostOutput(Model& m, Backend& backend, int node) {
    const Tensor* t = m.nodeOutput(node);
    std::vector<float> v(static_cast<size_t>(t->numel()));
    backend.toHost(*t, v.data());
    return v;
}

void expectThrows(const std::function<void()>& f, const QStringList& parts) {
    try {
        f();
    } catch (const std::invalid_argument& e) {
        const QString what = QString::fromStdString(e.what());
        for (const QString& p : parts) QVERIFY2(what.contains(p), qPrintable(what + " lacks: " + p));
        return;
    }
    QFAIL(qPrintable("no std::invalid_argument; expected one saying " + parts.join(" / ")));
}

}  // namespace

class TestSaliency : public QObject {
    Q_OBJECT

private slots:
    // [[0, 1], [2, 3]] to 4 x 4 with half-pixel centres: source x of outputs -0.25 (clamped to 0), 0.25, 0.75,
    // 1.25 (clamped to 1), the same for y.
    void upsamplesBilinearly() {
        const std::vector<float> up = upsampleBilinear({0, 1, 2, 3}, 2, 2, 4, 4);
        const std::vector<float> expected = {0,    0.25f, 0.75f, 1,    0.5f, 0.75f, 1.25f, 1.5f,
                                             1.5f, 1.75f, 2.25f, 2.5f, 2,    2.25f, 2.75f, 3};
        QCOMPARE(up.size(), expected.size());
        for (size_t i = 0; i < up.size(); ++i)
            QVERIFY2(std::abs(up[i] - expected[i]) < 1e-6f, qPrintable(QString::number(i)));
        // Same size: the values themselves.
        QCOMPARE(upsampleBilinear({5, 6, 7}, 1, 3, 1, 3), (std::vector<float>{5, 6, 7}));
    }

    // Grad-CAM's weights are the spatial means of d(logit)/d(activation); here that gradient is taken by finite
    // differences at the ReLU after conv2 (the default layer's activation), and the map follows from it.
    void gradCamMatchesFiniteDifferences() {
        auto backend = cpu();
        const Graph g = tinyConvGraph();
        const Weights w = randomWeights(g, *backend, 11);
        SaliencyModel sm(g, w, *backend);
        QCOMPARE(sm.classes(), 3);
        const std::vector<GradCamLayer> layers = sm.gradCamLayers();
        QCOMPARE(layers.size(), size_t(2));
        QCOMPARE(layers[0].name, std::string("conv1"));
        QCOMPARE(layers[1].shape, Shape({4, 6, 6}));
        const std::vector<float> x = randomInput(36, 5);
        for (int cls = 0; cls < 3; ++cls) {
            const GradCam r = sm.gradCam(x.data(), cls);
            QCOMPARE(r.layer, std::string("conv2"));
            QCOMPARE(r.activationNode, std::string("relu2"));
            QCOMPARE(r.channels, int64_t(4));
            QCOMPARE(r.height, int64_t(6));
            const auto ref = reference(g, w, *backend);
            Model& m = *ref;
            const int relu2 = nodeId(m, "relu2"), dense2 = nodeId(m, "dense2");
            const std::vector<double> fd = finiteDifferenceGradient(m, *backend, x, relu2, dense2, cls, 1e-3);
            const std::vector<float> a = hostOutput(m, *backend, relu2);
            // The logit, not the probability: the Softmax is not part of the score.
            const std::vector<float> logits = hostOutput(m, *backend, dense2);
            QVERIFY(std::abs(r.score - logits[size_t(cls)]) < 1e-5f);
            std::vector<double> cam(36, 0.0);
            double nonzero = 0;
            for (int c = 0; c < 4; ++c) {
                double mean = 0;
                for (int i = 0; i < 36; ++i) mean += fd[size_t(c * 36 + i)] / 36;
                nonzero = std::max(nonzero, std::abs(mean));
                QVERIFY2(std::abs(r.weights[size_t(c)] - mean) < 1e-3 + 0.02 * std::abs(mean),
                         qPrintable(QStringLiteral("class %1 channel %2: %3 vs %4")
                                        .arg(cls)
                                        .arg(c)
                                        .arg(r.weights[size_t(c)])
                                        .arg(mean)));
                for (int i = 0; i < 36; ++i) cam[size_t(i)] += mean * a[size_t(c * 36 + i)];
            }
            QVERIFY(nonzero > 1e-3);  // a test of something: the class's score does depend on the map
            double top = 0;
            for (int i = 0; i < 36; ++i) {
                const double v = std::max(0.0, cam[size_t(i)]);
                top = std::max(top, v);
                QVERIFY2(std::abs(r.featureMap[size_t(i)] - v) < 2e-3 + 0.02 * v, qPrintable(QString::number(i)));
            }
            QVERIFY(!r.empty);
            // The feature map is the input's size here: the map is it divided by its maximum.
            for (int i = 0; i < 36; ++i)
                QVERIFY(std::abs(r.map[size_t(i)] - std::max(0.0, cam[size_t(i)]) / top) < 0.02);
            QCOMPARE(*std::max_element(r.map.begin(), r.map.end()), 1.0f);
        }
        // A named layer: conv1 through its ReLU; a pooling (spatial, nothing after it an activation) as it is.
        const GradCam first = sm.gradCam(x.data(), 1, "conv1");
        QCOMPARE(first.activationNode, std::string("relu1"));
        QCOMPARE(first.channels, int64_t(3));
        const GradCam pooled = sm.gradCam(x.data(), 1, "pool");
        QCOMPARE(pooled.activationNode, std::string("pool"));
        QCOMPARE(pooled.featureHeight, int64_t(3));
        QCOMPARE(pooled.map.size(), size_t(36));  // upsampled to the input's 6 x 6
    }

    // Conv2D -> BatchNorm -> ReLU: the map weighed is the ReLU's, from the convolution or the normalization.
    void followsBatchNormToTheActivation() {
        auto backend = cpu();
        const Graph g = test::convBatchNormProject().graph;
        SaliencyModel sm(g, randomWeights(g, *backend, 4), *backend);
        const std::vector<float> x = randomInput(144, 2);
        QCOMPARE(sm.gradCam(x.data(), 0).activationNode, std::string("relu"));
        QCOMPARE(sm.gradCam(x.data(), 0, "bn").activationNode, std::string("relu"));
        QCOMPARE(sm.gradCam(x.data(), 0, "relu").activationNode, std::string("relu"));
    }

    // Frozen nodes (transfer learning) still get their gradient: the saliency model unfreezes them.
    void frozenLayersAreExplainedToo() {
        auto backend = cpu();
        Graph g = tinyConvGraph();
        const Weights w = randomWeights(g, *backend, 11);
        const std::vector<float> x = randomInput(36, 5);
        SaliencyModel plain(g, w, *backend);
        const GradCam expected = plain.gradCam(x.data(), 2, "conv1");
        for (const char* name : {"conv1", "conv2", "dense1"}) g.setTrainable(g.nodeByName(name)->id, false);
        SaliencyModel frozen(g, w, *backend);
        const GradCam r = frozen.gradCam(x.data(), 2, "conv1");
        QCOMPARE(r.weights, expected.weights);
        QCOMPARE(r.map, expected.map);
    }

    // Two detectors (a plus and an X, 3 x 3 matched filters), averaged over the image, each the score of one
    // class; the image holds a plus in its top-left quarter and an X in its bottom-right one. Each class's map
    // has its mass where its own pattern is.
    void classEvidenceInOneRegion() {
        auto backend = cpu();
        Graph g;
        int n = chain(g, -1, "Input", "input", {{"shape", {1, 12, 12}}});
        n = chain(g, n, "Conv2D", "detect", {{"filters", 2}, {"kernel", {3, 3}}, {"padding", {1, 1}}});
        n = chain(g, n, "ReLU", "relu");
        n = chain(g, n, "GlobalAvgPool", "gap");
        chain(g, n, "Dense", "head", {{"units", 2}, {"use_bias", false}});
        const std::vector<float> plus = {0, 1, 0, 1, 1, 1, 0, 1, 0};
        const std::vector<float> cross = {1, 0, 1, 0, 1, 0, 1, 0, 1};
        Weights w;
        for (const auto& pattern : {plus, cross})
            for (float v : pattern) w["detect.weight"].push_back(2 * v - 1);
        // +1 on the pattern, -1 off it: 5 on the pattern itself, at most 4 - 0 on any other 0/1 patch.
        w["detect.bias"] = {-4.5f, -4.5f};
        w["head.weight"] = {1, 0, 0, 1};
        SaliencyModel sm(g, w, *backend);
        std::vector<float> image(144, 0.0f);
        std::mt19937 rng(3);
        std::uniform_real_distribution<float> noise(0.0f, 0.01f);
        for (float& v : image) v = noise(rng);
        auto stamp = [&](const std::vector<float>& p, int row, int col) {
            for (int r = 0; r < 3; ++r)
                for (int c = 0; c < 3; ++c)
                    if (p[size_t(r * 3 + c)] > 0) image[size_t((row + r - 1) * 12 + col + c - 1)] = 1.0f;
        };
        stamp(plus, 2, 3);
        stamp(cross, 8, 9);
        auto massIn = [](const GradCam& r, int rows0, int cols0) {
            double inside = 0, total = 0;
            for (int y = 0; y < 12; ++y)
                for (int x = 0; x < 12; ++x) {
                    const double v = r.map[size_t(y * 12 + x)];
                    total += v;
                    if (y >= rows0 && y < rows0 + 6 && x >= cols0 && x < cols0 + 6) inside += v;
                }
            return inside / total;
        };
        const GradCam plusMap = sm.gradCam(image.data(), 0);
        const GradCam crossMap = sm.gradCam(image.data(), 1);
        QCOMPARE(plusMap.activationNode, std::string("relu"));
        qInfo("plus: %.3f of the map top-left; X: %.3f bottom-right", massIn(plusMap, 0, 0), massIn(crossMap, 6, 6));
        QVERIFY(massIn(plusMap, 0, 0) > 0.95);
        QVERIFY(massIn(crossMap, 6, 6) > 0.95);
        // The brightest point is each pattern's centre.
        const auto peak = [](const GradCam& r) {
            return int(std::max_element(r.map.begin(), r.map.end()) - r.map.begin());
        };
        QCOMPARE(peak(plusMap), 2 * 12 + 3);
        QCOMPARE(peak(crossMap), 8 * 12 + 9);
        // A class with no positive evidence anywhere: an empty map, said so.
        w["head.weight"] = {-1, 0, 0, 1};
        SaliencyModel negative(g, w, *backend);
        const GradCam none = negative.gradCam(image.data(), 0);
        QVERIFY(none.empty);
        QCOMPARE(*std::max_element(none.map.begin(), none.map.end()), 0.0f);
    }

    // Token saliency: per real token the norm of d(logit)/d(embedding vector) (or its dot product with the
    // vector), each against finite differences at the Embedding's output; padding positions (id 0) are left out
    // of the values and of the normalization, although the score does depend on their vectors here.
    void tokenSaliencyMatchesFiniteDifferences() {
        auto backend = cpu();
        Graph g;
        int n = chain(g, -1, "Input", "input", {{"shape", {6}}});
        n = chain(g, n, "Embedding", "embed", {{"vocab", 12}, {"dim", 4}});
        n = chain(g, n, "Flatten", "flatten");
        n = chain(g, n, "Dense", "dense1", {{"units", 5}});
        n = chain(g, n, "Tanh", "tanh");
        chain(g, n, "Dense", "dense2", {{"units", 3}});
        const Weights w = randomWeights(g, *backend, 21);
        SaliencyModel sm(g, w, *backend);
        QVERIFY(sm.takesTokens());
        const std::vector<float> ids = {3, 7, 1, 11, 0, 0};
        for (const TokenSaliencyMode mode : {TokenSaliencyMode::GradientNorm, TokenSaliencyMode::GradientTimesInput}) {
            const TokenSaliency r = sm.tokenSaliency(ids.data(), 2, mode);
            QCOMPARE(r.embeddingNode, std::string("embed"));
            const auto ref = reference(g, w, *backend);
            Model& m = *ref;
            const int embed = nodeId(m, "embed");
            const std::vector<double> fd =
                finiteDifferenceGradient(m, *backend, ids, embed, nodeId(m, "dense2"), 2, 1e-3);
            const std::vector<float> e = hostOutput(m, *backend, embed);
            QCOMPARE(r.values.size(), size_t(6));
            double top = 0;
            std::vector<double> expected(6, 0.0);
            for (int t = 0; t < 6; ++t) {
                double v = 0;
                for (int d = 0; d < 4; ++d) {
                    const double gd = fd[size_t(t * 4 + d)];
                    v += mode == TokenSaliencyMode::GradientNorm ? gd * gd : gd * e[size_t(t * 4 + d)];
                }
                if (mode == TokenSaliencyMode::GradientNorm) v = std::sqrt(v);
                if (t >= 4) {
                    QVERIFY(std::abs(v) > 1e-3);  // padding does move the score
                    continue;
                }
                expected[size_t(t)] = v;
                top = std::max(top, std::abs(v));
            }
            for (int t = 0; t < 6; ++t) {
                QCOMPARE(bool(r.isToken[size_t(t)]), t < 4);
                QVERIFY2(
                    std::abs(r.raw[size_t(t)] - expected[size_t(t)]) < 1e-3 + 0.02 * std::abs(expected[size_t(t)]),
                    qPrintable(
                        QStringLiteral("position %1: %2 vs %3").arg(t).arg(r.raw[size_t(t)]).arg(expected[size_t(t)])));
                QVERIFY(std::abs(r.values[size_t(t)] - expected[size_t(t)] / top) < 0.02);
            }
            QCOMPARE(r.values[4], 0.0f);
        }
    }

    // The weights are read, never written: bit-identical after Grad-CAM and token saliency, and results repeat.
    void weightsAreNeverWritten() {
        auto backend = cpu();
        const Graph g = tinyConvGraph();
        const Weights w = randomWeights(g, *backend, 11);
        SaliencyModel sm(g, w, *backend);
        const Weights before = modelWeights(sm.model());
        const std::vector<float> x = randomInput(36, 9);
        const GradCam a = sm.gradCam(x.data(), 0);
        const GradCam b = sm.gradCam(x.data(), 0, "conv1");
        const GradCam c = sm.gradCam(x.data(), 0);
        QCOMPARE(modelWeights(sm.model()), before);
        for (const auto& [name, v] : before) QCOMPARE(v, w.at(name));
        QCOMPARE(a.map, c.map);
        QVERIFY(a.map != b.map);
    }

    // strata-train predict --saliency: the JSON holds core's map for each sample's predicted class, the PNG the
    // first map as gray levels; a text model's token scores; the refusals.
    void predictCommandWritesSaliency() {
        QTemporaryDir dir;
        auto backend = cpu();
        ExportModel m;
        m.project.name = "tiny conv";
        m.project.graph = tinyConvGraph();
        m.weights = randomWeights(m.project.graph, *backend, 11);
        m.classNames = {"a", "b", "c"};
        const std::string model = dir.filePath("conv.safetensors").toStdString();
        writeSafetensorsExport(model, m, ExportPrecision::F32);
        const std::string image = dir.filePath("in.pgm").toStdString();
        {
            std::ofstream f(image);
            f << "P2 6 6 255\n";
            for (int i = 0; i < 36; ++i) f << (i * 37) % 256 << " ";
        }
        auto run = [](const std::vector<std::string>& args, std::string* err = nullptr) {
            std::ostringstream out, errors;
            const int rc = runPredictCommand(args, out, errors);
            if (err) *err = errors.str();
            return rc;
        };
        const std::string json = dir.filePath("s.json").toStdString(), png = dir.filePath("s.png").toStdString();
        QCOMPARE(run({model, image, "--saliency", json}), 0);
        QCOMPARE(run({model, image, "--saliency", png}), 0);

        const ExportModel loaded = loadModelFile(model);
        PredictInputs in = readPredictInputs(image, loaded, Shape{1, 6, 6}, 1);
        applyNormalization(in.values, loaded.normalization);
        SaliencyModel sm(loaded, *backend);
        const Predictions p = predictSamples(sm.model(), in.values.data(), 1);
        const GradCam expected = sm.gradCam(in.values.data(), p.predicted[0]);
        std::ifstream jf(json);
        const nlohmann::json doc = nlohmann::json::parse(jf);
        QCOMPARE(doc["kind"].get<std::string>(), std::string("grad_cam"));
        const nlohmann::json& s0 = doc["samples"][0];
        QCOMPARE(s0["class"].get<int>(), p.predicted[0]);
        QCOMPARE(s0["layer"].get<std::string>(), std::string("conv2"));
        QCOMPARE(s0["map"].get<std::vector<float>>(), expected.map);
        const data::Image gray = data::readImageFile(png);
        QCOMPARE(gray.channels, int64_t(1));
        QCOMPARE(gray.width, int64_t(6));
        for (size_t i = 0; i < 36; ++i) QCOMPARE(gray.values[i], float(std::lround(255.0 * expected.map[i])));
        // Another class and layer, asked for.
        QCOMPARE(run({model, image, "--saliency", json, "--saliency-class", "2", "--saliency-layer", "conv1"}), 0);
        std::ifstream jf2(json);
        const nlohmann::json other = nlohmann::json::parse(jf2)["samples"][0];
        QCOMPARE(other["class"].get<int>(), 2);
        QCOMPARE(other["map"].get<std::vector<float>>(), sm.gradCam(in.values.data(), 2, "conv1").map);

        // A text model: each token's score (the mean-pooled model gives each real token the same), padding 0.
        const std::string text = dir.filePath("text.safetensors").toStdString();
        writeSafetensorsExport(text, test::sentimentTextModel(), ExportPrecision::F32);
        QCOMPARE(run({text, "--text", "good bad", "--saliency", json}), 0);
        std::ifstream tf(json);
        const nlohmann::json t = nlohmann::json::parse(tf);
        QCOMPARE(t["kind"].get<std::string>(), std::string("token_saliency"));
        QCOMPARE(t["samples"][0]["token_ids"].get<std::vector<int>>(), (std::vector<int>{2, 3, 0, 0}));
        QCOMPARE(t["samples"][0]["values"].get<std::vector<float>>(), (std::vector<float>{1, 1, 0, 0}));

        std::string err;
        QVERIFY(run({text, "--text", "good", "--saliency", png}, &err) != 0);
        QVERIFY2(QString::fromStdString(err).contains("a PNG holds a Grad-CAM map"), err.c_str());
        QVERIFY(run({model, image, "--saliency", "out.txt"}, &err) != 0);
        QVERIFY2(QString::fromStdString(err).contains("give a .png (a Grad-CAM map) or .json file"), err.c_str());
        QVERIFY(run({model, image, "--saliency-layer", "conv1"}, &err) != 0);
        QVERIFY2(QString::fromStdString(err).contains("go with --saliency"), err.c_str());
        QVERIFY(run({model, image, "--saliency", json, "--saliency-layer", "dense1"}, &err) != 0);
        QVERIFY2(QString::fromStdString(err).contains("'dense1' (Dense) gives [5]"), err.c_str());
    }

    void errorsNameTheNode() {
        auto backend = cpu();
        const Graph g = tinyConvGraph();
        SaliencyModel sm(g, randomWeights(g, *backend, 1), *backend);
        const std::vector<float> x = randomInput(36, 1);
        expectThrows([&] { sm.gradCam(x.data(), 0, "dense1"); },
                     {"'dense1'", "Dense", "[5]", "not a feature map", "conv1, conv2"});
        expectThrows([&] { sm.gradCam(x.data(), 0, "nosuch"); }, {"no node named 'nosuch'", "conv1, conv2"});
        expectThrows([&] { sm.gradCam(x.data(), 0, "input"); }, {"'input'", "no gradient reaches it"});
        expectThrows([&] { sm.gradCam(x.data(), 3); }, {"class 3", "3 classes"});
        expectThrows([&] { sm.gradCam(x.data(), -1); }, {"class -1"});
        expectThrows([&] { sm.tokenSaliency(x.data(), 0); }, {"no Embedding", "Grad-CAM"});
        QVERIFY(!sm.takesTokens());

        Graph mlp;
        int n = chain(mlp, -1, "Input", "input", {{"shape", {1, 6, 6}}});
        n = chain(mlp, n, "Flatten", "flatten");
        chain(mlp, n, "Dense", "dense", {{"units", 3}});
        SaliencyModel plain(mlp, randomWeights(mlp, *backend, 1), *backend);
        QVERIFY(plain.gradCamLayers().empty());
        expectThrows([&] { plain.gradCam(x.data(), 0); }, {"no Conv2D layer"});
        expectThrows([&] { plain.gradCam(x.data(), 0, "dense"); }, {"'dense'", "not a feature map"});
    }
};

QTEST_GUILESS_MAIN(TestSaliency)
#include "test_saliency.moc"
