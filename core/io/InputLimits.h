// Guards for values that come from files and command lines: checked size arithmetic (a product of
// dimensions that would wrap is an error, not a small number), a cap on what an error message echoes back,
// and a check that a path names a regular file before a reader opens it (a directory or a FIFO would
// otherwise read as empty, block, or end in std::bad_alloc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace strata {

// out = a * b; false (out unspecified) when the product does not fit in int64_t.
inline bool checkedMul(int64_t a, int64_t b, int64_t& out) { return !__builtin_mul_overflow(a, b, &out); }
inline bool checkedAdd(int64_t a, int64_t b, int64_t& out) { return !__builtin_add_overflow(a, b, &out); }

// At most `max` characters of `text`, with " ... (N characters)" when it was cut: for values echoed into
// error messages, so a 100 MB string in a file gives a readable error.
// Inline, so folders below io in the library order's link check (graph's settings) may use it too.
inline std::string cutForMessage(const std::string& text, size_t max = 200) {
    if (text.size() <= max) return text;
    return text.substr(0, max) + " ... (" + std::to_string(text.size()) + " characters)";
}

// Throws FormatError naming the file when `path` does not exist or is not a regular file (a directory,
// FIFO, socket or device). Symbolic links are followed.
void requireRegularFile(const std::string& path);

}  // namespace strata
