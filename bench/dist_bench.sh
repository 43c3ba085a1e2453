#!/usr/bin/env bash
# Data-parallel throughput on one machine: each example project trained for a fixed number of steps as
# 1 rank x T threads and as R ranks x (T/R) threads (mpirun), same global batch; reports samples/s, the
# scaling against 1 rank, and per step the compute time, the gradient all-reduce window and the part of it
# not hidden behind backward (strata-train's --metrics-out step events). A benchmark, not a test.
#   bench/dist_bench.sh [BUILD_DIR] [STEPS] [CORES] [MODES]      (defaults: build 300 2 "sync async")
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
STEPS=${2:-300}
CORES=${3:-2}
MODES=${4:-sync async}
RANKS=2
TRAIN=$BUILD/bin/strata-train
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
MPI=(mpirun --allow-run-as-root --oversubscribe --bind-to none)

# summary FILE: mean of the step events' samples/s (strata-train's rate over >= 0.5 s windows) after the first
# 10 steps (warm-up), and the mean compute, all-reduce window and exposed time per step (ranks > 1 only).
summary() {
    /usr/bin/python3 - "$1" <<'PY'
import json, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if '"event":"step"' in l]
steps = steps[10:]
fin = [json.loads(l) for l in open(sys.argv[1]) if '"event":"finished"' in l]
n = len(steps)
rate = sum(s["samples_per_s"] for s in steps) / n
comp = sum(s.get("compute_s", 0) for s in steps) / n * 1e3
comm = sum(s.get("comm_s", 0) for s in steps) / n * 1e3
exp_ = sum(s.get("exposed_comm_s", 0) for s in steps) / n * 1e3
hidden = 1 - exp_ / comm if comm > 0 else float("nan")
print(f"{rate:.0f} {comp:.2f} {comm:.3f} {exp_:.3f} {hidden:.2f}")
PY
}

printf '| project | layout | mode | samples/s | vs 1 rank | compute ms/step | comm window ms/step | exposed ms/step | hidden |\n'
printf '| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n'
for project in fashion_cnn fashion_mlp; do
    p=examples/$project.strata
    "$TRAIN" "$p" --device cpu --threads "$CORES" --max-steps "$STEPS" --history off --quiet \
        --checkpoint-dir "$WORK/c1" --metrics-out "$WORK/one.jsonl" >/dev/null 2>&1
    read -r r1 _ _ _ _ < <(summary "$WORK/one.jsonl")
    printf '| %s | 1 rank x %d threads | - | %s | 1.00 | - | - | - | - |\n' "$project" "$CORES" "$r1"
    for mode in $MODES; do
        "${MPI[@]}" -np $RANKS "$TRAIN" "$p" --device cpu --threads $((CORES / RANKS)) --max-steps "$STEPS" \
            --history off --quiet --dist-mode "$mode" --checkpoint-dir "$WORK/c2" --metrics-out "$WORK/two.jsonl" \
            >/dev/null 2>&1
        read -r r2 c2 w2 e2 h2 < <(summary "$WORK/two.jsonl")
        printf '| %s | %d ranks x %d thread(s) | %s | %s | %.2f | %s | %s | %s | %s |\n' "$project" $RANKS \
            $((CORES / RANKS)) "$mode" "$r2" "$(echo "$r2 / $r1" | bc -l)" "$c2" "$w2" "$e2" "$h2"
    done
done
