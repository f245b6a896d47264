#!/usr/bin/env python3
"""Tests of the quantize pass through ogsh and onnxruntime.

usage: test_quantize.py OGSH TEST_QUANTIZE [-k SUBSTRING]

1. int4 weight-only (no calibration needed): models built with onnx.helper
   go through `ogsh MODEL -c 'apply quantize precision=int4 ...; save OUT'`;
   the report and the saved structure are checked (an int4 initializer, a
   DequantizeLinear with axis = K and block_size, scales of the weights'
   type, opset 21), the saved model passes onnx.checker (full check) and
   onnxruntime's outputs agree with ogsh's CPU run of the stage within 1e-4
   relative; the error against the float model is printed (SNR).
2. int8 and fp8 need a calibration, which the shell cannot load yet: the
   unit test binary (TEST_QUANTIZE FOLDER) calibrates its models on the CPU
   reference, quantizes them and saves float and quantized models; each
   quantized one must pass onnx.checker and run in onnxruntime with outputs
   that agree with ogsh's run of it (QDQ is the float simulation the spec
   defines; a 1-LSB difference per requantization is allowed), and be close
   to the float model.
3. Errors: int8 without calibration, int4 on a Conv refused with the reason.
Prints one line per check; exits non-zero on any failure.
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # common.py, next to this script
import common  # noqa: E402
from common import check, json_docs, model, ort, ort_outputs, vi  # noqa: E402


def ogsh(model, script, timeout=600):
    """ogsh on the CPU reference (OGSH_DEVICE=cpu), whatever the machine has: the numbers compared."""
    return common.ogsh(model, script, timeout, {"OGSH_DEVICE": "cpu"})


def unit_binary():
    """TEST_QUANTIZE, the second argument: calibrates and quantizes models for the cases
    the shell cannot make."""
    return common.ARGS[0]


def ogsh_run(path, feeds, d):
    inz = os.path.join(d, "in.npz")
    outz = os.path.join(d, "ogsh_out.npz")
    np.savez(inz, **feeds)
    rc, so, se = ogsh(path, f"run --inputs={inz} --save-outputs={outz}")
    if rc:
        return None, se.strip()[-300:]
    return dict(np.load(outz)), ""


def snr(ref, x):
    ref = ref.astype(np.float64)
    e = ((ref - x.astype(np.float64)) ** 2).sum()
    return 999.0 if e == 0 else 10 * np.log10((ref ** 2).sum() / e)


def random_feeds(m, seed=0):
    rng = np.random.default_rng(seed)
    feeds = {}
    inits = {i.name for i in m.graph.initializer}
    for i in m.graph.input:
        if i.name in inits:
            continue
        shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
        dt = onnx.helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type)
        feeds[i.name] = rng.standard_normal(shape).astype(dt)
    return feeds


def saved_checks(name, path, float_path, feeds, min_snr, lsb_tol=1e-3):
    """onnx.checker, onnxruntime against ogsh on the quantized model, and against the float one."""
    m = onnx.load(path)
    try:
        onnx.checker.check_model(m, full_check=True)
        ok = True
        why = ""
    except Exception as e:  # noqa: BLE001
        ok, why = False, str(e)[:300]
    check(f"{name}: onnx.checker passes", ok, why)
    if ort is None:
        return m
    try:
        got = ort_outputs(path, feeds)
    except Exception as e:  # noqa: BLE001
        check(f"{name}: onnxruntime runs it", False, str(e)[:300])
        return m
    check(f"{name}: onnxruntime runs it", True)
    mine, err = ogsh_run(path, feeds, os.path.dirname(path))
    if not check(f"{name}: ogsh runs it", mine is not None, err):
        return m
    ref = ort_outputs(float_path, feeds)
    for k, v in got.items():
        o = mine.get(k)
        if not check(f"{name}: ogsh has output {k}", o is not None):
            continue
        scale = float(np.abs(v).max()) or 1.0
        diff = float(np.abs(v.astype(np.float64) - o.astype(np.float64)).max())
        check(f"{name}: onnxruntime and ogsh agree on {k} (max diff {diff:.3g} of {scale:.3g})",
              diff <= lsb_tol * scale + 1e-6)
        s = snr(ref[k], v)
        check(f"{name}: close to the float model on {k} (SNR {s:.1f} dB > {min_snr})", s > min_snr)
    return m


def inits_of(m):
    return {i.name: i for i in m.graph.initializer}


def dq_feeding(m, value):
    for n in m.graph.node:
        if value in n.output and n.op_type == "DequantizeLinear":
            return n
    return None


def attr(n, name, dflt=None):
    for a in n.attribute:
        if a.name == name:
            return h.get_attribute_value(a)
    return dflt


def opset(m):
    return next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))


def int4_case(name, m, args, expect):
    """expect: {node name: (K axis, K, block)} of the nodes that must be quantized;
    absent nodes must be left float with a reason."""
    if common.FILTER and common.FILTER not in name:
        return
    d = os.path.join(common.TMP, name)
    os.makedirs(d, exist_ok=True)
    src, out = os.path.join(d, "model.onnx"), os.path.join(d, "out.onnx")
    onnx.save(m, src)
    rc, so, se = ogsh(src, f"apply quantize precision=int4 {args} --json; save {out}")
    if not check(f"{name}: apply runs", rc == 0, se.strip()[-400:]):
        return
    docs = json_docs(so)
    rep = docs[0] if docs else {}
    msgs = rep.get("messages", [])
    q = onnx.load(out)
    check(f"{name}: opset 21", opset(q) == 21, str(opset(q)))
    nodes = {n.name: n for n in q.graph.node}
    inits = inits_of(q)
    for n in m.graph.node:
        if n.op_type not in ("MatMul", "Gemm", "Conv"):
            continue
        qn = nodes[n.name]
        dq = dq_feeding(q, qn.input[1])
        if n.name in expect:
            axis, k, block = expect[n.name]
            if not check(f"{name}: {n.name} reads its weights through a DequantizeLinear", dq is not None):
                continue
            w = inits.get(dq.input[0])
            s = inits.get(dq.input[1])
            check(f"{name}: {n.name}'s weights are an int4 initializer", w is not None and w.data_type == T.INT4)
            check(f"{name}: {n.name}'s DequantizeLinear: axis {axis}, block_size {block}",
                  attr(dq, "axis") == axis and attr(dq, "block_size") == block,
                  f"axis {attr(dq, 'axis')} block {attr(dq, 'block_size')}")
            wf = inits_of(m)[n.input[1]]
            check(f"{name}: {n.name}'s scales have the weights' type and ceil(K/block) blocks",
                  s is not None and s.data_type == wf.data_type and
                  list(s.dims)[axis] == -(-k // block), f"{s.dims if s is not None else None}")
            check(f"{name}: {n.name}'s activation stays float", dq_feeding(q, qn.input[0]) is None)
            check(f"{name}: {n.name} reported", any(x["kind"] == "rewrote" and x["node"] == n.name for x in msgs))
        else:
            check(f"{name}: {n.name} stays float", dq is None)
            check(f"{name}: {n.name} says why", any(x["kind"] == "rejected" and x["node"] == n.name for x in msgs))
    saved_checks(name, out, src, random_feeds(m), 10, lsb_tol=1e-4)
    return msgs


def test_int4():
    rng = np.random.default_rng(1)
    # MatMul [K=80 (not a multiple of the block), N=48], Gemm transB=1 [N=16, K=48], Gemm transB=0
    w1 = rng.standard_normal((80, 48)).astype(np.float32)
    w2 = rng.standard_normal((16, 48)).astype(np.float32)
    w3 = rng.standard_normal((16, 32)).astype(np.float32)
    b2 = rng.standard_normal((16,)).astype(np.float32)
    m = model([h.make_node("MatMul", ["x", "w1"], ["a"], name="mm"),
               h.make_node("Relu", ["a"], ["r"], name="relu"),
               h.make_node("Gemm", ["r", "w2", "b2"], ["g"], name="gemm_t", transB=1),
               h.make_node("Gemm", ["g", "w3"], ["y"], name="gemm"),
               h.make_node("Conv", ["img", "cw"], ["cy"], name="conv")],
              [vi("x", T.FLOAT, [4, 80]), vi("img", T.FLOAT, [1, 16, 6, 6])],
              [vi("y", T.FLOAT, [4, 32]), vi("cy", T.FLOAT, [1, 16, 4, 4])],
              [nh.from_array(w1, "w1"), nh.from_array(w2, "w2"), nh.from_array(w3, "w3"), nh.from_array(b2, "b2"),
               nh.from_array(rng.standard_normal((16, 16, 3, 3)).astype(np.float32), "cw")])
    msgs = int4_case("int4-mlp", m, "block=32", {"mm": (0, 80, 32), "gemm_t": (1, 48, 32), "gemm": (0, 16, 32)})
    if msgs is not None:
        check("int4-mlp: Conv refused with the reason",
              any(x["node"] == "conv" and "int4 is weight-only" in x["text"] and "Conv is refused" in x["text"]
                  for x in msgs))
        check("int4-mlp: the opset raise is reported", any("from 17 to 21" in x["text"] for x in msgs))
    # the channel rule, and batched MatMul weights (rank 3: K is axis 1)
    wb = rng.standard_normal((2, 64, 32)).astype(np.float32)
    m = model([h.make_node("MatMul", ["x", "wb"], ["y"], name="bmm"),
               h.make_node("MatMul", ["y", "small"], ["z"], name="narrow")],
              [vi("x", T.FLOAT, [2, 3, 64])], [vi("z", T.FLOAT, [2, 3, 8])],
              [nh.from_array(wb, "wb"), nh.from_array(rng.standard_normal((32, 8)).astype(np.float32), "small")])
    msgs = int4_case("int4-batched", m, "block=64", {"bmm": (1, 64, 64)})
    if msgs is not None:
        check("int4-batched: the narrow MatMul stays float by the channel rule",
              any(x["node"] == "narrow" and "8 output channels, below 16: kept float32" in x["text"] for x in msgs))
    # float16 weights and activations: float16 scales
    w16 = (rng.standard_normal((64, 32)) * 0.1).astype(np.float16)
    m = model([h.make_node("MatMul", ["x", "w"], ["y"], name="mm16")],
              [vi("x", T.FLOAT16, [4, 64])], [vi("y", T.FLOAT16, [4, 32])], [nh.from_array(w16, "w")])
    int4_case("int4-float16", m, "block=128", {"mm16": (0, 64, 128)})
    # an opset-13 model with ReduceMean axes as an attribute: raised to 21, the attribute becomes an input
    w = rng.standard_normal((64, 32)).astype(np.float32)
    m = model([h.make_node("ReduceMean", ["x"], ["mu"], name="mean", axes=[1], keepdims=1),
               h.make_node("Sub", ["x", "mu"], ["c"], name="sub"),
               h.make_node("MatMul", ["c", "w"], ["y"], name="mm")],
              [vi("x", T.FLOAT, [4, 64])], [vi("y", T.FLOAT, [4, 32])], [nh.from_array(w, "w")], opset=13)
    # IR version 3: every initializer is a graph input too; the replaced float weights leave the inputs
    g = h.make_graph([h.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
                     [vi("x", T.FLOAT, [4, 64]), vi("w", T.FLOAT, [64, 32])], [vi("y", T.FLOAT, [4, 32])],
                     initializer=[nh.from_array(w, "w")])
    m3 = h.make_model(g, opset_imports=[h.make_opsetid("", 9)])
    m3.ir_version = 3
    onnx.checker.check_model(m3)
    msgs = int4_case("int4-ir3", m3, "", {"mm": (0, 64, 128)})
    if msgs is not None:
        q = onnx.load(os.path.join(common.TMP, "int4-ir3", "out.onnx"))
        check("int4-ir3: IR version 10, the float weights gone from the inputs",
              q.ir_version == 10 and [i.name for i in q.graph.input] == ["x"] and
              "w" not in inits_of(q), f"{q.ir_version} {[i.name for i in q.graph.input]}")
        check("int4-ir3: the report says so", any("left the graph inputs" in x["text"] for x in msgs))
    msgs = int4_case("int4-opset13", m, "", {"mm": (0, 64, 128)})
    if msgs is not None:
        check("int4-opset13: the raise names the rewritten attributes",
              any("from 13 to 21" in x["text"] and "attributes that became inputs" in x["text"] for x in msgs))


def test_errors():
    if common.FILTER and common.FILTER not in "errors":
        return
    d = os.path.join(common.TMP, "errors")
    os.makedirs(d, exist_ok=True)
    src = os.path.join(d, "model.onnx")
    rng = np.random.default_rng(2)
    m = model([h.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [vi("x", T.FLOAT, [4, 32])],
              [vi("y", T.FLOAT, [4, 32])], [nh.from_array(rng.standard_normal((32, 32)).astype(np.float32), "w")])
    onnx.save(m, src)
    rc, so, se = ogsh(src, "apply quantize")
    check("errors: int8 without calibration fails", rc != 0 and "no calibration: run calibrate first" in se, se)
    rc, so, se = ogsh(src, "apply quantize precision=fp8 method=entropy")
    check("errors: fp8 without calibration fails", rc != 0 and "no calibration: run calibrate first" in se, se)
    rc, so, se = ogsh(src, "apply quantize precision=int4 awq=on")
    check("errors: awq without calibration fails", rc != 0 and "no calibration" in se, se)
    rc, so, se = ogsh(src, "explain quantize")
    for word in ["S*(q - Z)".replace("*", " * "), "per channel", "entropy", "percentile", "mse", "MaxPool",
                 "Concat", "residual", "block_size", "awq", "448", "opset 13"]:
        check(f"errors: explain quantize mentions {word}", rc == 0 and word in so.replace("\n", " "), word)


def test_calibrated():
    """The unit test's calibrated int8/fp8 models, saved: checker, onnxruntime, ogsh."""
    if common.FILTER and common.FILTER not in "calibrated":
        return
    d = os.path.join(common.TMP, "unit")
    os.makedirs(d, exist_ok=True)
    p = subprocess.run([unit_binary(), d], capture_output=True, text=True, timeout=600)
    if not check("calibrated: the unit test saves its models", p.returncode == 0, (p.stderr or p.stdout)[-400:]):
        return
    cases = [("cnn_int8", "cnn", 30), ("cnn_int8_asym", "cnn", 25), ("cnn_fp8", "cnn", 20),
             ("mm2_int8", "mm2", 25), ("opset11_int8", "opset11", 25),
             ("cnn_fused_int8", "cnn_fused", 25), ("cnn_fused_fp8", "cnn_fused", 18)]
    for q, f, min_snr in cases:
        path, fpath = os.path.join(d, q + ".onnx"), os.path.join(d, f + ".onnx")
        if not check(f"calibrated: {q} saved", os.path.exists(path)):
            continue
        fm = onnx.load(fpath)
        saved_checks(q, path, fpath, random_feeds(fm, 5), min_snr)
    # the structure as saved: int8 initializers read by DequantizeLinear with an axis, Q/DQ on inputs
    m = onnx.load(os.path.join(d, "cnn_int8.onnx"))
    inits = inits_of(m)
    conv = {n.name: n for n in m.graph.node}
    dq = dq_feeding(m, conv["conv2"].input[1])
    check("calibrated: conv2's weights are int8 with a per-channel DequantizeLinear",
          dq is not None and inits[dq.input[0]].data_type == T.INT8 and attr(dq, "axis") == 0 and
          len(inits[dq.input[1]].dims) == 1)
    f8 = onnx.load(os.path.join(d, "cnn_fp8.onnx"))
    check("calibrated: fp8 model imports opset 19", opset(f8) == 19)
    check("calibrated: fp8 weights are float8e4m3fn initializers",
          any(i.data_type == T.FLOAT8E4M3FN and len(i.dims) == 4 for i in f8.graph.initializer))


