// Communicator: the seam between data-parallel training and the library that moves the bytes. A job is
// `size` processes (ranks) running the same program; each collective must be called by every rank, in the
// same order. Implementations: single rank (this file; size 1, nothing moves), MPI (MpiCommunicator.h, Open
// MPI on host memory), threads of one process (ThreadCommunicator.h, host memory) and NCCL (gpu/, device
// memory, over one of the others for host values). The data-parallel Trainer is the user; nothing here
// knows about models.
//
// Waits: a rank waits in a collective for the others at most timeout() seconds (setTimeout; 0: forever). Past
// that it gives up: processes throw CollectiveTimeout, whose message names the step and the collective
// (setStep, setActivity), and the caller ends the job (abortJob); a job of threads fails the group, so every
// rank stops. A pause of a rank of a job of threads (setPaused) stops every rank's clock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

namespace strata {

enum class ReduceOp { Sum, Mean };

// A wait in a collective that ran past the communicator's timeout; the message names the step and the
// collective ("step 5: BatchNorm's global sums waited longer than 2 s ...").
struct CollectiveTimeout : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// The default bound on a wait in a collective (TrainerOptions::collectiveTimeoutSeconds).
constexpr double kDefaultCollectiveTimeoutSeconds = 600;

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

    // The bound on one wait in a collective, in seconds; 0 waits forever. Applies to the waits that start after
    // the call.
    void setTimeout(double seconds) { m_watch->timeoutSeconds = seconds; }
    double timeout() const { return m_watch->timeoutSeconds; }
    // Where this rank is, for the message of a wait that ran out: the step it is in (0: setting up) and what
    // the collective is for ("the stop vote": a string literal, kept by pointer; cheap enough to set before
    // every collective).
    void setStep(int64_t step) { m_watch->step = step; }
    void setActivity(const char* what) { m_watch->activity = what; }
    int64_t step() const { return m_watch->step; }
    // A rank that waits while paused (Trainer::requestPause): in a job of threads, no rank's wait times out
    // while any rank is paused, and the clock restarts when the pause ends. Processes: nothing (a process
    // cannot tell the others).
    virtual void setPaused(bool) {}
    // The moment from which a wait's clock counts at the earliest: the end of the job's last pause (now, while
    // one lasts). The epoch when there was none.
    virtual std::chrono::steady_clock::time_point pausedUntil() const { return {}; }
    // For a communicator over another (NCCL over MPI or threads): one bound and one position for both.
    void shareWatch(const Communicator& host) { m_watch = host.m_watch; }

    // Whether a wait that began at `since` has run past the bound (pauses excluded).
    bool pastDeadline(std::chrono::steady_clock::time_point since) const;
    // The message of a wait that ran out: "step 5: the gradient all-reduce waited longer than 2 s for
    // <waitingFor> (--collective-timeout): ...".
    std::string timeoutMessage(const std::string& waitingFor) const;

private:
    struct Watch {
        std::atomic<double> timeoutSeconds{kDefaultCollectiveTimeoutSeconds};
        std::atomic<int64_t> step{0};
        std::atomic<const char*> activity{"a collective"};
    };
    std::shared_ptr<Watch> m_watch = std::make_shared<Watch>();
};

// Waits until `done()` is true, for a collective that makes progress only while it is tested (MPI): tests
// without pause for a millisecond, then yields the core between tests up to a second (another rank's process
// may need it), then sleeps a millisecond between tests, so that a rank waiting long for a stalled peer takes
// no core. Throws CollectiveTimeout (comm.timeoutMessage(waitingFor)) past comm's bound.
void waitForCollective(const Communicator& comm, const std::function<bool()>& done, const std::string& waitingFor);

// Size 1: collectives return at once (a mean of one value is that value).
std::unique_ptr<Communicator> makeSingleRankCommunicator();

// FNV-1a, for the cross-rank consistency checks (allEqual): not a cryptographic hash.
uint64_t fnv1a64(const void* data, size_t bytes, uint64_t h = 0xcbf29ce484222325ull);

}  // namespace strata
