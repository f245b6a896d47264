#!/usr/bin/env python3
"""The quantized islands of issue 18, as small QDQ models, checked on the GPU.

    make_islands.py OUTDIR                  writes the models and OUTDIR/islands.json
    make_islands.py --check OGSH OUTDIR     runs each with `run --check=cpu` and
                                            prints one line per model and a summary
    make_islands.py --list                  the model names

Every model is float in, float out: Q(x) -> DQ -> the island -> Q -> DQ. The
islands are the shapes the planner fuses into one integer kernel (TensorRT's
explicit quantization): DQ(int8 x) and DQ(int8 W, per channel) into Conv
(groups, depthwise, strides, dilations, pads, 1x1..7x7, 3..2048 channels, odd
spatial sizes, batch 1 and 33) or Gemm/MatMul (2-D and 3-D activations,
transB), with a bias (float, or int32 through a DequantizeLinear as
onnxruntime writes it) or none, then none/Relu/Clip, a residual Add of a
DQ(int8) value and a Relu after it (ResNet's Conv -> Add(DQ(skip)) -> Relu -> Q),
and a Q to int8 again. Then: FP8 (E4M3FN, opset 19) versions of a few; chains
of islands whose activations stay int8 between them (a ResNet bottleneck, a
BERT feed-forward); Q/DQ the planner should move across a MaxPool or a
Flatten; INT4 weight-only MatMuls (blocked, opset 21); and models that must
not fuse (an asymmetric zero point, channel counts that are not multiples of
16, a Sigmoid between the DQ and the Conv), which must still run correctly.

The reference is ogsh's CPU interpreter on the same QDQ graph (a float
simulation). Tolerance per element: one quantization step of the output
(the final DQ's scale) for int8, as the issue states (the CPU rounds float
products, the GPU accumulates in int32, so a value near a rounding boundary
may land one step away); one E4M3 step for FP8 (rtol 1/8, and atol the
smallest subnormal step), and in an FP8 chain also what one E4M3 step of an
intermediate value moves the output by (max|x|/8 * max|W|: E4M3 steps are
relative, so a tie rounded the other way upstream is an absolute error that
an output near zero cannot absorb in its own step); `help run`'s defaults for INT4 weight-only
(float outputs). The scales come from a numpy simulation of each model on
inputs like the ones ogsh makes (uniform in [-1, 1)): the output's 99.9th
percentile maps to 127 (a few values saturate), and one step of an
intermediate int8 value moves a later output by well under one output step
(so chains keep the one-step bound).

--check prints, per model: name, ok/FAIL, the largest |GPU - CPU|, the step,
the tolerance used, and what the plan did with the island's main node (the
kernel, and whether its Q/DQ ran on the GPU). OGSH_CHECK_DEVICE=cpu runs
both sides on the CPU (to try this script without a GPU).
"""
import concurrent.futures
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '../..', "scripts"))
from ogsh_json import json_objects  # noqa: E402

F32 = np.float32


# ---------------------------------------------------------------------------
# numpy reference, only to choose scales
# ---------------------------------------------------------------------------

def conv_ref(x, w, b, strides, pads, dil, group):
    """float Conv, NCHW, pads = [top, left, bottom, right]"""
    x = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    ho = (h - dil[0] * (kh - 1) - 1) // strides[0] + 1
    wo = (wd - dil[1] * (kw - 1) - 1) // strides[1] + 1
    cols = np.empty((n, c, kh, kw, ho, wo), F32)
    for i in range(kh):
        for j in range(kw):
            y0, x0 = i * dil[0], j * dil[1]
            cols[:, :, i, j] = x[:, :, y0:y0 + strides[0] * (ho - 1) + 1:strides[0],
                                 x0:x0 + strides[1] * (wo - 1) + 1:strides[1]]
    og = o // group
    out = np.empty((n, o, ho * wo), F32)
    for g in range(group):
        cm = cols[:, g * cg:(g + 1) * cg].reshape(n, cg * kh * kw, ho * wo)
        wm = w[g * og:(g + 1) * og].reshape(og, cg * kh * kw)
        out[:, g * og:(g + 1) * og] = wm @ cm
    out = out.reshape(n, o, ho, wo)
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out


