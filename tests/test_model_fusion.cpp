// Model's ReLU fusions (compile(..., fuse = true)): a ReLU run inside the Conv2D, BatchNorm or Add before
// it, and a ReLU's backward run inside the max pooling after it. Which ReLUs are fused, and that a fused
// model computes the same outputs, input gradients and parameter gradients as the unfused one, on
// every backend present, including a step where the conv output's memory is shared with the ReLU. And
// BatchNorm folded into the Conv2D or Dense before it for inference (core/export/FoldBatchNorm): the folded
// model gives the unfolded model's evaluation outputs on every backend.
#include <QtTest>
#include <random>

#include "core/backend/CpuBackend.h"
#include "core/export/FoldBatchNorm.h"
#include "core/graph/Model.h"
#include "core/infer/ExportCheck.h"
#include "core/layers/LayerRegistry.h"
#include "core/train/Checkpoint.h"
#include "tests/support/TestBackends.h"

using namespace strata;

namespace {

int chain(Graph& g, int from, const std::string& type, const Json& params = Json::object()) {
    const int id = g.addNode(type, {}, params);
    g.connect(from, id);
    return id;
}

// Input [2, 9, 9] -> Conv2D 4 (pad 1) -> ReLU -> MaxPool -> Conv2D 6 (no bias) -> ReLU -> Flatten -> Dense 5,
// plus, when `shared` is set, a Conv2D whose output feeds a ReLU AND an Add (that ReLU must not be fused),
// and the Add feeding a ReLU -> MaxPool (the Add does that ReLU's forward in place, the pooling its
// backward). With `batchNorm`: Conv2D 4 -> BatchNorm -> ReLU at the start, and Dense 7 -> BatchNorm -> ReLU
// -> Dense 5 at the end (each BatchNorm does its ReLU's forward in place).
Graph testGraph(bool shared, bool batchNorm = false) {
    Graph g;
    const int in = g.addNode("Input", {}, {{"shape", {2, 9, 9}}});
    const int c1 = chain(g, in, "Conv2D", {{"filters", 4}, {"kernel", 3}, {"padding", 1}});
    int x = chain(g, batchNorm ? chain(g, c1, "BatchNorm") : c1, "ReLU");
    if (shared) {
        const int c = chain(g, x, "Conv2D", {{"filters", 4}, {"kernel", 3}, {"padding", 1}});
        const int r = chain(g, c, "ReLU");
        const int add = g.addNode("Add");
        g.connect(r, add, "in0");
        g.connect(c, add, "in1");  // the conv output has a second consumer
        x = chain(g, add, "ReLU");
    }
    x = chain(g, x, "MaxPool2D", {{"kernel", 2}, {"stride", 2}});
    x = chain(g, x, "Conv2D", {{"filters", 6}, {"kernel", 3}, {"padding", 1}, {"use_bias", false}});
    x = chain(g, x, "ReLU");
    x = chain(g, x, "Flatten");
    x = chain(g, x, "Dense", {{"units", batchNorm ? 7 : 5}});
    if (batchNorm) {  // a Dense -> BatchNorm -> ReLU on [7] before the last layer
        x = chain(g, chain(g, x, "BatchNorm"), "ReLU");
        chain(g, x, "Dense", {{"units", 5}});
    }
    return g;
}

// A residual net as the workbench's template draws it, with a BatchNorm: Input [2, 9, 9] -> Conv2D 4 -> BatchNorm
// -> ReLU (r0) -> Conv2D 4 -> ReLU -> Conv2D 4 -> Add(r0, .) -> ReLU (r1) -> Conv2D 4 -> Add(r1, .) -> ReLU ->
// GlobalAvgPool -> Dense 5. The BatchNorm and both Adds do their ReLU's backward (Layer::absorbFusedReLUBackward);
// r0 and r1 feed a convolution and an Add, so their gradient sums two consumers' before the gate.
Graph residualGraph() {
    Graph g;
    const int in = g.addNode("Input", {}, {{"shape", {2, 9, 9}}});
    auto conv = [&](int from) { return chain(g, from, "Conv2D", {{"filters", 4}, {"kernel", 3}, {"padding", 1}}); };
    auto block = [&](int from) {
        const int add = g.addNode("Add");
        g.connect(from, add, "in0");
        g.connect(conv(chain(g, conv(from), "ReLU")), add, "in1");
        return chain(g, add, "ReLU");
    };
    const int r0 = chain(g, chain(g, conv(in), "BatchNorm"), "ReLU");
    const int r2 = block(block(r0));
    chain(g, chain(g, r2, "GlobalAvgPool"), "Dense", {{"units", 5}});
    return g;
}

// A residual net wide enough for the CPU's blocked layout (16 and 32 channels: one and two blocks of 16, two and
// four of 8): Input [1, 10, 10] -> Conv2D 16 -> ReLU (r0; a one-channel input: the im2col path writes the
// blocked output through an NCHW copy) -> Conv2D 16 -> ReLU -> Conv2D 16 -> Add(r0, .) -> ReLU (r1) -> Conv2D 32
// stride 2 -> ReLU (r2), which feeds a GlobalAvgPool (reading it blocked) AND a Conv2D 32 -> ReLU (r4) -> MaxPool
// 2x2 stride 1 -> Flatten -> Dense 32 (that pooling reads NCHW: r4 stays NCHW, its convolution reads blocked and
// writes NCHW) -> Add of the pooled two -> Dense 5. Blocked: everything from the first Conv2D to r2 (9 layers).
Graph wideResidualGraph() {
    Graph g;
    const int in = g.addNode("Input", {}, {{"shape", {1, 10, 10}}});
    auto conv = [&](int from, int filters, int stride) {
        return chain(g, from, "Conv2D", {{"filters", filters}, {"kernel", 3}, {"padding", 1}, {"stride", stride}});
    };
    auto add = [&](int a, int b) {
        const int id = g.addNode("Add");
        g.connect(a, id, "in0");
        g.connect(b, id, "in1");
        return id;
    };
    const int r0 = chain(g, conv(in, 16, 1), "ReLU");
    const int r1 = chain(g, add(r0, conv(chain(g, conv(r0, 16, 1), "ReLU"), 16, 1)), "ReLU");
    const int r2 = chain(g, conv(r1, 32, 2), "ReLU");
    const int r4 = chain(g, conv(r2, 32, 1), "ReLU");
    const int pooled = chain(g, chain(g, chain(g, r4, "MaxPool2D", {{"kernel", 2}, {"stride", 1}}), "Flatten"), "Dense",
                             {{"units", 32}});
    chain(g, add(chain(g, r2, "GlobalAvgPool"), pooled), "Dense", {{"units", 5}});
    return g;
}

// The plain CNN's shape, 16 channels: Input [1, 12, 12] -> Conv2D 16 -> ReLU -> MaxPool 2x2 -> Conv2D 16 -> ReLU
// -> MaxPool 2x2 -> Flatten -> Dense 5. Blocked: both convolutions, their ReLUs (whose backward the poolings do)
// and the poolings (6 layers); Flatten reads the last pooling's blocked output and writes NCHW.
Graph pooledGraph() {
    Graph g;
    int x = g.addNode("Input", {}, {{"shape", {1, 12, 12}}});
    for (int i = 0; i < 2; ++i) {
        x = chain(g, x, "Conv2D", {{"filters", 16}, {"kernel", 3}, {"padding", 1}});
        x = chain(g, chain(g, x, "ReLU"), "MaxPool2D", {{"kernel", 2}, {"stride", 2}});
    }
    chain(g, chain(g, x, "Flatten"), "Dense", {{"units", 5}});
    return g;
}

// MobileNet's inverted residual (issue 37): Input [16, 8, 8] -> Conv2D 32 1x1 -> BatchNorm -> Clip (ReLU6) ->
// depthwise Conv2D 32 3x3 (groups 32) -> BatchNorm -> HardSwish -> Conv2D 16 1x1 (no bias) -> BatchNorm ->
// Add(input) -> Conv2D 16 3x3 stride 2 groups 4 -> GlobalAvgPool -> Dense 5. Channels are multiples of 16, so the
// layout pass may keep it blocked (the element-wise Clip and HardSwish included).
Graph mobileGraph() {
    Graph g;
    const int in = g.addNode("Input", {}, {{"shape", {16, 8, 8}}});
    int x = chain(g, chain(g, in, "Conv2D", {{"filters", 32}, {"kernel", 1}}), "BatchNorm");
    x = chain(g, x, "Clip");
    x = chain(g, x, "Conv2D", {{"filters", 32}, {"kernel", 3}, {"padding", 1}, {"groups", 32}});
    x = chain(g, chain(g, x, "BatchNorm"), "HardSwish");
    x = chain(g, chain(g, x, "Conv2D", {{"filters", 16}, {"kernel", 1}, {"use_bias", false}}), "BatchNorm");
    const int sum = g.addNode("Add");
    g.connect(in, sum, "in0");
    g.connect(x, sum, "in1");
    x = chain(g, sum, "Conv2D", {{"filters", 16}, {"kernel", 3}, {"stride", 2}, {"padding", 1}, {"groups", 4}});
    chain(g, chain(g, x, "GlobalAvgPool"), "Dense", {{"units", 5}});
    return g;
}

// BatchNorm in the blocked layout: Input [1, 8, 8] -> Conv2D 16 -> BatchNorm -> ReLU (r0) -> Conv2D 16 (no bias) ->
// BatchNorm -> Add(r0, .) -> ReLU -> MaxPool 2x2 -> Conv2D 16 -> BatchNorm (no ReLU after it) -> Flatten -> Dense 5.
// Blocked: every layer from the first Conv2D to the last BatchNorm (10).
Graph batchNormBlockedGraph() {
    Graph g;
    const int in = g.addNode("Input", {}, {{"shape", {1, 8, 8}}});
    const int r0 = chain(
        g, chain(g, chain(g, in, "Conv2D", {{"filters", 16}, {"kernel", 3}, {"padding", 1}}), "BatchNorm"), "ReLU");
    const int bn = chain(
        g, chain(g, r0, "Conv2D", {{"filters", 16}, {"kernel", 3}, {"padding", 1}, {"use_bias", false}}), "BatchNorm");
    const int add = g.addNode("Add");
    g.connect(r0, add, "in0");
    g.connect(bn, add, "in1");
    int x = chain(g, chain(g, add, "ReLU"), "MaxPool2D", {{"kernel", 2}, {"stride", 2}});
    x = chain(g, chain(g, x, "Conv2D", {{"filters", 16}, {"kernel", 3}, {"padding", 1}}), "BatchNorm");
    chain(g, chain(g, x, "Flatten"), "Dense", {{"units", 5}});
    return g;
}

// One replica's data-parallel sum: the identity (the global batch is this batch).
class SingleReplica : public ReplicaSum {
public:
    void sum(double*, int64_t) override {}
};

// The sequence layers on a float sequence [7, 3]: PositionalEmbedding -> Conv1D 4 (kernel 3, pad 1) -> ReLU ->
// Conv1D 5 (kernel 2, stride 2, dilation 2, no bias) -> Dense 6 per position -> SequenceMeanPool -> Dense 3.
Graph sequenceGraph() {
    Graph g;
    const int in = g.addNode("Input", {}, {{"shape", {7, 3}}});
    int x = chain(g, in, "PositionalEmbedding");
    x = chain(g, x, "Conv1D", {{"filters", 4}, {"kernel", 3}, {"padding", 1}});
    x = chain(g, x, "ReLU");
    x = chain(g, x, "Conv1D", {{"filters", 5}, {"kernel", 2}, {"stride", 2}, {"dilation", 2}, {"use_bias", false}});
    x = chain(g, x, "Dense", {{"units", 6}});
    x = chain(g, x, "SequenceMeanPool");
    chain(g, x, "Dense", {{"units", 3}});
    return g;
}

// A small Transformer encoder on token ids [6] (vocab 11): Embedding 8 -> PositionalEmbedding ->
// MultiHeadSelfAttention (2 heads, masked by the ids, attention dropout 0.2) -> Add (residual) -> LayerNorm ->
// Dense 16 -> GELU -> Dense 8 -> Add -> LayerNorm -> masked SequenceMaxPool + masked SequenceMeanPool -> Add ->
// Dense 3. The ids feed the Embedding and every mask port.
Graph transformerGraph() {
    Graph g;
    const int in = g.addNode("Input", "tokens", {{"shape", {6}}});
    const int emb = chain(g, in, "Embedding", {{"vocab", 11}, {"dim", 8}});
    const int pos = chain(g, emb, "PositionalEmbedding");
    const int att =
        g.addNode("MultiHeadSelfAttention", "attention", {{"heads", 2}, {"masked", true}, {"dropout", 0.2}});
    g.connect(pos, att, "in");
    g.connect(in, att, "mask");
    auto add = [&](int a, int b) {
        const int id = g.addNode("Add");
        g.connect(a, id, "in0");
        g.connect(b, id, "in1");
        return id;
    };
    const int ln1 = chain(g, add(pos, att), "LayerNorm");
    int x = chain(g, ln1, "Dense", {{"units", 16}});
    x = chain(g, x, "GELU");
    x = chain(g, x, "Dense", {{"units", 8}});
    const int ln2 = chain(g, add(ln1, x), "LayerNorm");
    auto pool = [&](const char* type) {
        const int id = g.addNode(type, {}, {{"masked", true}});
        g.connect(ln2, id, "in");
        g.connect(in, id, "mask");
        return id;
    };
    chain(g, add(pool("SequenceMaxPool"), pool("SequenceMeanPool")), "Dense", {{"units", 3}});
    return g;
}

// Token ids for transformerGraph: sample s has 6 - s % 3 real tokens (ids 1..10), then padding (0).
std::vector<float> tokenIds(int64_t n) {
    std::mt19937 rng(11);
    std::uniform_int_distribution<int> id(1, 10);
    std::vector<float> ids(static_cast<size_t>(n * 6), 0.0f);
    for (int64_t s = 0; s < n; ++s)
        for (int t = 0; t < 6 - s % 3; ++t) ids[static_cast<size_t>(s * 6 + t)] = static_cast<float>(id(rng));
    return ids;
}

struct Result {
    std::vector<float> output;
    std::vector<std::vector<float>> grads;
};

std::vector<float> toHost(Backend& be, const Tensor& t) {
    std::vector<float> h(static_cast<size_t>(t.numel()));
    be.toHost(t, h.data());
    return h;
}

// tokens: the input is token ids (transformerGraph), not normal noise. replicas: the data-parallel sum the
// layers use (BatchNorm's host path over the global batch), or none.
Result run(Backend& be, const Graph& g, bool fuse, int* fusedCount, int* absorbedCount = nullptr, bool tokens = false,
           bool blocked = true, ReplicaSum* replicas = nullptr) {
    auto model = compile(g, be, 7, fuse, blocked);
    model->setReplicaSum(replicas);
    if (fusedCount) *fusedCount = model->fusedReLUCount();
    if (absorbedCount) *absorbedCount = model->absorbedReLUCount();
    std::mt19937 rng(3);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    const int64_t n = 3;
    std::vector<float> x(static_cast<size_t>(n * model->inputShape().numel()));
    for (float& v : x) v = dist(rng);
    if (tokens) x = tokenIds(n);
    std::vector<float> dy(static_cast<size_t>(n * model->outputShape().numel()));
    for (float& v : dy) v = dist(rng);
    Tensor X = be.fromHost(model->inputShape().withBatch(n), x.data());
    Tensor DY = be.fromHost(model->outputShape().withBatch(n), dy.data());
    Result r;
    model->zeroGrad();
    r.output = toHost(be, model->forward(X, true, 1));
    // Twice: the parameter gradients add up, and an activation gradient that is neither zeroed nor written (a
    // wrong overwrite decision) would carry the first pass's values into the second.
    model->backward(DY);
    model->backward(DY);
    for (const auto& p : model->namedParameters())
        if (p.param->grad.defined()) r.grads.push_back(toHost(be, p.param->grad));
    // A second forward of another batch size must use the shared memory correctly too.
    const int64_t n2 = 2;
    Tensor X2 = be.fromHost(model->inputShape().withBatch(n2), x.data());
    const std::vector<float> out2 = toHost(be, model->forward(X2, false, 1));
    r.output.insert(r.output.end(), out2.begin(), out2.end());
    return r;
}

double maxDiff(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return 1e30;
    double m = 0;
    for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
    return m;
}

// How `got` differs from `want` beyond the tolerances (outputs 1e-4, gradients 1e-3), or empty.
std::string mismatch(const Result& got, const Result& want) {
    if (maxDiff(got.output, want.output) >= 1e-4) return "outputs differ";
    if (got.grads.size() != want.grads.size())
        return std::to_string(got.grads.size()) + " gradients, not " + std::to_string(want.grads.size());
    for (size_t i = 0; i < want.grads.size(); ++i)
        if (maxDiff(got.grads[i], want.grads[i]) >= 1e-3)
            return "gradient " + std::to_string(i) + " differs by " +
                   std::to_string(maxDiff(got.grads[i], want.grads[i]));
    return {};
}

// Input [3, 8, 8] -> Conv2D 5 -> BatchNorm -> ReLU -> MaxPool -> Conv2D 4 (no bias) -> BatchNorm -> ReLU
// -> Flatten -> Dense 6 -> BatchNorm -> ReLU -> Dense 3 (three foldable BatchNorms), plus, beside the second
// convolution, a Conv2D 4 whose output feeds a BatchNorm AND an Add (not foldable: its raw output is used).
// Weights seeded, BatchNorm statistics and affine parameters made far from the identity.
ExportModel batchNormModel() {
    ExportModel m;
    Graph& g = m.project.graph;
    const int in = g.addNode("Input", "input", {{"shape", {3, 8, 8}}});
    int x = chain(g, in, "Conv2D", {{"filters", 5}, {"kernel", 3}, {"padding", 1}});
    x = chain(g, x, "BatchNorm");
    x = chain(g, x, "ReLU");
    x = chain(g, x, "MaxPool2D", {{"kernel", 2}, {"stride", 2}});
    const int pooled = x;
    x = chain(g, pooled, "Conv2D", {{"filters", 4}, {"kernel", 3}, {"padding", 1}, {"use_bias", false}});
    const int bnA = chain(g, x, "BatchNorm");
    const int shared = chain(g, pooled, "Conv2D", {{"filters", 4}, {"kernel", 3}, {"padding", 1}});
    const int bnB = chain(g, shared, "BatchNorm");
    const int add = g.addNode("Add");
    g.connect(bnA, add, "in0");
    g.connect(bnB, add, "in1");
    const int add2 = g.addNode("Add");
    g.connect(add, add2, "in0");
    g.connect(shared, add2, "in1");  // the second consumer of the shared convolution
    x = chain(g, add2, "ReLU");
    x = chain(g, x, "Flatten");
    x = chain(g, x, "Dense", {{"units", 6}});
    x = chain(g, x, "BatchNorm");
    x = chain(g, x, "ReLU");
    chain(g, x, "Dense", {{"units", 3}});
    auto be = test::makeReferenceBackend();
    auto model = compile(g, *be, 11);
    m.weights = modelWeights(*model);
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> positive(0.3f, 3.0f);
    for (auto& [name, values] : m.weights) {
        const bool bn = name.find("batchnorm") == 0;
        for (float& v : values) {
            if (bn && name.ends_with(".running_var"))
                v = positive(rng);
            else if (bn && name.ends_with(".gamma"))
                v = positive(rng) * (normal(rng) < 0 ? -1.0f : 1.0f);
            else if (bn || name.ends_with(".bias"))
                v = normal(rng);
        }
    }
    return m;
}

// The outputs for n seeded inputs (the first n of the same sequence for any n).
std::vector<float> outputsOf(Model& model, int64_t n = 4) {
    Backend& be = model.backend();
    std::mt19937 rng(9);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n * model.inputShape().numel()));
    for (float& v : x) v = dist(rng);
    return toHost(be, model.forward(be.fromHost(model.inputShape().withBatch(n), x.data()), false));
}

