#!/usr/bin/env python3
"""Tests of fuse-conv-bn, fuse-conv-add, fuse-pad, fuse-matmul-add and patch-matmul.

usage: test_fuse_conv.py OGSH

Builds small models with onnx.helper in a temporary folder and, for each,
applies one pass with ogsh and checks:
  1. the structure of the result (ops and node inputs, read back with
     `nodes --json` from the saved model; graph output names unchanged),
  2. the report: rewrites counted, each rejection's reason shown,
  3. numbers: `run --expect` against the outputs before the pass (rtol 1e-4),
  4. the saved model passes onnx.checker, and onnxruntime gives the same
     outputs for it as for the original.
Prints one line per check; exits 1 if any failed.
"""
import json
import os
import shutil
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

OGSH = sys.argv[1] if len(sys.argv) > 1 else "ogsh"
TMP = tempfile.mkdtemp(prefix="ogsh-fconv-")
RNG = np.random.default_rng(1)
FAILED = []


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + ("" if ok or not detail else ": " + detail))
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
    # declare the outputs' shapes (onnx.checker wants them); hostile models keep theirs unknown
    try:
        inf = onnx.shape_inference.infer_shapes(m, strict_mode=True)
        for o, io in zip(m.graph.output, inf.graph.output):
            if io.type.tensor_type.HasField("shape"):
                o.type.CopyFrom(io.type)
    except Exception:  # noqa: BLE001 - not valid ONNX on purpose
        pass
    return m


def bn_params(prefix, c):
    return [init(prefix + "_g", f32(c, lo=0.5, hi=2)), init(prefix + "_b", f32(c)),
            init(prefix + "_m", f32(c)), init(prefix + "_v", f32(c, lo=0.2, hi=2))]


def bn(prefix, x, y, **kw):
    return h.make_node("BatchNormalization", [x, prefix + "_g", prefix + "_b", prefix + "_m", prefix + "_v"], [y],
                       name=prefix, **kw)


def sh(path, script):
    p = subprocess.run([OGSH, path, "-c", script], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def case(name, m, feeds, pass_cmd, rewritten=None, rejected=(), notes=(), ops=None, inputs_of=None,
         changed=None, check_numbers=True, extra=None):
    """Runs one pass on model m. rejected/notes: substrings that must appear
    in rejection/note messages. ops: {op: count} of the result. inputs_of:
    {node name: number of inputs}. extra(result_model) -> (ok, detail)."""
    d = os.path.join(TMP, "".join(ch if ch.isalnum() else "_" for ch in name))
    os.makedirs(d, exist_ok=True)
    src, out, inp, exp = (os.path.join(d, f) for f in ("in.onnx", "out.onnx", "in.npz", "expect.npz"))
    onnx.save(m, src)
    np.savez(inp, **feeds)

    # 2. the report (each apply of pass_cmd with --json; their reports summed)
    cmds = [c.strip() for c in pass_cmd.split(";")]
    rc, so, se = sh(src, "; ".join(c + " --json" for c in cmds))
    reps, pos, dec = [], 0, json.JSONDecoder()
    try:
        while len(reps) < len(cmds):
            while pos < len(so) and so[pos].isspace():
                pos += 1
            obj, pos = dec.raw_decode(so, pos)
            reps.append(obj)
    except ValueError:
        check(name + ": report", False, "no JSON report (rc %d): %s %s" % (rc, so[-300:], se[-300:]))
        return
    rep = {"messages": sum((r.get("messages", []) for r in reps), []),
           "rewritten": sum(r["rewritten"] for r in reps), "rejected": sum(r["rejected"] for r in reps),
           "changed": any(r["changed"] for r in reps)}
    msgs = rep.get("messages", [])
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
    check(name + ": report" + (" (%s)" % "; ".join(texts["rejected"])[:150] if texts["rejected"] else ""), ok, why)
    if not rep["changed"]:
        return

    # 3. numbers before and after, by ogsh
    rc, so, se = sh(src, "run --inputs=%s --save-outputs=%s; %s; run --inputs=%s --expect=%s --rtol=1e-4 --atol=1e-5;"
                    " save %s --force" % (inp, exp, pass_cmd, inp, exp, out))
    if check_numbers:
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
    ok, why = True, ""
    got = {}
    for n in nodes:
        got[n["op"]] = got.get(n["op"], 0) + 1
    if ops is not None and got != ops:
        ok, why = False, "ops %s, want %s" % (got, ops)
    for nn, k in (inputs_of or {}).items():
        ins = [n["inputs"] for n in nodes if n["name"] == nn]
        if ok and (not ins or len([i for i in ins[0] if i]) != k):
            ok, why = False, "%s has inputs %s, want %d" % (nn, ins, k)
    res = onnx.load(out)
    if ok and [o.name for o in res.graph.output] != [o.name for o in m.graph.output]:
        ok, why = False, "graph outputs %s" % [o.name for o in res.graph.output]
    if ok and extra:
        ok, why = extra(res)
    check(name + ": structure " + str(got), ok, why)

    # 4. onnx.checker and onnxruntime
    try:
        onnx.checker.check_model(res, full_check=True)
        check(name + ": onnx.checker", True)
    except Exception as e:  # noqa: BLE001 - any checker complaint is a failure
        check(name + ": onnx.checker", False, str(e)[:300])
    if ort is None:
        print("skip " + name + ": onnxruntime not installed")
        return
    try:
        a = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, feeds)
        b = ort.InferenceSession(out, providers=["CPUExecutionProvider"]).run(None, feeds)
        bad = [i for i in range(len(a)) if a[i].shape != b[i].shape or not np.allclose(b[i], a[i], rtol=1e-4, atol=1e-5)]
        err = max(float(np.max(np.abs(a[i] - b[i]))) if a[i].size and a[i].shape == b[i].shape else 0 for i in range(len(a)))
        check(name + ": onnxruntime same outputs", not bad, "outputs %s differ, max abs %g" % (bad, err))
    except Exception as e:  # noqa: BLE001
        check(name + ": onnxruntime same outputs", False, str(e)[:300])


