// The *.strata project file: JSON <-> Project (see Project.h).
//
// Layout (format_version 1):
//   {"format_version": 1, "name": "...",
//    "graph": {"nodes": [{"id": 1, "type": "Dense", "name": "dense1", "params": {...}, "position": [x, y]}],
//              "edges": [{"from": {"node": 1, "port": "out"}, "to": {"node": 2, "port": "in"}}]},
//    "dataset": {snake_case DatasetSettings fields}, "training": {snake_case TrainingSettings fields}}
//
// Reading is strict so that a typo never silently becomes a default: unknown keys, wrong JSON types,
// unknown choices (optimizer "adamm"), unknown layer types and parameters, and out-of-range settings
// are ProjectErrors naming the JSON pointer of the bad value. Layer parameter *ranges* are the one
// exception: a graph saved mid-edit (units 0) still opens, and analyzeGraph() lists the problem.
// Only format_version is required; any other missing key takes its default. Every failure, whatever
// its origin, leaves as a ProjectError.
#include "core/graph/Project.h"

#include <unistd.h>

#include <cerrno>
#include <cfloat>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "core/layers/LayerRegistry.h"

namespace strata {

namespace {

std::string jsonTypeName(const Json& v) {
    switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "integer";
    case Json::value_t::number_float: return "number";
    case Json::value_t::string: return "string";
    case Json::value_t::array: return "array";
    case Json::value_t::object: return "object";
    case Json::value_t::binary: return "binary";
    case Json::value_t::discarded: return "discarded";
    }
    return "value";
}

// A short rendering of a value for messages ("got number 3.5").
std::string describe(const Json& v) {
    std::string t = jsonTypeName(v);
    if (v.is_number() || v.is_boolean()) return t + " " + v.dump();
    if (v.is_string()) {
        std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
        if (s.size() > 40) s = s.substr(0, 37) + "...\"";
        return t + " " + s;
    }
    return t;
}

// JSON pointer escaping of one key (RFC 6901).
std::string pointerKey(const std::string& key) {
    std::string out;
    for (char c : key) {
        if (c == '~') out += "~0";
        else if (c == '/') out += "~1";
        else out += c;
    }
    return out;
}

std::string numberText(double v) {
    if (std::floor(v) == v && std::fabs(v) < 1e15) return std::to_string(static_cast<long long>(v));
    std::ostringstream s;
    s << v;
    return s.str();
}

std::string joined(const std::vector<std::string>& items) {
    std::string s;
    for (size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + items[i];
    return s;
}

[[noreturn]] void fail(const std::string& path, const std::string& what) { throw ProjectError(path, what); }

// The keys of one JSON object, read one by one; finish() refuses the keys nobody asked for.
class ObjectReader {
public:
    ObjectReader(const Json& json, std::string path) : m_json(json), m_path(std::move(path)) {
        if (!json.is_object()) fail(m_path, "expected an object, got " + describe(json));
    }

    const std::string& path() const { return m_path; }
    std::string pathOf(const std::string& key) const { return m_path + "/" + pointerKey(key); }

    // The value at key, or nullptr when absent.
    const Json* find(const std::string& key) {
        m_known.push_back(key);
        auto it = m_json.find(key);
        return it == m_json.end() ? nullptr : &*it;
    }
    const Json& require(const std::string& key) {
        const Json* v = find(key);
        if (!v) fail(pathOf(key), "missing (required)");
        return *v;
    }

    void string(const std::string& key, std::string& out, bool nonEmpty = false) {
        if (const Json* v = find(key)) out = asString(*v, pathOf(key), nonEmpty);
    }
    void choice(const std::string& key, std::string& out, const std::vector<std::string>& choices) {
        const Json* v = find(key);
        if (!v) return;
        const std::string s = asString(*v, pathOf(key), false);
        for (const auto& c : choices)
            if (c == s) {
                out = s;
                return;
            }
        fail(pathOf(key), "unknown value '" + s + "' (one of: " + joined(choices) + ")");
    }
    template <typename T>
    void integer(const std::string& key, T& out, int64_t min, int64_t max) {
        if (const Json* v = find(key)) out = static_cast<T>(asInteger(*v, pathOf(key), min, max));
    }
    void unsignedInteger(const std::string& key, uint64_t& out) {
        const Json* v = find(key);
        if (!v) return;
        if (v->is_number_unsigned()) out = v->get<uint64_t>();
        else if (v->is_number_integer()) fail(pathOf(key), v->dump() + " is out of range (0 to 18446744073709551615)");
        else fail(pathOf(key), "expected an integer, got " + describe(*v));
    }
    // A finite number in [min, max]; `maxOpen` excludes max itself.
    void number(const std::string& key, double& out, double min, double max, bool maxOpen = false) {
        if (const Json* v = find(key)) out = asNumber(*v, pathOf(key), min, max, maxOpen);
    }
    void boolean(const std::string& key, bool& out) {
        const Json* v = find(key);
        if (!v) return;
        if (!v->is_boolean()) fail(pathOf(key), "expected a boolean, got " + describe(*v));
        out = v->get<bool>();
    }
    void stringList(const std::string& key, std::vector<std::string>& out) {
        const Json* v = find(key);
        if (!v) return;
        if (!v->is_array()) fail(pathOf(key), "expected an array of strings, got " + describe(*v));
        std::vector<std::string> list;
        for (size_t i = 0; i < v->size(); ++i) list.push_back(asString((*v)[i], pathOf(key) + "/" + std::to_string(i), false));
        out = std::move(list);
    }

    void finish() const {
        for (auto it = m_json.begin(); it != m_json.end(); ++it) {
            bool known = false;
            for (const auto& k : m_known) known = known || k == it.key();
            if (!known) fail(pathOf(it.key()), "unknown key (known here: " + joined(m_known) + ")");
        }
    }

    static std::string asString(const Json& v, const std::string& path, bool nonEmpty) {
        if (!v.is_string()) fail(path, "expected a string, got " + describe(v));
        std::string s = v.get<std::string>();
        if (nonEmpty && s.empty()) fail(path, "must not be empty");
        return s;
    }
    static int64_t asInteger(const Json& v, const std::string& path, int64_t min, int64_t max) {
        int64_t i = 0;
        if (v.is_number_integer() && !v.is_number_unsigned()) {
            i = v.get<int64_t>();
        } else if (v.is_number_unsigned()) {
            const uint64_t u = v.get<uint64_t>();
            if (u > static_cast<uint64_t>(max)) fail(path, v.dump() + " is out of range (" + rangeText(min, max) + ")");
            i = static_cast<int64_t>(u);
        } else {
            fail(path, "expected an integer, got " + describe(v));
        }
        if (i < min || i > max) fail(path, v.dump() + " is out of range (" + rangeText(min, max) + ")");
        return i;
    }
    static double asNumber(const Json& v, const std::string& path, double min, double max, bool maxOpen) {
        if (!v.is_number()) fail(path, "expected a number, got " + describe(v));
        const double d = v.get<double>();
        if (!std::isfinite(d)) fail(path, "expected a finite number, got " + std::to_string(d));
        const bool above = maxOpen ? d >= max : d > max;
        if (d < min || above)
            fail(path, v.dump() + " is out of range (" + numberText(min) + " to " + numberText(max) +
                           (maxOpen ? ", excluding " + numberText(max) : std::string()) + ")");
        return d;
    }
    static std::string rangeText(int64_t min, int64_t max) { return std::to_string(min) + " to " + std::to_string(max); }

private:
    const Json& m_json;
    std::string m_path;
    std::vector<std::string> m_known;
};

constexpr double kHuge = std::numeric_limits<double>::max();
constexpr int64_t kIntMax = INT_MAX;

// The float as its shortest decimal, so 0.1f is written 0.1 and reads back as the same float.
Json floatJson(float f) {
    if (!std::isfinite(f)) return Json(static_cast<double>(f));
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, f);
    double d = static_cast<double>(f);
    std::from_chars(buf, res.ptr, d);
    return Json(d);
}

// ---- graph ----------------------------------------------------------------------------------------

// Checks a layer parameter's JSON type (not its range: see the file comment).
void checkParamType(const ParamSpec& spec, const Json& v, const std::string& path) {
    auto isInteger = [](const Json& x) {
        if (x.is_number_integer()) return true;
        if (!x.is_number_float()) return false;
        const double d = x.get<double>();
        return std::isfinite(d) && std::floor(d) == d;
    };
    switch (spec.kind) {
    case ParamSpec::Kind::Int:
        if (!isInteger(v)) fail(path, "expected an integer, got " + describe(v));
        return;
    case ParamSpec::Kind::Float:
        if (!v.is_number()) fail(path, "expected a number, got " + describe(v));
        return;
    case ParamSpec::Kind::Bool:
        if (!v.is_boolean()) fail(path, "expected a boolean, got " + describe(v));
        return;
    case ParamSpec::Kind::Choice: {
        if (!v.is_string()) fail(path, "expected a string, got " + describe(v));
        const std::string s = v.get<std::string>();
        for (const auto& c : spec.choices)
            if (c == s) return;
        fail(path, "unknown value '" + s + "' (" + spec.allowedText() + ")");
    }
    case ParamSpec::Kind::IntList:
        if (isInteger(v)) return;
        if (!v.is_array()) fail(path, "expected a list of integers, got " + describe(v));
        for (size_t i = 0; i < v.size(); ++i)
            if (!isInteger(v[i])) fail(path + "/" + std::to_string(i), "expected an integer, got " + describe(v[i]));
        return;
    }
}

Graph readGraph(const Json& json, const std::string& path) {
    ObjectReader r(json, path);
    Graph graph;
    const LayerRegistry& registry = layerRegistry();

    std::map<int, std::string> idAt;            // node id -> path of the node that has it
    std::map<std::string, std::string> nameAt;  // node name -> path
    std::vector<Node> unnamed;
    if (const Json* nodes = r.find("nodes")) {
        const std::string nodesPath = r.pathOf("nodes");
        if (!nodes->is_array()) fail(nodesPath, "expected an array, got " + describe(*nodes));
        for (size_t i = 0; i < nodes->size(); ++i) {
            ObjectReader n((*nodes)[i], nodesPath + "/" + std::to_string(i));
            Node node;
            node.id = static_cast<int>(ObjectReader::asInteger(n.require("id"), n.pathOf("id"), 0, kIntMax - 1));
            if (auto it = idAt.find(node.id); it != idAt.end())
                fail(n.pathOf("id"), "duplicate node id " + std::to_string(node.id) + " (also at " + it->second + ")");
            idAt[node.id] = n.path();

            node.type = ObjectReader::asString(n.require("type"), n.pathOf("type"), false);
            const LayerType* type = registry.find(node.type);
            if (!type)
                fail(n.pathOf("type"), "unknown layer type '" + node.type + "' (known: " + joined(registry.names()) + ")");

            n.string("name", node.name);
            if (n.find("name") && node.name.empty()) fail(n.pathOf("name"), "must not be empty");
            if (!node.name.empty()) {
                if (auto it = nameAt.find(node.name); it != nameAt.end())
                    fail(n.pathOf("name"), "duplicate node name '" + node.name + "' (also at " + it->second + ")");
                nameAt[node.name] = n.path();
            }

            if (const Json* params = n.find("params")) {
                const std::string pp = n.pathOf("params");
                if (!params->is_object()) fail(pp, "expected an object, got " + describe(*params));
                const std::vector<ParamSpec> specs = type->paramSpecs();
                for (auto it = params->begin(); it != params->end(); ++it) {
                    const ParamSpec* spec = nullptr;
                    for (const auto& s : specs)
                        if (s.name == it.key()) spec = &s;
                    std::vector<std::string> names;
                    for (const auto& s : specs) names.push_back(s.name);
                    if (!spec)
                        fail(pp + "/" + pointerKey(it.key()),
                             "unknown parameter of " + node.type +
                                 (names.empty() ? " (it takes none)" : " (known: " + joined(names) + ")"));
                    checkParamType(*spec, it.value(), pp + "/" + pointerKey(it.key()));
                }
                node.params = *params;
            }

            if (const Json* pos = n.find("position")) {
                const std::string pp = n.pathOf("position");
                if (!pos->is_array() || pos->size() != 2) fail(pp, "expected [x, y], got " + describe(*pos));
                node.x = ObjectReader::asNumber((*pos)[0], pp + "/0", -kHuge, kHuge, false);
                node.y = ObjectReader::asNumber((*pos)[1], pp + "/1", -kHuge, kHuge, false);
            }
            n.finish();
            if (node.name.empty()) unnamed.push_back(std::move(node));
            else graph.insertNode(node);
        }
    }
    // Unnamed nodes get "<type><n>" names after every written name is taken, so they never collide.
    for (Node& node : unnamed) {
        std::string stem;
        for (char c : node.type) stem += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        for (int k = 1;; ++k) {
            node.name = stem + std::to_string(k);
            if (!graph.nodeByName(node.name)) break;
        }
        graph.insertNode(node);
    }

    if (const Json* edges = r.find("edges")) {
        const std::string edgesPath = r.pathOf("edges");
        if (!edges->is_array()) fail(edgesPath, "expected an array, got " + describe(*edges));
        std::map<std::pair<int, std::string>, std::string> fedBy;
        for (size_t i = 0; i < edges->size(); ++i) {
            ObjectReader e((*edges)[i], edgesPath + "/" + std::to_string(i));
            PortRef ends[2];
            const char* keys[2] = {"from", "to"};
            for (int k = 0; k < 2; ++k) {
                ObjectReader end(e.require(keys[k]), e.pathOf(keys[k]));
                ends[k].node = static_cast<int>(ObjectReader::asInteger(end.require("node"), end.pathOf("node"), 0, kIntMax));
                ends[k].port = ObjectReader::asString(end.require("port"), end.pathOf("port"), false);
                end.finish();
                if (!graph.node(ends[k].node))
                    fail(end.pathOf("node"), "no node with id " + std::to_string(ends[k].node));
            }
            e.finish();
            const Node* src = graph.node(ends[0].node);
            const Node* dst = graph.node(ends[1].node);
            if (ends[0].port != "out")
                fail(e.pathOf("from") + "/port", "unknown output port '" + ends[0].port + "' of " + src->name +
                                                     " (the output port is 'out')");
            if (ends[0].node == ends[1].node) fail(e.path(), "connects " + src->name + " to itself");
            const std::vector<std::string> ports = graph.inputPorts(dst->id);
            if (std::find(ports.begin(), ports.end(), ends[1].port) == ports.end())
                fail(e.pathOf("to") + "/port", "unknown input port '" + ends[1].port + "' of " + dst->name + " (" +
                                                   dst->type + " ports: " +
                                                   (ports.empty() ? std::string("none") : joined(ports)) + ")");
            auto key = std::make_pair(dst->id, ends[1].port);
            if (auto it = fedBy.find(key); it != fedBy.end())
                fail(e.pathOf("to"), "input '" + ends[1].port + "' of " + dst->name + " already has an edge (" +
                                         it->second + ")");
            fedBy[key] = e.path();
            try {
                graph.connect(ends[0], ends[1]);
            } catch (const GraphError& err) {
                fail(e.path(), err.what());
            }
        }
    }
    r.finish();
    return graph;
}

Json graphToJson(const Graph& graph) {
    Json nodes = Json::array();
    for (const Node* n : graph.nodes()) {
        Json j = Json::object();
        j["id"] = n->id;
        j["type"] = n->type;
        j["name"] = n->name;
        j["params"] = n->params.is_null() ? Json::object() : n->params;
        j["position"] = Json::array({n->x, n->y});
        nodes.push_back(std::move(j));
    }
    Json edges = Json::array();
    for (const Edge& e : graph.edges()) {
        Json j = Json::object();
        j["from"] = Json{{"node", e.from.node}, {"port", e.from.port}};
        j["to"] = Json{{"node", e.to.node}, {"port", e.to.port}};
        edges.push_back(std::move(j));
    }
    Json g = Json::object();
    g["nodes"] = std::move(nodes);
    g["edges"] = std::move(edges);
    return g;
}

// ---- settings -------------------------------------------------------------------------------------

Json datasetToJson(const DatasetSettings& d) {
    Json j = Json::object();
    j["kind"] = d.kind;
    j["train_images"] = d.trainImages;
    j["train_labels"] = d.trainLabels;
    j["validation_images"] = d.validationImages;
    j["validation_labels"] = d.validationLabels;
    j["train_path"] = d.trainPath;
    j["validation_path"] = d.validationPath;
    j["label_column"] = d.labelColumn;
    j["tokenizer"] = d.tokenizer;
    j["max_tokens"] = d.maxTokens;
    j["max_vocab"] = d.maxVocab;
    j["validation_split"] = d.validationSplit;
    j["normalization"] = d.normalization;
    j["crop_padding"] = d.cropPadding;
    j["horizontal_flip"] = d.horizontalFlip;
    j["noise_std"] = floatJson(d.noiseStd);
    j["train_limit"] = d.trainLimit;
    j["validation_limit"] = d.validationLimit;
    j["class_names"] = d.classNames;
    j["synthetic_samples"] = d.syntheticSamples;
    j["synthetic_classes"] = d.syntheticClasses;
    j["synthetic_shape"] = d.syntheticShape;
    return j;
}

DatasetSettings readDataset(const Json& json, const std::string& path) {
    ObjectReader r(json, path);
    DatasetSettings d;
    r.choice("kind", d.kind, {"idx", "csv", "text", "synthetic"});
    r.string("train_images", d.trainImages);
    r.string("train_labels", d.trainLabels);
    r.string("validation_images", d.validationImages);
    r.string("validation_labels", d.validationLabels);
    r.string("train_path", d.trainPath);
    r.string("validation_path", d.validationPath);
    r.string("label_column", d.labelColumn);
    r.choice("tokenizer", d.tokenizer, {"char", "word"});
    r.integer("max_tokens", d.maxTokens, 1, 1 << 20);
    r.integer("max_vocab", d.maxVocab, 1, kIntMax);
    r.number("validation_split", d.validationSplit, 0.0, 1.0, true);
    r.choice("normalization", d.normalization, {"none", "scale", "standardize"});
    r.integer("crop_padding", d.cropPadding, 0, 1024);
    r.boolean("horizontal_flip", d.horizontalFlip);
    double noise = d.noiseStd;
    r.number("noise_std", noise, 0.0, FLT_MAX);
    d.noiseStd = static_cast<float>(noise);
    r.integer("train_limit", d.trainLimit, 0, INT64_MAX);
    r.integer("validation_limit", d.validationLimit, 0, INT64_MAX);
    r.stringList("class_names", d.classNames);
    r.integer("synthetic_samples", d.syntheticSamples, 1, INT64_MAX);
    r.integer("synthetic_classes", d.syntheticClasses, 1, kIntMax);
    if (const Json* shape = r.find("synthetic_shape")) {
        const std::string sp = r.pathOf("synthetic_shape");
        if (!shape->is_array() || shape->empty() || shape->size() > 8)
            fail(sp, "expected an array of 1 to 8 positive integers, got " + describe(*shape));
        std::vector<int64_t> dims;
        for (size_t i = 0; i < shape->size(); ++i)
            dims.push_back(ObjectReader::asInteger((*shape)[i], sp + "/" + std::to_string(i), 1, kIntMax));
        d.syntheticShape = std::move(dims);
    }
    r.finish();
    return d;
}

Json trainingToJson(const TrainingSettings& t) {
    Json j = Json::object();
    j["optimizer"] = t.optimizer;
    j["learning_rate"] = t.learningRate;
    j["momentum"] = t.momentum;
    j["nesterov"] = t.nesterov;
    j["weight_decay"] = t.weightDecay;
    j["beta1"] = t.beta1;
    j["beta2"] = t.beta2;
    j["eps"] = t.eps;
    j["loss"] = t.loss;
    j["schedule"] = t.schedule;
    j["step_epochs"] = t.stepEpochs;
    j["step_gamma"] = t.stepGamma;
    j["warmup_steps"] = t.warmupSteps;
    j["min_learning_rate"] = t.minLearningRate;
    j["epochs"] = t.epochs;
    j["batch_size"] = t.batchSize;
    j["seed"] = t.seed;
    j["deterministic"] = t.deterministic;
    j["precision"] = t.precision;
    j["clip_norm"] = t.clipNorm;
    j["early_stopping_patience"] = t.earlyStoppingPatience;
    j["early_stopping_metric"] = t.earlyStoppingMetric;
    j["checkpoint_dir"] = t.checkpointDir;
    j["device"] = t.device;
    j["threads"] = t.threads;
    return j;
}

TrainingSettings readTraining(const Json& json, const std::string& path) {
    ObjectReader r(json, path);
    TrainingSettings t;
    r.choice("optimizer", t.optimizer, {"sgd", "adam", "adamw"});
    r.number("learning_rate", t.learningRate, 0.0, kHuge);
    r.number("momentum", t.momentum, 0.0, 1.0, true);
    r.boolean("nesterov", t.nesterov);
    r.number("weight_decay", t.weightDecay, 0.0, kHuge);
    r.number("beta1", t.beta1, 0.0, 1.0, true);
    r.number("beta2", t.beta2, 0.0, 1.0, true);
    r.number("eps", t.eps, 0.0, kHuge);
    r.choice("loss", t.loss, {"cross_entropy", "mse", "bce_logits"});
    r.choice("schedule", t.schedule, {"constant", "step", "cosine", "one_cycle"});
    r.integer("step_epochs", t.stepEpochs, 1, kIntMax);
    r.number("step_gamma", t.stepGamma, 0.0, kHuge);
    r.integer("warmup_steps", t.warmupSteps, 0, kIntMax);
    r.number("min_learning_rate", t.minLearningRate, 0.0, kHuge);
    r.integer("epochs", t.epochs, 1, kIntMax);
    r.integer("batch_size", t.batchSize, 1, 1 << 24);
    r.unsignedInteger("seed", t.seed);
    r.boolean("deterministic", t.deterministic);
    r.choice("precision", t.precision, {"fp32", "bf16", "fp16"});
    r.number("clip_norm", t.clipNorm, 0.0, kHuge);
    r.integer("early_stopping_patience", t.earlyStoppingPatience, 0, kIntMax);
    r.choice("early_stopping_metric", t.earlyStoppingMetric, {"val_loss", "val_acc"});
    r.string("checkpoint_dir", t.checkpointDir);
    r.string("device", t.device, true);
    r.integer("threads", t.threads, 0, 4096);
    r.finish();
    return t;
}

// Line and column (1-based) of a byte offset, as an editor shows them.
std::pair<size_t, size_t> lineAndColumn(const std::string& text, size_t offset) {
    offset = std::min(offset, text.size());
    size_t line = 1, lineStart = 0;
    for (size_t i = 0; i < offset; ++i)
        if (text[i] == '\n') {
            ++line;
            lineStart = i + 1;
        }
    return {line, offset - lineStart + 1};
}

// nlohmann's message without its "[json.exception...] parse error at line 1, column 2: " prefix.
std::string parseErrorReason(const std::string& what) {
    std::string s = what;
    if (auto p = s.find("] "); p != std::string::npos && s.rfind("[json.exception", 0) == 0) s = s.substr(p + 2);
    if (s.rfind("parse error", 0) == 0)
        if (auto p = s.find(": "); p != std::string::npos) s = s.substr(p + 2);
    return s;
}

}  // namespace

