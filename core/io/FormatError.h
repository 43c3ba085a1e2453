// FormatError: the one exception every Strata file reader (safetensors, GGUF,
// ONNX, checkpoints) throws for a malformed file. It names the file, the byte
// offset where the problem was found when that is known, and what is wrong, so
// a user can tell a truncated download from a wrong format.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace strata {

class FormatError : public std::runtime_error {
public:
    static constexpr int64_t kNoOffset = -1;

    FormatError(const std::string& file, int64_t offset, const std::string& problem);
    FormatError(const std::string& file, const std::string& problem) : FormatError(file, kNoOffset, problem) {}

    const std::string& file() const { return m_file; }
    int64_t offset() const { return m_offset; }  // kNoOffset when unknown
    const std::string& problem() const { return m_problem; }

private:
    std::string m_file;
    int64_t m_offset;
    std::string m_problem;
};

}  // namespace strata
