#!/usr/bin/env bash
# Builds the Debian packages strata_<version>_amd64.deb and strata-cuda_<version>_amd64.deb (cmake/Packaging.cmake)
# with CPack, and lists them.
#
# Usage: tools/make-deb.sh [--out DIR] [--build DIR] [--reuse BUILD]
#   default       a clean tree: a git worktree of HEAD under the build folder (committed files only: nothing of
#                 examples/runs or other local files gets in), configured like ./test.sh (so ccache serves the
#                 objects), building only what the packages hold
#   --build DIR   that build folder (default: build-deb), made anew
#   --reuse BUILD package BUILD as it is, a build of this tree configured like ./test.sh that built everything
#                 (.ci/run: test.sh's build, so the packages hold the binaries the tests ran)
#   --out DIR     where the .deb files go (default: out/deb)
# Needs cmake, dpkg-dev (dpkg-shlibdeps), file, help2man and librsvg2-bin (tools/install-deps.sh ci).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$ROOT/out/deb
BUILD=$ROOT/build-deb
REUSE=""
while (($#)); do
  case "$1" in
    --out) OUT=$(realpath -m "$2"); shift 2 ;;
    --build) BUILD=$(realpath -m "$2"); shift 2 ;;
    --reuse) REUSE=$(realpath -m "$2"); shift 2 ;;
    -h | --help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "make-deb.sh: unknown argument '$1' (--help lists them)" >&2; exit 2 ;;
  esac
done
say() { printf '[make-deb] %s\n' "$*"; }
die() { printf 'make-deb.sh: %s\n' "$*" >&2; exit 1; }
for tool in cmake cpack dpkg-shlibdeps file help2man rsvg-convert; do
  command -v "$tool" >/dev/null || die "$tool not found (tools/install-deps.sh ci installs what packaging needs)"
done
jobs=${JOBS:-$(nproc)}

if [[ -n "$REUSE" ]]; then
  [[ -f "$REUSE/CPackConfig.cmake" ]] || die "$REUSE is not a configured build of this tree (no CPackConfig.cmake)"
  build=$REUSE
  say "packaging the build in $build as it is"
  # Everything is built already (the packaging targets are part of `all`): this checks it and makes what is left.
  cmake --build "$build" -j"$jobs" >"$build/make-deb-build.log" 2>&1 ||
    die "build failed, see $build/make-deb-build.log: $(tail -5 "$build/make-deb-build.log")"
else
  if ! git -C "$ROOT" diff --quiet HEAD 2>/dev/null; then
    say "note: the working tree has uncommitted changes; the packages are built from HEAD ($(git -C "$ROOT" rev-parse --short HEAD)) without them"
  fi
  # The tree: a detached worktree of HEAD, its build folder inside it as ./test.sh has it (same relative paths,
  # so ccache's base_dir rewriting finds the objects of the main build).
  src=$BUILD/src
  if [[ -e "$src" ]]; then git -C "$ROOT" worktree remove --force "$src" 2>/dev/null || rm -rf "$src"; fi
  git -C "$ROOT" worktree prune
  rm -rf "$BUILD"
  mkdir -p "$BUILD"
  git -C "$ROOT" worktree add --detach --quiet "$src" HEAD
  # The worktree goes when the packages are made (the logs stay in $BUILD): nothing is left registered with git.
  trap 'git -C "$ROOT" worktree remove --force "$src" 2>/dev/null || true' EXIT
  build=$src/build
  cuda_args=()
  if [[ -x /usr/local/cuda/bin/nvcc ]]; then cuda_args=(-DCUDAToolkit_ROOT=/usr/local/cuda); fi
  say "configure $build (Release, STRATA_WERROR=ON${cuda_args:+, CUDA})"
  # CMAKE_SKIP_INSTALL_ALL_DEPENDENCY: CPack's install step builds only what is below, not the tests.
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSTRATA_WERROR=ON "${cuda_args[@]}" \
    -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON >"$BUILD/configure.log" 2>&1 ||
    die "configure failed, see $BUILD/configure.log: $(tail -5 "$BUILD/configure.log")"
  targets=(strata strata-train strata_sentencepiece strata_packaging_files)
  if grep -q '^STRATA_CUDA_PLUGIN:BOOL=ON' "$build/CMakeCache.txt"; then targets+=(strata_cuda); fi
  say "build ${targets[*]} (-j$jobs)"
  cmake --build "$build" -j"$jobs" --target "${targets[@]}" >"$BUILD/build.log" 2>&1 ||
    die "build failed, see $BUILD/build.log: $(grep -m5 -E 'error' "$BUILD/build.log" || tail -5 "$BUILD/build.log")"
fi

say "cpack -G DEB -> $OUT"
mkdir -p "$OUT"
rm -f "$OUT"/strata*.deb
(cd "$build" && cpack -G DEB -B "$OUT/cpack") >"$OUT/cpack.log" 2>&1 ||
  die "cpack failed, see $OUT/cpack.log: $(grep -m5 -iE 'error' "$OUT/cpack.log" || tail -5 "$OUT/cpack.log")"
mv "$OUT"/cpack/strata*.deb "$OUT"/
rm -rf "$OUT/cpack/_CPack_Packages"
for deb in "$OUT"/strata*.deb; do
  say "$(basename "$deb"): $(du -h "$deb" | cut -f1) ($(stat -c %s "$deb") bytes)"
  dpkg-deb -f "$deb" Depends | fold -s -w 110 | sed 's/^/             /'
done
