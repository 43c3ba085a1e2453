// Mixed precision (BackendOptions::precision): GEMM and convolutions in bf16 / fp16 against a
// hand reference that rounds the inputs (core/io/Half.h) and sums in double; fp16 overflow and
// the dynamic loss scaler; Trainer runs in bf16 and fp16; the project field and the CLI spelling;
// asynchronous uploads; and the same op comparisons on every CUDA GPU (skipped, saying why, without one).
#include <QTemporaryDir>
#include <QtTest>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/backend/Backend.h"
#include "core/backend/CpuBackend.h"
#include "core/backend/CpuBf16.h"
#include "core/backend/CpuPrecision.h"
#include "core/backend/CpuReferenceBackend.h"
#include "core/graph/Project.h"
#include "core/io/Half.h"
#include "core/train/BackendOptionsFor.h"
#include "core/train/Checkpoint.h"
#include "core/train/DynamicLossScale.h"
#include "core/train/Trainer.h"
#include "tests/support/TestBackends.h"
#include "tests/support/TestProjects.h"

using namespace strata;

namespace {

using Vec = std::vector<float>;

Vec randomVec(std::mt19937& rng, size_t n, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> u(lo, hi);
    Vec v(n);
    for (float& x : v) x = u(rng);
    return v;
}

// The definition: round to nearest even in the 16-bit type, widen back.
float roundTo(float v, ComputePrecision p) {
    if (p == ComputePrecision::BF16) return bfloat16ToFloat(floatToBFloat16(v));
    if (p == ComputePrecision::F16) return halfToFloat(floatToHalf(v));
    return v;
}

std::vector<double> roundedD(const Vec& v, ComputePrecision p) {
    std::vector<double> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = roundTo(v[i], p);
    return out;
}

// Runs `op` on `be` with the given device copies of host buffers; returns the host copy of buffer `result`.
Vec runOn(Backend& be, std::vector<Vec> host, size_t result, const std::function<void(std::vector<float*>&)>& op) {
    std::vector<Tensor> dev;
    std::vector<float*> ptrs;
    for (const Vec& h : host) {
        dev.push_back(be.fromHost(Shape{static_cast<int64_t>(std::max<size_t>(h.size(), 1))}, h.data()));
        ptrs.push_back(dev.back().f32());
    }
    op(ptrs);
    Vec out(host[result].size());
    be.copyToHost(out.data(), ptrs[result], out.size() * sizeof(float));
    return out;
}

// |got - want| <= tol * scale[i] for every i, where scale is sum |a||b| of that output (the float32
// accumulation error bound of a sum of exact products is a few ulps of it).
void expectClose(const Vec& got, const std::vector<double>& want, const std::vector<double>& scale, double tol,
                 const std::string& what) {
    QCOMPARE(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
        const double err = std::abs(static_cast<double>(got[i]) - want[i]);
        if (!(err <= tol * (scale[i] + 1e-30)))
            QFAIL(qPrintable(QString::fromStdString(what) + QString(": element %1 got %2 want %3 (error %4, bound %5)")
                                                                .arg(i)
                                                                .arg(double(got[i]), 0, 'g', 9)
                                                                .arg(want[i], 0, 'g', 9)
                                                                .arg(err)
                                                                .arg(tol * scale[i])));
    }
}

// A backend is made for one precision: these make one of each kind for `p`.
BackendOptions withPrecision(ComputePrecision p) {
    BackendOptions o;
    o.precision = p;
    return o;
}
using MakeBackend = std::unique_ptr<Backend> (*)(const BackendOptions&);
const MakeBackend kCpuBackends[] = {&test::makeReferenceBackend, &test::makeCpuBackend};

double maxAbsDiff(const Vec& a, const Vec& b) {
    double m = 0;
    for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(double(a[i]) - double(b[i])));
    return m;
}

// ---- GEMM reference ------------------------------------------------------------------------

struct GemmCase {
    bool ta = false, tb = false;
    int m = 1, n = 1, k = 1, lda = 1, ldb = 1, ldc = 1;
    float alpha = 1, beta = 0;
    Vec a, b, c;
};

GemmCase makeGemm(std::mt19937& rng, bool ta, bool tb, int m, int n, int k, float alpha, float beta) {
    GemmCase g;
    g.ta = ta;
    g.tb = tb;
    g.m = m;
    g.n = n;
    g.k = k;
    g.alpha = alpha;
    g.beta = beta;
    const int aRows = ta ? k : m, aCols = ta ? m : k, bRows = tb ? n : k, bCols = tb ? k : n;
    g.lda = aCols + 3;  // padded rows: the padding must not matter
    g.ldb = bCols + 1;
    g.ldc = n + 2;
    g.a = randomVec(rng, size_t(aRows) * g.lda);
    g.b = randomVec(rng, size_t(bRows) * g.ldb);
    g.c = randomVec(rng, size_t(m) * g.ldc);
    return g;
}