std::vector<float> evaluate(Backend& be, const ExportModel& m, int* fusedReLUs) {
    auto model = compileExportModel(m, be);
    if (fusedReLUs) *fusedReLUs = model->fusedReLUCount();
    return outputsOf(*model);
}

}  // namespace

class TestModelFusion : public QObject {
    Q_OBJECT
private slots:
    void fusesOnlySingleConsumerReLUs() {
        auto be = test::makeCpuBackend();
        int count = -1, absorbed = -1;
        run(*be, testGraph(false), true, &count, &absorbed);
        QCOMPARE(count, 2);
        QCOMPARE(absorbed, 1);  // conv1's ReLU feeds the pooling; the last ReLU feeds Flatten
        run(*be, testGraph(true), true, &count, &absorbed);
        QCOMPARE(count, 3);     // conv1, the Add and the last conv; the conv feeding ReLU and Add is not fused
        QCOMPARE(absorbed, 1);  // the ReLU after Add (conv1's ReLU now feeds a conv, not a pooling)
        run(*be, testGraph(false, true), true, &count, &absorbed);
        QCOMPARE(count, 3);  // the ReLUs after both BatchNorms, and after the last conv
        QCOMPARE(compile(testGraph(false, true), *be, 7)->reluBackwardsInProducers(), 1);  // the Dense's BatchNorm
        run(*be, residualGraph(), true, &count, &absorbed);
        QCOMPARE(count, 5);     // the BatchNorm's, each block's first conv's, both Adds'
        QCOMPARE(absorbed, 0);  // no pooling after a ReLU
        QCOMPARE(compile(residualGraph(), *be, 7)->reluBackwardsInProducers(), 3);  // the BatchNorm and both Adds
        QCOMPARE(compile(residualGraph(), *be, 7, false)->reluBackwardsInProducers(), 0);
        // Gradients written by their first writer in backward (Conv2D, BatchNorm, an activation, Add, pooling), not
        // zeroed: the pooling's (by the second conv), the last conv's (by its ReLU) and the first conv's (by the
        // pooling, which does that conv's ReLU's backward). With the shared conv the pooling writes the Add's
        // instead, and also the first conv's (by its ReLU), that ReLU's (by the shared conv), the shared conv's (by
        // the Add; its ReLU adds to it after) and that ReLU's (by the Add) are written. In the
        // residual net the first conv's (by the BatchNorm), in each block the first conv's (by its ReLU), that
        // ReLU's (by the second conv) and the second conv's (by the Add), and r0 and r1 (by the Add; the block's
        // first conv adds to them after).
        QCOMPARE(compile(testGraph(false), *be, 7)->overwrittenGradCount(), 3);
        QCOMPARE(compile(testGraph(true), *be, 7)->overwrittenGradCount(), 7);
        QCOMPARE(compile(residualGraph(), *be, 7)->overwrittenGradCount(), 9);
        QCOMPARE(compile(residualGraph(), *be, 7, false)->overwrittenGradCount(), 0);
        run(*be, testGraph(false), false, &count, &absorbed);
        QCOMPARE(count, 0);
        QCOMPARE(absorbed, 0);
    }

