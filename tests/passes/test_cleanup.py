#!/usr/bin/env python3
"""Unit tests of the cleanup passes: eliminate-nops, fold-shapes,
fold-constants, cse, prune-initializers.

usage: test_cleanup.py OGSH [-k SUBSTRING]

Each case builds a small model with onnx.helper in a temporary folder, runs
`ogsh MODEL -c 'apply PASS --json; nodes --json; save OUT'` and checks
  1. the rewritten structure (ops left, names of graph outputs),
  2. that every rejection case gives its reason in the report,
  3. that ogsh's own numbers agree before and after (run --expect, rtol 1e-4),
  4. that the saved model passes onnx.checker and onnxruntime gives the same
     outputs for it as for the original.
Prints one line per check; exits non-zero on any failure.
"""
import json
import os
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # common.py, next to this script
import common  # noqa: E402
from common import check, json_docs, model, ogsh, ort, ort_outputs, vi  # noqa: E402


def init(name, arr):
    return nh.from_array(np.asarray(arr), name)


def case(name, m, pass_args, feeds, *, ops=None, absent=(), present=(), rewritten=None, rewrites=(),
         rejects=(), outputs=None, numbers=True, extra=None):
    """Runs one case. ops: the op counts left ({op: count}); absent/present: op
    types that must be gone/still there; rewrites/rejects: substrings that
    some rewrote/rejected message must hold; outputs: graph output names."""
    if common.FILTER and common.FILTER not in name:
        return None
    d = os.path.join(common.TMP, name)
    os.makedirs(d, exist_ok=True)
    src = os.path.join(d, "model.onnx")
    out = os.path.join(d, "out.onnx")
    onnx.save(m, src)
    inz = os.path.join(d, "in.npz")
    np.savez(inz, **feeds)
    apply = "apply " + pass_args

    rc, so, se = ogsh(src, f"{apply} --json; nodes --json; outputs --json; save {out}")
    if not check(f"{name}: apply runs", rc == 0, se.strip()[-400:]):
        return None
    docs = json_docs(so)
    if not check(f"{name}: report and node list are JSON", len(docs) >= 3, so[:300]):
        return None
    rep, nodes, outs = docs[0], docs[1], docs[2]
    msgs = rep.get("messages", [])
    texts = [(mm["kind"], (mm.get("node") or "") + ": " + mm["text"]) for mm in msgs]
    counts = {}
    for n in nodes:
        counts[n["op"]] = counts.get(n["op"], 0) + 1

    # (1) structure
    if ops is not None:
        check(f"{name}: ops left {ops}", counts == ops, f"got {counts}")
    for op in absent:
        check(f"{name}: no {op} left", op not in counts, f"got {counts}")
    for op in present:
        check(f"{name}: {op} still there", op in counts, f"got {counts}")
    if rewritten is not None:
        check(f"{name}: {rewritten} rewritten", rep.get("rewritten") == rewritten,
              f"got {rep.get('rewritten')}: {texts}")
    for sub in rewrites:
        check(f"{name}: rewrote '{sub}'", any(k == "rewrote" and sub in t for k, t in texts), f"{texts}")
    # (2) every rejection case names its reason
    for sub in rejects:
        check(f"{name}: rejected with '{sub}'", any(k == "rejected" and sub in t for k, t in texts), f"{texts}")
    check(f"{name}: report counts add up", rep.get("matched") == rep.get("rewritten", 0) + rep.get("rejected", 0),
          json.dumps({k: rep.get(k) for k in ("matched", "rewritten", "rejected")}))
    if outputs is not None:
        got = [o.get("name") for o in outs] if isinstance(outs, list) else outs
        check(f"{name}: graph outputs {outputs}", got == outputs, f"got {got}")
    if extra:
        extra(rep, nodes, texts)

    # (3) ogsh's numbers before and after
    if numbers:
        ref = os.path.join(d, "ref.npz")
        rc, so, se = ogsh(src, f"run --inputs={inz} --save-outputs={ref}")
        if check(f"{name}: original runs in ogsh", rc == 0, se.strip()[-300:]):
            rc, so, se = ogsh(src, f"{apply}; run --inputs={inz} --expect={ref} --rtol=1e-4 --atol=1e-5")
            check(f"{name}: outputs agree after the pass (ogsh, rtol 1e-4)", rc == 0, (so + se).strip()[-500:])

    # (4) the saved model is valid ONNX and onnxruntime agrees with the original
    if not check(f"{name}: saved", os.path.exists(out)):
        return None
    try:
        onnx.checker.check_model(onnx.load(out), full_check=True)
        check(f"{name}: saved model passes onnx.checker", True)
    except Exception as e:  # noqa: BLE001
        check(f"{name}: saved model passes onnx.checker", False, str(e)[:300])
    if numbers and ort is not None:
        try:
            a = ort_outputs(src, feeds)
            b = ort_outputs(out, feeds)
            same = a.keys() == b.keys() and all(
                a[k].shape == b[k].shape and a[k].dtype == b[k].dtype and
                np.allclose(b[k], a[k], rtol=1e-4, atol=1e-5) for k in a)
            check(f"{name}: onnxruntime gives the same outputs", same,
                  f"{ {k: v.shape for k, v in a.items()} } vs { {k: v.shape for k, v in b.items()} }")
        except Exception as e:  # noqa: BLE001
            check(f"{name}: onnxruntime gives the same outputs", False, str(e)[:300])
    return rep


