// The *.strata project file: JSON <-> Project (see Project.h).
//
// Layout (format_version 2; format 1 is the same without "id", and is what a project without one is written as):
//   {"format_version": 2, "id": "3f0c...", "name": "...",
//    "graph": {"nodes": [{"id": 1, "type": "Dense", "name": "dense1", "params": {...}, "position": [x, y]}],
//              (a frozen node adds "trainable": false; the key is never written for a trainable one, so files
//              with nothing frozen are as they were)
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

#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include <unistd.h>

#include "core/io/InputFile.h"
#include "core/io/JsonInput.h"
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
        // A prefix is enough for the 40 characters shown: a 100 MB string is not copied for a message.
        std::string s =
            Json(v.get_ref<const std::string&>().substr(0, 41)).dump(-1, ' ', false, Json::error_handler_t::replace);
        if (s.size() > 40) s = s.substr(0, 37) + "...\"";
        return t + " " + s;
    }
    return t;
}

// JSON pointer escaping of one key (RFC 6901).
std::string pointerKey(const std::string& key) {
    std::string out;
    for (char c : key) {
        if (c == '~')
            out += "~0";
        else if (c == '/')
            out += "~1";
        else
            out += c;
    }
    return out;
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

    void finish() const {
        for (auto it = m_json.begin(); it != m_json.end(); ++it) {
            bool known = false;
            for (const auto& k : m_known) known = known || k == it.key();
            if (!known) fail(pathOf(cutForMessage(it.key(), 60)), "unknown key (known here: " + joined(m_known) + ")");
        }
    }

    // A string of at most `maxBytes` bytes of UTF-8. A parsed file's strings are UTF-8 already; a value built
    // from a command line may not be, and it would be refused only when it is written into a checkpoint's
    // JSON, after training (nlohmann's type_error 316).
    static std::string asString(const Json& v, const std::string& path, bool nonEmpty,
                                size_t maxBytes = kMaxSettingStringBytes, const char* what = "a string") {
        if (!v.is_string()) fail(path, "expected a string, got " + describe(v));
        const std::string& s = v.get_ref<const std::string&>();
        if (s.size() > maxBytes)
            fail(path, "is " + std::to_string(s.size()) + " bytes long; " + what + " is at most " +
                           std::to_string(maxBytes) + " bytes");
        if (nonEmpty && s.empty()) fail(path, "must not be empty");
        if (const std::string bad = utf8Problem(s); !bad.empty())
            fail(path, "is not valid UTF-8 (" + bad + "); Strata's files hold UTF-8 text only");
        return s;
    }
    static int64_t asInteger(const Json& v, const std::string& path, int64_t min, int64_t max) {
        int64_t i = 0;
        if (v.is_number_integer() && !v.is_number_unsigned()) {
            i = v.get<int64_t>();
        } else if (v.is_number_unsigned()) {
            const uint64_t u = v.get<uint64_t>();
            if (u > static_cast<uint64_t>(max))
                fail(path, v.dump() + " is out of range (" + integerRangeText(min, max) + ")");
            i = static_cast<int64_t>(u);
        } else {
            fail(path, "expected an integer, got " + describe(v));
        }
        if (i < min || i > max) fail(path, v.dump() + " is out of range (" + integerRangeText(min, max) + ")");
        return i;
    }
    static double asNumber(const Json& v, const std::string& path, double min, double max, bool maxOpen) {
        if (!v.is_number()) fail(path, "expected a number, got " + describe(v));
        const double d = v.get<double>();
        if (!std::isfinite(d)) fail(path, "expected a finite number, got " + std::to_string(d));
        const bool above = maxOpen ? d >= max : d > max;
        if (d < min || above) fail(path, v.dump() + " is out of range (" + numberRangeText(min, max, maxOpen) + ")");
        return d;
    }
    static uint64_t asUnsigned(const Json& v, const std::string& path) {
        if (v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0)) return v.get<uint64_t>();
        if (v.is_number_integer()) fail(path, v.dump() + " is out of range (0 to " + std::to_string(UINT64_MAX) + ")");
        fail(path, "expected an integer, got " + describe(v));
    }

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
            fail(path, "unknown value '" + cutForMessage(s, 60) + "' (" + spec.allowedText() + ")");
        }
        case ParamSpec::Kind::IntList:
            if (isInteger(v)) return;
            if (!v.is_array()) fail(path, "expected a list of integers, got " + describe(v));
            for (size_t i = 0; i < v.size(); ++i)
                if (!isInteger(v[i]))
                    fail(path + "/" + std::to_string(i), "expected an integer, got " + describe(v[i]));
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
                fail(n.pathOf("type"), "unknown layer type '" + cutForMessage(node.type, 60) +
                                           "' (known: " + joined(registry.names()) + ")");

            if (const Json* name = n.find("name")) {
                node.name = ObjectReader::asString(*name, n.pathOf("name"), true, kMaxNodeNameBytes, "a node name");
            }
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
                        fail(pp + "/" + pointerKey(cutForMessage(it.key(), 60)),
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
            if (const Json* trainable = n.find("trainable")) {
                if (!trainable->is_boolean())
                    fail(n.pathOf("trainable"), "expected a boolean, got " + describe(*trainable));
                node.trainable = trainable->get<bool>();
            }
            n.finish();
            if (node.name.empty())
                unnamed.push_back(std::move(node));
            else
                graph.insertNode(node);
        }
    }
    // Unnamed nodes get "<type><n>" names after every written name is taken, so they never collide: the
    // smallest free n, which only grows as names are added, so each type's search resumes where it stopped
    // (linear in the nodes; restarting at 1 made 10,000 unnamed nodes take minutes).
    std::map<std::string, int> lastNumber;
    for (Node& node : unnamed) {
        std::string stem;
        for (char c : node.type) stem += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        int& k = lastNumber[stem];
        do {
            node.name = stem + std::to_string(++k);
        } while (graph.nodeByName(node.name));
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
                ends[k].node =
                    static_cast<int>(ObjectReader::asInteger(end.require("node"), end.pathOf("node"), 0, kIntMax));
                ends[k].port = ObjectReader::asString(end.require("port"), end.pathOf("port"), false);
                end.finish();
                if (!graph.node(ends[k].node))
                    fail(end.pathOf("node"), "no node with id " + std::to_string(ends[k].node));
            }
            e.finish();
            const Node* src = graph.node(ends[0].node);
            const Node* dst = graph.node(ends[1].node);
            if (ends[0].port != "out")
                fail(e.pathOf("from") + "/port", "unknown output port '" + cutForMessage(ends[0].port, 60) + "' of " +
                                                     src->name + " (the output port is 'out')");
            if (ends[0].node == ends[1].node) fail(e.path(), "connects " + src->name + " to itself");
            const std::vector<std::string> ports = graph.inputPorts(dst->id);
            if (std::find(ports.begin(), ports.end(), ends[1].port) == ports.end())
                fail(e.pathOf("to") + "/port",
                     "unknown input port '" + cutForMessage(ends[1].port, 60) + "' of " + dst->name + " (" + dst->type +
                         " ports: " + (ports.empty() ? std::string("none") : joined(ports)) + ")");
            auto key = std::make_pair(dst->id, ends[1].port);
            if (auto it = fedBy.find(key); it != fedBy.end())
                fail(e.pathOf("to"),
                     "input '" + ends[1].port + "' of " + dst->name + " already has an edge (" + it->second + ")");
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
        if (!n->trainable) j["trainable"] = false;
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