    void fusedEqualsUnfused_data() {
        QTest::addColumn<bool>("shared");
        QTest::addColumn<bool>("batchNorm");
        QTest::addColumn<bool>("residual");
        QTest::newRow("chain") << false << false << false;
        QTest::newRow("conv with two consumers, Add -> ReLU") << true << false << false;
        QTest::newRow("BatchNorm -> ReLU") << false << true << false;
        QTest::newRow("residual blocks, BatchNorm -> ReLU -> Conv2D") << false << false << true;
    }
    // Every backend, fused and unfused, against the reference backend unfused; the reference backend fused
    // too (its own fused ops: the BatchNorm's ReLU, the gated backward).
    void fusedEqualsUnfused() {
        QFETCH(bool, shared);
        QFETCH(bool, batchNorm);
        QFETCH(bool, residual);
        const Graph g = residual ? residualGraph() : testGraph(shared, batchNorm);
        auto ref = test::makeReferenceBackend();
        const Result want = run(*ref, g, false, nullptr);
        std::vector<test::NamedBackend> backends = test::fastBackends();
        backends.push_back({"cpu-reference", test::makeReferenceBackend()});
        for (auto& nb : backends) {
            for (bool fuse : {false, true}) {
                const std::string err = mismatch(run(*nb.backend, g, fuse, nullptr), want);
                QVERIFY2(err.empty(), (nb.name + (fuse ? " fused: " : " unfused: ") + err).c_str());
            }
        }
        // Not a vacuous comparison: the gradients are not all zero.
        double total = 0;
        for (const auto& gr : want.grads)
            for (float v : gr) total += std::fabs(v);
        QVERIFY(total > 0);
    }

