// The *.strata project file: lossless round trips, strict reading (every bad
// file gives a ProjectError with the JSON path at fault), a byte-by-byte
// truncation/mutation sweep that may only ever raise ProjectError, and the
// example projects in examples/ (they must load and analyze cleanly).
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/graph/Project.h"
#include "tests/support/TestBackends.h"

using namespace strata;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string readText(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// A project where every setting differs from its default and the graph has branches, odd
// positions and float params, so a field the writer forgets shows up as a difference.
Project richProject() {
    Project p;
    p.name = "Round trip: ünïcode, \"quotes\" and a\ttab";
    Graph& g = p.graph;
    const int in = g.addNode("Input", "pixels", {{"shape", {3, 16, 16}}}, 12.345678901234567, -0.1);
    const int c1 = g.addNode("Conv2D", "conv1",
                             {{"filters", 3}, {"kernel", {3, 3}}, {"padding", 1}, {"use_bias", false}}, 1e-300, 90);
    const int bn = g.addNode("BatchNorm", "bn1", {{"momentum", 0.01}, {"eps", 1e-3}}, 0, 180.5);
    const int act = g.addNode("LeakyReLU", {}, {{"alpha", 0.1}}, 0, 270);
    const int add = g.addNode("Add", "skip", {{"inputs", 2}}, -250.75, 360);
    const int pool = g.addNode("GlobalAvgPool", {}, Json::object(), 0, 450);
    const int drop = g.addNode("Dropout", {}, {{"rate", 0.3}}, 0, 540);
    const int head = g.addNode("Dense", "head", {{"units", 7}, {"init", "xavier"}}, 1.0 / 3.0, 630);
    g.connect(in, c1);
    g.connect(c1, bn);
    g.connect(bn, act);
    g.connect(act, add, "in1");  // edges deliberately not in node order
    g.connect(in, add, "in0");
    g.connect(add, pool);
    g.connect(pool, drop);
    g.connect(drop, head);

    DatasetSettings& d = p.dataset;
    d.kind = DatasetKind::Csv;
    d.trainImages = "imgs/train.idx";
    d.trainLabels = "imgs/train-labels.idx";
    d.validationImages = "/abs/val.idx";
    d.validationLabels = "/abs/val-labels.idx";
    d.trainPath = "data/train.csv";
    d.validationPath = "data/val.csv";
    d.labelColumn = "species";
    d.tokenizer = Tokenizer::Word;
    d.maxTokens = 48;
    d.maxVocab = 5000;
    d.validationSplit = 0.15;
    d.normalization = NormalizationMode::Standardize;
    d.cropPadding = 3;
    d.horizontalFlip = true;
    d.noiseStd = 0.1f;
    d.trainLimit = 1000;
    d.validationLimit = 200;
    d.classNames = {"a", "b/c", "ünï"};
    d.syntheticSamples = 77;
    d.syntheticClasses = 7;
    d.syntheticShape = {3, 16, 16};

    TrainingSettings& t = p.training;
    t.optimizer = OptimizerKind::AdamW;
    t.learningRate = 3e-4;
    t.momentum = 0.95;
    t.nesterov = true;
    t.weightDecay = 0.05;
    t.beta1 = 0.85;
    t.beta2 = 0.995;
    t.eps = 1e-7;
    t.loss = LossKind::Mse;
    t.schedule = ScheduleKind::OneCycle;
    t.stepEpochs = 4;
    t.stepGamma = 0.5;
    t.warmupSteps = 123;
    t.minLearningRate = 1e-6;
    t.epochs = 11;
    t.batchSize = 96;
    t.seed = 18446744073709551557ull;  // above INT64_MAX: must survive as unsigned
    t.deterministic = true;
    t.precision = ComputePrecision::BF16;
    t.clipNorm = 1.5;
    t.earlyStoppingPatience = 3;
    t.earlyStoppingMetric = EarlyStoppingMetric::ValAcc;
    t.checkpointDir = "checkpoints/run";
    t.initFrom = "weights/imported.safetensors";
    t.device = "cuda:0";
    t.threads = 2;
    return p;
}

// Parses `text`, which must fail with a ProjectError; returns it.
ProjectError expectError(const std::string& text) {
    try {
        parseProject(text, "test.strata");
    } catch (const ProjectError& e) {
        return e;
    } catch (const std::exception& e) {
        qFatal("expected ProjectError, got another exception: %s", e.what());
    }
    qFatal("expected ProjectError, the text was accepted:\n%s", text.c_str());
}

// A valid file as JSON, to be broken one field at a time.
Json validJson() { return projectToJson(richProject()); }

ProjectError expectError(const Json& json) { return expectError(json.dump(2)); }

#define CHECK_ERROR(err, path, fragment)                                                                      \
    do {                                                                                                      \
        const ProjectError e_ = (err);                                                                        \
        QVERIFY2(e_.jsonPath() == (path), (std::string("path ") + e_.jsonPath() + ": " + e_.what()).c_str()); \
        QVERIFY2(contains(e_.what(), fragment), e_.what());                                                   \
        QVERIFY2(contains(e_.what(), "test.strata"), e_.what());                                              \
    } while (0)

}  // namespace

