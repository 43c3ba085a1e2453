// DeviceErrorFlag: how kernels report bad data (an id or label out of range).
//
// A kernel cannot throw. Kernels that validate indices write the first failure
// into a small device word array: [code, bad value, position, limit] (an embedding
// id's value is the float's bit pattern, a label's the int itself), claimed
// with atomicCAS on `code` so the first report wins. CudaBackend reads the
// array back at its next host synchronization point (synchronize, copyToHost,
// host-result reductions) and throws BackendError naming the op.
#pragma once

namespace strata::gpu {

enum DeviceErrorCode : int {
    kDeviceOk = 0,
    kEmbeddingForwardId = 1,
    kEmbeddingBackwardId = 2,
    kCrossEntropyLabel = 3,
    kCountCorrectLabel = 4,
    kGatherRowIndex = 5,
};

constexpr int kDeviceErrorWords = 4;

}  // namespace strata::gpu