def pads_of(m, op):
    for n in m.graph.node:
        if n.op_type == op:
            for a in n.attribute:
                if a.name == "pads":
                    return list(a.ints)
    return None


# ---------------------------------------------------------------------------
# fuse-conv-bn
# ---------------------------------------------------------------------------

def conv_bn_cases():
    C = 8
    x = {"x": f32(2, 3, 10, 10)}
    m = model([h.make_node("Conv", ["x", "w", "b"], ["y"], name="conv1", pads=[1, 1, 1, 1]),
               bn("bn1", "y", "z", epsilon=1e-3),
               h.make_node("Relu", ["z"], ["out"], name="relu1")],
              [vi("x", [2, 3, 10, 10])], [vi("out", None)],
              [init("w", f32(C, 3, 3, 3)), init("b", f32(C))] + bn_params("bn1", C))
    case("bn conv", m, x, "apply fuse-conv-bn", rewritten=1, ops={"Conv": 1, "Relu": 1}, inputs_of={"conv1": 3})

    # no bias; the BN's output is the graph output; grouped conv; params from Constant nodes
    nodes = [h.make_node("Constant", [], [n + "_c"], value=init(n + "_c", a), name="k_" + n)
             for n, a in (("g", f32(C, lo=0.5, hi=2)), ("be", f32(C)), ("mu", f32(C)), ("var", f32(C, lo=0.2, hi=2)))]
    nodes += [h.make_node("Conv", ["x", "w"], ["y"], name="conv1", group=1, strides=[2, 2]),
              h.make_node("BatchNormalization", ["y", "g_c", "be_c", "mu_c", "var_c"], ["z"], name="bn1")]
    m = model(nodes, [vi("x", [2, 3, 10, 10])], [vi("z", None)], [init("w", f32(C, 3, 3, 3))])
    case("bn conv no bias, constants, output", m, x, "apply fuse-conv-bn", rewritten=1, ops={"Conv": 1},
         inputs_of={"conv1": 3})

    # ConvTranspose with groups: the output channel is W's second axis
    m = model([h.make_node("ConvTranspose", ["x4", "w", "b"], ["y"], name="deconv", group=2, strides=[2, 2]),
               bn("bn1", "y", "z")],
              [vi("x4", [1, 4, 5, 5])], [vi("z", None)],
              [init("w", f32(4, 3, 3, 3)), init("b", f32(6))] + bn_params("bn1", 6))
    case("bn convtranspose group=2", m, {"x4": f32(1, 4, 5, 5)}, "apply fuse-conv-bn", rewritten=1,
         ops={"ConvTranspose": 1})

    # 1-D conv
    m = model([h.make_node("Conv", ["x1", "w"], ["y"], name="conv1d", pads=[1, 1]), bn("bn1", "y", "z")],
              [vi("x1", [2, 3, 16])], [vi("z", None)], [init("w", f32(5, 3, 3))] + bn_params("bn1", 5))
    case("bn conv1d", m, {"x1": f32(2, 3, 16)}, "apply fuse-conv-bn", rewritten=1, ops={"Conv": 1})

    # Gemm, transB=1 with C [N] and alpha/beta; transB=0 without C
    N = 6
    m = model([h.make_node("Gemm", ["a", "wt", "c"], ["y"], name="fc", transB=1, alpha=0.5, beta=2.0),
               bn("bn1", "y", "z")],
              [vi("a", [4, 5])], [vi("z", None)], [init("wt", f32(N, 5)), init("c", f32(N))] + bn_params("bn1", N))
    case("bn gemm transB=1", m, {"a": f32(4, 5)}, "apply fuse-conv-bn", rewritten=1, ops={"Gemm": 1})
    m = model([h.make_node("Gemm", ["a", "w"], ["y"], name="fc"), bn("bn1", "y", "z")],
              [vi("a", [4, 5])], [vi("z", None)], [init("w", f32(5, N))] + bn_params("bn1", N))
    case("bn gemm no C", m, {"a": f32(4, 5)}, "apply fuse-conv-bn", rewritten=1, ops={"Gemm": 1},
         inputs_of={"fc": 3})

    # shared weights: both convs fold, each gets its own copy, the shared one is never changed in place
    m = model([h.make_node("Conv", ["x", "w"], ["y1"], name="c1"), bn("bn1", "y1", "z1"),
               h.make_node("Conv", ["x", "w"], ["y2"], name="c2"), bn("bn2", "y2", "z2")],
              [vi("x", [2, 3, 10, 10])], [vi("z1", None), vi("z2", None)],
              [init("w", f32(C, 3, 3, 3))] + bn_params("bn1", C) + bn_params("bn2", C))
    case("bn shared weights", m, x, "apply fuse-conv-bn", rewritten=2, notes=["shared with another node"],
         ops={"Conv": 2},
         extra=lambda r: (len({n.input[1] for n in r.graph.node}) == 2, "the two convs share folded weights"))

    # rejections
    m = model([h.make_node("Conv", ["x", "w"], ["y"], name="conv1"),
               h.make_node("BatchNormalization", ["y", "s", "bn1_b", "bn1_m", "bn1_v"], ["z"], name="bn1")],
              [vi("x", [2, 3, 10, 10]), vi("s", [C])], [vi("z", None)], [init("w", f32(C, 3, 3, 3))] + bn_params("bn1", C)[1:])
    case("bn reject scale input", m, dict(x, s=f32(C)), "apply fuse-conv-bn", rewritten=0,
         rejected=["bn1: scale is not a constant"], changed=False)

    m = model([h.make_node("Conv", ["x", "w"], ["y"], name="conv1"), bn("bn1", "y", "z"),
               h.make_node("Relu", ["y"], ["r"], name="relu")],
              [vi("x", [2, 3, 10, 10])], [vi("z", None), vi("r", None)], [init("w", f32(C, 3, 3, 3))] + bn_params("bn1", C))
    case("bn reject 2 consumers", m, x, "apply fuse-conv-bn", rewritten=0,
         rejected=["bn1: its input has 2 consumers"], changed=False)

    m = model([h.make_node("Conv", ["x", "w"], ["y"], name="conv1"), bn("bn1", "y", "z")],
              [vi("x", [2, 3, 10, 10]), vi("w", [C, 3, 3, 3])], [vi("z", None)], bn_params("bn1", C))
    case("bn reject weights input", m, dict(x, w=f32(C, 3, 3, 3)), "apply fuse-conv-bn", rewritten=0,
         rejected=["conv1's weights are not a constant"], changed=False)

    m = model([h.make_node("Conv", ["x", "w"], ["y"], name="conv1"),
               h.make_node("BatchNormalization", ["y", "bn1_g", "bn1_b", "bn1_m", "bn1_v"], ["z", "rm", "rv"],
                           name="bn1", training_mode=1)],
              [vi("x", [2, 3, 10, 10])], [vi("z", None)], [init("w", f32(C, 3, 3, 3))] + bn_params("bn1", C))
    case("bn reject training", m, x, "apply fuse-conv-bn", rewritten=0, rejected=["training_mode=1"], changed=False)

    m = model([h.make_node("Relu", ["x"], ["y"], name="relu"), bn("bn1", "y", "z")],
              [vi("x", [2, 3, 10, 10])], [vi("z", None)], bn_params("bn1", 3))
    case("bn reject after relu", m, x, "apply fuse-conv-bn", rewritten=0,
         rejected=["bn1: its input comes from Relu, not from a Conv"], changed=False)

    # hostile (not valid ONNX, but loadable): int32 weights, mismatched channels, a group that does not divide
    m = model([h.make_node("Conv", ["x", "w"], ["y"], name="conv1"), bn("bn1", "y", "z")],
              [vi("x", [2, 3, 10, 10])], [vi("z", None)],
              [init("w", np.ones((C, 3, 3, 3), np.int32))] + bn_params("bn1", C))
    case("bn reject int weights", m, x, "apply fuse-conv-bn", rewritten=0, rejected=["int32, not a float type"],
         changed=False)
    m = model([h.make_node("Conv", ["x", "w"], ["y"], name="conv1"), bn("bn1", "y", "z")],
              [vi("x", [2, 3, 10, 10])], [vi("z", None)], [init("w", f32(C, 3, 3, 3))] + bn_params("bn1", 4))
    case("bn reject channel mismatch", m, x, "apply fuse-conv-bn", rewritten=0,
         rejected=["scale has 4 values but conv1 has 8 output channels"], changed=False)
    m = model([h.make_node("ConvTranspose", ["x", "w"], ["y"], name="dc", group=2), bn("bn1", "y", "z")],
              [vi("x", [2, 3, 10, 10])], [vi("z", None)], [init("w", f32(3, 4, 3, 3))] + bn_params("bn1", 8))
    case("bn reject unknown channels", m, x, "apply fuse-conv-bn", rewritten=0,
         rejected=["cannot tell the output channels"], changed=False)


