#!/usr/bin/env python3
"""Builds the small ONNX models (and other inputs) the golden script tests use.

    models.py OUTDIR

Every model is made with the onnx Python API, so the tests do not depend on
files checked into the repository; each is deterministic (fixed names,
fixed values) so the transcripts stay stable.
"""
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = [helper.make_opsetid("", 17)]


def model(graph, **kw):
    m = helper.make_model(graph, opset_imports=kw.pop("opsets", OPSET), producer_name="ogsh-tests",
                          producer_version="1", **kw)
    m.ir_version = 8
    return m


def if_model():
    """An If whose branches read outer values (captures) and have their own nodes."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    then_out = helper.make_tensor_value_info("then_y", TensorProto.FLOAT, [2, 3])
    else_out = helper.make_tensor_value_info("else_y", TensorProto.FLOAT, [2, 3])
    then_g = helper.make_graph(
        [helper.make_node("Add", ["x_relu", "bias"], ["then_y"], name="then_add")],
        "then_branch", [], [then_out])
    else_g = helper.make_graph(
        [helper.make_node("Neg", ["x_relu"], ["neg"], name="else_neg"),
         helper.make_node("Mul", ["neg", "bias"], ["else_y"], name="else_mul")],
        "else_branch", [], [else_out])
    nodes = [
        helper.make_node("Relu", ["x"], ["x_relu"], name="relu"),
        helper.make_node("If", ["cond"], ["if_out"], name="branch", then_branch=then_g, else_branch=else_g),
        helper.make_node("Identity", ["if_out"], ["y"], name="out"),
    ]
    bias = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "bias")
    g = helper.make_graph(nodes, "if_graph", [x, cond], [y], [bias])
    return model(g)


def chain_model():
    """x -> Identity -> Dropout(ratio) -> Relu -> Identity -> y, and a side branch:
    rm rewires through each of them, and rm of `last` hands `y` to its input."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    side = helper.make_tensor_value_info("side", TensorProto.FLOAT, [1, 4])
    ratio = numpy_helper.from_array(np.array(0.5, dtype=np.float32), "ratio")
    nodes = [
        helper.make_node("Identity", ["x"], ["a"], name="first"),
        helper.make_node("Dropout", ["a", "ratio"], ["b", "mask"], name="drop"),
        helper.make_node("Relu", ["b"], ["c"], name="act"),
        helper.make_node("Identity", ["c"], ["y"], name="last"),
        helper.make_node("Add", ["a", "c"], ["sum"], name="join"),
        helper.make_node("Split", ["sum"], ["s1", "s2"], name="split", axis=1, num_outputs=2),
        helper.make_node("Concat", ["s1", "s2"], ["side"], name="concat", axis=1),
        helper.make_node("Identity", ["x"], ["unused"], name="dead"),
    ]
    g = helper.make_graph(nodes, "chain", [x], [y, side], [ratio],
                          value_info=[helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 4]),
                                      helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 4])])
    return model(g)


def symbolic_model():
    """Symbolic and unknown dims, an input with a default value, two outputs."""
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])
    mask = helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", None])
    scale = helper.make_tensor_value_info("scale", TensorProto.FLOAT, [1])
    nounk = helper.make_tensor_value_info("anything", TensorProto.FLOAT, None)
    emb_out = helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "seq", 8])
    scaled = helper.make_tensor_value_info("scaled", TensorProto.FLOAT, ["batch", None])
    table = numpy_helper.from_array((np.arange(32 * 8, dtype=np.float32) / 100).reshape(32, 8), "table")
    scale_init = numpy_helper.from_array(np.array([2.0], dtype=np.float32), "scale")
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["hidden"], name="embed"),
        helper.make_node("Mul", ["mask", "scale"], ["scaled"], name="mul"),
        helper.make_node("Identity", ["anything"], ["anything_copy"], name="copy"),
    ]
    g = helper.make_graph(nodes, "symbolic", [ids, mask, scale, nounk], [emb_out, scaled], [table, scale_init])
    return model(g)


