// bench_conv_narrow: a convolution with one output channel (a decoder's last layer) in CpuBackend, the narrow
// row loops (CpuConvNarrow.cpp) against what ran before them (oneDNN, the same build with setNarrowConv(false)),
// in turns, round after round: the forward pass with bias, the input gradient, and the weights' and bias's
// gradient. Prints the fastest round of each, in wall-clock and in process CPU milliseconds (the CPU time is
// the steadier one on a loaded machine), and the ratios (oneDNN's time over the narrow loops': above 1, the
// narrow loops are faster).
//
// Usage: bench_conv_narrow [--threads N] [--rounds N] [C SIZE KERNEL BATCH]...
//   (default: 32 28 3 64, examples/fashion_denoising.strata's last layer, and 64 56 3 32, 16 28 5 64)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "core/backend/CpuBackend.h"

using namespace strata;

namespace {

struct Times {
    double wall = 1e30, cpu = 1e30;
};

double cpuMs() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

void timeInto(Times& best, int reps, const std::function<void()>& fn) {
    const double c0 = cpuMs();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) fn();
    const double wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    best.wall = std::min(best.wall, wall / reps);
    best.cpu = std::min(best.cpu, (cpuMs() - c0) / reps);
}

struct Side {
    std::unique_ptr<CpuBackend> backend;
    Tensor x, y, dy, dx, w, dw, bias, dbias;
};

Side makeSide(bool narrow, int threads, const ConvDesc& d) {
    Side s;
    BackendOptions options;
    options.threads = threads;
    s.backend = std::make_unique<CpuBackend>(options);
    s.backend->setNarrowConv(narrow);
    CpuBackend& b = *s.backend;
    std::mt19937 rng(1);
    std::normal_distribution<float> normal;
    auto filled = [&](int64_t n) {
        std::vector<float> v(static_cast<size_t>(n));
        for (float& e : v) e = normal(rng);
        Tensor t = b.empty(Shape{n});
        b.copyFromHost(t.f32(), v.data(), v.size() * sizeof(float));
        return t;
    };
    s.x = filled(d.inputSize()), s.y = filled(d.outputSize()), s.dy = filled(d.outputSize());
    s.dx = filled(d.inputSize()), s.w = filled(d.weightSize()), s.dw = filled(d.weightSize());
    s.bias = filled(d.k), s.dbias = filled(d.k);
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    int threads = 2, rounds = 7;
    std::vector<int> numbers;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
            threads = std::atoi(argv[++i]);
        } else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) {
            rounds = std::atoi(argv[++i]);
        } else {
            numbers.push_back(std::atoi(argv[i]));
        }
    }
    if (numbers.empty()) numbers = {32, 28, 3, 64, 64, 56, 3, 32, 16, 28, 5, 64};
    if (numbers.size() % 4 != 0) {
        std::fprintf(stderr, "usage: bench_conv_narrow [--threads N] [--rounds N] [C SIZE KERNEL BATCH]...\n");
        return 2;
    }
    std::printf("# ms per call (wall / process CPU), fastest of %d rounds, %d threads; narrow loops vs oneDNN\n",
                rounds, threads);
    std::printf("%-20s %-34s %-34s %-34s\n", "C, size, kernel, N", "forward (+bias)", "input gradient",
                "weights + bias gradient");
    for (size_t i = 0; i < numbers.size(); i += 4) {
        ConvDesc d;
        d.c = numbers[i], d.h = d.w = numbers[i + 1], d.r = d.s = numbers[i + 2], d.n = numbers[i + 3];
        d.k = 1, d.padH = d.padW = d.r / 2;
        Side sides[2] = {makeSide(true, threads, d), makeSide(false, threads, d)};
        if (!sides[0].backend->narrowConvRuns(d)) std::printf("(not run by the narrow loops: oneDNN twice)\n");
        Times best[2][3];
        for (int round = 0; round < rounds; ++round)
            for (int side = 0; side < 2; ++side) {
                Side& s = sides[side];
                CpuBackend& b = *s.backend;
                timeInto(best[side][0], 20,
                         [&] { b.conv2dForwardFused(s.y.f32(), s.x.f32(), s.w.f32(), s.bias.f32(), false, d); });
                timeInto(best[side][1], 20, [&] {
                    b.conv2dBackwardFused(s.dx.f32(), nullptr, nullptr, s.dy.f32(), s.x.f32(), s.w.f32(), d, true);
                });
                timeInto(best[side][2], 20, [&] {
                    b.conv2dBackwardFused(nullptr, s.dw.f32(), s.dbias.f32(), s.dy.f32(), s.x.f32(), s.w.f32(), d,
                                          false);
                });
            }
        char label[64];
        std::snprintf(label, sizeof label, "%d, %d, %dx%d, %d", d.c, d.h, d.r, d.s, d.n);
        std::printf("%-20s", label);
        for (int op = 0; op < 3; ++op) {
            char cell[96];
            std::snprintf(cell, sizeof cell, "%.3f/%.3f vs %.3f/%.3f (%.2fx)", best[0][op].wall, best[0][op].cpu,
                          best[1][op].wall, best[1][op].cpu, best[1][op].cpu / best[0][op].cpu);
            std::printf(" %-34s", cell);
        }
        std::printf("\n");
    }
    return 0;
}
