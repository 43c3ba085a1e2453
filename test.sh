#!/usr/bin/env bash
# Builds Strata and runs the whole test suite (installs missing Debian packages first).
# The CUDA backend is built when the CUDA toolkit is found (/usr/local/cuda); its
# GPU tests skip, saying why, on machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")"
tools/install-deps.sh test

build=${STRATA_BUILD_DIR:-build}
werror=OFF
[[ "${CI:-}" == "true" ]] && werror=ON
cuda_args=()
if [[ -x /usr/local/cuda/bin/nvcc ]]; then
  cuda_args=(-DCUDAToolkit_ROOT=/usr/local/cuda)
fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSTRATA_WERROR=$werror "${cuda_args[@]}"
cmake --build "$build" -j"$(nproc)"
cd "$build"
QT_QPA_PLATFORM=offscreen ctest --output-on-failure -j"$(nproc)" --timeout 900
