// GGUF v3 reader and writer: byte layout against a hand-built file, bit-exact F32 round trips,
// F16 and Q8_0 error bounds, and a FormatError for each kind of corrupt file.
#include <QtTest>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

#include "core/export/Gguf.h"
#include "core/io/Half.h"
#include "tests/support/TestFiles.h"

using namespace strata;
using test::readBytes;
using test::writeBytes;

namespace {

// Hand-assembles GGUF bytes, independently of the writer under test.
struct Bytes {
    std::vector<uint8_t> b;
    Bytes& u32(uint32_t v) { return raw(&v, 4); }
    Bytes& u64(uint64_t v) { return raw(&v, 8); }
    Bytes& f32(float v) { return raw(&v, 4); }
    Bytes& u8(uint8_t v) { return raw(&v, 1); }
    Bytes& str(const std::string& s) {
        u64(s.size());
        return raw(s.data(), s.size());
    }
    Bytes& raw(const void* p, size_t n) {
        b.insert(b.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
        return *this;
    }
    Bytes& pad(size_t a) {
        while (b.size() % a) b.push_back(0);
        return *this;
    }
};

std::vector<float> randomValues(size_t n, unsigned seed, float scale = 1.f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = nd(rng);
    return v;
}

}  // namespace

class TestFormatsGguf : public QObject {
    Q_OBJECT

private:
    QTemporaryDir m_dir;
    std::string path(const char* name) const { return (m_dir.path() + "/" + name).toStdString(); }

    // The FormatError reading `file` throws, checked to name the file and contain `needle`; fails the test otherwise.
    FormatError expectError(const std::string& file, const std::string& needle) {
        return test::expectFormatError([&] { readGguf(file); }, file, needle);
    }

    // A valid file: kv "general.alignment" = 32 and one F32 tensor "w" of shape [2, 3].
    Bytes validFile() {
        Bytes f;
        f.u32(0x46554747).u32(3).u64(1).u64(1);
        f.str("general.alignment").u32(4).u32(32);
        f.str("w").u32(2).u64(3).u64(2).u32(0).u64(0);
        f.pad(32);
        for (int i = 0; i < 6; ++i) f.f32(static_cast<float>(i));
        f.pad(32);
        return f;
    }

private slots:
    void writerMatchesDocumentedLayout() {
        GgufFile g;
        g.setUInt32("general.alignment", 32);
        g.addTensor("w", Shape{2, 3}, {0, 1, 2, 3, 4, 5});
        writeGguf(path("layout.gguf"), g);
        QVERIFY(readBytes(path("layout.gguf")) == validFile().b);
    }

    void readsHandBuiltFile() {
        writeBytes(path("hand.gguf"), validFile().b);
        const GgufFile g = readGguf(path("hand.gguf"));
        QCOMPARE(g.getUInt32("general.alignment"), 32u);
        QCOMPARE(g.tensors().size(), size_t(1));
        QCOMPARE(g.tensors()[0].shape, (Shape{2, 3}));  // dims come back outermost first
        QCOMPARE(g.tensorFloats("w"), (std::vector<float>{0, 1, 2, 3, 4, 5}));
    }

