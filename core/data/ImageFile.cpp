#include "core/data/ImageFile.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "core/data/PngReader.h"
#include "core/io/FormatError.h"

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

FittedImage fitImageToInput(const Image& image, const Shape& inputShape, ResizePolicy /*policy*/) {
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
        fit.values = resizePlanar(planes, wantC, image.height, image.width, wantH, wantW);
        fit.notes.push_back("resized the image from " + std::to_string(image.width) + "x" +
                            std::to_string(image.height) + " to " + std::to_string(wantW) + "x" +
                            std::to_string(wantH) + " (width x height, aspect ratio not kept): the model's input is " +
                            inputShape.toString());
    } else {
        fit.values = std::move(planes);
    }
    return fit;
}

bool isImageFileName(const std::string& path) {
    const std::string ext = lowerExtension(path);
    return ext == ".png" || ext == ".pgm" || ext == ".ppm" || ext == ".pnm";
}

Image readImageFile(const std::string& path) {
    const std::string ext = lowerExtension(path);
    if (ext == ".png") {
        PngImage png = readPng(path);
        Image img;
        img.channels = png.channels;
        img.height = png.height;
        img.width = png.width;
        img.values = std::move(png.values);
        return img;
    }
    if (ext == ".pgm" || ext == ".ppm" || ext == ".pnm") return readNetpbm(path);
    throw FormatError(path, "not an image file Strata decodes (PNG, PGM, PPM)");
}

Image readNetpbm(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw FormatError(path, "cannot open file for reading");
    const std::vector<uint8_t> b((std::istreambuf_iterator<char>(f)), {});
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
        throw FormatError(path, static_cast<int64_t>(pos),
                          std::to_string(w) + "x" + std::to_string(h) + " pixels is more than the " +
                              std::to_string(kPngMaxPixels) + " an image may have");
    const size_t n = static_cast<size_t>(w * h * channels);
    std::vector<float> interleaved(n);
    if (ascii) {
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
