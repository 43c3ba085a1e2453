"""Runs ONNX files in onnxruntime (a runtime we did not write), for the tests' cross-checks.

usage: PYTHON tools/run_onnxruntime.py MANIFEST
Each line of MANIFEST: MODEL.onnx INPUT.f32 OUTPUT.f32 DIM [DIM ...]. INPUT.f32 holds raw little-endian
float32 values of shape DIM... (batch first); OUTPUT.f32 receives the model's first output as raw float32.
Every model is loaded with all graph optimizations off (the file as written), then run. A line that starts
with "@optimized" runs the model with every optimization on instead (what a deployment gets: QDQ graphs fused
into integer kernels) and writes the operator types of the optimized graph, one per line, to OUTPUT.f32.ops.
Exit status 3 when onnxruntime is missing; 1 with one line per failing model otherwise.
"""
import sys

try:
    import numpy as np
    import onnxruntime as ort
except ImportError as e:  # pragma: no cover
    print(f"run_onnxruntime: {e} (tools/setup-test-venv.sh installs it)", file=sys.stderr)
    sys.exit(3)


def run(model, inp, out, dims, optimized=False):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    if optimized:
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.optimized_model_filepath = out + ".optimized.onnx"
        opts.log_severity_level = 3  # the note that an optimized file is hardware specific
    else:
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    if optimized:
        import onnx

        ops = sorted({n.op_type for n in onnx.load(out + ".optimized.onnx").graph.node})
        with open(out + ".ops", "w") as f:
            f.write("".join(op + "\n" for op in ops))
    x = np.fromfile(inp, dtype="<f4").reshape(dims)
    name = sess.get_inputs()[0].name
    y = sess.run(None, {name: x})[0]
    np.asarray(y, dtype="<f4").tofile(out)


def main():
    failures = []
    with open(sys.argv[1]) as manifest:
        for line in manifest:
            parts = line.split()
            if not parts:
                continue
            optimized = parts[0] == "@optimized"
            if optimized:
                parts = parts[1:]
            model, inp, out, dims = parts[0], parts[1], parts[2], [int(d) for d in parts[3:]]
            try:
                run(model, inp, out, dims, optimized)
            except Exception as e:  # one line per model, naming it
                failures.append(f"{model}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    for f in failures:
        print(f, file=sys.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
