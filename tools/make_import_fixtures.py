#!/usr/bin/python3
"""ONNX files from PyTorch for the importer's round-trip tests (tests/test_onnx_import.cpp): torchvision's
resnet18 and mobilenet_v2 and a small Transformer encoder classifier, with random weights (nothing is
downloaded), exported by torch.onnx.export, plus the inputs and the outputs PyTorch computes for them.

Run with Debian's python3 (python3-torch, python3-torchvision): /usr/bin/python3 tools/make_import_fixtures.py
OUT_DIR [model ...]. Writes OUT_DIR/<model>.onnx, <model>.inputs.f32 (raw little-endian float32, batch first),
<model>.dims (the inputs' dims on one line) and <model>.torch.f32 (PyTorch's outputs). "unmapped" is a small CNN
with a CumSum in the middle, an operator Strata has no layer for.
"""
import os
import sys

import numpy as np
import torch
import torchvision


class Gelu(torch.nn.Module):
    """F.gelu as a module of our own: PyTorch takes its fused encoder fast path (an operator ONNX export does not
    know) for the built-in activations only."""

    def forward(self, x):
        return torch.nn.functional.gelu(x)


class TextClassifier(torch.nn.Module):
    """Embedding + nn.TransformerEncoder + mean pooling + Linear: the small encoder classifier."""

    def __init__(self, vocab=50, dim=32, heads=4, layers=2, classes=5, length=16):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        layer = torch.nn.TransformerEncoderLayer(dim, heads, dim_feedforward=64, dropout=0.1,
                                                 activation=Gelu(), batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = torch.nn.Linear(dim, classes)
        self.length = length

    def forward(self, ids):
        # Float ids in, as Strata's inputs are (one file runs in onnxruntime against the re-export): Cast + Gather.
        x = self.encoder(self.embed(ids.long()))
        return self.head(x.mean(dim=1))


class CumSumNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4 * 8 * 8, 3)

    def forward(self, x):
        return self.fc(torch.flatten(torch.relu(self.conv(x)).cumsum(dim=3), 1))


def build(name):
    """The model in eval mode, its export input and a batch of test inputs."""
    torch.manual_seed(7)
    if name == "resnet18":
        model = torchvision.models.resnet18(weights=None, num_classes=10)
        shape, count = (3, 64, 64), 100
    elif name == "mobilenet_v2":
        model = torchvision.models.mobilenet_v2(weights=None, num_classes=10)
        shape, count = (3, 64, 64), 100
    elif name == "transformer":
        model = TextClassifier()
        count = 100
    elif name == "unmapped":
        model = CumSumNet()
        shape, count = (1, 8, 8), 4
    else:
        raise SystemExit("unknown model " + name)
    model.eval()
    # BatchNorm's running statistics of a fresh model are 0 and 1: give them values, so that a reader that
    # ignored them would be caught.
    g = torch.Generator().manual_seed(11)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) * 0.5 + 0.75)
            m.weight.data.copy_(torch.rand(m.num_features, generator=g) * 0.5 + 0.75)
            m.bias.data.copy_(torch.randn(m.num_features, generator=g) * 0.1)
    if name == "transformer":
        inputs = torch.randint(1, 50, (count, model.length), generator=g).float()
        example = inputs[:1]
    else:
        inputs = torch.randn((count,) + shape, generator=g)
        example = inputs[:1]
    return model, example, inputs


def main():
    out_dir = sys.argv[1]
    names = sys.argv[2:] or ["resnet18", "mobilenet_v2", "transformer"]
    os.makedirs(out_dir, exist_ok=True)
    torch.set_num_threads(2)
    for name in names:
        model, example, inputs = build(name)
        path = os.path.join(out_dir, name + ".onnx")
        with torch.no_grad():
            torch.onnx.export(model, (example,), path, opset_version=13, input_names=["input"],
                              output_names=["output"], dynamic_axes={"input": {0: "N"}, "output": {0: "N"}},
                              do_constant_folding=True)
            expected = model(inputs).numpy().astype(np.float32)
        inputs.numpy().astype("<f4").tofile(os.path.join(out_dir, name + ".inputs.f32"))
        expected.astype("<f4").tofile(os.path.join(out_dir, name + ".torch.f32"))
        with open(os.path.join(out_dir, name + ".dims"), "w") as f:
            f.write(" ".join(str(d) for d in inputs.shape) + "\n")
        print(name, path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
