// Tsne: exact t-SNE (van der Maaten and Hinton, 2008) for the embedding projector, our own implementation: each
// point's Gaussian affinities calibrated by binary search to the perplexity, symmetrized, then a 2-D layout by
// gradient descent on the KL divergence to Student-t affinities, with early exaggeration, momentum and per-
// coordinate gains as in the paper's reference code. O(n^2) time and memory a step: meant for a few thousand
// points (the validation set is subsampled to that); Barnes-Hut is not implemented.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace strata {

struct TsneOptions {
    double perplexity = 30;
    int iterations = 1000;
    // 0: scikit-learn's "auto", max(n / exaggeration / 4, 50); the paper's 200 overshoots on a few dozen points.
    double learningRate = 0;
    double exaggeration = 12;  // for the first exaggerationIterations
    int exaggerationIterations = 250;
    uint64_t seed = 1;  // the initial layout's
    // After every iteration; return false to stop early (the layout so far is returned).
    std::function<bool(int iteration)> progress;
};

// p(j|i) for every i: row-major n x n, each row summing to 1 with its entropy (natural log) equal to
// log(perplexity) to 1e-5, the diagonal 0. rows: n x dim.
std::vector<double> tsneConditionalAffinities(const float* rows, int64_t n, int64_t dim, double perplexity);

// n x 2 coordinates. Throws std::invalid_argument for n < 4 or a perplexity outside 1..(n - 1) / 3.
std::vector<float> tsne(const float* rows, int64_t n, int64_t dim, const TsneOptions& options = {});

}  // namespace strata
