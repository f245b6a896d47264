#!/usr/bin/env python3
"""Tests of fuse-qkv and of FusedAttention reading Q, K and V packed.

    test_fuse_qkv.py OGSH

Builds models with onnx.helper in the node patterns the exporters write
(E=64, H=4, S=10, dynamic batch): BERT's three MatMul + Add projections
(float32 and float16), GPT-2's packed projection and Split (and three
Slices), torch nn.MultiheadAttention's sequence-first chain (Transpose, packed
in_proj, Reshape/Unsqueeze/Transpose/Squeeze/Gather, heads Reshape/Transpose,
output Transpose, out_proj Gemm, Reshape, Transpose), and one model per
rejection reason. For each it checks (1) what `apply fuse-attention; apply
fuse-qkv` rewrote (op counts of the saved model: no Split, Gather, Slice or
Transpose left around the attention), (2) `run --check=stage 0` on the CPU at
batch 1 and 3 (rtol 1e-4), (3) that the saved model passes onnx.checker and
onnxruntime gives the outputs of the original, (4) each rejection's reason.
Also runs the tiny ViT, BERT and GPT-2 exported by torch (both exporters;
tests/models/exported/, made by tests/models/export_tiny_transformers.py)
through `optimize` and checks the node counts and numbers. Prints one line
per check and exits non-zero on any failure.
"""
import collections
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_fuse_transformer as T  # noqa: E402

E, H, D, S = 64, 4, 16, 10
EXPORTED = os.path.join(HERE, "..", "models", "exported")
# what fuse-attention does not fuse today (so fuse-qkv has nothing to pack), and why
UNFUSED = {("bert", "ts"): "the heads Reshapes' shapes are computed from Shape at run time",
           ("gpt2", "ts"): "the heads Reshapes' shapes are computed from Shape at run time"}


def w(name, shape, dt, seed):
    rng = np.random.default_rng(seed)
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(dt), name)


def ints(name, v):
    return numpy_helper.from_array(np.array(v, dtype=np.int64), name)


def attention_core(q4, k4, v4, y, mask=None, p="a"):
    """Scores, scale, mask, softmax, weights x V on [B, H, S, D] inputs (BERT's form: K^T by Transpose)."""
    nodes = [helper.make_node("Transpose", [k4], [p + "kt"], perm=[0, 1, 3, 2], name=p + "/kt"),
             helper.make_node("MatMul", [q4, p + "kt"], [p + "s"], name=p + "/qk"),
             helper.make_node("Div", [p + "s", "sqrt_d"], [p + "sd"], name=p + "/div")]
    last = p + "sd"
    if mask:
        nodes.append(helper.make_node("Add", [last, mask], [p + "sm"], name=p + "/mask"))
        last = p + "sm"
    nodes += [helper.make_node("Softmax", [last], [p + "pr"], axis=-1, name=p + "/softmax"),
              helper.make_node("MatMul", [p + "pr", v4], [y], name=p + "/pv")]
    return nodes


def bshd_to_bhsd(x, y, p):
    return [helper.make_node("Reshape", [x, "shape_bshd"], [p + "_4"], name=p + "/reshape"),
            helper.make_node("Transpose", [p + "_4"], [y], perm=[0, 2, 1, 3], name=p + "/tr")]


def tail(yatt, y, dt, p="o"):
    """[B, H, S, D] -> [B, S, E] -> out projection."""
    return [helper.make_node("Transpose", [yatt], [p + "t"], perm=[0, 2, 1, 3], name=p + "/tr"),
            helper.make_node("Reshape", [p + "t", "shape_bse"], [p + "r"], name=p + "/reshape"),
            helper.make_node("MatMul", [p + "r", "wo"], [y], name=p + "/proj")]


def common_inits(dt):
    return [ints("shape_bshd", [0, 0, H, D]), ints("shape_bse", [0, 0, E]),
            numpy_helper.from_array(np.array(np.sqrt(D), dtype=dt), "sqrt_d"), w("wo", [E, E], dt, 9)]


