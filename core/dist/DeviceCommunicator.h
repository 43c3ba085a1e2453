// Device communicators: how a data-parallel rank whose backend is a GPU sums its gradients where they live.
// A device library registers a factory for its device type (gpu/: NCCL for CUDA, registerCudaProvider); the
// Trainer asks for one when a data-parallel run's backend is not the CPU. The communicator it returns takes
// device memory of that backend for its collectives and passes host memory on to `host` (MPI, or the
// threads of one process), which must outlive it. Making one is itself collective: every rank of `host`
// calls it at the same point.
#pragma once

#include <functional>
#include <memory>

#include "core/backend/Backend.h"
#include "core/dist/Communicator.h"

namespace strata {

using DeviceCommunicatorFactory = std::function<std::unique_ptr<Communicator>(Communicator& host, Backend& backend)>;

void registerDeviceCommunicator(DeviceType type, DeviceCommunicatorFactory factory);
// Throws std::runtime_error naming the device when no factory is registered for its type.
std::unique_ptr<Communicator> makeDeviceCommunicator(Communicator& host, Backend& backend);

}  // namespace strata
