// GradientBuckets: the data-parallel gradient all-reduce of one Model, in buckets that start while backward
// is still running.
//
// The model packs every trainable gradient into one block, in topological order; backward runs in reverse,
// so the finished gradients always form a suffix of the block (Model::GradientsReadyHook). The block is cut
// into buckets of about `bucketBytes` at parameter boundaries, from the end: bucket 0 is the last layers'
// gradients, the first to be finished. A bucket's non-blocking sum (Communicator::iallReduce) starts as soon
// as the finished suffix covers it; between layers the outstanding ones are tested, which is where Open MPI
// progresses them; finish() waits for what is left. Every rank cuts the same buckets and starts them in the
// same order, as MPI requires.
//
// The sum is the global gradient because the step scales each rank's loss gradient by its share of the
// global batch (DataParallel::lossShare, local count / global count): one process on the global batch gets the
// same numbers.
//
// Times per step: the communication window (from the first bucket's start to the moment the last one was
// seen complete: between layers, or in finish), the part of it spent waiting in finish (not hidden behind
// backward), and hidden = 1 - exposed / window.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/dist/Communicator.h"
#include "core/tensor/Tensor.h"

namespace strata {

class Backend;
class Model;

class GradientBuckets {
public:
    // The model's gradient block is in host memory (a CPU backend), or in a GPU's when the communicator takes
    // device memory (NCCL). bucketBytes >= 1.
    GradientBuckets(Communicator& comm, Model& model, int64_t bucketBytes);
    ~GradientBuckets();
    GradientBuckets(const GradientBuckets&) = delete;
    GradientBuckets& operator=(const GradientBuckets&) = delete;

    int bucketCount() const { return static_cast<int>(m_buckets.size()); }
    // Bucket i covers packed elements [first, second).
    std::pair<int64_t, int64_t> bucketRange(int i) const;

    void beginStep();
    // The model's GradientsReadyHook: every gradient from `from` on is final.
    void ready(int64_t from);
    // Starts any bucket not started yet and waits for all of them.
    void finish();

    struct StepTimes {
        double windowSeconds = 0;   // first start to last completion seen
        double exposedSeconds = 0;  // waited in finish
        double hiddenFraction() const {
            return windowSeconds > 0 ? std::max(0.0, 1.0 - exposedSeconds / windowSeconds) : 1.0;
        }
    };
    const StepTimes& lastStep() const { return m_last; }

private:
    using Clock = std::chrono::steady_clock;
    struct Bucket {
        int64_t lo = 0, hi = 0;
        std::unique_ptr<CommRequest> request;
        bool complete = false;
    };
    void start(Bucket& b);
    void testOutstanding();

    Communicator& m_comm;
    float* m_grads = nullptr;
    std::vector<Bucket> m_buckets;  // from the end of the block down
    size_t m_next = 0;              // the next bucket to start
    Clock::time_point m_firstStart, m_lastDone;
    StepTimes m_last;
};

// AsyncGradients: the `async` data-parallel mode. Step k's local gradients are summed over the ranks while
// step k+1 computes, and step k+1 applies them: staleness of exactly one step, and no rank waits for the
// all-reduce unless it is slower than a whole step.
//
// exchange() is called after each backward pass with the model's gradient block holding this step's local
// gradients. It swaps them into its own buffer and starts that buffer's non-blocking sum; in return the block
// receives the previous step's summed gradients (waited for, usually long complete), or nothing on the first
// step. drain() completes the last sum into the block at the end of an epoch or run, so every gradient
// computed is applied exactly once and checkpoints never miss one. progress() (the model's
// GradientsReadyHook, between layers) lets Open MPI move the bytes, which it does only inside MPI calls.
// Every rank swaps the same block and applies the same sums, so the replicas' parameters stay equal.
class AsyncGradients {
public:
    // As GradientBuckets; on a GPU the buffer in flight is in the device's memory too.
    AsyncGradients(Communicator& comm, Model& model);
    ~AsyncGradients();
    AsyncGradients(const AsyncGradients&) = delete;
    AsyncGradients& operator=(const AsyncGradients&) = delete;

    // True when the block now holds the previous step's summed gradients, to be applied with the learning
    // rate given with them (previousLearningRate()); false on the first step after a drain (nothing to apply).
    bool exchange(double learningRate);
    bool drain();
    void progress();
    bool pending() const { return m_request != nullptr; }
    double previousLearningRate() const { return m_previousLr; }

    // The last exchange's all-reduce: from its start to the moment it was seen complete, and the time the
    // step waited for it (nonzero only when a step was faster than the communication).
    const GradientBuckets::StepTimes& lastStep() const { return m_last; }

private:
    using Clock = std::chrono::steady_clock;
    void complete();

    void copy(float* dst, const float* src);  // m_count floats, in the backend's memory

    Communicator& m_comm;
    Backend& m_backend;
    float* m_grads = nullptr;
    int64_t m_count = 0;
    float* m_buffer = nullptr;            // the sum in flight: m_hostBuffer's, or m_deviceBuffer's
    std::vector<float> m_hostBuffer;      // CPU
    Tensor m_deviceBuffer, m_deviceSwap;  // GPU
    std::unique_ptr<CommRequest> m_request;
    double m_lr = 0, m_previousLr = 0;
    Clock::time_point m_start, m_done;
    bool m_seenDone = false;
    GradientBuckets::StepTimes m_last;
};

}  // namespace strata
