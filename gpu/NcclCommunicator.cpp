// NcclCommunicator: NCCL for a CUDA backend's memory, the host communicator for the rest (the header).
#include "gpu/NcclCommunicator.h"

#include <chrono>
#include <string>
#include <thread>
#include <type_traits>

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>

#include "core/backend/Backend.h"
#include "core/dist/DeviceCommunicator.h"
#include "core/dist/ThreadCommunicator.h"
#include "gpu/CudaBackend.h"
#include "gpu/CudaCheck.h"

namespace strata::gpu {
namespace {

// NCCL loaded with dlopen when first needed (the types come from nccl.h): a machine without NCCL still runs
// everything but data parallel on GPUs, which then says what is missing.
struct NcclApi {
    decltype(&ncclGetUniqueId) getUniqueId = nullptr;
    decltype(&ncclCommInitRank) commInitRank = nullptr;
    decltype(&ncclCommDestroy) commDestroy = nullptr;
    decltype(&ncclCommAbort) commAbort = nullptr;
    decltype(&ncclCommGetAsyncError) commGetAsyncError = nullptr;
    decltype(&ncclAllReduce) allReduce = nullptr;
    decltype(&ncclBroadcast) broadcast = nullptr;
    decltype(&ncclGetErrorString) getErrorString = nullptr;
    decltype(&ncclGetVersion) getVersion = nullptr;
    std::string unavailable;  // why not, or ""