class TestProjectFile : public QObject {
    Q_OBJECT

private slots:
    void roundTripIsLossless();
    void checkedInFileMatches();
    void missingSettingsTakeDefaults();
    void newerFormatVersion();
    void invalidJsonReportsLineAndColumn();
    void truncatedAtSeveralPoints();
    void wrongTypes();
    void unknownLayerTypeAndParams();
    void duplicateNodes();
    void badEdges();
    void unknownSettingValues();
    void badFilesOnDisk();
    void fileErrors();
    void resolvesDatasetPaths();
    void fuzzOnlyProjectErrors();
    void examplesLoadAndAnalyze();
    void projectIdRoundTrips();

private:
    QTemporaryDir m_tmp;
};

void TestProjectFile::roundTripIsLossless() {
    QVERIFY(m_tmp.isValid());
    const Project p = richProject();
    QVERIFY(analyzeGraph(p.graph).ok());
    const std::string path = m_tmp.filePath("rich.strata").toStdString();
    writeProject(p, path);
    const Project q = readProject(path);
    QVERIFY(q == p);
    QCOMPARE(q.training.seed, p.training.seed);
    QCOMPARE(q.dataset.noiseStd, 0.1f);
    QCOMPARE(q.graph.node(1)->x, 12.345678901234567);
    QCOMPARE(q.graph.node(2)->x, 1e-300);
    QCOMPARE(q.graph.node(8)->x, 1.0 / 3.0);
    QCOMPARE(q.graph.edges(), p.graph.edges());  // edge order kept

    // Writing what was read gives the same bytes; reading them the same project.
    const std::string path2 = m_tmp.filePath("rich2.strata").toStdString();
    writeProject(q, path2);
    QCOMPARE(readText(path2), readText(path));
    QVERIFY(readProject(path2) == p);

    // The file is 2-space indented JSON, and no temporary file is left behind.
    const std::string text = readText(path);
    QVERIFY(contains(text, "{\n  \"format_version\": 1,\n  \"name\": "));  // no id: format 1
    QVERIFY(contains(text, "\"noise_std\": 0.1,"));
    QVERIFY(contains(text, "\"seed\": 18446744073709551557,"));
    for (const auto& entry : std::filesystem::directory_iterator(m_tmp.path().toStdString()))
        QVERIFY2(!contains(entry.path().filename().string(), ".tmp-"), entry.path().c_str());

    // Overwriting an existing file replaces it.
    Project smaller = p;
    smaller.name = "smaller";
    writeProject(smaller, path);
    QCOMPARE(readProject(path).name, std::string("smaller"));

    // The JSON layer alone round-trips too.
    QVERIFY(projectFromJson(projectToJson(p)) == p);
}

void TestProjectFile::checkedInFileMatches() {
    // A file written by this format's first writer: reading it must keep working, field for field.
    const std::string path = test::sourcePath("tests/data/projects/all_settings.strata");
    const Project p = readProject(path);
    QVERIFY(p.dataset == richProject().dataset);
    QVERIFY(p.training == richProject().training);
    QVERIFY(p.graph == richProject().graph);
    QVERIFY(p == richProject());
}

