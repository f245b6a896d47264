#!/usr/bin/env python3
"""Tests of the transformer passes: fuse-gelu, fuse-layernorm,
fuse-attention, hoist-gather.

    test_fuse_transformer.py OGSH

Builds small models with onnx.helper in a temporary folder (handmade
patterns, and small BERT and GPT-2 models from tests/models/make_models.py,
upgraded to opset 23 by hand), runs ogsh on them with -c scripts and checks:
(1) the rewritten structure (op counts of the saved model), (2) that each
rejection case shows its reason in the report, (3) that the numbers before
and after agree (run --expect, rtol 1e-4), (4) that the saved model passes
onnx.checker and onnxruntime gives the same outputs as for the original.
Prints one line per check and exits non-zero on any failure.
"""
import collections
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import make_models  # noqa: E402

OGSH = None
TMP = None
FAILS = []
COUNT = [0]


def check(ok, what, detail=""):
    COUNT[0] += 1
    print(f"{'ok  ' if ok else 'FAIL'} {what}" + (f": {detail}" if detail and not ok else ""))
    if not ok:
        FAILS.append(what)
    return ok


def ogsh(model, script):
    p = subprocess.run([OGSH, model, "-c", script], capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout + p.stderr


def vi(name, shape, dt=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dt, shape)


def const(name, value, dt=np.float32):
    return numpy_helper.from_array(np.array(value, dtype=dt), name)


def save_model(name, nodes, inputs, outputs, inits=(), opset=20):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    path = os.path.join(TMP, name + ".onnx")
    onnx.save_model(m, path)
    return path


def ops_of(path):
    m = onnx.load(path)
    return collections.Counter(n.op_type for n in m.graph.node)


def rand_inputs(path, seed=0):
    m = onnx.load(path)
    rng = np.random.default_rng(seed)
    feeds = {}
    inits = {t.name for t in m.graph.initializer}
    for i in m.graph.input:
        if i.name in inits:
            continue
        shape = [d.dim_value if d.HasField("dim_value") else 2 for d in i.type.tensor_type.shape.dim]
        feeds[i.name] = rng.standard_normal(shape).astype(np.float32) * 2
    return feeds


def ort_run(path, feeds):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def apply_and_check(name, path, passes, want_ops, gone_ops, feeds, want_text=()):
    """Applies passes (a list), checks the report, structure, numbers (ogsh and
    onnxruntime) and the checker."""
    fname = name.replace(" ", "_")
    inp = os.path.join(TMP, fname + "_in.npz")
    np.savez(inp, **feeds)
    ref = os.path.join(TMP, fname + "_ref.npz")
    out = os.path.join(TMP, fname + "_out.onnx")
    script = f"run --inputs={inp} --save-outputs={ref}; "
    script += "; ".join(f"apply {p}" for p in passes)
    script += f"; run --inputs={inp} --expect={ref} --rtol=1e-4 --atol=1e-5; save {out}; ops --json"
    rc, text = ogsh(path, script)
    check(rc == 0, f"{name}: ogsh apply {', '.join(passes)} + run --expect", text[-2000:])
    try:
        js = json.loads(text[text.rindex("\n[\n") + 1:])
        counts = {o["op"]: o["count"] for o in js}
        check(all(counts.get(op, 0) == n for op, n in want_ops.items()) and not any(counts.get(op) for op in gone_ops),
              f"{name}: ops --json shows the fused ops", str(counts))
    except ValueError as e:
        check(False, f"{name}: ops --json parses", str(e))
    for t in want_text:
        check(t in text, f"{name}: report says '{t}'", text[-2000:])
    if not os.path.exists(out):
        check(False, f"{name}: saved model exists")
        return text
    ops = ops_of(out)
    for op, n in want_ops.items():
        check(ops.get(op, 0) == n, f"{name}: {n} {op} node(s) after", dict(ops))
    for op in gone_ops:
        check(ops.get(op, 0) == 0, f"{name}: no {op} left", dict(ops))
    try:
        onnx.checker.check_model(onnx.load(out), full_check=True)
        check(True, f"{name}: onnx.checker accepts the saved model")
    except Exception as e:  # noqa: BLE001
        check(False, f"{name}: onnx.checker accepts the saved model", str(e)[:500])
    try:
        a = ort_run(path, feeds)
        b = ort_run(out, feeds)
        ok = len(a) == len(b) and all(x.shape == y.shape and np.allclose(y, x, rtol=1e-4, atol=1e-5)
                                      for x, y in zip(a, b))
        err = max(float(np.max(np.abs(x - y))) for x, y in zip(a, b)) if ok or len(a) == len(b) else -1
        check(ok, f"{name}: onnxruntime outputs agree (max abs diff {err:.2e})", f"max abs diff {err}")
    except Exception as e:  # noqa: BLE001
        check(False, f"{name}: onnxruntime runs both models", str(e)[:500])
    return text


def ogsh_op_check(name, out, op, n, overloads):
    """The saved model has n ai.ogsh `op` nodes, each calling a model-local
    function of ai.ogsh (its overload in `overloads`), and imports ai.ogsh."""
    if not os.path.exists(out):
        check(False, f"{name}: saved model exists")
        return
    m = onnx.load(out)
    nodes = [x for x in m.graph.node if x.op_type == op]
    fns = {(f.domain, f.name, f.overload) for f in m.functions}
    check(len(nodes) == n and all(x.domain == "ai.ogsh" for x in nodes),
          f"{name}: {n} {op} node(s) of domain ai.ogsh", str([(x.domain, x.op_type) for x in nodes]))
    check(all(("ai.ogsh", op, x.overload) in fns and x.overload in overloads for x in nodes),
          f"{name}: each calls a model-local function ({', '.join(overloads)})", str(fns))
    check(any(o.domain == "ai.ogsh" for o in m.opset_import), f"{name}: the model imports ai.ogsh")


def reject_case(name, path, pas, reason, unchanged_op):
    out = os.path.join(TMP, name + "_out.onnx")
    rc, text = ogsh(path, f"apply {pas}; save {out}")
    check(rc == 0, f"{name}: ogsh runs", text[-1500:])
    check(reason in text, f"{name}: rejected with reason '{reason}'", text[-1500:])
    if os.path.exists(out):
        before, after = ops_of(path), ops_of(out)
        check(before == after and after.get(unchanged_op, 0) > 0, f"{name}: model unchanged", f"{dict(after)}")


# ---------------------------------------------------------------------------
# GELU


def gelu_models():
    X = vi("x", [2, 3, 8])
    Y = vi("y", [2, 3, 8])
    # BERT's erf form: Div, Erf, Add, Mul(x, .), Mul(., 0.5)
    erf = [helper.make_node("Div", ["x", "s2"], ["d"], name="g/Div"),
           helper.make_node("Erf", ["d"], ["e"], name="g/Erf"),
           helper.make_node("Add", ["e", "one"], ["a"], name="g/Add"),
           helper.make_node("Mul", ["x", "a"], ["m"], name="g/Mul"),
           helper.make_node("Mul", ["m", "half"], ["y"], name="g/Mul_1")]
    cs = [const("s2", 1.4142135381698608), const("one", 1.0), const("half", 0.5)]
    p1 = save_model("gelu_erf", erf, [X], [Y], cs)
    # Mul by 1/sqrt(2), (0.5 * x) * (1 + erf), constants first
    erf2 = [helper.make_node("Mul", ["r2", "x"], ["d"], name="d"),
            helper.make_node("Erf", ["d"], ["e"], name="erf"),
            helper.make_node("Add", ["one", "e"], ["a"], name="add"),
            helper.make_node("Mul", ["half", "x"], ["h"], name="half_x"),
            helper.make_node("Mul", ["a", "h"], ["y"], name="out")]
    p2 = save_model("gelu_erf2", erf2, [X], [Y],
                    [const("r2", 0.7071067811865476), const("one", 1.0), const("half", 0.5)])
    # GPT-2's tanh form
    th = [helper.make_node("Mul", ["half", "x"], ["h"], name="t/Mul"),
          helper.make_node("Pow", ["x", "three"], ["p"], name="t/Pow"),
          helper.make_node("Mul", ["c", "p"], ["q"], name="t/Mul_1"),
          helper.make_node("Add", ["x", "q"], ["s"], name="t/Add"),
          helper.make_node("Mul", ["k", "s"], ["u"], name="t/Mul_2"),
          helper.make_node("Tanh", ["u"], ["t"], name="t/Tanh"),
          helper.make_node("Add", ["one", "t"], ["a"], name="t/Add_1"),
          helper.make_node("Mul", ["h", "a"], ["y"], name="t/Mul_3")]
    tcs = [const("half", 0.5), const("three", 3.0), const("c", 0.044715), const("k", 0.7978845834732056),
           const("one", 1.0)]
    p3 = save_model("gelu_tanh", th, [X], [Y], tcs)
    # tanh form with x * x * x and (x * a) * 0.5
    th2 = [helper.make_node("Mul", ["x", "x"], ["x2"], name="x2"),
           helper.make_node("Mul", ["x2", "x"], ["x3"], name="x3"),
           helper.make_node("Mul", ["x3", "c"], ["q"], name="q"),
           helper.make_node("Add", ["q", "x"], ["s"], name="s"),
           helper.make_node("Mul", ["s", "k"], ["u"], name="u"),
           helper.make_node("Tanh", ["u"], ["t"], name="tanh"),
           helper.make_node("Add", ["t", "one"], ["a"], name="a"),
           helper.make_node("Mul", ["x", "a"], ["m"], name="m"),
           helper.make_node("Mul", ["m", "half"], ["y"], name="y")]
    p4 = save_model("gelu_tanh2", th2, [X], [Y], tcs)
    return p1, p2, p3, p4, erf, cs, X, Y


def test_gelu():
    p1, p2, p3, p4, erf, cs, X, Y = gelu_models()
    feeds = rand_inputs(p1)
    apply_and_check("gelu_erf", p1, ["fuse-gelu"], {"Gelu": 1}, ["Erf", "Div", "Mul", "Add"], feeds)
    apply_and_check("gelu_erf2", p2, ["fuse-gelu"], {"Gelu": 1}, ["Erf", "Mul", "Add"], feeds)
    apply_and_check("gelu_tanh", p3, ["fuse-gelu"], {"Gelu": 1}, ["Tanh", "Pow", "Mul", "Add"], feeds)
    out = os.path.join(TMP, "gelu_tanh_out.onnx")
    if os.path.exists(out):
        g = [n for n in onnx.load(out).graph.node if n.op_type == "Gelu"]
        check(bool(g) and any(a.name == "approximate" and a.s == b"tanh" for a in g[0].attribute),
              "gelu_tanh: Gelu has approximate=tanh")
    apply_and_check("gelu_tanh2", p4, ["fuse-gelu"], {"Gelu": 1}, ["Tanh", "Mul", "Add"], feeds)
    # float16 (GPT-2 exported in float16): the constants are the textbook ones rounded to float16
    # (0.044708252, 0.7978515625); the fused Gelu rounds once, so the numbers agree within float16's rounding
    th = [n for n in onnx.load(p3).graph.node]
    h16 = [const(c.name, numpy_helper.to_array(c), np.float16) for c in onnx.load(p3).graph.initializer]
    p5 = save_model("gelu_tanh_f16", th, [vi("x", [2, 3, 8], TensorProto.FLOAT16)],
                    [vi("y", [2, 3, 8], TensorProto.FLOAT16)], h16)
    check(any(c.name == "c" and float(numpy_helper.to_array(c)) == float(np.float16(0.044715)) != 0.044715 for c in h16),
          "gelu_tanh_f16: the cubic factor is rounded to float16")
    f16 = {"x": np.random.default_rng(3).normal(size=(2, 3, 8)).astype(np.float16)}
    inp, ref = os.path.join(TMP, "gelu_f16_in.npz"), os.path.join(TMP, "gelu_f16_ref.npz")
    np.savez(inp, **f16)
    rc, text = ogsh(p5, f"run --inputs={inp} --save-outputs={ref}; apply fuse-gelu; "
                        f"run --inputs={inp} --expect={ref} --rtol=2e-3 --atol=1e-3; ops")
    check(rc == 0 and "Gelu" in text and "Tanh" not in text.split("ops")[-1],
          "gelu_tanh_f16: fused into Gelu(tanh), numbers within float16's rounding", text[-1500:])
    # rejections
    # before opset 20: ogsh's Gelu (ai.ogsh) with a function; numbers, checker, onnxruntime
    p = save_model("gelu_old", erf, [X], [Y], cs, opset=14)
    apply_and_check("gelu_old_opset", p, ["fuse-gelu"], {"Gelu": 1}, ["Erf", "Div"], feeds,
                    ["fused into Gelu (ai.ogsh: the model's opset is older than 20)"])
    ogsh_op_check("gelu_old_opset", os.path.join(TMP, "gelu_old_opset_out.onnx"), "Gelu", 1, ["erf"])
    p = save_model("gelu_tanh_old", list(onnx.load(p3).graph.node), [X], [Y],
                   onnx.load(p3).graph.initializer, opset=13)
    apply_and_check("gelu_tanh_old_opset", p, ["fuse-gelu"], {"Gelu": 1}, ["Tanh", "Pow"], feeds)
    ogsh_op_check("gelu_tanh_old_opset", os.path.join(TMP, "gelu_tanh_old_opset_out.onnx"), "Gelu", 1, ["tanh"])
    # ogsh's Gelu then goes into the Gemm before it (fuse-activation), as ONNX's does
    gm = [helper.make_node("Gemm", ["x2d", "w"], ["x"], name="fc")] + erf
    p = save_model("gelu_old_gemm", gm, [vi("x2d", [6, 4])], [vi("y", [6, 8])],
                   cs + [const("w", np.random.default_rng(5).normal(size=(4, 8)))], opset=14)
    gfeeds = {"x2d": np.random.default_rng(6).normal(size=(6, 4)).astype(np.float32)}
    text = apply_and_check("gelu_old_gemm", p, ["fuse-gelu", "fuse-activation"], {"FusedGemm": 1},
                           ["Gelu", "Erf", "Gemm"], gfeeds, ["(activation=Gelu)"])
    # opset 8 has no Erf; the tanh form there cannot get a function (it needs opset 9)
    p = save_model("gelu_tanh_op8", list(onnx.load(p3).graph.node), [X], [Y],
                   onnx.load(p3).graph.initializer, opset=8)
    reject_case("gelu_opset8", p, "fuse-gelu", "and ogsh's Gelu cannot be used: the model imports ONNX opset 8",
                "Tanh")
    p = save_model("gelu_shared", erf, [X], [Y, vi("e", [2, 3, 8])], cs)
    reject_case("gelu_intermediate_output", p, "fuse-gelu", "'e' is also a graph output", "Erf")
    extra = erf + [helper.make_node("Neg", ["a"], ["z"], name="other")]
    p = save_model("gelu_two_readers", extra, [X], [Y, vi("z", [2, 3, 8])], cs)
    reject_case("gelu_two_readers", p, "fuse-gelu", "'a' has 2 readers", "Erf")
    p = save_model("gelu_badconst", erf, [X], [Y], [const("s2", 1.5), cs[1], cs[2]])
    reject_case("gelu_bad_constant", p, "fuse-gelu", "divided by 1.5, not sqrt(2)", "Erf")
    # a graph input is not a constant, even with an initializer
    g = helper.make_graph(erf, "gelu_input_const", [X, vi("s2", [])], [Y], initializer=cs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    m.ir_version = 10
    p = os.path.join(TMP, "gelu_input_const.onnx")
    onnx.save_model(m, p)
    reject_case("gelu_overridable_constant", p, "fuse-gelu", "is a Div by a value that is not a constant scalar", "Erf")


# ---------------------------------------------------------------------------
# LayerNorm / RMSNorm


def ln_nodes(axes_input, square="pow", div="div", gamma=True, beta=True, axes=(-1,)):
    nodes = []
    if axes_input:
        nodes.append(helper.make_node("ReduceMean", ["x", "axes"], ["mean"], name="ln/ReduceMean"))
    else:
        nodes.append(helper.make_node("ReduceMean", ["x"], ["mean"], name="ln/ReduceMean", axes=list(axes)))
    nodes.append(helper.make_node("Sub", ["x", "mean"], ["d"], name="ln/Sub"))
    if square == "pow":
        nodes.append(helper.make_node("Pow", ["d", "two"], ["sq"], name="ln/Pow"))
    else:
        nodes.append(helper.make_node("Mul", ["d", "d"], ["sq"], name="ln/Sq"))
    if axes_input:
        nodes.append(helper.make_node("ReduceMean", ["sq", "axes"], ["var"], name="ln/ReduceMean_1"))
    else:
        nodes.append(helper.make_node("ReduceMean", ["sq"], ["var"], name="ln/ReduceMean_1", axes=list(axes)))
    nodes.append(helper.make_node("Add", ["var", "eps"], ["ve"], name="ln/Add"))
    nodes.append(helper.make_node("Sqrt", ["ve"], ["s"], name="ln/Sqrt"))
    last = "y" if not gamma and not beta else "n"
    if div == "div":
        nodes.append(helper.make_node("Div", ["d", "s"], [last], name="ln/Div"))
    else:
        nodes.append(helper.make_node("Reciprocal", ["s"], ["rs"], name="ln/Reciprocal"))
        nodes.append(helper.make_node("Mul", ["rs", "d"], [last], name="ln/MulR"))
    if gamma:
        nodes.append(helper.make_node("Mul", ["n", "gamma"], ["y" if not beta else "g"], name="ln/Mul"))
    if beta:
        nodes.append(helper.make_node("Add", ["beta", "g" if gamma else "n"], ["y"], name="ln/Add_1"))
    return nodes


def ln_inits(d=16, eps=1e-5, axes=(-1,)):
    rng = np.random.default_rng(1)
    return [const("two", 2.0), const("eps", eps), const("axes", list(axes), np.int64),
            numpy_helper.from_array(rng.uniform(0.5, 1.5, [d]).astype(np.float32), "gamma"),
            numpy_helper.from_array(rng.standard_normal([d]).astype(np.float32), "beta")]


def rms_nodes(div="div"):
    nodes = [helper.make_node("Pow", ["x", "two"], ["sq"], name="rms/Pow"),
             helper.make_node("ReduceMean", ["sq", "axes"], ["ms"], name="rms/ReduceMean"),
             helper.make_node("Add", ["ms", "eps"], ["me"], name="rms/Add"),
             helper.make_node("Sqrt", ["me"], ["s"], name="rms/Sqrt")]
    if div == "div":
        nodes.append(helper.make_node("Div", ["x", "s"], ["n"], name="rms/Div"))
    else:
        nodes += [helper.make_node("Reciprocal", ["s"], ["rs"], name="rms/Reciprocal"),
                  helper.make_node("Mul", ["x", "rs"], ["n"], name="rms/MulR")]
    nodes.append(helper.make_node("Mul", ["gamma", "n"], ["y"], name="rms/Mul"))
    return nodes


def test_layernorm():
    X, Y = vi("x", [2, 5, 16]), vi("y", [2, 5, 16])
    p = save_model("ln17", ln_nodes(False), [X], [Y], ln_inits(), opset=17)
    feeds = rand_inputs(p)
    apply_and_check("ln_opset17_axes_attr", p, ["fuse-layernorm"], {"LayerNormalization": 1},
                    ["ReduceMean", "Sub", "Pow", "Sqrt", "Div", "Mul", "Add"], feeds)
    p = save_model("ln18", ln_nodes(True, square="mul", div="recip", beta=False), [X], [Y], ln_inits(), opset=18)
    apply_and_check("ln_opset18_axes_input_no_beta", p, ["fuse-layernorm"], {"LayerNormalization": 1},
                    ["ReduceMean", "Sub", "Reciprocal", "Sqrt", "Mul", "Add"], feeds, ["no bias"])
    p = save_model("ln_plain", ln_nodes(True, gamma=False, beta=False), [X], [Y], ln_inits(), opset=18)
    apply_and_check("ln_no_scale_no_bias", p, ["fuse-layernorm"], {"LayerNormalization": 1},
                    ["ReduceMean", "Sub", "Div"], feeds, ["scale ones"])
    X4, Y4 = vi("x", [2, 3, 4, 4]), vi("y", [2, 3, 4, 4])
    inits = ln_inits(axes=(-2, -1))[:3] + [
        numpy_helper.from_array(np.linspace(0.5, 1.5, 4).astype(np.float32).reshape(1, 4), "gamma"),
        numpy_helper.from_array(np.linspace(-1, 1, 16).astype(np.float32).reshape(4, 4), "beta")]
    p = save_model("ln_two_axes", ln_nodes(True), [X4], [Y4], inits, opset=18)
    apply_and_check("ln_last_two_axes_broadcast_scale", p, ["fuse-layernorm"], {"LayerNormalization": 1},
                    ["ReduceMean"], rand_inputs(p), ["axis -2"])
    p = save_model("rms23", rms_nodes(), [X], [Y], ln_inits(), opset=23)
    apply_and_check("rmsnorm_opset23", p, ["fuse-layernorm"], {"RMSNormalization": 1},
                    ["ReduceMean", "Pow", "Sqrt", "Div", "Mul", "Add"], feeds)
    p = save_model("rms23r", rms_nodes("recip"), [X], [Y], ln_inits(), opset=23)
    apply_and_check("rmsnorm_reciprocal", p, ["fuse-layernorm"], {"RMSNormalization": 1},
                    ["ReduceMean", "Reciprocal"], feeds)
    # an RMS norm of a difference with a constant (not a layer norm's x - mean), no scale: ones
    nodes = [helper.make_node("Sub", ["x", "beta"], ["xc"], name="pre")] + [
        helper.make_node(n.op_type, ["xc" if i == "x" else i for i in n.input], list(n.output), name=n.name)
        for n in rms_nodes()[:-1]]
    nodes[-1].output[0] = "y"
    p = save_model("rms_sub", nodes, [X], [Y], ln_inits(), opset=23)
    apply_and_check("rmsnorm_of_difference_no_scale", p, ["fuse-layernorm"], {"RMSNormalization": 1, "Sub": 1},
                    ["ReduceMean", "Pow"], feeds, ["scale ones"])
    # rejections
    # before opset 17: ogsh's LayerNormalization (ai.ogsh) with a function; numbers, checker, onnxruntime
    p = save_model("ln_old", ln_nodes(False), [X], [Y], ln_inits(), opset=14)
    apply_and_check("ln_old_opset", p, ["fuse-layernorm"], {"LayerNormalization": 1},
                    ["ReduceMean", "Sqrt", "Pow", "Div"], feeds,
                    ["fused into LayerNormalization (ai.ogsh: the model's opset is older than 17)"])
    ogsh_op_check("ln_old_opset", os.path.join(TMP, "ln_old_opset_out.onnx"), "LayerNormalization", 1, ["last1"])
    p = save_model("ln_old_nobias", ln_nodes(False, beta=False), [X], [Y], ln_inits(), opset=11)
    apply_and_check("ln_old_opset_no_bias", p, ["fuse-layernorm"], {"LayerNormalization": 1}, ["ReduceMean"], feeds)
    ogsh_op_check("ln_old_opset_no_bias", os.path.join(TMP, "ln_old_opset_no_bias_out.onnx"), "LayerNormalization",
                  1, ["last1_nobias"])
    p = save_model("ln_old8", ln_nodes(False), [X], [Y], ln_inits(), opset=8)
    reject_case("ln_opset8", p, "fuse-layernorm",
                "and ogsh's LayerNormalization cannot be used: the model imports ONNX opset 8", "ReduceMean")
    p = save_model("rms_old", rms_nodes(), [X], [Y], ln_inits(), opset=18)
    reject_case("rms_old_opset", p, "fuse-layernorm", "the model imports opset 18; RMSNormalization needs 23",
                "ReduceMean")
    p = save_model("ln_axis1", ln_nodes(False, axes=(1,)), [X], [Y], ln_inits(), opset=17)
    reject_case("ln_not_last_axis", p, "fuse-layernorm", "does not average over the last axes", "ReduceMean")
    g = helper.make_graph(ln_nodes(True), "ln_eps_input", [X, vi("eps", [])], [Y], initializer=ln_inits())
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 10
    p = os.path.join(TMP, "ln_eps_input.onnx")
    onnx.save_model(m, p)
    reject_case("ln_eps_not_constant", p, "fuse-layernorm", "epsilon ('eps') is not a constant", "ReduceMean")
    nodes = ln_nodes(True) + [helper.make_node("Abs", ["d"], ["z"], name="other")]
    p = save_model("ln_shared_d", nodes, [X], [Y, vi("z", [2, 5, 16])], ln_inits(), opset=18)
    reject_case("ln_intermediate_read_elsewhere", p, "fuse-layernorm", "is also read outside the layer norm",
                "ReduceMean")
    p = save_model("ln_var_out", ln_nodes(True), [X], [Y, vi("var", [2, 5, 1])], ln_inits(), opset=18)
    reject_case("ln_intermediate_graph_output", p, "fuse-layernorm", "'var' is also a graph output", "ReduceMean")
    # the hidden size is not known: no scale shape to make
    p = save_model("ln_unknown", ln_nodes(True, gamma=False, beta=False), [vi("x", ["a", "b", "c"])],
                   [vi("y", ["a", "b", "c"])], ln_inits(), opset=18)
    reject_case("ln_unknown_hidden_size", p, "fuse-layernorm", "the size of the normalized axes", "ReduceMean")


# ---------------------------------------------------------------------------
# Attention


def attn_model(name, opset=23, scale_op="Mul", mask=True, axis=-1, scores_out=False):
    B, H, S, D = 2, 4, 5, 8
    Q, K, V = vi("q", [B, H, S, D]), vi("k", [B, H, S, D]), vi("v", [B, H, S, D])
    M = vi("mask", [B, 1, 1, S])
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], name="a/Transpose", perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["s"], name="a/MatMul")]
    c = 1 / np.sqrt(D) if scale_op == "Mul" else np.sqrt(D)
    nodes.append(helper.make_node(scale_op, ["s", "c"], ["ss"], name="a/Scale"))
    if mask:
        nodes.append(helper.make_node("Add", ["ss", "mask"], ["sm"], name="a/Add"))
    nodes += [helper.make_node("Softmax", ["sm" if mask else "ss"], ["p"], name="a/Softmax", axis=axis),
              helper.make_node("MatMul", ["p", "v"], ["o"], name="a/MatMul_1")]
    outs = [vi("o", [B, H, S, D])] + ([vi("s", [B, H, S, S])] if scores_out else [])
    return save_model(name, nodes, [Q, K, V] + ([M] if mask else []), outs, [const("c", c)], opset=opset)


