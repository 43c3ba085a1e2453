// File helpers shared by the export formats: whole-file reads with
// FormatError on failure, and atomic writes (temporary file + rename) so a
// reader never sees a half-written export.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "core/io/InputLimits.h"

namespace strata {

// Throws FormatError naming the file when it cannot be opened or read, is not a regular file, or is larger
// than `maxBytes` (InputFile's checks; `kind` names the file in that message).
std::vector<uint8_t> readWholeFile(const std::string& path, int64_t maxBytes = kMaxModelFileBytes,
                                   const std::string& kind = "a model file");

// Calls `write` on a stream to "<path>.tmp-<pid>", fsyncs it, renames it over `path` and fsyncs the
// folder. On any failure (open, a stream in a failed state after `write`, fsync, rename) the temporary
// file is removed and std::runtime_error names the file.
void writeFileAtomically(const std::string& path, const std::function<void(std::ostream&)>& write);

// fsync of a file or (directory = true) a folder; false when it cannot be opened or flushed.
bool syncPath(const std::string& path, bool directory);
// "<name>.tmp-<digits>": a file writeFileAtomically was writing.
bool isTemporaryFileName(const std::string& name);
// Deletes the temporary files in `folder` left by writers that died (their process id is gone); returns how
// many. A process killed mid-write leaves one behind, possibly megabytes.
int removeOrphanedTemporaryFiles(const std::string& folder);

}  // namespace strata