Json projectToJson(const Project& project) {
    Json j = Json::object();
    j["format_version"] = kProjectFormatVersion;
    j["name"] = project.name;
    j["graph"] = graphToJson(project.graph);
    j["dataset"] = datasetToJson(project.dataset);
    j["training"] = trainingToJson(project.training);
    return j;
}

Project projectFromJson(const Json& json) {
    try {
        ObjectReader r(json, "");
        Project p;
        const Json& version = r.require("format_version");
        if (!version.is_number_integer()) fail("/format_version", "expected an integer, got " + describe(version));
        if (version.is_number_unsigned() ? version.get<uint64_t>() > static_cast<uint64_t>(kProjectFormatVersion)
                                         : version.get<int64_t>() > kProjectFormatVersion)
            fail("/format_version", "written by a newer Strata (format " + version.dump() + "); this build reads format " +
                                        std::to_string(kProjectFormatVersion));
        if (version.get<int64_t>() < 1)
            fail("/format_version", "format " + version.dump() + " is not a Strata project format (this build reads format " +
                                        std::to_string(kProjectFormatVersion) + ")");
        p.formatVersion = static_cast<int>(version.get<int64_t>());
        r.string("name", p.name);
        if (const Json* g = r.find("graph")) p.graph = readGraph(*g, "/graph");
        if (const Json* d = r.find("dataset")) p.dataset = readDataset(*d, "/dataset");
        if (const Json* t = r.find("training")) p.training = readTraining(*t, "/training");
        r.finish();
        return p;
    } catch (const ProjectError&) {
        throw;
    } catch (const std::exception& e) {
        // Anything else (a GraphError, a JSON library exception) is still a bad project, never a crash.
        throw ProjectError("", std::string("cannot read the project: ") + e.what());
    }
}