def q8(x, s):
    return np.clip(np.round(x / s), -128, 127) * s


def scale_for(y, qmax=127.0):
    a = float(np.percentile(np.abs(y), 99.9))
    if a <= 0:
        a = float(np.abs(y).max()) or 1.0
    return a / qmax


# ---------------------------------------------------------------------------
# graph building
# ---------------------------------------------------------------------------

class G:
    """A graph under construction."""

    def __init__(self, name, fmt="int8", opset=17):
        self.name, self.fmt, self.opset = name, fmt, opset
        self.nodes, self.inits, self.inputs = [], [], []
        self.k = 0

    def uid(self, p):
        self.k += 1
        return f"{p}{self.k}"

    def init(self, arr, name=None, dtype=None):
        name = name or self.uid("c")
        if dtype is None:
            self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        else:
            arr = np.asarray(arr)
            self.inits.append(helper.make_tensor(name, dtype, list(arr.shape), arr.flatten().tolist()))
        return name

    def node(self, op, ins, n_out=1, **attrs):
        outs = [self.uid(op.lower() + "_") for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, ins, outs, name=self.uid(op), **attrs))
        return outs[0] if n_out == 1 else outs

    def input(self, name, shape, dtype=TensorProto.FLOAT):
        self.inputs.append(helper.make_tensor_value_info(name, dtype, list(shape)))
        return name

    # activation Q -> DQ in the model's format; returns the DQ output
    def qdq(self, v, s, zp=None):
        if self.fmt == "fp8":
            z = self.init(np.array(0.0, F32), dtype=TensorProto.FLOAT8E4M3FN)
        elif zp is not None:   # asymmetric uint8
            z = self.init(np.array(zp, np.uint8))
        else:
            z = self.init(np.array(0, np.int8))
        sc = self.init(np.array(s, F32))
        q = self.node("QuantizeLinear", [v, sc, z])
        return self.node("DequantizeLinear", [q, sc, z])

    # a weight [O, ...] quantized per output channel (axis), or per tensor
    def weight(self, w, axis=0, per_channel=True):
        red = tuple(i for i in range(w.ndim) if i != axis)
        if self.fmt == "fp8":
            qmax = 448.0
        else:
            qmax = 127.0
        if per_channel:
            s = (np.abs(w).max(axis=red) / qmax).astype(F32)
            s[s == 0] = 1.0
            shp = [1] * w.ndim
            shp[axis] = -1
            wq = w / s.reshape(shp)
        else:
            s = np.array(np.abs(w).max() / qmax, F32)
            wq = w / s
        if self.fmt == "fp8":
            qt = helper.make_tensor(self.uid("w"), TensorProto.FLOAT8E4M3FN, list(w.shape), wq.flatten().tolist())
            self.inits.append(qt)
            back = numpy_helper.to_array(qt).astype(F32)
            z = self.init(np.zeros(s.shape, F32), dtype=TensorProto.FLOAT8E4M3FN)
            wname = qt.name
        else:
            back = np.clip(np.round(wq), -127, 127).astype(np.int8)
            wname = self.init(back)
            back = back.astype(F32)
            z = self.init(np.zeros(s.shape, np.int8))
        sname = self.init(s)
        attrs = {"axis": axis} if per_channel else {}
        out = self.node("DequantizeLinear", [wname, sname, z], **attrs)
        shp = [1] * w.ndim
        if per_channel:
            shp[axis] = -1
        return out, back * s.reshape(shp)

    def save(self, path, outs):
        graph = helper.make_graph(self.nodes, self.name, self.inputs,
                                  [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outs],
                                  self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)],
                                  producer_name="make_islands.py")
        model.ir_version = {17: 8, 19: 9, 21: 10}[self.opset]
        model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        # the output's declared type from inference (UNDEFINED is not allowed)
        vi = {v.name: v for v in list(model.graph.value_info)}
        for o in model.graph.output:
            if o.name in vi:
                o.CopyFrom(vi[o.name])
        onnx.checker.check_model(model, full_check=True)
        onnx.save(model, path)


