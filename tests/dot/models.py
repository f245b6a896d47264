#!/usr/bin/env python3
"""Builds the models the drawing tests use, with tests/models/make_models.py.

    models.py OUTDIR [NAME...]

resnet50     the generated ResNet-50 (torchvision's export, random weights)
bert2        a 2-layer BERT encoder with small dims (a transformer as exported)
bert64       a 64-layer BERT with tiny dims: about 7,000 nodes, 5,000 drawn
             (the timing of large drawings)
"""
import os
import sys

import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "models"))
import make_models  # noqa: E402

SEED = 20261121
MODELS = {
    "resnet50": lambda: make_models.resnet50(SEED),
    "bert2": lambda: make_models.bert(SEED, layers=2, d=64, heads=4, d_ff=128, vocab=100, max_pos=64),
    "bert64": lambda: make_models.bert(SEED, layers=64, d=16, heads=2, d_ff=32, vocab=50, max_pos=32),
}


def main():
    out = sys.argv[1]
    names = sys.argv[2:] or ["resnet50", "bert2"]
    os.makedirs(out, exist_ok=True)
    for name in names:
        path = os.path.join(out, name + ".onnx")
        if os.path.exists(path):
            continue
        m = MODELS[name]()
        onnx.save_model(m, path + ".tmp")
        os.replace(path + ".tmp", path)
        print(f"{path}: {len(m.graph.node)} nodes")


if __name__ == "__main__":
    main()
