// Safetensors reader and writer: bit-exact round trips and one FormatError per kind of corrupt file.
#include <QtTest>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/io/Half.h"
#include "core/io/Safetensors.h"
#include "tests/support/TestFiles.h"

using namespace strata;
using test::readBytes;
using test::writeBytes;

namespace {

// A file with a hand-written header (and `data` after it), to reach reader paths the writer never produces.
std::vector<uint8_t> rawFile(const std::string& header, const std::vector<uint8_t>& data) {
    std::vector<uint8_t> b;
    for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(uint64_t(header.size()) >> (8 * i)));
    for (char c : header) b.push_back(static_cast<uint8_t>(c));
    for (uint8_t c : data) b.push_back(c);
    return b;
}

}  // namespace

class TestFormatsSafetensors : public QObject {
    Q_OBJECT

private:
    QTemporaryDir m_dir;
    std::string path(const char* name) const { return (m_dir.path() + "/" + name).toStdString(); }

    // The FormatError reading `file` throws, checked to name the file and contain `needle`; fails the test otherwise.
    FormatError expectError(const std::string& file, const std::string& needle) {
        return test::expectFormatError([&] { readSafetensors(file); }, file, needle);
    }

private slots:
    void roundTripBitExact() {
        std::mt19937 rng(7);
        std::normal_distribution<float> nd;
        std::vector<float> w(3 * 5);
        for (float& v : w) v = nd(rng);
        w[0] = -0.f;  // sign of zero and subnormals must survive
        w[1] = std::numeric_limits<float>::denorm_min();
        w[2] = std::numeric_limits<float>::infinity();
        std::vector<TensorRecord> in;
        in.push_back(makeF32Record("dense1.weight", Shape{3, 5}, w));
        in.push_back(makeF32Record("dense1.bias", Shape{3}, {1.f, 2.f, 3.f}));
        in.push_back(makeF32Record("scalar", Shape{}, {42.f}));
        TensorRecord ids{"ids", DType::I32, Shape{2}, {1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}};
        in.push_back(ids);
        TensorRecord bytes{"raw", DType::U8, Shape{3}, {1, 2, 3}};
        in.push_back(bytes);
        TensorRecord half{"h", DType::F16, Shape{1}, {0x00, 0x3c}};
        in.push_back(half);
        TensorRecord empty{"empty", DType::BF16, Shape{0, 4}, {}};
        in.push_back(empty);
        const std::map<std::string, std::string> meta{{"format", "pt"}, {"strata.project", "{\"a\": 1}"}};
        writeSafetensors(path("rt.safetensors"), in, meta);

        // Header length is a multiple of 8 and the data start is 8-aligned.
        const auto raw = readBytes(path("rt.safetensors"));
        uint64_t n;
        std::memcpy(&n, raw.data(), 8);
        QCOMPARE(n % 8, uint64_t(0));

        const SafetensorsContents out = readSafetensors(path("rt.safetensors"));
        QCOMPARE(out.metadata, meta);
        QCOMPARE(out.tensors.size(), in.size());
        for (const TensorRecord& t : in) {
            const TensorRecord* r = out.find(t.name);
            QVERIFY2(r, t.name.c_str());
            QCOMPARE(r->dtype, t.dtype);
            QCOMPARE(r->shape, t.shape);
            QVERIFY(r->data == t.data);
        }
        QVERIFY(out.find("missing") == nullptr);
        const std::vector<float> back = recordToFloats(*out.find("dense1.weight"));
        QCOMPARE(std::memcmp(back.data(), w.data(), w.size() * 4), 0);
        QCOMPARE(recordToFloats(*out.find("h"))[0], 1.f);
        // No temporary file is left behind.
        int files = 0;
        for (const auto& e : std::filesystem::directory_iterator(m_dir.path().toStdString()))
            files += e.path().filename().string().rfind("rt.safetensors", 0) == 0;
        QCOMPARE(files, 1);
    }

    void writerRejectsBadRecords() {
        TensorRecord bad{"x", DType::F32, Shape{2}, {0, 0, 0, 0}};
        QVERIFY_THROWS_EXCEPTION(std::runtime_error, writeSafetensors(path("bad.safetensors"), {bad}, {}));
        TensorRecord a = makeF32Record("x", Shape{1}, {1.f});
        QVERIFY_THROWS_EXCEPTION(std::runtime_error, writeSafetensors(path("bad.safetensors"), {a, a}, {}));
    }

    void halfConversions() {
        // Exhaustive: every finite half survives half -> float -> half.
        for (uint32_t h = 0; h < 0x10000; ++h) {
            const uint16_t bits = static_cast<uint16_t>(h);
            if ((bits & 0x7c00) == 0x7c00 && (bits & 0x3ff)) continue;  // NaN payloads
            QCOMPARE(floatToHalf(halfToFloat(bits)), bits);
        }
        QCOMPARE(floatToHalf(65504.f), uint16_t(0x7bff));
        QCOMPARE(floatToHalf(65520.f), uint16_t(0x7c00));             // rounds to inf
        QCOMPARE(floatToHalf(1.f + 1.f / 2048.f), uint16_t(0x3c00));  // tie to even
        QCOMPARE(floatToHalf(1.f + 3.f / 2048.f), uint16_t(0x3c02));
        QCOMPARE(floatToHalf(std::ldexp(1.f, -25)), uint16_t(0));  // tie to even zero
        QCOMPARE(floatToHalf(std::ldexp(1.5f, -25)), uint16_t(1));
        QVERIFY(std::isnan(halfToFloat(floatToHalf(std::numeric_limits<float>::quiet_NaN()))));
        QCOMPARE(bfloat16ToFloat(floatToBFloat16(1.5f)), 1.5f);
        QCOMPARE(floatToBFloat16(1.f + std::ldexp(1.f, -8)), uint16_t(0x3f80));  // tie to even
    }

