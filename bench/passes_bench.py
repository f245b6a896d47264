#!/usr/bin/env python3
"""How long `optimize` spends in the passes themselves.

    passes_bench.py [--ogsh build/shell/ogsh] [--runs 5] [--dir bench/out]

Models: the 650 MB GPT-style model of make_gpt.py and BERT-style chains of
make_chain.py with 50,000 and 200,000 nodes (made on the first run). For
each, `ogsh MODEL -c 'set timer on; optimize --level=all --quiet'` runs RUNS
times; the figure is the "passes: X ms" line ogsh prints with the timer on:
the time inside pass_apply for every pass of every round (each pass on a
copy of the stage, then checked with ir_model_verify), without loading,
shape inference for the stage summaries, or printing. Median and min of the
runs; the node counts before and after come from the same runs.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def ensure(path, cmd):
    if not os.path.exists(path):
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ogsh", default=os.path.join(ROOT, "build", "shell", "ogsh"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dir", default=os.path.join(HERE, "out"))
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    py = sys.executable
    gpt = os.path.join(a.dir, "gpt.onnx")
    ensure(gpt, [py, os.path.join(HERE, "make_gpt.py"), "--out", gpt])
    models = [("gpt (650 MB)", gpt)]
    for n in (50000, 200000):
        p = os.path.join(a.dir, f"chain{n}.onnx")
        ensure(p, [py, os.path.join(HERE, "make_chain.py"), "--out", p, "--nodes", str(n)])
        models.append((f"chain {n:,} nodes", p))
    print("| model | nodes before -> after | passes that changed it | passes median ms | min ms |")
    print("|---|---|---:|---:|---:|")
    for name, path in models:
        ms, line = [], ""
        for _ in range(a.runs):
            p = subprocess.run([a.ogsh, path, "-c", "set timer on; optimize --level=all --quiet"],
                               capture_output=True, text=True, check=True)
            m = re.search(r"passes: ([0-9.]+) ms", p.stderr)
            ms.append(float(m.group(1)))
            line = p.stdout.strip().splitlines()[-1]
        m = re.search(r"(\d+) pass(?:es)? changed .*: (\d+) -> (\d+) nodes", line)
        changed, before, after = (m.group(1), m.group(2), m.group(3)) if m else ("0", "?", "?")
        print(f"| {name} | {before} -> {after} | {changed} | {statistics.median(ms):.1f} | {min(ms):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
