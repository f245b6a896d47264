#!/usr/bin/env python3
"""FusedGemm's epilogue on the CPU: the residual Z and the activation that
the Gemm's product applies to each tile as it finishes (k_gemm.c, struct
cpu_epi), Gelu's erf form included.

    test_fusedgemm_epi.py OGSH

One model holds FusedGemm nodes (ai.ogsh) with odd M and N (partial
micro-tiles in both directions), K over one and several KC blocks, a
column bias, a full bias and none, transB, with and without Z, and each
next to the same computation as plain ops (Gemm, Add, Gelu / Relu / Clip):
- FusedGemm's output has exactly the bits of the plain ops' (the epilogue
  is the separate pass's arithmetic, in the same order; not for Sigmoid,
  whose pass uses expf where the Sigmoid op has its own vectorized form);
- 1 and 3 threads give the same bits;
- both are within float32 tolerance of numpy in float64 (math.erf GELU).
It runs once per instruction set (OGSH_CPU_ISA=generic, avx2, avx512).
"""
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(11)
ERF = np.vectorize(math.erf)


def act_ref(y, act, params):
    if act == "Gelu":
        if params and params[0] == 1:
            return 0.5 * y * (1 + np.tanh(math.sqrt(2 / math.pi) * (y + 0.044715 * y ** 3)))
        return 0.5 * y * (1 + ERF(y / math.sqrt(2)))
    if act == "Relu":
        return np.maximum(y, 0)
    if act == "Clip":
        return np.clip(y, params[0], params[1])
    return y