    void truncatedBelowEightBytes() {
        writeBytes(path("short.safetensors"), {1, 2, 3});
        QCOMPARE(expectError(path("short.safetensors"), "shorter than").offset(), int64_t(0));
        writeBytes(path("zero.safetensors"), {});
        expectError(path("zero.safetensors"), "shorter than");
    }

    void missingFile() { expectError(path("nope.safetensors"), "cannot open"); }

    void headerLengthLies() {
        writeSafetensors(path("ok.safetensors"), {makeF32Record("w", Shape{4}, {1, 2, 3, 4})}, {});
        auto b = readBytes(path("ok.safetensors"));
        const uint64_t lie = b.size();  // header claims more than the file holds
        std::memcpy(b.data(), &lie, 8);
        writeBytes(path("lie.safetensors"), b);
        expectError(path("lie.safetensors"), "runs past the end");
        const uint64_t huge = ~0ull;
        std::memcpy(b.data(), &huge, 8);
        writeBytes(path("huge.safetensors"), b);
        expectError(path("huge.safetensors"), "exceeds");
    }

    void truncatedData() {
        writeSafetensors(path("ok.safetensors"), {makeF32Record("w", Shape{4}, {1, 2, 3, 4})}, {});
        auto b = readBytes(path("ok.safetensors"));
        b.resize(b.size() - 3);
        writeBytes(path("trunc.safetensors"), b);
        expectError(path("trunc.safetensors"), "run past the");
    }

    void invalidJson() {
        writeBytes(path("json.safetensors"), rawFile("{\"w\": {\"dtype\": ", {}));
        const FormatError e = expectError(path("json.safetensors"), "not valid JSON");
        QVERIFY(e.offset() >= 8);
        writeBytes(path("arr.safetensors"), rawFile("[1, 2]  ", {}));
        expectError(path("arr.safetensors"), "not a JSON object");
    }

    void unknownDType() {
        writeBytes(path("dt.safetensors"),
                   rawFile(R"({"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", std::vector<uint8_t>(8)));
        expectError(path("dt.safetensors"), "unknown dtype 'F64'");
    }

    void shapeOffsetMismatch() {
        writeBytes(path("mm.safetensors"),
                   rawFile(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::vector<uint8_t>(8)));
        const FormatError e = expectError(path("mm.safetensors"), "needs 12");
        QVERIFY(e.offset() > 8);
    }

    void overflowingShape() {
        writeBytes(path("ov.safetensors"),
                   rawFile(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
                           std::vector<uint8_t>(8)));
        expectError(path("ov.safetensors"), "needs more");
    }

    void overlappingOffsets() {
        writeBytes(path("ol.safetensors"), rawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                                   R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                                   std::vector<uint8_t>(12)));
        expectError(path("ol.safetensors"), "overlaps");
    }

    void outOfRangeOffsets() {
        writeBytes(path("oor.safetensors"),
                   rawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", std::vector<uint8_t>(8)));
        expectError(path("oor.safetensors"), "run past the 8-byte data section");
        writeBytes(path("rev.safetensors"),
                   rawFile(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", std::vector<uint8_t>(8)));
        expectError(path("rev.safetensors"), "end before they begin");
    }

    void holesAndTrailingBytes() {
        writeBytes(path("hole.safetensors"), rawFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                                     R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                                                     std::vector<uint8_t>(12)));
        const FormatError e = expectError(path("hole.safetensors"), "gap of 4 bytes");
        QVERIFY(e.offset() > 0);
        writeBytes(path("tail.safetensors"),
                   rawFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", std::vector<uint8_t>(6)));
        expectError(path("tail.safetensors"), "2 trailing bytes");
    }

    void malformedEntries() {
        writeBytes(path("m1.safetensors"), rawFile(R"({"a":{"dtype":"F32","shape":[1]}})", std::vector<uint8_t>(4)));
        expectError(path("m1.safetensors"), "missing \"data_offsets\"");
        writeBytes(path("m2.safetensors"),
                   rawFile(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", std::vector<uint8_t>(4)));
        expectError(path("m2.safetensors"), "shape");
        writeBytes(path("m3.safetensors"), rawFile(R"({"__metadata__":{"k":1}})", {}));
        expectError(path("m3.safetensors"), "not a string");
        writeBytes(path("m4.safetensors"),
                   rawFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", std::vector<uint8_t>(4)));
        expectError(path("m4.safetensors"), "data_offsets");
    }
};

QTEST_GUILESS_MAIN(TestFormatsSafetensors)
#include "test_formats_safetensors.moc"
