#!/usr/bin/env python3
"""Unit tests of the convert-fp16 and convert-bf16 passes.

usage: test_convert_float.py OGSH [-k SUBSTRING]

Each case builds a small model with onnx.helper in a temporary folder, runs
`ogsh MODEL -c 'apply convert-fp16 ... --json; nodes --json; save OUT'` and checks
  1. the structure: which nodes were kept float32 and why (the report), how
     many Casts there are (the fewest: a chain of converted ops gets two with
     keep-io), the dtypes in the saved model,
  2. that the saved model passes onnx.checker,
  3. that onnxruntime runs it and agrees with ogsh's CPU run of the float32
     stage (stage 0) within float16 tolerance (rtol 1e-2, atol 1e-2 of the
     output's largest |x|),
  4. that ogsh's own run of the converted stage agrees the same way.
onnxruntime's CPU provider lacks most bfloat16 kernels: the bfloat16 cases
check with ogsh's own run, and with onnxruntime only where it has the kernels.
The data-max rule needs calibration: tests/unit/test_convert_float.c checks it.
Prints one line per check; exits non-zero on any failure.
"""
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # common.py, next to this script
import common  # noqa: E402
from common import check, json_docs_lines, model, ogsh, ort, ort_outputs, vi  # noqa: E402


def init(name, arr, dtype=np.float32):
    return nh.from_array(np.asarray(arr, dtype), name)


RNG = np.random.default_rng(7)


