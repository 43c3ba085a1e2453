// Image files and image-folder datasets: PNG, JPEG (with TurboJPEG's scaled decode), BMP and PGM decoded
// by content, the centre-crop resize, and `image_folder` datasets: class folders sorted, labels that
// never shift when bad files (zero bytes, truncated, not an image, empty class folder, odd names) are
// skipped with their reasons, strict mode naming the first bad path, stratified splits, a validation
// folder, CSV listings, and results independent of the decode thread count. Files are written here with
// libpng and TurboJPEG, the encoders of the field.
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <png.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "core/backend/CpuBackend.h"
#include "core/data/DataLoader.h"
#include "core/data/Dataset.h"
#include "core/data/ImageFile.h"
#include "core/data/ImageFolder.h"
#include "core/data/ImageStream.h"
#include "core/export/ExportModel.h"
#include "core/infer/ExportCheck.h"
#include "core/io/FormatError.h"
#include "core/train/Checkpoint.h"
#include "core/train/DataCheck.h"
#include "core/train/Trainer.h"
#include "tests/support/TestBackends.h"
#include "tests/support/TestProjects.h"

using namespace strata;
namespace fs = std::filesystem;

namespace {

// Interleaved 8-bit pixels, `channels` 1 or 3.
struct Pixels {
    int width = 0, height = 0, channels = 1;
    std::vector<uint8_t> bytes;
};

Pixels flat(int w, int h, int channels, uint8_t value) {
    return {w, h, channels, std::vector<uint8_t>(size_t(w * h * channels), value)};
}

// Pixel (y, x, c) = (y * 16 + x * 5 + c * 40) % 256: a pattern whose crops and scalings are checkable.
Pixels pattern(int w, int h, int channels) {
    Pixels p{w, h, channels, {}};
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
            for (int c = 0; c < channels; ++c) p.bytes.push_back(static_cast<uint8_t>((y * 16 + x * 5 + c * 40) % 256));
    return p;
}

void writeBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<uint8_t> readBytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), {});
}

bool writePng(const std::string& path, const Pixels& p) {
    png_image img{};
    img.version = PNG_IMAGE_VERSION;
    img.width = png_uint_32(p.width);
    img.height = png_uint_32(p.height);
    img.format = p.channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
    return png_image_write_to_file(&img, path.c_str(), 0, p.bytes.data(), 0, nullptr) != 0;
}

bool writeJpeg(const std::string& path, const Pixels& p, int quality = 95) {
    tjhandle tj = tjInitCompress();
    unsigned char* out = nullptr;
    unsigned long size = 0;
    const int rc = tjCompress2(tj, p.bytes.data(), p.width, 0, p.height, p.channels == 3 ? TJPF_RGB : TJPF_GRAY, &out,
                               &size, p.channels == 3 ? TJSAMP_444 : TJSAMP_GRAY, quality, 0);
    if (rc == 0) writeBytes(path, std::vector<uint8_t>(out, out + size));
    tjFree(out);
    tjDestroy(tj);
    return rc == 0;
}

bool writeBmp(const std::string& path, const Pixels& p) {
    return tjSaveImage(path.c_str(), const_cast<unsigned char*>(p.bytes.data()), p.width, 0, p.height,
                       p.channels == 3 ? TJPF_RGB : TJPF_GRAY, 0) == 0;
}

// Planar floats of interleaved pixels.
std::vector<float> planar(const Pixels& p) {
    const size_t plane = size_t(p.width * p.height);
    std::vector<float> out(plane * size_t(p.channels));
    for (size_t i = 0; i < plane; ++i)
        for (size_t c = 0; c < size_t(p.channels); ++c) out[c * plane + i] = p.bytes[i * size_t(p.channels) + c];
    return out;
}

double meanAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return 1e9;
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += std::fabs(double(a[i]) - double(b[i]));
    return a.empty() ? 0 : s / double(a.size());
}

std::string problemOf(const std::function<void()>& f) {
    try {
        f();
    } catch (const FormatError& e) {
        return e.what();
    } catch (const std::exception& e) {
        return std::string("not a FormatError: ") + e.what();
    }
    return {};
}

std::string dataErrorOf(const std::function<void()>& f) {
    try {
        f();
    } catch (const DataError& e) {
        return e.what();
    }
    return {};
}

// The error readImageFile gives in a child process whose address space is limited to what it holds now plus
// `headroomMb`: an image decoder that allocates from a header's claim before checking it fails there (or dies),
// one that checks first gives its own error. "(child died)" when the child did not report.
std::string problemUnderMemoryLimit(const std::string& file, int64_t headroomMb) {
    int fds[2];
    if (::pipe(fds) != 0) return "(no pipe)";
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(fds[0]);
        std::ifstream status("/proc/self/status");
        std::string line;
        int64_t vmKb = 0;
        while (std::getline(status, line))
            if (line.starts_with("VmSize:")) vmKb = std::stoll(line.substr(7));
        const rlim_t limit = static_cast<rlim_t>((vmKb << 10) + (headroomMb << 20));
        const struct rlimit rl { limit, limit };
#ifndef __SANITIZE_ADDRESS__  // AddressSanitizer's shadow memory needs address space past any such limit
        ::setrlimit(RLIMIT_AS, &rl);
#else
        (void)rl;
#endif
        std::string message;
        try {
            data::readImageFile(file);
            message = "(decoded)";
        } catch (const FormatError& e) {
            message = e.what();
        } catch (const std::exception& e) {
            message = std::string("not a FormatError: ") + e.what();
        }
        const ssize_t n = ::write(fds[1], message.data(), message.size());
        ::_exit(n >= 0 ? 0 : 1);
    }
    ::close(fds[1]);
    std::string message;
    char buf[512];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) message.append(buf, size_t(n));
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    return message.empty() ? "(child died)" : message;
}

std::vector<uint8_t> le32(uint32_t v) { return {uint8_t(v), uint8_t(v >> 8), uint8_t(v >> 16), uint8_t(v >> 24)}; }

}  // namespace

class TestImageFolder : public QObject {
    Q_OBJECT

private:
    QTemporaryDir m_tmp;
    std::string path(const std::string& name) const { return m_tmp.path().toStdString() + "/" + name; }

    // A class folder dataset: classes "cat" (label 0), "dog" (1), "emu" (2) written in that order of
    // folders b/, a/, c/ so sorting matters; image k of class c is flat gray 40 * c + k (k < 10), so every
    // decoded sample tells its own class.
    std::string makeFolder(const std::string& root, int perClass) {
        fs::create_directories(path(root));
        for (const std::string& cls : {std::string("emu"), std::string("cat"), std::string("dog")}) {
            const int c = cls == "cat" ? 0 : cls == "dog" ? 1 : 2;
            fs::create_directories(path(root + "/" + cls));
            for (int k = 0; k < perClass; ++k) {
                const std::string f = path(root + "/" + cls + "/img" + std::to_string(k));
                const uint8_t v = static_cast<uint8_t>(40 * c + k);
                // Mixed formats and sizes: PNG gray 8x8, PNG RGB 10x6, JPEG gray 16x16, BMP 8x8.
                switch (k % 4) {
                    case 0: writePng(f + ".png", flat(8, 8, 1, v)); break;
                    case 1: writePng(f + ".png", flat(10, 6, 3, v)); break;
                    case 2: writeJpeg(f + ".jpg", flat(16, 16, 1, v)); break;
                    default: writeBmp(f + ".bmp", flat(8, 8, 3, v)); break;
                }
            }
        }
        return path(root);
    }

    // Paired folders for image_target folder: ROOT/in/{a,b}/kK.png, gray 8x8 with a seeded pattern, and
    // ROOT/out/{a,b}/kK.png, the same image inverted (255 - v), so that every target tells its input.
    void makePairs(const std::string& root, int perClass) {
        uint32_t state = 7;
        for (const std::string& cls : {std::string("a"), std::string("b")}) {
            fs::create_directories(path(root + "/in/" + cls));
            fs::create_directories(path(root + "/out/" + cls));
            for (int k = 0; k < perClass; ++k) {
                Pixels in = flat(8, 8, 1, 0);
                for (uint8_t& v : in.bytes) {
                    state = state * 1664525u + 1013904223u;
                    v = static_cast<uint8_t>(state >> 24);
                }
                Pixels out = in;
                for (uint8_t& v : out.bytes) v = static_cast<uint8_t>(255 - v);
                const std::string name = "/" + cls + "/k" + std::to_string(k) + ".png";
                QVERIFY(writePng(path(root + "/in" + name), in));
                QVERIFY(writePng(path(root + "/out" + name), out));
            }
        }
    }

    DatasetSettings pairedSettings(const std::string& root) {
        DatasetSettings s = folderSettings(path(root + "/in"));
        s.task = TaskKind::ImageToImage;
        s.imageTarget = ImageTarget::Folder;
        s.targetPath = path(root + "/out");
        s.normalization = NormalizationMode::Scale;
        return s;
    }

    // Each sample's target is its own input inverted (scaled to 0..1: 1 - x).
    static void checkInverted(const DataSplit& split) {
        QCOMPARE(split.targetShape, (Shape{1, 8, 8}));
        QCOMPARE(split.targets.size(), split.inputs.size());
        for (size_t i = 0; i < split.inputs.size(); ++i)
            QVERIFY2(std::fabs(split.targets[i] - (1.0f - split.inputs[i])) < 1e-6f, std::to_string(i).c_str());
    }

    DatasetSettings folderSettings(const std::string& root) {
        DatasetSettings s;
        s.kind = DatasetKind::ImageFolder;
        s.trainPath = root;
        s.imageShape = {1, 8, 8};
        s.normalization = NormalizationMode::None;
        return s;
    }

