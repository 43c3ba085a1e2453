// dist_compare: the largest absolute difference between the weights (parameters and BatchNorm statistics)
// of two checkpoints, each a file or a folder (its newest checkpoint). Exit 0 when it is at most TOL (with
// --differ: more than TOL) and both hold the same step; used by tests/dist/dist_test.sh.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "core/train/Checkpoint.h"

int main(int argc, char** argv) {
    const bool differ = argc == 5 && std::string(argv[4]) == "--differ";
    if (argc != 4 && !differ) {
        std::fprintf(stderr, "usage: dist_compare CKPT_A CKPT_B TOL [--differ]\n");
        return 2;
    }
    try {
        const strata::ResumePoint a = strata::findResumePoint(argv[1], false);
        const strata::ResumePoint b = strata::findResumePoint(argv[2], false);
        const double tol = std::atof(argv[3]);
        double worst = 0;
        std::string where;
        for (const auto& [name, va] : a.checkpoint.weights) {
            const auto it = b.checkpoint.weights.find(name);
            if (it == b.checkpoint.weights.end() || it->second.size() != va.size()) {
                std::printf("tensor %s differs in presence or size\n", name.c_str());
                return 1;
            }
            for (size_t i = 0; i < va.size(); ++i) {
                const double d = std::fabs(static_cast<double>(va[i]) - static_cast<double>(it->second[i]));
                if (!(d <= worst)) {
                    worst = d;
                    where = name + "[" + std::to_string(i) + "]";
                }
            }
        }
        std::printf("%s (step %lld) vs %s (step %lld): max abs difference %.3g at %s over %zu tensors\n",
                    a.file.c_str(), static_cast<long long>(a.checkpoint.step), b.file.c_str(),
                    static_cast<long long>(b.checkpoint.step), worst, where.c_str(), a.checkpoint.weights.size());
        if (a.checkpoint.step != b.checkpoint.step) {
            std::printf("the steps differ\n");
            return 1;
        }
        if (a.checkpoint.weights.size() != b.checkpoint.weights.size()) return 1;
        return (differ ? worst > tol : worst <= tol) ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "dist_compare: %s\n", e.what());
        return 2;
    }
}
