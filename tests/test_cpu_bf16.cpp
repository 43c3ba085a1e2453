// The CPU's native bf16 (CpuBf16.h): every GEMM and convolution op of a bf16 CpuBackend against the rounded-input
// definition (CpuReferenceBackend in bf16: rounded copies, float32 loops) up to float32 summation order, and against
// float32 within bf16's rounding; the ops that stay float32 bit-equal to a float32 CpuBackend; the refusal on a CPU
// without AVX512-BF16 (oneDNN capped by DNNL_MAX_CPU_ISA in a child process); fashion_cnn_bn's first steps in bf16
// tracking float32.
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <random>

#include "core/backend/CpuBackend.h"
#include "core/backend/CpuBf16.h"
#include "core/backend/CpuPrecision.h"
#include "core/graph/Project.h"
#include "core/train/BackendOptionsFor.h"
#include "core/train/MemoryEstimate.h"
#include "core/train/Trainer.h"
#include "tests/support/TestBackends.h"
#include "tests/support/TestProjects.h"

using namespace strata;

namespace {

using Vec = std::vector<float>;

Vec randomVec(std::mt19937& rng, size_t n) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    Vec v(n);
    for (float& x : v) x = u(rng);
    return v;
}

Vec absolute(Vec v) {
    for (float& x : v) x = std::abs(x);
    return v;
}

BackendOptions bf16Options() {
    BackendOptions o;
    o.precision = ComputePrecision::BF16;
    return o;
}

// Runs `op` on `be` with device copies of the host buffers; returns the host copy of buffer `result`.
Vec runOn(Backend& be, const std::vector<Vec>& host, size_t result,
          const std::function<void(Backend&, std::vector<float*>&)>& op) {
    std::vector<Tensor> dev;
    std::vector<float*> ptrs;
    for (const Vec& h : host) {
        dev.push_back(be.fromHost(Shape{static_cast<int64_t>(std::max<size_t>(h.size(), 1))}, h.data()));
        ptrs.push_back(dev.back().f32());
    }
    op(be, ptrs);
    Vec out(host[result].size());
    be.copyToHost(out.data(), ptrs[result], out.size() * sizeof(float));
    return out;
}

// One op's check. The op is bilinear in its two inputs plus what it accumulates onto, so running it in float32 on
// the absolute values gives each output's error scale: sum |a||b| + |initial|.
struct Compared {
    double toDefinition = 0;  // native bf16 against rounded inputs + float32 loops, in units of the scale
    double toF32 = 0;         // native bf16 against float32
};

Compared compare(CpuBackend& native, const std::vector<Vec>& host, size_t result,
                 const std::function<void(Backend&, std::vector<float*>&)>& op) {
    const auto definition = test::makeReferenceBackend(bf16Options());
    const auto f32 = test::makeReferenceBackend();
    std::vector<Vec> absHost;
    for (const Vec& h : host) absHost.push_back(absolute(h));
    const Vec got = runOn(native, host, result, op), want = runOn(*definition, host, result, op),
              exact = runOn(*f32, host, result, op), scale = runOn(*f32, absHost, result, op);
    Compared c;
    for (size_t i = 0; i < got.size(); ++i) {
        const double s = double(scale[i]) + 1e-30;
        c.toDefinition = std::max(c.toDefinition, std::abs(double(got[i]) - want[i]) / s);
        c.toF32 = std::max(c.toF32, std::abs(double(got[i]) - exact[i]) / s);
    }
    return c;
}

// float32 sums of the same exact products in another order: a few float32 ulps of the absolute sum.
constexpr double kOrderTol = 1e-5;
// Each input rounded to 8 significant bits (relative error at most 2^-8): a product's relative error is at most
// 2^-7 + 2^-16, and so is the sum's relative to the absolute sum; nearer than 1e-4 everywhere: nothing was rounded.
constexpr double kBf16Tol = 1.0 / 128 + 1.0 / 65536 + kOrderTol, kRoundedAtLeast = 1e-4;

void expectBf16(const Compared& c, const std::string& what) {
    QVERIFY2(c.toDefinition <= kOrderTol, qPrintable(QString::fromStdString(what) + ": " +
                                                     QString::number(c.toDefinition) + " from the definition"));
    QVERIFY2(c.toF32 <= kBf16Tol,
             qPrintable(QString::fromStdString(what) + ": " + QString::number(c.toF32) + " from float32"));
    QVERIFY2(c.toF32 >= kRoundedAtLeast, qPrintable(QString::fromStdString(what) + ": " + QString::number(c.toF32) +
                                                    " from float32: the inputs were not rounded"));
}