    static const NcclApi& get() {
        static const NcclApi api = load();
        return api;
    }

private:
    static NcclApi load() {
        NcclApi a;
        void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            const char* err = dlerror();
            a.unavailable = std::string("NCCL not available (") + (err ? err : "libnccl.so.2 not found") + ")";
            return a;
        }
        auto bind = [&](auto& fn, const char* name) {
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
            if (!fn && a.unavailable.empty()) a.unavailable = std::string("NCCL not available (") + name + " missing)";
        };
        bind(a.getUniqueId, "ncclGetUniqueId");
        bind(a.commInitRank, "ncclCommInitRank");
        bind(a.commDestroy, "ncclCommDestroy");
        bind(a.commAbort, "ncclCommAbort");
        bind(a.commGetAsyncError, "ncclCommGetAsyncError");
        bind(a.allReduce, "ncclAllReduce");
        bind(a.broadcast, "ncclBroadcast");
        bind(a.getErrorString, "ncclGetErrorString");
        bind(a.getVersion, "ncclGetVersion");
        return a;  // the library stays loaded for the process
    }
};

const NcclApi& nccl() { return NcclApi::get(); }

#define NCCL_CHECK(call)                                                                                            \
    do {                                                                                                            \
        const ncclResult_t strataNccl_ = (call);                                                                    \
        if (strataNccl_ != ncclSuccess)                                                                             \
            ::strata::gpu::throwCudaFailure("NCCL", nccl().getErrorString(strataNccl_), #call, __FILE__, __LINE__); \
    } while (0)

bool isDeviceMemory(const void* p) {
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();  // plain host memory on old drivers: not an error to keep
        return false;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

class NcclCommunicator;

// An all-reduce queued on the communicator's stream; complete once its event is.
class NcclRequest : public CommRequest {
public:
    NcclRequest(NcclCommunicator& comm, cudaEvent_t done) : m_comm(comm), m_done(done) {}
    ~NcclRequest() override;
    bool test() override;
    void wait() override;

private:
    NcclCommunicator& m_comm;
    cudaEvent_t m_done;
    bool m_complete = false;
};

class NcclCommunicator : public Communicator {
public:
    NcclCommunicator(Communicator& host, CudaBackend& backend) : m_host(host), m_backend(backend) {
        shareWatch(host);  // one bound and one position (step, collective) for device and host values
        m_backend.activate();
        ncclUniqueId id{};
        if (host.rank() == 0) NCCL_CHECK(nccl().getUniqueId(&id));
        host.broadcast(&id, sizeof id, 0);
        NCCL_CHECK(nccl().commInitRank(&m_comm, host.size(), id, host.rank()));
        if (cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking) != cudaSuccess ||
            cudaEventCreateWithFlags(&m_computeMark, cudaEventDisableTiming) != cudaSuccess) {
            (void)nccl().commDestroy(m_comm);
            if (m_stream) (void)cudaStreamDestroy(m_stream);
            CUDA_CHECK(cudaGetLastError());
        }
    }
    ~NcclCommunicator() override {
        m_backend.activate();
        if (m_comm) (void)nccl().commDestroy(m_comm);
        if (m_computeMark) (void)cudaEventDestroy(m_computeMark);
        if (m_stream) (void)cudaStreamDestroy(m_stream);
    }

    int rank() const override { return m_host.rank(); }
    int size() const override { return m_host.size(); }
    std::string name() const override { return "nccl"; }
    bool acceptsDeviceMemory() const override { return true; }

    void allReduce(float* data, int64_t count, ReduceOp op) override {
        if (!isDeviceMemory(data)) return m_host.allReduce(data, count, op);
        waitFor(enqueueAllReduce(data, count, ncclFloat, op));
    }
    void allReduce(double* data, int64_t count, ReduceOp op) override {
        if (!isDeviceMemory(data)) return m_host.allReduce(data, count, op);
        waitFor(enqueueAllReduce(data, count, ncclDouble, op));
    }
    std::unique_ptr<CommRequest> iallReduce(float* data, int64_t count, ReduceOp op) override {
        if (!isDeviceMemory(data)) return m_host.iallReduce(data, count, op);
        return std::make_unique<NcclRequest>(*this, enqueueAllReduce(data, count, ncclFloat, op));
    }
    void broadcast(void* data, int64_t bytes, int root) override {
        if (!isDeviceMemory(data)) return m_host.broadcast(data, bytes, root);
        m_backend.activate();
        afterCompute();
        NCCL_CHECK(nccl().broadcast(data, data, static_cast<size_t>(bytes), ncclInt8, root, m_comm, m_stream));
        waitFor(record());
    }
    void barrier() override { m_host.barrier(); }
    void abortJob(const std::string& reason, int code) override {
        abortNccl();
        m_host.abortJob(reason, code);
    }
    std::string jobFailure() const override { return m_host.jobFailure(); }
    void setPaused(bool paused) override { m_host.setPaused(paused); }
    std::chrono::steady_clock::time_point pausedUntil() const override { return m_host.pausedUntil(); }

    // Until `done` completes; throws when the job failed elsewhere, NCCL reports an error or the wait runs past
    // the bound (a peer that never joins leaves NCCL's kernel spinning: it is aborted). Releases the event.
    void waitFor(cudaEvent_t done) {
        EventGuard guard{done};
        const auto start = std::chrono::steady_clock::now();
        while (true) {
            const cudaError_t st = cudaEventQuery(done);
            if (st == cudaSuccess) break;
            if (st != cudaErrorNotReady) CUDA_CHECK(st);
            checkHealth();
            if (pastDeadline(start)) {
                abortNccl();
                throw CollectiveTimeout(timeoutMessage("the other ranks' GPUs (NCCL)"));
            }
            std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
        // The compute stream's later work reads what NCCL wrote.
        CUDA_CHECK(cudaStreamWaitEvent(m_backend.computeStream(), done, 0));
    }
    bool poll(cudaEvent_t done) {
        const cudaError_t st = cudaEventQuery(done);
        if (st == cudaSuccess) return true;
        if (st != cudaErrorNotReady) CUDA_CHECK(st);
        checkHealth();
        return false;
    }

private:
    struct EventGuard {
        cudaEvent_t e;
        ~EventGuard() { (void)cudaEventDestroy(e); }
    };

    // The collective's stream waits for the compute work queued so far. One event serves every call: the wait
    // takes the event's state when it is queued, so recording it again later changes nothing for it.
    void afterCompute() {
        CUDA_CHECK(cudaEventRecord(m_computeMark, m_backend.computeStream()));
        CUDA_CHECK(cudaStreamWaitEvent(m_stream, m_computeMark, 0));
    }
    cudaEvent_t record() {
        cudaEvent_t done = nullptr;
        CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
        CUDA_CHECK(cudaEventRecord(done, m_stream));
        return done;
    }
    cudaEvent_t enqueueAllReduce(void* data, int64_t count, ncclDataType_t type, ReduceOp op) {
        if (!m_comm) throw CommAborted("NCCL: this rank's communicator was aborted");
        m_backend.activate();
        afterCompute();
        NCCL_CHECK(nccl().allReduce(data, data, static_cast<size_t>(count), type,
                                    op == ReduceOp::Mean ? ncclAvg : ncclSum, m_comm, m_stream));
        return record();
    }
    // A failure elsewhere in the job, or one NCCL found (a peer gone): abort this rank's NCCL and throw.
    void checkHealth() {
        const std::string failure = m_host.jobFailure();
        if (!failure.empty()) {
            abortNccl();
            throw CommAborted(failure);
        }
        ncclResult_t async = ncclSuccess;
        if (m_comm && nccl().commGetAsyncError(m_comm, &async) == ncclSuccess && async != ncclSuccess &&
            async != ncclInProgress) {
            const std::string what = nccl().getErrorString(async);
            abortNccl();
            throw BackendError("NCCL error on rank " + std::to_string(rank()) + " of " + std::to_string(size()) + ": " +
                               what);
        }
    }
    void abortNccl() {
        if (!m_comm) return;
        (void)nccl().commAbort(m_comm);
        m_comm = nullptr;
    }

    Communicator& m_host;
    CudaBackend& m_backend;
    ncclComm_t m_comm = nullptr;
    cudaStream_t m_stream = nullptr;
    cudaEvent_t m_computeMark = nullptr;  // afterCompute's
};

NcclRequest::~NcclRequest() {
    if (m_complete) return;
    try {
        wait();
    } catch (const std::exception&) {
        // Destroyed while unwinding: the first error is the one reported.
    }
}

bool NcclRequest::test() {
    if (!m_complete && m_comm.poll(m_done)) wait();
    return m_complete;
}

void NcclRequest::wait() {
    if (m_complete) return;
    m_complete = true;  // waitFor releases the event, also when it throws
    m_comm.waitFor(m_done);
}

}  // namespace

std::string ncclUnavailableReason() { return nccl().unavailable; }

std::unique_ptr<Communicator> makeNcclCommunicator(Communicator& host, CudaBackend& backend) {
    if (!nccl().unavailable.empty())
        throw BackendError(backend.device().toString() + ": data parallel on GPUs needs NCCL 2: " + nccl().unavailable +
                           " (the CUDA toolkit's libnccl.so.2, or the nvidia-nccl wheel PyTorch installs, on the "
                           "library path)");
    return std::make_unique<NcclCommunicator>(host, backend);
}

std::string ncclVersionText() {
    if (!nccl().unavailable.empty()) return nccl().unavailable;
    int v = 0;
    if (nccl().getVersion(&v) != ncclSuccess) return "unknown (ncclGetVersion failed)";
    return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." + std::to_string(v % 100);
}

void registerNcclCommunicator() {
    registerDeviceCommunicator(DeviceType::Cuda, [](Communicator& host, Backend& backend) {
        auto* cuda = dynamic_cast<CudaBackend*>(&backend);
        if (!cuda) throw BackendError(backend.device().toString() + ": not a CUDA backend, no NCCL communicator");
        return makeNcclCommunicator(host, *cuda);
    });
}

}  // namespace strata::gpu
