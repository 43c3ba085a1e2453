#!/usr/bin/env bash
# gpu-bundle.sh: builds, HERE (Debian 12, CUDA 13 at /usr/local/cuda, no GPU needed), everything
# tools/gpu-check.sh runs, and packs it as a "device bundle" that the device tool carries to a lent
# GPU machine (one H200, no Qt, no OpenBLAS/protobuf/ONNX, no internet, no package installs), so the
# short device time is spent running, not building.
#
# Usage: tools/gpu-bundle.sh
# Environment: BUILD_DIR (default <repo>/build-gpubundle), BUNDLE_DIR (default <repo>/.gpu-bundle),
#   DATA_DIR (default /usr/share/datasets/fashion-mnist), JOBS (default 2), LIMIT_MIB (default 63: the
#   bundle plus the files that travel with the working tree must stay under it; the device tool's limit is 64.
#   It was 62 until issue 37's kernels and tests grew bin.tar.xz by 2 MiB to a total of 62.1 MiB; what is big is
#   data.tar.xz (25 MiB) and libs.tar.xz (26 MiB, ICU's data and oneDNN the most), so the next growth wants a
#   smaller share of Fashion-MNIST or fewer libraries, not a higher limit).
#   CI=true builds with warnings as errors, as ./test.sh does: the same compile flags as test.sh's build, so
#   ccache serves this build from that one's objects (.ci/run builds both).
#
# The bundle (ignored by git; name it in `carry`):
#   bin.tar.xz    bin/: test_gpu_device test_backend_ops test_mixed_precision test_model_fusion strata-train,
#                 stripped (8.9 MiB as files, 1.3 MiB packed: they share most of their code)
#   libs.tar.xz   lib/: every shared library they load (ldd closure) except glibc's own, libstdc++/libgcc_s
#                 and the big CUDA libraries the device has (cuBLAS, cuBLASLt, cuDNN, NCCL); libcudart is in.
#                 compat/: libstdc++ and libgcc_s from here, used there only if the device's are missing or older.
#   device-libs   the sonames gpu-check.sh must find on the device (one a line)
#   data.tar.xz   data/: the four Fashion-MNIST files as raw IDX (xz packs them 4 MiB smaller than their .gz)
#   MANIFEST      git commit, dirty files, build options, sizes, library lists
# Then, on the GPU machine: `bash tools/gpu-check.sh --bundle .gpu-bundle` (see gpu-check.sh's header).
#
# Under pipefail, a pipeline whose reader may stop early (`| head`, `| grep -q`, `| awk '{...; exit}'`)
# fails whenever the writer is still writing (SIGPIPE, status 141), and set -e then ends the script: take
# the whole output and cut it in the shell instead (see GLIBC_V below).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-gpubundle}
BUNDLE=${BUNDLE_DIR:-$ROOT/.gpu-bundle}
DATA=${DATA_DIR:-/usr/share/datasets/fashion-mnist}
JOBS=${JOBS:-2}
LIMIT_MIB=${LIMIT_MIB:-63}
TARGETS=(test_gpu_device test_backend_ops test_mixed_precision test_model_fusion strata-train)
DATA_FILES=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)
CUDA=/usr/local/cuda
# Warnings as errors exactly when ./test.sh uses them: same flags, same ccache entries.
WERROR=OFF
[[ "${CI:-}" == "true" ]] && WERROR=ON
T0=$(date +%s)

say() { printf '[gpu-bundle %4ss] %s\n' "$(($(date +%s) - T0))" "$*"; }
die() {
    say "ERROR: $*"
    exit 1
}

for f in "${DATA_FILES[@]}"; do [[ -f "$DATA/$f" ]] || die "$DATA/$f missing (apt-get install dataset-fashion-mnist)"; done
command -v xz >/dev/null || die "xz not found (apt-get install xz-utils)"
[[ -x "$CUDA/bin/nvcc" ]] || die "no CUDA toolkit at $CUDA (no $CUDA/bin/nvcc): the bundle needs one to build"

# ---- build -------------------------------------------------------------------------------------------
say "configure $BUILD (Release, STRATA_CUDA=ON, oneDNN for the CPU column; no GUI/bench/OpenCV/MPI; WERROR $WERROR)"
mkdir -p "$BUILD"
# Release, STRATA_WERROR and CUDAToolkit_ROOT as ./test.sh sets them, so the objects both builds share
# (core/, gpu/, strata-train) hit ccache. OpenCV off keeps its libraries out of the bundle; it only adds a -D
# and an -isystem to core/, which ccache's preprocessor mode still matches for the files that do not use them.
# STRATA_CUDA_PLUGIN=OFF links the CUDA backend into strata-train (no libstrata_cuda.so to carry and find).
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DSTRATA_WERROR="$WERROR" -DCUDAToolkit_ROOT="$CUDA" \
    -DSTRATA_CUDA=ON -DSTRATA_CUDA_PLUGIN=OFF -DSTRATA_GUI=OFF -DSTRATA_BENCH=OFF -DSTRATA_ONEDNN=ON -DSTRATA_OPENCV=OFF -DSTRATA_MPI=OFF \
    -DCMAKE_CUDA_ARCHITECTURES="90-real;90-virtual" \
    >"$BUILD/gpu-bundle-configure.log" 2>&1 || die "configure failed: $(tail -5 "$BUILD/gpu-bundle-configure.log")"
