// PngReader (libpng underneath): every colour type and bit depth, plain and
// Adam7-interlaced, all five row filters, against pixels known in advance. Files
// come from two writers: one here (zlib compress + crc32, rows filtered by the test
// itself, one filter type per row in turn), independent of libpng, and libpng's own
// encoder choosing its own filters. Corrupt files (truncated at every length, bad
// CRC, bad filter byte, wrong data size, a header claiming gigapixels, a palette
// index past the PLTE...) must raise FormatError naming the file and where reading
// stopped, never crash; and `predict` takes a PNG image.
#include <QtTest>
#include <csetjmp>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include <zlib.h>

#include "app/CliCommands.h"
#include "core/data/PngReader.h"
#include "core/export/ExportModel.h"
#include "core/graph/Model.h"
#include "core/io/FormatError.h"
#include "core/train/Checkpoint.h"
#include "tests/support/TestBackends.h"

#ifdef STRATA_HAVE_LIBPNG
#include <png.h>
#endif

using namespace strata;
using data::PngImage;

namespace {

// An image as samples: per pixel `spp` values of `depth` bits (palette: indices).
struct Samples {
    int width = 0, height = 0, depth = 8, colorType = 0;
    int spp = 1;
    std::vector<uint32_t> values;  // height * width * spp
    std::vector<uint8_t> palette;  // RGB triples
};

int sppOf(int colorType) { return colorType == 2 ? 3 : colorType == 4 ? 2 : colorType == 6 ? 4 : 1; }

Samples randomSamples(int w, int h, int colorType, int depth, unsigned seed) {
    Samples s;
    s.width = w;
    s.height = h;
    s.depth = depth;
    s.colorType = colorType;
    s.spp = sppOf(colorType);
    std::mt19937 rng(seed);
    const uint32_t maxValue = depth == 16 ? 65535u : (1u << depth) - 1u;
    if (colorType == 3) {
        const int entries = std::min(256, 1 << depth);
        for (int i = 0; i < 3 * entries; ++i) s.palette.push_back(static_cast<uint8_t>(rng() & 0xff));
    }
    std::uniform_int_distribution<uint32_t> v(0, maxValue);
    s.values.resize(static_cast<size_t>(w * h * s.spp));
    for (uint32_t& x : s.values) x = v(rng);
    // Smooth runs too, so Sub/Up/Average/Paeth see small differences and not only noise.
    for (int y = 0; y < h; y += 3)
        for (int x = 0; x < w; ++x)
            for (int c = 0; c < s.spp; ++c)
                s.values[static_cast<size_t>((y * w + x) * s.spp + c)] =
                    (uint32_t(x * 7 + c * 3) * maxValue / 97) % (maxValue + 1);
    return s;
}

// What the decoder must return: planar [C, H, W], 0..255.
std::vector<float> expectedValues(const Samples& s) {
    const int channels = (s.colorType == 0 || s.colorType == 4) ? 1 : 3;
    const size_t plane = static_cast<size_t>(s.width * s.height);
    std::vector<float> out(channels * plane);
    const double maxValue = s.depth == 16 ? 65535.0 : double((1u << s.depth) - 1u);
    for (size_t p = 0; p < plane; ++p)
        for (int c = 0; c < channels; ++c) {
            float v;
            if (s.colorType == 3)
                v = s.palette[3 * s.values[p] + static_cast<size_t>(c)];
            else if (s.depth == 8)
                v = static_cast<float>(s.values[p * static_cast<size_t>(s.spp) + static_cast<size_t>(c)]);
            else
                v = static_cast<float>(s.values[p * static_cast<size_t>(s.spp) + static_cast<size_t>(c)] * 255.0 /
                                       maxValue);
            out[static_cast<size_t>(c) * plane + p] = v;
        }
    return out;
}

// Packs one row of pixels (x0, x0+dx, ...) of row y into PNG bytes: MSB first below 8 bits, big-endian at 16.
std::vector<uint8_t> packRow(const Samples& s, int y, int x0, int dx) {
    std::vector<uint32_t> row;
    for (int x = x0; x < s.width; x += dx)
        for (int c = 0; c < s.spp; ++c) row.push_back(s.values[static_cast<size_t>((y * s.width + x) * s.spp + c)]);
    std::vector<uint8_t> out((row.size() * static_cast<size_t>(s.depth) + 7) / 8, 0);
    for (size_t i = 0; i < row.size(); ++i) {
        if (s.depth == 16) {
            out[2 * i] = static_cast<uint8_t>(row[i] >> 8);
            out[2 * i + 1] = static_cast<uint8_t>(row[i] & 0xff);
        } else if (s.depth == 8) {
            out[i] = static_cast<uint8_t>(row[i]);
        } else {
            const size_t bit = i * static_cast<size_t>(s.depth);
            out[bit / 8] |= static_cast<uint8_t>(row[i] << (8 - s.depth - static_cast<int>(bit % 8)));
        }
    }
    return out;
}

struct PassDef {
    int x0, y0, dx, dy;
};
const std::vector<PassDef> kPlain{{0, 0, 1, 1}};
const std::vector<PassDef> kAdam7{{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4},
                                  {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}};

int paethPredictor(int a, int b, int c) {
    const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
    return (pa <= pb && pa <= pc) ? a : (pb <= pc ? b : c);
}

// Filtered scanlines of every pass; row r of the image data uses filter (r + firstFilter) % 5.
std::vector<uint8_t> filteredData(const Samples& s, bool interlaced, int firstFilter) {
    const int bpp = std::max(1, s.spp * s.depth / 8);
    std::vector<uint8_t> out;
    int rowIndex = 0;
    for (const PassDef& p : interlaced ? kAdam7 : kPlain) {
        if (p.x0 >= s.width || p.y0 >= s.height) continue;
        std::vector<uint8_t> prev;
        for (int y = p.y0; y < s.height; y += p.dy) {
            const std::vector<uint8_t> raw = packRow(s, y, p.x0, p.dx);
            if (prev.empty()) prev.assign(raw.size(), 0);
            const int filter = (rowIndex++ + firstFilter) % 5;
            out.push_back(static_cast<uint8_t>(filter));
            for (size_t i = 0; i < raw.size(); ++i) {
                const int a = i >= size_t(bpp) ? raw[i - size_t(bpp)] : 0, b = prev[i];
                const int c = i >= size_t(bpp) ? prev[i - size_t(bpp)] : 0;
                const int pred = filter == 0   ? 0
                                 : filter == 1 ? a
                                 : filter == 2 ? b
                                 : filter == 3 ? (a + b) / 2
                                               : paethPredictor(a, b, c);
                out.push_back(static_cast<uint8_t>(raw[i] - pred));
            }
            prev = raw;
        }
    }
    return out;
}

void put32(std::vector<uint8_t>& out, uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}

void chunk(std::vector<uint8_t>& out, const char* type, const std::vector<uint8_t>& data) {
    put32(out, static_cast<uint32_t>(data.size()));
    const size_t start = out.size();
    out.insert(out.end(), type, type + 4);
    out.insert(out.end(), data.begin(), data.end());
    put32(out, static_cast<uint32_t>(crc32(0, out.data() + start, static_cast<uInt>(data.size() + 4))));
}

std::vector<uint8_t> zlibCompress(const std::vector<uint8_t>& data) {
    uLongf n = compressBound(static_cast<uLong>(data.size()));
    std::vector<uint8_t> out(n);
    if (compress2(out.data(), &n, data.data(), static_cast<uLong>(data.size()), 9) != Z_OK)
        throw std::runtime_error("zlib");
    out.resize(n);
    return out;
}

std::vector<uint8_t> ihdr(uint32_t w, uint32_t h, int depth, int colorType, bool interlaced) {
    std::vector<uint8_t> d;
    put32(d, w);
    put32(d, h);
    d.push_back(static_cast<uint8_t>(depth));
    d.push_back(static_cast<uint8_t>(colorType));
    d.push_back(0);
    d.push_back(0);
    d.push_back(interlaced ? 1 : 0);
    return d;
}

const std::vector<uint8_t> kSig{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

// A whole file; the image data is split over two IDAT chunks (decoders must concatenate them), with an
// ancillary tEXt chunk in front that must be skipped.
std::vector<uint8_t> encode(const Samples& s, bool interlaced, int firstFilter = 0) {
    std::vector<uint8_t> f = kSig;
    chunk(f, "IHDR", ihdr(uint32_t(s.width), uint32_t(s.height), s.depth, s.colorType, interlaced));
    const char text[] = "Comment\0written by test_png";
    chunk(f, "tEXt", std::vector<uint8_t>(text, text + sizeof text - 1));
    if (s.colorType == 3) chunk(f, "PLTE", s.palette);
    const std::vector<uint8_t> z = zlibCompress(filteredData(s, interlaced, firstFilter));
    const size_t half = z.size() / 2;
    chunk(f, "IDAT", std::vector<uint8_t>(z.begin(), z.begin() + static_cast<long>(half)));
    chunk(f, "IDAT", std::vector<uint8_t>(z.begin() + static_cast<long>(half), z.end()));
    chunk(f, "IEND", {});
    return f;
}

struct Combo {
    int colorType, depth;
};
const std::vector<Combo> kCombos{{0, 1}, {0, 2}, {0, 4}, {0, 8}, {0, 16}, {2, 8}, {2, 16}, {3, 1},
                                 {3, 2}, {3, 4}, {3, 8}, {4, 8}, {4, 16}, {6, 8}, {6, 16}};

std::string comboName(const Combo& c, bool interlaced, int w, int h) {
    return "type " + std::to_string(c.colorType) + " depth " + std::to_string(c.depth) +
           (interlaced ? " Adam7 " : " plain ") + std::to_string(w) + "x" + std::to_string(h);
}

double maxDiff(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return 1e30;
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::fabs(a[i] - b[i])));
    return worst;
}

