// Non-finite weights (NaN, +inf, -inf) found on load: every reader that loads weights for use (checkpoints,
// safetensors, GGUF after dequantization, ONNX initializers) refuses a tensor holding one, naming the tensor,
// how many values and the first; a diverged run or a damaged file would otherwise predict "-nan", or worse,
// plausible output where a ReLU absorbs the NaN. WeightLoadOptions::allowNonFinite loads them anyway (the CLI's
// --allow-non-finite), for looking at a broken file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace strata {

struct WeightLoadOptions {
    bool allowNonFinite = false;
    // How to load such a file anyway, appended to the refusal; empty: nothing (where nothing could, as a resume).
    std::string allowHint = "pass --allow-non-finite to load it anyway";
};

struct NonFiniteValues {
    int64_t count = 0;
    int64_t firstIndex = -1;
    float first = 0;  // the first non-finite value
};
NonFiniteValues findNonFinite(const float* values, size_t n);

// "tensor 'fc1.weight' has 3 non-finite values (first at index 17: nan)", then "; <hint>" when the options hold one;
// empty when every value is finite or the options allow non-finite values.
std::string nonFiniteProblem(const std::string& tensor, const std::vector<float>& values,
                             const WeightLoadOptions& options);

}  // namespace strata