ARCHS=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
[[ "$ARCHS" == "90-real;90-virtual" ]] || die "CMAKE_CUDA_ARCHITECTURES is '$ARCHS' in $BUILD/CMakeCache.txt"
say "build ${TARGETS[*]} (-j$JOBS)"
cmake --build "$BUILD" --target "${TARGETS[@]}" -j"$JOBS" >"$BUILD/gpu-bundle-build.log" 2>&1 ||
    die "build failed, see $BUILD/gpu-bundle-build.log: $(grep -m5 -E 'error' "$BUILD/gpu-bundle-build.log" ||
        tail -5 "$BUILD/gpu-bundle-build.log")"

# ---- bundle -------------------------------------------------------------------------------------------
rm -rf "$BUNDLE"
mkdir -p "$BUNDLE"
STAGE=$(mktemp -d /tmp/gpu-bundle-stage.XXXXXX)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/bin" "$STAGE/lib" "$STAGE/compat" "$STAGE/data"

for t in "${TARGETS[@]}"; do
    [[ -x "$BUILD/bin/$t" ]] || die "$BUILD/bin/$t was not built"
    strip --strip-unneeded -o "$STAGE/bin/$t" "$BUILD/bin/$t"
done

# Classify every library in the closure. ldd prints the whole closure, so one pass over the binaries is enough.
declare -A WHERE=()  # soname -> host path
for t in "${TARGETS[@]}"; do
    out=$(ldd "$BUILD/bin/$t") || die "ldd $t failed"
    if grep -q 'not found' <<<"$out"; then die "$t: $(grep 'not found' <<<"$out" | tr -s ' \t\n' ' ')"; fi
    while read -r name arrow path _; do
        [[ "$arrow" == "=>" && -n "$path" ]] || continue
        WHERE[$name]=$path
    done <<<"$out"
done
GLIBC_RE='^(libc|libm|libpthread|libdl|librt|libutil|libresolv|libanl|libnsl|libmvec)\.so\.[0-9]+$'
is_glibc() { [[ "$1" =~ $GLIBC_RE || "$1" == ld-linux* ]]; }
is_device() { [[ "$1" =~ ^(libcublas\.so\.13|libcublasLt\.so\.13|libcudnn.*\.so\.9|libnccl\.so\.2)$ ]]; }
is_compat() { [[ "$1" == libstdc++.so.6 || "$1" == libgcc_s.so.1 ]]; }
CARRIED=() DEVICE=() SYSTEM=() COMPAT=()
for name in $(printf '%s\n' "${!WHERE[@]}" | sort); do
    if is_glibc "$name"; then
        SYSTEM+=("$name")
    elif is_device "$name"; then
        DEVICE+=("$name")
    elif is_compat "$name"; then
        COMPAT+=("$name")
        cp -L "${WHERE[$name]}" "$STAGE/compat/$name"
    else
        CARRIED+=("$name")
        cp -L "${WHERE[$name]}" "$STAGE/lib/$name"
    fi
done
printf '%s\n' "${DEVICE[@]}" >"$BUNDLE/device-libs"
say "carried: ${#CARRIED[@]} libraries ($(du -sh "$STAGE/lib" | cut -f1) uncompressed); from the device: ${DEVICE[*]}"
say "compress bin.tar.xz, libs.tar.xz and data.tar.xz"
# Plain xz (no -T): one stream that any xz, Python's lzma or CMake's libarchive can read back.
tar -C "$STAGE" -cf - bin | xz -9 >"$BUNDLE/bin.tar.xz"
tar -C "$STAGE" -cf - lib compat | xz -9 >"$BUNDLE/libs.tar.xz"
for f in "${DATA_FILES[@]}"; do gzip -dc "$DATA/$f" >"$STAGE/data/${f%.gz}"; done
tar -C "$STAGE" -cf - data | xz -9 >"$BUNDLE/data.tar.xz"

# ---- sizes: what travels is the bundle plus the tracked and untracked-not-ignored files ----------------------
# A tracked file deleted from the work tree does not travel: stat's failure for it must not end the script.
bytes_of_list() { (cd "$ROOT" && { xargs -0 -r stat -c %s 2>/dev/null || true; } | awk '{s+=$1} END{print s+0}'); }
TRACKED=$(cd "$ROOT" && git ls-files -z | bytes_of_list)
UNTRACKED=$(cd "$ROOT" && git ls-files -z -o --exclude-standard | bytes_of_list)
SHARED=0
[[ -d "$ROOT/shared" ]] && SHARED=$(du -sb "$ROOT/shared" | cut -f1)
mib() { awk -v b="$1" 'BEGIN{printf "%.1f", b/1048576}'; }