    // The blocked layout (compile's layout pass) on the CPU backend, with oneDNN and with its im2col path (which
    // converts blocked tensors through NCHW copies), against the reference backend: outputs and gradients.
    void blockedLayoutMatchesTheReference() {
        auto probe = test::makeCpuBackend();
        const int block = probe->activationBlock();
        if (block == 0) QSKIP("this CPU backend has no blocked layout (no oneDNN, or STRATA_BLOCKED_LAYOUT=0)");
        auto ref = test::makeReferenceBackend();
        QCOMPARE(compile(wideResidualGraph(), *probe, 7)->blockedOutputCount(), 9);
        QCOMPARE(compile(pooledGraph(), *probe, 7)->blockedOutputCount(), 6);
        QCOMPARE(compile(batchNormBlockedGraph(), *probe, 7)->blockedOutputCount(), 10);
        for (const Graph& g : {wideResidualGraph(), pooledGraph(), batchNormBlockedGraph()}) {
            QCOMPARE(compile(g, *ref, 7)->blockedOutputCount(), 0);
            QCOMPARE(compile(g, *probe, 7, true, false)->blockedOutputCount(), 0);
            QCOMPARE(compile(g, *probe, 7, false)->blockedOutputCount(), 0);
            const Result want = run(*ref, g, false, nullptr);
            for (bool oneDnn : {true, false})
                for (bool winograd : {true, false}) {
                    if (winograd && !CpuBackend::winogradAvailable()) continue;
                    auto cpu = std::make_unique<CpuBackend>();
                    cpu->setOneDnn(oneDnn);
                    cpu->setWinograd(winograd);
                    const std::string ctx = std::string("cpu blocked by ") + std::to_string(block) +
                                            (oneDnn ? ", oneDNN" : ", im2col") + (winograd ? ", Winograd" : "");
                    const Result got = run(*cpu, g, true, nullptr);
                    const std::string err = mismatch(got, want);
                    QVERIFY2(err.empty(), (ctx + ": " + err).c_str());
                    // And the same model in NCHW on this backend: the layouts change no value beyond rounding
                    // (Winograd's, in the blocked model's 3x3 convolutions, is a few times the direct sum's).
                    const Result plain = run(*cpu, g, true, nullptr, nullptr, false, false);
                    const double diff = maxDiff(got.output, plain.output);
                    qInfo("%s: blocked and NCHW outputs differ by %.3g", ctx.c_str(), diff);
                    QVERIFY2(diff < (winograd ? 5e-5 : 1e-5), (ctx + ": blocked and NCHW outputs differ").c_str());
                }
        }
    }

