// bench_cpu_ops: speed of CpuBackend's fast paths against CpuReferenceBackend's loops,
// and the samples/s of one simulated training step of the Fashion-MNIST CNN
// (conv 1->32 3x3 pad 1, maxpool 2, conv 32->64 3x3 pad 1, maxpool 2,
// dense 3136->128, dense 128->10, batch 64, SGD with momentum, learning rate 0), written
// directly against the Backend ops so it measures the backend alone.
//
// Usage: bench_cpu_ops [threads=2] [steps=60]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "app/OpenMpWaitPolicy.h"
#include "core/backend/CpuBackend.h"
#include "core/backend/CpuReferenceBackend.h"

using namespace strata;

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Best-of-3 mean seconds per call over `reps` calls.
double timeIt(int reps, const std::function<void()>& fn) {
    fn();  // warm-up: scratch buffers, page faults
    double best = 1e30;
    for (int round = 0; round < 3; ++round) {
        const auto t0 = Clock::now();
        for (int i = 0; i < reps; ++i) fn();
        best = std::min(best, seconds(t0, Clock::now()) / reps);
    }
    return best;
}

Tensor randomTensor(Backend& b, const Shape& s, std::mt19937& rng, float scale = 1.0f) {
    std::uniform_real_distribution<float> u(-scale, scale);
    std::vector<float> h(static_cast<size_t>(s.numel()));
    for (float& v : h) v = u(rng);
    return b.fromHost(s, h.data());
}

void benchConv(CpuBackend& fast, CpuReferenceBackend& ref, const char* name, const ConvDesc& d) {
    std::mt19937 rng(1);
    const Shape xs{d.n, d.c, d.h, d.w}, ws{d.k, d.c / d.groups, d.r, d.s}, ys{d.n, d.k, d.outH(), d.outW()};
    Tensor x = randomTensor(fast, xs, rng), w = randomTensor(fast, ws, rng), dy = randomTensor(fast, ys, rng);
    Tensor y = fast.empty(ys), dx = fast.zeros(xs), dw = fast.zeros(ws);
    const double flops = 2.0 * ys.numel() * (d.c / d.groups) * d.r * d.s;
    const double f = timeIt(20, [&] { fast.conv2dForward(y.f32(), x.f32(), w.f32(), d); });
    const double bd = timeIt(20, [&] { fast.conv2dBackwardData(dx.f32(), dy.f32(), w.f32(), d); });
    const double bf = timeIt(20, [&] { fast.conv2dBackwardFilter(dw.f32(), dy.f32(), x.f32(), d); });
    const double rf = timeIt(1, [&] { ref.conv2dForward(y.f32(), x.f32(), w.f32(), d); });
    std::printf("%-34s fwd %6.1f GFLOP/s (%.2f ms, reference %.0f ms)  bwd-data %6.1f  bwd-filter %6.1f GFLOP/s\n",
                name, flops / f * 1e-9, f * 1e3, rf * 1e3, flops / bd * 1e-9, flops / bf * 1e-9);
}

// One training step of the CNN, op by op, with per-op time accumulated into `times`.
struct CnnStep {
    static constexpr int kBatch = 64;
    Backend& b;
    ConvDesc c1, c2;
    PoolDesc p1, p2;
    Tensor x, labels;
    Tensor w1, b1, w2, b2, w3, b3, w4, b4;                           // parameters
    Tensor g1, gb1, g2, gb2, g3, gb3, g4, gb4;                       // gradients
    Tensor v1, vb1, v2, vb2, v3, vb3, v4, vb4;                       // momentum
    Tensor a1, r1, q1, a2, r2, q2, a3, r3, a4;                       // activations
    Tensor losses, dlogits, dr3, da3, dq2, dr2, da2, dq1, dr1, da1;  // activation gradients
    std::map<std::string, double>* times = nullptr;

