#include "core/train/ProjectFingerprint.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "core/layers/LayerRegistry.h"
#include "core/train/RunFolder.h"

namespace strata {

namespace {}  // namespace

std::map<std::string, Shape> graphParameterShapes(const Graph& graph) {
    std::map<std::string, Shape> out;
    const GraphAnalysis analysis = analyzeGraph(graph);
    if (!analysis.ok()) return out;
    for (const Node* n : graph.nodes()) {
        const LayerType* type = layerRegistry().find(n->type);
        if (!type) return {};
        std::vector<Shape> inputs;
        for (const std::string& port : graph.inputPorts(n->id))
            inputs.push_back(analysis.outputShapes.at(graph.edgeInto({n->id, port})->from.node));
        for (const ParameterSpec& s : type->parameterSpecs(analysis.params.at(n->id), inputs))
            out.emplace(n->name + "." + s.name, s.shape);
    }
    return out;
}

namespace {

ProjectFingerprint modelPart(const Project& project) {
    ProjectFingerprint f;
    const Graph& g = project.graph;
    for (const Node* n : g.nodes()) f.layers.push_back(n->name + " (" + n->type + ")");
    std::sort(f.layers.begin(), f.layers.end());
    for (const Edge& e : g.edges()) {
        const Node* from = g.node(e.from.node);
        const Node* to = g.node(e.to.node);
        if (from && to) f.connections.push_back(from->name + " -> " + to->name + "." + e.to.port);
    }
    std::sort(f.connections.begin(), f.connections.end());
    f.parameters = graphParameterShapes(g);
    f.task = "dataset " + settingName(project.dataset.kind);
    if (project.dataset.kind == DatasetKind::Text) f.task += " (" + settingName(project.dataset.tokenizer) + " tokens)";
    f.task += ", loss " + settingName(project.training.loss);
    return f;
}

// "[a, b, c]", at most `limit` entries, then how many more.
std::string listText(const std::vector<std::string>& items, size_t limit = 12) {
    std::string s = "[";
    for (size_t i = 0; i < items.size() && i < limit; ++i) s += (i ? ", " : "") + items[i];
    if (items.size() > limit) s += ", ... (" + std::to_string(items.size()) + " in all)";
    return s + "]";
}

// The first entry of `a` missing from `b` (both sorted), or empty.
std::string firstMissing(const std::vector<std::string>& a, const std::vector<std::string>& b) {
    for (const std::string& x : a)
        if (!std::binary_search(b.begin(), b.end(), x)) return x;
    return {};
}

std::string number(float v) {
    std::ostringstream s;
    s.precision(6);
    s << v;
    return s.str();
}

std::string normalizationText(const Normalization& n, bool dataKnown) {
    if (n.mode == "none" || !dataKnown) return n.mode;
    if (!n.featureMean.empty())
        return n.mode + " (" + std::to_string(n.featureMean.size()) + " per-feature means and deviations)";
    return n.mode + " ((x*" + number(n.scale) + " - " + number(n.mean) + ")/" + number(n.std) + ")";
}

bool near(float a, float b) {
    if (a == b) return true;
    if (!std::isfinite(a) || !std::isfinite(b)) return false;
    return std::fabs(a - b) <= 1e-3f * std::max({std::fabs(a), std::fabs(b), 1e-6f});
}

bool sameStatistics(const Normalization& a, const Normalization& b) {
    if (!near(a.scale, b.scale) || !near(a.mean, b.mean) || !near(a.std, b.std)) return false;
    if (a.featureMean.size() != b.featureMean.size() || a.featureStd.size() != b.featureStd.size()) return false;
    for (size_t i = 0; i < a.featureMean.size(); ++i)
        if (!near(a.featureMean[i], b.featureMean[i])) return false;
    for (size_t i = 0; i < a.featureStd.size(); ++i)
        if (!near(a.featureStd[i], b.featureStd[i])) return false;
    return true;
}

}  // namespace

ProjectFingerprint projectFingerprint(const Project& project, const std::vector<std::string>& classNames,
                                      const Normalization& normalization, const std::vector<std::string>& vocabulary) {
    ProjectFingerprint f = modelPart(project);
    f.classNames = classNames;
    f.normalization = normalization;
    f.vocabulary = vocabulary;
    return f;
}

ProjectFingerprint checkpointFingerprint(const Checkpoint& c) {
    return projectFingerprint(c.project, c.classNames, c.normalization, c.vocabulary);
}

ProjectFingerprint projectSettingsFingerprint(const Project& project) {
    ProjectFingerprint f = modelPart(project);
    f.dataKnown = false;
    f.classNames = project.dataset.classNames;
    // As loadDataset makes it: token ids go to an Embedding untouched, whatever the setting says.
    f.normalization.mode =
        project.dataset.kind == DatasetKind::Text ? std::string("none") : settingName(project.dataset.normalization);
    return f;
}

std::vector<std::string> fingerprintDifferences(const ProjectFingerprint& saved, const ProjectFingerprint& project,
                                                const std::string& what) {
    std::vector<std::string> out;
    const std::string its = "the " + what + "'s ";
    if (saved.layers != project.layers) {
        std::vector<std::string> parts;
        if (const std::string x = firstMissing(saved.layers, project.layers); !x.empty())
            parts.push_back(its + "layer " + x + " is not in the project");
        if (const std::string x = firstMissing(project.layers, saved.layers); !x.empty())
            parts.push_back("the project's layer " + x + " is not in the " + what);
        std::string s = "the layers differ";
        for (size_t i = 0; i < parts.size(); ++i) s += (i ? "; " : " (") + parts[i];
        out.push_back(s + (parts.empty() ? "" : ")"));
    } else if (saved.connections != project.connections) {
        const std::string onlySaved = firstMissing(saved.connections, project.connections);
        out.push_back("the layers are connected differently (" +
                      (!onlySaved.empty()
                           ? its + "graph has " + onlySaved + ", the project's does not"
                           : "the project's graph has " + firstMissing(project.connections, saved.connections) +
                                 ", the " + what + "'s does not") +
                      ")");
    }
    // The first parameter that one side lacks or shapes differently (both graphs analyzed).
    if (saved.parameters != project.parameters && !saved.parameters.empty() && !project.parameters.empty()) {
        std::string first;
        for (const auto& [name, shape] : saved.parameters) {
            auto it = project.parameters.find(name);
            if (it == project.parameters.end())
                first = its + "parameter " + name + " " + shape.toString() + " is not in the project";
            else if (it->second != shape)
                first = its + name + " is " + shape.toString() + "; the project's is " + it->second.toString();
            if (!first.empty()) break;
        }
        for (const auto& [name, shape] : project.parameters)
            if (first.empty() && !saved.parameters.count(name))
                first = "the project's parameter " + name + " " + shape.toString() + " is not in the " + what;
        out.push_back(first);
    }
    if (saved.task != project.task) out.push_back(its + "task is " + saved.task + "; the project's is " + project.task);
    const bool bothKnowData = saved.dataKnown && project.dataKnown;
    if ((bothKnowData || !project.classNames.empty()) && saved.classNames != project.classNames)
        out.push_back(its + "classes are " + listText(saved.classNames) + "; the project's are " +
                      listText(project.classNames));
    if (saved.normalization.mode != project.normalization.mode ||
        (bothKnowData && !sameStatistics(saved.normalization, project.normalization)))
        out.push_back(its + "input normalization is " + normalizationText(saved.normalization, bothKnowData) +
                      "; the project's is " + normalizationText(project.normalization, bothKnowData));
    if (bothKnowData && saved.vocabulary != project.vocabulary) {
        const size_t n = std::min(saved.vocabulary.size(), project.vocabulary.size());
        size_t i = 0;
        while (i < n && saved.vocabulary[i] == project.vocabulary[i]) ++i;
        std::string s = its + "vocabulary has " + std::to_string(saved.vocabulary.size()) + " tokens, the project's " +
                        std::to_string(project.vocabulary.size());
        if (i < n)
            s += "; token " + std::to_string(i) + " is '" + saved.vocabulary[i] + "' in the " + what + ", '" +
                 project.vocabulary[i] + "' in the project";
        out.push_back(s);
    }
    return out;
}

std::string projectCheckpointFile(const Project& project, const std::string& projectPath) {
    if (!project.training.checkpointDir.empty())
        return resolveCheckpointPath(resolveDatasetPath(projectPath, project.training.checkpointDir));
    const std::string runs = latestRunFolder(project, projectPath, {});
    if (runs.empty())
        throw std::runtime_error(projectPath +
                                 ": the project names no checkpoint folder (training.checkpointDir) and has no run "
                                 "folder with a checkpoint (runs/ beside it, or in " +
                                 perUserRunsFolder(project, projectPath, {}) + "); give a checkpoint instead");
    return resolveCheckpointPath(runs);
}

void checkBelongsToProject(const std::string& file, const std::string& savedProjectName,
                           const ProjectFingerprint& saved, const ProjectFingerprint& project,
                           const std::string& advice, const std::string& what) {
    const std::vector<std::string> diffs = fingerprintDifferences(saved, project, what);
    if (diffs.empty()) return;
    std::string text = file + ": this " + what + " was written for another project";
    if (!savedProjectName.empty()) text += " ('" + savedProjectName + "')";
    text += ": ";
    for (size_t i = 0; i < diffs.size(); ++i) text += (i ? "; " : "") + diffs[i];
    if (!advice.empty()) text += ". " + advice;
    throw std::runtime_error(text);
}

}  // namespace strata
