// Graph editing, topological order, and analyzeGraph(): shapes through real
// networks and every validation problem, each checked for the node, port and text.
#include <QtTest>
#include <algorithm>
#include <random>
#include <set>

#include "core/graph/Graph.h"
#include "core/layers/LayerRegistry.h"

using namespace strata;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Runs `fn`, which must throw a GraphError; returns it.
template <typename Fn>
GraphError expectGraphError(Fn fn) {
    try {
        fn();
    } catch (const GraphError& e) {
        return e;
    } catch (const std::exception& e) {
        qFatal("expected GraphError, got another exception: %s", e.what());
    }
    qFatal("expected GraphError, nothing was thrown");
}

// The problems about one node (and port, when given).
std::vector<Problem> problemsAt(const GraphAnalysis& a, int node, const std::string& port = "*") {
    std::vector<Problem> out;
    for (const Problem& p : a.problems)
        if (p.node == node && (port == "*" || p.port == port)) out.push_back(p);
    return out;
}

std::string allProblems(const GraphAnalysis& a) {
    std::string s;
    for (const Problem& p : a.problems) s += "[" + std::to_string(p.node) + ":" + p.port + "] " + p.message + "\n";
    return s;
}

Shape shapeOrEmpty(const GraphAnalysis& a, int node) {
    const Shape* s = a.shapeOf(node);
    return s ? *s : Shape{};
}

// Appends `type` fed by `from` (port "in") and returns its id.
int chain(Graph& g, int from, const std::string& type, const Json& params = Json::object(),
          const std::string& name = {}) {
    const int id = g.addNode(type, name, params);
    g.connect(from, id);
    return id;
}

}  // namespace

class TestGraph : public QObject {
    Q_OBJECT

private slots:
    void defaultNamesAndIds();
    void insertNodeChecks();
    void connectValidation();
    void disconnectAndRemove();
    void renameAndPositions();
    void paramDependentPorts();
    void topologicalOrderIsDeterministic();
    void cycleIsReported();
    void indexesFollowEveryEdit();

    void shapesThroughMlp();
    void shapesThroughCnn();
    void shapesThroughResidualBlock();
    void residualMismatchNamesBothShapes();
    void shapesThroughConcat();
    void concatMismatch();
    void textClassifier();

    void problemUnknownType();
    void problemBadParameter();
    void problemUnconnectedInput();
    void problemCycle();
    void problemShapeMismatch();
    void problemNoInput();
    void problemTwoInputs();
    void problemTwoOutputs();
    void problemEmptyGraph();
    void badNodeDoesNotHideOtherShapes();
};

void TestGraph::defaultNamesAndIds() {
    Graph g;
    QVERIFY(g.empty());
    const int in = g.addNode("Input");
    const int d1 = g.addNode("Dense");
    const int d2 = g.addNode("Dense");
    QCOMPARE(g.node(in)->name, std::string("input1"));
    QCOMPARE(g.node(d1)->name, std::string("dense1"));
    QCOMPARE(g.node(d2)->name, std::string("dense2"));
    QVERIFY(in < d1 && d1 < d2);
    QCOMPARE(g.nextId(), d2 + 1);
    QCOMPARE(g.addNode("MaxPool2D"), d2 + 1);
    QCOMPARE(g.nodeByName("maxpool2d1")->id, d2 + 1);

    // A freed number is reused; ids never are.
    g.removeNode(d1);
    const int d3 = g.addNode("Dense");
    QCOMPARE(g.node(d3)->name, std::string("dense1"));
    QVERIFY(d3 > d2 + 1);

    // Explicit names must be unique.
    const GraphError e = expectGraphError([&] { g.addNode("ReLU", "dense2"); });
    QVERIFY(contains(e.what(), "dense2"));
    QVERIFY(contains(e.what(), "already used"));

    std::vector<int> ids;
    for (const Node* n : g.nodes()) ids.push_back(n->id);
    QVERIFY(std::is_sorted(ids.begin(), ids.end()));
    QCOMPARE(ids.size(), size_t(4));

    g.clear();
    QVERIFY(g.empty());
    QCOMPARE(g.nextId(), 1);
}

void TestGraph::insertNodeChecks() {
    Graph g;
    Node n;
    n.id = 7;
    n.type = "Dense";
    n.name = "head";
    g.insertNode(n);
    QCOMPARE(g.nextId(), 8);
    QCOMPARE(g.addNode("ReLU"), 8);

    Node sameId = n;
    sameId.name = "other";
    GraphError e = expectGraphError([&] { g.insertNode(sameId); });
    QCOMPARE(e.node(), 7);
    QVERIFY(contains(e.what(), "id 7"));

    Node sameName = n;
    sameName.id = 20;
    e = expectGraphError([&] { g.insertNode(sameName); });
    QCOMPARE(e.node(), 20);
    QVERIFY(contains(e.what(), "'head'"));
    QCOMPARE(g.nodes().size(), size_t(2));
}

