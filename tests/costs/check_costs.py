#!/usr/bin/env python3
"""Checks of ogsh's cost model (ir/cost.c) against published figures and
against onnx-tool, on the models of tests/models/make_models.py and the
ONNX backend test data.

    check_costs.py OGSH MODELDIR published
    check_costs.py OGSH MODELDIR onnx-tool [--backend-only | --models-only] [--limit N] [-v]
    check_costs.py OGSH MODELDIR shapes [COMPARE_ONNX]

MODELDIR holds the generated models; they are (re)made there by
make_models.py when missing or when make_models.py changed since (a stamp
file records its hash; a lock keeps parallel tests from racing).

published  ResNet-50 and MobileNetV2 against torchvision's published
           parameter counts and GFLOPS (which are multiply-adds of the
           Conv and Linear layers at 1x3x224x224):
             torchvision/models/resnet.py, ResNet50_Weights.IMAGENET1K_V1:
               "num_params": 25557032, "_ops": 4.089
             torchvision/models/mobilenetv2.py, MobileNet_V2_Weights.IMAGENET1K_V1:
               "num_params": 3504872, "_ops": 0.301
           (the same figures are the "Params" and "GFLOPS" columns of
           https://pytorch.org/vision/stable/models.html). BERT-base and
           GPT-2 small against their parameter counts (transformers'
           BertModel and GPT2LMHeadModel num_parameters(): 109,482,240 and
           124,439,808), computed below from the architecture.
onnx-tool  per node, the MACs of every Conv, ConvTranspose, Gemm and
           MatMul equal onnx-tool's (1.0.1, onnx_tool.Model + Graph.profile)
           on every model that onnx-tool can profile. Inputs with symbolic
           dims get 1 there, as ogsh takes them; BERT and GPT-2 are compared
           again at batch 2, sequence 16 (set-input-shape in ogsh). Reports
           how many models onnx-tool could profile and every difference.
shapes     runs tests/shapes/compare_onnx.py with --models MODELDIR.
"""
import argparse
import fcntl
import glob
import hashlib
import json
import os
import signal
import subprocess
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MAKE_MODELS = os.path.join(ROOT, "tests", "models", "make_models.py")
MODELS = ["resnet50", "mobilenetv2", "bert", "gpt2"]
MAC_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul")


