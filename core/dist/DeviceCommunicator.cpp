// The process-wide table of device communicator factories (DeviceCommunicator.h).
#include "core/dist/DeviceCommunicator.h"

#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

namespace strata {
namespace {

std::mutex g_mutex;

std::map<DeviceType, DeviceCommunicatorFactory>& factories() {
    static std::map<DeviceType, DeviceCommunicatorFactory> table;
    return table;
}

}  // namespace

void registerDeviceCommunicator(DeviceType type, DeviceCommunicatorFactory factory) {
    std::lock_guard lock(g_mutex);
    factories()[type] = std::move(factory);
}

std::unique_ptr<Communicator> makeDeviceCommunicator(Communicator& host, Backend& backend) {
    DeviceCommunicatorFactory factory;
    {
        std::lock_guard lock(g_mutex);
        auto it = factories().find(backend.device().type);
        if (it != factories().end()) factory = it->second;
    }
    if (!factory)
        throw std::runtime_error("data parallel on " + backend.device().toString() +
                                 ": this build has no communicator for its device memory (NCCL)");
    return factory(host, backend);
}

}  // namespace strata
