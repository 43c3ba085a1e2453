#!/usr/bin/env python3
"""PyTorch-on-GPU reference for Strata's CUDA backend: one epoch of Fashion-MNIST.

Trains the same CNN as examples/fashion_cnn.strata (read from --project when its
graph is a plain chain of known layers; otherwise the CNN of shared/TOOLCHAIN.md:
conv32-relu-pool-conv64-relu-pool-fc128-relu-fc10, 3x3 kernels, padding 1) with SGD
(lr 0.01, momentum 0.9), inputs scaled to 0..1, batches shuffled each epoch.
Input pipeline (--input): "gpu" (default) keeps the whole dataset on the GPU and
gathers each batch there, PyTorch's fastest case and so the stricter reference;
"pinned" gathers on the CPU and copies each batch from pinned memory, as Strata's
trainer does.

TF32 follows Strata's default (on, for convolutions and matmuls); --no-tf32
turns it off. cudnn.benchmark is on (Strata also times cuDNN algorithms once
per shape). samples_per_s is the last epoch's rate (with --epochs 2 the
second, after the algorithm search), as gpu-check reads Strata's last epoch;
epoch_samples_per_s lists every epoch.

Prints one JSON object per batch size on stdout, e.g.
  {"batch": 64, "samples_per_s": 51234.5, "seconds": 1.17, "train_loss": 0.52,
   "val_accuracy": 0.84, "peak_allocated_bytes": 123456, "peak_reserved_bytes": ...}

Usage: gpu_bench.py [--data DIR] [--project FILE.strata] [--batch-sizes 64,1024]
DIR holds {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]
(default /usr/share/datasets/fashion-mnist).
"""

import argparse
import gzip
import json
import os
import struct
import sys
import time
import warnings

import numpy as np

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    warnings.filterwarnings("ignore", message="Lazy modules")
except ImportError as e:  # pragma: no cover - reported to the caller
    sys.exit(f"gpu_bench.py: PyTorch is not importable ({e})")


def read_idx(path):
    """Reads a (possibly gzipped) big-endian IDX file into a numpy array."""
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        path += ".gz"
    if not os.path.exists(path):
        sys.exit(f"gpu_bench.py: missing data file {path}")
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, dtype_code, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype_code != 0x08:
        sys.exit(f"gpu_bench.py: {path}: not an unsigned-byte IDX file")
    dims = struct.unpack(">" + "I" * ndim, data[4 : 4 + 4 * ndim])
    arr = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if arr.size != int(np.prod(dims)):
        sys.exit(f"gpu_bench.py: {path}: truncated ({arr.size} bytes of {int(np.prod(dims))})")
    return arr.reshape(dims)


def load_fashion(data_dir):
    def file(name):
        return os.path.join(data_dir, name)

    xs = read_idx(file("train-images-idx3-ubyte"))
    ys = read_idx(file("train-labels-idx1-ubyte"))
    xv = read_idx(file("t10k-images-idx3-ubyte"))
    yv = read_idx(file("t10k-labels-idx1-ubyte"))
    to_x = lambda a: torch.from_numpy(a.astype(np.float32) / 255.0).reshape(-1, 1, 28, 28)
    to_y = lambda a: torch.from_numpy(a.astype(np.int64))
    return to_x(xs), to_y(ys), to_x(xv), to_y(yv)


def pair(v, default):
    if v is None or v == []:
        return default
    if isinstance(v, int):
        return (v, v)
    if len(v) == 1:
        return (v[0], v[0])
    return (v[0], v[1])


def model_from_project(path):
    """Builds an nn.Sequential from a .strata graph that is a single chain; None when it is not."""
    with open(path) as f:
        project = json.load(f)
    graph = project.get("graph", {})
    nodes = {n["id"]: n for n in graph.get("nodes", [])}
    nxt = {}
    has_input = set()
    for e in graph.get("edges", []):
        a, b = e["from"]["node"], e["to"]["node"]
        if a in nxt:
            return None, "a node feeds several others"
        nxt[a] = b
        has_input.add(b)
    starts = [i for i in nodes if i not in has_input]
    if len(starts) != 1:
        return None, "not a single chain"
    layers = []
    node = starts[0]
    while node is not None:
        n = nodes[node]
        t, p = n["type"], n.get("params", {}) or {}
        if t == "Input":
            pass
        elif t == "Conv2D":
            layers.append(
                nn.LazyConv2d(
                    p.get("filters", 32),
                    pair(p.get("kernel"), (3, 3)),
                    stride=pair(p.get("stride"), (1, 1)),
                    padding=pair(p.get("padding"), (0, 0)),
                    dilation=pair(p.get("dilation"), (1, 1)),
                    groups=p.get("groups", 1),
                    bias=p.get("use_bias", True),
                )
            )
        elif t in ("MaxPool2D", "AvgPool2D"):
            k = pair(p.get("kernel"), (2, 2))
            s = pair(p.get("stride"), k)
            pad = pair(p.get("padding"), (0, 0))
            if t == "MaxPool2D":
                layers.append(nn.MaxPool2d(k, s, pad))
            else:
                layers.append(nn.AvgPool2d(k, s, pad, count_include_pad=False))
        elif t == "Dense":
            layers.append(nn.LazyLinear(p.get("units", 128), bias=p.get("use_bias", True)))
        elif t == "Flatten":
            layers.append(nn.Flatten())
        elif t == "ReLU":
            layers.append(nn.ReLU())
        elif t == "GELU":
            layers.append(nn.GELU())
        elif t == "Tanh":
            layers.append(nn.Tanh())
        elif t == "Sigmoid":
            layers.append(nn.Sigmoid())
        elif t == "Dropout":
            layers.append(nn.Dropout(p.get("rate", p.get("p", 0.5))))
        elif t == "Softmax":
            pass  # the loss applies log-softmax itself
        else:
            return None, f"layer type {t} is not mapped"
        node = nxt.get(node)
    return nn.Sequential(*layers), "from " + os.path.basename(path)


