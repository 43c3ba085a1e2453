#!/usr/bin/env python3
"""Model compression on Fashion-MNIST (examples/fashion_cnn.strata), in one run on one machine:

1. trains the dense CNN (--dense-epochs), and as a control the same run with --fine-tune-epochs more epochs;
2. prunes it with `strata-train prune`: magnitude pruning to each --sparsities target (per layer, polynomial
   schedule, --fine-tune-epochs of fine-tuning) and structured pruning of half the filters and units;
3. exports ONNX (float32) of each, and int8 QDQ ONNX of the dense and structured models (`export --quantize
   int8`);
4. measures, on the 10,000 test images: accuracy of every model (Strata for checkpoints, onnxruntime for ONNX
   files), file sizes (as written and deflated), forward-pass time in Strata's engine (bench_inference: batch 1
   and 256, 1 and --threads threads, models timed in turns), in onnxruntime (float, sparse and int8 files,
   batch 1 and 256) and in PyTorch (the same dense, sparse and structured models rebuilt from the ONNX
   initializers);
5. prints the tables of bench/RESULTS.md and the targets of issue 14, each met or not.

  /work/venv-bench/bin/python bench/compression_bench.py [--build build] [--work DIR] [--threads 2]
      [--dense-epochs 4] [--fine-tune-epochs 2] [--sparsities 0.5,0.8,0.9,0.95] [--reuse]

--reuse keeps what an earlier run with the same --work folder trained (for re-measuring only).
The Python needs numpy, onnx, onnxruntime and torch (/work/venv-bench has them).
"""
import argparse, gzip, json, os, re, subprocess, sys, time, zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = "/usr/share/datasets/fashion-mnist/"


def run(cmd, **kw):
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def idx(path):
    d = gzip.open(path).read()
    if d[3] == 3:
        n, h, w = np.frombuffer(d[4:16], ">i4")
        return np.frombuffer(d[16:], np.uint8).reshape(n, 1, h, w)
    return np.frombuffer(d[8:], np.uint8)


