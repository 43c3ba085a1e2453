// ThreadCommunicator: the header says how the collectives meet.
#include "core/dist/ThreadCommunicator.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>

namespace strata {
namespace {

class Group {
public:
    explicit Group(int size) : m_size(size), m_posted(static_cast<size_t>(size), nullptr) {}

    int size() const { return m_size; }

    // Blocks until every rank arrived (or the group failed: CommAborted).
    void barrier() {
        std::unique_lock lock(m_mutex);
        throwIfFailed();
        const uint64_t generation = m_generation;
        if (++m_arrived == m_size) {
            m_arrived = 0;
            ++m_generation;
            m_cv.notify_all();
            return;
        }
        m_cv.wait(lock, [&] { return m_generation != generation || m_failed; });
        if (m_generation == generation) throwIfFailed();
    }

    std::string failure() {
        std::lock_guard lock(m_mutex);
        return m_failed ? m_reason : std::string();
    }

    void fail(int rank, const std::string& reason) {
        std::lock_guard lock(m_mutex);
        if (m_failed) return;  // the first failure is the one every rank reports
        m_failed = true;
        m_reason = "rank " + std::to_string(rank) + " of " + std::to_string(m_size) + " failed: " + reason;
        m_cv.notify_all();
    }

    // Sum over the ranks of `count` elements of type T, in place; Mean divides by the size.
    template <typename T>
    void allReduce(int rank, T* data, int64_t count, ReduceOp op) {
        if (m_size == 1 || count <= 0) {
            barrier();  // the ranks still meet (a failed group throws)
            return;
        }
        post(rank, data);
        if (rank == 0) scratch<T>().resize(static_cast<size_t>(count));
        barrier();
        // Each rank sums its own slice over every rank's buffer, in rank order.
        const int64_t per = (count + m_size - 1) / m_size;
        const int64_t lo = std::min(count, per * rank), hi = std::min(count, lo + per);
        std::vector<T>& out = scratch<T>();
        const T scale = op == ReduceOp::Mean ? T(1) / static_cast<T>(m_size) : T(1);
        for (int64_t i = lo; i < hi; ++i) {
            T s = static_cast<const T*>(m_posted[0])[i];
            for (int r = 1; r < m_size; ++r) s += static_cast<const T*>(m_posted[static_cast<size_t>(r)])[i];
            out[static_cast<size_t>(i)] = op == ReduceOp::Mean ? s * scale : s;
        }
        barrier();
        std::memcpy(data, out.data(), static_cast<size_t>(count) * sizeof(T));
        barrier();
    }

    void broadcast(int rank, void* data, int64_t bytes, int root) {
        post(rank, data);
        barrier();
        if (rank != root && bytes > 0)
            std::memcpy(data, m_posted[static_cast<size_t>(root)], static_cast<size_t>(bytes));
        barrier();
    }

private:
    void throwIfFailed() const {
        if (m_failed) throw CommAborted(m_reason);
    }
    void post(int rank, void* data) {
        std::lock_guard lock(m_mutex);
        m_posted[static_cast<size_t>(rank)] = data;
    }
    template <typename T>
    std::vector<T>& scratch() {
        if constexpr (std::is_same_v<T, float>)
            return m_scratchF;
        else
            return m_scratchD;
    }

    const int m_size;
    std::mutex m_mutex;
    std::condition_variable m_cv;
    int m_arrived = 0;
    uint64_t m_generation = 0;
    bool m_failed = false;
    std::string m_reason;
    std::vector<void*> m_posted;
    std::vector<float> m_scratchF;
    std::vector<double> m_scratchD;
};

// Runs its all-reduce when waited for; see the header.
class DeferredRequest : public CommRequest {
public:
    DeferredRequest(std::shared_ptr<Group> group, int rank, float* data, int64_t count, ReduceOp op)
        : m_group(std::move(group)), m_rank(rank), m_data(data), m_count(count), m_op(op) {}
    ~DeferredRequest() override {
        try {
            wait();
        } catch (const std::exception&) {
            // Destroyed while unwinding: the first error is the one reported.
        }
    }
    bool test() override { return m_done; }
    void wait() override {
        if (m_done) return;
        m_done = true;
        m_group->allReduce(m_rank, m_data, m_count, m_op);
    }

private:
    std::shared_ptr<Group> m_group;
    int m_rank;
    float* m_data;
    int64_t m_count;
    ReduceOp m_op;
    bool m_done = false;
};

class ThreadCommunicator : public Communicator {
public:
    ThreadCommunicator(std::shared_ptr<Group> group, int rank) : m_group(std::move(group)), m_rank(rank) {}
    int rank() const override { return m_rank; }
    int size() const override { return m_group->size(); }
    std::string name() const override { return "threads"; }
    void allReduce(float* data, int64_t count, ReduceOp op) override { m_group->allReduce(m_rank, data, count, op); }
    void allReduce(double* data, int64_t count, ReduceOp op) override { m_group->allReduce(m_rank, data, count, op); }
    std::unique_ptr<CommRequest> iallReduce(float* data, int64_t count, ReduceOp op) override {
        return std::make_unique<DeferredRequest>(m_group, m_rank, data, count, op);
    }
    void broadcast(void* data, int64_t bytes, int root) override { m_group->broadcast(m_rank, data, bytes, root); }
    void barrier() override { m_group->barrier(); }
    void abortJob(const std::string& reason, int) override { m_group->fail(m_rank, reason); }
    std::string jobFailure() const override { return m_group->failure(); }

private:
    std::shared_ptr<Group> m_group;
    int m_rank;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> makeThreadCommunicators(int size) {
    if (size < 1) throw std::invalid_argument("a thread group needs at least one rank");
    auto group = std::make_shared<Group>(size);
    std::vector<std::unique_ptr<Communicator>> out;
    for (int r = 0; r < size; ++r) out.push_back(std::make_unique<ThreadCommunicator>(group, r));
    return out;
}

}  // namespace strata