// x of [n, c, hw] between NCHW and nChw<block>c (c a multiple of block).
Vec toBlocked(const Vec& x, int n, int c, int64_t hw, int block) {
    Vec out(x.size());
    for (int i = 0; i < n; ++i)
        for (int ch = 0; ch < c; ++ch)
            for (int64_t p = 0; p < hw; ++p)
                out[((size_t(i) * (c / block) + ch / block) * hw + p) * block + ch % block] =
                    x[(size_t(i) * c + ch) * hw + p];
    return out;
}
Vec fromBlocked(const Vec& x, int n, int c, int64_t hw, int block) {
    Vec out(x.size());
    for (int i = 0; i < n; ++i)
        for (int ch = 0; ch < c; ++ch)
            for (int64_t p = 0; p < hw; ++p)
                out[(size_t(i) * c + ch) * hw + p] =
                    x[((size_t(i) * (c / block) + ch / block) * hw + p) * block + ch % block];
    return out;
}

ConvDesc conv(int n, int c, int hw, int k, int r, int stride, int pad, int groups = 1) {
    ConvDesc d;
    d.n = n;
    d.c = c;
    d.h = d.w = hw;
    d.k = k;
    d.r = d.s = r;
    d.strideH = d.strideW = stride;
    d.padH = d.padW = pad;
    d.groups = groups;
    return d;
}

std::string describe(const ConvDesc& d) {
    return "conv " + std::to_string(d.c) + "->" + std::to_string(d.k) + " " + std::to_string(d.r) + "x" +
           std::to_string(d.s) + " stride " + std::to_string(d.strideH) + " groups " + std::to_string(d.groups) +
           " on " + std::to_string(d.h) + "x" + std::to_string(d.w);
}

std::unique_ptr<CpuBackend> nativeBf16() { return std::make_unique<CpuBackend>(bf16Options()); }

}  // namespace

class TestCpuBf16 : public QObject {
    Q_OBJECT
private slots:
    void init() {
        const std::string name = QTest::currentTestFunction();
        if (name == "refusedWithoutAvx512Bf16" || name == "memoryEstimateCountsTheCopies") return;  // any CPU
        const std::string why = cpu::bf16Unavailable();
        if (!why.empty()) QSKIP(qPrintable("no native bf16 here: " + QString::fromStdString(why)));
    }

    void gemmEveryTransposition() {
        std::mt19937 rng(1);
        auto be = nativeBf16();
        for (int t = 0; t < 4; ++t) {
            const bool ta = t & 1, tb = t & 2;
            const int m = 37 + t, n = 45, k = 130 + 7 * t;
            const float alpha = t == 3 ? 0.5f : 1.0f, beta = t >= 2 ? 1.0f : 0.0f;
            const int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 1, ldc = n + 2;  // padding must not matter
            const Vec a = randomVec(rng, size_t(ta ? k : m) * lda), b = randomVec(rng, size_t(tb ? n : k) * ldb),
                      c = randomVec(rng, size_t(m) * ldc);
            const auto before = be->bf16Runs();
            const Compared r = compare(*be, {a, b, c}, 2, [&](Backend& on, std::vector<float*>& p) {
                on.gemm(ta, tb, m, n, k, alpha, p[0], lda, p[1], ldb, beta, p[2], ldc);
            });
            expectBf16(r, "gemm trans " + std::to_string(t));
            QCOMPARE(be->bf16Runs().gemms, before.gemms + 1);
            // Transposed operands by CpuBf16's own gathering copy (whole blocks of 32 columns and the rest).
            QCOMPARE(be->bf16Runs().transposedOperands, before.transposedOperands + (ta ? 1 : 0) + (tb ? 1 : 0));
        }
    }

