#!/usr/bin/python3
"""PyTorch reference for bench_cpu_ops: the same Fashion-MNIST CNN training step
(conv 1->32 3x3 pad 1, maxpool 2, conv 32->64 3x3 pad 1, maxpool 2, dense 3136->128,
dense 128->10, batch 64, SGD momentum 0.9) on random data. The learning rate is 0 so that repeating one batch
does not collapse the loss and push gradients into slow denormal floats (same in bench_cpu_ops).

Usage: /usr/bin/python3 bench/bench_cnn_torch.py [threads=2] [steps=60]
Run it right before or after bench_cpu_ops on the same machine and compare samples/s.
"""
import sys
import time

import torch
import torch.nn as nn

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 60
torch.set_num_threads(threads)
torch.manual_seed(0)
model = nn.Sequential(
    nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.0, momentum=0.9)
loss_fn = nn.CrossEntropyLoss()
x = torch.rand(64, 1, 28, 28)
y = torch.randint(0, 10, (64,))


def step():
    opt.zero_grad()
    out = model(x)
    loss = loss_fn(out, y)
    loss.backward()
    opt.step()
    (out.argmax(1) == y).sum().item()


for _ in range(5):
    step()
best = 1e30
per_round = steps // 3 + 1
for _ in range(3):
    t0 = time.perf_counter()
    for _ in range(per_round):
        step()
    best = min(best, (time.perf_counter() - t0) / per_round)
print(f"PyTorch {torch.__version__}, {threads} thread(s): {best * 1e3:.2f} ms/step, {64 / best:.0f} samples/s")
