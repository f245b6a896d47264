#!/usr/bin/env python3
"""Regenerates ir/ops.def and ir/attrs.def from the operator schemas of the
installed onnx package (op names, domains, arities, attribute names, types
and defaults are facts of the ONNX spec).

    python3 scripts/gen_ops.py > ir/ops.def                     # regenerate the op table
    python3 scripts/gen_ops.py --attrs > ir/attrs.def           # regenerate the attribute table
    python3 scripts/gen_ops.py --check ir/ops.def ir/attrs.def  # the test: fails if stale

Arity is the widest over every version of an op, so models of any opset
load. Flags come from the lists below; ops in the ai.ogsh domain (ogsh's
fused ops) are appended from OGSH_OPS.
"""
import sys

import numpy
import onnx.defs

ELEMENTWISE = """Abs Acos Acosh Add And Asin Asinh Atan Atanh BitShift BitwiseAnd BitwiseNot
BitwiseOr BitwiseXor Cast CastLike Ceil Celu Clip Cos Cosh Div Elu Equal Erf Exp Floor Gelu
Greater GreaterOrEqual HardSigmoid HardSwish Identity IsInf IsNaN LeakyRelu Less LessOrEqual
Log Max Mean Min Mish Mod Mul Neg Not Or PRelu Pow Reciprocal Relu Round Selu Shrink Sigmoid
Sign Sin Sinh Softplus Softsign Sqrt Sub Sum Swish Tan Tanh ThresholdedRelu Where Xor
QuantizeLinear DequantizeLinear""".split()
FUSABLE = """Add Sub Mul Div Relu Clip LeakyRelu Sigmoid HardSigmoid HardSwish Tanh Gelu Erf
BatchNormalization Pad Identity Dropout Pow Sqrt Neg Abs Exp Log Elu Selu Softplus Mish Swish
ReduceMean Softmax Transpose Reshape""".split()
SHAPE_ONLY = """Reshape Flatten Squeeze Unsqueeze Transpose Identity Shape Size Concat Split
Slice Gather Expand Tile Pad DepthToSpace SpaceToDepth""".split()
CONTROL = "If Loop Scan".split()
QUANT = """QuantizeLinear DequantizeLinear DynamicQuantizeLinear QLinearConv QLinearMatMul
MatMulInteger ConvInteger""".split()
RANDOM = "RandomNormal RandomNormalLike RandomUniform RandomUniformLike Multinomial Bernoulli Dropout".split()
REDUCE = """ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp ReduceMax ReduceMean ReduceMin
ReduceProd ReduceSum ReduceSumSquare ArgMax ArgMin""".split()
NORM = """BatchNormalization InstanceNormalization LayerNormalization GroupNormalization
RMSNormalization LpNormalization MeanVarianceNormalization LRN""".split()

# ogsh's own ops: (name, in_min, in_max, out_min, out_max, flags). Each is
# written to saved models with a model-local ONNX function that says what it
# computes in standard ops (passes/fuse_activation.c, fuse_elementwise.c).
#   FusedConv(X, W, B?, Z?)  Y = act(Conv(X, W, B) + Z)
#   FusedGemm(A, B, C?, Z?)  Y = act(alpha * A' * B' + beta * C + Z)
#   Pointwise(x0, x1, ...)   Y = expr(x0, x1, ...), elementwise with broadcasting
#   FusedAttention(Q, K?, V?, mask?)
#                            Y = softmax(Q K^T * scale + mask) V per batch and head, as
#                            ONNX Attention (3-D or 4-D, q/kv_num_heads); layout BSHD:
#                            4-D Q, K, V, Y are [batch, sequence, heads, head size];
#                            a layout with a 3 (BS3HD, SB3HD...): input 0 holds Q, K
#                            and V packed, inputs 1 and 2 are omitted; out_layout:
#                            the output's order (ir/attn_layout.c); nan_to_zero:
#                            softmax rows that are NaN count as 0 (the exporters'
#                            Where(IsNaN(p), 0, p))
OGSH_OPS = [
    ("FusedConv", 2, 4, 1, 1, "0"),
    ("FusedGemm", 2, 4, 1, 1, "0"),
    ("Pointwise", 1, -1, 1, 1, "IR_OPF_ELEMENTWISE"),
    ("FusedAttention", 1, 4, 1, 1, "0"),
    # the GPU planner's quantized islands (exec/qfuse.c): made in the plan's
    # copy of a stage, never in a stage; no CPU kernel
    # QConv(x_q, x_scale, W_q, W_scale, bias?, z?, z_scale?, y_scale?, a_scale?):
    # a_scale: the conv's own output rounded to int8 of that scale before the
    # residual (onnxruntime's QDQ around Add)
    ("QConv", 4, 9, 1, 1, "0"),
    ("QGemm", 4, 8, 1, 1, "0"),
    ("MatMulW4", 3, 5, 1, 1, "0"),
    # ONNX ops for models that import an opset before the op exists
    # (passes/fuse_layernorm.c, fuse_gelu.c), with the ONNX op's semantics,
    # kernels and attributes:
    #   LayerNormalization(X, Scale, B?) -> Y, Mean?, InvStdDev?   (ONNX opset 17)
    #   Gelu(X) -> Y                                                (ONNX opset 20)
    ("LayerNormalization", 2, 3, 1, 3, "IR_OPF_NORM"),
    ("Gelu", 1, 1, 1, 1, "IR_OPF_ELEMENTWISE"),
]

