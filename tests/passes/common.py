"""What the pass test scripts (test_cleanup.py, test_convert_float.py,
test_quantize.py, test_quantized_cleanup.py) share: the check counter, running
ogsh, reading its --json output, building models with onnx.helper, running a
model in onnxruntime, and the main loop with its arguments.

meson runs the scripts as `python tests/passes/X.py`, so each one puts its
own folder first on sys.path and imports this module as `common`. The state
the tests read (OGSH, TMP, FILTER, ARGS) lives here: `common.TMP` and so on.
"""
import json
import os
import subprocess
import sys
import tempfile

import onnx
from onnx import helper as h

try:
    import onnxruntime as ort
except ImportError:  # pragma: no cover
    ort = None

OGSH = None     # the ogsh binary (an absolute path)
ARGS = []       # the script's arguments after OGSH (test_quantize.py: the unit test binary)
TMP = None      # the temporary folder the cases write in
FILTER = None   # -k SUBSTRING: run only the cases whose name contains it
FAILED = 0
PASSED = 0


def check(label, ok, detail=""):
    """Counts and prints one check; returns ok."""
    global FAILED, PASSED
    if ok:
        PASSED += 1
        print(f"ok    {label}")
    else:
        FAILED += 1
        print(f"FAIL  {label}" + (f": {detail}" if detail else ""))
    sys.stdout.flush()
    return ok


def ogsh(model, script, timeout=600, env=None):
    """Runs `ogsh [MODEL] -c SCRIPT` (no colours; env: more variables):
    (exit status, stdout, stderr)."""
    args = [OGSH] + ([model] if model else []) + ["-c", script]
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, NO_COLOR="1", **(env or {})))
    return p.returncode, p.stdout, p.stderr


def json_docs(text):
    """The JSON documents at the start of text, one after the other."""
    dec = json.JSONDecoder()
    docs, i = [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text) or text[i] not in "[{":
            return docs
        try:
            d, i = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            return docs
        docs.append(d)


def json_docs_lines(text):
    """The JSON documents in text (lines starting with { or [ begin one), for
    outputs that mix them with lines of text."""
    dec = json.JSONDecoder()
    docs, i = [], 0
    while i < len(text):
        if text[i] in "[{" and (i == 0 or text[i - 1] == "\n"):
            try:
                d, i = dec.raw_decode(text, i)
                docs.append(d)
                continue
            except json.JSONDecodeError:
                pass
        i += 1
    return docs


def model(nodes, inputs, outputs, inits=(), opset=17, *, ir=8, value_info=()):
    """A checked model of one graph in the default domain."""
    g = h.make_graph(nodes, "g", list(inputs), list(outputs), initializer=list(inits), value_info=list(value_info))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = ir
    onnx.checker.check_model(m)
    return m


def vi(name, dtype, shape):
    return h.make_tensor_value_info(name, dtype, shape)


def ort_outputs(path, feeds):
    """onnxruntime's outputs of the model at path, by name, on the CPU."""
    so = ort.SessionOptions()
    so.log_severity_level = 3
    # no graph optimizations: they may drop a float32 -> float16 -> float32
    # pair of Casts, and QDQ must run as the float simulation the spec defines
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    return dict(zip(names, s.run(None, feeds)))


def main(doc, prefix, tests, *, nargs=1, missing=None):
    """Reads `OGSH [MORE...] [-k SUBSTRING]` (nargs paths in all), runs the
    tests in a temporary folder (an exception fails its test, the others
    still run) and prints the summary. Returns the exit status: 2 on bad
    arguments, 77 (skipped) when missing says what the tests need and lack."""
    global OGSH, ARGS, TMP, FILTER
    args = sys.argv[1:]
    if "-k" in args:
        i = args.index("-k")
        FILTER = args[i + 1] if i + 1 < len(args) else ""
        del args[i:i + 2]
    if len(args) < nargs:
        print(doc)
        return 2
    if missing:
        print(f"skipped: {missing}")
        return 77
    OGSH = os.path.abspath(args[0])
    ARGS = args[1:]
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        TMP = tmp
        for t in tests:
            try:
                t()
            except Exception as e:  # noqa: BLE001
                check(f"{t.__name__}: no exception", False, repr(e)[:500])
    print(f"{PASSED} passed, {FAILED} failed")
    return 1 if FAILED else 0
