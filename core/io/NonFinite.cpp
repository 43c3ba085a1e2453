#include "core/io/NonFinite.h"

#include <cmath>

namespace strata {

NonFiniteValues findNonFinite(const float* values, size_t n) {
    NonFiniteValues r;
    for (size_t i = 0; i < n; ++i)
        if (!std::isfinite(values[i])) {
            if (r.count++ == 0) {
                r.firstIndex = static_cast<int64_t>(i);
                r.first = values[i];
            }
        }
    return r;
}

std::string nonFiniteProblem(const std::string& tensor, const std::vector<float>& values,
                             const WeightLoadOptions& options) {
    if (options.allowNonFinite) return {};
    const NonFiniteValues bad = findNonFinite(values.data(), values.size());
    if (bad.count == 0) return {};
    const char* value = std::isnan(bad.first) ? "nan" : bad.first > 0 ? "inf" : "-inf";
    std::string text = "tensor '" + tensor + "' has " + std::to_string(bad.count) + " non-finite value" +
                       (bad.count == 1 ? "" : "s") + " (first at index " + std::to_string(bad.firstIndex) + ": " +
                       value + ")";
    if (!options.allowHint.empty()) text += "; " + options.allowHint;
    return text;
}

}  // namespace strata
