#!/usr/bin/env python3
"""The cleanup passes keep quantized weights quantized.

usage: test_quantized_cleanup.py OGSH [-k SUBSTRING]

A DequantizeLinear of an int8 (int4, float8...) constant has constant inputs,
but folding it stores the weight as float32: the file grows 4x and the
quantization is gone. Each case builds a model with onnx.helper, runs
`ogsh MODEL -c 'optimize ...; save OUT'` and checks
  1. fold-constants rejected every such DequantizeLinear ("weight is
     quantized (DequantizeLinear of int8 'w'): kept") and its note counts them,
  2. the saved file has the size of the original within 1%, every quantized
     initializer keeps its dtype, and as many DequantizeLinear read a constant,
  3. onnx.checker passes and onnxruntime gives the outputs of the original
     (within 1e-5).
The models: a small float CNN (residual Add, MaxPool, a Gemm head and a
MatMul+Add head) quantized by onnxruntime's quantize_static (QDQ format,
per-channel int8 weights, MinMax and Entropy calibration on random data); an
int4 weight with blocked scales (opset 21); a float8 E4M3FN weight (opset 19);
a float weight written as QuantizeLinear -> DequantizeLinear; an int8 weight
in a Constant node; the fusions that fold into weights (fuse-conv-bn,
fuse-conv-add, fuse-matmul-add) on quantized weights; and the issue's case,
tests/models' ResNet-50 quantized by onnxruntime (skipped with
OGSH_QCLEAN_QUICK=1).
Prints one line per check; exits non-zero on any failure, 77 (skipped) when
onnxruntime is missing.
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
from common import check, json_docs, model, ogsh, ort_outputs  # noqa: E402

try:
    from onnxruntime import quantization as oq
except ImportError:  # pragma: no cover
    oq = None


# the element types a DequantizeLinear reads (TensorProto numbers)
QUANT_TYPES = {T.INT8, T.UINT8, T.INT16, T.UINT16, T.INT32, T.INT4, T.UINT4, T.FLOAT8E4M3FN, T.FLOAT8E4M3FNUZ,
               T.FLOAT8E5M2, T.FLOAT8E5M2FNUZ, T.FLOAT4E2M1}


def const_of(m, name):
    """The TensorProto behind a name: an initializer or a Constant node's value, or None."""
    for t in m.graph.initializer:
        if t.name == name:
            return t
    for n in m.graph.node:
        if n.op_type == "Constant" and n.output[0] == name:
            for a in n.attribute:
                if a.name == "value":
                    return a.t
    return None


def weight_dqs(m):
    """DequantizeLinear nodes whose x is a constant of a quantized type: {x name: dtype}."""
    out = {}
    for n in m.graph.node:
        if n.op_type == "DequantizeLinear":
            t = const_of(m, n.input[0])
            if t is not None and t.data_type in QUANT_TYPES:
                out[n.input[0]] = t.data_type
    return out


def quant_inits(m):
    """Constants of quantized types (initializers and Constant nodes): {name: dtype}."""
    out = {t.name: t.data_type for t in m.graph.initializer if t.data_type in QUANT_TYPES}
    for n in m.graph.node:
        if n.op_type == "Constant":
            t = const_of(m, n.output[0])
            if t is not None and t.data_type in QUANT_TYPES:
                out[n.output[0]] = t.data_type
    return out


