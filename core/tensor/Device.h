// Device: where a tensor lives and an op runs ("cpu", "cuda:0").
#pragma once

#include <string>
#include <vector>

namespace strata {

enum class DeviceType { Cpu, Cuda };

struct Device {
    DeviceType type = DeviceType::Cpu;
    int index = 0;

    static Device cpu() { return {DeviceType::Cpu, 0}; }
    static Device cuda(int i) { return {DeviceType::Cuda, i}; }
    // Accepts "cpu", "cuda" (first GPU) and "cuda:N"; throws std::invalid_argument otherwise.
    static Device parse(const std::string& text);
    // A run's devices (training.device): one, or several separated by commas ("cuda:0,cuda:1": one
    // data-parallel replica on each, core/train/ReplicaRun.h). Throws std::invalid_argument for an empty entry
    // or a GPU named twice (the CPU may be named more than once: replicas sharing it, for checks).
    static std::vector<Device> parseList(const std::string& text);
    // The first of parseList(text): the device of commands that use one (profile, prune, a sweep's trials).
    static Device parseFirst(const std::string& text) { return parseList(text).front(); }

    std::string toString() const;
    bool isCpu() const { return type == DeviceType::Cpu; }
    bool operator==(const Device& o) const { return type == o.type && index == o.index; }
};

}  // namespace strata
