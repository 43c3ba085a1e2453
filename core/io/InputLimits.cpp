#include "core/io/InputLimits.h"

#include <filesystem>
#include <system_error>

#include "core/io/FormatError.h"

namespace strata {

void requireRegularFile(const std::string& path) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(status)) throw FormatError(path, "cannot open: no such file");
    if (std::filesystem::is_directory(status)) throw FormatError(path, "is a directory, not a file");
    if (!std::filesystem::is_regular_file(status))
        throw FormatError(path, "is not a regular file (a FIFO, socket or device); only regular files are read");
}

}  // namespace strata
