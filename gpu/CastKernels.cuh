// Precision casts for mixed precision (host launchers only). Half types travel as uint16_t bit patterns so
// that callers need no CUDA half headers. float -> bf16/fp16 rounds to nearest even.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace strata::gpu {

void launchFloatToBf16(cudaStream_t s, uint16_t* y, const float* x, int64_t n);
void launchBf16ToFloat(cudaStream_t s, float* y, const uint16_t* x, int64_t n);
void launchFloatToHalf(cudaStream_t s, uint16_t* y, const float* x, int64_t n);
void launchHalfToFloat(cudaStream_t s, float* y, const uint16_t* x, int64_t n);
// y = x rounded to bf16 (bf16 true) or fp16 and widened back to float32 (y may equal x): the operand
// rounding of ComputePrecision::BF16 / F16. fp16 overflows to +-inf and keeps subnormals.
void launchRoundFloat(cudaStream_t s, float* y, const float* x, int64_t n, bool bf16);

}  // namespace strata::gpu
