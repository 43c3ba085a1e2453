#include "app/CliArgs.h"

#include <cerrno>
#include <cstdlib>

namespace strata::cli {

int64_t parseInteger(const std::string& flag, const std::string& text, int64_t min, int64_t max) {
    // strtoll, not stoi: "4294967360" must be refused, not wrapped.
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    const bool whole = !text.empty() && end == text.c_str() + text.size() && errno != ERANGE;
    if (!whole || v < min || v > max)
        throw UsageError(flag + ": '" + (text.size() > 40 ? text.substr(0, 40) + "..." : text) +
                         "' is not a whole number from " + std::to_string(min) + " to " + std::to_string(max));
    return v;
}

}  // namespace strata::cli
