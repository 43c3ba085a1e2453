// Operand rounding for the bf16 / fp16 compute precision (host launcher only).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace strata::gpu {

// y = x rounded to bf16 (bf16 true) or fp16 and widened back to float32 (y may equal x): the operand
// rounding of ComputePrecision::BF16 / F16. fp16 overflows to +-inf and keeps subnormals.
void launchRoundFloat(cudaStream_t s, float* y, const float* x, int64_t n, bool bf16);

}  // namespace strata::gpu
