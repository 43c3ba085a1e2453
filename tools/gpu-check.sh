#!/usr/bin/env bash
# gpu-check.sh: the CUDA backend checked on a machine WITH a GPU (an H200 box: 16 cores, no internet,
# PyTorch with CUDA). Builds Strata (Release, STRATA_CUDA=ON, STRATA_GUI=OFF), runs test_gpu_device and
# test_backend_ops and test_mixed_precision, trains examples/fashion_cnn.strata for one epoch on cuda:0
# (batch 64 and 1024, in fp32 and with --precision bf16) and on the CPU (batch 64), runs the PyTorch reference bench/gpu_bench.py on the same GPU, and prints one table:
# per-op max error against the CPU reference, samples/s of Strata GPU (fp32 and bf16) vs PyTorch GPU and
# their ratio, Strata CPU samples/s, and peak GPU memory. Meant to finish in under 5 minutes.
#
# Usage: tools/gpu-check.sh [FASHION_MNIST_DIR]
#   FASHION_MNIST_DIR holds {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]
#   (default /usr/share/datasets/fashion-mnist; carry the four .gz files there if the machine lacks them).
# Environment: BUILD_DIR (default <repo>/build), JOBS (16), SKIP_BUILD=1 (reuse BUILD_DIR),
#   PYTHON (a python3 that imports torch with CUDA; default: python3, then /usr/bin/python3),
#   CUDA_ARCH (default 90).
# Exit status: 0 when every stage ran and passed, 1 otherwise (the table still prints).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DATA=${1:-/usr/share/datasets/fashion-mnist}
BUILD=${BUILD_DIR:-$ROOT/build}
JOBS=${JOBS:-16}
CUDA_ARCH=${CUDA_ARCH:-90}
OUT=$BUILD/gpu-check
PROJECT=$ROOT/examples/fashion_cnn.strata
T0=$(date +%s)
FAILED=()

say() { printf '[gpu-check %4ss] %s\n' "$(($(date +%s) - T0))" "$*"; }
fail() {
    FAILED+=("$1")
    say "FAILED: $1"
}
die() {
    say "ERROR: $*"
    exit 1
}

# ---- preconditions --------------------------------------------------------------------------
command -v cmake >/dev/null || die "cmake not found"
command -v nvidia-smi >/dev/null || die "nvidia-smi not found: this script needs a machine with an NVIDIA GPU"
nvidia-smi -L || die "nvidia-smi -L failed: no usable GPU"
if [[ -z "${PYTHON:-}" ]]; then
    for p in python3 /usr/bin/python3; do
        if command -v "$p" >/dev/null && "$p" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
            2>/dev/null; then
            PYTHON=$p
            break
        fi
    done