def minus_one_model():
    """Dims of -1 as Paddle2ONNX and older exporters write unknown dims: in an
    input, an output and a value_info."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [-1, 4])
    h = helper.make_tensor_value_info("h", TensorProto.FLOAT, [-1, -1])
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="relu"),
             helper.make_node("Neg", ["h"], ["y"], name="neg")]
    g = helper.make_graph(nodes, "minus_one", [x], [y], value_info=[h])
    return model(g)


def dynamic_model():
    """What PyTorch exports for dynamic shapes: Shape -> Gather -> Unsqueeze ->
    Concat -> Reshape, a MatMul on [batch, seq, 8], a NonZero whose size
    depends on values, and a value_info that contradicts the graph."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nz = helper.make_tensor_value_info("nz", TensorProto.INT64, None)
    w = numpy_helper.from_array((np.arange(8 * 4, dtype=np.float32) / 10).reshape(8, 4), "w")
    zero = numpy_helper.from_array(np.array(0, dtype=np.int64), "zero")
    minus1 = numpy_helper.from_array(np.array([-1], dtype=np.int64), "minus1")
    axes0 = numpy_helper.from_array(np.array([0], dtype=np.int64), "axes0")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["proj"], name="proj"),
        helper.make_node("Shape", ["proj"], ["proj_shape"], name="shape"),
        helper.make_node("Gather", ["proj_shape", "zero"], ["b"], name="batch_dim", axis=0),
        helper.make_node("Unsqueeze", ["b", "axes0"], ["b1"], name="unsq"),
        helper.make_node("Concat", ["b1", "minus1"], ["new_shape"], name="concat", axis=0),
        helper.make_node("Reshape", ["proj", "new_shape"], ["y"], name="flat"),
        helper.make_node("NonZero", ["x"], ["nz"], name="nonzero"),
    ]
    # the model claims proj is [batch, seq, 5]: it is [batch, seq, 4]
    wrong = helper.make_tensor_value_info("proj", TensorProto.FLOAT, ["batch", "seq", 5])
    g = helper.make_graph(nodes, "dynamic", [x], [y, nz], [w, zero, minus1, axes0], value_info=[wrong])
    return model(g)


