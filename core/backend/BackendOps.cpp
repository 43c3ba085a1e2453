// The op registry (BackendOps.h).
#include "core/backend/BackendOps.h"

#include <iterator>

namespace strata {

namespace {

struct Entry {
    BackendOp op;
    const char* name;
};

// Backend.h's order; one line per op.
constexpr Entry kOps[] = {
    {BackendOp::Fill, "fill"},
    {BackendOp::Zero, "zero"},
    {BackendOp::Scale, "scale"},
    {BackendOp::Axpy, "axpy"},
    {BackendOp::Add, "add"},
    {BackendOp::Mul, "mul"},
    {BackendOp::Gemm, "gemm"},
    {BackendOp::GemmStridedBatched, "gemmStridedBatched"},
    {BackendOp::AddBiasRows, "addBiasRows"},
    {BackendOp::SumRows, "sumRows"},
    {BackendOp::AddBiasChannels, "addBiasChannels"},
    {BackendOp::SumChannels, "sumChannels"},
    {BackendOp::Conv2dForward, "conv2dForward"},
    {BackendOp::Conv2dBackwardData, "conv2dBackwardData"},
    {BackendOp::Conv2dBackwardFilter, "conv2dBackwardFilter"},
    {BackendOp::Conv2dForwardFused, "conv2dForwardFused"},
    {BackendOp::Conv2dBackwardFused, "conv2dBackwardFused"},
    {BackendOp::Pool2dForward, "pool2dForward"},
    {BackendOp::Pool2dBackward, "pool2dBackward"},
    {BackendOp::MaxPool2dReLUBackward, "maxPool2dReLUBackward"},
    {BackendOp::MeanPoolForward, "meanPoolForward"},
    {BackendOp::MeanPoolBackward, "meanPoolBackward"},
    {BackendOp::SequencePoolForward, "sequencePoolForward"},
    {BackendOp::SequencePoolBackward, "sequencePoolBackward"},
    {BackendOp::ActivationForward, "activationForward"},
    {BackendOp::ActivationBackward, "activationBackward"},
    {BackendOp::SoftmaxForward, "softmaxForward"},
    {BackendOp::SoftmaxBackward, "softmaxBackward"},
    {BackendOp::MaskedSoftmaxForward, "maskedSoftmaxForward"},
    {BackendOp::SoftmaxCrossEntropy, "softmaxCrossEntropy"},
    {BackendOp::MseLoss, "mseLoss"},
    {BackendOp::BceWithLogits, "bceWithLogits"},
    {BackendOp::CountCorrect, "countCorrect"},
    {BackendOp::StepMetrics, "stepMetrics"},
    {BackendOp::BatchNormForwardTraining, "batchNormForwardTraining"},
    {BackendOp::BatchNormForwardInference, "batchNormForwardInference"},
    {BackendOp::BatchNormBackward, "batchNormBackward"},
    {BackendOp::LayerNormForward, "layerNormForward"},
    {BackendOp::LayerNormBackward, "layerNormBackward"},
    {BackendOp::DropoutForward, "dropoutForward"},
    {BackendOp::DropoutBackward, "dropoutBackward"},
    {BackendOp::EmbeddingForward, "embeddingForward"},
    {BackendOp::EmbeddingBackward, "embeddingBackward"},
    {BackendOp::CopyBlocks, "copyBlocks"},
    {BackendOp::Reblock, "reblock"},
    {BackendOp::GatherRows, "gatherRows"},
    {BackendOp::Sum, "sum"},
    {BackendOp::SumSquares, "sumSquares"},
    {BackendOp::AllFinite, "allFinite"},
    {BackendOp::SgdUpdate, "sgdUpdate"},
    {BackendOp::AdamUpdate, "adamUpdate"},
};

// The table is indexed by the enum: each entry must sit at its own value's position.
constexpr bool tableInEnumOrder() {
    for (size_t i = 0; i < std::size(kOps); ++i)
        if (static_cast<size_t>(kOps[i].op) != i) return false;
    return true;
}
static_assert(tableInEnumOrder(), "kOps must list BackendOp in declaration order");
static_assert(static_cast<size_t>(BackendOp::AdamUpdate) + 1 == std::size(kOps),
              "a BackendOp without a name: add it to kOps");

}  // namespace

const char* backendOpName(BackendOp op) {
    const auto i = static_cast<size_t>(op);
    return i < std::size(kOps) ? kOps[i].name : "unknown op";
}

const std::vector<BackendOp>& backendOps() {
    static const std::vector<BackendOp> all = [] {
        std::vector<BackendOp> v;
        for (const Entry& e : kOps) v.push_back(e.op);
        return v;
    }();
    return all;
}

const std::vector<std::string_view>& backendOpNames() {
    static const std::vector<std::string_view> all = [] {
        std::vector<std::string_view> v;
        for (const Entry& e : kOps) v.push_back(e.name);
        return v;
    }();
    return all;
}

}  // namespace strata