def save(name, nodes, inits, dt=TensorProto.FLOAT, extra_inputs=()):
    x = helper.make_tensor_value_info("x", dt, ["batch", S, E])
    y = helper.make_tensor_value_info("y", dt, ["batch", S, E])
    return T.save_model(name, nodes, [x] + list(extra_inputs), [y], inits)


def bert_model(name, dt=np.float32, variant=""):
    """Three MatMul + Add projections of x, each Reshape + Transpose to [B, H, S, D] (BERT)."""
    tdt = TensorProto.FLOAT16 if dt == np.float16 else TensorProto.FLOAT
    nodes, inits = [], common_inits(dt)
    for i, n in enumerate("qkv"):
        src = "x2" if variant == "other-input" and n == "k" else "x"
        wname = "w_" + n
        nodes += [helper.make_node("MatMul", [src, wname], [n + "_mm"], name=n + "/MatMul"),
                  helper.make_node("Add", [n + "_mm", "b_" + n], [n + "_p"], name=n + "/Add")]
        if variant == "k-no-bias" and n == "k":
            nodes[-1] = helper.make_node("MatMul", ["x", wname], [n + "_p"], name=n + "/MatMul")
            nodes.pop(-2)
        if variant == "input-k-bias" and n == "k":
            nodes[-1] = helper.make_node("Add", [n + "_mm", "bk_in"], [n + "_p"], name=n + "/Add")
        if variant == "weights-input" and n == "v":
            pass
        else:
            inits.append(w(wname, [E, E], dt, i))
        inits.append(w("b_" + n, [E], dt, 10 + i))
        if variant == "bad-reshape" and n == "q":   # [B, S, D, H]: the heads are the fast axis
            nodes += [helper.make_node("Reshape", [n + "_p", "shape_bad"], [n + "_4"], name=n + "/Reshape"),
                      helper.make_node("Transpose", [n + "_4"], [n], perm=[0, 3, 1, 2], name=n + "/tr")]
        elif variant == "shape-readers":   # the heads shape from Shape(projection): [dim 0, dim 1, H, D]
            nodes += [helper.make_node("Shape", [n + "_p"], [n + "_sh"], name=n + "/Shape"),
                      helper.make_node("Gather", [n + "_sh", "i0"], [n + "_d0"], axis=0, name=n + "/Gather0"),
                      helper.make_node("Gather", [n + "_sh", "i1"], [n + "_d1"], axis=0, name=n + "/Gather1"),
                      helper.make_node("Unsqueeze", [n + "_d0", "ax0"], [n + "_u0"], name=n + "/Unsqueeze0"),
                      helper.make_node("Unsqueeze", [n + "_d1", "ax0"], [n + "_u1"], name=n + "/Unsqueeze1"),
                      helper.make_node("Concat", [n + "_u0", n + "_u1", "hd"], [n + "_shape"], axis=0,
                                       name=n + "/Concat"),
                      helper.make_node("Reshape", [n + "_p", n + "_shape"], [n + "_4"], name=n + "/Reshape"),
                      helper.make_node("Transpose", [n + "_4"], [n], perm=[0, 2, 1, 3], name=n + "/tr")]
        else:
            nodes += [helper.make_node("Reshape", [n + "_p", "shape_bshd"], [n + "_4"], name=n + "/Reshape"),
                      helper.make_node("Transpose", [n + "_4"], [n], perm=[0, 2, 1, 3], name=n + "/tr")]
    inits += [ints("shape_bad", [0, 0, D, H]), ints("i0", 0), ints("i1", 1), ints("ax0", [0]), ints("hd", [H, D])]
    nodes += attention_core("q", "k", "v", "att", mask="mask")
    nodes += tail("att", "y", dt)
    ins = [helper.make_tensor_value_info("mask", tdt, ["batch", 1, 1, S])]
    if variant == "other-input":
        ins.append(helper.make_tensor_value_info("x2", tdt, ["batch", S, E]))
    if variant == "weights-input":
        ins.append(helper.make_tensor_value_info("w_v", tdt, [E, E]))
    if variant == "input-k-bias":
        ins.append(helper.make_tensor_value_info("bk_in", tdt, [E]))
    if variant == "extra-reader":   # the q projection's output is also a graph output
        x = helper.make_tensor_value_info("x", tdt, ["batch", S, E])
        outs = [helper.make_tensor_value_info("y", tdt, ["batch", S, E]), helper.make_tensor_value_info("q_p", tdt, None)]
        return T.save_model(name, nodes, [x] + ins, outs, inits)
    return save(name, nodes, inits, tdt, ins)


