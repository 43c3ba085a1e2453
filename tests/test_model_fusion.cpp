// Model's ReLU fusions (compile(..., fuse = true)): a ReLU run inside the Conv2D before it, and a
// ReLU's backward run inside the max pooling after it. Which ReLUs are fused, and that a fused
// model computes the same outputs, input gradients and parameter gradients as the unfused one, on
// every backend present, including a step where the conv output's memory is shared with the ReLU.
#include <QtTest>
#include <random>

#include "core/graph/Model.h"
#include "core/layers/LayerRegistry.h"
#include "tests/support/TestBackends.h"

using namespace strata;

namespace {

int chain(Graph& g, int from, const std::string& type, const Json& params = Json::object()) {
    const int id = g.addNode(type, {}, params);
    g.connect(from, id);
    return id;
}

// Input [2, 9, 9] -> Conv2D 4 (pad 1) -> ReLU -> MaxPool -> Conv2D 6 (no bias) -> ReLU -> Flatten -> Dense 5,
// plus, when `shared` is set, a Conv2D whose output feeds a ReLU AND an Add (which must not be fused), and
// the Add feeding a ReLU -> MaxPool (the pooling does that ReLU's backward, nothing does its forward).
Graph testGraph(bool shared) {
    Graph g;
    const int in = g.addNode("Input", {}, {{"shape", {2, 9, 9}}});
    const int c1 = chain(g, in, "Conv2D", {{"filters", 4}, {"kernel", 3}, {"padding", 1}});
    int x = chain(g, c1, "ReLU");
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
    chain(g, x, "Dense", {{"units", 5}});
    return g;
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

Result run(Backend& be, const Graph& g, bool fuse, int* fusedCount, int* absorbedCount = nullptr) {
    auto model = compile(g, be, 7, fuse);
    if (fusedCount) *fusedCount = model->fusedReLUCount();
    if (absorbedCount) *absorbedCount = model->absorbedReLUCount();
    std::mt19937 rng(3);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    const int64_t n = 3;
    std::vector<float> x(static_cast<size_t>(n * model->inputShape().numel()));
    for (float& v : x) v = dist(rng);
    std::vector<float> dy(static_cast<size_t>(n * model->outputShape().numel()));
    for (float& v : dy) v = dist(rng);
    Tensor X = be.fromHost(model->inputShape().withBatch(n), x.data());
    Tensor DY = be.fromHost(model->outputShape().withBatch(n), dy.data());
    Result r;
    model->zeroGrad();
    r.output = toHost(be, model->forward(X, true, 1));
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
        QCOMPARE(count, 2);     // conv1 and the last conv; the conv feeding ReLU and Add is not fused
        QCOMPARE(absorbed, 1);  // the ReLU after Add (conv1's ReLU now feeds a conv, not a pooling)
        run(*be, testGraph(false), false, &count, &absorbed);
        QCOMPARE(count, 0);
        QCOMPARE(absorbed, 0);
    }

    void fusedEqualsUnfused_data() {
        QTest::addColumn<bool>("shared");
        QTest::newRow("chain") << false;
        QTest::newRow("conv with two consumers") << true;
    }
    void fusedEqualsUnfused() {
        QFETCH(bool, shared);
        const Graph g = testGraph(shared);
        auto ref = test::makeReferenceBackend();
        const Result want = run(*ref, g, false, nullptr);
        std::vector<test::NamedBackend> backends = test::fastBackends();
        for (auto& nb : backends) {
            for (bool fuse : {false, true}) {
                const Result got = run(*nb.backend, g, fuse, nullptr);
                const std::string ctx = nb.name + (fuse ? " fused" : " unfused");
                QVERIFY2(maxDiff(got.output, want.output) < 1e-4, (ctx + ": outputs differ").c_str());
                QCOMPARE(got.grads.size(), want.grads.size());
                for (size_t i = 0; i < want.grads.size(); ++i)
                    QVERIFY2(maxDiff(got.grads[i], want.grads[i]) < 1e-3,
                             (ctx + ": gradient " + std::to_string(i) + " differs by " +
                              std::to_string(maxDiff(got.grads[i], want.grads[i])))
                                 .c_str());
            }
        }
        // Not a vacuous comparison: the gradients are not all zero.
        double total = 0;
        for (const auto& gr : want.grads)
            for (float v : gr) total += std::fabs(v);
        QVERIFY(total > 0);
    }
};

QTEST_GUILESS_MAIN(TestModelFusion)
#include "test_model_fusion.moc"