def rnd(*shape, dtype=np.float32):
    return np.random.default_rng(len(shape) + sum(shape)).uniform(-1, 1, shape).astype(dtype)


I64MAX = 9223372036854775807

# --------------------------------------------------------------------------
# eliminate-nops
# --------------------------------------------------------------------------


def t_nops_chain():
    nodes = [
        h.make_node("Identity", ["x"], ["a"], name="id1"),
        h.make_node("Transpose", ["a"], ["b"], name="t1", perm=[0, 2, 1]),
        h.make_node("Transpose", ["b"], ["c"], name="t2", perm=[0, 2, 1]),
        h.make_node("Cast", ["c"], ["d"], name="cast1", to=T.FLOAT),
        h.make_node("Relu", ["d"], ["e"], name="relu"),
        h.make_node("Reshape", ["e", "s1"], ["f"], name="r1"),
        h.make_node("Reshape", ["f", "s2"], ["g"], name="r2"),
        h.make_node("Identity", ["g"], ["y"], name="id2"),
    ]
    m = model(nodes, [vi("x", T.FLOAT, [2, 3, 4])], [vi("y", T.FLOAT, [2, 3, 4])],
              [init("s1", np.array([6, 4], np.int64)), init("s2", np.array([2, 3, 4], np.int64))])
    case("nops-chain", m, "eliminate-nops", {"x": rnd(2, 3, 4)}, ops={"Relu": 1}, outputs=["y"],
         rewrites=["id1: removed, an Identity", "merged with Transpose 't1'", "Cast to float32",
                   "merged with Reshape 'r1'", "'e' now carries the graph output's name"])


def t_nops_transposes():
    # two transposes that compose into a third permutation: one is left, with perm p1[p2[i]]
    nodes = [
        h.make_node("Transpose", ["x"], ["a"], name="t1", perm=[1, 2, 0]),
        h.make_node("Transpose", ["a"], ["y"], name="t2", perm=[0, 2, 1]),
    ]
    m = model(nodes, [vi("x", T.FLOAT, [2, 3, 4])], [vi("y", T.FLOAT, [3, 2, 4])])

    def perm(rep, nodes, texts):
        t = [n for n in nodes if n["op"] == "Transpose"]
        check("nops-transposes: one Transpose reading x", len(t) == 1 and t[0]["inputs"] == ["x"], f"{t}")
    case("nops-transposes", m, "eliminate-nops", {"x": rnd(2, 3, 4)}, ops={"Transpose": 1}, outputs=["y"],
         rewrites=["perm [0,2,1] after [1,2,0] is perm [1,0,2]"], extra=perm)