void TestProjectFile::missingSettingsTakeDefaults() {
    Project p = parseProject(R"({"format_version": 1})");
    QVERIFY(p == Project{});
    QVERIFY(p.graph.empty());

    p = parseProject(R"({"format_version": 1, "training": {"epochs": 5}, "dataset": {"kind": "synthetic"},
                         "graph": {"nodes": [{"id": 4, "type": "Dense"}, {"id": 2, "type": "Dense", "name": "dense1"}]}})");
    QCOMPARE(p.training.epochs, 5);
    QCOMPARE(p.training.batchSize, TrainingSettings{}.batchSize);
    QCOMPARE(p.training.optimizer, OptimizerKind::Sgd);
    QCOMPARE(p.dataset.kind, DatasetKind::Synthetic);
    QCOMPARE(p.dataset.syntheticShape, (std::vector<int64_t>{16}));
    // A node without a name gets one that does not collide with the written names.
    QCOMPARE(p.graph.node(4)->name, std::string("dense2"));
    QCOMPARE(p.graph.node(4)->params, Json::object());
    QCOMPARE(p.graph.node(4)->x, 0.0);
    QCOMPARE(p.graph.nextId(), 5);

    // Integers are fine where a number is expected.
    p = parseProject(R"({"format_version": 1, "training": {"learning_rate": 1}})");
    QCOMPARE(p.training.learningRate, 1.0);
}

void TestProjectFile::newerFormatVersion() {
    Json j = validJson();
    j["format_version"] = 7;
    CHECK_ERROR(expectError(j), "/format_version", "written by a newer Strata (format 7); this build reads format 2");
    j["format_version"] = 0;
    CHECK_ERROR(expectError(j), "/format_version", "format 0");
    j["format_version"] = "1";
    CHECK_ERROR(expectError(j), "/format_version", "expected an integer, got string");
    j.erase("format_version");
    CHECK_ERROR(expectError(j), "/format_version", "missing");
    // Checked before anything else: a newer file with new kinds of content still says "newer".
    CHECK_ERROR(expectError(std::string(R"({"format_version": 3, "graph": {"nodes": [{"id": "x"}]}, "new_key": 1})")),
                "/format_version", "newer Strata (format 3)");
}

void TestProjectFile::invalidJsonReportsLineAndColumn() {
    ProjectError e = expectError(std::string("{\n  \"format_version\": 1,\n  \"name\": @\n}"));
    QVERIFY2(contains(e.what(), "test.strata: line 3, column 11: invalid JSON"), e.what());
    QCOMPARE(e.jsonPath(), std::string());
    QCOMPARE(e.source(), std::string("test.strata"));

    e = expectError(std::string("{\"format_version\": 1,, }"));
    QVERIFY2(contains(e.what(), "line 1, column 22"), e.what());

    e = expectError(std::string());
    QVERIFY2(contains(e.what(), "line 1, column 1"), e.what());
    QVERIFY2(contains(e.what(), "invalid JSON"), e.what());

    // Not an object at all.
    e = expectError(std::string("[1, 2]"));
    QVERIFY2(contains(e.what(), "expected an object, got array"), e.what());
    // A number too large for a double.
    e = expectError(std::string(R"({"format_version": 1, "training": {"learning_rate": 1e999}})"));
    QVERIFY2(contains(e.what(), "test.strata"), e.what());
    // Bytes that are not UTF-8 inside a string.
    e = expectError(std::string("{\"format_version\": 1, \"name\": \"a\xff\"}"));
    QVERIFY2(contains(e.what(), "line 1, column"), e.what());
}

void TestProjectFile::truncatedAtSeveralPoints() {
    const std::string text = validJson().dump(2);
    // Cut after the first line, inside a key, inside a number, inside the params, just before the end.
    const std::vector<std::string> cuts = {"{\n", "\"format_ver", "\"learning_rate\": 0.000", "\"filters\": 3",
                                           "\"edges\": ["};
    for (const std::string& cut : cuts) {
        const size_t at = text.find(cut);
        QVERIFY2(at != std::string::npos, cut.c_str());
        const std::string head = text.substr(0, at + cut.size());
        const ProjectError e = expectError(head);
        // The error is at the end of the text: its last line.
        const size_t lines = static_cast<size_t>(std::count(head.begin(), head.end(), '\n')) + 1;
        QVERIFY2(contains(e.what(), "line " + std::to_string(lines) + ", column "), e.what());
        QVERIFY2(contains(e.what(), "invalid JSON"), e.what());
    }
    const ProjectError e = expectError(text.substr(0, text.size() - 1));
    QVERIFY2(contains(e.what(), "invalid JSON"), e.what());
}

