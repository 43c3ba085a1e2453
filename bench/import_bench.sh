#!/usr/bin/env bash
# Import time and peak memory of `strata-train import` for torchvision's resnet18 and mobilenet_v2 (random
# weights, exported by torch.onnx.export through tools/make_import_fixtures.py with Debian's python3-torch).
# Usage: bench/import_bench.sh [BUILD_DIR] [RUNS]   (default build, 3 runs; the best time and its peak RSS)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
runs=${2:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$root/tools/make_import_fixtures.py" "$work" resnet18 mobilenet_v2 >/dev/null
printf '%-14s %10s %12s %8s %10s\n' model "onnx MB" "best s" "layers" "peak MB"
for model in resnet18 mobilenet_v2; do
  best="" peak="" layers=""
  for _ in $(seq "$runs"); do
    /usr/bin/time -f '%e %M' -o "$work/time" "$build/bin/strata-train" import "$work/$model.onnx" \
      -o "$work/$model.strata" --force >"$work/out" 2>&1
    read -r seconds kb <"$work/time"
    if [[ -z "$best" ]] || awk "BEGIN{exit !($seconds < $best)}"; then
      best=$seconds
      peak=$((kb / 1024))
    fi
    layers=$(sed -n 's/.* as \([0-9]*\) layers.*/\1/p' "$work/out")
  done
  size=$(du -m "$work/$model.onnx" | cut -f1)
  printf '%-14s %10s %12s %8s %10s\n' "$model" "$size" "$best" "$layers" "$peak"
done