def ensure_models(modeldir):
    """Makes the models in modeldir unless they are there and up to date."""
    os.makedirs(modeldir, exist_ok=True)
    with open(MAKE_MODELS, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    stamp = os.path.join(modeldir, "stamp")
    with open(os.path.join(modeldir, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        have = open(stamp).read().strip() if os.path.exists(stamp) else ""
        if have != digest or not all(os.path.exists(os.path.join(modeldir, m + ".onnx")) for m in MODELS):
            print(f"making the test models in {modeldir} (about 20 s)", flush=True)
            subprocess.run([sys.executable, MAKE_MODELS, modeldir], check=True)
            with open(stamp, "w") as f:
                f.write(digest + "\n")


def ogsh_json(ogsh, model, cmd):
    r = subprocess.run([ogsh, "-c", cmd, model], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"ogsh failed on {model}: {r.stderr.strip()[:500]}")
    return json.loads(r.stdout)


def sig3(x):
    return float(f"{x:.3g}")


# ---- published -----------------------------------------------------------

def bert_params(layers=12, d=768, ff=3072, vocab=30522, pos=512, types=2):
    emb = (vocab + pos + types) * d + 2 * d
    layer = 4 * (d * d + d) + 2 * d + (d * ff + ff) + (ff * d + d) + 2 * d
    return emb + layers * layer + (d * d + d)


def gpt2_params(layers=12, d=768, vocab=50257, ctx=1024):
    layer = 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + 2 * d + (d * 4 * d + 4 * d) + (4 * d * d + d)
    return vocab * d + ctx * d + layers * layer + 2 * d


def published(ogsh, modeldir):
    fails = []

    def check(what, got, want):
        ok = got == want
        print(f"{'ok  ' if ok else 'FAIL'} {what}: {got:,} (expected {want:,})")
        if not ok:
            fails.append(what)

    for name, params, gmacs in [("resnet50", 25557032, 4.089), ("mobilenetv2", 3504872, 0.301)]:
        st = ogsh_json(ogsh, os.path.join(modeldir, name + ".onnx"), "stats --json")
        if st["unknown_nodes"]:
            fails.append(f"{name}: {st['unknown_nodes']} nodes not counted")
            print(f"FAIL {name}: {st['unknown_nodes']} nodes not counted")
        check(f"{name} parameters", st["totals"]["params"], params)
        macs = sum(o["macs"] for o in st["ops"] if o["op"] in ("Conv", "Gemm"))
        ok = sig3(macs / 1e9) == sig3(gmacs)
        print(f"{'ok  ' if ok else 'FAIL'} {name} Conv+Gemm MACs at 1x3x224x224: {macs:,} = {macs / 1e9:.4g} G "
              f"(torchvision: {gmacs} G, compared to 3 significant digits)")
        if not ok:
            fails.append(f"{name} MACs")
        if st["totals"]["macs"] != macs:
            fails.append(f"{name}: MACs outside Conv and Gemm")
    for name, params in [("bert", bert_params()), ("gpt2", gpt2_params())]:
        st = ogsh_json(ogsh, os.path.join(modeldir, name + ".onnx"), "stats --json")
        check(f"{name} parameters", st["totals"]["params"], params)
        if st["unknown_nodes"]:
            fails.append(f"{name}: {st['unknown_nodes']} nodes not counted")
            print(f"FAIL {name}: {st['unknown_nodes']} nodes not counted")
        if sorted(st["assumed"]) != ["batch", "sequence"]:
            fails.append(f"{name}: assumed {st['assumed']}")
    assert bert_params() == 109482240 and gpt2_params() == 124439808
    return fails


# ---- onnx-tool -----------------------------------------------------------

class Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise Timeout()


def backend_models():
    import onnx
    d = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    out = []
    for sub in ("node", "simple", "pytorch-converted", "pytorch-operator", "light"):
        out += glob.glob(os.path.join(d, sub, "**", "*.onnx"), recursive=True)
    return sorted(out)


def onnx_tool_macs(path, sizes=None):
    """{first output name: (op, macs, output dims)} for the MAC ops onnx-tool
    profiles, or raises. sizes: {symbol: value} for symbolic input dims (1
    for the others)."""
    import numpy as np
    import onnx
    from onnx_tool.model import Model
    m = Model(path, {"verbose": False})
    if not m.valid:
        raise RuntimeError("not a model")
    g = m.graph
    g.graph_reorder_nodes()
    inits = {t.name for t in m.mproto.graph.initializer}
    inputs = {}
    for vi in m.mproto.graph.input:
        if vi.name in inits or not vi.type.HasField("tensor_type"):
            continue
        tt = vi.type.tensor_type
        if not tt.HasField("shape"):
            continue
        dims = [d.dim_value if d.HasField("dim_value") else (sizes or {}).get(d.dim_param, 1) for d in tt.shape.dim]
        if all(d.HasField("dim_value") for d in tt.shape.dim):
            continue
        inputs[vi.name] = np.ones(dims, dtype=onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type))
    g.shape_infer(inputs or None)
    g.profile()
    if not g.valid_profile:
        raise RuntimeError("no valid profile")
    out = {}
    for n in g.nodemap.values():
        if n.op_type in MAC_OPS and n.output:
            out[n.output[0]] = (n.op_type, int(n.macs[0]), [int(d) for d in g.tensormap[n.output[0]].get_shape()])
    return out


def onnx_shapes(path):
    """name -> dims (None for an unknown dim) as onnx's shape inference has them."""
    import onnx
    from onnx import shape_inference
    m = onnx.load(path, load_external_data=False)
    try:
        m = shape_inference.infer_shapes(m)
    except Exception:   # noqa: BLE001
        pass
    out = {}
    for vi in list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info):
        tt = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and tt.HasField("shape"):
            out[vi.name] = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
    return out


def ogsh_out_shape(ogsh, path, node_id, prelude=""):
    """The dims of a node's first output as ogsh's cost used them (symbols as 1)."""
    c = ogsh_json(ogsh, path, f"{prelude}cost n{node_id} --json")
    t = c["outputs"][0]["type"]
    inner = t[t.index("[") + 1:t.rindex("]")] if "[" in t else ""
    return [int(x) if x.isdigit() else 1 for x in inner.split(",") if x]


def symbolic_inputs(path):
    """The graph inputs with symbolic dims: {name: [dims, symbols as str]}."""
    import onnx
    m = onnx.load(path, load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    out = {}
    for vi in m.graph.input:
        if vi.name in inits or not vi.type.HasField("tensor_type"):
            continue
        dims = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in vi.type.tensor_type.shape.dim]
        if any(isinstance(d, str) for d in dims):
            out[vi.name] = dims
    return out


def compare_onnx_tool(ogsh, paths, verbose):
    warnings.filterwarnings("ignore")
    signal.signal(signal.SIGALRM, _alarm)
    profiled = failed_ot = 0
    with_ops = 0
    nodes = same = 0
    diffs, unknown, ot_wrong = [], [], []
    for entry in paths:
        path, sizes = entry if isinstance(entry, tuple) else (entry, None)
        short = os.path.relpath(path, os.path.dirname(os.path.dirname(path)))
        prelude = ""
        if sizes:
            short += " at " + ", ".join(f"{k}={v}" for k, v in sizes.items())
            for name, dims in symbolic_inputs(path).items():
                d = ",".join(str(sizes.get(x, 1) if isinstance(x, str) else x) for x in dims)
                prelude += f"set-input-shape {name} [{d}]; "
        try:
            signal.alarm(120)
            ot = onnx_tool_macs(path, sizes)
            signal.alarm(0)
        except (Exception, Timeout) as e:   # noqa: BLE001 - onnx-tool fails in many ways
            signal.alarm(0)
            failed_ot += 1
            if verbose:
                print(f"  onnx-tool cannot profile {short}: {type(e).__name__}: {str(e)[:120]}")
            continue
        profiled += 1
        if not ot:
            continue
        with_ops += 1
        st = ogsh_json(ogsh, path, prelude + "stats --by=node --json")
        by_out = {}
        for n in st["nodes"]:
            if n["outputs"] and n["outputs"][0]:
                by_out[n["outputs"][0]] = n
        for out, (op, macs, ot_shape) in sorted(ot.items()):
            n = by_out.get(out)
            nodes += 1
            if n is None:
                diffs.append(f"{short}: {op} -> '{out}': not a node of the main graph in ogsh")
            elif not n["known"]:
                unknown.append(f"{short}: n{n['id']} {op}: onnx-tool {macs:,}, ogsh not known: {n['why']}")
            elif n["macs"] != macs:
                # the same count on another output shape: whose shape is right? onnx's says
                ours = ogsh_out_shape(ogsh, path, n["id"], prelude)
                theirs = onnx_shapes(path).get(out)
                vol = lambda d: int(__import__("math").prod(d))   # noqa: E731
                same_rule = vol(ot_shape) and macs * vol(ours) == n["macs"] * vol(ot_shape)
                line = (f"{short}: n{n['id']} {op}: onnx-tool {macs:,} on output {ot_shape}, "
                        f"ogsh {n['macs']:,} on {ours}, onnx's shape inference {theirs}")
                if theirs == ours and ot_shape != ours and same_rule:
                    ot_wrong.append(line)
                else:
                    diffs.append(line)
            else:
                same += 1
    print(f"onnx-tool profiled {profiled} of {len(paths)} models ({failed_ot} it could not); "
          f"{with_ops} have {', '.join(MAC_OPS)} nodes: {nodes} nodes, {same} equal, "
          f"{len(ot_wrong)} where onnx-tool infers another output shape than onnx (same rule on "
          f"onnx's shape), {len(diffs)} different, {len(unknown)} not known to ogsh")
    for w in ot_wrong:
        print("ONNX-TOOL SHAPE " + w)
    for d in diffs:
        print("DIFFERENT " + d)
    for u in unknown:
        print("UNKNOWN   " + u)
    return diffs + unknown


# ---- shapes --------------------------------------------------------------

def shapes(compare_onnx, ogsh, modeldir):
    """compare_onnx.py --models MODELDIR, on those models alone (its own run
    also goes through the whole backend test data)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(compare_onnx)))
    import compare_onnx as co
    co.backend_models = lambda: []
    sys.argv = [compare_onnx, ogsh, "--models", modeldir]
    try:
        co.main()
    except SystemExit as e:
        return e.code or 0
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ogsh")
    ap.add_argument("modeldir")
    ap.add_argument("what", choices=["published", "onnx-tool", "shapes", "models"])
    ap.add_argument("compare_onnx", nargs="?", default=os.path.join(ROOT, "tests", "shapes", "compare_onnx.py"))
    ap.add_argument("--backend-only", action="store_true")
    ap.add_argument("--models-only", action="store_true")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    if a.what != "onnx-tool" or not a.backend_only:
        ensure_models(a.modeldir)
    if a.what == "models":
        return 0
    if a.what == "published":
        fails = published(a.ogsh, a.modeldir)
    elif a.what == "shapes":
        return shapes(a.compare_onnx, a.ogsh, a.modeldir)
    else:
        paths = []
        if not a.models_only:
            paths += backend_models()
        if not a.backend_only:
            paths += [os.path.join(a.modeldir, m + ".onnx") for m in MODELS]
            # the transformers again at a size where every dim matters
            paths += [(os.path.join(a.modeldir, m + ".onnx"), {"batch": 2, "sequence": 16}) for m in ("bert", "gpt2")]
        if a.limit:
            paths = paths[:a.limit]
        fails = compare_onnx_tool(a.ogsh, paths, a.v)
    if fails:
        print(f"{len(fails)} failure(s)")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
