#!/usr/bin/env python3
"""Writes realistic test models with the onnx Python API, laid out as
PyTorch's exporter (torch.onnx.export, TorchScript path, eval mode, no
constant folding of BatchNormalization) lays out the originals.

    make_models.py OUTDIR [NAME...] [--seed S]

NAME is any of the models below (default: all), or one of them with
_fp16 (resnet50_fp16: the model in float16). Each is OUTDIR/NAME.onnx:

  resnet50     torchvision resnet50: Conv (no bias) + BatchNormalization +
               Relu, bottlenecks [3, 4, 6, 3] with the stride on the 3x3
               conv (v1.5), downsample Conv+BN, residual Add, MaxPool,
               GlobalAveragePool, Flatten, Gemm. Input float32[1,3,224,224].
               25,557,032 parameters (and 53,120 BatchNormalization
               running-statistics elements, buffers in PyTorch).
  mobilenetv2  torchvision mobilenet_v2: Conv + BN + ReLU6 (Clip with two
               Constant bounds), inverted residuals (expand 1x1, depthwise
               3x3, project 1x1, residual Add where stride 1 and the widths
               match), 1x1 to 1280, GlobalAveragePool, Flatten, Gemm.
               Input float32[1,3,224,224]. 3,504,872 parameters.
  bert         a BERT-base encoder as Hugging Face's BertModel exports it
               (opset 14): 12 layers, hidden 768, 12 heads, MLP 3072,
               vocabulary 30522; inputs input_ids, attention_mask,
               token_type_ids int64[batch,sequence]; position ids sliced
               from a buffer by the sequence length; the extended attention
               mask (Unsqueeze, Cast, Sub, Mul); LayerNorm decomposed
               (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add);
               attention with Shape/Gather/Unsqueeze/Concat/Reshape chains,
               Transpose, MatMul, Div, Add, Softmax; GELU with Erf; pooler
               (Gather, Gemm-like MatMul+Add, Tanh). Outputs
               last_hidden_state and pooler_output. 109,482,240 parameters.
  gpt2         a GPT-2 small decoder as Hugging Face's GPT2LMHeadModel
               exports it (opset 14): 12 blocks, d_model 768, 12 heads,
               context 1024, vocabulary 50257; inputs input_ids,
               attention_mask int64[batch,sequence]; Conv1D layers as
               Reshape/Gemm/Reshape with Shape chains; Split into q, k, v;
               the causal mask sliced from each block's bool buffer by
               query and key lengths, then Where; GELU in its tanh form
               (gelu_new: Mul, Pow, Mul, Add, Mul, Tanh, Add, Mul, Mul);
               decomposed LayerNorm; the LM head tied to the token embedding
               (MatMul with a Transpose of it). Output logits.
               124,439,808 parameters (and 12 causal-mask buffers).

Weights are random (numpy default_rng(seed), fixed), so the files are the
same on every run with the same numpy and onnx. Every model passes
onnx.checker.check_model(full_check=True).
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

IR_VERSION = 8


class Builder:
    """Nodes named as PyTorch names them: /scope/Op (then /scope/Op_1...),
    outputs NAME_output_0; weights as initializers named like the module's
    parameters; small constants as Constant nodes."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.inits = []
        self.counts = {}

    def _name(self, scope, op):
        key = (scope, op)
        k = self.counts.get(key, 0)
        self.counts[key] = k + 1
        return f"{scope}/{op}" + (f"_{k}" if k else "")

    def op(self, op_type, inputs, scope, n_out=1, **attrs):
        name = self._name(scope, op_type)
        outs = [f"{name}_output_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, value, scope, dtype=np.int64):
        """A Constant node, as the exporter writes literals."""
        a = np.array(value, dtype=dtype)
        name = self._name(scope, "Constant")
        out = f"{name}_output_0"
        self.nodes.append(helper.make_node("Constant", [], [out], name=name,
                                           value=numpy_helper.from_array(a, "")))
        return out

    def init(self, name, a):
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(a), name))
        return name

    def normal(self, name, shape, std):
        return self.init(name, self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std))

    def uniform(self, name, shape, lo, hi):
        return self.init(name, self.rng.uniform(lo, hi, shape).astype(np.float32))

    def model(self, graph_name, inputs, outputs, opset, doc, value_info=()):
        g = helper.make_graph(self.nodes, graph_name, inputs, outputs, initializer=self.inits,
                              value_info=list(value_info))
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="pytorch", producer_version="2.4.0")
        m.ir_version = IR_VERSION
        m.doc_string = doc
        return m