# ---------------------------------------------------------------------------
# the islands
# ---------------------------------------------------------------------------

def rng_for(name):
    return np.random.default_rng(sum(map(ord, name)) * 7919 + len(name))


def island_tail(g, y_float, y_ref, act, res, rng, out_fmt_scale=None):
    """act, residual, the output Q; returns (float output name, reference values, step)"""
    cur = y_float
    ref = y_ref
    if act == "relu":
        cur = g.node("Relu", [cur])
        ref = np.maximum(ref, 0)
    elif act == "clip":
        lo, hi = 0.0, float(np.percentile(ref, 90))
        cur = g.node("Clip", [cur, g.init(np.array(lo, F32)), g.init(np.array(hi, F32))])
        ref = np.clip(ref, lo, hi)
    if res:
        # the skip: a graph input quantized to int8 (another island's output in ResNet)
        rname = g.input("skip", [g.batch] + list(ref.shape[1:]))
        sr = 1 / 127
        rd = g.qdq(rname, sr) if g.fmt != "fp8" else g.qdq(rname, 1 / 448)
        cur = g.node("Add", [cur, rd])
        ref = ref + rng.uniform(-1, 1, ref.shape).astype(F32)
        if res == "relu":
            cur = g.node("Relu", [cur])
            ref = np.maximum(ref, 0)
    s = scale_for(ref, 448.0 if g.fmt == "fp8" else 127.0)
    out = g.qdq(cur, s)
    return out, (q8(ref, s) if g.fmt != "fp8" else ref), s


def ort_tail(g, y_float, y_ref, res, rng, act="relu"):
    """onnxruntime's QDQ (quantize_static, symmetric int8): the conv's output
    quantized on its own; a residual Add between Q/DQ pairs; the Relu after
    it between two Q/DQ of the same scale"""
    s = scale_for(y_ref)
    cur, ref = g.qdq(y_float, s), q8(y_ref, s)
    if res:
        rname = g.input("skip", [g.batch] + list(ref.shape[1:]))
        cur = g.node("Add", [cur, g.qdq(rname, 1 / 127)])
        ref = ref + rng.uniform(-1, 1, ref.shape).astype(F32)
        s = scale_for(ref)
        cur, ref = g.qdq(cur, s), q8(ref, s)
    if act == "clip":   # ReLU6 as in MobileNet: Clip(0, hi)
        hi = float(np.percentile(ref, 90))
        cur = g.node("Clip", [cur, g.init(np.array(0.0, F32)), g.init(np.array(hi, F32))])
        ref = np.clip(ref, 0, hi)
    else:
        cur = g.node("Relu", [cur])
        ref = np.maximum(ref, 0)
    return g.qdq(cur, s), ref, s


