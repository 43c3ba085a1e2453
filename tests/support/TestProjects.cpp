#include "tests/support/TestProjects.h"

#include <cmath>
#include <random>

#include "core/export/Onnx.h"
#include "tests/support/TestBackends.h"

namespace strata::test {

std::vector<int> addChain(Graph& graph, const std::vector<LayerDef>& layers) {
    std::vector<int> ids;
    for (const LayerDef& l : layers) {
        ids.push_back(graph.addNode(l.type, l.name, l.params));
        if (ids.size() > 1) graph.connect(ids[ids.size() - 2], ids.back());
    }
    return ids;
}

void useBlobs(Project& p, int64_t samples, int classes, const std::vector<int64_t>& shape) {
    p.dataset.kind = DatasetKind::Synthetic;
    p.dataset.syntheticSamples = samples;
    p.dataset.syntheticClasses = classes;
    p.dataset.syntheticShape = shape;
    p.dataset.validationSplit = 0.25;
    p.dataset.normalization = NormalizationMode::None;
}

Project blobsMlpProject(const std::string& name, int inputs, int classes, bool dropout) {
    Project p;
    p.name = name;
    std::vector<LayerDef> layers{
        {"Input", "input", Json{{"shape", {inputs}}}}, {"Dense", "dense1", Json{{"units", 32}}}, {"ReLU", "relu1"}};
    if (dropout) layers.push_back({"Dropout", "dropout", Json{{"rate", 0.2}}});
    layers.push_back({"Dense", "dense2", Json{{"units", classes}}});
    addChain(p.graph, layers);
    useBlobs(p, 1200, classes, {inputs});
    p.training.optimizer = OptimizerKind::Sgd;
    p.training.learningRate = 0.05;
    p.training.batchSize = 32;
    p.training.epochs = 1;
    p.training.seed = 7;
    p.training.threads = 1;
    return p;
}

Project convBatchNormProject() {
    Project p;
    p.name = "conv-batchnorm";
    addChain(p.graph, {{"Input", "input", Json{{"shape", {1, 12, 12}}}},
                       {"Conv2D", "conv", Json{{"filters", 8}, {"kernel", {3, 3}}, {"padding", {1, 1}}}},
                       {"BatchNorm", "bn"},
                       {"ReLU", "relu"},
                       {"Flatten", "flatten"},
                       {"Dropout", "dropout", Json{{"rate", 0.2}}},
                       {"Dense", "dense", Json{{"units", 4}}}});
    p.dataset.kind = DatasetKind::Synthetic;
    p.dataset.syntheticSamples = 1000;
    p.dataset.syntheticClasses = 4;
    p.dataset.syntheticShape = {1, 12, 12};
    p.dataset.validationSplit = 0.2;
    p.training.optimizer = OptimizerKind::Sgd;
    p.training.batchSize = 60;
    p.training.epochs = 1;
    p.training.learningRate = 0.05;
    p.training.deterministic = true;
    p.training.seed = 3;
    return p;
}

TrainerOptions oneRankDataParallel(Communicator& single, int64_t bucketBytes, bool async) {
    TrainerOptions o;
    o.telemetryIntervalMs = 0;
    o.communicator = &single;
    o.dataParallelWithOneRank = true;
    o.bucketBytes = bucketBytes;
    o.distMode = async ? DistMode::Async : DistMode::Sync;
    return o;
}

Project exampleOnBlobs(const std::string& file, const std::string& device) {
    Project p = readProject(sourcePath("examples/" + file));
    p.training.device = device;
    p.training.checkpointDir.clear();
    if (p.dataset.kind != DatasetKind::Text) {
        for (const Node* n : p.graph.nodes())
            if (n->type == "Input") useBlobs(p, 512, 10, n->params.at("shape").get<std::vector<int64_t>>());
    }
    return p;
}

ExportModel sentimentTextModel() {
    Project p;
    p.name = "sentiment";
    const int in = p.graph.addNode("Input", "tokens", {{"shape", {4}}});
    const int e = p.graph.addNode("Embedding", "embed", {{"vocab", 5}, {"dim", 2}});
    p.graph.connect(in, e);
    const int pool = p.graph.addNode("SequenceMeanPool", "mean", {{"masked", true}});
    p.graph.connect({e, "out"}, {pool, "in"});
    p.graph.connect({in, "out"}, {pool, "mask"});
    const int d = p.graph.addNode("Dense", "fc", {{"units", 2}});
    p.graph.connect(pool, d);
    p.dataset.kind = DatasetKind::Text;
    p.dataset.tokenizer = Tokenizer::Word;
    p.dataset.maxTokens = 4;
    ExportModel m;
    m.project = p;
    m.vocabulary = {"<pad>", "<unk>", "good", "bad", "fine"};
    m.weights["embed.weight"] = {100, 100, 0, 0, 1, 0, 0, 1, 0.5f, 0.5f};
    m.weights["fc.weight"] = {1, 0, 0, 1};
    m.weights["fc.bias"] = {0, 0};
    m.classNames = {"pos", "neg"};
    return m;
}

Project smallTransformerProject(int64_t length, int64_t vocab, bool maskedAttention) {
    Project p;
    p.name = "small transformer";
    Graph& g = p.graph;
    auto add = [&g](const std::string& type, const std::string& name, Json params, std::vector<int> from = {},
                    std::vector<std::string> ports = {"in"}) {
        const int id = g.addNode(type, name, std::move(params));
        for (size_t i = 0; i < from.size(); ++i) g.connect(from[i], id, ports[i]);
        return id;
    };
    const int in = add("Input", "tokens", Json{{"shape", {length}}});
    const int words = add("Embedding", "words", Json{{"vocab", vocab}, {"dim", 16}}, {in});
    const int pos = add("PositionalEmbedding", "positions", Json::object(), {words});
    const int att = maskedAttention ? add("MultiHeadSelfAttention", "attention", Json{{"heads", 2}, {"masked", true}},
                                          {pos, in}, {"in", "mask"})
                                    : add("MultiHeadSelfAttention", "attention", Json{{"heads", 4}}, {pos});
    const int res1 = add("Add", "residual1", Json::object(), {pos, att}, {"in0", "in1"});
    const int norm1 = add("LayerNorm", "norm1", Json::object(), {res1});
    const int ff1 = add("Dense", "ff1", Json{{"units", 32}}, {norm1});
    const int gelu = add("GELU", "gelu", Json::object(), {ff1});
    const int ff2 = add("Dense", "ff2", Json{{"units", 16}}, {gelu});
    const int res2 = add("Add", "residual2", Json::object(), {norm1, ff2}, {"in0", "in1"});
    const int mean = add("SequenceMeanPool", "mean", Json{{"masked", true}}, {res2, in}, {"in", "mask"});
    const int logits = add("Dense", "logits", Json{{"units", 4}}, {mean});
    add("Softmax", "probs", Json::object(), {logits});
    useBlobs(p, 64, 4, {length});
    return p;
}

Project smallTextCnnProject(int64_t length, int64_t vocab) {
    Project p;
    p.name = "small text cnn";
    addChain(p.graph, {{"Input", "tokens", Json{{"shape", {length}}}},
                       {"Embedding", "words", Json{{"vocab", vocab}, {"dim", 8}}},
                       {"Conv1D", "trigrams", Json{{"filters", 6}, {"kernel", 3}, {"padding", 1}}},
                       {"ReLU", "relu"},
                       {"Conv1D", "skips",
                        Json{{"filters", 5}, {"kernel", 2}, {"stride", 2}, {"dilation", 2}, {"use_bias", false}}},
                       {"SequenceMeanPool", "mean"},
                       {"Dense", "logits", Json{{"units", 3}}}});
    useBlobs(p, 64, 3, {length});
    return p;
}

DataSplit tokenIdSplit(int64_t count, int64_t length, int64_t vocab, unsigned seed) {
    DataSplit s;
    s.sampleShape = Shape{length};
    s.count = count;
    std::mt19937 rng(seed);
    for (int64_t i = 0; i < count; ++i) {
        const int64_t used = 3 + static_cast<int64_t>(rng() % static_cast<unsigned>(length - 2));
        for (int64_t t = 0; t < length; ++t)
            s.inputs.push_back(t < used ? static_cast<float>(1 + rng() % static_cast<unsigned>(vocab - 1)) : 0.0f);
    }
    s.labels.assign(static_cast<size_t>(count), 0);
    return s;
}

void writeInt8Onnx(const std::string& path, const ExportModel& model, const DataSplit& calibration) {
    QuantizationOptions o;
    o.calibrationSamples = calibration.count;
    const Int8Calibration c = calibrateInt8(model, calibration, o);
    OnnxExportOptions options;
    options.int8 = &c;
    writeOnnx(path, model, options);
}

ExportModel sentimentAttentionModel() {
    ExportModel m = sentimentTextModel();
    Graph& g = m.project.graph;
    const int in = g.nodeByName("tokens")->id, e = g.nodeByName("embed")->id, pool = g.nodeByName("mean")->id;
    g.disconnect({pool, "in"});
    const int att = g.addNode("MultiHeadSelfAttention", "attn", {{"heads", 1}, {"masked", true}});
    g.connect({e, "out"}, {att, "in"});
    g.connect({in, "out"}, {att, "mask"});
    g.connect({att, "out"}, {pool, "in"});
    // Q = b_q = (1, 0); K = (c x0, 0) with c = sqrt(2) ln 4, so the score of a key is ln 4 x its first
    // embedding value (1 for "good", 0 for the others); V = x.
    const float c = std::sqrt(2.0f) * std::log(4.0f);
    m.weights["attn.in_weight"] = {0, 0, 0, 0, c, 0, 0, 0, 1, 0, 0, 1};
    m.weights["attn.in_bias"] = {1, 0, 0, 0, 0, 0};
    m.weights["attn.out_weight"] = {1, 0, 0, 1};
    m.weights["attn.out_bias"] = {0, 0};
    return m;
}

std::string trainQuietly(const Project& project, const BackendOptions& options) {
    auto backend = makeCpuBackend(options);
    QuietObserver q;
    Trainer t(project, *backend, &q);
    if (t.run()) return {};
    return q.errors.empty() ? "training failed" : q.errors.front();
}

}  // namespace strata::test