// C = alpha op(A) op(B) + beta C with rounded A, B, in double; scale[i] = |alpha| sum |a||b| + |beta c| + |want|.
void gemmReference(const GemmCase& g, ComputePrecision p, std::vector<double>& want, std::vector<double>& scale) {
    const std::vector<double> a = roundedD(g.a, p), b = roundedD(g.b, p);
    want.assign(g.c.begin(), g.c.end());
    scale.assign(g.c.size(), 0.0);
    for (int i = 0; i < g.m; ++i)
        for (int j = 0; j < g.n; ++j) {
            double s = 0, abs = 0;
            for (int l = 0; l < g.k; ++l) {
                const double av = g.ta ? a[size_t(l) * g.lda + i] : a[size_t(i) * g.lda + l];
                const double bv = g.tb ? b[size_t(j) * g.ldb + l] : b[size_t(l) * g.ldb + j];
                s += av * bv;
                abs += std::abs(av * bv);
            }
            const size_t o = size_t(i) * g.ldc + j;
            want[o] = g.alpha * s + g.beta * double(g.c[o]);
            scale[o] = std::abs(g.alpha) * abs + std::abs(g.beta * double(g.c[o])) + std::abs(want[o]);
        }
}

// On `be`, made for the precision under test.
Vec runGemm(Backend& be, const GemmCase& g) {
    return runOn(be, {g.a, g.b, g.c}, 2, [&](std::vector<float*>& d) {
        be.gemm(g.ta, g.tb, g.m, g.n, g.k, g.alpha, d[0], g.lda, d[1], g.ldb, g.beta, d[2], g.ldc);
    });
}

// ---- convolution reference ------------------------------------------------------------------

enum class ConvOp { Forward, BackwardData, BackwardFilter };

const char* convOpName(ConvOp op) {
    return op == ConvOp::Forward        ? "conv2dForward"
           : op == ConvOp::BackwardData ? "conv2dBackwardData"
                                        : "conv2dBackwardFilter";
}

struct ConvCase {
    ConvDesc d;
    Vec x, w, y;  // input, weights, output-sized (dy); the written one starts random (backward accumulates)
};

ConvCase makeConv(std::mt19937& rng, const ConvDesc& d) {
    ConvCase c;
    c.d = d;
    c.x = randomVec(rng, size_t(d.n) * d.c * d.h * d.w);
    c.w = randomVec(rng, size_t(d.k) * (d.c / d.groups) * d.r * d.s);
    c.y = randomVec(rng, size_t(d.n) * d.k * d.outH() * d.outW());
    return c;
}

// Visits every (x index, w index, y index) product of the convolution.
template <class Fn>
void forEachTap(const ConvDesc& d, Fn&& fn) {
    const int cg = d.c / d.groups, kg = d.k / d.groups, oh = d.outH(), ow = d.outW();
    for (int n = 0; n < d.n; ++n)
        for (int k = 0; k < d.k; ++k) {
            const int g = k / kg;
            for (int oy = 0; oy < oh; ++oy)
                for (int ox = 0; ox < ow; ++ox)
                    for (int ci = 0; ci < cg; ++ci)
                        for (int r = 0; r < d.r; ++r)
                            for (int s = 0; s < d.s; ++s) {
                                const int iy = oy * d.strideH - d.padH + r * d.dilationH;
                                const int ix = ox * d.strideW - d.padW + s * d.dilationW;
                                if (iy < 0 || iy >= d.h || ix < 0 || ix >= d.w) continue;
                                const int c = g * cg + ci;
                                fn(((size_t(n) * d.c + c) * d.h + iy) * d.w + ix,
                                   ((size_t(k) * cg + ci) * d.r + r) * d.s + s,
                                   ((size_t(n) * d.k + k) * oh + oy) * ow + ox);
                            }
        }
}

void convReference(const ConvCase& cc, ConvOp op, ComputePrecision p, std::vector<double>& want,
                   std::vector<double>& scale) {
    const std::vector<double> x = roundedD(cc.x, p), w = roundedD(cc.w, p), y = roundedD(cc.y, p);
    const Vec& start = op == ConvOp::Forward ? cc.y : op == ConvOp::BackwardData ? cc.x : cc.w;
    // Forward overwrites; the backward ops accumulate into what is there.
    want.assign(start.size(), 0.0);
    if (op != ConvOp::Forward)
        for (size_t i = 0; i < start.size(); ++i) want[i] = start[i];
    scale.assign(start.size(), 0.0);
    for (size_t i = 0; i < start.size(); ++i) scale[i] = std::abs(want[i]);
    forEachTap(cc.d, [&](size_t xi, size_t wi, size_t yi) {
        switch (op) {
            case ConvOp::Forward:
                want[yi] += x[xi] * w[wi];
                scale[yi] += std::abs(x[xi] * w[wi]);
                break;
            case ConvOp::BackwardData:
                want[xi] += y[yi] * w[wi];
                scale[xi] += std::abs(y[yi] * w[wi]);
                break;
            case ConvOp::BackwardFilter:
                want[wi] += y[yi] * x[xi];
                scale[wi] += std::abs(y[yi] * x[xi]);
                break;
        }
    });
    for (size_t i = 0; i < want.size(); ++i) scale[i] += std::abs(want[i]);
}

Vec runConv(Backend& be, const ConvCase& cc, ConvOp op) {
    const size_t result = op == ConvOp::Forward ? 2 : op == ConvOp::BackwardData ? 0 : 1;
    return runOn(be, {cc.x, cc.w, cc.y}, result, [&](std::vector<float*>& d) {
        if (op == ConvOp::Forward) be.conv2dForward(d[2], d[0], d[1], cc.d);
        if (op == ConvOp::BackwardData) be.conv2dBackwardData(d[0], d[2], d[1], cc.d);
        if (op == ConvOp::BackwardFilter) be.conv2dBackwardFilter(d[1], d[2], d[0], cc.d);
    });
}