    // The inverted residual block on every fast backend, fused and blocked where the backend does so, against the
    // reference: outputs and every gradient; and its BatchNorms folded into the convolutions (the depthwise one
    // included) for inference give the unfolded outputs.
    void mobileBlockMatchesTheReference() {
        const Graph g = mobileGraph();
        auto ref = test::makeReferenceBackend();
        const Result want = run(*ref, g, false, nullptr);
        for (auto& nb : test::fastBackends()) {
            const Result got = run(*nb.backend, g, true, nullptr);
            const std::string err = mismatch(got, want);
            QVERIFY2(err.empty(), (nb.name + ": " + err).c_str());
            qInfo("%s: %d of the block's outputs blocked", nb.name.c_str(),
                  compile(g, *nb.backend, 7)->blockedOutputCount());
        }
        ExportModel m;
        m.project.graph = g;
        m.weights = modelWeights(*compile(g, *ref, 11));
        std::mt19937 rng(9);
        std::uniform_real_distribution<float> positive(0.3f, 3.0f);
        std::normal_distribution<float> normal(0.0f, 1.0f);
        for (auto& [name, values] : m.weights)
            if (name.find("batchnorm") == 0)
                for (float& v : values) v = name.ends_with(".running_var") ? positive(rng) : normal(rng);
        std::vector<FoldedBatchNorm> folded;
        const ExportModel f = foldBatchNorm(m, &folded);
        QCOMPARE(folded.size(), size_t(3));
        QCOMPARE(folded[1].into, std::string("conv2d2"));  // the depthwise convolution
        const std::vector<float> unfolded = evaluate(*ref, m, nullptr);
        double scale = 0;
        for (float v : unfolded) scale = std::max(scale, std::fabs(double(v)));
        QVERIFY(scale > 0.1);
        for (auto& nb : test::fastBackends()) {
            const double d = maxDiff(evaluate(*nb.backend, f, nullptr), unfolded);
            QVERIFY2(d <= 1e-4 * std::max(1.0, scale), (nb.name + ": folded differs by " + std::to_string(d)).c_str());
        }
    }

