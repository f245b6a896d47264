#!/usr/bin/env python3
"""ogsh's shape inference against onnx.shape_inference.infer_shapes.

    compare_onnx.py OGSH [--models DIR]... [--op OP]... [--limit N] [-v]

For every model of the ONNX backend test data (node, simple,
pytorch-converted, pytorch-operator, light) and of each --models folder,
runs `ogsh -c 'shapes --json --subgraphs' MODEL` and onnx's inference
(strict mode; non-strict where strict raises) and compares every value, in
the main graph and in subgraphs:

  same        same element type and shape (dims equal, or the same symbol)
  ogsh more   onnx leaves an element type, the rank or a dim unknown and
              ogsh knows it; reported explicitly, and checked against the
              shapes onnxruntime actually produces where the model has test
              inputs (node tests) and ORT can run it
  ogsh less   onnx knows something ogsh does not: a failure
  different   both know and disagree: a failure

Sequence, optional and map types are compared by their key and element
types, by the same rules. Exits 1 on any failure. --op keeps models using
that op type (in the main graph or in a subgraph).
"""
import argparse
import glob
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference

DTYPES = {getattr(onnx.TensorProto, k): k for k in onnx.TensorProto.DataType.keys()}

# Values where onnx's own inference is wrong and ogsh rightly says less.
# Each is reported by name; the test fails if one of them stops differing
# (then the entry is stale and goes).
ONNX_WRONG = {
    ("node/test_affine_grid_3d_align_corners_expanded/model.onnx",
     "n15.then_branch/AffineGrid_test_affine_grid_3d_align_corners_expanded_function_W_then"):
        "onnx gives dim -1: the branch (never taken) splits 5 elements into 4 equal parts, which "
        "onnxruntime rejects; ogsh warns and leaves the dim unknown",
    ("node/test_affine_grid_3d_expanded/model.onnx",
     "n15.then_branch/AffineGrid_test_affine_grid_3d_expanded_function_W_then"):
        "the same invalid Split in the never-taken branch",
    ("node/test_loop13_seq/model.onnx", "seq_res"):
        "onnx copies the element shape [] of the empty initial sequence; the loop appends tensors of "
        "shape (1,), (2,) ... (5,) (onnxruntime), so the element shape is not known",
}
# ogsh's dtype names for onnx's
OGSH_NAME = {
    "FLOAT": "float32", "UINT8": "uint8", "INT8": "int8", "UINT16": "uint16", "INT16": "int16",
    "INT32": "int32", "INT64": "int64", "STRING": "string", "BOOL": "bool", "FLOAT16": "float16",
    "DOUBLE": "float64", "UINT32": "uint32", "UINT64": "uint64", "COMPLEX64": "complex64",
    "COMPLEX128": "complex128", "BFLOAT16": "bfloat16", "FLOAT8E4M3FN": "float8e4m3fn",
    "FLOAT8E4M3FNUZ": "float8e4m3fnuz", "FLOAT8E5M2": "float8e5m2", "FLOAT8E5M2FNUZ": "float8e5m2fnuz",
    "UINT4": "uint4", "INT4": "int4", "FLOAT4E2M1": "float4e2m1", "FLOAT8E8M0": "float8e8m0",
    "UINT2": "uint2", "INT2": "int2",
}


def onnx_type(tp):
    """(kind, dtype name or None, dims list or None) for a tensor TypeProto;
    (kind, map key dtype name or None, element type or None) for sequence,
    optional and map types (the element type in the same form)."""
    which = tp.WhichOneof("value")
    if which in ("tensor_type", "sparse_tensor_type"):
        t = getattr(tp, which)
        dt = OGSH_NAME.get(DTYPES.get(t.elem_type, ""), None) if t.elem_type else None
        if not t.HasField("shape"):
            return ("tensor", dt, None)
        dims = []
        for d in t.shape.dim:
            w = d.WhichOneof("value")
            # onnx names dims it cannot know "unk__N": that is not knowledge
            p = d.dim_param if w == "dim_param" and not d.dim_param.startswith("unk__") else None
            dims.append(d.dim_value if w == "dim_value" else p)
        return ("tensor", dt, dims)
    if which is None:
        return (None, None, None)
    kind = which.replace("_type", "")
    t = getattr(tp, which)
    if which == "map_type":
        key = OGSH_NAME.get(DTYPES.get(t.key_type, ""), None) if t.key_type else None
        inner = onnx_type(t.value_type) if t.HasField("value_type") else None
        return (kind, key, inner)
    if which in ("sequence_type", "optional_type"):
        inner = onnx_type(t.elem_type) if t.HasField("elem_type") else None
        return (kind, None, inner)
    return (kind, None, None)


