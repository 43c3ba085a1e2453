#!/usr/bin/env bash
# The committed style habits, checked: clang-format over every C++ and CUDA file git tracks (no change
# allowed), then, with --tidy BUILD_DIR, clang-tidy's chosen set (.clang-tidy, warnings as errors) over the
# C++ files of core/, app/ and gpu/, using BUILD_DIR's compile_commands.json.
# Usage: tools/check-style.sh [--fix] [--tidy BUILD_DIR]
#   --fix   rewrite the files clang-format would change instead of failing
set -euo pipefail
cd "$(dirname "$0")/.."

fix=0
tidy_build=""
while (($#)); do
    case "$1" in
    --fix) fix=1; shift ;;
    --tidy) tidy_build=${2:?--tidy needs a build folder}; shift 2 ;;
    *) echo "usage: tools/check-style.sh [--fix] [--tidy BUILD_DIR]" >&2; exit 2 ;;
    esac
done

mapfile -t sources < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')
if ((fix)); then
    clang-format -i --style=file "${sources[@]}"
else
    bad=()
    for f in "${sources[@]}"; do
        if ! clang-format --style=file --dry-run --Werror "$f" 2>/dev/null; then bad+=("$f"); fi
    done
    if ((${#bad[@]})); then
        echo "clang-format would change ${#bad[@]} file(s) (run tools/check-style.sh --fix):" >&2
        printf '  %s\n' "${bad[@]}" >&2
        exit 1
    fi
    echo "clang-format: ${#sources[@]} files formatted"
fi

if [[ -n "$tidy_build" ]]; then
    [[ -f "$tidy_build/compile_commands.json" ]] || { echo "no $tidy_build/compile_commands.json" >&2; exit 2; }
    mapfile -t tidy_sources < <(git ls-files 'core/*.cpp' 'app/*.cpp' 'gpu/*.cpp')
    # -Wno-unknown-warning-option: GCC's -Wno-restrict in the compile commands is unknown to clang.
    log=$(mktemp)
    if ! printf '%s\n' "${tidy_sources[@]}" |
        xargs -P "$(nproc)" -n 4 clang-tidy -p "$tidy_build" --quiet --extra-arg=-Wno-unknown-warning-option \
            >"$log" 2>/dev/null; then
        grep -E "(warning|error):" "$log" >&2 || cat "$log" >&2
        echo "clang-tidy: findings above (.clang-tidy lists the checks)" >&2
        rm -f "$log"
        exit 1
    fi
    rm -f "$log"
    echo "clang-tidy: ${#tidy_sources[@]} files clean"
fi
