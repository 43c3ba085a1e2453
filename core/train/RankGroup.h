// RankGroup: this process's place in a data-parallel job and the host-side collectives the Trainer makes
// outside the step's gradient exchange: who it is (rank of size; rank 0 of 1 when it runs alone), which
// communicator collectives use (the host one, or a GPU rank's device communicator made over it), what each
// collective is for (named when a wait runs out), the per-step stop vote with every rank's newest telemetry
// riding on it, sums of host values, and the test hooks that make a rank fail or stall.
//
// How gradients and parameters are combined is the DataParallel strategy's (DataParallel.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/dist/Communicator.h"
#include "core/train/TrainingObserver.h"

namespace strata {

class Backend;

// Data parallel across processes: the newest telemetry sample of this rank's device, packed into a slot of the
// stop vote, so that rank 0 can report every rank's device as "<device> (rank R)". A slot is sent once per new
// sample; an empty slot (word 0 is 0) reports nothing. It forwards every sample to the run's observer.
class TelemetryTap : public TrainingObserver {
public:
    static constexpr size_t kWords = 9;

    void forwardTo(TrainingObserver* to) { m_to = to; }
    void onTelemetry(const TelemetryEvent& e) override;
    void pack(double* slot);
    static void report(const double* slot, int rank, TrainingObserver& to);

private:
    std::mutex m_mutex;
    TelemetryEvent m_latest;
    bool m_fresh = false;
    TrainingObserver* m_to = nullptr;
};

class RankGroup {
public:
    // communicator null: a run of one process. Data parallel when the job has more than one rank, or
    // withOneRank (TrainerOptions::dataParallelWithOneRank). Collectives wait at most timeoutSeconds.
    RankGroup(Communicator* communicator, bool withOneRank, double timeoutSeconds);
    ~RankGroup();
    RankGroup(const RankGroup&) = delete;
    RankGroup& operator=(const RankGroup&) = delete;

    bool dataParallel() const { return m_dp; }
    int rank() const { return m_rank; }
    int size() const { return m_size; }
    // The communicator collectives use; data parallel only.
    Communicator& comm() { return *m_comm; }

    // What the next collectives are for, and the step, for the message of a wait that runs out; on the host
    // communicator too when a device communicator sends host values through it.
    void at(const char* what);
    void atStep(int64_t step);

    // A GPU rank sums its gradients where they live: NCCL over the host communicator (gpu/), made by every
    // rank at the same point.
    void useDeviceCommunicator(Backend& backend);

    // Data parallel: values summed over the ranks, for `what` (nothing to do in a run of one process).
    void sum(double* values, int64_t count, const char* what);
    // Data parallel: the ranks whose `value` differs from rank 0's (every rank gets the list).
    std::vector<int> ranksDiffering(uint64_t value);

    // Whether the run stops here: a request on this process, or data parallel on any rank (which then sets
    // stopRequested here too). An all-reduce, called at the same points on every rank, so that every rank
    // takes the same branch. With gatherTelemetry every rank's newest device sample (telemetryTap) rides on the
    // same all-reduce, each rank in its own slot, and rank 0 reports the others' samples to `observer`.
    bool agreeOnStop(std::atomic<bool>& stopRequested, bool gatherTelemetry, TrainingObserver& observer);
    TelemetryTap& telemetryTap() { return m_telemetryTap; }

    // Data parallel, while this rank is paused the others' waits for it do not time out.
    void setPaused(bool paused);
    // Ends every rank of the job (data parallel) after an error on this one.
    void abortJob(const std::string& message);

    // Test hooks (tests/dist): STRATA_TEST_FAIL_STEP=N makes rank STRATA_TEST_FAIL_RANK (default 0) throw at
    // the start of step N, as a failing rank would; STRATA_TEST_STALL_STEP=N makes data-parallel rank
    // STRATA_TEST_STALL_RANK (default 1) stop there, as a hung rank would, until the job fails (or two minutes
    // pass). `step` is 1-based.
    void injectTestFaults(int64_t step);

private:
    Communicator* m_host = nullptr;              // TrainerOptions::communicator
    Communicator* m_comm = nullptr;              // m_host, or m_deviceComm once made
    std::unique_ptr<Communicator> m_deviceComm;  // a GPU rank's (NCCL over m_host)
    bool m_dp = false;
    int m_rank = 0, m_size = 1;
    double m_timeout = 0;
    TelemetryTap m_telemetryTap;
    std::vector<double> m_stopVote;  // agreeOnStop's buffer, kept between steps
    int64_t m_failStep = 0, m_failRank = 0, m_stallStep = 0, m_stallRank = 1;
};

}  // namespace strata