def tensors_model():
    """Initializers of many kinds: strings, ints, bool, float16, NaN/Inf, empty,
    a scalar, a Constant node and a sparse initializer."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])
    inits = [
        helper.make_tensor("labels", TensorProto.STRING, [3], [b"cat", b"dog", b"a longer label with spaces"]),
        numpy_helper.from_array(np.array([[1, -2, 3], [0, 0, 40]], dtype=np.int64), "ints"),
        numpy_helper.from_array(np.array([True, False, True, True]), "flags"),
        numpy_helper.from_array(np.array([0.5, -1.25, 65504, 0], dtype=np.float16), "halves"),
        numpy_helper.from_array(np.array([1.0, np.nan, np.inf, -np.inf, 0.0, 2.0], dtype=np.float32), "specials"),
        numpy_helper.from_array(np.zeros((0, 3), dtype=np.float32), "empty"),
        numpy_helper.from_array(np.array(7, dtype=np.int32), "scalar"),
        numpy_helper.from_array(np.arange(20, dtype=np.float64), "twenty"),
    ]
    const = helper.make_node("Constant", [], ["k"], name="const",
                             value=numpy_helper.from_array(np.array([1.5, 2.5, 3.5], dtype=np.float32)))
    nodes = [
        const,
        helper.make_node("Add", ["x", "k"], ["y"], name="add"),
    ]
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([5.0, 6.0], dtype=np.float32), "sparse"),
        numpy_helper.from_array(np.array([1, 7], dtype=np.int64), "sparse_idx"), [10])
    g = helper.make_graph(nodes, "tensors", [x], [y], inits, sparse_initializer=[sparse])
    return model(g)


def external_model(outdir):
    """Weights in an external data file next to the model."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])
    w = numpy_helper.from_array((np.arange(64 * 64, dtype=np.float32) % 7 - 3).reshape(64, 64), "w")
    b = numpy_helper.from_array(np.ones(64, dtype=np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["xw"], name="matmul"),
             helper.make_node("Add", ["xw", "b"], ["y"], name="add")]
    m = model(helper.make_graph(nodes, "external", [x], [y], [w, b]))
    onnx.save_model(m, os.path.join(outdir, "external.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="external.onnx.data", size_threshold=1024)


def names_model():
    """Awkward names: two nodes with one name, a node and a tensor sharing a
    name, an unnamed node, names with control bytes, a node named like an id;
    ops of another domain (one a function of the model, one unknown), a
    left-out optional input, a node doc string, model metadata."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="twin"),
        helper.make_node("Sigmoid", ["a"], ["b"], name="twin"),
        helper.make_node("Neg", ["b"], ["shared"], name="shared"),
        helper.make_node("Abs", ["shared"], ["c"]),
        helper.make_node("Softsign", ["c"], ["bell\x07"], name="tab\tname"),
        helper.make_node("MyOp", ["bell\x07"], ["y"], name="custom", domain="com.example", alpha=0.5),
        helper.make_node("Identity", ["x"], ["z"], name="n7"),
        helper.make_node("Clip", ["x", "", "cmax"], ["clipped"], name="clip",
                         doc_string="max only: the min input is left out"),
        helper.make_node("Mystery", ["x"], ["m"], name="mystery", domain="com.example"),
    ]
    clipped = helper.make_tensor_value_info("clipped", TensorProto.FLOAT, [2])
    m = helper.make_tensor_value_info("m", TensorProto.FLOAT, None)
    cmax = numpy_helper.from_array(np.array(6.0, dtype=np.float32), "cmax")
    g = helper.make_graph(nodes, "names", [x], [y, z, clipped, m], [cmax])
    # MyOp is defined by a function of the model
    fn = helper.make_function("com.example", "MyOp", ["X"], ["Y"],
                              [helper.make_node("Neg", ["X"], ["Y"])], OPSET, attributes=["alpha"])
    mp = model(g, opsets=OPSET + [helper.make_opsetid("com.example", 1)], functions=[fn],
               doc_string="names that need care\nand a doc string of two lines")
    helper.set_model_props(mp, {"author": "ogsh tests", "purpose": "awkward names"})
    return mp


def function_model():
    """Model-local functions: ScaledRelu(x) = Relu(x) * alpha, alpha from the
    caller or the function's default (3.0); Twice calls ScaledRelu (nesting)."""
    alpha_const = helper.make_node("Constant", [], ["a"], value_float=0.0)
    alpha_const.attribute[0].ref_attr_name = "alpha"
    body = [helper.make_node("Relu", ["x"], ["r"]), alpha_const, helper.make_node("Mul", ["r", "a"], ["y"])]
    scaled = helper.make_function("custom", "ScaledRelu", ["x"], ["y"], body,
                                  [helper.make_opsetid("", 17)], attributes=[],
                                  attribute_protos=[helper.make_attribute("alpha", 3.0)])
    twice = helper.make_function("custom", "Twice", ["x"], ["y"],
                                 [helper.make_node("ScaledRelu", ["x"], ["t"], domain="custom", alpha=2.0),
                                  helper.make_node("ScaledRelu", ["t"], ["y"], domain="custom", alpha=2.0)],
                                 [helper.make_opsetid("", 17), helper.make_opsetid("custom", 1)])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("y1", "y2", "y3")]
    nodes = [helper.make_node("ScaledRelu", ["x"], ["y1"], domain="custom", name="given", alpha=0.5),
             helper.make_node("ScaledRelu", ["x"], ["y2"], domain="custom", name="default"),
             helper.make_node("Twice", ["x"], ["y3"], domain="custom", name="nested")]
    g = helper.make_graph(nodes, "functions", [x], outs)
    return model(g, opsets=OPSET + [helper.make_opsetid("custom", 1)], functions=[scaled, twice])


def qdq_model():
    """A small quantized CNN in QDQ form (opset 21): activations quantized to int8 by
    QuantizeLinear -> DequantizeLinear pairs, an int8 weight with per-channel scales, a
    float8 E4M3FN weight with one scale, and an int4 weight with blocked scales (block 8)
    feeding a MatMul. Values are fixed, so the transcripts are stable."""
    T = TensorProto
    x = helper.make_tensor_value_info("x", T.FLOAT, [1, 4, 8, 8])
    y = helper.make_tensor_value_info("y", T.FLOAT, [1, 10])
    w1 = ((np.arange(16 * 4 * 3 * 3) * 37) % 255 - 127).astype(np.int8).reshape(16, 4, 3, 3)
    s1 = (0.001 * (1 + np.arange(16) % 5)).astype(np.float32)
    w2 = (((np.arange(16 * 16) * 7) % 33 - 16) / 8.0).astype(np.float32).reshape(16, 16, 1, 1)
    w3 = ((np.arange(16 * 10) * 5) % 16 - 8).astype(np.int8).reshape(16, 10)
    s3 = (0.01 * (1 + np.arange(20) % 3)).astype(np.float32).reshape(2, 10)
    inits = [
        numpy_helper.from_array(np.array(0.02, np.float32), "x_scale"),
        numpy_helper.from_array(np.array(0, np.int8), "x_zero"),
        numpy_helper.from_array(w1, "w1_q"),
        numpy_helper.from_array(s1, "w1_scale"),
        numpy_helper.from_array(np.zeros(16, np.int8), "w1_zero"),
        numpy_helper.from_array((np.arange(16) * 0.01).astype(np.float32), "b1"),
        numpy_helper.from_array(np.array(0.05, np.float32), "r1_scale"),
        numpy_helper.from_array(np.array(0, np.int8), "r1_zero"),
        helper.make_tensor("w2_q", T.FLOAT8E4M3FN, [16, 16, 1, 1], w2.flatten().tolist()),
        numpy_helper.from_array(np.array(0.01, np.float32), "w2_scale"),
        numpy_helper.from_array(np.array(0.1, np.float32), "c2_scale"),
        numpy_helper.from_array(np.array(3, np.int8), "c2_zero"),
        helper.make_tensor("w3_q", T.INT4, [16, 10], w3.flatten().tolist()),
        numpy_helper.from_array(s3, "w3_scale"),
        helper.make_tensor("w3_zero", T.INT4, [2, 10], [0] * 20),
        numpy_helper.from_array((np.arange(10) * 0.1).astype(np.float32), "b3"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zero"], ["x_q"], name="x_q"),
        helper.make_node("DequantizeLinear", ["x_q", "x_scale", "x_zero"], ["x_dq"], name="x_dq"),
        helper.make_node("DequantizeLinear", ["w1_q", "w1_scale", "w1_zero"], ["w1"], name="w1_dq", axis=0),
        helper.make_node("Conv", ["x_dq", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("QuantizeLinear", ["r1", "r1_scale", "r1_zero"], ["r1_q"], name="r1_q"),
        helper.make_node("DequantizeLinear", ["r1_q", "r1_scale", "r1_zero"], ["r1_dq"], name="r1_dq"),
        helper.make_node("DequantizeLinear", ["w2_q", "w2_scale"], ["w2"], name="w2_dq"),
        helper.make_node("Conv", ["r1_dq", "w2"], ["c2"], name="conv2"),
        helper.make_node("QuantizeLinear", ["c2", "c2_scale", "c2_zero"], ["c2_q"], name="c2_q"),
        helper.make_node("DequantizeLinear", ["c2_q", "c2_scale", "c2_zero"], ["c2_dq"], name="c2_dq"),
        helper.make_node("Add", ["c2_dq", "r1_dq"], ["a"], name="add"),
        helper.make_node("GlobalAveragePool", ["a"], ["gp"], name="gap"),
        helper.make_node("Flatten", ["gp"], ["f"], name="flatten"),
        helper.make_node("DequantizeLinear", ["w3_q", "w3_scale", "w3_zero"], ["w3"], name="w3_dq", axis=0,
                         block_size=8),
        helper.make_node("MatMul", ["f", "w3"], ["m"], name="fc"),
        helper.make_node("Add", ["m", "b3"], ["y"], name="fc_bias"),
    ]
    g = helper.make_graph(nodes, "qdq", [x], [y], inits)
    m = model(g, opsets=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    return m


def run_data(out):
    """Inputs and expected outputs for the run and compare tests (numpy
    computes the If model exactly: relu, add, neg and mul are exact in float32),
    and a small conformance tree: a passing test, a failing one, one with an
    op ogsh has no kernel for, and one whose model does not load."""
    x = np.array([[-1.5, 0.25, 2.0], [3.0, -0.5, 1.0]], dtype=np.float32)
    bias = np.arange(6, dtype=np.float32).reshape(2, 3)
    relu = np.maximum(x, 0)
    then_y = relu + bias
    else_y = -relu * bias
    np.savez(os.path.join(out, "if_in.npz"), x=x, cond=np.array(True))
    np.savez(os.path.join(out, "if_in_else.npz"), x=x, cond=np.array(False))
    np.savez(os.path.join(out, "if_out.npz"), y=then_y)
    np.savez(os.path.join(out, "if_pos.npz"), then_y)          # positional: arr_0
    np.save(os.path.join(out, "if_out_else.npy"), else_y)
    off = then_y.copy()
    off[1, 2] += 0.5
    np.savez(os.path.join(out, "if_off.npz"), y=off)
    np.savez(os.path.join(out, "if_all.npz"), x_relu=relu, y=then_y)
    np.save(os.path.join(out, "fn_in.npy"), x)
    np.savez(os.path.join(out, "fn_out.npz"), y1=relu * 0.5, y2=relu * 3.0, y3=relu * 4.0)
    np.savez(os.path.join(out, "bad_shape.npz"), x=np.zeros((3, 2), np.float32), cond=np.array(True))
    np.savez(os.path.join(out, "bad_dtype.npz"), x=np.zeros((2, 3), np.float64), cond=np.array(True))
    np.savez(os.path.join(out, "bad_name.npz"), z=np.zeros((2, 3), np.float32))
    with open(os.path.join(out, "broken.npy"), "wb") as f:
        f.write(b"\x93NUMPY\x01\x00\xff\xff{'descr'")

    conf = os.path.join(out, "conf")

    def case(name, nodes, inputs, outputs, feeds, expected, inits=()):
        d = os.path.join(conf, name, "test_data_set_0")
        os.makedirs(d, exist_ok=True)
        g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
        onnx.save_model(model(g), os.path.join(conf, name, "model.onnx"))
        for i, a in enumerate(feeds):
            with open(os.path.join(d, f"input_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(a).SerializeToString())
        for i, a in enumerate(expected):
            with open(os.path.join(d, f"output_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(a).SerializeToString())

    vx = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    vy = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    case("test_add", [helper.make_node("Add", ["x", "x"], ["y"])], [vx], [vy], [x], [x + x])
    case("test_relu_wrong", [helper.make_node("Relu", ["x"], ["y"])], [vx], [vy], [x], [np.abs(x)])
    case("test_custom_op", [helper.make_node("Frobnicate", ["x"], ["y"], domain="example.com")], [vx], [vy],
         [x], [x])
    os.makedirs(os.path.join(conf, "test_broken"), exist_ok=True)
    with open(os.path.join(conf, "test_broken", "model.onnx"), "wb") as f:
        f.write(b"not a model")


def quant_models(out):
    """The quantization tests' models, data and labels (fixed weights, so
    the transcripts are stable):
    qcnn: x[N,3,8,8] -> conv1 (3->16, kept float by the channel rule) ->
    relu -> conv2 (16->16) -> relu -> a residual Add -> MaxPool -> Flatten
    -> fc (Gemm 256->10);
    qmlp: x[N,64] -> fc1 (MatMul 64->32, Add, Relu) -> fc2 (32->32) -> fc3
    (32->10): MatMul nodes for int4 and AWQ.
    Data: 48 samples each (.npy), labels for qmlp (.npy and text: the float
    model's argmax with every 8th sample changed), and bad data: a folder
    with a file named like an image that is not one."""
    rs = np.random.RandomState(17)

    def w(*shape, scale=1.0):
        return (rs.standard_normal(shape) * scale).astype(np.float32)

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])
    y = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])
    fc_w = w(10, 256, scale=0.15)   # centred per class: the relu outputs are all positive
    inits = [
        numpy_helper.from_array(w(16, 3, 3, 3, scale=0.3), "conv1.weight"),
        numpy_helper.from_array(w(16, scale=0.1), "conv1.bias"),
        numpy_helper.from_array(w(16, 16, 3, 3, scale=0.1), "conv2.weight"),
        numpy_helper.from_array(w(16, scale=0.1), "conv2.bias"),
        numpy_helper.from_array(fc_w - fc_w.mean(axis=1, keepdims=True), "fc.weight"),
        numpy_helper.from_array(w(10, scale=0.1), "fc.bias"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "conv1.weight", "conv1.bias"], ["conv1_out"], name="conv1",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv1_out"], ["relu1_out"], name="relu1"),
        helper.make_node("Conv", ["relu1_out", "conv2.weight", "conv2.bias"], ["conv2_out"], name="conv2",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv2_out"], ["relu2_out"], name="relu2"),
        helper.make_node("Add", ["relu1_out", "relu2_out"], ["res_out"], name="residual"),
        helper.make_node("MaxPool", ["res_out"], ["pool_out"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["pool_out"], ["flat_out"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat_out", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1),
    ]
    onnx.save_model(model(helper.make_graph(nodes, "qcnn", [x], [y], inits)), os.path.join(out, "qcnn.onnx"))

    w1, b1 = w(64, 32, scale=0.2), w(32, scale=0.1)
    w2, b2 = w(32, 32, scale=0.25), w(32, scale=0.1)
    w3, b3 = w(32, 10, scale=0.3), w(10, scale=0.1)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])
    y = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])
    inits = [numpy_helper.from_array(a, n) for a, n in
             ((w1, "fc1.weight"), (b1, "fc1.bias"), (w2, "fc2.weight"), (b2, "fc2.bias"), (w3, "fc3.weight"),
              (b3, "fc3.bias"))]
    nodes = [
        helper.make_node("MatMul", ["x", "fc1.weight"], ["fc1_mm"], name="fc1"),
        helper.make_node("Add", ["fc1_mm", "fc1.bias"], ["fc1_out"], name="fc1_bias"),
        helper.make_node("Relu", ["fc1_out"], ["act1"], name="relu1"),
        helper.make_node("MatMul", ["act1", "fc2.weight"], ["fc2_mm"], name="fc2"),
        helper.make_node("Add", ["fc2_mm", "fc2.bias"], ["fc2_out"], name="fc2_bias"),
        helper.make_node("Relu", ["fc2_out"], ["act2"], name="relu2"),
        helper.make_node("MatMul", ["act2", "fc3.weight"], ["fc3_mm"], name="fc3"),
        helper.make_node("Add", ["fc3_mm", "fc3.bias"], ["logits"], name="fc3_bias"),
    ]
    onnx.save_model(model(helper.make_graph(nodes, "qmlp", [x], [y], inits)), os.path.join(out, "qmlp.onnx"))

    cnn_x = rs.standard_normal((48, 3, 8, 8)).astype(np.float32)
    np.save(os.path.join(out, "qcnn_data.npy"), cnn_x)
    mlp_x = rs.standard_normal((48, 64)).astype(np.float32)
    # a few large values: percentile, entropy and mse clip them, max does not
    mlp_x[5, 7] = 9.0
    mlp_x[17, 30] = -7.5
    np.save(os.path.join(out, "qmlp_data.npy"), mlp_x)
    h = np.maximum(mlp_x @ w1 + b1, 0)
    h = np.maximum(h @ w2 + b2, 0)
    labels = np.argmax(h @ w3 + b3, axis=1).astype(np.int64)
    labels[::8] = (labels[::8] + 1) % 10
    np.save(os.path.join(out, "qmlp_labels.npy"), labels)
    with open(os.path.join(out, "qmlp_labels.txt"), "w") as f:
        f.write("# one label per sample\n" + "".join(f"{v}\n" for v in labels))
    np.save(os.path.join(out, "qmlp_short_labels.npy"), labels[:20])
    np.save(os.path.join(out, "qmlp_wrong.npy"), mlp_x[:, :60])
    # a calibration cache cut short (the format is ir/calib.c's)
    with open(os.path.join(out, "truncated.calib"), "w") as f:
        f.write("ogsh-calib 1\nmodel_hash 0123456789abcdef\nstage 0\ndata_hash fedcba9876543210\n"
                "data_desc \"qmlp_data.npy\"\nrandom 0\nsamples 48\nbatch 16\ntensors 2\ntensor \"x\"\ncount 3072\n")
    bad = os.path.join(out, "notimages")
    os.makedirs(bad, exist_ok=True)
    with open(os.path.join(bad, "cat.png"), "w") as f:
        f.write("this is not a PNG image\n")


# ---- check: the lint's models ----

def _torch_like_cnn(batch_dummy):
    """A small conv/linear net as torch.onnx.export writes it with
    dynamic_axes={'x': {0: 'batch'}, 'y': {0: 'batch'}}: Conv -> Relu ->
    flatten -> Gemm. The flatten is `x.view(B, -1)` with B traced from the
    dummy input: for a batch-1 dummy the exporter bakes 1 into the Reshape's
    constant shape; for a batch-2 dummy it computes B as
    Shape -> Gather -> Unsqueeze -> Concat, so the dim stays dynamic."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 10])
    rng = np.random.default_rng(7)
    w = numpy_helper.from_array((rng.standard_normal((4, 3, 3, 3)) * 0.2).astype(np.float32), "conv.weight")
    b = numpy_helper.from_array(np.zeros(4, dtype=np.float32), "conv.bias")
    fw = numpy_helper.from_array((rng.standard_normal((10, 256)) * 0.05).astype(np.float32), "fc.weight")
    fb = numpy_helper.from_array(np.zeros(10, dtype=np.float32), "fc.bias")
    nodes = [
        helper.make_node("Conv", ["x", "conv.weight", "conv.bias"], ["/conv/Conv_output_0"], name="/conv/Conv",
                         pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["/conv/Conv_output_0"], ["/relu/Relu_output_0"], name="/relu/Relu"),
    ]
    inits = [w, b, fw, fb]
    if batch_dummy == 1:
        shape = helper.make_tensor("value", TensorProto.INT64, [2], [1, 256])
        nodes.append(helper.make_node("Constant", [], ["/Constant_output_0"], name="/Constant", value=shape))
    else:
        idx = helper.make_tensor("value", TensorProto.INT64, [], [0])
        axes = helper.make_tensor("value", TensorProto.INT64, [1], [0])
        rest = helper.make_tensor("value", TensorProto.INT64, [1], [-1])
        nodes += [
            helper.make_node("Shape", ["/relu/Relu_output_0"], ["/Shape_output_0"], name="/Shape"),
            helper.make_node("Constant", [], ["/Constant_output_0"], name="/Constant", value=idx),
            helper.make_node("Gather", ["/Shape_output_0", "/Constant_output_0"], ["/Gather_output_0"],
                             name="/Gather", axis=0),
            helper.make_node("Constant", [], ["/Constant_1_output_0"], name="/Constant_1", value=axes),
            helper.make_node("Unsqueeze", ["/Gather_output_0", "/Constant_1_output_0"], ["/Unsqueeze_output_0"],
                             name="/Unsqueeze"),
            helper.make_node("Constant", [], ["/Constant_2_output_0"], name="/Constant_2", value=rest),
            helper.make_node("Concat", ["/Unsqueeze_output_0", "/Constant_2_output_0"], ["/Concat_output_0"],
                             name="/Concat", axis=0),
        ]
    shape_name = "/Constant_output_0" if batch_dummy == 1 else "/Concat_output_0"
    nodes += [
        helper.make_node("Reshape", ["/relu/Relu_output_0", shape_name], ["/Reshape_output_0"], name="/Reshape"),
        helper.make_node("Gemm", ["/Reshape_output_0", "fc.weight", "fc.bias"], ["y"], name="/fc/Gemm", transB=1),
    ]
    # like torch's default exporter, the types of the values in between, as
    # the dummy input made them (1 for a batch-1 dummy: they must not hide
    # the Reshape that cannot take another batch)
    bdim = 1 if batch_dummy == 1 else "batch"
    vinfo = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [bdim] + d) for n, d in (
        ("/conv/Conv_output_0", [4, 8, 8]), ("/relu/Relu_output_0", [4, 8, 8]), ("/Reshape_output_0", [256]))]
    g = helper.make_graph(nodes, "main_graph", [x], [y], inits, value_info=vinfo)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="pytorch",
                          producer_version="2.5.0")
    m.ir_version = 8
    return m


def dyn_batch1_model():
    return _torch_like_cnn(1)


def dyn_batch2_model():
    return _torch_like_cnn(2)


def dyn_dims_model():
    """A named dim no output depends on (a ReduceMean over it) and an
    unknown dim without a name."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])
    u = helper.make_tensor_value_info("u", TensorProto.FLOAT, [None, 4])
    m_out = helper.make_tensor_value_info("mean", TensorProto.FLOAT, [8])
    u_out = helper.make_tensor_value_info("u_relu", TensorProto.FLOAT, [None, 4])
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["mean"], name="pool_rows", axes=[0], keepdims=0),
        helper.make_node("Relu", ["u"], ["u_relu"], name="relu"),
    ]
    return model(helper.make_graph(nodes, "dims", [x, u], [m_out, u_out]))


def check_clean_model():
    """A model check finds nothing in: fixed shapes, every weight used and
    in float16's range."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    w = numpy_helper.from_array((np.arange(12, dtype=np.float32) / 10).reshape(4, 3), "w")
    b = numpy_helper.from_array(np.array([0.5, -0.5, 1.0], dtype=np.float32), "b")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["xw"], name="matmul"),
        helper.make_node("Add", ["xw", "b"], ["xwb"], name="add"),
        helper.make_node("Relu", ["xwb"], ["y"], name="relu"),
    ]
    return model(helper.make_graph(nodes, "clean", [x], [y], [w, b]))


def check_lint_model():
    """One of each ops and structure finding: an op of an unknown domain, one of
    a domain not imported, an op and an attribute newer than the opset
    imported, an attribute removed before it, a function importing another
    opset, an unused initializer and input, an input with an initializer, a
    dead node, two nodes with one name."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    extra = helper.make_tensor_value_info("extra", TensorProto.FLOAT, [1])
    scale = helper.make_tensor_value_info("scale", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 4])
    h1 = helper.make_tensor_value_info("h1", TensorProto.FLOAT, [2, 2])
    fn = helper.make_function("local", "Twice", ["a"], ["b"],
                              [helper.make_node("Add", ["a", "a"], ["b"])],
                              [helper.make_opsetid("", 16)])
    nodes = [
        helper.make_node("Mul", ["x", "scale"], ["xs"], name="dup"),
        helper.make_node("Twice", ["xs"], ["y"], name="twice", domain="local"),
        helper.make_node("Neg", ["x"], ["unused_neg"], name="dup"),
        helper.make_node("FancyOp", ["x"], ["z"], name="fancy", domain="com.example"),
        helper.make_node("Split", ["x"], ["h1", "h2"], name="split", axis=1, num_outputs=2),
        # an op newer than the opset imported, an attribute removed before it,
        # a domain not imported
        helper.make_node("Gelu", ["x"], ["g"], name="gelu"),
        helper.make_node("Abs", ["x"], ["a"], name="abs_v1", consumed_inputs=[0]),
        helper.make_node("Thing", ["x"], ["t"], name="stray", domain="not.imported"),
    ]
    inits = [numpy_helper.from_array(np.array([2.0], dtype=np.float32), "scale"),
             numpy_helper.from_array(np.ones(3, dtype=np.float32), "stale_weight")]
    more = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 4]) for n in ("g", "a", "t")]
    g = helper.make_graph(nodes, "lint", [x, extra, scale], [y, z, h1] + more, inits)
    return model(g, opsets=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1),
                            helper.make_opsetid("com.example", 1)], functions=[fn])


