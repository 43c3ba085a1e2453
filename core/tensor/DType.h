// Element types a Tensor can hold. f32 is the only compute type today;
// the others are declared for mixed precision, token ids and raw image bytes.
#pragma once

#include <cstddef>
#include <string>

namespace strata {

enum class DType { F32, BF16, F16, I32, U8 };

size_t dtypeSize(DType t);
const char* dtypeName(DType t);
// Parses the names dtypeName() produces ("f32", "bf16", ...); throws on others.
DType parseDType(const std::string& name);

}  // namespace strata