def onnx_values(g, prefix, out):
    """name -> type for every value onnx describes in g (and its subgraphs)."""
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.HasField("type"):
            out.setdefault(prefix + vi.name, onnx_type(vi.type))
    for t in g.initializer:
        out.setdefault(prefix + t.name, ("tensor", OGSH_NAME.get(DTYPES.get(t.data_type, "")), list(t.dims)))
    for i, n in enumerate(g.node):
        for a in n.attribute:
            if a.HasField("g"):
                onnx_values(a.g, f"{prefix}n{i}.{a.name}/", out)
            for k, sg in enumerate(a.graphs):
                onnx_values(sg, f"{prefix}n{i}.{a.name}[{k}]/", out)


def ogsh_type(t):
    kind = t.get("kind")
    if kind in ("tensor", "sparse_tensor"):
        return ("tensor", t.get("dtype"), t.get("shape"))
    if kind == "none":
        return (None, None, None)
    inner = ogsh_type(t["elem"]) if t.get("elem") else None
    if inner == (None, None, None):
        inner = None
    key = t.get("key") if kind == "map" else None
    return (kind, key if key in OGSH_NAME.values() else None, inner)


def compare(o, g):
    """'same', 'more' (ogsh knows more), 'less', 'different'; with a detail."""
    okind, odt, odims = o
    gkind, gdt, gdims = g
    more = False
    if okind is None:
        return ("more", "onnx has no type") if gkind else ("same", "")
    if gkind is None:
        return ("less", "ogsh has no type")
    if okind != gkind:
        return ("different", f"kind {okind} vs {gkind}")
    if okind != "tensor":
        # sequence, optional, map: the key type, then the element type, by the same rules
        okey, oinner = odt, odims
        gkey, ginner = gdt, gdims
        if okey and gkey and okey != gkey:
            return ("different", f"{okind} key {okey} vs ogsh {gkey}")
        if okey and not gkey:
            return ("less", f"{okind} key {okey} unknown to ogsh")
        if oinner is None:
            return ("more", f"{okind} element type") if ginner is not None or (gkey and not okey) else ("same", "")
        if ginner is None:
            return ("less", f"{okind} element type unknown to ogsh")
        verdict, detail = compare(oinner, ginner)
        if verdict == "same" and gkey and not okey:
            verdict, detail = "more", "key"
        return (verdict, f"{okind} element: {detail}" if detail else "")
    if odt and gdt and odt != gdt:
        return ("different", f"dtype {odt} vs ogsh {gdt}")
    if odt and not gdt:
        return ("less", f"dtype {odt} unknown to ogsh")
    if gdt and not odt:
        more = True
    if odims is None:
        return ("more", "onnx has no shape") if gdims is not None else (("more", "dtype") if more else ("same", ""))
    if gdims is None:
        return ("less", f"onnx knows the shape {odims}")
    if len(odims) != len(gdims):
        return ("different", f"rank {len(odims)} vs ogsh {len(gdims)}")
    for k, (a, b) in enumerate(zip(odims, gdims)):
        if a is None:
            if b is not None:
                more = True
            continue
        if b is None:
            return ("less", f"dim {k}: onnx {a}, ogsh unknown")
        if isinstance(a, int) and isinstance(b, int):
            if a != b:
                return ("different", f"dim {k}: onnx {a} vs ogsh {b}")
        elif isinstance(a, int) != isinstance(b, int):
            # a number where the other has a symbol: ogsh knows more if the number is ogsh's
            if isinstance(b, int):
                more = True
            else:
                return ("less", f"dim {k}: onnx {a}, ogsh {b}")
        elif a != b:
            return ("different", f"dim {k}: onnx '{a}' vs ogsh '{b}'")
    return ("more", "dims") if more else ("same", "")


def uses_op(g, ops):
    """Whether a node of g or of its subgraphs (at any depth) has one of these op types."""
    for n in g.node:
        if n.op_type in ops:
            return True
        for a in n.attribute:
            if a.HasField("g") and uses_op(a.g, ops):
                return True
            if any(uses_op(sg, ops) for sg in a.graphs):
                return True
    return False


def backend_models():
    d = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    out = []
    for sub in ("node", "simple", "pytorch-converted", "pytorch-operator", "light"):
        out += glob.glob(os.path.join(d, sub, "**", "*.onnx"), recursive=True)
    return sorted(out)