void TestGraph::connectValidation() {
    Graph g;
    const int in = g.addNode("Input", "in", {{"shape", {4}}});
    const int dense = g.addNode("Dense", "fc");
    const int odd = g.addNode("Conv3D", "strange");
    const int add = g.addNode("Add", "sum");

    // Missing nodes.
    GraphError e = expectGraphError([&] { g.connect(99, dense); });
    QCOMPARE(e.node(), 99);
    QVERIFY(contains(e.what(), "99"));
    e = expectGraphError([&] { g.connect(in, 98, "in"); });
    QCOMPARE(e.node(), 98);
    QCOMPARE(e.port(), std::string("in"));

    // Unknown layer type: every port refused, with the type named.
    e = expectGraphError([&] { g.connect(in, odd, "in"); });
    QCOMPARE(e.node(), odd);
    QCOMPARE(e.port(), std::string("in"));
    QVERIFY(contains(e.what(), "unknown layer type 'Conv3D'"));
    QVERIFY(contains(e.what(), "strange"));

    // A port the type does not have, with the ports listed.
    e = expectGraphError([&] { g.connect(in, dense, "in0"); });
    QCOMPARE(e.node(), dense);
    QCOMPARE(e.port(), std::string("in0"));
    QVERIFY(contains(e.what(), "no input port 'in0'"));
    QVERIFY(contains(e.what(), "fc"));
    e = expectGraphError([&] { g.connect(dense, add, "in"); });
    QVERIFY(contains(e.what(), "in0, in1"));
    e = expectGraphError([&] { g.connect(dense, in, "in"); });
    QCOMPARE(e.node(), in);
    QVERIFY(contains(e.what(), "takes no inputs"));

    // Output port other than "out".
    e = expectGraphError([&] { g.connect(PortRef{in, "output"}, PortRef{dense, "in"}); });
    QCOMPARE(e.node(), in);
    QCOMPARE(e.port(), std::string("output"));

    // Self-loop.
    e = expectGraphError([&] { g.connect(add, add, "in0"); });
    QCOMPARE(e.node(), add);
    QCOMPARE(e.port(), std::string("in0"));
    QVERIFY(contains(e.what(), "itself"));

    // Already connected.
    g.connect(in, dense);
    e = expectGraphError([&] { g.connect(add, dense); });
    QCOMPARE(e.node(), dense);
    QCOMPARE(e.port(), std::string("in"));
    QVERIFY(contains(e.what(), "already fed by 'in'"));

    // A node's output may feed several ports.
    g.connect(in, add, "in0");
    g.connect(in, add, "in1");
    QCOMPARE(g.edgesFrom(in).size(), size_t(3));
    QCOMPARE(g.edges().size(), size_t(3));
    QVERIFY(g.edgeInto({add, "in1"}).has_value());
    QCOMPARE(g.edgeInto({add, "in1"})->from.node, in);
    QVERIFY(!g.edgeInto({dense, "x"}).has_value());
    QVERIFY(g.inputPorts(odd).empty());
    QCOMPARE(g.inputPorts(add), (std::vector<std::string>{"in0", "in1"}));
    QVERIFY(g.inputPorts(in).empty());
    QVERIFY(g.inputPorts(12345).empty());
}

void TestGraph::disconnectAndRemove() {
    Graph g;
    const int in = g.addNode("Input", {}, {{"shape", {4}}});
    const int a = chain(g, in, "Dense");
    const int b = chain(g, a, "ReLU");
    const int c = chain(g, b, "Dense");

    auto removed = g.disconnect({b, "in"});
    QVERIFY(removed.has_value());
    QCOMPARE(removed->from.node, a);
    QVERIFY(!g.disconnect({b, "in"}).has_value());
    QCOMPARE(g.edges().size(), size_t(2));

    g.connect(a, b);
    const std::vector<Edge> gone = g.removeNode(b);
    QCOMPARE(gone.size(), size_t(2));
    QVERIFY(std::find(gone.begin(), gone.end(), Edge{{a, "out"}, {b, "in"}}) != gone.end());
    QVERIFY(std::find(gone.begin(), gone.end(), Edge{{b, "out"}, {c, "in"}}) != gone.end());
    QVERIFY(!g.node(b));
    QCOMPARE(g.edges().size(), size_t(1));
    QVERIFY(!g.edgeInto({c, "in"}).has_value());

    const GraphError e = expectGraphError([&] { g.removeNode(b); });
    QCOMPARE(e.node(), b);
}

