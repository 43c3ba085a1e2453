#!/usr/bin/env python3
"""Strata vs PyTorch on a text project (the Debian sections corpus, langid), same model, tokens, recipe and
thread count, in one run: trains the project with strata-train, then the same graph in PyTorch on the same
token ids, and prints training samples/s, validation accuracy after each epoch, and the ratios.

The PyTorch side reads the project file itself: the word or character tokenizer written again from
core/data/TextTokenizer.cpp (letters and digits, lowercased; vocabulary from the training split by count,
ties by byte order; ids 0 = <pad>, 1 = <unk>; cut or padded to max_tokens), and the graph interpreted layer by
layer with torch.nn modules (Embedding, PositionalEmbedding as a learned [T, D] parameter, Conv1D, Dense over
the last axis, LayerNorm, GELU/ReLU, Dropout, Add, Flatten, masked SequenceMeanPool / SequenceMaxPool, and
MultiHeadSelfAttention as nn.MultiheadAttention with key_padding_mask). Optimizer (SGD, Adam, AdamW), learning
rate, weight decay, batch, epochs, cosine or constant schedule per step and linear warm-up as the project says.
By default both start from the same weights: Strata's initial ones (strata-train on a copy of the project
with learning rate 0 for one step writes them to a checkpoint) are loaded into the PyTorch modules, so the
accuracies differ only by the order of the samples and the dropout masks. --init own: each framework's own
initialization.

  /usr/bin/python3 bench/text_bench.py examples/debian_sections_transformer.strata \\
      --torch-python /work/venv-bench/bin/python [--epochs 1] [--threads 2] [--build build] [--init own]

(the script re-runs itself under --torch-python for the PyTorch half; without it Debian's python3-torch.)
"""
import argparse, csv, json, math, os, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


# ---- data: the tokenizer and vocabulary of core/data (TextTokenizer.cpp, TextDataset.cpp) ------------------

def is_word_char(c):
    o = ord(c)
    if o < 0x80:
        return c.isascii() and c.isalnum()
    if o < 0x100:
        return o in (0xAA, 0xB5, 0xBA) or (o >= 0xC0 and o not in (0xD7, 0xF7))
    if 0x2000 <= o <= 0x2BFF or 0x3000 <= o <= 0x303F or 0xFE00 <= o <= 0xFE0F or o in (0xFEFF, 0xFFFD):
        return False
    return o < 0x1F000


def lower(c):
    o = ord(c)
    if o < 0x180 or 0x391 <= o <= 0x42F:
        return c.lower() if len(c.lower()) == 1 else c
    return c


def tokenize(text, word):
    text = "".join(lower(c) for c in text)
    if not word:
        return list(text)
    tokens, cur = [], []
    for c in text:
        if is_word_char(c):
            cur.append(c)
        elif cur:
            tokens.append("".join(cur))
            cur = []
    if cur:
        tokens.append("".join(cur))
    return tokens


def read_rows(path, label_column):
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        reader = csv.reader(f)
        header = next(reader)
        li = header.index(label_column)
        ti = 1 - li if len(header) == 2 else [i for i in range(len(header)) if i != li][0]
        return [(r[ti], r[li]) for r in reader if len(r) == len(header)]


def load_text(project_path):
    p = json.load(open(project_path))
    d = p["dataset"]
    base = os.path.dirname(os.path.abspath(project_path))
    train = read_rows(os.path.join(base, d["train_path"]), d["label_column"])
    val = read_rows(os.path.join(base, d["validation_path"]), d["label_column"])
    word = d["tokenizer"] == "word"
    train_tokens = [tokenize(t, word) for t, _ in train]
    counts = {}
    for toks in train_tokens:
        for t in toks:
            counts[t] = counts.get(t, 0) + 1
    order = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0].encode("utf-8")))
    vocab = {tok: i + 2 for i, (tok, _) in enumerate(order[: d["max_vocab"] - 2])}
    labels = sorted({l for _, l in train})
    label_id = {l: i for i, l in enumerate(labels)}
    n = d["max_tokens"]

    def encode(rows, tokens):
        ids, ys = [], []
        for (text, label), toks in zip(rows, tokens):
            row = [vocab.get(t, 1) for t in toks[:n]]
            ids.append(row + [0] * (n - len(row)))
            ys.append(label_id[label])
        return ids, ys

    return p, encode(train, train_tokens), encode(val, [tokenize(t, word) for t, _ in val])


