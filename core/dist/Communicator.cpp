// The single-rank communicator and the helpers every communicator shares.
#include "core/dist/Communicator.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>
#include <vector>

#include <sched.h>

namespace strata {

void Communicator::broadcast(std::string& text, int root) {
    int64_t n = static_cast<int64_t>(text.size());
    broadcast(&n, sizeof n, root);
    text.resize(static_cast<size_t>(n));
    if (n > 0) broadcast(text.data(), n, root);
}

bool Communicator::allEqual(uint64_t value) {
    // Rank 0's value against each rank's own: one broadcast, then one all-reduce of the flags.
    uint64_t root = value;
    broadcast(&root, sizeof root, 0);
    double differs = root == value ? 0.0 : 1.0;
    allReduce(&differs, 1, ReduceOp::Sum);
    return differs == 0.0;
}

bool Communicator::pastDeadline(std::chrono::steady_clock::time_point since) const {
    const double limit = timeout();
    if (!(limit > 0)) return false;
    const auto now = std::chrono::steady_clock::now();
    const auto from = std::max(since, pausedUntil());
    return std::chrono::duration<double>(now - from).count() > limit;
}

std::string Communicator::timeoutMessage(const std::string& waitingFor) const {
    std::ostringstream s;
    const int64_t at = step();
    s << (at > 0 ? "step " + std::to_string(at) : std::string("at the start")) << ": " << m_watch->activity.load()
      << " waited longer than " << timeout() << " s for " << waitingFor
      << " (--collective-timeout): a rank stalled, died or left the run early; raise the bound if a rank is "
         "legitimately that slow (loading a large data set, writing a large checkpoint)";
    return s.str();
}

void waitForCollective(const Communicator& comm, const std::function<bool()>& done, const std::string& waitingFor) {
    using Clock = std::chrono::steady_clock;
    if (done()) return;
    const Clock::time_point start = Clock::now();
    // Most collectives complete within a millisecond of the last rank's arrival: test without pause (the
    // library progresses the operation only inside the test); longer waits give the core away.
    constexpr std::chrono::milliseconds kSpin{1}, kYield{1000};
    bool spinning = true;
    for (uint64_t n = 1;; ++n) {
        if (done()) return;
        if (spinning && (n & 63) != 0) continue;  // while spinning, the clock every 64 tests
        const auto waited = Clock::now() - start;
        if (comm.pastDeadline(start)) throw CollectiveTimeout(comm.timeoutMessage(waitingFor));
        if (waited < kSpin) continue;
        spinning = false;
        if (waited < kYield)
            sched_yield();
        else
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

uint64_t fnv1a64(const void* data, size_t bytes, uint64_t h) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < bytes; ++i) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

namespace {

class DoneRequest : public CommRequest {
public:
    bool test() override { return true; }
    void wait() override {}
};

class SingleRankCommunicator : public Communicator {
public:
    int rank() const override { return 0; }
    int size() const override { return 1; }
    std::string name() const override { return "single"; }
    void allReduce(float*, int64_t, ReduceOp) override {}
    void allReduce(double*, int64_t, ReduceOp) override {}
    std::unique_ptr<CommRequest> iallReduce(float*, int64_t, ReduceOp) override {
        return std::make_unique<DoneRequest>();
    }
    void broadcast(void*, int64_t, int) override {}
    void barrier() override {}
    [[noreturn]] void abortJob(const std::string& reason, int code) override {
        std::fprintf(stderr, "rank 0 of 1: %s\n", reason.c_str());
        std::fflush(stderr);
        std::_Exit(code);
    }
};

}  // namespace

std::unique_ptr<Communicator> makeSingleRankCommunicator() { return std::make_unique<SingleRankCommunicator>(); }

}  // namespace strata