// FormatError's problem text, or "" when the bytes decode.
std::string decodeError(const std::vector<uint8_t>& bytes, int64_t* offset = nullptr) {
    try {
        data::decodePng(bytes, "x.png");
    } catch (const FormatError& e) {
        if (e.file() != "x.png") return "FormatError without the file name: " + std::string(e.what());
        if (offset) *offset = e.offset();
        return e.problem();
    }
    return "";
}

#ifdef STRATA_HAVE_LIBPNG
void appendBytes(png_structp png, png_bytep data, png_size_t n) {
    auto* out = static_cast<std::vector<uint8_t>*>(png_get_io_ptr(png));
    out->insert(out->end(), data, data + n);
}
void noFlush(png_structp) {}

// The same samples written by libpng (all filters allowed: libpng picks one per row by its heuristic).
bool libpngEncode(const Samples& s, bool interlaced, std::vector<uint8_t>& out) {
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
    png_infop info = png ? png_create_info_struct(png) : nullptr;
    if (!info) return false;
    std::vector<std::vector<uint8_t>> rows;
    for (int y = 0; y < s.height; ++y) rows.push_back(packRow(s, y, 0, 1));
    std::vector<png_bytep> rowPointers;
    for (auto& r : rows) rowPointers.push_back(r.data());
    std::vector<png_color> palette;
    for (size_t i = 0; i + 2 < s.palette.size(); i += 3)
        palette.push_back({s.palette[i], s.palette[i + 1], s.palette[i + 2]});
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        return false;
    }
    png_set_write_fn(png, &out, appendBytes, noFlush);
    png_set_IHDR(png, info, png_uint_32(s.width), png_uint_32(s.height), s.depth, s.colorType,
                 interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (s.colorType == 3) png_set_PLTE(png, info, palette.data(), static_cast<int>(palette.size()));
    png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_ALL_FILTERS);
    png_write_info(png, info);
    png_write_image(png, rowPointers.data());  // runs the interlace passes itself
    png_write_end(png, nullptr);
    png_destroy_write_struct(&png, &info);
    return true;
}
#endif

}  // namespace

