// ReplicaRun: the header says what each rank does.
#include "core/train/ReplicaRun.h"

#include <stdexcept>
#include <thread>

#include "core/backend/Backend.h"
#include "core/dist/ThreadCommunicator.h"

namespace strata {
namespace {

// Another rank's events: its device's telemetry goes on to the run's observer; the rest is rank 0's to say,
// but its error is kept, for a rank that fails after rank 0 has finished.
class TelemetryOnly : public TrainingObserver {
public:
    explicit TelemetryOnly(TrainingObserver* to) : m_to(to) {}
    void onTelemetry(const TelemetryEvent& e) override {
        if (m_to) m_to->onTelemetry(e);
    }
    void onError(const std::string& message) override {
        if (error.empty()) error = message;
    }
    std::string error;

private:
    TrainingObserver* m_to;
};

}  // namespace

struct ReplicaRun::Impl {
    Project project;
    std::vector<Backend*> backends;
    TrainingObserver* observer = nullptr;
    TrainerOptions options;

    std::mutex mutex;
    std::vector<Trainer*> trainers;  // while run() runs
    bool pause = false, stop = false, checkpoint = false;

    // Applies the requests made so far to a trainer that has just started.
    void attach(Trainer* t) {
        std::lock_guard lock(mutex);
        trainers.push_back(t);
        if (pause) t->requestPause();
        if (stop) t->requestStop();
        if (checkpoint) t->requestCheckpoint();
    }
};

ReplicaRun::ReplicaRun(Project project, std::vector<Backend*> backends, TrainingObserver* observer,
                       TrainerOptions options)
    : m_impl(std::make_unique<Impl>()) {
    if (backends.empty()) throw std::invalid_argument("a replicated run needs at least one device");
    if (options.communicator) throw std::invalid_argument("a replicated run makes its own communicators");
    m_impl->project = std::move(project);
    m_impl->backends = std::move(backends);
    m_impl->observer = observer;
    m_impl->options = std::move(options);
}

ReplicaRun::~ReplicaRun() = default;

bool ReplicaRun::run() {
    Impl& d = *m_impl;
    const int n = static_cast<int>(d.backends.size());
    std::vector<std::unique_ptr<Communicator>> comms = makeThreadCommunicators(n);
    std::vector<std::unique_ptr<TelemetryOnly>> relays;
    std::vector<char> ok(static_cast<size_t>(n), 0);

    auto rankMain = [&](int r) {
        TrainerOptions o = d.options;
        o.communicator = comms[static_cast<size_t>(r)].get();
        o.gatherTelemetry = false;  // each rank's samples reach the observer directly (TelemetryOnly)
        TrainingObserver* obs = d.observer;
        if (r != 0) {
            // Only rank 0 writes checkpoints (the Trainer says so too); a rank sampling a device rank 0 already
            // samples (CPU replicas) would draw its line twice.
            o.runFolder.clear();
            if (d.backends[static_cast<size_t>(r)]->device() == d.backends[0]->device()) o.telemetryIntervalMs = 0;
            obs = relays[static_cast<size_t>(r)].get();
        }
        try {
            Trainer trainer(d.project, *d.backends[static_cast<size_t>(r)], obs, o);
            d.attach(&trainer);
            const bool done = trainer.run();
            {
                std::lock_guard lock(d.mutex);
                std::erase(d.trainers, &trainer);
            }
            ok[static_cast<size_t>(r)] = done ? 1 : 0;
        } catch (const std::exception& e) {
            // A Trainer that could not even be made: the others must not wait for it.
            comms[static_cast<size_t>(r)]->abortJob(e.what());
            if (r == 0 && d.observer) d.observer->onError(e.what());
            if (r != 0) relays[static_cast<size_t>(r)]->onError(e.what());
        }
    };

    for (int r = 0; r < n; ++r) relays.push_back(std::make_unique<TelemetryOnly>(d.observer));
    std::vector<std::thread> threads;
    threads.reserve(static_cast<size_t>(n - 1));
    for (int r = 1; r < n; ++r) threads.emplace_back(rankMain, r);
    rankMain(0);
    for (std::thread& t : threads) t.join();
    if (!ok[0]) return false;  // rank 0 said why (its own error, or the failed rank's)
    for (int r = 1; r < n; ++r)
        if (!ok[static_cast<size_t>(r)]) {
            // Failed after rank 0 had finished: nobody has said so yet.
            if (d.observer)
                d.observer->onError("rank " + std::to_string(r) + " of " + std::to_string(n) +
                                    " failed: " + relays[static_cast<size_t>(r)]->error);
            return false;
        }
    return true;
}

void ReplicaRun::requestPause() {
    std::lock_guard lock(m_impl->mutex);
    m_impl->pause = true;
    for (Trainer* t : m_impl->trainers) t->requestPause();
}

void ReplicaRun::requestResume() {
    std::lock_guard lock(m_impl->mutex);
    m_impl->pause = false;
    for (Trainer* t : m_impl->trainers) t->requestResume();
}

void ReplicaRun::requestStop() {
    std::lock_guard lock(m_impl->mutex);
    m_impl->stop = true;
    for (Trainer* t : m_impl->trainers) t->requestStop();
}

void ReplicaRun::requestCheckpoint() {
    std::lock_guard lock(m_impl->mutex);
    m_impl->checkpoint = true;
    for (Trainer* t : m_impl->trainers) t->requestCheckpoint();
}

}  // namespace strata
