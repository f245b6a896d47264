#!/usr/bin/env python3
"""Models with If, Loop and Scan between GPU work (issue 19), checked on the GPU.

    make_subgraphs.py OUTDIR                 writes the models and OUTDIR/subgraphs.json
    make_subgraphs.py --check OGSH OUTDIR    runs each with `plan --json` and
                                             `run --device=cuda --check=cpu --json`
                                             and prints one line per model and a summary
    make_subgraphs.py --list                 the model names

Each model has GPU work (Conv, MatMul, Add, Relu...) before and after a node
with subgraphs, and the subgraphs read values of the main graph by name
(implicit inputs) that GPU nodes made, so those must be downloaded before
the node runs on the CPU; its outputs are read by GPU nodes again (uploaded).
The condition of an If is computed on the GPU from the data, with a
threshold that sends every run to one branch (a model per branch).

One more model (if_const) has an If whose condition the planner knows
(Size of an input whose dims are bound): the planner puts the branch taken
in its place, so every node runs on the GPU and a CUDA graph is captured.

--check passes a model when: the comparison with the CPU reference passes,
the plan puts every node with subgraphs on the CPU with a reason that says
so, at least `min_gpu` nodes run on the GPU (the work around the node) and,
where the node's outputs are tensors whose shapes are known, a GPU node
after it (`gpu_after`), and the plan says that no CUDA graph is captured
because nodes run on the CPU (if_const: no If left, `ifs_inlined` 1, no
node on the CPU, a CUDA graph). OGSH_CHECK_DEVICE=cpu runs both sides on the
CPU and checks only the comparison (to try this script without a GPU).
"""
import concurrent.futures
import json
import os
import shlex
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save, checker

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '../..', "scripts"))
from ogsh_json import json_objects  # noqa: E402

F = TensorProto.FLOAT
SUBGRAPH_OPS = ("If", "Loop", "Scan", "SequenceMap")
rng = np.random.default_rng(19)


def init(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def w(name, *shape):
    return init(name, (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32))


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, inits, opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="make_subgraphs.py")
    m.ir_version = 8
    checker.check_model(m)
    return m


def if_model(then_taken):
    """Conv -> Relu -> (cond: mean > threshold, on the GPU) -> If whose branches
    read the Conv output and a second GPU value by name -> Add, Conv after."""
    thr = -1e9 if then_taken else 1e9
    then_g = helper.make_graph(
        [helper.make_node("Mul", ["y", "two"], ["t0"]),
         helper.make_node("Add", ["t0", "z"], ["then_out"])],
        "then", [], [vi("then_out", F, [1, 8, 8, 8])], [init("two", np.float32(2.0))])
    else_g = helper.make_graph(
        [helper.make_node("Sigmoid", ["y"], ["e0"]),
         helper.make_node("Sub", ["e0", "z"], ["else_out"])],
        "else", [], [vi("else_out", F, [1, 8, 8, 8])])
    nodes = [
        helper.make_node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["y"]),
        helper.make_node("Conv", ["x", "W2"], ["z"], pads=[1, 1, 1, 1]),
        helper.make_node("ReduceMean", ["y"], ["m"], keepdims=0),
        helper.make_node("Greater", ["m", "thr"], ["cond"]),
        helper.make_node("If", ["cond"], ["b"], then_branch=then_g, else_branch=else_g),
        helper.make_node("Add", ["b", "y"], ["s"]),
        helper.make_node("Conv", ["s", "W3"], ["out"], pads=[1, 1, 1, 1]),
    ]
    inits = [w("W1", 8, 3, 3, 3), init("B1", np.linspace(-0.5, 0.5, 8).astype(np.float32)),
             w("W2", 8, 3, 3, 3), w("W3", 4, 8, 3, 3), init("thr", np.float32(thr))]
    return model(nodes, [vi("x", F, [1, 3, 8, 8])], [vi("out", F, [1, 4, 8, 8])], inits)