void TestGraph::renameAndPositions() {
    Graph g;
    const int a = g.addNode("Dense", {}, Json::object(), 10, 20);
    const int b = g.addNode("Dense");
    QCOMPARE(g.node(a)->x, 10.0);
    QCOMPARE(g.node(a)->y, 20.0);
    g.setPosition(a, -5.5, 7.25);
    QCOMPARE(g.node(a)->x, -5.5);
    QCOMPARE(g.node(a)->y, 7.25);

    g.rename(a, "classifier");
    QVERIFY(g.nodeByName("classifier") == g.node(a));
    QVERIFY(!g.nodeByName("dense1"));
    g.rename(a, "classifier");  // its own name: fine
    GraphError e = expectGraphError([&] { g.rename(b, "classifier"); });
    QCOMPARE(e.node(), b);
    QVERIFY(contains(e.what(), "classifier"));
    e = expectGraphError([&] { g.rename(b, ""); });
    QCOMPARE(e.node(), b);
    QCOMPARE(g.node(b)->name, std::string("dense2"));
    e = expectGraphError([&] { g.setPosition(77, 0, 0); });
    QCOMPARE(e.node(), 77);
}

void TestGraph::paramDependentPorts() {
    Graph g;
    const int in = g.addNode("Input", {}, {{"shape", {8}}});
    const int add = g.addNode("Add", {}, {{"inputs", 3}});
    QCOMPARE(g.inputPorts(add), (std::vector<std::string>{"in0", "in1", "in2"}));
    g.connect(in, add, "in0");
    g.connect(in, add, "in1");
    g.connect(in, add, "in2");

    // Invalid params: the ports are unknown, so no edge is dropped.
    g.setParams(add, {{"inputs", 1}});
    QCOMPARE(g.edges().size(), size_t(3));
    // Fewer ports: the edge into in2 goes, the others stay.
    g.setParams(add, {{"inputs", 2}});
    QCOMPARE(g.edges().size(), size_t(2));
    QVERIFY(g.edgeInto({add, "in0"}).has_value());
    QVERIFY(g.edgeInto({add, "in1"}).has_value());
    QVERIFY(!g.edgeInto({add, "in2"}).has_value());
    const GraphError e = expectGraphError([&] { g.connect(in, add, "in2"); });
    QCOMPARE(e.port(), std::string("in2"));
    // More ports: existing edges stay, the new port is free and shows as unconnected.
    g.setParams(add, {{"inputs", 4}});
    QCOMPARE(g.edges().size(), size_t(2));
    const GraphAnalysis a = analyzeGraph(g);
    QCOMPARE(problemsAt(a, add, "in2").size(), size_t(1));
    QCOMPARE(problemsAt(a, add, "in3").size(), size_t(1));
    QVERIFY(problemsAt(a, add, "in0").empty());
    QVERIFY(!a.shapeOf(add));
    // Setting params on a missing node throws.
    QCOMPARE(expectGraphError([&] { g.setParams(999, Json::object()); }).node(), 999);
}

void TestGraph::topologicalOrderIsDeterministic() {
    // Ids deliberately out of flow order: 5 -> 3 -> 1, 5 -> 4 -> 1, 2 isolated-ish (feeds 4? no: sink).
    Graph g;
    auto put = [&](int id, const std::string& type, const Json& params = Json::object()) {
        Node n;
        n.id = id;
        n.type = type;
        n.name = "n" + std::to_string(id);
        n.params = params;
        g.insertNode(n);
    };
    put(1, "Add");
    put(2, "ReLU");
    put(3, "ReLU");
    put(4, "Tanh");
    put(5, "Input", {{"shape", {4}}});
    g.connect(5, 3);
    g.connect(5, 4);
    g.connect(3, 1, "in1");
    g.connect(4, 1, "in0");
    g.connect(1, 2);
    const std::vector<int> order = g.topologicalOrder();
    QCOMPARE(order, (std::vector<int>{5, 3, 4, 1, 2}));
    // Every edge goes forward.
    for (const Edge& e : g.edges()) {
        auto pos = [&](int id) { return std::find(order.begin(), order.end(), id) - order.begin(); };
        QVERIFY(pos(e.from.node) < pos(e.to.node));
    }
    QVERIFY(g.findCycle().empty());
    // The same graph built again gives the same order.
    Graph copy = g;
    QCOMPARE(copy.topologicalOrder(), order);
    QVERIFY(copy == g);
}

void TestGraph::cycleIsReported() {
    Graph g;
    const int in = g.addNode("Input", {}, {{"shape", {4}}});
    const int add = g.addNode("Add");
    const int fc = g.addNode("Dense", {}, {{"units", 4}});
    const int act = g.addNode("ReLU");
    g.connect(in, add, "in0");
    g.connect(add, fc);
    g.connect(fc, act);
    g.connect(act, add, "in1");  // back edge: add -> fc -> act -> add
    QCOMPARE(g.findCycle(), (std::vector<int>{add, fc, act}));
    const GraphError e = expectGraphError([&] { g.topologicalOrder(); });
    QCOMPARE(e.node(), add);
    QVERIFY(contains(e.what(), "add1 -> dense1 -> relu1 -> add1"));
}