# Their attributes: (op, name, type, required, default text or None).
_ACT = [("activation", "STRING", False, ""), ("activation_params", "FLOATS", False, None)]
OGSH_ATTRS = {
    "FusedConv": [("auto_pad", "STRING", False, "NOTSET"), ("dilations", "INTS", False, None),
                  ("group", "INT", False, "1"), ("kernel_shape", "INTS", False, None),
                  ("pads", "INTS", False, None), ("strides", "INTS", False, None)] + _ACT,
    "FusedGemm": [("alpha", "FLOAT", False, "1.0"), ("beta", "FLOAT", False, "1.0"),
                  ("transA", "INT", False, "0"), ("transB", "INT", False, "0")] + _ACT,
    "Pointwise": [("dtype", "INT", True, None), ("expr", "STRING", True, None)],
    "FusedAttention": [("kv_num_heads", "INT", False, None), ("layout", "STRING", False, "BHSD"),
                       ("nan_to_zero", "INT", False, "0"), ("out_layout", "STRING", False, None),
                       ("q_num_heads", "INT", False, None), ("scale", "FLOAT", False, None)],
    "QConv": [("auto_pad", "STRING", False, "NOTSET"), ("dilations", "INTS", False, None),
              ("group", "INT", False, "1"), ("kernel_shape", "INTS", False, None),
              ("pads", "INTS", False, None), ("strides", "INTS", False, None)] + _ACT,
    "QGemm": [("transB", "INT", False, "0")] + _ACT,
    "MatMulW4": [("block_size", "INT", True, None)],
    "LayerNormalization": [("axis", "INT", False, "-1"), ("epsilon", "FLOAT", False, "1e-05"),
                           ("stash_type", "INT", False, "1")],
    "Gelu": [("approximate", "STRING", False, "none")],
}


def flags_of(name, domain):
    f = []
    if domain == "":
        if name in ELEMENTWISE: f.append("ELEMENTWISE")
        if name in FUSABLE: f.append("FUSABLE")
        if name in SHAPE_ONLY: f.append("SHAPE_ONLY")
        if name in CONTROL: f.append("CONTROL")
        if name in QUANT: f.append("QUANT")
        if name in RANDOM: f.append("RANDOM")
        if name in REDUCE: f.append("REDUCE")
        if name in NORM: f.append("NORM")
        if name.startswith("Sequence") or name in ("ConcatFromSequence", "SplitToSequence",
                                                    "Optional", "OptionalGetElement",
                                                    "OptionalHasElement"):
            f.append("SEQUENCE")
    if domain == "ai.onnx.preview.training":
        f.append("TRAINING")
    return "|".join("IR_OPF_" + x for x in f) or "0"


def rows():
    ops = {}
    for s in onnx.defs.get_all_schemas_with_history():
        key = (s.domain, s.name)
        mi, ma = s.min_input, s.max_input
        mo, mx = s.min_output, s.max_output
        since = s.since_version
        if key in ops:
            a = ops[key]
            mi, ma = min(mi, a[0]), max(ma, a[1])
            mo, mx = min(mo, a[2]), max(mx, a[3])
            since = min(since, a[4])
        ops[key] = (mi, ma, mo, mx, since)
    order = {"": 0, "ai.onnx.ml": 1, "ai.onnx.preview.training": 2, "ai.onnx.preview": 3}
    out = []
    for (dom, name), (mi, ma, mo, mx, since) in sorted(ops.items(), key=lambda kv: (order.get(kv[0][0], 9), kv[0][0], kv[0][1])):
        big = 1 << 30
        ma = -1 if ma >= big else ma
        mx = -1 if mx >= big else mx
        ident = name if dom in ("",) else {"ai.onnx.ml": "ml_", "ai.onnx.preview.training": "training_",
                                           "ai.onnx.preview": "preview_"}.get(dom, "x_") + name
        out.append(f'IR_OP({ident}, "{dom}", {mi}, {ma}, {mo}, {mx}, {flags_of(name, dom)}, {since})')
    for name, mi, ma, mo, mx, fl in OGSH_OPS:
        out.append(f'IR_OP(ogsh_{name}, "ai.ogsh", {mi}, {ma}, {mo}, {mx}, {fl}, 1)')
    return out


