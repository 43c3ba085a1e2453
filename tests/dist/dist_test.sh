#!/usr/bin/env bash
# Data-parallel checks of strata-train under mpirun (CTest runs one case per test; tests/CMakeLists.txt).
#   dist_test.sh CASE STRATA_TRAIN DIST_COMPARE MPIEXEC SOURCE_DIR
# Cases: equiv2-1k equiv2-huge equiv3-1k equiv3-huge (sync on 2 or 3 ranks, 1 KiB or 1 GiB buckets, against
# one process on the same global batch: max abs parameter difference <= 1e-5; rank 0's metrics carry every
# rank's device telemetry), localsgd1 (local-sgd:1 equals
# sync), fail (a rank throws at step 5: every rank ends within 30 s, non-zero, naming the rank), mismatch (a
# project differing on one rank stops the job at start), resume (a 2-rank checkpoint resumes on 1 and 2 ranks),
# async (2 and 3 ranks give the same weights, which differ from sync's: one step stale, the same global sums).
# In one process (--device cpu,cpu: one engine thread per replica, ReplicaRun): threads (2 and 3 replicas in
# sync equal one process, 1e-5; async on 2 equals mpirun's async on 2; a 2-rank mpirun checkpoint resumed on
# 2 replicas continues like the uninterrupted run), threads-fail (replica 1 throws at step 5: the process ends
# non-zero within 30 s naming rank 1 and the reason).
# Start-up comparison and collective timeout: mismatch-options (one rank given another --max-steps, --bucket-mb
# or --resume: the job stops at the start within 30 s, every rank naming rank 1, the option and both values),
# timeout (rank 1 stops answering at step 5, STRATA_TEST_STALL_STEP: with --collective-timeout 2 rank 0 ends
# the job within 30 s naming itself, the step and the collective), threads-timeout (the same with replicas in
# one process: rank 0 names rank 1 as the one it waited for). killed-rank (rank 1 is killed with SIGKILL after the
# first epoch; mpirun ends rank 0, whose run history row stays 'running' until the next start, `runs list`,
# marks it interrupted with the last epoch it finished). tasks (a regression and a multi-label project on the
# initial weights, learning rate 0: every val_ metric of 2 and 3 ranks and of 2 replicas in one process equals
# one process's to 1e-6 relative: the metrics are the whole validation split's, not rank 0's shard's).
set -u
CASE=$1 TRAIN=$2 COMPARE=$3 MPIEXEC=$4 SRC=$5
SMALL=$SRC/tests/dist/small.strata
NOBN=$SRC/tests/dist/small_nobn.strata
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# As root Open MPI wants --allow-run-as-root; more ranks than cores need --oversubscribe.
MPI=("$MPIEXEC" --allow-run-as-root --oversubscribe --bind-to none)
export OMPI_MCA_rmaps_base_oversubscribe=1

say() { echo "dist_test $CASE: $*"; }
die() { say "FAILED: $*"; exit 1; }

# train NAME RANKS PROJECT [options...]: checkpoints in $WORK/NAME; RANKS 0 runs without mpirun.
train() {
    local name=$1 ranks=$2 project=$3
    shift 3
    local cmd=("$TRAIN" "$project" --device cpu --history off --checkpoint-dir "$WORK/$name" "$@")
    if [ "$ranks" = 0 ]; then
        "${cmd[@]}" >"$WORK/$name.log" 2>&1
    else
        "${MPI[@]}" -np "$ranks" "${cmd[@]}" >"$WORK/$name.log" 2>&1
    fi
    local rc=$?
    if [ $rc -ne 0 ]; then
        cat "$WORK/$name.log"
        die "$name exited with $rc"
    fi
}

# rank1_fails MESSAGE CMD...: CMD (a job of 3 ranks on $SMALL) with rank 1 throwing at step 5 must end
# non-zero within 30 s, printing MESSAGE.
rank1_fails() {
    local message=$1 start rc took
    shift
    start=$(date +%s)
    STRATA_TEST_FAIL_STEP=5 STRATA_TEST_FAIL_RANK=1 timeout 120 "$@" --history off --quiet \
        --checkpoint-dir "$WORK/fail" --max-steps 20 >"$WORK/fail.log" 2>&1
    rc=$?
    took=$(($(date +%s) - start))
    cat "$WORK/fail.log"
    [ $rc -ne 0 ] || die "the job exited 0"
    [ $rc -ne 124 ] || die "the job hung (killed by timeout after 120 s)"
    [ $took -le 30 ] || die "the job took $took s to end (30 s allowed)"
    grep -qF "$message" "$WORK/fail.log" || die "no message naming rank 1 and the reason ($message)"
    say "ended in $took s with exit $rc"
}

