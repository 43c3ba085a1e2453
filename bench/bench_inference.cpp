// bench_inference: forward-pass time of trained models in Strata's CPU engine, for the compression benchmark
// (bench/compression_bench.py). Each model is a checkpoint file or folder (or any model file loadModelFile
// reads); the models are timed in turns, round after round, so a busy machine slows all of them alike, and
// each model's figure is the median over the rounds of timeForwardMs (itself the median of repeated passes).
//
//   bench_inference MODEL... [--threads N] [--batches 1,256] [--rounds R] [--no-fold]
// (--no-fold: the graph as drawn, without folding BatchNorm into the layer before it as Predict does)
// prints one JSON object per model and batch: {"model": ..., "batch": B, "ms": median, "rounds": [...]}.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/OpenMpWaitPolicy.h"
#include "core/export/ExportModel.h"
#include "core/infer/Compression.h"

int main(int argc, char** argv) {
    strata::app::ensurePassiveOpenMpWait(argv, /*headless=*/true);  // as strata-train does
    std::vector<std::string> models;
    std::vector<int64_t> batches{1, 256};
    int threads = 2, rounds = 5;
    bool fold = true;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "bench_inference: %s needs a value\n", a.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--threads") {
            threads = std::stoi(value());
        } else if (a == "--no-fold") {
            fold = false;
        } else if (a == "--rounds") {
            rounds = std::max(1, std::stoi(value()));
        } else if (a == "--batches") {
            batches.clear();
            std::stringstream s(value());
            for (std::string b; std::getline(s, b, ',');) batches.push_back(std::stoll(b));
        } else {
            models.push_back(a);
        }
    }
    if (models.empty()) {
        std::fprintf(stderr,
                     "usage: bench_inference MODEL... [--threads N] [--batches 1,256] [--rounds R] [--no-fold]\n");
        return 2;
    }
    try {
        std::vector<strata::ExportModel> loaded;
        for (const std::string& m : models) loaded.push_back(strata::loadModelFile(m));
        for (int64_t batch : batches) {
            std::vector<std::vector<double>> times(models.size());
            for (int r = 0; r < rounds; ++r)
                for (size_t m = 0; m < models.size(); ++m)
                    times[m].push_back(
                        strata::timeForwardMs(loaded[m].project, loaded[m].weights, batch, threads, fold));
            for (size_t m = 0; m < models.size(); ++m) {
                std::vector<double> sorted = times[m];
                std::sort(sorted.begin(), sorted.end());
                nlohmann::json j{{"model", models[m]},
                                 {"batch", batch},
                                 {"threads", threads},
                                 {"folded", fold},
                                 {"ms", sorted[sorted.size() / 2]},
                                 {"rounds", times[m]}};
                std::cout << j.dump() << std::endl;
            }
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_inference: %s\n", e.what());
        return 1;
    }
    return 0;
}