void TestGraph::shapesThroughMlp() {
    Graph g;
    const int in = g.addNode("Input", {}, {{"shape", {1, 28, 28}}});
    const int flat = chain(g, in, "Flatten");
    const int d1 = chain(g, flat, "Dense", {{"units", 256}});
    const int r = chain(g, d1, "ReLU");
    const int d2 = chain(g, r, "Dense", {{"units", 10}});
    const GraphAnalysis a = analyzeGraph(g);
    QVERIFY2(a.ok(), allProblems(a).c_str());
    QCOMPARE(shapeOrEmpty(a, in), (Shape{1, 28, 28}));
    QCOMPARE(shapeOrEmpty(a, flat), (Shape{784}));
    QCOMPARE(shapeOrEmpty(a, d1), (Shape{256}));
    QCOMPARE(shapeOrEmpty(a, r), (Shape{256}));
    QCOMPARE(shapeOrEmpty(a, d2), (Shape{10}));
    QCOMPARE(a.parameterCount, int64_t(784 * 256 + 256 + 256 * 10 + 10));
    // Normalized params carry the defaults.
    QCOMPARE(a.params.at(d1).at("use_bias").get<bool>(), true);
    QCOMPARE(a.params.size(), size_t(5));
}

void TestGraph::shapesThroughCnn() {
    Graph g;
    const int in = g.addNode("Input", {}, {{"shape", {1, 28, 28}}});
    const int c1 = chain(g, in, "Conv2D", {{"filters", 32}, {"kernel", {3, 3}}, {"padding", {1, 1}}});
    const int r1 = chain(g, c1, "ReLU");
    const int p1 = chain(g, r1, "MaxPool2D", {{"kernel", {2, 2}}});
    const int c2 = chain(g, p1, "Conv2D", {{"filters", 64}, {"kernel", 3}, {"padding", 1}});
    const int r2 = chain(g, c2, "ReLU");
    const int p2 = chain(g, r2, "MaxPool2D", {{"kernel", 2}});
    const int f = chain(g, p2, "Flatten");
    const int d1 = chain(g, f, "Dense", {{"units", 128}});
    const int r3 = chain(g, d1, "ReLU");
    const int d2 = chain(g, r3, "Dense", {{"units", 10}});
    const GraphAnalysis a = analyzeGraph(g);
    QVERIFY2(a.ok(), allProblems(a).c_str());
    QCOMPARE(shapeOrEmpty(a, c1), (Shape{32, 28, 28}));
    QCOMPARE(shapeOrEmpty(a, p1), (Shape{32, 14, 14}));
    QCOMPARE(shapeOrEmpty(a, c2), (Shape{64, 14, 14}));
    QCOMPARE(shapeOrEmpty(a, p2), (Shape{64, 7, 7}));
    QCOMPARE(shapeOrEmpty(a, f), (Shape{3136}));
    QCOMPARE(shapeOrEmpty(a, d2), (Shape{10}));
    const int64_t expected = (32 * 1 * 9 + 32) + (64 * 32 * 9 + 64) + (3136 * 128 + 128) + (128 * 10 + 10);
    QCOMPARE(a.parameterCount, expected);

    // Without padding the feature maps shrink: 28 -> 26 -> 13 -> 11 -> 5.
    g.setParams(c1, {{"filters", 32}, {"kernel", 3}});
    g.setParams(c2, {{"filters", 64}, {"kernel", 3}});
    const GraphAnalysis b = analyzeGraph(g);
    QVERIFY2(b.ok(), allProblems(b).c_str());
    QCOMPARE(shapeOrEmpty(b, p2), (Shape{64, 5, 5}));
    QCOMPARE(shapeOrEmpty(b, r3), (Shape{128}));
}

void TestGraph::shapesThroughResidualBlock() {
    Graph g;
    const int in = g.addNode("Input", {}, {{"shape", {8, 16, 16}}});
    const int c1 = chain(g, in, "Conv2D", {{"filters", 8}, {"kernel", 3}, {"padding", 1}});
    const int bn = chain(g, c1, "BatchNorm");
    const int r1 = chain(g, bn, "ReLU");
    const int c2 = chain(g, r1, "Conv2D", {{"filters", 8}, {"kernel", 3}, {"padding", 1}});
    const int add = g.addNode("Add");
    g.connect(c2, add, "in0");
    g.connect(in, add, "in1");  // the skip connection
    const int r2 = chain(g, add, "ReLU");
    const int gap = chain(g, r2, "GlobalAvgPool");
    const int head = chain(g, gap, "Dense", {{"units", 5}});
    const GraphAnalysis a = analyzeGraph(g);
    QVERIFY2(a.ok(), allProblems(a).c_str());
    QCOMPARE(shapeOrEmpty(a, add), (Shape{8, 16, 16}));
    QCOMPARE(shapeOrEmpty(a, gap), (Shape{8}));
    QCOMPARE(shapeOrEmpty(a, head), (Shape{5}));
    // BatchNorm's running statistics are state, not learnable: only gamma and beta count.
    const int64_t conv = 8 * 8 * 9 + 8;
    QCOMPARE(a.parameterCount, conv + 2 * 8 + conv + (8 * 5 + 5));
}

