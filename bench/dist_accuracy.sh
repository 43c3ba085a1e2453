#!/usr/bin/env bash
# What data parallelism costs in accuracy: one project trained for whole epochs by one process and by R ranks
# (mpirun) in each mode (sync, local-sgd:K, async), same global batch and seed; prints the validation accuracy
# of the last epoch and its gap to the 1-process run. A benchmark, not a test (minutes per run).
#   bench/dist_accuracy.sh [BUILD_DIR] [PROJECT] [EPOCHS] [RANKS] [MODES]
#   defaults: build examples/fashion_cnn.strata 3 2 "sync local-sgd:8 async"
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
PROJECT=${2:-examples/fashion_cnn.strata}
EPOCHS=${3:-3}
RANKS=${4:-2}
MODES=${5:-sync local-sgd:8 async}
TRAIN=$BUILD/bin/strata-train
CORES=$(nproc)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
MPI=(mpirun --allow-run-as-root --oversubscribe --bind-to none)

# last FILE: the last epoch event's validation accuracy (%) and the run's seconds.
last() {
    /usr/bin/python3 - "$1" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
ep = [l for l in lines if l.get("event") == "epoch"]
fin = [l for l in lines if l.get("event") == "finished"]
print(f"{100 * ep[-1]['val_acc']:.2f} {fin[-1].get('seconds', float('nan')) if fin else float('nan'):.0f}")
PY
}

printf '| project | run | epochs | val accuracy %% | gap to 1 process | seconds |\n| --- | --- | --- | --- | --- | --- |\n'
"$TRAIN" "$PROJECT" --device cpu --threads "$CORES" --epochs "$EPOCHS" --history off --quiet \
    --checkpoint-dir "$WORK/one" --metrics-out "$WORK/one.jsonl" >/dev/null 2>&1
read -r a1 s1 < <(last "$WORK/one.jsonl")
printf '| %s | 1 process x %d threads | %d | %s | - | %s |\n' "$(basename "$PROJECT" .strata)" "$CORES" "$EPOCHS" "$a1" "$s1"
for mode in $MODES; do
    "${MPI[@]}" -np "$RANKS" "$TRAIN" "$PROJECT" --device cpu --threads $((CORES / RANKS > 0 ? CORES / RANKS : 1)) \
        --epochs "$EPOCHS" --history off --quiet --dist-mode "$mode" --checkpoint-dir "$WORK/$RANKS-$mode" \
        --metrics-out "$WORK/many.jsonl" >/dev/null 2>&1
    read -r a s < <(last "$WORK/many.jsonl")
    printf '| %s | %d ranks, %s | %d | %s | %+.2f | %s |\n' "$(basename "$PROJECT" .strata)" "$RANKS" "$mode" \
        "$EPOCHS" "$a" "$(echo "$a - $a1" | bc -l)" "$s"
done