def if_const_model():
    """An If whose condition the planner knows (Size(x) > 100, x's dims being
    bound): its then branch (Conv, Add of a value read by name) joins the
    graph and runs on the GPU; the model is then all GPU work."""
    then_g = helper.make_graph(
        [helper.make_node("Conv", ["y", "Wt"], ["t0"], pads=[1, 1, 1, 1]),
         helper.make_node("Add", ["t0", "y"], ["then_out"])],
        "then", [], [vi("then_out", F, [1, 8, 8, 8])], [w("Wt", 8, 8, 3, 3)])
    else_g = helper.make_graph(
        [helper.make_node("Neg", ["y"], ["else_out"])],
        "else", [], [vi("else_out", F, [1, 8, 8, 8])])
    nodes = [
        helper.make_node("Conv", ["x", "W1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["y"]),
        helper.make_node("Size", ["x"], ["n"]),
        helper.make_node("Greater", ["n", "hundred"], ["cond"]),
        helper.make_node("If", ["cond"], ["b"], then_branch=then_g, else_branch=else_g),
        helper.make_node("Conv", ["b", "W3"], ["out"], pads=[1, 1, 1, 1]),
    ]
    inits = [w("W1", 8, 3, 3, 3), w("W3", 4, 8, 3, 3), init("hundred", np.int64(100))]
    return model(nodes, [vi("x", F, [1, 3, 8, 8])], [vi("out", F, [1, 4, 8, 8])], inits)


def loop_model():
    """MatMul -> Loop (4 trips: s = tanh(s @ W2 + h), h read by name from the
    main graph; a scan output of every s) -> MatMul and a reduction after."""
    body = helper.make_graph(
        [helper.make_node("MatMul", ["s_in", "W2"], ["p"]),
         helper.make_node("Add", ["p", "h"], ["q"]),
         helper.make_node("Tanh", ["q"], ["s_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Mul", ["s_out", "half"], ["scan_out"])],
        "body",
        [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("s_in", F, [2, 16])],
        [vi("cond_out", TensorProto.BOOL, []), vi("s_out", F, [2, 16]), vi("scan_out", F, [2, 16])],
        [init("half", np.float32(0.5))])
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h0"]),
        helper.make_node("Relu", ["h0"], ["h"]),
        helper.make_node("Sigmoid", ["h0"], ["s0"]),
        helper.make_node("Loop", ["M", "true", "s0"], ["s_final", "scans"], body=body),
        helper.make_node("Add", ["s_final", "h"], ["a"]),
        helper.make_node("MatMul", ["a", "W3"], ["out"]),
        helper.make_node("ReduceSum", ["scans", "axes0"], ["out2"], keepdims=0),
    ]
    inits = [w("W1", 16, 16), w("W2", 16, 16), w("W3", 16, 8), init("M", np.int64(4)),
             init("true", np.bool_(True)), init("axes0", np.array([0], np.int64))]
    return model(nodes, [vi("x", F, [2, 16])], [vi("out", F, [2, 8]), vi("out2", F, [2, 16])], inits)


def loop_if_model():
    """A Loop whose trip count comes from the data (an input), with an If in its
    body that reads a GPU value of the main graph two levels up."""
    then_g = helper.make_graph([helper.make_node("Add", ["acc", "g"], ["t_out"])], "then", [],
                               [vi("t_out", F, [4, 8])])
    else_g = helper.make_graph([helper.make_node("Sub", ["acc", "g"], ["e_out"])], "else", [],
                               [vi("e_out", F, [4, 8])])
    body = helper.make_graph(
        [helper.make_node("Mod", ["i", "two"], ["r"]),
         helper.make_node("Equal", ["r", "zero"], ["even"]),
         helper.make_node("If", ["even"], ["acc_out"], then_branch=then_g, else_branch=else_g),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body",
        [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("acc", F, [4, 8])],
        [vi("cond_out", TensorProto.BOOL, []), vi("acc_out", F, [4, 8])],
        [init("two", np.int64(2)), init("zero", np.int64(0))])
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["g0"]),
        helper.make_node("Relu", ["g0"], ["g"]),
        helper.make_node("Add", ["x2", "x2"], ["acc0"]),
        helper.make_node("Loop", ["n", "", "acc0"], ["acc_final"], body=body),
        helper.make_node("Mul", ["acc_final", "g"], ["out"]),
    ]
    inits = [w("W1", 8, 8), init("n", np.int64(5))]
    return model(nodes, [vi("x", F, [4, 8]), vi("x2", F, [4, 8])], [vi("out", F, [4, 8])], inits)


def scan_model():
    """MatMul -> Scan over axis 1 (a running sum with a decay read by name from
    the main graph) -> Relu, MatMul after."""
    body = helper.make_graph(
        [helper.make_node("Mul", ["st_in", "decay"], ["d"]),
         helper.make_node("Add", ["d", "x_t"], ["st_out"]),
         helper.make_node("Relu", ["st_out"], ["y_t"])],
        "body",
        [vi("st_in", F, [2, 8]), vi("x_t", F, [2, 8])],
        [vi("st_out", F, [2, 8]), vi("y_t", F, [2, 8])])
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["seq"]),
        helper.make_node("ReduceMean", ["seq"], ["st0"], axes=[1], keepdims=0),
        helper.make_node("MatMul", ["st0", "Wd"], ["dl"]),
        helper.make_node("Sigmoid", ["dl"], ["decay"]),
        helper.make_node("Scan", ["st0", "seq"], ["st_final", "ys"], body=body, num_scan_inputs=1,
                         scan_input_axes=[1], scan_output_axes=[1]),
        helper.make_node("Relu", ["ys"], ["r"]),
        helper.make_node("MatMul", ["r", "W2"], ["out"]),
        helper.make_node("Add", ["st_final", "dl"], ["out2"]),
    ]
    inits = [w("W1", 8, 8), w("W2", 8, 4), w("Wd", 8, 8)]
    return model(nodes, [vi("x", F, [2, 6, 8])], [vi("out", F, [2, 6, 4]), vi("out2", F, [2, 8])], inits)