def test_attention_handmade():
    p = attn_model("attn_mask")
    feeds = rand_inputs(p)
    feeds["mask"] = np.where(np.arange(5)[None, None, None, :] < np.array([5, 3])[:, None, None, None], 0.0,
                             -1e9).astype(np.float32)
    apply_and_check("attn_mul_scale_mask", p, ["fuse-attention"], {"Attention": 1}, ["Softmax", "MatMul"],
                    feeds, ["scale 0.353553"])
    p = attn_model("attn_div", scale_op="Div", mask=False)
    apply_and_check("attn_div_scale_no_mask", p, ["fuse-attention"], {"Attention": 1},
                    ["Softmax", "MatMul", "Div", "Transpose"], rand_inputs(p))
    # before opset 23: ogsh's FusedAttention (its model-local function runs in onnxruntime)
    p = attn_model("attn_old", opset=22)
    apply_and_check("attn_opset22_fused", p, ["fuse-attention"], {"FusedAttention": 1}, ["Softmax", "MatMul", "Attention"],
                    feeds, ["fused into FusedAttention(Q 'q', K 'k', V 'v', mask + 'mask') with scale 0.353553"])
    p = attn_model("attn_opset8", opset=8)
    reject_case("attn_opset8", p, "fuse-attention", "the model imports opset 8: Attention needs 23 and the model "
                "imports ONNX opset 8: the fused op's function needs 9 or later", "Softmax")
    p = attn_model("attn_axis", axis=2)
    reject_case("attn_softmax_axis", p, "fuse-attention", "the softmax is over axis 2", "Softmax")
    p = attn_model("attn_scores_out", scores_out=True)
    reject_case("attn_scores_graph_output", p, "fuse-attention", "'s' is also a graph output", "Softmax")
    # Q with an unknown rank
    B, H, S, D = 2, 4, 5, 8
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], name="a/Transpose", perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["s"], name="a/MatMul"),
             helper.make_node("Softmax", ["s"], ["p"], name="a/Softmax", axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["o"], name="a/MatMul_1")]
    qi = helper.make_tensor_value_info("q", TensorProto.FLOAT, None)
    p = save_model("attn_unknown_rank", nodes, [qi, vi("k", [B, H, S, D]), vi("v", [B, H, S, D])],
                   [helper.make_tensor_value_info("o", TensorProto.FLOAT, None)], opset=23)
    reject_case("attn_unknown_shape", p, "fuse-attention", "'q' is not known to be 4-D", "Softmax")


