#!/usr/bin/env python3
"""Generate a GPT-style decoder ONNX model for the load/save benchmark.

The default configuration is GPT-2 small with an untied LM head:
12 blocks, d_model 768, 12 heads, MLP 3072, vocabulary 50257, context 1024.
That is 163,037,184 float32 parameters (652 MB) and 620 nodes.
Weights are random (numpy, fixed seed), so the file is the same on every run
with the same numpy and onnx versions.

Graph (opset 17, everything decomposed into basic ops):
  input_ids int64 [batch, seq]
  -> Gather(token embedding) + Gather(position embedding, Range(0, seq))
  -> N x block:
       x = x + Attn(LN1(x));  x = x + MLP(LN2(x))
       LN    = ReduceMean, Sub, Pow, ReduceMean, Add(eps), Sqrt, Div, Mul, Add
       Attn  = per Q/K/V: MatMul, Add, Reshape, Transpose;
               MatMul(QK^T), Div(sqrt(d_head)), Add(causal mask), Softmax,
               MatMul(V), Transpose, Reshape, MatMul, Add
       MLP   = MatMul, Add, GELU as erf (Div, Erf, Add, Mul, Mul), MatMul, Add
  -> final LN -> LM head MatMul -> logits float [batch, seq, vocab]
The causal mask is computed once from seq (Range, Unsqueeze, Greater, Where).

Usage: make_gpt.py [--out FILE] [--layers N] [--d-model D] [--heads H]
                   [--vocab V] [--ctx C] [--seed S]
"""
import argparse
import os
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8


class Builder:
    def __init__(self, rng):
        self.rng = rng
        self.nodes = []
        self.inits = []
        self.n_params = 0
        self._consts = {}
        self._count = {}

    def name(self, prefix):
        k = self._count.get(prefix, 0)
        self._count[prefix] = k + 1
        return f"{prefix}_{k}"

    def weight(self, name, shape, std=0.02):
        a = (self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std))
        self.inits.append(numpy_helper.from_array(a, name))
        self.n_params += a.size
        return name

    def fill(self, name, shape, value):
        a = np.full(shape, value, dtype=np.float32)
        self.inits.append(numpy_helper.from_array(a, name))
        self.n_params += a.size
        return name

    def const(self, value, dtype=np.float32):
        """A shared small constant initializer (not counted as a parameter)."""
        a = np.array(value, dtype=dtype)
        key = (a.dtype.str, a.shape, a.tobytes())
        if key not in self._consts:
            nm = f"const_{len(self._consts)}"
            self.inits.append(numpy_helper.from_array(a, nm))
            self._consts[key] = nm
        return self._consts[key]

    def op(self, op_type, inputs, scope, n_out=1, **attrs):
        nm = self.name(f"{scope}/{op_type}")
        outs = [f"{nm}_out{i}" if n_out > 1 else f"{nm}_out" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=nm, **attrs))
        return outs[0] if n_out == 1 else outs

    def layer_norm(self, x, scope, d):
        g = self.fill(f"{scope}.weight", [d], 1.0)
        b = self.fill(f"{scope}.bias", [d], 0.0)
        mean = self.op("ReduceMean", [x], scope, axes=[-1], keepdims=1)
        xc = self.op("Sub", [x, mean], scope)
        sq = self.op("Pow", [xc, self.const(2.0)], scope)
        var = self.op("ReduceMean", [sq], scope, axes=[-1], keepdims=1)
        ve = self.op("Add", [var, self.const(1e-5)], scope)
        std = self.op("Sqrt", [ve], scope)
        xn = self.op("Div", [xc, std], scope)
        y = self.op("Mul", [xn, g], scope)
        return self.op("Add", [y, b], scope)

    def linear(self, x, scope, d_in, d_out, bias=True):
        w = self.weight(f"{scope}.weight", [d_in, d_out])
        y = self.op("MatMul", [x, w], scope)
        if bias:
            b = self.fill(f"{scope}.bias", [d_out], 0.0)
            y = self.op("Add", [y, b], scope)
        return y

    def attention(self, x, mask, scope, d, heads):
        dh = d // heads
        split_shape = self.const([0, 0, heads, dh], np.int64)
        merge_shape = self.const([0, 0, d], np.int64)
        qkv = []
        for which, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
            s = f"{scope}.{which}_proj"
            y = self.linear(x, s, d, d)
            y = self.op("Reshape", [y, split_shape], s)
            qkv.append(self.op("Transpose", [y], s, perm=perm))   # k comes out as [B,H,Dh,S]
        q, k, v = qkv
        scores = self.op("MatMul", [q, k], scope)                  # [B,H,S,S]
        scores = self.op("Div", [scores, self.const(float(np.sqrt(dh)))], scope)
        scores = self.op("Add", [scores, mask], scope)
        probs = self.op("Softmax", [scores], scope, axis=-1)
        ctx = self.op("MatMul", [probs, v], scope)                 # [B,H,S,Dh]
        ctx = self.op("Transpose", [ctx], scope, perm=[0, 2, 1, 3])
        ctx = self.op("Reshape", [ctx, merge_shape], scope)
        return self.linear(ctx, f"{scope}.out_proj", d, d)

    def gelu(self, x, scope):
        y = self.op("Div", [x, self.const(float(np.sqrt(2.0)))], scope)
        y = self.op("Erf", [y], scope)
        y = self.op("Add", [y, self.const(1.0)], scope)
        y = self.op("Mul", [x, y], scope)
        return self.op("Mul", [y, self.const(0.5)], scope)

    def mlp(self, x, scope, d, d_ff):
        h = self.linear(x, f"{scope}.fc_in", d, d_ff)
        h = self.gelu(h, scope)
        return self.linear(h, f"{scope}.fc_out", d_ff, d)


