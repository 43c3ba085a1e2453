// Backend conformance: every op of Backend, forward and backward, on every
// fast backend (the CPU fast path, each CUDA GPU) against the CPU reference,
// on random shapes including odd sizes. The reference itself is pinned by
// hand-computed values and by finite differences of its own forward ops.
// The tolerance table has one line per op of the registry (BackendOps.def),
// and every op must be compared at least once: an op added to Backend
// without a conformance test fails this suite.
#include <QtTest>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/backend/Backend.h"
#include "core/backend/BackendOps.h"
#include "core/backend/CpuBackend.h"
#include "core/backend/CpuReferenceBackend.h"
#include "tests/support/TestBackends.h"

using namespace strata;
using strata::test::NamedBackend;

namespace {

// ---- tolerances (float32), one line per op of backendOpNames() ------------------------
// A value passes when |got - want| <= abs * scale + rel * |want|, where scale is the RMS of
// the reference output (at least 1): ops that sum many terms may differ by a few ulps of
// the typical magnitude, not of each element. 0/0 means bit-exact.
struct Tolerance {
    const char* op;
    double abs;
    double rel;
};

const Tolerance kTolerances[] = {
    {"fill", 0, 0},
    {"zero", 0, 0},
    {"scale", 0, 0},
    {"axpy", 1e-7, 1e-6},
    {"add", 0, 0},
    {"mul", 0, 0},
    {"gemm", 2e-5, 1e-4},
    {"gemmStridedBatched", 2e-5, 1e-4},
    {"addBiasRows", 0, 0},
    {"sumRows", 2e-6, 1e-5},
    {"addBiasChannels", 0, 0},
    {"sumChannels", 2e-6, 1e-5},
    {"conv2dForward", 2e-5, 1e-4},
    {"conv2dBackwardData", 2e-5, 1e-4},
    {"conv2dBackwardFilter", 2e-5, 1e-4},
    {"conv2dForwardFused", 2e-5, 1e-4},
    {"conv2dBackwardFused", 2e-5, 1e-4},
    {"pool2dForward", 1e-6, 1e-6},
    {"pool2dBackward", 1e-6, 1e-6},
    {"maxPool2dReLUBackward", 1e-6, 1e-6},
    {"meanPoolForward", 1e-6, 1e-5},
    {"meanPoolBackward", 1e-6, 1e-5},
    {"sequencePoolForward", 1e-6, 1e-5},
    {"sequencePoolBackward", 1e-6, 1e-5},
    {"activationForward", 1e-6, 1e-5},
    {"activationBackward", 1e-6, 1e-5},
    {"clipForward", 0, 0},
    {"clipBackward", 0, 0},
    {"upsample2dForward", 1e-6, 1e-5},
    {"upsample2dBackward", 1e-6, 1e-5},
    {"softmaxForward", 1e-6, 1e-5},
    {"softmaxBackward", 1e-6, 1e-5},
    {"maskedSoftmaxForward", 1e-6, 1e-5},
    {"softmaxCrossEntropy", 1e-6, 1e-5},
    {"mseLoss", 1e-6, 1e-5},
    {"bceWithLogits", 1e-6, 1e-5},
    {"robustLoss", 1e-6, 1e-5},
    {"countCorrect", 0, 0},
    {"stepMetrics", 0, 1e-6},
    {"batchNormForwardTraining", 1e-5, 1e-4},
    {"batchNormForwardInference", 1e-6, 1e-5},
    {"batchNormBackward", 1e-5, 1e-4},
    {"layerNormForward", 1e-5, 1e-4},
    {"layerNormBackward", 1e-5, 1e-4},
    {"dropoutForward", 0, 1e-6},
    {"dropoutBackward", 0, 1e-6},
    {"embeddingForward", 0, 0},
    {"embeddingBackward", 1e-6, 1e-6},
    {"copyBlocks", 0, 0},
    {"reblock", 0, 1e-7},
    {"gatherRows", 0, 0},
    {"sum", 0, 1e-6},
    {"sumSquares", 0, 1e-6},
    {"allFinite", 0, 0},
    {"sgdUpdate", 1e-7, 1e-6},
    {"adamUpdate", 1e-7, 1e-5},
};

// A CUDA backend's exceptions, each with its reason (measured on an H200, 2026-12-04, the first GPU run); the
// rest of its ops keep the table above.
const Tolerance kCudaTolerances[] = {
    // cuDNN picks its fp32 convolution algorithm by timing (as PyTorch's benchmark mode does), FFT and Winograd
    // among them: their error is a few 1e-5 of the output's RMS (4.5e-5 measured: c272 -> k256, 3x3 on 4x4).
    {"conv2dForward", 1e-4, 1e-4},
    {"conv2dBackwardData", 1e-4, 1e-4},
    {"conv2dBackwardFilter", 1e-4, 1e-4},
    {"conv2dForwardFused", 1e-4, 1e-4},
    {"conv2dBackwardFused", 1e-4, 1e-4},
    // cuDNN sums the batch statistics in fp32: in the cases offset by a mean of 1000, an ulp of the sum is about
    // 1e-4 of a normalized output (1.5e-4 measured; the reference sums in double).
    {"batchNormForwardTraining", 4e-4, 1e-4},
    {"batchNormBackward", 4e-4, 1e-4},
    // x * (1 / keep) for x / keep, and fused multiply-adds: two ulps where the CPU is within one (1.5e-6 and
    // 1.0e-6 relative measured).
    {"dropoutForward", 1e-7, 2e-6},
    {"dropoutBackward", 1e-7, 2e-6},
    {"sgdUpdate", 2e-7, 2e-6},
    {"adamUpdate", 2e-7, 2e-5},
};

const Tolerance& tolerance(const std::string& op, const std::string& backend = "cpu") {
    if (backend.rfind("cuda", 0) == 0)
        for (const Tolerance& t : kCudaTolerances)
            if (op == t.op) return t;
    for (const Tolerance& t : kTolerances)
        if (op == t.op) return t;
    throw std::logic_error("no tolerance for op " + op);
}

using Vec = std::vector<float>;
using Outputs = std::vector<Vec>;

Vec randomVec(std::mt19937& rng, size_t n, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> u(lo, hi);
    Vec v(n);
    for (float& x : v) x = u(rng);
    return v;
}

int pick(std::mt19937& rng, std::initializer_list<int> values) {
    std::uniform_int_distribution<size_t> u(0, values.size() - 1);
    return *(values.begin() + u(rng));
}

// Host <-> backend helpers. Tensors free their memory through the backend.
Tensor up(Backend& b, const Vec& h) { return b.fromHost(Shape{static_cast<int64_t>(h.size())}, h.data()); }
Tensor upLabels(Backend& b, const std::vector<int32_t>& h) {
    Tensor t = b.empty(Shape{static_cast<int64_t>(h.size())}, DType::I32);
    b.copyFromHost(t.raw(), h.data(), h.size() * sizeof(int32_t));
    return t;
}
Vec down(Backend& b, const Tensor& t) {
    b.synchronize();
    Vec h(static_cast<size_t>(t.numel()));
    b.toHost(t, h.data());
    return h;
}

std::string describe(const ConvDesc& d) {
    std::ostringstream s;
    s << "n" << d.n << " c" << d.c << " " << d.h << "x" << d.w << " k" << d.k << " " << d.r << "x" << d.s << " stride"
      << d.strideH << "," << d.strideW << " pad" << d.padH << "," << d.padW << " dil" << d.dilationH << ","
      << d.dilationW << " groups" << d.groups;
    return s.str();
}

std::string describe(const PoolDesc& d) {
    std::ostringstream s;
    s << (d.mode == PoolMode::Max ? "max" : "avg") << " n" << d.n << " c" << d.c << " " << d.h << "x" << d.w
      << " kernel" << d.kernelH << "x" << d.kernelW << " stride" << d.strideH << "," << d.strideW << " pad" << d.padH
      << "," << d.padW;
    return s.str();
}

// Empty when every element is within the op's tolerance; otherwise the worst element.
std::string compareVectors(const Vec& got, const Vec& want, const Tolerance& tol) {
    if (got.size() != want.size())
        return "size " + std::to_string(got.size()) + " != reference size " + std::to_string(want.size());
    double sq = 0.0;
    for (float w : want) sq += static_cast<double>(w) * w;
    const double scale = std::max(1.0, want.empty() ? 1.0 : std::sqrt(sq / static_cast<double>(want.size())));
    double worst = -1.0;
    size_t worstAt = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const double g = got[i], w = want[i];
        if (std::isnan(w) && std::isnan(g)) continue;
        const double err = std::fabs(g - w);
        const double allowed = tol.abs * scale + tol.rel * std::fabs(w);
        if (err <= allowed) continue;
        const double e = std::isnan(err) ? std::numeric_limits<double>::infinity() : err;
        if (e > worst) {
            worst = e;
            worstAt = i;
        }
    }
    if (worst < 0) return {};
    std::ostringstream s;
    s.precision(9);
    s << "element " << worstAt << ": got " << got[worstAt] << ", reference " << want[worstAt] << " (error " << worst
      << ", allowed " << tol.abs * scale + tol.rel * std::fabs(static_cast<double>(want[worstAt])) << ")";
    return s.str();
}

// An [n, c, hw] tensor between NCHW and blocked by b (b = 0: as it is): element (image, channel, position) sits at
// ((image * c/b + ch/b) * hw + p) * b + ch % b when blocked.
Vec reblocked(const Vec& v, int n, int c, int64_t hw, int b, bool toBlocked) {
    if (b == 0) return v;
    Vec out(v.size());
    for (int i = 0; i < n; ++i)
        for (int ch = 0; ch < c; ++ch)
            for (int64_t p = 0; p < hw; ++p) {
                const size_t plain = (static_cast<size_t>(i) * c + ch) * hw + p;
                const size_t blocked = ((static_cast<size_t>(i) * (c / b) + ch / b) * hw + p) * b + ch % b;
                (toBlocked ? out[blocked] : out[plain]) = toBlocked ? v[plain] : v[blocked];
            }
    return out;
}

// Hand-computed expectations: equal within 1e-6 (absolute and relative).
#define CHECK_VEC(got, want)                                                                   \
    do {                                                                                       \
        const std::string err_ = compareVectors((got), (want), Tolerance{"hand", 1e-6, 1e-6}); \
        QVERIFY2(err_.empty(), err_.c_str());                                                  \
    } while (false)

}  // namespace

class TestBackendOps : public QObject {
    Q_OBJECT

private:
    std::unique_ptr<Backend> m_ref;
    std::vector<NamedBackend> m_fast;
    std::set<std::string> m_compared;  // ops compareAll has run (everyOpIsCompared)

    // Runs `run` on the reference and on every fast backend and compares every output.
    // Returns false (after recording the failure) on the first mismatch.
    bool compareAll(const std::string& op, const std::string& context, const std::function<Outputs(Backend&)>& run) {
        m_compared.insert(op);
        const Outputs want = run(*m_ref);
        for (NamedBackend& nb : m_fast) {
            const Outputs got = run(*nb.backend);
            for (size_t o = 0; o < want.size(); ++o) {
                const std::string err = compareVectors(got[o], want[o], tolerance(op, nb.name));
                if (!err.empty()) {
                    const std::string msg =
                        op + " on " + nb.name + " [" + context + "] output " + std::to_string(o) + ": " + err;
                    QTest::qFail(msg.c_str(), __FILE__, __LINE__);
                    return false;
                }
            }
        }
        return true;
    }

    // Finite-difference check of a reference backward op: the analytic gradient of
    // L = sum(forward(x) * r) must match central differences on a sample of elements.
    bool gradCheck(const std::string& what, Vec x, const Vec& analytic, const std::function<Vec(const Vec&)>& forward,
                   const Vec& r, double h = 1e-2, double tol = 2e-2) {
        auto loss = [&](const Vec& in) {
            const Vec y = forward(in);
            double l = 0.0;
            for (size_t i = 0; i < y.size(); ++i) l += static_cast<double>(y[i]) * r[i];
            return l;
        };
        const size_t step = std::max<size_t>(1, x.size() / 40);
        for (size_t i = 0; i < x.size(); i += step) {
            const float saved = x[i];
            x[i] = static_cast<float>(saved + h);
            const double lp = loss(x);
            x[i] = static_cast<float>(saved - h);
            const double lm = loss(x);
            x[i] = saved;
            const double numeric = (lp - lm) / (2 * h);
            if (std::fabs(numeric - analytic[i]) > tol * std::max(1.0, std::fabs(numeric))) {
                const std::string msg = what + ": element " + std::to_string(i) + " analytic " +
                                        std::to_string(analytic[i]) + ", finite difference " + std::to_string(numeric);
                QTest::qFail(msg.c_str(), __FILE__, __LINE__);
                return false;
            }
        }
        return true;
    }

private slots:
    void initTestCase() {
        m_ref = test::makeReferenceBackend();
        QVERIFY(dynamic_cast<CpuReferenceBackend*>(m_ref.get()));
        m_fast = test::fastBackends();
        QVERIFY(!m_fast.empty());
        QCOMPARE(m_fast.front().name, std::string("cpu"));
        // Two more CPU configurations, so every fast path is covered whatever this machine has:
        // three threads (uneven work splits), and the im2col convolutions when oneDNN is in use.
        BackendOptions threeThreads;
        threeThreads.threads = 3;
        m_fast.push_back({"cpu-3threads", std::make_unique<CpuBackend>(threeThreads)});
        if (CpuBackend::oneDnnAvailable()) {
            auto im2col = std::make_unique<CpuBackend>();
            im2col->setOneDnn(false);
            m_fast.push_back({"cpu-im2col", std::move(im2col)});
        }
        // And oneDNN's direct convolutions where this CPU runs Winograd's for 3x3 kernels on blocked tensors.
        if (CpuBackend::winogradAvailable()) {
            auto direct = std::make_unique<CpuBackend>();
            direct->setWinograd(false);
            m_fast.push_back({"cpu-direct", std::move(direct)});
        }
        for (const NamedBackend& nb : m_fast) qInfo("checking backend %s against cpu-reference", nb.name.c_str());
    }

    // The tolerance table and the op registry name the same ops, both ways.
    void opRegistryMatchesTolerances() {
        std::set<std::string> registry, table;
        for (std::string_view name : backendOpNames()) registry.insert(std::string(name));
        for (const Tolerance& t : kTolerances)
            QVERIFY2(table.insert(t.op).second, (std::string("twice: ") + t.op).c_str());
        QCOMPARE(registry.size(), backendOps().size());
        for (const std::string& op : registry)
            QVERIFY2(table.count(op), ("op " + op + " has no tolerance and no conformance test here").c_str());
        for (const std::string& op : table)
            QVERIFY2(registry.count(op), ("tolerance for " + op + ", which is not an op of BackendOps.def").c_str());
        for (BackendOp op : backendOps()) QVERIFY(registry.count(backendOpName(op)));
    }

    // The GPU backends take part in every test below when present; this says why they do not.
    void gpuBackendsPresent() {
        const std::string why = test::gpuUnavailableReason();
        if (!why.empty()) QSKIP(("no GPU: " + why).c_str());
        QVERIFY(m_fast.size() >= 2);
    }

    // ---- element-wise ----------------------------------------------------------

    void elementwise() {
        std::mt19937 rng(1);
        for (int n : {1, 3, 17, 33, 1000, 4099}) {
            const Vec a = randomVec(rng, n), b = randomVec(rng, n);
            const std::string ctx = "n=" + std::to_string(n);
            if (!compareAll("fill", ctx, [&](Backend& be) {
                    Tensor y = up(be, a);
                    be.fill(y.f32(), 0.37f, n);
                    return Outputs{down(be, y)};
                }))
                return;
            if (!compareAll("zero", ctx, [&](Backend& be) {
                    Tensor z = up(be, a);
                    be.zero(z.raw(), z.bytes());
                    return Outputs{down(be, z)};
                }))
                return;
            if (!compareAll("scale", ctx, [&](Backend& be) {
                    Tensor y = up(be, a);
                    be.scale(y.f32(), -1.75f, n);
                    return Outputs{down(be, y)};
                }))
                return;
            if (!compareAll("axpy", ctx, [&](Backend& be) {
                    Tensor y = up(be, a), x = up(be, b);
                    be.axpy(y.f32(), 0.3f, x.f32(), n);
                    return Outputs{down(be, y)};
                }))
                return;
            if (!compareAll("add", ctx, [&](Backend& be) {
                    Tensor y = be.empty(Shape{n}), x = up(be, a), z = up(be, b);
                    be.add(y.f32(), x.f32(), z.f32(), n);
                    return Outputs{down(be, y)};
                }))
                return;
            // In place, as a pruning mask is applied: y = y * b.
            if (!compareAll("mul", ctx, [&](Backend& be) {
                    Tensor y = up(be, a), z = up(be, b);
                    be.mul(y.f32(), y.f32(), z.f32(), n);
                    return Outputs{down(be, y)};
                }))
                return;
            if (!compareAll("sum", ctx, [&](Backend& be) {
                    Tensor x = up(be, a);
                    return Outputs{Vec{static_cast<float>(be.sum(x.f32(), n))}};
                }))
                return;
            if (!compareAll("sumSquares", ctx, [&](Backend& be) {
                    Tensor x = up(be, a);
                    return Outputs{Vec{static_cast<float>(be.sumSquares(x.f32(), n))}};
                }))
                return;
            if (!compareAll("allFinite", ctx, [&](Backend& be) {
                    Tensor x = up(be, a);
                    return Outputs{Vec{be.allFinite(x.f32(), n) ? 1.0f : 0.0f}};
                }))
                return;
        }
        // NaN and Inf are seen by allFinite and propagate through sumSquares.
        for (NamedBackend& nb : m_fast) {
            Vec v(37, 1.0f);
            v[36] = std::numeric_limits<float>::infinity();
            Tensor t = up(*nb.backend, v);
            QVERIFY2(!nb.backend->allFinite(t.f32(), 37), nb.name.c_str());
            QVERIFY(nb.backend->allFinite(t.f32(), 36));
            v[36] = std::numeric_limits<float>::quiet_NaN();
            Tensor u = up(*nb.backend, v);
            QVERIFY2(!nb.backend->allFinite(u.f32(), 37), nb.name.c_str());
            QVERIFY(std::isnan(nb.backend->sumSquares(u.f32(), 37)));
        }
    }

