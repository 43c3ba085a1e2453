// Small helpers shared by strata-train's commands: the usage error (exit status 2, usage printed) and
// whole-number option values checked against their limits.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace strata::cli {

// A wrong command line: the command prints the message and its usage, and exits with status 2.
class UsageError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// `text` as a whole number in [min, max]; UsageError naming the flag and the limits otherwise.
int64_t parseInteger(const std::string& flag, const std::string& text, int64_t min, int64_t max);
inline int parseInt(const std::string& flag, const std::string& text, int min, int max) {
    return static_cast<int>(parseInteger(flag, text, min, max));
}

// True when `path` is a regular file whose first non-space byte is '{' (a project, not a model file); false for
// a folder or a missing file (the model reader names those). FormatError for a FIFO or device, at once.
bool looksLikeProjectFile(const std::string& path);

}  // namespace strata::cli
