#!/usr/bin/env python3
"""The fine-tune recipe (issue 37), Strata against PyTorch in one run, side by side.

A resnet18 (torchvision's layout: 7x7 stem, max pooling, four stages of two basic blocks, 11.2 M parameters;
one input channel) is trained by PyTorch on half of Fashion-MNIST's classes (A: 0-4) and exported to ONNX. Then
the other half (B: 5-9, labels 0-4) is learnt with the backbone frozen and a new head, twice:
  - PyTorch: the backbone frozen (requires_grad False, eval mode), fc replaced by a new Linear(512, 5);
  - Strata:  strata-train import MODEL.onnx -o PROJECT.strata (which writes the weights beside it, named by
             training.init_from), then strata-train PROJECT.strata --freeze-until <the head's input> --replace-head
             --init-from <those weights>.
Same data (inputs x/255), batch, optimizer (SGD, momentum 0.9, constant learning rate), epochs and threads. By
default (--head-init strata) PyTorch's new head starts from Strata's initial head for the seed (one strata-train
step at learning rate 0 writes it to a checkpoint) and PyTorch visits the samples in Strata's order for that seed
(strata_epoch_order), so the two runs differ only in arithmetic; --head-init own gives each its own head
initialization and order. Prints samples/s, validation accuracy on B's test images and the first losses of each
side (equal in the same-start mode when both compute the same thing), and the ratios; --seeds runs several.

The class subsets are IDX files this script writes (gzipped, like the originals) into --work: Strata's IDX
loader reads them as any Fashion-MNIST file, so no dataset option is needed for a class subset.

  /work/venv-bench/bin/python bench/finetune_bench.py [--build build] [--threads 2] [--pretrain-epochs 2]
      [--epochs 2] [--batch 128] [--lr 0.05] [--seeds 1,2,3] [--head-init strata|own] [--work DIR [--reuse]]
      [--limit N] [--json OUT.json]

Needs torch (and nothing else: the ONNX file is written by torch.onnx.export's TorchScript exporter) and numpy.
"""
import argparse, gzip, json, os, re, shutil, struct, subprocess, sys, tempfile, time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FASHION = "/usr/share/datasets/fashion-mnist"
SPLIT_A, SPLIT_B = list(range(0, 5)), list(range(5, 10))
NAMES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]


# ---- data -------------------------------------------------------------------------------------------------------

def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def write_idx(path, array):
    header = struct.pack(">BBBB", 0, 0, 8, array.ndim) + struct.pack(">" + "I" * array.ndim, *array.shape)
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(header + np.ascontiguousarray(array, dtype=np.uint8).tobytes())


def class_subset(work, name, classes, limit=0):
    """IDX files of the samples of `classes`, labels renumbered 0..len-1 (the first `limit` of each split when
    `limit` > 0); returns the four paths and the arrays."""
    out = {}
    for split, prefix in (("train", "train"), ("validation", "t10k")):
        images = read_idx(os.path.join(FASHION, prefix + "-images-idx3-ubyte.gz"))
        labels = read_idx(os.path.join(FASHION, prefix + "-labels-idx1-ubyte.gz"))
        keep = np.isin(labels, classes)
        if limit > 0:
            keep &= np.cumsum(keep) <= limit
        remap = np.zeros(256, dtype=np.uint8)
        for i, c in enumerate(classes):
            remap[c] = i
        img_path = os.path.join(work, "%s-%s-images-idx3-ubyte.gz" % (name, split))
        lab_path = os.path.join(work, "%s-%s-labels-idx1-ubyte.gz" % (name, split))
        write_idx(img_path, images[keep])
        write_idx(lab_path, remap[labels[keep]])
        out[split] = (img_path, lab_path, images[keep], remap[labels[keep]])
    return out


# ---- PyTorch ----------------------------------------------------------------------------------------------------

