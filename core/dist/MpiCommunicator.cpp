// MpiCommunicator over Open MPI's C API (libopenmpi-dev). Built when STRATA_MPI is on; otherwise
// makeMpiCommunicator says so.
//
// Every collective is the non-blocking one, completed by testing it (waitForCollective), so that a wait for a
// rank that never comes ends at the communicator's bound instead of in MPI_Wait forever.
#include "core/dist/MpiCommunicator.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef STRATA_HAVE_MPI
#include <mpi.h>
#endif

namespace strata {

bool launchedByMpi() {
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK"})
        if (std::getenv(v)) return true;
    return false;
}

#ifndef STRATA_HAVE_MPI

bool mpiBuilt() { return false; }

std::unique_ptr<Communicator> makeMpiCommunicator() {
    throw std::runtime_error("this build has no MPI support (configure with -DSTRATA_MPI=ON and libopenmpi-dev)");
}

#else

bool mpiBuilt() { return true; }

namespace {

void check(int rc, const char* what) {
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING] = {};
    int len = 0;
    MPI_Error_string(rc, text, &len);
    throw std::runtime_error(std::string("MPI ") + what + ": " + text);
}

// MPI counts are int: larger ranges go in pieces.
constexpr int64_t kMaxCount = std::numeric_limits<int>::max();

MPI_Op opOf(ReduceOp) { return MPI_SUM; }  // Mean is a sum, then scaled

constexpr const char* kOthers = "the other ranks";

// Until `request` completes, within comm's bound.
void complete(const Communicator& comm, MPI_Request& request, const char* what) {
    waitForCollective(
        comm,
        [&] {
            int flag = 0;
            check(MPI_Test(&request, &flag, MPI_STATUS_IGNORE), what);
            return flag != 0;
        },
        kOthers);
}

class MpiRequest : public CommRequest {
public:
    MpiRequest(const Communicator& comm, float* data, int64_t count, float scale)
        : m_comm(comm), m_data(data), m_count(count), m_scale(scale) {}
    ~MpiRequest() override {
        try {
            wait();
        } catch (const std::exception&) {
            // Destroyed while unwinding: the first error is the one reported.
        }
    }
    bool test() override {
        if (m_done) return true;
        int flag = 0;
        check(MPI_Test(&m_request, &flag, MPI_STATUS_IGNORE), "MPI_Test");
        if (flag) finish();
        return m_done;
    }
    void wait() override {
        if (m_done) return;
        complete(m_comm, m_request, "MPI_Test");
        finish();
    }
    MPI_Request m_request = MPI_REQUEST_NULL;

private:
    void finish() {
        m_done = true;
        if (m_scale != 1.0f)
            for (int64_t i = 0; i < m_count; ++i) m_data[i] *= m_scale;
    }
    const Communicator& m_comm;
    float* m_data;
    int64_t m_count;
    float m_scale;
    bool m_done = false;
};

// Several pieces of one large non-blocking all-reduce.
class MultiRequest : public CommRequest {
public:
    std::vector<std::unique_ptr<CommRequest> > parts;
    bool test() override {
        bool all = true;
        for (auto& p : parts) all = p->test() && all;
        return all;
    }
    void wait() override {
        for (auto& p : parts) p->wait();
    }
};

int g_users = 0;  // live communicators; the last one finalizes MPI

class MpiCommunicator : public Communicator {
public:
    MpiCommunicator() {
        int initialized = 0;
        MPI_Initialized(&initialized);
        if (!initialized) {
            int provided = 0;
            check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
            if (provided < MPI_THREAD_SERIALIZED)
                throw std::runtime_error("MPI provides thread level " + std::to_string(provided) +
                                         ", below MPI_THREAD_SERIALIZED");
            m_owns = true;
        }
        // Errors come back as codes (check() makes them exceptions) rather than aborting inside MPI.
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_rank(MPI_COMM_WORLD, &m_rank);
        MPI_Comm_size(MPI_COMM_WORLD, &m_size);
        ++g_users;
    }
    ~MpiCommunicator() override {
        if (--g_users == 0 && m_owns) {
            int finalized = 0;
            MPI_Finalized(&finalized);
            if (!finalized) MPI_Finalize();
        }
    }
    int rank() const override { return m_rank; }
    int size() const override { return m_size; }
    std::string name() const override { return "mpi"; }