    // The sequence layers (strided GEMMs over a sequence's rows) on every fast backend against the reference:
    // outputs and every parameter's gradient.
    // BatchNorm on blocked tensors beyond the batch-statistics step run() does: the data-parallel host path (one
    // replica: the same statistics) and the evaluation-mode backward (running statistics), against the reference.
    void batchNormBlockedPaths() {
        auto probe = test::makeCpuBackend();
        if (probe->activationBlock() == 0)
            QSKIP("this CPU backend has no blocked layout (no oneDNN, or STRATA_BLOCKED_LAYOUT=0)");
        auto ref = test::makeReferenceBackend();
        const Graph g = batchNormBlockedGraph();
        SingleReplica single;
        const std::string synced = mismatch(run(*probe, g, true, nullptr, nullptr, false, true, &single),
                                            run(*ref, g, true, nullptr, nullptr, false, true, nullptr));
        QVERIFY2(synced.empty(), ("data-parallel path: " + synced).c_str());
        // Evaluation mode: forward and backward with the running statistics (a training step first moves them).
        auto evalGrads = [&](Backend& be) {
            auto model = compile(g, be, 7);
            std::mt19937 rng(4);
            std::normal_distribution<float> dist(0.0f, 1.0f);
            std::vector<float> x(static_cast<size_t>(3 * model->inputShape().numel())), dy(15);
            for (float& v : x) v = dist(rng);
            for (float& v : dy) v = dist(rng);
            Tensor X = be.fromHost(model->inputShape().withBatch(3), x.data());
            Tensor DY = be.fromHost(Shape{3, 5}, dy.data());
            model->forward(X, true, 1);
            model->zeroGrad();
            Result r;
            r.output = toHost(be, model->forward(X, false, 1));
            model->backward(DY);
            for (const auto& p : model->namedParameters())
                if (p.param->grad.defined()) r.grads.push_back(toHost(be, p.param->grad));
            return r;
        };
        const std::string eval = mismatch(evalGrads(*probe), evalGrads(*ref));
        QVERIFY2(eval.empty(), ("evaluation mode: " + eval).c_str());
    }