def resnet18(torch, classes):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = self.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return self.relu(y + (x if self.downsample is None else self.downsample(x)))

    class ResNet18(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            stages, cin = [], 64
            for i, cout in enumerate((64, 128, 256, 512)):
                stride = 1 if i == 0 else 2
                stages.append(nn.Sequential(Block(cin, cout, stride), Block(cout, cout, 1)))
                cin = cout
            self.layer1, self.layer2, self.layer3, self.layer4 = stages
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(512, classes)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    return ResNet18()


def tensors(torch, split):
    _, _, images, labels = split
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
    return x, torch.from_numpy(labels.astype(np.int64))


def accuracy(torch, model, x, y, batch=1000):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), batch):
            correct += (model(x[i:i + batch]).argmax(1) == y[i:i + batch]).sum().item()
    return correct / len(x)


def torch_train(torch, model, params, x, y, epochs, batch, lr, seed, frozen_backbone=None, strata_order=False,
                losses=None):
    """SGD (momentum 0.9, constant lr) over shuffled batches; returns the mean samples/s of the epochs. With
    strata_order, each epoch's batches are Strata's for that seed (strata_epoch_order); `losses`, when a list,
    gets each step's loss."""
    opt = torch.optim.SGD(params, lr=lr, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(seed)
    rates = []
    for epoch in range(epochs):
        model.train()
        if frozen_backbone is not None:
            frozen_backbone.eval()  # a frozen backbone's BatchNorm uses its running statistics, as exported
        order = (torch.tensor(strata_epoch_order(len(x), seed, epoch + 1)) if strata_order
                 else torch.randperm(len(x), generator=g))
        start, seen = time.perf_counter(), 0
        for i in range(0, len(x), batch):
            idx = order[i:i + batch]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            seen += len(idx)
            if losses is not None:
                losses.append(loss.item())
        rates.append(seen / (time.perf_counter() - start))
    return sum(rates) / len(rates)


# ---- Strata -----------------------------------------------------------------------------------------------------

M64 = (1 << 64) - 1


def _splitmix(state):
    """core/data/DataRandom.h nextRandom: (new state, 64 random bits)."""
    state = (state + 0x9E3779B97F4A7C15) & M64
    z = ((state ^ (state >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return state, z ^ (z >> 31)


def strata_epoch_order(count, seed, epoch):
    """The order in which strata-train visits the training samples in `epoch` (1-based) for `seed`: core/data/
    DataLoader.cpp epochOrder, a Fisher-Yates shuffle driven by SplitMix64 (mixSeed(seed, epoch))."""
    a = seed & M64
    _, rng = _splitmix(a ^ ((epoch + 0x9E3779B97F4A7C15 + ((a << 6) & M64) + (a >> 2)) & M64))
    order = list(range(count))
    for i in range(count - 1, 0, -1):
        rng, z = _splitmix(rng)
        j = z % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def read_safetensors(path):
    """name -> float32 array, for the F32 tensors of a .safetensors file (a Strata checkpoint)."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name != "__metadata__" and t["dtype"] == "F32":
            a, b = t["data_offsets"]
            out[name] = np.frombuffer(data[a:b], dtype="<f4").reshape(t["shape"]).copy()
    return out


def strata_prepare(onnx_path, data, work, args):
    """Imports the ONNX file and sets the project's data and training; returns what the runs need."""
    exe = args.exe or os.path.join(args.build, "bin", "strata-train")
    project = os.path.join(work, "imported.strata")
    imp = subprocess.run([args.import_exe or exe, "import", onnx_path, "-o", project, "--force"], capture_output=True,
                         text=True)
    if imp.returncode != 0:
        raise RuntimeError("strata-train import failed (rc %d): %s%s" % (imp.returncode, imp.stdout, imp.stderr))
    p = json.load(open(project))
    nodes = {n["id"]: n for n in p["graph"]["nodes"]}
    dense = [n for n in p["graph"]["nodes"] if n["type"] == "Dense"]
    if not dense:
        raise RuntimeError("the imported project has no Dense head")
    head = dense[-1]  # node ids follow the ONNX graph's order: the last Dense is the head
    feeding = [e["from"]["node"] for e in p["graph"]["edges"] if e["to"]["node"] == head["id"]]
    backbone_end = nodes[feeding[0]]["name"]
    d = p.setdefault("dataset", {})
    d.update({"kind": "idx", "train_images": data["train"][0], "train_labels": data["train"][1],
              "validation_images": data["validation"][0], "validation_labels": data["validation"][1],
              "validation_split": 0.0, "normalization": "scale", "horizontal_flip": False,
              # An IDX data set without class names has ten (0-9): the names say there are five.
              "class_names": [NAMES[c] for c in SPLIT_B]})
    t = p.setdefault("training", {})
    t.update({"optimizer": "sgd", "learning_rate": args.lr, "momentum": 0.9, "nesterov": False, "weight_decay": 0.0,
              "schedule": "constant", "warmup_steps": 0, "epochs": args.epochs, "batch_size": args.batch,
              "seed": args.seed, "threads": args.threads, "device": "cpu"})
    # The imported weights (training.init_from, a checkpoint beside the project) given as --init-from, which
    # says the same. Not the ONNX file itself: --init-from matches tensors by name, and the names of a PyTorch
    # export's folded initializers ("onnx::Conv_193") are not the imported layers' ("conv1.Conv.weight"), so
    # nothing would load and the frozen backbone would stay random.
    init_from = t.pop("init_from", None)
    if not init_from:
        raise RuntimeError("strata-train import wrote no training.init_from (the imported weights' checkpoint)")
    init_from = os.path.join(work, init_from)
    json.dump(p, open(project, "w"), indent=1)
    return {"exe": exe, "project": p, "head": head["name"], "frozen_until": backbone_end, "init_from": init_from}


def strata_train(prep, work, tag, seed, lr=None, max_steps=0, quiet=True):
    """One strata-train run of the recipe (seed; lr overrides the project's); returns its metrics events, the
    log lines about the transfer, and the checkpoint folder."""
    p = json.loads(json.dumps(prep["project"]))
    p["training"]["seed"] = seed
    if lr is not None:
        p["training"]["learning_rate"] = lr
    project = os.path.join(work, "%s.strata" % tag)
    json.dump(p, open(project, "w"), indent=1)
    metrics, checkpoints = os.path.join(work, "%s-metrics.jsonl" % tag), os.path.join(work, "%s-checkpoints" % tag)
    # A fresh metrics file and checkpoint folder for each run (a rerun in the same --work folder).
    if os.path.exists(metrics):
        os.remove(metrics)
    shutil.rmtree(checkpoints, ignore_errors=True)
    cmd = [prep["exe"], project, "--freeze-until", prep["frozen_until"], "--replace-head", "--init-from",
           prep["init_from"], "--metrics-out", metrics, "--checkpoint-dir", checkpoints, "--history", "off"]
    if quiet:
        cmd.append("--quiet")
    if max_steps:
        cmd += ["--max-steps", str(max_steps)]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError("strata-train failed (rc %d): %s" % (run.returncode, run.stderr[-4000:]))
    log = [l for l in run.stderr.splitlines() if "init-from" in l or "frozen" in l or "replaced" in l]
    # Every tensor but the new head's weight and bias comes from the imported weights (the log says so unless
    # --quiet).
    loaded = [re.search(r"initialized (\d+) of (\d+) tensors", l) for l in log if l.startswith("init-from")]
    if not quiet and (not loaded or not loaded[0] or int(loaded[0].group(1)) != int(loaded[0].group(2)) - 2):
        raise RuntimeError("the imported weights did not all load into the backbone: %s" % log)
    events = [json.loads(l) for l in open(metrics)]
    return events, log, checkpoints


def strata_initial_head(prep, work, seed):
    """The replaced head's initial weights in strata-train for `seed`: one step at learning rate 0 (SGD then moves
    nothing) writes them to a checkpoint. Returns (weight [classes, features], bias [classes]) and the head's new
    name."""
    _, log, checkpoints = strata_train(prep, work, "init-s%d" % seed, seed, lr=0.0, max_steps=1, quiet=False)
    names = [l.split(" replaced by ")[1].split(" ")[0] for l in log if " replaced by " in l]
    if not names:
        raise RuntimeError("strata-train did not say which head it replaced: %s" % log)
    files = sorted((os.path.getmtime(os.path.join(checkpoints, f)), f) for f in os.listdir(checkpoints)
                   if f.endswith(".safetensors"))
    w = read_safetensors(os.path.join(checkpoints, files[-1][1]))
    if names[0] + ".weight" not in w or names[0] + ".bias" not in w:
        raise RuntimeError("no weight and bias of %s in the checkpoint: %s" % (names[0], sorted(w)))
    bias = w[names[0] + ".bias"]  # checkpoints hold tensors flat: the weight is [units, features] row-major
    return w[names[0] + ".weight"].reshape(len(bias), -1), bias, names[0]


def strata_finetune(prep, work, seed):
    events, log, _ = strata_train(prep, work, "finetune-s%d" % seed, seed, quiet=False)
    epochs = [e for e in events if e.get("event") == "epoch"]
    steps = [e["loss"] for e in events if e.get("event") == "step"]
    return {"samples_per_s": sum(e["samples_per_s"] for e in epochs) / len(epochs), "val_acc": epochs[-1]["val_acc"],
            "frozen_until": prep["frozen_until"], "head": prep["head"], "log": log, "first_losses": steps[:5],
            "last_loss": steps[-1] if steps else None}


# ---- the run ----------------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pretrain-epochs", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--seeds", default="", help="comma-separated seeds, a fine-tune on each side for each")
    ap.add_argument("--head-init", choices=("strata", "own"), default="strata",
                    help="strata (default): PyTorch's new head starts from Strata's initial head for the seed (one "
                         "step at learning rate 0) and visits the samples in Strata's order; own: each its own")
    ap.add_argument("--import-exe", default=None,
                    help="a strata-train whose import command to use (default: the build's)")
    ap.add_argument("--exe", default=None, help="the strata-train that fine-tunes (default: the build's)")
    ap.add_argument("--limit", type=int, default=0, help="use the first N samples of each split (a smoke test)")
    ap.add_argument("--work", default=None, help="keep the subsets, the ONNX file and the project here")
    ap.add_argument("--json", default=None, help="write the results here too")
    ap.add_argument("--reuse", action="store_true",
                    help="reuse the pretrained model of an earlier run in --work (resnet18_A.onnx and .pt)")
    args = ap.parse_args()

    # Passive OpenMP waits: spinning workers on a shared machine slow PyTorch down by orders of magnitude
    # (bench/RESULTS.md); strata-train sets the same for itself (app/OpenMpWaitPolicy.h).
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    import torch
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    work = args.work or tempfile.mkdtemp(prefix="finetune-bench-")
    os.makedirs(work, exist_ok=True)
    a, b = class_subset(work, "A", SPLIT_A, args.limit), class_subset(work, "B", SPLIT_B, args.limit)

    # Pretraining on A, then the export (or both from an earlier run in the same --work folder, with --reuse).
    model = resnet18(torch, len(SPLIT_A))
    onnx_path, state_path = os.path.join(work, "resnet18_A.onnx"), os.path.join(work, "resnet18_A.pt")
    if args.reuse and os.path.exists(onnx_path) and os.path.exists(state_path):
        model.load_state_dict(torch.load(state_path))
        acc_a = accuracy(torch, model, *tensors(torch, a["validation"]))
        print("pretrained model reused from %s: accuracy %.4f" % (state_path, acc_a), flush=True)
    else:
        xa, ya = tensors(torch, a["train"])
        start = time.perf_counter()
        torch_train(torch, model, model.parameters(), xa, ya, args.pretrain_epochs, args.batch, args.lr, args.seed)
        pretrain_s = time.perf_counter() - start
        acc_a = accuracy(torch, model, *tensors(torch, a["validation"]))
        print("pretrained on classes 0-4 in %.0f s: accuracy %.4f" % (pretrain_s, acc_a), flush=True)
        model.eval()
        torch.onnx.export(model, torch.zeros(1, 1, 28, 28), onnx_path, opset_version=13, input_names=["input"],
                          output_names=["logits"], dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}},
                          dynamo=False)
        torch.save(model.state_dict(), state_path)
    state = {k: v.clone() for k, v in model.state_dict().items()}

    xb, yb = tensors(torch, b["train"])
    xv, yv = tensors(torch, b["validation"])
    prep = strata_prepare(onnx_path, b, work, args)
    result = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "threads": args.threads,
              "epochs": args.epochs, "pretrain_epochs": args.pretrain_epochs, "batch": args.batch, "lr": args.lr,
              "train_images": len(xb), "test_images": len(xv), "head_init": args.head_init,
              "pretrain_accuracy_A": acc_a, "torch_version": torch.__version__, "runs": []}
    for seed in [int(v) for v in args.seeds.split(",")] if args.seeds else [args.seed]:
        run = {"seed": seed}
        # PyTorch fine-tunes a copy: backbone frozen, a new head (Strata's initial one with --head-init strata,
        # and then Strata's sample order too).
        ft = resnet18(torch, len(SPLIT_A))
        ft.load_state_dict(state)
        for p in ft.parameters():
            p.requires_grad_(False)
        ft.fc = torch.nn.Linear(512, len(SPLIT_B))
        if args.head_init == "strata":
            w, bias, _ = strata_initial_head(prep, work, seed)
            with torch.no_grad():
                ft.fc.weight.copy_(torch.from_numpy(w))
                ft.fc.bias.copy_(torch.from_numpy(bias))
        backbone = torch.nn.ModuleList([m for n, m in ft.named_children() if n != "fc"])
        losses = []
        torch_sps = torch_train(torch, ft, ft.fc.parameters(), xb, yb, args.epochs, args.batch, args.lr, seed,
                                frozen_backbone=backbone, strata_order=args.head_init == "strata", losses=losses)
        torch_acc = accuracy(torch, ft, xv, yv)
        run["torch"] = {"samples_per_s": torch_sps, "val_acc": torch_acc, "first_losses": losses[:5],
                        "last_loss": losses[-1]}
        print("seed %d: pytorch %s: fine-tuned on classes 5-9: %.0f samples/s, accuracy %.4f (first losses %s)"
              % (seed, torch.__version__, torch_sps, torch_acc, " ".join("%.4f" % v for v in losses[:3])), flush=True)
        try:
            s = strata_finetune(prep, work, seed)
            run["strata"] = s
            print("seed %d: strata: fine-tuned on classes 5-9 (frozen up to %s, head %s replaced): %.0f samples/s, "
                  "accuracy %.4f (first losses %s)" % (seed, s["frozen_until"], s["head"], s["samples_per_s"],
                                                       s["val_acc"], " ".join("%.4f" % v for v in s["first_losses"][:3])))
            for line in s["log"]:
                print("  " + line)
            print("seed %d: ratio strata/pytorch: samples/s %.2fx, accuracy %+.2f points"
                  % (seed, s["samples_per_s"] / torch_sps, 100 * (s["val_acc"] - torch_acc)), flush=True)
        except (RuntimeError, FileNotFoundError) as e:
            run["strata_error"] = str(e)
            print("strata: not run: %s" % e)
        result["runs"].append(run)
    if args.json:
        json.dump(result, open(args.json, "w"), indent=1)
    print("work folder: " + work)


if __name__ == "__main__":
    main()