def build(layers, d, heads, d_ff, vocab, ctx, seed):
    assert d % heads == 0
    B = Builder(np.random.default_rng(seed))
    ids = "input_ids"
    scope = "embed"
    wte = B.weight("wte", [vocab, d])
    wpe = B.weight("wpe", [ctx, d], std=0.01)
    tok = B.op("Gather", [wte, ids], scope, axis=0)              # [B,S,D]
    shape = B.op("Shape", [ids], scope)
    seq = B.op("Gather", [shape, B.const(1, np.int64)], scope, axis=0)   # scalar
    pos = B.op("Range", [B.const(0, np.int64), seq, B.const(1, np.int64)], scope)
    pemb = B.op("Gather", [wpe, pos], scope, axis=0)             # [S,D]
    x = B.op("Add", [tok, pemb], scope)

    # causal mask [S,S]: 0 on and below the diagonal, -1e4 above
    scope = "mask"
    rows = B.op("Unsqueeze", [pos, B.const([1], np.int64)], scope)   # [S,1]
    cols = B.op("Unsqueeze", [pos, B.const([0], np.int64)], scope)   # [1,S]
    future = B.op("Greater", [cols, rows], scope)
    mask = B.op("Where", [future, B.const(-1e4), B.const(0.0)], scope)

    for i in range(layers):
        s = f"h{i}"
        a = B.attention(B.layer_norm(x, f"{s}.ln_1", d), mask, f"{s}.attn", d, heads)
        x = B.op("Add", [x, a], s)
        m = B.mlp(B.layer_norm(x, f"{s}.ln_2", d), f"{s}.mlp", d, d_ff)
        x = B.op("Add", [x, m], s)

    x = B.layer_norm(x, "ln_f", d)
    w = B.weight("lm_head.weight", [d, vocab])
    B.nodes.append(helper.make_node("MatMul", [x, w], ["logits"], name="lm_head/MatMul"))

    graph = helper.make_graph(
        B.nodes, "gpt",
        [helper.make_tensor_value_info(ids, TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", vocab])],
        initializer=B.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="ogsh-bench-make_gpt", producer_version="1")
    model.ir_version = IR_VERSION
    model.doc_string = (f"GPT-style decoder, {layers} layers, d_model {d}, {heads} heads, "
                        f"mlp {d_ff}, vocab {vocab}, ctx {ctx}, seed {seed}; random weights")
    return model, B.n_params


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(here, "out", "gpt.onnx"))
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--d-model", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--d-ff", type=int, default=None, help="default 4 x d-model")
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=20261121)
    a = ap.parse_args(argv)
    d_ff = a.d_ff or 4 * a.d_model

    t0 = time.perf_counter()
    model, n_params = build(a.layers, a.d_model, a.heads, d_ff, a.vocab, a.ctx, a.seed)
    onnx.checker.check_model(model, full_check=True)   # also runs strict shape inference
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    tmp = a.out + ".tmp"
    onnx.save_model(model, tmp)
    os.replace(tmp, a.out)
    size = os.path.getsize(a.out)
    print(f"wrote {a.out}")
    print(f"parameters: {n_params} ({n_params / 1e6:.1f}M float32)")
    print(f"nodes: {len(model.graph.node)}")
    print(f"initializers: {len(model.graph.initializer)}")
    print(f"file size: {size} bytes ({size / 1e6:.1f} MB, {size / 2**20:.1f} MiB)")
    print(f"took {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
