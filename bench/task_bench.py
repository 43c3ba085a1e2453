#!/usr/bin/env python3
"""Strata vs PyTorch on the examples of the tasks beyond classification (issue 38), same model, data, recipe,
thread count and initial weights, in one run each: regression (examples/auto_mpg_regression.strata: MLP on the
Auto MPG cars, metric R^2 in the data's units), multi-label text (examples/debian_tags_multilabel.strata:
Embedding + mean + MLP on the Debian tags corpus, metric micro F1 at 0.5) and denoising (examples/
fashion_denoising.strata: an encoder-decoder, stride-2 convolutions down and transposed convolutions up, on
Fashion-MNIST, Gaussian + masking noise, metric PSNR).

For each: Strata's initial weights (one step at learning rate 0, bench/text_bench.py) are loaded into the PyTorch
modules; strata-train trains the project and reports samples/s and the metric (its --metrics-out lines); PyTorch
trains the same graph (Adam as the project says, the same batch and epochs, shuffled each epoch) and computes the
metric the same way (core/train/TaskMetrics.h). The samples/s are of the training epochs alone.

  /usr/bin/python3 bench/task_bench.py --torch-python /work/venv-bench/bin/python [--build build] [--threads 2]
      [--examples auto_mpg_regression,debian_tags_multilabel,fashion_denoising] [--epochs N] [--train-limit N]
      [--strata-order] [--steps N]

--strata-order gives PyTorch Strata's sample order (epochOrder, replicated here), so that with the same initial
weights the two runs differ by their numerics alone; --steps N prints both sides' first N step losses.

The data: tools/make_auto_mpg_dataset.py, tools/make_debian_tags_dataset.py, Fashion-MNIST from Debian.
"""
import argparse, csv, gzip, json, math, os, resource, struct, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)


def project(example):
    path = os.path.join(ROOT, "examples", example + ".strata")
    return path, json.load(open(path))


def data_path(p_path, rel):
    return rel if os.path.isabs(rel) else os.path.join(os.path.dirname(os.path.abspath(p_path)), rel)


# ---- data as Strata loads it ---------------------------------------------------------------------------

def standardize(train, others):
    """Per column, population statistics of the training rows (core/data normalize: a std of 0 becomes 1)."""
    import numpy as np
    mean = train.mean(0)
    std = np.sqrt(np.maximum(0.0, (train.astype(np.float64) ** 2).mean(0) - mean.astype(np.float64) ** 2))
    std = np.where(std > 1e-12, std, 1.0).astype(np.float32)
    return [(x - mean) / std for x in [train] + others], mean, std


def load_regression(p_path, p):
    import numpy as np
    d = p["dataset"]

    def read(rel):
        with open(data_path(p_path, rel), newline="") as f:
            rows = list(csv.reader(f))
        header, rows = rows[0], np.array(rows[1:], dtype=np.float32)
        t = [header.index(c) for c in d["target_columns"]]
        x = [i for i in range(len(header)) if i not in t]
        return rows[:, x], rows[:, t]

    (xtr, ytr), (xva, yva) = read(d["train_path"]), read(d["validation_path"])
    (xtr, xva), _, _ = standardize(xtr, [xva])
    (ytr, yva), ymean, ystd = standardize(ytr, [yva])
    return xtr, ytr, xva, yva, (ymean, ystd)


def load_multilabel(p_path, p):
    import numpy as np
    from text_bench import tokenize
    d = p["dataset"]

    def rows(rel):
        with open(data_path(p_path, rel), newline="", encoding="utf-8", errors="replace") as f:
            r = list(csv.reader(f))
        li = r[0].index(d["label_column"])
        return [(row[1 - li], row[li]) for row in r[1:] if len(row) == 2]

    train, val = rows(d["train_path"]), rows(d["validation_path"])
    sep = d.get("label_separator", ";")
    names = []
    for _, tags in train:
        for t in tags.split(sep):
            if t.strip() and t.strip() not in names:
                names.append(t.strip())
    word = d["tokenizer"] == "word"
    train_tokens = [tokenize(t, word) for t, _ in train]
    counts = {}
    for toks in train_tokens:
        for t in toks:
            counts[t] = counts.get(t, 0) + 1
    order = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0].encode("utf-8")))
    vocab = {tok: i + 2 for i, (tok, _) in enumerate(order[: d["max_vocab"] - 2])}
    n = d["max_tokens"]

    def encode(rs, tokens):
        ids = np.zeros((len(rs), n), dtype=np.int64)
        y = np.zeros((len(rs), len(names)), dtype=np.float32)
        for i, ((_, tags), toks) in enumerate(zip(rs, tokens)):
            row = [vocab.get(t, 1) for t in toks[:n]]
            ids[i, :len(row)] = row
            for t in tags.split(sep):
                if t.strip():
                    y[i, names.index(t.strip())] = 1
        return ids, y

    xtr, ytr = encode(train, train_tokens)
    xva, yva = encode(val, [tokenize(t, word) for t, _ in val])
    return xtr, ytr, xva, yva, names


