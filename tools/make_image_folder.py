#!/usr/bin/python3
"""Writes Fashion-MNIST as image folders: <out>/train/<class>/<n>.<ext> and <out>/test/<class>/<n>.<ext>.

The layout torchvision's ImageFolder, Keras' image_dataset_from_directory and Strata's `image_folder`
datasets read. PNG keeps the pixels exactly (so a folder trains to the same accuracy as the IDX files);
JPEG is lossy (quality --quality). --size 64 --rgb writes 64x64 RGB images (bilinear upscale, gray in all
three channels), the benchmark's second case.

Needs Debian's python3-pil and python3-numpy (run with /usr/bin/python3).

  /usr/bin/python3 tools/make_image_folder.py --out /tmp/fashion_png --format png
  /usr/bin/python3 tools/make_image_folder.py --out /tmp/fashion_jpg64 --format jpeg --size 64 --rgb --limit 6000
"""
import argparse
import gzip
import os
import struct
import sys

import numpy as np
from PIL import Image

CLASSES = ["T-shirt_top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle_boot"]


def read_idx(path):
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def write_split(images, labels, out, fmt, size, rgb, quality, limit):
    ext = {"png": "png", "jpeg": "jpg"}[fmt]
    for name in CLASSES:
        os.makedirs(os.path.join(out, name), exist_ok=True)
    count = len(labels) if limit <= 0 else min(limit, len(labels))
    for i in range(count):
        img = Image.fromarray(images[i], mode="L")
        if size != images.shape[1]:
            img = img.resize((size, size), Image.BILINEAR)
        if rgb:
            img = img.convert("RGB")
        path = os.path.join(out, CLASSES[labels[i]], "%05d.%s" % (i, ext))
        if fmt == "png":
            img.save(path, "PNG")
        else:
            img.save(path, "JPEG", quality=quality)
    return count


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--idx-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--out", required=True)
    ap.add_argument("--format", choices=["png", "jpeg"], default="png")
    ap.add_argument("--size", type=int, default=28, help="width and height (28: as stored)")
    ap.add_argument("--rgb", action="store_true", help="three channels")
    ap.add_argument("--quality", type=int, default=90, help="JPEG quality")
    ap.add_argument("--limit", type=int, default=0, help="first N training images only (0: all)")
    ap.add_argument("--test-limit", type=int, default=0, help="first N test images only (0: all)")
    a = ap.parse_args()
    for split, prefix, limit in (("train", "train", a.limit), ("test", "t10k", a.test_limit)):
        images = read_idx(os.path.join(a.idx_dir, prefix + "-images-idx3-ubyte.gz"))
        labels = read_idx(os.path.join(a.idx_dir, prefix + "-labels-idx1-ubyte.gz"))
        n = write_split(images, labels, os.path.join(a.out, split), a.format, a.size, a.rgb, a.quality, limit)
        print("%s: %d images in %s" % (split, n, os.path.join(a.out, split)), file=sys.stderr)


if __name__ == "__main__":
    main()