    void copyBlocks() {
        std::mt19937 rng(2);
        for (int accumulate = 0; accumulate < 2; ++accumulate)
            for (int count : {1, 3, 17}) {
                const int blockLen = pick(rng, {1, 5, 33}), srcStride = blockLen + pick(rng, {0, 2}),
                          dstStride = blockLen + pick(rng, {0, 7});
                const Vec src = randomVec(rng, static_cast<size_t>(count) * srcStride);
                const Vec dst = randomVec(rng, static_cast<size_t>(count) * dstStride);
                const std::string ctx = "count " + std::to_string(count) + " block " + std::to_string(blockLen) +
                                        (accumulate ? " accumulate" : " copy");
                if (!compareAll("copyBlocks", ctx, [&](Backend& be) {
                        Tensor d = up(be, dst), s = up(be, src);
                        be.copyBlocks(d.f32(), dstStride, s.f32(), srcStride, blockLen, count, accumulate != 0);
                        return Outputs{down(be, d)};
                    }))
                    return;
            }
    }

    // An [n, c, inner] tensor between NCHW and blocked layouts, copied and accumulated, on every backend: against
    // the reference and, on the reference, against this file's own reblocked() (the layout the blocked ops use).
    void reblock() {
        std::mt19937 rng(21);
        struct Case {
            int n, c, inner, dstBlock, srcBlock;
        };
        for (const Case& cs : std::vector<Case>{{2, 16, 9, 0, 16},
                                                {2, 16, 9, 16, 0},
                                                {3, 32, 5, 0, 8},
                                                {1, 32, 7, 8, 0},
                                                {2, 32, 4, 8, 16},
                                                {2, 8, 1, 0, 8}})
            for (bool accumulate : {false, true}) {
                const size_t total = size_t(cs.n) * cs.c * cs.inner;
                const Vec src = randomVec(rng, total), dst = randomVec(rng, total);
                const std::string ctx = "n" + std::to_string(cs.n) + " c" + std::to_string(cs.c) + " inner " +
                                        std::to_string(cs.inner) + " block " + std::to_string(cs.srcBlock) + " -> " +
                                        std::to_string(cs.dstBlock) + (accumulate ? " accumulate" : " copy");
                auto run = [&](Backend& be) {
                    Tensor d = up(be, dst), s = up(be, src);
                    be.reblock(d.f32(), cs.dstBlock, s.f32(), cs.srcBlock, cs.n, cs.c, cs.inner, accumulate);
                    return down(be, d);
                };
                // Expected: src read in NCHW order, written in dst's layout (plus dst's own values, in that layout).
                const Vec plain = reblocked(src, cs.n, cs.c, cs.inner, cs.srcBlock, false);
                Vec want = reblocked(plain, cs.n, cs.c, cs.inner, cs.dstBlock, true);
                if (accumulate)
                    for (size_t i = 0; i < total; ++i) want[i] += dst[i];
                const Vec got = run(*m_ref);
                const std::string err = compareVectors(got, want, Tolerance{"hand", 1e-6, 1e-6});
                QVERIFY2(err.empty(), ("cpu-reference reblock " + ctx + ": " + err).c_str());
                if (!compareAll("reblock", ctx, [&](Backend& be) { return Outputs{run(be)}; })) return;
            }
        // A channel count the block does not divide is refused, naming the op.
        Tensor t = m_ref->zeros(Shape{24});
        QVERIFY_THROWS_EXCEPTION(BackendError, m_ref->reblock(t.f32(), 16, t.f32(), 0, 1, 24, 1, false));
    }

    // Rows by index, float and int32 rows alike (4-byte words), repeats and any order.
    void gatherRows() {
        std::mt19937 rng(4);
        for (const int rowWords : {1, 3, 784}) {
            const int srcRows = 37, count = 50;
            const Vec src = randomVec(rng, size_t(srcRows) * rowWords);
            std::vector<int32_t> idx(count);
            for (int32_t& i : idx) i = static_cast<int32_t>(rng() % srcRows);
            idx[0] = srcRows - 1, idx[1] = 0;
            if (!compareAll("gatherRows", "words " + std::to_string(rowWords), [&](Backend& be) {
                    Tensor S = up(be, src), I = upLabels(be, idx), D = be.zeros(Shape{int64_t(count) * rowWords});
                    be.gatherRows(D.f32(), S.f32(), srcRows, I.i32(), count, rowWords);
                    return Outputs{down(be, D)};
                }))
                return;
        }
        // By hand, on int32 data; and a bad index names itself on every backend.
        std::vector<Backend*> all{m_ref.get()};
        for (NamedBackend& nb : m_fast) all.push_back(nb.backend.get());
        for (Backend* be : all) {
            Tensor S = upLabels(*be, {10, 11, 12, 13}), I = upLabels(*be, {3, 3, 0}),
                   D = be->zeros(Shape{3}, DType::I32);
            be->gatherRows(D.raw(), S.raw(), 4, I.i32(), 3, 1);
            std::vector<int32_t> got(3);
            be->copyToHost(got.data(), D.raw(), sizeof(int32_t) * 3);
            QVERIFY2((got == std::vector<int32_t>{13, 13, 10}), be->name().c_str());
            Tensor Bad = upLabels(*be, {1, 4});
            try {
                be->gatherRows(D.raw(), S.raw(), 4, Bad.i32(), 2, 1);
                be->synchronize();
                QFAIL(("gatherRows accepted index 4 of 4 rows on " + be->name()).c_str());
            } catch (const BackendError& e) {
                const std::string msg = e.what();
                QVERIFY2(msg.find("gatherRows") != std::string::npos && msg.find("index 4") != std::string::npos,
                         msg.c_str());
            }
        }
    }

    // copy() within one buffer moves overlapping ranges as memmove does, in either direction.
    void overlappingCopy() {
        Vec base(40);
        for (size_t i = 0; i < base.size(); ++i) base[i] = static_cast<float>(i);
        for (const int shift : {3, -3, 17, -17}) {
            if (!compareAll("copyBlocks", "copy shifted by " + std::to_string(shift), [&](Backend& be) {
                    Tensor t = up(be, base);
                    float* p = t.f32();
                    const int from = shift > 0 ? 0 : -shift, to = shift > 0 ? shift : 0;
                    be.copy(p + to, p + from, 20 * sizeof(float));
                    return Outputs{down(be, t)};
                }))
                return;
        }
        Vec want = base;
        std::memmove(want.data() + 3, want.data(), 20 * sizeof(float));
        CHECK_VEC(down(*m_ref,
                       [&] {
                           Tensor t = up(*m_ref, base);
                           m_ref->copy(t.f32() + 3, t.f32(), 20 * sizeof(float));
                           return t;
                       }()),
                  want);
    }

    // ---- linear algebra --------------------------------------------------------

    void gemm() {
        std::mt19937 rng(3);
        for (int trial = 0; trial < 40; ++trial) {
            const bool ta = trial & 1, tb = trial & 2;
            const int m = pick(rng, {1, 3, 17, 33, 64}), n = pick(rng, {1, 3, 17, 33, 128}),
                      k = pick(rng, {1, 3, 17, 33, 300});
            const int lda = (ta ? m : k) + pick(rng, {0, 3}), ldb = (tb ? k : n) + pick(rng, {0, 5}),
                      ldc = n + pick(rng, {0, 2});
            const float alpha = pick(rng, {1, 2}) == 1 ? 1.0f : -0.5f;
            const float beta = trial % 3 == 0 ? 0.0f : (trial % 3 == 1 ? 1.0f : 0.25f);
            const Vec a = randomVec(rng, static_cast<size_t>(ta ? k : m) * lda);
            const Vec b = randomVec(rng, static_cast<size_t>(tb ? n : k) * ldb);
            Vec c = randomVec(rng, static_cast<size_t>(m) * ldc);
            // With beta == 0, C must not be read: NaN in it must not leak into the result.
            if (beta == 0.0f) std::fill(c.begin(), c.end(), std::numeric_limits<float>::quiet_NaN());
            std::ostringstream ctx;
            ctx << (ta ? "T" : "N") << (tb ? "T" : "N") << " m" << m << " n" << n << " k" << k << " alpha " << alpha
                << " beta " << beta;
            if (!compareAll("gemm", ctx.str(), [&](Backend& be) {
                    Tensor A = up(be, a), B = up(be, b), C = up(be, c);
                    be.gemm(ta, tb, m, n, k, alpha, A.f32(), lda, B.f32(), ldb, beta, C.f32(), ldc);
                    Vec out = down(be, C);
                    if (ldc != n)  // padding columns are not part of the result
                        for (int i = 0; i < m; ++i)
                            for (int j = n; j < ldc; ++j) out[static_cast<size_t>(i) * ldc + j] = 0.0f;
                    return Outputs{out};
                }))
                return;
        }
    }

    // Attention's layout: per head, products over the batch whose operands interleave (strides larger than a
    // matrix, leading dimensions larger than a row), and C between the products left untouched.
    void gemmStridedBatched() {
        std::mt19937 rng(31);
        for (int trial = 0; trial < 24; ++trial) {
            const bool ta = trial & 1, tb = trial & 2;
            const int m = pick(rng, {1, 5, 17, 64}), n = pick(rng, {1, 4, 16, 33}), k = pick(rng, {1, 8, 17, 64});
            const int count = pick(rng, {1, 2, 3, 7, 16});
            const int lda = (ta ? m : k) + pick(rng, {0, 3}), ldb = (tb ? k : n) + pick(rng, {0, 5}),
                      ldc = n + pick(rng, {0, 2});
            const int64_t sa = int64_t(ta ? k : m) * lda + pick(rng, {0, 7}),
                          sb = trial % 5 == 0 ? 0 : int64_t(tb ? n : k) * ldb + pick(rng, {0, 3}),  // 0: shared B
                sc = int64_t(m) * ldc + pick(rng, {0, 4});
            const float alpha = trial % 4 == 1 ? 0.125f : 1.0f, beta = trial % 3 == 0 ? 0.0f : 0.5f;
            const Vec a = randomVec(rng, static_cast<size_t>(sa * count));
            const Vec b = randomVec(rng, static_cast<size_t>(std::max<int64_t>(sb * count, int64_t(tb ? n : k) * ldb)));
            const Vec c = randomVec(rng, static_cast<size_t>(sc * count));
            std::ostringstream ctx;
            ctx << (ta ? "T" : "N") << (tb ? "T" : "N") << " m" << m << " n" << n << " k" << k << " count " << count
                << " strides " << sa << "," << sb << "," << sc << " beta " << beta;
            if (!compareAll("gemmStridedBatched", ctx.str(), [&](Backend& be) {
                    Tensor A = up(be, a), B = up(be, b), C = up(be, c);
                    be.gemmStridedBatched(ta, tb, m, n, k, alpha, A.f32(), lda, sa, B.f32(), ldb, sb, beta, C.f32(),
                                          ldc, sc, count);
                    return Outputs{down(be, C)};
                }))
                return;
        }
    }

    void biasOps() {
        std::mt19937 rng(4);
        for (int trial = 0; trial < 8; ++trial) {
            const int rows = pick(rng, {1, 3, 17, 64}), cols = pick(rng, {1, 3, 33, 128});
            const int inner = pick(rng, {1, 7, 196});
            const Vec y = randomVec(rng, static_cast<size_t>(rows) * cols * inner), bias = randomVec(rng, cols);
            const std::string ctx =
                std::to_string(rows) + "x" + std::to_string(cols) + " inner " + std::to_string(inner);
            if (!compareAll("addBiasRows", ctx, [&](Backend& be) {
                    Tensor Y = up(be, y), B = up(be, bias);
                    be.addBiasRows(Y.f32(), B.f32(), rows * inner, cols);
                    return Outputs{down(be, Y)};
                }))
                return;
            if (!compareAll("sumRows", ctx, [&](Backend& be) {
                    Tensor Y = up(be, y), B = up(be, bias);
                    be.sumRows(B.f32(), Y.f32(), rows * inner, cols);
                    return Outputs{down(be, B)};
                }))
                return;
            if (!compareAll("addBiasChannels", ctx, [&](Backend& be) {
                    Tensor Y = up(be, y), B = up(be, bias);
                    be.addBiasChannels(Y.f32(), B.f32(), rows, cols, inner);
                    return Outputs{down(be, Y)};
                }))
                return;
            if (!compareAll("sumChannels", ctx, [&](Backend& be) {
                    Tensor Y = up(be, y), B = up(be, bias);
                    be.sumChannels(B.f32(), Y.f32(), rows, cols, inner);
                    return Outputs{down(be, B)};
                }))
                return;
        }
    }

    // ---- convolution -------------------------------------------------------------

    void conv2d() {
        std::vector<ConvDesc> cases;
        auto add = [&](int n, int c, int h, int w, int k, int r, int s, int stride, int pad, int dil, int groups) {
            ConvDesc d;
            d.n = n, d.c = c, d.h = h, d.w = w, d.k = k, d.r = r, d.s = s;
            d.strideH = d.strideW = stride;
            d.padH = d.padW = pad;
            d.dilationH = d.dilationW = dil;
            d.groups = groups;
            cases.push_back(d);
        };
        add(2, 1, 28, 28, 32, 3, 3, 1, 1, 1, 1);   // Fashion-MNIST conv1
        add(2, 32, 14, 14, 64, 3, 3, 1, 1, 1, 1);  // Fashion-MNIST conv2
        add(1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1);
        add(3, 3, 17, 13, 5, 3, 3, 2, 1, 1, 1);
        add(1, 4, 9, 11, 6, 3, 2, 1, 2, 2, 2);  // groups, dilation, padding larger than needed
        add(2, 6, 8, 8, 6, 3, 3, 1, 1, 1, 6);   // depthwise
        add(3, 5, 7, 7, 3, 1, 1, 1, 0, 1, 1);   // 1x1
        add(1, 3, 33, 17, 4, 5, 5, 3, 2, 1, 1);
        add(2, 8, 6, 5, 4, 4, 3, 2, 0, 1, 2);
        add(2, 32, 9, 9, 32, 3, 3, 1, 1, 1, 32);  // depthwise, channels = groups = 32 (MobileNet's 3x3)
        add(2, 32, 10, 10, 32, 3, 3, 2, 1, 1, 32);
        add(2, 16, 7, 7, 32, 3, 3, 1, 1, 1, 4);  // 4 groups: 4 input and 8 output channels each
        // One output channel (the CPU's narrow path, cpu::narrowConvApplies): a decoder's last layer, a 5x3
        // kernel with padding 2, no padding, a ragged one, and one too small for the path (oneDNN's then).
        add(2, 32, 28, 28, 1, 3, 3, 1, 1, 1, 1);
        add(2, 16, 20, 24, 1, 5, 3, 1, 2, 1, 1);
        add(3, 24, 30, 30, 1, 3, 3, 1, 0, 1, 1);
        add(4, 16, 21, 19, 1, 3, 3, 1, 1, 1, 1);  // rows and columns that are not whole vectors or row groups
        add(1, 8, 12, 12, 1, 3, 3, 1, 1, 1, 1);
        {
            ConvDesc d;  // asymmetric stride, padding and dilation
            d.n = 2, d.c = 2, d.h = 10, d.w = 9, d.k = 3, d.r = 3, d.s = 2;
            d.strideH = 1, d.strideW = 2, d.padH = 0, d.padW = 1, d.dilationH = 2, d.dilationW = 1;
            cases.push_back(d);
        }
        std::mt19937 rng(5);
        for (const ConvDesc& d : cases) {
            const size_t xs = static_cast<size_t>(d.n) * d.c * d.h * d.w;
            const size_t ws = static_cast<size_t>(d.k) * (d.c / d.groups) * d.r * d.s;
            const size_t ys = static_cast<size_t>(d.n) * d.k * d.outH() * d.outW();
            const Vec x = randomVec(rng, xs), w = randomVec(rng, ws), dy = randomVec(rng, ys);
            const Vec dx0 = randomVec(rng, xs), dw0 = randomVec(rng, ws);  // backward accumulates into these
            const std::string ctx = describe(d);
            if (!compareAll("conv2dForward", ctx, [&](Backend& be) {
                    Tensor X = up(be, x), W = up(be, w), Y = be.empty(Shape{static_cast<int64_t>(ys)});
                    be.conv2dForward(Y.f32(), X.f32(), W.f32(), d);
                    return Outputs{down(be, Y)};
                }))
                return;
            if (!compareAll("conv2dBackwardData", ctx, [&](Backend& be) {
                    Tensor DY = up(be, dy), W = up(be, w), DX = up(be, dx0);
                    be.conv2dBackwardData(DX.f32(), DY.f32(), W.f32(), d);
                    return Outputs{down(be, DX)};
                }))
                return;
            if (!compareAll("conv2dBackwardFilter", ctx, [&](Backend& be) {
                    Tensor DY = up(be, dy), X = up(be, x), DW = up(be, dw0);
                    be.conv2dBackwardFilter(DW.f32(), DY.f32(), X.f32(), d);
                    return Outputs{down(be, DW)};
                }))
                return;
            // The fused layer steps: every combination of bias and ReLU forward, and of the three
            // gradients backward (absent ones must stay untouched: sentinel buffers compared too).
            const Vec bias = randomVec(rng, static_cast<size_t>(d.k)), db0 = randomVec(rng, static_cast<size_t>(d.k));
            for (int variant = 0; variant < 4; ++variant) {
                const bool withBias = variant & 1, relu = variant & 2;
                if (!compareAll(
                        "conv2dForwardFused",
                        ctx + " bias=" + std::to_string(withBias) + " relu=" + std::to_string(relu), [&](Backend& be) {
                            // Y starts as NaN: the fused step must write it, never read it.
                            Tensor X = up(be, x), W = up(be, w), B = up(be, bias),
                                   Y = up(be, Vec(ys, std::numeric_limits<float>::quiet_NaN()));
                            be.conv2dForwardFused(Y.f32(), X.f32(), W.f32(), withBias ? B.f32() : nullptr, relu, d);
                            return Outputs{down(be, Y)};
                        }))
                    return;
            }
            // Masks 8 to 15 overwrite dx (which starts as NaN: it must be written, never read).
            for (int mask = 1; mask < 16; ++mask) {
                const bool overwrite = mask & 8;
                if (overwrite && !(mask & 1)) continue;
                if (!compareAll("conv2dBackwardFused", ctx + " outputs " + std::to_string(mask), [&](Backend& be) {
                        Tensor DY = up(be, dy), X = up(be, x), W = up(be, w), DW = up(be, dw0), DB = up(be, db0);
                        Tensor DX = up(be, overwrite ? Vec(dx0.size(), std::numeric_limits<float>::quiet_NaN()) : dx0);
                        be.conv2dBackwardFused(mask & 1 ? DX.f32() : nullptr, mask & 2 ? DW.f32() : nullptr,
                                               mask & 4 ? DB.f32() : nullptr, DY.f32(), X.f32(), W.f32(), d, overwrite);
                        return Outputs{down(be, DX), down(be, DW), down(be, DB)};
                    }))
                    return;
            }
        }
        // The one-output-channel cases above ran the narrow path on the CPU backends (all of them: it takes NCHW
        // with or without oneDNN), and the too-small one did not.
        for (const NamedBackend& nb : m_fast) {
            const auto* cpu = dynamic_cast<const CpuBackend*>(nb.backend.get());
            if (!cpu) continue;
            int narrow = 0;
            for (const ConvDesc& d : cases) narrow += cpu->narrowConvRuns(d) ? 1 : 0;
            QVERIFY2(narrow == 4, (nb.name + ": " + std::to_string(narrow) + " narrow cases").c_str());
            QVERIFY2(cpu->narrowConvCalls() > 0, (nb.name + " never ran the narrow convolutions").c_str());
        }
    }

