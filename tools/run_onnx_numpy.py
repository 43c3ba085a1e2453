#!/usr/bin/python3
"""A small NumPy interpreter for the ONNX operators Strata exports, written from the
ONNX operator specification. Tests use it as a second, independent runtime for the
graphs OpenCV's DNN module (4.6) cannot run (Gather with runtime indices,
LayerNormalization, broadcasting between computed tensors, Clip with its bounds as
inputs, ConvTranspose with groups, dilation and output padding).

usage: /usr/bin/python3 tools/run_onnx_numpy.py MODEL.onnx INPUT.f32 OUTPUT.f32 DIM [DIM ...]
INPUT.f32 holds raw little-endian float32 values of the given shape (batch first);
OUTPUT.f32 receives the graph output as raw float32. Exit status 3 when numpy or onnx is
missing, 4 for an operator this interpreter does not know.
"""
import math
import sys

try:
    import numpy as np
    import onnx
    from onnx import numpy_helper
except ImportError as e:  # pragma: no cover
    print(f"run_onnx_numpy: {e}", file=sys.stderr)
    sys.exit(3)


def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def pool(x, kernel, strides, pads, mode, count_include_pad=0):
    n, c, h, w = x.shape
    kh, kw = kernel
    sh, sw = strides
    pt, pl, pb, pr = pads
    oh = (h + pt + pb - kh) // sh + 1
    ow = (w + pl + pr - kw) // sw + 1
    fill = -np.inf if mode == "max" else 0.0
    xp = np.full((n, c, h + pt + pb, w + pl + pr), fill, dtype=np.float64)
    xp[:, :, pt:pt + h, pl:pl + w] = x
    valid = np.zeros((h + pt + pb, w + pl + pr))
    valid[pt:pt + h, pl:pl + w] = 1
    y = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * sh:i * sh + kh, j * sw:j * sw + kw]
            if mode == "max":
                y[:, :, i, j] = win.max(axis=(2, 3))
            else:
                cnt = kh * kw if count_include_pad else valid[i * sh:i * sh + kh, j * sw:j * sw + kw].sum()
                y[:, :, i, j] = win.sum(axis=(2, 3)) / cnt
    return y


