// Guards for values that come from files and command lines: checked size arithmetic (a product of
// dimensions that would wrap is an error, not a small number), a cap on what an error message echoes back,
// the upper bounds every reader holds a file to (one table, listed in README "Robustness"), and a check that
// a path names a regular file (a directory or a FIFO would otherwise read as empty, block, or end in
// std::bad_alloc). Readers open files through InputFile (InputFile.h), which applies both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace strata {

// ---- the limits ---------------------------------------------------------------------------------------
// Each is far above what a real file of its kind holds and far below what would exhaust memory or the stack;
// a file over one is refused before it is read, with its size and the limit.
inline constexpr int64_t kMiB = int64_t{1} << 20;
inline constexpr int64_t kGiB = int64_t{1} << 30;

// JSON, wherever it is read (project files, checkpoint and export metadata, sweep state, profiles, the run
// history, the clipboard): at most this deep (real projects nest under 10 levels; nlohmann's parser is
// iterative, but copying or destroying a value recurses once per level, and 100,000 levels overflow the
// stack) and this long.
inline constexpr int kMaxJsonDepth = 256;
inline constexpr int64_t kMaxJsonBytes = 128 * kMiB;
// A *.strata project file, a sweep state file, a profile written by `strata-train profile --json`.
inline constexpr int64_t kMaxProjectFileBytes = 64 * kMiB;
// A checkpoint, safetensors or GGUF file (read whole into memory).
inline constexpr int64_t kMaxModelFileBytes = 16 * kGiB;
// An ONNX file (protobuf cannot parse more than 2 GiB).
inline constexpr int64_t kMaxOnnxFileBytes = 2 * kGiB;
// An ONNX graph given to the importer (`strata-train import`, File > Import Model): at most this many nodes
// (resnet50 has about 180, a 24-layer transformer a few thousand with its shape arithmetic); the graph's depth
// is bounded by it too, and every pass over it is iterative.
inline constexpr int64_t kMaxOnnxImportNodes = 200'000;
// A data file: CSV table, CSV text, IDX (before decompression), a text file of inputs for `predict`.
inline constexpr int64_t kMaxDataFileBytes = 16 * kGiB;
// One image file (an image-folder entry, an image-list CSV entry, a PNG/PGM/PPM given to `predict`).
inline constexpr int64_t kMaxImageFileBytes = 1 * kGiB;
// A SentencePiece .model file (real ones are 0.2 to 20 MB).
inline constexpr int64_t kMaxTokenizerModelBytes = 256 * kMiB;
// A node's name in a graph (bytes of UTF-8), and the project's name.
inline constexpr size_t kMaxNodeNameBytes = 256;
inline constexpr size_t kMaxProjectNameBytes = 1024;
// A string setting (a path, a column name, a device list).
inline constexpr size_t kMaxSettingStringBytes = 4096;

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

// "" when `text` is valid UTF-8; otherwise where it is not ("byte 0xFF at offset 10"). JSON holds UTF-8 only,
// so a path or name that ends up in a JSON file is checked before any work is done with it.
// Inline for the same reason as cutForMessage.
inline std::string utf8Problem(const std::string& text) {
    auto at = [&](size_t i) {
        static const char* hex = "0123456789ABCDEF";
        const auto b = static_cast<unsigned char>(text[i]);
        return std::string("byte 0x") + hex[b >> 4] + hex[b & 15] + " at offset " + std::to_string(i);
    };
    for (size_t i = 0; i < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        size_t n = 0;
        uint32_t cp = 0;
        if (c < 0x80) {
            ++i;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) {
            n = 1;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 2;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 3;
            cp = c & 0x07;
        } else {
            return at(i);
        }
        for (size_t k = 1; k <= n; ++k) {
            if (i + k >= text.size()) return at(i);  // cut short at the end
            const auto d = static_cast<unsigned char>(text[i + k]);
            if ((d & 0xC0) != 0x80) return at(i + k);
            cp = cp << 6 | (d & 0x3F);
        }
        // Overlong forms, UTF-16 surrogates and code points past U+10FFFF are not UTF-8 either.
        if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
            return at(i);
        i += n + 1;
    }
    return {};
}

// Throws FormatError naming the file when `path` does not exist or is not a regular file (a directory,
// FIFO, socket or device). Symbolic links are followed. The check opens the file without blocking and looks
// at the descriptor; a reader that then opens the path again leaves a window for a swap, so readers use
// InputFile, which reads from the descriptor it checked.
void requireRegularFile(const std::string& path);

}  // namespace strata
