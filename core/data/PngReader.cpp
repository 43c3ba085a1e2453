// PNG decoding on libpng 1.6 (libpng-dev): the reference decoder, replacing the hand-written one this file
// held before. libpng does the chunk parsing, CRCs, inflate, the five filters and Adam7; this file sets
// the transforms that give planar 0..255 floats and turns libpng's errors into FormatError.
#include "core/data/PngReader.h"

#include <cstring>
#include <fstream>
#include <iterator>

#include <png.h>

#include "core/io/FormatError.h"
#include "core/io/InputFile.h"
#include "core/io/InputLimits.h"

namespace strata::data {

namespace {

// What the read callback and the error handler share. libpng reports an error by calling the error
// function, which must not return: it longjmps back to decodePng, which throws with the message kept here.
struct ReadState {
    const std::vector<uint8_t>* bytes = nullptr;
    size_t pos = 0;
    std::string message;
    int64_t messageOffset = -1;  // where the problem is, when the read callback knows it
};

[[noreturn]] void onError(png_structp png, png_const_charp message) {
    auto* st = static_cast<ReadState*>(png_get_error_ptr(png));
    if (st->message.empty()) st->message = message ? message : "libpng error";
    png_longjmp(png, 1);
}

void onWarning(png_structp, png_const_charp) {}  // ancillary-chunk trouble: libpng skips the chunk and goes on

void readBytes(png_structp png, png_bytep out, png_size_t n) {
    auto* st = static_cast<ReadState*>(png_get_io_ptr(png));
    const size_t have = st->bytes->size() - st->pos;
    if (n > have) {
        st->message = "truncated: the file ends at byte " + std::to_string(st->bytes->size()) + " but " +
                      std::to_string(n) + " more bytes were needed at byte " + std::to_string(st->pos);
        st->messageOffset = static_cast<int64_t>(st->bytes->size());
        png_error(png, st->message.c_str());
    }
    std::memcpy(out, st->bytes->data() + st->pos, n);
    st->pos += n;
}

// Destroys the libpng structures however decodePng leaves (return, throw after longjmp).
struct PngHandles {
    png_structp png = nullptr;
    png_infop info = nullptr;
    ~PngHandles() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};

struct Header {
    png_uint_32 width = 0, height = 0;
    int depth = 0, colorType = 0, interlace = 0;
    int channels = 0, outDepth = 0;  // after the transforms
    size_t rowBytes = 0;
};

// The libpng calls live in these two functions, each with its own setjmp and no C++ object of their own
// that a longjmp could skip the destructor of. False: st.message says why.
bool readHeader(PngHandles& h, ReadState& st, Header& hd) {
    if (setjmp(png_jmpbuf(h.png))) return false;
    png_set_read_fn(h.png, &st, readBytes);
    // Gigapixel headers are refused before any inflating: per axis here, in pixels by the caller.
    png_set_user_limits(h.png, 1u << 24, 1u << 24);
    png_set_chunk_malloc_max(h.png, 64u << 20);
    png_read_info(h.png, h.info);
    png_get_IHDR(h.png, h.info, &hd.width, &hd.height, &hd.depth, &hd.colorType, &hd.interlace, nullptr, nullptr);
    if (int64_t(hd.width) * int64_t(hd.height) > kPngMaxPixels) return true;  // the caller refuses it
    // Transforms: palette indices unpacked to one byte each (looked up by the caller, which refuses an
    // index past the PLTE: libpng would paint it black), gray below 8 bits scaled to 8 (1 -> 255), alpha
    // dropped, tRNS ignored. 16-bit samples stay 16-bit, for their fractions.
    if (hd.colorType == PNG_COLOR_TYPE_PALETTE) png_set_packing(h.png);
    if (hd.colorType == PNG_COLOR_TYPE_GRAY && hd.depth < 8) png_set_expand_gray_1_2_4_to_8(h.png);
    if (hd.colorType & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(h.png);
    if (hd.interlace != PNG_INTERLACE_NONE) png_set_interlace_handling(h.png);
    png_read_update_info(h.png, h.info);
    hd.channels = png_get_channels(h.png, h.info);
    hd.outDepth = png_get_bit_depth(h.png, h.info);
    hd.rowBytes = png_get_rowbytes(h.png, h.info);
    return true;
}

bool readRows(PngHandles& h, png_bytepp rows) {
    if (setjmp(png_jmpbuf(h.png))) return false;
    png_read_image(h.png, rows);
    png_read_end(h.png, nullptr);  // checks the remaining chunks' CRCs and that IEND is there
    return true;
}

}  // namespace

PngImage decodePng(const std::vector<uint8_t>& bytes, const std::string& name) {
    if (bytes.size() < 8 || png_sig_cmp(bytes.data(), 0, 8) != 0)
        throw FormatError(name, 0, "not a PNG file (the 8-byte signature is missing)");
    ReadState st;
    st.bytes = &bytes;
    PngHandles h;
    h.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &st, onError, onWarning);
    if (h.png) h.info = png_create_info_struct(h.png);
    if (!h.png || !h.info) throw FormatError(name, "libpng could not start (out of memory)");
    auto fail = [&]() -> FormatError {
        return FormatError(name, st.messageOffset >= 0 ? st.messageOffset : static_cast<int64_t>(st.pos), st.message);
    };