compare() {
    "$COMPARE" "$WORK/$1" "$WORK/$2" "$3" || die "$1 and $2 differ by more than $3"
}

case "$CASE" in
equiv2-1k | equiv2-huge | equiv3-1k | equiv3-huge)
    ranks=${CASE:5:1}
    bucket=0.0009765625
    [[ $CASE == *huge ]] && bucket=1024
    train one 0 "$SMALL" --max-steps 20
    train many "$ranks" "$SMALL" --max-steps 20 --bucket-mb "$bucket" --metrics-out "$WORK/metrics.jsonl"
    grep -q "data parallel: rank 0 of $ranks" "$WORK/many.log" || { cat "$WORK/many.log"; die "no data-parallel line"; }
    grep '"event":"epoch"' "$WORK/metrics.jsonl" | grep -q "\"ranks\":$ranks" || die "epoch events lack \"ranks\":$ranks"
    # Every rank's device reaches rank 0's metrics (its first sample is taken as its run starts).
    for ((r = 1; r < ranks; r++)); do
        grep '"event":"telemetry"' "$WORK/metrics.jsonl" | grep -q "\"device\":\"cpu (rank $r)\"" ||
            die "no telemetry of rank $r in rank 0's metrics"
    done
    grep '"event":"step"' "$WORK/metrics.jsonl" | tail -1
    compare one many 1e-5
    ;;
localsgd1)
    train sync 2 "$NOBN" --max-steps 20
    train local 2 "$NOBN" --max-steps 20 --dist-mode local-sgd:1
    compare sync local 1e-5
    ;;
async)
    train sync 2 "$NOBN" --max-steps 20
    train async2 2 "$NOBN" --max-steps 20 --dist-mode async --metrics-out "$WORK/async.jsonl"
    train async3 3 "$NOBN" --max-steps 20 --dist-mode async
    grep -q "async: each step applies the previous step's gradients" "$WORK/async2.log" ||
        { cat "$WORK/async2.log"; die "no async line"; }
    # Every step but the first of each epoch (whose predecessor's gradients were applied as the epoch ended)
    # completed the previous step's all-reduce and timed it.
    steps=$(grep -c '"event":"step"' "$WORK/async.jsonl")
    epochs=$(grep '"event":"step"' "$WORK/async.jsonl" | grep -o '"epoch":[0-9]*' | sort -u | wc -l)
    timed=$(grep '"event":"step"' "$WORK/async.jsonl" | grep '"comm_s"' | grep -vc '"comm_s":0.0[,}]')
    if [ "$steps" -ne 20 ] || [ "$timed" -ne $((steps - epochs)) ]; then
        die "$timed of $steps steps timed an all-reduce ($epochs epochs: $((steps - epochs)) expected)"
    fi
    compare async2 async3 1e-5
    "$COMPARE" "$WORK/sync" "$WORK/async2" 1e-4 --differ || die "async gave sync's weights (no staleness)"
    ;;
fail)
    rank1_fails "rank 1 of 3: step 5: failure injected" "${MPI[@]}" -np 3 "$TRAIN" "$SMALL" --device cpu
    ;;