def t_nops_shapes():
    nodes = [
        h.make_node("Pad", ["x", "pads"], ["a"], name="pad0", mode="constant"),
        h.make_node("Slice", ["a", "st", "en", "ax"], ["b"], name="slice_all"),
        h.make_node("Expand", ["b", "eshape"], ["c"], name="expand_same"),
        h.make_node("Unsqueeze", ["c", "axes"], ["d"], name="unsq"),
        h.make_node("Squeeze", ["d", "axes"], ["e"], name="sq"),
        h.make_node("Relu", ["e"], ["f"], name="relu"),
        h.make_node("Squeeze", ["f", "axes0"], ["g"], name="sq2"),
        h.make_node("Unsqueeze", ["g", "axes0"], ["k"], name="unsq2"),
        h.make_node("Dropout", ["k"], ["y"], name="drop"),
        h.make_node("Reshape", ["y", "same"], ["z"], name="reshape_same"),
    ]
    inits = [init("pads", np.zeros(6, np.int64)), init("st", np.array([0, -10], np.int64)),
             init("en", np.array([I64MAX, 100], np.int64)), init("ax", np.array([0, 2], np.int64)),
             init("eshape", np.array([1, 4], np.int64)), init("axes", np.array([-1], np.int64)),
             init("axes0", np.array([0], np.int64)), init("same", np.array([0, -1, 4], np.int64))]
    m = model(nodes, [vi("x", T.FLOAT, [1, 3, 4])], [vi("y", T.FLOAT, [1, 3, 4]), vi("z", T.FLOAT, [1, 3, 4])], inits)
    case("nops-shapes", m, "eliminate-nops", {"x": rnd(1, 3, 4)}, ops={"Relu": 1, "Reshape": 1}, outputs=["y", "z"],
         rewrites=["pad0: removed, a Pad of zero", "slice_all: removed, a Slice that takes everything",
                   "expand_same: removed", "sq: removed, Squeeze undoes Unsqueeze 'unsq'",
                   "unsq2: removed, Unsqueeze undoes Squeeze 'sq2'", "drop: removed, Dropout does nothing",
                   "'f' now carries the graph output's name"],
         # z = Reshape(y) is a nop too, but y is a graph output and cannot also be called z
         rejects=["reshape_same: a Reshape to the shape its input already has, but its output 'z' is a graph output "
                  "and its input 'y' is a graph output too"])


def t_nops_reject():
    # symbolic dims, a graph input as a graph output, a dynamic target shape, training dropout, a read mask
    nodes = [
        h.make_node("Reshape", ["x", "s46"], ["a"], name="r_batch"),
        h.make_node("Slice", ["x", "st", "en", "ax"], ["a2"], name="slice_batch"),
        h.make_node("Add", ["a", "a2"], ["b"], name="add0"),
        h.make_node("Identity", ["x"], ["y"], name="id_io"),
        h.make_node("Reshape", ["b", "shape_in"], ["c"], name="r_dyn"),
        h.make_node("Dropout", ["c", "ratio", "train"], ["d"], name="drop_train"),
        h.make_node("Dropout", ["d"], ["e", "mask"], name="drop_mask"),
        h.make_node("Cast", ["mask"], ["mf"], name="mask_cast", to=T.FLOAT),
        h.make_node("Add", ["e", "mf"], ["z"], name="add"),
    ]
    inits = [init("s46", np.array([4, 6], np.int64)), init("st", np.array([0], np.int64)),
             init("en", np.array([5], np.int64)), init("ax", np.array([0], np.int64)),
             init("ratio", np.array(0.5, np.float32))]
    m = model(nodes, [vi("x", T.FLOAT, ["batch", 6]), vi("shape_in", T.INT64, [2]), vi("train", T.BOOL, [])],
              [vi("y", T.FLOAT, ["batch", 6]), vi("z", T.FLOAT, ["n", 6])], inits, opset=13)
    feeds = {"x": rnd(4, 6), "shape_in": np.array([4, 6], np.int64), "train": np.array(False)}
    case("nops-reject", m, "eliminate-nops", feeds, rewritten=0,
         present=["Reshape", "Slice", "Identity", "Dropout"],
         rejects=["r_batch: dim 0 of 'x' is 'batch' and the target says 4",
                  "slice_batch: it slices [0:5] of axis 0 of 'x', whose length 'batch' is not known",
                  "id_io: an Identity, but its output 'y' is a graph output and its input 'x' is a graph input",
                  "r_dyn: its target shape is not a constant",
                  "drop_train: its training_mode input 'train' is not a constant",
                  "drop_mask: its mask output 'mask' is read"])