def ort_shapes(path, names):
    """Actual shapes of main-graph values, by running onnxruntime on test_data_set_0."""
    try:
        import onnxruntime as ort
    except ImportError:
        return {}
    ds = os.path.join(os.path.dirname(path), "test_data_set_0")
    if not os.path.isdir(ds):
        return {}
    m = onnx.load(path)
    feeds = {}
    inputs = [i.name for i in m.graph.input if i.name not in {t.name for t in m.graph.initializer}]
    for k, name in enumerate(inputs):
        f = os.path.join(ds, f"input_{k}.pb")
        if not os.path.exists(f):
            return {}
        t = onnx.TensorProto()
        with open(f, "rb") as fh:
            t.ParseFromString(fh.read())
        try:
            feeds[name] = numpy_helper.to_array(t)
        except Exception:
            return {}
    have = {o.name for o in m.graph.output}
    for n in names:
        if n not in have:
            m.graph.output.append(onnx.ValueInfoProto(name=n))
    try:
        so = ort.SessionOptions()
        so.log_severity_level = 4
        sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        res = sess.run(names, feeds)
    except Exception:
        return {}
    return {n: list(np.asarray(r).shape) for n, r in zip(names, res) if isinstance(r, np.ndarray)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ogsh")
    ap.add_argument("--models", action="append", default=[])
    ap.add_argument("--op", action="append", default=[])
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args()
    paths = backend_models()
    for d in args.models:
        paths += sorted(glob.glob(os.path.join(d, "**", "*.onnx"), recursive=True))
    counts = {"same": 0, "more": 0, "less": 0, "different": 0}
    failures, mores, verified, contradicted = [], [], 0, []
    onnx_wrong, seen_wrong, models_seen = [], set(), set()
    models = 0
    for path in paths:
        m = onnx.load(path, load_external_data=False)
        if args.op and not uses_op(m.graph, args.op):
            continue
        models += 1
        if args.limit and models > args.limit:
            break
        short = os.path.relpath(path, os.path.dirname(os.path.dirname(os.path.dirname(path))))
        models_seen.add(short[len("data/"):] if short.startswith("data/") else short)
        try:
            inf = shape_inference.infer_shapes(m, check_type=True, strict_mode=True)
        except Exception:
            inf = shape_inference.infer_shapes(m)
        theirs = {}
        onnx_values(inf.graph, "", theirs)
        p = subprocess.run([args.ogsh, "-c", "shapes --json --subgraphs", path], capture_output=True, text=True)
        if p.returncode != 0:
            failures.append(f"{short}: ogsh failed: {p.stderr.strip()[:300]}")
            continue
        try:
            ours = {v["name"]: v for v in json.loads(p.stdout)}
        except ValueError as e:
            failures.append(f"{short}: bad JSON from ogsh: {e}")
            continue
        model_more = []
        for name, v in ours.items():
            o = theirs.get(name, (None, None, None))
            verdict, detail = compare(o, ogsh_type(v["type"]))
            counts[verdict] += 1
            if verdict in ("less", "different"):
                why = f" (ogsh: {v.get('why')})" if v.get("why") else ""
                key = (short[len("data/"):] if short.startswith("data/") else short, name)
                if key in ONNX_WRONG:
                    onnx_wrong.append(f"{short}: '{name}': {ONNX_WRONG[key]}")
                    seen_wrong.add(key)
                    continue
                failures.append(f"{short}: '{name}' {verdict}: {detail}{why}")
            elif verdict == "more":
                model_more.append((name, v, detail))
        for name in theirs:
            if name not in ours:
                failures.append(f"{short}: '{name}' is described by onnx but not listed by ogsh")
        if model_more:
            main_names = [n for n, v, d in model_more if "/" not in n and v["type"].get("shape") is not None]
            actual = ort_shapes(path, main_names) if main_names else {}
            for name, v, detail in model_more:
                mores.append(f"{short}: '{name}': {detail}: ogsh {v['type'].get('dtype')}{v['type'].get('shape')}")
                if name in actual:
                    ours_dims = v["type"].get("shape")
                    ok = all(not isinstance(a, int) or a == b for a, b in zip(ours_dims, actual[name])) and \
                        len(ours_dims) == len(actual[name])
                    if ok:
                        verified += 1
                    else:
                        contradicted.append(f"{short}: '{name}': ogsh says {ours_dims}, onnxruntime produced {actual[name]}")
    print(f"{models} models; values: {counts['same']} same as onnx, {counts['more']} where ogsh knows more, "
          f"{counts['less']} where ogsh knows less, {counts['different']} different")
    print(f"ogsh knows more than onnx's inference on {len(mores)} values; {verified} of them checked against "
          f"onnxruntime's actual shapes, {len(contradicted)} contradicted")
    for w in onnx_wrong:
        print("onnx is wrong here, ogsh says less on purpose:", w)
    for key in ONNX_WRONG:
        if key[0] in models_seen and key not in seen_wrong:
            failures.append(f"{key[0]}: '{key[1]}' is listed in ONNX_WRONG but no longer differs: remove the entry")
    if args.v:
        for m in mores:
            print("  more:", m)
    for f in failures[:200]:
        print("FAIL", f)
    for c in contradicted[:100]:
        print("WRONG", c)
    if len(failures) > 200:
        print(f"... {len(failures) - 200} more failures")
    sys.exit(1 if failures or contradicted else 0)


if __name__ == "__main__":
    main()