def main():
    ogsh = sys.argv[1]
    nodes, inits, inputs, outputs, feeds, pairs, refs = [], [], [], [], {}, [], {}

    def init(name, a):
        inits.append(numpy_helper.from_array(a, name))
        return name

    def case(m, k, n, act="Gelu", params=None, bias="col", z=True, tb=0, alpha=1.0, beta=1.0, exact=True):
        i = len(pairs)
        a = RNG.standard_normal((m, k)).astype(np.float32) * 0.3
        b = RNG.standard_normal((n, k) if tb else (k, n)).astype(np.float32) * 0.3
        an = f"a{i}"
        inputs.append(helper.make_tensor_value_info(an, TensorProto.FLOAT, a.shape))
        feeds[an] = a
        bn = init(f"b{i}", b)
        ins = [an, bn]
        ref = a.astype(np.float64) @ (b.T if tb else b).astype(np.float64) * alpha
        if bias:
            c = RNG.standard_normal((n,) if bias == "col" else (m, n)).astype(np.float32)
            ins.append(init(f"c{i}", c))
            ref = ref + beta * c.astype(np.float64)
        gemm_attrs = dict(transB=tb, alpha=alpha, beta=beta)
        zn = None
        if z:
            zv = RNG.standard_normal((m, n)).astype(np.float32)
            zn = init(f"z{i}", zv)
            ref = ref + zv.astype(np.float64)
        ref = act_ref(ref, act, params)
        fused_ins = ins + ([zn] if z else []) if bias or not z else ins + ["", zn]
        fa = dict(gemm_attrs, activation=act)
        if params is not None:
            fa["activation_params"] = [float(p) for p in params]
        fo = f"fused{i}"
        nodes.append(helper.make_node("FusedGemm", fused_ins, [fo], name=f"fg{i}", domain="ai.ogsh", **fa))
        # the same as plain ops
        g = f"g{i}"
        nodes.append(helper.make_node("Gemm", ins, [g], name=f"gemm{i}", **gemm_attrs))
        if z:
            nodes.append(helper.make_node("Add", [g, zn], [f"s{i}"], name=f"add{i}"))
            g = f"s{i}"
        po = f"plain{i}"
        if act == "Gelu":
            nodes.append(helper.make_node("Gelu", [g], [po], name=f"gelu{i}",
                                          approximate="tanh" if params and params[0] == 1 else "none"))
        elif act == "Relu":
            nodes.append(helper.make_node("Relu", [g], [po], name=f"relu{i}"))
        elif act == "Clip":
            nodes.append(helper.make_node("Clip", [g, init(f"lo{i}", np.float32(params[0])),
                                                   init(f"hi{i}", np.float32(params[1]))], [po], name=f"clip{i}"))
        else:
            nodes.append(helper.make_node("Identity", [g], [po], name=f"id{i}"))
        for o in (fo, po):
            outputs.append(helper.make_tensor_value_info(o, TensorProto.FLOAT, None))
        pairs.append((fo, po, f"FusedGemm M {m} K {k} N {n} {act} {params} bias {bias} Z {z} transB {tb}", exact))
        refs[fo] = ref

    # odd M and N: partial tiles of rows and columns; K over one KC block and several
    case(37, 50, 45)
    case(37, 300, 45)
    case(130, 257, 70, z=False)
    case(29, 64, 97, bias="full")
    case(13, 90, 33, bias=None)
    case(13, 90, 33, bias=None, z=False)
    case(150, 600, 131, tb=1, alpha=0.5, beta=2.0)
    case(128, 96, 300, z=False)                      # BERT's FFN, smaller
    case(3, 40, 70)                                  # three rows
    case(2, 40, 70)                                  # two rows: the unpacked product, the epilogue after
    case(1, 40, 70, z=False)
    case(37, 50, 45, act="Relu")
    case(37, 300, 45, act="Clip", params=[-0.5, 0.75], z=False)
    case(37, 50, 45, act="", z=True)
    case(37, 50, 45, act="Gelu", params=[1.0])      # the tanh form: the separate pass
    case(37, 50, 45, act="Sigmoid", exact=False)     # the pass's expf, not the Sigmoid op's: close, not exact

    graph = helper.make_graph(nodes, "fusedgemm_epi", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid("ai.ogsh", 1)])
    # Sigmoid in the plain ops
    for nd in model.graph.node:
        if nd.op_type == "Identity" and nd.name == f"id{len(pairs) - 1}":
            nd.op_type = "Sigmoid"
    refs[pairs[-1][0]] = 1 / (1 + np.exp(-(refs[pairs[-1][0]])))
    failures, worst = 0, 0.0
    with tempfile.TemporaryDirectory() as tmp:
        mp, ip = os.path.join(tmp, "m.onnx"), os.path.join(tmp, "in.npz")
        onnx.save(model, mp)
        np.savez(ip, **feeds)
        for isa in ("generic", "avx2", "avx512"):
            got = {}
            for th in (1, 3):
                op = os.path.join(tmp, f"out_{isa}_{th}.npz")
                env = dict(os.environ, OGSH_CPU_ISA=isa)
                env.pop("OGSH_THREADS", None)
                p = subprocess.run([ogsh, mp, "-c", f"set threads {th}; run --device=cpu --inputs={ip} "
                                    f"--save-outputs={op}"], env=env, capture_output=True, text=True)
                if p.returncode:
                    print(f"{isa}: ogsh failed:\n{p.stdout}{p.stderr}", file=sys.stderr)
                    failures += 1
                    break
                got[th] = np.load(op)
            if len(got) < 2:
                continue
            for fo, po, what, exact in pairs:
                f1, f3, p1 = got[1][fo], got[3][fo], got[1][po]
                if f1.tobytes() != f3.tobytes():
                    print(f"{isa}: {what}: 1 and 3 threads differ in {int(np.sum(f1 != f3))} elements",
                          file=sys.stderr)
                    failures += 1
                if exact and f1.tobytes() != p1.tobytes():
                    print(f"{isa}: {what}: differs from the plain ops in {int(np.sum(f1 != p1))} elements, "
                          f"by up to {np.abs(f1.astype(np.float64) - p1).max():.3g}", file=sys.stderr)
                    failures += 1
                ref = refs[fo]
                err = np.abs(f1.astype(np.float64) - ref)
                worst = max(worst, float(err.max()))
                if f1.shape != ref.shape or not np.all(err <= 1e-4 * (1 + np.abs(ref))):
                    print(f"{isa}: {what}: max abs error {err.max():.3g} against float64", file=sys.stderr)
                    failures += 1
        print(f"test_fusedgemm_epi: {len(pairs)} FusedGemm nodes x 3 instruction sets x 1 and 3 threads, "
              f"largest error {worst:.3g}, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
