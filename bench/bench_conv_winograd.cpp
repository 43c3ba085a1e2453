// bench_conv_winograd: one 3x3 stride-1 convolution on blocked tensors in CpuBackend, Winograd's
// F(4x4, 3x3) against oneDNN's direct convolution (the same build with setWinograd(false)), in turns, round
// after round: the forward pass (bias and ReLU), the input gradient, the weights' and bias's gradient, and all
// three. Prints the fastest round of each and the ratios (direct time over Winograd's: above 1, Winograd is
// faster). Activations rotate through 12 sets of buffers, larger together than this VM's L3, as in a training
// step; --warm keeps one set (in cache). DNNL_MAX_CPU_ISA=AVX2 measures the 8-channel (AVX2) kernels on an
// AVX-512 CPU.
//
// Usage: bench_conv_winograd [--warm] [--rounds N] [C K SIZE BATCH]...   (default: the shapes of bench/RESULTS.md)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/backend/CpuBackend.h"

using namespace strata;

namespace {

using Clock = std::chrono::steady_clock;

double msPerCall(int reps, const std::function<void()>& fn) {
    const auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i) fn();
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / reps;
}

struct Shape4 {
    int c, k, size, batch;
};

// One backend's buffers: activations in `sets` copies, used in turn.
struct Side {
    std::unique_ptr<CpuBackend> backend;
    std::vector<Tensor> x, y, dy, dx;
    Tensor w, dw, bias, dbias;
    size_t turn = 0;
    void next() { turn = (turn + 1) % x.size(); }
};

Side makeSide(bool winograd, const ConvDesc& d, int sets) {
    Side s;
    s.backend = std::make_unique<CpuBackend>();
    s.backend->setWinograd(winograd);
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
    for (int i = 0; i < sets; ++i) {
        s.x.push_back(filled(d.inputSize()));
        s.y.push_back(filled(d.outputSize()));
        s.dy.push_back(filled(d.outputSize()));
        s.dx.push_back(filled(d.inputSize()));
    }
    s.w = filled(d.weightSize());
    s.dw = filled(d.weightSize());
    s.bias = filled(d.k);
    s.dbias = filled(d.k);
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    bool warm = false;
    int rounds = 7;
    std::vector<Shape4> shapes;
    std::vector<int> numbers;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--warm")) {
            warm = true;
        } else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) {
            rounds = std::atoi(argv[++i]);
        } else {
            numbers.push_back(std::atoi(argv[i]));
        }
    }
    if (numbers.size() % 4 != 0) {
        std::fprintf(stderr, "usage: bench_conv_winograd [--warm] [--rounds N] [C K SIZE BATCH]...\n");
        return 2;
    }
    for (size_t i = 0; i < numbers.size(); i += 4)
        shapes.push_back({numbers[i], numbers[i + 1], numbers[i + 2], numbers[i + 3]});
    if (shapes.empty())
        shapes = {{16, 16, 28, 64},   {32, 32, 28, 64},  {32, 64, 14, 64},  {64, 64, 7, 64},  {64, 64, 14, 64},
                  {128, 128, 14, 64}, {128, 128, 7, 64}, {256, 256, 7, 64}, {32, 64, 14, 256}};
    const int block = CpuBackend().activationBlock();
    if (!CpuBackend::winogradAvailable()) {
        std::printf(
            "bench_conv_winograd: this CPU runs no Winograd convolutions (they need oneDNN's blocked "
            "layout and AVX-512 for its 16-channel blocks or AVX2 and FMA for its 8-channel ones)\n");
        return 0;
    }
    std::printf(
        "# ms per call, fastest of %d rounds, %d-channel blocks, %s; Winograd / direct (ratio: direct "
        "over Winograd)\n",
        rounds, block, warm ? "one set of buffers (in cache)" : "activations rotating through 12 sets of buffers");
    std::printf("%-22s %-24s %-24s %-24s %-24s\n", "C -> K, size, batch", "forward", "input gradient",
                "weights + bias gradient", "all three gradients");
    for (const Shape4& sh : shapes) {
        ConvDesc d;
        d.n = sh.batch, d.c = sh.c, d.k = sh.k, d.h = d.w = sh.size, d.r = d.s = 3, d.padH = d.padW = 1;
        d.srcBlock = d.dstBlock = block;
        Side sides[2] = {makeSide(true, d, warm ? 1 : 12), makeSide(false, d, warm ? 1 : 12)};
        if (!sides[0].backend->winogradRuns(d)) std::printf("(not run by Winograd: the direct one twice)\n");
        const int reps = sh.batch * sh.size * sh.size < 4096 ? 200 : 10;
        double best[2][4];
        for (auto& row : best)
            for (double& v : row) v = 1e30;
        for (int round = 0; round < rounds; ++round)
            for (int side = 0; side < 2; ++side) {
                Side& s = sides[side];
                CpuBackend& b = *s.backend;
                const double t[4] = {
                    msPerCall(reps,
                              [&] {
                                  s.next();
                                  b.conv2dForwardFused(s.y[s.turn].f32(), s.x[s.turn].f32(), s.w.f32(), s.bias.f32(),
                                                       true, d);
                              }),
                    msPerCall(reps,
                              [&] {
                                  s.next();
                                  b.conv2dBackwardFused(s.dx[s.turn].f32(), nullptr, nullptr, s.dy[s.turn].f32(),
                                                        s.x[s.turn].f32(), s.w.f32(), d, true);
                              }),
                    msPerCall(reps,
                              [&] {
                                  s.next();
                                  b.conv2dBackwardFused(nullptr, s.dw.f32(), s.dbias.f32(), s.dy[s.turn].f32(),
                                                        s.x[s.turn].f32(), s.w.f32(), d, false);
                              }),
                    msPerCall(reps, [&] {
                        s.next();
                        b.conv2dBackwardFused(s.dx[s.turn].f32(), s.dw.f32(), s.dbias.f32(), s.dy[s.turn].f32(),
                                              s.x[s.turn].f32(), s.w.f32(), d, true);
                    })};
                for (int i = 0; i < 4; ++i) best[side][i] = std::min(best[side][i], t[i]);
            }
        const std::string name = std::to_string(sh.c) + " -> " + std::to_string(sh.k) + ", " + std::to_string(sh.size) +
                                 "x" + std::to_string(sh.size) + ", b" + std::to_string(sh.batch);
        std::printf("%-22s", name.c_str());
        for (int i = 0; i < 4; ++i) {
            char cell[64];
            std::snprintf(cell, sizeof cell, "%.3f / %.3f (%.2fx)", best[0][i], best[1][i], best[1][i] / best[0][i]);
            std::printf(" %-24s", cell);
        }
        std::printf("\n");
    }
    return 0;
}