def read_idx(path):
    import numpy as np
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = struct.unpack(">I", data[:4])[0] & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


# ---- Strata's sample order (core/data/DataRandom.h, DataLoader.cpp epochOrder) ---------------------------

M64 = (1 << 64) - 1


def _next_random(state):
    state = (state + 0x9E3779B97F4A7C15) & M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return state, z ^ (z >> 31)


def _mix_seed(a, b):
    s = a ^ ((b + 0x9E3779B97F4A7C15 + ((a << 6) & M64) + (a >> 2)) & M64)
    return _next_random(s & M64)[1]


def strata_epoch_order(count, seed, epoch):
    """The training order of Strata's epoch `epoch` (1-based, as the Trainer counts): a Fisher-Yates shuffle
    driven by SplitMix64 from mixSeed(seed, epoch)."""
    order = list(range(count))
    rng = _mix_seed(seed & M64, epoch & M64)
    for i in range(count - 1, 0, -1):
        rng, r = _next_random(rng)
        j = r % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order


# ---- the PyTorch half ------------------------------------------------------------------------------------

def torch_half(example, threads, epochs, init_npz, seed, train_limit=0, strata_order=False, steps=0):
    import numpy as np
    import torch
    import torch.nn as nn
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    p_path, p = project(example)
    t = p["training"]
    epochs = epochs or t["epochs"]
    nodes = p["graph"]["nodes"]
    w = np.load(init_npz)

    def dense(name, cin):
        m = nn.Linear(cin, next(n for n in nodes if n["name"] == name)["params"]["units"])
        with torch.no_grad():
            m.weight.copy_(torch.from_numpy(w[name + ".weight"].reshape(m.weight.shape)))
            m.bias.copy_(torch.from_numpy(w[name + ".bias"].reshape(m.bias.shape)))
        return m

    def image_chain(cin):
        # The graph is a chain Input -> ... (edges in node order): each node as its PyTorch module, the weights
        # copied. Strata's ConvTranspose2D weight is [in, out, kh, kw], PyTorch's ConvTranspose2d's layout too.
        def pair(v):
            return tuple(v * 2 if len(v) == 1 else v)

        ids = [n["id"] for n in nodes]
        if sorted((e["from"]["node"], e["to"]["node"]) for e in p["graph"]["edges"]) != list(zip(ids, ids[1:])):
            sys.exit("task_bench.py: %s is not a chain of its nodes in order" % example)
        layers = []
        for n in nodes[1:]:
            prm, name = n["params"], n["name"]
            if n["type"] in ("Conv2D", "ConvTranspose2D"):
                if prm.get("groups", 1) != 1 or pair(prm.get("dilation", [1])) != (1, 1):
                    sys.exit("task_bench.py: %s '%s': groups and dilation are not mapped" % (n["type"], name))
                args = dict(stride=pair(prm.get("stride", [1])), padding=pair(prm.get("padding", [0])),
                            bias=prm.get("use_bias", True))
                if n["type"] == "Conv2D":
                    m = nn.Conv2d(cin, prm["filters"], pair(prm["kernel"]), **args)
                else:
                    m = nn.ConvTranspose2d(cin, prm["filters"], pair(prm["kernel"]),
                                           output_padding=pair(prm.get("output_padding", [0])), **args)
                with torch.no_grad():
                    m.weight.copy_(torch.from_numpy(w[name + ".weight"].reshape(m.weight.shape)))
                    if m.bias is not None:
                        m.bias.copy_(torch.from_numpy(w[name + ".bias"].reshape(m.bias.shape)))
                cin = prm["filters"]
            elif n["type"] == "Upsample2D":
                mode = prm.get("mode", "nearest")
                m = nn.Upsample(scale_factor=tuple(float(f) for f in pair(prm.get("scale", [2]))), mode=mode,
                                align_corners=prm.get("align_corners", False) if mode == "bilinear" else None)
            elif n["type"] == "ReLU":
                m = nn.ReLU()
            else:
                sys.exit("task_bench.py: no PyTorch mapping for %s '%s'" % (n["type"], name))
            layers.append(m)
        return nn.Sequential(*layers)

    if example == "auto_mpg_regression":
        xtr, ytr, xva, yva, (ymean, ystd) = load_regression(p_path, p)
        model = nn.Sequential(dense("fc1", xtr.shape[1]), nn.ReLU(), dense("fc2", 64), nn.ReLU(), dense("mpg", 32))
        loss_fn = nn.MSELoss()
        noise = None
    elif example == "debian_tags_multilabel":
        xtr, ytr, xva, yva, names = load_multilabel(p_path, p)
        emb = nn.Embedding(20000, 64)
        with torch.no_grad():
            emb.weight.copy_(torch.from_numpy(w["embed.weight"].reshape(emb.weight.shape)))

        class Mean(nn.Module):
            def forward(self, x):
                return x.mean(1)

        model = nn.Sequential(emb, Mean(), dense("fc1", 64), nn.ReLU(), dense("tags", 128))
        loss_fn = nn.BCEWithLogitsLoss()
        noise = None
    else:
        d = p["dataset"]
        xtr = read_idx(d["train_images"]).astype(np.float32)[:, None] / 255.0
        xva = read_idx(d["validation_images"]).astype(np.float32)[:, None] / 255.0
        ytr, yva = xtr, xva
        model = image_chain(1)
        loss_fn = nn.MSELoss()
        noise = (d["noise_std"], d["masking_fraction"])
    if train_limit:
        xtr, ytr = xtr[:train_limit], ytr[:train_limit]
    xtr_t, ytr_t = torch.from_numpy(xtr), torch.from_numpy(ytr)
    opt = torch.optim.Adam(model.parameters(), lr=t["learning_rate"], betas=(t.get("beta1", 0.9), t.get("beta2", 0.999)),
                           eps=t.get("eps", 1e-8), weight_decay=t.get("weight_decay", 0.0))
    g = torch.Generator().manual_seed(seed)
    batch = t["batch_size"]

    def noisy(x, gen):
        if not noise:
            return x
        x = torch.where(torch.rand(x.shape, generator=gen) < noise[1], torch.zeros_like(x), x)
        return x + noise[0] * torch.randn(x.shape, generator=gen)

    seconds, samples, losses = 0.0, 0, []
    for epoch in range(1, epochs + 1):
        model.train()
        if strata_order:
            perm = torch.tensor(strata_epoch_order(len(xtr_t), seed, epoch), dtype=torch.int64)
        else:
            perm = torch.randperm(len(xtr_t), generator=g)
        t0 = time.perf_counter()
        for i in range(0, len(perm), batch):
            idx = perm[i:i + batch]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(noisy(xtr_t[idx], g)), ytr_t[idx])
            loss.backward()
            opt.step()
            samples += len(idx)
            if len(losses) < steps:
                losses.append(float(loss))
        seconds += time.perf_counter() - t0
    model.eval()
    with torch.no_grad():
        xv = torch.from_numpy(xva)
        if noise:
            xv = noisy(xv, torch.Generator().manual_seed(seed + 1))
        out = torch.cat([model(xv[i:i + 1000]) for i in range(0, len(xv), 1000)]).numpy()
    if example == "auto_mpg_regression":
        pred, true = out * ystd + ymean, yva * ystd + ymean
        r2 = 1 - ((pred - true) ** 2).sum(0) / ((true - true.mean(0)) ** 2).sum(0)
        metric, name = float(r2.mean()), "r2"
    elif example == "debian_tags_multilabel":
        pred = 1 / (1 + np.exp(-out)) >= p["dataset"].get("threshold", 0.5)
        tp = (pred & (yva >= 0.5)).sum()
        fp = (pred & (yva < 0.5)).sum()
        fn = (~pred & (yva >= 0.5)).sum()
        metric, name = float(2 * tp / max(1, 2 * tp + fp + fn)), "micro_f1"
    else:
        mse = ((out - yva) ** 2).reshape(len(out), -1).mean(1)
        metric = float(np.mean(np.minimum(100.0, 10 * np.log10(1.0 / np.maximum(mse, 1e-30)))))
        name = "psnr"
    print(json.dumps({"torch": torch.__version__, "samples_per_s": samples / seconds, name: metric,
                      "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "losses": losses}))


# ---- the Strata half and the comparison ------------------------------------------------------------------

def strata_half(build, example, threads, epochs, train_limit=0):
    p_path, _ = project(example)
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        cmd = [os.path.join(build, "bin", "strata-train"), p_path, "--quiet", "--threads", str(threads),
               "--metrics-out", metrics, "--checkpoint-dir", os.path.join(tmp, "c"), "--history", "off"]
        if epochs:
            cmd += ["--epochs", str(epochs)]
        if train_limit:
            cmd += ["--train-limit", str(train_limit)]
        subprocess.run(cmd, check=True)
        lines = [json.loads(l) for l in open(metrics) if '"event"' in l]
        events = [e for e in lines if e.get("event") == "epoch"]
        losses = [e["loss"] for e in lines if e.get("event") == "step"]
    # Every epoch trains the same number of samples: the run's rate is the harmonic mean of the epochs' (each the
    # training steps' samples over their time, validation excluded).
    rate = len(events) / sum(1.0 / e["samples_per_s"] for e in events)
    return {"samples_per_s": rate, "events": events, "losses": losses}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--torch-python", default="/usr/bin/python3")
    ap.add_argument("--examples", default="auto_mpg_regression,debian_tags_multilabel,fashion_denoising")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=0, help="0: the project's")
    ap.add_argument("--train-limit", type=int, default=0, help="the first N training samples only (0: all)")
    ap.add_argument("--strata-order", action="store_true",
                    help="PyTorch takes Strata's shuffled order each epoch (else its own randperm): with the same "
                         "initial weights, the two sides then differ by their numerics alone. The order is that of "
                         "Strata's training seed --torch-seeds (the examples' seed is 42)")
    ap.add_argument("--steps", type=int, default=0, help="print the first N training steps' losses of both sides")
    ap.add_argument("--torch-seeds", default="42",
                    help="PyTorch's shuffle seeds, comma-separated: one PyTorch run each (the spread of its metric over "
                         "sample orders; the first is compared)")
    ap.add_argument("--torch-seed", type=int, default=42, help=argparse.SUPPRESS)
    ap.add_argument("--torch-half", help=argparse.SUPPRESS)
    ap.add_argument("--init", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torch_half:
        return torch_half(a.torch_half, a.threads, a.epochs, a.init, a.torch_seed, a.train_limit, a.strata_order,
                          a.steps)
    from text_bench import strata_initial_weights
    metric_of = {"auto_mpg_regression": "r2", "debian_tags_multilabel": "micro_f1", "fashion_denoising": "psnr"}
    print(f"{'example':<24} {'Strata samples/s':>16} {'PyTorch samples/s':>17} {'ratio':>6} "
          f"{'Strata metric':>14} {'PyTorch metric':>15}")
    for example in a.examples.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            init = os.path.join(tmp, "init.npz")
            strata_initial_weights(a.build, project(example)[0], init)
            s = strata_half(a.build, example, a.threads, a.epochs, a.train_limit)
            runs = []
            for seed in a.torch_seeds.split(","):
                r = subprocess.run([a.torch_python, os.path.abspath(__file__), "--torch-half", example, "--init", init,
                                    "--threads", str(a.threads), "--epochs", str(a.epochs), "--train-limit",
                                    str(a.train_limit), "--steps", str(a.steps), "--torch-seed", seed] +
                                   (["--strata-order"] if a.strata_order else []), check=True,
                                   capture_output=True, text=True)
                runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
            t = runs[0]
        name = metric_of[example]
        sm = s["events"][-1]["val_" + name]
        print(f"{example:<24} {s['samples_per_s']:>16.0f} {t['samples_per_s']:>17.0f} "
              f"{s['samples_per_s'] / t['samples_per_s']:>6.2f} {name + ' ' + format(sm, '.4f'):>14} "
              f"{name + ' ' + format(t[name], '.4f'):>15}   (PyTorch {t['torch']})")
        if len(runs) > 1:
            values = [r[name] for r in runs]
            print(f"  PyTorch {name} over shuffle seeds {a.torch_seeds}: " + ", ".join(f"{v:.4f}" for v in values) +
                  f" (mean {sum(values) / len(values):.4f}, range {max(values) - min(values):.4f})")
        for i, (ls, lt) in enumerate(zip(s["losses"][:a.steps], t["losses"])):
            print(f"  step {i + 1:>4}  loss Strata {ls:.6f}  PyTorch {lt:.6f}  difference {ls - lt:+.2e}")


if __name__ == "__main__":
    sys.exit(main())
