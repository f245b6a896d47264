#!/usr/bin/env python3
"""Numeric equivalence of the whole pass pipeline: optimize changes no numbers.

    equivalence.py OGSH [--quick] [--models DIR] [--jobs N] [--ort-every K]
                   [--only SUBSTR] [--optimize CMD] [--keep DIR] [--reference]

For every model of the ONNX backend test data inside this Python's onnx
package (node/*, simple/*, pytorch-converted/*, pytorch-operator/* with their
test_data_set_0 inputs; light/*.onnx with the inputs ONNX's runner makes:
arange(n)/n as float32, unknown dims 1) and for the generated models of
tests/models/make_models.py (resnet50, mobilenetv2, bert, gpt2: seeded random
inputs, BERT and GPT-2 with 16 tokens, attention mask ones, token types
zeros), runs ogsh once with the script

    info --json; run --inputs=IN --save-outputs=before.npz --json
    optimize --level=all; info --json; ops --json; save optimized.onnx
    run --inputs=IN --expect=before.npz --rtol=1e-4 --atol=1e-5
        --save-outputs=after.npz --json

and checks that the optimized outputs agree with the original ones: float32
and float64 within |a-b| <= 1e-5 + 1e-4*|b|, float16 1e-3/1e-3, bfloat16
1e-2/1e-2, integers, booleans and strings exactly, NaN where NaN was. An
element outside that rule still passes when its error is below 8 ulps of the
output's largest magnitude (1e-6 of it for float32): a small element made by
cancelling large terms (logits of a random-weight ResNet reach 1600) carries
that much rounding in any implementation, onnxruntime included; each such
pass prints a `note` line with the numbers. Outputs .npz cannot hold
(float8, int4...) are instead checked against the test data's expected
outputs, before and after, at ogsh's default tolerances.

For the generated models and a sample of the backend models (every K-th of a
suite, and every model whose node count changed) it also checks the saved
model with onnx.checker.check_model(full_check=True) (when the original
passes it) and runs the original and the saved model in onnxruntime (CPU,
graph optimizations off) on the same inputs, with the same tolerances.

Models ogsh cannot run before optimizing (ops without a kernel, as listed in
tests/conformance/REPORT.md) are skipped and counted; a skipped model that
REPORT.md does not list gets a note. Prints one line per failure (model,
what differed, max error) and a summary line per data set (models, how many
optimize ran on and changed, node count before -> after over the data set,
failures, skips); exits 1 on any failure, 77 (skipped) when this ogsh has no
`optimize` command.

  --quick        every 10th node test (sorted by name), every other data set whole
  --models DIR   where the generated models are (made there with
                 make_models.py when missing; default: a temporary folder)
  --jobs N       ogsh processes at a time (default 2)
  --ort-every K  onnxruntime check for every K-th backend model (default 5;
                 0: only models whose node count changed)
  --only SUBSTR  only models whose data-set/name contains SUBSTR
  --optimize CMD the optimizing command (default 'optimize --level=all')
  --keep DIR     keep every model's work files (scripts, outputs, saved
                 model) in DIR/<data set>/<model>
  --reference    also print the node counts onnxruntime's offline optimizer
                 (ORT_ENABLE_EXTENDED) reaches on the generated models

Node counts are of the main graph (info's "nodes"). EQUIV_VERBOSE=1 lists
every skipped model with its reason.
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MAKE_MODELS = os.path.join(ROOT, "tests", "models", "make_models.py")
BACKEND_SUITES = ["node", "simple", "pytorch-converted", "pytorch-operator", "light"]
GENERATED = ["resnet50", "mobilenetv2", "bert", "gpt2"]
SEED = 20261121
TOKENS = 16

# (rtol, atol) per ONNX element type; None: compared exactly
TOL = {
    onnx.TensorProto.FLOAT: (1e-4, 1e-5),
    onnx.TensorProto.DOUBLE: (1e-4, 1e-5),
    onnx.TensorProto.COMPLEX64: (1e-4, 1e-5),
    onnx.TensorProto.COMPLEX128: (1e-4, 1e-5),
    onnx.TensorProto.FLOAT16: (1e-3, 1e-3),
    onnx.TensorProto.BFLOAT16: (1e-2, 1e-2),
}
# errors below this many ulps of an output's largest magnitude are rounding
ULPS = 8
STRICT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.COMPLEX64,
                onnx.TensorProto.COMPLEX128}


def tol_for(a):
    """(rtol, atol) for a numpy array, None for exact."""
    if a.dtype.kind == "V" and a.dtype.itemsize == 2:   # bfloat16 as ogsh writes it
        return (1e-2, 1e-2)
    if a.dtype == np.float16:
        return (1e-3, 1e-3)
    if a.dtype.kind in "fc":
        return (1e-4, 1e-5)
    return None


def as_numbers(a):
    """bfloat16 (2-byte void) as float32; everything else unchanged."""
    if a.dtype.kind == "V" and a.dtype.itemsize == 2:
        return (a.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return a


def compare(actual, expected, notes=None):
    """None when actual matches expected, else a short 'why' with the max
    error. A pass that needs the ULPS floor adds a line to notes."""
    if actual.shape != expected.shape:
        return f"shape {list(actual.shape)}, expected {list(expected.shape)}"
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype}, expected {expected.dtype}"
    tol = tol_for(expected)
    a, b = as_numbers(actual), as_numbers(expected)
    if tol is None:
        if a.dtype.kind in "SUO":
            bad = int(np.sum(a != b))
            return f"{bad} of {b.size} elements differ" if bad else None
        if np.array_equal(a, b):
            return None
        diff = np.abs(a.astype(np.float64) - b.astype(np.float64)) if a.dtype.kind != "b" else (a != b)
        bad = int(np.sum(a != b))
        return f"{bad} of {b.size} elements differ (exact type), max abs err {float(np.max(diff)):.3g}"
    rtol, atol = tol
    a64 = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
    b64 = b.astype(np.complex128 if b.dtype.kind == "c" else np.float64)
    nan_a, nan_b = np.isnan(a64), np.isnan(b64)
    if np.any(nan_a != nan_b):
        return f"{int(np.sum(nan_a != nan_b))} of {b.size} elements NaN on one side only"
    same = (a64 == b64) | (nan_a & nan_b)     # equal infinities included
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.where(same, 0.0, np.abs(a64 - b64))
        ok = same | (err <= atol + rtol * np.abs(b64))
    if np.all(ok):
        return None
    finite = np.abs(b64[np.isfinite(b64)])
    scale = float(finite.max()) if finite.size else 0.0
    # An error below ULPS units in the last place of the output's largest
    # magnitude is rounding (a sum of large terms that cancels to a small
    # element), not a wrong rewrite: with float32 that is 1e-6 of the scale.
    eps = 2.0 ** -7 if a.dtype.kind == "V" else float(np.finfo(a.real.dtype).eps)
    floor = ULPS * eps * scale
    with np.errstate(invalid="ignore"):
        ok2 = ok | (err <= floor)
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.where(same, 0.0, err / np.abs(b64))
    i = int(np.argmax(np.where(np.isnan(err), np.inf, err)))
    detail = (f"{int(np.sum(~ok))} of {b.size} elements outside |a-b| <= {atol:g} + {rtol:g}*|b|, "
              f"max abs err {float(np.nanmax(err)):.3g}, max rel err {float(np.nanmax(rel)):.3g} "
              f"(at {i}: {a.flat[i]!r}, expected {b.flat[i]!r}; largest |expected| {scale:.4g})")
    if np.all(ok2):
        if notes is not None:
            notes.append(f"{detail}: within {ULPS} ulps of the largest |expected| ({floor:.3g}), counted as rounding")
        return None
    return detail


def q(path):
    """A path quoted for an ogsh script."""
    if "'" in path:
        raise ValueError(f"path with a quote: {path}")
    return "'" + path + "'"


def json_docs(text):
    """Every JSON document that starts a line of ogsh's output, in order."""
    dec = json.JSONDecoder()
    docs, i, n = [], 0, len(text)
    while i < n:
        if text[i] in "{[" and (i == 0 or text[i - 1] == "\n"):
            try:
                doc, end = dec.raw_decode(text, i)
                docs.append(doc)
                i = end
                continue
            except ValueError:
                pass
        j = text.find("\n", i)
        if j < 0:
            break
        i = j + 1
    return docs


