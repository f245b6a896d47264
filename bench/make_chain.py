#!/usr/bin/env python3
"""Writes a 200,000-node model for the shape inference benchmark.

    make_chain.py [--out FILE] [--nodes N] [--seed S]

The model is a deep BERT-style encoder made by tests/models/make_models.py
(the same layer as the test model, as transformers exports it: Linear as
MatMul+Add, Shape/Gather/Unsqueeze/Concat/Reshape chains for the heads,
Transpose, MatMul, Div, Add of the mask, Softmax, decomposed LayerNorm,
GELU with Erf, Constant nodes for the literals), with small widths (hidden
16, 2 heads, MLP 32, vocabulary 100) so that the file stays small, and as
many layers as it takes; Relu nodes on the output make the count exact.
Inputs input_ids, attention_mask, token_type_ids int64[batch,sequence].
About 30 ops types; about a third of the nodes are Constants.
"""
import argparse
import os
import sys

import onnx
from onnx import helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "models"))
import make_models  # noqa: E402


def build(nodes, seed):
    small = dict(d=16, heads=2, d_ff=32, vocab=100, max_pos=64)
    one = len(make_models.bert(seed, layers=1, **small).graph.node)
    two = len(make_models.bert(seed, layers=2, **small).graph.node)
    per_layer = two - one
    layers = max(1, (nodes - (one - per_layer)) // per_layer)
    m = make_models.bert(seed, layers=layers, **small)
    g = m.graph
    # pad to the exact count with Relu nodes after the pooler output
    last = "pooler_output"
    extra = nodes - len(g.node)
    if extra < 0:
        raise SystemExit(f"cannot make {nodes} nodes (the smallest is {len(g.node)})")
    for i in range(extra):
        out = f"/tail/Relu_{i}_output_0"
        g.node.append(helper.make_node("Relu", [last], [out], name=f"/tail/Relu_{i}"))
        last = out
    if extra:
        g.output[1].name = "pooled_relu"
        g.node[-1].output[0] = "pooled_relu"
    m.doc_string = f"shape inference benchmark: BERT-style encoder, {layers} layers of hidden 16, {extra} Relu"
    return m, layers, extra


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "out", "chain.onnx"))
    ap.add_argument("--nodes", type=int, default=200000)
    ap.add_argument("--seed", type=int, default=20261121)
    a = ap.parse_args()
    m, layers, extra = build(a.nodes, a.seed)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    onnx.save_model(m, a.out)
    ops = {}
    for n in m.graph.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    print(f"wrote {a.out}: {len(m.graph.node)} nodes ({layers} layers + {extra} Relu), "
          f"{len(m.graph.initializer)} initializers, {os.path.getsize(a.out):,} bytes")
    print("ops: " + ", ".join(f"{k} {v}" for k, v in sorted(ops.items(), key=lambda kv: -kv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
