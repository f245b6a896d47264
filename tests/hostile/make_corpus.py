#!/usr/bin/env python3
"""Writes a corpus of hostile ONNX files for the loader.

    make_corpus.py OUT_DIR

Every case is a file (or, for external data, a folder holding model.onnx and
its data files) under OUT_DIR, and a row of OUT_DIR/manifest.json:

    {"name": ..., "file": path relative to OUT_DIR, "expect": fragment,
     "what": what the case does}

`expect` is a fragment of the one-line error `ogsh -c info FILE` must print
("FILE: object: what is wrong"). Rows with "good": true instead are control
files that must load. Models are made with the onnx Python API; where onnx
will not write something (over-long varints, nesting deeper than protobuf
allows, lengths past the end), the bytes are written by hand.

The corpus is deterministic: the same bytes on every run.
"""
import hashlib
import json
import os
import random
import sys

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, helper, numpy_helper

OPSET = [helper.make_opsetid("", 18)]


# ---- raw protobuf ----

def varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field, wt):
    return varint(field << 3 | wt)


def ld(field, payload):
    """A length-delimited field."""
    return key(field, 2) + varint(len(payload)) + payload


def vf(field, n):
    """A varint field."""
    return key(field, 0) + varint(n)


def top_fields(buf):
    """(field, start, end) of each top-level field of a message."""
    out, p = [], 0

    def rd(p):
        v, s = 0, 0
        while True:
            b = buf[p]
            v |= (b & 0x7F) << s
            p += 1
            s += 7
            if not b & 0x80:
                return v, p
    while p < len(buf):
        start = p
        tag, p = rd(p)
        wt = tag & 7
        if wt == 0:
            _, p = rd(p)
        elif wt == 1:
            p += 8
        elif wt == 5:
            p += 4
        elif wt == 2:
            n, p = rd(p)
            p += n
        else:
            raise ValueError("unexpected wire type")
        out.append((tag >> 3, start, p))
    return out


# ---- models ----

def vi(name, elem=TensorProto.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def base_model(extra_inits=(), nodes=None, inputs=None, outputs=None, **graph_kw):
    """x[2,16] @ w[16,16] + b[16] -> y; w is big enough (1 KB) to stay in the mapping."""
    w = numpy_helper.from_array((np.arange(256, dtype=np.float32) / 16).reshape(16, 16), "w")
    b = numpy_helper.from_array(np.ones(16, np.float32), "b")
    if nodes is None:
        nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
                 helper.make_node("Add", ["h", "b"], ["y"], name="add")]
    g = helper.make_graph(nodes, "main",
                          inputs if inputs is not None else [vi("x", shape=[2, 16])],
                          outputs if outputs is not None else [vi("y", shape=[2, 16])],
                          [w, b, *extra_inits], **graph_kw)
    return helper.make_model(g, opset_imports=OPSET, producer_name="ogsh-hostile")