# ---------------------------------------------------------------------------
# fuse-conv-add
# ---------------------------------------------------------------------------

def conv_add_cases():
    C = 8
    x = {"x": f32(2, 3, 10, 10)}
    w = init("w", f32(C, 3, 3, 3))

    def one(op, k, conv_first=True, bias=True, name=None):
        ins = ["y", "k"] if conv_first else ["k", "y"]
        return model([h.make_node("Conv", ["x", "w", "b"] if bias else ["x", "w"], ["y"], name="conv1", pads=[1, 1, 1, 1]),
                      h.make_node(op, ins, ["z"], name=name or op.lower())],
                     [vi("x", [2, 3, 10, 10])], [vi("z", None)], [w, init("k", k)] + ([init("b", f32(C))] if bias else []))

    case("add [C,1,1]", one("Add", f32(C, 1, 1)), x, "apply fuse-conv-add", rewritten=1, ops={"Conv": 1})
    case("add scalar, no bias", one("Add", np.float32(0.75), bias=False), x, "apply fuse-conv-add", rewritten=1,
         ops={"Conv": 1}, inputs_of={"conv1": 3})
    case("sub y - k", one("Sub", f32(1, C, 1, 1)), x, "apply fuse-conv-add", rewritten=1, ops={"Conv": 1})
    case("sub k - y", one("Sub", f32(C, 1, 1), conv_first=False), x, "apply fuse-conv-add", rewritten=1,
         ops={"Conv": 1})
    case("mul [1,C,1,1] no bias", one("Mul", f32(1, C, 1, 1), bias=False), x, "apply fuse-conv-add", rewritten=1,
         ops={"Conv": 1}, inputs_of={"conv1": 2})
    case("mul k * y", one("Mul", f32(C, 1, 1), conv_first=False), x, "apply fuse-conv-add", rewritten=1,
         ops={"Conv": 1})
    case("div [C,1,1]", one("Div", f32(C, 1, 1, lo=0.5, hi=2)), x, "apply fuse-conv-add", rewritten=1, ops={"Conv": 1})

    # a chain: Mul then Add both fold
    m = model([h.make_node("Conv", ["x", "w"], ["y"], name="conv1"),
               h.make_node("Mul", ["y", "s"], ["y2"], name="scale"),
               h.make_node("Add", ["y2", "t"], ["z"], name="shift")],
              [vi("x", [2, 3, 10, 10])], [vi("z", None)], [w, init("s", f32(C, 1, 1)), init("t", f32(C, 1, 1))])
    case("mul then add", m, x, "apply fuse-conv-add", rewritten=2, ops={"Conv": 1})

    # Gemm + [N]
    m = model([h.make_node("Gemm", ["a", "wg"], ["y"], name="fc"), h.make_node("Add", ["y", "k"], ["z"], name="add")],
              [vi("a", [4, 5])], [vi("z", None)], [init("wg", f32(5, 6)), init("k", f32(6))])
    case("gemm add [N]", m, {"a": f32(4, 5)}, "apply fuse-conv-add", rewritten=1, ops={"Gemm": 1})

    # rejections
    case("reject add [C]", one("Add", f32(C)), x, "apply fuse-conv-add", rewritten=0,
         rejected=["lines up with output axis 3, not the channel axis"], changed=False)
    case("reject add [H,W]", one("Add", f32(10, 10)), x, "apply fuse-conv-add", rewritten=0,
         rejected=["not only per channel"], changed=False)
    case("reject k / y", one("Div", f32(C, 1, 1), conv_first=False), x, "apply fuse-conv-add", rewritten=0,
         rejected=["not a linear function"], changed=False)
    m = model([h.make_node("Conv", ["x", "w"], ["y"], name="conv1"),
               h.make_node("Add", ["y", "r"], ["z"], name="residual")],
              [vi("x", [2, 3, 10, 10]), vi("r", [2, C, 8, 8])], [vi("z", None)], [w])
    case("reject residual add", m, dict(x, r=f32(2, C, 8, 8)), "apply fuse-conv-add", rewritten=0,
         rejected=["residual: its other operand 'r' is not a constant"], changed=False)
    m = model([h.make_node("Conv", ["x", "w"], ["y"], name="conv1"),
               h.make_node("Add", ["y", "k"], ["z"], name="add"), h.make_node("Relu", ["y"], ["r"], name="relu")],
              [vi("x", [2, 3, 10, 10])], [vi("z", None), vi("r", None)], [w, init("k", f32(C, 1, 1))])
    case("reject 2 consumers", m, x, "apply fuse-conv-add", rewritten=0, rejected=["its input has 2 consumers"],
         changed=False)


