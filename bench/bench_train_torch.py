#!/usr/bin/env python3
"""PyTorch's side of bench_train: one training step (forward, softmax
cross-entropy, backward, SGD with momentum 0.9) of the same models on the
same shapes, on one thread (torch.set_num_threads(1)). Prints
"<case> <seconds per step>" lines (the best of 7 trials), or one line
saying why it is skipped (exit 0) when PyTorch is not installed.

The models are the C ones: the CNN of examples/cnn/cnn_graph.h (28x28
input as 784-wide rows, Reshape, conv 3x3 pad 1 -> BN -> ReLU -> 2x2 max
pool, twice with 32 and 64 channels, Flatten, Linear 3136-128, ReLU,
Linear 128-10) and the 784-128-10 MLP.
"""
import argparse
import sys
import time

try:
    import torch
    from torch import nn
except ImportError:
    print("PyTorch baseline skipped: python3-torch is not installed (make bench installs it)")
    sys.exit(0)


def cnn():
    return nn.Sequential(
        nn.Unflatten(1, (1, 28, 28)),
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def mlp():
    return nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))


def time_step(model, batch, trial_s):
    torch.manual_seed(0)
    x = torch.randn(batch, 784)
    y = torch.arange(batch) * 7 % 10
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    model.train()

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()

    step()
    reps = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(reps):
            step()
        if time.perf_counter() - t0 > trial_s / 4 or reps > 1 << 20:
            break
        reps *= 2
    trials = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(reps):
            step()
        trials.append((time.perf_counter() - t0) / reps)
    return min(trials)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trial-s", type=float, default=0.4)
    args = ap.parse_args()
    torch.set_num_threads(1)
    for name, make, batch in (("cnn_32", cnn, 32), ("cnn_64", cnn, 64), ("mlp_64", mlp, 64)):
        print(f"{name} {time_step(make(), batch, args.trial_s):.9f}", flush=True)


if __name__ == "__main__":
    main()
