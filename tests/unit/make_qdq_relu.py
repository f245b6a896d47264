#!/usr/bin/env python3
"""Writes tests/unit/qdq_relu.onnx for test_qfuse: int8 convolutions in
onnxruntime's QDQ style, each followed by Q -> DQ -> Relu -> Q -> DQ, the
third with a residual Add (of a fourth conv's output, made after it)
between Q/DQ pairs before its Relu.

The first Relu's output shares its input's scale (as onnxruntime's
quantize_static writes it): the planner may move that Relu before the first
Q and into the island. The second's scales differ: it must stay. The third
conv's island takes its Q, the Add, the Relu and the last Q. The fifth
conv's ReLU6 (Clip(0, 6) between Q/DQ of one scale) moves and joins its
island as Clip.

    make_qdq_relu.py OUT.onnx
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main(out):
    rng = np.random.default_rng(7)
    inits, nodes = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(arr, name))
        return name

    def qdq(x, name, scale):
        s = const(name + "_s", np.array(scale, np.float32))
        z = const(name + "_z", np.array(0, np.int8))
        nodes.append(helper.make_node("QuantizeLinear", [x, s, z], [name + "_q"], name=name + "_Q"))
        nodes.append(helper.make_node("DequantizeLinear", [name + "_q", s, z], [name + "_dq"], name=name + "_DQ"))
        return name + "_dq"

    def conv(x, name, cin, cout):
        w = rng.standard_normal((cout, cin, 3, 3)).astype(np.float32) * 0.2
        ws = np.abs(w).reshape(cout, -1).max(axis=1) / 127
        wq = np.clip(np.round(w / ws[:, None, None, None]), -127, 127).astype(np.int8)
        wn = const(name + "_w", wq)
        wsn = const(name + "_ws", ws.astype(np.float32))
        wz = const(name + "_wz", np.zeros(cout, np.int8))
        nodes.append(helper.make_node("DequantizeLinear", [wn, wsn, wz], [name + "_wdq"], axis=0, name=name + "_WDQ"))
        b = const(name + "_b", (rng.standard_normal(cout) * 0.1).astype(np.float32))
        nodes.append(helper.make_node("Conv", [x, name + "_wdq", b], [name + "_y"], pads=[1, 1, 1, 1], name=name))
        return name + "_y"

    x = qdq("x", "in", 1 / 127)
    y = conv(x, "conv1", 16, 16)
    y = qdq(y, "c1out", 0.05)
    nodes.append(helper.make_node("Relu", [y], ["r1"], name="relu1"))
    y = qdq("r1", "r1out", 0.05)          # the same scale: movable
    y = conv(y, "conv2", 16, 16)
    y = qdq(y, "c2out", 0.06)
    nodes.append(helper.make_node("Relu", [y], ["r2"], name="relu2"))
    y = qdq("r2", "r2out", 0.04)          # another scale: stays
    # a residual as onnxruntime writes it: conv3's output quantized on its own,
    # Add(DQ, DQ(skip)) -> Q -> DQ -> Relu -> Q of the Add's scale
    # conv3's residual is conv4's output, made after conv3: its island must
    # go where the Add is, not where conv3 was
    y3 = qdq(conv(y, "conv3", 16, 16), "c3out", 0.07)
    y4 = qdq(conv(y, "conv4", 16, 16), "c4out", 0.08)
    nodes.append(helper.make_node("Add", [y3, y4], ["sum"], name="add3"))
    y = qdq("sum", "sumout", 0.09)
    nodes.append(helper.make_node("Relu", [y], ["r3"], name="relu3"))
    y = qdq("r3", "r3out", 0.09)
    # ReLU6 as onnxruntime writes MobileNet's: Clip(0, 6) between Q/DQ of one scale
    y = qdq(conv(y, "conv5", 16, 16), "c5out", 0.05)
    lo, hi = const("clip_lo", np.array(0, np.float32)), const("clip_hi", np.array(6, np.float32))
    nodes.append(helper.make_node("Clip", [y, lo, hi], ["r5"], name="clip5"))
    y = qdq("r5", "r5out", 0.05)
    nodes.append(helper.make_node("Identity", [y], ["out"], name="out"))
    g = helper.make_graph(nodes, "qdq_relu",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 8, 8])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 16, 8, 8])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="make_qdq_relu.py")
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, out)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "qdq_relu.onnx")
