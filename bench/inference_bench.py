#!/usr/bin/env python3
"""Inference speed of Strata's predict engine against onnxruntime on the same trained model (issue 19).

For each example project (default: the Fashion-MNIST CNN with BatchNorm, and the plain CNN):
1. trains it briefly with strata-train (--max-steps, Fashion-MNIST from Debian's dataset-fashion-mnist),
2. exports the checkpoint as ONNX (float32),
3. times one forward pass at batch 1 and 256 with --threads threads in turns, round after round:
   Strata's engine as Predict runs it (BatchNorm folded into the convolution before it), Strata with the
   graph as drawn (--no-fold), and onnxruntime on the exported file (all graph optimizations on),
4. prints a table of medians and the ratios (onnxruntime time / Strata time: above 1 means Strata is faster).

Both engines get the same Fashion-MNIST test images. The Strata side times the checkpoint (its weights are the
file's: the export writes them as they are); the file itself is not run through Strata here.

  /usr/bin/python3 bench/inference_bench.py [--build build] [--threads 2] [--rounds 5] [--steps 300]
      [--work /tmp/strata-inference-bench] [PROJECT ...]

The Python needs numpy and onnxruntime (the test venv has both: ~/.cache/strata/test-venv/bin/python).
A benchmark, not a test: run it on a quiet machine.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"inference_bench: {' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout


def idx_images(path):
    import gzip
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    n, h, w = (int.from_bytes(data[i:i + 4], "big") for i in (4, 8, 12))
    return np.frombuffer(data, dtype=np.uint8, offset=16).reshape(n, 1, h, w).astype(np.float32) / 255.0


def find_test_images():
    for d in ("/usr/share/datasets/fashion-mnist",):
        for name in ("t10k-images-idx3-ubyte", "t10k-images-idx3-ubyte.gz"):
            if os.path.exists(os.path.join(d, name)):
                return os.path.join(d, name)
    sys.exit("inference_bench: Fashion-MNIST test images not found (apt-get install dataset-fashion-mnist)")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("projects", nargs="*", default=["examples/fashion_cnn_bn.strata", "examples/fashion_cnn.strata"])
    p.add_argument("--build", default="build")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=300, help="training steps before the export")
    p.add_argument("--work", default="/tmp/strata-inference-bench")
    a = p.parse_args()
    import onnxruntime as ort

    train = os.path.join(a.build, "bin", "strata-train")
    timer = os.path.join(a.build, "bin", "bench_inference")
    for tool in (train, timer):
        if not os.access(tool, os.X_OK):
            sys.exit(f"inference_bench: {tool} missing (cmake --build {a.build})")
    os.makedirs(a.work, exist_ok=True)
    images = idx_images(find_test_images())

    rows = []
    for project in a.projects:
        name = os.path.splitext(os.path.basename(project))[0]
        ckpt = os.path.join(a.work, name + "-ckpt")
        onnx_file = os.path.join(a.work, name + ".onnx")
        run([train, project, "--max-steps", str(a.steps), "--checkpoint-dir", ckpt, "--threads", str(a.threads),
             "--history", "off", "--quiet"])
        run([train, "export", ckpt, "--format", "onnx", "-o", onnx_file])

        o = ort.SessionOptions()
        o.intra_op_num_threads = a.threads
        o.inter_op_num_threads = 1
        o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        session = ort.InferenceSession(onnx_file, o, providers=["CPUExecutionProvider"])
        inp = session.get_inputs()[0].name

        times = {}
        for fold in (True, False):
            out = run([timer, ckpt, "--threads", str(a.threads), "--rounds", str(a.rounds), "--batches", "1,256"]
                      + ([] if fold else ["--no-fold"]))
            for line in out.splitlines():
                j = json.loads(line)
                times[("strata" if fold else "strata-unfolded", j["batch"])] = j["ms"]
        for batch in (1, 256):
            xb = images[:batch]
            r = []
            for _ in range(a.rounds):
                for _ in range(3):
                    session.run(None, {inp: xb})
                reps, t0 = 0, time.perf_counter()
                while reps < 5 or time.perf_counter() - t0 < 0.25:
                    session.run(None, {inp: xb})
                    reps += 1
                r.append((time.perf_counter() - t0) / reps * 1000)
            times[("onnxruntime", batch)] = float(np.median(r))
        rows.append((name, times))

    load = os.getloadavg()
    print(f"# inference_bench {time.strftime('%Y-%m-%d %H:%M')}, {platform.node()}, {os.cpu_count()} CPUs, load "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; onnxruntime {ort.__version__}; {a.threads} threads; "
          f"{a.steps} training steps; medians of {a.rounds} rounds")
    print("| model | Strata b1 ms | Strata unfolded b1 | onnxruntime b1 | ratio b1 | Strata b256 ms | "
          "Strata unfolded b256 | onnxruntime b256 | ratio b256 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, t in rows:
        cells = [name]
        for b in (1, 256):
            s, u, o = t[("strata", b)], t[("strata-unfolded", b)], t[("onnxruntime", b)]
            cells += [f"{s:.3f}", f"{u:.3f}", f"{o:.3f}", f"{o / s:.2f}x"]
        print("| " + " | ".join(cells) + " |")
    print("ratio: onnxruntime's time over Strata's (folded); above 1: Strata is faster. Target (issue 19): >= 1.")


if __name__ == "__main__":
    main()