void TestProjectFile::wrongTypes() {
    Json j = validJson();
    j["graph"]["nodes"][2]["id"] = "3";
    CHECK_ERROR(expectError(j), "/graph/nodes/2/id", "expected an integer, got string");

    j = validJson();
    j["graph"]["nodes"][1]["params"]["filters"] = "eight";
    CHECK_ERROR(expectError(j), "/graph/nodes/1/params/filters", "expected an integer, got string");

    j = validJson();
    j["graph"]["nodes"][1]["params"]["kernel"] = Json::array({3, "3"});
    CHECK_ERROR(expectError(j), "/graph/nodes/1/params/kernel/1", "expected an integer, got string");

    j = validJson();
    j["graph"]["nodes"][0]["position"][1] = "top";
    CHECK_ERROR(expectError(j), "/graph/nodes/0/position/1", "expected a number, got string");

    j = validJson();
    j["graph"]["nodes"][0]["position"] = Json::array({1});
    CHECK_ERROR(expectError(j), "/graph/nodes/0/position", "expected [x, y]");

    j = validJson();
    j["graph"]["nodes"][3]["params"] = Json::array();
    CHECK_ERROR(expectError(j), "/graph/nodes/3/params", "expected an object, got array");

    j = validJson();
    j["graph"]["nodes"] = Json::object();
    CHECK_ERROR(expectError(j), "/graph/nodes", "expected an array, got object");

    j = validJson();
    j["graph"]["nodes"][4] = 5;
    CHECK_ERROR(expectError(j), "/graph/nodes/4", "expected an object, got integer");

    j = validJson();
    j["graph"]["edges"][0]["to"]["node"] = 2.5;
    CHECK_ERROR(expectError(j), "/graph/edges/0/to/node", "expected an integer, got number 2.5");

    j = validJson();
    j["training"]["learning_rate"] = "fast";
    CHECK_ERROR(expectError(j), "/training/learning_rate", "expected a number, got string \"fast\"");

    j = validJson();
    j["training"]["epochs"] = 2.5;
    CHECK_ERROR(expectError(j), "/training/epochs", "expected an integer, got number 2.5");

    j = validJson();
    j["training"]["seed"] = -1;
    CHECK_ERROR(expectError(j), "/training/seed", "out of range");

    j = validJson();
    j["dataset"]["class_names"][1] = 4;
    CHECK_ERROR(expectError(j), "/dataset/class_names/1", "expected a string, got integer");

    j = validJson();
    j["dataset"]["horizontal_flip"] = "yes";
    CHECK_ERROR(expectError(j), "/dataset/horizontal_flip", "expected a boolean, got string");

    j = validJson();
    j["dataset"]["synthetic_shape"] = Json::array({3, 0});
    CHECK_ERROR(expectError(j), "/dataset/synthetic_shape/1", "out of range");

    j = validJson();
    j["name"] = Json::array();
    CHECK_ERROR(expectError(j), "/name", "expected a string, got array");

    j = validJson();
    j["training"] = nullptr;
    CHECK_ERROR(expectError(j), "/training", "expected an object, got null");

    j = validJson();
    j["graph"]["nodes"][0]["id"] = 1e10;
    CHECK_ERROR(expectError(j), "/graph/nodes/0/id", "expected an integer");
    j["graph"]["nodes"][0]["id"] = int64_t(1) << 40;
    CHECK_ERROR(expectError(j), "/graph/nodes/0/id", "out of range");
}