def sdpa_export_model(name, S=6, H=2, D=4, opset=18):
    """Attention as torch's exporter (dynamo=True) writes F.scaled_dot_product_attention:
    Q, K, V from [batch, seq, heads, size] through Transpose [0,2,1,3]; K^T through
    Reshape to 3-D, Transpose [0,2,1], Reshape back (its shape from Shape/Slice/Concat);
    Q and K^T each multiplied by sqrt(scale); the mask added; the softmax guarded by
    Where(IsNaN(p), 0, p); the output transposed back and reshaped. Batch is symbolic."""
    E = H * D
    rng = np.random.default_rng(1)
    inits = [const(n, rng.standard_normal([E, E]) * 0.5) for n in ("wq", "wk", "wv")]
    inits += [const("shp4", [0, 0, H, D], np.int64), const("shp3", [0, 0, E], np.int64), const("m1", [-1], np.int64),
              const("s0", [0], np.int64), const("s2", [2], np.int64), const("s3", [3], np.int64),
              const("s4", [4], np.int64), const("c", np.sqrt(1 / np.sqrt(D))), const("zero", 0.0)]
    N = helper.make_node
    nodes = []
    for w in ("q", "k", "v"):
        nodes += [N("MatMul", ["x", "w" + w], [w + "_lin"]), N("Reshape", [w + "_lin", "shp4"], [w + "_bshd"]),
                  N("Transpose", [w + "_bshd"], [w + "4"], perm=[0, 2, 1, 3])]
    nodes += [N("Shape", ["k4"], ["ksh"]), N("Slice", ["ksh", "s0", "s2"], ["lead"]),
              N("Slice", ["ksh", "s2", "s3"], ["tdim"]), N("Slice", ["ksh", "s3", "s4"], ["ddim"]),
              N("Concat", ["m1", "tdim", "ddim"], ["shape3"], axis=0), N("Reshape", ["k4", "shape3"], ["k3"]),
              N("Transpose", ["k3"], ["k3t"], perm=[0, 2, 1]),
              N("Concat", ["lead", "ddim", "tdim"], ["shape4"], axis=0), N("Reshape", ["k3t", "shape4"], ["kt"]),
              N("Mul", ["q4", "c"], ["qs"]), N("Mul", ["kt", "c"], ["kts"]), N("MatMul", ["qs", "kts"], ["s"]),
              N("Add", ["s", "mask"], ["sm"]), N("Softmax", ["sm"], ["p"], axis=-1), N("IsNaN", ["p"], ["pn"]),
              N("Where", ["pn", "zero", "p"], ["pw"]), N("MatMul", ["pw", "v4"], ["o4"]),
              N("Transpose", ["o4"], ["o"], perm=[0, 2, 1, 3]), N("Reshape", ["o", "shp3"], ["y"])]
    p = save_model(name, nodes, [vi("x", ["batch", S, E]), vi("mask", ["batch", 1, S, S])], [vi("y", ["batch", S, E])],
                   inits, opset=opset)
    mask = np.zeros([2, 1, S, S], np.float32)
    mask[1, :, :, 4:] = -np.inf
    mask[0, 0, 2, :] = -np.inf     # a row masked everywhere: NaN softmax, zeros after the Where
    return p, {"x": rng.standard_normal([2, S, E]).astype(np.float32), "mask": mask}