# ---- CNNs -----------------------------------------------------------------

def conv_bn(b, x, scope_conv, scope_bn, w_name, bn_name, cin, cout, k, stride, pad, groups=1):
    fan_out = cout * k * k // groups
    w = b.normal(f"{w_name}.weight", [cout, cin // groups, k, k], np.sqrt(2.0 / fan_out))
    y = b.op("Conv", [x, w], scope_conv, dilations=[1, 1], group=groups, kernel_shape=[k, k],
             pads=[pad] * 4, strides=[stride, stride])
    g = b.uniform(f"{bn_name}.weight", [cout], 0.5, 1.5)
    beta = b.normal(f"{bn_name}.bias", [cout], 0.1)
    mean = b.normal(f"{bn_name}.running_mean", [cout], 0.1)
    var = b.uniform(f"{bn_name}.running_var", [cout], 0.5, 1.5)
    return b.op("BatchNormalization", [y, g, beta, mean, var], scope_bn, epsilon=1e-5, momentum=0.9)


def resnet50(seed):
    b = Builder(seed)
    x = conv_bn(b, "input", "/conv1", "/bn1", "conv1", "bn1", 3, 64, 7, 2, 3)
    x = b.op("Relu", [x], "/relu")
    x = b.op("MaxPool", [x], "/maxpool", ceil_mode=0, dilations=[1, 1], kernel_shape=[3, 3],
             pads=[1, 1, 1, 1], strides=[2, 2])
    inplanes = 64
    for li, (planes, blocks, stride) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)], 1):
        for bi in range(blocks):
            s = stride if bi == 0 else 1
            mod = f"layer{li}.{bi}"
            sc = f"/layer{li}/{mod}"
            width = planes
            identity = x
            h = conv_bn(b, x, f"{sc}/conv1", f"{sc}/bn1", f"{mod}.conv1", f"{mod}.bn1", inplanes, width, 1, 1, 0)
            h = b.op("Relu", [h], f"{sc}/relu")
            h = conv_bn(b, h, f"{sc}/conv2", f"{sc}/bn2", f"{mod}.conv2", f"{mod}.bn2", width, width, 3, s, 1)
            h = b.op("Relu", [h], f"{sc}/relu_1")
            h = conv_bn(b, h, f"{sc}/conv3", f"{sc}/bn3", f"{mod}.conv3", f"{mod}.bn3", width, planes * 4, 1, 1, 0)
            if bi == 0:
                identity = conv_bn(b, x, f"{sc}/downsample/downsample.0", f"{sc}/downsample/downsample.1",
                                   f"{mod}.downsample.0", f"{mod}.downsample.1", inplanes, planes * 4, 1, s, 0)
            h = b.op("Add", [h, identity], sc)
            x = b.op("Relu", [h], f"{sc}/relu_2")
            inplanes = planes * 4
    x = b.op("GlobalAveragePool", [x], "/avgpool")
    x = b.op("Flatten", [x], "", axis=1)
    w = b.uniform("fc.weight", [1000, 2048], -1 / np.sqrt(2048), 1 / np.sqrt(2048))
    bias = b.uniform("fc.bias", [1000], -1 / np.sqrt(2048), 1 / np.sqrt(2048))
    b.nodes.append(helper.make_node("Gemm", [x, w, bias], ["output"], name="/fc/Gemm", alpha=1.0, beta=1.0, transB=1))
    return b.model("main_graph",
                   [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 224, 224])],
                   [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 1000])], 17,
                   "torchvision resnet50 (v1.5) layer structure, random weights")


def relu6(b, x, scope):
    lo = b.const(0.0, scope, np.float32)
    hi = b.const(6.0, scope, np.float32)
    return b.op("Clip", [x, lo, hi], scope)


