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

// What an int8 export (Quantize.h) writes: the model with its BatchNorms folded first, as quantization toolkits
// fold them before calibrating (PyTorch's fuse_modules, onnxruntime's quantization pre-processing), and the
// calibration of that folded model. A Conv2D or Dense followed by a BatchNorm then has one rounded output (the
// BatchNorm's values, not the raw sums and then the normalized ones), one fewer QuantizeLinear/DequantizeLinear
// pair, and runs in the int8 engine as one convolution instead of a convolution and a per-channel table. A
// BatchNorm that cannot be folded (after a layer whose output is used elsewhere too, or after no Conv2D/Dense)
// stays, between its own quantized input and output. Throws as calibrateInt8 does.
struct Int8Export {
    ExportModel model;
    Int8Calibration calibration;
    std::vector<FoldedBatchNorm> folded;
};
struct DataSplit;
Int8Export prepareInt8Export(const ExportModel& model, const DataSplit& data, const QuantizationOptions& options);

}  // namespace strata