    void sequenceLayersMatchTheReference() {
        const Graph g = sequenceGraph();
        auto ref = test::makeReferenceBackend();
        const Result want = run(*ref, g, false, nullptr);
        QCOMPARE(want.grads.size(), size_t(8));  // positions, conv (2), conv, dense (2), dense (2)
        double total = 0;
        for (const auto& gr : want.grads)
            for (float v : gr) total += std::fabs(v);
        QVERIFY(total > 0);
        for (auto& nb : test::fastBackends()) {
            const Result got = run(*nb.backend, g, true, nullptr);
            QVERIFY2(maxDiff(got.output, want.output) < 1e-4, (nb.name + ": outputs differ").c_str());
            QCOMPARE(got.grads.size(), want.grads.size());
            for (size_t i = 0; i < want.grads.size(); ++i)
                QVERIFY2(maxDiff(got.grads[i], want.grads[i]) < 1e-3,
                         (nb.name + ": gradient " + std::to_string(i) + " differs").c_str());
        }
    }

    // Attention, masked pooling and the Transformer block around them on every fast backend against the reference
    // (training mode: attention dropout included), outputs and every gradient.
    void transformerMatchesTheReference() {
        const Graph g = transformerGraph();
        auto ref = test::makeReferenceBackend();
        const Result want = run(*ref, g, false, nullptr, nullptr, true);
        QCOMPARE(want.grads.size(), size_t(16));  // embedding, positions, attention (4), 2 LayerNorms, 3 Dense
        for (size_t i = 0; i < want.grads.size(); ++i) {
            double total = 0;
            for (float v : want.grads[i]) total += std::fabs(v);
            QVERIFY2(total > 0, ("gradient " + std::to_string(i) + " is all zero").c_str());
        }
        for (auto& nb : test::fastBackends()) {
            const Result got = run(*nb.backend, g, true, nullptr, nullptr, true);
            QVERIFY2(maxDiff(got.output, want.output) < 1e-4, (nb.name + ": outputs differ").c_str());
            QCOMPARE(got.grads.size(), want.grads.size());
            for (size_t i = 0; i < want.grads.size(); ++i)
                QVERIFY2(maxDiff(got.grads[i], want.grads[i]) < 1e-3,
                         (nb.name + ": gradient " + std::to_string(i) + " differs").c_str());
        }
    }

    // Padding never influences the output: changing what the padding token embeds to (row 0 of the embedding
    // table) moves nothing, on every backend, in evaluation and in training (dropout on); changing a real token
    // does move the output.
    void paddingDoesNotMoveTheOutput() {
        const Graph g = transformerGraph();
        std::vector<std::unique_ptr<Backend>> owned;
        std::vector<Backend*> all;
        owned.push_back(test::makeReferenceBackend());
        for (auto& nb : test::fastBackends()) owned.push_back(std::move(nb.backend));
        for (auto& b : owned) all.push_back(b.get());
        for (Backend* be : all) {
            auto model = compile(g, *be, 5);
            const int64_t n = 4;
            std::vector<float> ids = tokenIds(n);
            Tensor X = be->fromHost(model->inputShape().withBatch(n), ids.data());
            for (bool training : {false, true}) {
                const std::vector<float> before = toHost(*be, model->forward(X, training, 3));
                Parameter* table = nullptr;
                for (const auto& p : model->namedParameters())
                    if (p.param->value.shape() == Shape{11, 8}) table = p.param;  // the embedding table
                QVERIFY(table);
                std::vector<float> w = toHost(*be, table->value);
                const std::vector<float> saved = w;
                for (int j = 0; j < 8; ++j) w[static_cast<size_t>(j)] = 5.0f + static_cast<float>(j);  // row 0
                be->copyFromHost(table->value.raw(), w.data(), w.size() * sizeof(float));
                const std::vector<float> padded = toHost(*be, model->forward(X, training, 3));
                QVERIFY2(maxDiff(padded, before) == 0.0,
                         (be->name() + ": the padding's embedding moved the output by " +
                          std::to_string(maxDiff(padded, before)))
                             .c_str());
                be->copyFromHost(table->value.raw(), saved.data(), saved.size() * sizeof(float));
                std::vector<float> other = ids;
                other[1] = other[1] == 1.0f ? 2.0f : 1.0f;  // a real token of sample 0
                Tensor X2 = be->fromHost(model->inputShape().withBatch(n), other.data());
                const std::vector<float> moved = toHost(*be, model->forward(X2, training, 3));
                QVERIFY2(maxDiff(moved, before) > 1e-4, (be->name() + ": a real token changed nothing").c_str());
            }
        }
    }

