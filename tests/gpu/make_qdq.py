#!/usr/bin/env python3
"""Writes the QDQ models that tests/gpu/cmd_check.ogs runs on the GPU.

    make_qdq.py [OUTDIR]      (default: this folder)

    digits_cnn_qdq.onnx  the digits CNN (tests/models/digits) quantized by
                         onnxruntime's quantize_static: QDQ, per-channel int8
                         weights, uint8 activations, calibrated on calib.npy
    qdq_types.onnx       a chain of QuantizeLinear/DequantizeLinear pairs on an
                         activation, one for each kind the GPU kernels take:
                         int8, uint8 per axis, int16, uint4 blocked, int4,
                         float8 e4m3fn and e5m2 (saturating and not), float16
                         scales; opset 21

Both are committed; CI reads them and never runs this script (it needs the
test venv: onnx, onnxruntime, numpy).
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
DIGITS = os.path.join(HERE, "..", "models", "digits")


def digits_qdq(out):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    calib = np.load(os.path.join(DIGITS, "calib.npy"))

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"x": calib[i:i + 32]} for i in range(0, len(calib), 32)])

        def get_next(self):
            return next(self.batches, None)

    quantize_static(os.path.join(DIGITS, "digits_cnn.onnx"), out, Reader(), quant_format=QuantFormat.QDQ,
                    per_channel=True, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)


def qdq_types(out):
    nodes, inits = [], []
    rng = np.random.default_rng(0)
    shape = [2, 8, 70]   # 70 on the last axis: blocks of 32 with a short last one

    def init(name, arr, dtype=None):
        if dtype is None:
            inits.append(numpy_helper.from_array(arr, name))
        else:   # int4, uint4, float8: by value through make_tensor
            inits.append(helper.make_tensor(name, dtype, list(arr.shape), arr.flatten().tolist()))
        return name

    cur = "x"
    step = [0]

    def pair(scale, zp=None, zp_dtype=None, **attrs):
        i = step[0]
        step[0] += 1
        s = init(f"s{i}", scale)
        ins = [cur, s]
        if zp is not None:
            ins.append(init(f"z{i}", zp, zp_dtype))
        q, y = f"q{i}", f"y{i}"
        nodes.append(helper.make_node("QuantizeLinear", ins, [q], name=f"Q{i}", **attrs))
        dq_attrs = {k: v for k, v in attrs.items() if k in ("axis", "block_size")}
        nodes.append(helper.make_node("DequantizeLinear", [q, s] + ins[2:], [y], name=f"DQ{i}", **dq_attrs))
        return y

    f32 = np.float32
    cur = pair(np.array(0.02, f32), np.array(3, np.int8))
    cur = pair(rng.uniform(0.01, 0.03, 8).astype(f32), np.full(8, 128, np.uint8), axis=1)
    cur = pair(np.array(1e-4, f32), np.array(-7, np.int16))
    cur = pair(rng.uniform(0.1, 0.3, (2, 8, 3)).astype(f32), np.full((2, 8, 3), 8, np.int64), TensorProto.UINT4,
               axis=-1, block_size=32)
    cur = pair(np.array(0.3, f32), output_dtype=TensorProto.INT4)
    cur = pair(np.array(0.01, f32), np.array(0, f32), TensorProto.FLOAT8E4M3FN)
    cur = pair(np.array(1e-3, f32), np.array(0, f32), TensorProto.FLOAT8E5M2, saturate=0)
    nodes.append(helper.make_node("Cast", [cur], ["h"], to=TensorProto.FLOAT16))
    cur = "h"
    cur = pair(np.array(0.02, np.float16), np.array(-1, np.int8))
    nodes.append(helper.make_node("Cast", [cur], ["y"], to=TensorProto.FLOAT))
    graph = helper.make_graph(nodes, "qdq_types", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, out)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else HERE
    os.makedirs(out, exist_ok=True)
    digits_qdq(os.path.join(out, "digits_cnn_qdq.onnx"))
    qdq_types(os.path.join(out, "qdq_types.onnx"))
    print(f"digits_cnn_qdq.onnx, qdq_types.onnx -> {out}")


if __name__ == "__main__":
    main()