def test_attention_exported():
    p, feeds = sdpa_export_model("sdpa18")
    text = apply_and_check("attn_torch_export", p, ["fuse-attention"], {"FusedAttention": 1, "MatMul": 3},
                           ["Softmax", "IsNaN", "Where", "Transpose", "Mul", "Shape"], feeds,
                           ["8 nodes (Mul, Mul, MatMul, Add, Softmax, IsNaN, Where, MatMul) fused into FusedAttention",
                            "with scale 0.5, layout BSHD, NaN rows as 0"])
    out = os.path.join(TMP, "attn_torch_export_out.onnx")
    if os.path.exists(out):
        y = ort_run(out, feeds)[0]
        check(np.all(y[0, 2] == 0) and not np.isnan(y).any(), "attn_torch_export: the row masked everywhere is zeros")
        fn = [f for f in onnx.load(out).functions if f.name == "FusedAttention"]
        check(len(fn) == 1 and fn[0].domain == "ai.ogsh" and
              [n.op_type for n in fn[0].node].count("Transpose") == 4 and any(n.op_type == "IsNaN" for n in fn[0].node),
              "attn_torch_export: the model-local function transposes BSHD and has the NaN guard",
              str([n.op_type for f in fn for n in f.node]))
    # the same graph at opset 23: the NaN guard and the layout still make it FusedAttention
    p, feeds = sdpa_export_model("sdpa23", opset=23)
    apply_and_check("attn_torch_export_opset23", p, ["fuse-attention"], {"FusedAttention": 1, "Attention": 0},
                    ["Softmax", "Where"], feeds)


