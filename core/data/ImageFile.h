// ImageFile: image files as model inputs, the one path that `strata-train predict`, the workbench's
// Predict dock and image-folder datasets share. Decoding, chosen by the file's content (its extension
// only says whether to try): PNG (PngReader, libpng), JPEG (libjpeg-turbo's TurboJPEG, with its scaled
// decode when a DecodeHint says the image will be shrunk), BMP (TurboJPEG's tjLoadImage) and binary or
// ASCII PGM/PPM (readNetpbm). Fitting to the
// Input node's shape ([C, H, W] with C = 1 or 3, or [H, W]): RGB becomes gray by its luma (ITU-R BT.601:
// 0.299 R + 0.587 G + 0.114 B) for a one-channel model, gray is repeated for a three-channel one, and an
// image of another width or height is resized (ResizePolicy). Every change is reported as a note, so the
// caller can say what the model was actually given.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/graph/Settings.h"
#include "core/tensor/Shape.h"

namespace strata::data {

// Planar [channels, height, width], values 0..255 as floats (16-bit files keep their fractions).
struct Image {
    int64_t channels = 0, height = 0, width = 0;
    std::vector<float> values;
    // The file's own size when the decoder shrank it (JPEG's scaled decoding); 0: height and width are it.
    int64_t fileHeight = 0, fileWidth = 0;
};

// Binary PGM (P5) or PPM (P6), or their ASCII forms (P2, P3); 8 or 16 bits. Values are scaled to 0..255
// when maxval != 255. Throws FormatError naming the file and offset.
Image readNetpbm(const std::string& path);

// True for the extensions readImageFile decodes: .png, .jpg, .jpeg, .bmp, .pgm, .ppm, .pnm (any case).
bool isImageFileName(const std::string& path);

// How an image of another size becomes the model's height and width.
//   Stretch: each axis scaled on its own (aspect ratio not kept): area averaging when shrinking
//            (every source pixel counts, by its overlap), bilinear interpolation between pixel centres
//            when enlarging.
//   CenterCrop: the centred region with the model's aspect ratio (the whole shorter side), then resized
//            as Stretch does: the shorter side fits, the longer one is cut evenly at both ends.
enum class ResizePolicy { Stretch, CenterCrop };
// The project's dataset.image_resize as a policy (the same for training, validation, predict and the dock).
inline ResizePolicy resizePolicyFor(const DatasetSettings& s) {
    return s.imageResize == ImageResize::CenterCrop ? ResizePolicy::CenterCrop : ResizePolicy::Stretch;
}

// What the caller will do with the image: lets the JPEG decoder shrink by 1/2, 1/4 or 1/8 while decoding
// (libjpeg-turbo's DCT scaling, much cheaper than decoding whole) when the result is still at least as
// large as the resize needs. 0 x 0: decode at full size.
struct DecodeHint {
    int64_t height = 0, width = 0;
    ResizePolicy policy = ResizePolicy::Stretch;
};

// Decodes a file whose extension isImageFileName accepts, by its content (a JPEG named .png decodes).
// Throws FormatError naming the file: unknown extension, empty file, content that is no supported image,
// or the decoder's own error (truncated, corrupt). The signature is what `predict` and the fuzz targets
// call; keep it.
Image readImageFile(const std::string& path);
Image readImageFile(const std::string& path, const DecodeHint& hint);

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
// The region CenterCrop keeps of an inH x inW image for an outH x outW output: (top, left, height, width).
struct CropBox {
    int64_t top = 0, left = 0, height = 0, width = 0;
};
CropBox centerCropBox(int64_t inH, int64_t inW, int64_t outH, int64_t outW);
// Resized by `policy`: Stretch is resizePlanar; CenterCrop cuts centerCropBox first.
std::vector<float> resizeImage(const std::vector<float>& values, int64_t channels, int64_t inH, int64_t inW,
                               int64_t outH, int64_t outW, ResizePolicy policy);

}  // namespace strata::data
