// The gradient all-reduce on its own: MPI all-reduce (sum, float) of 1 KiB to 64 MiB between the ranks of an
// mpirun job, through the same Communicator the data-parallel Trainer uses, against a memcpy of the same size
// on one rank. Bus bandwidth as nccl-tests defines it: algbw = bytes / time, busbw = algbw x 2 (n - 1) / n
// (the bytes each rank must move in a ring, so figures compare across rank counts). A benchmark, not a test.
//   mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 build/bin/bench_allreduce [ITERS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <vector>

#include "core/dist/MpiCommunicator.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

}  // namespace

int main(int argc, char** argv) {
    const int iters = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
    try {
        if (!strata::launchedByMpi()) {
            std::fprintf(stderr, "bench_allreduce: start it with mpirun -np N (N >= 2)\n");
            return 2;
        }
        auto comm = strata::makeMpiCommunicator();
        const int n = comm->size(), rank = comm->rank();
        if (rank == 0) {
            std::printf("all-reduce (sum, float32) over %d ranks (%s), %d iterations per size after 2 warm-up\n", n,
                        comm->name().c_str(), iters);
            std::printf(
                "| size | all-reduce us | algbw GB/s | busbw GB/s | memcpy us | memcpy GB/s | non-blocking us |\n");
            std::printf("| --- | --- | --- | --- | --- | --- | --- |\n");
        }
        for (size_t bytes = 1024; bytes <= (size_t(64) << 20); bytes *= 4) {
            const auto count = static_cast<int64_t>(bytes / sizeof(float));
            std::vector<float> data(static_cast<size_t>(count), 1.0f), copy(static_cast<size_t>(count));
            for (int w = 0; w < 2; ++w) comm->allReduce(data.data(), count);
            comm->barrier();
            auto t0 = Clock::now();
            for (int i = 0; i < iters; ++i) comm->allReduce(data.data(), count);
            auto t1 = Clock::now();
            const double reduce = seconds(t0, t1) / iters;
            // The path the Trainer takes: MPI_Iallreduce, then wait.
            comm->barrier();
            t0 = Clock::now();
            for (int i = 0; i < iters; ++i) comm->iallReduce(data.data(), count)->wait();
            t1 = Clock::now();
            const double nonBlocking = seconds(t0, t1) / iters;
            // Each value is multiplied by n per all-reduce: anything but growth means no sum happened.
            if (!(data[0] > 1.0f)) throw std::runtime_error("the all-reduce did not sum");
            std::memcpy(copy.data(), data.data(), bytes);
            t0 = Clock::now();
            for (int i = 0; i < iters; ++i) {
                std::memcpy(copy.data(), data.data(), bytes);
                data[static_cast<size_t>(i) % data.size()] = copy[0];  // keeps the copies from being merged
            }
            t1 = Clock::now();
            const double memcpyTime = seconds(t0, t1) / iters;
            // The ranks' mean time (they leave each collective within microseconds of each other).
            double times[2] = {reduce, nonBlocking};
            comm->allReduce(times, 2, strata::ReduceOp::Mean);
            const double r = times[0], nb = times[1];
            if (rank == 0) {
                const double alg = double(bytes) / r / 1e9;
                const double bus = alg * 2.0 * (n - 1) / n;
                char size[32];
                if (bytes >= (size_t(1) << 20))
                    std::snprintf(size, sizeof size, "%zu MiB", bytes >> 20);
                else
                    std::snprintf(size, sizeof size, "%zu KiB", bytes >> 10);
                std::printf("| %s | %.1f | %.2f | %.2f | %.1f | %.2f | %.1f |\n", size, r * 1e6, alg, bus,
                            memcpyTime * 1e6, double(bytes) / memcpyTime / 1e9, nb * 1e6);
            }
        }
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_allreduce: %s\n", e.what());
        return 1;
    }
}