void TestProjectFile::unknownLayerTypeAndParams() {
    Json j = validJson();
    j["graph"]["nodes"][3]["type"] = "Conv3D";
    CHECK_ERROR(expectError(j), "/graph/nodes/3/type", "unknown layer type 'Conv3D'");

    j = validJson();
    j["graph"]["nodes"][3].erase("type");
    CHECK_ERROR(expectError(j), "/graph/nodes/3/type", "missing");

    j = validJson();
    j["graph"]["nodes"][7]["params"]["activation"] = "relu";
    CHECK_ERROR(expectError(j), "/graph/nodes/7/params/activation", "unknown parameter of Dense (known: units");

    j = validJson();
    j["graph"]["nodes"][7]["params"]["init"] = "magic";
    CHECK_ERROR(expectError(j), "/graph/nodes/7/params/init", "unknown value 'magic'");

    j = validJson();
    j["graph"]["nodes"][7]["colour"] = "red";
    CHECK_ERROR(expectError(j), "/graph/nodes/7/colour", "unknown key");

    // Out-of-range values still load (a graph saved mid-edit opens) and the analysis reports them.
    j = validJson();
    j["graph"]["nodes"][7]["params"]["units"] = 0;
    const Project p = parseProject(j.dump());
    const GraphAnalysis a = analyzeGraph(p.graph);
    QCOMPARE(a.problems.size(), size_t(1));
    QCOMPARE(a.problems[0].node, 8);
    QVERIFY2(contains(a.problems[0].message, "units"), a.problems[0].message.c_str());
}

void TestProjectFile::duplicateNodes() {
    Json j = validJson();
    j["graph"]["nodes"][5]["id"] = 2;
    CHECK_ERROR(expectError(j), "/graph/nodes/5/id", "duplicate node id 2 (also at /graph/nodes/1)");

    j = validJson();
    j["graph"]["nodes"][6]["name"] = "conv1";
    CHECK_ERROR(expectError(j), "/graph/nodes/6/name", "duplicate node name 'conv1' (also at /graph/nodes/1)");

    j = validJson();
    j["graph"]["nodes"][6]["name"] = "";
    CHECK_ERROR(expectError(j), "/graph/nodes/6/name", "empty");
}

void TestProjectFile::badEdges() {
    Json j = validJson();
    j["graph"]["edges"][1]["from"]["node"] = 42;
    CHECK_ERROR(expectError(j), "/graph/edges/1/from/node", "no node with id 42");

    j = validJson();
    j["graph"]["edges"][1]["to"]["node"] = 43;
    CHECK_ERROR(expectError(j), "/graph/edges/1/to/node", "no node with id 43");

    j = validJson();
    j["graph"]["edges"][1]["to"]["port"] = "in7";
    CHECK_ERROR(expectError(j), "/graph/edges/1/to/port", "unknown input port 'in7' of bn1 (BatchNorm ports: in)");

    j = validJson();
    j["graph"]["edges"][3]["to"]["port"] = "in2";  // Add with inputs 2 has in0 and in1
    CHECK_ERROR(expectError(j), "/graph/edges/3/to/port", "Add ports: in0, in1");

    j = validJson();
    j["graph"]["edges"][1]["from"]["port"] = "output";
    CHECK_ERROR(expectError(j), "/graph/edges/1/from/port", "unknown output port 'output'");

    j = validJson();
    j["graph"]["edges"][1]["from"]["node"] = 3;  // 3 -> 3
    CHECK_ERROR(expectError(j), "/graph/edges/1", "connects bn1 to itself");

    j = validJson();
    j["graph"]["edges"][4]["to"] = j["graph"]["edges"][1]["to"];  // pixels -> bn1, which conv1 feeds
    CHECK_ERROR(expectError(j), "/graph/edges/4/to", "input 'in' of bn1 already has an edge (/graph/edges/1)");

    j = validJson();
    j["graph"]["edges"][0].erase("to");
    CHECK_ERROR(expectError(j), "/graph/edges/0/to", "missing");

    j = validJson();
    j["graph"]["edges"][0]["to"]["extra"] = 1;
    CHECK_ERROR(expectError(j), "/graph/edges/0/to/extra", "unknown key");

    // Edges into a node whose type is unknown never get that far: the type is reported first.
    j = validJson();
    j["graph"]["nodes"][2]["type"] = "Mystery";
    CHECK_ERROR(expectError(j), "/graph/nodes/2/type", "unknown layer type 'Mystery'");
}