# ---- PyTorch: the project's graph, interpreted -----------------------------------------------------------

def read_safetensors(path):
    """name -> (shape, float32 values as a flat list of bytes), for the F32 tensors of a .safetensors file."""
    import numpy as np
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__" or t["dtype"] != "F32":
            continue
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype="<f4").reshape(t["shape"]).copy()
    return out


def strata_initial_weights(build, project_path, out_npz, seed=None):
    """Strata's initial weights for the project (its seed, or `seed`): one step at learning rate 0, as .npz."""
    import numpy as np
    p = json.load(open(project_path))
    if seed is not None:
        p["training"]["seed"] = seed
    p["training"]["learning_rate"] = 0.0
    p["training"]["weight_decay"] = 0.0
    base = os.path.dirname(os.path.abspath(project_path))
    for k in ("train_path", "validation_path", "train_images", "train_labels", "validation_images",
              "validation_labels", "tokenizer_model"):
        if p["dataset"].get(k):
            p["dataset"][k] = os.path.join(base, p["dataset"][k])
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "init.strata")
        json.dump(p, open(copy, "w"))
        subprocess.run([os.path.join(build, "bin", "strata-train"), copy, "--max-steps", "1", "--quiet",
                        "--checkpoint-dir", os.path.join(tmp, "c"), "--history", "off"], check=True)
        files = sorted((os.path.getmtime(os.path.join(tmp, "c", f)), f) for f in os.listdir(os.path.join(tmp, "c"))
                       if f.endswith(".safetensors"))
        np.savez(out_npz, **read_safetensors(os.path.join(tmp, "c", files[-1][1])))


