// TelemetryEvent: one sample of a device's utilization and memory, taken by a
// TelemetrySource (BackendRegistry.h) on the sampler thread. Here, below train/,
// because the backend providers produce it and the training events carry it on.
#pragma once

#include <string>

namespace strata {

struct TelemetryEvent {
    std::string device;     // "cpu", "cuda:0"
    bool available = true;  // false: "unavailable" (reported once)
    std::string reason;     // why unavailable
    double utilizationPercent = 0;
    double memoryUsedBytes = 0, memoryTotalBytes = 0;
    double temperatureC = -1, powerWatts = -1, smClockMHz = -1;  // -1: not reported by this device
    double timeSeconds = 0;                                      // since the run started
};

}  // namespace strata