    // The fused convolutions on blocked tensors (ConvDesc::srcBlock, dstBlock, in the backend's activationBlock):
    // each backend with a block gets the input, dy and the accumulated dx blocked as the case says and its
    // results are read back in NCHW order; the reference (no block) runs NCHW. Cases: oneDNN's usual shapes,
    // two blocks per tensor with stride 2, groups, and a one-channel input (the im2col path, through copies).
    // The 3x3 stride-1 cases blocked both ways are Winograd's on a CPU with AVX-512 ("cpu", "cpu-3threads";
    // "cpu-direct" runs them through oneDNN): padding 0, 1 and 2, outputs that are not whole 4x4 tiles, tile
    // groups that span images, and several channel blocks in and out.
    void conv2dBlocked() {
        bool anyBlock = false;
        for (NamedBackend& nb : m_fast) anyBlock = anyBlock || nb.backend->activationBlock() > 0;
        if (!anyBlock) QSKIP("no backend here has a blocked layout (no oneDNN, or STRATA_BLOCKED_LAYOUT=0)");
        const auto reorder = reblocked;
        struct Case {
            int n, c, h, w, k, stride, groups, pad;
            bool blockedIn, blockedOut;
            uint64_t frozen;  // ConvDesc::weightsVersion: 0, or an id of this case's weights
            bool winograd;    // run by Winograd on an AVX-512 CPU
        };
        // Channel counts are multiples of 16 (and of 8). Winograd's needs 64 tiles of 4x4 outputs in the batch
        // unless the weights are frozen (then their transform is kept): the small cases freeze theirs. The last
        // has more than 256 x 256 channel pairs: the direct convolution's.
        const std::vector<Case> cases{
            {2, 16, 9, 9, 16, 1, 1, 1, true, true, 1, true},
            {2, 32, 8, 8, 32, 2, 1, 1, true, true, 0, false},
            {3, 16, 7, 7, 32, 1, 1, 1, true, false, 0, false},
            {2, 32, 6, 6, 16, 1, 1, 1, false, true, 0, false},
            {2, 32, 7, 7, 32, 1, 2, 1, true, true, 0, false},
            {2, 1, 10, 10, 16, 1, 1, 1, false, true, 0, false},
            {3, 16, 7, 5, 16, 1, 1, 0, true, true, 2, true},
            {2, 32, 13, 6, 48, 1, 1, 2, true, true, 3, true},
            {2, 48, 28, 28, 16, 1, 1, 1, true, true, 0, true},
            {1, 32, 28, 28, 32, 1, 1, 1, true, true, 0, false},
            {4, 16, 14, 13, 16, 1, 1, 1, true, true, 0, true},
            {5, 16, 3, 4, 32, 1, 1, 1, true, true, 4, true},
            {1, 272, 4, 4, 256, 1, 1, 1, true, true, 5, false},
            // Depthwise (MobileNet's: channels = groups = 32, stride 1 and 2) and 4 groups of 8, blocked both ways.
            {2, 32, 9, 9, 32, 1, 32, 1, true, true, 0, false},
            {2, 32, 10, 10, 32, 2, 32, 1, true, true, 6, false},
            {2, 32, 8, 8, 64, 1, 4, 1, true, true, 0, false}};
        std::mt19937 rng(17);
        int winograd = 0;
        for (const Case& cs : cases) {
            ConvDesc d;
            d.n = cs.n, d.c = cs.c, d.h = cs.h, d.w = cs.w, d.k = cs.k, d.r = d.s = 3;
            d.strideH = d.strideW = cs.stride, d.padH = d.padW = cs.pad, d.groups = cs.groups;
            d.weightsVersion = cs.frozen;
            const int64_t hw = int64_t(d.h) * d.w, ohw = int64_t(d.outH()) * d.outW();
            const size_t xs = static_cast<size_t>(d.inputSize()), ys = static_cast<size_t>(d.outputSize());
            const Vec x = randomVec(rng, xs), w = randomVec(rng, static_cast<size_t>(d.weightSize())),
                      dy = randomVec(rng, ys), dx0 = randomVec(rng, xs),
                      bias = randomVec(rng, static_cast<size_t>(d.k));
            const std::string ctx =
                describe(d) + (cs.blockedIn ? " blocked in" : "") + (cs.blockedOut ? " blocked out" : "");
            // The descriptor and the blocks a backend runs this case with.
            auto on = [&](Backend& be, int& inB, int& outB) {
                const int b = be.activationBlock();
                ConvDesc e = d;
                e.srcBlock = inB = cs.blockedIn ? b : 0;
                e.dstBlock = outB = cs.blockedOut ? b : 0;
                return e;
            };
            // Which of these the AVX-512 CPU backends run by Winograd.
            for (NamedBackend& nb : m_fast) {
                auto* cpu = dynamic_cast<CpuBackend*>(nb.backend.get());
                if (!cpu || !CpuBackend::winogradAvailable() || cpu->activationBlock() == 0) continue;
                int inB = 0, outB = 0;
                const bool want = nb.name != "cpu-direct" && cs.winograd;
                QVERIFY2(cpu->winogradRuns(on(*cpu, inB, outB)) == want, (nb.name + ": " + ctx).c_str());
                winograd += want ? 1 : 0;
            }
            if (!compareAll("conv2dForwardFused", ctx, [&](Backend& be) {
                    int inB = 0, outB = 0;
                    const ConvDesc e = on(be, inB, outB);
                    Tensor X = up(be, reorder(x, d.n, d.c, hw, inB, true)), W = up(be, w), B = up(be, bias),
                           Y = up(be, Vec(ys, std::numeric_limits<float>::quiet_NaN()));
                    be.conv2dForwardFused(Y.f32(), X.f32(), W.f32(), B.f32(), true, e);
                    return Outputs{reorder(down(be, Y), d.n, d.k, ohw, outB, false)};
                }))
                return;
            // Backward: all three gradients (dx added to, then overwritten from NaN), and subsets (an absent
            // gradient's buffer must stay as it was: a frozen kernel with a trained bias asks for dbias alone).
            for (int mask : {7, 15, 1, 6, 4})
                if (!compareAll("conv2dBackwardFused", ctx + " outputs " + std::to_string(mask), [&](Backend& be) {
                        const bool overwrite = mask & 8;
                        int inB = 0, outB = 0;
                        const ConvDesc e = on(be, inB, outB);
                        Tensor DY = up(be, reorder(dy, d.n, d.k, ohw, outB, true)),
                               X = up(be, reorder(x, d.n, d.c, hw, inB, true)), W = up(be, w),
                               DW = be.zeros(Shape{d.weightSize()}), DB = be.zeros(Shape{d.k});
                        Tensor DX = up(be, overwrite ? Vec(xs, std::numeric_limits<float>::quiet_NaN())
                                                     : reorder(dx0, d.n, d.c, hw, inB, true));
                        be.conv2dBackwardFused(mask & 1 ? DX.f32() : nullptr, mask & 2 ? DW.f32() : nullptr,
                                               mask & 4 ? DB.f32() : nullptr, DY.f32(), X.f32(), W.f32(), e, overwrite);
                        return Outputs{reorder(down(be, DX), d.n, d.c, hw, inB, false), down(be, DW), down(be, DB)};
                    }))
                    return;
        }
        if (CpuBackend::winogradAvailable() && winograd == 0) QFAIL("no case ran Winograd's convolutions");
        if (CpuBackend::winogradAvailable())
            qInfo("Winograd's convolutions checked with %d-channel blocks", test::makeCpuBackend()->activationBlock());
        else
            qInfo("this CPU runs no Winograd kernels for its block: Winograd's convolutions not checked");
        // A backend without a block refuses blocked descriptors, naming the op.
        ConvDesc d;
        d.n = 1, d.c = d.k = 16, d.h = d.w = 4, d.srcBlock = 16;
        Tensor X = m_ref->zeros(Shape{d.inputSize()}), W = m_ref->zeros(Shape{d.weightSize()}),
               Y = m_ref->zeros(Shape{d.outputSize()});
        QVERIFY_THROWS_EXCEPTION(BackendError, m_ref->conv2dForwardFused(Y.f32(), X.f32(), W.f32(), nullptr, false, d));
    }

    // 2x2 stride-2 max pooling on blocked tensors (PoolDesc::block) against the reference in NCHW: forward,
    // backward (added to dx) and the backward with the ReLU before it (maxPool2dReLUBackward); ties included.
    void pool2dBlocked() {
        bool anyBlock = false;
        for (NamedBackend& nb : m_fast) anyBlock = anyBlock || nb.backend->activationBlock() > 0;
        if (!anyBlock) QSKIP("no backend here has a blocked layout (no oneDNN, or STRATA_BLOCKED_LAYOUT=0)");
        std::mt19937 rng(19);
        for (const auto& [n, c, h, w] : std::vector<std::array<int, 4>>{{2, 16, 8, 8}, {3, 32, 6, 10}, {1, 16, 7, 5}}) {
            PoolDesc d;
            d.n = n, d.c = c, d.h = h, d.w = w;
            const int64_t hw = int64_t(h) * w, ohw = int64_t(d.outH()) * d.outW();
            Vec x = randomVec(rng, static_cast<size_t>(n * c * hw));
            for (size_t i = 0; i < x.size(); i += 7) x[i] = x[i + 1 < x.size() ? i + 1 : i];  // ties
            Vec xr = x;  // the ReLU's output the ReLU-masked backward pools: zeros, whose windows get no gradient
            for (float& v : xr) v = std::max(v, 0.0f);
            const Vec dy = randomVec(rng, static_cast<size_t>(n * c * ohw)), dx0 = randomVec(rng, x.size());
            const std::string ctx = "n" + std::to_string(n) + " c" + std::to_string(c) + " " + std::to_string(h) + "x" +
                                    std::to_string(w) + " blocked";
            auto on = [&](Backend& be) {
                PoolDesc e = d;
                e.block = be.activationBlock();
                return e;
            };
            if (!compareAll("pool2dForward", ctx, [&](Backend& be) {
                    const PoolDesc e = on(be);
                    Tensor X = up(be, reblocked(x, n, c, hw, e.block, true)), Y = be.empty(Shape{n * c * ohw});
                    be.pool2dForward(Y.f32(), X.f32(), e);
                    return Outputs{reblocked(down(be, Y), n, c, ohw, e.block, false)};
                }))
                return;
            // dx added to, then overwritten (from NaN; 7x5 leaves its last row and column to be zeroed).
            for (bool overwrite : {false, true})
                for (bool relu : {false, true})
                    if (!compareAll(
                            relu ? "maxPool2dReLUBackward" : "pool2dBackward", ctx + (overwrite ? " overwrite" : ""),
                            [&](Backend& be) {
                                const PoolDesc e = on(be);
                                Tensor X = up(be, reblocked(relu ? xr : x, n, c, hw, e.block, true)),
                                       Y = be.empty(Shape{n * c * ohw});
                                be.pool2dForward(Y.f32(), X.f32(), e);
                                Tensor DY = up(be, reblocked(dy, n, c, ohw, e.block, true)),
                                       DX = up(be, overwrite ? Vec(x.size(), std::numeric_limits<float>::quiet_NaN())
                                                             : reblocked(dx0, n, c, hw, e.block, true));
                                if (relu)
                                    be.maxPool2dReLUBackward(DX.f32(), DY.f32(), X.f32(), Y.f32(), e, overwrite);
                                else
                                    be.pool2dBackward(DX.f32(), DY.f32(), X.f32(), Y.f32(), e, overwrite);
                                return Outputs{reblocked(down(be, DX), n, c, hw, e.block, false)};
                            }))
                        return;
        }
    }

    // The fused forward really applies bias and ReLU (not only agrees with a reference that might not).
    void conv2dFusedHandValues() {
        ConvDesc d;  // 1x1 kernel, one input channel: y = w * x + b
        d.n = 1, d.c = 1, d.h = 1, d.w = 3, d.k = 2, d.r = 1, d.s = 1;
        for (NamedBackend& nb : m_fast) {
            Backend& be = *nb.backend;
            const Vec x{1.0f, -2.0f, 0.5f}, w{2.0f, -1.0f}, b{0.5f, 0.25f};
            Tensor X = up(be, x), W = up(be, w), B = up(be, b), Y = be.empty(Shape{6});
            be.conv2dForwardFused(Y.f32(), X.f32(), W.f32(), B.f32(), true, d);
            const Vec want{2.5f, 0.0f, 1.5f, 0.0f, 2.25f, 0.0f};
            const std::string err = compareVectors(down(be, Y), want, Tolerance{"hand", 1e-6, 1e-6});
            QVERIFY2(err.empty(), (nb.name + ": " + err).c_str());
            // Backward: dbias = sum of dy per channel, added to what is there.
            const Vec dy{1.0f, 2.0f, 3.0f, -1.0f, 0.5f, 0.5f};
            Tensor DY = up(be, dy), DB = up(be, Vec{10.0f, 20.0f});
            be.conv2dBackwardFused(nullptr, nullptr, DB.f32(), DY.f32(), X.f32(), W.f32(), d);
            const std::string errB = compareVectors(down(be, DB), Vec{16.0f, 20.0f}, Tolerance{"hand", 1e-6, 1e-6});
            QVERIFY2(errB.empty(), (nb.name + ": " + errB).c_str());
        }
    }

