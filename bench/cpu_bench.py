#!/usr/bin/env python3
"""Strata vs PyTorch on the CPU, same model, data, batch, optimizer and thread
count, in one run. Trains each example for one epoch with strata-train and
with PyTorch (Debian's python3-torch, and a second PyTorch given with
--torch-python, e.g. a venv with the current PyPI torch), then prints
samples/s, validation accuracy and peak RSS of each and the ratio.

  /usr/bin/python3 bench/cpu_bench.py [--build build] [--torch-python /path/venv/bin/python]
      [--examples fashion_cnn_bn,residual_template] [--epochs N] [--init strata|own] [--no-debian-torch]

PyTorch follows each project's recipe (batch, SGD momentum and Nesterov, weight decay, cosine per step with
the linear warm-up, standardized pixels) and by default starts from Strata's initial weights.
"""
import argparse, json, os, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def project_path(example):
    """An example's name (examples/NAME.strata) or bench/NAME.strata (the residual template)."""
    for folder in ("examples", "bench"):
        path = os.path.join(ROOT, folder, example + ".strata")
        if os.path.exists(path):
            return path
    raise SystemExit("no examples/%s.strata or bench/%s.strata" % (example, example))


def recipe(example, batch):
    """The project's optimizer settings, for PyTorch to train the same way."""
    with open(project_path(example)) as f:
        p = json.load(f)
    t, d = p["training"], p["dataset"]
    if t["optimizer"] != "sgd" or t["schedule"] not in ("constant", "cosine"):
        raise SystemExit("%s: the PyTorch reference knows SGD with a constant or cosine schedule" % example)
    others = [k for k in ("crop_padding", "noise_std", "resized_crop_min_area", "rotation_degrees", "brightness",
                          "contrast") if d.get(k)]
    if others:
        raise SystemExit("%s: the PyTorch reference knows only the horizontal flip of the augmentations, not %s"
                         % (example, ", ".join(others)))
    return {"batch": batch or t["batch_size"], "lr": t["learning_rate"], "momentum": t["momentum"],
            "nesterov": bool(t.get("nesterov")), "warmup_steps": int(t.get("warmup_steps", 0)),
            "horizontal_flip": bool(d.get("horizontal_flip")),
            "weight_decay": t["weight_decay"], "schedule": t["schedule"],
            "normalization": "standardize" if d["normalization"] == "standardize" else "scale"}


def strata_initial_weights(build, example, out_npz, seed=None):
    """Strata's initial weights for the project (its own seed, or `seed`): one step at learning rate 0 writes them
    to a checkpoint; saved as .npz with the weight layers' node names in project order under "__order__"."""
    import numpy as np
    sys.path.insert(0, HERE)
    from text_bench import strata_initial_weights as initial
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "raw.npz")
        initial(build, project_path(example), raw, seed)
        w = dict(np.load(raw))
    nodes = json.load(open(project_path(example)))["graph"]["nodes"]
    order = [n["name"] for n in nodes if n["type"] in ("Conv2D", "BatchNorm", "Dense")]
    np.savez(out_npz, __order__=np.array(order), **w)


def strata(build, example, threads, epochs, batch, seed=None):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        cmd = [os.path.join(build, "bin", "strata-train"), project_path(example),
               "--threads", str(threads), "--epochs", str(epochs), "--batch", str(batch), "--quiet",
               "--metrics-out", metrics, "--checkpoint-dir", os.path.join(tmp, "checkpoints"), "--history", "off"]
        if seed is not None:
            cmd += ["--seed", str(seed)]
        # ru_maxrss of children is the max over all children so far: measure Strata in a fresh interpreter.
        wrapper = ("import resource,subprocess,sys;subprocess.run(sys.argv[1:],check=True);"
                   "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss/1024)")
        out = subprocess.run([sys.executable, "-c", wrapper] + cmd, check=True, capture_output=True, text=True)
        rss = float(out.stdout.strip().splitlines()[-1])
        epochs_ev = [json.loads(l) for l in open(metrics) if '"event":"epoch"' in l]
        sps = sum(e["samples_per_s"] for e in epochs_ev) / len(epochs_ev)
        return {"samples_per_s": sps, "val_acc": epochs_ev[-1]["val_acc"], "peak_rss_mib": rss}


