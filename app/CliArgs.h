// Whole-number option values checked against their limits, for the commands not yet declared on CLI11
// (app/Cli.h has the usage error and the rest).
#pragma once

#include <cstdint>
#include <string>

#include "app/Cli.h"

namespace strata::cli {

// `text` as a whole number in [min, max]; UsageError naming the flag and the limits otherwise.
int64_t parseInteger(const std::string& flag, const std::string& text, int64_t min, int64_t max);
inline int parseInt(const std::string& flag, const std::string& text, int min, int max) {
    return static_cast<int>(parseInteger(flag, text, min, max));
}

}  // namespace strata::cli