def gpt2_model(name, form="split", variant=""):
    """One packed projection [B, S, 3E], then Split (or three Slices) into Q, K, V (GPT-2)."""
    nodes = [helper.make_node("MatMul", ["x", "w_qkv"], ["mm"], name="c_attn/MatMul"),
             helper.make_node("Add", ["mm", "b_qkv"], ["qkv"], name="c_attn/Add")]
    inits = common_inits(np.float32) + [w("w_qkv", [E, 3 * E], np.float32, 1), w("b_qkv", [3 * E], np.float32, 2),
                                        ints("split", [E, E, E]), ints("ax", [2])]
    order = ["q0", "k0", "v0"] if variant != "swapped" else ["k0", "q0", "v0"]
    if variant == "four":   # a projection of 4 parts, of which attention reads 3
        inits[-4:-2] = [w("w_qkv", [E, 4 * E], np.float32, 1), w("b_qkv", [4 * E], np.float32, 2)]
        inits[-2] = ints("split", [E, E, E, E])
        nodes.append(helper.make_node("Split", ["qkv", "split"], order + ["extra"], axis=2, name="split"))
    elif form == "split":
        nodes.append(helper.make_node("Split", ["qkv", "split"], order, axis=2, name="split"))
    else:
        for i, n in enumerate(order):
            inits += [ints(f"st{i}", [i * E]), ints(f"en{i}", [(i + 1) * E])]
            nodes.append(helper.make_node("Slice", ["qkv", f"st{i}", f"en{i}", "ax"], [n], name=f"slice{i}"))
    for n in "qkv":
        nodes += bshd_to_bhsd(n + "0", n, n)
    nodes += attention_core("q", "k", "v", "att")
    nodes += tail("att", "y", np.float32)
    return save(name, nodes, inits)


