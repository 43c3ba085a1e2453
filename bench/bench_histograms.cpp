// bench_histograms: what weight and gradient histograms (TrainerOptions::histogramEvery, ParameterHistograms.h)
// cost a training run. Trains a project (by default examples/fashion_cnn.strata, first 12,800 training images)
// headless on the CPU for N steps with sampling off, every 100 steps and every 20 steps, in turn R times (so
// each setting sees the same machine load), and prints each setting's median samples/s (engine step
// timestamps, second step to last, as gui_latency measures them) and its ratio to no sampling, plus the time of
// one sample alone.
//
//   bench_histograms [project.strata] [--steps N] [--repeats R]
// Target: every 100 steps (the workbench's default) within 2% of no sampling.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/BackendRegistry.h"
#include "core/data/DataLoader.h"
#include "core/graph/Model.h"
#include "core/graph/Project.h"
#include "core/train/BackendOptionsFor.h"
#include "core/train/ParameterHistograms.h"
#include "core/train/Trainer.h"

using namespace strata;

namespace {

struct Clock : TrainingObserver {
    std::vector<double> elapsed;
    std::string error;
    void onStep(const StepEvent& e) override { elapsed.push_back(e.elapsedSeconds); }
    void onError(const std::string& m) override { error = m; }
    void onHistograms(const HistogramSample&) override {}
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

double run(const Project& project, const std::string& path, int64_t steps, int every, std::string& error) {
    Clock clock;
    std::unique_ptr<Backend> backend = backendRegistry().create(Device::cpu(), backendOptionsFor(project.training));
    TrainerOptions o;
    o.projectPath = path;
    o.maxSteps = steps;
    o.histogramEvery = every;
    o.telemetryIntervalMs = 0;
    Trainer trainer(project, *backend, &clock, o);
    trainer.run();
    error = clock.error;
    if (clock.elapsed.size() < 2) return 0;
    return double(clock.elapsed.size() - 1) * project.training.batchSize /
           (clock.elapsed.back() - clock.elapsed.front());
}

}  // namespace

int main(int argc, char** argv) {
    std::string path = std::string(STRATA_SOURCE_DIR) + "/examples/fashion_cnn.strata";
    int64_t steps = 300;
    int repeats = 5;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--steps") && i + 1 < argc)
            steps = std::atoll(argv[++i]);
        else if (!std::strcmp(argv[i], "--repeats") && i + 1 < argc)
            repeats = std::atoi(argv[++i]);
        else
            path = argv[i];
    }
    Project project = readProject(path);
    project.training.device = "cpu";
    project.training.checkpointDir.clear();
    if (project.dataset.trainLimit == 0) project.dataset.trainLimit = 12800;
    const int settings[] = {0, 100, 20};
    std::vector<double> rates[3];
    for (int r = 0; r < repeats; ++r)
        for (int s = 0; s < 3; ++s) {
            std::string error;
            const double v = run(project, path, steps, settings[s], error);
            if (!error.empty()) {
                std::fprintf(stderr, "bench_histograms: %s\n", error.c_str());
                return 1;
            }
            rates[s].push_back(v);
            std::printf("repeat %d, every %3d: %.0f samples/s\n", r + 1, settings[s], v);
        }
    const double base = median(rates[0]);
    for (int s = 0; s < 3; ++s)
        std::printf("%-22s median %8.0f samples/s  %6.2f%% of no sampling\n",
                    settings[s] ? ("every " + std::to_string(settings[s]) + " steps").c_str() : "no sampling",
                    median(rates[s]), 100 * median(rates[s]) / base);

    // One sample alone against one training step, timed back to back on the same model (so a loaded machine
    // slows both alike): the share of the run a sample every N steps costs is sample / (N x step).
    {
        std::unique_ptr<Backend> backend = backendRegistry().create(Device::cpu(), backendOptionsFor(project.training));
        const int batch = project.training.batchSize;
        std::unique_ptr<Model> model = compile(project.graph, *backend, 1);
        Tensor input = backend->empty(model->inputShape().withBatch(batch));
        backend->fill(input.f32(), 0.5f, input.numel());
        Tensor grad = backend->empty(model->outputShape().withBatch(batch));
        backend->fill(grad.f32(), 0.01f, grad.numel());
        Batch b;
        b.size = batch;
        HistogramHook hook(*model, project.graph, 1, 32, {});
        const StepInput in{.batch = b, .input = input, .labels = input};
        std::vector<double> stepMs, sampleMs;
        for (int i = 0; i < 12; ++i) {
            auto t0 = std::chrono::steady_clock::now();
            model->zeroGrad();
            model->forward(input, true, 1);
            model->backward(grad);
            backend->synchronize();
            auto t1 = std::chrono::steady_clock::now();
            hook.sample(in);
            auto t2 = std::chrono::steady_clock::now();
            if (i < 2) continue;  // warm-up
            stepMs.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
            sampleMs.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
        }
        const double st = median(stepMs), sa = median(sampleMs);
        std::printf("forward + backward %.2f ms, one sample %.2f ms: every 100 steps costs %.2f%%, every 20 %.2f%%\n",
                    st, sa, 100 * sa / (100 * st + sa), 100 * sa / (20 * st + sa));
    }
    return 0;
}