// The fused forward (conv + float32 bias + ReLU) on rounded inputs: the convolution's reference, then
// bias and ReLU in double, which are not rounded.
void fusedReference(const ConvCase& cc, ComputePrecision p, const Vec& bias, bool relu, std::vector<double>& want,
                    std::vector<double>& scale) {
    convReference(cc, ConvOp::Forward, p, want, scale);
    const int inner = cc.d.outH() * cc.d.outW();
    for (size_t i = 0; i < want.size(); ++i) {
        const double b = bias.empty() ? 0.0 : double(bias[(i / size_t(inner)) % size_t(cc.d.k)]);
        want[i] += b;
        scale[i] += std::abs(b);
        if (relu) want[i] = std::max(want[i], 0.0);
    }
}

Vec runFused(Backend& be, const ConvCase& cc, const Vec& bias, bool relu) {
    const Vec b = bias.empty() ? Vec{0.0f} : bias;
    return runOn(be, {cc.x, cc.w, cc.y, b}, 2, [&](std::vector<float*>& d) {
        be.conv2dForwardFused(d[2], d[0], d[1], bias.empty() ? nullptr : d[3], relu, cc.d);
    });
}

std::vector<ConvDesc> convShapes() {
    std::vector<ConvDesc> shapes;
    ConvDesc a;  // odd sizes, padding
    a.n = 2, a.c = 3, a.h = 7, a.w = 6, a.k = 5, a.r = 3, a.s = 3, a.padH = 1, a.padW = 1;
    shapes.push_back(a);
    ConvDesc b;  // stride, dilation, groups
    b.n = 1, b.c = 4, b.h = 9, b.w = 8, b.k = 6, b.r = 3, b.s = 2, b.strideH = 2, b.strideW = 1, b.padH = 1;
    b.dilationW = 2, b.groups = 2;
    shapes.push_back(b);
    ConvDesc c;  // 1x1, larger channel count (long sums)
    c.n = 3, c.c = 32, c.h = 5, c.w = 5, c.k = 8, c.r = 1, c.s = 1;
    shapes.push_back(c);
    return shapes;
}

const ComputePrecision kReduced[] = {ComputePrecision::BF16, ComputePrecision::F16};

// float32 sums of up to a hundred exact products: a few ulps of the absolute sum.
constexpr double kTol = 1e-6;
// GPU libraries sum in other orders (split-K, tiles): the worst case of ~100 float32 additions, k * 2^-24.
constexpr double kGpuTol = 8e-6;

// max_i |got - want| / scale: how far a result is from a reference, in the units of the tolerances.
double maxNormalizedDiff(const Vec& got, const std::vector<double>& want, const std::vector<double>& scale) {
    double m = 0;
    for (size_t i = 0; i < got.size(); ++i) m = std::max(m, std::abs(double(got[i]) - want[i]) / (scale[i] + 1e-30));
    return m;
}

// ---- training helpers --------------------------------------------------------------------------

struct Recorder : TrainingObserver {
    std::vector<StepEvent> steps;
    std::vector<EpochEvent> epochs;
    std::vector<std::string> errors, logs;
    void onStep(const StepEvent& e) override { steps.push_back(e); }
    void onEpoch(const EpochEvent& e) override { epochs.push_back(e); }
    void onError(const std::string& m) override { errors.push_back(m); }
    void onLog(const std::string& m) override { logs.push_back(m); }
};

// Input [1,8,8] -> Conv2D 4 3x3 -> ReLU -> Flatten -> Dense 16 -> ReLU -> Dense classes on synthetic blobs:
// GEMM and all three convolutions run in the chosen precision.
Project convProject(const std::string& precision) {
    Project p;
    p.name = "precision";
    test::addChain(p.graph, {{"Input", "input", Json{{"shape", {1, 8, 8}}}},
                             {"Conv2D", "conv", Json{{"filters", 4}, {"kernel", 3}, {"padding", 1}}},
                             {"ReLU", "relu1"},
                             {"Flatten", "flatten"},
                             {"Dense", "dense1", Json{{"units", 16}}},
                             {"ReLU", "relu2"},
                             {"Dense", "dense2", Json{{"units", 4}}}});
    test::useBlobs(p, 640, 4, {1, 8, 8});
    p.training.optimizer = OptimizerKind::Sgd;
    p.training.learningRate = 0.05;
    p.training.momentum = 0.9;
    p.training.batchSize = 32;
    p.training.epochs = 3;
    p.training.seed = 11;
    p.training.precision = parseComputePrecision(precision);
    return p;
}

Recorder train(const Project& p, TrainerOptions o = {}, Backend* backend = nullptr) {
    auto owned = backend ? nullptr : test::makeCpuBackend(backendOptionsFor(p.training));
    Backend& be = backend ? *backend : *owned;
    Recorder rec;
    o.telemetryIntervalMs = 0;
    Trainer t(p, be, &rec, o);
    if (!t.run()) qWarning("training failed: %s", rec.errors.empty() ? "?" : rec.errors.front().c_str());
    return rec;
}

double meanLoss(const Recorder& r, size_t from, size_t count) {
    double s = 0;
    for (size_t i = from; i < from + count; ++i) s += r.steps[i].loss;
    return s / double(count);
}

}  // namespace