Project parseProject(const std::string& text, const std::string& source) {
    Json json;
    try {
        json = Json::parse(text);
    } catch (const Json::parse_error& e) {
        // e.byte counts the bytes read including the offending one.
        const auto [line, column] = lineAndColumn(text, e.byte > 0 ? e.byte - 1 : 0);
        throw ProjectError(source, "",
                           "line " + std::to_string(line) + ", column " + std::to_string(column) + ": invalid JSON: " +
                               parseErrorReason(e.what()));
    } catch (const std::exception& e) {
        // Numbers too large for a double, and the like.
        throw ProjectError(source, "", std::string("invalid JSON: ") + parseErrorReason(e.what()));
    }
    try {
        return projectFromJson(json);
    } catch (const ProjectError& e) {
        throw ProjectError(source, e.jsonPath(), e.message());
    }
}

Project readProject(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) throw ProjectError(path, "", "is a folder, not a project file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw ProjectError(path, "", std::string("cannot open: ") + std::strerror(errno));
    std::ostringstream buf;
    buf << in.rdbuf();
    if (in.bad()) throw ProjectError(path, "", "read error");
    return parseProject(buf.str(), path);
}

void writeProject(const Project& project, const std::string& path) {
    std::string text;
    try {
        const Json json = projectToJson(project);
        // Never write a file this build cannot open again (a NaN position, batch size 0, ...).
        projectFromJson(json);
        text = json.dump(2) + "\n";
    } catch (const ProjectError& e) {
        throw ProjectError(path, e.jsonPath(), "not saved: " + e.message());
    } catch (const std::exception& e) {
        // e.g. a name that is not valid UTF-8
        throw ProjectError(path, "", std::string("not saved: ") + e.what());
    }
    const std::string tmp = path + ".tmp-" + std::to_string(static_cast<long>(::getpid()));
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw ProjectError(path, "", "cannot create '" + tmp + "': " + std::strerror(errno));
        out.write(text.data(), static_cast<std::streamsize>(text.size()));
        out.flush();
        if (!out) {
            const int err = errno;
            out.close();
            std::error_code ec;
            std::filesystem::remove(tmp, ec);
            throw ProjectError(path, "", "cannot write '" + tmp + "': " + std::strerror(err));
        }
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
        std::error_code ignored;
        std::filesystem::remove(tmp, ignored);
        throw ProjectError(path, "", "cannot replace the file: " + ec.message());
    }
}

std::string resolveDatasetPath(const std::string& projectPath, const std::string& datasetPath) {
    if (datasetPath.empty()) return {};
    const std::filesystem::path p(datasetPath);
    if (p.is_absolute()) return datasetPath;
    return (std::filesystem::path(projectPath).parent_path() / p).lexically_normal().string();
}

}  // namespace strata
