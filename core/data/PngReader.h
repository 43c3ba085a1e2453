// PngReader: PNG decoding on libpng (core/ has no Qt, so no QImage). The whole PNG
// format: every bit depth (1, 2, 4, 8, 16), colour types gray (0), RGB (2), palette
// (3), gray+alpha (4) and RGBA (6), the five row filters, and Adam7 interlacing.
// Alpha and tRNS are dropped; ancillary chunks (gAMA, text...) are ignored.
//
// The result is planar [C, H, W] with C = 1 for gray types and 3 for RGB and palette
// images, values 0..255 as floats like readNetpbm: 16-bit samples are scaled by
// 255/65535, gray samples of 1, 2 or 4 bits by 255/(2^depth - 1), palette entries
// are the palette's 8-bit colours.
//
// Every problem (wrong signature, truncated file, bad CRC, unknown critical chunk,
// invalid header, bad filter byte, image data of the wrong size, an image too large)
// throws FormatError naming the file, libpng's message and the byte offset where
// reading stopped (the end of the chunk at fault, or of the file when truncated).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata::data {

struct PngImage {
    int64_t channels = 0, height = 0, width = 0;
    std::vector<float> values;  // channels * height * width, planar, 0..255
    int bitDepth = 0;           // as stored in the file
    int colorType = 0;          // as stored: 0 gray, 2 RGB, 3 palette, 4 gray+alpha, 6 RGBA
    bool interlaced = false;
};

// Images up to this many pixels decode; larger ones are refused before inflating (a 20-byte header can
// claim gigapixels).
constexpr int64_t kPngMaxPixels = int64_t{1} << 24;  // 4096 x 4096

PngImage readPng(const std::string& path);
// Decodes PNG bytes; `name` is the file name used in errors.
PngImage decodePng(const std::vector<uint8_t>& bytes, const std::string& name);

}  // namespace strata::data
