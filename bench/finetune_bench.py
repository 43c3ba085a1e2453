#!/usr/bin/env python3
"""The fine-tune recipe (issue 37), Strata against PyTorch in one run, side by side.

A resnet18 (torchvision's layout: 7x7 stem, max pooling, four stages of two basic blocks, 11.2 M parameters;
one input channel) is trained by PyTorch on half of Fashion-MNIST's classes (A: 0-4) and exported to ONNX. Then
the other half (B: 5-9, labels 0-4) is learnt with the backbone frozen and a new head, twice:
  - PyTorch: the backbone frozen (requires_grad False, eval mode), fc replaced by a new Linear(512, 5);
  - Strata:  strata-train import MODEL.onnx -o PROJECT.strata, then strata-train PROJECT.strata
             --freeze-until <the head's input> --replace-head (--init-from MODEL.onnx when the imported project
             does not start from its weights by itself).
Same data (inputs x/255), batch, optimizer (SGD, momentum 0.9, constant learning rate), epochs and threads.
Prints samples/s and validation accuracy on B's test images of each, and the ratios.

The class subsets are IDX files this script writes (gzipped, like the originals) into --work: Strata's IDX
loader reads them as any Fashion-MNIST file, so no dataset option is needed for a class subset.

  /work/venv-bench/bin/python bench/finetune_bench.py [--build build] [--threads 2] [--pretrain-epochs 2]
      [--epochs 2] [--batch 128] [--lr 0.05] [--work DIR] [--json OUT.json]

Needs torch (and nothing else: the ONNX file is written by torch.onnx.export's TorchScript exporter) and numpy.
"""
import argparse, gzip, json, os, struct, subprocess, sys, tempfile, time

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


def torch_train(torch, model, params, x, y, epochs, batch, lr, seed, frozen_backbone=None):
    """SGD (momentum 0.9, constant lr) over shuffled batches; returns the mean samples/s of the epochs."""
    opt = torch.optim.SGD(params, lr=lr, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(seed)
    rates = []
    for _ in range(epochs):
        model.train()
        if frozen_backbone is not None:
            frozen_backbone.eval()  # a frozen backbone's BatchNorm uses its running statistics, as exported
        order = torch.randperm(len(x), generator=g)
        start, seen = time.perf_counter(), 0
        for i in range(0, len(x), batch):
            idx = order[i:i + batch]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            seen += len(idx)
        rates.append(seen / (time.perf_counter() - start))
    return sum(rates) / len(rates)


# ---- Strata -----------------------------------------------------------------------------------------------------

def strata_finetune(build, onnx_path, data, work, args):
    exe = args.exe or os.path.join(build, "bin", "strata-train")
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
    # says the same and lets a strata-train without that setting run the recipe too.
    init_from = t.pop("init_from", None)
    init_from = os.path.join(work, init_from) if init_from else onnx_path
    json.dump(p, open(project, "w"), indent=1)
    metrics = os.path.join(work, "strata-metrics.jsonl")
    cmd = [exe, project, "--freeze-until", backbone_end, "--replace-head", "--init-from", init_from, "--quiet",
           "--metrics-out", metrics, "--checkpoint-dir", os.path.join(work, "strata-checkpoints"), "--history", "off"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError("strata-train failed (rc %d): %s" % (run.returncode, run.stderr[-4000:]))
    log = [l for l in run.stderr.splitlines() if "init-from" in l or "frozen" in l or "replaced" in l]
    epochs = [json.loads(l) for l in open(metrics) if '"event":"epoch"' in l]
    return {"samples_per_s": sum(e["samples_per_s"] for e in epochs) / len(epochs), "val_acc": epochs[-1]["val_acc"],
            "frozen_until": backbone_end, "head": head["name"], "log": log}


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
    ap.add_argument("--import-exe", default=None,
                    help="a strata-train whose import command to use (default: the build's)")
    ap.add_argument("--exe", default=None, help="the strata-train that fine-tunes (default: the build's)")
    ap.add_argument("--limit", type=int, default=0, help="use the first N samples of each split (a smoke test)")
    ap.add_argument("--work", default=None, help="keep the subsets, the ONNX file and the project here")
    ap.add_argument("--json", default=None, help="write the results here too")
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

    # Pretraining on A, then the export.
    model = resnet18(torch, len(SPLIT_A))
    xa, ya = tensors(torch, a["train"])
    start = time.perf_counter()
    torch_train(torch, model, model.parameters(), xa, ya, args.pretrain_epochs, args.batch, args.lr, args.seed)
    pretrain_s = time.perf_counter() - start
    acc_a = accuracy(torch, model, *tensors(torch, a["validation"]))
    print("pretrained on classes 0-4 in %.0f s: accuracy %.4f" % (pretrain_s, acc_a), flush=True)
    onnx_path = os.path.join(work, "resnet18_A.onnx")
    model.eval()
    torch.onnx.export(model, torch.zeros(1, 1, 28, 28), onnx_path, opset_version=13, input_names=["input"],
                      output_names=["logits"], dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}}, dynamo=False)
    state = {k: v.clone() for k, v in model.state_dict().items()}

    # PyTorch fine-tunes a copy: backbone frozen, a new head.
    ft = resnet18(torch, len(SPLIT_A))
    ft.load_state_dict(state)
    for p in ft.parameters():
        p.requires_grad_(False)
    ft.fc = torch.nn.Linear(512, len(SPLIT_B))
    backbone = torch.nn.ModuleList([m for n, m in ft.named_children() if n != "fc"])
    xb, yb = tensors(torch, b["train"])
    torch_sps = torch_train(torch, ft, ft.fc.parameters(), xb, yb, args.epochs, args.batch, args.lr, args.seed,
                            frozen_backbone=backbone)
    torch_acc = accuracy(torch, ft, *tensors(torch, b["validation"]))
    print("pytorch %s: fine-tuned on classes 5-9: %.0f samples/s, accuracy %.4f" % (torch.__version__, torch_sps,
                                                                                  torch_acc), flush=True)

    result = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "threads": args.threads,
              "epochs": args.epochs, "pretrain_epochs": args.pretrain_epochs, "batch": args.batch, "lr": args.lr,
              "pretrain_accuracy_A": acc_a, "torch": {"version": torch.__version__, "samples_per_s": torch_sps,
                                                       "val_acc": torch_acc}}
    try:
        s = strata_finetune(args.build, onnx_path, b, work, args)
        result["strata"] = s
        print("strata: fine-tuned on classes 5-9 (frozen up to %s, head %s replaced): %.0f samples/s, accuracy %.4f"
              % (s["frozen_until"], s["head"], s["samples_per_s"], s["val_acc"]))
        for line in s["log"]:
            print("  " + line)
        print("ratio strata/pytorch: samples/s %.2fx, accuracy %+.2f points"
              % (s["samples_per_s"] / torch_sps, 100 * (s["val_acc"] - torch_acc)))
    except (RuntimeError, FileNotFoundError) as e:
        result["strata_error"] = str(e)
        print("strata: not run: %s" % e)
    if args.json:
        json.dump(result, open(args.json, "w"), indent=1)
    print("work folder: " + work)


if __name__ == "__main__":
    main()