# ---------------------------------------------------------------------------
# BERT and GPT-2 (small), as make_models.py writes them


def to_opset23(m):
    """ReduceMean's axes move from an attribute to an input at opset 18."""
    m = onnx.ModelProto.FromString(m.SerializeToString())
    for n in m.graph.node:
        if n.op_type == "ReduceMean":
            axes = [a for a in n.attribute if a.name == "axes"]
            if axes:
                name = n.name + "_axes"
                m.graph.initializer.append(numpy_helper.from_array(np.array(axes[0].ints, np.int64), name))
                n.input.append(name)
                n.attribute.remove(axes[0])
    del m.opset_import[:]
    m.opset_import.append(helper.make_opsetid("", 23))
    onnx.checker.check_model(m, full_check=True)
    return m


def test_transformers():
    bert = make_models.bert(7, layers=2, d=32, heads=4, d_ff=64, vocab=50, max_pos=16)
    gpt2 = make_models.gpt2(7, layers=2, d=32, heads=4, ctx=16, vocab=50)
    rng = np.random.default_rng(3)
    B, S = 2, 6
    ids = rng.integers(0, 50, [B, S]).astype(np.int64)
    am = np.ones([B, S], np.int64)
    am[1, 4:] = 0
    bert_feeds = {"input_ids": ids, "attention_mask": am, "token_type_ids": (np.arange(S)[None, :] >= 3).astype(np.int64).repeat(B, 0)}
    gpt2_feeds = {"input_ids": ids, "attention_mask": am}
    for name, m, feeds, n_ln, gelu_form in (("bert", bert, bert_feeds, 5, "erf"), ("gpt2", gpt2, gpt2_feeds, 5, "tanh")):
        p14 = os.path.join(TMP, f"{name}14.onnx")
        onnx.save_model(m, p14)
        rc, text = ogsh(p14, "apply fuse-gelu; apply fuse-layernorm; apply fuse-attention")
        check(rc == 0, f"{name} opset 14: passes run", text[-1500:])
        check(text.count("(ai.ogsh: the model's opset is older than 20)") == 2,
              f"{name} opset 14: both GELUs fused into ogsh's Gelu", text[-3000:])
        check(text.count("(ai.ogsh: the model's opset is older than 17)") == n_ln,
              f"{name} opset 14: all {n_ln} layer norms fused into ogsh's LayerNormalization", text[-3000:])
        check(text.count("fused into FusedAttention(") == 2 and text.count("layout BSHD") == 2,
              f"{name} opset 14: both attention blocks fused into FusedAttention (BSHD)", text[-3000:])
        # (GPT-2's K and V transposes stay: its present key/value outputs read them)
        gone_tr = ["Transpose"] if name == "bert" else []
        apply_and_check(f"{name} opset 14", p14, ["fuse-gelu", "fuse-layernorm", "fuse-attention"],
                        {"Gelu": 2, "LayerNormalization": n_ln, "FusedAttention": 2},
                        ["Erf", "Softmax", "Sqrt", "Pow", "ReduceMean", "Div"] + gone_tr, feeds)
        out14 = os.path.join(TMP, f"{name}_opset_14_out.onnx")
        ogsh_op_check(f"{name} opset 14", out14, "Gelu", 2, ["erf" if gelu_form == "erf" else "tanh"])
        ogsh_op_check(f"{name} opset 14", out14, "LayerNormalization", n_ln, ["last1"])
        # optimize: the Gelus go into the FC1 Gemms (fuse-activation takes ogsh's Gelu too)
        inp = os.path.join(TMP, f"{name}14_in.npz")
        ref = os.path.join(TMP, f"{name}14_ref.npz")
        np.savez(inp, **feeds)
        rc, text = ogsh(p14, f"run --inputs={inp} --save-outputs={ref}; optimize --quiet; "
                             f"run --inputs={inp} --expect={ref} --rtol=1e-4 --atol=1e-5; ops --json")
        check(rc == 0, f"{name} opset 14: optimize keeps the numbers", text[-2500:])
        try:
            counts = {o["op"]: o["count"] for o in json.loads(text[text.rindex("\n[\n") + 1:])}
        except ValueError:
            counts = {}
        check(not counts.get("Gelu") and counts.get("LayerNormalization") == n_ln and counts.get("FusedGemm", 0) >= 2,
              f"{name} opset 14: optimize takes both Gelus into Gemms, keeps the layer norms", str(counts))
        p23 = os.path.join(TMP, f"{name}23.onnx")
        onnx.save_model(to_opset23(m), p23)
        # Q, K, V come from [batch, seq, heads, size] through transposes: FusedAttention BSHD
        apply_and_check(f"{name} opset 23", p23, ["fuse-gelu", "fuse-layernorm", "fuse-attention"],
                        {"Gelu": 2, "LayerNormalization": n_ln, "FusedAttention": 2},
                        ["Erf", "Softmax", "Sqrt", "Pow", "ReduceMean", "Div", "Attention"] + gone_tr, feeds)
        if name == "gpt2":
            out = os.path.join(TMP, f"{name}_opset_23_out.onnx")
            if os.path.exists(out):
                tanh = [n for n in onnx.load(out).graph.node if n.op_type == "Tanh"]
                check(not tanh, "gpt2: the tanh-form GELUs are gone")


