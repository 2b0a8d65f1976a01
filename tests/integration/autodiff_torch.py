#!/usr/bin/env python3
"""PyTorch's side of test_autodiff's comparison: a small network built from
the ops nn::Onnx differentiates (Conv with stride / padding / dilation /
groups, BatchNormalization in training mode, LeakyRelu, MaxPool,
AveragePool, Sigmoid, Flatten, Gemm, LayerNormalization, Tanh, Softmax,
Mul, Add, Concat, Slice, Transpose, MatMul, ReduceMean, Relu), exported with
torch.onnx.export as an ordinary ONNX model (training mode, so batch
normalization stays a node and keeps its running statistics), and its
softmax cross-entropy gradient by autograd, on one seeded batch.

Writes into DIR: model.onnx, x.f32 (the batch, [8, 64] float32), y.i64 (the
labels) and torch.json: the loss, every parameter's gradient by initializer
name, and the batch statistics bn1 saw (its running statistics move by them).

Usage: autodiff_torch.py DIR     (exit 3 when PyTorch is missing)
"""
import json
import sys

try:
    import torch
    from torch import nn
    from torch.nn import functional as F
except ImportError:
    sys.exit(3)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 6, 3, stride=2, padding=2, dilation=2, groups=2)
        self.fc = nn.Linear(6 * 2 * 2 + 4, 16)
        self.ln = nn.LayerNorm(16)
        self.w = nn.Parameter(torch.randn(16, 10) * 0.5)
        self.scale = nn.Parameter(torch.rand(10) + 0.5)

    def forward(self, x):
        x = x.reshape(-1, 1, 8, 8)
        x = F.leaky_relu(self.bn1(self.conv1(x)), 0.1)
        x = F.max_pool2d(x, 2)                                  # [N, 4, 4, 4]
        side = F.avg_pool2d(x, 2, stride=2, padding=1, count_include_pad=False)  # [N, 4, 3, 3]
        side = side.mean(dim=(2, 3))                            # [N, 4]
        x = torch.sigmoid(self.conv2(x))                        # [N, 6, 2, 2]
        x = torch.flatten(x, 1)
        x = torch.cat([x[:, 2:], x[:, :2], side], dim=1)        # Slice, Concat
        h = torch.tanh(self.ln(self.fc(x)))
        h = h + F.softmax(h, dim=1) * h                         # Softmax, Mul, Add
        logits = torch.matmul(torch.relu(h).t().t(), self.w)    # Transpose, MatMul
        return logits * self.scale


def main():
    out = sys.argv[1]
    torch.set_num_threads(1)
    torch.manual_seed(0)
    net = Net()
    x = torch.randn(8, 64)
    y = torch.arange(8) % 10
    net.train()
    torch.onnx.export(net, x, f"{out}/model.onnx", input_names=["input"],
                      output_names=["logits"], dynamic_axes={"input": {0: "N"}},
                      opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    torch.manual_seed(0)
    net = Net()  # the weights again: tracing the export ran a forward
    loss = F.cross_entropy(net(x), y)
    loss.backward()
    with torch.no_grad():  # the batch statistics bn1 saw
        c = net.conv1(x.reshape(-1, 1, 8, 8))
        mean, var = c.mean(dim=(0, 2, 3)), c.var(dim=(0, 2, 3), unbiased=True)
    result = {
        "loss": loss.item(),
        "grads": {n: p.grad.flatten().tolist() for n, p in net.named_parameters()},
        "batch_mean": mean.tolist(),
        "batch_var_unbiased": var.tolist(),
        "momentum": net.bn1.momentum,
    }
    x.numpy().astype("float32").tofile(f"{out}/x.f32")
    y.numpy().astype("int64").tofile(f"{out}/y.i64")
    with open(f"{out}/torch.json", "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