def short(msg, n=400):
    """The first line of an exception's message, its middle cut when long
    (onnxruntime puts the reason at the end, after a source path)."""
    line = str(msg).strip().splitlines()[0] if str(msg).strip() else type(msg).__name__
    return line if len(line) <= n else line[:n // 3] + " ... " + line[-(2 * n) // 3:]


def first_error(stderr):
    for line in stderr.splitlines():
        if "error:" in line:
            return line.split("error:", 1)[1].strip()
    lines = [l for l in stderr.splitlines() if l.strip()]
    return lines[-1].strip() if lines else ""


# ---------------------------------------------------------------------------
# the cases
# ---------------------------------------------------------------------------

class Case:
    def __init__(self, suite, name, model, inputs, work, ort=False, timeout=180):
        self.suite, self.name, self.model, self.inputs = suite, name, model, inputs
        self.work, self.ort, self.timeout = work, ort, timeout
        # results
        self.status = None        # "ok", "skipped", "failed"
        self.why = []             # failure lines, or the reason for a skip
        self.nodes_before = self.nodes_after = None
        self.ops_after = None
        self.ort_checked = False
        self.notes = []           # comparisons that passed only within ULPS of the scale
        self.secs = 0.0

    @property
    def label(self):
        return f"{self.suite}/{self.name}"


def backend_data_dir():
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")


def graph_inputs(model):
    """The graph inputs that are not initializers, in order."""
    inits = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def light_inputs(model):
    """What ONNX's backend runner feeds the light models."""
    feeds = {}
    for x in graph_inputs(model):
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in x.type.tensor_type.shape.dim)
        n = int(np.prod(shape))
        feeds[x.name] = (np.arange(n).reshape(shape) / n).astype(np.float32)
    return feeds