# ---------------------------------------------------------------------------
# fuse-pad
# ---------------------------------------------------------------------------

def pad_cases():
    C = 4
    x = {"x": f32(1, 3, 9, 9)}
    w = init("w", f32(C, 3, 3, 3))

    def padded(padv, consumer, value=None, mode=None, opset=17, axes=None, **kw):
        ins = ["x", "pads"] + (["v"] if value is not None else ([""] if axes is not None else []))
        inits = [init("pads", np.array(padv, np.int64))]
        if value is not None:
            inits.append(init("v", np.array(value, np.float32)))
        if axes is not None:
            ins.append("axes")
            inits.append(init("axes", np.array(axes, np.int64)))
        attrs = {"mode": mode} if mode else {}
        nodes = [h.make_node("Pad", ins, ["p"], name="pad", **attrs)]
        if consumer == "Conv":
            nodes.append(h.make_node("Conv", ["p", "w"], ["z"], name="conv", **kw))
            inits.append(w)
        else:
            nodes.append(h.make_node(consumer, ["p"], ["z"], name="pool", kernel_shape=[3, 3], **kw))
        return model(nodes, [vi("x", [1, 3, 9, 9])], [vi("z", None)], inits, opset=opset)

    m = padded([0, 0, 1, 2, 0, 0, 1, 2], "Conv", pads=[1, 1, 1, 1])
    case("pad conv", m, x, "apply fuse-pad", rewritten=1, ops={"Conv": 1},
         extra=lambda r: (pads_of(r, "Conv") == [2, 3, 2, 3], "pads %s" % pads_of(r, "Conv")))
    m = padded([0, 0, 1, 0, 0, 0, 0, 1], "Conv", value=0.0, strides=[2, 2], dilations=[2, 2])
    case("pad conv value 0, strided, dilated", m, x, "apply fuse-pad", rewritten=1, ops={"Conv": 1},
         extra=lambda r: (pads_of(r, "Conv") == [1, 0, 0, 1], "pads %s" % pads_of(r, "Conv")))
    m = padded([1, 1, 1, 1], "Conv", opset=18, axes=[2, -1], auto_pad="VALID")
    case("pad opset 18 axes, VALID", m, x, "apply fuse-pad", rewritten=1, ops={"Conv": 1},
         extra=lambda r: (pads_of(r, "Conv") == [1, 1, 1, 1], "pads %s" % pads_of(r, "Conv")))
    m = padded([0, 0, 1, 1, 0, 0, 1, 1], "AveragePool", count_include_pad=1)
    case("pad averagepool", m, x, "apply fuse-pad", rewritten=1, ops={"AveragePool": 1})
    # opset 10: pads and value are attributes
    m = model([h.make_node("Pad", ["x"], ["p"], name="pad", pads=[0, 0, 2, 1, 0, 0, 0, 1]),
               h.make_node("Conv", ["p", "w"], ["z"], name="conv")],
              [vi("x", [1, 3, 9, 9])], [vi("z", None)], [w], opset=10)
    case("pad opset 10 attributes", m, x, "apply fuse-pad", rewritten=1, ops={"Conv": 1},
         extra=lambda r: (pads_of(r, "Conv") == [2, 1, 0, 1], "pads %s" % pads_of(r, "Conv")))

    # rejections
    case("pad reject reflect", padded([0, 0, 1, 1, 0, 0, 1, 1], "Conv", mode="reflect"), x, "apply fuse-pad",
         rewritten=0, rejected=["mode is 'reflect'"], changed=False)
    case("pad reject value 1", padded([0, 0, 1, 1, 0, 0, 1, 1], "Conv", value=1.0), x, "apply fuse-pad",
         rewritten=0, rejected=["pads with 1, not 0"], changed=False)
    case("pad reject channel axis", padded([0, 1, 1, 1, 0, 0, 1, 1], "Conv"), x, "apply fuse-pad",
         rewritten=0, rejected=["pads the channel axis"], changed=False)
    case("pad reject negative", padded([0, 0, -1, 1, 0, 0, 1, 1], "Conv"), x, "apply fuse-pad",
         rewritten=0, rejected=["negative pads"], changed=False)
    case("pad reject count_include_pad=0", padded([0, 0, 1, 1, 0, 0, 1, 1], "AveragePool"), x, "apply fuse-pad",
         rewritten=0, rejected=["count_include_pad=0"], changed=False)
    case("pad reject auto_pad", padded([0, 0, 1, 1, 0, 0, 1, 1], "Conv", auto_pad="SAME_UPPER"), x,
         "apply fuse-pad", rewritten=0, rejected=["auto_pad=SAME_UPPER"], changed=False)
    case("pad reject maxpool", padded([0, 0, 1, 1, 0, 0, 1, 1], "MaxPool"), x, "apply fuse-pad", rewritten=0,
         rejected=["only Conv and AveragePool"], changed=False)
    m = model([h.make_node("Pad", ["x", "pads"], ["p"], name="pad"),
               h.make_node("Conv", ["p", "w"], ["z"], name="conv")],
              [vi("x", [1, 3, 9, 9]), vi("pads", [8], T.INT64)], [vi("z", None)], [w])
    case("pad reject pads input", m, dict(x, pads=np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)), "apply fuse-pad",
         rewritten=0, rejected=["pads are not a constant"], changed=False)