def t_nops_graph_output_twice():
    # the input of the removed node is itself a graph output: it cannot take a second name
    nodes = [h.make_node("Relu", ["x"], ["a"], name="relu"), h.make_node("Identity", ["a"], ["y"], name="id")]
    m = model(nodes, [vi("x", T.FLOAT, [3])], [vi("a", T.FLOAT, [3]), vi("y", T.FLOAT, [3])])
    case("nops-output-twice", m, "eliminate-nops", {"x": rnd(3)}, ops={"Relu": 1, "Identity": 1},
         outputs=["a", "y"], rejects=["id: an Identity, but its output 'y' is a graph output and its input 'a' is a graph output too"])


# --------------------------------------------------------------------------
# fold-shapes
# --------------------------------------------------------------------------


def t_shapes_fixed():
    nodes = [
        h.make_node("Shape", ["x"], ["s"], name="shape"),
        h.make_node("Gather", ["s", "i0"], ["b"], name="gather", axis=0),
        h.make_node("Unsqueeze", ["b", "ax0"], ["bu"], name="unsq"),
        h.make_node("Concat", ["bu", "m1"], ["target"], name="concat", axis=0),
        h.make_node("Reshape", ["x", "target"], ["y"], name="reshape"),
        h.make_node("Size", ["x"], ["n"], name="size"),
    ]
    inits = [init("i0", np.array(0, np.int64)), init("ax0", np.array([0], np.int64)),
             init("m1", np.array([-1], np.int64))]
    m = model(nodes, [vi("x", T.FLOAT, [2, 3, 4])], [vi("y", T.FLOAT, [2, 12]), vi("n", T.INT64, [])], inits)

    def more(rep, nodes, texts):
        k = [n for n in nodes if n["op"] == "Constant"]
        check("shapes-fixed: the graph output 'n' is a Constant node's output", len(k) == 1 and k[0]["outputs"] == ["n"], f"{k}")
        r = [n for n in nodes if n["op"] == "Reshape"]
        check("shapes-fixed: Reshape reads the folded 'target'", len(r) == 1 and r[0]["inputs"] == ["x", "target"], f"{r}")
    case("shapes-fixed", m, "fold-shapes", {"x": rnd(2, 3, 4)}, ops={"Reshape": 1, "Constant": 1},
         outputs=["y", "n"], rewrites=["'target' = [2,-1]", "'n' = [24]"], extra=more)


def t_shapes_symbolic():
    nodes = [
        h.make_node("Shape", ["x"], ["s"], name="shape"),
        h.make_node("Gather", ["s", "i0"], ["b"], name="gather_batch", axis=0),
        h.make_node("Gather", ["s", "i1"], ["c"], name="gather_chan", axis=0),
        h.make_node("Concat", ["b", "c"], ["target"], name="concat", axis=0),
        h.make_node("Reshape", ["x", "target"], ["y"], name="reshape"),
    ]
    inits = [init("i0", np.array([0], np.int64)), init("i1", np.array([1], np.int64))]
    m = model(nodes, [vi("x", T.FLOAT, ["batch", 3])], [vi("y", T.FLOAT, ["batch", 3])], inits)
    case("shapes-symbolic", m, "fold-shapes", {"x": rnd(5, 3)}, present=["Shape", "Concat", "Reshape"],
         absent=[], rewrites=["gather_chan: Gather folded: 'c' = [3]"],
         rejects=["'batch', which is not fixed: use set-input-shape"])


