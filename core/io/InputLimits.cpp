#include "core/io/InputLimits.h"

#include <limits>

#include "core/io/InputFile.h"

namespace strata {

void requireRegularFile(const std::string& path) {
    const InputFile checked(path, std::numeric_limits<int64_t>::max(), "a file");
}

}  // namespace strata
