// MpiCommunicator: Communicator over MPI (Open MPI), host memory. Non-blocking all-reduces are
// MPI_Iallreduce; Open MPI progresses them inside MPI calls, so the data-parallel Trainer tests its
// outstanding requests between layers (CommRequest::test) while backward runs.
//
// Threads: MPI is initialized with MPI_THREAD_SERIALIZED; every call of one communicator must come from
// one thread at a time (the Trainer's engine thread).
#pragma once

#include <memory>

#include "core/dist/Communicator.h"

namespace strata {

// Whether this build has MPI (STRATA_MPI).
bool mpiBuilt();
// Whether the environment says this process was started by an MPI launcher (mpirun/mpiexec of Open MPI,
// a PMI launcher such as srun): OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK or PMI_RANK is set.
bool launchedByMpi();
// MPI_COMM_WORLD, initializing MPI on first use and finalizing it when the last one is destroyed. Throws
// std::runtime_error when the build has no MPI or MPI fails to start.
std::unique_ptr<Communicator> makeMpiCommunicator();

}  // namespace strata