mismatch)
    sed 's/"learning_rate": 0.05/"learning_rate": 0.04/' "$SMALL" >"$WORK/other.strata"
    start=$(date +%s)
    timeout 120 "${MPI[@]}" -np 1 "$TRAIN" "$SMALL" --device cpu --history off --checkpoint-dir "$WORK/a" : \
        -np 1 "$TRAIN" "$WORK/other.strata" --device cpu --history off --checkpoint-dir "$WORK/a" \
        >"$WORK/mismatch.log" 2>&1
    rc=$?
    cat "$WORK/mismatch.log"
    [ $rc -ne 0 ] || die "the job exited 0"
    [ $rc -ne 124 ] || die "the job hung"
    grep -q "rank 1 of 2 differs from rank 0 in the project's training settings, training.learning_rate: rank 0 has 0.05, rank 1 has 0.04" \
        "$WORK/mismatch.log" || die "no message naming rank 1 and the setting"
    ! ls "$WORK/a"/*.safetensors >/dev/null 2>&1 || die "a checkpoint was written"
    say "stopped at start in $(($(date +%s) - start)) s"
    ;;
mismatch-options)
    # Each: rank 0 as usual, rank 1 with one option more; the job must stop at the start, every rank saying
    # where rank 1 differs (before: a hang in MPI_Wait, or a raw MPI_ERR_TRUNCATE).
    train part 2 "$SMALL" --max-steps 3
    while IFS='|' read -r extra expected; do
        read -ra opts <<<"$extra"
        start=$(date +%s)
        timeout 120 "${MPI[@]}" -np 1 "$TRAIN" "$SMALL" --device cpu --history off --quiet \
            --checkpoint-dir "$WORK/m" : -np 1 "$TRAIN" "$SMALL" --device cpu --history off --quiet \
            --checkpoint-dir "$WORK/m" "${opts[@]}" >"$WORK/mismatch.log" 2>&1
        rc=$?
        took=$(($(date +%s) - start))
        cat "$WORK/mismatch.log"
        [ $rc -ne 0 ] || die "$extra: the job exited 0"
        [ $rc -ne 124 ] || die "$extra: the job hung"
        [ $took -le 30 ] || die "$extra: the job took $took s to stop (30 s allowed)"
        # Counted as occurrences, not lines: mpirun forwards each rank's stderr as it comes.
        [ "$(grep -oF "$expected" "$WORK/mismatch.log" | wc -l)" -eq 2 ] || die "$extra: not both ranks said: $expected"
        grep -q MPI_ERR "$WORK/mismatch.log" && die "$extra: a raw MPI error"
        say "$extra: stopped at the start in $took s"
    done <<EOF2
--max-steps 5|rank 1 of 2 differs from rank 0 in max_steps (--max-steps): rank 0 has none, rank 1 has 5
--bucket-mb 0.5|rank 1 of 2 differs from rank 0 in bucket_size (--bucket-mb): rank 0 has automatic, rank 1 has 524288 bytes
--resume $WORK/part|rank 1 of 2 differs from rank 0 in resume (--resume): rank 0 has none, rank 1 has $WORK/part (latest)
EOF2
    ;;
timeout | threads-timeout)
    if [ "$CASE" = timeout ]; then
        job=("${MPI[@]}" -np 2 "$TRAIN" "$SMALL" --device cpu)
        expected="rank 0 of 2: step 5: BatchNorm's global sums waited longer than 2 s for the other ranks"
    else
        job=("$TRAIN" "$SMALL" --device "cpu,cpu")
        expected="rank 0 of 2: step 5: BatchNorm's global sums waited longer than 2 s for rank 1"
    fi
    start=$(date +%s)
    STRATA_TEST_STALL_STEP=5 STRATA_TEST_STALL_RANK=1 timeout 120 "${job[@]}" --history off --quiet \
        --checkpoint-dir "$WORK/t" --max-steps 20 --collective-timeout 2 >"$WORK/timeout.log" 2>&1
    rc=$?
    took=$(($(date +%s) - start))
    cat "$WORK/timeout.log"
    [ $rc -ne 0 ] || die "the job exited 0"
    [ $rc -ne 124 ] || die "the job hung (killed by timeout after 120 s)"
    [ $took -le 30 ] || die "the job took $took s to end (30 s allowed)"
    grep -qF "$expected" "$WORK/timeout.log" || die "no message naming the rank, the step and the collective"
    grep -qF -- "--collective-timeout" "$WORK/timeout.log" || die "the message does not name the flag"
    say "ended in $took s with exit $rc"
    ;;
killed-rank)
    "${MPI[@]}" -np 2 "$TRAIN" "$SMALL" --device cpu --history "$WORK/h.sqlite" --quiet --checkpoint-dir "$WORK/k" \
        --epochs 100000 --metrics-out "$WORK/k.jsonl" >"$WORK/killed.log" 2>&1 &
    mpirun_pid=$!
    for _ in $(seq 600); do
        grep -q '"event":"epoch"' "$WORK/k.jsonl" 2>/dev/null && break
        sleep 0.1
    done
    grep -q '"event":"epoch"' "$WORK/k.jsonl" || { kill "$mpirun_pid"; die "no epoch finished"; }
    # The ranks are mpirun's children; each one's environment says its rank.
    rank0="" rank1=""
    for pid in $(pgrep -P "$mpirun_pid"); do
        r=$(tr '\0' '\n' <"/proc/$pid/environ" | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
        [ "$r" = 0 ] && rank0=$pid
        [ "$r" = 1 ] && rank1=$pid
    done
    if [ -z "$rank0" ] || [ -z "$rank1" ]; then
        kill "$mpirun_pid"
        die "ranks not found among mpirun's children"
    fi
    kill -9 "$rank1"
    wait "$mpirun_pid"
    say "mpirun exited with $?"
    # Rank 0 ends too (or is left a zombie, which counts as ended).
    for _ in $(seq 100); do
        [ -e "/proc/$rank0" ] || break
        [ "$(sed 's/.*) //' "/proc/$rank0/stat" | cut -c1)" = Z ] && break
        sleep 0.1
    done
    "$TRAIN" runs list --history "$WORK/h.sqlite" >"$WORK/list.log" 2>&1
    "$TRAIN" runs show 1 --history "$WORK/h.sqlite" >"$WORK/show.log" 2>&1
    cat "$WORK/list.log" "$WORK/show.log"
    grep -q "run 1 marked interrupted" "$WORK/list.log" || die "runs list did not mark the run"
    grep -q "status *interrupted: the process (pid $rank0) ended before the run did" "$WORK/show.log" ||
        die "the run is not interrupted"
    epochs=$(sed -n 's/^  epochs *//p' "$WORK/show.log")
    [ "${epochs:-0}" -ge 1 ] || die "no epoch recorded"
    grep -q "the last epoch it finished is $epochs" "$WORK/show.log" || die "the message does not name epoch $epochs"
    ;;
