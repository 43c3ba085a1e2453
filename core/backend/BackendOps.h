// The registry of Backend's ops: one entry per public op of Backend.h (memory and transfers are not
// ops). Error messages of the seam start with these names, and tests/test_backend_ops.cpp checks its
// tolerance table against this list both ways, so an op added to Backend without a conformance test
// fails the suite. A new op: its entry here (in Backend.h's order), then its check in Backend.cpp.
#pragma once

#include <string_view>
#include <vector>

namespace strata {

enum class BackendOp {
    Fill,
    Zero,
    Scale,
    Axpy,
    Add,
    Mul,
    Gemm,
    GemmStridedBatched,
    AddBiasRows,
    SumRows,
    AddBiasChannels,
    SumChannels,
    Conv2dForward,
    Conv2dBackwardData,
    Conv2dBackwardFilter,
    Conv2dForwardFused,
    Conv2dBackwardFused,
    Pool2dForward,
    Pool2dBackward,
    MaxPool2dReLUBackward,
    MeanPoolForward,
    MeanPoolBackward,
    SequencePoolForward,
    SequencePoolBackward,
    ActivationForward,
    ActivationBackward,
    SoftmaxForward,
    SoftmaxBackward,
    MaskedSoftmaxForward,
    SoftmaxCrossEntropy,
    MseLoss,
    BceWithLogits,
    CountCorrect,
    StepMetrics,
    BatchNormForwardTraining,
    BatchNormForwardInference,
    BatchNormBackward,
    LayerNormForward,
    LayerNormBackward,
    DropoutForward,
    DropoutBackward,
    EmbeddingForward,
    EmbeddingBackward,
    CopyBlocks,
    Reblock,
    GatherRows,
    Sum,
    SumSquares,
    AllFinite,
    SgdUpdate,
    AdamUpdate,
};

// The op's name as Backend.h spells the function: "gemm", "conv2dForwardFused".
const char* backendOpName(BackendOp op);
// Every op, in declaration order.
const std::vector<BackendOp>& backendOps();
// Every op's name, in the same order.
const std::vector<std::string_view>& backendOpNames();

}  // namespace strata