    void foldedBatchNormEqualsUnfolded() {
        const ExportModel m = batchNormModel();
        std::vector<FoldedBatchNorm> folded;
        const ExportModel f = foldBatchNorm(m, &folded);
        QCOMPARE(folded.size(), size_t(3));
        QCOMPARE(folded[0].batchNorm + ">" + folded[0].into, std::string("batchnorm1>conv2d1"));
        QCOMPARE(folded[1].batchNorm + ">" + folded[1].into, std::string("batchnorm2>conv2d2"));
        QCOMPARE(folded[2].batchNorm + ">" + folded[2].into, std::string("batchnorm4>dense1"));
        int batchNorms = 0;
        for (const Node* n : f.project.graph.nodes()) batchNorms += n->type == "BatchNorm" ? 1 : 0;
        QCOMPARE(batchNorms, 1);  // the shared convolution's stays
        QVERIFY(!f.weights.count("batchnorm1.gamma") && f.weights.count("batchnorm3.gamma"));
        QVERIFY(f.weights.count("conv2d2.bias"));  // the bias-less convolution gained one
        QVERIFY(!analyzeGraph(f.project.graph).problems.size());
        // The folding does not touch what it was given, and an int8 model is left as it is.
        QVERIFY(m.weights.count("batchnorm1.gamma"));
        ExportModel int8 = m;
        int8.int8Activations["input"] = ActivationQuant{};
        QVERIFY(foldBatchNorm(int8, &folded).project.graph == m.project.graph);
        QVERIFY(folded.empty());

        auto ref = test::makeReferenceBackend();
        const std::vector<float> want = evaluate(*ref, m, nullptr);
        double scale = 0;
        for (float v : want) scale = std::max(scale, std::fabs(double(v)));
        QVERIFY(scale > 0.1);  // not a vacuous comparison
        for (auto& nb : test::fastBackends()) {
            int before = 0, after = 0;
            const std::vector<float> unfolded = evaluate(*nb.backend, m, &before);
            const std::vector<float> got = evaluate(*nb.backend, f, &after);
            const double d = maxDiff(got, want), du = maxDiff(unfolded, want);
            qInfo("%s: folded vs unfolded reference %.3g, unfolded %.3g (outputs up to %.3g)", nb.name.c_str(), d, du,
                  scale);
            QVERIFY2(d <= 1e-4 * std::max(1.0, scale), (nb.name + ": " + std::to_string(d)).c_str());
            // Unfolded, both BatchNorms before a ReLU and the last Add do its forward in place; folded, the first
            // ReLU follows conv2d1 and runs inside it, the one after dense1 runs on its own (Dense fuses none).
            QCOMPARE(before, 3);
            QCOMPARE(after, 2);
        }
    }

    // compileExportModel freezes the weights (Model::freezeWeights), and a backend may then keep copies it
    // prepared from them, by id (oneDNN's reordered convolution weights). Two models of the same shapes on one
    // backend, each with its own weights, run in turns and at two batch sizes, must each give their own outputs,
    // and new weights given to a frozen model (applyWeights) must be the ones used.
    void frozenWeightsStayWithTheirModel() {
        const ExportModel a = foldBatchNorm(batchNormModel());
        ExportModel b = a;
        std::mt19937 rng(23);
        std::normal_distribution<float> normal(0.0f, 1.0f);
        for (auto& [name, values] : b.weights)
            for (float& v : values) v += 0.5f * normal(rng);
        auto ref = test::makeReferenceBackend();
        const std::vector<float> wantA = evaluate(*ref, a, nullptr), wantB = evaluate(*ref, b, nullptr);
        QVERIFY(maxDiff(wantA, wantB) > 0.1);  // the two models are told apart
        const size_t half = wantA.size() / 2;  // batch 2 of 4
        for (auto& nb : test::fastBackends()) {
            Backend& be = *nb.backend;
            auto ma = compileExportModel(a, be), mb = compileExportModel(b, be);
            QVERIFY(ma->weightsFrozen() && mb->weightsFrozen());
            auto near = [&](const std::vector<float>& got, const std::vector<float>& want, const char* what) {
                const double d = maxDiff(got, want);
                QVERIFY2(d <= 1e-4, (nb.name + ": " + what + " off by " + std::to_string(d)).c_str());
            };
            for (int round = 0; round < 2; ++round) {
                near(outputsOf(*ma), wantA, "model a");
                near(outputsOf(*mb), wantB, "model b");
                near(outputsOf(*ma, 2), std::vector<float>(wantA.begin(), wantA.begin() + long(half)), "a, batch 2");
                near(outputsOf(*mb, 2), std::vector<float>(wantB.begin(), wantB.begin() + long(half)), "b, batch 2");
            }
            applyWeights(*ma, b.weights);
            QVERIFY(ma->weightsFrozen());
            near(outputsOf(*ma), wantB, "model a with b's weights");
            ma->thawWeights();
            applyWeights(*ma, a.weights);
            near(outputsOf(*ma), wantA, "model a thawed, its own weights again");
        }
    }
};

QTEST_GUILESS_MAIN(TestModelFusion)
#include "test_model_fusion.moc"