def attention_model():
    rng = np.random.default_rng(0)
    nodes = [h.make_node("MatMul", ["x", "wq"], ["q0"], name="proj_q"),
             h.make_node("MatMul", ["x", "wk"], ["k0"], name="proj_k"),
             h.make_node("MatMul", ["x", "wv"], ["v0"], name="proj_v"),
             h.make_node("Reshape", ["q0", "shp"], ["q1"], name="rq"),
             h.make_node("Transpose", ["q1"], ["q"], perm=[0, 2, 1, 3], name="tq"),
             h.make_node("Reshape", ["k0", "shp"], ["k1"], name="rk"),
             h.make_node("Transpose", ["k1"], ["kt"], perm=[0, 2, 3, 1], name="tk"),
             h.make_node("Reshape", ["v0", "shp"], ["v1"], name="rv"),
             h.make_node("Transpose", ["v1"], ["v"], perm=[0, 2, 1, 3], name="tv"),
             h.make_node("MatMul", ["q", "kt"], ["s"], name="qk"),
             h.make_node("Mul", ["s", "sc"], ["s2"], name="scale"),
             h.make_node("Softmax", ["s2"], ["p"], axis=-1, name="sm"),
             h.make_node("MatMul", ["p", "v"], ["o"], name="pv"),
             h.make_node("Transpose", ["o"], ["o1"], perm=[0, 2, 1, 3], name="to"),
             h.make_node("Reshape", ["o1", "shp2"], ["o2"], name="ro"),
             h.make_node("MatMul", ["o2", "wo"], ["y"], name="proj_o")]
    inits = [nh.from_array((rng.standard_normal((32, 32)) * 0.2).astype(np.float32), n) for n in ["wq", "wk", "wv", "wo"]]
    inits += [nh.from_array(np.array([1, 8, 2, 16], np.int64), "shp"), nh.from_array(np.array([1, 8, 32], np.int64), "shp2"),
              nh.from_array(np.array(0.25, np.float32), "sc")]
    return model(nodes, [vi("x", T.FLOAT, [1, 8, 32])], [vi("y", T.FLOAT, [1, 8, 32])], inits, opset=18)