    void roundTripBitExactF32AndMetadata() {
        GgufFile g;
        g.setString("general.architecture", "strata");
        g.setString("strata.project", "{\"name\": \"x\", \"ü\": 1}");
        g.setStringArray("strata.class_labels", {"T-shirt", "Trouser", ""});
        g.setFloat32("strata.normalization.scale", 1.f / 255.f);
        g.setBool("flag", true);
        GgufValue nested;  // array of arrays of i32
        nested.type = GgufValueType::Array;
        nested.arrayType = GgufValueType::Array;
        for (int k = 0; k < 2; ++k) {
            GgufValue inner;
            inner.type = GgufValueType::Array;
            inner.arrayType = GgufValueType::Int32;
            for (int j = 0; j <= k; ++j) {
                GgufValue e;
                e.type = GgufValueType::Int32;
                e.i = -j - k;
                inner.array.push_back(e);
            }
            nested.array.push_back(inner);
        }
        g.setValue("nested", nested);
        GgufValue big;
        big.type = GgufValueType::UInt64;
        big.u = ~0ull;
        g.setValue("big", big);
        std::vector<float> w = randomValues(7 * 5 * 3 * 3, 1);
        w[3] = -0.f;
        w[4] = std::numeric_limits<float>::denorm_min();
        g.addTensor("conv.weight", Shape{7, 5, 3, 3}, w);
        g.addTensor("conv.bias", Shape{7}, randomValues(7, 2));
        writeGguf(path("rt.gguf"), g);

        const GgufFile r = readGguf(path("rt.gguf"));
        QCOMPARE(r.getString("general.architecture"), std::string("strata"));
        QCOMPARE(r.getString("strata.project"), g.getString("strata.project"));
        QCOMPARE(r.getStringArray("strata.class_labels"), (std::vector<std::string>{"T-shirt", "Trouser", ""}));
        QCOMPARE(r.getFloat32("strata.normalization.scale"), 1.f / 255.f);
        QVERIFY(r.find("flag")->b);
        QCOMPARE(r.find("big")->u, ~0ull);
        const GgufValue* n = r.find("nested");
        QVERIFY(n && n->array.size() == 2 && n->array[1].array.size() == 2 && n->array[1].array[1].i == -2);
        QVERIFY_THROWS_EXCEPTION(std::runtime_error, r.getString("strata.class_labels"));
        QVERIFY_THROWS_EXCEPTION(std::runtime_error, r.getString("missing"));
        QCOMPARE(r.tensors().size(), size_t(2));
        QCOMPARE(r.findTensor("conv.weight")->shape, (Shape{7, 5, 3, 3}));
        const std::vector<float> back = r.tensorFloats("conv.weight");
        QCOMPARE(std::memcmp(back.data(), w.data(), w.size() * 4), 0);
        QVERIFY(r.findTensor("conv.bias")->data == g.findTensor("conv.bias")->data);
    }

    void f16ErrorBound() {
        const std::vector<float> w = randomValues(64 * 10, 3, 0.1f);
        GgufFile g;
        g.addTensor("w", Shape{10, 64}, w, GgufTensorType::F16);
        writeGguf(path("f16.gguf"), g);
        const std::vector<float> back = readGguf(path("f16.gguf")).tensorFloats("w");
        double worst = 0;
        for (size_t i = 0; i < w.size(); ++i) {
            const double rel = std::fabs(back[i] - w[i]) / std::max(std::fabs(w[i]), 6.1e-5f);
            worst = std::max(worst, rel);
        }
        QVERIFY2(worst <= 1.0 / 2048 + 1e-9, qPrintable(QString::number(worst)));
    }