    // Every sample is flat at 40 * label + k: its label is its value / 40.
    static void checkLabelsMatchPixels(const DataSplit& split) {
        const int64_t n = split.sampleShape.numel();
        for (int64_t i = 0; i < split.count; ++i) {
            const float v = split.inputs[size_t(i * n)];
            QCOMPARE(int(std::lround(v)) / 40, int(split.labels[size_t(i)]));
            for (int64_t j = 0; j < n; ++j) QVERIFY(std::fabs(split.inputs[size_t(i * n + j)] - v) < 1.01f);
        }
    }

private slots:
    void initTestCase() { QVERIFY(m_tmp.isValid()); }

    void decodesEveryFormatByContent() {
        const Pixels gray = pattern(13, 7, 1), rgb = pattern(9, 5, 3);
        QVERIFY(writePng(path("g.png"), gray));
        QVERIFY(writePng(path("c.png"), rgb));
        QVERIFY(writeBmp(path("c.bmp"), rgb));
        QVERIFY(writeJpeg(path("c.jpg"), rgb, 100));
        QVERIFY(writeJpeg(path("g.jpeg"), gray, 100));
        data::Image img = data::readImageFile(path("g.png"));
        QCOMPARE(img.channels, int64_t(1));
        QCOMPARE(img.values, planar(gray));
        img = data::readImageFile(path("c.png"));
        QCOMPARE(img.channels, int64_t(3));
        QCOMPARE(img.values, planar(rgb));
        img = data::readImageFile(path("c.bmp"));
        QCOMPARE(img.width, int64_t(9));
        QCOMPARE(img.values, planar(rgb));
        // JPEG is lossy: quality 100, 4:4:4 stays within a couple of levels on average.
        img = data::readImageFile(path("c.jpg"));
        QCOMPARE(img.channels, int64_t(3));
        QVERIFY2(meanAbsDiff(img.values, planar(rgb)) < 2.0, "RGB JPEG too far from its pixels");
        img = data::readImageFile(path("g.jpeg"));
        QCOMPARE(img.channels, int64_t(1));
        QVERIFY(meanAbsDiff(img.values, planar(gray)) < 2.0);

        // By content, not by name: a JPEG named .png decodes; a text named .png, a zero-byte file and an
        // unknown extension are FormatErrors naming the file.
        writeBytes(path("jpeg_inside.png"), readBytes(path("c.jpg")));
        QCOMPARE(data::readImageFile(path("jpeg_inside.png")).values, data::readImageFile(path("c.jpg")).values);
        writeBytes(path("text.png"), {'h', 'e', 'l', 'l', 'o', '\n'});
        std::string e = problemOf([&] { data::readImageFile(path("text.png")); });
        QVERIFY2(e.find("text.png") != std::string::npos && e.find("not an image") != std::string::npos, e.c_str());
        writeBytes(path("zero.jpg"), {});
        e = problemOf([&] { data::readImageFile(path("zero.jpg")); });
        QVERIFY2(e.find("zero.jpg") != std::string::npos && e.find("empty (0 bytes)") != std::string::npos, e.c_str());
        e = problemOf([&] { data::readImageFile(path("notes.txt")); });
        QVERIFY2(e.find("not an image file") != std::string::npos, e.c_str());

        // Truncated JPEG and PNG: errors (never a half-decoded image), at every cut.
        const std::vector<uint8_t> jpg = readBytes(path("c.jpg")), png = readBytes(path("c.png"));
        for (size_t cut = 1; cut < jpg.size(); cut += 7) {
            writeBytes(path("cut.jpg"), {jpg.begin(), jpg.begin() + long(cut)});
            QVERIFY2(!problemOf([&] { data::readImageFile(path("cut.jpg")); }).empty(),
                     qPrintable(QString("JPEG cut at %1 decoded").arg(cut)));
        }
        for (size_t cut = 1; cut < png.size(); ++cut) {
            writeBytes(path("cut.png"), {png.begin(), png.begin() + long(cut)});
            e = problemOf([&] { data::readImageFile(path("cut.png")); });
            QVERIFY2(!e.empty() && e.find("cut.png") != std::string::npos,
                     qPrintable(QString("PNG cut at %1: '%2'").arg(cut).arg(QString::fromStdString(e))));
        }
        // A truncated BMP.
        const std::vector<uint8_t> bmp = readBytes(path("c.bmp"));
        writeBytes(path("cut.bmp"), {bmp.begin(), bmp.begin() + long(bmp.size() / 2)});
        QVERIFY(!problemOf([&] { data::readImageFile(path("cut.bmp")); }).empty());
    }

