#!/usr/bin/env python3
"""CPU backend speed: ogsh `run` against onnxruntime, on the same cores.

    cpu_bench.py [--ogsh build/shell/ogsh] [--runs 11] [--models resnet50,...] [--threads N] [--first-cpu C]
                 [--mode loaded|optimized|both] [--out DIR]

Builds the models with tests/models/make_models.py (ResNet-50 and
MobileNetV2 at 1x3x224x224, BERT-base and GPT-2 at batch 1 with 128 tokens),
makes one set of inputs per model, and times, pinned with taskset to N
CPUs from CPU --first-cpu (N = --threads, default 1; first CPU default 0):
  - ogsh: one process runs `set threads N`, then `run --device=cpu
    --inputs=...` 1 + RUNS times (on the CPU also where there is a GPU); the
    figure is the in-process run time ogsh prints ("ran N nodes on cpu in X
    ms"), the
    first run a warm-up; median and min of the rest. --mode says which
    graph: `loaded` (the model as written), `optimized` (after `optimize
    --quiet`, ogsh's default level: what a user runs first, as onnxruntime
    applies its own graph optimizations, Conv+BatchNormalization folding
    among them, by default) or `both` (the default: a row for each);
  - onnxruntime: one InferenceSession with intra_op_num_threads=N and
    inter_op_num_threads=1, the same inputs, 1 warm-up then RUNS timed runs
    (perf_counter), median and min.
The outputs of both are compared (max abs error) so the timing is of a
correct run. Prints a Markdown table.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_inputs(model_path, seq):
    import onnxruntime as ort
    s = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {}
    for i in s.get_inputs():
        shp = [d if isinstance(d, int) else (1 if n == 0 else seq) for n, d in enumerate(i.shape)]
        if "int" in i.type:
            a = np.ones(shp) if "mask" in i.name else np.zeros(shp) if "type" in i.name else rng.integers(0, 1000, shp)
            feeds[i.name] = a.astype(np.int64)
        else:
            feeds[i.name] = rng.standard_normal(shp).astype(np.float32)
    return feeds


FIRST_CPU = 0


def cpus(threads):
    """The taskset CPU list of `threads` CPUs from FIRST_CPU (--first-cpu)."""
    return str(FIRST_CPU) if threads == 1 else f"{FIRST_CPU}-{FIRST_CPU + threads - 1}"


def time_ogsh(ogsh, model, inputs, outputs, runs, threads=1, optimized=False):
    cmd = "; ".join([f"set threads {threads}"] + (["optimize --quiet"] if optimized else []) +
                    [f"run --device=cpu --inputs={inputs}"] * runs +
                    [f"run --device=cpu --inputs={inputs} --save-outputs={outputs}"])
    p = subprocess.run(["taskset", "-c", cpus(threads), ogsh, model, "-c", cmd], capture_output=True, text=True,
                       check=True)
    ms = [float(x) for x in re.findall(r"ran \d+ nodes on cpu in ([0-9.]+) ms", p.stdout)]
    return ms[1:]


def time_ort(model, feeds, runs, threads=1):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    s.run(None, feeds)
    ms = []
    for _ in range(runs):
        t = time.perf_counter()
        out = s.run(None, feeds)
        ms.append((time.perf_counter() - t) * 1e3)
    return ms, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ogsh", default=os.path.join(ROOT, "build", "shell", "ogsh"))
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--models", default="resnet50,mobilenetv2,bert,gpt2")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--out", default=None)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--first-cpu", type=int, default=0,
                    help="pin to CPUs FIRST.. (default 0; another core keeps clear of CPU 0's interrupts)")
    ap.add_argument("--mode", choices=["loaded", "optimized", "both"], default="both")
    a = ap.parse_args()
    if a.runs < 1:
        ap.error("--runs must be at least 1")
    if a.threads < 1 or a.first_cpu < 0 or a.first_cpu + a.threads > (os.cpu_count() or 1):
        ap.error(f"--first-cpu + --threads must be from 1 to the machine's {os.cpu_count()} CPUs")
    global FIRST_CPU
    FIRST_CPU = a.first_cpu
    out = a.out or tempfile.mkdtemp(prefix="ogsh-cpu-bench-")
    names = a.models.split(",")
    subprocess.run([sys.executable, os.path.join(ROOT, "tests", "models", "make_models.py"), out, *names],
                   check=True, stdout=subprocess.DEVNULL)
    # ORT pinned too: re-exec the ORT part under taskset
    rows = []
    for n in names:
        model = os.path.join(out, n + ".onnx")
        feeds = make_inputs(model, a.seq)
        inp = os.path.join(out, n + "_in.npz")
        np.savez(inp, **feeds)
        modes = ["loaded", "optimized"] if a.mode == "both" else [a.mode]
        ogs = {}
        for mode in modes:
            outs = os.path.join(out, f"{n}_ogsh_{mode}.npz")
            ogs[mode] = (time_ogsh(a.ogsh, model, inp, outs, a.runs, a.threads, mode == "optimized"), outs)
        ort_py = (f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); "
                  f"import cpu_bench as b, numpy as np, json; f=dict(np.load({inp!r})); "
                  f"ms, out = b.time_ort({model!r}, f, {a.runs}, {a.threads}); np.savez({os.path.join(out, n + '_ort.npz')!r}, *out); "
                  f"print(json.dumps(ms))")
        p = subprocess.run(["taskset", "-c", cpus(a.threads), sys.executable, "-c", ort_py], capture_output=True, text=True,
                           check=True)
        import json
        om = json.loads(p.stdout.strip().splitlines()[-1])
        ref = np.load(os.path.join(out, n + "_ort.npz"))
        for mode in modes:
            og, outs = ogs[mode]
            mine = np.load(outs)
            err = max(float(np.max(np.abs(mine[k] - ref[f"arr_{i}"]))) for i, k in enumerate(mine.files))
            rows.append((n, mode, statistics.median(og), min(og), statistics.median(om), min(om), err))
    print(f"{a.threads} thread{'s' if a.threads > 1 else ''}, CPUs {cpus(a.threads)}\n")
    print(f"| model | ogsh graph | ogsh median ms | ogsh min ms | onnxruntime median ms | onnxruntime min ms | ogsh/ort | max abs diff |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for n, mode, a1, a2, b1, b2, e in rows:
        print(f"| {n} | {mode} | {a1:.1f} | {a2:.1f} | {b1:.1f} | {b2:.1f} | {a1 / b1:.2f} | {e:.2e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