def mobilenetv2(seed):
    b = Builder(seed)
    # features.0: Conv2dNormActivation(3, 32, stride 2)
    x = conv_bn(b, "input", "/features/features.0/features.0.0", "/features/features.0/features.0.1",
                "features.0.0", "features.0.1", 3, 32, 3, 2, 1)
    x = relu6(b, x, "/features/features.0/features.0.2")
    cin = 32
    idx = 1
    for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                       (6, 160, 3, 2), (6, 320, 1, 1)]:
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = cin * t
            mod = f"features.{idx}"
            sc = f"/features/{mod}/conv"
            h = x
            j = 0
            if t != 1:
                p = f"{sc}/{mod}.conv.0"
                h = conv_bn(b, h, f"{p}/{mod}.conv.0.0", f"{p}/{mod}.conv.0.1", f"{mod}.conv.0.0",
                            f"{mod}.conv.0.1", cin, hidden, 1, 1, 0)
                h = relu6(b, h, f"{p}/{mod}.conv.0.2")
                j = 1
            p = f"{sc}/{mod}.conv.{j}"
            h = conv_bn(b, h, f"{p}/{mod}.conv.{j}.0", f"{p}/{mod}.conv.{j}.1", f"{mod}.conv.{j}.0",
                        f"{mod}.conv.{j}.1", hidden, hidden, 3, stride, 1, groups=hidden)
            h = relu6(b, h, f"{p}/{mod}.conv.{j}.2")
            h = conv_bn(b, h, f"{sc}/{mod}.conv.{j + 1}", f"{sc}/{mod}.conv.{j + 2}", f"{mod}.conv.{j + 1}",
                        f"{mod}.conv.{j + 2}", hidden, c, 1, 1, 0)
            if stride == 1 and cin == c:
                h = b.op("Add", [x, h], f"/features/{mod}")
            x = h
            cin = c
            idx += 1
    x = conv_bn(b, x, "/features/features.18/features.18.0", "/features/features.18/features.18.1",
                "features.18.0", "features.18.1", 320, 1280, 1, 1, 0)
    x = relu6(b, x, "/features/features.18/features.18.2")
    x = b.op("GlobalAveragePool", [x], "")
    x = b.op("Flatten", [x], "", axis=1)
    w = b.normal("classifier.1.weight", [1000, 1280], 0.01)
    bias = b.init("classifier.1.bias", np.zeros([1000], np.float32))
    b.nodes.append(helper.make_node("Gemm", [x, w, bias], ["output"], name="/classifier/classifier.1/Gemm",
                                    alpha=1.0, beta=1.0, transB=1))
    return b.model("main_graph",
                   [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 224, 224])],
                   [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 1000])], 17,
                   "torchvision mobilenet_v2 layer structure, random weights")


# ---- transformers ---------------------------------------------------------

def layer_norm(b, x, scope, name, d, eps):
    g = b.init(f"{name}.weight", np.ones([d], np.float32))
    beta = b.init(f"{name}.bias", np.zeros([d], np.float32))
    mean = b.op("ReduceMean", [x], scope, axes=[-1], keepdims=1)
    xc = b.op("Sub", [x, mean], scope)
    sq = b.op("Pow", [xc, b.const(2.0, scope, np.float32)], scope)
    var = b.op("ReduceMean", [sq], scope, axes=[-1], keepdims=1)
    ve = b.op("Add", [var, b.const(eps, scope, np.float32)], scope)
    std = b.op("Sqrt", [ve], scope)
    xn = b.op("Div", [xc, std], scope)
    y = b.op("Mul", [xn, g], scope)
    return b.op("Add", [y, beta], scope)


def linear(b, x, scope, name, d_in, d_out):
    """nn.Linear on a 3-D input: MatMul with the transposed weight (folded) and Add."""
    b.matmul_count = getattr(b, "matmul_count", 1500) + 1   # the exporter's names for folded weights
    w = b.normal(f"onnx::MatMul_{b.matmul_count}", [d_in, d_out], 0.02)
    bias = b.init(f"{name}.bias", np.zeros([d_out], np.float32))
    y = b.op("MatMul", [x, w], scope)
    return b.op("Add", [bias, y], scope)