def opt_case(name, m, feeds, *, script="apply fold-constants --json; optimize", min_kept=None, rejects=(), kept_note=True):
    """Saves m, runs `script; save OUT` on it and checks what the docstring says. Returns the fold-constants
    report (or None)."""
    if common.FILTER and common.FILTER not in name:
        return None
    d = os.path.join(common.TMP, name)
    os.makedirs(d, exist_ok=True)
    src = m if isinstance(m, str) else os.path.join(d, "model.onnx")
    if not isinstance(m, str):
        onnx.save(m, src)
    out = os.path.join(d, "out.onnx")
    rc, so, se = ogsh(src, f"{script}; save {out}")
    if not check(f"{name}: runs", rc == 0, (so + se).strip()[-500:]):
        return None
    docs = json_docs(so)
    reports = []
    for doc in docs:
        if isinstance(doc, dict) and "pass" in doc:
            reports.append(doc)
    msgs = [(mm.get("kind"), mm.get("text", "")) for r in reports for mm in r.get("messages", [])]
    orig = onnx.load(src)
    new = onnx.load(out)
    before, after = weight_dqs(orig), weight_dqs(new)

    # (1) the report
    if kept_note:
        note = [t for k, t in msgs if k == "note" and t.startswith("kept ") and "DequantizeLinear of quantized" in t]
        check(f"{name}: fold-constants notes the DequantizeLinear it kept", bool(note) and
              int(note[0].split()[1]) == len(before), f"{note} vs {len(before)} weights")
        kept = [t for k, t in msgs if k == "rejected" and "weight is quantized (DequantizeLinear of " in t]
        check(f"{name}: each kept weight is a rejection with its reason", len(kept) >= len(before),
              f"{len(kept)} vs {len(before)}")
    if min_kept is not None:
        check(f"{name}: at least {min_kept} quantized weights", len(before) >= min_kept, f"{len(before)}")
    for sub in rejects:
        check(f"{name}: rejected with '{sub}'", any(k == "rejected" and sub in t for k, t in msgs),
              f"{[t for k, t in msgs if k == 'rejected'][:8]}")
    # (2) the file
    s0, s1 = os.path.getsize(src), os.path.getsize(out)
    check(f"{name}: file size within 1% ({s0} -> {s1} bytes)", abs(s1 - s0) <= 0.01 * s0)
    check(f"{name}: as many DequantizeLinear of quantized weights ({len(before)})", len(after) == len(before),
          f"{len(after)}")
    # every quantized weight is still there with its dtype (zero points may merge into equal ones: cse), and
    # no quantized constant is new or changed type
    qa, qb = quant_inits(orig), quant_inits(new)
    lost = {k: v for k, v in before.items() if qb.get(k) != v}
    changed = {k: v for k, v in qb.items() if qa.get(k) != v}
    check(f"{name}: every quantized weight keeps its dtype", not lost and not changed, f"lost {lost}, new {changed}")
    floats = sum(1 for t in new.graph.initializer if t.data_type == T.FLOAT and np.prod(t.dims) >= 64)
    floats0 = sum(1 for t in orig.graph.initializer if t.data_type == T.FLOAT and np.prod(t.dims) >= 64)
    check(f"{name}: no new float weights ({floats0})", floats <= floats0, f"{floats}")
    # (3) onnx.checker and onnxruntime
    try:
        onnx.checker.check_model(new, full_check=True)
        check(f"{name}: saved model passes onnx.checker", True)
    except Exception as e:  # noqa: BLE001
        check(f"{name}: saved model passes onnx.checker", False, str(e)[:300])
    try:
        a, b = ort_outputs(src, feeds), ort_outputs(out, feeds)
        same = a.keys() == b.keys() and all(a[k].shape == b[k].shape and
                                            np.allclose(b[k], a[k], rtol=0, atol=1e-5) for k in a)
        check(f"{name}: onnxruntime outputs equal (1e-5)", same,
              f"{ {k: float(np.abs(a[k] - b[k]).max()) for k in a if k in b and a[k].shape == b[k].shape} }")
    except Exception as e:  # noqa: BLE001
        check(f"{name}: onnxruntime outputs equal (1e-5)", False, str(e)[:300])
    return reports


# --------------------------------------------------------------------------
# models
# --------------------------------------------------------------------------