class TestMixedPrecision : public QObject {
    Q_OBJECT
private slots:
    // CpuBackend computes bf16 natively or refuses it (test_cpu_bf16): the cases that make one in bf16 need a CPU
    // with AVX512-BF16 or AMX.
    void init() {
        static const std::set<std::string> madeInBf16 = {
            "cpuGemmMatchesRoundedReference",         "cpuConvolutionsMatchRoundedReference",
            "fusedConvolutionsMatchRoundedReference", "representableInputsAreUnchanged",
            "reducedPrecisionTrainingConverges",      "eachRunSetsThePrecision"};
        const std::string why = cpu::bf16Unavailable();
        if (!why.empty() && madeInBf16.count(QTest::currentTestFunction()))
            QSKIP(qPrintable("CpuBackend refuses bf16 here: " + QString::fromStdString(why)));
    }

    void precisionNames() {
        QCOMPARE(parseComputePrecision("fp32"), ComputePrecision::F32);
        QCOMPARE(parseComputePrecision("f32"), ComputePrecision::F32);
        QCOMPARE(parseComputePrecision("bf16"), ComputePrecision::BF16);
        QCOMPARE(parseComputePrecision("fp16"), ComputePrecision::F16);
        QCOMPARE(std::string(computePrecisionName(ComputePrecision::BF16)), std::string("bf16"));
        try {
            parseComputePrecision("fp8");
            QFAIL("fp8 was accepted");
        } catch (const std::invalid_argument& e) {
            QVERIFY2(std::string(e.what()).find("expected fp32, bf16 or fp16") != std::string::npos, e.what());
        }
    }