def torch_half(project_path, threads, epochs, init_npz=None, seed=42):
    import torch
    import torch.nn as nn
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    p, (xtr, ytr), (xva, yva) = load_text(project_path)
    nodes = {n["id"]: n for n in p["graph"]["nodes"]}
    into = {}  # node id -> {port: source id}
    for e in p["graph"]["edges"]:
        into.setdefault(e["to"]["node"], {})[e["to"]["port"]] = e["from"]["node"]
    order, seen = [], set()

    def visit(i):
        if i in seen:
            return
        for src in into.get(i, {}).values():
            visit(src)
        seen.add(i)
        order.append(i)

    for i in nodes:
        visit(i)
    fed = {src for ports in into.values() for src in ports.values()}
    output = [i for i in nodes if i not in fed][0]
    shapes = {}

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleDict()
            self.extra = nn.ParameterDict()
            for i in order:
                n, prm, t = nodes[i], nodes[i]["params"], nodes[i]["type"]
                src = into.get(i, {})
                ins = shapes.get(src.get("in", src.get("in0")))
                key = str(i)
                if t == "Input":
                    shapes[i] = list(prm["shape"])
                elif t == "Embedding":
                    self.layers[key] = nn.Embedding(prm["vocab"], prm["dim"])
                    shapes[i] = ins + [prm["dim"]]
                elif t == "PositionalEmbedding":
                    self.extra[key] = nn.Parameter(torch.randn(*ins) * 0.02)
                    shapes[i] = ins
                elif t == "Conv1D":
                    k, s, pad, dil = prm["kernel"], prm.get("stride", 1), prm.get("padding", 0), prm.get("dilation", 1)
                    self.layers[key] = nn.Conv1d(ins[1], prm["filters"], k, s, pad, dil, bias=prm.get("use_bias", True))
                    shapes[i] = [(ins[0] + 2 * pad - dil * (k - 1) - 1) // s + 1, prm["filters"]]
                elif t == "Dense":
                    self.layers[key] = nn.Linear(ins[-1], prm["units"], bias=prm.get("use_bias", True))
                    shapes[i] = ins[:-1] + [prm["units"]]
                elif t == "LayerNorm":
                    self.layers[key] = nn.LayerNorm(ins[-1], eps=prm.get("eps", 1e-5))
                    shapes[i] = ins
                elif t == "MultiHeadSelfAttention":
                    self.layers[key] = nn.MultiheadAttention(ins[1], prm.get("heads", 4), dropout=prm.get("dropout", 0.0),
                                                             bias=prm.get("use_bias", True), batch_first=True)
                    shapes[i] = ins
                elif t in ("SequenceMeanPool", "SequenceMaxPool"):
                    shapes[i] = [ins[1]]
                elif t == "Flatten":
                    shapes[i] = [math.prod(ins)]
                elif t == "Dropout":
                    self.layers[key] = nn.Dropout(prm.get("rate", 0.5))
                    shapes[i] = ins
                elif t in ("ReLU", "GELU", "Tanh", "Add"):
                    shapes[i] = ins
                else:
                    raise SystemExit("text_bench.py: no PyTorch mapping for layer type " + t)

        def forward(self, ids):
            v = {}
            for i in order:
                n, prm, t = nodes[i], nodes[i]["params"], nodes[i]["type"]
                src = into.get(i, {})
                x = v[src["in"]] if "in" in src else None
                key = str(i)
                if t == "Input":
                    y = ids
                elif t == "Embedding":
                    y = self.layers[key](x.long())
                elif t == "PositionalEmbedding":
                    y = x + self.extra[key]
                elif t == "Conv1D":
                    y = self.layers[key](x.transpose(1, 2)).transpose(1, 2)
                elif t in ("Dense", "LayerNorm", "Dropout"):
                    y = self.layers[key](x)
                elif t == "MultiHeadSelfAttention":
                    pad = (v[src["mask"]] == 0) if "mask" in src else None
                    if pad is not None:
                        pad = pad.clone()
                        pad[pad.all(dim=1), 0] = False  # a sample of padding only: PyTorch would give NaN
                    y = self.layers[key](x, x, x, key_padding_mask=pad, need_weights=False)[0]
                elif t in ("SequenceMeanPool", "SequenceMaxPool"):
                    keep = (v[src["mask"]] != 0).unsqueeze(-1).float() if "mask" in src else torch.ones_like(x[..., :1])
                    if t == "SequenceMeanPool":
                        y = (x * keep).sum(1) / keep.sum(1).clamp(min=1)
                    else:
                        y = (x + (keep - 1) * 1e30).max(1).values * (keep.sum(1) > 0).float()
                elif t == "Flatten":
                    y = x.flatten(1)
                elif t == "ReLU":
                    y = torch.relu(x)
                elif t == "GELU":
                    y = nn.functional.gelu(x)
                elif t == "Tanh":
                    y = torch.tanh(x)
                elif t == "Add":
                    y = sum(v[src[k]] for k in sorted(src))
                v[i] = y
            return v[output]

    net = Net()
    if init_npz:
        # Strata's names are "<node name>.<param>", stored flat in checkpoints; layouts as in core/layers
        # (Conv1D [kernel, filters, in]), the others PyTorch's.
        import numpy as np
        w = dict(np.load(init_npz))
        loaded = 0
        with torch.no_grad():
            for i in order:
                n, t, key = nodes[i]["name"], nodes[i]["type"], str(i)

                def put(dst, name, fn=None):
                    nonlocal loaded
                    a = w.pop(n + "." + name)
                    if a.size != dst.numel():
                        raise SystemExit(f"text_bench.py: {n}.{name} has {a.size} values, PyTorch wants "
                                         f"{tuple(dst.shape)}")
                    src = torch.from_numpy(fn(a) if fn else a.reshape(tuple(dst.shape)))
                    dst.copy_(src)
                    loaded += 1

                if t == "PositionalEmbedding":
                    put(net.extra[key], "weight")
                elif t in ("Embedding", "Dense"):
                    put(net.layers[key].weight, "weight")
                    if t == "Dense" and net.layers[key].bias is not None:
                        put(net.layers[key].bias, "bias")
                elif t == "Conv1D":
                    f, c, k = net.layers[key].weight.shape
                    put(net.layers[key].weight, "weight",
                        lambda a: np.ascontiguousarray(a.reshape(k, f, c).transpose(1, 2, 0)))
                    if net.layers[key].bias is not None:
                        put(net.layers[key].bias, "bias")
                elif t == "LayerNorm":
                    put(net.layers[key].weight, "gamma")
                    put(net.layers[key].bias, "beta")
                elif t == "MultiHeadSelfAttention":
                    m = net.layers[key]
                    put(m.in_proj_weight, "in_weight")
                    put(m.out_proj.weight, "out_weight")
                    if m.in_proj_bias is not None:
                        put(m.in_proj_bias, "in_bias")
                        put(m.out_proj.bias, "out_bias")
        if loaded != sum(1 for _ in net.parameters()):
            raise SystemExit(f"text_bench.py: {loaded} of {sum(1 for _ in net.parameters())} PyTorch parameters "
                             "loaded from Strata's initial weights")
    tr = p["training"]
    kind = tr["optimizer"]
    if kind == "sgd":
        opt = torch.optim.SGD(net.parameters(), lr=tr["learning_rate"], momentum=tr["momentum"],
                              weight_decay=tr["weight_decay"], nesterov=tr["nesterov"])
    elif kind == "adam":
        opt = torch.optim.Adam(net.parameters(), lr=tr["learning_rate"], betas=(tr["beta1"], tr["beta2"]),
                               eps=tr["eps"], weight_decay=tr["weight_decay"])
    else:
        opt = torch.optim.AdamW(net.parameters(), lr=tr["learning_rate"], betas=(tr["beta1"], tr["beta2"]),
                                eps=tr["eps"], weight_decay=tr["weight_decay"])
    batch = tr["batch_size"]
    Xtr, Ytr = torch.tensor(xtr, dtype=torch.float32), torch.tensor(ytr)
    Xva, Yva = torch.tensor(xva, dtype=torch.float32), torch.tensor(yva)
    steps_per_epoch = (len(Xtr) + batch - 1) // batch
    total = steps_per_epoch * tr["epochs"]  # the schedule spans the project's epochs, as in Strata
    base, floor, warm = tr["learning_rate"], tr["min_learning_rate"], tr["warmup_steps"]

    def lr_at(step):
        lr = base
        if tr["schedule"] == "cosine":
            lr = floor + (base - floor) * 0.5 * (1 + math.cos(math.pi * step / total))
        if warm > 0 and step < warm:
            lr *= (step + 1) / warm
        return lr

    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(seed)
    step, results = 0, []
    for epoch in range(epochs):
        net.train()
        perm = torch.randperm(len(Xtr), generator=g)
        t0 = time.perf_counter()
        for b0 in range(0, len(Xtr), batch):
            idx = perm[b0:b0 + batch]
            for group in opt.param_groups:
                group["lr"] = lr_at(step)
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(net(Xtr[idx]), Ytr[idx])
            loss.backward()
            opt.step()
            step += 1
        sps = len(Xtr) / (time.perf_counter() - t0)
        net.eval()
        correct = 0
        with torch.no_grad():
            for b0 in range(0, len(Xva), 512):
                correct += (net(Xva[b0:b0 + 512]).argmax(1) == Yva[b0:b0 + 512]).sum().item()
        results.append({"samples_per_s": sps, "val_acc": correct / len(Xva)})
    print(json.dumps({"torch": torch.__version__, "epochs": results, "same_init": bool(init_npz)}))


# ---- Strata, and the comparison ---------------------------------------------------------------------------

def strata_half(build, project, threads, epochs, seed=None):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        subprocess.run([os.path.join(build, "bin", "strata-train"), project, "--threads", str(threads), "--epochs",
                        str(epochs), "--quiet", "--metrics-out", metrics, "--checkpoint-dir",
                        os.path.join(tmp, "checkpoints"), "--history", "off"] +
                       (["--seed", str(seed)] if seed is not None else []), check=True)
        ev = [json.loads(l) for l in open(metrics) if '"event":"epoch"' in l]
        return [{"samples_per_s": e["samples_per_s"], "val_acc": e["val_acc"]} for e in ev]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("project")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=0, help="0: the project's epochs")
    ap.add_argument("--torch-python", default="/usr/bin/python3")
    ap.add_argument("--init", choices=("strata", "own"), default="strata",
                    help="strata: PyTorch starts from Strata's initial weights; own: each framework's own init")
    ap.add_argument("--seeds", default="",
                    help="comma-separated seeds: one run of each side per seed (Strata's --seed, PyTorch's "
                         "generator), then the mean final accuracies; default one run, the project's seed")
    ap.add_argument("--torch-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--init-from", help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=42, help=argparse.SUPPRESS)
    a = ap.parse_args()
    epochs = a.epochs or json.load(open(a.project))["training"]["epochs"]
    if a.torch_only:
        torch_half(a.project, a.threads, epochs, a.init_from, a.seed)
        return
    seeds = [int(x) for x in a.seeds.split(",") if x.strip()] or [None]
    finals = []
    for seed in seeds:
        s, t = compare_once(a, epochs, seed)
        finals.append((s[-1]["val_acc"], t["epochs"][-1]["val_acc"]))
    if len(seeds) > 1:
        ms = sum(f[0] for f in finals) / len(finals)
        mt = sum(f[1] for f in finals) / len(finals)
        print(f"mean final accuracy over seeds {a.seeds}: Strata {ms:.4f}, PyTorch {mt:.4f}, "
              f"difference {100 * (ms - mt):+.2f} points")


