// Tsne: see Tsne.h.
#include "core/infer/Tsne.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace strata {

std::vector<double> tsneConditionalAffinities(const float* x, int64_t n, int64_t dim, double perplexity) {
    const size_t N = size_t(n), D = size_t(dim);
    std::vector<double> dist(N * N, 0.0);
    for (size_t i = 0; i < N; ++i)
        for (size_t j = i + 1; j < N; ++j) {
            double s = 0;
            for (size_t k = 0; k < D; ++k) {
                const double d = double(x[i * D + k]) - x[j * D + k];
                s += d * d;
            }
            dist[i * N + j] = dist[j * N + i] = s;
        }
    const double target = std::log(perplexity);
    std::vector<double> p(N * N, 0.0);
    for (size_t i = 0; i < N; ++i) {
        double beta = 1, lo = 0, hi = std::numeric_limits<double>::infinity();
        double* row = &p[i * N];
        // Shifting by the nearest distance keeps exp() from underflowing for far-apart data; it cancels out.
        double nearest = std::numeric_limits<double>::infinity();
        for (size_t j = 0; j < N; ++j)
            if (j != i) nearest = std::min(nearest, dist[i * N + j]);
        for (int it = 0; it < 200; ++it) {
            double sum = 0, weighted = 0;
            for (size_t j = 0; j < N; ++j) {
                row[j] = j == i ? 0.0 : std::exp(-(dist[i * N + j] - nearest) * beta);
                sum += row[j];
                weighted += row[j] * (dist[i * N + j] - nearest);
            }
            // H = log(sum) + beta * E[d - nearest]
            const double entropy = std::log(sum) + beta * weighted / sum;
            for (size_t j = 0; j < N; ++j) row[j] /= sum;
            const double diff = entropy - target;
            if (std::abs(diff) < 1e-7) break;
            if (diff > 0) {  // too flat: narrower Gaussians
                lo = beta;
                beta = std::isinf(hi) ? beta * 2 : 0.5 * (beta + hi);
            } else {
                hi = beta;
                beta = 0.5 * (beta + lo);
            }
        }
    }
    return p;
}

std::vector<float> tsne(const float* x, int64_t n, int64_t dim, const TsneOptions& o) {
    if (n < 4) throw std::invalid_argument("t-SNE needs at least 4 points, got " + std::to_string(n));
    if (!(o.perplexity >= 1 && o.perplexity <= double(n - 1) / 3))
        throw std::invalid_argument("t-SNE's perplexity must be from 1 to (points - 1) / 3 = " +
                                    std::to_string(double(n - 1) / 3) + ", not " + std::to_string(o.perplexity));
    const size_t N = size_t(n);
    std::vector<double> p = tsneConditionalAffinities(x, n, dim, o.perplexity);
    // Symmetrize: p_ij = (p(j|i) + p(i|j)) / 2n, floored so the KL gradient never divides by 0.
    for (size_t i = 0; i < N; ++i)
        for (size_t j = i + 1; j < N; ++j) {
            const double v = std::max((p[i * N + j] + p[j * N + i]) / (2.0 * double(N)), 1e-12);
            p[i * N + j] = p[j * N + i] = v;
        }
    // A small random start (a fixed LCG: the same layout for the same data and seed).
    uint64_t state = o.seed * 6364136223846793005ULL + 1442695040888963407ULL;
    auto uniform = [&state] {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        return double(state >> 11) / double(uint64_t(1) << 53) - 0.5;
    };
    const double rate = o.learningRate > 0 ? o.learningRate : std::max(double(N) / o.exaggeration / 4, 50.0);
    std::vector<double> y(N * 2), update(N * 2, 0.0), gains(N * 2, 1.0), grad(N * 2), num(N * N);
    for (double& v : y) v = 1e-4 * uniform();
    for (int it = 0; it < o.iterations; ++it) {
        const double exaggerate = it < o.exaggerationIterations ? o.exaggeration : 1.0;
        const double momentum = it < o.exaggerationIterations ? 0.5 : 0.8;
        double sumNum = 0;
        for (size_t i = 0; i < N; ++i)
            for (size_t j = i + 1; j < N; ++j) {
                const double dx = y[2 * i] - y[2 * j], dy = y[2 * i + 1] - y[2 * j + 1];
                const double v = 1.0 / (1.0 + dx * dx + dy * dy);
                num[i * N + j] = num[j * N + i] = v;
                sumNum += 2 * v;
            }
        std::fill(grad.begin(), grad.end(), 0.0);
        for (size_t i = 0; i < N; ++i)
            for (size_t j = 0; j < N; ++j) {
                if (i == j) continue;
                const double q = std::max(num[i * N + j] / sumNum, 1e-12);
                const double m = 4 * (exaggerate * p[i * N + j] - q) * num[i * N + j];
                grad[2 * i] += m * (y[2 * i] - y[2 * j]);
                grad[2 * i + 1] += m * (y[2 * i + 1] - y[2 * j + 1]);
            }
        for (size_t k = 0; k < N * 2; ++k) {
            // Gains grow while the descent keeps its direction (the gradient's sign opposite the last update's) and
            // shrink when it turns.
            gains[k] = (grad[k] > 0) != (update[k] > 0) ? gains[k] + 0.2 : std::max(0.01, gains[k] * 0.8);
            update[k] = momentum * update[k] - rate * gains[k] * grad[k];
            y[k] += update[k];
        }
        // Centred each step, as the reference code does, so the layout does not drift.
        double cx = 0, cy = 0;
        for (size_t i = 0; i < N; ++i) cx += y[2 * i], cy += y[2 * i + 1];
        for (size_t i = 0; i < N; ++i) y[2 * i] -= cx / double(N), y[2 * i + 1] -= cy / double(N);
        if (o.progress && !o.progress(it)) break;
    }
    return std::vector<float>(y.begin(), y.end());
}

}  // namespace strata
