#!/usr/bin/python3
"""Validates ONNX files with the reference onnx.checker (full check: also runs shape inference).

usage: /usr/bin/python3 tools/check_onnx.py FILE.onnx [...]
Exit status: 0 all valid, 1 a file is invalid, 3 the onnx package is missing (tests skip on 3).
Debian's python3-onnx is only visible to /usr/bin/python3.
"""
import sys

try:
    import onnx
    import onnx.checker
    import onnx.shape_inference
except ImportError as e:  # pragma: no cover
    print(f"check_onnx: the onnx package is missing ({e}); install python3-onnx", file=sys.stderr)
    sys.exit(3)


def main(paths):
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    status = 0
    for path in paths:
        try:
            model = onnx.load(path)
            onnx.checker.check_model(model, full_check=True)
            inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
            out = inferred.graph.output[0]
            dims = [d.dim_param or d.dim_value for d in out.type.tensor_type.shape.dim]
            print(f"{path}: valid (ir {model.ir_version}, opset {model.opset_import[0].version}, "
                  f"{len(model.graph.node)} nodes, output {out.name} {dims})")
        except Exception as e:  # the checker raises several exception types
            print(f"{path}: INVALID: {e}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
