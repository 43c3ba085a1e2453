// ThreadCommunicator: a job of `size` ranks that are threads of one process (one engine thread per device
// when training on several GPUs, or several CPU replicas), exchanging host memory through a shared group.
//
// Collectives meet at a barrier: every rank posts its buffer, each rank then sums its own slice of the
// range over all ranks' buffers (in rank order, so every rank gets bit-identical sums) into the group's
// scratch, and after a second barrier copies the whole result out. A third barrier keeps the scratch and
// the posted buffers alive until every rank has read them.
//
// Non-blocking all-reduces run when they are waited for (test() returns false until then): the ranks call
// wait() in the same order, as they started them, so the collectives still meet. None of the communication
// is hidden behind computation; the Trainer's step events then say 0% hidden, which is the truth for this
// path (it carries host-side control values and CPU replicas; GPUs exchange gradients through NCCL).
//
// Failure: abortJob() on any rank (a failing Trainer) marks the group failed and returns; every rank waiting
// in a collective, or entering one later, throws CommAborted naming the failed rank and its reason, so no
// thread waits forever and the runner can join them all. A wait past a rank's bound (Communicator::setTimeout)
// fails the group the same way, naming the rank that waited, its step and collective and the ranks that did
// not arrive; while a rank is paused (setPaused) no wait runs out.
#pragma once

#include <memory>
#include <stdexcept>
#include <vector>

#include "core/dist/Communicator.h"

namespace strata {

// Thrown by a collective of a group one of whose ranks has failed.
struct CommAborted : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// `size` communicators (ranks 0 .. size-1) of one group, to be handed one to each thread. size >= 1.
std::vector<std::unique_ptr<Communicator>> makeThreadCommunicators(int size);

}  // namespace strata
