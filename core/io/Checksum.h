// Per-tensor checksums: XXH3-64 (xxHash, Debian's libxxhash-dev) of a tensor's bytes, written as 16 hex
// digits. Checkpoints and Strata's own exports store one per tensor (safetensors: __metadata__ key
// "strata.xxh3_64", GGUF: key "strata.xxh3_64"), and the readers verify them, naming the tensor on a
// mismatch; files without them (older ones, other writers') still load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace strata {

constexpr const char* kChecksumMetadataKey = "strata.xxh3_64";

uint64_t tensorChecksum(const void* data, size_t bytes);
std::string checksumHex(uint64_t checksum);  // 16 lower-case hex digits

}  // namespace strata