def torch_run(python, example, threads, epochs, r, init_npz=None, seed=None):
    cmd = [python, os.path.join(HERE, "torch_train.py"), example, "--threads", str(threads),
           "--epochs", str(epochs), "--batch", str(r["batch"]), "--lr", str(r["lr"]), "--momentum",
           str(r["momentum"]), "--weight-decay", str(r["weight_decay"]), "--schedule", r["schedule"],
           "--normalization", r["normalization"], "--warmup-steps", str(r["warmup_steps"])]
    if r["nesterov"]:
        cmd.append("--nesterov")
    if r["horizontal_flip"]:
        cmd.append("--horizontal-flip")
    if init_npz:
        cmd += ["--init-from", init_npz]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=0, help="0: each project's own batch size")
    ap.add_argument("--examples", default="fashion_mlp,fashion_cnn",
                    help="comma-separated: examples/NAME.strata or bench/NAME.strata (fashion_cnn_bn, "
                         "residual_template)")
    ap.add_argument("--torch-python", action="append", default=[],
                    help="a Python with torch installed (repeatable); Debian's /usr/bin/python3 is used too "
                         "unless --no-debian-torch")
    ap.add_argument("--no-debian-torch", action="store_true", help="only the --torch-python ones")
    ap.add_argument("--init", choices=("strata", "own"), default="strata",
                    help="strata (default): PyTorch starts from Strata's initial weights, so the accuracies "
                         "compare the training; own: each framework's own initialization")
    ap.add_argument("--seeds", default="",
                    help="comma-separated seeds, each run on both sides (Strata's --seed, hence its initial "
                         "weights and sample order; PyTorch's generator); default: each project's own seed")
    a = ap.parse_args()
    pythons = ([] if a.no_debian_torch else ["/usr/bin/python3"]) + a.torch_python
    seeds = [int(v) for v in a.seeds.split(",") if v] or [None]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for ex in a.examples.split(","):
            r = recipe(ex, a.batch)
            for seed in seeds:
                npz = None
                if a.init == "strata":
                    npz = os.path.join(tmp, "%s-%s.npz" % (ex, seed))
                    strata_initial_weights(a.build, ex, npz, seed)
                s = strata(a.build, ex, a.threads, a.epochs, r["batch"], seed)
                for py in dict.fromkeys(pythons):
                    try:
                        t = torch_run(py, ex, a.threads, a.epochs, r, npz, seed)
                    except (subprocess.CalledProcessError, FileNotFoundError) as e:
                        print(f"# {py}: PyTorch run failed: {e}", file=sys.stderr)
                        continue
                    rows.append((ex if seed is None else "%s/s%d" % (ex, seed), s, t))
    print("# %s, %d epoch(s), %d threads" % ("same initial weights (Strata's)" if a.init == "strata"
                                              else "each framework's own initialization", a.epochs, a.threads))
    print(f"{'model':<18} {'torch':<16} {'Strata samples/s':>16} {'PyTorch samples/s':>17} {'ratio':>6} "
          f"{'Strata acc':>10} {'PyTorch acc':>11} {'Strata RSS MiB':>14} {'PyTorch RSS MiB':>15}")
    for ex, s, t in rows:
        print(f"{ex:<18} {t['torch']:<16} {s['samples_per_s']:>16.0f} {t['samples_per_s']:>17.0f} "
              f"{s['samples_per_s'] / t['samples_per_s']:>6.2f} {s['val_acc']:>10.4f} {t['val_acc']:>11.4f} "
              f"{s['peak_rss_mib']:>14.0f} {t['peak_rss_mib']:>15.0f}")
    if len(seeds) > 1:  # the accuracy gap on the mean over seeds, per model and PyTorch
        means = {}
        for ex, s, t in rows:
            key = (ex.split("/")[0], t["torch"])
            means.setdefault(key, []).append((s["val_acc"], t["val_acc"]))
        for (ex, torch), accs in means.items():
            ms, mt = (sum(v[i] for v in accs) / len(accs) for i in (0, 1))
            print(f"{ex} over {len(accs)} seeds, PyTorch {torch}: mean accuracy Strata {ms:.4f}, PyTorch {mt:.4f}, "
                  f"gap {100 * (ms - mt):+.2f} points")


if __name__ == "__main__":
    main()
