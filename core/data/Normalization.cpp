#include "core/data/Normalization.h"

#include <cmath>
#include <stdexcept>

namespace strata {

namespace {

void checkFeatureCount(const std::vector<float>& values, const Normalization& n) {
    if (n.featureStd.size() != n.featureMean.size())
        throw std::invalid_argument("normalization: " + std::to_string(n.featureMean.size()) + " feature means but " +
                                    std::to_string(n.featureStd.size()) + " standard deviations");
    if (values.size() % n.featureMean.size() != 0)
        throw std::invalid_argument("normalization: " + std::to_string(values.size()) +
                                    " values are not whole samples of " + std::to_string(n.featureMean.size()) +
                                    " features");
}

}  // namespace

void applyNormalization(const Normalization& norm, float* values, int64_t samples, int64_t n) {
    if (!norm.featureMean.empty()) {
        for (int64_t r = 0; r < samples; ++r)
            for (int64_t j = 0; j < n; ++j) {
                float& x = values[r * n + j];
                x = (x - norm.featureMean[static_cast<size_t>(j)]) / norm.featureStd[static_cast<size_t>(j)];
            }
    } else {
        const float scale = norm.scale, mean = norm.mean, inv = 1.0f / norm.std;
        for (int64_t i = 0; i < samples * n; ++i) values[i] = (values[i] * scale - mean) * inv;
    }
}

void applyNormalization(std::vector<float>& values, const Normalization& n) {
    if (n.mode == "none") return;
    if (!n.featureMean.empty()) {
        checkFeatureCount(values, n);
        const auto f = static_cast<int64_t>(n.featureMean.size());
        applyNormalization(n, values.data(), static_cast<int64_t>(values.size()) / f, f);
        return;
    }
    applyNormalization(n, values.data(), static_cast<int64_t>(values.size()), 1);
}

void undoNormalization(std::vector<float>& values, const Normalization& n) {
    if (n.mode == "none") return;
    if (!n.featureMean.empty()) {
        checkFeatureCount(values, n);
        const size_t f = n.featureMean.size();
        for (size_t i = 0; i < values.size(); ++i) values[i] = values[i] * n.featureStd[i % f] + n.featureMean[i % f];
        return;
    }
    for (float& x : values) x = (x * n.std + n.mean) / n.scale;
}

void checkNormalizationValues(const Normalization& n) {
    auto bad = [](const std::string& what) { throw std::invalid_argument(what); };
    if (n.mode != "none") {
        if (!(n.std > 0) || !std::isfinite(n.std))
            bad("normalization std " + std::to_string(n.std) + " is not positive");
        if (!std::isfinite(n.scale) || !std::isfinite(n.mean)) bad("normalization scale or mean is not finite");
    }
    if (n.featureStd.size() != n.featureMean.size())
        bad(std::to_string(n.featureMean.size()) + " feature means but " + std::to_string(n.featureStd.size()) +
            " standard deviations");
    for (size_t i = 0; i < n.featureStd.size(); ++i)
        if (!(n.featureStd[i] > 0) || !std::isfinite(n.featureStd[i]) || !std::isfinite(n.featureMean[i]))
            bad("feature " + std::to_string(i) + ": std " + std::to_string(n.featureStd[i]) + " is not positive");
}

}  // namespace strata