void TestProjectFile::unknownSettingValues() {
    Json j = validJson();
    j["training"]["optimizer"] = "adamm";
    CHECK_ERROR(expectError(j), "/training/optimizer", "unknown value 'adamm' (one of: sgd, adam, adamw)");

    j = validJson();
    j["training"]["schedule"] = "exponential";
    CHECK_ERROR(expectError(j), "/training/schedule", "one of: constant, step, cosine, one_cycle");

    j = validJson();
    j["training"]["precision"] = "fp8";
    CHECK_ERROR(expectError(j), "/training/precision", "unknown value 'fp8'");

    j = validJson();
    j["dataset"]["kind"] = "parquet";
    CHECK_ERROR(expectError(j), "/dataset/kind", "one of: idx, csv, text, synthetic");

    j = validJson();
    j["dataset"]["normalization"] = "minmax";
    CHECK_ERROR(expectError(j), "/dataset/normalization", "none, scale, standardize");

    j = validJson();
    j["training"]["learning_rat"] = 0.1;
    CHECK_ERROR(expectError(j), "/training/learning_rat", "unknown key");

    j = validJson();
    j["extra"] = true;
    CHECK_ERROR(expectError(j), "/extra", "unknown key");

    j = validJson();
    j["training"]["batch_size"] = 0;
    CHECK_ERROR(expectError(j), "/training/batch_size", "0 is out of range (1 to");

    j = validJson();
    j["dataset"]["validation_split"] = 1.0;
    CHECK_ERROR(expectError(j), "/dataset/validation_split", "out of range (0 to 1, excluding 1)");

    j = validJson();
    j["training"]["momentum"] = -0.5;
    CHECK_ERROR(expectError(j), "/training/momentum", "out of range");

    j = validJson();
    j["training"]["device"] = "";
    CHECK_ERROR(expectError(j), "/training/device", "empty");
}

void TestProjectFile::badFilesOnDisk() {
    struct Case {
        const char* file;
        const char* path;
        const char* fragment;
    };
    const std::vector<Case> cases = {
        {"newer_version.strata", "/format_version", "written by a newer Strata (format 7); this build reads format 2"},
        {"truncated.strata", "", "line 12, column 24: invalid JSON"},
        {"wrong_type.strata", "/graph/nodes/2/id", "expected an integer, got string"},
        {"unknown_layer.strata", "/graph/nodes/3/type", "unknown layer type 'Conv3D'"},
        {"bad_edge.strata", "/graph/edges/1/to/port", "unknown input port 'in1' of relu1"},
        {"unknown_optimizer.strata", "/training/optimizer", "unknown value 'rmsprop'"},
    };
    for (const Case& c : cases) {
        const std::string file = test::sourcePath(std::string("tests/data/projects/") + c.file);
        try {
            readProject(file);
            QFAIL(c.file);
        } catch (const ProjectError& e) {
            QVERIFY2(e.jsonPath() == c.path, e.what());
            QVERIFY2(contains(e.what(), c.fragment), e.what());
            QVERIFY2(contains(e.what(), file), e.what());
        }
    }
    // The good one beside them.
    const Project ok = readProject(test::sourcePath("tests/data/projects/minimal_mlp.strata"));
    QVERIFY(analyzeGraph(ok.graph).ok());
    QCOMPARE(ok.graph.nodes().size(), size_t(4));
}

void TestProjectFile::fileErrors() {
    const std::string missing = m_tmp.filePath("no/such/file.strata").toStdString();
    try {
        readProject(missing);
        QFAIL("read a missing file");
    } catch (const ProjectError& e) {
        QVERIFY2(contains(e.what(), missing), e.what());
        QVERIFY2(contains(e.what(), "cannot open"), e.what());
    }
    try {
        readProject(m_tmp.path().toStdString());
        QFAIL("read a folder");
    } catch (const ProjectError& e) {
        QVERIFY2(contains(e.what(), "folder"), e.what());
    }
    try {
        writeProject(richProject(), missing);
        QFAIL("wrote into a missing folder");
    } catch (const ProjectError& e) {
        QVERIFY2(contains(e.what(), missing), e.what());
    }
    // A name that is not UTF-8 cannot be written as JSON: a ProjectError, and the old file stays.
    const std::string path = m_tmp.filePath("keep.strata").toStdString();
    writeProject(richProject(), path);
    Project bad = richProject();
    bad.name = "bad \xff byte";
    try {
        writeProject(bad, path);
        QFAIL("wrote invalid UTF-8");
    } catch (const ProjectError& e) {
        QVERIFY2(contains(e.what(), path), e.what());
    }
    QVERIFY(readProject(path) == richProject());

    // Nothing is written that could not be read back.
    bad = richProject();
    bad.training.batchSize = 0;
    try {
        writeProject(bad, path);
        QFAIL("wrote batch size 0");
    } catch (const ProjectError& e) {
        QCOMPARE(e.jsonPath(), std::string("/training/batch_size"));
        QVERIFY2(contains(e.what(), "not saved"), e.what());
    }
    bad = richProject();
    bad.graph.setPosition(3, std::nan(""), 0);
    try {
        writeProject(bad, path);
        QFAIL("wrote a NaN position");
    } catch (const ProjectError& e) {
        QCOMPARE(e.jsonPath(), std::string("/graph/nodes/2/position/0"));
    }
    QVERIFY(readProject(path) == richProject());
}