def conv(x, w, b, a):
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    group = a.get("group", 1)
    sh, sw = a.get("strides", [1, 1])
    dh, dw = a.get("dilations", [1, 1])
    pt, pl, pb, pr = a.get("pads", [0, 0, 0, 0])
    xp = np.zeros((n, c, h + pt + pb, wd + pl + pr))
    xp[:, :, pt:pt + h, pl:pl + wd] = x
    oh = (h + pt + pb - dh * (r - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (s - 1) - 1) // sw + 1
    y = np.zeros((n, k, oh, ow))
    kg = k // group
    for g in range(group):
        xs = xp[:, g * cg:(g + 1) * cg]
        ws = w[g * kg:(g + 1) * kg]
        for i in range(r):
            for j in range(s):
                patch = xs[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
                y[:, g * kg:(g + 1) * kg] += np.einsum("nchw,kc->nkhw", patch, ws[:, :, i, j])
    if b is not None:
        y += b.reshape(1, -1, 1, 1)
    return y


def conv_transpose(x, w, b, a):
    # Each input value adds its kernel, scaled, at stride steps into a full output, which the pads then crop.
    n, c, h, wd = x.shape
    _, kg, r, s = w.shape
    group = a.get("group", 1)
    sh, sw = a.get("strides", [1, 1])
    dh, dw = a.get("dilations", [1, 1])
    pt, pl, pb, pr = a.get("pads", [0, 0, 0, 0])
    oph, opw = a.get("output_padding", [0, 0])
    fh = sh * (h - 1) + dh * (r - 1) + 1 + oph
    fw = sw * (wd - 1) + dw * (s - 1) + 1 + opw
    full = np.zeros((n, kg * group, fh, fw))
    cg = c // group
    for g in range(group):
        xs = x[:, g * cg:(g + 1) * cg]
        ws = w[g * cg:(g + 1) * cg]
        for i in range(r):
            for j in range(s):
                full[:, g * kg:(g + 1) * kg, i * dh:i * dh + sh * (h - 1) + 1:sh,
                     j * dw:j * dw + sw * (wd - 1) + 1:sw] += np.einsum("nchw,ck->nkhw", xs, ws[:, :, i, j])
    y = full[:, :, pt:fh - pb, pl:fw - pr]
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return y


def run(model, x):
    v = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in v]
    v[inputs[0]] = x.astype(np.float64)
    erf = np.vectorize(math.erf)
    for node in model.graph.node:
        a = attrs(node)
        i = [v[name] if name else None for name in node.input]
        op = node.op_type
        if op == "Gemm":
            y = i[0] @ (i[1].T if a.get("transB", 0) else i[1])
            if len(i) > 2:
                y = y + i[2]
        elif op == "MatMul":
            y = np.matmul(i[0], i[1])
        elif op == "Transpose":
            y = np.transpose(i[0], a.get("perm"))
        elif op == "Conv" and i[0].ndim == 3:  # 1-D: a 2-D convolution of height 1
            a1 = {"strides": [1] + list(a.get("strides", [1])), "dilations": [1] + list(a.get("dilations", [1])),
                  "group": a.get("group", 1)}
            p = list(a.get("pads", [0, 0]))
            a1["pads"] = [0, p[0], 0, p[1]]
            y = conv(i[0][:, :, None, :], i[1][:, :, None, :], i[2] if len(i) > 2 else None, a1)[:, :, 0, :]
        elif op == "Conv":
            y = conv(i[0], i[1], i[2] if len(i) > 2 else None, a)
        elif op == "ConvTranspose":
            y = conv_transpose(i[0], i[1], i[2] if len(i) > 2 else None, a)
        elif op == "Clip":
            lo = i[1] if len(i) > 1 and i[1] is not None else -np.inf
            hi = i[2] if len(i) > 2 and i[2] is not None else np.inf
            y = np.minimum(np.maximum(i[0], lo), hi)
        elif op in ("MaxPool", "AveragePool"):
            y = pool(i[0], a["kernel_shape"], a.get("strides", [1, 1]), a.get("pads", [0, 0, 0, 0]),
                     "max" if op == "MaxPool" else "avg", a.get("count_include_pad", 0))
        elif op == "GlobalAveragePool":
            y = i[0].mean(axis=(2, 3), keepdims=True)
        elif op == "Flatten":
            ax = a.get("axis", 1)
            y = i[0].reshape(int(np.prod(i[0].shape[:ax])), -1)
        elif op == "Reshape":
            shape = [i[0].shape[k] if d == 0 else d for k, d in enumerate(i[1].tolist())]
            y = i[0].reshape(shape)
        elif op == "Relu":
            y = np.maximum(i[0], 0)
        elif op == "LeakyRelu":
            y = np.where(i[0] >= 0, i[0], a.get("alpha", 0.01) * i[0])
        elif op == "Sigmoid":
            y = 1 / (1 + np.exp(-i[0]))
        elif op == "Tanh":
            y = np.tanh(i[0])
        elif op == "Erf":
            y = erf(i[0])
        elif op == "Sqrt":
            y = np.sqrt(i[0])
        elif op == "Softmax":
            ax = a.get("axis", -1)
            e = np.exp(i[0] - i[0].max(axis=ax, keepdims=True))
            y = e / e.sum(axis=ax, keepdims=True)
        elif op == "BatchNormalization":
            x0, g, b, m, var = i
            shape = [1, -1] + [1] * (x0.ndim - 2)
            y = (x0 - m.reshape(shape)) / np.sqrt(var.reshape(shape) + a.get("epsilon", 1e-5)) * g.reshape(shape) \
                + b.reshape(shape)
        elif op == "LayerNormalization":
            ax = a.get("axis", -1)
            axes = tuple(range(ax % i[0].ndim, i[0].ndim))
            m = i[0].mean(axis=axes, keepdims=True)
            var = ((i[0] - m) ** 2).mean(axis=axes, keepdims=True)
            y = (i[0] - m) / np.sqrt(var + a.get("epsilon", 1e-5)) * i[1] + i[2]
        elif op in ("ReduceMean", "ReduceMax"):
            reduce = np.mean if op == "ReduceMean" else np.max
            y = reduce(i[0], axis=tuple(a["axes"]), keepdims=bool(a.get("keepdims", 1)))
        elif op == "Abs":
            y = np.abs(i[0])
        elif op == "Sign":
            y = np.sign(i[0])
        elif op == "Max":
            y = i[0]
            for other in i[1:]:
                y = np.maximum(y, other)
        elif op == "Split":
            ax = a.get("axis", 0)
            bounds = np.cumsum(i[1].tolist())[:-1]
            for name, part in zip(node.output, np.split(i[0], bounds, axis=ax)):
                v[name] = part
            continue
        elif op in ("Add", "Sub", "Mul", "Div"):
            y = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}[op](i[0], i[1])
        elif op == "Concat":
            y = np.concatenate(i, axis=a["axis"])
        elif op == "Cast":
            if a["to"] != onnx.TensorProto.INT64:
                raise NotImplementedError("Cast to type %d" % a["to"])
            y = np.trunc(i[0]).astype(np.int64)
        elif op == "Gather":
            y = np.take(i[0], i[1], axis=a.get("axis", 0))
        elif op == "Identity":
            y = i[0]
        else:
            print(f"run_onnx_numpy: operator {op} is not implemented", file=sys.stderr)
            sys.exit(4)
        v[node.output[0]] = y
    return v[model.graph.output[0].name]


def main(argv):
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    model = onnx.load(argv[0])
    dims = [int(d) for d in argv[3:]]
    x = np.fromfile(argv[1], dtype="<f4").reshape(dims)
    run(model, x).astype("<f4").tofile(argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
