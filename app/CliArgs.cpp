#include "app/CliArgs.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include "core/io/InputFile.h"
#include "core/io/InputLimits.h"

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

bool looksLikeProjectFile(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec) || std::filesystem::is_directory(path, ec)) return false;
    InputFile in(path, kMaxModelFileBytes, "a project or model file");
    char buf[4096];
    for (size_t n; (n = in.read(buf, sizeof buf)) > 0;)
        for (size_t i = 0; i < n; ++i)
            if (!std::isspace(static_cast<unsigned char>(buf[i]))) return buf[i] == '{';
    return false;
}

}  // namespace strata::cli
