// The single-rank communicator and the helpers every communicator shares.
#include "core/dist/Communicator.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

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