def sequence_model():
    """GPU values into a sequence (SequenceConstruct, SequenceInsert), one
    taken out again (SequenceAt) and the rest concatenated, GPU work after."""
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["a"]),
        helper.make_node("Relu", ["a"], ["b"]),
        helper.make_node("SequenceConstruct", ["a", "b"], ["sq"]),
        helper.make_node("Sigmoid", ["a"], ["c"]),
        helper.make_node("SequenceInsert", ["sq", "c"], ["sq2"]),
        helper.make_node("SequenceAt", ["sq2", "one"], ["e"]),
        helper.make_node("ConcatFromSequence", ["sq2"], ["cat"], axis=1),
        helper.make_node("MatMul", ["e", "W2"], ["out"]),
        helper.make_node("Relu", ["cat"], ["out2"]),
    ]
    inits = [w("W1", 8, 8), w("W2", 8, 4), init("one", np.int64(1))]
    return model(nodes, [vi("x", F, [3, 8])], [vi("out", F, [3, 4]), vi("out2", F, [3, 24])], inits)


def cases():
    # name, model, min_gpu (nodes on the GPU at least), gpu_after (an op that must run on the GPU after the node);
    # names starting "if_const" expect the If inlined (no node on the CPU, a CUDA graph)
    return [
        ("if_const", if_const_model, 5, None),
        ("if_then", lambda: if_model(True), 5, "Add"),
        ("if_else", lambda: if_model(False), 5, "Add"),
        ("loop_state_scan", loop_model, 4, "MatMul"),
        ("loop_nested_if", loop_if_model, 3, None),
        ("scan_axis1", scan_model, 4, None),
        ("sequence_ops", sequence_model, 3, None),
    ]


def generate(out):
    os.makedirs(out, exist_ok=True)
    man = []
    for name, make, min_gpu, after in cases():
        save(make(), os.path.join(out, name + ".onnx"))
        man.append({"name": name, "min_gpu": min_gpu, "gpu_after": after})
    with open(os.path.join(out, "subgraphs.json"), "w") as f:
        json.dump(man, f, indent=1)
    print(f"{len(man)} models -> {out}")