void TestProjectFile::resolvesDatasetPaths() {
    QCOMPARE(resolveDatasetPath("/home/u/nets/a.strata", "data/train.csv"), std::string("/home/u/nets/data/train.csv"));
    QCOMPARE(resolveDatasetPath("/home/u/nets/a.strata", "../shared/x.gz"), std::string("/home/u/shared/x.gz"));
    QCOMPARE(resolveDatasetPath("/home/u/nets/a.strata", "/abs/x.gz"), std::string("/abs/x.gz"));
    QCOMPARE(resolveDatasetPath("/home/u/nets/a.strata", ""), std::string());
    QCOMPARE(resolveDatasetPath("a.strata", "data/x.csv"), std::string("data/x.csv"));
    QCOMPARE(resolveDatasetPath("nets/a.strata", "./x.csv"), std::string("nets/x.csv"));
}

void TestProjectFile::fuzzOnlyProjectErrors() {
    // Every truncation and several single-byte mutations at every offset of a valid file: reading
    // either succeeds (and the result round-trips) or throws ProjectError; nothing else, ever.
    const std::string text = readText(test::sourcePath("tests/data/projects/minimal_mlp.strata"));
    QVERIFY(text.size() > 500);
    int accepted = 0, rejected = 0;
    auto attempt = [&](const std::string& candidate, size_t at) {
        try {
            const Project p = parseProject(candidate, "fuzz");
            if (!(projectFromJson(projectToJson(p)) == p)) {
                qWarning("round trip differs after a change at byte %zu", at);
                return false;
            }
            ++accepted;
        } catch (const ProjectError&) {
            ++rejected;
        } catch (const std::exception& e) {
            qWarning("byte %zu: %s", at, e.what());
            return false;
        } catch (...) {
            qWarning("byte %zu: unknown exception", at);
            return false;
        }
        return true;
    };
    const char replacements[] = {'"', '}', ']', '0', '9', '-', 'x', ',', ':', '\0', '\xff', '[', ' ', '.', 'e'};
    for (size_t i = 0; i < text.size(); ++i) {
        QVERIFY(attempt(text.substr(0, i), i));
        for (char r : replacements) {
            if (text[i] == r) continue;
            std::string m = text;
            m[i] = r;
            QVERIFY(attempt(m, i));
        }
        std::string dropped = text;
        dropped.erase(i, 1);
        QVERIFY(attempt(dropped, i));
    }
    qInfo("%d variants accepted, %d rejected with ProjectError", accepted, rejected);
    QVERIFY(accepted > 0);
    QVERIFY(rejected > 10 * static_cast<int>(text.size()));
}