# --------------------------------------------------------------------------
# fold-constants
# --------------------------------------------------------------------------


def t_const_chain():
    nodes = [
        h.make_node("Constant", [], ["two"], name="k2", value=h.make_tensor("v", T.FLOAT, [], [2.0])),
        h.make_node("Transpose", ["w"], ["wt"], name="wT", perm=[1, 0]),
        h.make_node("Mul", ["wt", "two"], ["w2"], name="scale"),
        h.make_node("MatMul", ["x", "w2"], ["y"], name="mm"),
    ]
    m = model(nodes, [vi("x", T.FLOAT, [2, 4])], [vi("y", T.FLOAT, [2, 3])], [init("w", rnd(3, 4))])

    def more(rep, nodes, texts):
        mm = [n for n in nodes if n["op"] == "MatMul"]
        check("const-chain: MatMul reads the folded 'w2'", len(mm) == 1 and mm[0]["inputs"] == ["x", "w2"], f"{mm}")
    case("const-chain", m, "fold-constants", {"x": rnd(2, 4)}, ops={"MatMul": 1}, outputs=["y"],
         rewrites=["k2: Constant now the initializer 'two'", "wT: Transpose folded into 'wt' float32[4,3]",
                   "scale: Mul folded into 'w2'"], extra=more)


def t_const_reject():
    nodes = [
        h.make_node("Tile", ["c", "reps"], ["big"], name="tile"),
        h.make_node("ReduceSum", ["big"], ["bs"], name="rsum", keepdims=0),
        h.make_node("Neg", ["wdef"], ["wn"], name="neg_default"),
        h.make_node("RandomNormal", [], ["noise"], name="rand", shape=[2], dtype=T.FLOAT),
        h.make_node("Mul", ["noise", "zero"], ["nz"], name="mul_noise"),
        h.make_node("Add", ["x", "wn"], ["a"], name="add1"),
        h.make_node("Add", ["a", "bs"], ["b"], name="add2"),
        h.make_node("Add", ["b", "nz"], ["y"], name="add3"),
    ]
    inits = [init("c", rnd(2, 2)), init("reps", np.array([8, 8], np.int64)), init("wdef", rnd(2)),
             init("zero", np.zeros(2, np.float32))]
    m = model(nodes, [vi("x", T.FLOAT, [2]), vi("wdef", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])], inits)
    case("const-reject", m, "fold-constants max-bytes=512", {"x": rnd(2)},
         present=["Tile", "Neg", "RandomNormal"],
         rejects=["tile: its output 'big' would take 1.0 KiB, more than max-bytes=512",
                  "neg_default: its input 'wdef' is an initializer listed as a graph input",
                  "rand: RandomNormal is random"], numbers=False)
    # the same model with the default max-bytes folds the Tile (and the ReduceSum after it)
    case("const-maxbytes-default", m, "fold-constants", {"x": rnd(2)}, absent=["Tile", "ReduceSum"],
         rewrites=["tile: Tile folded into 'big' float32[16,16]"], numbers=False)


def t_const_output():
    nodes = [
        h.make_node("Constant", [], ["k"], name="k", value=h.make_tensor("v", T.FLOAT, [2], [1.0, -2.0])),
        h.make_node("Neg", ["k"], ["y"], name="neg"),
        h.make_node("Add", ["x", "k"], ["z"], name="add"),
    ]
    m = model(nodes, [vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, [2]), vi("z", T.FLOAT, [2])])
    case("const-output", m, "fold-constants", {"x": rnd(2)}, ops={"Constant": 1, "Add": 1}, outputs=["y", "z"],
         rewrites=["neg: Neg folded into 'y' float32[2]", "as a Constant node (a graph output)"])
    case("const-keep-constants", m, "fold-constants constants-to-initializers=off", {"x": rnd(2)},
         ops={"Constant": 2, "Add": 1}, outputs=["y", "z"])


