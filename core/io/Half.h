// IEEE 754 binary16 and bfloat16 conversions used by the export formats
// (F16 and BF16 tensors, the f16 scale of GGUF Q8_0 blocks). Round to nearest even.
#pragma once

#include <cstdint>

namespace strata {

uint16_t floatToHalf(float value);
float halfToFloat(uint16_t bits);
uint16_t floatToBFloat16(float value);
float bfloat16ToFloat(uint16_t bits);

}  // namespace strata
