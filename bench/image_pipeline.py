#!/usr/bin/env python3
"""Image-folder pipeline throughput: Strata's decode + resize into [C, H, W] floats against torchvision's
ImageFolder + DataLoader (2 workers, batch 64, ToTensor, Resize where the size changes) on the same files.
Runs the two alternately, `--rounds` times each, and prints images/s and the ratio per round and median.

Strata decodes each image once into memory (later epochs reuse it); torchvision decodes every epoch, so
one pass of each is the comparable unit: the time to turn the folder into ready tensors once.
--stream compares one epoch of each loader as training sees it: Strata's streaming DataLoader
(image_loading stream: decode, resize, scale and a random horizontal flip on its decode threads, shuffled
batches of 64) against the same DataLoader with RandomHorizontalFlip.

  /usr/bin/python3 tools/make_image_folder.py --out /tmp/fashion_png                           # 28x28 PNG
  /usr/bin/python3 tools/make_image_folder.py --out /tmp/fashion_jpg64 --format jpeg --size 64 --rgb
  /work/venv-bench/bin/python bench/image_pipeline.py --folder /tmp/fashion_png/train --shape 1,28,28
  /work/venv-bench/bin/python bench/image_pipeline.py --folder /tmp/fashion_jpg64/train --shape 3,32,32
"""
import argparse
import json
import os
import statistics
import subprocess
import time

import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms


def strata_pass(binary, folder, shape, threads, stream):
    cmd = [binary, folder, *map(str, shape), str(threads)] + (["stretch", "--stream"] if stream else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)["images_per_s"]


def torch_pass(folder, shape, workers, batch, stream):
    c, h, w = shape
    steps = [] if c == 3 else [transforms.Grayscale(1)]
    steps += [transforms.Resize((h, w))] + ([transforms.RandomHorizontalFlip()] if stream else [])
    steps += [transforms.ToTensor()]
    ds = datasets.ImageFolder(folder, transform=transforms.Compose(steps))
    loader = DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers)
    t0 = time.perf_counter()
    n = 0
    for x, _ in loader:
        n += x.shape[0]
    return n / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--folder", required=True)
    ap.add_argument("--shape", default="1,28,28")
    ap.add_argument("--threads", type=int, default=2, help="Strata decode threads and torchvision workers")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--stream", action="store_true", help="one epoch of the streaming loaders (with a flip)")
    ap.add_argument("--binary", default=os.path.join(os.path.dirname(__file__), "..", "build", "bin", "bench_image_decode"))
    a = ap.parse_args()
    shape = [int(v) for v in a.shape.split(",")]
    torch.set_num_threads(1)
    ratios = []
    for r in range(a.rounds):
        s = strata_pass(a.binary, a.folder, shape, a.threads, a.stream)
        t = torch_pass(a.folder, shape, a.threads, 64, a.stream)
        ratios.append(s / t)
        print("round %d: Strata %.0f images/s, torchvision %.0f images/s, ratio %.2f" % (r + 1, s, t, s / t), flush=True)
    print("median ratio %.2f (%s, %s, %d threads/workers%s)" % (statistics.median(ratios), a.folder, a.shape,
                                                                a.threads, ", streamed" if a.stream else ""))


if __name__ == "__main__":
    main()
