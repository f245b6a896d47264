#!/usr/bin/env python3
"""Makes the models of scripts/lessons/dynamic-shapes.ogs with the onnx API.

    python scripts/lessons/models/make_models.py [OUTDIR]

batch1.onnx and batch2.onnx are what torch.onnx.export writes for the same
small net (Conv -> Relu -> MaxPool -> flatten -> Linear on 3x16x16 images)
with dynamic_axes={'image': {0: 'batch'}, 'logits': {0: 'batch'}}, traced
once with a batch-1 dummy input and once with a batch-2 one. The flatten is
`x.view(x.size(0), -1)`: traced at batch 1 the exporter folds x.size(0)
into the Reshape's constant shape [1, 512]; at batch 2 it cannot (2 is not
special), so it computes the shape with Shape -> Gather -> Unsqueeze ->
Concat. Weights are fixed, so the files are the same on every run.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def make(dummy_batch):
    image = helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, 16, 16])
    logits = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])
    rng = np.random.default_rng(2024)
    inits = [
        numpy_helper.from_array((rng.standard_normal((8, 3, 3, 3)) * 0.2).astype(np.float32), "conv.weight"),
        numpy_helper.from_array((rng.standard_normal(8) * 0.1).astype(np.float32), "conv.bias"),
        numpy_helper.from_array((rng.standard_normal((10, 512)) * 0.05).astype(np.float32), "fc.weight"),
        numpy_helper.from_array((rng.standard_normal(10) * 0.1).astype(np.float32), "fc.bias"),
    ]
    nodes = [
        helper.make_node("Conv", ["image", "conv.weight", "conv.bias"], ["/conv/Conv_output_0"], name="/conv/Conv",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["/conv/Conv_output_0"], ["/relu/Relu_output_0"], name="/relu/Relu"),
        helper.make_node("MaxPool", ["/relu/Relu_output_0"], ["/pool/MaxPool_output_0"], name="/pool/MaxPool",
                         kernel_shape=[2, 2], strides=[2, 2]),
    ]
    if dummy_batch == 1:
        # x.size(0) was 1 while tracing: a constant
        nodes.append(helper.make_node("Constant", [], ["/Constant_output_0"], name="/Constant",
                                      value=helper.make_tensor("value", TensorProto.INT64, [2], [1, 512])))
        shape = "/Constant_output_0"
    else:
        # x.size(0) computed from the tensor at run time
        nodes += [
            helper.make_node("Shape", ["/pool/MaxPool_output_0"], ["/Shape_output_0"], name="/Shape"),
            helper.make_node("Constant", [], ["/Constant_output_0"], name="/Constant",
                             value=helper.make_tensor("value", TensorProto.INT64, [], [0])),
            helper.make_node("Gather", ["/Shape_output_0", "/Constant_output_0"], ["/Gather_output_0"],
                             name="/Gather", axis=0),
            helper.make_node("Constant", [], ["/Constant_1_output_0"], name="/Constant_1",
                             value=helper.make_tensor("value", TensorProto.INT64, [1], [0])),
            helper.make_node("Unsqueeze", ["/Gather_output_0", "/Constant_1_output_0"], ["/Unsqueeze_output_0"],
                             name="/Unsqueeze"),
            helper.make_node("Constant", [], ["/Constant_2_output_0"], name="/Constant_2",
                             value=helper.make_tensor("value", TensorProto.INT64, [1], [-1])),
            helper.make_node("Concat", ["/Unsqueeze_output_0", "/Constant_2_output_0"], ["/Concat_output_0"],
                             name="/Concat", axis=0),
        ]
        shape = "/Concat_output_0"
    nodes += [
        helper.make_node("Reshape", ["/pool/MaxPool_output_0", shape], ["/Reshape_output_0"], name="/Reshape"),
        helper.make_node("Gemm", ["/Reshape_output_0", "fc.weight", "fc.bias"], ["logits"], name="/fc/Gemm",
                         alpha=1.0, beta=1.0, transB=1),
    ]
    g = helper.make_graph(nodes, "main_graph", [image], [logits], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="pytorch",
                          producer_version="2.5.0")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    os.makedirs(out, exist_ok=True)
    for b in (1, 2):
        onnx.save_model(make(b), os.path.join(out, f"batch{b}.onnx"))


if __name__ == "__main__":
    main()
