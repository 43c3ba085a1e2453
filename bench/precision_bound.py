#!/usr/bin/env python3
"""How much faster a training step can get from a faster product precision (bf16 on the CPU), measured.

Runs `strata-train profile --json` on each example in fp32 and in bf16, interleaved, and reads the profile's
products' clock (Backend::setProductClock): the milliseconds a timed step spends in matrix products and
convolutions, the only ops a compute precision changes. Prints, per example and precision, the median step
compute, the products and the rest; the bf16 products' speed-up over fp32's; and Amdahl's bound on the whole
step from fp32's split: with the products twice as fast (bf16's arithmetic peak over float32's on AVX512-BF16),
and with products free.

  /usr/bin/python3 bench/precision_bound.py [--build build] [--rounds 3] [--steps 10]
      [--examples fashion_cnn_bn,residual_template,debian_sections_transformer] [--device cpu]
"""
import argparse, json, os, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bf16_cpu_steps import copy_with_precision, median  # noqa: E402

ROOT = os.path.dirname(HERE)


def profile(build, project, steps, device, folder):
    out_json = os.path.join(folder, "profile.json")
    env = {**os.environ, "GOMP_SPINCOUNT": os.environ.get("GOMP_SPINCOUNT", "1000")}  # as strata-train sets it
    run = subprocess.run([os.path.join(build, "bin", "strata-train"), "profile", project, "--device", device,
                          "--steps", str(steps), "--json", out_json], env=env, capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit("strata-train profile %s failed: %s" % (project, run.stderr.strip()[-500:]))
    report = json.load(open(out_json))
    return report["compute_ms"], report["product_ms"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--examples", default="fashion_cnn_bn,residual_template,debian_sections_transformer")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(a.rounds):
            for ex in a.examples.split(","):
                for precision in ("fp32", "bf16"):
                    project = copy_with_precision(ex, precision, tmp)
                    compute, products = profile(a.build, project, a.steps, a.device, tmp)
                    runs.setdefault((ex, precision), []).append((compute, products))
                    print(json.dumps({"example": ex, "precision": precision, "compute_ms": round(compute, 3),
                                      "product_ms": round(products, 3)}), flush=True)

    print("\nms per step, median of %d profiles (%d timed steps each) on %s" % (a.rounds, a.steps, a.device))
    print("%-28s %-5s %9s %9s %9s %10s %9s %14s %13s" % ("example", "prec", "compute", "products", "rest",
                                                         "products%", "step", "bound at 2x", "bound, free"))
    for ex in a.examples.split(","):
        split = {}
        for precision in ("fp32", "bf16"):
            values = runs[(ex, precision)]
            compute = median([c for c, _ in values])
            products = median([p for _, p in values])
            split[precision] = (compute, products)
        f_compute, f_products = split["fp32"]
        f_rest = f_compute - f_products
        for precision in ("fp32", "bf16"):
            compute, products = split[precision]
            speed = "" if precision == "fp32" else "%.2fx" % (f_compute / compute)
            bound2 = "%.2fx" % (f_compute / (f_rest + f_products / 2)) if precision == "fp32" else ""
            free = "%.2fx" % (f_compute / f_rest) if precision == "fp32" and f_rest > 0 else ""
            print("%-28s %-5s %9.2f %9.2f %9.2f %9.1f%% %9s %14s %13s" % (
                ex, precision, compute, products, compute - products, 100 * products / compute, speed, bound2,
                free))
        print("%-28s bf16 products over fp32's: %.2fx; the rest %.2fx" % (
            "", f_products / split["bf16"][1], f_rest / (split["bf16"][0] - split["bf16"][1])))


if __name__ == "__main__":
    sys.exit(main())