void TestGraph::residualMismatchNamesBothShapes() {
    Graph g;
    const int in = g.addNode("Input", {}, {{"shape", {8, 16, 16}}});
    const int c1 = chain(g, in, "Conv2D", {{"filters", 16}, {"kernel", 3}, {"padding", 1}});
    const int add = g.addNode("Add", "merge");
    g.connect(c1, add, "in0");
    g.connect(in, add, "in1");
    const int after = chain(g, add, "ReLU");
    const GraphAnalysis a = analyzeGraph(g);
    QVERIFY(!a.ok());
    const auto ps = problemsAt(a, add);
    QCOMPARE(ps.size(), size_t(1));
    QCOMPARE(ps[0].port, std::string("in1"));
    QVERIFY2(contains(ps[0].message, "merge"), ps[0].message.c_str());
    QVERIFY2(contains(ps[0].message, "in1"), ps[0].message.c_str());
    QVERIFY2(contains(ps[0].message, "[8, 16, 16]"), ps[0].message.c_str());
    QVERIFY2(contains(ps[0].message, "[16, 16, 16]"), ps[0].message.c_str());
    QCOMPARE(a.problems.size(), size_t(1));
    // Shapes before the bad node are still known; after it they are not.
    QCOMPARE(shapeOrEmpty(a, c1), (Shape{16, 16, 16}));
    QVERIFY(!a.shapeOf(add));
    QVERIFY(!a.shapeOf(after));
}

void TestGraph::shapesThroughConcat() {
    Graph g;
    const int in = g.addNode("Input", {}, {{"shape", {3, 8, 8}}});
    const int a1 = chain(g, in, "Conv2D", {{"filters", 4}, {"kernel", 1}});
    const int b1 = chain(g, in, "Conv2D", {{"filters", 6}, {"kernel", 3}, {"padding", 1}});
    const int cat = g.addNode("Concat", {}, {{"inputs", 3}});
    g.connect(a1, cat, "in0");
    g.connect(b1, cat, "in1");
    g.connect(in, cat, "in2");
    const int flat = chain(g, cat, "Flatten");
    const GraphAnalysis a = analyzeGraph(g);
    QVERIFY2(a.ok(), allProblems(a).c_str());
    QCOMPARE(shapeOrEmpty(a, cat), (Shape{13, 8, 8}));
    QCOMPARE(shapeOrEmpty(a, flat), (Shape{13 * 64}));

    // Along the width instead: every other dimension must agree, so only in0 and in1 (both 8 wide) fit.
    g.setParams(cat, {{"inputs", 2}, {"axis", 2}});
    QVERIFY(!g.edgeInto({cat, "in2"}));
    const GraphAnalysis b = analyzeGraph(g);
    QCOMPARE(problemsAt(b, cat).size(), size_t(1));
    QCOMPARE(problemsAt(b, cat)[0].port, std::string("in1"));
}

void TestGraph::concatMismatch() {
    Graph g;
    const int in = g.addNode("Input", {}, {{"shape", {3, 8, 8}}});
    const int a1 = chain(g, in, "Conv2D", {{"filters", 4}, {"kernel", 1}});
    const int pooled = chain(g, in, "MaxPool2D", {{"kernel", 2}});
    const int cat = g.addNode("Concat", "joint");
    g.connect(a1, cat, "in0");
    g.connect(pooled, cat, "in1");
    const GraphAnalysis a = analyzeGraph(g);
    const auto ps = problemsAt(a, cat);
    QCOMPARE(ps.size(), size_t(1));
    QCOMPARE(ps[0].port, std::string("in1"));
    QVERIFY2(contains(ps[0].message, "joint"), ps[0].message.c_str());
    QVERIFY2(contains(ps[0].message, "[3, 4, 4]"), ps[0].message.c_str());
    QVERIFY2(contains(ps[0].message, "8"), ps[0].message.c_str());

    // An axis beyond the rank is a parameter problem found during shape inference.
    g.setParams(cat, {{"axis", 5}});
    const GraphAnalysis b = analyzeGraph(g);
    const auto qs = problemsAt(b, cat);
    QCOMPARE(qs.size(), size_t(1));
    QVERIFY2(contains(qs[0].message, "axis"), qs[0].message.c_str());
}

