// Pca: principal component analysis for the embedding projector (the penultimate layer's activations of the
// validation set, projected to 2 or 3 dimensions). Our own: the covariance matrix (dim x dim, in double), its
// leading eigenvectors by power iteration with deflation (each orthogonalized against those found before), so no
// linear-algebra library is needed; a few hundred dimensions take milliseconds.
#pragma once

#include <cstdint>
#include <vector>

namespace strata {

struct PcaResult {
    int components = 0;
    int64_t dim = 0;
    std::vector<double> mean;       // dim
    std::vector<double> axes;       // components x dim, unit length; sign: the largest-magnitude entry positive
    std::vector<double> variances;  // per component (population variance, divided by n), decreasing
    std::vector<float> projected;   // n x components: each row's coordinates along the axes, centred
    double totalVariance = 0;       // the trace of the covariance: variances / totalVariance is the share explained
};

// rows: n x dim, row-major. Throws std::invalid_argument for n < 2, dim < 1 or components outside 1..dim.
PcaResult pca(const float* rows, int64_t n, int64_t dim, int components);

}  // namespace strata