// ---- settings: driven by the tables of Settings.cpp ----------------------------------------------

template <class S>
Json settingsToJson(const S& settings, const std::vector<SettingSpec<S>>& specs) {
    Json j = Json::object();
    static const S defaults{};
    for (const SettingSpec<S>& spec : specs) {
        const Json v = spec.get(settings);
        if (spec.omittedWhenDefault && v == spec.get(defaults)) continue;
        if (spec.kind == SettingKind::Choice)
            j[spec.key] = spec.choiceName(v.get<int>());
        else if (spec.kind == SettingKind::Float)
            j[spec.key] = floatJson(v.get<float>());
        else
            j[spec.key] = v;
    }
    return j;
}

template <class S>
S readSettings(const Json& json, const std::string& path, const std::vector<SettingSpec<S>>& specs) {
    ObjectReader r(json, path);
    S settings;
    for (const SettingSpec<S>& spec : specs) {
        const Json* v = r.find(spec.key);
        if (!v) continue;
        // A choice with its argument ("dist_mode": "local-sgd:8"): the argument's setting is set too, unless the
        // file gives that setting as well, which must then agree.
        const std::optional<ChoiceArgument> split =
            v->is_string() ? splitChoiceArgument(spec, v->get<std::string>()) : std::nullopt;
        if (!split) {
            spec.set(settings, checkSettingValue(spec, *v, r.pathOf(spec.key)));
            continue;
        }
        spec.set(settings, Json(split->value));
        const SettingSpec<S>* argument = nullptr;
        for (const SettingSpec<S>& a : specs)
            if (a.key == split->argument->key) argument = &a;
        Json value;
        try {
            value =
                checkSettingValue(*argument, settingJsonFromText(*argument, split->argumentText), r.pathOf(spec.key));
        } catch (const std::invalid_argument& e) {
            fail(r.pathOf(spec.key), e.what());
        }
        if (auto given = json.find(argument->key); given != json.end() && *given != value)
            fail(r.pathOf(spec.key), "'" + v->get<std::string>() + "' disagrees with " + argument->key + " " +
                                         given->dump() + " (give one of them)");
        argument->set(settings, value);
    }
    r.finish();
    return settings;
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

Json checkSettingValue(const SettingInfo& spec, const Json& v, const std::string& path) {
    switch (spec.kind) {
        case SettingKind::Int:
        case SettingKind::Int64: return Json(ObjectReader::asInteger(v, path, spec.intMin, spec.intMax));
        case SettingKind::UInt64: return Json(ObjectReader::asUnsigned(v, path));
        case SettingKind::Double:
        case SettingKind::Float: return Json(ObjectReader::asNumber(v, path, spec.min, spec.max, spec.maxOpen));
        case SettingKind::Bool:
            if (!v.is_boolean()) fail(path, "expected a boolean, got " + describe(v));
            return v;
        case SettingKind::String:
        case SettingKind::Path: return Json(ObjectReader::asString(v, path, spec.nonEmpty));
        case SettingKind::Choice: {
            const std::string s = ObjectReader::asString(v, path, false);
            try {
                return Json(spec.parseChoice(s));
            } catch (const std::invalid_argument& e) {
                fail(path, e.what());
            }
        }
        case SettingKind::StringList: {
            if (!v.is_array()) fail(path, "expected an array of strings, got " + describe(v));
            Json list = Json::array();
            for (size_t i = 0; i < v.size(); ++i)
                list.push_back(ObjectReader::asString(v[i], path + "/" + std::to_string(i), false));
            return list;
        }
        case SettingKind::IntList: {
            if (!v.is_array() || v.size() < spec.minItems || v.size() > spec.maxItems)
                fail(path, "expected an array of " + std::to_string(spec.minItems) + " to " +
                               std::to_string(spec.maxItems) + (spec.intMin == 1 ? " positive integers" : " integers") +
                               ", got " + describe(v));
            Json list = Json::array();
            for (size_t i = 0; i < v.size(); ++i)
                list.push_back(ObjectReader::asInteger(v[i], path + "/" + std::to_string(i), spec.intMin, spec.intMax));
            return list;
        }
    }
    fail(path, "unknown kind of setting");
}

std::string newProjectId() {
    std::random_device source;
    std::string id;
    for (int i = 0; i < 4; ++i) {
        char part[9];
        std::snprintf(part, sizeof part, "%08x", static_cast<unsigned>(source()));
        id += part;
    }
    return id;
}

bool isValidProjectId(const std::string& id) {
    if (id.empty() || id.size() > 64) return false;
    for (const char c : id)
        if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '-' && c != '_') return false;
    return true;
}