void TestGraph::textClassifier() {
    Graph g;
    const int in = g.addNode("Input", "tokens", {{"shape", {32}}});
    const int emb = chain(g, in, "Embedding", {{"vocab", 1000}, {"dim", 16}});
    const int pool = chain(g, emb, "SequenceMeanPool");
    const int head = chain(g, pool, "Dense", {{"units", 4}});
    const GraphAnalysis a = analyzeGraph(g);
    QVERIFY2(a.ok(), allProblems(a).c_str());
    QCOMPARE(shapeOrEmpty(a, emb), (Shape{32, 16}));
    QCOMPARE(shapeOrEmpty(a, pool), (Shape{16}));
    QCOMPARE(shapeOrEmpty(a, head), (Shape{4}));
    QCOMPARE(a.parameterCount, int64_t(1000 * 16 + 16 * 4 + 4));

    // Without the Embedding the pool gets token ids of rank 1.
    g.removeNode(emb);
    g.connect(in, pool);
    const GraphAnalysis b = analyzeGraph(g);
    const auto ps = problemsAt(b, pool, "in");
    QCOMPARE(ps.size(), size_t(1));
    QVERIFY2(contains(ps[0].message, "sequencemeanpool1: in:"), ps[0].message.c_str());
    QVERIFY2(contains(ps[0].message, "[32]"), ps[0].message.c_str());
    QVERIFY2(contains(ps[0].message, "Embedding"), ps[0].message.c_str());
}

void TestGraph::problemUnknownType() {
    Graph g;
    const int in = g.addNode("Input", {}, {{"shape", {4}}});
    Node odd;
    odd.id = 10;
    odd.type = "Conv3D";
    odd.name = "vol";
    g.insertNode(odd);
    const GraphAnalysis a = analyzeGraph(g);
    const auto ps = problemsAt(a, 10);
    QCOMPARE(ps.size(), size_t(1));
    QVERIFY(ps[0].port.empty());
    QVERIFY2(contains(ps[0].message, "vol: unknown layer type 'Conv3D'"), ps[0].message.c_str());
    for (const std::string& known : layerRegistry().names()) QVERIFY(contains(ps[0].message, known));
    QVERIFY(a.shapeOf(in));
    QVERIFY(!a.shapeOf(10));
}

void TestGraph::problemBadParameter() {
    Graph g;
    const int in = g.addNode("Input", {}, {{"shape", {4}}});
    const int d = chain(g, in, "Dense", {{"units", 0}});
    GraphAnalysis a = analyzeGraph(g);
    auto ps = problemsAt(a, d);
    QCOMPARE(ps.size(), size_t(1));
    QVERIFY2(contains(ps[0].message, "dense1: parameter units"), ps[0].message.c_str());
    QVERIFY2(contains(ps[0].message, "1 to 1048576"), ps[0].message.c_str());
    QVERIFY(!a.params.count(d));
    QVERIFY(!a.shapeOf(d));

    g.setParams(d, {{"units", 4}, {"activation", "relu"}});
    a = analyzeGraph(g);
    ps = problemsAt(a, d);
    QCOMPARE(ps.size(), size_t(1));
    QVERIFY2(contains(ps[0].message, "activation"), ps[0].message.c_str());
    QVERIFY2(contains(ps[0].message, "units"), ps[0].message.c_str());  // the known ones are listed

    g.setParams(d, {{"units", "many"}});
    a = analyzeGraph(g);
    ps = problemsAt(a, d);
    QCOMPARE(ps.size(), size_t(1));
    QVERIFY2(contains(ps[0].message, "not an integer"), ps[0].message.c_str());
}

void TestGraph::problemUnconnectedInput() {
    Graph g;
    const int in = g.addNode("Input", {}, {{"shape", {4}}});
    const int add = g.addNode("Add", "sum");
    g.connect(in, add, "in0");
    const GraphAnalysis a = analyzeGraph(g);
    const auto ps = problemsAt(a, add);
    QCOMPARE(ps.size(), size_t(1));
    QCOMPARE(ps[0].port, std::string("in1"));
    QVERIFY2(contains(ps[0].message, "sum: input 'in1' is not connected"), ps[0].message.c_str());
    QCOMPARE(a.problems.size(), size_t(1));

    // An unconnected input is reported even when the node's params are bad.
    Graph h;
    h.addNode("Input", {}, {{"shape", {4}}});
    const int d = h.addNode("Dense", {}, {{"units", -3}});
    const GraphAnalysis b = analyzeGraph(h);
    QCOMPARE(problemsAt(b, d, "in").size(), size_t(1));
    QCOMPARE(problemsAt(b, d, "").size(), size_t(1));
}