def check_fp16_model():
    """Precision findings: weights that overflow or vanish in float16, a
    Constant that overflows, float16 Pow, Exp, a long ReduceSum and a
    LayerNormalization with float16 statistics; `big` (x * 1e5) is an
    activation beyond float16 once calibrated."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    t = helper.make_tensor_value_info("t", TensorProto.FLOAT16, [1, 8192])
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in ("big", "p", "e")]
    outs.append(helper.make_tensor_value_info("s", TensorProto.FLOAT16, [1, 1]))
    outs.append(helper.make_tensor_value_info("ln", TensorProto.FLOAT16, [1, 8192]))
    w = np.full((1, 4), 0.5, dtype=np.float32)
    w[0, 0] = 1e5
    w[0, 1] = 1e-9
    inits = [numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(np.array([1e5], dtype=np.float32), "gain"),
             numpy_helper.from_array(np.array([2.0], dtype=np.float16), "two"),
             numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1"),
             numpy_helper.from_array(np.ones(8192, dtype=np.float16), "ln_scale")]
    huge = helper.make_tensor("value", TensorProto.FLOAT, [1], [1e6])
    nodes = [
        helper.make_node("Mul", ["x", "gain"], ["big"], name="amplify"),
        helper.make_node("Constant", [], ["huge"], name="huge_const", value=huge),
        helper.make_node("Mul", ["x", "w"], ["xw"], name="weigh"),
        helper.make_node("Add", ["xw", "huge"], ["xwh"], name="shift"),
        helper.make_node("Cast", ["xwh"], ["xh"], name="to_half", to=TensorProto.FLOAT16),
        helper.make_node("Pow", ["xh", "two"], ["ph"], name="square"),
        helper.make_node("Cast", ["ph"], ["p"], name="p_back", to=TensorProto.FLOAT),
        helper.make_node("Exp", ["xh"], ["eh"], name="exp"),
        helper.make_node("Cast", ["eh"], ["e"], name="e_back", to=TensorProto.FLOAT),
        helper.make_node("ReduceSum", ["t", "axis1"], ["s"], name="sum_long"),
        helper.make_node("LayerNormalization", ["t", "ln_scale"], ["ln"], name="norm", stash_type=0),
    ]
    return model(helper.make_graph(nodes, "fp16", [x, t], outs, inits))


def lesson_files(out):
    """The lessons of scripts/lessons/ with their committed models, laid out
    as in the repository, so a test runs them as a reader does (from the
    repository root: paths like scripts/lessons/models/batch1.onnx)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    src = os.path.join(root, "scripts", "lessons")
    for rel in ("dynamic-shapes.ogs", os.path.join("models", "batch1.onnx"), os.path.join("models", "batch2.onnx")):
        dst = os.path.join(out, "scripts", "lessons", rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(os.path.join(src, rel), dst)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, fn in [("if", if_model), ("chain", chain_model), ("symbolic", symbolic_model),
                     ("tensors", tensors_model), ("names", names_model), ("dynamic", dynamic_model),
                     ("functions", function_model), ("qdq", qdq_model), ("minus_one", minus_one_model)]:
        onnx.save_model(fn(), os.path.join(out, name + ".onnx"))
    for name, fn in [("dyn_batch1", dyn_batch1_model), ("dyn_batch2", dyn_batch2_model), ("dyn_dims", dyn_dims_model),
                     ("check_clean", check_clean_model), ("check_lint", check_lint_model),
                     ("check_fp16", check_fp16_model)]:
        onnx.save_model(fn(), os.path.join(out, name + ".onnx"))
    lesson_files(out)
    external_model(out)
    # the same model without its data file
    os.makedirs(os.path.join(out, "nodata"), exist_ok=True)
    with open(os.path.join(out, "external.onnx"), "rb") as f, \
            open(os.path.join(out, "nodata", "external.onnx"), "wb") as g:
        g.write(f.read())
    # a script with a NUL byte, as a binary file given to source would have
    with open(os.path.join(out, "nul.ogs"), "wb") as f:
        f.write(b"info\nnodes\0\nops\n")
    with open(os.path.join(out, "garbage.onnx"), "wb") as f:
        f.write(b"this is not an ONNX model\n")
    open(os.path.join(out, "empty.onnx"), "wb").close()
    run_data(out)
    quant_models(out)


if __name__ == "__main__":
    main()