# version_of HEADER MACRO_RE: "MAJOR.MINOR.PATCH" from the #defines matching MACRO_RE.
version_of() { awk -v re="$2" '$1 == "#define" && $2 ~ re {printf "%s%s", sep, $3; sep="."}' "$1"; }
CUDNN_V=$(version_of "$CUDA/include/cudnn_version.h" '^CUDNN_(MAJOR|MINOR|PATCHLEVEL)$')
CUBLAS_V=$(version_of "$CUDA/include/cublas_api.h" '^CUBLAS_VER_(MAJOR|MINOR|PATCH)$')
# Not `ldd --version | head -1`: head exits after one line, ldd may still be writing, and under pipefail that
# SIGPIPE (141) ended this script one run in five. The whole output, then its first line's last word.
GLIBC_V=$(ldd --version)
GLIBC_V=${GLIBC_V%%$'\n'*}
GLIBC_V=${GLIBC_V##* }
OS=$(sed -n 's/^PRETTY_NAME=//p' /etc/os-release)  # read, not sourced: a system file is not ours to run
OS=${OS//\"/}
DIRTY=$(cd "$ROOT" && git status --porcelain --untracked-files=no -- CMakeLists.txt core gpu app tests |
    awk '{print $2}' | tr '\n' ' ')
{
    echo "Strata device bundle for tools/gpu-check.sh --bundle"
    echo "built:      $(date -u +%Y-%m-%dT%H:%MZ) on $OS, glibc $GLIBC_V"
    echo "commit:     $(cd "$ROOT" && git rev-parse HEAD) ($(cd "$ROOT" && git log -1 --format=%s | cut -c1-100))"
    if [[ -n "$DIRTY" ]]; then
        echo "dirty:      $DIRTY(the binaries include these uncommitted changes)"
    else
        echo "dirty:      none (CMakeLists.txt core gpu app tests as committed)"
    fi
    echo "options:    Release STRATA_CUDA=ON STRATA_GUI=OFF STRATA_BENCH=OFF STRATA_ONEDNN=ON STRATA_OPENCV=OFF STRATA_MPI=OFF STRATA_WERROR=$WERROR"
    echo "cuda arch:  $ARCHS; nvcc $("$CUDA/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
    echo "built with: cuDNN $CUDNN_V, cuBLAS $CUBLAS_V headers (the device's may differ: gpu-check.sh prints them)"
    echo "binaries:   ${TARGETS[*]}"
    echo
    echo "sizes (bytes):"
    for t in "${TARGETS[@]}"; do printf '  %-40s %10d\n' "bin/$t (in bin.tar.xz)" "$(stat -c %s "$STAGE/bin/$t")"; done
    for f in bin.tar.xz libs.tar.xz data.tar.xz; do printf '  %-40s %10d\n' "$f" "$(stat -c %s "$BUNDLE/$f")"; done
    echo
    echo "carried in libs.tar.xz lib/ (${#CARRIED[@]}):"
    for n in "${CARRIED[@]}"; do printf '  %-36s %s\n' "$n" "${WHERE[$n]}"; done
    echo "carried in libs.tar.xz compat/ (used only if the device's own are missing or too old): ${COMPAT[*]}"
    echo "expected from the device (also in device-libs): ${DEVICE[*]}"
    echo "  cuDNN loads its sub-libraries (libcudnn_ops/cnn/engines_*/graph/heuristic.so.9) from the same folder,"
    echo "  and libnvrtc.so.13 for runtime-compiled engines; libcuda.so.1 and libnvidia-ml.so.1 come with the driver."
    echo "expected from the device's glibc (>= 2.36): ${SYSTEM[*]}"
    echo "not carried: Qt platform plugins (the tests use QtCore/QtTest only), OpenCV, MPI, Python, PyTorch."
} >"$BUNDLE/MANIFEST"

BUNDLE_B=$(du -sb "$BUNDLE" | cut -f1)
TOTAL=$((BUNDLE_B + TRACKED + UNTRACKED + SHARED))
say "bundle $BUNDLE: $(mib "$BUNDLE_B") MiB (bin.tar.xz $(mib "$(stat -c %s "$BUNDLE/bin.tar.xz")"), libs.tar.xz $(mib \
"$(stat -c %s "$BUNDLE/libs.tar.xz")"), data.tar.xz $(mib "$(stat -c %s "$BUNDLE/data.tar.xz")"))"
say "travels with it: tracked $(mib "$TRACKED") MiB + untracked $(mib "$UNTRACKED") MiB + shared/ $(mib "$SHARED") MiB" \
    "= $(mib "$TOTAL") MiB in all (limit here ${LIMIT_MIB} MiB; the device tool's is 64)"
echo "total:      $(mib "$TOTAL") MiB with the working tree (bundle $(mib "$BUNDLE_B") MiB)" >>"$BUNDLE/MANIFEST"
((TOTAL <= LIMIT_MIB * 1048576)) ||
    die "too big: $(mib "$TOTAL") MiB > ${LIMIT_MIB} MiB (the device tool carries 64 MiB at most; untracked files count)"
say "done. On the GPU machine: run with carry [\".gpu-bundle\"]: bash tools/gpu-check.sh --bundle .gpu-bundle"