class TestPng : public QObject {
    Q_OBJECT

private:
    QTemporaryDir m_dir;
    std::string path(const std::string& name) {
        return (m_dir.path() + "/" + QString::fromStdString(name)).toStdString();
    }

    void checkDecodes(const std::vector<uint8_t>& file, const Samples& s, bool interlaced, const std::string& what) {
        PngImage img;
        try {
            img = data::decodePng(file, what);
        } catch (const std::exception& e) {
            QFAIL(qPrintable(QString::fromStdString(what + ": " + e.what())));
        }
        QCOMPARE(img.width, int64_t(s.width));
        QCOMPARE(img.height, int64_t(s.height));
        QCOMPARE(img.bitDepth, s.depth);
        QCOMPARE(img.colorType, s.colorType);
        QCOMPARE(img.interlaced, interlaced);
        QCOMPARE(img.channels, int64_t(s.colorType == 0 || s.colorType == 4 ? 1 : 3));
        const double d = maxDiff(img.values, expectedValues(s));
        QVERIFY2(d <= 1e-4, qPrintable(QString::fromStdString(what) + QString(": max difference %1").arg(d)));
    }

private slots:
    // Every colour type and depth, plain and interlaced, at sizes where Adam7 passes are partial or empty.
    void everyFormatOwnWriter() {
        const std::vector<std::pair<int, int>> sizes{{1, 1}, {3, 2}, {13, 11}, {33, 9}};
        unsigned seed = 1;
        for (const Combo& c : kCombos)
            for (bool interlaced : {false, true})
                for (auto [w, h] : sizes) {
                    const Samples s = randomSamples(w, h, c.colorType, c.depth, seed++);
                    // Each start filter shifts which rows get which filter, so every filter meets every row kind.
                    for (int first = 0; first < 5; ++first)
                        checkDecodes(encode(s, interlaced, first), s, interlaced,
                                     comboName(c, interlaced, w, h) + " first filter " + std::to_string(first));
                }
    }

