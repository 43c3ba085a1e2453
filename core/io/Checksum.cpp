#include "core/io/Checksum.h"

#include <cstdio>

#include <xxhash.h>

namespace strata {

uint64_t tensorChecksum(const void* data, size_t bytes) { return XXH3_64bits(data, bytes); }

std::string checksumHex(uint64_t checksum) {
    char buf[20];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(checksum));
    return buf;
}

}  // namespace strata
