// ImageFile: image files as model inputs, the one path that `strata-train predict` and the workbench's
// Predict dock share. Decoding: PNG (PngReader) and binary or ASCII PGM/PPM (readNetpbm). Fitting to the
// Input node's shape ([C, H, W] with C = 1 or 3, or [H, W]): RGB becomes gray by its luma (ITU-R BT.601:
// 0.299 R + 0.587 G + 0.114 B) for a one-channel model, gray is repeated for a three-channel one, and an
// image of another width or height is resized (ResizePolicy). Every change is reported as a note, so the
// caller can say what the model was actually given.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor/Shape.h"

namespace strata::data {

// Planar [channels, height, width], values 0..255 as floats (16-bit files keep their fractions).
struct Image {
    int64_t channels = 0, height = 0, width = 0;
    std::vector<float> values;
};

// Binary PGM (P5) or PPM (P6), or their ASCII forms (P2, P3); 8 or 16 bits. Values are scaled to 0..255
// when maxval != 255. Throws FormatError naming the file and offset.
Image readNetpbm(const std::string& path);

// True for the extensions readImageFile decodes: .png, .pgm, .ppm, .pnm (any case).
bool isImageFileName(const std::string& path);
// Decodes by extension (see isImageFileName); throws FormatError naming the file otherwise.
Image readImageFile(const std::string& path);

// How an image of another size becomes the model's height and width.
//   Stretch: each axis scaled on its own (aspect ratio not kept): area averaging when shrinking
//            (every source pixel counts, by its overlap), bilinear interpolation between pixel centres
//            when enlarging.
enum class ResizePolicy { Stretch };

struct FittedImage {
    std::vector<float> values;       // the model's input layout, 0..255
    std::vector<std::string> notes;  // what was changed, one sentence each; empty when nothing was
};

// Channels and size fitted to `inputShape`. Throws std::invalid_argument when the input shape is not an
// image ("... is not an image ...") or the channels cannot be converted.
FittedImage fitImageToInput(const Image& image, const Shape& inputShape, ResizePolicy policy = ResizePolicy::Stretch);

// The resize alone: planar `channels` x inH x inW -> channels x outH x outW (Stretch policy).
std::vector<float> resizePlanar(const std::vector<float>& values, int64_t channels, int64_t inH, int64_t inW,
                                int64_t outH, int64_t outW);

}  // namespace strata::data
