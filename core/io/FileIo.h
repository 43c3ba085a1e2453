// File helpers shared by the export formats: whole-file reads with
// FormatError on failure, and atomic writes (temporary file + rename) so a
// reader never sees a half-written export.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace strata {

// Throws FormatError naming the file when it cannot be opened or read.
std::vector<uint8_t> readWholeFile(const std::string& path);

// Calls `write` on a stream to "<path>.tmp-<pid>", then renames it over `path`. On any
// failure (open, a stream in a failed state after `write`, rename) the temporary file is
// removed and std::runtime_error names the file.
void writeFileAtomically(const std::string& path, const std::function<void(std::ostream&)>& write);

}  // namespace strata
