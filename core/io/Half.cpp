#include "core/io/Half.h"

#include <bit>
#include <cmath>

namespace strata {

uint16_t floatToHalf(float value) {
    const uint32_t f = std::bit_cast<uint32_t>(value);
    const uint32_t sign = (f >> 16) & 0x8000u;
    const uint32_t absF = f & 0x7fffffffu;
    if (absF >= 0x7f800000u) {  // inf or NaN; keep NaN quiet and non-zero
        return static_cast<uint16_t>(sign | 0x7c00u | (absF > 0x7f800000u ? 0x200u | ((absF >> 13) & 0x3ffu) : 0u));
    }
    if (absF >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504: inf
    if (absF < 0x38800000u) {
        // Subnormal half (or zero): value = m * 2^-24. Shift the full mantissa with rounding.
        if (absF < 0x33000000u) return static_cast<uint16_t>(sign);  // below half of the smallest subnormal
        const uint32_t exp = absF >> 23;
        const uint32_t mant = (absF & 0x7fffffu) | 0x800000u;
        const uint32_t shift = 126u - exp;  // 113 - exp + 13
        uint32_t half = mant >> shift;
        const uint32_t rem = mant & ((1u << shift) - 1u);
        const uint32_t halfway = 1u << (shift - 1u);
        if (rem > halfway || (rem == halfway && (half & 1u))) ++half;
        return static_cast<uint16_t>(sign | half);
    }
    // Normal: rebias exponent 127 -> 15, round the 13 dropped mantissa bits to nearest even.
    uint32_t half = ((absF - 0x38000000u) >> 13);
    const uint32_t rem = absF & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;  // carry may roll into the exponent: correct
    return static_cast<uint16_t>(sign | half);
}

float halfToFloat(uint16_t bits) {
    const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
    const uint32_t exp = (bits >> 10) & 0x1fu;
    const uint32_t mant = bits & 0x3ffu;
    if (exp == 0) {
        const float v = std::ldexp(static_cast<float>(mant), -24);
        return sign ? -v : v;
    }
    if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
    return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t floatToBFloat16(float value) {
    const uint32_t f = std::bit_cast<uint32_t>(value);
    if ((f & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((f >> 16) | 0x40u);  // quiet NaN
    const uint32_t rounding = 0x7fffu + ((f >> 16) & 1u);
    return static_cast<uint16_t>((f + rounding) >> 16);
}

float bfloat16ToFloat(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

}  // namespace strata
