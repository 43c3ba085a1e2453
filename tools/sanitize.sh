#!/usr/bin/env bash
# Builds the core and the tests with AddressSanitizer and UndefinedBehaviorSanitizer (no GUI, no CUDA) in
# build-sanitize/ and runs the test suite there. A full second build: it runs at nice 19.
# Usage: tools/sanitize.sh [CTEST_ARGS...]   (e.g. tools/sanitize.sh -R test_hardening)
#   JOBS=N  build and test jobs (default: 2)
# allocator_may_return_null=1: a test that asks for a 2^62-byte allocation gets std::bad_alloc, as without ASan.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${STRATA_SANITIZE_BUILD:-$root/build-sanitize}
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_GUI=OFF -DSTRATA_CUDA=OFF \
  -DSTRATA_BENCH=OFF -DSTRATA_LINK_CHECK=OFF -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
nice -n 19 cmake --build "$build" -j"${JOBS:-2}"

# Leaks are checked with tools/lsan-mpi.supp: Open MPI keeps what MPI_Init allocated past MPI_Finalize (the
# tests/dist cases fail on it otherwise). Its components stay loaded (disable_dlclose) and allocations are
# unwound fully (fast_unwind_on_malloc=0: MPI's libraries have no frame pointers), so that the suppressions see
# MPI's frames; only frames in MPI's own libraries are suppressed.
export ASAN_OPTIONS=${ASAN_OPTIONS:-allocator_may_return_null=1:detect_leaks=1:abort_on_error=0:fast_unwind_on_malloc=0}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/tools/lsan-mpi.supp}
export OMPI_MCA_mca_base_component_disable_dlclose=1
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$build"
QT_QPA_PLATFORM=offscreen nice -n 19 ctest -j"${JOBS:-2}" --output-on-failure "$@"