    // Multi-head attention's products: one call, every product native.
    void gemmStridedBatched() {
        std::mt19937 rng(2);
        auto be = nativeBf16();
        const int m = 24, n = 24, k = 16, count = 6;
        const Vec a = randomVec(rng, size_t(count) * m * k + 5), b = randomVec(rng, size_t(count) * n * k + 5),
                  c = randomVec(rng, size_t(count) * m * n);
        const auto before = be->bf16Runs().gemms;
        const Compared r = compare(*be, {a, b, Vec(c.size(), 0.0f)}, 2, [&](Backend& on, std::vector<float*>& p) {
            on.gemmStridedBatched(false, true, m, n, k, 0.25f, p[0], k, int64_t(m) * k, p[1], k, int64_t(n) * k, 0.0f,
                                  p[2], n, int64_t(m) * n, count);
        });
        expectBf16(r, "gemmStridedBatched");
        QCOMPARE(be->bf16Runs().gemms, before + count);
        // The attention's gradients: op(A) = A^T per product (batch strides with a gap), 70 columns.
        const int m2 = 24, n2 = 20, k2 = 70;
        const int64_t strideA = int64_t(k2) * m2 + 5;
        const Vec a2 = randomVec(rng, size_t(count) * strideA), b2 = randomVec(rng, size_t(count) * k2 * n2);
        const auto before2 = be->bf16Runs();
        const Compared r2 = compare(
            *be, {a2, b2, randomVec(rng, size_t(count) * m2 * n2)}, 2, [&](Backend& on, std::vector<float*>& p) {
                on.gemmStridedBatched(true, false, m2, n2, k2, 1.0f, p[0], m2, strideA, p[1], n2, int64_t(k2) * n2,
                                      1.0f, p[2], n2, int64_t(m2) * n2, count);
            });
        expectBf16(r2, "gemmStridedBatched, A transposed");
        QCOMPARE(be->bf16Runs().gemms, before2.gemms + count);
        QCOMPARE(be->bf16Runs().transposedOperands, before2.transposedOperands + 1);
    }

    void convolutionsNchw() {
        std::mt19937 rng(3);
        auto be = nativeBf16();
        for (const ConvDesc& d : {conv(4, 16, 12, 32, 3, 1, 1), conv(3, 8, 11, 16, 5, 2, 2),
                                  conv(2, 16, 9, 16, 3, 1, 1, 4), conv(5, 32, 7, 24, 1, 1, 0)}) {
            const Vec x = randomVec(rng, size_t(d.inputSize())), w = randomVec(rng, size_t(d.weightSize())),
                      y = randomVec(rng, size_t(d.outputSize()));
            const auto before = be->bf16Runs().convolutions;
            expectBf16(compare(*be, {x, w, Vec(y.size(), 0.0f)}, 2,
                               [&](Backend& on, std::vector<float*>& p) { on.conv2dForward(p[2], p[0], p[1], d); }),
                       describe(d) + " forward");
            // The backward ops accumulate onto what is there.
            expectBf16(
                compare(*be, {x, w, y}, 0,
                        [&](Backend& on, std::vector<float*>& p) { on.conv2dBackwardData(p[0], p[2], p[1], d); }),
                describe(d) + " backward data");
            expectBf16(
                compare(*be, {x, w, y}, 1,
                        [&](Backend& on, std::vector<float*>& p) { on.conv2dBackwardFilter(p[1], p[2], p[0], d); }),
                describe(d) + " backward filter");
            QCOMPARE(be->bf16Runs().convolutions, before + 3);
        }
    }

