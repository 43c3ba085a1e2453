// The embedding projector's core: PCA (core/infer/Pca) against a decomposition known by construction, and its
// refusals; the penultimate layer's activations (core/infer/Embedding) of a hand-weighted model, by hand; t-SNE
// (core/infer/Tsne): affinities calibrated to the perplexity, and separated clusters kept apart.
#include <QTest>
#include <cmath>

#include "core/backend/BackendRegistry.h"
#include "core/graph/Model.h"
#include "core/infer/Embedding.h"
#include "core/infer/Pca.h"
#include "core/infer/Tsne.h"
#include "core/train/Checkpoint.h"
#include "tests/support/TestProjects.h"

using namespace strata;

class TestPca : public QObject {
    Q_OBJECT

private slots:
    // Points m + 3 a u1 + b u2 with u1 = (1, 1, 0) / sqrt 2, u2 = (0, 0, 1), and (a, b) over (+-1, +-1): a and b
    // have mean 0, variance 1 and no covariance, so the covariance is 9 u1 u1' + u2 u2': variances 9 and 1 (the
    // third 0), axes u1 and u2 (signs: the largest entry positive), coordinates (3a, b), total variance 10.
    void knownDecomposition() {
        const double s = 1 / std::sqrt(2.0);
        const double m[3] = {5, -2, 1};
        const int ab[4][2] = {{-1, 1}, {1, 1}, {-1, -1}, {1, -1}};
        std::vector<float> rows;
        for (const auto& p : ab)
            for (int j = 0; j < 3; ++j) {
                const double u1[3] = {s, s, 0}, u2[3] = {0, 0, 1};
                rows.push_back(float(m[j] + 3 * p[0] * u1[j] + p[1] * u2[j]));
            }
        const PcaResult r = pca(rows.data(), 4, 3, 2);
        QCOMPARE(r.components, 2);
        QVERIFY(std::abs(r.variances[0] - 9) < 1e-5);
        QVERIFY(std::abs(r.variances[1] - 1) < 1e-5);
        QVERIFY(std::abs(r.totalVariance - 10) < 1e-5);
        for (int j = 0; j < 3; ++j) QVERIFY(std::abs(r.mean[j] - m[j]) < 1e-6);
        // u1's two equal entries: whichever counts as largest is positive, so both are.
        QVERIFY(std::abs(r.axes[0] - s) < 1e-6 && std::abs(r.axes[1] - s) < 1e-6 && std::abs(r.axes[2]) < 1e-6);
        QVERIFY(std::abs(r.axes[3]) < 1e-6 && std::abs(r.axes[4]) < 1e-6 && std::abs(r.axes[5] - 1) < 1e-6);
        for (int i = 0; i < 4; ++i) {
            QVERIFY(std::abs(r.projected[size_t(i) * 2] - 3 * ab[i][0]) < 1e-5);
            QVERIFY(std::abs(r.projected[size_t(i) * 2 + 1] - ab[i][1]) < 1e-5);
        }
    }

    // A diagonal covariance with variances 4, 16, 1 (samples +-2, +-4, +-1 on the axes): the components come in
    // decreasing order along e2, e1, e3.
    void ordersComponentsByVariance() {
        std::vector<float> rows;
        const float scale[3] = {2, 4, 1};
        for (int sign : {1, -1})
            for (int axis = 0; axis < 3; ++axis)
                for (int j = 0; j < 3; ++j) rows.push_back(j == axis ? sign * scale[axis] * std::sqrt(3.0f) : 0.0f);
        const PcaResult r = pca(rows.data(), 6, 3, 3);
        QVERIFY(std::abs(r.variances[0] - 16) < 1e-4);
        QVERIFY(std::abs(r.variances[1] - 4) < 1e-4);
        QVERIFY(std::abs(r.variances[2] - 1) < 1e-4);
        QVERIFY(std::abs(r.axes[1] - 1) < 1e-6);
        QVERIFY(std::abs(r.axes[3] - 1) < 1e-6);
        QVERIFY(std::abs(r.axes[8] - 1) < 1e-6);
    }