def dim(b, shape, i, scope):
    """Gather of one dim of a Shape: a 0-d int64."""
    return b.op("Gather", [shape, b.const(i, scope)], scope, axis=0)


def unsq(b, x, scope):
    return b.op("Unsqueeze", [x, b.const([0], scope)], scope)


def split_heads(b, x, scope, heads, dh):
    """view(B, S, heads, dh) with the shape computed from x, then permute."""
    sh = b.op("Shape", [x], scope)
    b0 = dim(b, sh, 0, scope)
    sh1 = b.op("Shape", [x], scope)
    s1 = dim(b, sh1, 1, scope)
    new = b.op("Concat", [unsq(b, b0, scope), unsq(b, s1, scope), b.const([heads], scope), b.const([dh], scope)],
               scope, axis=0)
    return b.op("Reshape", [x, new], scope)


def merge_heads(b, x, scope, d):
    x = b.op("Transpose", [x], scope, perm=[0, 2, 1, 3])
    sh = b.op("Shape", [x], scope)
    b0 = dim(b, sh, 0, scope)
    sh1 = b.op("Shape", [x], scope)
    s1 = dim(b, sh1, 1, scope)
    new = b.op("Concat", [unsq(b, b0, scope), unsq(b, s1, scope), b.const([d], scope)], scope, axis=0)
    return b.op("Reshape", [x, new], scope)


def gelu_erf(b, x, scope):
    y = b.op("Div", [x, b.const(1.4142135381698608, scope, np.float32)], scope)
    y = b.op("Erf", [y], scope)
    y = b.op("Add", [y, b.const(1.0, scope, np.float32)], scope)
    y = b.op("Mul", [x, y], scope)
    return b.op("Mul", [y, b.const(0.5, scope, np.float32)], scope)


