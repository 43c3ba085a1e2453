#!/usr/bin/env bash
# Installs the Debian 12 packages Strata needs, only those missing.
# Usage: tools/install-deps.sh [build|test|run]  (all sets include the build tools)
set -euo pipefail

packages=(
  cmake g++ make ccache pkg-config zlib1g-dev
  qt6-base-dev libqt6sql6-sqlite libqcustomplot-dev libqcustomplot2.1-qt6 xvfb xauth
  libopenblas-dev libdnnl-dev nlohmann-json3-dev libprotobuf-dev protobuf-compiler libonnx-dev libopencv-dnn-dev
  libopenmpi-dev openmpi-bin
  dataset-fashion-mnist
)
case "${1:-build}" in
  test) packages+=(python3-onnx libpng-dev) ;;
esac

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
((${#missing[@]})) || exit 0

echo "Installing missing Debian packages: ${missing[*]}"
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