    explicit CnnStep(Backend& backend) : b(backend) {
        std::mt19937 rng(7);
        c1.n = kBatch, c1.c = 1, c1.h = c1.w = 28, c1.k = 32, c1.r = c1.s = 3, c1.padH = c1.padW = 1;
        c2 = c1;
        c2.c = 32, c2.h = c2.w = 14, c2.k = 64;
        p1.n = kBatch, p1.c = 32, p1.h = p1.w = 28;
        p2 = p1;
        p2.c = 64, p2.h = p2.w = 14;
        x = randomTensor(b, {kBatch, 1, 28, 28}, rng);
        std::vector<int32_t> lab(kBatch);
        for (int i = 0; i < kBatch; ++i) lab[static_cast<size_t>(i)] = i % 10;
        labels = b.empty({kBatch}, DType::I32);
        b.copyFromHost(labels.raw(), lab.data(), lab.size() * sizeof(int32_t));
        w1 = randomTensor(b, {32, 1, 3, 3}, rng, 0.3f), b1 = b.zeros({32});
        w2 = randomTensor(b, {64, 32, 3, 3}, rng, 0.06f), b2 = b.zeros({64});
        w3 = randomTensor(b, {128, 3136}, rng, 0.02f), b3 = b.zeros({128});
        w4 = randomTensor(b, {10, 128}, rng, 0.1f), b4 = b.zeros({10});
        for (auto [g, p] : {std::pair{&g1, &w1},
                            {&gb1, &b1},
                            {&g2, &w2},
                            {&gb2, &b2},
                            {&g3, &w3},
                            {&gb3, &b3},
                            {&g4, &w4},
                            {&gb4, &b4}})
            *g = b.zeros(p->shape());
        for (auto [v, p] : {std::pair{&v1, &w1},
                            {&vb1, &b1},
                            {&v2, &w2},
                            {&vb2, &b2},
                            {&v3, &w3},
                            {&vb3, &b3},
                            {&v4, &w4},
                            {&vb4, &b4}})
            *v = b.zeros(p->shape());
        a1 = b.empty({kBatch, 32, 28, 28}), r1 = b.empty(a1.shape()), q1 = b.empty({kBatch, 32, 14, 14});
        a2 = b.empty({kBatch, 64, 14, 14}), r2 = b.empty(a2.shape()), q2 = b.empty({kBatch, 64, 7, 7});
        a3 = b.empty({kBatch, 128}), r3 = b.empty(a3.shape()), a4 = b.empty({kBatch, 10});
        losses = b.empty({kBatch}), dlogits = b.empty({kBatch, 10});
        dr3 = b.empty(a3.shape()), da3 = b.empty(a3.shape()), dq2 = b.empty(q2.shape());
        dr2 = b.empty(a2.shape()), da2 = b.empty(a2.shape()), dq1 = b.empty(q1.shape());
        dr1 = b.empty(a1.shape()), da1 = b.empty(a1.shape());
    }

    template <class F>
    void op(const char* name, F&& f) {
        if (!times) {
            f();
            return;
        }
        const auto t0 = Clock::now();
        f();
        (*times)[name] += seconds(t0, Clock::now());
    }

    void run() {
        const int N = kBatch;
        // Gradients and activation gradients are accumulated into, so zero them first.
        op("zero grads", [&] {
            for (Tensor* t :
                 {&g1, &gb1, &g2, &gb2, &g3, &gb3, &g4, &gb4, &dr3, &da3, &dq2, &dr2, &da2, &dq1, &dr1, &da1})
                b.zero(t->raw(), t->bytes());
        });
        // ---- forward ----
        op("conv1 fwd", [&] { b.conv2dForward(a1.f32(), x.f32(), w1.f32(), c1); });
        op("bias fwd", [&] { b.addBiasChannels(a1.f32(), b1.f32(), N, 32, 784); });
        op("relu fwd", [&] { b.activationForward(r1.f32(), a1.f32(), a1.numel(), Activation::ReLU, 0.0f); });
        op("pool fwd", [&] { b.pool2dForward(q1.f32(), r1.f32(), p1); });
        op("conv2 fwd", [&] { b.conv2dForward(a2.f32(), q1.f32(), w2.f32(), c2); });
        op("bias fwd", [&] { b.addBiasChannels(a2.f32(), b2.f32(), N, 64, 196); });
        op("relu fwd", [&] { b.activationForward(r2.f32(), a2.f32(), a2.numel(), Activation::ReLU, 0.0f); });
        op("pool fwd", [&] { b.pool2dForward(q2.f32(), r2.f32(), p2); });
        op("dense fwd", [&] {
            b.gemm(false, true, N, 128, 3136, 1.0f, q2.f32(), 3136, w3.f32(), 3136, 0.0f, a3.f32(), 128);
            b.addBiasRows(a3.f32(), b3.f32(), N, 128);
            b.activationForward(r3.f32(), a3.f32(), a3.numel(), Activation::ReLU, 0.0f);
            b.gemm(false, true, N, 10, 128, 1.0f, r3.f32(), 128, w4.f32(), 128, 0.0f, a4.f32(), 10);
            b.addBiasRows(a4.f32(), b4.f32(), N, 10);
        });
        op("loss", [&] {
            b.softmaxCrossEntropy(losses.f32(), dlogits.f32(), a4.f32(), labels.i32(), N, 10, 1.0f / N);
            b.countCorrect(a4.f32(), labels.i32(), N, 10);
        });
        // ---- backward ----
        op("dense bwd", [&] {
            b.gemm(true, false, 10, 128, N, 1.0f, dlogits.f32(), 10, r3.f32(), 128, 1.0f, g4.f32(), 128);
            b.sumRows(gb4.f32(), dlogits.f32(), N, 10);
            b.gemm(false, false, N, 128, 10, 1.0f, dlogits.f32(), 10, w4.f32(), 128, 1.0f, dr3.f32(), 128);
            b.activationBackward(da3.f32(), dr3.f32(), a3.f32(), r3.f32(), da3.numel(), Activation::ReLU, 0.0f);
            b.gemm(true, false, 128, 3136, N, 1.0f, da3.f32(), 128, q2.f32(), 3136, 1.0f, g3.f32(), 3136);
            b.sumRows(gb3.f32(), da3.f32(), N, 128);
            b.gemm(false, false, N, 3136, 128, 1.0f, da3.f32(), 128, w3.f32(), 3136, 1.0f, dq2.f32(), 3136);
        });
        op("pool bwd", [&] { b.pool2dBackward(dr2.f32(), dq2.f32(), r2.f32(), q2.f32(), p2); });
        op("relu bwd", [&] {
            b.activationBackward(da2.f32(), dr2.f32(), a2.f32(), r2.f32(), da2.numel(), Activation::ReLU, 0.0f);
        });
        op("bias bwd", [&] { b.sumChannels(gb2.f32(), da2.f32(), N, 64, 196); });
        op("conv2 bwd filter", [&] { b.conv2dBackwardFilter(g2.f32(), da2.f32(), q1.f32(), c2); });
        op("conv2 bwd data", [&] { b.conv2dBackwardData(dq1.f32(), da2.f32(), w2.f32(), c2); });
        op("pool bwd", [&] { b.pool2dBackward(dr1.f32(), dq1.f32(), r1.f32(), q1.f32(), p1); });
        op("relu bwd", [&] {
            b.activationBackward(da1.f32(), dr1.f32(), a1.f32(), r1.f32(), da1.numel(), Activation::ReLU, 0.0f);
        });
        op("bias bwd", [&] { b.sumChannels(gb1.f32(), da1.f32(), N, 32, 784); });
        op("conv1 bwd filter", [&] { b.conv2dBackwardFilter(g1.f32(), da1.f32(), x.f32(), c1); });
        // ---- update ----
        op("sgd", [&] {
            SgdParams p;
            // lr 0: the update costs the same, but the weights stay put, so repeating one batch does not
            // drive the loss to zero and the gradients into (slow) denormal floats.
            p.lr = 0.0f, p.momentum = 0.9f;
            for (auto [w, g, v] : {std::tuple{&w1, &g1, &v1},
                                   {&b1, &gb1, &vb1},
                                   {&w2, &g2, &v2},
                                   {&b2, &gb2, &vb2},
                                   {&w3, &g3, &v3},
                                   {&b3, &gb3, &vb3},
                                   {&w4, &g4, &v4},
                                   {&b4, &gb4, &vb4}})
                b.sgdUpdate(w->f32(), v->f32(), g->f32(), w->numel(), p);
        });
    }
};

}  // namespace