def generated_inputs(name, model):
    rng = np.random.default_rng(SEED)
    feeds = {}
    vocab = {"bert": 30522, "gpt2": 50257}.get(name)
    for x in graph_inputs(model):
        if x.name == "input_ids":
            feeds[x.name] = rng.integers(0, vocab, size=(1, TOKENS), dtype=np.int64)
        elif x.name == "attention_mask":
            feeds[x.name] = np.ones((1, TOKENS), np.int64)
        elif x.name == "token_type_ids":
            feeds[x.name] = np.zeros((1, TOKENS), np.int64)
        else:
            shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in x.type.tensor_type.shape.dim)
            feeds[x.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def output_types(model):
    return [o.type.tensor_type.elem_type if o.type.HasField("tensor_type") else 0 for o in model.graph.output]


def backend_cases(args, tmp):
    data = backend_data_dir()
    cases = []
    for suite in BACKEND_SUITES:
        d = os.path.join(data, suite)
        if not os.path.isdir(d):
            raise SystemExit(f"the onnx package has no backend test data at {d}")
        if suite == "light":
            names = sorted(f[:-5] for f in os.listdir(d) if f.endswith(".onnx"))
        else:
            names = sorted(f for f in os.listdir(d) if os.path.isfile(os.path.join(d, f, "model.onnx")))
        if args.quick and suite == "node":
            names = names[::10]
        k = 0
        for name in names:
            if args.only and args.only not in f"{suite}/{name}":
                continue
            work = os.path.join(tmp, suite, name)
            if suite == "light":
                model, inputs = os.path.join(d, name + ".onnx"), os.path.join(work, "inputs.npz")
            else:
                model = os.path.join(d, name, "model.onnx")
                inputs = os.path.join(d, name, "test_data_set_0")
                if not os.path.isdir(inputs):
                    continue
            ort = args.ort_every > 0 and k % args.ort_every == 0
            k += 1
            cases.append(Case(suite, name, model, inputs, work, ort=ort,
                              timeout=600 if suite == "light" else 180))
    return cases


def generated_cases(args, tmp):
    names = [n for n in GENERATED if not args.only or args.only in f"generated/{n}"]
    if not names:
        return []
    mdir = args.models or os.path.join(tmp, "models")
    os.makedirs(mdir, exist_ok=True)
    missing = [n for n in names if not os.path.isfile(os.path.join(mdir, n + ".onnx"))]
    if missing:
        t0 = time.time()
        p = subprocess.run([sys.executable, MAKE_MODELS, mdir, *missing], capture_output=True, text=True)
        if p.returncode:
            raise SystemExit(f"make_models.py failed:\n{p.stdout}{p.stderr}")
        print(f"made {', '.join(missing)} in {mdir} in {time.time() - t0:.0f} s", flush=True)
    return [Case("generated", n, os.path.join(mdir, n + ".onnx"), os.path.join(tmp, "generated", n, "inputs.npz"),
                 os.path.join(tmp, "generated", n), ort=True, timeout=600) for n in names]


# ---------------------------------------------------------------------------
# one model
# ---------------------------------------------------------------------------

def load_feeds(case, model):
    """The inputs as numpy arrays by graph input name (for onnxruntime), or
    None with a reason when they are not all tensors."""
    if case.inputs.endswith(".npz"):
        with np.load(case.inputs) as z:
            return {k: z[k] for k in z.files}, None
    feeds = {}
    ins = graph_inputs(model)
    i = 0
    while os.path.exists(os.path.join(case.inputs, f"input_{i}.pb")):
        with open(os.path.join(case.inputs, f"input_{i}.pb"), "rb") as f:
            raw = f.read()
        t = onnx.TensorProto()
        try:
            t.ParseFromString(raw)
        except Exception:
            return None, "an input is not a tensor"
        if i >= len(ins) or not ins[i].type.HasField("tensor_type"):
            return None, "an input is not a tensor"
        name = ins[i].name
        feeds[name] = numpy_helper.to_array(t)
        i += 1
    return feeds, None


def prepare_inputs(case):
    """Writes inputs.npz for the light and generated models."""
    if case.inputs.endswith(".npz") and not os.path.exists(case.inputs):
        model = onnx.load(case.model, load_external_data=False)
        feeds = light_inputs(model) if case.suite == "light" else generated_inputs(case.name, model)
        np.savez(case.inputs, **feeds)


def ogsh_script(args, case, strict, mode):
    """The ogsh script for one model. mode "npz": the optimized outputs are
    checked against the original ones (saved as .npz); mode "reference": for
    outputs .npz cannot hold (float8, int4...), both runs are checked against
    the test data's expected outputs at ogsh's default tolerances."""
    w = case.work
    has_inputs = case.inputs.endswith(".npz") or any(f.startswith("input_") for f in os.listdir(case.inputs))
    inputs = f" --inputs={q(case.inputs)}" if has_inputs else ""
    tols = " --rtol=1e-4 --atol=1e-5" if strict else ""
    if mode == "npz":
        first = f"run{inputs} --save-outputs={q(os.path.join(w, 'before.npz'))} --json"
        last = (f"run{inputs} --expect={q(os.path.join(w, 'before.npz'))}{tols} "
                f"--save-outputs={q(os.path.join(w, 'after.npz'))} --json")
    else:
        first = last = f"run{inputs} --expect={q(case.inputs)} --json"
    return "\n".join(["info --json", first, args.optimize, "info --json", "ops --json",
                      f"save {q(os.path.join(w, 'optimized.onnx'))}", last]) + "\n"


def ogsh_once(args, case, script):
    path = os.path.join(case.work, "script.ogs")
    with open(path, "w") as f:
        f.write(script)
    try:
        p = subprocess.run([args.ogsh, case.model, "-f", path], capture_output=True, text=True,
                           timeout=case.timeout, errors="replace")
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        def s(x):
            return x.decode(errors="replace") if isinstance(x, bytes) else (x or "")
        rc, out, err = "timeout", s(e.stdout), s(e.stderr)
    with open(os.path.join(case.work, "stdout.txt"), "w") as f:
        f.write(out)
    with open(os.path.join(case.work, "stderr.txt"), "w") as f:
        f.write(err)
    return rc, out, err


def failed_outputs(cmp_doc):
    """'name: max abs err E, max rel err R (worst A, expected B)' for each
    output a `run --expect --json` document says does not match."""
    out = []
    for c in cmp_doc.get("compared", []):
        if c.get("pass"):
            continue
        if c.get("why") or c.get("error"):
            out.append(f"output '{c.get('name')}': {c.get('why') or c.get('error')}")
            continue
        out.append(f"output '{c.get('name')}': {c.get('bad')} of {c.get('elements')} elements differ, "
                   f"max abs err {c.get('max_abs')}, max rel err {c.get('max_rel')} "
                   f"(worst {c.get('worst_actual')}, expected {c.get('worst_expected')}; "
                   f"rtol {c.get('rtol')}, atol {c.get('atol')})")
    return out


def run_ogsh(args, case):
    os.makedirs(case.work, exist_ok=True)
    prepare_inputs(case)
    strict = True
    if case.suite != "generated":
        meta = onnx.load(case.model, load_external_data=False)
        strict = all(t in STRICT_TYPES or t not in TOL for t in output_types(meta))
    before = os.path.join(case.work, "before.npz")
    after = os.path.join(case.work, "after.npz")
    saved = os.path.join(case.work, "optimized.onnx")
    mode = "npz"
    t0 = time.time()
    rc, out, err = ogsh_once(args, case, ogsh_script(args, case, strict, mode))
    if (not os.path.exists(before) and "numpy has no" in err and not case.inputs.endswith(".npz")
            and os.path.exists(os.path.join(case.inputs, "output_0.pb"))):
        mode = "reference"
        rc, out, err = ogsh_once(args, case, ogsh_script(args, case, strict, mode))
    case.secs = time.time() - t0
    docs = json_docs(out)
    infos = [d for d in docs if isinstance(d, dict) and "ir_version" in d]
    runs = [d for d in docs if isinstance(d, dict) and (("backend" in d and "outputs" in d) or "compared" in d)]
    opss = [d for d in docs if isinstance(d, list)]
    crashed = rc == "timeout" or (isinstance(rc, int) and rc < 0)
    how = "timed out" if rc == "timeout" else (f"died of signal {-rc}" if crashed else "")
    if infos:
        case.nodes_before = infos[0].get("nodes")
    # 1. the original model must run (else: skipped, ogsh cannot run it)
    if mode == "npz":
        ran = bool(runs) and os.path.exists(before)
    else:
        ran = bool(runs) and not runs[0].get("failed") and not runs[0].get("missing")
    if not ran:
        case.status = "skipped"
        case.why = [how or first_error(err) or "the original model did not run"]
        if mode == "reference":
            case.why[0] += " (outputs .npz cannot hold, checked against the test data)"
        return
    # 2. optimize must succeed
    if len(infos) < 2:
        case.status = "failed"
        case.why = [f"{args.optimize.split()[0]} {how or 'failed'}: {first_error(err)}"]
        return
    case.nodes_after = infos[1].get("nodes")
    if opss:
        case.ops_after = {(o.get("domain"), o.get("op")): o.get("count") for o in opss[-1]}
    fails = []
    if not os.path.exists(saved):
        fails.append(f"save {how or 'failed'}: {first_error(err)}")
    # 3. the optimized model must run and agree with the original
    if mode == "npz":
        if not os.path.exists(after):
            fails.append(f"the optimized model did not run: {how or first_error(err)}")
        else:
            fails += compare_npz(after, before, "ogsh", case.notes)
            if len(runs) > 1 and runs[-1].get("failed") and not fails and not case.notes:
                fails.append("ogsh's run --expect fails where this script's check passes: " +
                             "; ".join(failed_outputs(runs[-1])))
    else:
        if len(runs) < 2:
            fails.append(f"the optimized model did not run: {how or first_error(err)}")
        elif runs[-1].get("failed") or runs[-1].get("missing"):
            fails += [f"ogsh (against the test data): {w}" for w in failed_outputs(runs[-1])] or \
                [f"ogsh (against the test data): {first_error(err)}"]
    if crashed and not fails:
        fails.append(f"ogsh {how}")
    # 4. the saved model: onnx.checker and onnxruntime
    if (case.ort or case.nodes_after != case.nodes_before) and os.path.exists(saved):
        fails += check_saved(case, saved)
    case.status = "failed" if fails else "ok"
    case.why = fails


def compare_npz(actual_path, expected_path, who, notes):
    fails = []
    try:
        za, zb = np.load(actual_path), np.load(expected_path)
    except Exception as e:   # noqa: BLE001 (a file numpy cannot read is a finding)
        return [f"cannot read {who}'s outputs: {e}"]
    with za, zb:
        for k in zb.files:
            if k not in za.files:
                fails.append(f"{who}: output '{k}' is missing after optimizing")
                continue
            n0 = len(notes)
            why = compare(za[k], zb[k], notes)
            notes[n0:] = [f"{who}: output '{k}': {x}" for x in notes[n0:]]
            if why:
                fails.append(f"{who}: output '{k}': {why}")
    return fails


def ort_run(path, feeds):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 4
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    want = {i.name for i in sess.get_inputs()}
    outs = sess.run(None, {k: v for k, v in feeds.items() if k in want})
    return dict(zip(names, outs))


def check_saved(case, saved):
    """onnx.checker and onnxruntime on the saved model; failure lines."""
    fails = []
    try:
        onnx.checker.check_model(case.model, full_check=True)
        original_ok = True
    except Exception:   # noqa: BLE001
        original_ok = False
    try:
        onnx.checker.check_model(saved, full_check=True)
    except Exception as e:   # noqa: BLE001
        if original_ok:
            fails.append(f"onnx.checker rejects the saved model: {short(e)}")
    model = onnx.load(case.model, load_external_data=False)
    feeds, why = load_feeds(case, model)
    if feeds is None:
        return fails
    try:
        ref = ort_run(case.model, feeds)
    except Exception:   # noqa: BLE001 (onnxruntime cannot run the original: nothing to compare)
        return fails
    case.ort_checked = True
    try:
        got = ort_run(saved, feeds)
    except Exception as e:   # noqa: BLE001
        fails.append(f"onnxruntime cannot run the saved model: {short(e)}")
        return fails
    for k, v in ref.items():
        if k not in got:
            fails.append(f"onnxruntime: output '{k}' is missing from the saved model")
            continue
        if not isinstance(v, np.ndarray) or not isinstance(got[k], np.ndarray):
            continue
        n0 = len(case.notes)
        w = compare(got[k], v, case.notes)
        case.notes[n0:] = [f"onnxruntime: output '{k}': {x}" for x in case.notes[n0:]]
        if w:
            fails.append(f"onnxruntime: output '{k}': {w}")
    return fails


def conformance_listed():
    """The test names tests/conformance/REPORT.md lists as not passing."""
    names = set()
    try:
        with open(os.path.join(ROOT, "tests", "conformance", "REPORT.md")) as f:
            for line in f:
                cells = [c.strip() for c in line.split("|")]
                if len(cells) > 2 and cells[1].startswith("test_"):
                    names.add(cells[1])
    except OSError:
        pass
    return names


# ---------------------------------------------------------------------------
# reference optimizers (--reference)
# ---------------------------------------------------------------------------

def ort_offline_counts(path, tmp):
    import onnxruntime as ort
    out = os.path.join(tmp, os.path.basename(path) + ".ort-extended.onnx")
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = out
    so.log_severity_level = 4
    ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    m = onnx.load(out, load_external_data=False)
    n = len(m.graph.node)
    for f in os.listdir(tmp):
        if f.startswith(os.path.basename(out)):
            os.remove(os.path.join(tmp, f))
    return n


# ---------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], usage=__doc__.split("\n\n")[1].strip())
    ap.add_argument("ogsh")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--models")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--ort-every", type=int, default=5)
    ap.add_argument("--only")
    ap.add_argument("--optimize", default="optimize --level=all")
    ap.add_argument("--keep")
    ap.add_argument("--reference", action="store_true")
    args = ap.parse_args()
    args.ogsh = os.path.abspath(args.ogsh)
    verb = args.optimize.split()[0]
    p = subprocess.run([args.ogsh, "-c", f"help {verb}"], capture_output=True, text=True)
    if p.returncode:
        print(f"SKIP: this ogsh has no '{verb}' command yet ({first_error(p.stderr)})")
        return 77
    tmp_obj = None
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        tmp = os.path.abspath(args.keep)
    else:
        tmp_obj = tempfile.TemporaryDirectory(prefix="ogsh-equiv-")
        tmp = tmp_obj.name
    try:
        return run_all(args, tmp)
    finally:
        if tmp_obj:
            tmp_obj.cleanup()