# ---------------------------------------------------------------------------
# hoist-gather


def hoist_model(name, graph_output_ln2=False):
    """A small encoder tail: (x + pos + c) -> LN -> MatMul, Add, Gelu, MatMul, Add -> residual Add -> LN,
    then the class token, Gather(., 0, axis=1)."""
    rng = np.random.default_rng(3)
    nodes = [
        helper.make_node("Add", ["x", "pos"], ["a0"], name="addpos"),
        helper.make_node("Add", ["a0", "c1"], ["a"], name="addc"),
        helper.make_node("LayerNormalization", ["a", "g1", "b1"], ["ln1"], name="ln1", axis=-1),
        helper.make_node("MatMul", ["ln1", "w1"], ["h"], name="fc1"),
        helper.make_node("Add", ["h", "bias1"], ["h2"], name="fc1b"),
        helper.make_node("Gelu", ["h2"], ["h3"], name="gelu"),
        helper.make_node("MatMul", ["h3", "w2"], ["o"], name="fc2"),
        helper.make_node("Add", ["o", "bias2"], ["o2"], name="fc2b"),
        helper.make_node("Add", ["a", "o2"], ["res"], name="resid"),
        helper.make_node("LayerNormalization", ["res", "g2", "b2"], ["ln2"], name="ln2"),
        helper.make_node("Gather", ["ln2", "zero"], ["cls"], name="cls", axis=1),
    ]
    inits = [numpy_helper.from_array(rng.standard_normal(sh).astype(np.float32), n) for n, sh in
             (("pos", (1, 5, 8)), ("c1", (1, 1, 8)), ("g1", (8,)), ("b1", (8,)), ("w1", (8, 16)), ("bias1", (16,)),
              ("w2", (16, 8)), ("bias2", (8,)), ("g2", (8,)), ("b2", (8,)))]
    inits.append(numpy_helper.from_array(np.array(0, np.int64), "zero"))
    outs = [vi("cls", ["batch", 8])] + ([vi("ln2", ["batch", 5, 8])] if graph_output_ln2 else [])
    return save_model(name, nodes, [vi("x", ["batch", 5, 8])], outs, inits)


