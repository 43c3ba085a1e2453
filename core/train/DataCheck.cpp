// DataCheck: see DataCheck.h.
#include "core/train/DataCheck.h"

#include <algorithm>

#include "core/data/ImageFolder.h"

namespace strata {

namespace {

std::string label(const Node& n) { return "'" + n.name + "' (" + n.type + ")"; }

// The parameter that sets a node's output size (a Dense's "units": ChannelFacts::countParam); empty for none.
std::string sizeParam(const Graph& graph, const GraphAnalysis& a, const Node& n) {
    return channelFactsOf(graph, a, n.id).countParam;
}

// The node a classifier's size is set on: from the output back through nodes that keep their input's shape
// (Softmax, Dropout, activations), the first with a size parameter (a Dense). Null when there is none on
// that path.
const Node* sizedLayer(const Graph& graph, const GraphAnalysis& a, const Node* output) {
    const Node* n = output;
    while (n && sizeParam(graph, a, *n).empty()) {
        const std::vector<std::string> ports = graph.inputPorts(n->id);
        if (ports.size() != 1) return nullptr;
        const std::optional<Edge> in = graph.edgeInto({n->id, ports[0]});
        if (!in) return nullptr;
        const Shape *mine = a.shapeOf(n->id), *before = a.shapeOf(in->from.node);
        if (!mine || !before || *mine != *before) return nullptr;
        n = graph.node(in->from.node);
    }
    return n;
}

}  // namespace

DataFacts dataFactsOf(const DatasetBundle& data) {
    DataFacts f;
    f.sampleShape = data.train.sampleShape;
    f.numClasses = data.numClasses;
    f.vocabularySize = static_cast<int64_t>(data.vocabulary.size());
    f.trainCount = data.train.count;
    f.task = data.task;
    f.targetShape = data.train.targetShape;
    return f;
}

DataFacts readDataFacts(const DatasetSettings& settings, const std::string& projectPath) {
    // loadDataset checks these settings as it reads them; the shortcuts below check them the same way.
    if (settings.kind == DatasetKind::Synthetic || settings.kind == DatasetKind::ImageFolder) {
        DatasetSettings probe = settings;
        DataFacts f;
        if (settings.kind == DatasetKind::Synthetic) {
            // Two samples generate in no time and make loadDataset check every setting a run checks.
            probe.syntheticSamples = std::max<int64_t>(2, settings.syntheticClasses);
            probe.validationSplit = 0.0;
            probe.trainLimit = probe.validationLimit = 0;
            f = dataFactsOf(loadDataset(probe, projectPath));
            f.trainCount = 0;
            return f;
        }
        if (settings.trainPath.empty() || settings.imageShape.size() != 3 ||
            (settings.imageShape[0] != 1 && settings.imageShape[0] != 3))
            return dataFactsOf(loadDataset(settings, projectPath, Streaming::Allowed));  // its error says why
        f.sampleShape = Shape(settings.imageShape);
        if (settings.task == TaskKind::ImageToImage) {
            if (settings.imageTarget == ImageTarget::Folder) {
                // The pairing needs the listings only: a missing or extra target is found before anything decodes.
                if (settings.targetPath.empty() ||
                    (!settings.validationPath.empty() && settings.validationTargetPath.empty()))
                    return dataFactsOf(loadDataset(settings, projectPath));  // its error says why
                const std::string train = resolveDatasetPath(projectPath, settings.trainPath);
                const data::ImageList list = data::listImages(train, settings.classNames, false);
                data::pairTargetImages(list, train, resolveDatasetPath(projectPath, settings.targetPath));
                if (!settings.validationPath.empty()) {
                    const std::string val = resolveDatasetPath(projectPath, settings.validationPath);
                    data::pairTargetImages(data::listImages(val, list.classNames, false), val,
                                           resolveDatasetPath(projectPath, settings.validationTargetPath));
                }
            }
            f.task = settings.task;
            f.targetShape = f.sampleShape;
            return f;
        }
        f.numClasses = static_cast<int>(
            data::listImages(resolveDatasetPath(projectPath, settings.trainPath), settings.classNames, false)
                .classNames.size());
        return f;
    }
    return dataFactsOf(loadDataset(settings, projectPath));
}

std::vector<DataMismatch> checkDataAgainstGraph(const Graph& graph, const DataFacts& facts) {
    const GraphAnalysis a = analyzeGraph(graph);
    std::vector<DataMismatch> out;
    std::vector<const Node*> sinks;
    for (const Node* n : graph.nodes())
        if (graph.edgesFrom(n->id).empty()) sinks.push_back(n);

    for (const Node* n : graph.nodes()) {
        const LayerType* type = graph.layerType(n->id);
        if (!type || !type->isGraphInput()) continue;
        const Shape* takes = a.shapeOf(n->id);
        if (!takes || *takes == facts.sampleShape) continue;
        DataMismatch m;
        m.node = n->id;
        m.message = "Input '" + n->name + "' expects " + takes->toString() + " but the data's samples are " +
                    facts.sampleShape.toString();
        m.fix = {n->id, "shape", Json(facts.sampleShape.dims()), "set its shape to " + facts.sampleShape.toString()};
        out.push_back(std::move(m));
    }

    // Token ids run up to the vocabulary's size - 1; an Embedding must have a row for each.
    if (facts.vocabularySize > 0)
        for (const Node* n : graph.nodes()) {
            const LayerType* type = graph.layerType(n->id);
            const std::string param = type ? type->vocabularyParam() : std::string();
            const auto params = a.params.find(n->id);
            if (param.empty() || params == a.params.end()) continue;
            const int64_t vocab = params->second.at(param).get<int64_t>();
            if (vocab >= facts.vocabularySize) continue;
            DataMismatch m;
            m.node = n->id;
            m.message = n->type + " '" + n->name + "' has a vocabulary of " + std::to_string(vocab) +
                        " but the data's has " + std::to_string(facts.vocabularySize) + " tokens (ids 0 to " +
                        std::to_string(facts.vocabularySize - 1) + "): ids from " + std::to_string(vocab) +
                        " up have no row";
            m.fix = {n->id, param, Json(facts.vocabularySize),
                     "set its " + param + " to " + std::to_string(facts.vocabularySize)};
            out.push_back(std::move(m));
        }

    // The engine trains one output (the analysis lists more as a problem of the graph).
    const Node* output = sinks.size() == 1 ? sinks.front() : nullptr;
    const Shape* gives = output ? a.shapeOf(output->id) : nullptr;
    const bool classes = facts.task == TaskKind::Classification;
    const Shape want = classes ? Shape{facts.numClasses} : facts.targetShape;
    if (gives && *gives != want) {
        DataMismatch m;
        m.node = output->id;
        const std::string what = facts.task == TaskKind::Regression   ? " targets"
                                 : facts.task == TaskKind::MultiLabel ? " labels"
                                                                      : " classes";
        m.message = "the model's output " + label(*output) + " is " + gives->toString() + " but the data has " +
                    (facts.task == TaskKind::ImageToImage ? "target images of " + want.toString()
                                                          : std::to_string(want.numel()) + what);
        const Node* sized = sizedLayer(graph, a, output);
        const Shape* sizedShape = sized ? a.shapeOf(sized->id) : nullptr;
        if (sized && sizedShape && sizedShape->rank() == 1 && want.rank() == 1) {
            const std::string param = sizeParam(graph, a, *sized);
            m.node = sized->id;
            m.message += sized == output ? std::string() : " (from " + label(*sized) + ")";
            m.fix = {sized->id, param, Json(want[0]), "set its " + param + " to " + std::to_string(want[0])};
        } else if (facts.task == TaskKind::ImageToImage) {
            m.message += ": make the output the input image's shape " + want.toString() +
                         " (a last convolution with as many filters as the image has channels)";
        } else {
            m.message +=
                ": make it " + want.toString() +
                (gives->rank() == 1 ? std::string(" (end the graph with a Dense of that many units)")
                                    : std::string(" (pool or flatten before a last Dense of that many units)"));
        }
        out.push_back(std::move(m));
    }
    return out;
}

std::string dataMismatchText(const std::vector<DataMismatch>& mismatches) {
    std::string text = "the data does not fit the graph";
    if (mismatches.size() > 1) text += " (" + std::to_string(mismatches.size()) + " problems)";
    text += ": ";
    for (size_t i = 0; i < mismatches.size(); ++i) {
        if (i > 0) text += "; ";
        text += mismatches[i].message;
        if (mismatches[i].fix.available()) text += ": " + mismatches[i].fix.text;
    }
    return text;
}

}  // namespace strata