resume)
    train whole2 2 "$SMALL" --max-steps 20
    train whole1 0 "$SMALL" --max-steps 20
    train part2 2 "$SMALL" --max-steps 7
    train cont2 2 "$SMALL" --max-steps 20 --resume "$WORK/part2"
    train cont1 0 "$SMALL" --max-steps 20 --resume "$WORK/part2"
    grep -q "resumed from" "$WORK/cont2.log" || { cat "$WORK/cont2.log"; die "cont2 did not resume"; }
    compare whole2 cont2 1e-6
    compare whole1 cont1 1e-5
    ;;
threads)
    train one 0 "$SMALL" --max-steps 20
    train two 0 "$SMALL" --max-steps 20 --device cpu,cpu --bucket-mb 0.0009765625 --metrics-out "$WORK/two.jsonl"
    train three 0 "$SMALL" --max-steps 20 --device cpu,cpu,cpu
    grep -q "data parallel: rank 0 of 2 (threads)" "$WORK/two.log" || { cat "$WORK/two.log"; die "no data-parallel line"; }
    grep '"event":"epoch"' "$WORK/two.jsonl" | grep -q '"ranks":2' || die "epoch events lack \"ranks\":2"
    compare one two 1e-5
    compare one three 1e-5
    "$COMPARE" "$WORK/one" "$WORK/two" 1e-9 --differ >/dev/null && say "(two replicas differ from one process in rounding)"
    train async-mpi 2 "$NOBN" --max-steps 20 --dist-mode async
    train async-threads 0 "$NOBN" --max-steps 20 --dist-mode async --device cpu,cpu
    compare async-mpi async-threads 1e-5
    train whole2 2 "$SMALL" --max-steps 20
    train part2 2 "$SMALL" --max-steps 7
    train cont-threads 0 "$SMALL" --max-steps 20 --resume "$WORK/part2" --device cpu,cpu
    grep -q "resumed from" "$WORK/cont-threads.log" || { cat "$WORK/cont-threads.log"; die "no resume"; }
    compare whole2 cont-threads 1e-6
    ;;