def t_const_ir3():
    # IR version 3: every initializer must be a graph input, so results stay Constant nodes
    nodes = [
        h.make_node("Constant", [], ["k"], name="k", value=h.make_tensor("v", T.FLOAT, [2], [1.0, -2.0])),
        h.make_node("Neg", ["k"], ["nk"], name="neg"),
        h.make_node("Add", ["x", "nk"], ["y"], name="add"),
    ]
    g = h.make_graph(nodes, "g", [vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 8)])
    m.ir_version = 3
    onnx.checker.check_model(m)
    case("const-ir3", m, "fold-constants", {"x": rnd(2)}, ops={"Constant": 1, "Add": 1}, outputs=["y"],
         rewrites=["neg: Neg folded into 'nk' float32[2] (8 bytes) as a Constant node"])


# --------------------------------------------------------------------------
# cse
# --------------------------------------------------------------------------


def t_cse():
    w = rnd(4)
    nodes = [
        h.make_node("Relu", ["x"], ["r1"], name="relu1"),
        h.make_node("Relu", ["x"], ["r2"], name="relu2"),
        h.make_node("Mul", ["r1", "w1"], ["m1"], name="mul1"),
        h.make_node("Mul", ["r2", "w2"], ["m2"], name="mul2"),
        h.make_node("Transpose", ["x2"], ["t1"], name="tr1", perm=[1, 0]),
        h.make_node("Transpose", ["x2"], ["t2"], name="tr2", perm=[1, 0]),
        h.make_node("Transpose", ["x2"], ["t3"], name="tr3", perm=[0, 1]),
        h.make_node("Add", ["m1", "m2"], ["y"], name="add"),
        h.make_node("Concat", ["t1", "t2", "t3"], ["z"], name="cat", axis=0),
    ]
    m = model(nodes, [vi("x", T.FLOAT, [4]), vi("x2", T.FLOAT, [3, 3])], [vi("y", T.FLOAT, [4]), vi("z", T.FLOAT, [9, 3])],
              [init("w1", w), init("w2", w.copy()), init("w3", rnd(4))])

    def more(rep, nodes, texts):
        add = [n for n in nodes if n["op"] == "Add"]
        check("cse: Add reads one Mul twice", len(add) == 1 and add[0]["inputs"] == ["m1", "m1"], f"{add}")
    case("cse", m, "cse", {"x": rnd(4), "x2": rnd(3, 3)}, ops={"Relu": 1, "Mul": 1, "Transpose": 2, "Add": 1, "Concat": 1},
         rewrites=["initializer 'w2' holds the same float32[4] as 'w1'", "relu2: Relu with the same attributes and inputs as 'relu1'",
                   "mul2: Mul", "tr2: Transpose"], extra=more)


def t_cse_reject():
    nodes = [
        h.make_node("RandomUniformLike", ["x"], ["u1"], name="rand1"),
        h.make_node("RandomUniformLike", ["x"], ["u2"], name="rand2"),
        h.make_node("Sub", ["u1", "u2"], ["d"], name="sub"),
        h.make_node("Mul", ["d", "zero"], ["dz"], name="mul"),
        h.make_node("Neg", ["x"], ["y"], name="neg1"),
        h.make_node("Neg", ["x"], ["z"], name="neg2"),
        h.make_node("Add", ["z", "dz"], ["w"], name="add"),
    ]
    m = model(nodes, [vi("x", T.FLOAT, [3])], [vi("y", T.FLOAT, [3]), vi("z", T.FLOAT, [3]), vi("w", T.FLOAT, [3])],
              [init("zero", np.zeros(3, np.float32))])
    case("cse-reject", m, "cse", {"x": rnd(3)}, rewritten=0, ops={"RandomUniformLike": 2, "Sub": 1, "Mul": 1, "Neg": 2, "Add": 1},
         rejects=["rand2: computes the same as 'rand1', but RandomUniformLike is random",
                  "neg2: computes the same as 'neg1', but its output 'z' is a graph output"], numbers=False)


# --------------------------------------------------------------------------
# prune-initializers
# --------------------------------------------------------------------------


