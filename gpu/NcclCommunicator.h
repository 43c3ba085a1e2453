// NcclCommunicator: the Communicator of a data-parallel rank whose backend is a CUDA GPU. Device memory of
// that backend (the packed gradient block, the parameters local SGD averages) is reduced by NCCL on a
// stream of its own; host memory (the Trainer's control values, BatchNorm's global sums) goes to the host
// communicator it was made over: MPI across processes and machines, or the thread group of one process
// (several GPUs, one engine thread each). The NCCL unique id travels over that host communicator, so one
// code path serves both (ncclCommInitRank on every rank; threads of one process each open their own GPU).
//
// Ordering: a collective on device memory starts after the work already queued on the backend's compute
// stream (an event), so it reads the gradients backward has just written while later kernels keep running;
// wait() blocks the host until NCCL has finished, after which the compute stream's next work sees the sums.
//
// Failure: a waiting rank polls its operation and, when the job has failed elsewhere in this process
// (abortJob on another rank of the same group), aborts its own NCCL communicator (ncclCommAbort, which stops
// its pending kernels) and throws CommAborted naming that rank. Across processes abortJob is MPI_Abort,
// which ends them all. NCCL's own asynchronous errors (a peer that vanished) are checked while waiting.
#pragma once

#include <memory>
#include <string>

#include "core/dist/Communicator.h"

namespace strata::gpu {

class CudaBackend;

// Collective over `host` (every rank calls it at the same point); `host` and `backend` must outlive the
// result. Throws BackendError with NCCL's message when NCCL cannot start (no NCCL library, two ranks on one
// GPU, ...).
std::unique_ptr<Communicator> makeNcclCommunicator(Communicator& host, CudaBackend& backend);

// NCCL is loaded with dlopen (libnccl.so.2) when first needed, so that a machine without it runs everything
// else: "" when it loaded, else why not ("NCCL not available (libnccl.so.2: cannot open shared object ...)").
std::string ncclUnavailableReason();

// Registers makeNcclCommunicator as the device communicator of CUDA backends (core/dist/DeviceCommunicator.h);
// registerCudaProvider calls it.
void registerNcclCommunicator();

// NCCL's version as "2.27.3", or why NCCL is not available.
std::string ncclVersionText();

}  // namespace strata::gpu
