// parallelFor: the one way CpuBackend's fast paths use threads (OpenMP, static
// split, so a fixed thread count gives bit-identical results). Internal to
// core/backend; included only by Cpu*.cpp.
#pragma once

#include <algorithm>
#include <cstdint>

#ifdef _OPENMP
#include <omp.h>
#endif

// A vectorized sum (or max) reduction, and a vectorized loop (the order is fixed by the vector width, so it is
// deterministic); nothing without OpenMP, where an unknown pragma would warn.
#define STRATA_PRAGMA(text) _Pragma(#text)
#ifdef _OPENMP
#define STRATA_SIMD_SUM(...) STRATA_PRAGMA(omp simd reduction(+ : __VA_ARGS__))
#define STRATA_SIMD_MAX(...) STRATA_PRAGMA(omp simd reduction(max : __VA_ARGS__))
#define STRATA_SIMD STRATA_PRAGMA(omp simd)
#else
#define STRATA_SIMD_SUM(...)
#define STRATA_SIMD_MAX(...)
#define STRATA_SIMD
#endif

namespace strata::cpu {

// Splits [0, n) into contiguous parts, one per thread, with at least `grain` items per part
// (so small jobs stay on the calling thread), and calls fn(begin, end, part) for each.
// fn must not throw: validation happens before.
template <class Fn>
void parallelFor(int threads, int64_t n, int64_t grain, Fn&& fn);

// Number of parts parallelFor uses for these arguments (to size per-part scratch buffers).
inline int parallelParts(int threads, int64_t n, int64_t grain) {
    if (n <= 0) return 1;
    const int64_t byGrain = std::max<int64_t>(1, n / std::max<int64_t>(1, grain));
    return static_cast<int>(std::min<int64_t>({static_cast<int64_t>(std::max(threads, 1)), byGrain, n}));
}

template <class Fn>
void parallelFor(int threads, int64_t n, int64_t grain, Fn&& fn) {
    if (n <= 0) return;
    const int parts = parallelParts(threads, n, grain);
    if (parts <= 1) {
        fn(int64_t(0), n, 0);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel num_threads(parts)
    {
        const int part = omp_get_thread_num();
        const int got = omp_get_num_threads();
        // The runtime may give fewer threads than asked: then each thread takes several parts.
        for (int p = part; p < parts; p += got) fn(n * p / parts, n * (p + 1) / parts, p);
    }
#else
    for (int p = 0; p < parts; ++p) fn(n * p / parts, n * (p + 1) / parts, p);
#endif
}

}  // namespace strata::cpu