void TestGraph::problemCycle() {
    Graph g;
    const int in = g.addNode("Input", {}, {{"shape", {4}}});
    const int add = g.addNode("Add");
    const int fc = g.addNode("Dense", {}, {{"units", 4}});
    const int head = g.addNode("Dense", "head", {{"units", 2}});
    g.connect(in, add, "in0");
    g.connect(add, fc);
    g.connect(fc, add, "in1");
    g.connect(fc, head);
    const GraphAnalysis a = analyzeGraph(g);
    QVERIFY(!a.ok());
    for (int id : {add, fc}) {
        const auto ps = problemsAt(a, id);
        QCOMPARE(ps.size(), size_t(1));
        QVERIFY2(contains(ps[0].message, "add1 -> dense1 -> add1"), ps[0].message.c_str());
        QVERIFY2(contains(ps[0].message, "cycle"), ps[0].message.c_str());
    }
    QVERIFY(problemsAt(a, head).empty());  // downstream of the cycle: no shape, no extra problem
    QVERIFY(a.shapeOf(in));
    QVERIFY(!a.shapeOf(head));
    QCOMPARE(a.problems.size(), size_t(2));
}

void TestGraph::problemShapeMismatch() {
    Graph g;
    const int in = g.addNode("Input", {}, {{"shape", {1, 28, 28}}});
    const int d = chain(g, in, "Dense", {{"units", 10}}, "fc");
    const GraphAnalysis a = analyzeGraph(g);
    const auto ps = problemsAt(a, d);
    QCOMPARE(ps.size(), size_t(1));
    QCOMPARE(ps[0].port, std::string("in"));
    QVERIFY2(contains(ps[0].message, "fc: in: "), ps[0].message.c_str());
    QVERIFY2(contains(ps[0].message, "[1, 28, 28]"), ps[0].message.c_str());
    QVERIFY2(contains(ps[0].message, "Flatten"), ps[0].message.c_str());
    QCOMPARE(a.problems.size(), size_t(1));
}

void TestGraph::problemNoInput() {
    Graph g;
    const int d = g.addNode("Dense");
    const GraphAnalysis a = analyzeGraph(g);
    const auto whole = problemsAt(a, -1);
    QCOMPARE(whole.size(), size_t(1));
    QVERIFY2(contains(whole[0].message, "no Input node"), whole[0].message.c_str());
    QCOMPARE(problemsAt(a, d, "in").size(), size_t(1));
}

void TestGraph::problemTwoInputs() {
    Graph g;
    const int in1 = g.addNode("Input", "pixels", {{"shape", {4}}});
    const int in2 = g.addNode("Input", "extra", {{"shape", {4}}});
    const int add = g.addNode("Add");
    g.connect(in1, add, "in0");
    g.connect(in2, add, "in1");
    const GraphAnalysis a = analyzeGraph(g);
    QCOMPARE(a.problems.size(), size_t(1));
    QCOMPARE(a.problems[0].node, in2);
    QVERIFY2(contains(a.problems[0].message, "extra"), a.problems[0].message.c_str());
    QVERIFY2(contains(a.problems[0].message, "pixels"), a.problems[0].message.c_str());
    QVERIFY2(contains(a.problems[0].message, "one input"), a.problems[0].message.c_str());
    QCOMPARE(shapeOrEmpty(a, add), (Shape{4}));  // still analyzed
}

void TestGraph::problemTwoOutputs() {
    Graph g;
    const int in = g.addNode("Input", {}, {{"shape", {4}}});
    chain(g, in, "Dense", {{"units", 3}}, "left");
    chain(g, in, "Dense", {{"units", 2}}, "right");
    const GraphAnalysis a = analyzeGraph(g);
    QCOMPARE(a.problems.size(), size_t(1));
    QCOMPARE(a.problems[0].node, -1);
    QVERIFY2(contains(a.problems[0].message, "2 outputs (left, right)"), a.problems[0].message.c_str());
}

void TestGraph::problemEmptyGraph() {
    const GraphAnalysis a = analyzeGraph(Graph{});
    QCOMPARE(a.problems.size(), size_t(1));
    QCOMPARE(a.problems[0].node, -1);
    QVERIFY(contains(a.problems[0].message, "empty"));
    QVERIFY(a.outputShapes.empty());
}

