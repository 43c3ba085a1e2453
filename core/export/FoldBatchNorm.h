// FoldBatchNorm: a trained model for inference with every BatchNorm that directly follows a Conv2D or Dense
// folded into that layer's weights and bias (issue 19). In evaluation BatchNorm is affine per channel,
//   y = (x - running_mean) * s + beta,  s = gamma / sqrt(running_var + eps),
// so for x = W * in + b the layer computes the same with W' = W * s (each output channel's row) and
// b' = (b - running_mean) * s + beta: one pass over the activations fewer, and a ReLU after the BatchNorm
// then follows the convolution directly, which compile() fuses into it.
//
// A BatchNorm is folded only when the layer before it has no other consumer (its output is not used
// unnormalized elsewhere). The result is for inference only: the running statistics are gone, so it cannot
// train on. Predict and the inference benchmark use it; export and the export check keep the graph as drawn.
#pragma once

#include <string>
#include <vector>

#include "core/export/ExportModel.h"

namespace strata {

struct FoldedBatchNorm {
    std::string batchNorm;  // the BatchNorm node's name
    std::string into;       // the Conv2D or Dense it was folded into
};

// The model with every foldable BatchNorm folded (see above); `folded` lists them (may be null). Throws
// std::runtime_error when the model's weights do not match its graph.
ExportModel foldBatchNorm(const ExportModel& model, std::vector<FoldedBatchNorm>* folded = nullptr);

}  // namespace strata