    // Where bf16 primitives bring no speed, native bf16 runs the float32 kernels on rounded copies (CpuBackend.cpp's
    // bf16GemmPays and bf16ConvPays): a first layer of fewer than 4 input channels, every pass of it, and a product
    // with fewer than 16 rows, columns or summed terms. The same definition as everywhere, no bf16 primitive
    // counted; their neighbours (4 channels; 16 everywhere) still run on bf16 primitives.
    void opsBf16DoesNotPayRunOnRoundedCopies() {
        std::mt19937 rng(4);
        auto be = nativeBf16();
        for (const int channels : {1, 3, 4}) {
            const ConvDesc d = conv(4, channels, 10, 8, 3, 1, 1);
            const Vec x = randomVec(rng, size_t(d.inputSize())), w = randomVec(rng, size_t(d.weightSize())),
                      y = randomVec(rng, size_t(d.outputSize()));
            const auto before = be->bf16Runs().convolutions;
            const std::string what = "conv " + std::to_string(channels) + "->8";
            expectBf16(compare(*be, {x, w, Vec(y.size(), 0.0f)}, 2,
                               [&](Backend& on, std::vector<float*>& p) { on.conv2dForward(p[2], p[0], p[1], d); }),
                       what + " forward");
            expectBf16(
                compare(*be, {x, w, y}, 0,
                        [&](Backend& on, std::vector<float*>& p) { on.conv2dBackwardData(p[0], p[2], p[1], d); }),
                what + " backward data");
            expectBf16(
                compare(*be, {x, w, y}, 1,
                        [&](Backend& on, std::vector<float*>& p) { on.conv2dBackwardFilter(p[1], p[2], p[0], d); }),
                what + " backward filter");
            QCOMPARE(be->bf16Runs().convolutions, before + (channels < 4 ? 0 : 3));
        }
        // As a model runs a first layer: a plain input into 16-channel blocks, bias and ReLU fused, and its fused
        // backward: bit-equal to a float32 CpuBackend's on inputs rounded beforehand (in a bf16 workspace oneDNN's
        // convolutions would take bf16 inputs: not these).
        {
            ConvDesc d = conv(8, 1, 28, 16, 3, 1, 1);
            d.dstBlock = 16;
            CpuBackend f32;
            auto roundedVec = [](Vec v) {
                for (float& f : v) f = cpu::roundToPrecision(f, ComputePrecision::BF16);
                return v;
            };
            const Vec x = randomVec(rng, size_t(d.inputSize())), w = randomVec(rng, size_t(d.weightSize())),
                      bias = randomVec(rng, 16), dy = randomVec(rng, size_t(d.outputSize()));
            const auto before = be->bf16Runs().convolutions;
            auto forward = [&](Backend& on, std::vector<float*>& p) {
                on.conv2dForwardFused(p[3], p[0], p[1], p[2], true, d);
            };
            QCOMPARE(runOn(*be, {x, w, bias, Vec(dy.size())}, 3, forward),
                     runOn(f32, {roundedVec(x), roundedVec(w), bias, Vec(dy.size())}, 3, forward));
            auto backward = [&](Backend& on, std::vector<float*>& p) {
                on.conv2dBackwardFused(nullptr, p[1], p[2], p[3], p[0], nullptr, d, true);
            };
            QCOMPARE(runOn(*be, {x, Vec(w.size()), Vec(16), dy}, 1, backward),
                     runOn(f32, {roundedVec(x), Vec(w.size()), Vec(16), roundedVec(dy)}, 1, backward));
            QCOMPARE(be->bf16Runs().convolutions, before);
        }
        for (const int small : {10, 16}) {
            const int m = 40, n = small, k = 64;
            const Vec a = randomVec(rng, size_t(m) * k), b = randomVec(rng, size_t(k) * n);
            const auto before = be->bf16Runs().gemms;
            expectBf16(compare(*be, {a, b, Vec(size_t(m) * n, 0.0f)}, 2,
                               [&](Backend& on, std::vector<float*>& p) {
                                   on.gemm(false, false, m, n, k, 1.0f, p[0], k, p[1], n, 0.0f, p[2], n);
                               }),
                       "gemm with " + std::to_string(small) + " columns");
            QCOMPARE(be->bf16Runs().gemms, before + (small < 16 ? 0 : 1));
        }
    }