def conv_island(g, x_dq, x_ref, cin, cout, k, stride=1, pad=None, dil=1, group=1, bias="float", act="relu",
                res=None, per_channel=True, rng=None, pre=None):
    kh, kw = (k, k) if isinstance(k, int) else k
    if pad is None:
        pad = [dil * (kh - 1) // 2, dil * (kw - 1) // 2] * 2
    w = rng.standard_normal((cout, cin // group, kh, kw)).astype(F32) * np.sqrt(2.0 / (cin // group * kh * kw))
    wd, wref = g.weight(w, 0, per_channel)
    xin = x_dq
    if pre == "sigmoid":   # an op between the DQ and the Conv that does not commute with it
        xin = g.node("Sigmoid", [x_dq])
        x_ref = 1 / (1 + np.exp(-x_ref))
    ins = [xin, wd]
    b = None
    if bias == "float":
        b = (rng.standard_normal(cout) * 0.1).astype(F32)
        ins.append(g.init(b))
    elif bias == "int32":   # onnxruntime's: int32 with scale S_x*S_w per channel
        b = (rng.standard_normal(cout) * 0.1).astype(F32)
        sx = g.x_scale
        sw = (np.abs(w).reshape(cout, -1).max(axis=1) / 127).astype(F32)
        sb = (sx * sw).astype(F32)
        bq = np.round(b / sb).astype(np.int32)
        b = bq * sb
        ins.append(g.node("DequantizeLinear", [g.init(bq), g.init(sb), g.init(np.zeros(cout, np.int32))], axis=0))
    y = g.node("Conv", ins, kernel_shape=[kh, kw], strides=[stride, stride], pads=list(pad),
               dilations=[dil, dil], group=group)
    yref = conv_ref(x_ref, wref, b, (stride, stride), pad, (dil, dil), group)
    return y, yref


def make_conv(out, name, n, cin, hw, cout, k, fmt="int8", chain=None, asym=False, commute=None, ort=False, **kw):
    g = G(name, fmt, 19 if fmt == "fp8" else 17)
    rng = rng_for(name)
    h, wd = (hw, hw) if isinstance(hw, int) else hw
    x = g.input("x", [n, cin, h, wd])
    g.batch = n
    xs = 1 / 448 if fmt == "fp8" else 1 / 127
    g.x_scale = xs
    nref = min(n, 2)
    xr = rng.uniform(-1, 1, (nref, cin, h, wd)).astype(F32)
    if asym:   # uint8 with a zero point: not TensorRT's symmetric int8
        xs = 2 / 255
        g.x_scale = xs
        xd = g.qdq(x, xs, zp=128)
        xr = (np.clip(np.round(xr / xs) + 128, 0, 255) - 128) * xs
    else:
        xd = g.qdq(x, xs)
        xr = q8(xr, xs) if fmt != "fp8" else xr
    if commute == "maxpool":   # ResNet's stem: DQ -> MaxPool -> Q -> DQ -> Conv
        xd = g.node("MaxPool", [xd], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
        xr = maxpool3s2(xr)
        xd = g.qdq(xd, xs)
    y, yref = conv_island(g, xd, xr, cin, cout, k, rng=rng, **{k_: v for k_, v in kw.items() if k_ not in ("act", "res")})
    act, res = kw.get("act", "relu"), kw.get("res")
    if ort:
        o, ref, s = ort_tail(g, y, yref, res, rng, kw.get("act", "relu"))
    elif chain is None:
        o, ref, s = island_tail(g, y, yref, act, res, rng)
    else:
        # more islands; activations int8 between them
        o, ref, s = island_tail(g, y, yref, act, None, rng)
        cur, cur_ref = o, ref
        skip_d, skip_ref = xd, xr
        for i, (c2, k2) in enumerate(chain):
            g.x_scale = s
            last = i == len(chain) - 1
            y2, y2ref = conv_island(g, cur, cur_ref, cout, c2, k2, rng=rng, bias="float")
            cout = c2
            if last and res == "block":   # the bottleneck's own input as the skip
                y2 = g.node("Add", [y2, skip_d])
                y2ref = y2ref + skip_ref
                y2 = g.node("Relu", [y2])
                y2ref = np.maximum(y2ref, 0)
                sy = scale_for(y2ref)
                o = g.qdq(y2, sy)
                cur, cur_ref, s = o, q8(y2ref, sy), sy
            else:
                cur, cur_ref, s = island_tail(g, y2, y2ref, "relu" if not last else act, None, rng)
        o = cur
    g.save(os.path.join(out, name + ".onnx"), [o])
    return s


def maxpool3s2(x):   # MaxPool 3x3, strides 2, pads 1
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    ho, wo = (h - 1) // 2 + 1, (w - 1) // 2 + 1
    out = np.full((n, c, ho, wo), -np.inf, F32)
    for i in range(3):
        for j in range(3):
            out = np.maximum(out, xp[:, :, i:i + 2 * (ho - 1) + 1:2, j:j + 2 * (wo - 1) + 1:2])
    return out


def make_mm(out, name, xshape, k, n, fmt="int8", op="MatMul", trans_b=False, bias="float", act="none", res=None,
            chain=None, commute=None):
    g = G(name, fmt, 19 if fmt == "fp8" else 17)
    rng = rng_for(name)
    x = g.input("x", xshape)
    g.batch = xshape[0]
    xs = 1 / 448 if fmt == "fp8" else 1 / 127
    xr = rng.uniform(-1, 1, [min(xshape[0], 2)] + list(xshape[1:])).astype(F32)
    xd = g.qdq(x, xs)
    xr = q8(xr, xs) if fmt != "fp8" else xr
    if commute == "flatten":   # ResNet's head: DQ -> Flatten -> Gemm
        xd = g.node("Flatten", [xd], axis=1)
        xr = xr.reshape(xr.shape[0], -1)
    cur, cur_ref, s = xd, xr, xs
    dims = [n] + [c for c, _ in (chain or [])]
    kin = k
    prop = 0.0   # fp8 chains: what one E4M3 step of an intermediate value moves an output by
    for i, nout in enumerate(dims):
        w = (rng.standard_normal((kin, nout)) * np.sqrt(2.0 / kin)).astype(F32)
        if op == "Gemm" and trans_b:
            wd, wref = g.weight(np.ascontiguousarray(w.T), 0)
            wref = wref.T
        else:
            wd, wref = g.weight(w, 1)
        b = (rng.standard_normal(nout) * 0.1).astype(F32) if bias == "float" else None
        if op == "Gemm":
            ins = [cur, wd] + ([g.init(b)] if b is not None else [])
            y = g.node("Gemm", ins, transB=1 if trans_b else 0)
        else:
            y = g.node("MatMul", [cur, wd])
            if b is not None:
                y = g.node("Add", [y, g.init(b)])
        if fmt == "fp8" and i > 0:
            # an E4M3 step is up to 1/8 of the value: a tie the GPU rounds the other
            # way moves this layer's outputs by up to max|x|/8 * max|W|, an absolute
            # amount the output's own step (relative, tiny near zero) does not cover
            prop = max(prop, float(np.abs(cur_ref).max()) / 8 * float(np.abs(wref).max()))
        yref = cur_ref @ wref + (b if b is not None else 0)
        last = i == len(dims) - 1
        cur, cur_ref, s = island_tail(g, y, yref, act if last else "relu", res if last else None, rng)
        kin = nout
    g.save(os.path.join(out, name + ".onnx"), [cur])
    return (s, prop) if prop else s


def make_int4(out, name, m, k, n, dtype=F32, block=32):
    """DQ(int4 W [K, N], blocked along K) -> MatMul, float activations (weight-only)"""
    g = G(name, "int4", 21)
    rng = rng_for(name)
    onnx_t = TensorProto.FLOAT16 if dtype == np.float16 else TensorProto.FLOAT
    x = g.input("x", m, onnx_t)
    w = (rng.standard_normal((k, n)) * np.sqrt(1.0 / k)).astype(F32)
    nb = (k + block - 1) // block
    s = np.empty((nb, n), F32)
    for i in range(nb):
        s[i] = np.abs(w[i * block:(i + 1) * block]).max(axis=0) / 7
    s[s == 0] = 1
    wq = np.clip(np.round(w / np.repeat(s, block, axis=0)[:k]), -8, 7).astype(np.int64)
    wn = g.init(wq, dtype=TensorProto.INT4)
    sn = g.init(s.astype(dtype))
    y = g.node("MatMul", [x, g.node("DequantizeLinear", [wn, sn], axis=0, block_size=block)])
    g.save(os.path.join(out, name + ".onnx"), [y])
    return None


def cases():
    """(name, kind, maker, kwargs): every model"""
    c = []

    def conv(name, *a, **kw):
        c.append((name, "int8" if kw.get("fmt", "int8") == "int8" else kw["fmt"], make_conv, a, kw))

    def mm(name, *a, **kw):
        c.append((name, kw.get("fmt", "int8"), make_mm, a, kw))

    # convolutions: (n, cin, hw, cout, k)
    conv("conv3x3_c16_odd15", 1, 16, 15, 16, 3, act="relu")
    conv("conv3x3_c32_s2_b33", 33, 32, 17, 32, 3, stride=2, act="none", bias="none")
    conv("conv1x1_c64_256", 1, 64, 28, 256, 1, act="none", bias="int32")
    conv("conv1x1_c256_512_s2", 1, 256, 28, 512, 1, stride=2, pad=[0, 0, 0, 0], act="none")
    conv("conv3x3_c128_dil2", 1, 128, 14, 128, 3, dil=2, act="relu")
    conv("conv5x5_c64_odd13", 1, 64, 13, 64, 5, act="clip")
    conv("conv7x7_c64_odd21", 1, 64, 21, 64, 7, act="relu", bias="none")
    conv("conv3x3_c64_pads_0011_s2", 1, 64, 16, 64, 3, stride=2, pad=[0, 0, 1, 1], act="relu")
    conv("conv3x3_c128_g32", 1, 128, 14, 128, 3, group=32, act="relu")
    conv("conv3x3_dw96_s2_odd29", 1, 96, 29, 96, 3, stride=2, group=96, act="clip")
    conv("conv5x5_dw144_b33", 33, 144, 15, 144, 5, group=144, act="none", bias="none")
    conv("conv1x1_c2048_512", 1, 2048, 7, 512, 1, act="relu")
    conv("conv3x3_c512", 1, 512, 7, 512, 3, act="relu", bias="int32")
    conv("conv1x1_c512_128_b33", 33, 512, 14, 128, 1, act="none")
    conv("conv3x3_c16_32_b33_odd9", 33, 16, 9, 32, 3, act="relu", bias="none")
    conv("conv3x3_c64_per_tensor_w", 1, 64, 14, 64, 3, act="relu", per_channel=False)
    # residual: Conv -> Add(DQ(skip)) -> Relu -> Q (ResNet), and without the Relu
    conv("conv1x1_c64_256_residual_relu", 1, 64, 14, 256, 1, act="none", res="relu")
    conv("conv3x3_c64_residual_relu_b33", 33, 64, 7, 64, 3, act="none", res="relu", bias="int32")
    conv("conv1x1_c256_residual", 1, 256, 7, 256, 1, act="none", res="plain")
    # chains: activations stay int8 between islands
    conv("chain_conv3x3_conv3x3_c64", 1, 64, 14, 64, 3, chain=[(64, 3)])
    conv("chain_bottleneck_c256_64", 1, 256, 14, 64, 1, chain=[(64, 3), (256, 1)], res="block")
    conv("commute_maxpool_conv", 1, 64, 28, 64, 3, commute="maxpool", act="relu")
    # onnxruntime's QDQ: Q -> DQ -> Relu -> Q of one scale; Q -> DQ -> Add(DQ(skip)) -> Q
    conv("ort_conv3x3_relu", 1, 64, 14, 64, 3, ort=True)
    conv("ort_conv1x1_residual_relu_b33", 33, 64, 14, 256, 1, ort=True, res="relu", bias="int32")
    conv("ort_conv3x3_dw96_clip", 2, 96, 15, 96, 3, group=96, ort=True, act="clip")
    # must not fuse, and must still be right
    conv("nofuse_asym_uint8", 1, 64, 14, 64, 3, asym=True, act="relu")
    conv("nofuse_c12_20", 1, 12, 15, 20, 3, act="relu")
    conv("nofuse_stem_c3_7x7_s2", 1, 3, 65, 64, 7, stride=2, act="relu")
    conv("nofuse_sigmoid_between", 1, 32, 14, 32, 3, pre="sigmoid", act="relu")
    # GEMMs: (xshape, k, n)
    mm("gemm_transB_bias_relu_b33", [33, 2048], 2048, 1000, op="Gemm", trans_b=True, act="relu")
    mm("gemm_nobias_b1", [1, 768], 768, 3072, op="Gemm", bias="none", act="none")
    mm("gemm_clip_b33", [33, 256], 256, 128, op="Gemm", act="clip")
    mm("matmul3d_bias_bert_qkv", [2, 128, 768], 768, 768, act="none")
    mm("matmul3d_residual_relu", [1, 128, 768], 768, 768, res="relu")
    mm("matmul2d_nobias_b33", [33, 64], 64, 16, bias="none", act="relu")
    mm("chain_matmul_ffn_768_3072", [1, 128, 768], 768, 3072, chain=[(768, None)], act="none")
    mm("commute_flatten_gemm", [33, 512, 1, 1], 512, 1000, op="Gemm", trans_b=True, commute="flatten")
    # FP8 (E4M3FN)
    conv("fp8_conv3x3_c64_relu", 1, 64, 14, 64, 3, fmt="fp8", act="relu")
    conv("fp8_conv1x1_c256_residual_relu_b33", 33, 256, 7, 256, 1, fmt="fp8", act="none", res="relu")
    mm("fp8_matmul3d_bias", [2, 128, 768], 768, 768, fmt="fp8")
    mm("fp8_gemm_transB_b33", [33, 1024], 1024, 512, fmt="fp8", op="Gemm", trans_b=True, act="relu")
    mm("fp8_chain_matmul_ffn", [1, 128, 768], 768, 3072, fmt="fp8", chain=[(768, None)])
    # INT4 weight-only (blocked along K)
    c.append(("int4_gemv_f16_4096x4096", "int4", make_int4, ([1, 4096], 4096, 4096), {"dtype": np.float16}))
    c.append(("int4_matmul_f32_m16", "int4", make_int4, ([16, 2048], 2048, 512), {}))
    c.append(("int4_matmul3d_f16_m7_block64", "int4", make_int4, ([1, 7, 2048], 2048, 1024), {"dtype": np.float16, "block": 64}))
    return c


def generate(out):
    os.makedirs(out, exist_ok=True)
    man = []
    for name, kind, maker, a, kw in cases():
        s = maker(out, name, *a, **kw)
        prop = 0.0
        if isinstance(s, tuple):
            s, prop = s
        if kind == "int8":
            tol = {"atol": float(s) * (1 + 1e-3), "rtol": 0.0, "rule": "1 int8 step"}
        elif kind == "fp8" and prop:
            tol = {"atol": (float(s) * 2.0 ** -9 + prop) * (1 + 1e-3), "rtol": 0.125,
                   "rule": "1 e4m3 step + 1 intermediate step"}
        elif kind == "fp8":
            tol = {"atol": float(s) * 2.0 ** -9 * (1 + 1e-3), "rtol": 0.125, "rule": "1 e4m3 step"}
        else:
            tol = {"atol": None, "rtol": None, "rule": "help run"}
        man.append({"name": name, "kind": kind, "step": None if s is None else float(s), **tol})
    with open(os.path.join(out, "islands.json"), "w") as f:
        json.dump(man, f, indent=1)
    print(f"{len(man)} models -> {out}")


# ---------------------------------------------------------------------------
# --check
# ---------------------------------------------------------------------------



def check_one(ogsh, out, m, device):
    path = os.path.join(out, m["name"] + ".onnx")
    tol = ""
    if m["atol"] is not None:
        tol = f" --atol={m['atol']:.9g} --rtol={m['rtol']:.9g}"
    script = f"run --device={device} --check=cpu{tol} --json"
    if device == "cuda":
        script = "set on-error continue; plan --json; " + script
    env = dict(os.environ, NO_COLOR="1")
    try:
        p = subprocess.run(ogsh + [path, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    except subprocess.TimeoutExpired:
        return m, False, None, "timed out (300 s)", ""
    objs = json_objects(p.stdout)
    cmp = next((o for o in objs if "compared" in o), None)
    plan = next((o for o in objs if "nodes" in o and "arena_bytes" in o), None)
    where = ""
    if plan:
        mains = [n for n in plan["nodes"] if n.get("op") in ("Conv", "Gemm", "MatMul", "FusedConv", "FusedGemm")
                 or "Conv" in (n.get("op") or "") or "Gemm" in (n.get("op") or "") or "MatMul" in (n.get("op") or "")]
        qdq = [n for n in plan["nodes"] if n.get("op") in ("QuantizeLinear", "DequantizeLinear")]
        qcpu = sum(1 for n in qdq if n.get("where") == "cpu")
        kern = ",".join(sorted({f"{n.get('where')}:{n.get('impl') or '-'}" for n in mains})) or "-"
        where = f"{kern}; q/dq on cpu {qcpu}/{len(qdq)}; gpu {plan.get('gpu')} cpu {plan.get('cpu')}"
    if not cmp or not cmp.get("compared"):
        err = (p.stderr.strip().splitlines() or [f"exit {p.returncode}, no comparison"])[-1]
        return m, False, None, err[:200], where
    r = cmp["compared"][0]
    ok = bool(r.get("pass")) and cmp.get("failed", 1) == 0 and p.returncode == 0
    detail = ""
    if not ok:
        if r.get("why"):
            detail = r["why"]
        elif "worst_index" in r:
            detail = (f"{r.get('bad')}/{r.get('elements')} outside; worst at flat index {r['worst_index']}: "
                      f"gpu {r.get('worst_actual')} cpu {r.get('worst_expected')}; nan {r.get('nan_actual')}/"
                      f"{r.get('nan_expected')}")
        else:
            detail = (p.stderr.strip().splitlines() or [""])[-1][:200]
    m = dict(m, atol_used=r.get("atol"), rtol_used=r.get("rtol"))
    return m, ok, r.get("max_abs"), detail, where


def check(ogsh_cmd, out):
    import shlex
    ogsh = shlex.split(ogsh_cmd)
    device = os.environ.get("OGSH_CHECK_DEVICE", "cuda")
    man = json.load(open(os.path.join(out, "islands.json")))
    jobs = int(os.environ.get("ISLANDS_JOBS", "4"))
    bad = 0
    print(f"{'model':40} {'result':6} {'max abs':>10} {'step':>10} {'max/step':>8}  tolerance  | plan: main node, q/dq")
    with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
        for m, ok, mx, detail, where in ex.map(lambda mm: check_one(ogsh, out, mm, device), man):
            bad += not ok
            step = m.get("step")
            ratio = f"{mx / step:8.3f}" if (mx is not None and step) else f"{'-':>8}"
            tol = m["rule"]
            if m.get("atol_used") is not None:
                tol += f" (atol {m['atol_used']:.4g}, rtol {m['rtol_used']:.4g})"
            print(f"{m['name']:40} {'ok' if ok else 'FAIL':6} {mx if mx is not None else float('nan'):10.4g} "
                  f"{step if step else float('nan'):10.4g} {ratio}  {tol}  | {where}", flush=True)
            if detail:
                print(f"    {m['name']}: {detail}", flush=True)
    print(f"islands: {len(man)} models, {len(man) - bad} ok, {bad} failed (device {device} against the cpu reference)")
    return 1 if bad else 0


def main():
    a = sys.argv[1:]
    if a and a[0] == "--list":
        for c in cases():
            print(c[0])
        return 0
    if len(a) == 3 and a[0] == "--check":
        return check(a[1], a[2])
    if len(a) == 1:
        generate(a[0])
        return 0
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