def bert(seed, layers=12, d=768, heads=12, d_ff=3072, vocab=30522, max_pos=512, types=2):
    b = Builder(seed)
    dh = d // heads
    # embeddings
    sc = "/embeddings"
    sh = b.op("Shape", ["input_ids"], sc)
    seq = dim(b, sh, 1, sc)
    pos_ids = b.init("embeddings.position_ids", np.arange(max_pos, dtype=np.int64)[None, :])
    pos = b.op("Slice", [pos_ids, b.const([0], sc), unsq(b, seq, sc), b.const([1], sc), b.const([1], sc)], sc)
    we = b.normal("embeddings.word_embeddings.weight", [vocab, d], 0.02)
    pe = b.normal("embeddings.position_embeddings.weight", [max_pos, d], 0.02)
    te = b.normal("embeddings.token_type_embeddings.weight", [types, d], 0.02)
    x = b.op("Gather", [we, "input_ids"], f"{sc}/word_embeddings")
    t = b.op("Gather", [te, "token_type_ids"], f"{sc}/token_type_embeddings")
    x = b.op("Add", [x, t], sc)
    p = b.op("Gather", [pe, pos], f"{sc}/position_embeddings")
    x = b.op("Add", [x, p], sc)
    x = layer_norm(b, x, f"{sc}/LayerNorm", "embeddings.LayerNorm", d, 1e-12)
    # the extended attention mask: (1 - mask[:, None, None, :]) * finfo.min
    m = b.op("Unsqueeze", ["attention_mask", b.const([1], "")], "")
    m = b.op("Unsqueeze", [m, b.const([2], "")], "")
    m = b.op("Cast", [m], "", to=TensorProto.FLOAT)
    m = b.op("Sub", [b.const(1.0, "", np.float32), m], "")
    mask = b.op("Mul", [m, b.const(np.finfo(np.float32).min, "", np.float32)], "")
    for i in range(layers):
        mod = f"encoder.layer.{i}"
        sc = f"/encoder/layer.{i}"
        a = f"{sc}/attention/self"
        q = linear(b, x, f"{a}/query", f"{mod}.attention.self.query", d, d)
        k = linear(b, x, f"{a}/key", f"{mod}.attention.self.key", d, d)
        v = linear(b, x, f"{a}/value", f"{mod}.attention.self.value", d, d)
        k = b.op("Transpose", [split_heads(b, k, a, heads, dh)], a, perm=[0, 2, 3, 1])
        v = b.op("Transpose", [split_heads(b, v, a, heads, dh)], a, perm=[0, 2, 1, 3])
        q = b.op("Transpose", [split_heads(b, q, a, heads, dh)], a, perm=[0, 2, 1, 3])
        s = b.op("MatMul", [q, k], a)
        s = b.op("Div", [s, b.const(float(np.sqrt(dh)), a, np.float32)], a)
        s = b.op("Add", [s, mask], a)
        pr = b.op("Softmax", [s], a, axis=-1)
        ctx = b.op("MatMul", [pr, v], a)
        ctx = merge_heads(b, ctx, a, d)
        o = linear(b, ctx, f"{sc}/attention/output/dense", f"{mod}.attention.output.dense", d, d)
        o = b.op("Add", [o, x], f"{sc}/attention/output")
        x = layer_norm(b, o, f"{sc}/attention/output/LayerNorm", f"{mod}.attention.output.LayerNorm", d, 1e-12)
        h = linear(b, x, f"{sc}/intermediate/dense", f"{mod}.intermediate.dense", d, d_ff)
        h = gelu_erf(b, h, f"{sc}/intermediate/intermediate_act_fn")
        o = linear(b, h, f"{sc}/output/dense", f"{mod}.output.dense", d_ff, d)
        o = b.op("Add", [o, x], f"{sc}/output")
        x = layer_norm(b, o, f"{sc}/output/LayerNorm", f"{mod}.output.LayerNorm", d, 1e-12)
    b.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="/Identity"))
    # pooler: the first token, dense, tanh
    first = b.op("Gather", ["last_hidden_state", b.const(0, "/pooler")], "/pooler", axis=1)
    pw = b.normal("pooler.dense.weight", [d, d], 0.02)
    pb = b.init("pooler.dense.bias", np.zeros([d], np.float32))
    y = b.op("Gemm", [first, pw, pb], "/pooler/dense", alpha=1.0, beta=1.0, transB=1)
    b.nodes.append(helper.make_node("Tanh", [y], ["pooler_output"], name="/pooler/activation/Tanh"))
    ids = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"])
           for n in ("input_ids", "attention_mask", "token_type_ids")]
    outs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", d]),
            helper.make_tensor_value_info("pooler_output", TensorProto.FLOAT, ["batch", d])]
    return b.model("main_graph", ids, outs, 14,
                   f"BERT-base encoder as transformers' BertModel exports it: {layers} layers, hidden {d}, "
                   f"{heads} heads, random weights")


def conv1d(b, x, scope, name, d_in, d_out):
    """transformers' Conv1D: addmm(bias, x.view(-1, d_in), weight).view(*x.shape[:-1], d_out)."""
    w = b.normal(f"{name}.weight", [d_in, d_out], 0.02)
    bias = b.init(f"{name}.bias", np.zeros([d_out], np.float32))
    sh = b.op("Shape", [x], scope)
    lead = b.op("Slice", [sh, b.const([0], scope), b.const([-1], scope), b.const([0], scope)], scope)
    flat = b.op("Reshape", [x, b.const([-1, d_in], scope)], scope)
    y = b.op("Gemm", [flat, w, bias], scope, alpha=1.0, beta=1.0)
    new = b.op("Concat", [lead, b.const([d_out], scope)], scope, axis=0)
    return b.op("Reshape", [y, new], scope)


def gelu_tanh(b, x, scope):
    """gelu_new: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))"""
    h = b.op("Mul", [b.const(0.5, scope, np.float32), x], scope)
    p = b.op("Pow", [x, b.const(3.0, scope, np.float32)], scope)
    p = b.op("Mul", [b.const(0.044715, scope, np.float32), p], scope)
    p = b.op("Add", [x, p], scope)
    p = b.op("Mul", [b.const(0.7978845834732056, scope, np.float32), p], scope)
    p = b.op("Tanh", [p], scope)
    p = b.op("Add", [b.const(1.0, scope, np.float32), p], scope)
    return b.op("Mul", [h, p], scope)


