// The CPU backend's OpenMP worker threads must not spin between parallel
// regions: on a 2-core machine a spinning worker takes the core the data
// loader, the GUI or another program needs (measured: a training step 2-3x
// slower under load with libgomp's default spinning). libgomp reads
// OMP_WAIT_POLICY only when it is loaded, so main() sets it and re-executes
// the program once, before anything else runs. A user's own setting wins.
#pragma once

#include <unistd.h>

#include <cstdlib>

namespace strata::app {

inline void ensurePassiveOpenMpWait(char** argv) {
    if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv("/proc/self/exe", argv);
    // exec failed: carry on with libgomp's default policy.
}

}  // namespace strata::app