    // Calling a convolution again with other sizes must not reuse stale scratch contents.
    void conv2dRepeatedCalls() {
        std::mt19937 rng(6);
        for (int trial = 0; trial < 6; ++trial) {
            ConvDesc d;
            d.n = pick(rng, {1, 3, 5}), d.c = pick(rng, {1, 3, 8}), d.h = pick(rng, {5, 12}), d.w = pick(rng, {6, 11});
            d.k = pick(rng, {2, 7}), d.r = d.s = pick(rng, {1, 3}), d.padH = d.padW = d.r / 2;
            const size_t xs = static_cast<size_t>(d.n) * d.c * d.h * d.w,
                         ws = static_cast<size_t>(d.k) * d.c * d.r * d.s;
            const size_t ys = static_cast<size_t>(d.n) * d.k * d.outH() * d.outW();
            const Vec x = randomVec(rng, xs), w = randomVec(rng, ws), dy = randomVec(rng, ys);
            if (!compareAll("conv2dForward", describe(d), [&](Backend& be) {
                    Tensor X = up(be, x), W = up(be, w), DY = up(be, dy), Y = be.empty(Shape{static_cast<int64_t>(ys)});
                    Tensor DX = be.zeros(Shape{static_cast<int64_t>(xs)}),
                           DW = be.zeros(Shape{static_cast<int64_t>(ws)});
                    be.conv2dForward(Y.f32(), X.f32(), W.f32(), d);
                    be.conv2dBackwardData(DX.f32(), DY.f32(), W.f32(), d);
                    be.conv2dBackwardFilter(DW.f32(), DY.f32(), X.f32(), d);
                    return Outputs{down(be, Y), down(be, DX), down(be, DW)};
                }))
                return;
        }
    }

    // ---- pooling -------------------------------------------------------------------

    void pool2d() {
        std::vector<PoolDesc> cases;
        auto add = [&](PoolMode mode, int n, int c, int h, int w, int k, int stride, int pad) {
            PoolDesc d;
            d.mode = mode, d.n = n, d.c = c, d.h = h, d.w = w;
            d.kernelH = d.kernelW = k, d.strideH = d.strideW = stride, d.padH = d.padW = pad;
            cases.push_back(d);
        };
        for (PoolMode mode : {PoolMode::Max, PoolMode::Average}) {
            add(mode, 2, 32, 28, 28, 2, 2, 0);
            add(mode, 1, 1, 1, 1, 1, 1, 0);
            add(mode, 3, 3, 17, 17, 3, 2, 1);
            add(mode, 2, 5, 33, 9, 3, 1, 1);  // overlapping windows
            add(mode, 1, 2, 7, 7, 2, 3, 0);   // gaps between windows
            add(mode, 2, 4, 9, 9, 5, 2, 2);   // wide padding: clipped windows
            add(mode, 2, 3, 7, 5, 2, 2, 0);   // 2x2 windows leaving the last row and column out
        }
        std::mt19937 rng(7);
        for (const PoolDesc& d : cases)
            for (int ties = 0; ties < 2; ++ties) {
                const size_t xs = static_cast<size_t>(d.n) * d.c * d.h * d.w;
                const size_t ys = static_cast<size_t>(d.n) * d.c * d.outH() * d.outW();
                Vec x = randomVec(rng, xs);
                // Few distinct values: max windows hold ties, which must go to the first maximal element.
                if (ties)
                    for (float& v : x) v = std::round(v * 2.0f);
                const Vec dy = randomVec(rng, ys), dx0 = randomVec(rng, xs);
                const std::string ctx = describe(d) + (ties ? " with ties" : "");
                if (!compareAll("pool2dForward", ctx, [&](Backend& be) {
                        Tensor X = up(be, x), Y = be.empty(Shape{static_cast<int64_t>(ys)});
                        be.pool2dForward(Y.f32(), X.f32(), d);
                        return Outputs{down(be, Y)};
                    }))
                    return;
                // Added to dx, then overwriting it (from NaN: every element written, never read).
                const Vec nan(xs, std::numeric_limits<float>::quiet_NaN());
                for (bool overwrite : {false, true})
                    if (!compareAll("pool2dBackward", ctx + (overwrite ? " overwrite" : ""), [&](Backend& be) {
                            Tensor X = up(be, x), Y = be.empty(Shape{static_cast<int64_t>(ys)}), DY = up(be, dy),
                                   DX = up(be, overwrite ? nan : dx0);
                            be.pool2dForward(Y.f32(), X.f32(), d);
                            be.pool2dBackward(DX.f32(), DY.f32(), X.f32(), Y.f32(), d, overwrite);
                            return Outputs{down(be, DX)};
                        }))
                        return;
                if (d.mode != PoolMode::Max) continue;
                // The pooling of a ReLU's output (zeros and positive values) with the ReLU's backward, and
                // the op's definition on any input: negative elements (whole negative windows) get nothing.
                Vec xr = x;
                for (float& v : xr) v = std::max(v, 0.0f);
                for (bool overwrite : {false, true})
                    for (const Vec* input : {&xr, &x})
                        if (!compareAll("maxPool2dReLUBackward",
                                        ctx + (input == &x ? " signed input" : "") + (overwrite ? " overwrite" : ""),
                                        [&](Backend& be) {
                                            Tensor X = up(be, *input), Y = be.empty(Shape{static_cast<int64_t>(ys)}),
                                                   DY = up(be, dy), DX = up(be, overwrite ? nan : dx0);
                                            be.pool2dForward(Y.f32(), X.f32(), d);
                                            be.maxPool2dReLUBackward(DX.f32(), DY.f32(), X.f32(), Y.f32(), d,
                                                                     overwrite);
                                            return Outputs{down(be, DX)};
                                        }))
                            return;
            }
    }

    // maxPool2dReLUBackward by hand: a window whose maximum is 0 (all inputs were negative before the
    // ReLU) passes no gradient; one with a positive maximum passes it to that element only.
    void maxPoolReLUBackwardHandValues() {
        PoolDesc d;
        d.mode = PoolMode::Max, d.n = 1, d.c = 1, d.h = 2, d.w = 4;
        const Vec x{0.0f, 0.0f, 0.5f, 0.0f, 0.0f, 0.0f, 0.25f, 2.0f};  // windows: all zero | max 2.0 at (1,3)
        const Vec dy{3.0f, 5.0f};
        std::vector<Backend*> all{m_ref.get()};
        for (NamedBackend& nb : m_fast) all.push_back(nb.backend.get());
        for (Backend* be : all) {
            Tensor X = up(*be, x), Y = be->empty(Shape{2}), DY = up(*be, dy), DX = up(*be, Vec(8, 1.0f));
            be->pool2dForward(Y.f32(), X.f32(), d);
            be->maxPool2dReLUBackward(DX.f32(), DY.f32(), X.f32(), Y.f32(), d);
            const Vec want{1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 6.0f};
            const std::string err = compareVectors(down(*be, DX), want, Tolerance{"hand", 1e-6, 1e-6});
            QVERIFY2(err.empty(), (be->name() + ": " + err).c_str());
        }
    }

    void meanPool() {
        std::mt19937 rng(8);
        for (int trial = 0; trial < 13; ++trial) {
            int outer = pick(rng, {1, 3, 17}), len = pick(rng, {1, 5, 49}), inner = pick(rng, {1, 3, 64});
            if (trial >= 8) outer = 37, len = trial == 8 ? 784 : 7, inner = 1;  // GlobalAvgPool's planes
            // GlobalAvgPool on blocked tensors (inner = the block; runs of 64 positions), and past the fast path.
            if (trial >= 10) outer = 9, len = trial == 10 ? 784 : 130, inner = trial == 10 ? 16 : trial == 11 ? 8 : 65;
            const size_t xs = static_cast<size_t>(outer) * len * inner, ys = static_cast<size_t>(outer) * inner;
            const Vec x = randomVec(rng, xs), dy = randomVec(rng, ys), dx0 = randomVec(rng, xs);
            const std::string ctx = std::to_string(outer) + "x" + std::to_string(len) + "x" + std::to_string(inner);
            if (!compareAll("meanPoolForward", ctx, [&](Backend& be) {
                    Tensor X = up(be, x), Y = be.empty(Shape{static_cast<int64_t>(ys)});
                    be.meanPoolForward(Y.f32(), X.f32(), outer, len, inner);
                    return Outputs{down(be, Y)};
                }))
                return;
            if (!compareAll("meanPoolBackward", ctx, [&](Backend& be) {
                    Tensor DY = up(be, dy), DX = up(be, dx0);
                    be.meanPoolBackward(DX.f32(), DY.f32(), outer, len, inner);
                    return Outputs{down(be, DX)};
                }))
                return;
        }
    }

    // Masked pooling over a sequence: keep rows with padding here and there, a sample of padding only, and no mask.
    void sequencePool() {
        std::mt19937 rng(32);
        for (int trial = 0; trial < 12; ++trial) {
            const int batch = pick(rng, {1, 3, 17}), len = pick(rng, {1, 5, 49}), dim = pick(rng, {1, 3, 64});
            const PoolMode mode = trial % 2 ? PoolMode::Max : PoolMode::Average;
            const bool masked = trial % 4 < 3;
            const size_t xs = static_cast<size_t>(batch) * len * dim, ys = static_cast<size_t>(batch) * dim;
            const Vec x = randomVec(rng, xs), dy = randomVec(rng, ys), dx0 = randomVec(rng, xs);
            Vec keep(static_cast<size_t>(batch) * len);
            for (size_t i = 0; i < keep.size(); ++i)
                keep[i] = static_cast<float>(std::uniform_int_distribution<int>(0, 3)(rng));
            if (batch > 1)
                for (int l = 0; l < len; ++l) keep[static_cast<size_t>(len + l)] = 0.0f;  // sample 1: padding only
            const std::string ctx = std::string(mode == PoolMode::Max ? "max " : "mean ") + (masked ? "masked " : "") +
                                    std::to_string(batch) + "x" + std::to_string(len) + "x" + std::to_string(dim);
            if (!compareAll("sequencePoolForward", ctx, [&](Backend& be) {
                    Tensor X = up(be, x), K = up(be, keep), Y = be.empty(Shape{static_cast<int64_t>(ys)});
                    be.sequencePoolForward(Y.f32(), X.f32(), masked ? K.f32() : nullptr, batch, len, dim, mode);
                    return Outputs{down(be, Y)};
                }))
                return;
            if (!compareAll("sequencePoolBackward", ctx, [&](Backend& be) {
                    Tensor X = up(be, x), K = up(be, keep), Y = be.empty(Shape{static_cast<int64_t>(ys)}),
                           DY = up(be, dy), DX = up(be, dx0);
                    const float* k = masked ? K.f32() : nullptr;
                    be.sequencePoolForward(Y.f32(), X.f32(), k, batch, len, dim, mode);
                    be.sequencePoolBackward(DX.f32(), DY.f32(), X.f32(), Y.f32(), k, batch, len, dim, mode);
                    return Outputs{down(be, DX)};
                }))
                return;
        }
    }

    // ---- activations and softmax -------------------------------------------------------

    void activations() {
        std::mt19937 rng(9);
        const std::pair<Activation, const char*> acts[] = {
            {Activation::ReLU, "relu"}, {Activation::LeakyReLU, "leaky_relu"},
            {Activation::GELU, "gelu"}, {Activation::Sigmoid, "sigmoid"},
            {Activation::Tanh, "tanh"}, {Activation::HardSwish, "hardswish"}};
        for (auto [act, name] : acts)
            for (int n : {1, 3, 17, 33, 5000}) {
                Vec x = randomVec(rng, n, -6.0f, 6.0f);
                x[0] = 0.0f;  // the kink of ReLU: derivative 0 there by convention
                const Vec dy = randomVec(rng, n), dx0 = randomVec(rng, n);
                const std::string ctx = std::string(name) + " n=" + std::to_string(n);
                if (!compareAll("activationForward", ctx, [&](Backend& be) {
                        Tensor X = up(be, x), Y = be.empty(Shape{n});
                        be.activationForward(Y.f32(), X.f32(), n, act, 0.1f);
                        return Outputs{down(be, Y)};
                    }))
                    return;
                // Adding to dx, then writing it (it starts as NaN: never read).
                for (bool overwrite : {false, true})
                    if (!compareAll("activationBackward", ctx + (overwrite ? " overwrite" : ""), [&](Backend& be) {
                            Tensor X = up(be, x), Y = be.empty(Shape{n}), DY = up(be, dy);
                            Tensor DX =
                                up(be, overwrite ? Vec(dx0.size(), std::numeric_limits<float>::quiet_NaN()) : dx0);
                            be.activationForward(Y.f32(), X.f32(), n, act, 0.1f);
                            be.activationBackward(DX.f32(), DY.f32(), X.f32(), Y.f32(), n, act, 0.1f, overwrite);
                            return Outputs{down(be, DX)};
                        }))
                        return;
            }
    }

    // Clip with the bounds ReLU6 uses, a narrow and a degenerate range; values on the bounds themselves included.
    void clip() {
        std::mt19937 rng(31);
        for (auto [lo, hi] : {std::pair{0.0f, 6.0f}, std::pair{-0.5f, 0.25f}, std::pair{1.0f, 1.0f}})
            for (int n : {1, 17, 5000}) {
                Vec x = randomVec(rng, n, -8.0f, 8.0f);
                x[0] = lo;
                if (n > 1) x[1] = hi;
                const Vec dy = randomVec(rng, n), dx0 = randomVec(rng, n);
                const std::string ctx =
                    "[" + std::to_string(lo) + ", " + std::to_string(hi) + "] n=" + std::to_string(n);
                if (!compareAll("clipForward", ctx, [&](Backend& be) {
                        Tensor X = up(be, x), Y = be.empty(Shape{n});
                        be.clipForward(Y.f32(), X.f32(), n, lo, hi);
                        return Outputs{down(be, Y)};
                    }))
                    return;
                for (bool overwrite : {false, true})
                    if (!compareAll("clipBackward", ctx + (overwrite ? " overwrite" : ""), [&](Backend& be) {
                            Tensor X = up(be, x), DY = up(be, dy);
                            Tensor DX =
                                up(be, overwrite ? Vec(dx0.size(), std::numeric_limits<float>::quiet_NaN()) : dx0);
                            be.clipBackward(DX.f32(), DY.f32(), X.f32(), n, lo, hi, overwrite);
                            return Outputs{down(be, DX)};
                        }))
                        return;
            }
    }

    // Nearest and bilinear (both corner conventions), square and unequal factors, one-pixel planes (bilinear's
    // align_corners then has no span), and planes larger than a thread's share.
    void upsample2d() {
        std::vector<UpsampleDesc> cases;
        auto add = [&](int n, int c, int h, int w, int sh, int sw) {
            for (int mode = 0; mode < 3; ++mode) {
                UpsampleDesc d;
                d.n = n, d.c = c, d.h = h, d.w = w, d.scaleH = sh, d.scaleW = sw;
                d.bilinear = mode > 0;
                d.alignCorners = mode == 2;
                cases.push_back(d);
            }
        };
        add(2, 3, 4, 5, 2, 2);
        add(1, 1, 1, 1, 3, 2);
        add(3, 2, 7, 3, 1, 4);
        add(1, 5, 1, 6, 2, 3);
        add(2, 8, 33, 17, 2, 2);
        add(1, 2, 2, 2, 5, 5);
        std::mt19937 rng(32);
        for (const UpsampleDesc& d : cases) {
            const auto xs = static_cast<size_t>(d.inputSize()), ys = static_cast<size_t>(d.outputSize());
            const Vec x = randomVec(rng, xs), dy = randomVec(rng, ys), dx0 = randomVec(rng, xs);
            std::ostringstream desc;
            desc << (d.bilinear ? (d.alignCorners ? "bilinear align_corners" : "bilinear") : "nearest") << " n" << d.n
                 << " c" << d.c << " " << d.h << "x" << d.w << " scale " << d.scaleH << "x" << d.scaleW;
            if (!compareAll("upsample2dForward", desc.str(), [&](Backend& be) {
                    Tensor X = up(be, x), Y = up(be, Vec(ys, std::numeric_limits<float>::quiet_NaN()));
                    be.upsample2dForward(Y.f32(), X.f32(), d);
                    return Outputs{down(be, Y)};
                }))
                return;
            for (bool overwrite : {false, true})
                if (!compareAll("upsample2dBackward", desc.str() + (overwrite ? " overwrite" : ""), [&](Backend& be) {
                        Tensor DY = up(be, dy);
                        Tensor DX = up(be, overwrite ? Vec(xs, std::numeric_limits<float>::quiet_NaN()) : dx0);
                        be.upsample2dBackward(DX.f32(), DY.f32(), d, overwrite);
                        return Outputs{down(be, DX)};
                    }))
                    return;
        }
    }