int main(int argc, char** argv) {
    strata::app::ensurePassiveOpenMpWait(argv, /*headless=*/true);  // as strata-train does
    const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
    const int steps = argc > 2 ? std::atoi(argv[2]) : 60;
    BackendOptions options;
    options.threads = threads;
    CpuBackend fast(options);
    CpuReferenceBackend ref;
    std::printf("CpuBackend fast path, %d thread(s), vs reference loops (1 thread)\n\n", threads);

    {
        std::mt19937 rng(3);
        for (int n : {256, 1024, 2048}) {
            Tensor a = randomTensor(fast, {n, n}, rng), bm = randomTensor(fast, {n, n}, rng), c = fast.empty({n, n});
            const double t = timeIt(n >= 2048 ? 2 : 10, [&] {
                fast.gemm(false, false, n, n, n, 1.0f, a.f32(), n, bm.f32(), n, 0.0f, c.f32(), n);
            });
            std::printf("sgemm %4d^3                        %6.1f GFLOP/s\n", n, 2.0 * n * n * n / t * 1e-9);
        }
        std::printf("\n");
    }

    ConvDesc c1;
    c1.n = 64, c1.c = 1, c1.h = c1.w = 28, c1.k = 32, c1.r = c1.s = 3, c1.padH = c1.padW = 1;
    ConvDesc c2 = c1;
    c2.c = 32, c2.h = c2.w = 14, c2.k = 64;
    benchConv(fast, ref, "conv 1->32 3x3 p1 28x28 (n=64)", c1);
    benchConv(fast, ref, "conv 32->64 3x3 p1 14x14 (n=64)", c2);
    std::printf("\n");

    CnnStep step(fast);
    for (int i = 0; i < 5; ++i) step.run();  // warm-up
    double best = 1e30;
    for (int round = 0; round < 3; ++round) {
        const auto t0 = Clock::now();
        for (int i = 0; i < steps / 3 + 1; ++i) step.run();
        best = std::min(best, seconds(t0, Clock::now()) / (steps / 3 + 1));
    }
    std::printf("Fashion-MNIST CNN training step (batch 64): %.2f ms/step, %.0f samples/s\n", best * 1e3,
                CnnStep::kBatch / best);

    std::map<std::string, double> times;
    step.times = &times;
    for (int i = 0; i < steps; ++i) step.run();
    double total = 0;
    for (auto& [k, v] : times) total += v;
    for (auto& [k, v] : times) std::printf("  %-20s %6.3f ms  %4.1f%%\n", k.c_str(), v / steps * 1e3, 100 * v / total);
    return 0;
}