    // The training layout: activations blocked by 16 channels, fused bias and ReLU, fused backward; with enough
    // tiles the backward runs by Winograd on rounded copies, the rest by oneDNN.
    void fusedConvolutionsBlocked_data() {
        QTest::addColumn<int>("n");
        QTest::addColumn<int>("blocksIn");
        QTest::addColumn<int>("hw");
        QTest::addColumn<bool>("winograd");
        QTest::newRow("27 tiles: oneDNN") << 3 << 2 << 10 << false;
        QTest::newRow("128 tiles: Winograd's backward") << 8 << 1 << 16 << true;
    }
    void fusedConvolutionsBlocked() {
        QFETCH(int, n);
        QFETCH(int, blocksIn);
        QFETCH(int, hw);
        QFETCH(bool, winograd);
        std::mt19937 rng(5);
        // The kernels as they were before the bf16 Winograd (bf16WinogradProducts tests that one).
        qputenv("STRATA_WINOGRAD_BF16", "0");
        auto be = nativeBf16();
        qunsetenv("STRATA_WINOGRAD_BF16");
        const int block = be->activationBlock();
        if (block == 0) QSKIP("this CPU keeps activations in NCHW");
        if (winograd && !CpuBackend::winogradAvailable()) QSKIP("no Winograd kernels for this CPU");
        ConvDesc plain = conv(n, blocksIn * block, hw, block, 3, 1, 1);
        ConvDesc blocked = plain;
        blocked.srcBlock = blocked.dstBlock = block;
        const int64_t inHw = int64_t(hw) * hw, outHw = int64_t(plain.outH()) * plain.outW();
        const Vec x = randomVec(rng, size_t(plain.inputSize())), w = randomVec(rng, size_t(plain.weightSize())),
                  bias = randomVec(rng, size_t(plain.k)), dy = randomVec(rng, size_t(plain.outputSize()));
        const CpuBackend::Bf16Runs before = be->bf16Runs();
        // Forward with bias and ReLU: the blocked result, unblocked, against the NCHW definition.
        const Vec yBlocked = runOn(
            *be, {toBlocked(x, n, plain.c, inHw, block), w, bias, Vec(dy.size(), 0.0f)}, 3,
            [&](Backend& on, std::vector<float*>& p) { on.conv2dForwardFused(p[3], p[0], p[1], p[2], true, blocked); });
        const Vec got = fromBlocked(yBlocked, n, plain.k, outHw, block);
        auto definition = test::makeReferenceBackend(bf16Options());
        const Vec want = runOn(
            *definition, {x, w, bias, Vec(dy.size(), 0.0f)}, 3,
            [&](Backend& on, std::vector<float*>& p) { on.conv2dForwardFused(p[3], p[0], p[1], p[2], true, plain); });
        double worst = 0;
        for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, double(std::abs(got[i] - want[i])));
        QVERIFY2(worst < 1e-4, qPrintable(QString::number(worst)));  // |sum| of at most 288 products below 1
        // Backward: dx overwritten, dw and dbias accumulated, blocked dy and x.
        auto runBackward = [&](Backend& on, const ConvDesc& d, const Vec& xs, const Vec& dys, int blk) {
            Vec dx, dw, db;
            std::vector<Tensor> t;
            for (const Vec* h : {&xs, &w, &dys}) t.push_back(on.fromHost(Shape{int64_t(h->size())}, h->data()));
            Tensor dxT = on.fromHost(Shape{int64_t(xs.size())}, Vec(xs.size(), 7.0f).data());
            Tensor dwT = on.fromHost(Shape{int64_t(w.size())}, Vec(w.size(), 0.5f).data());
            Tensor dbT = on.fromHost(Shape{int64_t(bias.size())}, Vec(bias.size(), 0.25f).data());
            on.conv2dBackwardFused(dxT.f32(), dwT.f32(), dbT.f32(), t[2].f32(), t[0].f32(), t[1].f32(), d, true);
            dx.resize(xs.size());
            dw.resize(w.size());
            db.resize(bias.size());
            on.copyToHost(dx.data(), dxT.f32(), dx.size() * sizeof(float));
            on.copyToHost(dw.data(), dwT.f32(), dw.size() * sizeof(float));
            on.copyToHost(db.data(), dbT.f32(), db.size() * sizeof(float));
            if (blk) dx = fromBlocked(dx, n, plain.c, inHw, blk);
            return std::vector<Vec>{dx, dw, db};
        };
        const auto g = runBackward(*be, blocked, toBlocked(x, n, plain.c, inHw, block),
                                   toBlocked(dy, n, plain.k, outHw, block), block);
        const auto r = runBackward(*definition, plain, x, dy, 0);
        const char* names[] = {"dx", "dw", "dbias"};
        for (size_t j = 0; j < 3; ++j) {
            double diff = 0, largest = 0;
            for (size_t i = 0; i < g[j].size(); ++i) {
                diff = std::max(diff, double(std::abs(g[j][i] - r[j][i])));
                largest = std::max(largest, double(std::abs(r[j][i])));
            }
            // float32 sums of up to 2,048 products in another order (Winograd's transforms among them).
            QVERIFY2(diff < 2e-6 * (largest + 1) * std::sqrt(double(n * outHw)),
                     qPrintable(QString(names[j]) + " " + QString::number(diff) + " of " + QString::number(largest)));
        }
        const CpuBackend::Bf16Runs after = be->bf16Runs();
        QCOMPARE(after.convolutions, before.convolutions + (winograd ? 1 : 2));
        QCOMPARE(after.winogradBackward, before.winogradBackward + (winograd ? 1 : 0));
    }

    // 3x3 convolutions by Winograd with bf16 products (AVX512-BF16): the forward (bias, ReLU) and the input gradient
    // (overwritten and accumulated) against float32, within what rounding the transformed tiles and weights to bf16
    // costs, and far enough from it to show they were rounded; the counter shows the kernel ran.
    void bf16WinogradProducts_data() {
        QTest::addColumn<int>("n");
        QTest::addColumn<int>("blocksIn");
        QTest::addColumn<int>("blocksOut");
        QTest::addColumn<int>("hw");
        QTest::addColumn<int>("pad");
        QTest::newRow("32->32, 16x16, pad 1") << 8 << 2 << 2 << 16 << 1;
        QTest::newRow("16->48, 13x13, pad 1 (partial tiles, a short last group)") << 5 << 1 << 3 << 13 << 1;
        QTest::newRow("64->16, 11x11, pad 0") << 9 << 4 << 1 << 11 << 0;
    }
    void bf16WinogradProducts() {
        QFETCH(int, n);
        QFETCH(int, blocksIn);
        QFETCH(int, blocksOut);
        QFETCH(int, hw);
        QFETCH(int, pad);
        if (!CpuBackend::winogradBf16Available())
            QSKIP("this CPU has no AVX-512 with AVX512-BF16 for the bf16 Winograd");
        auto be = nativeBf16();
        const int block = be->activationBlock();
        QCOMPARE(block, 16);
        ConvDesc plain = conv(n, blocksIn * block, hw, blocksOut * block, 3, 1, pad);
        ConvDesc blocked = plain;
        blocked.srcBlock = blocked.dstBlock = block;
        QVERIFY(be->winogradRuns(blocked));
        const int64_t inHw = int64_t(hw) * hw, outHw = int64_t(plain.outH()) * plain.outW();
        std::mt19937 rng(9);
        const Vec x = randomVec(rng, size_t(plain.inputSize())), w = randomVec(rng, size_t(plain.weightSize())),
                  bias = randomVec(rng, size_t(plain.k)), dy = randomVec(rng, size_t(plain.outputSize())),
                  dx0 = randomVec(rng, size_t(plain.inputSize()));
        auto f32 = test::makeReferenceBackend();
        // The relative RMS and largest error of got against want, unblocking got (channels 0: as it is).
        auto check = [&](const Vec& gotBlocked, const Vec& want, int channels, int64_t hwOf, const QString& what) {
            const Vec got = channels ? fromBlocked(gotBlocked, n, channels, hwOf, block) : gotBlocked;
            double err2 = 0, ref2 = 0, worst = 0, largest = 0;
            for (size_t i = 0; i < got.size(); ++i) {
                const double e = double(got[i]) - want[i];
                err2 += e * e;
                ref2 += double(want[i]) * want[i];
                worst = std::max(worst, std::abs(e));
                largest = std::max(largest, std::abs(double(want[i])));
            }
            const double rms = std::sqrt(err2 / ref2);
            // bf16 keeps 8 significant bits (relative rounding error up to 2^-9), but it rounds the transformed
            // tiles and weights, whose errors the output transform adds up with weights up to 8 (64 per output):
            // a numpy model of F(4x4, 3x3) with U and V rounded to bf16 (32 channels, uniform inputs) gives 2.5e-2
            // relative RMS error, against 2.1e-3 for rounding the inputs; measured here 2.0e-2 to 2.7e-2. A wrong
            // pairing of channels or tiles is off by the values themselves.
            QVERIFY2(rms < 4e-2 && worst < 0.15 * largest,
                     qPrintable(what + ": relative RMS error " + QString::number(rms) + ", largest " +
                                QString::number(worst) + " of " + QString::number(largest)));
            QVERIFY2(rms > 5e-3, qPrintable(what + ": " + QString::number(rms) + " from float32: nothing rounded"));
        };
        const int64_t before = be->bf16Runs().winogradBf16;
        const Vec y = runOn(
            *be, {toBlocked(x, n, plain.c, inHw, block), w, bias, Vec(plain.outputSize(), 3.0f)}, 3,
            [&](Backend& on, std::vector<float*>& p) { on.conv2dForwardFused(p[3], p[0], p[1], p[2], true, blocked); });
        const Vec yWant = runOn(
            *f32, {x, w, bias, Vec(plain.outputSize(), 3.0f)}, 3,
            [&](Backend& on, std::vector<float*>& p) { on.conv2dForwardFused(p[3], p[0], p[1], p[2], true, plain); });
        check(y, yWant, plain.k, outHw, "forward");
        QCOMPARE(be->bf16Runs().winogradBf16, before + 1);
        for (bool overwrite : {true, false}) {
            const Vec dx =
                runOn(*be, {toBlocked(dy, n, plain.k, outHw, block), w, toBlocked(dx0, n, plain.c, inHw, block)}, 2,
                      [&](Backend& on, std::vector<float*>& p) {
                          on.conv2dBackwardFused(p[2], nullptr, nullptr, p[0], nullptr, p[1], blocked, overwrite);
                      });
            const Vec dxWant = runOn(*f32, {dy, w, dx0}, 2, [&](Backend& on, std::vector<float*>& p) {
                on.conv2dBackwardFused(p[2], nullptr, nullptr, p[0], nullptr, p[1], plain, overwrite);
            });
            if (overwrite) {
                check(dx, dxWant, plain.c, inHw, "input gradient");
            } else {  // the accumulated part exact: what was added checked as above
                Vec added = fromBlocked(dx, n, plain.c, inHw, block), addedWant = dxWant;
                for (size_t i = 0; i < added.size(); ++i) added[i] -= dx0[i], addedWant[i] -= dx0[i];
                check(toBlocked(added, n, plain.c, inHw, block), addedWant, plain.c, inHw,
                      "accumulated input gradient");
            }
        }
        // The weights' gradient (accumulated) and the bias's (float32 sums of dy as it is), tiles paired.
        const Vec dw0 = randomVec(rng, w.size()), db0 = randomVec(rng, bias.size());
        auto filterOn = [&](Backend& on, const ConvDesc& d, const Vec& xs, const Vec& dys) {
            std::vector<Tensor> t;
            for (const Vec* h : {&xs, &w, &dys, &dw0, &db0})
                t.push_back(on.fromHost(Shape{int64_t(h->size())}, h->data()));
            on.conv2dBackwardFused(nullptr, t[3].f32(), t[4].f32(), t[2].f32(), t[0].f32(), t[1].f32(), d, false);
            Vec dw(w.size()), db(bias.size());
            on.copyToHost(dw.data(), t[3].f32(), dw.size() * sizeof(float));
            on.copyToHost(db.data(), t[4].f32(), db.size() * sizeof(float));
            for (size_t i = 0; i < dw.size(); ++i) dw[i] -= dw0[i];
            for (size_t i = 0; i < db.size(); ++i) db[i] -= db0[i];
            return std::pair{dw, db};
        };
        const auto [dw, db] =
            filterOn(*be, blocked, toBlocked(x, n, plain.c, inHw, block), toBlocked(dy, n, plain.k, outHw, block));
        const auto [dwWant, dbWant] = filterOn(*f32, plain, x, dy);
        check(dw, dwWant, 0, 0, "weights' gradient");  // [k, c, 3, 3] in both
        for (size_t i = 0; i < db.size(); ++i)
            QVERIFY2(std::abs(db[i] - dbWant[i]) < 1e-4 * (std::abs(dbWant[i]) + 1),
                     qPrintable("bias gradient " + QString::number(db[i]) + ", float32 " + QString::number(dbWant[i])));
        QCOMPARE(be->bf16Runs().winogradBf16, before + 4);
    }

    // Everything but GEMM and convolution computes in float32: bit-equal to a float32 CpuBackend.
    void otherOpsStayFloat32() {
        std::mt19937 rng(6);
        auto be = nativeBf16();
        CpuBackend f32;
        const Vec x = randomVec(rng, 40 * 33), g = randomVec(rng, 33), bta = randomVec(rng, 33);
        auto softmax = [&](Backend& on, std::vector<float*>& p) { on.softmaxForward(p[1], p[0], 40, 33); };
        QCOMPARE(runOn(*be, {x, Vec(x.size())}, 1, softmax), runOn(f32, {x, Vec(x.size())}, 1, softmax));
        auto gelu = [&](Backend& on, std::vector<float*>& p) {
            on.activationForward(p[1], p[0], int64_t(x.size()), Activation::GELU, 0.0f);
        };
        QCOMPARE(runOn(*be, {x, Vec(x.size())}, 1, gelu), runOn(f32, {x, Vec(x.size())}, 1, gelu));
        auto norm = [&](Backend& on, std::vector<float*>& p) {
            on.layerNormForward(p[3], p[4], p[5], p[0], p[1], p[2], 40, 33, 1e-5f);
        };
        const std::vector<Vec> in{x, g, bta, Vec(x.size()), Vec(40), Vec(40)};
        QCOMPARE(runOn(*be, in, 3, norm), runOn(f32, in, 3, norm));
    }

    // fashion_cnn_bn on Fashion-MNIST, 25 steps from the same initial weights: bf16's losses track float32's.
    void fashionCnnBnTracksFloat32() {
        const std::string file = test::sourcePath("examples/fashion_cnn_bn.strata");
        Project p = readProject(file);
        if (!std::filesystem::exists(p.dataset.trainImages)) QSKIP("no Fashion-MNIST at the example's path");
        p.dataset.trainLimit = 1600;
        p.dataset.validationLimit = 200;
        p.training.batchSize = 64;
        p.training.epochs = 1;
        p.training.checkpointDir.clear();
        bool nativeRan = false;
        auto run = [&](const std::string& precision) {
            Project q = p;
            q.training.precision = parseComputePrecision(precision);
            auto backend = test::makeCpuBackend(backendOptionsFor(q.training));
            test::RecordedRun rec;
            TrainerOptions o;
            o.maxSteps = 25;
            o.telemetryIntervalMs = 0;
            Trainer t(q, *backend, &rec, o);
            t.run();
            if (!rec.error.empty()) qWarning("%s", rec.error.c_str());
            if (precision == "bf16") {
                auto* cpu = dynamic_cast<CpuBackend*>(backend.get());
                nativeRan = cpu && cpu->bf16Runs().winogradBf16 > 0 && cpu->bf16Runs().gemms > 0;
            }
            return rec.steps;
        };
        const std::vector<double> f32 = run("fp32"), bf16 = run("bf16");
        QVERIFY(nativeRan);
        QCOMPARE(f32.size(), size_t(25));
        QCOMPARE(bf16.size(), size_t(25));
        QVERIFY2(std::abs(f32[0] - bf16[0]) < 0.02 * f32[0], qPrintable(QString::number(bf16[0] - f32[0])));
        double a = 0, b = 0;
        for (size_t i = 20; i < 25; ++i) a += f32[i], b += bf16[i];
        QVERIFY2(f32[24] < f32[0] && bf16[24] < bf16[0], "both runs learn");
        QVERIFY2(std::abs(a - b) < 0.1 * a,
                 qPrintable(QString("last five steps: fp32 %1, bf16 %2").arg(a / 5).arg(b / 5)));
    }

    // The CPU's bf16 copies are host memory beside the Backend's: counted on the CPU, not on a GPU or in fp32.
    void memoryEstimateCountsTheCopies() {
        const Project p = readProject(test::sourcePath("examples/fashion_cnn_bn.strata"));
        TrainingSettings t = p.training;
        const MemoryEstimate f32 = estimateTrainingMemory(p.graph, t, 128);
        t.precision = ComputePrecision::BF16;
        const MemoryEstimate bf16 = estimateTrainingMemory(p.graph, t, 128);
        QCOMPARE(f32.lowPrecisionHostBytes, uint64_t(0));
        QCOMPARE(bf16.deviceBytes, f32.deviceBytes);  // storage stays float32
        // conv2 of [32, 28, 28] in and out: 2 roles x 2 bytes x 2 tensors of 128 x 25088 values, 25.7 MB alone.
        QVERIFY2(bf16.lowPrecisionHostBytes > 4 * 2 * uint64_t(128) * 25088,
                 qPrintable(QString::number(bf16.lowPrecisionHostBytes)));
        QVERIFY(bf16.totalOn(true) == f32.totalOn(true) + bf16.lowPrecisionHostBytes);
        QCOMPARE(bf16.totalOn(false), f32.totalOn(false));
        t.device = "cuda:0";
        QCOMPARE(estimateTrainingMemory(p.graph, t, 128).lowPrecisionHostBytes, uint64_t(0));
    }

    // What a CPU without the flag gets, simulated by capping oneDNN's ISA in a child process.
    void refusedWithoutAvx512Bf16() {
        QTemporaryDir dir;
        QProcess train;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("DNNL_MAX_CPU_ISA", "AVX512_CORE");
        train.setProcessEnvironment(env);
        train.start(QStringLiteral(STRATA_TRAIN_EXE),
                    {QString::fromStdString(test::sourcePath("examples/fashion_mlp.strata")), "--precision", "bf16",
                     "--device", "cpu", "--max-steps", "1", "--train-limit", "64", "--history", "off", "--quiet",
                     "--checkpoint-dir", dir.filePath("ck")});
        QVERIFY(train.waitForFinished(120000));
        const QString err = QString::fromUtf8(train.readAllStandardError());
        QVERIFY2(train.exitCode() != 0, qPrintable(err));
        QVERIFY2(err.contains("precision bf16 needs a CPU that computes bf16 natively") &&
                     err.contains("avx512_bf16") && err.contains("DNNL_MAX_CPU_ISA") &&
                     err.contains("use precision fp32"),
                 qPrintable(err));
        // fp32 under the same cap trains.
        QProcess plain;
        plain.setProcessEnvironment(env);
        plain.start(
            QStringLiteral(STRATA_TRAIN_EXE),
            {QString::fromStdString(test::sourcePath("examples/fashion_mlp.strata")), "--device", "cpu", "--max-steps",
             "1", "--train-limit", "64", "--history", "off", "--quiet", "--checkpoint-dir", dir.filePath("ck2")});
        QVERIFY(plain.waitForFinished(120000));
        QVERIFY2(plain.exitCode() == 0, qPrintable(QString::fromUtf8(plain.readAllStandardError())));
    }
};

QTEST_MAIN(TestCpuBf16)
#include "test_cpu_bf16.moc"
