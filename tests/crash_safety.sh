#!/usr/bin/env bash
# Crash safety of checkpoint writes (issue 18): strata-train, writing a checkpoint every few milliseconds, is
# killed with SIGKILL at random points, repeatedly. After each kill:
#   - every *.safetensors file in the folder loads (no torn file under a checkpoint's name), which the next
#     run checks: it would log "skipped a checkpoint that does not load";
#   - --resume DIR continues from the newest epoch file the killed run completed (never an older one);
#   - temporary files of the killed writer are gone once the next run has started.
# Finally a resumed run trains to its end and exits 0.
# Usage: crash_safety.sh STRATA_TRAIN PROJECT_FILE [KILLS]
set -euo pipefail

train=$1
project=$2
kills=${3:-10}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ck="$work/ck"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# The newest epoch file on disk (0 when none).
newest_epoch() {
  local n=0 f e
  for f in "$ck"/epoch-*.safetensors; do
    [[ -e "$f" ]] || continue
    e=${f##*/epoch-}
    e=$((10#${e%.safetensors}))
    ((e > n)) && n=$e
  done
  echo "$n"
}

RANDOM=18
for ((i = 1; i <= kills; i++)); do
  before=$(newest_epoch)
  args=("$project" --checkpoint-dir "$ck" --epochs 100000 --threads 1)
  ((before > 0)) && args+=(--resume "$ck")
  log="$work/run-$i.log"
  "$train" "${args[@]}" >"$log" 2>&1 &
  pid=$!
  # Wait until the run has started training (it logs where it resumed, or its first epoch; on a loaded
  # machine that can take seconds), then kill it 20-300 ms later.
  for ((w = 0; w < 600; w++)); do
    grep -qE "resumed from|^epoch [0-9]+:" "$log" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  sleep "0.$(printf '%03d' $((20 + RANDOM % 280)))"
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  if ((before > 0)); then
    grep -q "skipped a checkpoint that does not load" "$log" && fail "run $i found a torn checkpoint: $(cat "$log")"
    resumed=$(sed -n 's/.*resumed from .* at epoch \([0-9]*\),.*/\1/p' "$log" | head -n 1)
    [[ -n "$resumed" ]] || fail "run $i did not resume: $(head -c 2000 "$log")"
    ((resumed >= before)) || fail "run $i resumed at epoch $resumed, but epoch-$before was on disk"
  fi
  # Temporary files of earlier (dead) writers are removed when a run starts; only this kill's may remain.
  for f in "$ck"/*.tmp-*; do
    [[ -e "$f" ]] || continue
    [[ "$f" == *".tmp-$pid" ]] || fail "an orphaned temporary file survived a restart: $f"
  done
  torn=""
  compgen -G "$ck/*.tmp-$pid" >/dev/null && torn=" (killed mid-write: it left a temporary file)"
  echo "kill $i: newest epoch file $(newest_epoch)$torn"
done

final=$(($(newest_epoch) + 2))
"$train" "$project" --checkpoint-dir "$ck" --epochs "$final" --threads 1 --resume "$ck" >"$work/final.log" 2>&1 ||
  fail "the final resumed run failed: $(cat "$work/final.log")"
grep -q "skipped a checkpoint that does not load" "$work/final.log" && fail "the final run found a torn checkpoint"
ls "$ck"/*.tmp-* >/dev/null 2>&1 && fail "temporary files left after the final run"
[[ -e "$ck/epoch-$(printf '%03d' "$final").safetensors" ]] || fail "the final run did not write epoch $final"
echo "ok: $kills kills, final epoch $final"