# ---------------------------------------------------------------------------
# fuse-matmul-add
# ---------------------------------------------------------------------------

def matmul_cases():
    K, N = 5, 6
    wb = init("B", f32(K, N))

    def mm(ashape, bias, bias_first=False, extra_nodes=(), outs=None):
        ins = ["bias", "y"] if bias_first else ["y", "bias"]
        return model([h.make_node("MatMul", ["a", "B"], ["y"], name="mm"),
                      h.make_node("Add", ins, ["z"], name="add")] + list(extra_nodes),
                     [vi("a", ashape)], outs or [vi("z", None)], [wb, init("bias", bias)])

    case("matmul 2-D [N]", mm([4, K], f32(N)), {"a": f32(4, K)}, "apply fuse-matmul-add", rewritten=1,
         ops={"Gemm": 1}, inputs_of={"mm": 3})
    case("matmul 2-D bias first [1,N]", mm([4, K], f32(1, N), bias_first=True), {"a": f32(4, K)},
         "apply fuse-matmul-add", rewritten=1, ops={"Gemm": 1})
    case("matmul 2-D scalar bias", mm(["m", K], np.float32(0.5)), {"a": f32(3, K)}, "apply fuse-matmul-add",
         rewritten=1, ops={"Gemm": 1})
    case("matmul rank 3 reshape=off", mm([2, 3, K], f32(N)), {"a": f32(2, 3, K)}, "apply fuse-matmul-add reshape=off",
         rewritten=0, rejected=["mm: A has rank 3: Gemm takes 2-D inputs"], changed=False)
    case("matmul rank 3 reshape by default", mm([2, 3, K], f32(N)), {"a": f32(2, 3, K)}, "apply fuse-matmul-add",
         rewritten=1, ops={"Reshape": 2, "Gemm": 1})
    case("matmul rank 3 reshape=on", mm([2, 3, K], f32(1, 1, N)), {"a": f32(2, 3, K)},
         "apply fuse-matmul-add reshape=on", rewritten=1, ops={"Reshape": 2, "Gemm": 1})
    case("matmul rank 3 batch symbolic", mm(["batch", 3, K], f32(N)), {"a": f32(2, 3, K)},
         "apply fuse-matmul-add reshape=on", rewritten=1, ops={"Reshape": 2, "Gemm": 1})
    # two unknown leading dims: the shape back is computed from A's (Shape, Slice, Concat)
    case("matmul rank 3 two unknown dims", mm(["batch", "seq", K], f32(N)), {"a": f32(2, 3, K)},
         "apply fuse-matmul-add reshape=on", rewritten=1,
         ops={"Reshape": 2, "Gemm": 1, "Shape": 1, "Slice": 1, "Concat": 1})
    # ... but not for a projection into attention heads: fuse-qkv follows the MatMul through the Reshape
    m = model([h.make_node("MatMul", ["a", "B"], ["y"], name="mm"), h.make_node("Add", ["y", "bias"], ["z"], name="add"),
               h.make_node("Reshape", ["z", "heads"], ["zh"], name="heads")],
              [vi("a", ["batch", "seq", K])], [vi("zh", None)],
              [wb, init("bias", f32(N)), init("heads", np.array([0, 0, 2, N // 2], np.int64))])
    case("matmul rank 3 two unknown dims into heads", m, {"a": f32(2, 3, K)}, "apply fuse-matmul-add", rewritten=0,
         rejected=["fuse-qkv follow"], changed=False)
    case("matmul reject bias [M,N]", mm([4, K], f32(4, N)), {"a": f32(4, K)}, "apply fuse-matmul-add",
         rewritten=0, rejected=["not one value per output feature"], changed=False)
    m = model([h.make_node("MatMul", ["a", "b"], ["y"], name="mm"), h.make_node("Add", ["y", "bias"], ["z"], name="add")],
              [vi("a", [4, K]), vi("b", [K, N])], [vi("z", None)], [init("bias", f32(N))])
    case("matmul reject B input", m, {"a": f32(4, K), "b": f32(K, N)}, "apply fuse-matmul-add", rewritten=0,
         rejected=["B ('b') is not a constant"], changed=False)
    m = mm([4, K], f32(N), outs=[vi("z", None), vi("y", None)])
    case("matmul reject product is output", m, {"a": f32(4, K)}, "apply fuse-matmul-add", rewritten=0,
         rejected=["is also a graph output"], changed=False)
    m = model([h.make_node("MatMul", ["a", "B"], ["y"], name="mm"), h.make_node("Add", ["y", "r"], ["z"], name="add")],
              [vi("a", [4, K]), vi("r", [4, N])], [vi("z", None)], [wb])
    case("matmul reject residual", m, {"a": f32(4, K), "r": f32(4, N)}, "apply fuse-matmul-add", rewritten=0,
         rejected=["other operand 'r' is not a constant"], changed=False)


# ---------------------------------------------------------------------------
# A ResNet-style block: Pad -> Conv -> BN -> Relu -> Conv -> BN -> Mul (per channel)
# -> Add(shortcut: Conv -> BN) -> Relu, then a classifier MatMul + Add
# ---------------------------------------------------------------------------

def resnet_cases():
    C, C2 = 4, 8
    nodes = [
        h.make_node("Pad", ["x", "pads"], ["xp"], name="pad0"),
        h.make_node("Conv", ["xp", "w1"], ["c1"], name="conv1"),
        bn("bn1", "c1", "b1"),
        h.make_node("Relu", ["b1"], ["r1"], name="relu1"),
        h.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        bn("bn2", "c2", "b2"),
        h.make_node("Mul", ["b2", "gate"], ["g2"], name="gate"),
        h.make_node("Conv", ["x", "w3"], ["c3"], name="proj"),
        bn("bn3", "c3", "b3"),
        h.make_node("Add", ["g2", "b3"], ["s"], name="residual"),
        h.make_node("Relu", ["s"], ["r"], name="relu2"),
        h.make_node("GlobalAveragePool", ["r"], ["gp"], name="gap"),
        h.make_node("Flatten", ["gp"], ["f"], name="flat"),
        h.make_node("MatMul", ["f", "fcw"], ["logits0"], name="fc"),
        h.make_node("Add", ["logits0", "fcb"], ["logits"], name="fc_bias"),
    ]
    inits = [init("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)), init("w1", f32(C2, C, 3, 3)),
             init("w2", f32(C2, C2, 3, 3)), init("w3", f32(C2, C, 1, 1)), init("gate", f32(C2, 1, 1)),
             init("fcw", f32(C2, 10)), init("fcb", f32(10))] + bn_params("bn1", C2) + bn_params("bn2", C2) + \
        bn_params("bn3", C2)
    m = model(nodes, [vi("x", ["batch", C, 12, 12])], [vi("logits", ["batch", 10])], inits)
    feeds = {"x": f32(2, C, 12, 12)}
    case("resnet fuse-conv-bn", m, feeds, "apply fuse-conv-bn", rewritten=3,
         ops={"Pad": 1, "Conv": 3, "Relu": 2, "Mul": 1, "Add": 2, "GlobalAveragePool": 1, "Flatten": 1, "MatMul": 1})
    case("resnet all four", m, feeds,
         "apply fuse-pad; apply fuse-conv-bn; apply fuse-conv-add; apply fuse-matmul-add",
         rewritten=6, rejected=["residual: its other operand"],
         ops={"Conv": 3, "Relu": 2, "Add": 1, "GlobalAveragePool": 1, "Flatten": 1, "Gemm": 1},
         extra=lambda r: (pads_of(r, "Conv") == [1, 1, 1, 1], "conv1 pads %s" % pads_of(r, "Conv")))


# ---------------------------------------------------------------------------
# patch-matmul
# ---------------------------------------------------------------------------

def patch_cases():
    M, C = 8, 3
    xs = {"x": f32(2, C, 32, 24)}
    pos = init("pos", f32(1, 48, M))

    def vit(extra_nodes=(), out="z", conv_inputs=("x", "w", "b"), shape=(-1, M, 48), inits=(), **conv):
        conv = dict({"kernel_shape": [4, 4], "strides": [4, 4]}, **conv)
        nodes = [h.make_node("Conv", list(conv_inputs), ["y"], name="patch", **conv),
                 h.make_node("Reshape", ["y", "s"], ["v"], name="flat"),
                 h.make_node("Transpose", ["v"], ["t"], name="tokens", perm=[0, 2, 1]),
                 h.make_node("Add", ["t", "pos"], ["z"], name="addpos")] + list(extra_nodes)
        return model(nodes, [vi("x", ["batch", C, 32, 24])], [vi(out, None)],
                     [init("w", f32(M, C, 4, 4)), init("b", f32(M)), init("s", np.array(shape, np.int64)), pos]
                     + list(inits))

    # ViT: Conv -> Reshape [N, M, OH*OW] -> Transpose [0, 2, 1], with a bias and a symbolic batch
    case("patch vit", vit(), xs, "apply patch-matmul", rewritten=1,
         ops={"Reshape": 2, "Transpose": 1, "MatMul": 1, "Add": 2},
         extra=lambda r: ([n.op_type for n in r.graph.node if n.output[0] == "t"] == ["Add"],
                          "'t' is not made by the bias Add"))
    # then fuse-matmul-add: one FusedGemm-ready MatMul + Add
    case("patch vit then matmul-add", vit(), xs, "apply patch-matmul; apply fuse-matmul-add", rewritten=2)
    # no bias; the reshape's shape with the batch as 0
    m = model([h.make_node("Conv", ["x", "w"], ["y"], name="patch", kernel_shape=[4, 4], strides=[4, 4]),
               h.make_node("Reshape", ["y", "s"], ["v"], name="flat"),
               h.make_node("Transpose", ["v"], ["t"], name="tokens", perm=[0, 2, 1])],
              [vi("x", [2, C, 32, 24])], [vi("t", None)],
              [init("w", f32(M, C, 4, 4)), init("s", np.array([0, M, 48], np.int64))])
    case("patch vit no bias", m, xs, "apply patch-matmul", rewritten=1, ops={"Reshape": 2, "Transpose": 1, "MatMul": 1})
    # Swin/ConvNeXt: Conv -> Transpose [0, 2, 3, 1] (channels last), 2x2 patches
    m = model([h.make_node("Conv", ["x", "w2", "b"], ["y"], name="patch", kernel_shape=[2, 2], strides=[2, 2],
                           pads=[0, 0, 0, 0], dilations=[1, 1]),
               h.make_node("Transpose", ["y"], ["t"], name="nhwc", perm=[0, 2, 3, 1]),
               h.make_node("Relu", ["t"], ["z"], name="act")],
              [vi("x", ["n", C, 32, 24])], [vi("z", None)], [init("w2", f32(M, C, 2, 2)), init("b", f32(M))])
    case("patch channels-last", m, xs, "apply patch-matmul", rewritten=1,
         ops={"Reshape": 2, "Transpose": 1, "MatMul": 1, "Add": 1, "Relu": 1})

    # not patch embeddings: not listed at all
    m = model([h.make_node("Conv", ["x", "w3"], ["y"], name="c3", kernel_shape=[3, 3], strides=[2, 2]),
               h.make_node("Transpose", ["y"], ["t"], name="nhwc", perm=[0, 2, 3, 1])],
              [vi("x", [2, C, 32, 24])], [vi("t", None)], [init("w3", f32(M, C, 3, 3))])
    case("patch not a patch conv", m, xs, "apply patch-matmul", rewritten=0, changed=False)
    # rejections
    case("patch reject other reader", vit(extra_nodes=[h.make_node("Relu", ["y"], ["r"], name="r")], out="r"),
         xs, "apply patch-matmul", rewritten=0, rejected=["patch: its output"], changed=False)
    case("patch reject group", vit(conv_inputs=("x", "wg", "b"), inits=[init("wg", f32(M, 1, 4, 4))], group=3),
         xs, "apply patch-matmul", rewritten=0, rejected=["group=3"], changed=False)
    m = vit()
    m.graph.input[0].type.tensor_type.shape.dim[2].dim_value = 34
    case("patch reject partial patches", m, {"x": f32(2, C, 34, 24)}, "apply patch-matmul", rewritten=0,
         rejected=["not a whole number of 4x4 patches"], changed=False)
    m = model([h.make_node("Conv", ["x", "wi"], ["y"], name="patch", kernel_shape=[4, 4], strides=[4, 4]),
               h.make_node("Transpose", ["y"], ["t"], name="nhwc", perm=[0, 2, 3, 1])],
              [vi("x", [2, C, 32, 24]), vi("wi", [M, C, 4, 4])], [vi("t", None)], [])
    case("patch reject weights input", m, dict(xs, wi=f32(M, C, 4, 4)), "apply patch-matmul", rewritten=0,
         rejected=["weights are not a constant"], changed=False)
    case("patch reject transpose", vit(shape=(-1, 48, M)), xs, "apply patch-matmul", rewritten=0,
         rejected=["does not make [N, 8, 48]"], changed=False, check_numbers=False)


def main():
    for f in (conv_bn_cases, conv_add_cases, pad_cases, matmul_cases, resnet_cases, patch_cases):
        f()
    for p in ("fuse-conv-bn", "fuse-conv-add", "fuse-pad", "fuse-matmul-add", "patch-matmul"):
        p2 = subprocess.run([OGSH, "-c", "explain " + p], capture_output=True, text=True, timeout=60)
        check("explain " + p, p2.returncode == 0 and len(p2.stdout) > 400 and "being written" not in p2.stdout,
              (p2.stdout + p2.stderr)[-300:])
    print("%d failed (models in %s)" % (len(FAILED), TMP) if FAILED else "all passed")
    if not FAILED:
        shutil.rmtree(TMP, ignore_errors=True)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
