#include "core/data/PngReader.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include <zlib.h>

#include "core/io/FormatError.h"

namespace strata::data {

namespace {

constexpr uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

uint32_t be32(const uint8_t* p) {
    return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

std::string hex32(uint32_t v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%08x", v);
    return buf;
}

// A chunk type is four ASCII letters; anything else is printed escaped.
std::string chunkName(const uint8_t* p) {
    std::string s;
    for (int i = 0; i < 4; ++i) {
        if ((p[i] >= 'A' && p[i] <= 'Z') || (p[i] >= 'a' && p[i] <= 'z')) {
            s.push_back(static_cast<char>(p[i]));
        } else {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", p[i]);
            s += buf;
        }
    }
    return s;
}

bool isLetters(const uint8_t* p) {
    for (int i = 0; i < 4; ++i)
        if (!((p[i] >= 'A' && p[i] <= 'Z') || (p[i] >= 'a' && p[i] <= 'z'))) return false;
    return true;
}

int samplesPerPixel(int colorType) {
    switch (colorType) {
        case 0: return 1;
        case 2: return 3;
        case 3: return 1;
        case 4: return 2;
        case 6: return 4;
        default: return 0;
    }
}

bool depthAllowed(int colorType, int depth) {
    switch (colorType) {
        case 0: return depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16;
        case 3: return depth == 1 || depth == 2 || depth == 4 || depth == 8;
        case 2:
        case 4:
        case 6: return depth == 8 || depth == 16;
        default: return false;
    }
}

// A sub-image of the interlacing: pixels (x0 + i*dx, y0 + j*dy).
struct Pass {
    int64_t x0, y0, dx, dy;
};
constexpr Pass kWhole[1] = {{0, 0, 1, 1}};
constexpr Pass kAdam7[7] = {{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4},
                            {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}};

int64_t passWidth(const Pass& p, int64_t width) { return width > p.x0 ? (width - p.x0 + p.dx - 1) / p.dx : 0; }
int64_t passHeight(const Pass& p, int64_t height) { return height > p.y0 ? (height - p.y0 + p.dy - 1) / p.dy : 0; }

uint8_t paeth(int a, int b, int c) {
    const int p = a + b - c;
    const int pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
    if (pa <= pb && pa <= pc) return static_cast<uint8_t>(a);
    return static_cast<uint8_t>(pb <= pc ? b : c);
}

class Decoder {
public:
    Decoder(const std::vector<uint8_t>& bytes, const std::string& name) : m_b(bytes), m_name(name) {}

    PngImage decode() {
        readChunks();
        const std::vector<uint8_t> raw = inflateImageData();
        return reconstruct(raw);
    }

private:
    const std::vector<uint8_t>& m_b;
    const std::string& m_name;
    int64_t m_width = 0, m_height = 0;
    int m_depth = 0, m_colorType = 0, m_interlace = 0;
    std::vector<uint8_t> m_palette;  // RGB triples
    std::vector<uint8_t> m_idat;     // the IDAT chunks' data, concatenated
    int64_t m_idatOffset = -1;       // file offset of the first IDAT chunk

    [[noreturn]] void fail(int64_t offset, const std::string& problem) const {
        throw FormatError(m_name, offset, problem);
    }

    void readHeader(const uint8_t* d, uint32_t length, int64_t at) {
        if (length != 13) fail(at, "IHDR chunk is " + std::to_string(length) + " bytes, expected 13");
        m_width = be32(d);
        m_height = be32(d + 4);
        m_depth = d[8];
        m_colorType = d[9];
        if (m_width == 0 || m_height == 0 || m_width > 0x7fffffff || m_height > 0x7fffffff)
            fail(at, "invalid image size " + std::to_string(m_width) + "x" + std::to_string(m_height));
        if (samplesPerPixel(m_colorType) == 0) fail(at, "unknown colour type " + std::to_string(m_colorType));
        if (!depthAllowed(m_colorType, m_depth))
            fail(at, "bit depth " + std::to_string(m_depth) + " is not allowed for colour type " +
                         std::to_string(m_colorType));
        if (d[10] != 0) fail(at, "unknown compression method " + std::to_string(d[10]));
        if (d[11] != 0) fail(at, "unknown filter method " + std::to_string(d[11]));
        if (d[12] > 1) fail(at, "unknown interlace method " + std::to_string(d[12]));
        m_interlace = d[12];
        if (m_width * m_height > kPngMaxPixels)
            fail(at, "the image is " + std::to_string(m_width) + "x" + std::to_string(m_height) + ", more than " +
                         std::to_string(kPngMaxPixels) + " pixels: too large");
    }

    void readChunks() {
        const int64_t size = static_cast<int64_t>(m_b.size());
        if (size < 8 || std::memcmp(m_b.data(), kSignature, 8) != 0)
            fail(0, "not a PNG file (the first 8 bytes are not the PNG signature)");
        int64_t pos = 8;
        bool haveHeader = false, haveEnd = false, idatEnded = false;
        while (pos < size) {
            if (size - pos < 12)
                fail(pos, "truncated: a chunk needs at least 12 bytes, " + std::to_string(size - pos) + " remain");
            const uint8_t* c = m_b.data() + pos;
            const uint32_t length = be32(c);
            const std::string type = chunkName(c + 4);
            if (length > 0x7fffffffu) fail(pos, "chunk '" + type + "' claims " + std::to_string(length) + " bytes");
            if (!isLetters(c + 4)) fail(pos + 4, "invalid chunk type '" + type + "'");
            if (static_cast<int64_t>(length) > size - pos - 12)
                fail(pos, "truncated: chunk '" + type + "' claims " + std::to_string(length) + " bytes, " +
                              std::to_string(std::max<int64_t>(0, size - pos - 12)) + " remain before its CRC");
            const uint32_t stored = be32(c + 8 + length);
            const uint32_t computed = static_cast<uint32_t>(crc32(crc32(0L, Z_NULL, 0), c + 4, length + 4));
            if (stored != computed)
                fail(pos + 8 + length, "CRC mismatch in chunk '" + type + "' (stored " + hex32(stored) + ", computed " +
                                           hex32(computed) + ")");
            const uint8_t* d = c + 8;
            if (!haveHeader && type != "IHDR") fail(pos, "the first chunk is '" + type + "', expected IHDR");
            if (type != "IDAT" && !m_idat.empty()) idatEnded = true;
            if (type == "IHDR") {
                if (haveHeader) fail(pos, "a second IHDR chunk");
                readHeader(d, length, pos);
                haveHeader = true;
            } else if (type == "PLTE") {
                if (m_colorType == 0 || m_colorType == 4) fail(pos, "a PLTE chunk in a gray image");
                if (!m_idat.empty()) fail(pos, "PLTE after the image data");
                if (!m_palette.empty()) fail(pos, "a second PLTE chunk");
                if (length == 0 || length % 3 != 0 || length / 3 > 256)
                    fail(pos, "PLTE chunk of " + std::to_string(length) + " bytes (1 to 256 RGB entries expected)");
                if (m_colorType == 3 && (int64_t{length} / 3) > (int64_t{1} << m_depth))
                    fail(pos, "PLTE has " + std::to_string(length / 3) + " entries, more than bit depth " +
                                  std::to_string(m_depth) + " can index");
                m_palette.assign(d, d + length);
            } else if (type == "IDAT") {
                if (idatEnded) fail(pos, "IDAT chunks are not consecutive");
                if (m_idatOffset < 0) m_idatOffset = pos;
                m_idat.insert(m_idat.end(), d, d + length);
            } else if (type == "IEND") {
                haveEnd = true;
                pos += 12 + length;
                break;
            } else if ((c[4] & 0x20) == 0) {
                // An upper-case first letter marks a chunk a decoder must understand.
                fail(pos, "unknown critical chunk '" + type + "'");
            }
            pos += 12 + length;
        }
        if (!haveHeader) fail(pos, "truncated: no IHDR chunk");
        if (!haveEnd) fail(size, "truncated: the file ends without an IEND chunk");
        if (m_colorType == 3 && m_palette.empty()) fail(pos, "a palette image without a PLTE chunk");
        if (m_idat.empty()) fail(pos, "no image data (IDAT chunk)");
    }

    int64_t bitsPerPixel() const { return int64_t{samplesPerPixel(m_colorType)} * m_depth; }
    int64_t rowBytes(int64_t width) const { return (width * bitsPerPixel() + 7) / 8; }

    const Pass* passes(int& count) const {
        count = m_interlace ? 7 : 1;
        return m_interlace ? kAdam7 : kWhole;
    }

    std::vector<uint8_t> inflateImageData() const {
        int passCount = 0;
        const Pass* ps = passes(passCount);
        uint64_t expected = 0;
        for (int i = 0; i < passCount; ++i) {
            const int64_t pw = passWidth(ps[i], m_width), ph = passHeight(ps[i], m_height);
            if (pw > 0 && ph > 0) expected += static_cast<uint64_t>(ph * (1 + rowBytes(pw)));
        }
        // One spare byte tells data that inflates to more than the header allows from an exact fit.
        std::vector<uint8_t> out(expected + 1);
        z_stream z{};
        if (inflateInit(&z) != Z_OK) fail(m_idatOffset, "zlib cannot start inflating");
        size_t inPos = 0;
        int ret = Z_OK;
        z.next_out = out.data();
        z.avail_out = static_cast<uInt>(out.size());
        while (ret == Z_OK) {
            if (z.avail_in == 0 && inPos < m_idat.size()) {
                const size_t n = std::min<size_t>(m_idat.size() - inPos, size_t{1} << 30);
                z.next_in = const_cast<Bytef*>(m_idat.data() + inPos);
                z.avail_in = static_cast<uInt>(n);
                inPos += n;
            }
            ret = inflate(&z, Z_NO_FLUSH);
            if (ret == Z_BUF_ERROR && z.avail_in == 0 && inPos == m_idat.size()) break;  // input ran out
            if (z.avail_out == 0) break;
        }
        const uint64_t produced = z.total_out;
        const std::string zmsg = z.msg ? z.msg : "";
        inflateEnd(&z);
        const std::string size = std::to_string(m_width) + "x" + std::to_string(m_height);
        if (ret == Z_DATA_ERROR || ret == Z_NEED_DICT || ret == Z_MEM_ERROR || ret == Z_STREAM_ERROR)
            fail(m_idatOffset, "corrupt compressed image data (zlib: " + (zmsg.empty() ? "error" : zmsg) + ")");
        if (produced > expected)
            fail(m_idatOffset, "size mismatch: the image data inflates to more than the " + std::to_string(expected) +
                                   " bytes a " + size + " image needs");
        if (ret != Z_STREAM_END) {
            if (produced < expected)
                fail(m_idatOffset, "truncated: the compressed image data ends after " + std::to_string(produced) +
                                       " of " + std::to_string(expected) + " bytes");
            fail(m_idatOffset, "the compressed image data has no end marker");
        }
        if (produced < expected)
            fail(m_idatOffset, "size mismatch: the image data inflates to " + std::to_string(produced) + " bytes, a " +
                                   size + " image needs " + std::to_string(expected));
        out.resize(expected);
        return out;
    }

    PngImage reconstruct(const std::vector<uint8_t>& raw) const {
        PngImage img;
        img.width = m_width;
        img.height = m_height;
        img.bitDepth = m_depth;
        img.colorType = m_colorType;
        img.interlaced = m_interlace == 1;
        img.channels = (m_colorType == 0 || m_colorType == 4) ? 1 : 3;
        const int64_t plane = m_width * m_height;
        img.values.assign(static_cast<size_t>(img.channels * plane), 0.f);

        const int spp = samplesPerPixel(m_colorType);
        const int64_t filterDistance = std::max<int64_t>(1, bitsPerPixel() / 8);
        const uint32_t mask = m_depth >= 8 ? 0xffffu : (1u << m_depth) - 1u;
        // Gray samples of 1/2/4 bits stretch to 0..255; palette indices are looked up unscaled.
        const double scale = m_depth == 16 ? 255.0 / 65535.0 : m_depth == 8 ? 1.0 : 255.0 / double(mask);
        const int64_t paletteEntries = static_cast<int64_t>(m_palette.size() / 3);

        int passCount = 0;
        const Pass* ps = passes(passCount);
        size_t at = 0;
        for (int pi = 0; pi < passCount; ++pi) {
            const Pass& p = ps[pi];
            const int64_t pw = passWidth(p, m_width), ph = passHeight(p, m_height);
            if (pw == 0 || ph == 0) continue;
            const size_t rb = static_cast<size_t>(rowBytes(pw));
            std::vector<uint8_t> prev(rb, 0), cur(rb);
            for (int64_t r = 0; r < ph; ++r) {
                const uint8_t filter = raw[at];
                if (filter > 4)
                    fail(m_idatOffset, "bad filter type " + std::to_string(filter) + " on row " + std::to_string(r) +
                                           (m_interlace ? " of interlace pass " + std::to_string(pi + 1) : "") +
                                           " (byte " + std::to_string(at) + " of the inflated image data)");
                const uint8_t* src = raw.data() + at + 1;
                const size_t fd = static_cast<size_t>(filterDistance);
                for (size_t i = 0; i < rb; ++i) {
                    const int a = i >= fd ? cur[i - fd] : 0;
                    const int b = prev[i];
                    const int c = i >= fd ? prev[i - fd] : 0;
                    int predictor = 0;
                    switch (filter) {
                        case 0: predictor = 0; break;
                        case 1: predictor = a; break;
                        case 2: predictor = b; break;
                        case 3: predictor = (a + b) / 2; break;
                        default: predictor = paeth(a, b, c); break;
                    }
                    cur[i] = static_cast<uint8_t>(src[i] + predictor);
                }
                at += 1 + rb;

                const int64_t y = p.y0 + r * p.dy;
                for (int64_t xi = 0; xi < pw; ++xi) {
                    const int64_t x = p.x0 + xi * p.dx;
                    const size_t pixel = static_cast<size_t>(y * m_width + x);
                    auto sample = [&](int channel) -> uint32_t {
                        const int64_t index = xi * spp + channel;
                        if (m_depth == 16) return (uint32_t(cur[size_t(2 * index)]) << 8) | cur[size_t(2 * index + 1)];
                        if (m_depth == 8) return cur[size_t(index)];
                        const int64_t bit = index * m_depth;
                        const int shift = 8 - m_depth - static_cast<int>(bit % 8);
                        return (uint32_t(cur[size_t(bit / 8)]) >> shift) & mask;
                    };
                    if (m_colorType == 3) {
                        const uint32_t k = sample(0);
                        if (static_cast<int64_t>(k) >= paletteEntries)
                            fail(m_idatOffset, "palette index " + std::to_string(k) + " at pixel (" +
                                                   std::to_string(x) + ", " + std::to_string(y) + ") but PLTE has " +
                                                   std::to_string(paletteEntries) + " entries");
                        for (int ch = 0; ch < 3; ++ch)
                            img.values[size_t(ch) * size_t(plane) + pixel] = m_palette[3 * k + size_t(ch)];
                    } else {
                        // Alpha (the last sample of types 4 and 6) is dropped.
                        for (int ch = 0; ch < img.channels; ++ch)
                            img.values[size_t(ch) * size_t(plane) + pixel] =
                                static_cast<float>(double(sample(ch)) * scale);
                    }
                }
                std::swap(prev, cur);
            }
        }
        return img;
    }
};

}  // namespace

PngImage decodePng(const std::vector<uint8_t>& bytes, const std::string& name) { return Decoder(bytes, name).decode(); }

PngImage readPng(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw FormatError(path, "cannot open file for reading");
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    return decodePng(bytes, path);
}

}  // namespace strata::data