    void q8ErrorBound() {
        std::vector<float> w = randomValues(96 * 4, 4, 0.05f);
        for (int j = 0; j < 32; ++j) w[32 + j] = 0.f;  // an all-zero block has scale 0
        w[70] = 3.f;                                   // an outlier sets its block's scale
        GgufFile g;
        g.addTensor("w", Shape{4, 96}, w, GgufTensorType::Q8_0);
        QCOMPARE(g.findTensor("w")->data.size(), size_t(12 * 34));
        writeGguf(path("q8.gguf"), g);
        const GgufFile r = readGguf(path("q8.gguf"));
        QCOMPARE(r.findTensor("w")->type, GgufTensorType::Q8_0);
        const std::vector<float> back = r.tensorFloats("w");
        for (size_t b = 0; b < w.size() / 32; ++b) {
            float amax = 0;
            for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(w[b * 32 + j]));
            // Half a quantization step, plus what the f16 rounding of the scale can add at the block maximum.
            const float step = amax / 127.f;
            const float bound = 0.5f * step * (1 + 1.f / 1024) + amax / 1024;
            for (int j = 0; j < 32; ++j) {
                const float err = std::fabs(back[b * 32 + j] - w[b * 32 + j]);
                if (err > bound) QFAIL(qPrintable(QString("block %1 err %2 > %3").arg(b).arg(err).arg(bound)));
            }
        }
        for (int j = 0; j < 32; ++j) QCOMPARE(back[32 + j], 0.f);
        // Inner dimension not a multiple of 32: refused, not silently padded.
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 g.addTensor("bad", Shape{3, 10}, std::vector<float>(30), GgufTensorType::Q8_0));
    }

    // Issue 34: the reader bounded a tensor by a byte per element, so a Q4_0 tensor (18 bytes per 32 values) with
    // more values than the file has bytes was refused as "larger than the file". Every type, a tensor of more
    // values than the file's bytes, read back.
    void everyTypeReadsBackWhenItHasMoreValuesThanTheFileHasBytes() {
        for (GgufTensorType type : ggufTensorTypes()) {
            const GgufTypeLayout layout = ggufTypeLayout(type);
            if (layout.blockBytes >= layout.blockValues) continue;  // a byte or more per value: cannot happen
            GgufFile g;
            const std::vector<float> v = randomValues(64 * 4096, 9);
            g.addTensor("w", Shape{64, 4096}, v, type);
            setGgufChecksums(g);
            writeGguf(path("dense.gguf"), g);
            QVERIFY(readBytes(path("dense.gguf")).size() < v.size());
            try {
                const GgufFile back = readGguf(path("dense.gguf"));
                QCOMPARE(back.tensorFloats("w"), g.tensorFloats("w"));
            } catch (const std::exception& e) {
                QFAIL((std::string(ggufTensorTypeName(type)) + ": " + e.what()).c_str());
            }
        }
        QVERIFY(ggufTypeLayout(GgufTensorType::Q4_0).blockBytes < ggufTypeLayout(GgufTensorType::Q4_0).blockValues);
    }

    void truncated() {
        auto b = validFile().b;
        for (size_t cut : {size_t(0), size_t(10), size_t(30), size_t(60), b.size() - 9}) {
            writeBytes(path("trunc.gguf"), std::vector<uint8_t>(b.begin(), b.begin() + static_cast<long>(cut)));
            try {
                readGguf(path("trunc.gguf"));
                QFAIL(qPrintable(QString("no error for a file cut at %1").arg(cut)));
            } catch (const FormatError& e) {
                QVERIFY(std::string(e.what()).find("trunc.gguf") != std::string::npos);
            }
        }
        writeBytes(path("t2.gguf"), std::vector<uint8_t>(b.begin(), b.begin() + 10));
        expectError(path("t2.gguf"), "shorter than the 24-byte");
        writeBytes(path("t3.gguf"), std::vector<uint8_t>(b.begin(), b.end() - 10));
        expectError(path("t3.gguf"), "runs past the");
    }

    void wrongMagicAndVersion() {
        auto b = validFile().b;
        b[0] = 'X';
        writeBytes(path("magic.gguf"), b);
        QCOMPARE(expectError(path("magic.gguf"), "not a GGUF file").offset(), int64_t(0));
        b = validFile().b;
        b[4] = 2;
        writeBytes(path("ver.gguf"), b);
        QCOMPARE(expectError(path("ver.gguf"), "version 2").offset(), int64_t(4));
    }

    void countsLie() {
        auto b = validFile().b;
        const uint64_t many = 1ull << 40;
        std::memcpy(b.data() + 8, &many, 8);
        writeBytes(path("tc.gguf"), b);
        expectError(path("tc.gguf"), "tensor count");
        b = validFile().b;
        std::memcpy(b.data() + 16, &many, 8);
        writeBytes(path("kc.gguf"), b);
        expectError(path("kc.gguf"), "metadata count");
        b = validFile().b;
        const uint64_t two = 2;  // one more tensor than the file describes
        std::memcpy(b.data() + 8, &two, 8);
        writeBytes(path("tc2.gguf"), b);
        readGgufShouldFail(path("tc2.gguf"));
    }

    void readGgufShouldFail(const std::string& file) { QVERIFY_THROWS_EXCEPTION(FormatError, readGguf(file)); }

    void stringLengthLies() {
        auto b = validFile().b;
        const uint64_t huge = 1ull << 50;
        std::memcpy(b.data() + 24, &huge, 8);  // length of the first key
        writeBytes(path("sl.gguf"), b);
        QCOMPARE(expectError(path("sl.gguf"), "string length").offset(), int64_t(24));
    }

    void badTypes() {
        Bytes f;
        f.u32(0x46554747).u32(3).u64(0).u64(1).str("k").u32(13).u32(0);
        writeBytes(path("vt.gguf"), f.b);
        expectError(path("vt.gguf"), "unknown value type 13");

        Bytes a;
        a.u32(0x46554747).u32(3).u64(0).u64(1).str("k").u32(9).u32(4).u64(1ull << 40);
        writeBytes(path("arr.gguf"), a.b);
        expectError(path("arr.gguf"), "array length");

        Bytes bo;
        bo.u32(0x46554747).u32(3).u64(0).u64(1).str("k").u32(7).u8(2).pad(32);
        writeBytes(path("bool.gguf"), bo.b);
        expectError(path("bool.gguf"), "bool value 2");

        // Type 3 is ggml's Q4_1, which Strata does not read (2, Q4_0, it does).
        Bytes t;
        t.u32(0x46554747).u32(3).u64(1).u64(0).str("w").u32(1).u64(4).u32(3).u64(0).pad(32);
        t.u64(0).u64(0);
        writeBytes(path("tt.gguf"), t.b);
        expectError(path("tt.gguf"), "tensor type 3");

        Bytes d;
        d.u32(0x46554747).u32(3).u64(1).u64(0).str("w").u32(5).u64(1).u64(1).u64(1).u64(1).u64(1).u32(0).u64(0);
        writeBytes(path("nd.gguf"), d.b);
        expectError(path("nd.gguf"), "5 dimensions");

        Bytes q;
        q.u32(0x46554747).u32(3).u64(1).u64(0).str("w").u32(1).u64(16).u32(8).u64(0).pad(32);
        q.raw(std::vector<uint8_t>(34).data(), 34);
        writeBytes(path("q.gguf"), q.b);
        expectError(path("q.gguf"), "not a multiple of 32");

        Bytes al;
        al.u32(0x46554747).u32(3).u64(0).u64(1).str("general.alignment").u32(4).u32(24);
        writeBytes(path("al.gguf"), al.b);
        expectError(path("al.gguf"), "not a power of two");

        Bytes al2;
        al2.u32(0x46554747).u32(3).u64(0).u64(1).str("general.alignment").u32(6).f32(32);
        writeBytes(path("al2.gguf"), al2.b);
        expectError(path("al2.gguf"), "expected u32");
    }

    void badOffsets() {
        Bytes m;  // offset not aligned
        m.u32(0x46554747).u32(3).u64(1).u64(0).str("w").u32(1).u64(1).u32(0).u64(4).pad(32);
        m.u64(0).u64(0);
        writeBytes(path("mis.gguf"), m.b);
        expectError(path("mis.gguf"), "not a multiple of the alignment 32");

        Bytes o;  // two tensors sharing bytes
        o.u32(0x46554747).u32(3).u64(2).u64(0);
        o.str("a").u32(1).u64(16).u32(0).u64(0);
        o.str("b").u32(1).u64(16).u32(0).u64(32);
        o.pad(32);
        o.raw(std::vector<uint8_t>(128).data(), 128);
        writeBytes(path("ovl.gguf"), o.b);
        expectError(path("ovl.gguf"), "overlaps");

        Bytes r;  // data past the end
        r.u32(0x46554747).u32(3).u64(1).u64(0).str("a").u32(1).u64(16).u32(0).u64(64).pad(32);
        r.raw(std::vector<uint8_t>(64).data(), 64);
        writeBytes(path("oor.gguf"), r.b);
        expectError(path("oor.gguf"), "runs past the 64-byte data section");

        Bytes h;  // a dimension that makes the tensor larger than any file
        h.u32(0x46554747).u32(3).u64(1).u64(0).str("a").u32(2).u64(1ull << 40).u64(1ull << 40).u32(0).u64(0).pad(32);
        writeBytes(path("dim.gguf"), h.b);
        expectError(path("dim.gguf"), "larger than any file");
        Bytes big;  // 2^40 elements: no overflow, but far more bytes than the file
        big.u32(0x46554747).u32(3).u64(1).u64(0).str("a").u32(2).u64(1ull << 20).u64(1ull << 20).u32(0).u64(0).pad(32);
        writeBytes(path("big.gguf"), big.b);
        expectError(path("big.gguf"), "1099511627776 F32 values take more bytes than the");
    }

    void duplicates() {
        Bytes k;
        k.u32(0x46554747).u32(3).u64(0).u64(2).str("k").u32(4).u32(1).str("k").u32(4).u32(2);
        writeBytes(path("dk.gguf"), k.b);
        expectError(path("dk.gguf"), "duplicate metadata key 'k'");
        GgufFile g;
        g.addTensor("w", Shape{1}, {1.f});
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, g.addTensor("w", Shape{1}, {1.f}));
    }
};

QTEST_GUILESS_MAIN(TestFormatsGguf)
#include "test_formats_gguf.moc"
