#!/usr/bin/env bash
# Step time of two strata-train builds on one project, alternating their runs so that the machine's drift
# between minutes falls on both: prints each build's min and median step (ms) and the new/old ratios.
#   bench/ab_profile.sh OLD_STRATA_TRAIN NEW_STRATA_TRAIN PROJECT [STEPS=20] [ROUNDS=6]
# e.g. an old build from a worktree: git worktree add /tmp/old <commit> && cmake -S /tmp/old -B /tmp/old/build
# -DCMAKE_BUILD_TYPE=Release && cmake --build /tmp/old/build --target strata-train
set -euo pipefail
if [[ $# -lt 3 ]]; then
  sed -n '2,6p' "$0" >&2
  exit 2
fi
old=$1 new=$2 project=$3 steps=${4:-20} rounds=${5:-6}
for ((round = 0; round < rounds; ++round)); do
  for tag in old new; do
    bin=$old
    [[ $tag == new ]] && bin=$new
    ms=$("$bin" profile "$project" --steps "$steps" 2>&1 | awk '/^step /{print $2}')
    [[ -n "$ms" ]] || { echo "ab_profile.sh: $bin profile $project printed no step time" >&2; exit 1; }
    echo "$tag $ms"
  done
done | python3 -c '
import statistics, sys
runs = {}
for line in sys.stdin:
    tag, ms = line.split()
    runs.setdefault(tag, []).append(float(ms))
for tag in ("old", "new"):
    print("%s: min %.2f ms, median %.2f ms  (%s)" % (tag, min(runs[tag]), statistics.median(runs[tag]),
                                                  " ".join("%.2f" % v for v in runs[tag])))
print("new/old: min %.3f, median %.3f" % (min(runs["new"]) / min(runs["old"]),
                                         statistics.median(runs["new"]) / statistics.median(runs["old"])))
'