def compare_once(a, epochs, seed):
    with tempfile.TemporaryDirectory() as tmp:
        extra = [] if seed is None else ["--seed", str(seed)]
        if a.init == "strata":
            npz = os.path.join(tmp, "init.npz")
            strata_initial_weights(a.build, a.project, npz, seed)
            extra += ["--init-from", npz]
        s = strata_half(a.build, a.project, a.threads, epochs, seed)
        out = subprocess.run([a.torch_python, os.path.abspath(__file__), a.project, "--torch-only", "--threads",
                              str(a.threads), "--epochs", str(epochs)] + extra, check=True, stdout=subprocess.PIPE,
                             text=True)
    t = json.loads(out.stdout.strip().splitlines()[-1])
    name = os.path.splitext(os.path.basename(a.project))[0]
    init = "same initial weights (Strata's)" if t.get("same_init") else "each framework's own initialization"
    print(f"{name}: {a.threads} threads, PyTorch {t['torch']}, {init}" + (f", seed {seed}" if seed is not None else ""))
    print(f"{'epoch':>5} {'Strata samples/s':>16} {'PyTorch samples/s':>17} {'ratio':>6} {'Strata acc':>10} "
          f"{'PyTorch acc':>11}")
    for e, (se, te) in enumerate(zip(s, t["epochs"]), 1):
        print(f"{e:>5} {se['samples_per_s']:>16.0f} {te['samples_per_s']:>17.0f} "
              f"{se['samples_per_s'] / te['samples_per_s']:>6.2f} {se['val_acc']:>10.4f} {te['val_acc']:>11.4f}")
    return s, t


if __name__ == "__main__":
    main()
