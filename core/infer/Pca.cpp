// Pca: see Pca.h.
#include "core/infer/Pca.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace strata {

PcaResult pca(const float* x, int64_t n, int64_t dim, int components) {
    if (n < 2) throw std::invalid_argument("PCA needs at least 2 samples, got " + std::to_string(n));
    if (dim < 1 || components < 1 || components > dim)
        throw std::invalid_argument("PCA of " + std::to_string(dim) + " dimensions cannot give " +
                                    std::to_string(components) + " components");
    PcaResult r;
    r.components = components;
    r.dim = dim;
    const size_t d = size_t(dim);
    r.mean.assign(d, 0.0);
    for (int64_t i = 0; i < n; ++i)
        for (size_t j = 0; j < d; ++j) r.mean[j] += x[size_t(i) * d + j];
    for (double& m : r.mean) m /= double(n);
    // Covariance, upper triangle then mirrored.
    std::vector<double> cov(d * d, 0.0), row(d);
    for (int64_t i = 0; i < n; ++i) {
        for (size_t j = 0; j < d; ++j) row[j] = x[size_t(i) * d + j] - r.mean[j];
        for (size_t a = 0; a < d; ++a) {
            const double ra = row[a];
            if (ra == 0) continue;
            double* c = &cov[a * d];
            for (size_t b = a; b < d; ++b) c[b] += ra * row[b];
        }
    }
    for (size_t a = 0; a < d; ++a)
        for (size_t b = a; b < d; ++b) {
            cov[a * d + b] /= double(n);
            cov[b * d + a] = cov[a * d + b];
        }
    for (size_t a = 0; a < d; ++a) r.totalVariance += cov[a * d + a];

    // Power iteration per component, orthogonal to the ones found: converges to the next largest eigenvalue's
    // vector at the rate of the ratio of the next two eigenvalues. A fixed, non-random start keeps it repeatable.
    std::vector<double> v(d), w(d);
    for (int k = 0; k < components; ++k) {
        for (size_t j = 0; j < d; ++j) v[j] = 1.0 + 0.01 * double((j * 7919 + size_t(k) * 104729) % 101);
        auto orthogonalize = [&](std::vector<double>& u) {
            for (int p = 0; p < k; ++p) {
                const double* a = &r.axes[size_t(p) * d];
                double dot = 0;
                for (size_t j = 0; j < d; ++j) dot += u[j] * a[j];
                for (size_t j = 0; j < d; ++j) u[j] -= dot * a[j];
            }
        };
        auto normalize = [&](std::vector<double>& u) {
            double s = 0;
            for (double e : u) s += e * e;
            s = std::sqrt(s);
            if (s > 0)
                for (double& e : u) e /= s;
            return s;
        };
        orthogonalize(v);
        normalize(v);
        double lambda = 0;
        for (int it = 0; it < 5000; ++it) {
            for (size_t a = 0; a < d; ++a) {
                double s = 0;
                const double* c = &cov[a * d];
                for (size_t b = 0; b < d; ++b) s += c[b] * v[b];
                w[a] = s;
            }
            orthogonalize(w);
            lambda = normalize(w);
            if (lambda == 0) break;  // nothing left: the rest of the variance is 0
            double change = 0;
            for (size_t j = 0; j < d; ++j) change = std::max(change, std::abs(w[j] - v[j]));
            v.swap(w);
            if (change < 1e-12) break;
        }
        // The sign: the largest-magnitude entry positive, so the same data always gives the same picture.
        size_t big = 0;
        for (size_t j = 1; j < d; ++j)
            if (std::abs(v[j]) > std::abs(v[big])) big = j;
        if (v[big] < 0)
            for (double& e : v) e = -e;
        r.axes.insert(r.axes.end(), v.begin(), v.end());
        r.variances.push_back(lambda);
    }
    r.projected.assign(size_t(n) * size_t(components), 0.0f);
    for (int64_t i = 0; i < n; ++i)
        for (int k = 0; k < components; ++k) {
            double s = 0;
            const double* a = &r.axes[size_t(k) * d];
            for (size_t j = 0; j < d; ++j) s += (x[size_t(i) * d + j] - r.mean[j]) * a[j];
            r.projected[size_t(i) * size_t(components) + size_t(k)] = float(s);
        }
    return r;
}

}  // namespace strata
