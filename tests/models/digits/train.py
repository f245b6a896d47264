#!/usr/bin/env python3
"""Trains the two digits models the quantization checks use, and exports them.

    train.py [DIR]        (DIR: where train.npz/test.npy are and the .onnx go;
                           default this script's folder)

Needs torch (the GPU machine has it; CI does not run this: the .onnx files it
made are committed next to it). The data comes from make_data.py
(scikit-learn's load_digits, held-out 30%).

  digits_cnn.onnx          a small residual CNN: conv 1->32, conv 32->64,
                           max-pool, a residual block of two 64->64 convs,
                           Gemm 1024->64->10; BatchNorm after every conv
  digits_transformer.onnx  a 2-layer transformer encoder over the 8 image
                           rows as tokens (width 64, 4 heads, MLP 128, GELU,
                           LayerNorm, learned positions), mean-pooled

Each is exported twice, with torch.onnx.export's default exporter
(dynamo) and with the TorchScript one (dynamo=False, *_ts.onnx), with a
dynamic batch (dummy batch 2). Prints held-out top-1 of each.
"""
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32)
        self.c2, self.b2 = nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64)
        self.c3, self.b3 = nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64)
        self.c4, self.b4 = nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64)
        self.fc1 = nn.Linear(64 * 4 * 4, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.b1(self.c1(x)))
        x = F.max_pool2d(F.relu(self.b2(self.c2(x))), 2)
        y = F.relu(self.b3(self.c3(x)))
        x = F.relu(x + self.b4(self.c4(y)))
        x = torch.flatten(x, 1)
        return self.fc2(F.relu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, d=64, heads=4, ff=128):
        super().__init__()
        self.h, self.dk = heads, d // heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.f1, self.f2 = nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x):
        b, t, d = x.shape
        q = self.q(x).view(b, t, self.h, self.dk).transpose(1, 2)
        k = self.k(x).view(b, t, self.h, self.dk).transpose(1, 2)
        v = self.v(x).view(b, t, self.h, self.dk).transpose(1, 2)
        a = torch.softmax(q @ k.transpose(-1, -2) / self.dk ** 0.5, dim=-1)
        y = (a @ v).transpose(1, 2).reshape(b, t, d)
        x = self.ln1(x + self.o(y))
        return self.ln2(x + self.f2(F.gelu(self.f1(x))))


class Transformer(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.embed = nn.Linear(8, d)
        self.pos = nn.Parameter(torch.randn(8, d) * 0.02)
        self.blocks = nn.ModuleList([Block(d), Block(d)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        x = self.embed(x.reshape(x.shape[0], 8, 8)) + self.pos
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x.mean(dim=1)))


def train(model, xtr, ytr, epochs, lr, dev):
    torch.manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs)
    x = torch.tensor(xtr, device=dev)
    y = torch.tensor(ytr, device=dev)
    n = len(x)
    for _ in range(epochs):
        model.train()
        perm = torch.randperm(n, device=dev)
        for i in range(0, n, 64):
            idx = perm[i:i + 64]
            xb = x[idx]
            # light augmentation: shift by one pixel
            if torch.rand(1).item() < 0.5:
                xb = torch.roll(xb, shifts=(int(torch.randint(-1, 2, (1,))), int(torch.randint(-1, 2, (1,)))),
                                dims=(2, 3))
            loss = F.cross_entropy(model(xb), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        sched.step()
    model.eval()


def top1(model, x, y, dev):
    with torch.no_grad():
        p = model(torch.tensor(x, device=dev)).argmax(1).cpu().numpy()
    return 100.0 * float((p == y).mean())


def export(model, path, dynamo):
    model = model.cpu().eval()
    dummy = torch.zeros(2, 1, 8, 8)
    if dynamo:
        torch.onnx.export(model, (dummy,), path, input_names=["x"], output_names=["logits"],
                          dynamic_shapes={"x": {0: torch.export.Dim("batch")}}, external_data=False)
    else:
        torch.onnx.export(model, (dummy,), path, input_names=["x"], output_names=["logits"],
                          dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}}, opset_version=17,
                          dynamo=False)


def main():
    here = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    tr = np.load(os.path.join(here, "train.npz"))
    xtr, ytr = tr["x"], tr["y"]
    xte = np.load(os.path.join(here, "test.npy"))
    yte = np.load(os.path.join(here, "test_labels.npy"))
    for name, model, epochs, lr in (("digits_cnn", CNN(), 40, 3e-3), ("digits_transformer", Transformer(), 120, 2e-3)):
        torch.manual_seed(0)
        model = model.to(dev)
        t0 = time.time()
        train(model, xtr, ytr, epochs, lr, dev)
        acc = top1(model, xte, yte, dev)
        print(f"{name}: held-out top-1 {acc:.2f}% ({len(yte)} samples), trained in {time.time() - t0:.1f} s on {dev}")
        for dyn, suffix in ((True, ""), (False, "_ts")):
            path = os.path.join(here, name + suffix + ".onnx")
            try:
                export(model, path, dyn)
                print(f"  exported {path} ({os.path.getsize(path)} bytes, {'dynamo' if dyn else 'torchscript'})")
            except Exception as e:  # report and go on with the other exporter
                print(f"  export {'dynamo' if dyn else 'torchscript'} failed: {e}")
            model = model.to(dev)
    print(f"torch {torch.__version__}")


if __name__ == "__main__":
    main()
