#include "core/io/FormatError.h"

namespace strata {

namespace {
std::string describe(const std::string& file, int64_t offset, const std::string& problem) {
    std::string s = file;
    if (offset != FormatError::kNoOffset) s += " at byte " + std::to_string(offset);
    return s + ": " + problem;
}
}  // namespace

FormatError::FormatError(const std::string& file, int64_t offset, const std::string& problem)
    : std::runtime_error(describe(file, offset, problem)), m_file(file), m_offset(offset), m_problem(problem) {}

}  // namespace strata
