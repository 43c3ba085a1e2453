// RankGroup: see RankGroup.h.
#include "core/train/RankGroup.h"

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include "core/backend/Backend.h"
#include "core/dist/DeviceCommunicator.h"

namespace strata {

namespace {

int64_t envInt(const char* name, int64_t otherwise) {
    const char* v = std::getenv(name);
    return v && *v ? std::atoll(v) : otherwise;
}

}  // namespace

void TelemetryTap::onTelemetry(const TelemetryEvent& e) {
    {
        std::lock_guard lock(m_mutex);
        m_latest = e;
        m_fresh = e.available;
    }
    if (m_to) m_to->onTelemetry(e);
}

void TelemetryTap::pack(double* slot) {
    std::lock_guard lock(m_mutex);
    if (!m_fresh) return;
    m_fresh = false;
    Device d = Device::cpu();
    try {
        d = Device::parse(m_latest.device);
    } catch (const std::exception&) {
        return;  // a source naming no device of ours: nothing to send
    }
    const double words[kWords] = {1.0,
                                  d.isCpu() ? 0.0 : 1.0,
                                  static_cast<double>(d.index),
                                  m_latest.utilizationPercent,
                                  m_latest.memoryUsedBytes,
                                  m_latest.memoryTotalBytes,
                                  m_latest.temperatureC,
                                  m_latest.powerWatts,
                                  m_latest.timeSeconds};
    std::copy(words, words + kWords, slot);
}

void TelemetryTap::report(const double* slot, int rank, TrainingObserver& to) {
    if (slot[0] != 1.0) return;
    TelemetryEvent e;
    const Device d = slot[1] == 0.0 ? Device::cpu() : Device::cuda(static_cast<int>(slot[2]));
    e.device = d.toString() + " (rank " + std::to_string(rank) + ")";
    e.utilizationPercent = slot[3];
    e.memoryUsedBytes = slot[4];
    e.memoryTotalBytes = slot[5];
    e.temperatureC = slot[6];
    e.powerWatts = slot[7];
    e.timeSeconds = slot[8];
    to.onTelemetry(e);
}

RankGroup::RankGroup(Communicator* communicator, bool withOneRank, double timeoutSeconds)
    : m_host(communicator), m_comm(communicator), m_timeout(timeoutSeconds) {
    if (m_comm) {
        m_rank = m_comm->rank();
        m_size = m_comm->size();
        m_dp = m_size > 1 || withOneRank;
        m_comm->setTimeout(timeoutSeconds);
        m_comm->setStep(0);
    }
    m_failStep = envInt("STRATA_TEST_FAIL_STEP", 0);
    m_failRank = envInt("STRATA_TEST_FAIL_RANK", 0);
    m_stallStep = envInt("STRATA_TEST_STALL_STEP", 0);
    m_stallRank = envInt("STRATA_TEST_STALL_RANK", 1);
}

RankGroup::~RankGroup() = default;

void RankGroup::at(const char* what) {
    m_comm->setActivity(what);
    if (m_host && m_host != m_comm) m_host->setActivity(what);
}

void RankGroup::atStep(int64_t step) {
    m_comm->setStep(step);
    if (m_host && m_host != m_comm) m_host->setStep(step);
}

void RankGroup::useDeviceCommunicator(Backend& backend) {
    at("setting up the device communicator (NCCL)");
    m_deviceComm = makeDeviceCommunicator(*m_host, backend);
    m_comm = m_deviceComm.get();
    m_comm->setTimeout(m_timeout);
}

void RankGroup::sum(double* values, int64_t count, const char* what) {
    if (!m_dp) return;
    at(what);
    m_comm->allReduce(values, count, ReduceOp::Sum);
}

std::vector<int> RankGroup::ranksDiffering(uint64_t value) {
    uint64_t root = value;
    m_comm->broadcast(&root, sizeof root, 0);
    std::vector<double> differs(static_cast<size_t>(m_size), 0.0);
    differs[static_cast<size_t>(m_rank)] = root == value ? 0.0 : 1.0;
    m_comm->allReduce(differs.data(), m_size, ReduceOp::Sum);
    std::vector<int> out;
    for (int r = 0; r < m_size; ++r)
        if (differs[static_cast<size_t>(r)] > 0) out.push_back(r);
    return out;
}

bool RankGroup::agreeOnStop(std::atomic<bool>& stopRequested, bool gatherTelemetry, TrainingObserver& observer) {
    if (!m_dp) return stopRequested;
    at("the stop vote");
    std::vector<double>& vote = m_stopVote;
    vote.assign(1 + (gatherTelemetry ? static_cast<size_t>(m_size) * TelemetryTap::kWords : 0), 0.0);
    vote[0] = stopRequested ? 1.0 : 0.0;
    if (gatherTelemetry) m_telemetryTap.pack(vote.data() + 1 + static_cast<size_t>(m_rank) * TelemetryTap::kWords);
    m_comm->allReduce(vote.data(), static_cast<int64_t>(vote.size()), ReduceOp::Sum);
    if (gatherTelemetry && m_rank == 0)
        for (int r = 1; r < m_size; ++r)
            TelemetryTap::report(vote.data() + 1 + static_cast<size_t>(r) * TelemetryTap::kWords, r, observer);
    const bool any = vote[0] > 0;
    if (any) stopRequested = true;
    return any;
}

void RankGroup::setPaused(bool paused) {
    if (m_dp) m_comm->setPaused(paused);
}

void RankGroup::abortJob(const std::string& message) {
    if (m_dp) m_comm->abortJob(message);
}

void RankGroup::injectTestFaults(int64_t step) {
    if (m_failStep > 0 && step == m_failStep && m_rank == m_failRank)
        throw std::runtime_error("step " + std::to_string(m_failStep) +
                                 ": failure injected by STRATA_TEST_FAIL_STEP (a test)");
    if (m_dp && m_stallStep > 0 && step == m_stallStep && m_rank == m_stallRank) {
        // This rank stops answering until the job has failed (a job of threads says so; processes are ended by
        // the launcher when another rank aborts).
        const auto start = std::chrono::steady_clock::now();
        while (m_comm->jobFailure().empty() && std::chrono::steady_clock::now() - start < std::chrono::seconds(120))
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

}  // namespace strata