    // The CPU's fast rounding equals the export code's conversions, bit for bit, on every class of float.
    void roundingAgreesWithHalfConversions() {
        std::mt19937 rng(1);
        std::vector<uint32_t> bits = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x00000001u,
                                      0x38800000u, 0x387fffffu, 0x33000000u, 0x33000001u, 0x477fefffu, 0x477ff000u,
                                      0x477fe000u, 0x7f7fffffu, 0x3f800fffu, 0x3f801000u, 0x3f803000u, 0x3f808000u};
        std::uniform_int_distribution<uint32_t> any;
        for (int i = 0; i < 400000; ++i) bits.push_back(any(rng));
        // Dense around fp16's subnormal and overflow edges.
        std::uniform_int_distribution<uint32_t> low(0x33000000u - 100, 0x38800000u + 100);
        std::uniform_int_distribution<uint32_t> high(0x477f0000u, 0x47800100u);
        for (int i = 0; i < 200000; ++i) bits.push_back(low(rng) | (i & 1 ? 0x80000000u : 0u));
        for (int i = 0; i < 50000; ++i) bits.push_back(high(rng));
        for (uint32_t b : bits) {
            const float v = std::bit_cast<float>(b);
            const float h = cpu::roundToPrecision(v, ComputePrecision::F16);
            const float hWant = halfToFloat(floatToHalf(v));
            const float bf = cpu::roundToPrecision(v, ComputePrecision::BF16);
            const float bfWant = bfloat16ToFloat(floatToBFloat16(v));
            if (std::isnan(v)) {
                QVERIFY(std::isnan(h) && std::isnan(bf));
                continue;
            }
            if (std::bit_cast<uint32_t>(h) != std::bit_cast<uint32_t>(hWant) ||
                std::bit_cast<uint32_t>(bf) != std::bit_cast<uint32_t>(bfWant))
                QFAIL(qPrintable(QString("bits %1: fp16 %2 want %3, bf16 %4 want %5")
                                     .arg(b, 8, 16, QChar('0'))
                                     .arg(double(h), 0, 'g', 9)
                                     .arg(double(hWant), 0, 'g', 9)
                                     .arg(double(bf), 0, 'g', 9)
                                     .arg(double(bfWant), 0, 'g', 9)));
        }
    }

    // ---- CPU ops against the hand reference -------------------------------------------------

    void cpuGemmMatchesRoundedReference() {
        std::mt19937 rng(3);
        for (MakeBackend make : kCpuBackends) {
            const auto f32Backend = make({});
            for (ComputePrecision p : kReduced) {
                const auto backend = make(withPrecision(p));
                for (int t = 0; t < 4; ++t) {
                    const bool ta = t & 1, tb = t & 2;
                    const float alpha = t == 3 ? 0.5f : 1.0f, beta = t >= 2 ? 1.0f : 0.0f;
                    const GemmCase g = makeGemm(rng, ta, tb, 7 + t, 9, 33 + 5 * t, alpha, beta);
                    std::vector<double> want, scale;
                    gemmReference(g, p, want, scale);
                    const Vec got = runGemm(*backend, g);
                    expectClose(got, want, scale, kTol,
                                std::string("gemm ") + computePrecisionName(p) + " trans " + std::to_string(t));
                    // The padding columns of C are never written.
                    for (int i = 0; i < g.m; ++i)
                        for (int j = g.n; j < g.ldc; ++j)
                            QCOMPARE(got[size_t(i) * g.ldc + j], g.c[size_t(i) * g.ldc + j]);
                    // Random floats are not representable in 16 bits: fp32 must give different results.
                    const Vec f32 = runGemm(*f32Backend, g);
                    const double d = maxAbsDiff(got, f32);
                    QVERIFY2(d > (p == ComputePrecision::BF16 ? 1e-3 : 1e-4), qPrintable(QString::number(d)));
                    std::vector<double> want32, scale32;
                    gemmReference(g, ComputePrecision::F32, want32, scale32);
                    expectClose(f32, want32, scale32, kTol, "gemm fp32");
                }
            }
        }
    }

    void cpuConvolutionsMatchRoundedReference() {
        std::mt19937 rng(5);
        for (MakeBackend make : kCpuBackends) {
            const auto f32Backend = make({}), bf16Backend = make(withPrecision(ComputePrecision::BF16)),
                       f16Backend = make(withPrecision(ComputePrecision::F16));
            for (const ConvDesc& d : convShapes()) {
                const ConvCase cc = makeConv(rng, d);
                for (ConvOp op : {ConvOp::Forward, ConvOp::BackwardData, ConvOp::BackwardFilter})
                    for (ComputePrecision p : kReduced) {
                        std::vector<double> want, scale;
                        convReference(cc, op, p, want, scale);
                        const Vec got = runConv(p == ComputePrecision::BF16 ? *bf16Backend : *f16Backend, cc, op);
                        expectClose(got, want, scale, kTol,
                                    std::string(convOpName(op)) + " " + computePrecisionName(p));
                        const Vec f32 = runConv(*f32Backend, cc, op);
                        QVERIFY2(maxAbsDiff(got, f32) > 1e-5, convOpName(op));
                    }
            }
        }
    }

    // The fused Conv2D step (bias and ReLU in the same call) rounds the same two inputs and nothing else,
    // on every backend present (the CUDA one may run it as one cuDNN call).
    void fusedConvolutionsMatchRoundedReference() {
        std::mt19937 rng(6);
        // Every backend present, once per reduced precision.
        std::vector<test::NamedBackend> backends[2];
        for (size_t i = 0; i < 2; ++i) {
            backends[i].push_back({"cpu-reference", test::makeReferenceBackend(withPrecision(kReduced[i]))});
            for (auto& nb : test::fastBackends(withPrecision(kReduced[i]))) backends[i].push_back(std::move(nb));
        }
        for (const ConvDesc& d : convShapes()) {
            const ConvCase cc = makeConv(rng, d);
            const Vec bias = randomVec(rng, size_t(d.k));
            for (int variant = 0; variant < 3; ++variant) {
                const bool withBias = variant != 1, relu = variant != 0;
                const Vec& b = withBias ? bias : Vec{};
                for (size_t i = 0; i < 2; ++i) {
                    const ComputePrecision p = kReduced[i];
                    std::vector<double> want, scale;
                    fusedReference(cc, p, b, relu, want, scale);
                    for (auto& nb : backends[i]) {
                        const bool gpu = nb.name.rfind("cuda", 0) == 0;
                        expectClose(runFused(*nb.backend, cc, b, relu), want, scale, gpu ? kGpuTol : kTol,
                                    nb.name + " conv2dForwardFused bias=" + std::to_string(withBias) +
                                        " relu=" + std::to_string(relu) + " " + computePrecisionName(p));
                    }
                }
            }
        }
    }

    // Values exact in 16 bits give the fp32 result exactly: only the inputs are rounded.
    void representableInputsAreUnchanged() {
        const Vec a = {0.5f, -1.25f, 3.0f, 0.125f}, b = {2.0f, 0.75f, -0.5f, 4.0f};
        for (ComputePrecision p : kReduced) {
            auto be = test::makeCpuBackend(withPrecision(p));
            const Vec c = runOn(*be, {a, b, Vec(4, 0.0f)}, 2, [&](std::vector<float*>& d) {
                be->gemm(false, false, 2, 2, 2, 1.0f, d[0], 2, d[1], 2, 0.0f, d[2], 2);
            });
            QCOMPARE(c, (Vec{0.5f * 2 + -1.25f * -0.5f, 0.5f * 0.75f + -1.25f * 4, 3.0f * 2 + 0.125f * -0.5f,
                             3.0f * 0.75f + 0.125f * 4}));
        }
    }

    // fp16's edges: 65519 rounds to 65504, 65520 and beyond overflow to inf, subnormals survive,
    // values below half the smallest subnormal flush to zero. bf16 keeps float32's range.
    void fp16RangeEdges() {
        const Vec x = {65519.0f, 65520.0f, 1e6f, 1e-7f, 2e-8f, -70000.0f};
        const Vec one = {1.0f};
        auto product = [&](ComputePrecision p) {
            auto be = test::makeReferenceBackend(withPrecision(p));
            return runOn(*be, {x, one, Vec(x.size(), 0.0f)}, 2, [&](std::vector<float*>& d) {
                be->gemm(false, false, int(x.size()), 1, 1, 1.0f, d[0], 1, d[1], 1, 0.0f, d[2], 1);
            });
        };
        const Vec h = product(ComputePrecision::F16);
        QCOMPARE(h[0], 65504.0f);
        QVERIFY(std::isinf(h[1]) && h[1] > 0);
        QVERIFY(std::isinf(h[2]));
        QCOMPARE(h[3], std::ldexp(2.0f, -24));  // 1e-7 is 1.68 units of 2^-24: rounds to 2 units
        QCOMPARE(h[4], 0.0f);
        QVERIFY(std::isinf(h[5]) && h[5] < 0);
        const Vec b = product(ComputePrecision::BF16);
        QCOMPARE(b[2], 999424.0f);  // 1e6 to 8 significant bits: 0x4974 0000
        QCOMPARE(b[3], bfloat16ToFloat(floatToBFloat16(1e-7f)));
        QVERIFY(std::isfinite(b[5]));
    }

    // ---- loss scaling ----------------------------------------------------------------------------

    void lossScalePolicy() {
        DynamicLossScale ls(1024.0f, 2.0f, 0.5f, 3);
        QVERIFY(!ls.update(false));
        QCOMPARE(ls.scale(), 512.0f);
        QVERIFY(ls.update(true));
        QVERIFY(ls.update(true));
        QVERIFY(ls.update(true));
        QCOMPARE(ls.scale(), 1024.0f);
        QCOMPARE(ls.skippedSteps(), int64_t(1));
        ls.restore(64.0f, 2, 5);
        QVERIFY(ls.update(true));  // the restored run of two good steps reaches three: grow
        QCOMPARE(ls.scale(), 128.0f);
        QCOMPARE(ls.skippedSteps(), int64_t(5));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, ls.restore(0.0f, 0, 0));
    }

    // A loss scale near FLT_MAX overflows fp16 in the first backward GEMM: every step is skipped
    // with the scale halved, and the weights stay as they were (the losses equal a run with lr 0).
    void fp16OverflowSkipsStepAndHalvesScale() {
        Project p = convProject("fp16");
        TrainerOptions o;
        o.maxSteps = 4;
        o.initialLossScale = 3.0e38f;
        const Recorder rec = train(p, o);
        QVERIFY2(rec.errors.empty(), rec.errors.empty() ? "" : rec.errors.front().c_str());
        QCOMPARE(rec.steps.size(), size_t(4));
        float expect = 3.0e38f;
        for (size_t i = 0; i < 4; ++i) {
            QVERIFY(rec.steps[i].skipped);
            QCOMPARE(rec.steps[i].lossScale, double(expect));
            QCOMPARE(rec.steps[i].skippedSteps, int64_t(i + 1));
            expect *= 0.5f;
        }
        int skippedLogs = 0;
        for (const std::string& l : rec.logs) skippedLogs += l.find("update skipped") != std::string::npos;
        QCOMPARE(skippedLogs, 4);

        Project frozen = convProject("fp16");
        frozen.training.learningRate = 0.0;
        TrainerOptions o2;
        o2.maxSteps = 4;
        o2.initialLossScale = 1024.0f;
        const Recorder still = train(frozen, o2);
        QCOMPARE(still.steps.size(), size_t(4));
        for (size_t i = 0; i < 4; ++i) {
            QVERIFY(!still.steps[i].skipped);
            QCOMPARE(still.steps[i].loss, rec.steps[i].loss);
        }
    }

    // A checkpoint keeps the precision and the loss scaler's state; resuming continues from them.
    void checkpointKeepsLossScale() {
        QTemporaryDir dir;
        Project p = convProject("fp16");
        p.training.epochs = 1;
        p.training.checkpointDir = dir.path().toStdString();
        TrainerOptions o;
        o.initialLossScale = 3.0e38f;  // every step of the first epoch overflows
        const Recorder first = train(p, o);
        QVERIFY2(first.errors.empty(), first.errors.empty() ? "" : first.errors.front().c_str());
        const size_t steps = first.steps.size();
        QCOMPARE(first.steps.back().skippedSteps, int64_t(steps));
        const Checkpoint c = loadCheckpoint(p.training.checkpointDir);
        QCOMPARE(c.project.training.precision, ComputePrecision::F16);
        QCOMPARE(c.trainerState.at("precision").get<std::string>(), std::string("fp16"));
        const double saved = c.trainerState.at("loss_scale").get<double>();
        QCOMPARE(saved, double(3.0e38f / float(1 << steps)));
        QCOMPARE(c.trainerState.at("skipped_steps").get<int64_t>(), int64_t(steps));

        p.training.epochs = 2;
        o.resumeFrom = p.training.checkpointDir;
        const Recorder second = train(p, o);
        QVERIFY2(second.errors.empty(), second.errors.empty() ? "" : second.errors.front().c_str());
        QVERIFY(!second.steps.empty());
        QCOMPARE(second.steps.front().lossScale, saved);
        QVERIFY(second.steps.front().skippedSteps >= int64_t(steps));
    }

    // ---- training ---------------------------------------------------------------------------------

    void reducedPrecisionTrainingConverges() {
        const Recorder f32 = train(convProject("fp32"));
        const Recorder bf16 = train(convProject("bf16"));
        const Recorder f16 = train(convProject("fp16"));
        for (const Recorder* r : {&f32, &bf16, &f16}) {
            QVERIFY2(r->errors.empty(), r->errors.empty() ? "" : r->errors.front().c_str());
            QCOMPARE(r->steps.size(), f32.steps.size());
        }
        QVERIFY(f32.steps.size() >= 40);
        const size_t n = f32.steps.size();
        for (const Recorder* r : {&bf16, &f16}) {
            const double first = meanLoss(*r, 0, 5), last = meanLoss(*r, n - 5, 5);
            QVERIFY2(last < 0.5 * first, qPrintable(QString("loss %1 -> %2").arg(first).arg(last)));
            QVERIFY2(r->epochs.back().valAccuracy > 0.6, qPrintable(QString::number(r->epochs.back().valAccuracy)));
            // Close to float32 at the start (same weights, inputs rounded), never bit-identical.
            const double rel0 = std::abs(r->steps[0].loss - f32.steps[0].loss) / f32.steps[0].loss;
            QVERIFY2(rel0 < 0.02, qPrintable(QString::number(rel0)));
            bool differs = false;
            for (size_t i = 0; i < n; ++i) differs = differs || r->steps[i].loss != f32.steps[i].loss;
            QVERIFY(differs);
            // Near convergence the losses are small; compare the gap with the loss the run started from.
            const double gapEnd = std::abs(r->epochs.back().trainLoss - f32.epochs.back().trainLoss);
            QVERIFY2(gapEnd < 0.05 * f32.epochs.front().trainLoss,
                     qPrintable(QString("final train loss %1 vs fp32 %2 (first epoch %3)")
                                    .arg(r->epochs.back().trainLoss)
                                    .arg(f32.epochs.back().trainLoss)
                                    .arg(f32.epochs.front().trainLoss)));
        }
        // fp16 bookkeeping: a scale on every step, bf16 and fp32 report none.
        QVERIFY(f16.steps.front().lossScale == 65536.0);
        QCOMPARE(bf16.steps.front().lossScale, 0.0);
        QCOMPARE(f32.steps.front().lossScale, 0.0);
        // bf16 and fp16 round differently.
        bool bfVsHalf = false;
        for (size_t i = 0; i < n; ++i) bfVsHalf = bfVsHalf || bf16.steps[i].loss != f16.steps[i].loss;
        QVERIFY(bfVsHalf);
    }

    // A backend's precision is fixed when it is made, so a bf16 run cannot leak into a later fp32 one:
    // runs on one backend repeat exactly, and a run asking another precision than the backend's stops
    // with that error instead of training in the backend's precision.
    void eachRunSetsThePrecision() {
        auto be32 = test::makeCpuBackend(backendOptionsFor(convProject("fp32").training));
        auto be16 = test::makeCpuBackend(backendOptionsFor(convProject("bf16").training));
        QCOMPARE(be32->computePrecision(), ComputePrecision::F32);
        QCOMPARE(be16->computePrecision(), ComputePrecision::BF16);
        TrainerOptions o;
        o.maxSteps = 3;
        const Recorder a = train(convProject("fp32"), o, be32.get());
        const Recorder b = train(convProject("bf16"), o, be16.get());
        const Recorder c = train(convProject("fp32"), o, be32.get());
        QCOMPARE(a.steps.size(), size_t(3));
        for (size_t i = 0; i < 3; ++i) QCOMPARE(c.steps[i].loss, a.steps[i].loss);
        QVERIFY(b.steps[1].loss != a.steps[1].loss);
        for (auto [project, backend] : {std::pair{"bf16", be32.get()}, std::pair{"fp32", be16.get()}}) {
            const Recorder wrong = train(convProject(project), o, backend);
            QCOMPARE(wrong.steps.size(), size_t(0));
            QCOMPARE(wrong.errors.size(), size_t(1));
            QVERIFY2(wrong.errors.front().find(std::string("training.precision is ") + project) != std::string::npos &&
                         wrong.errors.front().find("backendOptionsFor") != std::string::npos,
                     wrong.errors.front().c_str());
        }
    }

    // A backend without reduced precision refuses to be made for it (Backend's constructor), so no run
    // can silently train in float32: made for fp32, the run asking bf16 stops with an error.
    void backendWithoutPrecisionRefuses() {
        struct Fp32Only : CpuReferenceBackend {
            explicit Fp32Only(const BackendOptions& o) : CpuReferenceBackend(Traits{"fp32-only"}, o) {}
        };
        Fp32Only be({});
        QCOMPARE(be.computePrecision(), ComputePrecision::F32);
        for (ComputePrecision p : kReduced) {
            try {
                Fp32Only refused(withPrecision(p));
                QFAIL("a backend without reduced precision was made for it");
            } catch (const BackendError& e) {
                const std::string want =
                    std::string("cannot compute gemm and convolutions in ") + computePrecisionName(p);
                QVERIFY2(std::string(e.what()).find(want) != std::string::npos, e.what());
            }
        }
        TrainerOptions o;
        o.maxSteps = 2;
        const Recorder r = train(convProject("bf16"), o, &be);
        QCOMPARE(r.steps.size(), size_t(0));
        QCOMPARE(r.errors.size(), size_t(1));
        QVERIFY2(r.errors.front().find("made for fp32 compute but training.precision is bf16") != std::string::npos,
                 r.errors.front().c_str());
    }

    // ---- project file -----------------------------------------------------------------------------

    void projectFieldRoundTrips() {
        for (const char* value : {"fp32", "bf16", "fp16"}) {
            Project p = convProject(value);
            const Project back = projectFromJson(projectToJson(p));
            QCOMPARE(settingName(back.training.precision), std::string(value));
            QVERIFY(back == p);
        }
        Json j = projectToJson(convProject("bf16"));
        QCOMPARE(j["training"]["precision"].get<std::string>(), std::string("bf16"));
        j["training"]["precision"] = "f16";
        try {
            parseProject(j.dump(), "run.strata");
            QFAIL("precision f16 was accepted");
        } catch (const ProjectError& e) {
            QCOMPARE(e.jsonPath(), std::string("/training/precision"));
            QVERIFY2(std::string(e.what()).find("run.strata") != std::string::npos, e.what());
            QVERIFY2(std::string(e.what()).find("'f16'") != std::string::npos, e.what());
        }
    }

    // ---- uploads ----------------------------------------------------------------------------------

    void uploadAsyncIsVisibleToLaterOps() {
        std::vector<std::unique_ptr<Backend>> all;
        all.push_back(test::makeCpuBackend());
        for (auto& nb : test::fastBackends())
            if (nb.name != "cpu") all.push_back(std::move(nb.backend));
        for (auto& be : all) {
            Tensor bufs[2] = {be->zeros(Shape{64}), be->zeros(Shape{64})};
            Tensor sum = be->zeros(Shape{64});
            Vec host(64);
            double expected = 0;
            for (int step = 0; step < 6; ++step) {
                for (size_t i = 0; i < host.size(); ++i) host[i] = float(step * 100 + int(i));
                be->uploadAsync(bufs[step % 2].raw(), host.data(), host.size() * sizeof(float));
                host.assign(64, -1.0f);  // the source may be reused at once
                be->axpy(sum.f32(), 1.0f, bufs[step % 2].f32(), 64);
                for (int i = 0; i < 64; ++i) expected += step * 100 + i;
            }
            QCOMPARE(be->sum(sum.f32(), 64), expected);
        }
    }

    // ---- CUDA against the CPU emulation -------------------------------------------------------------

    void cudaOpsMatchCpuEmulation() {
        const std::string why = test::gpuUnavailableReason();
        if (!why.empty()) QSKIP(why.c_str());
        std::mt19937 rng(9);
        for (ComputePrecision p : kReduced) {
            auto ref = test::makeReferenceBackend(withPrecision(p));
            for (auto& nb : test::fastBackends(withPrecision(p))) {
                if (nb.name.rfind("cuda", 0) != 0) continue;
                Backend& gpu = *nb.backend;
                for (int t = 0; t < 4; ++t) {
                    const GemmCase g = makeGemm(rng, t & 1, t & 2, 37, 29 + t, 64 + t, 1.0f, t >= 2 ? 1.0f : 0.0f);
                    std::vector<double> want, scale, want32, scale32;
                    gemmReference(g, p, want, scale);
                    gemmReference(g, ComputePrecision::F32, want32, scale32);
                    const Vec got = runGemm(gpu, g);
                    expectClose(got, want, scale, kGpuTol, nb.name + " gemm " + computePrecisionName(p));
                    expectClose(runGemm(*ref, g), want, scale, kTol, "reference gemm");
                    // And the inputs were rounded: unrounded float32 is farther away than the tolerance.
                    const double from32 = maxNormalizedDiff(got, want32, scale32);
                    QVERIFY2(from32 > 4 * kGpuTol, qPrintable(QString("%1 from float32").arg(from32)));
                }
                for (const ConvDesc& d : convShapes()) {
                    const ConvCase cc = makeConv(rng, d);
                    for (ConvOp op : {ConvOp::Forward, ConvOp::BackwardData, ConvOp::BackwardFilter}) {
                        std::vector<double> want, scale;
                        convReference(cc, op, p, want, scale);
                        expectClose(runConv(gpu, cc, op), want, scale, kGpuTol,
                                    nb.name + " " + convOpName(op) + " " + computePrecisionName(p));
                    }
                }
                // fp16 overflow is inf on the GPU too.
                if (p != ComputePrecision::F16) continue;
                const Vec inf = runOn(gpu, {Vec{70000.0f}, Vec{1.0f}, Vec{0.0f}}, 2, [&](std::vector<float*>& d) {
                    gpu.gemm(false, false, 1, 1, 1, 1.0f, d[0], 1, d[1], 1, 0.0f, d[2], 1);
                });
                QVERIFY(std::isinf(inf[0]));
            }
        }
    }

    void cudaTrainingInBf16() {
        const std::string why = test::gpuUnavailableReason();
        if (!why.empty()) QSKIP(why.c_str());
        for (auto& nb : test::fastBackends(backendOptionsFor(convProject("bf16").training))) {
            if (nb.name.rfind("cuda", 0) != 0) continue;
            const Recorder cpu = train(convProject("bf16"));
            const Recorder gpu = train(convProject("bf16"), {}, nb.backend.get());
            QVERIFY2(gpu.errors.empty(), gpu.errors.empty() ? "" : gpu.errors.front().c_str());
            QCOMPARE(gpu.steps.size(), cpu.steps.size());
            // Same definition, different summation order: the first losses agree closely.
            QVERIFY2(std::abs(gpu.steps[0].loss - cpu.steps[0].loss) < 1e-4 * cpu.steps[0].loss,
                     qPrintable(QString("%1 vs %2").arg(gpu.steps[0].loss).arg(cpu.steps[0].loss)));
            QVERIFY(gpu.epochs.back().trainLoss < 0.5 * gpu.steps.front().loss);
        }
    }
};

QTEST_GUILESS_MAIN(TestMixedPrecision)
#include "test_mixed_precision.moc"