    void allReduce(float* data, int64_t count, ReduceOp op) override {
        for (int64_t at = 0; at < count; at += kMaxCount) {
            const int n = static_cast<int>(std::min(kMaxCount, count - at));
            MPI_Request r = MPI_REQUEST_NULL;
            check(MPI_Iallreduce(MPI_IN_PLACE, data + at, n, MPI_FLOAT, opOf(op), MPI_COMM_WORLD, &r),
                  "MPI_Iallreduce");
            complete(*this, r, "MPI_Iallreduce");
        }
        if (op == ReduceOp::Mean)
            for (int64_t i = 0; i < count; ++i) data[i] /= static_cast<float>(m_size);
    }
    void allReduce(double* data, int64_t count, ReduceOp op) override {
        for (int64_t at = 0; at < count; at += kMaxCount) {
            const int n = static_cast<int>(std::min(kMaxCount, count - at));
            MPI_Request r = MPI_REQUEST_NULL;
            check(MPI_Iallreduce(MPI_IN_PLACE, data + at, n, MPI_DOUBLE, opOf(op), MPI_COMM_WORLD, &r),
                  "MPI_Iallreduce");
            complete(*this, r, "MPI_Iallreduce");
        }
        if (op == ReduceOp::Mean)
            for (int64_t i = 0; i < count; ++i) data[i] /= m_size;
    }
    std::unique_ptr<CommRequest> iallReduce(float* data, int64_t count, ReduceOp op) override {
        const float scale = op == ReduceOp::Mean ? 1.0f / static_cast<float>(m_size) : 1.0f;
        auto multi = std::make_unique<MultiRequest>();
        for (int64_t at = 0; at < count; at += kMaxCount) {
            const int n = static_cast<int>(std::min(kMaxCount, count - at));
            auto r = std::make_unique<MpiRequest>(*this, data + at, n, scale);
            check(MPI_Iallreduce(MPI_IN_PLACE, data + at, n, MPI_FLOAT, opOf(op), MPI_COMM_WORLD, &r->m_request),
                  "MPI_Iallreduce");
            multi->parts.push_back(std::move(r));
        }
        if (multi->parts.size() == 1) return std::move(multi->parts.front());
        return multi;
    }
    void broadcast(void* data, int64_t bytes, int root) override {
        auto* p = static_cast<char*>(data);
        for (int64_t at = 0; at < bytes; at += kMaxCount) {
            const int n = static_cast<int>(std::min(kMaxCount, bytes - at));
            MPI_Request r = MPI_REQUEST_NULL;
            check(MPI_Ibcast(p + at, n, MPI_BYTE, root, MPI_COMM_WORLD, &r), "MPI_Ibcast");
            complete(*this, r, "MPI_Ibcast");
        }
    }
    void barrier() override {
        MPI_Request r = MPI_REQUEST_NULL;
        check(MPI_Ibarrier(MPI_COMM_WORLD, &r), "MPI_Ibarrier");
        complete(*this, r, "MPI_Ibarrier");
    }
    [[noreturn]] void abortJob(const std::string& reason, int code) override {
        std::fprintf(stderr, "rank %d of %d: %s\n", m_rank, m_size, reason.c_str());
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, code);
        std::_Exit(code);  // MPI_Abort does not return; this is for the compiler
    }

private:
    int m_rank = 0, m_size = 1;
    bool m_owns = false;
};

}  // namespace

std::unique_ptr<Communicator> makeMpiCommunicator() { return std::make_unique<MpiCommunicator>(); }

#endif

}  // namespace strata
