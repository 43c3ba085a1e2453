// ReplicaRun: one data-parallel training run over several devices of this process (`strata-train --device
// cuda:0,cuda:1`, several GPUs ticked in the workbench), one engine thread per device.
//
// Each device gets a Trainer of its own, on its own thread (rank 0 on the caller's), with one communicator
// of a thread group (ThreadCommunicator.h) for host values; a GPU rank sums its gradients through NCCL over
// it (the Trainer makes that communicator). Every data-parallel rule of the Trainer holds as under mpirun:
// the global batch is split over the ranks, rank 0's weights are broadcast, rank 0 alone writes checkpoints.
// Events: rank 0's reach the observer; of the other ranks, their devices' telemetry (so each device has its
// own line) and nothing else. Requests (pause, stop, save now) go to every rank; the ranks agree on them
// between steps.
//
// A failure on any rank ends every rank (the group's collectives throw), and the observer is told which rank
// failed and why (rank 0's own error, or "rank R of N failed: reason").
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/train/Trainer.h"

namespace strata {

class Backend;

class ReplicaRun {
public:
    // One backend per rank (rank r trains on backends[r]), alive until run() returns. options.communicator
    // must be null: the run makes its own group.
    ReplicaRun(Project project, std::vector<Backend*> backends, TrainingObserver* observer, TrainerOptions options);
    ~ReplicaRun();
    ReplicaRun(const ReplicaRun&) = delete;
    ReplicaRun& operator=(const ReplicaRun&) = delete;

    // Blocking, as Trainer::run: true when every rank finished (or stopped on request).
    bool run();

    // Thread-safe; before run() they apply once the ranks start.
    void requestPause();
    void requestResume();
    void requestStop();
    void requestCheckpoint();

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

}  // namespace strata
