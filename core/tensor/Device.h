// Device: where a tensor lives and an op runs ("cpu", "cuda:0").
#pragma once

#include <string>

namespace strata {

enum class DeviceType { Cpu, Cuda };

struct Device {
    DeviceType type = DeviceType::Cpu;
    int index = 0;

    static Device cpu() { return {DeviceType::Cpu, 0}; }
    static Device cuda(int i) { return {DeviceType::Cuda, i}; }
    // Accepts "cpu", "cuda" (first GPU) and "cuda:N"; throws std::invalid_argument otherwise.
    static Device parse(const std::string& text);

    std::string toString() const;
    bool isCpu() const { return type == DeviceType::Cpu; }
    bool operator==(const Device& o) const { return type == o.type && index == o.index; }
};

}  // namespace strata