    Header hd;
    if (!readHeader(h, st, hd)) throw fail();
    if (int64_t(hd.width) * int64_t(hd.height) > kPngMaxPixels)
        throw FormatError(name, 16,
                          std::to_string(hd.width) + "x" + std::to_string(hd.height) +
                              " pixels is too large (at most " + std::to_string(kPngMaxPixels) + ")");
    const bool palette = hd.colorType == PNG_COLOR_TYPE_PALETTE;
    if ((hd.channels != 1 && hd.channels != 3) || (hd.outDepth != 8 && hd.outDepth != 16) ||
        hd.rowBytes != size_t(hd.width) * size_t(hd.channels) * size_t(hd.outDepth / 8))
        throw FormatError(name, "unexpected layout after libpng's transforms (" + std::to_string(hd.channels) +
                                    " channels, " + std::to_string(hd.outDepth) + " bits)");
    std::vector<uint8_t> pixels(hd.rowBytes * hd.height);
    std::vector<png_bytep> rows(hd.height);
    for (png_uint_32 y = 0; y < hd.height; ++y) rows[y] = pixels.data() + size_t(y) * hd.rowBytes;
    if (!readRows(h, rows.data())) throw fail();

    PngImage img;
    img.width = hd.width;
    img.height = hd.height;
    img.bitDepth = hd.depth;
    img.colorType = hd.colorType;
    img.interlaced = hd.interlace != PNG_INTERLACE_NONE;
    const size_t plane = size_t(hd.width) * size_t(hd.height);
    if (palette) {
        png_colorp colors = nullptr;
        int entries = 0;
        png_get_PLTE(h.png, h.info, &colors, &entries);
        img.channels = 3;
        img.values.resize(3 * plane);
        for (size_t p = 0; p < plane; ++p) {
            const int k = pixels[p];
            if (k >= entries)
                throw FormatError(name, "palette index " + std::to_string(k) + " at pixel (" +
                                            std::to_string(p % hd.width) + ", " + std::to_string(p / hd.width) +
                                            ") but PLTE has " + std::to_string(entries) + " entries");
            img.values[p] = colors[k].red;
            img.values[plane + p] = colors[k].green;
            img.values[2 * plane + p] = colors[k].blue;
        }
        return img;
    }
    img.channels = hd.channels;
    const size_t channels = size_t(hd.channels);
    img.values.resize(plane * channels);
    const float scale16 = 255.f / 65535.f;
    for (size_t p = 0; p < plane; ++p)
        for (size_t c = 0; c < channels; ++c) {
            const size_t i = p * channels + c;
            img.values[c * plane + p] =
                hd.outDepth == 8 ? float(pixels[i])
                                 : static_cast<float>(unsigned(pixels[2 * i]) << 8 | pixels[2 * i + 1]) * scale16;
        }
    return img;
}

PngImage readPng(const std::string& path) {
    return decodePng(readFileBytes(path, kMaxImageFileBytes, "an image file"), path);
}

}  // namespace strata::data