class Bench:
    def __init__(self, a):
        self.a = a
        self.train = os.path.join(a.build, "bin", "strata-train")
        self.timer = os.path.join(a.build, "bin", "bench_inference")
        os.makedirs(a.work, exist_ok=True)

    def path(self, *p):
        return os.path.join(self.a.work, *p)

    def done(self, folder):
        return self.a.reuse and os.path.exists(os.path.join(folder, "latest.safetensors"))

    def strata_accuracy(self, ckpt):
        out = run([self.train, "predict", ckpt, DATA + "t10k-images-idx3-ubyte.gz", "--count", "10000",
                   "--labels", DATA + "t10k-labels-idx1-ubyte.gz", "--quiet", "--runtime", "strata"])
        return float(re.search(r"accuracy ([0-9.]+)%", out).group(1)) / 100

    def models(self):
        a, t = self.a, str(self.a.threads)
        project = os.path.join(ROOT, "examples", "fashion_cnn.strata")
        dense = self.path("dense")
        if not self.done(dense):
            run([self.train, project, "--epochs", str(a.dense_epochs), "--threads", t, "--quiet", "--checkpoint-dir",
                 dense])
        control = self.path("dense-more")
        if not self.done(control):
            # The same run with the fine-tuning's epochs added: what the extra training alone gives.
            run([self.train, project, "--epochs", str(a.dense_epochs + a.fine_tune_epochs), "--threads", t,
                 "--quiet", "--resume", os.path.join(dense, "latest.safetensors"), "--checkpoint-dir", control])
        models = {"dense": dense, f"dense +{a.fine_tune_epochs} epochs": control}
        self.prune_seconds = {}
        for s in a.sparsities:
            out = self.path(f"sparse-{round(s * 100)}")
            if not self.done(out):
                t0 = time.time()
                run([self.train, "prune", dense, "--sparsity", str(s), "--fine-tune-epochs", str(a.fine_tune_epochs),
                     "--threads", t, "--quiet", "-o", out])
                self.prune_seconds[out] = time.time() - t0
            models[f"{round(s * 100)}% sparse"] = out
        out = self.path("structured-50")
        if not self.done(out):
            run([self.train, "prune", dense, "--sparsity", "0.5", "--structured", "--fine-tune-epochs",
                 str(a.fine_tune_epochs), "--threads", t, "--quiet", "-o", out])
        models["structured 50%"] = out
        return models

    def exports(self, models):
        files = {}
        for name, ckpt in models.items():
            f = os.path.join(ckpt, "model.onnx")
            run([self.train, "export", ckpt, "--format", "onnx", "-o", f])
            files[name] = f
        self.int8_reports = {}
        for name in ["dense", "structured 50%"]:
            f = os.path.join(models[name], "model-int8.onnx")
            self.int8_reports[name + " int8"] = run([self.train, "export", models[name], "--format", "onnx",
                                                     "--quantize", "int8", "-o", f])
            files[name + " int8"] = f
        return files

    def strata_times(self, models):
        times = {}
        names = [n for n in models if not n.startswith("dense +")]
        for threads in sorted({1, self.a.threads}):
            out = run([self.timer] + [models[n] for n in names] + ["--threads", str(threads), "--rounds",
                                                                  str(self.a.rounds)])
            for line in out.splitlines():
                j = json.loads(line)
                name = names[[models[n] for n in names].index(j["model"])]
                times[(name, threads, j["batch"])] = j["ms"]
        return times

    def ort(self, files, x, y):
        import onnxruntime as ort

        sessions, acc = {}, {}
        for name, f in files.items():
            o = ort.SessionOptions()
            o.intra_op_num_threads = self.a.threads
            o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            s = ort.InferenceSession(f, o, providers=["CPUExecutionProvider"])
            sessions[name] = s
            inp = s.get_inputs()[0].name
            out = np.concatenate([s.run(None, {inp: x[i:i + 500]})[0] for i in range(0, len(x), 500)])
            acc[name] = float((out.argmax(1) == y).mean())
        times = {}
        for batch in (1, 256):
            xb = x[:batch]
            rounds = {n: [] for n in sessions}
            for _ in range(self.a.rounds):
                for n, s in sessions.items():
                    inp = s.get_inputs()[0].name
                    for _ in range(3):
                        s.run(None, {inp: xb})
                    reps, t0 = 0, time.perf_counter()
                    while reps < 5 or time.perf_counter() - t0 < 0.25:
                        s.run(None, {inp: xb})
                        reps += 1
                    rounds[n].append((time.perf_counter() - t0) / reps * 1000)
            for n, r in rounds.items():
                times[(n, batch)] = float(np.median(r))
        return acc, times, ort.__version__

    def torch_times(self, files):
        import onnx
        import torch
        from onnx import numpy_helper

        torch.set_num_threads(self.a.threads)

        def build(f):
            w = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in onnx.load(f).graph.initializer}
            c1, c2, f1, f2 = (w["conv1.weight"], w["conv2.weight"], w["fc1.weight"], w["fc2.weight"])
            m = torch.nn.Sequential(
                torch.nn.Conv2d(1, c1.shape[0], 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                torch.nn.Conv2d(c1.shape[0], c2.shape[0], 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                torch.nn.Flatten(), torch.nn.Linear(f1.shape[1], f1.shape[0]), torch.nn.ReLU(),
                torch.nn.Linear(f2.shape[1], f2.shape[0]))
            for i, name in [(0, "conv1"), (3, "conv2"), (7, "fc1"), (9, "fc2")]:
                m[i].weight.data.copy_(w[name + ".weight"])
                m[i].bias.data.copy_(w[name + ".bias"])
            return m.eval()

        nets = {n: build(f) for n, f in files.items() if "int8" not in n and not n.startswith("dense +")}
        times = {}
        with torch.inference_mode():
            for batch in (1, 256):
                xb = torch.rand(batch, 1, 28, 28)
                rounds = {n: [] for n in nets}
                for _ in range(self.a.rounds):
                    for n, m in nets.items():
                        for _ in range(3):
                            m(xb)
                        reps, t0 = 0, time.perf_counter()
                        while reps < 5 or time.perf_counter() - t0 < 0.25:
                            m(xb)
                            reps += 1
                        rounds[n].append((time.perf_counter() - t0) / reps * 1000)
                for n, r in rounds.items():
                    times[(n, batch)] = float(np.median(r))
        return times, torch.__version__


def sparsity_of(ckpt_dir):
    import onnx
    from onnx import numpy_helper

    z = n = 0
    for t in onnx.load(os.path.join(ckpt_dir, "model.onnx")).graph.initializer:
        if t.name.endswith(".weight"):
            a = numpy_helper.to_array(t)
            z += int((a == 0).sum())
            n += a.size
    return z / n if n else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--work", default="/tmp/strata-compression-bench")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dense-epochs", type=int, default=4)
    ap.add_argument("--fine-tune-epochs", type=int, default=2)
    ap.add_argument("--sparsities", default="0.5,0.8,0.9,0.95")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reuse", action="store_true")
    a = ap.parse_args()
    a.sparsities = [float(s) for s in a.sparsities.split(",")]
    b = Bench(a)
    t0 = time.time()
    models = b.models()
    train_minutes = (time.time() - t0) / 60
    files = b.exports(models)
    x = idx(DATA + "t10k-images-idx3-ubyte.gz").astype(np.float32)
    y = idx(DATA + "t10k-labels-idx1-ubyte.gz")
    acc = {n: b.strata_accuracy(c) for n, c in models.items()}
    sparsity = {n: sparsity_of(c) for n, c in models.items()}
    st = b.strata_times(models)
    ort_acc, ort_t, ort_version = b.ort(files, x, y)
    tt, torch_version = b.torch_times(files)
    load = os.getloadavg()

    dense = acc["dense"]
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; onnxruntime {ort_version}, PyTorch {torch_version}; "
          f"training and pruning took {train_minutes:.1f} min")
    print("\n## accuracy (10,000 test images) and size")
    print("| model | weight sparsity | Strata accuracy | onnxruntime accuracy | change vs dense | ONNX bytes | "
          "deflated bytes |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for n, f in files.items():
        base = n.replace(" int8", "")
        s_acc = acc.get(n)
        raw = os.path.getsize(f)
        deflated = len(zlib.compress(open(f, "rb").read(), 9))
        shown = s_acc if s_acc is not None else ort_acc[n]
        print(f"| {n} | {sparsity.get(base, 0) * 100:.1f}% | "
              f"{'' if s_acc is None else f'{s_acc * 100:.2f}%'} | {ort_acc[n] * 100:.2f}% | "
              f"{(shown - dense) * 100:+.2f} | {raw:,} | {deflated:,} |")
    print("\n## forward pass, ms (median of rounds; models timed in turns)")
    print("| model | Strata 1 thread b1 | b256 | Strata "
          f"{a.threads} threads b1 | b256 | onnxruntime b1 | b256 | PyTorch b1 | b256 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for n in files:
        if n.startswith("dense +"):
            continue

        def f(v):
            return "" if v is None else f"{v:.3f}"

        print(f"| {n} | {f(st.get((n, 1, 1)))} | {f(st.get((n, 1, 256)))} | {f(st.get((n, a.threads, 1)))} | "
              f"{f(st.get((n, a.threads, 256)))} | {f(ort_t.get((n, 1)))} | {f(ort_t.get((n, 256)))} | "
              f"{f(tt.get((n, 1)))} | {f(tt.get((n, 256)))} |")

    print("\n## targets")
    def verdict(ok):
        return "met" if ok else "NOT met"
    for s, limit in [(80, 0.5), (90, 1.5)]:
        name = f"{s}% sparse"
        if name in acc:
            d = (acc[name] - dense) * 100
            print(f"- {s}% unstructured after {a.fine_tune_epochs} fine-tuning epochs within {limit} points of "
                  f"dense: {d:+.2f} points: {verdict(d >= -limit)} (dense + {a.fine_tune_epochs} epochs control: "
                  f"{(acc[f'dense +{a.fine_tune_epochs} epochs'] - dense) * 100:+.2f})")
    d = (acc["structured 50%"] - dense) * 100
    print(f"- structured 50% within 1 point: {d:+.2f} points: {verdict(d >= -1)}")
    for threads in sorted({1, a.threads}):
        for batch in (1, 256):
            r = st[("dense", threads, batch)] / st[("structured 50%", threads, batch)]
            print(f"- structured speed-up in Strata, {threads} thread(s), batch {batch}: {r:.2f}x: {verdict(r >= 1.6)}")
    for s in (80, 90):
        name = f"{s}% sparse"
        if name in files:
            rs = [st[("dense", a.threads, 256)] / st[(name, a.threads, 256)],
                  ort_t[("dense", 256)] / ort_t[(name, 256)], tt[("dense", 256)] / tt[(name, 256)]]
            print(f"- {name} at batch 256, dense time / sparse time: Strata {rs[0]:.2f}x, onnxruntime {rs[1]:.2f}x, "
                  f"PyTorch {rs[2]:.2f}x")
    d = (ort_acc["dense int8"] - ort_acc["dense"]) * 100
    ratio = os.path.getsize(files["dense int8"]) / os.path.getsize(files["dense"])
    lat = ort_t[("dense", 256)] / ort_t[("dense int8", 256)]
    print(f"- int8 ONNX within 0.3 points of float (onnxruntime): {d:+.2f}: {verdict(d >= -0.3)}; file "
          f"{ratio:.3f}x of float: {verdict(ratio <= 0.3)}; onnxruntime batch 256: float "
          f"{ort_t[('dense', 256)]:.2f} ms, int8 {ort_t[('dense int8', 256)]:.2f} ms ({lat:.2f}x)")
    for n, report in b.int8_reports.items():
        line = [l for l in report.splitlines() if "accuracy on" in l]
        print(f"- `export --quantize int8` of {n.replace(' int8', '')}: {line[0].strip() if line else '?'}")


if __name__ == "__main__":
    main()