    void everyFormatLibpng() {
#ifdef STRATA_HAVE_LIBPNG
        unsigned seed = 100;
        for (const Combo& c : kCombos)
            for (bool interlaced : {false, true})
                for (auto [w, h] : std::vector<std::pair<int, int>>{{1, 1}, {17, 10}, { 64, 37 }}) {
                    const Samples s = randomSamples(w, h, c.colorType, c.depth, seed++);
                    std::vector<uint8_t> file;
                    QVERIFY2(libpngEncode(s, interlaced, file), "libpng failed to write");
                    checkDecodes(file, s, interlaced, "libpng " + comboName(c, interlaced, w, h));
                }
#else
        QSKIP("built without libpng (libpng-dev); the test's own writer still covers every format");
#endif
    }

    void grayValuesScaleToBytes() {
        // 1-bit white is 255, 4-bit 15 is 255, 16-bit 65535 is 255 and 257 is 1: the scaling, spelled out.
        Samples s = randomSamples(2, 1, 0, 16, 1);
        s.values = {65535, 257};
        const PngImage img = data::decodePng(encode(s, false), "g16.png");
        QCOMPARE(img.values, (std::vector<float>{255.f, 1.f}));
        Samples b = randomSamples(9, 1, 0, 1, 1);
        b.values = {1, 0, 1, 1, 0, 0, 0, 0, 1};  // crosses a byte boundary
        QCOMPARE(data::decodePng(encode(b, false), "g1.png").values,
                 (std::vector<float>{255, 0, 255, 255, 0, 0, 0, 0, 255}));
    }

