#include "tests/support/TestProjects.h"

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

}  // namespace strata::test