    // The reference against what torch.nn.Upsample gives for [[1, 2], [3, 4]] doubled (printed by PyTorch 2.15).
    void referenceUpsampleByHand() {
        Backend& be = *m_ref;
        UpsampleDesc d;
        d.h = d.w = 2;
        Tensor X = up(be, {1, 2, 3, 4}), Y = be.empty(Shape{16});
        be.upsample2dForward(Y.f32(), X.f32(), d);
        CHECK_VEC(down(be, Y), (Vec{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
        d.bilinear = true;
        be.upsample2dForward(Y.f32(), X.f32(), d);
        CHECK_VEC(down(be, Y),
                  (Vec{1, 1.25f, 1.75f, 2, 1.5f, 1.75f, 2.25f, 2.5f, 2.5f, 2.75f, 3.25f, 3.5f, 3, 3.25f, 3.75f, 4}));
        d.alignCorners = true;
        be.upsample2dForward(Y.f32(), X.f32(), d);
        const float t = 1.0f / 3, u = 2.0f / 3;
        CHECK_VEC(down(be, Y),
                  (Vec{1, 1 + t, 1 + u, 2, 1 + u, 2, 2 + t, 2 + u, 2 + t, 2 + u, 3, 3 + t, 3, 3 + t, 3 + u, 4}));
        // Backward of the nearest doubling: each input gets the sum of its 2x2 block.
        d.bilinear = d.alignCorners = false;
        Vec g(16);
        for (size_t i = 0; i < 16; ++i) g[i] = static_cast<float>(i);
        Tensor G = up(be, g), DX = be.zeros(Shape{4});
        be.upsample2dBackward(DX.f32(), G.f32(), d);
        CHECK_VEC(down(be, DX), (Vec{0 + 1 + 4 + 5, 2 + 3 + 6 + 7, 8 + 9 + 12 + 13, 10 + 11 + 14 + 15}));
        // Clip: ReLU6's values, and no gradient on or beyond the bounds.
        Tensor C = up(be, {-1, 0, 3, 6, 7}), CY = be.empty(Shape{5}), CD = be.zeros(Shape{5}), One = up(be, Vec(5, 1));
        be.clipForward(CY.f32(), C.f32(), 5, 0, 6);
        CHECK_VEC(down(be, CY), (Vec{0, 0, 3, 6, 6}));
        be.clipBackward(CD.f32(), One.f32(), C.f32(), 5, 0, 6);
        CHECK_VEC(down(be, CD), (Vec{0, 0, 1, 0, 0}));
        // HardSwish at -4, -3, -1, 0, 2, 3, 5: x (x + 3) / 6 between -3 and 3.
        Tensor H = up(be, {-4, -3, -1, 0, 2, 3, 5}), HY = be.empty(Shape{7});
        be.activationForward(HY.f32(), H.f32(), 7, Activation::HardSwish, 0);
        CHECK_VEC(down(be, HY), (Vec{0, 0, -1.0f / 3, 0, 10.0f / 6, 3, 5}));
    }

    void softmax() {
        std::mt19937 rng(10);
        for (int trial = 0; trial < 8; ++trial) {
            const int rows = pick(rng, {1, 3, 17, 64}), cols = pick(rng, {1, 2, 10, 33, 1000});
            const size_t sz = static_cast<size_t>(rows) * cols;
            Vec x = randomVec(rng, sz, -5.0f, 5.0f);
            if (trial == 0)
                for (float& v : x) v += 1000.0f;  // large logits: only max subtraction keeps exp finite
            const Vec dy = randomVec(rng, sz), dx0 = randomVec(rng, sz);
            const std::string ctx = std::to_string(rows) + "x" + std::to_string(cols);
            if (!compareAll("softmaxForward", ctx, [&](Backend& be) {
                    Tensor X = up(be, x), Y = be.empty(Shape{static_cast<int64_t>(sz)});
                    be.softmaxForward(Y.f32(), X.f32(), rows, cols);
                    return Outputs{down(be, Y)};
                }))
                return;
            if (!compareAll("softmaxBackward", ctx, [&](Backend& be) {
                    Tensor X = up(be, x), Y = be.empty(Shape{static_cast<int64_t>(sz)}), DY = up(be, dy),
                           DX = up(be, dx0);
                    be.softmaxForward(Y.f32(), X.f32(), rows, cols);
                    be.softmaxBackward(DX.f32(), DY.f32(), Y.f32(), rows, cols);
                    return Outputs{down(be, DX)};
                }))
                return;
        }
    }

    // Attention's softmax: keys masked per group, a group with every key masked (all-zero rows), large logits.
    void maskedSoftmax() {
        std::mt19937 rng(33);
        for (int trial = 0; trial < 8; ++trial) {
            const int groups = pick(rng, {1, 3, 16}), rowsPerGroup = pick(rng, {1, 4, 33}),
                      cols = pick(rng, {1, 7, 64, 129});
            const size_t sz = static_cast<size_t>(groups) * rowsPerGroup * cols;
            Vec x = randomVec(rng, sz, -5.0f, 5.0f);
            if (trial == 0)
                for (float& v : x) v += 1000.0f;
            Vec keep(static_cast<size_t>(groups) * cols);
            for (float& k : keep) k = static_cast<float>(std::uniform_int_distribution<int>(0, 2)(rng));
            if (groups > 1) std::fill(keep.begin() + cols, keep.begin() + 2 * cols, 0.0f);
            const std::string ctx =
                std::to_string(groups) + "x" + std::to_string(rowsPerGroup) + "x" + std::to_string(cols);
            if (!compareAll("maskedSoftmaxForward", ctx, [&](Backend& be) {
                    Tensor X = up(be, x), K = up(be, keep), Y = be.empty(Shape{static_cast<int64_t>(sz)});
                    be.maskedSoftmaxForward(Y.f32(), X.f32(), K.f32(), groups, rowsPerGroup, cols);
                    return Outputs{down(be, Y)};
                }))
                return;
        }
    }

    // ---- losses ------------------------------------------------------------------------

    void losses() {
        std::mt19937 rng(11);
        for (int trial = 0; trial < 8; ++trial) {
            const int rows = pick(rng, {1, 3, 17, 64}), cols = pick(rng, {1, 2, 10, 33});
            const size_t sz = static_cast<size_t>(rows) * cols;
            Vec logits = randomVec(rng, sz, -8.0f, 8.0f);
            if (trial == 1)
                for (float& v : logits) v *= 20.0f;  // saturated logits
            const Vec target = randomVec(rng, sz, 0.0f, 1.0f);
            std::vector<int32_t> labels(static_cast<size_t>(rows));
            std::uniform_int_distribution<int> lab(0, cols - 1);
            for (int32_t& l : labels) l = lab(rng);
            const float gradScale = 1.0f / static_cast<float>(rows);
            const std::string ctx = std::to_string(rows) + "x" + std::to_string(cols);
            if (!compareAll("softmaxCrossEntropy", ctx, [&](Backend& be) {
                    Tensor L = up(be, logits), Y = upLabels(be, labels), loss = be.empty(Shape{rows}),
                           dl = be.empty(Shape{static_cast<int64_t>(sz)});
                    be.softmaxCrossEntropy(loss.f32(), dl.f32(), L.f32(), Y.i32(), rows, cols, gradScale);
                    return Outputs{down(be, loss), down(be, dl)};
                }))
                return;
            if (!compareAll("countCorrect", ctx, [&](Backend& be) {
                    Tensor L = up(be, logits), Y = upLabels(be, labels);
                    return Outputs{Vec{static_cast<float>(be.countCorrect(L.f32(), Y.i32(), rows, cols))}};
                }))
                return;
            if (!compareAll("stepMetrics", ctx, [&](Backend& be) {
                    Tensor L = up(be, logits), Y = upLabels(be, labels), loss = be.empty(Shape{rows});
                    be.softmaxCrossEntropy(loss.f32(), nullptr, L.f32(), Y.i32(), rows, cols, gradScale);
                    const Backend::StepMetrics m = be.stepMetrics(loss.f32(), L.f32(), Y.i32(), rows, cols);
                    return Outputs{Vec{static_cast<float>(m.lossSum), static_cast<float>(m.correct)}};
                }))
                return;
            // The step's metrics in one read-back: the loss sum as sum() gives it, and countCorrect.
            for (NamedBackend& nb : m_fast) {
                Backend& be = *nb.backend;
                Tensor L = up(be, logits), Y = upLabels(be, labels), loss = be.empty(Shape{rows});
                be.softmaxCrossEntropy(loss.f32(), nullptr, L.f32(), Y.i32(), rows, cols, gradScale);
                const Backend::StepMetrics m = be.stepMetrics(loss.f32(), L.f32(), Y.i32(), rows, cols);
                const double wantSum = be.sum(loss.f32(), rows);
                const int64_t wantCorrect = be.countCorrect(L.f32(), Y.i32(), rows, cols);
                const std::string where = "stepMetrics on " + nb.name + " [" + ctx + "]";
                QVERIFY2(
                    m.lossSum == wantSum,
                    (where + ": loss sum " + std::to_string(m.lossSum) + ", sum() " + std::to_string(wantSum)).c_str());
                QVERIFY2(m.correct == wantCorrect, (where + ": correct " + std::to_string(m.correct) +
                                                    ", countCorrect " + std::to_string(wantCorrect))
                                                       .c_str());
                const Backend::StepMetrics noLabels = be.stepMetrics(loss.f32(), L.f32(), nullptr, rows, cols);
                QVERIFY2(noLabels.lossSum == wantSum && noLabels.correct == 0, where.c_str());
            }
            if (!compareAll("mseLoss", ctx, [&](Backend& be) {
                    Tensor P = up(be, logits), T = up(be, target), loss = be.empty(Shape{rows}),
                           dp = be.empty(Shape{static_cast<int64_t>(sz)});
                    be.mseLoss(loss.f32(), dp.f32(), P.f32(), T.f32(), rows, cols, gradScale);
                    return Outputs{down(be, loss), down(be, dp)};
                }))
                return;
            for (const float delta : {0.0f, 0.5f})
                if (!compareAll("robustLoss", ctx + " delta " + std::to_string(delta), [&](Backend& be) {
                        Tensor P = up(be, logits), T = up(be, target), loss = be.empty(Shape{rows}),
                               dp = be.empty(Shape{static_cast<int64_t>(sz)});
                        be.robustLoss(loss.f32(), dp.f32(), P.f32(), T.f32(), rows, cols, delta, gradScale);
                        return Outputs{down(be, loss), down(be, dp)};
                    }))
                    return;
            if (!compareAll("bceWithLogits", ctx, [&](Backend& be) {
                    Tensor P = up(be, logits), T = up(be, target), loss = be.empty(Shape{rows}),
                           dp = be.empty(Shape{static_cast<int64_t>(sz)});
                    be.bceWithLogits(loss.f32(), dp.f32(), P.f32(), T.f32(), rows, cols, gradScale);
                    return Outputs{down(be, loss), down(be, dp)};
                }))
                return;
        }
        // Ties in countCorrect go to the first maximal index.
        for (NamedBackend& nb : m_fast) {
            Backend& be = *nb.backend;
            Tensor L = up(be, Vec{1, 3, 3, 0, 5, 5, 5, 0}), Y = upLabels(be, {1, 1});
            QCOMPARE(be.countCorrect(L.f32(), Y.i32(), 2, 4), int64_t(1));
        }
    }

    // ---- normalization ------------------------------------------------------------------

    // Odd trials fuse the ReLU (forward relu, backward gated by the ReLU's output); the last two put the mean
    // far from zero (1000), where a one-pass variance that did not shift the data would cancel away.
    void batchNorm() {
        std::mt19937 rng(12);
        for (int trial = 0; trial < 10; ++trial) {
            const int n = pick(rng, {2, 3, 17, 64}), c = pick(rng, {1, 3, 32}), inner = pick(rng, {1, 7, 196});
            const size_t sz = static_cast<size_t>(n) * c * inner;
            const bool relu = trial % 2 == 1;
            Vec x = randomVec(rng, sz, -2.0f, 3.0f);
            if (trial >= 8)
                for (float& v : x) v += 1000.0f;
            const Vec gamma = randomVec(rng, c, 0.5f, 1.5f), beta = randomVec(rng, c), dy = randomVec(rng, sz);
            const Vec rm0 = randomVec(rng, c), rv0 = randomVec(rng, c, 0.5f, 2.0f), dx0 = randomVec(rng, sz),
                      dg0 = randomVec(rng, c), db0 = randomVec(rng, c);
            std::ostringstream describeCase;  // (not string operator+: GCC 12 -Wrestrict false positive)
            describeCase << "n" << n << " c" << c << " inner " << inner << (relu ? " relu" : "")
                         << (trial >= 8 ? " mean 1000" : "");
            const std::string ctx = describeCase.str();
            if (!compareAll("batchNormForwardTraining", ctx, [&](Backend& be) {
                    Tensor X = up(be, x), G = up(be, gamma), B = up(be, beta), RM = up(be, rm0), RV = up(be, rv0);
                    Tensor Y = be.empty(Shape{static_cast<int64_t>(sz)}), M = be.empty(Shape{c}),
                           S = be.empty(Shape{c});
                    be.batchNormForwardTraining(Y.f32(), M.f32(), S.f32(), RM.f32(), RV.f32(), X.f32(), G.f32(),
                                                B.f32(), n, c, inner, 0.1f, 1e-5f, relu);
                    return Outputs{down(be, Y), down(be, M), down(be, S), down(be, RM), down(be, RV)};
                }))
                return;
            if (!compareAll("batchNormForwardInference", ctx, [&](Backend& be) {
                    Tensor X = up(be, x), G = up(be, gamma), B = up(be, beta), RM = up(be, rm0), RV = up(be, rv0);
                    Tensor Y = be.empty(Shape{static_cast<int64_t>(sz)});
                    be.batchNormForwardInference(Y.f32(), X.f32(), G.f32(), B.f32(), RM.f32(), RV.f32(), n, c, inner,
                                                 1e-5f, relu);
                    return Outputs{down(be, Y)};
                }))
                return;
            // Then overwriting dx, which starts as NaN (it must be written, never read).
            for (bool overwrite : {false, true})
                if (!compareAll("batchNormBackward", ctx + (overwrite ? " overwrite" : ""), [&](Backend& be) {
                        Tensor X = up(be, x), G = up(be, gamma), B = up(be, beta), DY = up(be, dy);
                        Tensor Y = be.empty(Shape{static_cast<int64_t>(sz)}), M = be.empty(Shape{c}),
                               S = be.empty(Shape{c});
                        Tensor DX = up(be, overwrite ? Vec(sz, std::numeric_limits<float>::quiet_NaN()) : dx0);
                        Tensor DG = up(be, dg0), DB = up(be, db0);
                        be.batchNormForwardTraining(Y.f32(), M.f32(), S.f32(), nullptr, nullptr, X.f32(), G.f32(),
                                                    B.f32(), n, c, inner, 0.1f, 1e-5f, relu);
                        be.batchNormBackward(DX.f32(), DG.f32(), DB.f32(), DY.f32(), X.f32(), G.f32(), M.f32(), S.f32(),
                                             n, c, inner, relu ? Y.f32() : nullptr, overwrite);
                        return Outputs{down(be, DX), down(be, DG), down(be, DB)};
                    }))
                    return;
        }
    }

    // The three batch-norm ops on blocked tensors (the block argument, the backend's activationBlock) against the
    // reference in NCHW: x, y, dy and dx are given and read back blocked. Two blocks of channels, one, a large
    // mean, the fused ReLU's forward and gated backward, absent gamma / beta / dx, and overwriting dx from NaN.
    void batchNormBlocked() {
        bool anyBlock = false;
        for (NamedBackend& nb : m_fast) anyBlock = anyBlock || nb.backend->activationBlock() > 0;
        if (!anyBlock) QSKIP("no backend here has a blocked layout (no oneDNN, or STRATA_BLOCKED_LAYOUT=0)");
        std::mt19937 rng(31);
        struct Case {
            int n, c, inner;
            bool relu, affine, large;
        };
        for (const Case& cs : std::vector<Case>{{3, 32, 49, false, true, false},
                                                {2, 16, 9, true, true, false},
                                                {5, 32, 4, true, false, true},
                                                {17, 16, 1, false, true, false}}) {
            const int n = cs.n, c = cs.c, inner = cs.inner;
            const size_t sz = static_cast<size_t>(n) * c * inner;
            Vec x = randomVec(rng, sz, -2.0f, 3.0f);
            if (cs.large)
                for (float& v : x) v += 1000.0f;
            const Vec gamma = randomVec(rng, c, 0.5f, 1.5f), beta = randomVec(rng, c), dy = randomVec(rng, sz);
            const Vec rm0 = randomVec(rng, c), rv0 = randomVec(rng, c, 0.5f, 2.0f), dx0 = randomVec(rng, sz),
                      dg0 = randomVec(rng, c), db0 = randomVec(rng, c);
            std::ostringstream describeCase;
            describeCase << "n" << n << " c" << c << " inner " << inner << (cs.relu ? " relu" : "")
                         << (cs.affine ? "" : " no gamma/beta") << (cs.large ? " mean 1000" : "") << " blocked";
            const std::string ctx = describeCase.str();
            auto in = [&](Backend& be, const Vec& v) {
                return up(be, reblocked(v, n, c, inner, be.activationBlock(), true));
            };
            auto out = [&](Backend& be, const Tensor& t) {
                return reblocked(down(be, t), n, c, inner, be.activationBlock(), false);
            };
            auto affine = [&](const Tensor& t) { return cs.affine ? t.f32() : nullptr; };
            if (!compareAll("batchNormForwardTraining", ctx, [&](Backend& be) {
                    Tensor X = in(be, x), G = up(be, gamma), B = up(be, beta), RM = up(be, rm0), RV = up(be, rv0);
                    Tensor Y = be.empty(Shape{static_cast<int64_t>(sz)}), M = be.empty(Shape{c}),
                           S = be.empty(Shape{c});
                    be.batchNormForwardTraining(Y.f32(), M.f32(), S.f32(), RM.f32(), RV.f32(), X.f32(), affine(G),
                                                affine(B), n, c, inner, 0.1f, 1e-5f, cs.relu, be.activationBlock());
                    return Outputs{out(be, Y), down(be, M), down(be, S), down(be, RM), down(be, RV)};
                }))
                return;
            if (!compareAll("batchNormForwardInference", ctx, [&](Backend& be) {
                    Tensor X = in(be, x), G = up(be, gamma), B = up(be, beta), RM = up(be, rm0), RV = up(be, rv0);
                    Tensor Y = be.empty(Shape{static_cast<int64_t>(sz)});
                    be.batchNormForwardInference(Y.f32(), X.f32(), affine(G), affine(B), RM.f32(), RV.f32(), n, c,
                                                 inner, 1e-5f, cs.relu, be.activationBlock());
                    return Outputs{out(be, Y)};
                }))
                return;
            for (int mode = 0; mode < 3; ++mode) {  // dx added to, dx overwritten (from NaN), no dx
                const bool overwrite = mode == 1, noDx = mode == 2;
                if (!compareAll("batchNormBackward",
                                ctx + (overwrite ? " overwrite"
                                       : noDx    ? " no dx"
                                                 : ""),
                                [&](Backend& be) {
                                    const int b = be.activationBlock();
                                    Tensor X = in(be, x), G = up(be, gamma), B = up(be, beta), DY = in(be, dy);
                                    Tensor Y = be.empty(Shape{static_cast<int64_t>(sz)}), M = be.empty(Shape{c}),
                                           S = be.empty(Shape{c});
                                    Tensor DX = overwrite ? up(be, Vec(sz, std::numeric_limits<float>::quiet_NaN()))
                                                          : in(be, dx0);
                                    Tensor DG = up(be, dg0), DB = up(be, db0);
                                    be.batchNormForwardTraining(Y.f32(), M.f32(), S.f32(), nullptr, nullptr, X.f32(),
                                                                affine(G), affine(B), n, c, inner, 0.1f, 1e-5f, cs.relu,
                                                                b);
                                    be.batchNormBackward(noDx ? nullptr : DX.f32(), DG.f32(), DB.f32(), DY.f32(),
                                                         X.f32(), affine(G), M.f32(), S.f32(), n, c, inner,
                                                         cs.relu ? Y.f32() : nullptr, overwrite, b);
                                    return Outputs{out(be, DX), down(be, DG), down(be, DB)};
                                }))
                    return;
            }
        }
        // A backend without a block refuses a blocked call, naming the op.
        Tensor t = m_ref->zeros(Shape{64});
        QVERIFY_THROWS_EXCEPTION(
            BackendError, m_ref->batchNormForwardInference(t.f32(), t.f32(), nullptr, nullptr, t.f32(), t.f32(), 1, 16,
                                                           4, 1e-5f, false, 16));
    }

    // The fused ReLU is the ReLU: on the reference backend, the forward with relu equals the plain forward then
    // max(., 0), and the backward gated by that output equals the plain backward of dy * (output > 0).
    void batchNormFusedReLUIsTheComposition() {
        std::mt19937 rng(21);
        const int n = 5, c = 3, inner = 6;
        const size_t sz = static_cast<size_t>(n) * c * inner;
        const Vec x = randomVec(rng, sz, -2.0f, 3.0f), gamma = randomVec(rng, c, 0.5f, 1.5f), beta = randomVec(rng, c),
                  dy = randomVec(rng, sz);
        auto be = test::makeReferenceBackend();
        Tensor X = up(*be, x), G = up(*be, gamma), B = up(*be, beta), DY = up(*be, dy);
        Tensor Y = be->empty(Shape{static_cast<int64_t>(sz)}), YR = be->empty(Shape{static_cast<int64_t>(sz)});
        Tensor M = be->empty(Shape{c}), S = be->empty(Shape{c});
        be->batchNormForwardTraining(Y.f32(), M.f32(), S.f32(), nullptr, nullptr, X.f32(), G.f32(), B.f32(), n, c,
                                     inner, 0.1f, 1e-5f);
        be->batchNormForwardTraining(YR.f32(), M.f32(), S.f32(), nullptr, nullptr, X.f32(), G.f32(), B.f32(), n, c,
                                     inner, 0.1f, 1e-5f, true);
        const Vec y = down(*be, Y), yr = down(*be, YR);
        Vec masked = dy;
        int zeros = 0;
        for (size_t i = 0; i < sz; ++i) {
            QCOMPARE(yr[i], y[i] > 0.0f ? y[i] : 0.0f);
            if (!(y[i] > 0.0f)) masked[i] = 0.0f, ++zeros;
        }
        QVERIFY(zeros > 0 && zeros < static_cast<int>(sz));  // the ReLU does cut something, not everything
        auto backward = [&](const Vec& grad, const float* gate) {
            Tensor DX = be->zeros(Shape{static_cast<int64_t>(sz)}), DG = be->zeros(Shape{c}), DB = be->zeros(Shape{c});
            Tensor D = up(*be, grad);
            be->batchNormBackward(DX.f32(), DG.f32(), DB.f32(), D.f32(), X.f32(), G.f32(), M.f32(), S.f32(), n, c,
                                  inner, gate);
            Vec all = down(*be, DX);
            for (const Tensor* t : {&DG, &DB})
                for (float v : down(*be, *t)) all.push_back(v);
            return all;
        };
        const Vec fused = backward(dy, YR.f32()), composed = backward(masked, nullptr), plain = backward(dy, nullptr);
        QCOMPARE(fused, composed);
        QVERIFY(fused != plain);
    }

    void layerNorm() {
        std::mt19937 rng(13);
        for (int trial = 0; trial < 8; ++trial) {
            const int rows = pick(rng, {1, 3, 17, 64}), cols = pick(rng, {1, 3, 33, 256});
            const size_t sz = static_cast<size_t>(rows) * cols;
            const Vec x = randomVec(rng, sz, -2.0f, 3.0f), gamma = randomVec(rng, cols, 0.5f, 1.5f),
                      beta = randomVec(rng, cols), dy = randomVec(rng, sz), dx0 = randomVec(rng, sz),
                      dg0 = randomVec(rng, cols), db0 = randomVec(rng, cols);
            const std::string ctx = std::to_string(rows) + "x" + std::to_string(cols);
            if (!compareAll("layerNormForward", ctx, [&](Backend& be) {
                    Tensor X = up(be, x), G = up(be, gamma), B = up(be, beta),
                           Y = be.empty(Shape{static_cast<int64_t>(sz)}), M = be.empty(Shape{rows}),
                           R = be.empty(Shape{rows});
                    be.layerNormForward(Y.f32(), M.f32(), R.f32(), X.f32(), G.f32(), B.f32(), rows, cols, 1e-5f);
                    return Outputs{down(be, Y), down(be, M), down(be, R)};
                }))
                return;
            if (!compareAll("layerNormBackward", ctx, [&](Backend& be) {
                    Tensor X = up(be, x), G = up(be, gamma), B = up(be, beta),
                           Y = be.empty(Shape{static_cast<int64_t>(sz)}), M = be.empty(Shape{rows}),
                           R = be.empty(Shape{rows});
                    Tensor DY = up(be, dy), DX = up(be, dx0), DG = up(be, dg0), DB = up(be, db0);
                    be.layerNormForward(Y.f32(), M.f32(), R.f32(), X.f32(), G.f32(), B.f32(), rows, cols, 1e-5f);
                    be.layerNormBackward(DX.f32(), DG.f32(), DB.f32(), DY.f32(), X.f32(), G.f32(), M.f32(), R.f32(),
                                         rows, cols);
                    return Outputs{down(be, DX), down(be, DG), down(be, DB)};
                }))
                return;
        }
    }

    // ---- dropout and embedding ---------------------------------------------------------------

    void dropout() {
        std::mt19937 rng(14);
        for (float p : {0.0f, 0.1f, 0.5f, 0.9f, 1.0f})
            for (int n : {1, 17, 10001}) {
                const Vec x = randomVec(rng, n), dy = randomVec(rng, n), dx0 = randomVec(rng, n);
                const uint64_t seed = 0x1234u + static_cast<uint64_t>(n);
                const std::string ctx = "p=" + std::to_string(p) + " n=" + std::to_string(n);
                if (!compareAll("dropoutForward", ctx, [&](Backend& be) {
                        Tensor X = up(be, x), Y = be.empty(Shape{n});
                        be.dropoutForward(Y.f32(), X.f32(), n, p, seed);
                        return Outputs{down(be, Y)};
                    }))
                    return;
                if (!compareAll("dropoutBackward", ctx, [&](Backend& be) {
                        Tensor DY = up(be, dy), DX = up(be, dx0);
                        be.dropoutBackward(DX.f32(), DY.f32(), n, p, seed);
                        return Outputs{down(be, DX)};
                    }))
                    return;
            }
        // The keep rate is about 1 - p.
        Vec ones(100000, 1.0f), y(ones.size());
        Tensor X = up(*m_ref, ones), Y = m_ref->empty(Shape{static_cast<int64_t>(ones.size())});
        m_ref->dropoutForward(Y.f32(), X.f32(), static_cast<int64_t>(ones.size()), 0.3f, 99);
        y = down(*m_ref, Y);
        const auto kept = std::count_if(y.begin(), y.end(), [](float v) { return v != 0.0f; });
        QVERIFY2(std::abs(static_cast<double>(kept) / ones.size() - 0.7) < 0.01, std::to_string(kept).c_str());
    }

    void embedding() {
        std::mt19937 rng(15);
        for (int trial = 0; trial < 6; ++trial) {
            const int vocab = pick(rng, {1, 3, 17, 1000}), dim = pick(rng, {1, 3, 33, 64});
            const int count = pick(rng, {1, 5, 64, 300});  // more ids than rows: repeated ids accumulate
            std::uniform_int_distribution<int> id(0, vocab - 1);
            Vec ids(static_cast<size_t>(count));
            for (float& v : ids) v = static_cast<float>(id(rng));
            const Vec table = randomVec(rng, static_cast<size_t>(vocab) * dim),
                      dy = randomVec(rng, static_cast<size_t>(count) * dim),
                      dt0 = randomVec(rng, static_cast<size_t>(vocab) * dim);
            const std::string ctx =
                "vocab " + std::to_string(vocab) + " dim " + std::to_string(dim) + " count " + std::to_string(count);
            // Backward sums repeated ids in some order; allow float rounding there.
            if (!compareAll("embeddingForward", ctx, [&](Backend& be) {
                    Tensor T = up(be, table), I = up(be, ids), Y = be.empty(Shape{static_cast<int64_t>(count) * dim});
                    be.embeddingForward(Y.f32(), T.f32(), I.f32(), count, dim, vocab);
                    return Outputs{down(be, Y)};
                }))
                return;
            if (!compareAll("embeddingBackward", ctx, [&](Backend& be) {
                    Tensor I = up(be, ids), DY = up(be, dy), DT = up(be, dt0);
                    be.embeddingBackward(DT.f32(), DY.f32(), I.f32(), count, dim, vocab);
                    return Outputs{down(be, DT)};
                }))
                return;
        }
    }

    // ---- optimizers ----------------------------------------------------------------------------

    void optimizers() {
        std::mt19937 rng(16);
        for (int n : {1, 3, 17, 33, 10007}) {
            const Vec w0 = randomVec(rng, n), g1 = randomVec(rng, n), g2 = randomVec(rng, n), g3 = randomVec(rng, n);
            for (int variant = 0; variant < 4; ++variant) {
                SgdParams p;
                p.lr = 0.05f;
                p.momentum = variant == 0 ? 0.0f : 0.9f;
                p.weightDecay = variant >= 2 ? 1e-2f : 0.0f;
                p.nesterov = variant == 3;
                const std::string ctx = "n=" + std::to_string(n) + " sgd variant " + std::to_string(variant);
                if (!compareAll("sgdUpdate", ctx, [&](Backend& be) {
                        Tensor W = up(be, w0), V = be.zeros(Shape{n});
                        for (const Vec* g : {&g1, &g2, &g3}) {
                            Tensor G = up(be, *g);
                            be.sgdUpdate(W.f32(), p.momentum != 0.0f ? V.f32() : nullptr, G.f32(), n, p);
                        }
                        return Outputs{down(be, W), down(be, V)};
                    }))
                    return;
            }
            for (int variant = 0; variant < 3; ++variant) {
                AdamParams p;
                p.lr = 1e-2f;
                p.weightDecay = variant == 0 ? 0.0f : 0.05f;
                p.decoupled = variant == 2;
                const std::string ctx = "n=" + std::to_string(n) + " adam variant " + std::to_string(variant);
                if (!compareAll("adamUpdate", ctx, [&](Backend& be) {
                        Tensor W = up(be, w0), M = be.zeros(Shape{n}), V = be.zeros(Shape{n});
                        int64_t step = 1;
                        for (const Vec* g : {&g1, &g2, &g3}) {
                            Tensor G = up(be, *g);
                            AdamParams q = p;
                            q.step = step++;
                            be.adamUpdate(W.f32(), M.f32(), V.f32(), G.f32(), n, q);
                        }
                        return Outputs{down(be, W), down(be, M), down(be, V)};
                    }))
                    return;
            }
        }
    }

    // ---- errors: every backend refuses bad arguments the same way ----------------------------------

    void errors() {
        std::vector<Backend*> all{m_ref.get()};
        for (NamedBackend& nb : m_fast) all.push_back(nb.backend.get());
        for (Backend* be : all) {
            const std::string who = be->name();
            // Embedding: the message names the id and the vocabulary size.
            Tensor T = be->zeros(Shape{4 * 2}), I = up(*be, Vec{1, 4}), Y = be->empty(Shape{2 * 2});
            try {
                be->embeddingForward(Y.f32(), T.f32(), I.f32(), 2, 2, 4);
                QFAIL(("embedding accepted id 4 of a 4-word vocabulary on " + who).c_str());
            } catch (const BackendError& e) {
                const std::string msg = e.what();
                QVERIFY2(msg.find('4') != std::string::npos && msg.find("vocab") != std::string::npos, msg.c_str());
            }
            Tensor Neg = up(*be, Vec{-1, 0});
            QVERIFY_THROWS_EXCEPTION(BackendError, be->embeddingBackward(T.f32(), Y.f32(), Neg.f32(), 2, 2, 4));
            // A label outside [0, cols).
            Tensor L = be->zeros(Shape{6}), Lab = upLabels(*be, {0, 3}), D = be->empty(Shape{6});
            QVERIFY_THROWS_EXCEPTION(BackendError,
                                     be->softmaxCrossEntropy(nullptr, D.f32(), L.f32(), Lab.i32(), 2, 3, 1.0f));
            // Channels not divisible by groups.
            ConvDesc d;
            d.c = 3, d.k = 4, d.groups = 2, d.h = d.w = 4;
            Tensor X = be->zeros(Shape{64}), W = be->zeros(Shape{64}), O = be->zeros(Shape{64});
            QVERIFY_THROWS_EXCEPTION(BackendError, be->conv2dForward(O.f32(), X.f32(), W.f32(), d));
        }
        // With eager index checks off, the bad label may surface later, but no later than the next
        // host result, and still naming the op that read it.
        BackendOptions deferredChecks;
        deferredChecks.eagerIndexChecks = false;
        std::vector<NamedBackend> deferring = test::fastBackends(deferredChecks);
        deferring.push_back({"cpu-reference", test::makeReferenceBackend(deferredChecks)});
        for (NamedBackend& nb : deferring) {
            Backend* be = nb.backend.get();
            const std::string who = nb.name;
            Tensor L = be->zeros(Shape{6}), Lab = upLabels(*be, {0, 3}), D = be->empty(Shape{6});
            std::string deferred;
            Tensor Losses = be->empty(Shape{2});
            try {
                be->softmaxCrossEntropy(Losses.f32(), D.f32(), L.f32(), Lab.i32(), 2, 3, 1.0f);
                be->scale(D.f32(), 0.5f, 6);  // more work queued after the bad op
                be->stepMetrics(Losses.f32(), L.f32(), nullptr, 2, 3);
            } catch (const BackendError& e) {
                deferred = e.what();
            }
            QVERIFY2(
                deferred.find("softmaxCrossEntropy") != std::string::npos && deferred.find('3') != std::string::npos,
                (who + ": a bad label with deferred checks gave \"" + deferred + "\"").c_str());
            // The error is reported once: the backend works normally afterwards.
            be->synchronize();
            QCOMPARE(be->stepMetrics(Losses.f32(), L.f32(), nullptr, 0, 3).correct, int64_t(0));
        }
    }

    // The seam checks every op's arguments once for all backends, so each refusal reads the same on every
    // backend (device-side index errors too, which a GPU formats with the same function), naming the op.
    void refusalsReadAlikeOnEveryBackend() {
        std::vector<Backend*> all{m_ref.get()};
        for (NamedBackend& nb : m_fast) all.push_back(nb.backend.get());
        // Each case: the op's name, and a call that must throw.
        std::vector<std::pair<std::string, std::function<void(Backend&, float*, int32_t*)>>> cases;
        cases.push_back({"gemm", [](Backend& be, float* p, int32_t*) {
                             be.gemm(false, false, 2, -1, 2, 1.0f, p, 2, p, 2, 0.0f, p, 2);
                         }});
        cases.push_back({"gemm", [](Backend& be, float* p, int32_t*) {
                             be.gemm(false, false, 2, 3, 4, 1.0f, p, 3, p, 3, 0.0f, p, 3);  // lda 3 < k 4
                         }});
        cases.push_back({"conv2dForward", [](Backend& be, float* p, int32_t*) {
                             ConvDesc d;
                             d.h = d.w = 2, d.r = d.s = 3;  // the kernel does not fit
                             be.conv2dForward(p, p, p, d);
                         }});
        cases.push_back({"conv2dBackwardFilter", [](Backend& be, float* p, int32_t*) {
                             ConvDesc d;
                             d.c = 3, d.k = 4, d.groups = 2, d.h = d.w = 4;
                             be.conv2dBackwardFilter(p, p, p, d);
                         }});
        cases.push_back({"conv2dForwardFused", [](Backend& be, float* p, int32_t*) {
                             ConvDesc d;
                             d.strideH = 0;
                             be.conv2dForwardFused(p, p, p, nullptr, true, d);
                         }});
        cases.push_back({"pool2dForward", [](Backend& be, float* p, int32_t*) {
                             PoolDesc d;
                             d.h = d.w = 4, d.padH = 2;  // padding as large as the kernel
                             be.pool2dForward(p, p, d);
                         }});
        cases.push_back({"pool2dBackward", [](Backend& be, float* p, int32_t*) {
                             PoolDesc d;
                             d.mode = PoolMode::Average, d.h = d.w = 4;
                             be.pool2dBackward(p, p, p, nullptr, d);  // average pooling needs y
                         }});
        cases.push_back({"maxPool2dReLUBackward", [](Backend& be, float* p, int32_t*) {
                             PoolDesc d;
                             d.mode = PoolMode::Average, d.h = d.w = 4;
                             be.maxPool2dReLUBackward(p, p, p, p, d);
                         }});
        cases.push_back(
            {"meanPoolForward", [](Backend& be, float* p, int32_t*) { be.meanPoolForward(p, p, 1, 0, 1); }});
        cases.push_back({"gemmStridedBatched", [](Backend& be, float* p, int32_t*) {
                             be.gemmStridedBatched(false, false, 2, 2, 2, 1.0f, p, 2, 4, p, 2, 4, 0.0f, p, 2, 3, 2);
                         }});  // strideC 3 < the 4 elements of a 2x2 result
        cases.push_back({"sequencePoolBackward", [](Backend& be, float* p, int32_t*) {
                             be.sequencePoolBackward(p, p, nullptr, p, p, 1, 2, 2, PoolMode::Max);
                         }});
        cases.push_back({"maskedSoftmaxForward",
                         [](Backend& be, float* p, int32_t*) { be.maskedSoftmaxForward(p, p, nullptr, 2, 2, 3); }});
        cases.push_back({"activationBackward", [](Backend& be, float* p, int32_t*) {
                             be.activationBackward(p, p, nullptr, p, 4, Activation::GELU, 0.0f);
                         }});
        cases.push_back({"softmaxForward", [](Backend& be, float* p, int32_t*) { be.softmaxForward(p, p, 2, 0); }});
        cases.push_back({"fill", [](Backend& be, float*, int32_t*) { be.fill(nullptr, 1.0f, 3); }});
        cases.push_back({"axpy", [](Backend& be, float* p, int32_t*) { be.axpy(p, 1.0f, p, -2); }});
        cases.push_back({"batchNormForwardTraining", [](Backend& be, float* p, int32_t*) {
                             be.batchNormForwardTraining(p, p, p, nullptr, nullptr, p, p, p, 1, 2, 1, 0.1f, 1e-5f);
                         }});
        cases.push_back({"batchNormForwardTraining", [](Backend& be, float* p, int32_t*) {
                             be.batchNormForwardTraining(p, p, p, p, nullptr, p, p, p, 2, 2, 1, 0.1f, 1e-5f);
                         }});
        cases.push_back({"batchNormBackward", [](Backend& be, float* p, int32_t*) {
                             be.batchNormBackward(p, p, p, p, p, p, nullptr, p, 2, 2, 1);
                         }});
        cases.push_back({"layerNormBackward", [](Backend& be, float* p, int32_t*) {
                             be.layerNormBackward(p, p, p, p, p, p, p, nullptr, 2, 2);
                         }});
        cases.push_back(
            {"dropoutForward", [](Backend& be, float* p, int32_t*) { be.dropoutForward(p, p, 4, 1.5f, 1); }});
        cases.push_back({"sgdUpdate", [](Backend& be, float* p, int32_t*) {
                             SgdParams s;
                             s.momentum = 0.9f;
                             be.sgdUpdate(p, nullptr, p, 4, s);
                         }});
        cases.push_back({"adamUpdate", [](Backend& be, float* p, int32_t*) {
                             AdamParams a;
                             a.step = 0;
                             be.adamUpdate(p, p, p, p, 4, a);
                         }});
        cases.push_back({"gatherRows", [](Backend& be, float* p, int32_t*) { be.gatherRows(p, p, 4, nullptr, 2, 1); }});
        // Bad indices: checked on the host by the seam (CPU) or by the kernel (GPU), in the same words.
        cases.push_back({"softmaxCrossEntropy", [](Backend& be, float* p, int32_t* labels) {
                             be.softmaxCrossEntropy(p, p, p, labels, 2, 3, 1.0f);  // labels {1, 7}
                         }});
        cases.push_back(
            {"countCorrect", [](Backend& be, float* p, int32_t* labels) { be.countCorrect(p, labels, 2, 3); }});
        cases.push_back({"embeddingForward", [](Backend& be, float* p, int32_t*) {
                             be.embeddingForward(p + 16, p, p + 32, 2, 2, 4);  // ids {1, 4.5}
                         }});
        cases.push_back({"gatherRows", [](Backend& be, float* p, int32_t* indices) {
                             be.gatherRows(p, p, 4, indices, 2, 1);  // indices {1, 7}
                         }});
        std::vector<std::string> first(cases.size());
        for (Backend* be : all) {
            Vec host(64, 0.0f);
            host[32] = 1.0f, host[33] = 4.5f;
            Tensor P = up(*be, host), I = upLabels(*be, {1, 7});
            for (size_t c = 0; c < cases.size(); ++c) {
                const std::string& op = cases[c].first;
                std::string msg;
                try {
                    cases[c].second(*be, P.f32(), I.i32());
                    be->synchronize();
                } catch (const BackendError& e) {
                    msg = e.what();
                }
                const std::string where = be->name() + ", case " + std::to_string(c) + " (" + op + ")";
                QVERIFY2(!msg.empty(), (where + ": no error").c_str());
                QVERIFY2(msg.rfind(op, 0) == 0, (where + ": \"" + msg + "\" does not start with the op").c_str());
                // The device is named only where the error is about data (" on cuda:0"); compare without it.
                const std::string device = " on " + be->device().toString() + ":";
                if (const size_t at = msg.find(device); at != std::string::npos)
                    msg.replace(at, device.size(), " on D:");
                if (first[c].empty()) first[c] = msg;
                QVERIFY2(msg == first[c], (where + ": \"" + msg + "\" differs from \"" + first[c] + "\"").c_str());
            }
        }
    }

    // ---- the reference itself: hand-computed values ------------------------------------------------

    void referenceConvByHand() {
        Backend& be = *m_ref;
        // x = 1..9 (3x3), w = [[1,0],[0,-1]]: each output is x[i][j] - x[i+1][j+1] = -4.
        ConvDesc d;
        d.h = d.w = 3, d.r = d.s = 2;
        Tensor X = up(be, Vec{1, 2, 3, 4, 5, 6, 7, 8, 9}), W = up(be, Vec{1, 0, 0, -1}), Y = be.empty(Shape{4});
        be.conv2dForward(Y.f32(), X.f32(), W.f32(), d);
        CHECK_VEC(down(be, Y), (Vec{-4, -4, -4, -4}));
        // dy = ones: dw[r][s] is the sum of the window of x it multiplies; dx is the full correlation.
        Tensor DY = up(be, Vec{1, 1, 1, 1}), DW = be.zeros(Shape{4}), DX = be.zeros(Shape{9});
        be.conv2dBackwardFilter(DW.f32(), DY.f32(), X.f32(), d);
        be.conv2dBackwardData(DX.f32(), DY.f32(), W.f32(), d);
        CHECK_VEC(down(be, DW), (Vec{12, 16, 24, 28}));
        CHECK_VEC(down(be, DX), (Vec{1, 1, 0, 1, 0, -1, 0, -1, -1}));
        // Backward accumulates: a second call doubles the gradients.
        be.conv2dBackwardFilter(DW.f32(), DY.f32(), X.f32(), d);
        CHECK_VEC(down(be, DW), (Vec{24, 32, 48, 56}));
        // Padding 1, stride 2 with a 1x1-ones kernel on 2 channels in 2 groups picks x at (2i-1, 2j-1) or 0.
        ConvDesc p;
        p.c = 2, p.k = 2, p.groups = 2, p.h = p.w = 3, p.r = p.s = 1, p.strideH = p.strideW = 2, p.padH = p.padW = 1;
        QCOMPARE(p.outH(), 3);
        Tensor X2 = up(be, Vec{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 20, 30, 40, 50, 60, 70, 80, 90});
        Tensor W2 = up(be, Vec{1, 2}), Y2 = be.empty(Shape{18});
        be.conv2dForward(Y2.f32(), X2.f32(), W2.f32(), p);
        CHECK_VEC(down(be, Y2), (Vec{0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0, 0}));
    }

    void referenceMulByHand() {
        Backend& be = *m_ref;
        // A pruning mask applied in place: zeros stay zero (signed), the rest is untouched.
        Tensor W = up(be, Vec{1.5f, -2.0f, 3.0f, -0.25f}), M = up(be, Vec{1, 0, 0, 1});
        be.mul(W.f32(), W.f32(), M.f32(), 4);
        CHECK_VEC(down(be, W), (Vec{1.5f, -0.0f, 0.0f, -0.25f}));
    }

    void referenceSoftmaxAndLossesByHand() {
        Backend& be = *m_ref;
        Tensor X = up(be, Vec{1, 2, 3}), Y = be.empty(Shape{3});
        be.softmaxForward(Y.f32(), X.f32(), 1, 3);
        const Vec y = down(be, Y);
        const double e1 = std::exp(1.0), e2 = std::exp(2.0), e3 = std::exp(3.0), z = e1 + e2 + e3;
        QCOMPARE(y[0], static_cast<float>(e1 / z));  // 0.0900306
        QCOMPARE(y[2], static_cast<float>(e3 / z));  // 0.6652410
        // Masked: the middle key is padding in group 0; group 1 has no key left (all zeros).
        Tensor X2 = up(be, Vec{1, 2, 3, 1, 2, 3}), K = up(be, Vec{4, 0, 1, 0, 0, 0}), Y2 = be.empty(Shape{6});
        be.maskedSoftmaxForward(Y2.f32(), X2.f32(), K.f32(), 2, 1, 3);
        CHECK_VEC(down(be, Y2),
                  (Vec{static_cast<float>(e1 / (e1 + e3)), 0, static_cast<float>(e3 / (e1 + e3)), 0, 0, 0}));
        // Cross-entropy of label 2 is -log(0.665241) = 0.407606; dlogits = softmax - onehot, scaled by 0.5.
        Tensor Lab = upLabels(be, {2}), L = be.empty(Shape{1}), D = be.empty(Shape{3});
        be.softmaxCrossEntropy(L.f32(), D.f32(), X.f32(), Lab.i32(), 1, 3, 0.5f);
        QCOMPARE(down(be, L)[0], static_cast<float>(std::log(z) - 3.0));
        const Vec dl = down(be, D);
        QCOMPARE(dl[0], static_cast<float>(0.5 * e1 / z));
        QCOMPARE(dl[2], static_cast<float>(0.5 * (e3 / z - 1.0)));
        // Huge logits stay finite.
        Tensor Big = up(be, Vec{1000, 0}), Lab0 = upLabels(be, {1});
        be.softmaxCrossEntropy(L.f32(), nullptr, Big.f32(), Lab0.i32(), 1, 2, 1.0f);
        QCOMPARE(down(be, L)[0], 1000.0f);
        // BCE of logit 0 against 1 is log 2, gradient (0.5 - 1) / cols.
        Tensor B = up(be, Vec{0, 0}), T = up(be, Vec{1, 0}), DB = be.empty(Shape{2});
        be.bceWithLogits(L.f32(), DB.f32(), B.f32(), T.f32(), 1, 2, 1.0f);
        QCOMPARE(down(be, L)[0], static_cast<float>(std::log(2.0)));
        CHECK_VEC(down(be, DB), (Vec{-0.25f, 0.25f}));
        // MSE: ((1-0)^2 + (2-4)^2) / 2 = 2.5, dpred = 2 (p - t) / 2.
        Tensor P = up(be, Vec{1, 2}), Q = up(be, Vec{0, 4});
        be.mseLoss(L.f32(), DB.f32(), P.f32(), Q.f32(), 1, 2, 1.0f);
        QCOMPARE(down(be, L)[0], 2.5f);
        CHECK_VEC(down(be, DB), (Vec{1.0f, -2.0f}));
        // GELU(1) = Phi(1) = 0.8413447; GELU'(1) = Phi(1) + phi(1) = 1.0833155.
        Tensor G = up(be, Vec{1}), GY = be.empty(Shape{1}), GD = be.zeros(Shape{1}), One = up(be, Vec{1});
        be.activationForward(GY.f32(), G.f32(), 1, Activation::GELU, 0.0f);
        be.activationBackward(GD.f32(), One.f32(), G.f32(), GY.f32(), 1, Activation::GELU, 0.0f);
        QVERIFY(std::fabs(down(be, GY)[0] - 0.8413447f) < 1e-6f);
        QVERIFY(std::fabs(down(be, GD)[0] - 1.0833155f) < 1e-6f);
    }

    void referencePoolingByHand() {
        Backend& be = *m_ref;
        PoolDesc d;  // 2x2 max over a 2x2 image of ties: the first element takes the gradient
        d.h = d.w = 2;
        Tensor X = up(be, Vec{3, 3, 3, 3}), Y = be.empty(Shape{1}), DY = up(be, Vec{1}), DX = be.zeros(Shape{4});
        be.pool2dForward(Y.f32(), X.f32(), d);
        be.pool2dBackward(DX.f32(), DY.f32(), X.f32(), Y.f32(), d);
        CHECK_VEC(down(be, DX), (Vec{1, 0, 0, 0}));
        Tensor X2 = up(be, Vec{1, 5, 5, 2}), DX2 = be.zeros(Shape{4});
        be.pool2dForward(Y.f32(), X2.f32(), d);
        QCOMPARE(down(be, Y)[0], 5.0f);
        be.pool2dBackward(DX2.f32(), DY.f32(), X2.f32(), Y.f32(), d);
        CHECK_VEC(down(be, DX2), (Vec{0, 1, 0, 0}));
        // Average 2x2, stride 1, padding 1 over [[1,2],[3,4]]: the corner window holds only x[0][0].
        PoolDesc a;
        a.mode = PoolMode::Average, a.h = a.w = 2, a.strideH = a.strideW = 1, a.padH = a.padW = 1;
        Tensor XA = up(be, Vec{1, 2, 3, 4}), YA = be.empty(Shape{9}), DYA = up(be, Vec{0, 0, 0, 0, 1, 0, 0, 0, 0}),
               DXA = be.zeros(Shape{4});
        be.pool2dForward(YA.f32(), XA.f32(), a);
        CHECK_VEC(down(be, YA), (Vec{1, 1.5f, 2, 2, 2.5f, 3, 3, 3.5f, 4}));
        be.pool2dBackward(DXA.f32(), DYA.f32(), XA.f32(), YA.f32(), a);
        CHECK_VEC(down(be, DXA), (Vec{0.25f, 0.25f, 0.25f, 0.25f}));
    }

    void referenceOptimizersByHand() {
        Backend& be = *m_ref;
        // SGD, lr 0.1, momentum 0.9, weight decay 0.1, w = 1, g = 0.5 twice:
        // g' = 0.6, v = 0.6, w = 0.94; then g' = 0.594, v = 1.134, w = 0.8266.
        SgdParams s;
        s.lr = 0.1f, s.momentum = 0.9f, s.weightDecay = 0.1f;
        Tensor W = up(be, Vec{1}), V = be.zeros(Shape{1}), G = up(be, Vec{0.5f});
        be.sgdUpdate(W.f32(), V.f32(), G.f32(), 1, s);
        QVERIFY(std::fabs(down(be, W)[0] - 0.94f) < 1e-6f);
        be.sgdUpdate(W.f32(), V.f32(), G.f32(), 1, s);
        QVERIFY(std::fabs(down(be, V)[0] - 1.134f) < 1e-6f);
        QVERIFY(std::fabs(down(be, W)[0] - 0.8266f) < 1e-6f);
        // Nesterov: v = 0.6, step = 0.6 + 0.9 * 0.6 = 1.14, w = 0.886.
        s.nesterov = true;
        Tensor W2 = up(be, Vec{1}), V2 = be.zeros(Shape{1});
        be.sgdUpdate(W2.f32(), V2.f32(), G.f32(), 1, s);
        QVERIFY(std::fabs(down(be, W2)[0] - 0.886f) < 1e-6f);
        // Adam step 1: m_hat = g, v_hat = g^2, so w moves by lr (0.1) whatever g is. With L2 decay 0.1 the
        // same holds for g' = g + 0.1 w; AdamW first shrinks w by 1 - lr*wd = 0.99: 0.99 - 0.1 = 0.89.
        AdamParams a;
        a.lr = 0.1f, a.weightDecay = 0.1f;
        Tensor WA = up(be, Vec{1}), MA = be.zeros(Shape{1}), VA = be.zeros(Shape{1});
        be.adamUpdate(WA.f32(), MA.f32(), VA.f32(), G.f32(), 1, a);
        QVERIFY(std::fabs(down(be, WA)[0] - 0.9f) < 1e-6f);
        QVERIFY(std::fabs(down(be, MA)[0] - 0.06f) < 1e-7f);  // (1 - 0.9) * 0.6
        a.decoupled = true;
        Tensor WB = up(be, Vec{1}), MB = be.zeros(Shape{1}), VB = be.zeros(Shape{1});
        be.adamUpdate(WB.f32(), MB.f32(), VB.f32(), G.f32(), 1, a);
        QVERIFY(std::fabs(down(be, WB)[0] - 0.89f) < 1e-6f);
        // Step 2 with g = 0.5 again (AdamW): m = 0.9*0.05 + 0.05 = 0.095, v = 0.999*0.00025 + 0.00025,
        // w = 0.89 * 0.99 - 0.1 * (m / 0.19) / (sqrt(v / 0.001999) + 1e-8).
        a.step = 2;
        be.adamUpdate(WB.f32(), MB.f32(), VB.f32(), G.f32(), 1, a);
        const double m2 = 0.095, v2 = 0.999 * 0.00025 + 0.00025;
        const double w2 = 0.89 * 0.99 - 0.1 * (m2 / 0.19) / (std::sqrt(v2 / (1 - 0.999 * 0.999)) + 1e-8);
        QVERIFY2(std::fabs(down(be, WB)[0] - w2) < 1e-6, std::to_string(down(be, WB)[0]).c_str());
    }

    void referenceNormalizationByHand() {
        Backend& be = *m_ref;
        // One channel, values 1..4: mean 2.5, biased var 1.25 (normalizes), unbiased 5/3 (running var).
        Tensor X = up(be, Vec{1, 2, 3, 4}), Y = be.empty(Shape{4}), M = be.empty(Shape{1}), S = be.empty(Shape{1});
        Tensor RM = be.zeros(Shape{1}), RV = up(be, Vec{1});
        be.batchNormForwardTraining(Y.f32(), M.f32(), S.f32(), RM.f32(), RV.f32(), X.f32(), nullptr, nullptr, 4, 1, 1,
                                    0.1f, 0.0f);
        QCOMPARE(down(be, M)[0], 2.5f);
        QCOMPARE(down(be, S)[0], static_cast<float>(1.0 / std::sqrt(1.25)));
        QCOMPARE(down(be, RM)[0], 0.25f);
        QVERIFY(std::fabs(down(be, RV)[0] - static_cast<float>(0.9 + 0.1 * 5.0 / 3.0)) < 1e-7f);
        QCOMPARE(down(be, Y)[0], static_cast<float>(-1.5 / std::sqrt(1.25)));
        // Layer norm over [1, 2, 3, 4] gives the same normalized values.
        Tensor LY = be.empty(Shape{4});
        be.layerNormForward(LY.f32(), nullptr, nullptr, X.f32(), nullptr, nullptr, 1, 4, 0.0f);
        CHECK_VEC(down(be, LY), down(be, Y));
    }

    // ---- the reference itself: backward ops are the derivatives of forward ops ----------------------

    void referenceFiniteDifferences() {
        Backend& be = *m_ref;
        std::mt19937 rng(17);
        {
            ConvDesc d;
            d.n = 2, d.c = 4, d.h = 6, d.w = 5, d.k = 4, d.r = 3, d.s = 2, d.strideH = 2, d.padH = 1, d.padW = 1;
            d.dilationW = 2, d.groups = 2;
            const size_t xs = 2 * 4 * 6 * 5, ws = 4 * 2 * 3 * 2, ys = static_cast<size_t>(2) * 4 * d.outH() * d.outW();
            const Vec x = randomVec(rng, xs), w = randomVec(rng, ws), r = randomVec(rng, ys);
            Tensor X = up(be, x), W = up(be, w), R = up(be, r), DX = be.zeros(Shape{(int64_t)xs}),
                   DW = be.zeros(Shape{(int64_t)ws});
            be.conv2dBackwardData(DX.f32(), R.f32(), W.f32(), d);
            be.conv2dBackwardFilter(DW.f32(), R.f32(), X.f32(), d);
            auto convWith = [&](const Vec& xv, const Vec& wv) {
                Tensor XX = up(be, xv), WW = up(be, wv), YY = be.empty(Shape{(int64_t)ys});
                be.conv2dForward(YY.f32(), XX.f32(), WW.f32(), d);
                return down(be, YY);
            };
            if (!gradCheck(
                    "conv2d dx", x, down(be, DX), [&](const Vec& v) { return convWith(v, w); }, r))
                return;
            if (!gradCheck(
                    "conv2d dw", w, down(be, DW), [&](const Vec& v) { return convWith(x, v); }, r))
                return;
        }
        for (PoolMode mode : {PoolMode::Max, PoolMode::Average}) {
            PoolDesc d;
            d.mode = mode, d.n = 2, d.c = 2, d.h = 7, d.w = 6, d.kernelH = 3, d.kernelW = 2, d.strideH = 2;
            d.strideW = 2, d.padH = 1;
            const size_t xs = 2 * 2 * 7 * 6, ys = static_cast<size_t>(4) * d.outH() * d.outW();
            // Well-separated values so that a step of 1e-2 never changes which element is the maximum.
            Vec x(xs);
            for (size_t i = 0; i < xs; ++i) x[i] = static_cast<float>((i * 37) % xs) * 0.1f;
            const Vec r = randomVec(rng, ys);
            Tensor X = up(be, x), Y = be.empty(Shape{(int64_t)ys}), R = up(be, r), DX = be.zeros(Shape{(int64_t)xs});
            be.pool2dForward(Y.f32(), X.f32(), d);
            be.pool2dBackward(DX.f32(), R.f32(), X.f32(), Y.f32(), d);
            auto fwd = [&](const Vec& v) {
                Tensor XX = up(be, v), YY = be.empty(Shape{(int64_t)ys});
                be.pool2dForward(YY.f32(), XX.f32(), d);
                return down(be, YY);
            };
            if (!gradCheck(mode == PoolMode::Max ? "maxpool" : "avgpool", x, down(be, DX), fwd, r)) return;
        }
        for (Activation act :
             {Activation::LeakyReLU, Activation::GELU, Activation::Sigmoid, Activation::Tanh, Activation::HardSwish}) {
            Vec x = randomVec(rng, 50, -4.0f, 4.0f);
            for (float& v : x)  // keep away from the LeakyReLU kink at 0 and HardSwish's at -3 and 3
                if (std::fabs(v) < 0.05f || std::fabs(std::fabs(v) - 3.0f) < 0.05f) v = 0.5f;
            const Vec r = randomVec(rng, 50);
            Tensor X = up(be, x), Y = be.empty(Shape{50}), R = up(be, r), DX = be.zeros(Shape{50});
            be.activationForward(Y.f32(), X.f32(), 50, act, 0.2f);
            be.activationBackward(DX.f32(), R.f32(), X.f32(), Y.f32(), 50, act, 0.2f);
            auto fwd = [&](const Vec& v) {
                Tensor XX = up(be, v), YY = be.empty(Shape{50});
                be.activationForward(YY.f32(), XX.f32(), 50, act, 0.2f);
                return down(be, YY);
            };
            if (!gradCheck("activation " + std::to_string(static_cast<int>(act)), x, down(be, DX), fwd, r, 1e-3))
                return;
        }
        {
            Vec x = randomVec(rng, 50, -1.0f, 7.0f);
            for (float& v : x)  // away from the bounds
                if (std::fabs(v) < 0.05f || std::fabs(v - 6.0f) < 0.05f) v = 0.5f;
            const Vec r = randomVec(rng, 50);
            Tensor X = up(be, x), R = up(be, r), DX = be.zeros(Shape{50});
            be.clipBackward(DX.f32(), R.f32(), X.f32(), 50, 0.0f, 6.0f);
            auto fwd = [&](const Vec& v) {
                Tensor XX = up(be, v), YY = be.empty(Shape{50});
                be.clipForward(YY.f32(), XX.f32(), 50, 0.0f, 6.0f);
                return down(be, YY);
            };
            if (!gradCheck("clip", x, down(be, DX), fwd, r, 1e-3)) return;
        }
        for (int mode = 0; mode < 3; ++mode) {
            UpsampleDesc d;
            d.n = 2, d.c = 2, d.h = 3, d.w = 4, d.scaleH = 2, d.scaleW = 3;
            d.bilinear = mode > 0;
            d.alignCorners = mode == 2;
            const auto xs = static_cast<size_t>(d.inputSize()), ys = static_cast<size_t>(d.outputSize());
            const Vec x = randomVec(rng, xs), r = randomVec(rng, ys);
            Tensor R = up(be, r), DX = be.zeros(Shape{static_cast<int64_t>(xs)});
            be.upsample2dBackward(DX.f32(), R.f32(), d);
            auto fwd = [&](const Vec& v) {
                Tensor XX = up(be, v), YY = be.empty(Shape{static_cast<int64_t>(ys)});
                be.upsample2dForward(YY.f32(), XX.f32(), d);
                return down(be, YY);
            };
            if (!gradCheck("upsample2d mode " + std::to_string(mode), x, down(be, DX), fwd, r, 1e-2, 1e-3)) return;
        }
        {
            const int rows = 3, cols = 7;
            const Vec x = randomVec(rng, rows * cols, -2.0f, 2.0f), r = randomVec(rng, rows * cols);
            const Vec gamma = randomVec(rng, cols, 0.5f, 1.5f), beta = randomVec(rng, cols);
            Tensor X = up(be, x), Y = be.empty(Shape{rows * cols}), R = up(be, r), DX = be.zeros(Shape{rows * cols});
            be.softmaxForward(Y.f32(), X.f32(), rows, cols);
            be.softmaxBackward(DX.f32(), R.f32(), Y.f32(), rows, cols);
            auto softmaxFwd = [&](const Vec& v) {
                Tensor XX = up(be, v), YY = be.empty(Shape{rows * cols});
                be.softmaxForward(YY.f32(), XX.f32(), rows, cols);
                return down(be, YY);
            };
            if (!gradCheck("softmax", x, down(be, DX), softmaxFwd, r, 1e-3)) return;

            Tensor G = up(be, gamma), B = up(be, beta), M = be.empty(Shape{rows}), S = be.empty(Shape{rows});
            Tensor LDX = be.zeros(Shape{rows * cols}), DG = be.zeros(Shape{cols}), DB = be.zeros(Shape{cols});
            be.layerNormForward(Y.f32(), M.f32(), S.f32(), X.f32(), G.f32(), B.f32(), rows, cols, 1e-5f);
            be.layerNormBackward(LDX.f32(), DG.f32(), DB.f32(), R.f32(), X.f32(), G.f32(), M.f32(), S.f32(), rows,
                                 cols);
            auto lnFwd = [&](const Vec& v, const Vec& g) {
                Tensor XX = up(be, v), GG = up(be, g), YY = be.empty(Shape{rows * cols});
                be.layerNormForward(YY.f32(), nullptr, nullptr, XX.f32(), GG.f32(), B.f32(), rows, cols, 1e-5f);
                return down(be, YY);
            };
            if (!gradCheck(
                    "layerNorm dx", x, down(be, LDX), [&](const Vec& v) { return lnFwd(v, gamma); }, r, 1e-3))
                return;
            if (!gradCheck(
                    "layerNorm dgamma", gamma, down(be, DG), [&](const Vec& g) { return lnFwd(x, g); }, r, 1e-3))
                return;

            // Batch norm over the same numbers viewed as [n=3, c=7, inner=1].
            Tensor BM = be.empty(Shape{cols}), BS = be.empty(Shape{cols}), BDX = be.zeros(Shape{rows * cols});
            Tensor BDG = be.zeros(Shape{cols}), BDB = be.zeros(Shape{cols});
            be.batchNormForwardTraining(Y.f32(), BM.f32(), BS.f32(), nullptr, nullptr, X.f32(), G.f32(), B.f32(), rows,
                                        cols, 1, 0.1f, 1e-5f);
            be.batchNormBackward(BDX.f32(), BDG.f32(), BDB.f32(), R.f32(), X.f32(), G.f32(), BM.f32(), BS.f32(), rows,
                                 cols, 1);
            auto bnFwd = [&](const Vec& v) {
                Tensor XX = up(be, v), YY = be.empty(Shape{rows * cols}), MM = be.empty(Shape{cols}),
                       SS = be.empty(Shape{cols});
                be.batchNormForwardTraining(YY.f32(), MM.f32(), SS.f32(), nullptr, nullptr, XX.f32(), G.f32(), B.f32(),
                                            rows, cols, 1, 0.1f, 1e-5f);
                return down(be, YY);
            };
            if (!gradCheck("batchNorm dx", x, down(be, BDX), bnFwd, r, 1e-3)) return;

            // Cross-entropy: dlogits (gradScale 1) is the derivative of the summed loss.
            std::vector<int32_t> labels{2, 0, 6};
            Tensor Lab = upLabels(be, labels), L = be.empty(Shape{rows}), D = be.empty(Shape{rows * cols});
            be.softmaxCrossEntropy(L.f32(), D.f32(), X.f32(), Lab.i32(), rows, cols, 1.0f);
            auto ceFwd = [&](const Vec& v) {
                Tensor XX = up(be, v), LL = be.empty(Shape{rows});
                be.softmaxCrossEntropy(LL.f32(), nullptr, XX.f32(), Lab.i32(), rows, cols, 1.0f);
                return down(be, LL);
            };
            if (!gradCheck("softmaxCrossEntropy", x, down(be, D), ceFwd, Vec(rows, 1.0f), 1e-3)) return;
            Tensor T = up(be, randomVec(rng, rows * cols, 0.0f, 1.0f));
            be.bceWithLogits(L.f32(), D.f32(), X.f32(), T.f32(), rows, cols, 1.0f);
            auto bceFwd = [&](const Vec& v) {
                Tensor XX = up(be, v), LL = be.empty(Shape{rows});
                be.bceWithLogits(LL.f32(), nullptr, XX.f32(), T.f32(), rows, cols, 1.0f);
                return down(be, LL);
            };
            if (!gradCheck("bceWithLogits", x, down(be, D), bceFwd, Vec(rows, 1.0f), 1e-3)) return;
        }
    }

    void memoryTracking() {
        BackendOptions oneThread;
        oneThread.threads = 1;
        CpuBackend be(oneThread);
        QCOMPARE(be.bytesInUse(), size_t(0));
        {
            Tensor a = be.empty(Shape{1000});
            Tensor b = be.empty(Shape{10});
            QCOMPARE(be.bytesInUse(), size_t(4040));
            QCOMPARE(reinterpret_cast<uintptr_t>(a.raw()) % 64, uintptr_t(0));
            QCOMPARE(reinterpret_cast<uintptr_t>(b.raw()) % 64, uintptr_t(0));
        }
        QCOMPARE(be.bytesInUse(), size_t(0));
        QCOMPARE(be.peakBytes(), size_t(4040));
        QVERIFY_THROWS_EXCEPTION(OutOfMemoryError, be.allocate(size_t(1) << 62));
    }

    void threadsAndModes() {
        BackendOptions options;
        options.threads = 3;
        CpuBackend three(options);
        QCOMPARE(three.threads(), 3);
        QCOMPARE(three.name(), std::string("cpu"));
        options.threads = 0;
        QVERIFY(CpuBackend(options).threads() >= 1);
        // The reference runs on the calling thread whatever the options say.
        CpuReferenceBackend ref(BackendOptions{});
        QCOMPARE(ref.threads(), 1);
        QCOMPARE(ref.name(), std::string("cpu-reference"));
        QVERIFY(ref.device() == Device::cpu());
        // Run modes are fixed when a backend is made; the CPU is deterministic and checks indices at the
        // call whatever the options ask.
        options.deterministic = false;
        options.eagerIndexChecks = false;
        options.precision = ComputePrecision::F16;  // bf16 needs a CPU with AVX512-BF16 (test_cpu_bf16)
        CpuBackend made(options);
        QVERIFY(made.deterministic());
        QVERIFY(made.eagerIndexChecks());
        QCOMPARE(made.computePrecision(), ComputePrecision::F16);
    }

    // Last: every op of the registry went through compareAll above (a tolerance line alone is not a test).
    void everyOpIsCompared() {
        if (m_compared.empty()) QSKIP("run the whole suite: the comparisons above record the ops they cover");
        for (std::string_view name : backendOpNames())
            QVERIFY2(m_compared.count(std::string(name)),
                     ("op " + std::string(name) + " has a tolerance but no compareAll in this suite").c_str());
    }
};

QTEST_APPLESS_MAIN(TestBackendOps)
#include "test_backend_ops.moc"