def gpt2(seed, layers=12, d=768, heads=12, ctx=1024, vocab=50257):
    b = Builder(seed)
    dh = d // heads
    sc = "/transformer"
    sh = b.op("Shape", ["input_ids"], sc)
    seq = dim(b, sh, 1, sc)
    pos = b.op("Range", [b.const(0, sc), seq, b.const(1, sc)], sc)
    pos = b.op("Unsqueeze", [pos, b.const([0], sc)], sc)
    wte = b.normal("transformer.wte.weight", [vocab, d], 0.02)
    wpe = b.normal("transformer.wpe.weight", [ctx, d], 0.01)
    x = b.op("Gather", [wte, "input_ids"], f"{sc}/wte")
    p = b.op("Gather", [wpe, pos], f"{sc}/wpe")
    x = b.op("Add", [x, p], sc)
    # the padding mask: (1 - mask[:, None, None, :]) * finfo.min
    m = b.op("Unsqueeze", ["attention_mask", b.const([1], sc)], sc)
    m = b.op("Unsqueeze", [m, b.const([2], sc)], sc)
    m = b.op("Cast", [m], sc, to=TensorProto.FLOAT)
    m = b.op("Sub", [b.const(1.0, sc, np.float32), m], sc)
    pad_mask = b.op("Mul", [m, b.const(np.finfo(np.float32).min, sc, np.float32)], sc)
    tril = np.tril(np.ones([ctx, ctx], dtype=bool))[None, None]
    for i in range(layers):
        mod = f"transformer.h.{i}"
        s = f"{sc}/h.{i}"
        a = f"{s}/attn"
        h = layer_norm(b, x, f"{s}/ln_1", f"{mod}.ln_1", d, 1e-5)
        qkv = conv1d(b, h, f"{a}/c_attn", f"{mod}.attn.c_attn", d, 3 * d)
        q, k, v = b.op("Split", [qkv, b.const([d, d, d], a)], a, n_out=3, axis=2)
        q = b.op("Transpose", [split_heads(b, q, a, heads, dh)], a, perm=[0, 2, 1, 3])
        k = b.op("Transpose", [split_heads(b, k, a, heads, dh)], a, perm=[0, 2, 3, 1])
        v = b.op("Transpose", [split_heads(b, v, a, heads, dh)], a, perm=[0, 2, 1, 3])
        w = b.op("MatMul", [q, k], a)
        w = b.op("Div", [w, b.const(float(np.sqrt(dh)), a, np.float32)], a)
        # causal_mask = bias[:, :, key_length - query_length : key_length, :key_length]
        ql = dim(b, b.op("Shape", [q], a), 2, a)
        kl = dim(b, b.op("Shape", [k], a), 3, a)
        bias = b.init(f"{mod}.attn.bias", tril)
        start = b.op("Sub", [kl, ql], a)
        cm = b.op("Slice", [bias, unsq(b, start, a), unsq(b, kl, a), b.const([2], a), b.const([1], a)], a)
        cm = b.op("Slice", [cm, b.const([0], a), unsq(b, kl, a), b.const([3], a), b.const([1], a)], a)
        w = b.op("Where", [cm, w, b.const(np.finfo(np.float32).min, a, np.float32)], a)
        w = b.op("Add", [w, pad_mask], a)
        w = b.op("Softmax", [w], a, axis=-1)
        o = b.op("MatMul", [w, v], a)
        o = merge_heads(b, o, a, d)
        o = conv1d(b, o, f"{a}/c_proj", f"{mod}.attn.c_proj", d, d)
        x = b.op("Add", [o, x], s)
        h = layer_norm(b, x, f"{s}/ln_2", f"{mod}.ln_2", d, 1e-5)
        h = conv1d(b, h, f"{s}/mlp/c_fc", f"{mod}.mlp.c_fc", d, 4 * d)
        h = gelu_tanh(b, h, f"{s}/mlp/act")
        h = conv1d(b, h, f"{s}/mlp/c_proj", f"{mod}.mlp.c_proj", 4 * d, d)
        x = b.op("Add", [x, h], s)
    x = layer_norm(b, x, f"{sc}/ln_f", "transformer.ln_f", d, 1e-5)
    # the LM head shares the token embedding
    wt = b.op("Transpose", [wte], "/lm_head", perm=[1, 0])
    b.nodes.append(helper.make_node("MatMul", [x, wt], ["logits"], name="/lm_head/MatMul"))
    ins = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"])
           for n in ("input_ids", "attention_mask")]
    outs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "sequence", vocab])]
    return b.model("main_graph", ins, outs, 14,
                   f"GPT-2 small as transformers' GPT2LMHeadModel exports it: {layers} blocks, d_model {d}, "
                   f"{heads} heads, random weights")