def run_all(args, tmp):
    t0 = time.time()
    cases = backend_cases(args, tmp) + generated_cases(args, tmp)
    # the big models first, so they do not end the run alone
    order = sorted(cases, key=lambda c: (c.suite != "generated", c.suite != "light"))

    def work(case):
        try:
            run_ogsh(args, case)
        except Exception as e:   # noqa: BLE001 (a harness error is a failure of that model, not of the run)
            case.status = "failed"
            case.why = [f"harness error: {type(e).__name__}: {e}"]
        if not args.keep and case.status != "failed":
            shutil.rmtree(case.work, ignore_errors=True)
        elif not args.keep and case.suite == "generated":
            for f in ("optimized.onnx",):   # too big to leave behind
                try:
                    os.remove(os.path.join(case.work, f))
                except OSError:
                    pass
        return case

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
        for case in ex.map(work, order):
            for w in case.notes:
                print(f"note {case.label}: {w}", flush=True)
            if case.status == "failed":
                for w in case.why:
                    print(f"FAIL {case.label}: {w}", flush=True)

    bad = 0
    skipped_why = {}
    for suite in BACKEND_SUITES + ["generated"]:
        cs = [c for c in cases if c.suite == suite]
        if not cs:
            continue
        ran = [c for c in cs if c.status != "skipped"]
        failed = [c for c in cs if c.status == "failed"]
        counted = [c for c in ran if c.nodes_before is not None and c.nodes_after is not None]
        nb = sum(c.nodes_before for c in counted)
        na = sum(c.nodes_after for c in counted)
        changed = sum(1 for c in counted if c.nodes_after != c.nodes_before)
        skipped = [c for c in cs if c.status == "skipped"]
        for c in skipped:
            skipped_why.setdefault(suite, []).append(c)
        print(f"{suite:18} {len(cs):5} models, {len(counted):5} optimized ({changed} changed), "
              f"nodes {nb} -> {na}, {sum(1 for c in cs if c.ort_checked)} checked in onnxruntime, "
              f"{len(failed)} failed, {len(skipped)} skipped (ogsh cannot run them)", flush=True)
        bad += len(failed)
    for c in cases:
        if c.suite == "generated" and c.nodes_before is not None:
            print(f"  {c.name:12} nodes {c.nodes_before} -> {c.nodes_after} ({c.secs:.1f} s)")
    listed = conformance_listed()
    unlisted = [c for c in cases if c.status == "skipped" and c.suite != "generated" and c.name not in listed]
    for c in unlisted:
        print(f"note {c.label}: skipped ({c.why[0] if c.why else ''}) but tests/conformance/REPORT.md "
              f"does not list it among the tests that do not pass")
    if os.environ.get("EQUIV_VERBOSE"):
        for suite, cs in skipped_why.items():
            for c in cs:
                print(f"  skipped {c.label}: {c.why[0] if c.why else ''}")
    if args.reference:
        for c in cases:
            if c.suite != "generated":
                continue
            try:
                n = ort_offline_counts(c.model, tmp)
                print(f"  {c.name:12} onnxruntime ORT_ENABLE_EXTENDED: {n} nodes")
            except Exception as e:   # noqa: BLE001
                print(f"  {c.name:12} onnxruntime ORT_ENABLE_EXTENDED failed: {e}")
    print(f"{'all':18} {len(cases):5} models, {bad} failed, {time.time() - t0:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
