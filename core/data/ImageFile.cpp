#include "core/data/ImageFile.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>

#include <turbojpeg.h>

#include "core/data/PngReader.h"
#include "core/io/FormatError.h"
#include "core/io/InputFile.h"
#include "core/io/InputLimits.h"

namespace strata::data {

namespace {

std::string lowerExtension(const std::string& path) {
    std::string ext = std::filesystem::path(path).extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return ext;
}

// One output pixel of a resized axis: a weighted sum of source pixels.
struct Tap {
    int64_t first = 0;
    std::vector<float> weights;  // for source pixels first, first + 1, ...
};

// The weights along one axis. Shrinking: each output pixel averages the source interval it covers (partial
// pixels by their overlap), so no source pixel is skipped. Enlarging: bilinear between pixel centres
// (half-pixel convention: output centre o + 0.5 sits at source position (o + 0.5) * in / out).
std::vector<Tap> axisTaps(int64_t in, int64_t out) {
    std::vector<Tap> taps(static_cast<size_t>(out));
    const double scale = double(in) / double(out);
    for (int64_t o = 0; o < out; ++o) {
        Tap& t = taps[static_cast<size_t>(o)];
        if (in == out) {
            t.first = o;
            t.weights = {1.f};
        } else if (in > out) {
            const double begin = double(o) * scale, end = double(o + 1) * scale;
            t.first = static_cast<int64_t>(std::floor(begin));
            const int64_t last = std::min<int64_t>(in - 1, static_cast<int64_t>(std::ceil(end)) - 1);
            for (int64_t i = t.first; i <= last; ++i) {
                const double overlap = std::min(end, double(i + 1)) - std::max(begin, double(i));
                t.weights.push_back(static_cast<float>(overlap / scale));
            }
        } else {
            const double pos = std::clamp((double(o) + 0.5) * scale - 0.5, 0.0, double(in - 1));
            t.first = std::min<int64_t>(static_cast<int64_t>(std::floor(pos)), in - 1);
            const double frac = pos - double(t.first);
            t.weights = {static_cast<float>(1.0 - frac)};
            if (t.first + 1 < in) t.weights.push_back(static_cast<float>(frac));
        }
    }
    return taps;
}

}  // namespace

std::vector<float> resizePlanar(const std::vector<float>& values, int64_t channels, int64_t inH, int64_t inW,
                                int64_t outH, int64_t outW) {
    if (channels < 1 || inH < 1 || inW < 1 || outH < 1 || outW < 1 ||
        static_cast<int64_t>(values.size()) != channels * inH * inW)
        throw std::invalid_argument("resizePlanar: sizes do not match the values");
    const std::vector<Tap> rows = axisTaps(inH, outH), cols = axisTaps(inW, outW);
    // Columns first (channels x inH x outW), then rows.
    std::vector<float> mid(static_cast<size_t>(channels * inH * outW));
    for (int64_t c = 0; c < channels; ++c)
        for (int64_t y = 0; y < inH; ++y) {
            const float* src = values.data() + (c * inH + y) * inW;
            float* dst = mid.data() + (c * inH + y) * outW;
            for (int64_t x = 0; x < outW; ++x) {
                const Tap& t = cols[static_cast<size_t>(x)];
                double s = 0;
                for (size_t k = 0; k < t.weights.size(); ++k) s += double(t.weights[k]) * src[t.first + int64_t(k)];
                dst[x] = static_cast<float>(s);
            }
        }
    std::vector<float> out(static_cast<size_t>(channels * outH * outW));
    for (int64_t c = 0; c < channels; ++c)
        for (int64_t y = 0; y < outH; ++y) {
            const Tap& t = rows[static_cast<size_t>(y)];
            float* dst = out.data() + (c * outH + y) * outW;
            for (int64_t x = 0; x < outW; ++x) {
                double s = 0;
                for (size_t k = 0; k < t.weights.size(); ++k)
                    s += double(t.weights[k]) * mid[static_cast<size_t>((c * inH + t.first + int64_t(k)) * outW + x)];
                dst[x] = static_cast<float>(s);
            }
        }
    return out;
}

FittedImage fitImageToInput(const Image& image, const Shape& inputShape, ResizePolicy policy) {
    const std::vector<int64_t>& dims = inputShape.dims();
    int64_t wantC = 1, wantH = 0, wantW = 0;
    if (dims.size() == 3 && (dims[0] == 1 || dims[0] == 3)) {
        wantC = dims[0];
        wantH = dims[1];
        wantW = dims[2];
    } else if (dims.size() == 2) {
        wantH = dims[0];
        wantW = dims[1];
    }
    if (wantH < 1 || wantW < 1)
        throw std::invalid_argument("the model's input " + inputShape.toString() +
                                    " is not an image ([C, H, W] with C = 1 or 3, or [H, W])");
    if (image.channels < 1 || image.height < 1 || image.width < 1 ||
        static_cast<int64_t>(image.values.size()) != image.channels * image.height * image.width)
        throw std::invalid_argument("the image is empty");
    if (image.channels != 1 && image.channels != 3)
        throw std::invalid_argument("the image has " + std::to_string(image.channels) +
                                    " channels; 1 (gray) or 3 (RGB) can be fitted");

    FittedImage fit;
    const size_t plane = static_cast<size_t>(image.height * image.width);
    std::vector<float> planes;
    if (image.channels == 3 && wantC == 1) {
        planes.resize(plane);
        for (size_t i = 0; i < plane; ++i)
            planes[i] =
                0.299f * image.values[i] + 0.587f * image.values[plane + i] + 0.114f * image.values[2 * plane + i];
        fit.notes.push_back(
            "converted the RGB image to gray (luma 0.299 R + 0.587 G + 0.114 B): the model takes "
            "1 channel");
    } else if (image.channels == 1 && wantC == 3) {
        planes.reserve(3 * plane);
        for (int c = 0; c < 3; ++c) planes.insert(planes.end(), image.values.begin(), image.values.end());
        fit.notes.push_back("repeated the gray image in 3 channels: the model takes RGB");
    } else {
        planes = image.values;
    }
    if (image.height != wantH || image.width != wantW) {
        fit.values = resizeImage(planes, wantC, image.height, image.width, wantH, wantW, policy);
        const CropBox box = centerCropBox(image.height, image.width, wantH, wantW);
        const bool cropped =
            policy == ResizePolicy::CenterCrop && (box.height != image.height || box.width != image.width);
        const std::string decoded = image.fileWidth > 0
                                        ? std::to_string(image.fileWidth) + "x" + std::to_string(image.fileHeight) +
                                              " (decoded at " + std::to_string(image.width) + "x" +
                                              std::to_string(image.height) + ")"
                                        : std::to_string(image.width) + "x" + std::to_string(image.height);
        fit.notes.push_back("resized the image from " + decoded + " to " + std::to_string(wantW) + "x" +
                            std::to_string(wantH) +
                            (cropped ? " (width x height, the centre " + std::to_string(box.width) + "x" +
                                           std::to_string(box.height) + " kept)"
                             : policy == ResizePolicy::Stretch ? " (width x height, aspect ratio not kept)"
                                                               : " (width x height)") +
                            ": the model's input is " + inputShape.toString());
    } else {
        fit.values = std::move(planes);
        if (image.fileWidth > 0)
            fit.notes.push_back("the JPEG decoder shrank the image from " + std::to_string(image.fileWidth) + "x" +
                                std::to_string(image.fileHeight) + " to " + std::to_string(wantW) + "x" +
                                std::to_string(wantH) + ": the model's input is " + inputShape.toString());
    }
    return fit;
}

CropBox centerCropBox(int64_t inH, int64_t inW, int64_t outH, int64_t outW) {
    CropBox box{0, 0, inH, inW};
    // Compare aspect ratios exactly in integers: inW / inH against outW / outH.
    if (inW * outH > outW * inH) {  // wider than the output: cut left and right
        box.width = std::clamp<int64_t>((inH * outW + outH / 2) / outH, 1, inW);
        box.left = (inW - box.width) / 2;
    } else if (inW * outH < outW * inH) {  // taller: cut top and bottom
        box.height = std::clamp<int64_t>((inW * outH + outW / 2) / outW, 1, inH);
        box.top = (inH - box.height) / 2;
    }
    return box;
}

std::vector<float> resizeImage(const std::vector<float>& values, int64_t channels, int64_t inH, int64_t inW,
                               int64_t outH, int64_t outW, ResizePolicy policy) {
    if (policy == ResizePolicy::Stretch || channels < 1 ||
        static_cast<int64_t>(values.size()) != channels * inH * inW || outH < 1 || outW < 1)
        return resizePlanar(values, channels, inH, inW, outH, outW);  // (which also checks the sizes)
    const CropBox box = centerCropBox(inH, inW, outH, outW);
    if (box.height == inH && box.width == inW) return resizePlanar(values, channels, inH, inW, outH, outW);
    std::vector<float> crop(static_cast<size_t>(channels * box.height * box.width));
    for (int64_t c = 0; c < channels; ++c)
        for (int64_t y = 0; y < box.height; ++y)
            std::copy_n(values.begin() + (c * inH + box.top + y) * inW + box.left, box.width,
                        crop.begin() + (c * box.height + y) * box.width);
    if (box.height == outH && box.width == outW) return crop;
    return resizePlanar(crop, channels, box.height, box.width, outH, outW);
}

bool isImageFileName(const std::string& path) {
    const std::string ext = lowerExtension(path);
    return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".bmp" || ext == ".pgm" || ext == ".ppm" ||
           ext == ".pnm";
}

namespace {

enum class Content { Png, Jpeg, Bmp, Netpbm, Unknown };

Content sniff(const std::vector<uint8_t>& b) {
    if (b.size() >= 8 && b[0] == 0x89 && b[1] == 'P' && b[2] == 'N' && b[3] == 'G') return Content::Png;
    if (b.size() >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff) return Content::Jpeg;
    if (b.size() >= 2 && b[0] == 'B' && b[1] == 'M') return Content::Bmp;
    if (b.size() >= 2 && b[0] == 'P' && (b[1] == '2' || b[1] == '3' || b[1] == '5' || b[1] == '6'))
        return Content::Netpbm;
    return Content::Unknown;
}

std::vector<uint8_t> readBytes(const std::string& path) {
    return readFileBytes(path, kMaxImageFileBytes, "an image file");
}

// One TurboJPEG decompressor per thread, kept: creating one costs more than decoding a 28x28 JPEG. After
// an error it is dropped: libjpeg-turbo 2.1 can leave a handle that failed mid-header in a state where
// the next, valid, file fails too ("Bogus DQT index").
struct TjDeleter {
    void operator()(void* h) const { tjDestroy(h); }
};
thread_local std::unique_ptr<void, TjDeleter> t_decompressor;
tjhandle threadDecompressor(const std::string& name) {
    if (!t_decompressor) t_decompressor.reset(tjInitDecompress());
    if (!t_decompressor)
        throw FormatError(name, std::string("libjpeg-turbo could not start: ") + tjGetErrorStr2(nullptr));
    return t_decompressor.get();
}
[[noreturn]] void jpegFailed(tjhandle tj, const std::string& name, const char* where) {
    std::string message = std::string(where) + tjGetErrorStr2(tj);
    t_decompressor.reset();
    throw FormatError(name, message);
}

constexpr int64_t kMaxSide = 4096;  // as a square, for the messages
static_assert(kMaxSide * kMaxSide == kPngMaxPixels);

// "WxH pixels" and the limit, for the errors of every decoder's size check.
std::string tooManyPixels(const char* format, int64_t width, int64_t height) {
    return std::string(format) + " header claims " + std::to_string(width) + "x" + std::to_string(height) +
           " pixels, more than the " + std::to_string(kPngMaxPixels) + " (" + std::to_string(kMaxSide) + " x " +
           std::to_string(kMaxSide) + ") an image may have";
}

uint32_t littleEndian(const std::vector<uint8_t>& b, size_t at, int bytes) {
    uint32_t v = 0;
    for (int k = bytes - 1; k >= 0; --k) v = (v << 8) | b[at + size_t(k)];
    return v;
}

// The full-size dimensions an image needs before the resize `hint` asks for (0: none asked).
void neededSize(int64_t h, int64_t w, const DecodeHint& hint, int64_t& needH, int64_t& needW) {
    needH = h;
    needW = w;
    if (hint.height < 1 || hint.width < 1) return;
    if (hint.policy == ResizePolicy::Stretch) {
        needH = std::min(h, hint.height);
        needW = std::min(w, hint.width);
    } else {
        const CropBox box = centerCropBox(h, w, hint.height, hint.width);
        // The crop is resized to the hint; the whole image shrinks by the same factors.
        needH = std::min(h, (h * hint.height + box.height - 1) / box.height);
        needW = std::min(w, (w * hint.width + box.width - 1) / box.width);
    }
}

Image decodeJpeg(const std::vector<uint8_t>& bytes, const std::string& name, const DecodeHint& hint) {
    tjhandle tj = threadDecompressor(name);
    int width = 0, height = 0, subsamp = 0, colorspace = 0;
    if (tjDecompressHeader3(tj, bytes.data(), static_cast<unsigned long>(bytes.size()), &width, &height, &subsamp,
                            &colorspace) != 0)
        jpegFailed(tj, name, "JPEG header: ");
    // From the header, before anything the size of the image is allocated (here or in TurboJPEG).
    if (width < 1 || height < 1)
        throw FormatError(name, "JPEG header claims " + std::to_string(width) + "x" + std::to_string(height) +
                                    " pixels (zero width or height)");
    if (int64_t(width) * int64_t(height) > kPngMaxPixels) throw FormatError(name, tooManyPixels("JPEG", width, height));
    // The smallest DCT scaling that still covers what the resize needs (1/8, 1/4, 3/8, 1/2, ... 1).
    int64_t needH = 0, needW = 0;
    neededSize(height, width, hint, needH, needW);
    int numFactors = 0;
    const tjscalingfactor* factors = tjGetScalingFactors(&numFactors);
    int outW = width, outH = height;
    for (int i = 0; factors && i < numFactors; ++i) {
        const tjscalingfactor f = factors[i];
        if (f.num > f.denom) continue;  // never enlarge
        const int w = TJSCALED(width, f), h = TJSCALED(height, f);
        if (w >= needW && h >= needH && int64_t(w) * h < int64_t(outW) * outH) {
            outW = w;
            outH = h;
        }
    }
    const bool gray = colorspace == TJCS_GRAY;
    const int channels = gray ? 1 : 3;
    std::vector<uint8_t> pixels(size_t(outW) * size_t(outH) * size_t(channels));
    // STOPONWARNING: a truncated file (libjpeg's "premature end of data" warning) is an error, not a
    // half-grey image.
    if (tjDecompress2(tj, bytes.data(), static_cast<unsigned long>(bytes.size()), pixels.data(), outW, 0, outH,
                      gray ? TJPF_GRAY : TJPF_RGB, TJFLAG_STOPONWARNING) != 0)
        jpegFailed(tj, name, "JPEG data: ");
    Image img;
    img.channels = channels;
    img.height = outH;
    img.width = outW;
    if (outH != height || outW != width) {
        img.fileHeight = height;
        img.fileWidth = width;
    }
    const size_t plane = size_t(outW) * size_t(outH);
    img.values.resize(plane * size_t(channels));
    for (size_t p = 0; p < plane; ++p)
        for (size_t c = 0; c < size_t(channels); ++c) img.values[c * plane + p] = pixels[p * size_t(channels) + c];
    return img;
}

// The BMP's own header, read before tjLoadImage: it allocates the whole image from the header's width and height
// before reading a pixel, so a 54-byte file claiming 60000x60000 would ask for 10.8 GB. Refuses a header too
// short, a size of zero or past kPngMaxPixels, and (uncompressed) pixel rows the file is too short to hold.
void checkBmpHeader(const std::vector<uint8_t>& b, const std::string& path) {
    constexpr size_t kFileHeader = 14;
    if (b.size() < kFileHeader + 4)
        throw FormatError(path, int64_t(b.size()), "BMP header is truncated (" + std::to_string(b.size()) + " bytes)");
    const uint32_t infoSize = littleEndian(b, kFileHeader, 4);
    const bool core = infoSize == 12;  // OS/2 BITMAPCOREHEADER: 16-bit sizes
    if (!core && infoSize < 40)
        throw FormatError(path, int64_t(kFileHeader),
                          "BMP info header of " + std::to_string(infoSize) + " bytes (12 or at least 40 expected)");
    if (b.size() < kFileHeader + (core ? 12 : 40))
        throw FormatError(path, int64_t(b.size()), "BMP header is truncated (" + std::to_string(b.size()) + " bytes)");
    int64_t width = 0, height = 0, bits = 0, compression = 0;
    if (core) {
        width = littleEndian(b, 18, 2);
        height = littleEndian(b, 20, 2);
        bits = littleEndian(b, 24, 2);
    } else {
        width = static_cast<int32_t>(littleEndian(b, 18, 4));
        height = static_cast<int32_t>(littleEndian(b, 22, 4));  // negative: rows stored top-down
        bits = littleEndian(b, 28, 2);
        compression = littleEndian(b, 30, 4);
    }
    height = height < 0 ? -height : height;
    if (width < 1 || height < 1)
        throw FormatError(path, 18,
                          "BMP header claims " + std::to_string(width) + "x" + std::to_string(height) +
                              " pixels (zero or negative width or height)");
    if (width * height > kPngMaxPixels) throw FormatError(path, 18, tooManyPixels("BMP", width, height));
    // Uncompressed rows (BI_RGB, BI_BITFIELDS) are padded to 4 bytes; the pixels follow both headers.
    if (compression == 0 || compression == 3) {
        const int64_t rowBytes = (bits * width + 31) / 32 * 4;
        const int64_t have = int64_t(b.size()) - int64_t(kFileHeader) - int64_t(infoSize);
        if (rowBytes * height > have)
            throw FormatError(path, int64_t(b.size()),
                              "BMP header claims " + std::to_string(width) + "x" + std::to_string(height) +
                                  " pixels of " + std::to_string(bits) + " bits, " + std::to_string(rowBytes * height) +
                                  " bytes of pixel data; the file holds " + std::to_string(std::max<int64_t>(have, 0)) +
                                  " (truncated?)");
    }
}

Image decodeBmp(const std::vector<uint8_t>& bytes, const std::string& path) {
    checkBmpHeader(bytes, path);
    int width = 0, height = 0, format = TJPF_RGB;
    // tjLoadImage reads the file itself (libjpeg-turbo's rdbmp: 8-bit palette, 24- and 32-bit BMP).
    std::unique_ptr<unsigned char, void (*)(unsigned char*)> buf(
        tjLoadImage(path.c_str(), &width, 1, &height, &format, 0), [](unsigned char* p) { tjFree(p); });
    if (!buf) throw FormatError(path, std::string("BMP: ") + tjGetErrorStr2(nullptr));
    if (width < 1 || height < 1 || int64_t(width) * int64_t(height) > kPngMaxPixels)
        throw FormatError(path,
                          "BMP of " + std::to_string(width) + "x" + std::to_string(height) + " pixels is out of range");
    Image img;
    img.channels = 3;
    img.height = height;
    img.width = width;
    const size_t plane = size_t(width) * size_t(height);
    img.values.resize(3 * plane);
    for (size_t p = 0; p < plane; ++p)
        for (size_t c = 0; c < 3; ++c) img.values[c * plane + p] = buf.get()[p * 3 + c];
    return img;
}

}  // namespace

Image readImageFile(const std::string& path) { return readImageFile(path, DecodeHint{}); }

Image readImageFile(const std::string& path, const DecodeHint& hint) {
    if (!isImageFileName(path)) throw FormatError(path, "not an image file Strata decodes (PNG, JPEG, BMP, PGM, PPM)");
    const std::vector<uint8_t> bytes = readBytes(path);
    if (bytes.empty()) throw FormatError(path, 0, "the file is empty (0 bytes)");
    switch (sniff(bytes)) {
        case Content::Png: {
            PngImage png = decodePng(bytes, path);
            Image img;
            img.channels = png.channels;
            img.height = png.height;
            img.width = png.width;
            img.values = std::move(png.values);
            return img;
        }
        case Content::Jpeg: return decodeJpeg(bytes, path, hint);
        case Content::Bmp: return decodeBmp(bytes, path);
        case Content::Netpbm: return readNetpbm(path);
        case Content::Unknown: break;
    }
    throw FormatError(path, 0, "not an image: the content is neither PNG, JPEG, BMP nor PGM/PPM");
}

Image readNetpbm(const std::string& path) {
    const std::vector<uint8_t> b = readFileBytes(path, kMaxImageFileBytes, "an image file");
    size_t pos = 0;
    auto skipSpace = [&] {
        while (pos < b.size()) {
            if (b[pos] == '#') {
                while (pos < b.size() && b[pos] != '\n') ++pos;
            } else if (std::isspace(b[pos])) {
                ++pos;
            } else {
                break;
            }
        }
    };
    auto number = [&](const char* what) -> int64_t {
        skipSpace();
        const size_t at = pos;
        int64_t v = 0;
        while (pos < b.size() && std::isdigit(b[pos])) {
            v = v * 10 + (b[pos++] - '0');
            if (v > (1 << 24)) throw FormatError(path, static_cast<int64_t>(at), std::string(what) + " is too large");
        }
        if (pos == at) throw FormatError(path, static_cast<int64_t>(at), std::string("expected ") + what);
        return v;
    };
    if (b.size() < 2 || b[0] != 'P' || (b[1] != '2' && b[1] != '3' && b[1] != '5' && b[1] != '6'))
        throw FormatError(path, 0, "not a PGM or PPM image (magic P2, P3, P5 or P6)");
    const bool ascii = b[1] == '2' || b[1] == '3';
    const int64_t channels = (b[1] == '3' || b[1] == '6') ? 3 : 1;
    pos = 2;
    const int64_t w = number("the width"), h = number("the height"), maxval = number("the maximum value");
    if (w < 1 || h < 1) throw FormatError(path, static_cast<int64_t>(pos), "zero width or height");
    if (maxval < 1 || maxval > 65535)
        throw FormatError(path, static_cast<int64_t>(pos), "maximum value out of 1..65535");
    if (w * h > kPngMaxPixels)
        throw FormatError(path, static_cast<int64_t>(pos), tooManyPixels(channels == 1 ? "PGM" : "PPM", w, h));
    const size_t n = static_cast<size_t>(w * h * channels);
    // The pixels must fit in what is left of the file before their buffer is allocated: an ASCII sample takes
    // at least a digit and a separator, a binary one 1 or 2 bytes.
    const size_t left = pos < b.size() ? b.size() - pos : 0;
    if (ascii && n > (left + 1) / 2)
        throw FormatError(path, static_cast<int64_t>(pos),
                          "ASCII pixel data of " + std::to_string(left) + " bytes cannot hold the " +
                              std::to_string(n) + " samples of " + std::to_string(w) + "x" + std::to_string(h) +
                              " pixels (truncated?)");
    std::vector<float> interleaved;
    if (ascii) {
        interleaved.resize(n);
        for (size_t i = 0; i < n; ++i) interleaved[i] = static_cast<float>(number("a sample value"));
    } else {
        if (pos >= b.size() || !std::isspace(b[pos]))
            throw FormatError(path, static_cast<int64_t>(pos), "expected one whitespace byte before the pixels");
        ++pos;
        const size_t bytesPer = maxval > 255 ? 2 : 1;
        if (b.size() - pos < n * bytesPer)
            throw FormatError(path, static_cast<int64_t>(pos),
                              "pixel data is " + std::to_string(b.size() - pos) + " bytes, " + std::to_string(w) + "x" +
                                  std::to_string(h) + " needs " + std::to_string(n * bytesPer));
        interleaved.resize(n);
        for (size_t i = 0; i < n; ++i)
            interleaved[i] =
                bytesPer == 1 ? b[pos + i] : static_cast<float>((b[pos + 2 * i] << 8) | b[pos + 2 * i + 1]);
    }
    for (float v : interleaved)
        if (v > static_cast<float>(maxval)) throw FormatError(path, "a sample exceeds the maximum value");
    Image img;
    img.channels = channels;
    img.height = h;
    img.width = w;
    img.values.resize(n);
    const float toByte = maxval == 255 ? 1.f : 255.f / static_cast<float>(maxval);
    // Interleaved RGB to planar CHW.
    for (int64_t c = 0; c < channels; ++c)
        for (int64_t i = 0; i < w * h; ++i)
            img.values[static_cast<size_t>(c * w * h + i)] =
                interleaved[static_cast<size_t>(i * channels + c)] * toByte;
    return img;
}

}  // namespace strata::data
