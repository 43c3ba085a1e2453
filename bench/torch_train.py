#!/usr/bin/env python3
"""The PyTorch reference for bench/cpu_bench.py: trains the same model as a
Strata example (same architecture, data, batch, optimizer and schedule, and with
--init-from the same initial weights) and prints one JSON line with samples/s of
the training epochs, validation accuracy and peak RSS."""
import argparse, gzip, json, math, resource, struct, sys, time

import numpy as np
import torch
import torch.nn as nn


def read_idx(path):
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def model_for(name):
    if name == "fashion_mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    if name == "fashion_cnn":
        return nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
    if name == "fashion_cnn_bn":
        def block(cin, cout):
            return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]
        return nn.Sequential(
            *block(1, 32), *block(32, 32), nn.MaxPool2d(2), *block(32, 64), *block(64, 64), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(64 * 7 * 7, 256, bias=False), nn.BatchNorm1d(256), nn.ReLU(), nn.Dropout(0.3),
            nn.Linear(256, 10))
    if name == "residual_template":
        return ResidualTemplate()
    raise SystemExit("unknown model " + name)


class ResidualTemplate(nn.Module):
    """The workbench's "Small residual net" template (bench/residual_template.strata): a 16-filter stem and
    two blocks conv-ReLU-conv + skip, ReLU, then global average pooling and a Dense layer."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(1, 16, 3, padding=1)
        self.blocks = nn.ModuleList(
            nn.ModuleList([nn.Conv2d(16, 16, 3, padding=1), nn.Conv2d(16, 16, 3, padding=1)]) for _ in range(2))
        self.logits = nn.Linear(16, 10)

    def forward(self, x):
        x = torch.relu(self.stem(x))
        for c1, c2 in self.blocks:
            x = torch.relu(c2(torch.relu(c1(x))) + x)
        return self.logits(x.mean(dim=(2, 3)))


def load_strata_weights(model, npz_path):
    """Strata's initial weights (bench/cpu_bench.py writes them from a learning-rate-0 step, node order) into
    the model's Conv2d / BatchNorm / Linear modules, in the order both define them; layouts are PyTorch's
    (Conv2D [filters, in, kh, kw], Dense [units, in])."""
    w = np.load(npz_path)
    names = w["__order__"].tolist()
    modules = [m for m in model.modules() if isinstance(m, (nn.Conv2d, nn.BatchNorm1d, nn.BatchNorm2d, nn.Linear))]
    if len(modules) != len(names):
        raise SystemExit("torch_train.py: %d layers with weights in Strata's project, %d in the PyTorch model"
                         % (len(names), len(modules)))
    with torch.no_grad():
        for m, name in zip(modules, names):
            is_bn = isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d))
            for ours, theirs in ((("gamma", "weight"), ("beta", "bias")) if is_bn else (("weight", "weight"),
                                                                                       ("bias", "bias"))):
                dst = getattr(m, theirs)
                if dst is None:
                    continue
                a = w[name + "." + ours]
                if a.size != dst.numel():
                    raise SystemExit("torch_train.py: %s.%s has %d values, PyTorch wants %s"
                                     % (name, ours, a.size, tuple(dst.shape)))
                dst.copy_(torch.from_numpy(a.reshape(tuple(dst.shape))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--nesterov", action="store_true")
    ap.add_argument("--warmup-steps", type=int, default=0, help="linear warm-up, Strata's: lr x (step+1)/N")
    ap.add_argument("--init-from", help="an .npz of Strata's initial weights (bench/cpu_bench.py writes it)")
    ap.add_argument("--horizontal-flip", action="store_true",
                    help="mirror each training sample left-right with probability 0.5 (Strata's horizontal_flip)")
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--schedule", choices=["constant", "cosine"], default="constant",
                    help="cosine: from --lr to 0 over all steps, per step (Strata's cosine)")
    ap.add_argument("--normalization", choices=["scale", "standardize"], default="scale",
                    help="standardize: minus the training images' mean, over their std (after /255)")
    ap.add_argument("--autocast-bf16", action="store_true",
                    help="forward and loss under torch.autocast('cpu', bfloat16) (bench/bf16_bench.py)")
    ap.add_argument("--train-limit", type=int, default=0, help="only the first N training images (0: all)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    d = a.data
    xtr = torch.from_numpy(read_idx(d + "/train-images-idx3-ubyte.gz").astype(np.float32) / 255.0).unsqueeze(1)
    ytr = torch.from_numpy(read_idx(d + "/train-labels-idx1-ubyte.gz").astype(np.int64))
    xva = torch.from_numpy(read_idx(d + "/t10k-images-idx3-ubyte.gz").astype(np.float32) / 255.0).unsqueeze(1)
    yva = torch.from_numpy(read_idx(d + "/t10k-labels-idx1-ubyte.gz").astype(np.int64))
    if a.train_limit > 0:
        xtr, ytr = xtr[:a.train_limit], ytr[:a.train_limit]
    if a.normalization == "standardize":
        mean, std = xtr.mean(), xtr.std(unbiased=False)
        xtr, xva = (xtr - mean) / std, (xva - mean) / std
    model = model_for(a.model)
    if a.init_from:
        load_strata_weights(model, a.init_from)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum, weight_decay=a.weight_decay,
                          nesterov=a.nesterov)
    steps_per_epoch = (len(xtr) + a.batch - 1) // a.batch
    total = steps_per_epoch * a.epochs

    def factor(step):  # core/train/LrSchedule.cpp: cosine to 0 over all steps, times the linear warm-up
        f = 0.5 * (1.0 + math.cos(math.pi * min(step / total, 1.0))) if a.schedule == "cosine" else 1.0
        return f * ((step + 1) / a.warmup_steps if step < a.warmup_steps else 1.0)

    sched = (torch.optim.lr_scheduler.LambdaLR(opt, factor)
             if a.schedule == "cosine" or a.warmup_steps > 0 else None)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(a.seed)
    train_seconds, samples = 0.0, 0
    for _ in range(a.epochs):
        model.train()
        perm = torch.randperm(len(xtr), generator=g)
        t0 = time.perf_counter()
        for i in range(0, len(xtr), a.batch):
            idx = perm[i:i + a.batch]
            xb, yb = xtr[idx], ytr[idx]
            if a.horizontal_flip:
                flip = torch.rand(len(idx), generator=g) < 0.5
                xb = torch.where(flip[:, None, None, None], xb.flip(3), xb)
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.autocast_bf16):
                loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            if sched:
                sched.step()
            samples += len(idx)
        train_seconds += time.perf_counter() - t0
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(xva), 1000):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.autocast_bf16):
                logits = model(xva[i:i + 1000])
            correct += (logits.argmax(1) == yva[i:i + 1000]).sum().item()
    print(json.dumps({"torch": torch.__version__, "samples_per_s": samples / train_seconds,
                      "val_acc": correct / len(xva),
                      "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


if __name__ == "__main__":
    sys.exit(main())
