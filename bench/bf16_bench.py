#!/usr/bin/env python3
"""CPU bf16 training against fp32, side by side on one machine: Strata's --precision bf16 (oneDNN's bf16
primitives, core/backend/CpuBf16.h) against its fp32, and PyTorch's CPU autocast bf16 against its fp32, on the
same models, data subset, batch, recipe and thread count. Prints one JSON line per run and a table.

  /usr/bin/python3 bench/bf16_bench.py [--build build] [--torch-python /work/venv-bench/bin/python]
      [--examples fashion_cnn_bn,residual_template,debian_sections_transformer] [--train-limit N] [--epochs N]

Strata refuses bf16 on a CPU without AVX512-BF16 or AMX; so does this script (it reports the refusal).
PyTorch has no reference model for the Transformer example (bench/torch_train.py knows the Fashion-MNIST ones):
its row has Strata only.
"""
import argparse, json, os, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cpu_bench import project_path, recipe  # noqa: E402

ROOT = os.path.dirname(HERE)
TORCH_MODELS = ("fashion_mlp", "fashion_cnn", "fashion_cnn_bn", "residual_template")


def strata(build, example, precision, threads, epochs, limit):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        cmd = [os.path.join(build, "bin", "strata-train"), project_path(example), "--precision", precision,
               "--device", "cpu", "--threads", str(threads), "--epochs", str(epochs), "--quiet", "--metrics-out",
               metrics, "--checkpoint-dir", os.path.join(tmp, "ck"), "--history", "off"]
        if limit:
            cmd += ["--train-limit", str(limit)]
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        if out.returncode != 0:
            return {"error": (out.stderr.strip().splitlines() or ["exit %d" % out.returncode])[-1]}
        ev = [json.loads(l) for l in open(metrics) if '"event":"epoch"' in l]
        return {"samples_per_s": sum(e["samples_per_s"] for e in ev) / len(ev), "val_acc": ev[-1]["val_acc"]}


def torch_run(python, example, bf16, threads, epochs, limit):
    r = recipe(example, 0)
    cmd = [python, os.path.join(HERE, "torch_train.py"), example, "--threads", str(threads), "--epochs", str(epochs),
           "--batch", str(r["batch"]), "--lr", str(r["lr"]), "--momentum", str(r["momentum"]), "--weight-decay",
           str(r["weight_decay"]), "--schedule", r["schedule"], "--normalization", r["normalization"],
           "--warmup-steps", str(r["warmup_steps"])]
    cmd += ["--nesterov"] if r["nesterov"] else []
    cmd += ["--horizontal-flip"] if r["horizontal_flip"] else []
    cmd += ["--train-limit", str(limit)] if limit else []
    cmd += ["--autocast-bf16"] if bf16 else []
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["exit %d" % out.returncode])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def spread(values):
    v = sorted(values)
    mid = len(v) // 2
    median = v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2
    return {"median": median, "min": v[0], "max": v[-1], "all": values}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--torch-python", default="/work/venv-bench/bin/python")
    ap.add_argument("--examples", default="fashion_cnn_bn,residual_template,debian_sections_transformer")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--train-limit", type=int, default=0, help="first N training samples (0: all)")
    ap.add_argument("--repeats", type=int, default=1,
                    help="rounds of every run, interleaved (the machine's load drifts): the median and range")
    ap.add_argument("--before", action="store_true",
                    help="also Strata bf16 without the bf16 Winograd (STRATA_WINOGRAD_BF16=0)")
    ap.add_argument("--no-torch", action="store_true")
    a = ap.parse_args()
    rows = []
    for ex in a.examples.split(","):
        configs = [("strata fp32", lambda: strata(a.build, ex, "fp32", a.threads, a.epochs, a.train_limit)),
                   ("strata bf16", lambda: strata(a.build, ex, "bf16", a.threads, a.epochs, a.train_limit))]
        if a.before:
            def before():
                os.environ["STRATA_WINOGRAD_BF16"] = "0"
                try:
                    return strata(a.build, ex, "bf16", a.threads, a.epochs, a.train_limit)
                finally:
                    del os.environ["STRATA_WINOGRAD_BF16"]
            configs.append(("strata bf16 before", before))
        if ex in TORCH_MODELS and os.path.exists(a.torch_python) and not a.no_torch:
            configs += [("torch fp32", lambda: torch_run(a.torch_python, ex, False, a.threads, a.epochs, a.train_limit)),
                        ("torch autocast bf16",
                         lambda: torch_run(a.torch_python, ex, True, a.threads, a.epochs, a.train_limit))]
        results = {name: [] for name, _ in configs}
        for _ in range(a.repeats):
            for name, run in configs:
                r = run()
                results[name].append(r)
                print(json.dumps({"example": ex, "run": name, **r}), flush=True)
        runs = {}
        for name, rs in results.items():
            ok = [r for r in rs if "samples_per_s" in r]
            if not ok:
                runs[name] = rs[-1]
                continue
            sp = spread([r["samples_per_s"] for r in ok])
            runs[name] = {"samples_per_s": sp["median"], "min": sp["min"], "max": sp["max"],
                          "val_acc": ok[-1]["val_acc"], "accs": [r["val_acc"] for r in ok]}
        rows.append((ex, runs))
    print("\n%-28s %-20s %12s %19s %9s" % ("example", "run", "samples/s", "(range)", "val acc"))
    for ex, runs in rows:
        for name, r in runs.items():
            if "error" in r:
                print("%-28s %-20s %s" % (ex, name, r["error"]))
            else:
                print("%-28s %-20s %12.1f %8.1f-%-10.1f %8.2f%%" % (ex, name, r["samples_per_s"], r["min"], r["max"],
                                                                 100 * r["val_acc"]))
        s32 = runs.get("strata fp32", {})
        for which in ("strata bf16", "strata bf16 before"):
            s16 = runs.get(which, {})
            if "samples_per_s" in s32 and "samples_per_s" in s16:
                print("%-28s %s/fp32: %.2fx speed (medians), %+.2f points" %
                      (ex, which, s16["samples_per_s"] / s32["samples_per_s"], 100 * (s16["val_acc"] - s32["val_acc"])))
        s16, t16 = runs.get("strata bf16", {}), runs.get("torch autocast bf16", {})
        if "samples_per_s" in s16 and "samples_per_s" in t16:
            print("%-28s strata bf16 / torch autocast bf16: %.2fx" % (ex, s16["samples_per_s"] / t16["samples_per_s"]))


if __name__ == "__main__":
    sys.exit(main())
