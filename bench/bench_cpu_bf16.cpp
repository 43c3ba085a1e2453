// bench_cpu_bf16: CpuBackend's bf16 ops (oneDNN's bf16 matmul and convolutions, CpuBf16.h) against its float32
// ones, op by op, on the shapes of fashion_cnn_bn at batch 128 in the blocked layout training uses: float32 with
// Winograd (the default for 3x3), float32 direct (oneDNN), bf16 (oneDNN, conversions included).
//
// Usage: bench_cpu_bf16 [threads=2] [--cpu-time] [--only NAME,...]  (--cpu-time: CPU milliseconds, all threads
// summed, instead of the wall clock, which on a shared machine measures the neighbours' load too; --only: just the
// GEMM cases named, as the table spells them, e.g. --only "qkv weights,dv x256")
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "app/OpenMpWaitPolicy.h"
#include "core/backend/CpuBackend.h"

using namespace strata;

namespace {

using Clock = std::chrono::steady_clock;

// The process's CPU time in milliseconds (all threads; OpenMP's waits are passive, so idle threads add nothing).
double cpuMs() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

// Set by --cpu-time: the machine is shared, and a wall clock measures the neighbours' load as much as the op.
bool g_cpuTime = false;

// Best-of-5 mean milliseconds per call over `reps` calls (wall clock, or CPU time summed over the threads), after
// a warm-up call.
double msPerCall(int reps, const std::function<void()>& fn) {
    fn();
    double best = 1e30;
    for (int round = 0; round < 5; ++round) {
        const auto t0 = Clock::now();
        const double c0 = cpuMs();
        for (int i = 0; i < reps; ++i) fn();
        const double wall = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        best = std::min(best, (g_cpuTime ? cpuMs() - c0 : wall) / reps);
    }
    return best;
}

Tensor randomTensor(Backend& be, int64_t n, std::mt19937& rng) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> h(static_cast<size_t>(n));
    for (float& v : h) v = u(rng);
    return be.fromHost(Shape{n}, h.data());
}

struct Times {
    double fwd = 0, data = 0, filter = 0;
};

Times timeConv(CpuBackend& be, const ConvDesc& d) {
    std::mt19937 rng(1);
    Tensor x = randomTensor(be, d.inputSize(), rng), w = randomTensor(be, d.weightSize(), rng),
           y = randomTensor(be, d.outputSize(), rng), dx = randomTensor(be, d.inputSize(), rng),
           dw = randomTensor(be, d.weightSize(), rng);
    Times t;
    t.fwd = msPerCall(5, [&] { be.conv2dForwardFused(y.f32(), x.f32(), w.f32(), nullptr, true, d); });
    t.data =
        msPerCall(5, [&] { be.conv2dBackwardFused(dx.f32(), nullptr, nullptr, y.f32(), x.f32(), w.f32(), d, true); });
    t.filter = msPerCall(5, [&] { be.conv2dBackwardFused(nullptr, dw.f32(), nullptr, y.f32(), x.f32(), w.f32(), d); });
    return t;
}

// count > 1: a strided batch of `count` products (the Transformer's attention, per head over the batch).
double timeGemm(CpuBackend& be, bool ta, bool tb, int m, int n, int k, int count = 1) {
    std::mt19937 rng(2);
    Tensor a = randomTensor(be, int64_t(m) * k * count, rng), b = randomTensor(be, int64_t(k) * n * count, rng),
           c = randomTensor(be, int64_t(m) * n * count, rng);
    if (count > 1)
        return msPerCall(5, [&] {
            be.gemmStridedBatched(ta, tb, m, n, k, 1.0f, a.f32(), ta ? m : k, int64_t(m) * k, b.f32(), tb ? k : n,
                                  int64_t(k) * n, 0.0f, c.f32(), n, int64_t(m) * n, count);
        });
    return msPerCall(
        10, [&] { be.gemm(ta, tb, m, n, k, 1.0f, a.f32(), ta ? m : k, b.f32(), tb ? k : n, 0.0f, c.f32(), n); });
}

}  // namespace