def default_model():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.LazyLinear(128), nn.ReLU(), nn.Linear(128, 10),
    )  # fmt: skip


def run(args, batch, data, device):
    xs, ys, xv, yv = data
    torch.manual_seed(42)
    model, origin = (None, "")
    if args.project:
        model, origin = model_from_project(args.project)
        if model is None:
            print(f"gpu_bench.py: {args.project}: {origin}; using the default CNN", file=sys.stderr)
    if model is None:
        model, origin = default_model(), "default CNN"
    model = model.to(device)
    with torch.no_grad():
        model(xs[:2].to(device))  # materializes lazy layers
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    if args.input == "gpu":
        xs_dev, ys_dev = xs.to(device), ys.to(device)  # once, before the timed epoch
    else:
        xs_pin, ys_pin = xs.pin_memory(), ys.pin_memory()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats(device)
    g = torch.Generator().manual_seed(1)
    samples = xs.shape[0]
    start = time.perf_counter()
    model.train()
    loss_sum = torch.zeros((), device=device)
    steps = 0
    epoch_seconds = []
    for epoch in range(args.epochs):
        epoch_start = time.perf_counter()
        perm = torch.randperm(samples, generator=g)
        if args.input == "gpu":
            perm = perm.to(device)
        for i in range(0, samples, batch):
            idx = perm[i : i + batch]
            if args.input == "gpu":
                xb, yb = xs_dev[idx], ys_dev[idx]
            else:
                xb = xs_pin[idx].pin_memory().to(device, non_blocking=True)
                yb = ys_pin[idx].pin_memory().to(device, non_blocking=True)
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            loss_sum += loss.detach()
            steps += 1
        torch.cuda.synchronize()
        epoch_seconds.append(time.perf_counter() - epoch_start)
    seconds = time.perf_counter() - start
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, xv.shape[0], 1024):
            out = model(xv[i : i + 1024].to(device))
            correct += (out.argmax(1).cpu() == yv[i : i + 1024]).sum().item()
    return {
        "batch": batch,
        "model": origin,
        "epochs": args.epochs,
        # The last epoch's rate (after the first, cuDNN's algorithm search is done), as strata-train's last
        # epoch event gives it; every epoch's rate too.
        "samples_per_s": samples / epoch_seconds[-1],
        "epoch_samples_per_s": [samples / t for t in epoch_seconds],
        "seconds": seconds,
        "train_loss": (loss_sum / max(steps, 1)).item(),
        "val_accuracy": correct / xv.shape[0],
        "peak_allocated_bytes": torch.cuda.max_memory_allocated(device),
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(device),
        "tf32": not args.no_tf32,
        "input": args.input,
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(device),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--project", default=None, help=".strata file whose (chain) graph to mirror")
    ap.add_argument("--batch-sizes", default="64,1024")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--no-tf32", action="store_true")
    ap.add_argument("--input", choices=["gpu", "pinned"], default="gpu",
                    help="gpu: dataset resident on the GPU (default); pinned: per-batch copies from pinned memory")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpu_bench.py: torch.cuda.is_available() is False (no GPU, or a CPU-only PyTorch)")
    torch.backends.cuda.matmul.allow_tf32 = not args.no_tf32
    torch.backends.cudnn.allow_tf32 = not args.no_tf32
    torch.backends.cudnn.benchmark = True
    device = torch.device("cuda:0")
    data = load_fashion(args.data)
    for b in [int(s) for s in args.batch_sizes.split(",") if s]:
        print(json.dumps(run(args, b, data, device)), flush=True)


if __name__ == "__main__":
    main()