    // Input [3] -> Dense "hidden" 2 (W = [[1, 0, 2], [0, -1, 1]], b = (0.5, 0)) -> Dense "out" 2 (identity): the
    // embeddings are hidden's outputs, (7.5, 1), (2.5, 1), (0.5, 3), read in batches of 2 (the second batch holds
    // one sample, fewer than the model's buffers), and the predictions their argmax (0, 0, 1).
    void penultimateActivationsByHand() {
        Graph g;
        test::addChain(g, {{"Input", "input", Json{{"shape", {3}}}},
                           {"Dense", "hidden", Json{{"units", 2}}},
                           {"Dense", "out", Json{{"units", 2}}}});
        QCOMPARE(g.node(penultimateNode(g))->name, std::string("hidden"));
        auto backend = backendRegistry().create(Device::parse("cpu"), BackendOptions{});
        std::unique_ptr<Model> m = compile(g, *backend, 1);
        applyWeights(*m, {{"hidden.weight", {1, 0, 2, 0, -1, 1}},
                          {"hidden.bias", {0.5f, 0}},
                          {"out.weight", {1, 0, 0, 1}},
                          {"out.bias", {0, 0}}});
        const std::vector<float> x{1, 2, 3, 0, 0, 1, 0, -3, 0};
        const Embeddings e = embedSamples(*m, x.data(), 3, 2);
        QCOMPARE(e.layer, std::string("hidden"));
        QCOMPARE(e.dim, int64_t(2));
        QCOMPARE(e.rows, (std::vector<float>{7.5f, 1, 2.5f, 1, 0.5f, 3}));
        QCOMPARE(e.predictions.predicted, (std::vector<int32_t>{0, 0, 1}));
    }

    // Each point's conditional affinities: a distribution (sums to 1, none to itself) whose entropy is
    // log(perplexity).
    void tsneAffinitiesMatchThePerplexity() {
        std::vector<float> x;
        uint32_t s = 7;
        for (int i = 0; i < 30 * 5; ++i) {
            s = s * 1664525u + 1013904223u;
            x.push_back(float(s >> 8) / float(1u << 24));
        }
        const std::vector<double> p = tsneConditionalAffinities(x.data(), 30, 5, 5.0);
        for (int i = 0; i < 30; ++i) {
            double sum = 0, entropy = 0;
            for (int j = 0; j < 30; ++j) {
                const double v = p[size_t(i) * 30 + size_t(j)];
                sum += v;
                if (v > 0) entropy -= v * std::log(v);
            }
            QCOMPARE(p[size_t(i) * 31], 0.0);
            QVERIFY(std::abs(sum - 1) < 1e-9);
            QVERIFY2(std::abs(entropy - std::log(5.0)) < 1e-5, qPrintable(QString::number(entropy)));
        }
    }

    // Three tight clusters of 10 points in 10 dimensions, 10 apart: in the 2-D layout every point's nearest
    // neighbour is one of its own cluster, whatever the start (seeds 1 to 3; with 400 iterations rather than the
    // default 1000, one seed in 11 left a point beside another cluster).
    void tsneKeepsClustersApart() {
        std::vector<float> x;
        uint32_t s = 11;
        for (int c = 0; c < 3; ++c)
            for (int i = 0; i < 10; ++i)
                for (int k = 0; k < 10; ++k) {
                    s = s * 1664525u + 1013904223u;
                    x.push_back((k == c ? 10.0f : 0.0f) + 0.3f * (float(s >> 8) / float(1u << 24) - 0.5f));
                }
        TsneOptions o;
        o.perplexity = 5;
        for (uint64_t seed = 1; seed <= 3; ++seed) {
            o.seed = seed;
            const std::vector<float> y = tsne(x.data(), 30, 10, o);
            QCOMPARE(int(y.size()), 60);
            for (int i = 0; i < 30; ++i) {
                int nearest = -1;
                double best = 1e300;
                for (int j = 0; j < 30; ++j) {
                    if (j == i) continue;
                    const double dx = y[2 * i] - y[2 * j], dy = y[2 * i + 1] - y[2 * j + 1];
                    if (dx * dx + dy * dy < best) best = dx * dx + dy * dy, nearest = j;
                }
                QCOMPARE(nearest / 10, i / 10);
            }
        }
        o.perplexity = 20;  // above (30 - 1) / 3
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, tsne(x.data(), 30, 10, o));
    }

    void refusals() {
        const float one[3] = {1, 2, 3};
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, pca(one, 1, 3, 2));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, pca(one, 3, 1, 2));
    }
};

QTEST_MAIN(TestPca)
#include "test_pca.moc"
