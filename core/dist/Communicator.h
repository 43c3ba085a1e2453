// Communicator: the seam between data-parallel training and the library that moves the bytes. A job is
// `size` processes (ranks) running the same program; each collective must be called by every rank, in the
// same order. Implementations: single rank (this file; size 1, nothing moves) and MPI (MpiCommunicator.h,
// Open MPI on host memory). The data-parallel Trainer is the user; nothing here knows about models.
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
    virtual std::string name() const = 0;  // "single", "mpi"

    // In place, over every rank's `count` values.
    virtual void allReduce(float* data, int64_t count, ReduceOp op = ReduceOp::Sum) = 0;
    virtual void allReduce(double* data, int64_t count, ReduceOp op = ReduceOp::Sum) = 0;
    virtual std::unique_ptr<CommRequest> iallReduce(float* data, int64_t count, ReduceOp op = ReduceOp::Sum) = 0;
    // Rank `root`'s bytes to every rank.
    virtual void broadcast(void* data, int64_t bytes, int root = 0) = 0;
    virtual void barrier() = 0;
    // Ends every process of the job: prints "rank R of N: reason" on stderr, then (MPI) MPI_Abort, which
    // makes the launcher kill the others. For a failure on one rank while the others may be blocked in a
    // collective: the only exit that cannot hang.
    [[noreturn]] virtual void abortJob(const std::string& reason, int code = 1) = 0;

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
