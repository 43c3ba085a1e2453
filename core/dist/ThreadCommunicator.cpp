// ThreadCommunicator: the header says how the collectives meet.
#include "core/dist/ThreadCommunicator.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>

namespace strata {
namespace {

class Group {
public:
    using Clock = std::chrono::steady_clock;

    explicit Group(int size)
        : m_size(size), m_posted(static_cast<size_t>(size), nullptr), m_present(static_cast<size_t>(size), 0) {}

    int size() const { return m_size; }

    // Blocks until every rank arrived (or the group failed: CommAborted). A wait past the bound of `self`'s
    // communicator fails the group, naming the ranks that did not arrive.
    void barrier(int rank, const Communicator& self) {
        std::unique_lock lock(m_mutex);
        throwIfFailed();
        const uint64_t generation = m_generation;
        m_present[static_cast<size_t>(rank)] = 1;
        if (++m_arrived == m_size) {
            m_arrived = 0;
            std::fill(m_present.begin(), m_present.end(), 0);
            ++m_generation;
            m_cv.notify_all();
            return;
        }
        const Clock::time_point start = Clock::now();
        auto released = [&] { return m_generation != generation || m_failed; };
        while (!released()) {
            const double limit = self.timeout();
            if (!(limit > 0)) {
                m_cv.wait(lock, released);
                break;
            }
            // The clock restarts when a pause of any rank ends; while one lasts it does not run.
            const Clock::time_point from = std::max(start, pausedUntilLocked());
            const auto deadline =
                from + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limit));
            if (m_cv.wait_until(lock, deadline, released)) break;
            if (m_paused > 0 || pausedUntilLocked() > start) continue;
            std::string missing;
            for (int r = 0; r < m_size; ++r)
                if (!m_present[static_cast<size_t>(r)]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
            failLocked("rank " + std::to_string(rank) + " of " + std::to_string(m_size) + ": " +
                       self.timeoutMessage("rank " + missing));
        }
        if (m_generation == generation) throwIfFailed();
    }

    void setPaused(bool paused) {
        std::lock_guard lock(m_mutex);
        if (paused) {
            ++m_paused;
        } else if (m_paused > 0) {
            --m_paused;
            m_pauseEnd = Clock::now();
        }
    }

    Clock::time_point pausedUntil() {
        std::lock_guard lock(m_mutex);
        return pausedUntilLocked();
    }

    std::string failure() {
        std::lock_guard lock(m_mutex);
        return m_failed ? m_reason : std::string();
    }

    void fail(int rank, const std::string& reason) {
        std::lock_guard lock(m_mutex);
        failLocked("rank " + std::to_string(rank) + " of " + std::to_string(m_size) + " failed: " + reason);
    }

    // Sum over the ranks of `count` elements of type T, in place; Mean divides by the size.
    template <typename T>
    void allReduce(int rank, const Communicator& self, T* data, int64_t count, ReduceOp op) {
        if (m_size == 1 || count <= 0) {
            barrier(rank, self);  // the ranks still meet (a failed group throws)
            return;
        }
        post(rank, data);
        if (rank == 0) scratch<T>().resize(static_cast<size_t>(count));
        barrier(rank, self);
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
        barrier(rank, self);
        std::memcpy(data, out.data(), static_cast<size_t>(count) * sizeof(T));
        barrier(rank, self);
    }

    void broadcast(int rank, const Communicator& self, void* data, int64_t bytes, int root) {
        post(rank, data);
        barrier(rank, self);
        if (rank != root && bytes > 0)
            std::memcpy(data, m_posted[static_cast<size_t>(root)], static_cast<size_t>(bytes));
        barrier(rank, self);
    }

private:
    void throwIfFailed() const {
        if (m_failed) throw CommAborted(m_reason);
    }
    // `reason` whole ("rank 1 of 3 failed: bad file"); the first failure is the one every rank reports.
    void failLocked(const std::string& reason) {
        if (m_failed) return;
        m_failed = true;
        m_reason = reason;
        m_cv.notify_all();
    }
    Clock::time_point pausedUntilLocked() const { return m_paused > 0 ? Clock::now() : m_pauseEnd; }
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
    int m_paused = 0;              // ranks paused now (setPaused)
    Clock::time_point m_pauseEnd;  // when the last pause ended
    std::vector<void*> m_posted;
    std::vector<char> m_present;  // the ranks waiting in the barrier now
    std::vector<float> m_scratchF;
    std::vector<double> m_scratchD;
};

// Runs its all-reduce when waited for; see the header.
class DeferredRequest : public CommRequest {
public:
    DeferredRequest(std::shared_ptr<Group> group, const Communicator& self, int rank, float* data, int64_t count,
                    ReduceOp op)
        : m_group(std::move(group)), m_self(self), m_rank(rank), m_data(data), m_count(count), m_op(op) {}
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
        m_group->allReduce(m_rank, m_self, m_data, m_count, m_op);
    }

private:
    std::shared_ptr<Group> m_group;
    const Communicator& m_self;
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
    void allReduce(float* data, int64_t count, ReduceOp op) override {
        m_group->allReduce(m_rank, *this, data, count, op);
    }
    void allReduce(double* data, int64_t count, ReduceOp op) override {
        m_group->allReduce(m_rank, *this, data, count, op);
    }
    std::unique_ptr<CommRequest> iallReduce(float* data, int64_t count, ReduceOp op) override {
        return std::make_unique<DeferredRequest>(m_group, *this, m_rank, data, count, op);
    }
    void broadcast(void* data, int64_t bytes, int root) override {
        m_group->broadcast(m_rank, *this, data, bytes, root);
    }
    void barrier() override { m_group->barrier(m_rank, *this); }
    void setPaused(bool paused) override { m_group->setPaused(paused); }
    std::chrono::steady_clock::time_point pausedUntil() const override { return m_group->pausedUntil(); }
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
