// File helpers shared by the format tests: whole files as bytes, and the check that a reader refuses a file
// with a FormatError that names the file and says what is wrong.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/io/FormatError.h"

namespace strata::test {

std::vector<uint8_t> readBytes(const std::string& path);
// Writes (truncating) `bytes` to `path`.
void writeBytes(const std::string& path, const std::vector<uint8_t>& bytes);

// Calls `read` (a reader applied to `file`) and expects a FormatError whose message names `file` and
// contains `needle`; fails the running Qt test otherwise (QTest::qFail) and returns the error it got.
FormatError expectFormatError(const std::function<void()>& read, const std::string& file, const std::string& needle);

}  // namespace strata::test