def rnd(rng, *shape, scale=0.1):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def float_cnn(head):
    """A float CNN: conv-relu, two convs with a residual Add, MaxPool, then a Gemm head or a MatMul+Add head."""
    rng = np.random.default_rng(1)
    C = 32
    inits = [nh.from_array(rnd(rng, C, 3, 3, 3), "w1"), nh.from_array(rnd(rng, C), "b1"),
             nh.from_array(rnd(rng, C, C, 3, 3, scale=0.05), "w2"), nh.from_array(rnd(rng, C), "b2"),
             nh.from_array(rnd(rng, C, C, 3, 3, scale=0.05), "w3"), nh.from_array(rnd(rng, C), "b3"),
             nh.from_array(rnd(rng, C * 8 * 8, 16, scale=0.02), "fc"), nh.from_array(rnd(rng, 16), "fcb"),
             nh.from_array(rnd(rng, 16, 10), "fc2"), nh.from_array(rnd(rng, 10), "fc2b"),
             nh.from_array(np.array([1, -1], np.int64), "shp")]
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             h.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             h.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
             h.make_node("Relu", ["c2"], ["r2"], name="relu2"),
             h.make_node("Conv", ["r2", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1], name="conv3"),
             h.make_node("Add", ["c3", "r1"], ["a"], name="add"),
             h.make_node("Relu", ["a"], ["r3"], name="relu3"),
             h.make_node("MaxPool", ["r3"], ["p"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
             h.make_node("Reshape", ["p", "shp"], ["f"], name="flat")]
    if head == "gemm":
        nodes += [h.make_node("Gemm", ["f", "fc", "fcb"], ["g"], name="fc"),
                  h.make_node("Relu", ["g"], ["gr"], name="relu4"),
                  h.make_node("Gemm", ["gr", "fc2", "fc2b"], ["y"], name="fc2")]
    else:
        nodes += [h.make_node("MatMul", ["f", "fc"], ["mm"], name="mm"),
                  h.make_node("Add", ["mm", "fcb"], ["g"], name="mm_add"),
                  h.make_node("Relu", ["g"], ["gr"], name="relu4"),
                  h.make_node("MatMul", ["gr", "fc2"], ["mm2"], name="mm2"),
                  h.make_node("Add", ["mm2", "fc2b"], ["y"], name="mm2_add")]
    g = h.make_graph(nodes, "cnn", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 16, 16])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 10])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


class RandomReader(oq.CalibrationDataReader if oq else object):
    def __init__(self, n=8):
        self.rng = np.random.default_rng(7)
        self.left = n

    def get_next(self):
        if self.left <= 0:
            return None
        self.left -= 1
        return {"x": self.rng.standard_normal((1, 3, 16, 16)).astype(np.float32)}


def ort_quantized(head, method):
    d = os.path.join(common.TMP, f"ort-{head}-{method}")
    os.makedirs(d, exist_ok=True)
    f, q = os.path.join(d, "f.onnx"), os.path.join(d, "q.onnx")
    onnx.save(float_cnn(head), f)
    cm = {"minmax": oq.CalibrationMethod.MinMax, "entropy": oq.CalibrationMethod.Entropy}[method]
    import logging
    logging.getLogger().setLevel(logging.ERROR)
    oq.quantize_static(f, q, RandomReader(), quant_format=oq.QuantFormat.QDQ, per_channel=True,
                       weight_type=oq.QuantType.QInt8, activation_type=oq.QuantType.QInt8, calibrate_method=cm)
    return q


def feeds_x(shape=(1, 3, 16, 16)):
    return {"x": np.random.default_rng(3).standard_normal(shape).astype(np.float32)}


def mk(nodes, inputs, outputs, inits, opset):
    """A model of the IR version the opset came with (int4 needs IR 10)."""
    return model(nodes, inputs, outputs, inits, opset, ir=10 if opset >= 21 else 9)