def t_prune():
    nodes = [h.make_node("Add", ["x", "b"], ["y"], name="add")]
    m = model(nodes, [vi("x", T.FLOAT, [4]), vi("dflt", T.FLOAT, [4])], [vi("y", T.FLOAT, [4])],
              [init("b", rnd(4)), init("unused", rnd(100)), init("dflt", rnd(4))])

    def more(rep, nodes, texts):
        inits = [i.name for i in onnx.load(os.path.join(common.TMP, "prune", "out.onnx")).graph.initializer]
        check("prune: initializers left are b and dflt", sorted(inits) == ["b", "dflt"], f"{inits}")
        check("prune: the note says how many bytes went",
              any("removed 1 initializer, 400 bytes" in mm["text"] for mm in rep["messages"]), f"{texts}")
    case("prune", m, "prune-initializers", {"x": rnd(4)}, ops={"Add": 1},
         rewrites=["removed initializer 'unused' (float32[100], 400 bytes): nothing reads it"],
         rejects=["initializer 'dflt' (float32[4]) is unread but it is a graph input"], extra=more)


# --------------------------------------------------------------------------
# all of them: a pipeline, and linear time on a long chain
# --------------------------------------------------------------------------


def t_pipeline():
    # fold-constants, then cse, then eliminate-nops, then prune: the numbers stay the same at every stage
    nodes = [
        h.make_node("Shape", ["x"], ["s"], name="shape"),
        h.make_node("Reshape", ["x", "s"], ["xr"], name="reshape_same"),
        h.make_node("Transpose", ["w"], ["wt"], name="wT", perm=[1, 0]),
        h.make_node("MatMul", ["xr", "wt"], ["a"], name="mm1"),
        h.make_node("MatMul", ["xr", "wt"], ["b"], name="mm2"),
        h.make_node("Add", ["a", "b"], ["y"], name="add"),
    ]
    m = model(nodes, [vi("x", T.FLOAT, [2, 4])], [vi("y", T.FLOAT, [2, 3])], [init("w", rnd(3, 4)), init("junk", rnd(5))])
    if common.FILTER and common.FILTER not in "pipeline":
        return
    d = os.path.join(common.TMP, "pipeline")
    os.makedirs(d, exist_ok=True)
    src, out, inz, ref = (os.path.join(d, f) for f in ("model.onnx", "out.onnx", "in.npz", "ref.npz"))
    onnx.save(m, src)
    np.savez(inz, x=rnd(2, 4))
    rc, _, se = ogsh(src, f"run --inputs={inz} --save-outputs={ref}")
    check("pipeline: original runs", rc == 0, se[-300:])
    script = "; ".join(f"apply {p}; run --inputs={inz} --expect={ref} --rtol=1e-4 --atol=1e-5"
                       for p in ("fold-shapes", "fold-constants", "cse", "eliminate-nops", "dce", "prune-initializers"))
    rc, so, se = ogsh(src, f"{script}; ops --json; save {out}")
    check("pipeline: every stage gives the same outputs", rc == 0, (so + se)[-600:])
    i = so.rfind("\n[")
    ops = json.loads(so[i + 1:so.index("]", so.rindex('"function"')) + 1]) if i >= 0 else []
    check("pipeline: one MatMul and one Add left", sorted(o["op"] for o in ops) == ["Add", "MatMul"], f"{ops}")
    inits = [t.name for t in onnx.load(out).graph.initializer]
    check("pipeline: only the folded weight is left", inits == ["wt"], f"{inits}")
    rc, so, se = ogsh(src, "optimize --level=basic; ops --json")
    check("pipeline: optimize --level=basic runs", rc == 0, (so + se)[-300:])


