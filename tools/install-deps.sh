#!/usr/bin/env bash
# Installs the Debian 12 packages Strata needs, only those missing.
# Usage: tools/install-deps.sh [build|test|run|ci|gui-review|fuzz|bench|deb]  (all sets include the build tools)
#   deb: also the packaging tools: help2man and rsvg-convert (man pages, icons), dpkg-dev and file (CPack's
#       dpkg-shlibdeps), lintian, debootstrap and zstd (tools/make-deb.sh, tools/check-deb.sh), and the desktop
#       entry's and metainfo's validators (desktop-file-utils, appstream: tests/test_desktop_integration)
#   gui-review: also Xvfb, xdotool and ImageMagick (tools/gui-review.sh drives the real GUI with them)
#   fuzz: also clang and libFuzzer/sanitizer runtimes (tools/fuzz.sh, tools/sanitize.sh)
#   bench: also python3-pil, python3-numpy (tools/make_image_folder.py and the image benchmarks) and
#       python3-vega-datasets (the Auto MPG cars of tools/make_auto_mpg_dataset.py)
#   test, ci: also the tests' PyPI packages in a venv (tools/setup-test-venv.sh); python3-torch and
#     python3-torchvision (tools/make_import_fixtures.py: the ONNX import tests' PyTorch models)
#   ci: test's, plus shellcheck, clang-format, clang-tidy and xz-utils (.ci/run's lint, style and GPU bundle steps)
#       and gui-review's (.ci/run drives the real GUI with tools/gui-review.sh), and deb's (.ci/run packages)
set -euo pipefail

packages=(
  cmake g++ make ccache pkg-config zlib1g-dev
  libsqlite3-dev qt6-base-dev libqcustomplot-dev libqcustomplot2.1-qt6 xvfb xauth
  libopenblas-dev libdnnl-dev nlohmann-json3-dev libprotobuf-dev protobuf-compiler libonnx-dev libopencv-dnn-dev
  libxxhash-dev libcli11-dev
  libopenmpi-dev openmpi-bin
  libpng-dev libturbojpeg0-dev libsentencepiece-dev
  dataset-fashion-mnist
)
deb_packages=(help2man librsvg2-bin dpkg-dev file lintian debootstrap zstd desktop-file-utils appstream)
case "${1:-build}" in
  test) packages+=(python3-onnx python3-venv python3-torch python3-torchvision) ;;
  ci) packages+=(python3-onnx python3-venv python3-torch python3-torchvision shellcheck xz-utils clang-format clang-tidy xvfb xdotool imagemagick
      "${deb_packages[@]}") ;;
  deb) packages+=("${deb_packages[@]}") ;;
  gui-review) packages+=(xvfb xdotool imagemagick) ;;
  fuzz) packages+=(clang libclang-rt-14-dev) ;;
  bench) packages+=(python3-pil python3-numpy python3-venv python3-torch python3-torchvision python3-vega-datasets) ;;
esac
set_name=${1:-build}

# The tests' PyPI packages (onnxruntime, ...) in their own venv, after the Debian packages.
finish() {
  case "$set_name" in
    test | ci) "$(dirname "$0")/setup-test-venv.sh" ;;
  esac
}

# One dpkg-query for all (it exits 1 when a package is unknown, and still lists the others). No
# `dpkg-query | grep -q`: grep -q stops reading at the first match, and under pipefail the writer's SIGPIPE
# would count as "not installed".
declare -A installed=()
while read -r name status; do
  if [[ "$status" == "install ok installed" ]]; then installed[${name%%:*}]=1; fi
done < <(dpkg-query -W -f='${Package} ${Status}\n' "${packages[@]}" 2>/dev/null || true)
missing=()
for p in "${packages[@]}"; do
  [[ -n "${installed[$p]:-}" ]] || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  finish
  exit 0
fi

echo "Installing missing Debian packages: ${missing[*]}"
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
finish