def mha_model(name, variant=""):
    """torch nn.MultiheadAttention (batch_first) as F.multi_head_attention_forward exports it, sequence-first."""
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2], name="mha/tr_in"),
             helper.make_node("MatMul", ["xt", "in_w"], ["in_mm"], name="mha/in_proj"),
             helper.make_node("Add", ["in_mm", "in_b"], ["in_p"], name="mha/in_bias"),
             helper.make_node("Reshape", ["in_p", "shape_sb3e"], ["p5"], name="mha/unflatten"),
             helper.make_node("Unsqueeze", ["p5", "ax0"], ["p6"], name="mha/unsqueeze"),
             helper.make_node("Transpose", ["p6"], ["p7"], perm=[3, 1, 2, 0, 4], name="mha/tr3"),
             helper.make_node("Squeeze", ["p7", "ax3"], ["p8"], name="mha/squeeze")]
    idx = [0, 1, 2] if variant != "swapped" else [1, 0, 2]
    for i, n in enumerate("qkv"):
        nodes += [helper.make_node("Gather", ["p8", f"i{idx[i]}"], [n + "g"], axis=0, name=n + "/gather"),
                  helper.make_node("Reshape", [n + "g", "shape_heads" if not (variant == "bad-heads" and n == "q")
                                               else "shape_heads_bad"], [n + "h"], name=n + "/heads"),
                  helper.make_node("Transpose", [n + "h"], [n + "t"], perm=[1, 0, 2], name=n + "/tr"),
                  helper.make_node("Reshape", [n + "t", "shape_bhsd"], [n], name=n + "/bhsd")]
    nodes += attention_core("q", "k", "v", "att")
    nodes += [helper.make_node("Transpose", ["att"], ["att_t"], perm=[2, 0, 1, 3], name="mha/tr_out"),
              helper.make_node("Reshape", ["att_t", "shape_rows"], ["rows"], name="mha/rows"),
              helper.make_node("Gemm", ["rows", "out_w", "out_b"], ["o"], transB=1, name="mha/out_proj"),
              helper.make_node("Reshape", ["o", "shape_sbe"], ["o3"], name="mha/o3"),
              helper.make_node("Transpose", ["o3"], ["ot"], perm=[1, 0, 2], name="mha/tr_back"),
              helper.make_node("Add", ["ot", "x"], ["y"], name="residual")]
    inits = [ints("shape_sb3e", [S, -1, 3, E]), ints("ax0", [0]), ints("ax3", [3]),
             ints("shape_heads", [S, -1, D]), ints("shape_heads_bad", [S, -1, 8]), ints("shape_bhsd", [-1, H, S, D]),
             ints("shape_rows", [-1, E]), ints("shape_sbe", [S, -1, E]),
             numpy_helper.from_array(np.array(np.sqrt(D), dtype=np.float32), "sqrt_d"),
             w("in_w", [E, 3 * E], np.float32, 1), w("in_b", [3 * E], np.float32, 2),
             w("out_w", [E, E], np.float32, 3), w("out_b", [E], np.float32, 4)]
    inits += [ints(f"i{i}", i) for i in range(3)]
    return save(name, nodes, inits)


def inputs_model(name, shapes, same=False):
    """Attention straight on graph inputs: q, k, v of the given shapes (same: one input x4 as all three)."""
    names = ["x4", "x4", "x4"] if same else ["q", "k", "v"]
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, sh) for n, sh in zip(names, shapes)]
    ins = ins[:1] if same else ins
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = attention_core(*names, "y")
    inits = [numpy_helper.from_array(np.array(np.sqrt(D), dtype=np.float32), "sqrt_d")]
    return T.save_model(name, nodes, ins, [out], inits)


def counts(path):
    return collections.Counter(n.op_type for n in onnx.load(path).graph.node)


def apply(name, path, passes, want, gone, dt=np.float32, want_text=()):
    """Applies passes, checks counts, the CPU check against stage 0 at batch 1 and 3, the checker and onnxruntime."""
    out = os.path.join(T.TMP, name + "_out.onnx")
    script = "; ".join(f"apply {p}" for p in passes)
    tol = "--rtol=1e-2 --atol=1e-2" if dt == np.float16 else "--rtol=1e-4 --atol=1e-5"
    script += f"; run --device=cpu --check=stage 0 --shape=batch=1 {tol}"
    script += f"; run --device=cpu --check=stage 0 --shape=batch=3 {tol}; save {out}"
    rc, text = T.ogsh(path, script)
    T.check(rc == 0, f"{name}: apply {', '.join(passes)}; run --check=stage 0 at batch 1 and 3", text[-2500:])
    for t in want_text:
        T.check(t in text, f"{name}: report says '{t}'", text[-2500:])
    if not os.path.exists(out):
        T.check(False, f"{name}: saved model exists")
        return text
    c = counts(out)
    for op, n in want.items():
        T.check(c.get(op, 0) == n, f"{name}: {n} {op} node(s) after", dict(c))
    for op in gone:
        T.check(c.get(op, 0) == 0, f"{name}: no {op} left", dict(c))
    try:
        onnx.checker.check_model(onnx.load(out), full_check=True)
        T.check(True, f"{name}: onnx.checker accepts the saved model")
    except Exception as e:  # noqa: BLE001
        T.check(False, f"{name}: onnx.checker accepts the saved model", str(e)[:500])
    m = onnx.load(path)
    rng = np.random.default_rng(1)
    for b in (1, 3):
        feeds = {}
        for i in m.graph.input:
            shp = [b if d.dim_param == "batch" else d.dim_value for d in i.type.tensor_type.shape.dim]
            et = np.float16 if i.type.tensor_type.elem_type == TensorProto.FLOAT16 else np.float32
            feeds[i.name] = rng.standard_normal(shp).astype(et)
        try:
            a, o = T.ort_run(path, feeds), T.ort_run(out, feeds)
            tol = 1e-2 if dt == np.float16 else 1e-4
            ok = all(x.shape == y.shape and np.allclose(y, x, rtol=tol, atol=tol) for x, y in zip(a, o))
            T.check(ok, f"{name}: onnxruntime agrees at batch {b}",
                    f"max diff {max(float(np.max(np.abs(x.astype(np.float64) - y))) for x, y in zip(a, o))}")
        except Exception as e:  # noqa: BLE001
            T.check(False, f"{name}: onnxruntime runs both models at batch {b}", str(e)[:500])
    return text


