// bench_int8: an int8 ONNX export (strata-train export --quantize int8) timed in Strata's int8 engine
// (core/infer/Int8Engine: VNNI kernels, oneDNN's and Strata's) and the same model in Strata's float32 engine as Predict
// runs it (the file's dequantized weights, BatchNorm folded), alternating, for bench/int8_bench.py.
//
//   bench_int8 FILE.onnx [--threads N] [--batches 1,256] [--rounds R]
// prints one JSON object per batch: {"batch": B, "fp32_ms": [...], "int8_ms": [...]} (one figure per round, each
// the median of repeated passes over about a quarter of a second; the int8 figure includes quantizing the input).
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
#include "core/infer/Int8Engine.h"

int main(int argc, char** argv) {
    strata::app::ensurePassiveOpenMpWait(argv, /*headless=*/true);  // as strata-train does
    std::string file;
    std::vector<int64_t> batches{1, 256};
    int threads = 2, rounds = 1;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "bench_int8: %s needs a value\n", a.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--threads") {
            threads = std::stoi(value());
        } else if (a == "--rounds") {
            rounds = std::max(1, std::stoi(value()));
        } else if (a == "--batches") {
            batches.clear();
            std::stringstream s(value());
            for (std::string b; std::getline(s, b, ',');) batches.push_back(std::stoll(b));
        } else {
            file = a;
        }
    }
    if (file.empty()) {
        std::fprintf(stderr, "usage: bench_int8 FILE.onnx [--threads N] [--batches 1,256] [--rounds R]\n");
        return 2;
    }
    try {
        const strata::ExportModel model = strata::loadModelFile(file);
        if (model.int8Activations.empty()) throw std::runtime_error(file + " is not an int8 export");
        strata::Int8Engine engine(model, model.int8Activations, threads);
        for (int64_t batch : batches) {
            std::vector<double> fp32, int8;
            for (int r = 0; r < rounds; ++r) {
                fp32.push_back(strata::timeForwardMs(model.project, model.weights, batch, threads, true));
                int8.push_back(strata::timeInt8Ms(engine, model.project, batch));
            }
            std::cout
                << nlohmann::json{{"batch", batch}, {"threads", threads}, {"fp32_ms", fp32}, {"int8_ms", int8}}.dump()
                << std::endl;
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_int8: %s\n", e.what());
        return 1;
    }
    return 0;
}
