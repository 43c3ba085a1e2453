// Communicator: the seam between data-parallel training and the library that moves the bytes. A job is
// `size` processes (ranks) running the same program; each collective must be called by every rank, in the
// same order. Implementations: single rank (this file; size 1, nothing moves), MPI (MpiCommunicator.h, Open
// MPI on host memory), threads of one process (ThreadCommunicator.h, host memory) and NCCL (gpu/, device
// memory, over one of the others for host values). The data-parallel Trainer is the user; nothing here
// knows about models.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace strata {

enum class ReduceOp { Sum, Mean };

// A non-blocking collective in flight. Its buffer must not be touched until wait() returned (or test()
// returned true). Destroying a handle that was never completed waits for it.
class CommRequest {
public:
    virtual ~CommRequest() = default;
    virtual bool test() = 0;  // true once complete; lets the library progress the operation
    virtual void wait() = 0;
};

class Communicator {
public:
    virtual ~Communicator() = default;
    virtual int rank() const = 0;
    virtual int size() const = 0;
    virtual std::string name() const = 0;  // "single", "mpi", "threads", "nccl"
    // Whether the collectives also take device memory of the backend this communicator was made for (NCCL:
    // the gradient block of a CUDA backend). Host memory is always accepted.
    virtual bool acceptsDeviceMemory() const { return false; }

    // In place, over every rank's `count` values.
    virtual void allReduce(float* data, int64_t count, ReduceOp op = ReduceOp::Sum) = 0;
    virtual void allReduce(double* data, int64_t count, ReduceOp op = ReduceOp::Sum) = 0;
    virtual std::unique_ptr<CommRequest> iallReduce(float* data, int64_t count, ReduceOp op = ReduceOp::Sum) = 0;
    // Rank `root`'s bytes to every rank.
    virtual void broadcast(void* data, int64_t bytes, int root = 0) = 0;
    virtual void barrier() = 0;
    // Ends every rank of the job, for a failure on one rank while the others may be blocked in a collective.
    // Processes (single, MPI): prints "rank R of N: reason" on stderr, then MPI_Abort, which makes the
    // launcher kill the others; does not return. Threads of one process (ThreadCommunicator, and NCCL over
    // it): marks the group failed, so every rank's pending and later collectives throw CommAborted naming
    // this rank and reason, and returns; each thread then ends its run.
    virtual void abortJob(const std::string& reason, int code = 1) = 0;
    // Once a rank of a job of threads has called abortJob: "rank R of N failed: reason", for a rank that waits
    // on work outside this communicator (a GPU's NCCL kernels) to stop waiting. Empty otherwise, and always
    // for processes (their abort ends them).
    virtual std::string jobFailure() const { return {}; }

    // Rank `root`'s string to every rank (its length first).
    void broadcast(std::string& text, int root = 0);
    // Whether every rank holds the same 64-bit value (a hash of its project, its data set).
    bool allEqual(uint64_t value);
};

// Size 1: collectives return at once (a mean of one value is that value).
std::unique_ptr<Communicator> makeSingleRankCommunicator();

// FNV-1a, for the cross-rank consistency checks (allEqual): not a cryptographic hash.
uint64_t fnv1a64(const void* data, size_t bytes, uint64_t h = 0xcbf29ce484222325ull);

}  // namespace strata