def reject(name, path, reason):
    rc, text = T.ogsh(path, "apply fuse-attention; apply fuse-qkv")
    T.check(rc == 0 and reason in text, f"{name}: fuse-qkv rejects with '{reason}'", text[-2000:])


def test_handmade():
    fa = ["fuse-attention", "fuse-qkv"]
    apply("bert", bert_model("bert"), fa, {"FusedAttention": 1, "MatMul": 2, "Add": 1},
          ["Transpose"], want_text=["3 projections of 'x' (MatMul) merged into one"])
    apply("bert_shapes", bert_model("bert_shapes", variant="shape-readers"), fa,
          {"FusedAttention": 1, "MatMul": 2, "Add": 1}, ["Transpose"],
          want_text=["3 projections of 'x' (MatMul) merged into one"])
    apply("bert_f16", bert_model("bert_f16", np.float16), fa, {"FusedAttention": 1, "MatMul": 2, "Add": 1},
          ["Transpose"], dt=np.float16)
    apply("gpt2_split", gpt2_model("gpt2_split"), fa, {"FusedAttention": 1, "MatMul": 2},
          ["Split", "Transpose"], want_text=["layout BS3HD"])
    apply("gpt2_slice", gpt2_model("gpt2_slice", "slice"), fa, {"FusedAttention": 1, "MatMul": 2},
          ["Slice", "Transpose"], want_text=["layout BS3HD"])
    apply("mha", mha_model("mha"), fa, {"FusedAttention": 1, "MatMul": 1, "Gemm": 1},
          ["Transpose", "Gather", "Squeeze", "Unsqueeze"],
          want_text=["layout BS3HD", "the projection reads the input directly",
                     "the attention writes the order the output wants"])
    # convert-fp16 after packing: the packed attention and its function in float16
    apply("mha_fp16", mha_model("mha_fp16"), fa + ["convert-fp16"], {"FusedAttention": 1}, ["Gather", "Squeeze"],
          dt=np.float16)
    # the rejections
    reject("other input", bert_model("bert_other", variant="other-input"), "q and k read different inputs")
    reject("weights input", bert_model("bert_winput", variant="weights-input"), "weights are not constant")
    reject("bad reshape", bert_model("bert_bad", variant="bad-reshape"), "a reshape splits heads differently")
    reject("swapped split", gpt2_model("gpt2_swapped", variant="swapped"), "q is part 1 (K)")
    reject("swapped gather", mha_model("mha_swapped", variant="swapped"), "q is part 1 (K)")
    reject("no k bias", bert_model("bert_kbias", variant="input-k-bias"), "k's projection 'k_p' is not MatMul + a constant bias")
    reject("four parts", gpt2_model("gpt2_four", variant="four"), "is not 3 x 4 heads x 16")
    reject("k without bias", bert_model("bert_knobias", variant="k-no-bias"),
           "the projections of q and k are not of one form")
    reject("extra reader", bert_model("bert_extra", variant="extra-reader"), "q's projection output is read by more than")
    reject("one tensor", inputs_model("one", [["batch", H, S, D]] * 3, same=True), "q, k and v are one tensor")
    reject("symbolic heads", inputs_model("symheads", [["batch", "h", S, D]] * 3), "heads and head size of Q are not known")
    reject("cross attention", inputs_model("cross", [["batch", H, S, D], ["batch", H, 12, D], ["batch", H, 12, D]]),
           "cannot tell that Q, K and V have one shape")
    reject("no projection", inputs_model("noproj", [["batch", H, S, D]] * 3), "q ('q') does not come from a MatMul or Gemm")


