// Environment the CPU libraries read only when they are loaded, set by main()
// re-executing the program once, before anything else runs. A user's own
// setting always wins.
//
// - OMP_WAIT_POLICY=passive: the CPU backend's OpenMP workers must not spin
//   long between parallel regions: on a 2-core machine a spinning worker takes
//   the core the data loader, the GUI or another program needs (measured: a
//   training step 2-3x slower under load with libgomp's default spinning).
// - GOMP_SPINCOUNT (headless programs only): a short spin before sleeping.
//   Waking a sleeping worker costs more than a small parallel region on this
//   project's VMs; 1000 spins measured +10% (MLP) and +10-20% (CNN) samples/s
//   on a quiet 2-core machine and no loss next to a busy process. Not for the
//   GUI: there the spinning workers took the GUI thread's time (GUI/headless
//   throughput 0.85 instead of about 0.97).
// - OPENBLAS_CORETYPE: OpenBLAS (0.3.21 in Debian 12) picks its kernels by CPU
//   model and runs generic SSE3 code ("Prescott") on models it does not know,
//   about 5x slower than its AVX-512 or AVX2 kernels. When it chose Prescott on
//   a CPU with those features, name the right kernel family. (With oneDNN,
//   CpuBackend's GEMMs do not use OpenBLAS; builds without it do.)
#pragma once

#include <cstdlib>
#include <cstring>

#include <unistd.h>

extern "C" char* openblas_get_corename(void);

namespace strata::app {

inline const char* betterOpenBlasCore() {
    const char* core = openblas_get_corename();
    if (core == nullptr || std::strcmp(core, "Prescott") != 0) return nullptr;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
    return nullptr;
}

// headless: also set GOMP_SPINCOUNT (see above).
inline void ensurePassiveOpenMpWait(char** argv, bool headless = false) {
    bool changed = false;
    if (std::getenv("OMP_WAIT_POLICY") == nullptr) {
        setenv("OMP_WAIT_POLICY", "passive", 1);
        changed = true;
    }
    if (headless && std::getenv("GOMP_SPINCOUNT") == nullptr) {
        setenv("GOMP_SPINCOUNT", "1000", 1);
        changed = true;
    }
    if (std::getenv("OPENBLAS_CORETYPE") == nullptr) {
        if (const char* core = betterOpenBlasCore()) {
            setenv("OPENBLAS_CORETYPE", core, 1);
            changed = true;
        }
    }
    if (!changed) return;
    execv("/proc/self/exe", argv);
    // exec failed: carry on with the libraries' defaults.
}

}  // namespace strata::app