int main(int argc, char** argv) {
    strata::app::ensurePassiveOpenMpWait(argv, /*headless=*/true);  // as strata-train does
    BackendOptions f32Options;
    f32Options.threads = 2;
    std::string only;  // ",name,name," when --only is given
    for (int i = 1; i < argc; ++i) {
        if (std::string(argv[i]) == "--cpu-time")
            g_cpuTime = true;
        else if (std::string(argv[i]) == "--only" && i + 1 < argc)
            only = "," + std::string(argv[++i]) + ",";
        else
            f32Options.threads = std::atoi(argv[i]);
    }
    BackendOptions bf16Options = f32Options;
    bf16Options.precision = ComputePrecision::BF16;
    CpuBackend winograd(f32Options), direct(f32Options), bf16(bf16Options);
    // bf16 as it was before the bf16 Winograd: oneDNN's bf16 forward, float32 Winograd on rounded copies backward.
    setenv("STRATA_WINOGRAD_BF16", "0", 1);
    CpuBackend bf16Before(bf16Options);
    unsetenv("STRATA_WINOGRAD_BF16");
    direct.setWinograd(false);
    const int block = bf16.activationBlock();
    std::printf(
        "%d threads, activations blocked by %d; %s ms per call (forward with ReLU, backward data, backward "
        "weights)\n\n",
        f32Options.threads, block, g_cpuTime ? "CPU" : "wall-clock");
    std::printf("%-24s %-22s %-22s %-22s %-22s %s\n", "convolution, batch 128", "fp32 Winograd", "fp32 direct",
                "bf16 before", "bf16 Winograd", "bf16 / best fp32");
    struct Shape4 {
        int c, k, hw;
    };
    for (const Shape4& s : {Shape4{16, 16, 28}, Shape4{32, 32, 28}, Shape4{32, 64, 14}, Shape4{64, 64, 14}}) {
        if (!only.empty()) break;  // --only names GEMM cases
        ConvDesc d;
        d.n = 128, d.c = s.c, d.k = s.k, d.h = d.w = s.hw, d.r = d.s = 3, d.padH = d.padW = 1;
        d.srcBlock = d.dstBlock = block;
        // Interleaved rounds, the best of each (the machine is shared: one pass alone drifts with the load).
        Times a, b, e, c;
        const auto keepBest = [](Times& best, const Times& t) {
            best.fwd = best.fwd == 0 ? t.fwd : std::min(best.fwd, t.fwd);
            best.data = best.data == 0 ? t.data : std::min(best.data, t.data);
            best.filter = best.filter == 0 ? t.filter : std::min(best.filter, t.filter);
        };
        for (int round = 0; round < 3; ++round) {
            keepBest(a, timeConv(winograd, d));
            keepBest(b, timeConv(direct, d));
            keepBest(e, timeConv(bf16Before, d));
            keepBest(c, timeConv(bf16, d));
        }
        const double best = std::min(a.fwd + a.data + a.filter, b.fwd + b.data + b.filter);
        std::printf(
            "%3d->%-3d 3x3 on %2dx%-2d   %6.2f %6.2f %6.2f   %6.2f %6.2f %6.2f   %6.2f %6.2f %6.2f   %6.2f %6.2f "
            "%6.2f   %.2fx\n",
            s.c, s.k, s.hw, s.hw, a.fwd, a.data, a.filter, b.fwd, b.data, b.filter, e.fwd, e.data, e.filter, c.fwd,
            c.data, c.filter, best / (c.fwd + c.data + c.filter));
    }
    std::printf("\n%-34s %10s %10s %s\n", "GEMM (m x n x k)", "fp32", "bf16", "speed-up");
    struct G {
        bool ta, tb;
        int m, n, k;
        const char* what;
        int count = 1;
    };
    // fashion_cnn_bn's fc1 at batch 128; the Transformer example's (batch 64, 128 tokens, width 128, 4 heads).
    for (const G& g :
         {G{false, true, 128, 256, 3136, "fc1 forward"}, G{true, false, 256, 3136, 128, "fc1 weights"},
          G{false, false, 128, 3136, 256, "fc1 data"}, G{false, false, 1024, 1024, 1024, "square 1024"},
          G{false, true, 8192, 384, 128, "qkv forward"}, G{true, false, 384, 128, 8192, "qkv weights"},
          G{false, false, 8192, 128, 384, "qkv data"}, G{false, true, 8192, 256, 128, "ff1 forward"},
          G{false, true, 128, 128, 32, "scores x256", 256}, G{false, false, 128, 32, 128, "context x256", 256},
          G{true, false, 128, 32, 128, "dv x256", 256}}) {
        if (!only.empty() && only.find("," + std::string(g.what) + ",") == std::string::npos) continue;
        const double a = timeGemm(winograd, g.ta, g.tb, g.m, g.n, g.k, g.count),
                     b = timeGemm(bf16, g.ta, g.tb, g.m, g.n, g.k, g.count);
        std::printf("%-12s %5d x %5d x %5d %8.2f ms %7.2f ms %6.2fx\n", g.what, g.m, g.n, g.k, a, b, a / b);
    }
    return 0;
}