def int4_model():
    """MatMul by an int4 weight [K=256, N=64] with blocked scales along K (block 32, opset 21)."""
    rng = np.random.default_rng(4)
    K, N, B = 256, 64, 32
    q = rng.integers(-8, 8, size=(K, N)).astype(np.int8)
    w = h.make_tensor("w_q", T.INT4, [K, N], q.flatten().tolist())
    s = nh.from_array((rng.uniform(0.01, 0.05, (K // B, N))).astype(np.float32), "w_s")
    zp = h.make_tensor("w_z", T.INT4, [K // B, N], [0] * (K // B * N))
    nodes = [h.make_node("DequantizeLinear", ["w_q", "w_s", "w_z"], ["w"], axis=0, block_size=B, name="w_dq"),
             h.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    return mk(nodes, [h.make_tensor_value_info("x", T.FLOAT, [2, K])], [h.make_tensor_value_info("y", T.FLOAT, [2, N])],
              [w, s, zp], 21)


def fp8_model():
    """A 1x1 Conv and a MatMul whose weights are float8 E4M3FN with one scale each (opset 19)."""
    rng = np.random.default_rng(5)
    wc = rng.standard_normal((128, 16, 1, 1)).astype(np.float32)
    wm = rng.standard_normal((128, 256)).astype(np.float32)
    t1 = h.make_tensor("wc_q", T.FLOAT8E4M3FN, list(wc.shape), wc.flatten().tolist())
    t2 = h.make_tensor("wm_q", T.FLOAT8E4M3FN, list(wm.shape), wm.flatten().tolist())
    inits = [t1, t2, nh.from_array(np.array(0.02, np.float32), "wc_s"), nh.from_array(np.array(0.03, np.float32), "wm_s"),
             nh.from_array(np.array([1, 128], np.int64), "shp")]
    nodes = [h.make_node("DequantizeLinear", ["wc_q", "wc_s"], ["wc"], name="wc_dq"),
             h.make_node("Conv", ["x", "wc"], ["c"], name="conv"),
             h.make_node("Relu", ["c"], ["r"], name="relu"),
             h.make_node("Reshape", ["r", "shp"], ["f"], name="flat"),
             h.make_node("DequantizeLinear", ["wm_q", "wm_s"], ["wm"], name="wm_dq"),
             h.make_node("MatMul", ["f", "wm"], ["y"], name="mm")]
    return mk(nodes, [h.make_tensor_value_info("x", T.FLOAT, [1, 16, 1, 1])],
              [h.make_tensor_value_info("y", T.FLOAT, [1, 256])], inits, 19)


def qdq_const_model():
    """A float weight written as QuantizeLinear -> DequantizeLinear (how some tools store weights), and an int8
    weight held by a Constant node."""
    rng = np.random.default_rng(6)
    w = rng.standard_normal((32, 48)).astype(np.float32) * 0.1
    s = np.float32(np.abs(w).max() / 127)
    w2 = rng.integers(-127, 128, size=(48, 8)).astype(np.int8)
    inits = [nh.from_array(w, "w"), nh.from_array(np.array(s, np.float32), "w_s"),
             nh.from_array(np.array(0, np.int8), "w_z"), nh.from_array(np.array(0.01, np.float32), "w2_s")]
    nodes = [h.make_node("QuantizeLinear", ["w", "w_s", "w_z"], ["w_q"], name="w_q"),
             h.make_node("DequantizeLinear", ["w_q", "w_s", "w_z"], ["w_dq"], name="w_dq"),
             h.make_node("MatMul", ["x", "w_dq"], ["a"], name="mm1"),
             h.make_node("Constant", [], ["w2_q"], value=nh.from_array(w2, "w2_q"), name="w2_const"),
             h.make_node("DequantizeLinear", ["w2_q", "w2_s"], ["w2"], name="w2_dq"),
             h.make_node("MatMul", ["a", "w2"], ["y"], name="mm2")]
    return mk(nodes, [h.make_tensor_value_info("x", T.FLOAT, [4, 32])], [h.make_tensor_value_info("y", T.FLOAT, [4, 8])],
              inits, 13)


def fusion_model():
    """Conv with an int8 per-channel weight followed by BatchNormalization, then by Add of a constant, and a
    MatMul with an int8 weight followed by Add of a bias: fusions that would fold into the weights."""
    rng = np.random.default_rng(8)
    C = 16
    wq = rng.integers(-127, 128, size=(C, 8, 3, 3)).astype(np.int8)
    mq = rng.integers(-127, 128, size=(C * 4 * 4, 256)).astype(np.int8)
    inits = [nh.from_array(wq, "cw_q"), nh.from_array(rng.uniform(0.001, 0.01, C).astype(np.float32), "cw_s"),
             nh.from_array(np.zeros(C, np.int8), "cw_z"),
             nh.from_array(rng.uniform(0.5, 1.5, C).astype(np.float32), "bn_s"),
             nh.from_array(rnd(rng, C), "bn_b"), nh.from_array(rnd(rng, C), "bn_m"),
             nh.from_array(rng.uniform(0.5, 1.5, C).astype(np.float32), "bn_v"),
             nh.from_array(rnd(rng, 1, C, 1, 1), "k"),
             nh.from_array(-wq, "cw2_q"), nh.from_array(np.array(0.004, np.float32), "cw2_s"),
             nh.from_array(mq, "mw_q"), nh.from_array(np.array(0.002, np.float32), "mw_s"),
             nh.from_array(rnd(rng, 256), "mb"), nh.from_array(np.array([1, -1], np.int64), "shp")]
    nodes = [h.make_node("DequantizeLinear", ["cw_q", "cw_s", "cw_z"], ["cw"], axis=0, name="cw_dq"),
             h.make_node("Conv", ["x", "cw"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             h.make_node("BatchNormalization", ["c", "bn_s", "bn_b", "bn_m", "bn_v"], ["bn"], name="bn"),
             h.make_node("DequantizeLinear", ["cw2_q", "cw2_s"], ["cw2"], name="cw2_dq"),
             h.make_node("Conv", ["x", "cw2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
             h.make_node("Add", ["c2", "k"], ["ck"], name="add_k"),
             h.make_node("Add", ["bn", "ck"], ["s"], name="sum"),
             h.make_node("Reshape", ["s", "shp"], ["f"], name="flat"),
             h.make_node("DequantizeLinear", ["mw_q", "mw_s"], ["mw"], name="mw_dq"),
             h.make_node("MatMul", ["f", "mw"], ["mm"], name="mm"),
             h.make_node("Add", ["mm", "mb"], ["y"], name="mm_add")]
    return mk(nodes, [h.make_tensor_value_info("x", T.FLOAT, [1, 8, 4, 4])],
              [h.make_tensor_value_info("y", T.FLOAT, [1, 256])], inits, 13)


# --------------------------------------------------------------------------
# cases
# --------------------------------------------------------------------------

def t_ort():
    methods = ("minmax", "entropy")
    for head in ("gemm", "matmul"):
        for method in methods:
            name = f"ort-{head}-{method}"
            if common.FILTER and common.FILTER not in name:
                continue
            try:
                q = ort_quantized(head, method)
            except Exception as e:  # noqa: BLE001
                check(f"{name}: quantize_static", False, repr(e)[:300])
                continue
            for level in ("extended", "all"):
                opt_case(f"{name}-{level}", q, feeds_x(), script=f"apply fold-constants --json; optimize --level={level}", min_kept=5)


def t_resnet50():
    """The issue's case: tests/models' ResNet-50 quantized by onnxruntime (pre-processed, then quantize_static
    per-channel QDQ): 26 MB that `optimize` used to grow to 39 MB of float weights. Skipped with
    OGSH_QCLEAN_QUICK=1 (it takes about a minute)."""
    name = "ort-resnet50"
    if (common.FILTER and common.FILTER not in name) or os.environ.get("OGSH_QCLEAN_QUICK"):
        return
    import importlib.util
    import logging
    logging.getLogger().setLevel(logging.ERROR)
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("make_models", os.path.join(here, "..", "models", "make_models.py"))
    mm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mm)
    d = os.path.join(common.TMP, name)
    os.makedirs(d, exist_ok=True)
    mm.main([d, "resnet50"])
    f, pre, q = os.path.join(d, "resnet50.onnx"), os.path.join(d, "pre.onnx"), os.path.join(d, "q.onnx")
    from onnxruntime.quantization.shape_inference import quant_pre_process
    quant_pre_process(f, pre, skip_symbolic_shape=True)
    os.remove(f)
    inp = onnx.load(pre, load_external_data=False).graph.input[0].name

    class Reader(oq.CalibrationDataReader):
        def __init__(self):
            self.left, self.rng = 2, np.random.default_rng(0)

        def get_next(self):
            if self.left <= 0:
                return None
            self.left -= 1
            return {inp: self.rng.standard_normal((1, 3, 224, 224)).astype(np.float32)}

    oq.quantize_static(pre, q, Reader(), quant_format=oq.QuantFormat.QDQ, per_channel=True,
                       weight_type=oq.QuantType.QInt8, activation_type=oq.QuantType.QInt8)
    os.remove(pre)
    feeds = {inp: np.random.default_rng(5).standard_normal((1, 3, 224, 224)).astype(np.float32)}
    opt_case(name, q, feeds, script="apply fold-constants --json; optimize", min_kept=54)


def t_int4():
    opt_case("int4-blocked", int4_model(), {"x": np.random.default_rng(1).standard_normal((2, 256)).astype(np.float32)},
             script="apply fold-constants --json; optimize --level=all",
             rejects=("weight is quantized (DequantizeLinear of int4 'w_q'): kept",))


def t_fp8():
    opt_case("fp8", fp8_model(), {"x": np.random.default_rng(1).standard_normal((1, 16, 1, 1)).astype(np.float32)},
             script="apply fold-constants --json; optimize --level=all",
             rejects=("weight is quantized (DequantizeLinear of float8e4m3fn 'wc_q'): kept",))


def t_qdq_const():
    name = "qdq-const"
    if common.FILTER and common.FILTER not in name:
        return
    feeds = {"x": np.random.default_rng(1).standard_normal((4, 32)).astype(np.float32)}
    rep = opt_case(name, qdq_const_model(), feeds, script="apply fold-constants --json", kept_note=False,
                   rejects=("weight is quantized (QuantizeLinear of float32 'w' read by a DequantizeLinear): kept",
                            "weight is quantized (DequantizeLinear of int8 'w2_q'): kept"))
    if rep is not None:
        msgs = [mm.get("text", "") for r in rep for mm in r.get("messages", [])]
        check(f"{name}: note counts the Q->DQ pair", any("kept 1 QuantizeLinear->DequantizeLinear pair" in t
                                                          for t in msgs), f"{msgs}")
        check(f"{name}: note counts the DequantizeLinear of int8",
              any("kept 1 DequantizeLinear of quantized weights" in t for t in msgs), f"{msgs}")
        check(f"{name}: the Constant node became an initializer",
              any("Constant now the initializer 'w2_q' int8" in t for t in msgs), f"{msgs}")
    out = os.path.join(common.TMP, name, "out.onnx")
    if os.path.exists(out):
        m = onnx.load(out)
        ops = [n.op_type for n in m.graph.node]
        check(f"{name}: QuantizeLinear and both DequantizeLinear still there",
              ops.count("QuantizeLinear") == 1 and ops.count("DequantizeLinear") == 2, f"{ops}")
        check(f"{name}: the int8 weight is an int8 initializer", quant_inits(m).get("w2_q") == T.INT8,
              f"{quant_inits(m)}")


def t_fusions():
    name = "fusions"
    if common.FILTER and common.FILTER not in name:
        return
    feeds = {"x": np.random.default_rng(1).standard_normal((1, 8, 4, 4)).astype(np.float32)}
    opt_case(name, fusion_model(), feeds,
             script="apply fold-constants --json; apply fuse-conv-bn --json; apply fuse-conv-add --json; "
                    "apply fuse-matmul-add --json; optimize --level=all",
             rejects=("conv's weight is quantized (DequantizeLinear of int8 'cw_q'): kept",
                      "conv2's weight is quantized (DequantizeLinear of int8 'cw2_q'): kept",
                      "B: weight is quantized (DequantizeLinear of int8 'mw_q'): kept"))


def t_explain():
    if common.FILTER and common.FILTER not in "explain":
        return
    p = subprocess.run([common.OGSH, "-c", "explain fold-constants"], capture_output=True, text=True)
    check("explain fold-constants: says quantized weights stay quantized",
          p.returncode == 0 and "Quantized weights stay quantized" in p.stdout, (p.stdout + p.stderr)[-300:])


def main():
    return common.main(__doc__, "ogsh-qclean-", (t_ort, t_resnet50, t_int4, t_fp8, t_qdq_const, t_fusions, t_explain),
                       missing=None if oq else "onnxruntime is not installed")


if __name__ == "__main__":
    sys.exit(main())