def unit_quantize(src, out, *opts):
    p = subprocess.run([unit_binary(), "--quantize", src, out, *opts], capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def test_attention():
    """FusedAttention (after fuse-attention): Q and K quantized per tensor, the projections' weights per channel."""
    if common.FILTER and common.FILTER not in "attention":
        return
    d = os.path.join(common.TMP, "attention")
    os.makedirs(d, exist_ok=True)
    src, fused, out = (os.path.join(d, f) for f in ("model.onnx", "fused.onnx", "int8.onnx"))
    onnx.save(attention_model(), src)
    rc, so, se = ogsh(src, f"apply fuse-attention; save {fused}")
    if not check("attention: fuse-attention runs", rc == 0 and "FusedAttention" in so, se[-300:]):
        return
    rc, so, se = unit_quantize(fused, out, "method=entropy")
    if not check("attention: quantize runs", rc == 0, se[-300:]):
        return
    q = onnx.load(out)
    fa = next((n for n in q.graph.node if n.op_type == "FusedAttention"), None)
    if check("attention: FusedAttention kept", fa is not None):
        for i, what in [(0, "Q"), (1, "K")]:
            dq = dq_feeding(q, fa.input[i])
            check(f"attention: FusedAttention's {what} read through a Q/DQ pair",
                  dq is not None and any(n.op_type == "QuantizeLinear" and dq.input[0] in n.output for n in q.graph.node))
        check("attention: V stays float", dq_feeding(q, fa.input[2]) is None)
    check("attention: the projections' weights are per channel",
          all(attr(dq_feeding(q, n.input[1]), "axis") == 1 for n in q.graph.node if n.name.startswith("proj_")))
    saved_checks("attention-int8", out, src, random_feeds(onnx.load(src), 7), 20)
    # int4 with AWQ: the calibration keeps per-channel sums for MatMul inputs
    out4 = os.path.join(d, "int4.onnx")
    rc, so, se = unit_quantize(src, out4, "precision=int4", "block=32", "awq=on")
    if check("attention: int4 awq runs", rc == 0, se[-300:]):
        check("attention: awq reports its alpha for each projection",
              sum("awq alpha" in line or "awq: no scaling" in line for line in so.splitlines()) == 4, so)
        saved_checks("attention-int4-awq", out4, src, random_feeds(onnx.load(src), 7), 10, lsb_tol=1e-4)


def test_convtranspose():
    """ConvTranspose: per-channel weights on axis 1 (its output channels), groups included."""
    if common.FILTER and common.FILTER not in "convtranspose":
        return
    d = os.path.join(common.TMP, "convtranspose")
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(4)
    src, out = os.path.join(d, "model.onnx"), os.path.join(d, "int8.onnx")
    m = model([h.make_node("Conv", ["x", "w1"], ["c"], name="conv", pads=[1, 1, 1, 1]),
               h.make_node("Relu", ["c"], ["r"], name="relu"),
               h.make_node("ConvTranspose", ["r", "w2", "b2"], ["y"], name="deconv", strides=[2, 2], group=2)],
              [vi("x", T.FLOAT, [1, 16, 8, 8])], [vi("y", T.FLOAT, [1, 32, 17, 17])],
              [nh.from_array((rng.standard_normal((32, 16, 3, 3)) * 0.1).astype(np.float32), "w1"),
               nh.from_array((rng.standard_normal((32, 16, 3, 3)) * 0.1).astype(np.float32), "w2"),
               nh.from_array(rng.standard_normal((32,)).astype(np.float32), "b2")])
    onnx.save(m, src)
    rc, so, se = unit_quantize(src, out, "method=mse")
    if not check("convtranspose: quantize runs", rc == 0, se[-300:]):
        return
    q = onnx.load(out)
    nodes = {n.name: n for n in q.graph.node}
    dq = dq_feeding(q, nodes["deconv"].input[1])
    check("convtranspose: weights per channel on axis 1", dq is not None and attr(dq, "axis") == 1 and
          list(inits_of(q)[dq.input[1]].dims) == [16])
    check("convtranspose: the bias stays float", nodes["deconv"].input[2] == "b2")
    saved_checks("convtranspose-int8", out, src, random_feeds(m, 9), 25)


def test_float16():
    """A float16 model in int8: scales and zero points of float16, opset 19."""
    if common.FILTER and common.FILTER not in "float16":
        return
    d = os.path.join(common.TMP, "float16")
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(6)
    src, out = os.path.join(d, "model.onnx"), os.path.join(d, "int8.onnx")
    m = model([h.make_node("MatMul", ["x", "w"], ["a"], name="mm"),
               h.make_node("Relu", ["a"], ["r"], name="relu"),
               h.make_node("MatMul", ["r", "w2"], ["y"], name="mm2")],
              [vi("x", T.FLOAT16, [8, 32])], [vi("y", T.FLOAT16, [8, 32])],
              [nh.from_array((rng.standard_normal((32, 64)) * 0.2).astype(np.float16), "w"),
               nh.from_array((rng.standard_normal((64, 32)) * 0.2).astype(np.float16), "w2")])
    onnx.save(m, src)
    rc, so, se = unit_quantize(src, out)
    if not check("float16: quantize runs", rc == 0, se[-300:]):
        return
    check("float16: the opset raise says why", "from 17 to 19" in so and "float16" in so, so)
    q = onnx.load(out)
    check("float16: opset 19", opset(q) == 19)
    inits = inits_of(q)
    check("float16: scales are float16", all(inits[n].data_type == T.FLOAT16 for n in inits if n.endswith("_scale")))
    # float16 arithmetic rounds differently in onnxruntime (MatMul accumulation): an activation on a rounding
    # tie can quantize one level apart, which moves an output by about one LSB times a row of weights
    saved_checks("float16-int8", out, src, random_feeds(m, 3), 20, lsb_tol=2e-2)


def main():
    return common.main(__doc__, "ogsh-quantize-", (
        test_int4, test_errors, test_calibrated, test_attention, test_convtranspose, test_float16), nargs=2)


if __name__ == "__main__":
    sys.exit(main())