Json projectToJson(const Project& project) {
    Json j = Json::object();
    // The oldest format that holds the project: one without an id is a format 1 file, which older builds read.
    j["format_version"] = project.id.empty() ? 1 : kProjectFormatVersion;
    if (!project.id.empty()) j["id"] = project.id;
    j["name"] = project.name;
    j["graph"] = graphToJson(project.graph);
    j["dataset"] = settingsToJson(project.dataset, datasetSettingSpecs());
    j["training"] = settingsToJson(project.training, trainingSettingSpecs());
    if (!project.sweep.is_null()) j["sweep"] = project.sweep;
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
            fail("/format_version", "written by a newer Strata (format " + version.dump() +
                                        "); this build reads format " + std::to_string(kProjectFormatVersion));
        if (version.get<int64_t>() < 1)
            fail("/format_version", "format " + version.dump() +
                                        " is not a Strata project format (this build reads format " +
                                        std::to_string(kProjectFormatVersion) + ")");
        // Read as the current format: a format 1 file is a project without an id, and is written back as format 2.
        p.formatVersion = kProjectFormatVersion;
        if (const Json* id = r.find("id")) {
            p.id = ObjectReader::asString(*id, "/id", false);
            if (!isValidProjectId(p.id))
                fail("/id", "'" + p.id.substr(0, 80) +
                                "' is not a project id (1 to 64 letters, digits, '-' or '_'); remove the line and the "
                                "workbench gives the project a new one when it is saved");
        }
        if (const Json* name = r.find("name"))
            p.name = ObjectReader::asString(*name, "/name", false, kMaxProjectNameBytes, "a project name");
        if (const Json* g = r.find("graph")) p.graph = readGraph(*g, "/graph");
        if (const Json* d = r.find("dataset")) p.dataset = readSettings(*d, "/dataset", datasetSettingSpecs());
        if (const Json* t = r.find("training")) p.training = readSettings(*t, "/training", trainingSettingSpecs());
        if (const Json* sw = r.find("sweep")) {
            if (!sw->is_object() && !sw->is_null()) fail("/sweep", "expected an object, got " + describe(*sw));
            p.sweep = *sw;
        }
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
        // The limits first: a value nested 100,000 deep parses, then overflows the stack when it is copied.
        json = parseJson<Json>(text, source);
    } catch (const JsonLimitError& e) {
        throw ProjectError(
            source, e.pointer(),
            (e.line() ? "line " + std::to_string(e.line()) + ", column " + std::to_string(e.column()) + ": "
                      : std::string()) +
                e.reason());
    } catch (const Json::parse_error& e) {
        // e.byte counts the bytes read including the offending one.
        const auto [line, column] = lineAndColumn(text, e.byte > 0 ? e.byte - 1 : 0);
        throw ProjectError(source, "",
                           "line " + std::to_string(line) + ", column " + std::to_string(column) +
                               ": invalid JSON: " + parseErrorReason(e.what()));
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
    std::string text;
    try {
        text = readFileText(path, kMaxProjectFileBytes, "a project file");
    } catch (const FormatError& e) {
        const bool folder = e.problem().rfind("is a directory", 0) == 0;
        throw ProjectError(path, "", folder ? "is a folder, not a project file" : e.problem());
    }
    return parseProject(text, path);
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