ATTR_TYPES = {1: "FLOAT", 2: "INT", 3: "STRING", 4: "TENSOR", 5: "GRAPH", 6: "FLOATS", 7: "INTS",
              8: "STRINGS", 9: "TENSORS", 10: "GRAPHS", 11: "SPARSE_TENSOR", 12: "SPARSE_TENSORS",
              13: "TYPE_PROTO", 14: "TYPE_PROTOS"}


def c_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def f32(x):
    """The shortest text that reads back as the same float32."""
    return str(numpy.float32(x))


def default_text(a):
    """A short text form of a scalar or list default, or None."""
    d = a.default_value
    if not d.name:
        return None
    t = d.type
    if t == 1:
        return f32(d.f)
    if t == 2:
        return str(d.i)
    if t == 3:
        return d.s.decode("utf-8", "replace")
    if t == 6:
        return "[" + ",".join(f32(x) for x in d.floats) + "]"
    if t == 7:
        return "[" + ",".join(str(x) for x in d.ints) + "]"
    if t == 8:
        return "[" + ",".join(x.decode("utf-8", "replace") for x in d.strings) + "]"
    return None


def attr_rows():
    """IR_ATTR_DEF(op, name, type, required, default, since, until) rows,
    grouped by op in op-table order. since/until: the opset versions of the
    op in which the attribute exists (until 0: still there); type, required
    and default come from the newest version that has the attribute."""
    versions = {}
    for s in onnx.defs.get_all_schemas_with_history():
        versions.setdefault((s.domain, s.name), []).append(s)
    idents = {}
    for r in rows():
        ident, dom = r[len("IR_OP("):].split(", ")[:2]
        dom = dom.strip('"')
        name = ident if dom == "" else ident.split("_", 1)[1]
        idents[(dom, name)] = ident
    out = []
    for key, ident in idents.items():
        if key[0] == "ai.ogsh":
            for k, t, req, dt in sorted(OGSH_ATTRS.get(key[1], [])):
                out.append(f'IR_ATTR_DEF({ident}, "{k}", IR_ATTR_{t}, {"true" if req else "false"}, '
                           f'{c_str(dt) if dt is not None else "NULL"}, 1, 0)')
            continue
        vs = sorted(versions.get(key, []), key=lambda x: x.since_version)
        names = sorted(set(k for v in vs for k in v.attributes))
        for k in names:
            have = [v for v in vs if k in v.attributes]
            newest = have[-1]
            a = newest.attributes[k]
            t = ATTR_TYPES.get(int(a.type.value) if hasattr(a.type, "value") else int(a.type))
            if not t:
                continue
            since = have[0].since_version
            later = [v for v in vs if v.since_version > newest.since_version]
            until = later[0].since_version if later else 0
            req = "true" if a.required else "false"
            dt = default_text(a)
            out.append(f'IR_ATTR_DEF({ident}, "{k}", IR_ATTR_{t}, {req}, '
                       f'{c_str(dt) if dt is not None else "NULL"}, {since}, {until})')
    return out


def attrs_text():
    head = [
        "/*",
        " * attrs.def - the attributes of every op in ops.def: IR_ATTR_DEF(ident, name,",
        " * type, required, default text or NULL, since, until), grouped by op in",
        " * op-table order. The attribute exists in opsets since <= v < until (until 0:",
        " * still there); type, required and default are those of its newest version.",
        " *",
        " * Generated by scripts/gen_ops.py --attrs from the ONNX operator schemas;",
        " * tests/ fail when it is stale.",
        " */",
    ]
    return "\n".join(head + attr_rows()) + "\n"


def text():
    head = [
        "/*",
        " * ops.def - the op table, one row per op: IR_OP(ident, domain, in_min, in_max,",
        " * out_min, out_max, flags, since). in_max/out_max -1 means variadic; since is",
        " * the first opset of the op's domain that has it.",
        " *",
        " * Generated by scripts/gen_ops.py from the ONNX operator schemas (all versions,",
        " * widest arity); tests/test_ops_table.py fails when it is stale.",
        " * To add an op: add it to gen_ops.py (ogsh's own ops: OGSH_OPS) and regenerate.",
        " * Tables indexed by enum ir_op (kernels, shape functions) are sized",
        " * [IR_OP_COUNT] with a static_assert, so a new row without them fails to build.",
        " */",
    ]
    return "\n".join(head + rows()) + "\n"


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--check":
        bad = False
        for path, want, how in ((sys.argv[2], text(), ""), (sys.argv[3], attrs_text(), " --attrs")):
            with open(path) as f:
                if f.read() != want:
                    print(f"{path} is stale: run python3 scripts/gen_ops.py{how} > {path}")
                    bad = True
        if bad:
            sys.exit(1)
        print(f"{sys.argv[2]}: {len(rows())} ops; {sys.argv[3]}: {len(attr_rows())} attributes; up to date")
        sys.exit(0)
    if len(sys.argv) == 2 and sys.argv[1] == "--attrs":
        sys.stdout.write(attrs_text())
    else:
        sys.stdout.write(text())