def rnd(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def close(got, ref, rtol):
    got = np.asarray(got, np.float64)
    ref = np.asarray(ref, np.float64)
    if got.shape != ref.shape:
        return False, f"shape {got.shape} vs {ref.shape}"
    atol = rtol * float(np.max(np.abs(ref))) if ref.size else 0.0
    ok = bool(np.allclose(got, ref, rtol=rtol, atol=atol + 1e-6))
    return ok, f"max abs err {float(np.max(np.abs(got - ref))) if ref.size else 0:.3g}, atol {atol:.3g}"


def case(name, m, args, feeds, *, pass_name="convert-fp16", casts=None, kept=(), not_kept=(), notes=(),
         rewrites=(), rewritten=None, ops=None, io_dtype=T.FLOAT, numbers=True, use_ort=True, rtol=1e-2,
         pre="", extra=None):
    """Runs one case. casts: the number of Cast nodes after the pass; kept: substrings of the
    'rejected' messages (node: text); not_kept: node names that must not be kept; notes,
    rewrites: substrings of note/rewrote messages; io_dtype: the saved model's input and
    output element type (float16 with keep-io=off)."""
    if common.FILTER and common.FILTER not in name:
        return None
    d = os.path.join(common.TMP, name)
    os.makedirs(d, exist_ok=True)
    src = os.path.join(d, "model.onnx")
    out = os.path.join(d, "out.onnx")
    onnx.save(m, src)
    inz = os.path.join(d, "in.npz")
    np.savez(inz, **feeds)
    apply = f"{pre}apply {pass_name} {args}".strip()

    rc, so, se = ogsh(src, f"{apply} --json; nodes --json; save {out}")
    if not check(f"{name}: apply runs", rc == 0, (so + se).strip()[-600:]):
        return None
    docs = json_docs_lines(so)
    if not check(f"{name}: report and node list are JSON", len(docs) >= 2, so[:300]):
        return None
    rep, nodes = docs[-2], docs[-1]
    msgs = rep.get("messages", [])
    texts = [(mm["kind"], (mm.get("node") or "") + ": " + mm["text"]) for mm in msgs]
    counts = {}
    for n in nodes:
        counts[n["op"]] = counts.get(n["op"], 0) + 1

    # (1) structure
    if casts is not None:
        check(f"{name}: {casts} Casts", counts.get("Cast", 0) == casts,
              f"got {counts.get('Cast', 0)}: {[t for k, t in texts if 'Cast' in t]}")
    if ops is not None:
        check(f"{name}: ops {ops}", counts == ops, f"got {counts}")
    for sub in kept:
        check(f"{name}: kept float32 with '{sub}'", any(k == "rejected" and sub in t for k, t in texts), f"{texts}")
    for node in not_kept:
        check(f"{name}: {node} not kept", not any(k == "rejected" and t.startswith(node + ": ") for k, t in texts),
              f"{texts}")
    for sub in notes:
        check(f"{name}: note '{sub}'", any(k == "note" and sub in t for k, t in texts), f"{texts}")
    for sub in rewrites:
        check(f"{name}: rewrote '{sub}'", any(k == "rewrote" and sub in t for k, t in texts), f"{texts}")
    if rewritten is not None:
        check(f"{name}: {rewritten} rewritten", rep.get("rewritten") == rewritten, f"got {rep.get('rewritten')}")
    check(f"{name}: report counts add up", rep.get("matched") == rep.get("rewritten", 0) + rep.get("rejected", 0),
          json.dumps({k: rep.get(k) for k in ("matched", "rewritten", "rejected")}))

    # (2) the saved model
    if not check(f"{name}: saved", os.path.exists(out)):
        return None
    saved = onnx.load(out)
    try:
        onnx.checker.check_model(saved, full_check=True)
        check(f"{name}: saved model passes onnx.checker", True)
    except Exception as e:  # noqa: BLE001
        check(f"{name}: saved model passes onnx.checker", False, str(e)[:400])
    if io_dtype is not None:
        fl = (T.FLOAT, T.FLOAT16, T.BFLOAT16)
        ts = [v.type.tensor_type.elem_type for v in list(saved.graph.input) + list(saved.graph.output)
              if v.name not in {i.name for i in saved.graph.initializer} and v.type.tensor_type.elem_type in fl]
        check(f"{name}: inputs and outputs are {T.DataType.Name(io_dtype)}", all(t == io_dtype for t in ts), f"{ts}")
    if extra:
        extra(rep, nodes, texts, saved)

    if not numbers:
        return rep
    # the reference: ogsh's CPU run of the float32 model (stage 0)
    ref = os.path.join(d, "ref.npz")
    rc, so, se = ogsh(src, f"run --inputs={inz} --save-outputs={ref}")
    if not check(f"{name}: float32 model runs in ogsh", rc == 0, se.strip()[-300:]):
        return rep
    refs = dict(np.load(ref))
    # the converted model's inputs: float16/bfloat16 ones take the feeds rounded
    in_types = {v.name: v.type.tensor_type.elem_type for v in saved.graph.input}
    feeds2 = {}
    for k, a in feeds.items():
        feeds2[k] = a.astype(np.float16) if in_types.get(k) == T.FLOAT16 else a
    inz2 = os.path.join(d, "in2.npz")
    np.savez(inz2, **feeds2)

    # (3) onnxruntime on the saved model; use_ort="kernels": it may lack a kernel for the type
    # (bfloat16 on the CPU), which is then said and skipped; the graph must still load
    if use_ort and ort is not None:
        try:
            got = ort_outputs(out, feeds2)
            res = [close(got[k], refs[k], rtol) for k in refs]
            check(f"{name}: onnxruntime agrees with ogsh's float32 run (rtol {rtol})",
                  got.keys() == refs.keys() and all(r[0] for r in res), f"{[r[1] for r in res]}")
        except Exception as e:  # noqa: BLE001
            missing = "NOT_IMPLEMENTED" in str(e) and "Could not find an implementation" in str(e)
            if use_ort == "kernels" and missing:
                print(f"skip  {name}: onnxruntime's CPU provider has no kernel for it ({str(e)[-120:].strip()}); "
                      "ogsh's run checks the numbers")
            else:
                check(f"{name}: onnxruntime runs the saved model", False, str(e)[:400])

    # (4) ogsh's own run of the converted stage
    rc, so, se = ogsh(out, f"run --inputs={inz2} --save-outputs={os.path.join(d, 'got.npz')}")
    if check(f"{name}: converted model runs in ogsh", rc == 0, (so + se).strip()[-400:]):
        got = dict(np.load(os.path.join(d, "got.npz")))
        res = [close(got[k].astype(np.float32), refs[k], rtol) for k in refs]
        check(f"{name}: ogsh's run of the converted model agrees (rtol {rtol})",
              got.keys() == refs.keys() and all(r[0] for r in res), f"{[r[1] for r in res]}")
    return rep


# --------------------------------------------------------------------------
# models
# --------------------------------------------------------------------------


def cnn(opset=17):
    nodes = [
        h.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        h.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        h.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        h.make_node("Conv", ["p1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        h.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        h.make_node("GlobalAveragePool", ["r2"], ["g"], name="gap"),
        h.make_node("Flatten", ["g"], ["f"], name="flat"),
        h.make_node("Gemm", ["f", "wf", "bf"], ["y"], name="fc", transB=1),
    ]
    inits = [init("w1", rnd(8, 1, 3, 3, scale=0.3)), init("b1", rnd(8, scale=0.1)),
             init("w2", rnd(16, 8, 3, 3, scale=0.2)), init("b2", rnd(16, scale=0.1)),
             init("wf", rnd(10, 16, scale=0.3)), init("bf", rnd(10, scale=0.1))]
    return model(nodes, [vi("x", T.FLOAT, [2, 1, 8, 8])], [vi("y", T.FLOAT, [2, 10])], inits, opset=opset)


def transformer(opset=17):
    """LayerNormalization, attention (MatMul, Softmax), a residual, a decomposed LayerNorm
    (ReduceMean, Sub, Pow, ReduceMean, Add eps, Sqrt, Div) and an MLP."""
    B, S, D, H = 2, 8, 32, 4
    hd = D // H
    nodes = [
        h.make_node("LayerNormalization", ["x", "ln_s", "ln_b"], ["ln"], name="ln1", axis=-1, epsilon=1e-5),
        h.make_node("MatMul", ["ln", "wq"], ["q"], name="mm_q"),
        h.make_node("MatMul", ["ln", "wk"], ["k"], name="mm_k"),
        h.make_node("MatMul", ["ln", "wv"], ["v"], name="mm_v"),
        h.make_node("Reshape", ["q", "heads"], ["q4"], name="rq"),
        h.make_node("Reshape", ["k", "heads"], ["k4"], name="rk"),
        h.make_node("Reshape", ["v", "heads"], ["v4"], name="rv"),
        h.make_node("Transpose", ["q4"], ["qt"], name="tq", perm=[0, 2, 1, 3]),
        h.make_node("Transpose", ["k4"], ["kt"], name="tk", perm=[0, 2, 3, 1]),
        h.make_node("Transpose", ["v4"], ["vt"], name="tv", perm=[0, 2, 1, 3]),
        h.make_node("MatMul", ["qt", "kt"], ["s"], name="qk"),
        h.make_node("Mul", ["s", "scale"], ["ss"], name="scale"),
        h.make_node("Softmax", ["ss"], ["p"], name="softmax", axis=-1),
        h.make_node("MatMul", ["p", "vt"], ["o"], name="pv"),
        h.make_node("Transpose", ["o"], ["ot"], name="to", perm=[0, 2, 1, 3]),
        h.make_node("Reshape", ["ot", "flat"], ["o3"], name="ro"),
        h.make_node("MatMul", ["o3", "wo"], ["proj"], name="mm_o"),
        h.make_node("Add", ["proj", "x"], ["res"], name="residual"),
        h.make_node("ReduceMean", ["res"], ["mu"], name="ln2/mean", axes=[-1]),
        h.make_node("Sub", ["res", "mu"], ["xc"], name="ln2/sub"),
        h.make_node("Pow", ["xc", "two"], ["sq"], name="ln2/pow"),
        h.make_node("ReduceMean", ["sq"], ["var"], name="ln2/var", axes=[-1]),
        h.make_node("Add", ["var", "eps"], ["ve"], name="ln2/add_eps"),
        h.make_node("Sqrt", ["ve"], ["sd"], name="ln2/sqrt"),
        h.make_node("Div", ["xc", "sd"], ["xn"], name="ln2/div"),
        h.make_node("Mul", ["xn", "g2"], ["xg"], name="ln2/mul"),
        h.make_node("Add", ["xg", "b2"], ["ln2"], name="ln2/add"),
        h.make_node("MatMul", ["ln2", "w1"], ["h1"], name="mlp1"),
        h.make_node("Relu", ["h1"], ["a1"], name="mlp_relu"),
        h.make_node("MatMul", ["a1", "w2"], ["h2"], name="mlp2"),
        h.make_node("Add", ["h2", "res"], ["y"], name="residual2"),
    ]
    inits = [init("ln_s", 1 + rnd(D, scale=0.1)), init("ln_b", rnd(D, scale=0.1)),
             init("wq", rnd(D, D, scale=D ** -0.5)), init("wk", rnd(D, D, scale=D ** -0.5)),
             init("wv", rnd(D, D, scale=D ** -0.5)), init("wo", rnd(D, D, scale=D ** -0.5)),
             init("heads", [B, S, H, hd], np.int64), init("flat", [B, S, D], np.int64),
             init("scale", np.array(hd ** -0.5)), init("two", np.array(2.0)), init("eps", np.array(1e-5)),
             init("g2", 1 + rnd(D, scale=0.1)), init("b2", rnd(D, scale=0.1)),
             init("w1", rnd(D, 2 * D, scale=D ** -0.5)), init("w2", rnd(2 * D, D, scale=(2 * D) ** -0.5))]
    return model(nodes, [vi("x", T.FLOAT, [B, S, D])], [vi("y", T.FLOAT, [B, S, D])], inits, opset=opset)


# --------------------------------------------------------------------------
# cases
# --------------------------------------------------------------------------


def t_cnn():
    # a chain of convertible ops: exactly two Casts with keep-io, every node converted
    def more(rep, nodes, texts, saved):
        inits = {i.name: i.data_type for i in saved.graph.initializer}
        check("cnn: every weight is float16", all(t == T.FLOAT16 for t in inits.values()), f"{inits}")
        check("cnn: the Cast after x reads x", any(n["op"] == "Cast" and n["inputs"] == ["x"] for n in nodes), f"{nodes}")
        fc = [n for n in nodes if n["name"] == "fc"]
        check("cnn: fc writes y_float16, a Cast writes y", fc and fc[0]["outputs"] == ["y_float16"] and
              any(n["op"] == "Cast" and n["outputs"] == ["y"] for n in nodes), f"{fc}")
    case("cnn", cnn(), "", {"x": rnd(2, 1, 8, 8)}, casts=2, rewritten=8,
         notes=["8 nodes to float16, 0 kept float32", "6 initializers and 0 Constants converted (5.5 KiB -> 2.8 KiB)",
                "2 Casts inserted", "Cast 'x' (float32) -> 'x_float16' (float16) for conv1",
                "Cast 'y_float16' (float16) -> 'y' (float32): the graph output keeps its float32 name"],
         rewrites=["conv1: Conv in float16", "fc: Gemm in float16"], extra=more)


def t_cnn_no_keep_io():
    case("cnn-keep-io-off", cnn(), "keep-io=off", {"x": rnd(2, 1, 8, 8)}, casts=0, rewritten=8, io_dtype=T.FLOAT16,
         notes=["0 Casts inserted"])


def t_cnn_ir3():
    # IR version 3: every initializer is also a graph input; they are weights all the same (converted,
    # their input type float16), and only x and y get Casts
    m = cnn(8)
    m.ir_version = 3
    m.graph.input.extend([vi(i.name, T.FLOAT, list(i.dims)) for i in m.graph.initializer])
    onnx.checker.check_model(m)

    def more(rep, nodes, texts, saved):
        ins = {i.name: i.type.tensor_type.elem_type for i in saved.graph.input}
        check("cnn-ir3: x stays float32, the weights' inputs are float16",
              ins.get("x") == T.FLOAT and all(t == T.FLOAT16 for k, t in ins.items() if k != "x"), f"{ins}")
    case("cnn-ir3", m, "", {"x": rnd(2, 1, 8, 8)}, casts=2, rewritten=8, io_dtype=None, extra=more)


def t_transformer():
    case("transformer", transformer(), "", {"x": rnd(2, 8, 32)}, casts=2,
         not_kept=["ln1", "ln2/mean", "ln2/var", "softmax", "ln2/pow"],
         rewrites=["ln1: LayerNormalization in float16", "softmax: Softmax in float16", "ln2/var: ReduceMean in float16"])


def t_transformer_max_reduction():
    # reductions over the 32 features are deeper than 16: LayerNormalization, both ReduceMeans and
    # the Pow that feeds the variance stay float32; the Softmax (over 8 keys) does not
    def more(rep, nodes, texts, saved):
        mean = [n for n in nodes if n["name"] == "ln2/mean"]
        check("max-reduction: ln2/mean reads res without a Cast (res is float32 at its source? no: a shared Cast)",
              mean and mean[0]["inputs"][0] in ("res", "res_float32"), f"{mean}")
    case("transformer-max-reduction", transformer(), "max-reduction=16", {"x": rnd(2, 8, 32)},
         kept=["ln1: LayerNormalization over 32 elements, deeper than max-reduction 16: kept float32",
               "ln2/mean: ReduceMean over 32 elements, deeper than max-reduction 16: kept float32",
               "ln2/var: ReduceMean over 32 elements, deeper than max-reduction 16: kept float32",
               "ln2/pow: Pow feeds 'ln2/var' (ReduceMean), kept float32 for its long sum: kept float32"],
         not_kept=["softmax", "ln2/sub", "ln2/sqrt"], extra=more)


def t_transformer_symbolic():
    # a symbolic sequence length: Softmax's depth is not known, and the report says so
    m = transformer()
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "seq"
    m.graph.output[0].type.tensor_type.shape.dim[1].dim_param = "seq"
    for t in m.graph.initializer:
        if t.name in ("heads", "flat"):
            a = nh.to_array(t).copy()
            a[1] = -1 if t.name == "flat" else 0
            if t.name == "heads":
                a[1] = -1
            t.CopyFrom(nh.from_array(a, t.name))
    case("transformer-symbolic", m, "", {"x": rnd(2, 8, 32)}, casts=2,
         notes=["softmax: Softmax: the depth of its reduction depends on a symbolic dim"])


def t_reduce_axes_input():
    # opset 18: the axes of ReduceSumSquare and ReduceMean are an input; x*x feeding a kept reduction
    # stays float32 with it; the Softmax over 4 values does not go
    nodes = [
        h.make_node("ReduceSumSquare", ["x", "ax1"], ["ss"], name="sumsq", keepdims=1),
        h.make_node("Mul", ["x", "x"], ["xx"], name="square"),
        h.make_node("ReduceMean", ["xx", "ax1"], ["ms"], name="meansq", keepdims=1),
        h.make_node("ReduceSum", ["x", "ax0"], ["s0"], name="sum0", keepdims=1),
        h.make_node("Add", ["ss", "ms"], ["a"], name="add"),
        h.make_node("Mul", ["a", "s0"], ["b"], name="mul"),
        h.make_node("Softmax", ["b"], ["y"], name="softmax", axis=0),
    ]
    m = model(nodes, [vi("x", T.FLOAT, [4, 64])], [vi("y", T.FLOAT, [4, 64])],
              [init("ax1", [1], np.int64), init("ax0", [-2], np.int64)], opset=18)
    case("reduce-axes-input", m, "max-reduction=16", {"x": rnd(4, 64, scale=0.5)},
         kept=["sumsq: ReduceSumSquare over 64 elements, deeper than max-reduction 16: kept float32",
               "meansq: ReduceMean over 64 elements, deeper than max-reduction 16",
               "square: Mul feeds 'meansq' (ReduceMean), kept float32 for its long sum"],
         not_kept=["sum0", "softmax", "add"])


def topk_model():
    nodes = [
        h.make_node("MatMul", ["x", "w"], ["s"], name="mm"),
        h.make_node("TopK", ["s", "k"], ["vals", "idx"], name="topk", axis=-1),
        h.make_node("Reshape", ["vals", "shape"], ["y"], name="reshape"),
        h.make_node("Mul", ["vals", "half"], ["z"], name="scale"),
    ]
    w = np.diag(np.arange(1, 17, dtype=np.float32)) + 0.01 * rnd(16, 16)
    inits = [init("w", w), init("k", [4], np.int64), init("shape", [2, 2], np.int64), init("half", np.array(0.5))]
    return model(nodes, [vi("x", T.FLOAT, [1, 16])],
                 [vi("y", T.FLOAT, [2, 2]), vi("idx", T.INT64, [1, 4]), vi("z", T.FLOAT, [1, 4])], inits)


def t_topk():
    # TopK is blocked: its input gets a Cast back to float32; the Reshape after it only moves
    # values between float32 tensors and stays float32 (no Cast); the Mul is converted
    def more(rep, nodes, texts, saved):
        rs = [n for n in nodes if n["name"] == "reshape"]
        check("topk: the Reshape reads vals directly", rs and rs[0]["inputs"][0] == "vals", f"{rs}")
    case("topk", topk_model(), "", {"x": np.ones((1, 16), np.float32)}, casts=4,
         kept=["topk: TopK is in block-ops: kept float32",
               "reshape: Reshape only moves or selects values and its neighbours are float32"],
         rewrites=["mm: MatMul in float16", "scale: Mul in float16"], extra=more)
    # taken out of the block list, TopK runs in float16
    case("topk-unblocked", topk_model(), "block-ops=-TopK", {"x": np.ones((1, 16), np.float32)},
         rewrites=["topk: TopK in float16"], not_kept=["topk"])
    # block-ops=Mul replaces the list: TopK converted, Mul kept
    case("topk-block-mul", topk_model(), "block-ops=Mul", {"x": np.ones((1, 16), np.float32)},
         kept=["scale: Mul is in block-ops"], not_kept=["topk"])


def t_block_options():
    case("block-ops-add", cnn(), "block-ops=+Relu", {"x": rnd(2, 1, 8, 8)},
         kept=["relu1: Relu is in block-ops", "relu2: Relu is in block-ops"], not_kept=["conv1", "fc"])
    case("block-nodes", cnn(), "block-nodes=conv2", {"x": rnd(2, 1, 8, 8)},
         kept=["conv2: in block-nodes: kept float32"], not_kept=["conv1"])
    case("block-nodes-glob", cnn(), "block-nodes=conv*,7", {"x": rnd(2, 1, 8, 8)},
         kept=["conv1: in block-nodes ('conv*')", "conv2: in block-nodes ('conv*')", "fc: in block-nodes ('7')"])
    if common.FILTER and common.FILTER not in "block-errors":
        return
    src = os.path.join(common.TMP, "block-errors.onnx")
    onnx.save(cnn(), src)
    for args, err in (("block-nodes=nope", "block-nodes: 'nope' matches no node"),
                      ("block-ops=+Relu,Conv", "either every item starts with + or -"),
                      ("block-ops=-Relu", "block-ops: 'Relu' is not in the default list"),
                      ("data-max=0", "data-max must be above 0"),
                      ("max-reduction=x", "must be a whole number")):
        rc, so, se = ogsh(src, f"apply convert-fp16 {args}")
        check(f"block-errors: '{args}' refused with '{err}'", rc != 0 and err in se, (so + se)[-300:])


def weights_model():
    # x / w with a weight of 1e6 (overflows float16), x + eps with eps 1e-12 (vanishes), a weight
    # whose few tiny values flush to zero (converted, noted)
    w = np.full((8,), 2.0, np.float32)
    w[3] = 1e6
    tiny = rnd(8, scale=0.5)
    tiny[5] = 1e-9
    nodes = [
        h.make_node("Div", ["x", "w"], ["d"], name="div_big"),
        h.make_node("Mul", ["x", "x"], ["xx"], name="square"),
        h.make_node("Add", ["xx", "eps"], ["e"], name="add_eps"),
        h.make_node("Sqrt", ["e"], ["r"], name="sqrt"),
        h.make_node("Add", ["d", "r"], ["s"], name="sum"),
        h.make_node("Mul", ["s", "tiny"], ["y"], name="mul_tiny"),
    ]
    inits = [init("w", w), init("eps", np.array([1e-12])), init("tiny", tiny)]
    return model(nodes, [vi("x", T.FLOAT, [2, 8])], [vi("y", T.FLOAT, [2, 8])], inits)


def t_weights():
    case("weights", weights_model(), "", {"x": rnd(2, 8)},
         kept=["div_big: its weight 'w' has 1 value beyond float16's largest 65504 (largest |x| 1000000); clamp=on "
               "would clamp it: kept float32",
               "add_eps: its weight 'eps' would become all zeros: its largest |x| 1e-12 is below float16's smallest "
               "subnormal 5.96e-08; clamp=on would clamp it: kept float32"],
         notes=["'tiny': 1 of 8 values is below float16's smallest subnormal 5.96e-08 and becomes 0"],
         rewrites=["mul_tiny: Mul in float16"])

    def clamped(rep, nodes, texts, saved):
        w = [nh.to_array(i) for i in saved.graph.initializer if i.name == "w"]
        check("clamp: 'w' is float16 with 65504 in place of 1e6", w and w[0].dtype == np.float16 and
              float(w[0][3]) == 65504.0, f"{w}")
        eps = [nh.to_array(i) for i in saved.graph.initializer if i.name == "eps"]
        check("clamp: 'eps' is the smallest subnormal", eps and float(eps[0][0]) == 2.0 ** -24, f"{eps}")
    case("weights-clamp", weights_model(), "clamp=on", {"x": rnd(2, 8)}, numbers=False,
         notes=["clamp=on: 3 weights clamped", "clamped 'w': 1 value beyond 65504 set to +-65504 (largest |x| 1000000)",
                "clamped 'eps': 0 values beyond 65504", "clamped 'tiny'"],
         rewrites=["div_big: Div in float16", "add_eps: Add in float16"], extra=clamped)


def t_bf16():
    # opset 22: every op of the CNN takes bfloat16
    def bf(rep, nodes, texts, saved):
        inits = {i.name: i.data_type for i in saved.graph.initializer}
        check("bf16: every weight is bfloat16", all(t == T.BFLOAT16 for t in inits.values()), f"{inits}")
    # onnxruntime's CPU provider has few bfloat16 kernels (no Conv): where it lacks one, ogsh's own
    # run checks the numbers
    case("bf16-opset22", cnn(22), "", {"x": rnd(2, 1, 8, 8)}, pass_name="convert-bf16", casts=2, rewritten=8,
         rtol=3e-2, use_ort="kernels", extra=bf)
    # opset 17: Conv, MaxPool and GlobalAveragePool take bfloat16 only from opset 22
    case("bf16-opset17", cnn(17), "", {"x": rnd(2, 1, 8, 8)}, pass_name="convert-bf16", rtol=3e-2, use_ort="kernels",
         kept=["conv1: Conv takes bfloat16 from ONNX opset 22, the model imports opset 17: kept float32",
               "pool1: MaxPool takes bfloat16 from ONNX opset 22",
               "gap: GlobalAveragePool takes bfloat16 from ONNX opset 22"],
         rewrites=["fc: Gemm in bfloat16"])
    case("bf16-transformer", transformer(), "", {"x": rnd(2, 8, 32)}, pass_name="convert-bf16", casts=2,
         rtol=5e-2, use_ort="kernels", rewrites=["ln1: LayerNormalization in bfloat16"])
    if common.FILTER and common.FILTER not in "bf16-opset12":
        return
    src = os.path.join(common.TMP, "bf16-opset12.onnx")
    onnx.save(cnn(12), src)
    rc, so, se = ogsh(src, "apply convert-bf16")
    check("bf16-opset12: refused", rc != 0 and "bfloat16 needs opset 13 or later" in se, (so + se)[-300:])


def t_fused():
    # ogsh's fused ops take float16: FusedConv/FusedGemm call a float16 copy of their function
    def fns(rep, nodes, texts, saved):
        ov = sorted((f.name, f.overload) for f in saved.functions)
        check("fused: the functions are the float16 variants only", ov and all(o.endswith("float16") for _, o in ov),
              f"{ov}")
        fused = [n for n in saved.graph.node if n.domain == "ai.ogsh"]
        check("fused: every fused node calls a float16 overload",
              fused and all(n.overload.endswith("float16") for n in fused), f"{[n.overload for n in fused]}")
    case("fused-cnn", cnn(), "", {"x": rnd(2, 1, 8, 8)}, pre="apply fuse-activation; ", casts=2,
         rewrites=["FusedConv in float16, function overload 'Relu_float16'"], extra=fns)

    def fns2(rep, nodes, texts, saved):
        doms = {n.op_type for n in saved.graph.node if n.domain == "ai.ogsh"}
        check("fused-transformer: optimize made fused ops", len(doms) >= 1, f"{doms}")
        for f in saved.functions:
            for n in f.node:
                for a in n.attribute:
                    # float constants (the packed attention's shapes and indices are int64)
                    if a.name == "value" and a.type == onnx.AttributeProto.TENSOR and \
                            a.t.data_type in (T.FLOAT, T.DOUBLE, T.FLOAT16, T.BFLOAT16):
                        check(f"fused-transformer: constant in {f.name}/{f.overload} is float16",
                              a.t.data_type == T.FLOAT16, f"{a.t.data_type}")
    case("fused-transformer", transformer(), "", {"x": rnd(2, 8, 32)}, pre="optimize --quiet; ", casts=2,
         extra=fns2)


def t_subgraph():
    # an If: kept float32 with Casts around it; x, read inside the branches, stays float32
    then_g = h.make_graph([h.make_node("Add", ["x", "c1"], ["t"], name="then_add")], "then", [],
                          [vi("t", T.FLOAT, [2, 4])], [init("c1", rnd(2, 4))])
    else_g = h.make_graph([h.make_node("Mul", ["x", "c2"], ["t2"], name="else_mul")], "else", [],
                          [vi("t2", T.FLOAT, [2, 4])], [init("c2", rnd(2, 4))])
    nodes = [
        h.make_node("Sigmoid", ["x"], ["sx"], name="sig"),
        h.make_node("If", ["cond"], ["b"], name="branch", then_branch=then_g, else_branch=else_g),
        h.make_node("Add", ["b", "sx"], ["y"], name="add"),
    ]
    m = model(nodes, [vi("x", T.FLOAT, [2, 4]), vi("cond", T.BOOL, [])], [vi("y", T.FLOAT, [2, 4])])
    # keep-io=off: y becomes float16, x stays float32 (the branches read it by name)
    def x32(rep, nodes, texts, saved):
        ts = {v.name: v.type.tensor_type.elem_type for v in list(saved.graph.input) + list(saved.graph.output)}
        check("subgraph-keep-io-off: x float32, y float16", ts.get("x") == T.FLOAT and ts.get("y") == T.FLOAT16,
              f"{ts}")
    case("subgraph-keep-io-off", m, "keep-io=off", {"x": rnd(2, 4), "cond": np.array(True)}, io_dtype=None,
         extra=x32)
    for c in (True, False):
        case(f"subgraph-if-{c}", m, "", {"x": rnd(2, 4), "cond": np.array(c)},
             kept=["branch: If has subgraphs (else_branch, then_branch), which this pass does not enter; Casts around "
                   "it: kept float32"],
             rewrites=["sig: Sigmoid in float16", "add: Add in float16"])


def t_constants():
    # Shape -> ConstantOfShape(1.5), Cast(shape to float), Constant value_float: the type attributes
    # and constant values become float16; Shape reads x as it is (no Cast for it)
    nodes = [
        h.make_node("Shape", ["x"], ["s"], name="shape"),
        h.make_node("ConstantOfShape", ["s"], ["cs"], name="cos", value=h.make_tensor("v", T.FLOAT, [1], [1.5])),
        h.make_node("Add", ["x", "cs"], ["a"], name="add"),
        h.make_node("Cast", ["s"], ["sf"], name="cast_shape", to=T.FLOAT),
        h.make_node("ReduceSum", ["sf"], ["r"], name="rsum", keepdims=1),
        h.make_node("Mul", ["a", "r"], ["b"], name="mul"),
        h.make_node("Constant", [], ["kc"], name="k", value_float=0.25),
        h.make_node("Mul", ["b", "kc"], ["y"], name="mul_k"),
    ]
    m = model(nodes, [vi("x", T.FLOAT, [3, 3])], [vi("y", T.FLOAT, [3, 3])], opset=17)

    def more(rep, nodes, texts, saved):
        by = {n.name: n for n in saved.graph.node}
        to = [a.i for a in by["cast_shape"].attribute if a.name == "to"]
        check("constants: Cast now to float16", to == [T.FLOAT16], f"{to}")
        val = [a.t.data_type for a in by["cos"].attribute if a.name == "value"]
        check("constants: ConstantOfShape's value is float16", val == [T.FLOAT16], f"{val}")
        kv = [(a.name, a.t.data_type) for a in by["k"].attribute]
        check("constants: the Constant is a float16 tensor", kv == [("value", T.FLOAT16)], f"{kv}")
        check("constants: Shape reads x", list(by["shape"].input) == ["x"], f"{by['shape'].input}")
    # 3 Casts: the model's own (now to float16), one after x, one before y
    case("constants", m, "", {"x": rnd(3, 3)}, casts=3, extra=more,
         notes=["0 initializers and 2 Constants converted", "2 Casts inserted"])

    # EyeLike gets dtype=float16 (onnxruntime has no float16 EyeLike kernel: ogsh's run checks it)
    nodes = [h.make_node("EyeLike", ["x"], ["eye"], name="eye"), h.make_node("Add", ["eye", "x"], ["y"], name="add")]
    m = model(nodes, [vi("x", T.FLOAT, [3, 3])], [vi("y", T.FLOAT, [3, 3])], opset=17)

    def eye(rep, nodes, texts, saved):
        by = {n.name: n for n in saved.graph.node}
        dt = [a.i for a in by["eye"].attribute if a.name == "dtype"]
        check("eyelike: EyeLike gets dtype float16", dt == [T.FLOAT16], f"{dt}")
    case("eyelike", m, "", {"x": rnd(3, 3)}, casts=2, use_ort=False, extra=eye)


def t_no_fp16_op():
    # Celu has no float16 version in ONNX
    nodes = [h.make_node("Celu", ["x"], ["c"], name="celu"), h.make_node("Tanh", ["c"], ["y"], name="tanh")]
    m = model(nodes, [vi("x", T.FLOAT, [4, 4])], [vi("y", T.FLOAT, [4, 4])], opset=13)
    case("celu", m, "", {"x": rnd(4, 4)}, casts=2, kept=["celu: ONNX has no float16 version of Celu: kept float32"],
         rewrites=["tanh: Tanh in float16"])


def t_output_read_inside():
    # a graph output that another node also reads: the writer writes a_float16 (which the reader
    # reads), a Cast writes the float32 output 'a'
    nodes = [h.make_node("Exp", ["x"], ["a"], name="exp"), h.make_node("Sigmoid", ["a"], ["b"], name="sig")]
    m = model(nodes, [vi("x", T.FLOAT, [4])], [vi("a", T.FLOAT, [4]), vi("b", T.FLOAT, [4])])

    def more(rep, nodes, texts, saved):
        sig = [n for n in nodes if n["name"] == "sig"]
        check("output-read: Sigmoid reads a_float16", sig and sig[0]["inputs"] == ["a_float16"], f"{sig}")
    case("output-read", m, "", {"x": rnd(4)}, casts=3, extra=more,
         notes=["Cast 'a_float16' (float16) -> 'a' (float32): the graph output keeps its float32 name; also read "
                "as is by sig"])


def t_output_read_neutral():
    # the same with a Relu: it only selects values, so it runs in float32 next to the float32
    # input and output, and the Sigmoid reads a Cast of 'a': two Casts, not three
    nodes = [h.make_node("Relu", ["x"], ["a"], name="relu"), h.make_node("Sigmoid", ["a"], ["b"], name="sig")]
    m = model(nodes, [vi("x", T.FLOAT, [4])], [vi("a", T.FLOAT, [4]), vi("b", T.FLOAT, [4])])
    case("output-read-neutral", m, "", {"x": rnd(4)}, casts=2,
         kept=["relu: Relu only moves or selects values and its neighbours are float32: left float32, which saves "
               "Casts"], notes=["Cast 'a' (float32) -> 'a_float16' (float16) for sig"])


def t_twice():
    # a second conversion finds nothing to do: the boundary Cast before y stays as it is
    if common.FILTER and common.FILTER not in "twice":
        return
    src = os.path.join(common.TMP, "twice.onnx")
    onnx.save(cnn(), src)
    rc, so, se = ogsh(src, "apply convert-fp16; apply convert-fp16 --json")
    docs = json_docs_lines(so)
    rep = docs[-1] if docs else {}
    texts = [m["node"] + ": " + m["text"] for m in rep.get("messages", []) if m.get("node")]
    check("twice: the second conversion changes nothing", rc == 0 and rep.get("changed") is False, (so + se)[-400:])
    check("twice: the boundary Cast is left as it is",
          "y_float16_to_float32: a Cast from float16 to float32 whose readers are float32: left as it is" in texts,
          f"{texts}")


def t_resize():
    # Resize's scales (and roi) are float32 only in ONNX: they stay float32 in a converted Resize
    nodes = [
        h.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        h.make_node("Resize", ["c", "", "scales"], ["r"], name="resize", mode="nearest"),
        h.make_node("Sigmoid", ["r"], ["y"], name="sig"),
    ]
    m = model(nodes, [vi("x", T.FLOAT, [1, 2, 4, 4])], [vi("y", T.FLOAT, [1, 3, 8, 8])],
              [init("w", rnd(3, 2, 3, 3, scale=0.3)), init("scales", [1, 1, 2, 2])])

    def more(rep, nodes, texts, saved):
        ts = {i.name: i.data_type for i in saved.graph.initializer}
        check("resize: scales stays float32, w is float16", ts == {"w": T.FLOAT16, "scales": T.FLOAT}, f"{ts}")
    case("resize", m, "", {"x": rnd(1, 2, 4, 4)}, casts=2, rewrites=["resize: Resize in float16"], extra=more)


def t_explain():
    if common.FILTER and common.FILTER not in "explain":
        return
    for p, subs in (("convert-fp16", ["65,504", "max-reduction", "data-max", "keep-io", "block-ops", "2^-24"]),
                    ("convert-bf16", ["7 mantissa bits", "opset 13", "data-max"])):
        rc, so, se = ogsh(None, f"explain {p}")
        check(f"explain {p}", rc == 0 and all(s in so for s in subs), (so + se)[:400])
    rc, so, se = ogsh(None, "passes --json")
    lv = {p["name"]: p["level"] for p in json.loads(so)} if rc == 0 else {}
    check("passes: convert-fp16 and convert-bf16 are level 0 (optimize never runs them)",
          lv.get("convert-fp16") == "-" and lv.get("convert-bf16") == "-", f"{lv}")


def main():
    return common.main(__doc__, "ogsh-convert-", (
        t_cnn, t_cnn_no_keep_io, t_cnn_ir3, t_transformer, t_transformer_max_reduction, t_transformer_symbolic,
        t_reduce_axes_input, t_topk, t_block_options, t_weights, t_bf16, t_fused, t_subgraph, t_constants,
        t_no_fp16_op, t_output_read_inside, t_output_read_neutral, t_twice, t_resize, t_explain))


if __name__ == "__main__":
    sys.exit(main())
