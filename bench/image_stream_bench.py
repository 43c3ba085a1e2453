#!/usr/bin/python3
"""Streaming image folders (issue 13): peak memory against the loader's budget, and training speed from the
decoded cache against IDX. A benchmark, not a test: it prints what it measured and the targets.

Memory: the same CNN on [3, 64, 64] images from a JPEG folder (tools/make_image_folder.py --format jpeg
--size 64 --rgb) for --steps steps, three runs of strata-train measured by /usr/bin/time (maximum resident
set): image_loading memory on --base-limit images (the process, the model and a token data set: the
baseline), image_loading stream on the whole folder, and image_loading memory on the whole folder (what
streaming saves). The target: stream's peak minus the baseline's stays within the loader's budget,
(loader_batches + 2) batches of decoded floats (the loader's slots plus the trainer's current and next
batch).

Speed: examples/fashion_folder_cnn.strata on a PNG folder (tools/make_image_folder.py --format png) with
image_loading cache against examples/fashion_cnn.strata on the IDX files, 2 epochs each, one after the
other; the ratio of epoch 2's samples/s (target >= 0.90). Stream without a cache is shown too.

  /usr/bin/python3 bench/image_stream_bench.py --jpeg /work/bench-data/fashion_jpg64 \\
      --png /work/bench-data/fashion_png [--build build] [--steps 200] [--threads 2]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def load(path):
    with open(path) as f:
        return json.load(f)


def run_train(binary, project, extra, tmp, label):
    """Runs strata-train under /usr/bin/time; returns (max RSS in MiB, epoch events)."""
    metrics = os.path.join(tmp, label + ".jsonl")
    timing = os.path.join(tmp, label + ".time")
    cmd = ["/usr/bin/time", "-f", "%M", "-o", timing, binary, project, "--quiet", "--history", "off",
           "--metrics-out", metrics] + extra
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.exit("%s failed (%d):\n%s" % (label, r.returncode, r.stdout[-3000:]))
    with open(timing) as f:
        rss_mib = int(f.read().split()[-1]) / 1024.0
    epochs = []
    with open(metrics) as f:
        for line in f:
            e = json.loads(line)
            if e.get("event") == "epoch":
                epochs.append(e)
    return rss_mib, epochs, r.stdout


def folder_project(base, train, validation, shape, tmp, name, **dataset):
    p = load(base)
    p["dataset"].update({"kind": "image_folder", "train_path": train, "validation_path": validation,
                         "image_shape": shape, "validation_split": 0.0})
    p["dataset"].update(dataset)
    for n in p["graph"]["nodes"]:
        if n["type"] == "Input":
            n["params"]["shape"] = shape
    p["training"]["checkpoint_dir"] = ""
    path = os.path.join(tmp, name + ".strata")
    with open(path, "w") as f:
        json.dump(p, f, indent=1)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jpeg", help="a JPEG 64x64 RGB folder with train/ (make_image_folder.py)")
    ap.add_argument("--png", help="a PNG 28x28 folder with train/ and test/ (make_image_folder.py)")
    ap.add_argument("--idx-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--steps", type=int, default=200, help="steps of each memory run")
    ap.add_argument("--base-limit", type=int, default=256, help="images of the baseline run")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--loader-batches", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    binary = os.path.join(a.build, "bin", "strata-train")
    common = ["--threads", str(a.threads), "--decode-threads", str(a.threads), "--batch", str(a.batch)]
    cnn = os.path.join(ROOT, "examples", "fashion_folder_cnn.strata")
    with tempfile.TemporaryDirectory() as tmp:
        if a.jpeg:
            train = os.path.join(os.path.abspath(a.jpeg), "train")
            shape = [3, 64, 64]
            proj = folder_project(cnn, train, "", shape, tmp, "jpeg", loader_batches=a.loader_batches)
            steps = ["--max-steps", str(a.steps), "--epochs", "1"]
            base, _, _ = run_train(binary, proj, common + steps + ["--image-loading", "memory", "--train-limit",
                                                                    str(a.base_limit)], tmp, "base")
            stream, _, out = run_train(binary, proj, common + steps + ["--image-loading", "stream"], tmp, "stream")
            whole, _, _ = run_train(binary, proj, common + steps + ["--image-loading", "memory"], tmp, "memory")
            sample_mib = 3 * 64 * 64 * 4 / 2.0**20
            budget = (a.loader_batches + 2) * a.batch * sample_mib
            files = sum(len(fs) for _, _, fs in os.walk(train))
            print("Peak memory, %d JPEG files [3,64,64] (decoded floats: %.0f MiB), batch %d, %d steps, "
                  "loader_batches %d:" % (files, files * sample_mib, a.batch, a.steps, a.loader_batches))
            print("  baseline (memory, %d images)   %8.1f MiB" % (a.base_limit, base))
            print("  stream (whole folder)            %8.1f MiB  (+%.1f MiB over the baseline; budget %.1f MiB: %s)"
                  % (stream, stream - base, budget, "met" if stream - base <= budget else "NOT met"))
            print("  memory (whole folder)            %8.1f MiB" % whole)
        if a.png:
            png = os.path.abspath(a.png)
            proj_cache = folder_project(cnn, os.path.join(png, "train"), os.path.join(png, "test"), [1, 28, 28], tmp,
                                        "png", image_loading="cache")
            idx = load(os.path.join(ROOT, "examples", "fashion_cnn.strata"))
            for k, f in (("train_images", "train-images-idx3-ubyte.gz"), ("train_labels", "train-labels-idx1-ubyte.gz"),
                         ("validation_images", "t10k-images-idx3-ubyte.gz"),
                         ("validation_labels", "t10k-labels-idx1-ubyte.gz")):
                idx["dataset"][k] = os.path.join(a.idx_dir, f)
            idx["training"]["checkpoint_dir"] = ""
            proj_idx = os.path.join(tmp, "idx.strata")
            with open(proj_idx, "w") as f:
                json.dump(idx, f, indent=1)
            two = ["--epochs", "2"]
            rows = []
            for label, proj, extra in (("IDX", proj_idx, []),
                                       ("folder, cache", proj_cache, ["--image-loading", "cache"]),
                                       ("folder, stream", proj_cache, ["--image-loading", "stream"])):
                rss, epochs, _ = run_train(binary, proj, common + two + extra, tmp, label.replace(", ", "_"))
                rows.append((label, [e["samples_per_s"] for e in epochs], [e.get("val_acc") for e in epochs],
                             rss))
            print("Training samples/s, fashion CNN, 2 epochs, batch %d, %d threads:" % (a.batch, a.threads))
            for label, sps, acc, rss in rows:
                print("  %-16s epoch 1 %8.0f  epoch 2 %8.0f  val acc %s  max RSS %.0f MiB"
                      % (label, sps[0], sps[1], "/".join("%.4f" % x for x in acc if x is not None), rss))
            ratio = rows[1][1][1] / rows[0][1][1]
            print("  cache/IDX epoch 2: %.2f (target >= 0.90: %s)" % (ratio, "met" if ratio >= 0.90 else "NOT met"))
            print("  stream/IDX epoch 2: %.2f" % (rows[2][1][1] / rows[0][1][1]))


if __name__ == "__main__":
    main()