def test_hoist_gather():
    path = hoist_model("hoist")
    feeds = {"x": np.random.default_rng(4).standard_normal((3, 5, 8)).astype(np.float32)}
    text = apply_and_check("hoist-gather encoder tail", path, ["hoist-gather"],
                           {"Gather": 3, "LayerNormalization": 2, "MatMul": 2, "Add": 5, "Gelu": 1}, [],
                           feeds, want_text=["10 rewritten", "onto its inputs that have that axis"])
    out = os.path.join(TMP, "hoist-gather_encoder_tail_out.onnx")
    if os.path.exists(out):
        m = onnx.load(out)
        gathered = sorted(n.input[0] for n in m.graph.node if n.op_type == "Gather")
        check(gathered == ["c1", "pos", "x"], "hoist-gather: the Gathers end on the input, pos and c1", gathered)
        ln = [n for n in m.graph.node if n.op_type == "LayerNormalization"]
        check(all(a.i == -1 for n in ln for a in n.attribute if a.name == "axis"),
              "hoist-gather: the LayerNorms normalize the last axis", str(ln))
    # optimize: FLOPs of the block drop by the sequence length
    rc, t2 = ogsh(path, "optimize --quiet; stats")
    check(rc == 0, "hoist-gather: optimize runs", t2[-800:])
    # rejections: the LayerNorm's output is also a graph output; an index that is not a constant
    reject_case("hoist-gather-output", hoist_model("hoist_out", graph_output_ln2=True), "hoist-gather",
                "'ln2' is also a graph output", "LayerNormalization")
    m = onnx.load(path)
    m.graph.initializer.pop()   # 'zero' becomes a graph input
    m.graph.input.append(vi("zero", [], TensorProto.INT64))
    p2 = os.path.join(TMP, "hoist_idx.onnx")
    onnx.save_model(m, p2)
    rc, t3 = ogsh(p2, "apply hoist-gather")
    check(rc == 0 and "nothing changed" in t3, "hoist-gather: indices not a constant leave the model alone", t3[-800:])
    # more indices than rows (a lookup): the node before would compute more, so the Gather stays; two of five move
    for idx, moves in (([0, 1, 2, 3, 4, 0, 1], False), ([0, 2], True)):
        m = onnx.load(path)
        m.graph.initializer[-1].CopyFrom(numpy_helper.from_array(np.array(idx, np.int64), "zero"))
        m.graph.output[0].CopyFrom(vi("cls", ["batch", len(idx), 8]))
        p3 = os.path.join(TMP, f"hoist_{len(idx)}.onnx")
        onnx.save_model(m, p3)
        rc, t4 = ogsh(p3, "apply hoist-gather")
        check(rc == 0 and (("nothing changed" in t4) != moves), f"hoist-gather: {len(idx)} indices of 5 rows "
              + ("move" if moves else "stay"), t4[-800:])


def test_explain():
    for p, word in (("fuse-gelu", "erf"), ("fuse-layernorm", "ReduceMean"), ("fuse-attention", "softmax"),
                    ("hoist-gather", "class token")):
        r = subprocess.run([OGSH, "-c", f"explain {p}"], capture_output=True, text=True)
        check(r.returncode == 0 and word in r.stdout, f"explain {p}", (r.stdout + r.stderr)[-500:])


def main():
    global OGSH, TMP
    if len(sys.argv) != 2:
        print("usage: test_fuse_transformer.py OGSH", file=sys.stderr)
        return 2
    OGSH = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory(prefix="ogsh-ftr-") as tmp:
        TMP = tmp
        for t in (test_gelu, test_layernorm, test_attention_handmade, test_attention_exported, test_transformers,
                  test_hoist_gather, test_explain):
            try:
                t()
            except Exception as e:  # noqa: BLE001
                import traceback
                traceback.print_exc()
                check(False, f"{t.__name__} raised {type(e).__name__}: {e}")
    print(f"{COUNT[0] - len(FAILS)}/{COUNT[0]} checks passed")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