    // Every decoder checks the pixel count its header claims against the limit (2^24 pixels, 4096 x 4096) before
    // anything the size of the image is allocated, and names the file, the size and the limit: a 54-byte BMP
    // claiming 60000x60000 (TurboJPEG's tjLoadImage asked for 10.8 GB before reading a pixel), a JPEG whose frame
    // header says 60000x60000, and PGM/PPM headers whose pixels the file cannot hold, all decoded in a child
    // process limited to 256 MiB more address space than it holds.
    void pixelLimitFromTheHeader() {
        std::vector<uint8_t> bmp = {'B', 'M'};
        for (uint32_t v : {54u, 0u, 54u, 40u, 60000u, 60000u}) {
            const std::vector<uint8_t> w = le32(v);
            bmp.insert(bmp.end(), w.begin(), w.end());
        }
        bmp[2] = 54;  // file size
        const std::vector<uint8_t> rest = {1, 0, 24, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                           0, 0, 0,  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        bmp.insert(bmp.end(), rest.begin(), rest.end());
        QCOMPARE(bmp.size(), size_t(54));
        writeBytes(path("huge.bmp"), bmp);
        std::string e = problemUnderMemoryLimit(path("huge.bmp"), 256);
        QVERIFY2(e.find("huge.bmp") != std::string::npos &&
                     e.find("BMP header claims 60000x60000 pixels") != std::string::npos &&
                     e.find("16777216 (4096 x 4096)") != std::string::npos,
                 e.c_str());
        // Within the limit but more pixels than the file holds: refused from the header too.
        for (size_t at : {18u, 22u}) {
            const std::vector<uint8_t> v = le32(4000);
            std::copy(v.begin(), v.end(), bmp.begin() + long(at));
        }
        writeBytes(path("short.bmp"), bmp);
        e = problemUnderMemoryLimit(path("short.bmp"), 256);
        QVERIFY2(e.find("short.bmp") != std::string::npos &&
                     e.find("4000x4000 pixels of 24 bits") != std::string::npos &&
                     e.find("the file holds 0") != std::string::npos,
                 e.c_str());

        // A real JPEG with its frame header's height and width rewritten.
        QVERIFY(writeJpeg(path("small.jpg"), pattern(16, 16, 3)));
        std::vector<uint8_t> jpg = readBytes(path("small.jpg"));
        size_t sof = 0;
        for (size_t i = 2; i + 9 < jpg.size(); ++i)
            if (jpg[i] == 0xff && (jpg[i + 1] == 0xc0 || jpg[i + 1] == 0xc1 || jpg[i + 1] == 0xc2)) {
                sof = i;
                break;
            }
        QVERIFY(sof > 0);
        for (size_t at : {sof + 5, sof + 7}) {
            jpg[at] = 60000 >> 8;
            jpg[at + 1] = 60000 & 0xff;
        }
        writeBytes(path("huge.jpg"), jpg);
        e = problemUnderMemoryLimit(path("huge.jpg"), 256);
        QVERIFY2(e.find("huge.jpg") != std::string::npos &&
                     e.find("JPEG header claims 60000x60000 pixels") != std::string::npos &&
                     e.find("16777216") != std::string::npos,
                 e.c_str());

        // PGM/PPM: past the limit, and an ASCII header whose 4096x4096 samples cannot fit in the bytes that follow
        // (its floats were allocated, 200 MB, before the first sample was read).
        writeBytes(path("huge.pgm"),
                   {'P', '5', ' ', '6', '0', '0', '0', '0', ' ', '6', '0', '0', '0', '0', ' ', '2', '5', '5', '\n'});
        e = problemUnderMemoryLimit(path("huge.pgm"), 256);
        QVERIFY2(e.find("PGM header claims 60000x60000 pixels") != std::string::npos, e.c_str());
        const std::string p3 = "P3 4096 4096 255\n1 2 3\n";
        writeBytes(path("ascii.ppm"), {p3.begin(), p3.end()});
        e = problemUnderMemoryLimit(path("ascii.ppm"), 128);
        QVERIFY2(
            e.find("ascii.ppm") != std::string::npos && e.find("cannot hold the 50331648 samples") != std::string::npos,
            e.c_str());
        // The limit itself decodes (a flat 4096x4096 gray PNG).
        QVERIFY(writePng(path("limit.png"), flat(4096, 4096, 1, 7)));
        QCOMPARE(data::readImageFile(path("limit.png")).width, int64_t(4096));
    }

    // The png fuzz target's seeds (tests/fuzz/corpus/png: PNG, JPEG baseline and progressive, BMP 8 and 24 bits,
    // binary and ASCII PGM/PPM) are images that decode, each under a .png name as the target writes them, so the
    // fuzzer starts inside every decoder.
    void fuzzSeedsDecode() {
        int seeds = 0;
        for (const auto& e : fs::directory_iterator(test::sourcePath("tests/fuzz/corpus/png"))) {
            if (e.path().filename().string().starts_with("crash-")) continue;
            writeBytes(path("seed.png"), readBytes(e.path().string()));
            const data::Image img = data::readImageFile(path("seed.png"));
            QVERIFY2(img.width > 0 && img.height > 0, e.path().c_str());
            ++seeds;
        }
        QVERIFY(seeds >= 11);
    }

    // TurboJPEG's DCT scaling: a 64x64 JPEG asked for 16x16 decodes at 16x16 (1/4), close to decoding it
    // whole and area-averaging; a hint that would need enlarging decodes at full size.
    void jpegScaledDecode() {
        Pixels smooth{64, 64, 1, {}};
        for (int y = 0; y < 64; ++y)
            for (int x = 0; x < 64; ++x) smooth.bytes.push_back(static_cast<uint8_t>(2 * x + y));
        QVERIFY(writeJpeg(path("big.jpg"), smooth, 98));
        const data::Image whole = data::readImageFile(path("big.jpg"));
        QCOMPARE(whole.width, int64_t(64));
        const data::Image quarter = data::readImageFile(path("big.jpg"), data::DecodeHint{16, 16});
        QCOMPARE(quarter.width, int64_t(16));
        QCOMPARE(quarter.height, int64_t(16));
        QCOMPARE(quarter.fileWidth, int64_t(64));  // said in predict's notes
        QVERIFY(data::fitImageToInput(quarter, Shape{1, 16, 16})
                    .notes.back()
                    .find("shrank the image from 64x64 to 16x16") != std::string::npos);
        QVERIFY(
            data::fitImageToInput(quarter, Shape{1, 8, 8}).notes.back().find("from 64x64 (decoded at 16x16) to 8x8") !=
            std::string::npos);
        QCOMPARE(whole.fileWidth, int64_t(0));
        const std::vector<float> reference = data::resizePlanar(whole.values, 1, 64, 64, 16, 16);
        QVERIFY2(meanAbsDiff(quarter.values, reference) < 2.0, "scaled decode far from decode + area resize");
        // 20x20 needs at least 20 pixels: 3/8 (24x24) is the smallest scaling that covers it.
        QCOMPARE(data::readImageFile(path("big.jpg"), data::DecodeHint{20, 20}).width, int64_t(24));
        // Centre crop of a wide image needs the shorter side at the target height.
        Pixels wide{128, 32, 1, std::vector<uint8_t>(128 * 32, 100)};
        QVERIFY(writeJpeg(path("wide.jpg"), wide));
        const data::Image w =
            data::readImageFile(path("wide.jpg"), data::DecodeHint{16, 16, data::ResizePolicy::CenterCrop});
        QCOMPARE(w.height, int64_t(16));
        QCOMPARE(w.width, int64_t(64));
        const data::Image s =
            data::readImageFile(path("wide.jpg"), data::DecodeHint{16, 16, data::ResizePolicy::Stretch});
        QCOMPARE(s.height, int64_t(16));  // 1/2: at 1/4 the height (8) would be below 16
        QCOMPARE(s.width, int64_t(64));
    }

    void centerCropKeepsTheMiddle() {
        // 4 rows x 8 columns to 4x4: columns 2..5 exactly.
        std::vector<float> v(32);
        for (int i = 0; i < 32; ++i) v[size_t(i)] = float(i);
        const data::CropBox box = data::centerCropBox(4, 8, 4, 4);
        QCOMPARE(box.left, int64_t(2));
        QCOMPARE(box.width, int64_t(4));
        QCOMPARE(box.height, int64_t(4));
        const std::vector<float> out = data::resizeImage(v, 1, 4, 8, 4, 4, data::ResizePolicy::CenterCrop);
        for (int y = 0; y < 4; ++y)
            for (int x = 0; x < 4; ++x) QCOMPARE(out[size_t(y * 4 + x)], float(y * 8 + x + 2));
        // Tall 8x2 to 2x2: rows 3..4.
        const data::CropBox tall = data::centerCropBox(8, 2, 2, 2);
        QCOMPARE(tall.top, int64_t(3));
        QCOMPARE(tall.height, int64_t(2));
        // fitImageToInput says what it cut.
        data::Image img{1, 4, 8, v};
        const data::FittedImage fit = data::fitImageToInput(img, Shape{1, 4, 4}, data::ResizePolicy::CenterCrop);
        QCOMPARE(fit.values, out);
        QVERIFY(fit.notes.back().find("the centre 4x4 kept") != std::string::npos);
        // Same aspect: crop and stretch agree.
        QCOMPARE(data::resizeImage(v, 1, 4, 8, 2, 4, data::ResizePolicy::CenterCrop),
                 data::resizePlanar(v, 1, 4, 8, 2, 4));
    }

    void classFoldersSortedAndLabelled() {
        const std::string root = makeFolder("set1", 8);
        DatasetBundle b = loadDataset(folderSettings(root), "");
        QCOMPARE(b.classNames, (std::vector<std::string>{"cat", "dog", "emu"}));
        QCOMPARE(b.numClasses, 3);
        QCOMPARE(b.train.count, int64_t(24));
        QCOMPARE(b.train.sampleShape, Shape({1, 8, 8}));
        QVERIFY(b.skipped.empty());
        checkLabelsMatchPixels(b.train);
        QVERIFY2(b.description.find("24 train, 0 validation, 3 classes") != std::string::npos, b.description.c_str());
        // File sizes as found: 8x8 PNG and BMP, 10x6 PNG, 16x16 JPEG (decoded at 8x8: the file's size counts).
        const std::map<std::pair<int64_t, int64_t>, int64_t> sizes{{{8, 8}, 12}, {{10, 6}, 6}, {{16, 16}, 6}};
        QVERIFY(b.imageSizes == sizes);

        // RGB shape: gray repeated, flat RGB stays flat.
        DatasetSettings rgb = folderSettings(root);
        rgb.imageShape = {3, 12, 12};
        rgb.imageResize = ImageResize::CenterCrop;
        DatasetBundle c = loadDataset(rgb, "");
        QCOMPARE(c.train.sampleShape, Shape({3, 12, 12}));
        checkLabelsMatchPixels(c.train);

        // standardize on RGB: per channel, measured on the training split, stored per feature.
        DatasetSettings stdRgb = folderSettings(root);
        stdRgb.imageShape = {3, 4, 4};
        stdRgb.normalization = NormalizationMode::Standardize;
        const std::string colours = path("colours");
        fs::create_directories(colours + "/a");
        fs::create_directories(colours + "/b");
        for (int k = 0; k < 6; ++k) {
            Pixels p = flat(4, 4, 3, 0);
            for (size_t i = 0; i < p.bytes.size(); i += 3) {
                p.bytes[i] = static_cast<uint8_t>(10 * k);         // red varies by image
                p.bytes[i + 1] = static_cast<uint8_t>(200);        // green constant
                p.bytes[i + 2] = static_cast<uint8_t>(i % 7 * 9);  // blue varies by pixel
            }
            QVERIFY(writePng(colours + (k % 2 ? "/a/" : "/b/") + std::to_string(k) + ".png", p));
        }
        stdRgb.trainPath = colours;
        const DatasetBundle sr = loadDataset(stdRgb, "");
        QCOMPARE(sr.normalization.mode, std::string("standardize"));
        QCOMPARE(sr.normalization.featureMean.size(), size_t(48));
        QCOMPARE(sr.normalization.featureMean[0], 25.f);    // red: mean of 0, 10, ..., 50
        QCOMPARE(sr.normalization.featureMean[16], 200.f);  // green
        QCOMPARE(sr.normalization.featureStd[16], 1.f);     // constant channel: std 1, not 0
        for (int c = 0; c < 3; ++c) {
            double sum = 0, sumSq = 0;
            for (int64_t r = 0; r < sr.train.count; ++r)
                for (int i = 0; i < 16; ++i) {
                    const double v = sr.train.inputs[size_t(r * 48 + c * 16 + i)];
                    sum += v;
                    sumSq += v * v;
                }
            const double n = double(sr.train.count) * 16;
            QVERIFY(std::fabs(sum / n) < 1e-5);
            if (c != 1) QVERIFY(std::fabs(sumSq / n - 1.0) < 1e-4);
        }

        // Stratified split: 25% of each class's 8 is 2 -> 6 validation, 18 training, every class in both.
        DatasetSettings split = folderSettings(root);
        split.validationSplit = 0.25;
        DatasetBundle d = loadDataset(split, "");
        QCOMPARE(d.validation.count, int64_t(6));
        QCOMPARE(d.train.count, int64_t(18));
        for (int cls = 0; cls < 3; ++cls) {
            QCOMPARE(std::count(d.validation.labels.begin(), d.validation.labels.end(), cls), 2L);
            QCOMPARE(std::count(d.train.labels.begin(), d.train.labels.end(), cls), 6L);
        }
        checkLabelsMatchPixels(d.validation);
        checkLabelsMatchPixels(d.train);
        // Seeded: the same split again; and the same with 1 or 3 decode threads.
        split.decodeThreads = 1;
        DatasetBundle e = loadDataset(split, "");
        split.decodeThreads = 3;
        DatasetBundle f = loadDataset(split, "");
        QCOMPARE(e.validation.inputs, d.validation.inputs);
        QCOMPARE(f.train.inputs, e.train.inputs);
        QCOMPARE(f.train.labels, e.train.labels);

        // A separate validation folder, with one class fewer and one the training set lacks.
        makeFolder("val1", 2);
        fs::rename(path("val1/emu"), path("val1/yak"));
        DatasetSettings val = folderSettings(root);
        val.validationPath = path("val1");
        DatasetBundle g = loadDataset(val, "");
        QCOMPARE(g.validation.count, int64_t(4));
        checkLabelsMatchPixels(g.validation);
        QCOMPARE(g.skipped.size(), size_t(1));
        QVERIFY(g.skipped[0].path.ends_with("yak"));
        QVERIFY(g.skipped[0].reason.find("not among the classes") != std::string::npos);

        // Limits take a seeded random subset, not the first class only.
        DatasetSettings lim = folderSettings(root);
        lim.trainLimit = 9;
        DatasetBundle h = loadDataset(lim, "");
        QCOMPARE(h.train.count, int64_t(9));
        QVERIFY(std::set<int32_t>(h.train.labels.begin(), h.train.labels.end()).size() > 1);
    }

    // Bad files are skipped with their reasons and never shift a label; strict mode stops at the first.
    void badFilesSkippedOrStrict() {
        const std::string root = makeFolder("bad", 4);
        writeBytes(path("bad/cat/zero.png"), {});
        writeBytes(path("bad/cat/text.jpg"), {'n', 'o', 't', ' ', 'j', 'p', 'g'});
        const std::vector<uint8_t> good = readBytes(path("bad/dog/img0.png"));
        writeBytes(path("bad/dog/truncated.png"), {good.begin(), good.begin() + long(good.size() - 20)});
        const std::vector<uint8_t> jpg = readBytes(path("bad/emu/img2.jpg"));
        writeBytes(path("bad/emu/truncated.jpg"), {jpg.begin(), jpg.begin() + long(jpg.size() / 2)});
        writeBytes(path("bad/emu/readme.txt"), {'x'});
        writeBytes(path("bad/loose.png"), good);
        fs::create_directories(path("bad/empty_class"));
        fs::create_directories(path("bad/odd\x01name"));
        writePng(path("bad/odd\x01name/a.png"), flat(8, 8, 1, 0));
        fs::create_directories(path("bad/.hidden"));
        writePng(path("bad/.hidden/a.png"), flat(8, 8, 1, 0));

        DatasetSettings s = folderSettings(root);
        DatasetBundle b = loadDataset(s, "");
        QCOMPARE(b.classNames, (std::vector<std::string>{"cat", "dog", "emu"}));
        QCOMPARE(b.train.count, int64_t(12));
        checkLabelsMatchPixels(b.train);
        auto reasonOf = [&](const std::string& tail) -> std::string {
            for (const SkippedFile& f : b.skipped)
                if (f.path.ends_with(tail)) return f.reason;
            return "(not skipped)";
        };
        QCOMPARE(b.skipped.size(), size_t(8));
        QVERIFY2(reasonOf("zero.png").find("empty (0 bytes)") != std::string::npos, reasonOf("zero.png").c_str());
        QVERIFY2(reasonOf("text.jpg").find("not an image") != std::string::npos, reasonOf("text.jpg").c_str());
        QVERIFY2(reasonOf("truncated.png").find("truncated") != std::string::npos, reasonOf("truncated.png").c_str());
        QVERIFY2(reasonOf("truncated.jpg").find("JPEG") != std::string::npos, reasonOf("truncated.jpg").c_str());
        QVERIFY(reasonOf("readme.txt").find("not an image file name") != std::string::npos);
        QVERIFY(reasonOf("loose.png").find("not inside a class folder") != std::string::npos);
        QVERIFY(reasonOf("empty_class").find("empty class folder") != std::string::npos);
        QVERIFY(reasonOf("name").find("control character") != std::string::npos);
        QVERIFY2(b.description.find("8 skipped") != std::string::npos, b.description.c_str());

        // Strict: the first bad entry in listing order, by path.
        s.strictImages = true;
        std::string e = dataErrorOf([&] { loadDataset(s, ""); });
        QVERIFY2(e.find("loose.png") != std::string::npos && e.find("strict_images") != std::string::npos, e.c_str());
        fs::remove(path("bad/loose.png"));
        fs::remove_all(path("bad/empty_class"));
        fs::remove_all(path("bad/odd\x01name"));
        fs::remove(path("bad/emu/readme.txt"));
        e = dataErrorOf([&] { loadDataset(s, ""); });
        QVERIFY2(e.find("text.jpg") != std::string::npos && e.find("not an image") != std::string::npos, e.c_str());

        // Nothing usable, and a missing folder: errors that say so.
        fs::create_directories(path("nothing/cls"));
        e = dataErrorOf([&] { loadDataset(folderSettings(path("nothing")), ""); });
        QVERIFY2(e.find("holds no image") != std::string::npos, e.c_str());
        e = dataErrorOf([&] { loadDataset(folderSettings(path("no_such_dir")), ""); });
        QVERIFY2(e.find("no such folder") != std::string::npos, e.c_str());
        DatasetSettings noShape = folderSettings(root);
        noShape.imageShape = {};
        e = dataErrorOf([&] { loadDataset(noShape, ""); });
        QVERIFY2(e.find("dataset.image_shape") != std::string::npos, e.c_str());
    }

    // Entries that cannot be listed are skipped and named like bad files, in memory and streamed loading alike:
    // a symbolic link loop (which ended the listing with a raw filesystem_error), a link to nothing (which was
    // ignored without a word), a link to a folder inside a class folder (not followed: it could lead back up),
    // at the top and inside class folders; strict mode stops at the first, naming it. An unreadable folder
    // (which skip_permission_denied dropped silently) too, where the test does not run as root.
    void unreadableEntriesSkipped() {
        const std::string root = makeFolder("links", 4);
        fs::create_symlink("loop", path("links/cat/loop"));
        fs::create_symlink("ping.png", path("links/cat/pong.png"));
        fs::create_symlink("pong.png", path("links/cat/ping.png"));
        fs::create_symlink("gone.png", path("links/dog/dangling.png"));
        fs::create_symlink("..", path("links/emu/up"));
        fs::create_symlink("toploop", path("links/toploop"));
        fs::create_symlink("img0.png", path("links/cat/alias.png"));  // a link to a file is a file
        DatasetSettings s = folderSettings(root);
        for (ImageLoading loading : {ImageLoading::Memory, ImageLoading::Stream}) {
            s.imageLoading = loading;
            const DatasetBundle b = loadDataset(s, "", Streaming::Allowed);
            QCOMPARE(b.train.count, int64_t(13));
            QCOMPARE(b.classNames, (std::vector<std::string>{"cat", "dog", "emu"}));
            auto reasonOf = [&](const std::string& tail) -> std::string {
                for (const SkippedFile& f : b.skipped)
                    if (f.path == path("links/" + tail)) return f.reason;
                return "(not skipped)";
            };
            QCOMPARE(b.skipped.size(), size_t(6));
            QVERIFY2(reasonOf("cat/loop").find("a symbolic link loop (-> loop)") != std::string::npos,
                     reasonOf("cat/loop").c_str());
            QVERIFY2(reasonOf("cat/ping.png").find("symbolic link loop") != std::string::npos,
                     reasonOf("cat/ping.png").c_str());
            QVERIFY2(reasonOf("cat/pong.png").find("symbolic link loop") != std::string::npos,
                     reasonOf("cat/pong.png").c_str());
            QVERIFY2(reasonOf("dog/dangling.png").find("a symbolic link to nothing (-> gone.png)") != std::string::npos,
                     reasonOf("dog/dangling.png").c_str());
            QVERIFY2(
                reasonOf("emu/up").find("link to a folder inside a class folder: not followed") != std::string::npos,
                reasonOf("emu/up").c_str());
            QVERIFY2(reasonOf("toploop").find("symbolic link loop") != std::string::npos, reasonOf("toploop").c_str());
            QVERIFY2(b.description.find("6 skipped") != std::string::npos, b.description.c_str());
        }
        s.strictImages = true;
        const std::string e = dataErrorOf([&] { loadDataset(s, ""); });
        QVERIFY2(e.find("toploop") != std::string::npos && e.find("symbolic link loop") != std::string::npos &&
                     e.find("strict_images") != std::string::npos,
                 e.c_str());
        // The source itself a loop: said, not a filesystem_error.
        fs::create_symlink("rootloop", path("rootloop"));
        const std::string r = dataErrorOf([&] { loadDataset(folderSettings(path("rootloop")), ""); });
        QVERIFY2(r.find("rootloop") != std::string::npos && r.find("symbolic link loop") != std::string::npos,
                 r.c_str());

        if (::geteuid() == 0) return;  // root reads every folder: the permission case cannot be made here
        fs::create_directories(path("links/cat/closed"));
        writePng(path("links/cat/closed/a.png"), flat(8, 8, 1, 0));
        fs::permissions(path("links/cat/closed"), fs::perms::none);
        s.strictImages = false;
        const DatasetBundle b = loadDataset(s, "");
        fs::permissions(path("links/cat/closed"), fs::perms::owner_all);
        bool named = false;
        for (const SkippedFile& f : b.skipped)
            named = named || (f.path == path("links/cat/closed") &&
                              f.reason.find("cannot list the folder") != std::string::npos);
        QVERIFY(named);
    }

    // The augmentation warp: identity, 180 degrees (both axes reversed), four quarter turns, a crop of the
    // left half resized back (a linear ramp stays linear), edges kept when a crop is enlarged.
    void warpIsExact() {
        const int64_t h = 3, w = 5;
        std::vector<float> img(size_t(h * w)), out(img.size()), back(img.size());
        for (size_t i = 0; i < img.size(); ++i) img[i] = float(i * i % 17);
        warpImage(img.data(), out.data(), 1, h, w, {0, 0, double(h), double(w), 0}, -1.f);
        QCOMPARE(out, img);
        warpImage(img.data(), out.data(), 1, h, w, {0, 0, double(h), double(w), 180}, -1.f);
        for (int64_t y = 0; y < h; ++y)
            for (int64_t x = 0; x < w; ++x)
                QVERIFY(std::fabs(out[size_t(y * w + x)] - img[size_t((h - 1 - y) * w + (w - 1 - x))]) < 1e-4f);
        std::vector<float> sq(25), a(25), b(25);
        for (size_t i = 0; i < 25; ++i) sq[i] = float(i);
        a = sq;
        for (int k = 0; k < 4; ++k) {
            warpImage(a.data(), b.data(), 1, 5, 5, {0, 0, 5, 5, 90}, -1.f);
            a = b;
            if (k == 0) QVERIFY(std::fabs(b[0] - sq[0]) > 0.5f || std::fabs(b[4] - sq[4]) > 0.5f);  // it moved
        }
        for (size_t i = 0; i < 25; ++i) QVERIFY(std::fabs(a[i] - sq[i]) < 1e-3f);
        // The left half of a ramp value = x, resized to the full width: value (x + 0.5) / 2 - 0.5, clamped at 0.
        std::vector<float> ramp(size_t(h * w));
        for (int64_t y = 0; y < h; ++y)
            for (int64_t x = 0; x < w; ++x) ramp[size_t(y * w + x)] = float(x);
        warpImage(ramp.data(), out.data(), 1, h, w, {0, 0, double(h), 2.5, 0}, -1.f);
        for (int64_t x = 0; x < w; ++x)
            QVERIFY(std::fabs(out[size_t(x)] - std::max(0.f, (float(x) + 0.5f) * 0.5f - 0.5f)) < 1e-5f);
        // A flat image stays flat under any crop (no fill pulled in).
        std::vector<float> flatImg(size_t(h * w), 7.f);
        warpImage(flatImg.data(), out.data(), 1, h, w, {0.3, 0.2, 1.7, 2.1, 0}, -1.f);
        for (float v : out) QCOMPARE(v, 7.f);
    }

    // The loader's image augmentations: deterministic per seed, brightness a per-image shift within the
    // bound, contrast leaving a flat image alone, resized crops keeping a flat image flat.
    void loaderImageAugmentation() {
        DataSplit split;
        split.sampleShape = Shape{1, 6, 6};
        split.count = 64;
        for (int i = 0; i < 64; ++i) {
            split.inputs.insert(split.inputs.end(), 36, float(i % 5) * 0.1f);
            split.labels.push_back(i % 2);
        }
        auto firstBatch = [&](const Augmentation& aug) {
            DataLoader loader(split, 64, false, 7, aug);
            loader.startEpoch(0);
            Batch b;
            loader.next(b);
            return b.inputs;
        };
        Augmentation bright;
        bright.brightness = 0.1f;
        bright.pixelUnit = 1.f / 255.f;  // scale 1/255, std 1: a full range of 1
        const std::vector<float> x = firstBatch(bright);
        QCOMPARE(x, firstBatch(bright));
        int shifted = 0;
        for (int i = 0; i < 64; ++i) {
            const float d = x[size_t(i * 36)] - split.inputs[size_t(i * 36)];
            QVERIFY(std::fabs(d) <= 0.1f + 1e-6f);
            if (std::fabs(d) > 1e-3f) ++shifted;
            for (int j = 1; j < 36; ++j) QVERIFY(std::fabs(x[size_t(i * 36 + j)] - x[size_t(i * 36)]) < 1e-6f);
        }
        QVERIFY(shifted > 50);
        Augmentation contrast;
        contrast.contrast = 0.5f;
        const std::vector<float> c = firstBatch(contrast);
        for (size_t j = 0; j < c.size(); ++j) QVERIFY(std::fabs(c[j] - split.inputs[j]) < 1e-6f);
        Augmentation crop;
        crop.resizedCropMinArea = 0.3f;
        const std::vector<float> r = firstBatch(crop);
        for (size_t j = 0; j < r.size(); ++j) QVERIFY(std::fabs(r[j] - split.inputs[j]) < 1e-5f);
        // With rotation a gradient changes, the same way for the same seed.
        for (int i = 0; i < 64; ++i)
            for (int j = 0; j < 36; ++j) split.inputs[size_t(i * 36 + j)] = float(j % 6);
        Augmentation rot;
        rot.rotationDegrees = 30.f;
        rot.resizedCropMinArea = 0.5f;
        const std::vector<float> g = firstBatch(rot);
        QCOMPARE(g, firstBatch(rot));
        QVERIFY(g != split.inputs);
        // Settings to Augmentation: the table's keys reach the loader.
        DatasetSettings s;
        s.rotationDegrees = 10;
        s.resizedCropMinArea = 0.6;
        s.brightness = 0.2;
        s.contrast = 0.3;
        Normalization n;
        n.scale = 1.f / 255.f;
        n.mean = 0.5f;
        n.std = 0.25f;
        const Augmentation fromSettings = trainingAugmentation(s, n);
        QCOMPARE(fromSettings.rotationDegrees, 10.f);
        QCOMPARE(fromSettings.resizedCropMinArea, 0.6f);
        QCOMPARE(fromSettings.brightness, 0.2f);
        QCOMPARE(fromSettings.contrast, 0.3f);
        QCOMPARE(fromSettings.pixelUnit, 1.f / 255.f / 0.25f);
    }

    void csvListing() {
        const std::string root = makeFolder("csvset", 4);
        std::ofstream csv(path("csvset/list.csv"));
        csv << "path,label\n";
        for (const char* cls : {"emu", "cat", "dog"})
            for (int k = 0; k < 4; ++k)
                csv << cls << "/img" << k << (k % 4 == 2 ? ".jpg" : k % 4 == 3 ? ".bmp" : ".png") << "," << cls << "\n";
        csv << "missing.png,cat\n";
        csv.close();
        DatasetBundle b = loadDataset(folderSettings(path("csvset/list.csv")), "");
        QCOMPARE(b.classNames, (std::vector<std::string>{"cat", "dog", "emu"}));
        QCOMPARE(b.train.count, int64_t(12));
        checkLabelsMatchPixels(b.train);
        QCOMPARE(b.skipped.size(), size_t(1));
        QVERIFY2(b.skipped[0].reason.find("cannot open") != std::string::npos, b.skipped[0].reason.c_str());
        // Relative to the project file's folder, like every dataset path.
        DatasetSettings rel = folderSettings("csvset/list.csv");
        QCOMPARE(loadDataset(rel, path("p.strata")).train.count, int64_t(12));
        std::ofstream(path("bad.csv")) << "a.png,cat,extra\n";
        const std::string e = dataErrorOf([&] { loadDataset(folderSettings(path("bad.csv")), ""); });
        QVERIFY2(e.find("bad.csv: line 1") != std::string::npos, e.c_str());
    }

    // Streamed (image_loading stream): every sample read by the loader's decode threads equals the in-memory
    // sample rounded to a byte, with the same labels, order and augmentation; the loader holds
    // loader_batches batches; the normalization is measured on the sampled training images.
    void streamedMatchesMemory() {
        const std::string root = makeFolder("stream", 8);
        DatasetSettings s = folderSettings(root);
        s.imageShape = {3, 8, 8};
        s.normalization = NormalizationMode::Scale;
        s.validationSplit = 0.25;
        const DatasetBundle memory = loadDataset(s, "", Streaming::Allowed);  // image_loading memory: not streamed
        QVERIFY(!memory.train.streamed());
        s.imageLoading = ImageLoading::Stream;
        s.loaderBatches = 2;
        s.decodeThreads = 3;
        QVERIFY(!loadDataset(s, "").train.streamed());  // Streaming::Off: decoded whole, whatever the setting
        const DatasetBundle stream = loadDataset(s, "", Streaming::Allowed);
        QVERIFY(stream.train.streamed() && stream.validation.streamed());
        QVERIFY(stream.train.inputs.empty());
        QVERIFY2(stream.description.find("streamed (stream: decoded every epoch)") != std::string::npos,
                 stream.description.c_str());
        QCOMPARE(stream.train.count, memory.train.count);
        QCOMPARE(stream.validation.count, memory.validation.count);
        QCOMPARE(stream.train.labels, memory.train.labels);
        QCOMPARE(stream.classNames, memory.classNames);
        const int64_t n = stream.train.sampleShape.numel();
        std::vector<float> one(size_t(n), 0.f);
        for (int64_t i = 0; i < stream.train.count; ++i) {
            std::string why;
            QVERIFY(stream.train.source->read(i, one.data(), why));
            for (int64_t j = 0; j < n; ++j)
                QVERIFY(std::fabs(one[size_t(j)] - memory.train.inputs[size_t(i * n + j)]) <= 0.5f / 255.f + 1e-6f);
        }
        Augmentation aug;
        aug.horizontalFlip = true;
        aug.cropPadding = 2;
        for (const Augmentation& a : {Augmentation{}, aug}) {
            DataLoader fromMemory(memory.train, 5, true, 11, a);
            DataLoader fromStream(stream.train, 5, true, 11, a);
            QCOMPARE(fromStream.queuedBatches(), 2);
            for (int epoch = 1; epoch <= 2; ++epoch) {
                fromMemory.startEpoch(epoch);
                fromStream.startEpoch(epoch);
                Batch x, y;
                int64_t batches = 0;
                while (fromMemory.next(x)) {
                    QVERIFY(fromStream.next(y));
                    QCOMPARE(y.size, x.size);
                    QCOMPARE(y.labels, x.labels);
                    for (size_t j = 0; j < x.inputs.size(); ++j)
                        QVERIFY(std::fabs(x.inputs[j] - y.inputs[j]) <= 0.5f / 255.f + 1e-6f);
                    ++batches;
                }
                QVERIFY(!fromStream.next(y));
                QCOMPARE(batches, fromMemory.batchesPerEpoch());
            }
            QVERIFY(fromStream.takeSkipped().empty());
        }
        // Standardize: the statistics of the (rounded) sampled images, here all of them.
        s.normalization = NormalizationMode::Standardize;
        s.imageShape = {1, 8, 8};
        const DatasetBundle std1 = loadDataset(s, "", Streaming::Allowed);
        s.imageLoading = ImageLoading::Memory;
        const DatasetBundle std0 = loadDataset(s, "", Streaming::Allowed);
        QVERIFY(std::fabs(std1.normalization.mean - std0.normalization.mean) < 2e-3f);
        QVERIFY(std::fabs(std1.normalization.std - std0.normalization.std) < 2e-3f);
        QVERIFY2(std1.description.find("statistics from 18 sampled images") != std::string::npos,
                 std1.description.c_str());
    }

    // image_loading cache: the first pass decodes each file once into the cache, later epochs read it (the
    // files may even be gone); a file cache beside the project is found again by the next load, and one
    // for other files or another shape replaces it.
    void streamedCache() {
        const std::string root = makeFolder("cached", 6);
        fs::create_directories(path("proj"));
        const std::string project = path("proj/p.strata");
        DatasetSettings s = folderSettings(root);
        s.imageLoading = ImageLoading::Cache;
        s.cacheMemoryMb = 0;  // always a file
        s.decodeThreads = 2;
        auto epochSamples = [](const DataSplit& split, int epoch) {
            DataLoader loader(split, 4, true, 3);
            loader.startEpoch(epoch);
            Batch b;
            int64_t seen = 0;
            while (loader.next(b)) {
                checkLabelsMatchPixels(DataSplit{split.sampleShape, b.size, b.inputs, b.labels, nullptr, {}, {}});
                seen += b.size;
            }
            return seen;
        };
        DatasetBundle b = loadDataset(s, project, Streaming::Allowed);
        const auto* stream = dynamic_cast<const data::ImageStream*>(b.train.source.get());
        QVERIFY(stream && stream->cache());
        const std::string file = stream->cache()->path();
        QVERIFY2(file.find("/proj/.strata-cache/cached-train-") != std::string::npos, file.c_str());
        QVERIFY(fs::exists(file));
        QCOMPARE(epochSamples(b.train, 1), int64_t(18));
        QCOMPARE(stream->decodedCount(), int64_t(18));
        QCOMPARE(stream->cache()->readyCount(), int64_t(18));
        QCOMPARE(epochSamples(b.train, 2), int64_t(18));
        QCOMPARE(stream->decodedCount(), int64_t(18));  // nothing decoded again

        // The next run finds the file and decodes nothing.
        DatasetBundle again = loadDataset(s, project, Streaming::Allowed);
        QVERIFY2(again.description.find("reused: 18 images decoded before") != std::string::npos,
                 again.description.c_str());
        const auto* stream2 = dynamic_cast<const data::ImageStream*>(again.train.source.get());
        QCOMPARE(epochSamples(again.train, 1), int64_t(18));
        QCOMPARE(stream2->decodedCount(), int64_t(0));

        // Files gone: the cache still serves every sample.
        for (const auto& e : fs::recursive_directory_iterator(root))
            if (e.is_regular_file()) fs::remove(e.path());
        QCOMPARE(epochSamples(b.train, 3), int64_t(18));

        // Another shape: a new file, the stale one removed.
        makeFolder("cached", 6);
        s.imageShape = {1, 4, 4};
        DatasetBundle other = loadDataset(s, project, Streaming::Allowed);
        const auto* stream3 = dynamic_cast<const data::ImageStream*>(other.train.source.get());
        QVERIFY(stream3->cache()->path() != file);
        QVERIFY(!fs::exists(file));
        int files = 0;
        for (const auto& e : fs::directory_iterator(path("proj/.strata-cache"))) files += e.is_regular_file() ? 1 : 0;
        QCOMPARE(files, 1);

        // In memory when it fits.
        s.cacheMemoryMb = 64;
        DatasetBundle inMemory = loadDataset(s, project, Streaming::Allowed);
        QVERIFY2(inMemory.description.find("train cache in memory") != std::string::npos, inMemory.description.c_str());
        const auto* stream4 = dynamic_cast<const data::ImageStream*>(inMemory.train.source.get());
        QVERIFY(stream4->cache()->path().empty());
        QCOMPARE(epochSamples(inMemory.train, 1), int64_t(18));
        QCOMPARE(epochSamples(inMemory.train, 2), int64_t(18));
        QCOMPARE(stream4->decodedCount(), int64_t(18));
    }

    // The file cache carries an XXH3 checksum of every stored image and its file's size and time: a byte flipped in
    // the stored pixels, in a slot's state or in the header is found when the next run opens the file (which used to
    // take the damaged bytes, changing the losses), and a source file changed in size or only in time has its image
    // decoded again; each is said in a line of the description naming the file, and what is read afterwards equals
    // a fresh decode.
    void cacheChecksumAndSources() {
        const std::string root = makeFolder("checked", 4);
        fs::create_directories(path("cproj"));
        const std::string project = path("cproj/p.strata");
        DatasetSettings s = folderSettings(root);
        s.imageLoading = ImageLoading::Cache;
        s.cacheMemoryMb = 0;
        s.decodeThreads = 1;
        auto readAll = [](const DatasetBundle& b) {
            const int64_t n = b.train.sampleShape.numel();
            std::vector<float> all(size_t(b.train.count * n));
            for (int64_t i = 0; i < b.train.count; ++i) {
                std::string why;
                if (!b.train.source->read(i, all.data() + i * n, why)) qWarning("%s", why.c_str());
            }
            return all;
        };
        auto streamOf = [](const DatasetBundle& b) {
            return dynamic_cast<const data::ImageStream*>(b.train.source.get());
        };
        DatasetSettings fresh = s;
        fresh.imageLoading = ImageLoading::Stream;
        const std::vector<float> truth = readAll(loadDataset(fresh, project, Streaming::Allowed));

        DatasetBundle first = loadDataset(s, project, Streaming::Allowed);
        QCOMPARE(readAll(first), truth);
        const std::string file = streamOf(first)->cache()->path();
        const int64_t count = first.train.count;
        const std::vector<std::string> names = [&] {
            std::vector<std::string> n;
            for (int64_t i = 0; i < count; ++i) n.push_back(first.train.source->sampleName(i));
            return n;
        }();
        first = DatasetBundle{};  // unmapped

        auto flipByte = [&](int64_t offset) {
            std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
            f.seekg(offset < 0 ? offset : 0, offset < 0 ? std::ios::end : std::ios::beg);
            if (offset >= 0) f.seekg(offset);
            const std::streamoff at = f.tellg();
            char c = 0;
            f.read(&c, 1);
            c = static_cast<char>(c ^ 0x10);
            f.seekp(at);
            f.write(&c, 1);
        };

        // A pixel of the last image.
        flipByte(-1);
        DatasetBundle again = loadDataset(s, project, Streaming::Allowed);
        QVERIFY2(again.description.find("train image cache " + file + ": 1 of the stored images decoded again") !=
                         std::string::npos &&
                     again.description.find("failed their checksum (the cache file is damaged): " + names.back()) !=
                         std::string::npos,
                 again.description.c_str());
        QVERIFY2(again.description.find("reused: " + std::to_string(count - 1) + " images") != std::string::npos,
                 again.description.c_str());
        QCOMPARE(readAll(again), truth);
        QCOMPARE(streamOf(again)->decodedCount(), int64_t(1));
        again = DatasetBundle{};

        // The state byte of the first image (after the 64-byte header).
        flipByte(64);
        again = loadDataset(s, project, Streaming::Allowed);
        QVERIFY2(again.description.find("failed their checksum (the cache file is damaged): " + names.front()) !=
                     std::string::npos,
                 again.description.c_str());
        QCOMPARE(readAll(again), truth);
        again = DatasetBundle{};

        // A source file of another size, then one touched only in time: decoded again, named, and read as it is now.
        const std::string changed = names[1], touched = names[5];
        writePng(changed, flat(12, 12, 1, 201));
        fs::last_write_time(touched, fs::last_write_time(touched) + std::chrono::seconds(3));
        fresh.imageLoading = ImageLoading::Stream;
        const std::vector<float> truth2 = readAll(loadDataset(fresh, project, Streaming::Allowed));
        QVERIFY(truth2 != truth);
        again = loadDataset(s, project, Streaming::Allowed);
        QVERIFY2(again.description.find("2 of the stored images decoded again; their files changed: " + changed +
                                        " changed (size ") != std::string::npos &&
                     again.description.find(touched + " changed (modified since it was decoded)") != std::string::npos,
                 again.description.c_str());
        QCOMPARE(streamOf(again)->cache()->path(), file);  // the same file, two images decoded again
        QCOMPARE(readAll(again), truth2);
        QCOMPARE(streamOf(again)->decodedCount(), int64_t(2));
        again = DatasetBundle{};

        // The header: the whole file is rebuilt.
        flipByte(20);
        again = loadDataset(s, project, Streaming::Allowed);
        QVERIFY2(again.description.find("train image cache " + file + ": rebuilt: its header failed its checksum") !=
                     std::string::npos,
                 again.description.c_str());
        QCOMPARE(readAll(again), truth2);
        QCOMPARE(streamOf(again)->decodedCount(), count);
        again = DatasetBundle{};
        // And a clean reuse says nothing more than that.
        again = loadDataset(s, project, Streaming::Allowed);
        QVERIFY2(again.description.find("image cache " + file + ":") == std::string::npos, again.description.c_str());
        QCOMPARE(readAll(again), truth2);
        QCOMPARE(streamOf(again)->decodedCount(), int64_t(0));
    }

    // A file that turns bad after the listing: left out of its batch (labels stay with their images) and
    // reported once with its reason; strict, the loader's next() throws naming it.
    void streamedBadFile() {
        const std::string root = makeFolder("streambad", 4);
        DatasetSettings s = folderSettings(root);
        s.imageLoading = ImageLoading::Stream;
        const DatasetBundle b = loadDataset(s, "", Streaming::Allowed);
        const std::vector<uint8_t> good = readBytes(path("streambad/dog/img0.png"));
        writeBytes(path("streambad/dog/img0.png"), {good.begin(), good.begin() + long(good.size() - 20)});
        for (int epoch = 1; epoch <= 2; ++epoch) {
            DataLoader loader(b.train, 5, true, 9);
            loader.startEpoch(epoch);
            Batch batch;
            int64_t seen = 0;
            while (loader.next(batch)) {
                checkLabelsMatchPixels(
                    DataSplit{b.train.sampleShape, batch.size, batch.inputs, batch.labels, nullptr, {}, {}});
                QCOMPARE(batch.globalSize, batch.size);
                seen += batch.size;
            }
            QCOMPARE(seen, int64_t(11));
            const std::vector<SkippedFile> skipped = loader.takeSkipped();
            QCOMPARE(skipped.size(), size_t(1));
            QVERIFY(skipped[0].path.ends_with("dog/img0.png"));
            QVERIFY2(skipped[0].reason.find("truncated") != std::string::npos, skipped[0].reason.c_str());
            QVERIFY(loader.takeSkipped().empty());
        }
        writeBytes(path("streambad/dog/img0.png"), good);
        s.strictImages = true;
        const DatasetBundle strict = loadDataset(s, "", Streaming::Allowed);
        writeBytes(path("streambad/emu/img1.png"), {'x'});
        DataLoader loader(strict.train, 4, false, 9);
        loader.startEpoch(1);
        Batch batch;
        const std::string e = dataErrorOf([&] {
            while (loader.next(batch)) {
            }
        });
        QVERIFY2(e.find("img1.png") != std::string::npos && e.find("strict_images") != std::string::npos, e.c_str());
    }

    // A whole run on a streamed folder with a bad file: the run finishes, every good image is trained on
    // (batch 1: the bad file's batch is empty and takes no step), and the log names the file once with its
    // reason although the cache is read for a second epoch.
    void trainerStreamsAndReportsBadFiles() {
        const std::string root = makeFolder("trainstream", 4);
        writeBytes(path("trainstream/cat/bad.png"), {'x', 'y'});
        Project p = test::blobsMlpProject("stream", 64, 3);
        p.graph = Graph();
        test::addChain(p.graph, {{"Input", "input", Json{{"shape", {1, 8, 8}}}},
                                 {"Flatten", "flat"},
                                 {"Dense", "out", Json{{"units", 3}}}});
        p.dataset = folderSettings(root);
        p.dataset.validationPath = makeFolder("trainstream_val", 2);
        p.dataset.imageLoading = ImageLoading::Cache;
        p.dataset.normalization = NormalizationMode::Scale;
        p.training.learningRate = 0.01;
        p.training.batchSize = 1;
        p.training.epochs = 2;
        struct Log : TrainingObserver {
            std::vector<std::string> lines, errors;
            std::vector<EpochEvent> epochs;
            int steps = 0;
            void onLog(const std::string& m) override { lines.push_back(m); }
            void onError(const std::string& m) override { errors.push_back(m); }
            void onEpoch(const EpochEvent& e) override { epochs.push_back(e); }
            void onStep(const StepEvent&) override { ++steps; }
            int count(const std::string& part) const {
                return int(std::count_if(lines.begin(), lines.end(),
                                         [&](const std::string& l) { return l.find(part) != std::string::npos; }));
            }
        } log;
        CpuBackend backend;
        TrainerOptions options;
        options.projectPath = path("trainstream.strata");
        Trainer trainer(p, backend, &log, options);
        const bool ran = trainer.run();
        QVERIFY2(log.errors.empty(), log.errors.empty() ? "" : log.errors[0].c_str());
        QVERIFY(ran);
        QCOMPARE(log.epochs.size(), size_t(2));
        QCOMPARE(log.steps, 2 * 12);
        QCOMPARE(log.count("streamed (cache: train cache in memory"), 1);
        QCOMPARE(log.count("training: skipped " + path("trainstream/cat/bad.png") + ": "), 1);
        QVERIFY(log.epochs[1].valAccuracy >= 0.0);
    }

    // Memory mode names the files it skipped as streamed loading does (it said only "26 skipped"): the same
    // lines, "training: skipped PATH: REASON" for the first 20 and "training: and N more files skipped", once
    // each, validation files under "validation".
    void trainerListsSkippedFilesInEveryMode() {
        const std::string root = makeFolder("trainskip", 4);
        for (int i = 0; i < 24; ++i) writeBytes(path("trainskip/cat/zero" + std::to_string(10 + i) + ".png"), {});
        fs::create_symlink("nowhere.png", path("trainskip/dog/dangling.png"));
        const std::string val = makeFolder("trainskip_val", 2);
        writeBytes(path("trainskip_val/emu/bad.png"), {'x'});
        Project p = test::blobsMlpProject("skip", 64, 3);
        p.graph = Graph();
        test::addChain(p.graph, {{"Input", "input", Json{{"shape", {1, 8, 8}}}},
                                 {"Flatten", "flat"},
                                 {"Dense", "out", Json{{"units", 3}}}});
        p.dataset = folderSettings(root);
        p.dataset.validationPath = val;
        p.dataset.normalization = NormalizationMode::Scale;
        p.training.batchSize = 4;
        p.training.epochs = 2;
        struct Log : TrainingObserver {
            std::vector<std::string> skipped, errors;
            void onLog(const std::string& m) override {
                if (m.find("skipped") != std::string::npos && m.find("Image folder") == std::string::npos)
                    skipped.push_back(m);
            }
            void onError(const std::string& m) override { errors.push_back(m); }
        };
        std::map<ImageLoading, std::vector<std::string>> lines;
        for (ImageLoading loading : {ImageLoading::Memory, ImageLoading::Stream, ImageLoading::Cache}) {
            p.dataset.imageLoading = loading;
            Log log;
            CpuBackend backend;
            TrainerOptions options;
            options.projectPath = path("trainskip.strata");
            Trainer trainer(p, backend, &log, options);
            QVERIFY(trainer.run());
            QVERIFY(log.errors.empty());
            lines[loading] = log.skipped;
        }
        const std::vector<std::string>& memory = lines[ImageLoading::Memory];
        QCOMPARE(memory.size(), size_t(22));
        QVERIFY2(memory[0].starts_with("training: skipped " + path("trainskip/dog/dangling.png") +
                                       ": a symbolic link to nothing"),
                 memory[0].c_str());
        QCOMPARE(memory[1], "training: skipped " + path("trainskip/cat/zero10.png") + ": the file is empty (0 bytes)");
        QVERIFY2(memory[20] == "training: and 5 more files skipped", memory[20].c_str());
        QVERIFY2(memory[21].starts_with("validation: skipped " + path("trainskip_val/emu/bad.png") + ": "),
                 memory[21].c_str());
        QCOMPARE(lines[ImageLoading::Stream], memory);
        QCOMPARE(lines[ImageLoading::Cache], memory);
    }

    // ---- image_to_image, image_target folder (issue 38) ----

    // The targets are the second folder's images of the same relative names, normalized as the inputs are; the
    // hold-out, the limits and a validation folder keep each pair together; the class folders are only a layout.
    void pairedFolderTargets() {
        makePairs("pairs", 6);
        DatasetSettings s = pairedSettings("pairs");
        s.validationSplit = 0.25;
        DatasetBundle b = loadDataset(s, "");
        QCOMPARE(b.train.count + b.validation.count, int64_t(12));
        QVERIFY(b.validation.count > 0);
        QCOMPARE(b.numClasses, 0);
        QVERIFY2(b.description.find("target: the images of out") != std::string::npos, b.description.c_str());
        checkInverted(b.train);
        checkInverted(b.validation);
        // A batch carries them (the loader's generic target path).
        DataLoader loader(b.train, 4, true, 3);
        loader.startEpoch(0);
        Batch batch;
        QVERIFY(loader.next(batch));
        for (size_t i = 0; i < batch.inputs.size(); ++i)
            QVERIFY(std::fabs(batch.targets[i] - (1 - batch.inputs[i])) < 1e-6f);
        s.trainLimit = 5;
        checkInverted(loadDataset(s, "").train);
        // A validation folder pairs with validation_target_path.
        makePairs("pairs_val", 2);
        s.validationPath = path("pairs_val/in");
        s.validationTargetPath = path("pairs_val/out");
        b = loadDataset(s, "");
        QCOMPARE(b.validation.count, int64_t(4));
        checkInverted(b.validation);
        QCOMPARE(readDataFacts(s, "").targetShape, (Shape{1, 8, 8}));
    }

    // A missing target, an extra one and a validation folder without targets are refused, naming the file or the
    // setting; the data check finds the missing one without decoding. A target that cannot be read
    // leaves its pair out with the reason (strict_images stops at it).
    void pairedFolderMismatches() {
        makePairs("mis", 3);
        const DatasetSettings s = pairedSettings("mis");
        fs::remove(path("mis/out/b/k1.png"));
        std::string e = dataErrorOf([&] { loadDataset(s, ""); });
        QVERIFY2(
            e.find(path("mis/in/b/k1.png") + " has no target image " + path("mis/out/b/k1.png")) != std::string::npos,
            e.c_str());
        e = dataErrorOf([&] { readDataFacts(s, ""); });
        QVERIFY2(e.find("mis/out/b/k1.png") != std::string::npos, e.c_str());
        fs::remove(path("mis/in/b/k1.png"));
        QCOMPARE(loadDataset(s, "").train.count, int64_t(5));
        QVERIFY(writePng(path("mis/out/a/extra.png"), flat(8, 8, 1, 9)));
        e = dataErrorOf([&] { loadDataset(s, ""); });
        QVERIFY2(e.starts_with("extra.png: ") &&
                     e.find("target image without an input image " + path("mis/in/a/extra.png")) != std::string::npos,
                 e.c_str());
        fs::remove(path("mis/out/a/extra.png"));

        DatasetSettings v = s;
        v.validationPath = path("mis/in");
        e = dataErrorOf([&] { loadDataset(v, ""); });
        QVERIFY2(e.find("dataset.validation_target_path is empty") != std::string::npos, e.c_str());

        writeBytes(path("mis/out/a/k2.png"), {'x'});
        DatasetBundle b = loadDataset(s, "");
        QCOMPARE(b.train.count, int64_t(4));
        checkInverted(b.train);
        QCOMPARE(b.skipped.size(), size_t(1));
        QCOMPARE(b.skipped[0].path, path("mis/out/a/k2.png"));
        QVERIFY2(b.skipped[0].reason.starts_with("target image: "), b.skipped[0].reason.c_str());
        v = s;
        v.strictImages = true;
        e = dataErrorOf([&] { loadDataset(v, ""); });
        QVERIFY2(e.starts_with("k2.png: "), e.c_str());
    }

    // Streamed and cached paired folders (image_loading stream, cache; the caches in files beside the project, read
    // again by a second load): the loader gives the in-memory path's batches, inputs and targets, both splits, two
    // epochs; a missing or extra target is named as in memory; a target that cannot be read leaves its pair out,
    // named with the reason (strict_images: the loader stops naming it).
    void pairedFolderStreamed() {
        makePairs("pstream", 6);
        DatasetSettings s = pairedSettings("pstream");
        s.validationSplit = 0.25;
        const std::string project = path("pstream/p.strata");
        const DatasetBundle memory = loadDataset(s, project, Streaming::Allowed);
        QVERIFY(!memory.train.streamed());
        for (ImageLoading loading : {ImageLoading::Stream, ImageLoading::Cache, ImageLoading::Cache}) {
            DatasetSettings v = s;
            v.imageLoading = loading;
            v.cacheMemoryMb = 0;  // cache: in files
            v.decodeThreads = 2;
            const DatasetBundle b = loadDataset(v, project, Streaming::Allowed);
            QVERIFY(b.train.streamed() && b.validation.streamed());
            QVERIFY(b.train.source->hasTargets());
            QCOMPARE(b.train.targetShape, (Shape{1, 8, 8}));
            QCOMPARE(b.validation.targetShape, (Shape{1, 8, 8}));
            QVERIFY(b.train.targets.empty());
            for (const auto& [fromMemory, fromStream] :
                 {std::pair{&memory.train, &b.train}, std::pair{&memory.validation, &b.validation}}) {
                QCOMPARE(fromStream->count, fromMemory->count);
                DataLoader a(*fromMemory, 3, true, 5), c(*fromStream, 3, true, 5);
                for (int epoch = 1; epoch <= 2; ++epoch) {
                    a.startEpoch(epoch);
                    c.startEpoch(epoch);
                    Batch x, y;
                    while (a.next(x)) {
                        QVERIFY(c.next(y));
                        QCOMPARE(y.size, x.size);
                        QCOMPARE(y.targets.size(), x.targets.size());
                        QCOMPARE(y.inputs, x.inputs);
                        QCOMPARE(y.targets, x.targets);
                    }
                    QVERIFY(!c.next(y));
                }
            }
            if (loading == ImageLoading::Cache) {
                QVERIFY2(b.description.find("train_targets cache in") != std::string::npos, b.description.c_str());
                QVERIFY2(b.description.find("validation_targets cache in") != std::string::npos, b.description.c_str());
            }
        }
        // The second cached load found both the inputs' and the targets' files of the first.
        DatasetSettings cached = s;
        cached.imageLoading = ImageLoading::Cache;
        cached.cacheMemoryMb = 0;
        const std::string d = loadDataset(cached, project, Streaming::Allowed).description;
        QVERIFY2(d.find("train cache in") != std::string::npos && d.find("train_targets cache in") != std::string::npos,
                 d.c_str());
        int reused = 0;
        for (size_t at = d.find("(reused: "); at != std::string::npos; at = d.find("(reused: ", at + 1)) ++reused;
        QVERIFY2(reused == 4, d.c_str());  // train, validation and their targets

        DatasetSettings v = s;
        v.imageLoading = ImageLoading::Stream;
        v.validationSplit = 0;
        fs::remove(path("pstream/out/b/k1.png"));
        std::string e = dataErrorOf([&] { loadDataset(v, project, Streaming::Allowed); });
        QVERIFY2(e.find(path("pstream/in/b/k1.png") + " has no target image " + path("pstream/out/b/k1.png")) !=
                     std::string::npos,
                 e.c_str());
        fs::remove(path("pstream/in/b/k1.png"));
        QVERIFY(writePng(path("pstream/out/a/extra.png"), flat(8, 8, 1, 9)));
        e = dataErrorOf([&] { loadDataset(v, project, Streaming::Allowed); });
        QVERIFY2(e.find("target image without an input image " + path("pstream/in/a/extra.png")) != std::string::npos,
                 e.c_str());
        fs::remove(path("pstream/out/a/extra.png"));

        writeBytes(path("pstream/out/a/k2.png"), {'x'});
        const DatasetBundle b = loadDataset(v, project, Streaming::Allowed);
        QCOMPARE(b.train.count, int64_t(11));  // listed; the bad target is found while reading
        DataLoader loader(b.train, 4, false, 1);
        loader.startEpoch(1);
        Batch batch;
        int64_t seen = 0;
        while (loader.next(batch)) {
            seen += batch.size;
            QCOMPARE(batch.targets.size(), batch.inputs.size());
            for (size_t i = 0; i < batch.inputs.size(); ++i)
                QVERIFY(std::fabs(batch.targets[i] - (1 - batch.inputs[i])) < 1e-6f);
        }
        QCOMPARE(seen, int64_t(10));
        const std::vector<SkippedFile> skipped = loader.takeSkipped();
        QCOMPARE(skipped.size(), size_t(1));
        QCOMPARE(skipped[0].path, path("pstream/in/a/k2.png"));
        QVERIFY2(skipped[0].reason.starts_with("target image " + path("pstream/out/a/k2.png") + ": "),
                 skipped[0].reason.c_str());
        v.strictImages = true;
        const DatasetBundle strict = loadDataset(v, project, Streaming::Allowed);
        DataLoader stops(strict.train, 4, false, 1);
        stops.startEpoch(1);
        e = dataErrorOf([&] {
            while (stops.next(batch)) {
            }
        });
        QVERIFY2(e.starts_with("k2.png: "), e.c_str());
    }

    // A 1x1 convolution learns the inversion from the paired folders: the loss falls tenfold in a short run, and the
    // export check scores the files on the paired targets.
    void pairedFolderTrains() {
        makePairs("pairtrain", 16);
        Project p = test::blobsMlpProject("pairs", 64, 3);
        p.graph = Graph();
        test::addChain(p.graph, {{"Input", "input", Json{{"shape", {1, 8, 8}}}},
                                 {"Conv2D", "conv", Json{{"filters", 1}, {"kernel", {1, 1}}}}});
        p.dataset = pairedSettings("pairtrain");
        p.dataset.validationSplit = 0.25;
        p.training.loss = LossKind::Mse;
        p.training.optimizer = OptimizerKind::Adam;
        p.training.learningRate = 0.05;
        p.training.batchSize = 4;
        p.training.epochs = 12;
        p.training.checkpointDir = path("pairtrain_ck");
        struct Log : TrainingObserver {
            std::vector<EpochEvent> epochs;
            std::vector<std::string> errors;
            void onEpoch(const EpochEvent& e) override { epochs.push_back(e); }
            void onError(const std::string& m) override { errors.push_back(m); }
        } log;
        CpuBackend backend;
        TrainerOptions options;
        options.projectPath = path("pairtrain.strata");
        Trainer trainer(p, backend, &log, options);
        QVERIFY(trainer.run());
        QVERIFY2(log.errors.empty(), log.errors.empty() ? "" : log.errors[0].c_str());
        QCOMPARE(log.epochs.size(), size_t(12));
        const double first = log.epochs.front().trainLoss, last = log.epochs.back().trainLoss;
        QVERIFY2(last < first / 10, (std::to_string(first) + " -> " + std::to_string(last)).c_str());
        QVERIFY2(log.epochs.back().valAccuracy > 20.0,
                 std::to_string(log.epochs.back().valAccuracy).c_str());  // PSNR, dB
        // Streamed, the same batches train the same run: every epoch's losses and PSNR as in memory.
        Project streamed = p;
        streamed.dataset.imageLoading = ImageLoading::Stream;
        streamed.training.checkpointDir = path("pairtrain_stream_ck");
        Log again;
        QVERIFY(Trainer(streamed, backend, &again, options).run());
        QVERIFY2(again.errors.empty(), again.errors.empty() ? "" : again.errors[0].c_str());
        QCOMPARE(again.epochs.size(), log.epochs.size());
        for (size_t i = 0; i < log.epochs.size(); ++i) {
            QVERIFY(std::fabs(again.epochs[i].trainLoss - log.epochs[i].trainLoss) <= 1e-6 * log.epochs[i].trainLoss);
            QVERIFY(std::fabs(again.epochs[i].valAccuracy - log.epochs[i].valAccuracy) <= 1e-4);
        }
        // Every export format scores the paired validation images as the live model does (the export check).
        const ExportModel live = exportModelFromCheckpoint(loadCheckpoint(path("pairtrain_ck")));
        const DatasetBundle data = loadDataset(p.dataset, "");
        for (ExportFormat f : exportFormats()) {
            const std::string file = path(std::string("pairtrain") + exportFormatExtension(f));
            writeExport(file, live, ExportRequest{f, ExportPrecision::F32, 13});
            const ExportCheckResult e = checkExport(live, file, data.validation, data.normalization);
            QCOMPARE(e.scoreName, std::string("PSNR"));
            QVERIFY2(std::fabs(e.liveScore - e.fileScore) < 1e-3 && e.liveScore > 20.0,
                     (file + ": " + std::to_string(e.liveScore) + " vs " + std::to_string(e.fileScore)).c_str());
        }
    }
};

QTEST_GUILESS_MAIN(TestImageFolder)
#include "test_image_folder.moc"