void TestGraph::badNodeDoesNotHideOtherShapes() {
    // Two branches off one Flatten: a broken Dense on one side leaves the other side's shapes intact.
    Graph g;
    const int in = g.addNode("Input", {}, {{"shape", {2, 3}}});
    const int flat = chain(g, in, "Flatten");
    const int bad = chain(g, flat, "Dense", {{"units", 0}});
    const int badAct = chain(g, bad, "ReLU");
    const int good = chain(g, flat, "Dense", {{"units", 5}});
    const int goodAct = chain(g, good, "Sigmoid");
    const int add = g.addNode("Add");
    g.connect(badAct, add, "in0");
    g.connect(goodAct, add, "in1");
    const GraphAnalysis a = analyzeGraph(g);
    QCOMPARE(a.problems.size(), size_t(1));
    QCOMPARE(a.problems[0].node, bad);
    QCOMPARE(shapeOrEmpty(a, flat), (Shape{6}));
    QCOMPARE(shapeOrEmpty(a, goodAct), (Shape{5}));
    QVERIFY(!a.shapeOf(badAct));
    QVERIFY(!a.shapeOf(add));
    QCOMPARE(a.parameterCount, int64_t(6 * 5 + 5));
}

// nodeByName, edgeInto and edgesFrom answer from indexes (linear scans made loading 100,000 layers quadratic):
// after every kind of edit, in a long random sequence, they must agree with a scan of nodes() and edges().
void TestGraph::indexesFollowEveryEdit() {
    std::mt19937 rng(35);
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
    Graph g;
    std::set<std::string> namesEverUsed;
    auto check = [&](const Graph& graph, int step) {
        const std::string at = "after step " + std::to_string(step);
        for (const Node* n : graph.nodes()) QVERIFY2(graph.nodeByName(n->name) == n, (at + ": " + n->name).c_str());
        for (const std::string& name : namesEverUsed) {
            const Node* found = nullptr;
            for (const Node* n : graph.nodes())
                if (n->name == name) found = n;
            QVERIFY2(graph.nodeByName(name) == found, (at + ": name " + name).c_str());
        }
        for (const Node* n : graph.nodes()) {
            std::vector<Edge> from;
            for (const Edge& e : graph.edges())
                if (e.from.node == n->id) from.push_back(e);
            QVERIFY2(graph.edgesFrom(n->id) == from, (at + ": edges from " + n->name).c_str());
            for (const char* port : {"in", "in0", "in1", "in2", "in3"}) {
                std::optional<Edge> into;
                for (const Edge& e : graph.edges())
                    if (e.to == PortRef{n->id, port}) into = e;
                QVERIFY2(graph.edgeInto({n->id, port}) == into,
                         (at + ": edge into " + n->name + "." + std::string(port)).c_str());
            }
        }
    };
    for (int step = 0; step < 3000; ++step) {
        const std::vector<const Node*> nodes = g.nodes();
        const int n = static_cast<int>(nodes.size());
        const int op = pick(10);
        try {
            if (op <= 2 || n < 2) {
                const bool add = pick(2) == 0;
                const std::string name = pick(3) == 0 ? "n" + std::to_string(pick(40)) : std::string();
                const int id = add ? g.addNode("Add", name, Json{{"inputs", 2 + pick(3)}}) : g.addNode("ReLU", name);
                namesEverUsed.insert(g.node(id)->name);
            } else if (op <= 4) {
                const Node* a = nodes[static_cast<size_t>(pick(n))];
                const Node* b = nodes[static_cast<size_t>(pick(n))];
                const std::vector<std::string> ports = g.inputPorts(b->id);
                if (!ports.empty())
                    g.connect({a->id, "out"}, {b->id, ports[static_cast<size_t>(pick(int(ports.size())))]});
            } else if (op == 5 && !g.edges().empty()) {
                g.disconnect(g.edges()[static_cast<size_t>(pick(int(g.edges().size())))].to);
            } else if (op == 6) {
                g.removeNode(nodes[static_cast<size_t>(pick(n))]->id);
            } else if (op == 7) {
                const std::string name = "r" + std::to_string(pick(40));
                g.rename(nodes[static_cast<size_t>(pick(n))]->id, name);
                namesEverUsed.insert(name);
            } else if (op == 8) {
                const Node* a = nodes[static_cast<size_t>(pick(n))];
                if (a->type == "Add") g.setParams(a->id, Json{{"inputs", 2 + pick(3)}});
            } else if (pick(50) == 0) {
                g.clear();
            } else {
                // Undo of a removal: the node back with its id, and its edges.
                const Node copy = *nodes[static_cast<size_t>(pick(n))];
                const std::vector<Edge> edges = g.removeNode(copy.id);
                g.insertNode(copy);
                for (const Edge& e : edges) g.connect(e.from, e.to);
            }
        } catch (const GraphError&) {
            // A refused edit (taken name, taken port, self-loop) must leave the indexes as they were.
        }
        if (step % 10 == 0) check(g, step);
        if (QTest::currentTestFailed()) return;
    }
    // A copy carries its own indexes.
    const Graph copy = g;
    g.clear();
    check(copy, -1);
}

QTEST_APPLESS_MAIN(TestGraph)
#include "test_graph.moc"
