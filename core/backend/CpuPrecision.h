// CpuPrecision: the CPU's bf16 / fp16 compute precision (BackendOptions::precision, ComputePrecision).
// GEMM and convolution inputs are rounded element by element into scratch copies that
// stay float32 (every bf16 and fp16 value is exact in float32), and the unchanged float32
// path then runs on the copies. A product of two rounded values is exact in float32, so
// this is the definition itself: rounded inputs, float32 accumulation. Internal to core/backend.
#pragma once

#include <cstdint>
#include <vector>

#include "core/backend/Backend.h"

namespace strata::cpu {

// One value rounded to nearest even in `precision` and widened back to float32 (identity for F32).
float roundToPrecision(float value, ComputePrecision precision);

// Rounds the `count` floats at src into scratch (grown as needed, never shrunk); returns scratch's data.
const float* roundedCopy(std::vector<float>& scratch, const float* src, int64_t count, ComputePrecision precision,
                         int threads);

// Floats a row-major operand of `rows` rows of `cols` used elements with leading dimension ld
// spans: (rows - 1) * ld + cols (0 when empty).
int64_t operandSpan(int rows, int cols, int ld);

}  // namespace strata::cpu