tasks)
    # a,b,c; y = 3a - 2b + c; tags: pos_a, pos_b, big (a + b > 1), from a fixed linear congruential sequence.
    awk 'BEGIN { s = 12345; print "a,b,c,y,tags"
        for (i = 0; i < 301; i++) { for (k = 0; k < 3; k++) { s = (s * 1103515245 + 12345) % 2147483648
                v[k] = s / 2147483648 * 4 - 2 }
            t = ""; if (v[0] > 0) t = "pos_a"; if (v[1] > 0) t = t (t == "" ? "" : "|") "pos_b"
            if (v[0] + v[1] > 1) t = t (t == "" ? "" : "|") "big"
            printf "%.5f,%.5f,%.5f,%.5f,%s\n", v[0], v[1], v[2], 3 * v[0] - 2 * v[1] + v[2], t } }' >"$WORK/t.csv"
    cut -d, -f1-4 "$WORK/t.csv" >"$WORK/regression.csv"
    cut -d, -f1-3,5 "$WORK/t.csv" >"$WORK/multi_label.csv"
    for task in regression multi_label; do
        units=1 target='"target_columns": ["y"], "normalization": "standardize"' loss=mse
        [ $task = multi_label ] && units=3 target='"label_column": "tags", "label_separator": "|"' loss=bce_logits
        cat >"$WORK/$task.strata" <<EOF3
{"format_version": 1, "name": "$task",
 "graph": {"nodes": [{"id": 1, "type": "Input", "name": "input", "params": {"shape": [3]}},
                     {"id": 2, "type": "Dense", "name": "fc1", "params": {"units": 16}},
                     {"id": 3, "type": "ReLU", "name": "relu", "params": {}},
                     {"id": 4, "type": "Dense", "name": "out", "params": {"units": $units}}],
           "edges": [{"from": {"node": 1, "port": "out"}, "to": {"node": 2, "port": "in"}},
                     {"from": {"node": 2, "port": "out"}, "to": {"node": 3, "port": "in"}},
                     {"from": {"node": 3, "port": "out"}, "to": {"node": 4, "port": "in"}}]},
 "dataset": {"task": "$task", "kind": "csv", "train_path": "$WORK/$task.csv", "validation_split": 0.3, $target},
 "training": {"optimizer": "sgd", "momentum": 0.0, "learning_rate": 0.0, "loss": "$loss", "epochs": 1,
              "batch_size": 32, "seed": 3, "threads": 1}}
EOF3
        train "$task-1" 0 "$WORK/$task.strata" --metrics-out "$WORK/$task-1.jsonl"
        train "$task-2" 2 "$WORK/$task.strata" --metrics-out "$WORK/$task-2.jsonl"
        train "$task-3" 3 "$WORK/$task.strata" --metrics-out "$WORK/$task-3.jsonl"
        train "$task-t" 0 "$WORK/$task.strata" --device cpu,cpu --metrics-out "$WORK/$task-t.jsonl"
        grep '"event":"epoch"' "$WORK/$task-1.jsonl" | grep -o '"val_[^"]*":[^,}]*' >"$WORK/$task-1.val"
        [ "$(grep -vc '^"val_\(loss\|acc\)"' "$WORK/$task-1.val")" -ge 3 ] || die "$task: no task metrics in one process's epoch"
        for run in 2 3 t; do
            grep '"event":"epoch"' "$WORK/$task-$run.jsonl" | grep -o '"val_[^"]*":[^,}]*' >"$WORK/$task-$run.val"
            paste -d' ' "$WORK/$task-1.val" "$WORK/$task-$run.val" | tr ':' ' ' | awk -v what="$task-$run" '
                { n++; d = $2 - $4; if (d < 0) d = -d; m = $2 < 0 ? -$2 : $2; if (m < 1) m = 1
                  if ($1 != $3 || d > 1e-6 * m) { print what ": " $1 " " $4 " vs one process " $2; bad = 1 } }
                END { if (bad || n < 3) exit 1 }' || die "$task-$run: the metrics differ from one process's"
        done
        say "$task: $(wc -l <"$WORK/$task-1.val") validation metrics equal on 2 and 3 ranks and 2 replicas"
    done
    ;;
threads-fail)
    rank1_fails "rank 1 of 3 failed: step 5: failure injected" "$TRAIN" "$SMALL" --device cpu,cpu,cpu
    ;;
*)
    die "unknown case"
    ;;
esac
say "passed"
