#!/usr/bin/env python3
"""Round trip of every model of the ONNX backend test data.

    roundtrip.py ROUNDTRIP_BIN OGSH_BIN

For each model (node, simple, pytorch-converted, pytorch-operator, light),
the C tool `roundtrip` loads it, checks ir_verify, clones it, saves it
(once embedded, once with external data), reloads both and compares the IR
with the original (names, attributes, types, tensor bytes). This script
then checks with the onnx package that
  - every saved file passes onnx.checker.check_model,
  - the embedded save parses to a ModelProto equal to the original,
  - the external-data save, with its data loaded, holds the same tensors,
and reports how many saves are byte-identical to the original file.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import checker, numpy_helper


def data_dir():
    d = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    if not os.path.isdir(os.path.join(d, "node")):
        sys.exit(f"no ONNX backend test data under {d}: install onnx==1.22.0 in the test venv")
    return d


def models(d):
    out = []
    for sub in ("node", "simple", "pytorch-converted", "pytorch-operator", "light"):
        for root, _, files in os.walk(os.path.join(d, sub)):
            out += [os.path.join(root, f) for f in files if f.endswith(".onnx")]
    return sorted(out)


def all_tensors(g):
    """Initializers and attribute tensors of a graph and its subgraphs, by name/path."""
    out = {}

    def walk(g, prefix):
        for t in g.initializer:
            out[prefix + "init:" + t.name] = t
        for i, n in enumerate(g.node):
            for a in n.attribute:
                if a.HasField("t"):
                    out[f"{prefix}node{i}:{a.name}"] = a.t
                if a.HasField("g"):
                    walk(a.g, f"{prefix}node{i}:{a.name}/")
                for k, sg in enumerate(a.graphs):
                    walk(sg, f"{prefix}node{i}:{a.name}[{k}]/")
    walk(g, "")
    return out


def main():
    rt_bin, ogsh = sys.argv[1], sys.argv[2]
    ms = models(data_dir())
    print(f"{len(ms)} models")
    failures = []
    with tempfile.TemporaryDirectory() as out:
        results = []
        for i in range(0, len(ms), 200):
            batch = ms[i:i + 200]
            p = subprocess.run([rt_bin, out] + batch, capture_output=True, text=True)
            if p.returncode not in (0, 1) or p.stderr:
                failures.append(f"roundtrip tool crashed or complained (exit {p.returncode}): {p.stderr[-2000:]}")
            results += p.stdout.splitlines()
        oks = []
        for line in results:
            if line.startswith("ok "):
                _, orig, saved = line.split(" ", 2)
                oks.append((orig, saved))
            else:
                failures.append(line)
        if len(oks) + sum(1 for r in results if r.startswith("FAIL")) != len(ms):
            failures.append(f"expected {len(ms)} results, got {len(results)}")
        identical = 0
        for orig, saved in oks:
            ext = saved[:-len(".onnx")] + "-ext.onnx"
            try:
                checker.check_model(saved)
                checker.check_model(ext)
            except Exception as e:
                failures.append(f"{orig}: saved file fails onnx.checker: {str(e)[:300]}")
                continue
            a = onnx.load(orig)
            b = onnx.load(saved)
            if a != b:
                failures.append(f"{orig}: the saved ModelProto differs from the original")
                continue
            with open(orig, "rb") as f1, open(saved, "rb") as f2:
                identical += f1.read() == f2.read()
            c = onnx.load(ext)   # loads the external data
            ta, tc = all_tensors(a.graph), all_tensors(c.graph)
            if ta.keys() != tc.keys():
                failures.append(f"{orig}: the external-data save has other tensors")
                continue
            for k in ta:
                x, y = numpy_helper.to_array(ta[k]), numpy_helper.to_array(tc[k])
                if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
                    failures.append(f"{orig}: tensor {k} differs after the external-data save")
                    break
        print(f"{len(oks)} of {len(ms)} models round-trip; {identical} saved byte-identical to the original")
        # the same through the shell's save command, on models with weights and with subgraphs
        d = data_dir()
        for rel in ("light/light_resnet50.onnx", "node/test_if/model.onnx", "node/test_loop11/model.onnx",
                    "node/test_scan9_sum/model.onnx"):
            src = os.path.join(d, rel)
            dst = os.path.join(out, "cli-" + rel.replace("/", "_"))
            p = subprocess.run([ogsh, "-c", f"save '{dst}'", src], capture_output=True, text=True)
            if p.returncode != 0 or p.stdout or p.stderr:
                failures.append(f"ogsh save of {rel}: exit {p.returncode}: {p.stdout}{p.stderr}")
                continue
            with open(src, "rb") as f1, open(dst, "rb") as f2:
                if f1.read() != f2.read():
                    failures.append(f"ogsh save of {rel} is not byte-identical to the original")
    for f in failures[:50]:
        print(f)
    if failures:
        print(f"{len(failures)} failures")
        sys.exit(1)


if __name__ == "__main__":
    main()