def chain_model(n, kind):
    """A long chain for timing. kind: nops (Identity/Relu), cse (two equal chains), const (a constant chain)."""
    nodes, inits = [], []
    if kind == "nops":
        prev = "x"
        for i in range(n):
            op = "Identity" if i % 2 else "Relu"
            nodes.append(h.make_node(op, [prev], [f"v{i}"]))
            prev = f"v{i}"
        nodes.append(h.make_node("Identity", [prev], ["y"]))
    elif kind == "cse":
        for c in "ab":
            prev = "x"
            for i in range(n // 2):
                nodes.append(h.make_node("Relu" if i % 2 else "Neg", [prev], [f"{c}{i}"]))
                prev = f"{c}{i}"
        nodes.append(h.make_node("Add", [f"a{n // 2 - 1}", f"b{n // 2 - 1}"], ["y"]))
    elif kind == "const":
        prev = "w"
        inits.append(init("w", np.ones(2, np.float32)))
        for i in range(n):
            nodes.append(h.make_node("Neg", [prev], [f"c{i}"]))
            prev = f"c{i}"
        nodes.append(h.make_node("Add", ["x", prev], ["y"]))
    elif kind == "inits":
        # a chain of Adds, each with its own copy of one constant (cse merges them), and as many unread
        # initializers (prune-initializers removes them)
        prev = "x"
        one = np.ones(2, np.float32).tobytes()
        for i in range(n // 2):
            inits.append(h.make_tensor(f"k{i}", T.FLOAT, [2], one, raw=True))
            inits.append(h.make_tensor(f"u{i}", T.FLOAT, [2], one, raw=True))
            nodes.append(h.make_node("Add", [prev, f"k{i}"], [f"a{i}"]))
            prev = f"a{i}"
        nodes.append(h.make_node("Identity", [prev], ["y"]))
    elif kind == "shape":
        prev = "x"
        for i in range(n):
            nodes.append(h.make_node("Shape", [prev], [f"s{i}"]))
            nodes.append(h.make_node("Reshape", [prev, f"s{i}"], [f"r{i}"]))
            prev = f"r{i}"
        nodes.append(h.make_node("Identity", [prev], ["y"]))
    g = h.make_graph(nodes, "chain", [vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])], initializer=inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def t_linear():
    """Each pass on a 200,000-node chain and on one a quarter that size: it runs. The times are printed for
    information only (timing goals live in bench/passes_bench.py, not in tests)."""
    if common.FILTER and common.FILTER not in "linear":
        return
    big = int(os.environ.get("CLEANUP_CHAIN", "200000"))
    for p, kind in (("eliminate-nops", "nops"), ("cse", "cse"), ("cse", "inits"), ("fold-constants", "const"),
                    ("fold-shapes", "shape"), ("prune-initializers", "inits")):
        times = {}
        for n in (big // 4, big):
            path = os.path.join(common.TMP, f"chain-{kind}-{n}.onnx")
            if not os.path.exists(path):
                onnx.save(chain_model(n, kind), path)
            t0 = time.time()
            rc, so, se = ogsh(path, "nodes --op=Abs")   # load only
            t1 = time.time()
            rc, so, se = ogsh(path, f"apply {p} --json")
            t2 = time.time()
            if not check(f"linear: {p} on {n} nodes ({kind}) runs", rc == 0, se[-300:]):
                break
            times[n] = max((t2 - t1) - (t1 - t0), 0.0)
        if len(times) == 2:
            print(f"info  {p} ({kind}): {big // 4} nodes {times[big // 4]:.2f}s, {big} nodes {times[big]:.2f}s")


def t_explain():
    if common.FILTER and common.FILTER not in "explain":
        return
    for p in ("eliminate-nops", "fold-shapes", "fold-constants", "cse", "prune-initializers"):
        p2 = subprocess.run([common.OGSH, "-c", f"explain {p}"], capture_output=True, text=True)
        check(f"explain {p}: has a text", p2.returncode == 0 and len(p2.stdout) > 300 and "being written" not in p2.stdout,
              (p2.stdout + p2.stderr)[-300:])


def main():
    return common.main(__doc__, "ogsh-cleanup-", (
        t_nops_chain, t_nops_transposes, t_nops_shapes, t_nops_reject, t_nops_graph_output_twice, t_shapes_fixed,
        t_shapes_symbolic, t_const_chain, t_const_reject, t_const_output, t_const_ir3, t_cse, t_cse_reject, t_prune,
        t_pipeline, t_explain, t_linear))


if __name__ == "__main__":
    sys.exit(main())