def with_init(t, use=True):
    """The base model plus initializer `t`, read by an Identity node when `use`."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Add", ["h", "b"], ["y"], name="add")]
    outs = [vi("y", shape=[2, 16])]
    if use:
        nodes.append(helper.make_node("Identity", [t.name], ["t_out"], name="id"))
        outs.append(helper.make_value_info("t_out", onnx.TypeProto()))
    return base_model([t], nodes=nodes, outputs=outs)


def raw_tensor(name, dt, dims, raw=None, **fields):
    t = TensorProto()
    t.name = name
    if dt is not None:
        t.data_type = dt
    t.dims.extend(dims)
    if raw is not None:
        t.raw_data = raw
    for k, v in fields.items():
        getattr(t, k).extend(v)
    return t


def ext_tensor(name, dims, kv, dt=TensorProto.FLOAT):
    t = raw_tensor(name, dt, dims)
    t.data_location = TensorProto.EXTERNAL
    for k, v in kv:
        e = t.external_data.add()
        e.key = k
        e.value = v
    return t


def _s(x):
    return x.encode()


def raw_node(op, ins, outs, attrs=b""):
    """NodeProto bytes."""
    return b"".join(ld(1, _s(i)) for i in ins) + b"".join(ld(2, _s(o)) for o in outs) + ld(4, _s(op)) + attrs


def raw_graph(name, nodes, outs, ins=()):
    """GraphProto bytes; `ins` are ValueInfoProto bytes, `outs` names (float[2] outputs)."""
    return (b"".join(ld(1, n) for n in nodes) + ld(2, _s(name)) + b"".join(ld(11, i) for i in ins) +
            b"".join(ld(12, vi(o, shape=[2]).SerializeToString()) for o in outs))


def raw_attr_graph(name, g):
    """A NodeProto.attribute field holding graph `g`."""
    return ld(5, ld(1, _s(name)) + ld(6, g) + vf(20, AttributeProto.GRAPH))


def raw_model(graph):
    return vf(1, 8) + ld(7, graph) + ld(8, ld(1, b"") + vf(2, 18))


def if_chain(depth):
    """ModelProto bytes: If inside If ... `depth` deep; the innermost branches read the outer x.

    Written by hand: the protobuf library refuses messages nested this deep."""
    node, graph, attr_graph = raw_node, raw_graph, raw_attr_graph

    def leaf(level):
        return graph(f"e{level}", [node("Identity", ["x"], [f"e{level}"])], [f"e{level}"])

    # from the inside out; only the then-branch goes deeper, so the size stays linear
    g = leaf(depth)
    for level in range(depth - 1, -1, -1):
        out = "y" if level == 0 else f"o{level}"
        n = node("If", ["c"], [out], attr_graph("then_branch", g) + attr_graph("else_branch", leaf(level)))
        ins = [vi("c", TensorProto.BOOL, []).SerializeToString(), vi("x", shape=[2]).SerializeToString()]
        g = graph("main" if level == 0 else f"g{level}", [n], [out], ins if level == 0 else ())
    return raw_model(g)


def many_captures(n):
    """ModelProto bytes: an If whose then-branch reads `n` values of the main graph, then a
    node with an undefined input (so that the load fails after the captures are made)."""
    names = [f"i{k}" for k in range(n)]
    ins = [vi("c", TensorProto.BOOL, []).SerializeToString()] + [ld(1, _s(x)) for x in names]
    then = raw_graph("then", [raw_node("Concat", names, ["t"], ld(5, ld(1, b"axis") + vf(3, 0) + vf(20, 2)))], ["t"])
    els = raw_graph("else", [raw_node("Identity", ["i0"], ["e"])], ["e"])
    nodes = [raw_node("If", ["c"], ["y"], raw_attr_graph("then_branch", then) + raw_attr_graph("else_branch", els)),
             raw_node("Add", ["y", "undefined_at_end"], ["z"])]
    return raw_model(raw_graph("main", nodes, ["z"], ins))


def deep_typeproto(depth):
    """ModelProto bytes whose graph input has type seq(seq(...seq(float)...)), `depth` deep."""
    core = ld(1, vf(1, TensorProto.FLOAT))             # TypeProto.tensor_type{elem_type}
    headers = []
    size = len(core)
    for _ in range(depth):
        seq_hdr = key(1, 2) + varint(size)             # Sequence.elem_type
        size += len(seq_hdr)
        tp_hdr = key(4, 2) + varint(size)              # TypeProto.sequence_type
        size += len(tp_hdr)
        headers.append(tp_hdr + seq_hdr)
    typ = b"".join(reversed(headers)) + core
    value_info = ld(1, b"deep") + ld(2, typ)           # ValueInfoProto{name, type}
    m = base_model()
    graph = m.graph.SerializeToString() + ld(11, value_info)   # appended: one more input
    m.ClearField("graph")
    return m.SerializeToString() + ld(7, graph)


class Corpus:
    def __init__(self, root):
        self.root = os.path.abspath(root)
        self.rows = []
        self.names = set()
        os.makedirs(self.root, exist_ok=True)

    def _row(self, name, rel, expect, what, good=False):
        assert name not in self.names, name
        self.names.add(name)
        row = {"name": name, "file": rel, "what": what}
        if good:
            row["good"] = True
        else:
            row["expect"] = expect
        self.rows.append(row)

    def add(self, name, data, expect, what, good=False):
        """A single-file case: bytes or a ModelProto."""
        if isinstance(data, onnx.ModelProto):
            data = data.SerializeToString()
        rel = name + ".onnx"
        with open(os.path.join(self.root, rel), "wb") as f:
            f.write(data)
        self._row(name, rel, expect, what, good)

    def folder(self, name):
        d = os.path.join(self.root, name)
        os.makedirs(d)
        return d

    def add_in(self, name, model, expect, what, good=False):
        """A case in its own folder (external data): the model is written to name/model.onnx."""
        d = os.path.join(self.root, name)
        if isinstance(model, onnx.ModelProto):
            model = model.SerializeToString()
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(model)
        self._row(name, name + "/model.onnx", expect, what, good)

    def add_path(self, name, rel, expect, what):
        self._row(name, rel, expect, what)

    def write_manifest(self):
        with open(os.path.join(self.root, "manifest.json"), "w") as f:
            json.dump(self.rows, f, indent=1)


# ---- the cases ----

def files_cases(c):
    c.add("empty", b"", "the file is empty", "an empty file")
    os.makedirs(os.path.join(c.root, "a_folder.onnx"))
    c.add_path("folder", "a_folder.onnx", "it is a folder", "a folder instead of a file")
    if hasattr(os, "mkfifo"):
        os.mkfifo(os.path.join(c.root, "fifo.onnx"))
        c.add_path("fifo", "fifo.onnx", "not a regular file", "a named pipe: opening it must not block")
    c.add_path("missing", "no_such_file.onnx", "cannot open", "a file that does not exist")

    good = base_model().SerializeToString()
    fields = top_fields(good)
    graph_field = [f for f in fields if f[0] == 7][0]
    inner = set()
    for _, s, e in fields:
        inner.update(range(s + 1, e))
    # cuts inside a field: the walk must see the truncation
    cuts = sorted(set([1, 2, 3, 5, 8, 13, 21, graph_field[1] + 1, graph_field[1] + 2, graph_field[1] + 3,
                       len(good) - 1, len(good) - 2, len(good) - 17] +
                      list(range(30, len(good), max(1, len(good) // 40)))))
    n = 0
    for cut in cuts:
        if cut in inner:
            c.add(f"truncated_{cut}", good[:cut], "malformed protobuf",
                  f"the valid model cut at byte {cut} of {len(good)}")
            n += 1
    # cuts inside the graph with the outer length fixed up: the walk must find them a level down
    g = base_model().graph.SerializeToString()
    bounds = {0, len(g)} | {e for _, _, e in top_fields(g)}
    rnd = random.Random(7)
    for cut in sorted(rnd.sample([k for k in range(1, len(g)) if k not in bounds], 25)):
        c.add(f"truncated_graph_{cut}", vf(1, 8) + ld(7, g[:cut]), "malformed protobuf",
              f"the graph cut at byte {cut} of {len(g)}, inside one of its fields, the model's length adjusted")
    before = graph_field[1]
    c.add("truncated_before_graph", good[:before], "it has no graph",
          f"the valid model cut at byte {before}, where the graph field starts")

    for i, size in enumerate([1, 2, 3, 7, 64, 1000, 4096, 65536]):
        rnd = random.Random(1000 + i)
        data = bytes(rnd.getrandbits(8) for _ in range(size))
        c.add(f"garbage_{size}", data, "malformed protobuf", f"{size} random bytes")
    c.add("text_format", b'ir_version: 8\ngraph {\n  name: "g"\n}\n', "malformed protobuf",
          "a model in protobuf text format")
    c.add("zip_header", b"PK\x03\x04" + bytes(100), "malformed protobuf", "the start of a zip file")
    c.add("wire_type_mismatch", vf(1, 8) + vf(7, 1), "does not match ModelProto",
          "valid wire format, but the graph field is a varint")
    # lengths
    c.add("huge_length", vf(1, 8) + key(7, 2) + varint(1 << 40) + b"\x00" * 32, "runs past the end",
          "the graph's length is 2^40")
    c.add("huge_length_u64", vf(1, 8) + key(7, 2) + varint((1 << 64) - 1) + b"\x00" * 32, "runs past the end",
          "the graph's length is 2^64-1")
    g = base_model().graph.SerializeToString()
    c.add("huge_length_nested", vf(1, 8) + ld(7, g + key(1, 2) + varint(1 << 35)), "runs past the end",
          "a node inside the graph claims 2^35 bytes")
    c.add("length_past_parent", vf(1, 8) + ld(7, ld(1, ld(1, b"a") + b"\x12")), "malformed protobuf",
          "a node's field reads past the end of the node")
    # varints
    c.add("varint_11_bytes", key(1, 0) + b"\x80" * 10 + b"\x01" + ld(7, g), "bad varint",
          "ir_version written as an 11-byte varint")
    c.add("varint_over_64_bits", key(1, 0) + b"\xff" * 9 + b"\x7f" + ld(7, g), "bad varint",
          "a 10-byte varint with more than 64 bits")
    c.add("tag_too_long", b"\x88" + b"\x80" * 10 + b"\x01", "bad field tag", "a field tag of 12 bytes")
    c.add("length_varint_too_long", key(7, 2) + b"\xff" * 10 + b"\x01", "bad length",
          "the graph's length is an 11-byte varint")
    c.add("field_number_zero", b"\x00\x00" + ld(7, g), "field number out of range", "a field numbered 0")
    c.add("field_number_huge", key((1 << 29) + 5, 0) + b"\x00", "field number out of range",
          "a field number over 2^29")
    c.add("group_wire_type", key(50, 3) + key(50, 4), "groups are not used", "a group (wire type 3)")
    c.add("wire_type_7", key(50, 7) + b"\x00", "unknown wire type", "wire type 7")
    c.add("truncated_fixed64", ld(7, g) + key(99, 1) + b"\x01\x02\x03", "truncated 64-bit field",
          "an unknown 64-bit field cut short")
    c.add("truncated_fixed32", ld(7, g) + key(99, 5) + b"\x01", "truncated 32-bit field",
          "an unknown 32-bit field cut short")
    m = base_model()
    m.ClearField("graph")
    c.add("missing_graph", m, "it has no graph", "a ModelProto with no graph")
    c.add("graph_twice", base_model().SerializeToString() + ld(7, g), "more than once",
          "the graph field given twice (protobuf would merge them)")


def nesting_cases(c):
    c.add("deep_if_100", if_chain(100), "nested more than",
          "If inside If ... 100 deep")
    c.add("deep_if_34", if_chain(34), "subgraphs are nested more than 32 deep",
          "If inside If ... 34 deep: fine for the wire walk, over the subgraph limit")
    c.add("deep_typeproto", deep_typeproto(10000), "nested more than",
          "a graph input of type seq(seq(...)) 10000 deep, written by hand")
    c.add("captures_200k", many_captures(200000), "input 1 'undefined_at_end' is not defined",
          "a subgraph reading 200000 values of the main graph (linear, not quadratic), then an undefined input")
    c.add("deep_typeproto_60", deep_typeproto(60), "nested more than",
          "a graph input of type seq(seq(...)) 60 deep")


def tensor_cases(c):
    f = TensorProto.FLOAT
    c.add("dims_overflow_int64", with_init(raw_tensor("t", f, [1 << 32, 1 << 32, 4], b"")),
          "the product of dims [4294967296,4294967296,4] overflows int64", "dims whose product overflows int64 (2^32 * 2^32 * 4)")
    c.add("dims_overflow_uint64", with_init(raw_tensor("t", f, [(1 << 63) - 1, 3], b"")),
          "overflows int64", "dims whose product overflows 64 bits")
    c.add("dims_overflow_int64_only", with_init(raw_tensor("t", TensorProto.INT4, [1 << 62, 3])),
          "the product of dims [4611686018427387904,3] overflows int64",
          "int4 dims whose product is past 2^63 but not 2^64 (and whose bytes would fit)")
    c.add("dims_too_large", with_init(raw_tensor("t", f, [1 << 61], b"")),
          "too large", "2^61 float32 elements: the byte size overflows")
    c.add("negative_dim", with_init(raw_tensor("t", f, [-1, 3], b"\0" * 12)),
          "dimension 0 is negative (-1)", "a negative dim")
    c.add("negative_dim_even", with_init(raw_tensor("t", f, [-2, -3], b"\0" * 24)),
          "dimension 0 is negative (-2)", "two negative dims whose product is positive")
    c.add("rank_65", with_init(raw_tensor("t", f, [1] * 65, b"\0" * 4)),
          "rank 65 is more than 64", "a tensor of rank 65")
    c.add("raw_too_short", with_init(raw_tensor("t", f, [3, 4], b"\0" * 40)),
          "initializer 't': raw_data has 40 bytes, dims [3,4] float32 need 48", "raw_data 8 bytes short")
    c.add("raw_too_long", with_init(raw_tensor("t", f, [3, 4], b"\0" * 52)),
          "raw_data has 52 bytes, dims [3,4] float32 need 48", "raw_data 4 bytes too long")
    c.add("raw_too_short_mapped", with_init(raw_tensor("t", f, [32, 32], b"\1" * 4092)),
          "raw_data has 4092 bytes, dims [32,32] float32 need 4096",
          "a big raw_data (left in the mapping) 4 bytes short")
    c.add("raw_too_long_mapped", with_init(raw_tensor("t", f, [1000, 1000], b"\1" * 4096)),
          "raw_data has 4096 bytes, dims [1000,1000] float32 need 4000000",
          "dims [1000,1000] with 4 KB of raw_data")
    c.add("raw_for_empty", with_init(raw_tensor("t", f, [0, 3], b"\0" * 4)),
          "raw_data has 4 bytes, dims [0,3] float32 need 0", "bytes for an empty tensor")
    c.add("raw_int4_odd", with_init(raw_tensor("t", TensorProto.INT4, [3], b"\0")),
          "raw_data has 1 bytes, dims [3] int4 need 2", "3 int4 elements need 2 bytes")
    c.add("data_type_99", with_init(raw_tensor("t", 99, [2], b"\0" * 8)),
          "unknown data_type 99", "data_type 99")
    c.add("data_type_0", with_init(raw_tensor("t", 0, [2], b"\0" * 8)),
          "data_type is 0 (UNDEFINED)", "data_type 0 (UNDEFINED)")
    c.add("data_type_negative", with_init(raw_tensor("t", -3, [2], b"\0" * 8)),
          "unknown data_type -3", "data_type -3")
    c.add("no_data_type", with_init(raw_tensor("t", None, [2], b"\0" * 8)),
          "has no data_type", "no data_type at all")
    c.add("no_data", with_init(raw_tensor("t", f, [3, 4])),
          "has no data", "a 3x4 tensor with no data field")
    c.add("float_data_count", with_init(raw_tensor("t", f, [3, 4], float_data=[1.0] * 5)),
          "float_data has 5 entries, dims [3,4] float32 need 12", "float_data: 5 entries for 12 elements")
    c.add("int32_data_float16", with_init(raw_tensor("t", TensorProto.FLOAT16, [2, 2], int32_data=[1, 2, 3])),
          "int32_data has 3 entries, dims [2,2] float16 need 4", "int32_data holding float16: 3 entries for 4")
    c.add("int32_data_uint4", with_init(raw_tensor("t", TensorProto.UINT4, [5], int32_data=[1, 2])),
          "int32_data has 2 entries, dims [5] uint4 need 3", "int32_data holding uint4: 2 bytes for 5 elements")
    c.add("int64_data_count", with_init(raw_tensor("t", TensorProto.INT64, [4], int64_data=[1, 2, 3, 4, 5])),
          "int64_data has 5 entries, dims [4] int64 need 4", "int64_data: 5 entries for 4")
    c.add("double_data_count", with_init(raw_tensor("t", TensorProto.DOUBLE, [2], double_data=[1.0])),
          "double_data has 1 entries", "double_data: 1 entry for 2")
    c.add("uint64_data_count", with_init(raw_tensor("t", TensorProto.UINT64, [2], uint64_data=[1, 2, 3])),
          "uint64_data has 3 entries", "uint64_data: 3 entries for 2")
    c.add("complex64_count", with_init(raw_tensor("t", TensorProto.COMPLEX64, [2], float_data=[1.0] * 3)),
          "float_data has 3 entries, dims [2] complex64 need 4", "complex64 needs two floats per element")
    c.add("string_data_count", with_init(raw_tensor("t", TensorProto.STRING, [3], string_data=[b"a", b"b"])),
          "string_data has 2 entries, dims [3] need 3", "string_data: 2 entries for 3")
    c.add("string_in_raw", with_init(raw_tensor("t", TensorProto.STRING, [1], b"abc")),
          "string tensors must use string_data", "a string tensor in raw_data")
    c.add("string_in_int32", with_init(raw_tensor("t", TensorProto.STRING, [1], int32_data=[1])),
          "int32_data cannot hold string elements", "a string tensor in int32_data")
    c.add("wrong_typed_field", with_init(raw_tensor("t", f, [2], int64_data=[1, 2])),
          "int64_data cannot hold float32 elements", "float32 elements in int64_data")
    c.add("uint32_too_big", with_init(raw_tensor("t", TensorProto.UINT32, [1], uint64_data=[1 << 40])),
          "does not fit uint32", "uint32 element 2^40 in uint64_data")
    c.add("raw_and_float_data", with_init(raw_tensor("t", f, [2], b"\0" * 8, float_data=[1.0, 2.0])),
          "has data in both raw_data and float_data", "two data fields at once: raw_data and float_data")
    c.add("float_and_int64_data", with_init(raw_tensor("t", f, [2], float_data=[1.0, 2.0], int64_data=[1, 2])),
          "has data in both float_data and int64_data", "two typed fields at once")
    t = raw_tensor("t", f, [2], b"\0" * 8)
    t.segment.begin = 0
    t.segment.end = 2
    c.add("segment", with_init(t), "segment", "a tensor with a segment field")
    t = TensorProto()   # data_location is a closed enum: 7 goes in by hand
    t.ParseFromString(raw_tensor("t", f, [2], b"\0" * 8).SerializeToString() + vf(14, 7))
    c.add("data_location_7", with_init(t), "unknown data_location 7", "data_location 7")
    t = raw_tensor("t", f, [2], b"\0" * 8)
    e = t.external_data.add()
    e.key, e.value = "location", "t.bin"
    c.add("external_data_not_external", with_init(t), "data_location is not EXTERNAL",
          "external_data keys on a tensor stored inside")
    c.add("initializer_no_name", with_init(raw_tensor("", f, [2], b"\0" * 8), use=False),
          "initializer 2 has no name", "an initializer with no name")
    # attribute tensors
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Add", ["h", "b"], ["y"], name="add"),
             helper.make_node("Constant", [], ["k"], name="const", value=raw_tensor("kv", f, [4], b"\0" * 12))]
    c.add("constant_raw_short", base_model(nodes=nodes), "node 'const' (n2, Constant) attribute 'value': raw_data has 12 bytes",
          "a Constant node whose tensor is 4 bytes short")


def graph_cases(c):
    mm = helper.make_node("MatMul", ["x", "w"], ["h"], name="mm")
    add = helper.make_node("Add", ["h", "b"], ["y"], name="add")
    c.add("node_cycle", base_model(nodes=[helper.make_node("Add", ["x2", "b"], ["x1"], name="a"),
                                           helper.make_node("Relu", ["x1"], ["x2"], name="r"),
                                           mm, add]),
          "cycle", "two nodes that read each other's output")
    c.add("self_loop", base_model(nodes=[helper.make_node("Add", ["x1", "b"], ["x1"], name="a"), mm, add]),
          "cycle", "a node that reads its own output")
    c.add("undefined_input", base_model(nodes=[mm, helper.make_node("Add", ["h", "nope"], ["y"], name="add")]),
          "node 'add' (n1, Add): input 1 'nope' is not defined", "a node input nothing defines")
    c.add("undefined_input_newline", base_model(nodes=[mm, helper.make_node("Add", ["h", "a\nb\x1b[31m"], ["y"], name="add")]),
          "is not defined", "an undefined input whose name holds a newline and an escape sequence")
    c.add("duplicate_node_outputs", base_model(nodes=[mm, helper.make_node("Relu", ["x"], ["h"], name="r"), add]),
          "value 'h' is defined twice", "two nodes with the same output")
    c.add("output_twice_in_node", base_model(nodes=[helper.make_node("Split", ["x"], ["h", "h"], name="s", axis=0), add]),
          "value 'h' is defined twice", "one node listing the same output twice")
    c.add("output_is_initializer", base_model(nodes=[mm, add, helper.make_node("Relu", ["x"], ["w"], name="r")]),
          "value 'w' is defined twice", "a node output with an initializer's name")
    c.add("output_is_input", base_model(nodes=[mm, add, helper.make_node("Relu", ["h"], ["x"], name="r")]),
          "value 'x' is defined twice", "a node output with a graph input's name")
    m = base_model()
    m.graph.initializer.append(numpy_helper.from_array(np.ones(16, np.float32), "b"))
    c.add("initializer_twice", m, "initializer 'b' is defined twice", "two initializers named b")
    c.add("inputs_twice", base_model(inputs=[vi("x", shape=[2, 16]), vi("x", shape=[2, 16])]),
          "input 'x' is listed twice", "graph inputs listed twice")
    c.add("input_no_name", base_model(inputs=[vi("x", shape=[2, 16]), vi("", shape=[1])]),
          "input 1 has no name", "a graph input with no name")
    c.add("output_undefined", base_model(outputs=[vi("y"), vi("zz")]),
          "output 'zz' is not defined", "a graph output nothing defines")
    c.add("node_no_op_type", base_model(nodes=[mm, add, helper.make_node("", ["x"], ["q"], name="empty")]),
          "has no op_type", "a node with no op_type")
    # attributes
    n = helper.make_node("LeakyRelu", ["h"], ["y"], name="lr", alpha=0.1)
    n.attribute.append(helper.make_attribute("alpha", 0.2))
    c.add("attribute_twice", base_model(nodes=[mm, n]),
          "attribute 'alpha' is given twice", "an attribute given twice")
    n = helper.make_node("LeakyRelu", ["h"], ["y"], name="lr", alpha=0.1)
    a = AttributeProto()   # the type is a closed enum: 99 goes in by hand
    a.ParseFromString(b"".join(x.SerializeToString() for x in n.attribute) + vf(20, 99))
    n.attribute[0].CopyFrom(a)
    c.add("attribute_type_99", base_model(nodes=[mm, n]), "unknown attribute type 99", "attribute type 99")
    n = helper.make_node("LeakyRelu", ["h"], ["y"], name="lr")
    a = n.attribute.add()
    a.name = "alpha"
    a.type = AttributeProto.GRAPH
    c.add("attribute_graph_missing", base_model(nodes=[mm, n]), "type graph but no graph",
          "an attribute of type graph without a graph")
    n = helper.make_node("LeakyRelu", ["h"], ["y"], name="lr")
    a = n.attribute.add()
    a.type = AttributeProto.FLOAT
    a.f = 1.0
    c.add("attribute_no_name", base_model(nodes=[mm, n]), "an attribute has no name", "an attribute with no name")
    n = helper.make_node("Foo", ["h"], ["y"], name="tp", domain="x.test")
    a = n.attribute.add()
    a.name = "types"
    a.type = AttributeProto.TYPE_PROTOS
    ok = a.type_protos.add()
    ok.CopyFrom(helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [2])))
    bad = a.type_protos.add()
    bad.CopyFrom(helper.make_sequence_type_proto(helper.make_tensor_type_proto(99, [2])))
    m = base_model(nodes=[mm, n])
    m.opset_import.append(helper.make_opsetid("x.test", 1))
    c.add("attribute_type_protos_bad", m, "unknown element type 99",
          "a type_protos attribute whose second entry has element type 99")
    # many attributes: the duplicate check must not be quadratic
    n = helper.make_node("Foo", ["h"], ["y"], name="many", domain="x.test")
    for i in range(200000):
        n.attribute.append(helper.make_attribute(f"a{i}", i))
    n.attribute.append(helper.make_attribute("a0", 0))
    m = base_model(nodes=[mm, n])
    m.opset_import.append(helper.make_opsetid("x.test", 1))
    c.add("attribute_twice_200k", m, "attribute 'a0' is given twice",
          "200001 attributes, the last one repeating the first")
    # types
    c.add("value_info_elem_99", base_model(value_info=[vi("h", 99, [2, 16])]),
          "value_info 'h': unknown element type 99", "a value_info of element type 99")
    c.add("value_info_rank_65", base_model(value_info=[vi("h", shape=[1] * 65)]),
          "rank 65 is more than 64", "a value_info of rank 65")
    c.add("input_elem_99", base_model(inputs=[vi("x", 99, [2, 16])]),
          "input 'x': unknown element type 99", "a graph input of element type 99")
    # a negative dim in a type is read as unknown, with a warning (Paddle2ONNX writes -1)
    c.add("negative_dim_value_info", base_model(value_info=[vi("h", shape=[2, -16])]),
          None, "a value_info with a negative dim: loads, the dim unknown", good=True)
    c.add("minus_one_dim_input", base_model(inputs=[vi("x", shape=[-1, 16])]),
          None, "a graph input with dim -1 (Paddle2ONNX): loads, the dim unknown", good=True)
    # subgraphs
    then = helper.make_graph([helper.make_node("Identity", ["ghost"], ["t"])], "then", [], [vi("t")])
    els = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [], [vi("e")])
    m = helper.make_model(helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=els)], "main",
        [vi("c", TensorProto.BOOL, []), vi("x", shape=[2])], [vi("y")]), opset_imports=OPSET)
    c.add("subgraph_undefined_input", m, "input 0 'ghost' is not defined", "a subgraph reading a name nothing defines")
    then = helper.make_graph([helper.make_node("Identity", ["y"], ["t"])], "then", [], [vi("t")])
    m = helper.make_model(helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=els)], "main",
        [vi("c", TensorProto.BOOL, []), vi("x", shape=[2])], [vi("y")]), opset_imports=OPSET)
    c.add("subgraph_reads_own_output", m, "cycle", "a subgraph reading the output of the If that holds it")
    n = helper.make_node("Constant", [], ["k"], name="const")
    a = n.attribute.add()
    a.name, a.ref_attr_name, a.type = "value", "v", AttributeProto.TENSOR
    c.add("ref_attr_outside_function", base_model(nodes=[mm, add, n]),
          "attribute 'value': refers to the caller's attribute 'v' outside a function body",
          "a Constant whose value refers to a caller's attribute, in the main graph (it has no tensor)")
    # functions
    fn = helper.make_function("local", "F", ["a"], ["o"], [helper.make_node("Relu", ["zz"], ["o"])], OPSET)
    m = base_model()
    m.functions.append(fn)
    c.add("function_undefined", m, "function 'F'", "a function whose body reads a name it does not define")
    fn = helper.make_function("local", "", ["a"], ["o"], [helper.make_node("Relu", ["a"], ["o"])], OPSET)
    m = base_model()
    m.functions.append(fn)
    c.add("function_no_name", m, "a function has no name", "a function with no name")


def sparse_cases(c):
    f = TensorProto.FLOAT

    def sp(values, indices, dims, vshape=None, ishape=None):
        v = helper.make_tensor("s", f, vshape or [len(values)], values)
        i = helper.make_tensor("s_idx", TensorProto.INT64, ishape or [len(indices)], indices)
        return helper.make_sparse_tensor(v, i, dims)

    def model(s):
        m = base_model()
        m.graph.sparse_initializer.append(s)
        return m
    c.add("sparse_index_out_of_range", model(sp([1.0, 2.0], [1, 100], [2, 4])),
          "sparse initializer 's': sparse index 100 is out of range", "a linear sparse index past 2x4")
    c.add("sparse_index_negative", model(sp([1.0, 2.0], [-1, 3], [2, 4])),
          "sparse index -1 is out of range", "a negative sparse index")
    c.add("sparse_index_2d_out_of_range", model(sp([1.0, 2.0], [0, 0, 1, 9], [2, 4], ishape=[2, 2])),
          "sparse index 9 is out of range", "a [NNZ,rank] index past its dim")
    c.add("sparse_indices_shape", model(sp([1.0, 2.0], [0, 1, 2], [2, 4])),
          "sparse indices must be int64", "3 indices for 2 values")
    c.add("sparse_values_2d", model(sp([1.0, 2.0], [0, 1], [2, 4], vshape=[1, 2])),
          "sparse values must be 1-D", "2-D sparse values")
    c.add("sparse_negative_dims", model(sp([1.0], [0], [-2, 4])),
          "sparse dims are negative or overflow", "negative sparse dims")
    c.add("sparse_dims_overflow", model(sp([1.0], [0], [1 << 40, 1 << 40])),
          "sparse dims are negative or overflow", "sparse dims whose product overflows")
    s = onnx.SparseTensorProto()
    s.values.CopyFrom(helper.make_tensor("s", f, [1], [1.0]))
    s.dims.extend([4])
    c.add("sparse_no_indices", model(s), "needs values and indices", "a sparse tensor with no indices")


def external_cases(c):
    """External data: each case is a folder with model.onnx and its data files."""
    f = TensorProto.FLOAT
    data = np.arange(16, dtype=np.float32).tobytes()   # 64 bytes: t is float32 [16]

    def model(kv, dims=(16,), dt=f):
        return with_init(ext_tensor("t", list(dims), kv, dt))

    def case(name, kv, expect, what, files=None, dims=(16,), dt=f):
        d = c.folder(name)
        for fn, content in (files if files is not None else {"t.bin": data}).items():
            with open(os.path.join(d, fn), "wb") as fh:
                fh.write(content)
        c.add_in(name, model(kv, dims, dt), expect, what)
        return d

    case("ext_absolute", [("location", "/etc/passwd")], "location '/etc/passwd' is an absolute path",
         "an absolute location")
    case("ext_dotdot", [("location", "../t.bin")], "has a '..' component", "a location starting with ..")
    case("ext_dotdot_middle", [("location", "sub/../../t.bin")], "has a '..' component",
         "a .. in the middle of the location")
    d = case("ext_symlink_final", [("location", "link.bin")], "'link.bin' is a symbolic link",
             "the data file is a symbolic link")
    os.symlink("t.bin", os.path.join(d, "link.bin"))
    d = case("ext_symlink_outside", [("location", "passwd")], "'passwd' is a symbolic link",
             "the data file is a symbolic link to /etc/passwd")
    os.symlink("/etc/passwd", os.path.join(d, "passwd"))
    d = case("ext_symlink_folder", [("location", "sub/t.bin")], "'sub' is a symbolic link",
             "an intermediate folder is a symbolic link")
    os.makedirs(os.path.join(d, "real"))
    with open(os.path.join(d, "real", "t.bin"), "wb") as fh:
        fh.write(data)
    os.symlink("real", os.path.join(d, "sub"))
    d = case("ext_symlink_parent", [("location", "up/t.bin")], "'up' is a symbolic link",
             "an intermediate folder is a symbolic link to ..")
    os.symlink("..", os.path.join(d, "up"))
    d = case("ext_hardlink", [("location", "t.bin")], "has 2 hard links", "the data file is hard-linked")
    os.link(os.path.join(d, "t.bin"), os.path.join(d, "other.bin"))
    case("ext_offset_past_end", [("location", "t.bin"), ("offset", "5000")],
         "offset 5000 is past the end of the file (64 bytes)", "an offset past the end")
    case("ext_offset_huge", [("location", "t.bin"), ("offset", str((1 << 64) - 1))],
         "is past the end of the file", "offset 2^64-1")
    case("ext_offset_length_past_end", [("location", "t.bin"), ("offset", "32"), ("length", "64")],
         "offset 32 + length 64 is past the end of the file (64 bytes)", "offset + length past the end")
    case("ext_offset_length_wrap", [("location", "t.bin"), ("offset", "32"), ("length", str((1 << 64) - 16))],
         "is past the end of the file", "offset + length wrapping around 2^64")
    case("ext_length_mismatch", [("location", "t.bin"), ("length", "60")],
         "external data 't.bin' has 60 bytes at offset 0, the tensor needs 64", "length 60 for 64 bytes")
    case("ext_size_mismatch", [("location", "t.bin")], "has 68 bytes at offset 0, the tensor needs 64",
         "no length key, and the file is 4 bytes too long", files={"t.bin": data + b"\0" * 4})
    case("ext_unknown_key", [("location", "t.bin"), ("compression", "zstd")],
         "external_data has an unknown key 'compression'", "an unknown key")
    case("ext_key_twice", [("location", "t.bin"), ("location", "t.bin")],
         "external_data has the key 'location' twice", "the location key twice")
    case("ext_no_location", [("offset", "0"), ("length", "64")], "external_data has no location", "no location")
    case("ext_empty_location", [("location", "")], "empty location", "an empty location")
    case("ext_offset_not_number", [("location", "t.bin"), ("offset", "-8")],
         "external_data offset '-8' is not a number", "a negative offset")
    case("ext_length_not_number", [("location", "t.bin"), ("length", "64k")],
         "external_data length '64k' is not a number", "a length with a suffix")
    case("ext_offset_overflow", [("location", "t.bin"), ("offset", "99999999999999999999999")],
         "is not a number", "an offset past 2^64")
    case("ext_bad_checksum", [("location", "t.bin"), ("checksum", "0" * 40)], "SHA-1 is",
         "a checksum that does not match")
    good_sum = hashlib.sha1(data).hexdigest()
    m = base_model([ext_tensor("t", [16], [("location", "t.bin"), ("checksum", good_sum)]),
                    ext_tensor("t2", [16], [("location", "t.bin"), ("checksum", "1" * 40)])],
                   nodes=[helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["y"]),
                          helper.make_node("Add", ["t", "t2"], ["u"])],
                   outputs=[vi("y", shape=[2, 16]), vi("u", shape=[16])])
    d = c.folder("ext_checksum_second")
    with open(os.path.join(d, "t.bin"), "wb") as fh:
        fh.write(data)
    c.add_in("ext_checksum_second", m, "SHA-1 is",
             "two tensors in one file: the first checksum is right, the second wrong")
    d = case("ext_location_folder", [("location", "dir")], "external data 'dir' is not a regular file",
             "the location is a folder")
    os.makedirs(os.path.join(d, "dir"))
    case("ext_location_dot", [("location", ".")], "is not a regular file", "the location is '.'")
    case("ext_location_file_as_folder", [("location", "t.bin/x")], "'t.bin' is not a folder",
         "a file used as a folder in the location")
    case("ext_missing_file", [("location", "nothere.bin")], "cannot open external data 'nothere.bin'",
         "a data file that does not exist")
    if hasattr(os, "mkfifo"):
        d = case("ext_fifo", [("location", "pipe")], "external data 'pipe' is not a regular file",
                 "the data file is a named pipe: opening it must not block", files={})
        os.mkfifo(os.path.join(d, "pipe"))
    case("ext_string_tensor", [("location", "t.bin")], "string tensors must use string_data",
         "a string tensor in external data", dt=TensorProto.STRING, dims=(2,))
    t = ext_tensor("t", [16], [("location", "t.bin")])
    t.raw_data = data
    d = c.folder("ext_and_raw")
    with open(os.path.join(d, "t.bin"), "wb") as fh:
        fh.write(data)
    c.add_in("ext_and_raw", with_init(t), "has both external data and raw_data",
             "external data and raw_data at once")


def good_cases(c):
    d = c.folder("good_model")
    c.add_in("good_model", base_model(), None, "the valid base model", good=True)
    d = c.folder("good_external")
    m = base_model([numpy_helper.from_array(np.arange(64, dtype=np.float32), "big")],
                   nodes=[helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["y"]),
                          helper.make_node("Identity", ["big"], ["big_o"])],
                   outputs=[vi("y", shape=[2, 16]), vi("big_o", shape=[64])])
    onnx.save_model(m, os.path.join(d, "model.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
    c._row("good_external", "good_external/model.onnx", None, "valid external data written by onnx", good=True)
    d = c.folder("good_external_checksum")
    data = np.arange(16, dtype=np.float32).tobytes()
    with open(os.path.join(d, "t.bin"), "wb") as fh:
        fh.write(b"\0" * 8 + data)
    c.add_in("good_external_checksum",
             with_init(ext_tensor("t", [16], [("location", "./t.bin"), ("offset", "8"), ("length", "64"),
                                              ("checksum", hashlib.sha1(b"\0" * 8 + data).hexdigest())])),
             None, "external data with an offset, a length and a right checksum", good=True)
    d = c.folder("good_subgraphs")
    c.add_in("good_subgraphs", if_chain(20), None, "If inside If, 20 deep", good=True)
    d = c.folder("good_sparse")
    m = base_model()
    m.graph.sparse_initializer.append(helper.make_sparse_tensor(
        helper.make_tensor("s", TensorProto.FLOAT, [2], [1.0, 2.0]),
        helper.make_tensor("s_idx", TensorProto.INT64, [2, 2], [0, 1, 1, 3]), [2, 4]))
    c.add_in("good_sparse", m, None, "a valid sparse initializer with [NNZ,rank] indices", good=True)
    d = c.folder("good_function")
    k = helper.make_node("Constant", [], ["k"])
    a = k.attribute.add()
    a.name, a.ref_attr_name, a.type = "value_float", "alpha", AttributeProto.FLOAT
    fn = helper.make_function("local", "Scale", ["a"], ["o"], [k, helper.make_node("Mul", ["a", "k"], ["o"])],
                              OPSET, attributes=["alpha"])
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Scale", ["x"], ["y"], domain="local", alpha=2.0)], "main",
        [vi("x", shape=[4])], [vi("y", shape=[4])]), functions=[fn],
        opset_imports=OPSET + [helper.make_opsetid("local", 1)])
    c.add_in("good_function", m, None, "a function whose Constant refers to the caller's attribute", good=True)
    d = c.folder("good_typeproto")
    c.add_in("good_typeproto", deep_typeproto(5), None, "a graph input of type seq(seq(seq(seq(seq(float)))))",
             good=True)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    c = Corpus(sys.argv[1])
    files_cases(c)
    nesting_cases(c)
    tensor_cases(c)
    graph_cases(c)
    sparse_cases(c)
    external_cases(c)
    good_cases(c)
    c.write_manifest()
    bad = sum(1 for r in c.rows if not r.get("good"))
    print(f"{bad} hostile cases and {len(c.rows) - bad} good ones in {c.root}")


if __name__ == "__main__":
    main()
