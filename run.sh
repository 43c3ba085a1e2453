#!/usr/bin/env bash
# Builds Strata and launches the workbench with the Fashion-MNIST CNN example open
# (installs missing Debian packages first, including the Fashion-MNIST data set).
set -euo pipefail
cd "$(dirname "$0")"
tools/install-deps.sh run

build=${STRATA_BUILD_DIR:-build}
cuda_args=()
if [[ -x /usr/local/cuda/bin/nvcc ]]; then
  cuda_args=(-DCUDAToolkit_ROOT=/usr/local/cuda)
fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "${cuda_args[@]}"
cmake --build "$build" -j"$(nproc)" --target strata strata-train
exec "$build/bin/strata" examples/fashion_cnn.strata "$@"
