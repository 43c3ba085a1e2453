// Input rounding for the CPU's bf16 / fp16 compute precision (see CpuPrecision.h).
#include "core/backend/CpuPrecision.h"

#include <bit>

#include "core/backend/CpuParallel.h"
#include "core/export/Half.h"

namespace strata::cpu {

namespace {

// Round to nearest even on the top 16 bits; NaN stays NaN (the carry could turn a NaN into inf).
inline float roundBf16(float v) {
    const uint32_t f = std::bit_cast<uint32_t>(v);
    if ((f & 0x7fffffffu) > 0x7f800000u) return v;
    const uint32_t rounded = (f + 0x7fffu + ((f >> 16) & 1u)) & 0xffff0000u;
    return std::bit_cast<float>(rounded);
}

// Through the binary16 bit pattern: overflow to inf and the subnormal range come from Half.cpp.
inline float roundF16(float v) { return halfToFloat(floatToHalf(v)); }

}  // namespace

float roundToPrecision(float value, ComputePrecision precision) {
    switch (precision) {
        case ComputePrecision::BF16: return roundBf16(value);
        case ComputePrecision::F16: return roundF16(value);
        case ComputePrecision::F32: break;
    }
    return value;
}

const float* roundedCopy(std::vector<float>& scratch, const float* src, int64_t count, ComputePrecision precision,
                         int threads) {
    if (count <= 0) return src;
    if (scratch.size() < static_cast<size_t>(count)) scratch.resize(static_cast<size_t>(count));
    float* dst = scratch.data();
    if (precision == ComputePrecision::BF16) {
        parallelFor(threads, count, 1 << 15, [&](int64_t lo, int64_t hi, int) {
            for (int64_t i = lo; i < hi; ++i) dst[i] = roundBf16(src[i]);
        });
    } else if (precision == ComputePrecision::F16) {
        parallelFor(threads, count, 1 << 14, [&](int64_t lo, int64_t hi, int) {
            for (int64_t i = lo; i < hi; ++i) dst[i] = roundF16(src[i]);
        });
    } else {
        return src;
    }
    return dst;
}

int64_t operandSpan(int rows, int cols, int ld) {
    if (rows <= 0 || cols <= 0) return 0;
    return static_cast<int64_t>(rows - 1) * ld + cols;
}

}  // namespace strata::cpu
