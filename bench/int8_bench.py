#!/usr/bin/env python3
"""Int8 inference (issue 39): Strata's int8 engine against its float32 engine and onnxruntime's int8 kernels.

For each example project (default: the Fashion-MNIST CNN with BatchNorm, bench/residual_template.strata and the
Debian-sections Transformer, whose data tools/make_debian_sections_dataset.py makes; a text model is fed word ids
spread over its vocabulary, the same in every runtime):
1. trains it briefly with strata-train (--max-steps; Fashion-MNIST from Debian's dataset-fashion-mnist),
2. exports the checkpoint as an int8 QDQ ONNX file (export --quantize int8, calibrated on training images) and
   as a float32 ONNX file,
3. times one forward pass at batch 1 and 256 with --threads threads, in turns, round after round, so a busy
   machine slows all of them alike: bench_int8 (Strata's float32 engine on the int8 file's dequantized weights,
   BatchNorm folded, as Predict runs it; then Strata's int8 engine on the file), onnxruntime on the int8 file
   (all graph optimizations: QLinearConv, QGemm) and onnxruntime on the float32 file,
4. prints a table of medians with each figure's spread (min-max over the rounds) and the ratios.

  /usr/bin/python3 bench/int8_bench.py [--build build] [--threads 2] [--rounds 5] [--steps 200]
      [--work /tmp/strata-int8-bench] [PROJECT ...]

The Python needs numpy and onnxruntime (the test venv has both: ~/.cache/strata/test-venv/bin/python).
A benchmark, not a test: the quieter the machine, the narrower the spread.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np


def run(cmd, cwd=None):
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if r.returncode != 0:
        sys.exit(f"int8_bench: {' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout


def idx_images(path):
    import gzip
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    n, h, w = (int.from_bytes(data[i:i + 4], "big") for i in (4, 8, 12))
    return np.frombuffer(data, dtype=np.uint8, offset=16).reshape(n, 1, h, w).astype(np.float32)


def ort_ms(session, x):
    """Median ms of one pass, repeated for about a quarter of a second (at least 5), after 3 warm-up passes."""
    inp = session.get_inputs()[0].name
    for _ in range(3):
        session.run(None, {inp: x})
    times, t0 = [], time.perf_counter()
    while len(times) < 5 or (time.perf_counter() - t0 < 0.25 and len(times) < 2000):
        t = time.perf_counter()
        session.run(None, {inp: x})
        times.append((time.perf_counter() - t) * 1000)
    return float(np.median(times))


def token_ids(project, batch):
    """Word ids for a text model as bench_int8 feeds them (core/infer/Compression.cpp timingInputs), or None for a
    model whose input does not feed an Embedding."""
    with open(project) as f:
        graph = json.load(f)["graph"]
    nodes = {n["id"]: n for n in graph["nodes"]}
    inputs = [n for n in graph["nodes"] if n["type"] == "Input"]
    for e in graph["edges"]:
        to = nodes[e["to"]["node"]]
        if nodes[e["from"]["node"]]["type"] == "Input" and to["type"] == "Embedding" and e["to"]["port"] == "in":
            vocab, length = to["params"]["vocab"], inputs[0]["params"]["shape"][0]
            i = np.arange(batch * length, dtype=np.uint64)
            ids = 1 + ((i * np.uint64(2654435761)) % np.uint64(1000)) % np.uint64(vocab - 1)
            return ids.astype(np.float32).reshape(batch, length)
    return None


def spread(values):
    return f"{np.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("projects", nargs="*", default=["examples/fashion_cnn_bn.strata", "bench/residual_template.strata",
                                                   "examples/debian_sections_transformer.strata"])
    p.add_argument("--build", default="build")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=200, help="training steps before the export")
    p.add_argument("--work", default="/tmp/strata-int8-bench")
    a = p.parse_args()
    import onnxruntime as ort

    train = os.path.abspath(os.path.join(a.build, "bin", "strata-train"))
    timer = os.path.abspath(os.path.join(a.build, "bin", "bench_int8"))
    a.work = os.path.abspath(a.work)
    for tool in (train, timer):
        if not os.access(tool, os.X_OK):
            sys.exit(f"int8_bench: {tool} missing (cmake --build {a.build} --target strata-train bench_int8)")
    os.makedirs(a.work, exist_ok=True)
    images = idx_images("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz")

    def session(path):
        o = ort.SessionOptions()
        o.intra_op_num_threads = a.threads
        o.inter_op_num_threads = 1
        o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        return ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])

    rows = []
    for project in a.projects:
        name = os.path.splitext(os.path.basename(project))[0]
        with open(project) as f:
            dataset = json.load(f).get("dataset", {})
        train_path = dataset.get("train_path", "")
        if train_path and not os.path.exists(os.path.join(os.path.dirname(os.path.abspath(project)), train_path)):
            print(f"int8_bench: {name} skipped: {train_path} is missing (for the Debian corpora: /usr/bin/python3 "
                  f"tools/make_debian_sections_dataset.py)", file=sys.stderr)
            continue
        ckpt = os.path.join(a.work, name + "-ckpt")
        int8_file = os.path.join(a.work, name + "-int8.onnx")
        f32_file = os.path.join(a.work, name + ".onnx")
        run([train, project, "--max-steps", str(a.steps), "--checkpoint-dir", ckpt, "--threads", str(a.threads),
             "--history", "off", "--quiet"])
        # From the project's folder: a checkpoint's relative data paths (the calibration's) are the current folder's.
        run([train, "export", ckpt, "--format", "onnx", "--quantize", "int8", "-o", int8_file],
            cwd=os.path.dirname(os.path.abspath(project)))
        run([train, "export", ckpt, "--format", "onnx", "-o", f32_file])
        ort_int8, ort_f32 = session(int8_file), session(f32_file)
        times = {}
        for _ in range(a.rounds):
            out = run([timer, int8_file, "--threads", str(a.threads), "--rounds", "1", "--batches", "1,256"])
            for line in out.splitlines():
                j = json.loads(line)
                times.setdefault(("strata fp32", j["batch"]), []).extend(j["fp32_ms"])
                times.setdefault(("strata int8", j["batch"]), []).extend(j["int8_ms"])
            for batch in (1, 256):
                ids = token_ids(project, batch)
                x = images[:batch] if ids is None else ids
                times.setdefault(("ort int8", batch), []).append(ort_ms(ort_int8, x))
                times.setdefault(("ort fp32", batch), []).append(ort_ms(ort_f32, x))
        rows.append((name, times))

    load = os.getloadavg()
    print(f"# int8_bench {time.strftime('%Y-%m-%d %H:%M')}, {platform.node()}, {os.cpu_count()} CPUs, load "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; onnxruntime {ort.__version__}; {a.threads} threads; "
          f"{a.steps} training steps; ms per pass, median (min-max) of {a.rounds} rounds")
    print("| model | batch | Strata fp32 | Strata int8 | onnxruntime int8 | onnxruntime fp32 | "
          "int8 speed-up over Strata fp32 | onnxruntime int8 / Strata int8 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, t in rows:
        for b in (1, 256):
            f, i, oi, of = (t[(k, b)] for k in ("strata fp32", "strata int8", "ort int8", "ort fp32"))
            print(f"| {name} | {b} | {spread(f)} | {spread(i)} | {spread(oi)} | {spread(of)} | "
                  f"{np.median(f) / np.median(i):.2f}x | {np.median(oi) / np.median(i):.2f}x |")
    print("Goals (issue 39): int8 >= 2x Strata fp32; onnxruntime int8 / Strata int8 above 1 (Strata faster).")


if __name__ == "__main__":
    main()