def check_one(ogsh, out, m, device):
    path = os.path.join(out, m["name"] + ".onnx")
    script = f"run --device={device} --check=cpu --json"
    if device == "cuda":
        script = "plan --json; " + script
    env = dict(os.environ, NO_COLOR="1")
    try:
        p = subprocess.run(ogsh + [path, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    except subprocess.TimeoutExpired:
        return m, False, None, "timed out (300 s)", ""
    objs = json_objects(p.stdout)
    cmp = next((o for o in objs if "compared" in o), None)
    plan = next((o for o in objs if "nodes" in o and "arena_bytes" in o), None)
    if not cmp or not cmp.get("compared") or p.returncode:
        err = (p.stderr.strip().splitlines() or [f"exit {p.returncode}, no comparison"])[-1]
        return m, False, None, err[:300], ""
    bad = [r for r in cmp["compared"] if not r.get("pass")]
    mx = max((r.get("max_abs") or 0.0) for r in cmp["compared"])
    problems = [f"'{r.get('name')}': {r.get('why') or 'outside the tolerance'}" for r in bad]
    where = ""
    if device == "cuda":
        if not plan:
            return m, False, mx, "no plan --json result", ""
        nodes = plan["nodes"]
        subs = [n for n in nodes if n.get("op") in SUBGRAPH_OPS]
        where = (f"gpu {plan.get('gpu')} cpu {plan.get('cpu')} folded {plan.get('folded')} copies "
                 f"{plan.get('copies')}; " + ", ".join(f"{n['op']}: {n['where']}" for n in subs))
        if m["name"].startswith("if_const"):
            where += f"If inlined: {plan.get('ifs_inlined')}; CUDA graph: {plan.get('graph')}"
            if subs or plan.get("ifs_inlined") != 1 or plan.get("cpu") or not plan.get("graph"):
                problems.append("the If with a constant condition was not replaced by its branch on the GPU "
                                f"(ifs_inlined {plan.get('ifs_inlined')}, cpu {plan.get('cpu')}, graph "
                                f"{plan.get('graph')} ({plan.get('graph_why')}))")
            if plan.get("gpu", 0) < m["min_gpu"]:
                problems.append(f"{plan.get('gpu')} nodes on the GPU, fewer than {m['min_gpu']}")
            return m, not problems, mx, "; ".join(problems), where
        for n in subs:
            if n.get("where") != "cpu" or "subgraphs" not in (n.get("why") or ""):
                problems.append(f"{n['op']} n{n['id']} is '{n.get('where')}' ({n.get('why')}), not on the cpu "
                                f"for its subgraphs")
        if plan.get("gpu", 0) < m["min_gpu"]:
            problems.append(f"{plan.get('gpu')} nodes on the GPU, fewer than {m['min_gpu']}")
        if m.get("gpu_after"):
            pos = max((i for i, n in enumerate(nodes) if n.get("op") in SUBGRAPH_OPS), default=-1)
            if not any(n.get("op") == m["gpu_after"] and n.get("where") == "gpu" for n in nodes[pos + 1:]):
                problems.append(f"no {m['gpu_after']} on the GPU after the node with subgraphs")
        if plan.get("graph") or "CPU" not in (plan.get("graph_why") or ""):
            problems.append(f"CUDA graph: {plan.get('graph')} ({plan.get('graph_why')}), expected none: nodes "
                            "run on the CPU")
    return m, not problems, mx, "; ".join(problems), where


def check(ogsh_cmd, out):
    ogsh = shlex.split(ogsh_cmd)
    device = os.environ.get("OGSH_CHECK_DEVICE", "cuda")
    man = json.load(open(os.path.join(out, "subgraphs.json")))
    bad = 0
    print(f"{'model':20} {'result':6} {'max abs':>10}  plan")
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        for m, ok, mx, detail, where in ex.map(lambda mm: check_one(ogsh, out, mm, device), man):
            bad += not ok
            print(f"{m['name']:20} {'ok' if ok else 'FAIL':6} {mx if mx is not None else float('nan'):10.4g}  {where}",
                  flush=True)
            if detail:
                print(f"    {m['name']}: {detail}", flush=True)
    print(f"subgraphs: {len(man)} models, {len(man) - bad} ok, {bad} failed (device {device} against the cpu reference)")
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