void TestProjectFile::examplesLoadAndAnalyze() {
    int files = 0;
    for (const auto& entry : std::filesystem::directory_iterator(test::sourcePath("examples"))) {
        if (entry.path().extension() != ".strata") continue;
        ++files;
        const std::string path = entry.path().string();
        Project p;
        try {
            p = readProject(path);
        } catch (const ProjectError& e) {
            QFAIL(e.what());
        }
        const GraphAnalysis a = analyzeGraph(p.graph);
        std::string problems;
        for (const Problem& pr : a.problems) problems += pr.message + "\n";
        QVERIFY2(a.ok(), (path + ":\n" + problems).c_str());
        qInfo("%s: %lld parameters", entry.path().filename().c_str(), static_cast<long long>(a.parameterCount));
        // Positions run top to bottom or left to right, never stacked on one spot.
        std::set<std::pair<double, double>> spots;
        for (const Node* n : p.graph.nodes()) spots.insert({n->x, n->y});
        QCOMPARE(spots.size(), p.graph.nodes().size());
        // Saving an example and reading it back changes nothing.
        const std::string copy = m_tmp.filePath(QString::fromStdString(entry.path().filename().string())).toStdString();
        writeProject(p, copy);
        QVERIFY(readProject(copy) == p);
    }
    QVERIFY(files >= 3);

    // The Fashion-MNIST examples: the recipes the brief asks for.
    const Project mlp = readProject(test::sourcePath("examples/fashion_mlp.strata"));
    const GraphAnalysis ma = analyzeGraph(mlp.graph);
    QCOMPARE(ma.parameterCount, int64_t(784 * 256 + 256 + 256 * 10 + 10));
    QCOMPARE(mlp.dataset.classNames.size(), size_t(10));
    QCOMPARE(mlp.dataset.classNames[9], std::string("Ankle boot"));
    QCOMPARE(mlp.dataset.trainImages, std::string("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"));
    QCOMPARE(mlp.dataset.validationLabels, std::string("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz"));
    QCOMPARE(mlp.training.batchSize, 64);
    QCOMPARE(mlp.training.learningRate, 0.01);

    const Project cnn = readProject(test::sourcePath("examples/fashion_cnn.strata"));
    const GraphAnalysis ca = analyzeGraph(cnn.graph);
    QCOMPARE(ca.parameterCount, int64_t((32 * 9 + 32) + (64 * 32 * 9 + 64) + (3136 * 128 + 128) + (128 * 10 + 10)));
    const std::vector<int> order = cnn.graph.topologicalOrder();
    QCOMPARE(*ca.shapeOf(order.back()), (Shape{10}));

    const Project bn = readProject(test::sourcePath("examples/fashion_cnn_bn.strata"));
    const GraphAnalysis ba = analyzeGraph(bn.graph);
    QCOMPARE(*ba.shapeOf(bn.graph.topologicalOrder().back()), (Shape{10}));
    QCOMPARE(bn.training.epochs, 10);
    QCOMPARE(bn.dataset.normalization, NormalizationMode::Standardize);
}

// Issue 34: the project id travels with the file (format 2); a format 1 file reads without one; a bad id is
// refused at /id with what to do; every new id differs.
void TestProjectFile::projectIdRoundTrips() {
    Project p = richProject();
    p.id = newProjectId();
    QCOMPARE(p.id.size(), size_t(32));
    QVERIFY(isValidProjectId(p.id));
    QVERIFY(p.id != newProjectId());
    const std::string path = m_tmp.filePath("with-id.strata").toStdString();
    writeProject(p, path);
    QVERIFY(contains(readText(path), "{\n  \"format_version\": 2,\n  \"id\": \"" + p.id + "\","));
    const Project q = readProject(path);
    QCOMPARE(q.id, p.id);
    QVERIFY(q == p);
    QVERIFY(!(q == richProject()));  // another id: another project

    // Format 1: no id; written back as format 1, which older builds read (the workbench gives it an id when it
    // saves it, and then it is format 2).
    Project old = parseProject(R"({"format_version": 1, "name": "old"})");
    QVERIFY(old.id.empty());
    QCOMPARE(old.formatVersion, kProjectFormatVersion);
    QVERIFY(!projectToJson(old).contains("id"));
    QCOMPARE(projectToJson(old).at("format_version").get<int>(), 1);

    CHECK_ERROR(expectError(std::string(R"({"format_version": 2, "id": "no spaces allowed"})")), "/id",
                "is not a project id");
    CHECK_ERROR(expectError(std::string(R"({"format_version": 2, "id": ""})")), "/id", "remove the line");
    CHECK_ERROR(expectError(std::string(R"({"format_version": 2, "id": 7})")), "/id", "expected a string");
}

QTEST_APPLESS_MAIN(TestProjectFile)
#include "test_project_file.moc"
