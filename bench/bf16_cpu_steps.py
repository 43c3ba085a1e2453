#!/usr/bin/env python3
"""CPU milliseconds per training step of Strata in fp32, bf16, and bf16 without the bf16 Winograd
(STRATA_WINOGRAD_BF16=0), interleaved, for a machine shared with other work: a wall clock there measures the
neighbours' load as much as Strata (the same run repeated differed by 30% and more), while the CPU time that
`strata-train profile` spends (user + system, both threads; OpenMP's waits are passive) moves only with cache
contention. Each figure is the difference between a profile of --steps N and one of --steps 2, so start-up,
data loading and the roofline cancel; divided by the 2 (N - 2) steps in between (profile runs N timed and N
plain ones). Prints one JSON line per run, then per example and variant the median and range.

  /usr/bin/python3 bench/bf16_cpu_steps.py [--build build] [--rounds 3] [--steps 22]
      [--examples fashion_cnn_bn,residual_template,debian_sections_transformer]
"""
import argparse, json, os, resource, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cpu_bench import project_path  # noqa: E402

ROOT = os.path.dirname(HERE)
VARIANTS = {"fp32": ("fp32", {}), "bf16": ("bf16", {}), "bf16 before": ("bf16", {"STRATA_WINOGRAD_BF16": "0"})}


def copy_with_precision(example, precision, folder):
    """The example's project with training.precision set, its relative data paths made absolute."""
    src = project_path(example)
    project = json.load(open(src))
    project["training"]["precision"] = precision
    for key, value in project.get("dataset", {}).items():
        if key.endswith("_path") and value and not os.path.isabs(value):
            project["dataset"][key] = os.path.join(os.path.dirname(src), value)
    path = os.path.join(folder, "%s_%s.strata" % (example, precision))
    json.dump(project, open(path, "w"), indent=1)
    return path


def median(values):
    v, mid = sorted(values), len(values) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


def cpu_seconds(build, project, steps, env):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([os.path.join(build, "bin", "strata-train"), "profile", project, "--device", "cpu",
                          "--steps", str(steps)], env={**os.environ, **env}, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit("strata-train profile %s failed: %s" % (project, out.stderr.strip()[-500:]))
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--examples", default="fashion_cnn_bn,residual_template,debian_sections_transformer")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=22)
    a = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(a.rounds):
            for ex in a.examples.split(","):
                for name, (precision, env) in VARIANTS.items():
                    project = copy_with_precision(ex, precision, tmp)
                    short = cpu_seconds(a.build, project, 2, env)
                    long = cpu_seconds(a.build, project, a.steps, env)
                    ms = 1000 * (long - short) / (2 * (a.steps - 2))
                    results.setdefault((ex, name), []).append(ms)
                    print(json.dumps({"example": ex, "variant": name, "cpu_ms_per_step": round(ms, 2)}), flush=True)
    print("\n%-28s %-12s %12s %16s %10s" % ("example", "variant", "CPU ms/step", "(range)", "vs fp32"))
    for (ex, name), values in results.items():
        m = median(values)
        print("%-28s %-12s %12.1f %7.1f-%-8.1f %9.2fx" % (ex, name, m, min(values), max(values),
                                                         median(results[(ex, "fp32")]) / m))


if __name__ == "__main__":
    sys.exit(main())