fi
[[ -n "${PYTHON:-}" ]] || say "WARNING: no python3 with CUDA-enabled PyTorch found; the PyTorch column stays empty"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    [[ -e "$DATA/$f" || -e "$DATA/$f.gz" ]] || die "Fashion-MNIST file $DATA/$f(.gz) missing; pass the folder as argument"
done
[[ -f "$PROJECT" ]] || die "$PROJECT missing"
mkdir -p "$OUT"
rm -f "$OUT"/*.jsonl "$OUT"/*.log "$OUT"/*.mem

# Build dependencies, checked up front so a bare machine gets one clear list instead of a CMake trace.
missing=()
have_header() { [[ -n "$(find /usr/include /usr/local/include /usr/local/cuda/include -maxdepth 3 -name "$1" -print -quit \
    2>/dev/null)" ]]; }
have_header cblas.h || missing+=("cblas.h (libopenblas-dev)")
have_header json.hpp || missing+=("nlohmann/json.hpp (nlohmann-json3-dev)")
have_header zlib.h || missing+=("zlib.h (zlib1g-dev)")
have_header QtTest || missing+=("QtTest (qt6-base-dev)")
have_header cudnn.h || missing+=("cudnn.h (cuDNN 9 in the CUDA toolkit)")
have_header onnx_pb.h || missing+=("onnx/onnx_pb.h (libonnx-dev)")
have_header descriptor.pb.h || missing+=("google/protobuf (libprotobuf-dev)")
command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]] || missing+=("nvcc (CUDA toolkit)")
if ((${#missing[@]})) && [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    die "missing build dependencies: ${missing[*]} (see tools/install-deps.sh; this machine has no internet)"
fi

# ---- build ----------------------------------------------------------------------------------------
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    say "configure ($BUILD, Release, STRATA_CUDA=ON, sm_$CUDA_ARCH)"
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DSTRATA_CUDA=ON -DSTRATA_GUI=OFF \
        -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH" >"$OUT/configure.log" 2>&1 ||
        die "configure failed, see $OUT/configure.log: $(tail -5 "$OUT/configure.log")"
    say "build test_gpu_device test_backend_ops test_mixed_precision test_model_fusion strata-train (-j$JOBS)"
    cmake --build "$BUILD" --target test_gpu_device test_backend_ops test_mixed_precision test_model_fusion strata-train -j"$JOBS" \
        >"$OUT/build.log" 2>&1 ||
        die "build failed, see $OUT/build.log: $(grep -m5 -E 'error|Error' "$OUT/build.log" || tail -5 "$OUT/build.log")"
fi
BIN=$BUILD/bin
for b in test_gpu_device test_backend_ops test_mixed_precision test_model_fusion strata-train; do [[ -x "$BIN/$b" ]] || die "$BIN/$b was not built"; done

say "devices seen by Strata:"
timeout 60 "$BIN/strata-train" --list-devices || fail "strata-train --list-devices"

# ---- tests --------------------------------------------------------------------------------------------
export QT_QPA_PLATFORM=offscreen
say "test_gpu_device"
if ! timeout 180 "$BIN/test_gpu_device" >"$OUT/test_gpu_device.log" 2>&1; then fail "test_gpu_device"; fi
grep -E '^(FAIL|SKIP)' -A1 "$OUT/test_gpu_device.log" | head -20 || true
# test_backend_ops holds fp32 tolerances; TF32 would exceed them, so new CUDA backends start with it off here.
say "test_backend_ops (STRATA_CUDA_TF32=0)"
if ! STRATA_CUDA_TF32=0 timeout 240 "$BIN/test_backend_ops" >"$OUT/test_backend_ops.log" 2>&1; then
    fail "test_backend_ops"
fi
grep -E '^(FAIL|SKIP)' -A1 "$OUT/test_backend_ops.log" | head -20 || true
grep -q 'checking backend cuda:0' "$OUT/test_backend_ops.log" || fail "test_backend_ops did not check cuda:0"
# bf16/fp16 GEMM and convolutions on cuda:0 against the CPU's rounded-input emulation, and a bf16 training run.
say "test_mixed_precision"
if ! timeout 180 "$BIN/test_mixed_precision" >"$OUT/test_mixed_precision.log" 2>&1; then fail "test_mixed_precision"; fi
grep -E '^(FAIL|SKIP)' -A1 "$OUT/test_mixed_precision.log" | head -20 || true

# Fused Conv2D+ReLU and pooling+ReLU steps in a whole model, on every backend (cuda:0 runs the composed ops).
say "test_model_fusion (STRATA_CUDA_TF32=0)"
if ! STRATA_CUDA_TF32=0 timeout 120 "$BIN/test_model_fusion" >"$OUT/test_model_fusion.log" 2>&1; then
    fail "test_model_fusion"
fi
grep -E '^(FAIL|SKIP)' -A1 "$OUT/test_model_fusion.log" | head -20 || true

# ---- projects: absolute data paths, batch 64 and 1024 ---------------------------------------------------
mkproject() {  # mkproject BATCH OUTFILE
    "${PYTHON:-python3}" - "$PROJECT" "$DATA" "$1" "$2" <<'EOF'
import json, os, sys
src, data, batch, dst = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
p = json.load(open(src))
base = os.path.dirname(os.path.abspath(src))
ds = p.get("dataset", {})
for k, v in list(ds.items()):
    if isinstance(v, str) and ("ubyte" in v or v.endswith(".gz")):
        v = v if os.path.isabs(v) else os.path.join(base, v)
        if not os.path.exists(v):  # redirect to the data folder given on the command line
            v = os.path.join(data, os.path.basename(v))
            if not os.path.exists(v) and os.path.exists(v + ".gz"):
                v += ".gz"
            elif not os.path.exists(v) and v.endswith(".gz") and os.path.exists(v[:-3]):
                v = v[:-3]
        ds[k] = v
tr = p.setdefault("training", {})
key = next((k for k in tr if k.lower().replace("_", "") == "batchsize"), "batch_size")
tr[key] = batch
json.dump(p, open(dst, "w"), indent=1)
EOF
}
mkproject 64 "$OUT/cnn_b64.strata" || die "could not prepare the project copy (python3 with json needed)"
mkproject 1024 "$OUT/cnn_b1024.strata"

# Peak GPU memory of a command, sampled by nvidia-smi every 100 ms, minus the idle level before it (MiB).
MEMPID=""
mem_start() {
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 >"$1.base" 2>/dev/null || echo 0 >"$1.base"
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 -lms 100 >"$1" 2>/dev/null &
    MEMPID=$!
}
mem_stop() {
    if [[ -n "$MEMPID" ]]; then kill "$MEMPID" 2>/dev/null || true; wait "$MEMPID" 2>/dev/null || true; fi
    MEMPID=""
}
mem_peak() {  # mem_peak FILE -> MiB above idle
    awk -v base="$(head -1 "$1.base" 2>/dev/null || echo 0)" 'BEGIN{m=0} {if ($1+0 > m) m=$1+0} END{print (m>base ? m-base : 0)}' \
        "$1" 2>/dev/null || echo "?"
}
trap 'mem_stop' EXIT

train() {  # train NAME DEVICE PROJECT BATCH [PRECISION]
    local name=$1 device=$2 proj=$3 batch=$4 precision=${5:-fp32}
    say "strata-train $name ($device, $precision)"
    [[ "$device" == cpu ]] || mem_start "$OUT/$name.mem"
    if ! timeout 240 "$BIN/strata-train" "$proj" --device "$device" --epochs 1 --batch "$batch" \
        --precision "$precision" --metrics-out "$OUT/$name.jsonl" --quiet >"$OUT/$name.log" 2>&1; then
        fail "strata-train $name: $(tail -3 "$OUT/$name.log" | tr '\n' ' ')"
    fi
    [[ "$device" == cpu ]] || mem_stop
}
train strata_gpu_b64 cuda:0 "$OUT/cnn_b64.strata" 64
train strata_gpu_b1024 cuda:0 "$OUT/cnn_b1024.strata" 1024
train strata_gpu_bf16_b64 cuda:0 "$OUT/cnn_b64.strata" 64 bf16
train strata_gpu_bf16_b1024 cuda:0 "$OUT/cnn_b1024.strata" 1024 bf16
train strata_cpu_b64 cpu "$OUT/cnn_b64.strata" 64

if [[ -n "${PYTHON:-}" ]]; then
    say "PyTorch reference (bench/gpu_bench.py, batch 64 and 1024)"
    mem_start "$OUT/torch.mem"
    if ! timeout 240 "$PYTHON" "$ROOT/bench/gpu_bench.py" --data "$DATA" --project "$OUT/cnn_b64.strata" \
        --batch-sizes 64,1024 >"$OUT/torch.jsonl" 2>"$OUT/torch.log"; then
        fail "gpu_bench.py: $(tail -3 "$OUT/torch.log" | tr '\n' ' ')"
    fi
    mem_stop
fi

# ---- table ----------------------------------------------------------------------------------------------
"${PYTHON:-python3}" - "$OUT" <<'EOF' || fail "report"
import json, os, re, sys
out = sys.argv[1]

def epoch(name):
    path = os.path.join(out, name + ".jsonl")
    ev = None
    if os.path.exists(path):
        for line in open(path):
            try:
                j = json.loads(line)
            except ValueError:
                continue
            if j.get("event") == "epoch":
                ev = j
    return ev

def mem(name):
    p = os.path.join(out, name + ".mem")
    if not os.path.exists(p):
        return None
    base = 0
    try:
        base = float(open(p + ".base").read().split()[0])
    except Exception:
        pass
    vals = [float(x) for x in open(p).read().split() if re.match(r"^[0-9.]+$", x)]
    return max(vals) - base if vals else None

def fmt(v, spec="{:,.0f}"):
    return "-" if v is None else spec.format(v)

torch_runs = {}
tp = os.path.join(out, "torch.jsonl")
if os.path.exists(tp):
    for line in open(tp):
        try:
            j = json.loads(line)
            torch_runs[j["batch"]] = j
        except (ValueError, KeyError):
            pass

print()
print("=" * 78)
print("Per-op max error, cuda:0 vs CPU reference (|gpu-ref| / max(1,|ref|), TF32 off)")
print("-" * 78)
ops = []
lp = os.path.join(out, "test_gpu_device.log")
if os.path.exists(lp):
    for line in open(lp):
        m = re.search(r"OPERR (\S+) (\S+)", line)
        if m:
            ops.append((m.group(1), m.group(2)))
if not ops:
    print("  (no OPERR lines: see test_gpu_device.log)")
for i in range(0, len(ops), 3):
    print("  " + "".join("{:<22}{:>9}   ".format(o, e) for o, e in ops[i:i + 3]))
for t in ("test_gpu_device", "test_backend_ops", "test_mixed_precision", "test_model_fusion"):
    p = os.path.join(out, t + ".log")
    tot = [l.strip() for l in open(p) if l.startswith("Totals:")] if os.path.exists(p) else []
    print("  {:<18} {}".format(t, tot[-1] if tot else "did not run"))
print()
print("Fashion-MNIST CNN, one epoch (samples/s; memory: peak above idle, nvidia-smi)")
print("-" * 78)
print("{:>6} {:>12} {:>12} {:>12} {:>7} {:>11} {:>12}".format(
    "batch", "Strata GPU", "Strata bf16", "PyTorch GPU", "ratio", "Strata MiB", "PyTorch MiB"))
cpu = epoch("strata_cpu_b64")
tmem = mem("torch")
for b in (64, 1024):
    ev = epoch("strata_gpu_b%d" % b)
    s = ev.get("samples_per_s") if ev else None
    t = torch_runs.get(b, {}).get("samples_per_s")
    bf = epoch("strata_gpu_bf16_b%d" % b)
    sb = bf.get("samples_per_s") if bf else None
    ratio = (s / t) if (s and t) else None
    print("{:>6} {:>12} {:>12} {:>12} {:>7} {:>11} {:>12}".format(
        b, fmt(s), fmt(sb), fmt(t), fmt(ratio, "{:.2f}"), fmt(mem("strata_gpu_b%d" % b)), fmt(tmem)))
print("Strata CPU, batch 64: {} samples/s".format(fmt(cpu.get("samples_per_s") if cpu else None)))
print("ratio: Strata GPU fp32 / PyTorch GPU (fp32). Strata bf16: GEMM/conv inputs rounded to bf16, fp32 accumulation.")
for b in (64, 1024):
    bf = epoch("strata_gpu_bf16_b%d" % b)
    if bf:
        print("Strata GPU bf16 b%d epoch: %s" % (b, json.dumps({k: v for k, v in bf.items() if "acc" in k or "loss" in k})))
for b in (64, 1024):
    ev = epoch("strata_gpu_b%d" % b) or {}
    extra = {k: v for k, v in ev.items() if "peak" in k or "acc" in k or "loss" in k}
    if extra:
        print("Strata GPU b%d epoch: %s" % (b, json.dumps(extra)))
    tr = torch_runs.get(b)
    if tr:
        print("PyTorch b%d: val_acc %.4f, loss %.4f, peak allocated %.1f MiB, %s, torch %s" % (
            b, tr["val_accuracy"], tr["train_loss"], tr["peak_allocated_bytes"] / 2**20, tr["gpu"], tr["torch"]))
print("=" * 78)
EOF

say "done in $(($(date +%s) - T0)) s; logs in $OUT"
if ((${#FAILED[@]})); then
    printf 'FAILED STAGES:\n'
    printf '  - %s\n' "${FAILED[@]}"
    exit 1
fi
echo "ALL STAGES PASSED"
