#!/usr/bin/python3
"""Accuracy of exported models on the Fashion-MNIST test set (issue 6: Q8_0 within 0.5 points of F32).

Trains examples/fashion_mlp.strata and examples/fashion_cnn.strata for a few epochs with
strata-train, exports each trained model as GGUF F32, F16 and Q8_0, safetensors F16 and ONNX,
runs `strata-train predict` on the 10,000 test images of every file (and on the checkpoint
itself), and prints a Markdown table of the accuracies and their difference to the checkpoint.

    /usr/bin/python3 bench/export_accuracy.py [--strata-train build/bin/strata-train] [--epochs 3]
                                              [--work /tmp/strata-export-accuracy] [--threads 2]

Standard library only; every number in the table is parsed from strata-train's own output.
"""
import argparse
import os
import platform
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEST_IMAGES = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"
TEST_LABELS = "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz"

# (name, format, quantize, file extension)
EXPORTS = [
    ("GGUF F32", "gguf", "f32", ".f32.gguf"),
    ("GGUF F16", "gguf", "f16", ".f16.gguf"),
    ("GGUF Q8_0", "gguf", "q8_0", ".q8_0.gguf"),
    ("safetensors F16", "safetensors", "f16", ".f16.safetensors"),
    ("ONNX F32", "onnx", "f32", ".onnx"),
]


def run(cmd, env):
    print("+ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.exit("command failed (%d):\n%s" % (p.returncode, p.stdout))
    return p.stdout


def accuracy(train, model_file, threads_env):
    out = run([train, "predict", model_file, TEST_IMAGES, "--labels", TEST_LABELS, "--count", "10000", "--quiet"],
              threads_env)
    m = re.search(r"accuracy ([0-9.]+)% on (\d+) samples", out)
    if not m or int(m.group(2)) != 10000:
        sys.exit("no accuracy over 10000 samples in:\n" + out)
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--strata-train", default=os.path.join(ROOT, "build", "bin", "strata-train"))
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--work", default="/tmp/strata-export-accuracy")
    ap.add_argument("--examples", default="fashion_mlp,fashion_cnn")
    args = ap.parse_args()
    for f in (args.strata_train, TEST_IMAGES, TEST_LABELS):
        if not os.path.exists(f):
            sys.exit(f + " is missing")
    os.makedirs(args.work, exist_ok=True)
    env = dict(os.environ, OMP_WAIT_POLICY="passive", OMP_NUM_THREADS=str(args.threads))

    rows = []
    for example in args.examples.split(","):
        project = os.path.join(ROOT, "examples", example + ".strata")
        ckdir = os.path.join(args.work, example + "_ckpt")
        start = time.time()
        run([args.strata_train, project, "--epochs", str(args.epochs), "--threads", str(args.threads),
             "--checkpoint-dir", ckdir, "--quiet"], env)
        train_s = time.time() - start
        base = accuracy(args.strata_train, ckdir, env)
        rows.append((example, "checkpoint (F32)", base, 0.0, os.path.getsize(best_file(ckdir)), ""))
        for name, fmt, quant, ext in EXPORTS:
            out_file = os.path.join(args.work, example + ext)
            cmd = [args.strata_train, "export", ckdir, "--format", fmt, "-o", out_file]
            if quant != "f32":
                cmd += ["--quantize", quant]
            out = run(cmd, env)
            fallbacks = len(re.findall(r"^note: .* stored as F16, not Q8_0", out, re.M))
            acc = accuracy(args.strata_train, out_file, env)
            note = "%d tensor(s) F16 (innermost dim not a multiple of 32)" % fallbacks if fallbacks else ""
            rows.append((example, name, acc, acc - base, os.path.getsize(out_file), note))
        print("%s: trained %d epochs in %.0f s" % (example, args.epochs, train_s), flush=True)

    print()
    print("| example | file | test accuracy | vs checkpoint (points) | bytes | note |")
    print("| --- | --- | --- | --- | --- | --- |")
    for example, name, acc, diff, size, note in rows:
        print("| %s | %s | %.2f%% | %+.2f | %d | %s |" % (example, name, acc, diff, size, note))
    print()
    print("machine: %s, %s, %d CPU(s); %s" % (platform.node(), platform.processor() or platform.machine(),
                                               os.cpu_count() or 0, time.strftime("%Y-%m-%d %H:%M")))


def best_file(ckdir):
    """The checkpoint `predict` uses for a folder: best.safetensors when validation ran, else latest.safetensors."""
    best = os.path.join(ckdir, "best.safetensors")
    return best if os.path.exists(best) else os.path.join(ckdir, "latest.safetensors")


if __name__ == "__main__":
    main()