MODELS = {"resnet50": resnet50, "mobilenetv2": mobilenetv2, "bert": bert, "gpt2": gpt2}


def to_fp16(m):
    """The model in float16: every float32 initializer, Constant, graph
    input/output and value_info, and Cast(to=float) become float16 (what
    model.half() before the export gives)."""
    F, H = TensorProto.FLOAT, TensorProto.FLOAT16

    def half(t):
        if t.data_type != F:
            return t
        h = numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name)
        return h

    g = m.graph
    inits = [half(t) for t in g.initializer]
    del g.initializer[:]
    g.initializer.extend(inits)
    for n in g.node:
        for a in n.attribute:
            if n.op_type == "Constant" and a.name == "value" and a.t.data_type == F:
                a.t.CopyFrom(half(a.t))
            if n.op_type == "Cast" and a.name == "to" and a.i == F:
                a.i = H
    for v in list(g.input) + list(g.output) + list(g.value_info):
        if v.type.tensor_type.elem_type == F:
            v.type.tensor_type.elem_type = H
    m.doc_string += " (float16)"
    return m


for _name in list(MODELS):
    MODELS[_name + "_fp16"] = (lambda f: lambda seed: to_fp16(f(seed)))(MODELS[_name])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("names", nargs="*", metavar="NAME")
    ap.add_argument("--seed", type=int, default=20261121)
    ap.add_argument("--no-check", action="store_true", help="skip onnx.checker")
    a = ap.parse_args(argv)
    for name in a.names:
        if name not in MODELS:
            ap.error(f"unknown model '{name}' (models: {', '.join(MODELS)})")
    os.makedirs(a.outdir, exist_ok=True)
    for name in a.names or [n for n in MODELS if not n.endswith("_fp16")]:
        m = MODELS[name](a.seed)
        if not a.no_check:
            onnx.checker.check_model(m, full_check=True)
        path = os.path.join(a.outdir, name + ".onnx")
        tmp = path + ".tmp"
        onnx.save_model(m, tmp)
        os.replace(tmp, path)
        n_params = sum(int(np.prod(t.dims)) for t in m.graph.initializer)
        print(f"{path}: {len(m.graph.node)} nodes, {len(m.graph.initializer)} initializers, "
              f"{n_params:,} initializer elements, {os.path.getsize(path):,} bytes")
        if name == "bert":
            write_bert_inputs(os.path.join(a.outdir, "bert_inputs"), a.seed)
    return 0


def write_bert_inputs(folder, seed, batch=2, seq=16):
    """Valid inputs for the generated BERT (run --inputs=FOLDER): token ids
    below the vocabulary, segment ids 0 and 1, the last 3 tokens of the
    second sequence masked out. ogsh's random integers (-10..10) are not
    valid token or segment ids."""
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    mask = np.ones([batch, seq], np.int64)
    mask[-1, -3:] = 0
    arrays = {"input_ids": rng.integers(0, 30522, [batch, seq], dtype=np.int64),
              "token_type_ids": (np.arange(seq)[None, :] >= seq // 2).astype(np.int64).repeat(batch, 0),
              "attention_mask": mask}
    for k, v in arrays.items():
        np.save(os.path.join(folder, k + ".npy"), v)
    print(f"{folder}: {', '.join(f'{k} {list(v.shape)}' for k, v in arrays.items())}")


if __name__ == "__main__":
    sys.exit(main())
