// PCA (core/infer/Pca, the embedding projector's): against a decomposition known by construction, and its
// refusals.
#include <QTest>
#include <cmath>

#include "core/infer/Pca.h"

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

    void refusals() {
        const float one[3] = {1, 2, 3};
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, pca(one, 1, 3, 2));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, pca(one, 3, 1, 2));
    }
};

QTEST_MAIN(TestPca)
#include "test_pca.moc"
