// bench_int8_conv: one int8 convolution (3x3, padding 1, channels last, uint8 in and out) in Strata's own VNNI
// kernel (CpuInt8's VnniConv) and in oneDNN's (the same spec made under STRATA_INT8_ONEDNN), in turns, round after
// round; prints the fastest round of each in microseconds a call and multiply-adds a second, and the ratio
// (oneDNN's time over Strata's: above 1, Strata's kernel is faster). A spec Strata's kernel does not take (see
// ownApplies in CpuInt8.cpp) runs oneDNN's in both, which the implementation column shows.
//
// Usage: bench_int8_conv [--threads N] [--rounds N] [CHANNELS SIZE FILTERS BATCH]...
//   (default: 1 28 16 1, 16 28 16 1, 16 28 16 256, 16 28 32 1, 32 14 64 1: the residual template's and
//   fashion_cnn_bn's layers)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/backend/CpuInt8.h"

namespace {

struct Shape {
    int channels, size, filters, batch;
};

// Microseconds a call: the mean over calls filling a quarter of a second.
double timeUs(strata::cpu::Int8Kernel& k, int threads, int batch, const std::vector<uint8_t>& in,
              std::vector<uint8_t>& out) {
    for (int i = 0; i < 20; ++i) k.run(threads, batch, in.data(), out.data());
    const auto start = std::chrono::steady_clock::now();
    int calls = 0;
    double elapsed = 0.0;
    do {
        k.run(threads, batch, in.data(), out.data());
        ++calls;
        elapsed = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    } while (elapsed < 250000.0);
    return elapsed / calls;
}

}  // namespace

int main(int argc, char** argv) {
    int threads = 2, rounds = 3;
    std::vector<Shape> shapes;
    std::vector<int> numbers;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if ((a == "--threads" || a == "--rounds") && i + 1 < argc)
            (a == "--threads" ? threads : rounds) = std::max(1, std::atoi(argv[++i]));
        else
            numbers.push_back(std::atoi(argv[i]));
    }
    for (size_t i = 0; i + 4 <= numbers.size(); i += 4)
        shapes.push_back({numbers[i], numbers[i + 1], numbers[i + 2], numbers[i + 3]});
    if (shapes.empty()) shapes = {{1, 28, 16, 1}, {16, 28, 16, 1}, {16, 28, 16, 256}, {16, 28, 32, 1}, {32, 14, 64, 1}};
    const std::string why = strata::cpu::int8Unavailable();
    if (!why.empty()) {
        std::fprintf(stderr, "bench_int8_conv: no native int8 here: %s\n", why.c_str());
        return 1;
    }
    std::printf("%-18s %-42s %10s %10s %9s %9s %7s\n", "C size F batch", "Strata's kernel", "Strata us", "oneDNN us",
                "Strata GM", "oneDNN GM", "ratio");
    for (const Shape& s : shapes) {
        strata::cpu::Int8ConvSpec spec;
        spec.channels = s.channels;
        spec.height = spec.width = s.size;
        spec.filters = s.filters;
        spec.kernelH = spec.kernelW = 3;
        spec.padH = spec.padW = 1;
        std::mt19937 rng(1);
        for (int i = 0; i < s.filters * s.channels * 9; ++i) spec.weights.push_back(int8_t(int(rng() % 256) - 128));
        for (int f = 0; f < s.filters; ++f) {
            spec.bias.push_back(int32_t(rng() % 200) - 100);
            spec.scales.push_back(0.001f);
        }
        std::vector<uint8_t> in(size_t(s.batch) * s.size * s.size * s.channels),
            out(size_t(s.batch) * s.size * s.size * s.filters);
        for (auto& v : in) v = uint8_t(rng());
        auto own = strata::cpu::makeInt8Conv(spec);
        setenv("STRATA_INT8_ONEDNN", "1", 1);
        auto onednn = strata::cpu::makeInt8Conv(spec);
        unsetenv("STRATA_INT8_ONEDNN");
        double bestOwn = 1e30, bestOneDnn = 1e30;
        for (int r = 0; r < rounds; ++r) {
            bestOwn = std::min(bestOwn, timeUs(*own, threads, s.batch, in, out));
            bestOneDnn = std::min(bestOneDnn, timeUs(*onednn, threads, s.batch, in, out));
        }
        const double macs = double(s.batch) * s.size * s.size * s.filters * s.channels * 9;
        char shape[64];
        std::snprintf(shape, sizeof shape, "%d %d %d %d", s.channels, s.size, s.filters, s.batch);
        std::printf("%-18s %-42s %10.2f %10.2f %9.1f %9.1f %6.2fx\n", shape, own->implementation().c_str(), bestOwn,
                    bestOneDnn, macs / bestOwn / 1e3, macs / bestOneDnn / 1e3, bestOneDnn / bestOwn);
    }
    return 0;
}
