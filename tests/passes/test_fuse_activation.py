#!/usr/bin/env python3
"""Tests of fuse-activation and fuse-elementwise (ogsh's fused ops FusedConv,
FusedGemm and Pointwise, and the model-local functions that define them).

usage: test_fuse_activation.py OGSH [--no-models]

Builds small models with onnx.helper in a temporary folder and, for each,
applies one pass with ogsh and checks:
  1. the structure of the result (ops, node inputs and attributes, read back
     with `nodes --json` and from the saved model; graph outputs unchanged),
  2. the report: rewrites counted, each rejection's reason shown,
  3. numbers: `run --expect` against the outputs before the pass (rtol 1e-4),
  4. the saved model passes onnx.checker (full_check), and onnxruntime gives
     the same outputs for it (it runs the fused ops through their model-local
     functions) as for the original.
Then `optimize --level=all` on the demo CNN and on the resnet50 and
mobilenetv2 of tests/models/make_models.py (skipped with --no-models):
numbers of the two fusion passes alone (rtol 1e-4), numbers of the whole
pipeline, onnx.checker and onnxruntime. The generated ResNet-50 has random
weights and outputs up to ~2000: fuse-conv-bn's rounding alone moves the
small ones by more than 1e-5 + 1e-4*|b|, so the whole-pipeline checks use
an atol of 1e-6 x the largest output (the two passes here are checked
alone at the strict tolerance).
Prints one line per check; exits 1 if any failed.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

try:
    import onnxruntime as ort
except ImportError:  # the numbers are still checked by ogsh itself
    ort = None

ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
OGSH = ARGS[0] if ARGS else "ogsh"
NO_MODELS = "--no-models" in sys.argv
TMP = tempfile.mkdtemp(prefix="ogsh-fact-")
RNG = np.random.default_rng(7)
FAILED = []
HERE = os.path.dirname(os.path.abspath(__file__))


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + ("" if ok or not detail else ": " + detail))
    sys.stdout.flush()
    if not ok:
        FAILED.append(name)


def f32(*shape, lo=None, hi=None):
    if lo is not None:
        return RNG.uniform(lo, hi, shape).astype(np.float32)
    return RNG.normal(size=shape).astype(np.float32)


def init(name, arr):
    return nh.from_array(np.asarray(arr), name)


def vi(name, shape, dt=T.FLOAT):
    return h.make_tensor_value_info(name, dt, shape)


def model(nodes, inputs, outputs, inits, opset=17):
    g = h.make_graph(nodes, "g", inputs, outputs, inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    try:
        inf = onnx.shape_inference.infer_shapes(m, strict_mode=True)
        for o, io in zip(m.graph.output, inf.graph.output):
            if io.type.tensor_type.HasField("shape"):
                o.type.CopyFrom(io.type)
    except Exception:  # noqa: BLE001 - not valid ONNX on purpose
        pass
    return m


def sh(path, script, timeout=300):
    args = [OGSH] + ([path] if path else []) + ["-c", script]
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def reports(so, n):
    """The first n JSON reports printed by `apply ... --json`."""
    reps, pos, dec = [], 0, json.JSONDecoder()
    while len(reps) < n:
        while pos < len(so) and so[pos].isspace():
            pos += 1
        obj, pos = dec.raw_decode(so, pos)
        reps.append(obj)
    return reps


def ort_same(name, src, out, feeds, atol=1e-5):
    if ort is None:
        print("skip " + name + ": onnxruntime not installed")
        return
    try:
        a = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, feeds)
        b = ort.InferenceSession(out, providers=["CPUExecutionProvider"]).run(None, feeds)
        bad = [i for i in range(len(a)) if a[i].shape != b[i].shape or
               not np.allclose(b[i], a[i], rtol=1e-4, atol=atol)]
        err = max(float(np.max(np.abs(a[i] - b[i]))) if a[i].size and a[i].shape == b[i].shape else 0
                  for i in range(len(a)))
        check(name + ": onnxruntime same outputs", not bad, "outputs %s differ, max abs %g" % (bad, err))
    except Exception as e:  # noqa: BLE001
        check(name + ": onnxruntime same outputs", False, str(e)[:400])


def checker(name, path):
    try:
        onnx.checker.check_model(path, full_check=True)
        check(name + ": onnx.checker", True)
    except Exception as e:  # noqa: BLE001 - any checker complaint is a failure
        check(name + ": onnx.checker", False, str(e)[:400])


def case(name, m, feeds, pass_cmd, rewritten=None, rejected=(), notes=(), ops=None, inputs_of=None,
         changed=None, attrs=None, use_ort=True, extra=None, rtol=1e-4):
    """Runs pass_cmd on model m. rejected/notes: substrings that must appear
    in rejection/note messages ("node: text"). ops: {op: count} of the
    result. inputs_of: {op: number of inputs of its (first) node}. attrs:
    {attribute: value} of the (first) fused node. extra(saved model) ->
    (ok, detail)."""
    d = os.path.join(TMP, "".join(ch if ch.isalnum() else "_" for ch in name))
    os.makedirs(d, exist_ok=True)
    src, out, inp, exp = (os.path.join(d, f) for f in ("in.onnx", "out.onnx", "in.npz", "expect.npz"))
    onnx.save(m, src)
    np.savez(inp, **feeds)

    # 2. the report
    cmds = [c.strip() for c in pass_cmd.split(";")]
    rc, so, se = sh(src, "; ".join(c + " --json" for c in cmds))
    try:
        reps = reports(so, len(cmds))
    except ValueError:
        check(name + ": report", False, "no JSON report (rc %d): %s %s" % (rc, so[-300:], se[-300:]))
        return
    msgs = sum((r.get("messages", []) for r in reps), [])
    rep = {"rewritten": sum(r["rewritten"] for r in reps), "rejected": sum(r["rejected"] for r in reps),
           "changed": any(r["changed"] for r in reps)}
    texts = {k: [("%s: %s" % (x.get("node"), x["text"])) for x in msgs if x["kind"] == k]
             for k in ("rewrote", "rejected", "note")}
    ok, why = rc == 0, "rc %d %s" % (rc, se.strip())
    if ok and rewritten is not None and rep["rewritten"] != rewritten:
        ok, why = False, "%d rewritten, want %d: %s" % (rep["rewritten"], rewritten, msgs)
    if ok and len(rejected) != rep["rejected"]:
        ok, why = False, "%d rejected, want %d: %s" % (rep["rejected"], len(rejected), texts["rejected"])
    for want in rejected:
        if ok and not any(want in t for t in texts["rejected"]):
            ok, why = False, "no rejection saying %r in %s" % (want, texts["rejected"])
    for want in notes:
        if ok and not any(want in t for t in texts["note"]):
            ok, why = False, "no note saying %r in %s" % (want, texts["note"])
    if ok and changed is not None and rep["changed"] != changed:
        ok, why = False, "changed is %s" % rep["changed"]
    shown = "; ".join(texts["rejected"])[:150]
    check(name + ": report" + (" (%s)" % shown if shown else ""), ok, why)
    if not rep["changed"]:
        return

    # 3. numbers before and after, by ogsh
    rc, so, se = sh(src, "run --inputs=%s --save-outputs=%s; %s; run --inputs=%s --expect=%s --rtol=%g --atol=1e-5;"
                    " save %s --force" % (inp, exp, pass_cmd, inp, exp, rtol, out))
    check(name + ": ogsh numbers before/after", rc == 0, (so + se)[-600:])
    if not os.path.exists(out):
        check(name + ": saved", False, (so + se)[-300:])
        return

    # 1. structure
    rc, so, se = sh(out, "nodes --json")
    try:
        nodes = json.loads(so)
    except ValueError:
        check(name + ": structure", False, "nodes --json: rc %d %s" % (rc, (so + se)[-300:]))
        return
    got = {}
    for n in nodes:
        op = n["op"].split(":")[-1]
        got[op] = got.get(op, 0) + 1
    ok, why = True, ""
    if ops is not None and got != ops:
        ok, why = False, "ops %s, want %s" % (got, ops)
    res = onnx.load(out)
    for op, k in (inputs_of or {}).items():
        ins = [list(n.input) for n in res.graph.node if n.op_type == op]
        if ok and (not ins or len([i for i in ins[0] if i]) != k):
            ok, why = False, "%s has inputs %s, want %d" % (op, ins, k)
    if ok and [o.name for o in res.graph.output] != [o.name for o in m.graph.output]:
        ok, why = False, "graph outputs %s" % [o.name for o in res.graph.output]
    fused = [n for n in res.graph.node if n.domain == "ai.ogsh"]
    if ok and fused:
        fn = {(f.name, f.overload) for f in res.functions if f.domain == "ai.ogsh"}
        miss = [(n.op_type, n.overload) for n in fused if (n.op_type, n.overload) not in fn]
        imports = {o.domain: o.version for o in res.opset_import}
        if miss:
            ok, why = False, "no function for %s" % miss
        elif res.ir_version < 10 or imports.get("ai.ogsh") != 1:
            ok, why = False, "ir_version %d, imports %s" % (res.ir_version, imports)
    for k, v in (attrs or {}).items():
        a = [x for x in fused[0].attribute if x.name == k] if fused else []
        val = h.get_attribute_value(a[0]) if a else None
        if isinstance(val, bytes):
            val = val.decode()
        if isinstance(val, list) and val and isinstance(val[0], float):
            val = [round(x, 5) for x in val]
        if ok and val != v:
            ok, why = False, "attribute %s is %r, want %r" % (k, val, v)
    if ok and extra:
        ok, why = extra(res)
    check(name + ": structure " + str(got), ok, why)

    # 4. onnx.checker and onnxruntime
    checker(name, out)
    if use_ort:
        ort_same(name, src, out, feeds)


def overloads(res):
    return sorted(f.overload for f in res.functions)


# ---------------------------------------------------------------------------
# fuse-activation
# ---------------------------------------------------------------------------

def conv_act(act_nodes, opset=17, bias=True, xs=(1, 3, 8, 8), out="out", extra_inits=(), extra_inputs=()):
    ins = ["x", "w", "b"] if bias else ["x", "w"]
    inits = [init("w", f32(4, 3, 3, 3))] + ([init("b", f32(4))] if bias else []) + list(extra_inits)
    return model([h.make_node("Conv", ins, ["y"], name="conv1", pads=[1, 1, 1, 1])] + act_nodes,
                 [vi("x", list(xs))] + list(extra_inputs), [vi(out, None)], inits, opset=opset)


def activation_cases():
    x = {"x": f32(1, 3, 8, 8)}
    A = "apply fuse-activation"
    case("act relu", conv_act([h.make_node("Relu", ["y"], ["out"], name="relu1")]), x, A, rewritten=1,
         ops={"FusedConv": 1}, inputs_of={"FusedConv": 3},
         attrs={"activation": "Relu", "pads": [1, 1, 1, 1]}, extra=lambda r: (overloads(r) == ["Relu"], overloads(r)))
    case("act relu6 clip (bounds from initializers, no bias)",
         conv_act([h.make_node("Clip", ["y", "lo", "hi"], ["out"], name="clip1")], bias=False,
                  extra_inits=[init("lo", np.float32(0)), init("hi", np.float32(6))]),
         {"x": f32(1, 3, 8, 8) * 3}, A, rewritten=1, ops={"FusedConv": 1}, inputs_of={"FusedConv": 2},
         attrs={"activation": "Clip", "activation_params": [0.0, 6.0]},
         extra=lambda r: (not r.graph.initializer or all(i.name not in ("lo", "hi") for i in r.graph.initializer)
                          and overloads(r) == ["Clip_noB"], "bounds kept or overloads %s" % overloads(r)))
    case("act clip max only (Constant node)",
         conv_act([h.make_node("Constant", [], ["hi"], value=init("hi", np.float32(0.5)), name="k"),
                   h.make_node("Clip", ["y", "", "hi"], ["out"], name="clip1")]),
         x, A, rewritten=1, ops={"FusedConv": 1})
    case("act clip opset 10 (attributes)",
         conv_act([h.make_node("Clip", ["y"], ["out"], name="clip1", min=-1.0, max=1.0)], opset=10),
         x, A, rewritten=1, ops={"FusedConv": 1}, attrs={"activation_params": [-1.0, 1.0]})
    case("act leakyrelu", conv_act([h.make_node("LeakyRelu", ["y"], ["out"], name="lr", alpha=0.2)]), x, A,
         rewritten=1, ops={"FusedConv": 1}, attrs={"activation": "LeakyRelu", "activation_params": [0.2]})
    case("act sigmoid", conv_act([h.make_node("Sigmoid", ["y"], ["out"], name="sg")]), x, A, rewritten=1,
         ops={"FusedConv": 1})
    case("act hardsigmoid", conv_act([h.make_node("HardSigmoid", ["y"], ["out"], name="hs", alpha=0.3, beta=0.4)]),
         x, A, rewritten=1, ops={"FusedConv": 1}, attrs={"activation_params": [0.3, 0.4]})
    case("act hardswish", conv_act([h.make_node("HardSwish", ["y"], ["out"], name="hw")]), x, A, rewritten=1,
         ops={"FusedConv": 1})
    case("act tanh", conv_act([h.make_node("Tanh", ["y"], ["out"], name="th")]), x, A, rewritten=1,
         ops={"FusedConv": 1})
    case("act gelu erf (opset 20)", conv_act([h.make_node("Gelu", ["y"], ["out"], name="ge")], opset=20), x, A,
         rewritten=1, ops={"FusedConv": 1}, attrs={"activation_params": [0.0]})
    case("act gelu tanh (opset 20)",
         conv_act([h.make_node("Gelu", ["y"], ["out"], name="ge", approximate="tanh")], opset=20), x, A,
         rewritten=1, ops={"FusedConv": 1}, attrs={"activation_params": [1.0]})
    # two convs, same variant: one function
    m = model([h.make_node("Conv", ["x", "w", "b"], ["y1"], name="c1", pads=[1, 1, 1, 1]),
               h.make_node("Relu", ["y1"], ["r1"], name="relu1"),
               h.make_node("Conv", ["r1", "w2", "b"], ["y2"], name="c2", strides=[2, 2]),
               h.make_node("Relu", ["y2"], ["out"], name="relu2")],
              [vi("x", [1, 3, 8, 8])], [vi("out", None)],
              [init("w", f32(4, 3, 3, 3)), init("w2", f32(4, 4, 1, 1)), init("b", f32(4))])
    case("act two convs share a function", m, x, A, rewritten=2, ops={"FusedConv": 2},
         extra=lambda r: (len(r.functions) == 1, "%d functions" % len(r.functions)))

    # Gemm
    a = {"a": f32(4, 5)}
    m = model([h.make_node("Gemm", ["a", "wt", "c"], ["y"], name="fc", transB=1, alpha=0.5, beta=2.0),
               h.make_node("Relu", ["y"], ["out"], name="relu1")],
              [vi("a", [4, 5])], [vi("out", None)], [init("wt", f32(6, 5)), init("c", f32(6))])
    case("act gemm relu (transB, alpha, beta)", m, a, A, rewritten=1, ops={"FusedGemm": 1},
         attrs={"transB": 1, "alpha": 0.5, "beta": 2.0, "activation": "Relu"})
    m = model([h.make_node("Gemm", ["a", "w"], ["y"], name="fc"),
               h.make_node("Sigmoid", ["y"], ["out"], name="sg")],
              [vi("a", [4, 5])], [vi("out", None)], [init("w", f32(5, 6))])
    case("act gemm no C sigmoid", m, a, A, rewritten=1, ops={"FusedGemm": 1}, inputs_of={"FusedGemm": 2})

    # residuals
    m = model([h.make_node("Conv", ["x", "w", "b"], ["y"], name="conv1", pads=[1, 1, 1, 1]),
               h.make_node("Add", ["y", "x"], ["s"], name="add1"),
               h.make_node("Relu", ["s"], ["out"], name="relu1")],
              [vi("x", [1, 4, 8, 8])], [vi("out", None)], [init("w", f32(4, 4, 3, 3)), init("b", f32(4))])
    x4 = {"x": f32(1, 4, 8, 8)}
    case("act residual relu", m, x4, A, rewritten=1, ops={"FusedConv": 1}, inputs_of={"FusedConv": 4},
         extra=lambda r: (overloads(r) == ["Relu_Z"], overloads(r)))
    m = model([h.make_node("Conv", ["x", "w"], ["y"], name="conv1", pads=[1, 1, 1, 1]),
               h.make_node("Add", ["z", "y"], ["out"], name="add1")],
              [vi("x", [1, 4, 8, 8]), vi("z", [1, 4, 8, 8])], [vi("out", None)], [init("w", f32(4, 4, 3, 3))])
    case("act residual alone, no bias (zero bias added)", m, dict(x4, z=f32(1, 4, 8, 8)), A, rewritten=1,
         ops={"FusedConv": 1}, inputs_of={"FusedConv": 4}, attrs={"activation": ""},
         extra=lambda r: (overloads(r) == ["Z"], overloads(r)))
    m = model([h.make_node("Conv", ["x", "w", "b"], ["y"], name="conv1", pads=[1, 1, 1, 1]),
               h.make_node("Add", ["y", "x"], ["s"], name="add1"),
               h.make_node("Relu", ["s"], ["out"], name="relu1")],
              [vi("x", [1, 4, 8, 8])], [vi("out", None), vi("s", None)],
              [init("w", f32(4, 4, 3, 3)), init("b", f32(4))])
    case("act residual whose sum is a graph output", m, x4, A, rewritten=1, ops={"FusedConv": 1, "Relu": 1},
         notes=["is also a graph output"])
    m = model([h.make_node("Conv", ["x", "w", "b"], ["y1"], name="c1", pads=[1, 1, 1, 1]),
               h.make_node("Conv", ["x", "w2"], ["y2"], name="c2"),
               h.make_node("Add", ["y1", "y2"], ["s"], name="add1"),
               h.make_node("Clip", ["s", "lo", "hi"], ["out"], name="relu6")],
              [vi("x", [1, 4, 8, 8])], [vi("out", None)],
              [init("w", f32(4, 4, 3, 3)), init("w2", f32(4, 4, 1, 1)), init("b", f32(4)),
               init("lo", np.float32(0)), init("hi", np.float32(6))])
    case("act residual of two convs", m, x4, A, rewritten=1, ops={"FusedConv": 1, "Conv": 1})

    # residuals after a Gemm: Y = act(Gemm(A, B, C) + Z); their data from a generator of their own, so
    # the cases after them keep theirs
    rng2 = np.random.default_rng(11)

    def g32(*shape):
        return rng2.normal(size=shape).astype(np.float32)

    m = model([h.make_node("Gemm", ["a", "w"], ["y"], name="fc"),
               h.make_node("Add", ["y", "r"], ["s"], name="add1"),
               h.make_node("Relu", ["s"], ["out"], name="relu1")],
              [vi("a", [4, 5]), vi("r", [4, 6])], [vi("out", None)], [init("w", g32(5, 6))])
    case("act gemm residual relu, no C (zero bias added)", m, dict(a, r=g32(4, 6)), A, rewritten=1,
         ops={"FusedGemm": 1}, inputs_of={"FusedGemm": 4}, attrs={"activation": "Relu"},
         extra=lambda r: (overloads(r) == ["Relu_Z"], overloads(r)))
    m = model([h.make_node("Gemm", ["a", "wt", "c"], ["y"], name="fc", transB=1, beta=0.5),
               h.make_node("Add", ["r", "y"], ["out"], name="add1")],
              [vi("a", [4, 5]), vi("r", [4, 6])], [vi("out", None)], [init("wt", g32(6, 5)), init("c", g32(6))])
    case("act gemm residual alone (transB, beta)", m, dict(a, r=g32(4, 6)), A, rewritten=1, ops={"FusedGemm": 1},
         inputs_of={"FusedGemm": 4}, attrs={"activation": "", "beta": 0.5})
    # fuse-matmul-add's form: MatMul of [B, S, K] + bias -> Reshape, Gemm, Reshape back; the residual and
    # the Gelu after the Reshape back fuse into the Gemm, Z reshaped to [-1, N], the Reshape after it
    x3 = {"x": g32(2, 3, 5), "r": g32(2, 3, 6)}
    m = model([h.make_node("MatMul", ["x", "w"], ["mm"], name="proj"),
               h.make_node("Add", ["mm", "b"], ["y"], name="bias"),
               h.make_node("Add", ["y", "r"], ["s"], name="res"),
               h.make_node("Gelu", ["s"], ["out"], name="ge")],
              [vi("x", ["batch", 3, 5]), vi("r", ["batch", 3, 6])], [vi("out", None)],
              [init("w", g32(5, 6)), init("b", g32(6))], opset=20)
    case("act gemm through fuse-matmul-add's reshape: residual and gelu", m, x3,
         "apply fuse-matmul-add; apply fuse-activation", rewritten=2,
         ops={"FusedGemm": 1, "Reshape": 3}, inputs_of={"FusedGemm": 4},
         attrs={"activation": "Gelu"})
    m = model([h.make_node("MatMul", ["x", "w"], ["mm"], name="proj"),
               h.make_node("Add", ["mm", "b"], ["y"], name="bias"),
               h.make_node("Relu", ["y"], ["out"], name="relu1")],
              [vi("x", ["batch", 3, 5])], [vi("out", None)], [init("w", g32(5, 6)), init("b", g32(6))])
    case("act gemm through fuse-matmul-add's reshape: relu", m, {"x": g32(2, 3, 5)},
         "apply fuse-matmul-add; apply fuse-activation", rewritten=2,
         ops={"FusedGemm": 1, "Reshape": 2}, inputs_of={"FusedGemm": 3})
    m = model([h.make_node("MatMul", ["x", "w"], ["mm"], name="proj"),
               h.make_node("Add", ["mm", "b"], ["y"], name="bias"),
               h.make_node("Add", ["y", "r"], ["out"], name="res")],
              [vi("x", ["batch", 3, 5]), vi("r", [3, 6])], [vi("out", None)], [init("w", g32(5, 6)), init("b", g32(6))])
    case("act reject: gemm residual broadcast over the batch", m, {"x": g32(2, 3, 5), "r": g32(3, 6)},
         "apply fuse-matmul-add; apply fuse-activation", rewritten=1, ops={"Gemm": 1, "Add": 1, "Reshape": 2},
         rejected=["res: the Add's other input 'r' is not known to have the shape of proj's output"])

    # rejections
    m = conv_act([h.make_node("Relu", ["y"], ["out"], name="relu1"), h.make_node("Neg", ["y"], ["o2"], name="neg")])
    m.graph.output.append(vi("o2", None))
    case("act reject: conv output has 2 readers", m, x, A, rewritten=0, changed=False,
         rejected=["relu1: its input comes from conv1, whose output 'y' has 2 readers"])
    m = conv_act([h.make_node("Relu", ["y"], ["out"], name="relu1")])
    m.graph.output.append(vi("y", None))
    case("act reject: conv output is a graph output", m, x, A, rewritten=0, changed=False,
         rejected=["relu1: its input comes from conv1, whose output 'y' is also a graph output"])
    m = conv_act([h.make_node("Clip", ["y", "lo", "hi"], ["out"], name="clip1")],
                 extra_inits=[init("lo", np.float32(0))], extra_inputs=[vi("hi", [])])
    case("act reject: clip max not constant", m, dict(x, hi=np.array(2, np.float32)), A, rewritten=0,
         changed=False, rejected=["clip1: its max is not a constant"])
    m = conv_act([h.make_node("Clip", ["y", "lo", "hi"], ["out"], name="clip1")],
                 extra_inits=[init("lo", np.float32(3)), init("hi", np.float32(1))])
    case("act reject: clip min above max", m, x, A, rewritten=0, changed=False,
         rejected=["clip1: its min 3 is above its max 1"])
    m = conv_act([h.make_node("Gelu", ["y"], ["out"], name="ge", approximate="fast")], opset=20)
    case("act reject: gelu approximate unknown", m, x, A, rewritten=0, changed=False,
         rejected=["ge: approximate='fast' is neither 'none' nor 'tanh'"])
    m = conv_act([h.make_node("Add", ["y", "k"], ["out"], name="add1")], extra_inits=[init("k", f32(4, 1, 1))])
    case("act reject: add of a constant", m, x, A, rewritten=0, changed=False,
         rejected=["add1: the Add's other input 'k' is a constant, not a residual"])
    m = conv_act([h.make_node("Add", ["y", "z"], ["out"], name="add1")], extra_inputs=[vi("z", [2, 4, 8, 8])])
    case("act reject: add broadcasts the conv output", m, dict(x, z=f32(2, 4, 8, 8)), A, rewritten=0,
         changed=False, rejected=["add1: the sum is float32[2,4,8,8] but conv1's output is float32[1,4,8,8]: the Add may"])
    m = conv_act([h.make_node("Add", ["y", "z"], ["out"], name="add1")], extra_inputs=[vi("z", ["n", 4, 8, 8])])
    case("act reject: add may broadcast (symbolic dim)", m, dict(x, z=f32(1, 4, 8, 8)), A, rewritten=0,
         changed=False, rejected=["add1: the sum is float32[n,4,8,8] but conv1's output is float32[1,4,8,8]"])
    m = conv_act([h.make_node("Add", ["y", "z"], ["out"], name="add1")], extra_inputs=[vi("z", None)])
    case("act reject: add with an unknown shape", m, dict(x, z=f32(1, 4, 8, 8)), A, rewritten=0, changed=False,
         rejected=["add1: the shapes of conv1's output and of the sum are not known to be the same"])
    m = conv_act([h.make_node("Add", ["y", "y"], ["out"], name="add1")])
    case("act reject: add of the conv output to itself", m, x, A, rewritten=0, changed=False,
         rejected=["add1: both inputs of the Add are conv1's output"])
    m = model([h.make_node("Gemm", ["a", "w"], ["y"], name="fc"),
               h.make_node("Add", ["y", "r"], ["s"], name="add1")],
              [vi("a", [4, 5]), vi("r", ["n", 6])], [vi("s", None)], [init("w", f32(5, 6))])
    case("act reject: gemm residual that may broadcast", m, dict(a, r=f32(4, 6)), A, rewritten=0, changed=False,
         rejected=["add1: the Add's other input 'r' is not known to have the shape of fc's output"])
    m = model([h.make_node("Gemm", ["a", "w"], ["y"], name="fc"),
               h.make_node("Add", ["y", "k"], ["s"], name="add1")],
              [vi("a", [4, 5])], [vi("s", None)], [init("w", g32(5, 6)), init("k", g32(6))])
    case("act reject: gemm add of a constant", m, a, A, rewritten=0, changed=False,
         rejected=["add1: the Add's other input 'k' is a constant, not a residual: fuse-matmul-add folds"])
    m = conv_act([h.make_node("Relu", ["y"], ["out"], name="relu1")], opset=8)
    case("act reject: opset 8", m, x, A, rewritten=0, changed=False,
         rejected=["relu1: the model imports ONNX opset 8: the fused op's function needs 9 or later"])
    # a residual fuses even when its activation cannot
    m = model([h.make_node("Conv", ["x", "w", "b"], ["y"], name="conv1", pads=[1, 1, 1, 1]),
               h.make_node("Add", ["y", "x"], ["s"], name="add1"),
               h.make_node("Clip", ["s", "lo", "hi"], ["out"], name="clip1")],
              [vi("x", [1, 4, 8, 8]), vi("hi", [])], [vi("out", None)],
              [init("w", f32(4, 4, 3, 3)), init("b", f32(4)), init("lo", np.float32(0))])
    case("act residual fuses, its clip does not", m, dict(x4, hi=np.array(1, np.float32)), A, rewritten=1,
         ops={"FusedConv": 1, "Clip": 1}, rejected=["clip1: its max is not a constant (only the residual Add is fused)"])


# ---------------------------------------------------------------------------
# fuse-elementwise
# ---------------------------------------------------------------------------

def expr_of(res):
    for n in res.graph.node:
        if n.op_type == "Pointwise":
            for a in n.attribute:
                if a.name == "expr":
                    return a.s.decode()
    return None


def expr_is(want):
    return lambda r: (expr_of(r) == want, "expr %r, want %r" % (expr_of(r), want))


def elementwise_cases():
    E = "apply fuse-elementwise"
    feeds = {"a": f32(2, 3, 4), "b": f32(3, 1), "c": f32(4)}
    ins = [vi("a", [2, 3, 4]), vi("b", [3, 1]), vi("c", [4])]
    m = model([h.make_node("Mul", ["a", "b"], ["m"], name="mul1"),
               h.make_node("Add", ["m", "c"], ["s"], name="add1"),
               h.make_node("Relu", ["s"], ["out"], name="relu1")], ins, [vi("out", None)], [])
    case("ew chain mul add relu (broadcasting)", m, feeds, E, rewritten=1, ops={"Pointwise": 1},
         inputs_of={"Pointwise": 3}, extra=expr_is("relu(x0 * x1 + x2)"))
    # a tree with literals (an initializer and a Constant node) and order-keeping parentheses
    m = model([h.make_node("Add", ["a", "b"], ["p"], name="add1"),
               h.make_node("Sub", ["c", "a"], ["q"], name="sub1"),
               h.make_node("Constant", [], ["two"], value=init("two", np.float32(2)), name="k2"),
               h.make_node("Mul", ["q", "two"], ["q2"], name="mul2"),
               h.make_node("Sub", ["p", "q2"], ["d"], name="sub2"),
               h.make_node("Mul", ["d", "half"], ["e"], name="mul3"),
               h.make_node("Tanh", ["e"], ["out"], name="tanh1")], ins, [vi("out", None)],
              [init("half", np.float32(0.5))])
    case("ew tree with literals", m, feeds, E, rewritten=1, ops={"Pointwise": 1},
         extra=lambda r: (expr_of(r) == "tanh((x0 + x1 - (x2 - x0) * 2) * 0.5)" and not r.graph.initializer,
                          "expr %r, initializers %s" % (expr_of(r), [i.name for i in r.graph.initializer])))
    # the functions and ops of the language
    pos = {"a": f32(2, 3, 4, lo=0.5, hi=2), "b": f32(3, 1, lo=0.5, hi=2), "c": f32(4, lo=0.5, hi=2)}
    m = model([h.make_node("Abs", ["a"], ["t1"], name="abs"),
               h.make_node("Sqrt", ["t1"], ["t2"], name="sqrt"),
               h.make_node("Log", ["b"], ["t3"], name="log"),
               h.make_node("Pow", ["t2", "t3"], ["t4"], name="pow"),
               h.make_node("Reciprocal", ["c"], ["t5"], name="rec"),
               h.make_node("Max", ["t4", "t5", "b"], ["t6"], name="max"),
               h.make_node("Exp", ["t6"], ["t7"], name="exp"),
               h.make_node("Neg", ["t7"], ["t8"], name="neg"),
               h.make_node("Sigmoid", ["t8"], ["t9"], name="sig"),
               h.make_node("Erf", ["t9"], ["t10"], name="erf"),
               h.make_node("Clip", ["t10", "lo", "hi"], ["t11"], name="clip"),
               h.make_node("Min", ["t11", "a"], ["t12"], name="min"),
               h.make_node("Div", ["t12", "c"], ["t13"], name="div"),
               h.make_node("Identity", ["t13"], ["t14"], name="id"),
               h.make_node("Sum", ["t14", "a", "b"], ["out"], name="sum")], ins, [vi("out", None)],
              [init("lo", np.float32(0.1)), init("hi", np.float32(0.9))])
    case("ew every function", m, pos, E, rewritten=1, ops={"Pointwise": 1}, inputs_of={"Pointwise": 3})
    # activations written out: they read their input twice, so it must be a plain input
    m = model([h.make_node("LeakyRelu", ["a"], ["l"], name="lr", alpha=0.1),
               h.make_node("HardSwish", ["b"], ["hw"], name="hw"),
               h.make_node("Gelu", ["c"], ["ge"], name="ge"),
               h.make_node("HardSigmoid", ["a"], ["hs"], name="hs", alpha=0.3, beta=0.6),
               h.make_node("Add", ["l", "hw"], ["s1"], name="add1"),
               h.make_node("Add", ["s1", "ge"], ["s2"], name="add2"),
               h.make_node("Mul", ["s2", "hs"], ["out"], name="mul1")], ins, [vi("out", None)], [], opset=20)
    case("ew activations written out", m, feeds, E, rewritten=1, ops={"Pointwise": 1}, inputs_of={"Pointwise": 3})
    m = model([h.make_node("Add", ["a", "b"], ["s"], name="add1"),
               h.make_node("Gelu", ["s"], ["g"], name="ge", approximate="tanh"),
               h.make_node("Mul", ["g", "c"], ["out"], name="mul1")], ins, [vi("out", None)], [], opset=20)
    case("ew gelu's input stays a value", m, feeds, E, rewritten=1, ops={"Pointwise": 1, "Add": 1},
         notes=["add1: not fused into 'ge': Gelu reads its input twice"])
    # square: Mul(v, v) reads v twice
    m = model([h.make_node("Sub", ["a", "c"], ["d"], name="sub1"),
               h.make_node("Mul", ["d", "d"], ["sq"], name="sq"),
               h.make_node("Sqrt", ["sq"], ["out"], name="sqrt")], ins, [vi("out", None)], [])
    case("ew square keeps its input", m, feeds, E, rewritten=1, ops={"Pointwise": 1, "Sub": 1},
         extra=expr_is("sqrt(x0 * x0)"))

    # rejections
    m = model([h.make_node("Mul", ["a", "b"], ["m"], name="mul1"),
               h.make_node("Add", ["m", "c"], ["s"], name="add1"),
               h.make_node("Relu", ["s"], ["out"], name="relu1"),
               h.make_node("Exp", ["m"], ["o2"], name="exp1")], ins, [vi("out", None), vi("o2", None)], [])
    case("ew reject: intermediate with 2 readers", m, feeds, E, rewritten=1, ops={"Pointwise": 1, "Mul": 1, "Exp": 1},
         rejected=["mul1: not fused into 'add1': its output 'm' has 2 readers",
                   "mul1: not fused into 'exp1': its output 'm' has 2 readers"])
    m = model([h.make_node("Mul", ["a", "b"], ["m"], name="mul1"),
               h.make_node("Relu", ["m"], ["out"], name="relu1")], ins, [vi("out", None), vi("m", None)], [])
    case("ew reject: intermediate is a graph output", m, feeds, E, rewritten=0, changed=False,
         rejected=["mul1: not fused into 'relu1': 'm' is also a graph output"])
    m = model([h.make_node("Mul", ["a", "b"], ["m"], name="mul1"),
               h.make_node("Add", ["m", "c"], ["s"], name="add1"),
               h.make_node("Relu", ["s"], ["out"], name="relu1")], ins, [vi("out", None)], [])
    case("ew reject: max-inputs=2", m, feeds, E + " max-inputs=2", rewritten=1, ops={"Pointwise": 1, "Mul": 1},
         rejected=["mul1: not fused into 'add1': the Pointwise would need more than max-inputs=2 inputs"])
    m = model([h.make_node("Sum", ["a", "b", "c"], ["s"], name="sum1"),
               h.make_node("Relu", ["s"], ["out"], name="relu1")], ins, [vi("out", None)], [])
    case("ew reject: root over max-inputs", m, feeds, E + " max-inputs=2", rewritten=0, changed=False,
         rejected=["sum1: not fused into 'relu1': the Pointwise would need more than max-inputs=2 inputs",
                   "sum1: it reads more than max-inputs=2 inputs"])
    m = model([h.make_node("Add", ["i", "j"], ["s"], name="iadd"),
               h.make_node("Mul", ["s", "j"], ["out"], name="imul")],
              [vi("i", [4], T.INT64), vi("j", [4], T.INT64)], [vi("out", None)], [])
    case("ew reject: int64", m, {"i": np.arange(4, dtype=np.int64), "j": np.arange(4, dtype=np.int64)}, E,
         rewritten=0, changed=False, rejected=["imul: it computes int64, not a float type"])
    m = model([h.make_node("Relu", ["a"], ["out"], name="relu1")], ins, [vi("out", None)], [])
    case("ew single op: nothing to do", m, feeds, E, rewritten=0, changed=False)
    # float16 (ogsh's numbers; onnxruntime's float16 kernels are not all there on CPU). The fused
    # expression rounds once, the ops rounded after each step: 1 float16 ulp (~1e-3) apart
    f16 = {"a": f32(2, 3, 4).astype(np.float16), "b": f32(3, 1).astype(np.float16)}
    m = model([h.make_node("Mul", ["a", "b"], ["m"], name="mul1"),
               h.make_node("Add", ["m", "a"], ["s"], name="add1"),
               h.make_node("Relu", ["s"], ["out"], name="relu1")],
              [vi("a", [2, 3, 4], T.FLOAT16), vi("b", [3, 1], T.FLOAT16)], [vi("out", None, T.FLOAT16)], [])
    case("ew float16", m, f16, E, rewritten=1, ops={"Pointwise": 1}, attrs={"dtype": T.FLOAT16}, rtol=2e-3,
         use_ort=False,
         extra=lambda r: (any(f.overload == "pw1" for f in r.functions), overloads(r)))


# ---------------------------------------------------------------------------
# whole models: optimize --level=all
# ---------------------------------------------------------------------------

EARLIER = ["eliminate-nops", "fold-shapes", "fold-constants", "cse", "dce", "prune-initializers", "fuse-pad",
           "fuse-conv-bn", "fuse-conv-add", "fuse-matmul-add", "fuse-gelu", "fuse-layernorm"]


def whole_model(name, path, feeds, want_ops):
    d = os.path.join(TMP, name)
    os.makedirs(d, exist_ok=True)
    inp, exp, exp2, out = (os.path.join(d, f) for f in ("in.npz", "before.npz", "mid.npz", "opt.onnx"))
    np.savez(inp, **feeds)
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds) if ort else None
    # the two fusion passes alone, after the others
    pre = "; ".join("apply " + p for p in EARLIER)
    rc, so, se = sh(path, "%s; run --inputs=%s --save-outputs=%s; apply fuse-activation; apply fuse-elementwise;"
                    " run --inputs=%s --expect=%s --rtol=1e-4 --atol=1e-5" % (pre, inp, exp2, inp, exp2))
    check(name + ": fuse-activation + fuse-elementwise numbers", rc == 0, (so + se)[-600:])
    # the whole pipeline
    rc, so, se = sh(path, "run --inputs=%s --save-outputs=%s" % (inp, exp))
    big = max(float(np.max(np.abs(v))) for v in np.load(exp).values()) if rc == 0 else 1.0
    atol = max(1e-5, 1e-6 * big)
    rc, so, se = sh(path, "optimize --level=all; run --inputs=%s --expect=%s --rtol=1e-4 --atol=%g;"
                    " save %s --force" % (inp, exp, atol, out))
    check(name + ": optimize --level=all numbers (atol %g)" % atol, rc == 0, (so + se)[-600:])
    if not os.path.exists(out):
        return
    rc, so, se = sh(out, "ops --json")
    try:
        ops = json.loads(so)
        got = {(o["domain"] + ":" if o["domain"] == "ai.ogsh" else "") + o["op"]: o["count"] for o in ops}
        miss = {k: v for k, v in want_ops.items() if got.get(k, 0) < v}
        check(name + ": fused ops %s" % {k: got.get(k) for k in want_ops}, not miss, "got %s" % got)
    except (ValueError, KeyError, TypeError) as e:
        check(name + ": ops --json", False, "%s: %s" % (e, so[:300]))
    if not os.path.exists(out):
        return
    checker(name, out)
    if ort:
        ort_same(name, path, out, feeds, atol=atol)
    del ref


def model_cases():
    d = os.path.join(TMP, "demo")
    os.makedirs(d, exist_ok=True)
    demo = os.path.join(d, "demo.onnx")
    rc, so, se = sh(None, "save %s --force" % demo)
    check("demo: saved", rc == 0, se[-300:])
    if rc == 0:
        dm = onnx.load(demo)
        # a fixed batch for onnxruntime and the checks
        whole_model("demo", demo, {"image": f32(2, 3, 32, 32)}, {"ai.ogsh:FusedConv": 4, "ai.ogsh:FusedGemm": 0})
        del dm
    if NO_MODELS:
        print("skip resnet50, mobilenetv2: --no-models")
        return
    md = os.path.join(TMP, "models")
    gen = os.path.join(HERE, "..", "models", "make_models.py")
    p = subprocess.run([sys.executable, gen, md, "resnet50", "mobilenetv2"], capture_output=True, text=True,
                       timeout=600)
    check("make_models resnet50 mobilenetv2", p.returncode == 0, (p.stdout + p.stderr)[-300:])
    if p.returncode:
        return
    img = {"input": f32(1, 3, 224, 224)}
    whole_model("resnet50", os.path.join(md, "resnet50.onnx"), img, {"ai.ogsh:FusedConv": 49})
    whole_model("mobilenetv2", os.path.join(md, "mobilenetv2.onnx"), img, {"ai.ogsh:FusedConv": 45})


def cost_cases():
    """Fused ops cost what the unfused ops did (MACs, FLOPs), and move fewer bytes."""
    d = os.path.join(TMP, "cost")
    os.makedirs(d, exist_ok=True)

    def totals(path, pre):
        """stats after the passes in pre (applied with --json: every output is JSON)."""
        cmds = [c.strip() + " --json" for c in pre.split(";") if c.strip()] + ["stats --json"]
        rc, so, se = sh(path, "; ".join(cmds))
        try:
            return reports(so, len(cmds))[-1]["totals"] if rc == 0 else None
        except (ValueError, KeyError):
            return None

    ew = model([h.make_node("Mul", ["a", "b"], ["m"], name="mul1"),
                h.make_node("Add", ["m", "c"], ["s"], name="add1"),
                h.make_node("Sigmoid", ["s"], ["out"], name="sig")],
               [vi("a", [2, 3, 4]), vi("b", [3, 1]), vi("c", [4])], [vi("out", None)], [])
    p = os.path.join(d, "ew.onnx")
    onnx.save(ew, p)
    for name, path, pre in (("demo", None, "apply fuse-conv-bn; "), ("elementwise", p, "")):
        a = totals(path, pre)
        b = totals(path, pre + "apply fuse-activation; apply fuse-elementwise; ")
        ok = a is not None and b is not None and a["macs"] == b["macs"] and a["flops"] == b["flops"] and \
            a["bytes_read"] + a["bytes_written"] > b["bytes_read"] + b["bytes_written"]
        check("cost %s: same MACs and FLOPs, fewer bytes" % name, ok, "before %s after %s" % (a, b))
    rc, so, se = sh(p, "apply fuse-elementwise; cost sig_Pointwise")
    check("cost of a Pointwise says how", rc == 0 and "6 FLOPs per output element" in so, so[-400:])


def explain_cases():
    for p in ("fuse-activation", "fuse-elementwise"):
        rc, so, se = sh(None, "explain %s" % p)
        ok = rc == 0 and "being written" not in so and len(so) > 800
        check("explain %s" % p, ok, (so + se)[-300:])
    rc, so, se = sh(None, "passes")
    check("passes lists both", rc == 0 and "being written" not in so, so[-300:])


def main():
    explain_cases()
    cost_cases()
    activation_cases()
    elementwise_cases()
    model_cases()
    print("%d failed" % len(FAILED) if FAILED else "all passed")
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