def test_exported():
    for name in ("vit", "bert", "gpt2"):
        for exp in ("dynamo", "ts"):
            path = os.path.join(EXPORTED, f"{name}_{exp}.onnx")
            if not os.path.exists(path):
                T.check(False, f"{name}_{exp}: exported model exists", path)
                continue
            before = counts(path)
            out = os.path.join(T.TMP, f"{name}_{exp}_opt.onnx")
            rc, text = T.ogsh(path, f"optimize --quiet; run --device=cpu --check=stage 0 --shape=batch=1 "
                                    f"--rtol=1e-4 --atol=1e-5; run --device=cpu --check=stage 0 --shape=batch=3 "
                                    f"--rtol=1e-4 --atol=1e-5; save {out}")
            T.check(rc == 0, f"{name}_{exp}: optimize; run --check=stage 0 at batch 1 and 3", text[-2500:])
            if not os.path.exists(out):
                continue
            after = counts(out)
            print(f"      {name}_{exp}: {sum(before.values())} nodes -> {sum(after.values())}: {dict(after)}")
            if (name, exp) in UNFUSED:
                T.check(not after.get("FusedAttention"), f"{name}_{exp}: no attention fused ({UNFUSED[name, exp]})",
                        dict(after))
                continue
            T.check(after.get("FusedAttention", 0) == 2, f"{name}_{exp}: 2 FusedAttention", dict(after))
            m = onnx.load(out)
            prod = {o: n for n in m.graph.node for o in n.output}
            near = collections.Counter()
            for n in m.graph.node:
                if n.op_type != "FusedAttention":
                    continue
                T.check(len([i for i in n.input if i]) <= 2, f"{name}_{exp}: {n.name} reads Q, K, V packed",
                        str(list(n.input)))
                near.update(prod[i].op_type for i in n.input if i in prod)
                near.update(r.op_type for r in m.graph.node if n.output[0] in r.input)
            # the exporter's guard of rows masked everywhere (Where(IsNaN(p), 0, p)) went into the fused
            # node: it must still carry nan_to_zero=1 after fuse-qkv rebuilt it
            if before.get("IsNaN") and not after.get("IsNaN"):
                for n in m.graph.node:
                    if n.op_type == "FusedAttention":
                        nz = [a.i for a in n.attribute if a.name == "nan_to_zero"]
                        T.check(nz == [1], f"{name}_{exp}: {n.name} keeps nan_to_zero=1 (the IsNaN/Where guard)",
                                str(nz))
            copies = {op: k for op, k in near.items() if op in ("Transpose", "Gather", "Split", "Slice", "Squeeze")}
            T.check(not copies, f"{name}_{exp}: no Transpose, Gather, Split, Slice or Squeeze next to attention",
                    str(dict(near)))
            try:
                onnx.checker.check_model(onnx.load(out), full_check=True)
                T.check(True, f"{name}_{exp}: onnx.checker accepts the optimized model")
            except Exception as e:  # noqa: BLE001
                T.check(False, f"{name}_{exp}: onnx.checker accepts the optimized model", str(e)[:500])


def main():
    if len(sys.argv) < 2:
        print("usage: test_fuse_qkv.py OGSH", file=sys.stderr)
        return 2
    T.OGSH = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        T.TMP = tmp
        test_handmade()
        test_exported()
    print(f"{T.COUNT[0] - len(T.FAILS)} of {T.COUNT[0]} checks passed")
    return 1 if T.FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