    void corruptFilesGiveFormatErrors() {
        const Samples s = randomSamples(13, 11, 2, 8, 7);
        const std::vector<uint8_t> good = encode(s, true);
        QCOMPARE(decodeError(good), std::string());

        // Every truncation is an error, and none crashes.
        for (size_t n = 0; n < good.size(); ++n) {
            const std::string e = decodeError(std::vector<uint8_t>(good.begin(), good.begin() + static_cast<long>(n)));
            QVERIFY2(!e.empty(), qPrintable(QString("truncated to %1 bytes decoded").arg(n)));
        }
        int64_t offset = -2;
        std::string e = decodeError({good.begin(), good.begin() + 40}, &offset);
        QVERIFY2(e.find("truncated") != std::string::npos, e.c_str());

        // Not a PNG.
        std::vector<uint8_t> bad = good;
        bad[1] = 'J';
        e = decodeError(bad, &offset);
        QVERIFY2(e.find("not a PNG file") != std::string::npos, e.c_str());
        QCOMPARE(offset, int64_t(0));

        // A flipped bit in the IHDR's width: the CRC catches it; reading stopped after the CRC (8 + 8 + 13 + 4).
        bad = good;
        bad[19] ^= 0x01;
        e = decodeError(bad, &offset);
        QVERIFY2(e.find("IHDR: CRC error") != std::string::npos, e.c_str());
        QCOMPARE(offset, int64_t(33));

        // A filter byte of 5 (the first scanline's filter is the first inflated byte).
        auto withData = [&](const std::vector<uint8_t>& raw, const std::vector<uint8_t>& head = {}) {
            std::vector<uint8_t> f = kSig;
            chunk(f, "IHDR", head.empty() ? ihdr(13, 11, 8, 2, false) : head);
            chunk(f, "IDAT", zlibCompress(raw));
            chunk(f, "IEND", {});
            return f;
        };
        std::vector<uint8_t> raw = filteredData(s, false, 0);
        raw[0] = 5;
        e = decodeError(withData(raw), &offset);
        QVERIFY2(e.find("bad adaptive filter value") != std::string::npos, e.c_str());
        QVERIFY(offset >= 8 + 25);  // reading stopped in or after the IDAT chunk

        // Image data a row short is an error; a byte too long is not (libpng ignores trailing image data
        // with a warning, as other readers do; the hand-written decoder refused it).
        raw = filteredData(s, false, 0);
        e = decodeError(withData(std::vector<uint8_t>(raw.begin(), raw.end() - 40)));
        QVERIFY2(e.find("Not enough image data") != std::string::npos, e.c_str());
        raw.push_back(0);
        QCOMPARE(data::decodePng(withData(raw), "long.png").values, expectedValues(s));

        // A header claiming 100000 x 100000 pixels is refused before inflating anything.
        e = decodeError(withData(filteredData(s, false, 0), ihdr(100000, 100000, 8, 2, false)));
        QVERIFY2(e.find("too large") != std::string::npos, e.c_str());
        e = decodeError(withData(filteredData(s, false, 0), ihdr(13, 11, 16, 3, false)));
        QVERIFY2(e.find("Invalid IHDR data") != std::string::npos, e.c_str());

        // Compressed data cut inside the zlib stream.
        std::vector<uint8_t> f = kSig;
        chunk(f, "IHDR", ihdr(13, 11, 8, 2, false));
        const std::vector<uint8_t> z = zlibCompress(filteredData(s, false, 0));
        chunk(f, "IDAT", std::vector<uint8_t>(z.begin(), z.begin() + static_cast<long>(z.size() / 2)));
        chunk(f, "IEND", {});
        e = decodeError(f);
        QVERIFY2(e.find("Not enough image data") != std::string::npos, e.c_str());

        // Palette index past the palette, a palette image without PLTE, an unknown critical chunk, no IEND.
        Samples p = randomSamples(4, 4, 3, 4, 3);
        p.palette.resize(3 * 5);
        for (uint32_t& v : p.values) v = 2;
        p.values[6] = 9;
        e = decodeError(encode(p, false));
        QVERIFY2(e.find("palette index 9 at pixel (2, 1) but PLTE has 5 entries") != std::string::npos, e.c_str());
        f = kSig;
        chunk(f, "IHDR", ihdr(4, 4, 4, 3, false));
        chunk(f, "IDAT", zlibCompress(std::vector<uint8_t>(4 * 3, 0)));
        chunk(f, "IEND", {});
        e = decodeError(f);
        QVERIFY2(e.find("Missing PLTE before IDAT") != std::string::npos, e.c_str());
        f = kSig;
        chunk(f, "IHDR", ihdr(13, 11, 8, 2, false));
        chunk(f, "ZZZZ", {1, 2, 3});
        e = decodeError(f);
        QVERIFY2(e.find("ZZZZ: unhandled critical chunk") != std::string::npos, e.c_str());
        f = std::vector<uint8_t>(good.begin(), good.end() - 12);
        e = decodeError(f, &offset);
        QVERIFY2(e.find("truncated: the file ends at byte") != std::string::npos, e.c_str());
        QCOMPARE(offset, int64_t(f.size()));

        // Random single-byte damage: an error or (rarely, in a skipped chunk's text) a decode, never a crash.
        std::mt19937 rng(5);
        for (int i = 0; i < 500; ++i) {
            bad = good;
            bad[rng() % bad.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
            (void)decodeError(bad);
        }

        // The file reader names the path.
        std::ofstream(path("broken.png"), std::ios::binary).write(reinterpret_cast<const char*>(good.data()), 30);
        try {
            data::readPng(path("broken.png"));
            QFAIL("a truncated file decoded");
        } catch (const FormatError& err) {
            QCOMPARE(err.file(), path("broken.png"));
            QVERIFY(std::string(err.what()).find("broken.png") != std::string::npos);
        }
    }

    // `predict` on PNG files: gray like the equivalent PGM, RGB converted by luma and said so, a wrong size refused.
    void predictTakesPng() {
        Project p;
        p.name = "png_model";
        const int in = p.graph.addNode("Input", "image", {{"shape", {1, 8, 8}}});
        const int f = p.graph.addNode("Flatten", "flat");
        const int d = p.graph.addNode("Dense", "fc", {{"units", 3}});
        p.graph.connect(in, f);
        p.graph.connect(f, d);
        auto backend = test::makeReferenceBackend();
        auto model = compile(p.graph, *backend, 3);
        ExportModel m;
        m.project = p;
        m.weights = modelWeights(*model);
        m.normalization.mode = "scale";
        m.normalization.scale = 1.f / 255.f;
        m.classNames = {"a", "b", "c"};
        writeSafetensorsExport(path("m.safetensors"), m, ExportPrecision::F32);

        Samples gray = randomSamples(8, 8, 0, 8, 11);
        auto write = [&](const std::string& name, const std::vector<uint8_t>& bytes) {
            std::ofstream(path(name), std::ios::binary)
                .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
        };
        write("gray.png", encode(gray, true));
        std::string pgm = "P5 8 8 255\n";
        for (uint32_t v : gray.values) pgm.push_back(static_cast<char>(v));
        std::ofstream(path("gray.pgm"), std::ios::binary) << pgm;
        auto predict = [&](const std::string& image, std::string& text) {
            std::ostringstream out, err;
            const int rc = runPredictCommand({path("m.safetensors"), path(image), "--top", "3"}, out, err);
            text = rc == 0 ? out.str() : err.str();
            return rc;
        };
        std::string a, b;
        QCOMPARE(predict("gray.png", a), 0);
        QCOMPARE(predict("gray.pgm", b), 0);
        QCOMPARE(a.substr(a.find("sample 0")), b.substr(b.find("sample 0")));

        // An RGB image whose three channels are equal is the same gray image.
        Samples rgb = randomSamples(8, 8, 2, 8, 12);
        for (size_t i = 0; i < 64; ++i)
            for (size_t c = 0; c < 3; ++c) rgb.values[3 * i + c] = gray.values[i];
        write("rgb.png", encode(rgb, false));
        std::string c;
        QCOMPARE(predict("rgb.png", c), 0);
        QVERIFY2(c.find("converted the RGB image to gray (luma") != std::string::npos, c.c_str());
        QCOMPARE(c.substr(c.find("sample 0")), b.substr(b.find("sample 0")));

        write("big.png", encode(randomSamples(9, 8, 0, 8, 13), false));
        // Another size is resized as the Predict dock does, and said.
        std::string e;
        QCOMPARE(predict("big.png", e), 0);
        QVERIFY2(e.find("resized the image from 9x8 to 8x8") != std::string::npos, e.c_str());
        write("bad.png", std::vector<uint8_t>(kSig.begin(), kSig.end()));
        QCOMPARE(predict("bad.png", e), 1);
        QVERIFY2(e.find("bad.png") != std::string::npos && e.find("truncated") != std::string::npos, e.c_str());
    }
};

QTEST_GUILESS_MAIN(TestPng)
#include "test_png.moc"
