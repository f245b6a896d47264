#!/usr/bin/env python3
"""`profile --device=cpu` rates each node at the dims it ran with.

    test_profile_cost.py OGSH

A MatMul whose batch dim is symbolic runs with --shape=batch=B; the FLOPs
behind its GFLOP/s (gflops x ms) must be those of B rows (2*B*K*N), not of
a batch taken as 1, and its GB/s those of the B-row input and output.
Each Conv's row names the algorithm its kernel picked (Winograd, 1x1,
depthwise, im2col).
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    ogsh = sys.argv[1]
    K = N = 256
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((K, N)).astype(np.float32), "W")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", K])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", N])], [w])
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "mm.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
        for b in (1, 1024):
            p = subprocess.run([ogsh, path, "-c", f"profile --device=cpu --shape=batch={b} --json"],
                               capture_output=True, text=True)
            if p.returncode:
                print(f"batch {b}: ogsh failed:\n{p.stdout}{p.stderr}", file=sys.stderr)
                failures += 1
                continue
            node = json.loads(p.stdout)["nodes"][0]
            flops = node["gflops"] * 1e9 * node["ms"] * 1e-3
            want = 2.0 * b * K * N
            nbytes = node["gbps"] * 1e9 * node["ms"] * 1e-3
            want_bytes = 4.0 * (b * K + K * N + b * N)
            if abs(flops - want) > 1e-3 * want or abs(nbytes - want_bytes) > 1e-3 * want_bytes:
                print(f"batch {b}: {flops:.4g} FLOP and {nbytes:.4g} bytes, want {want:.4g} and {want_bytes:.4g}",
                      file=sys.stderr)
                failures += 1
        # the algorithm each Conv's kernel picked, in the impl column
        rng = np.random.default_rng(1)
        convs = [("wino", 32, 32, 3, 1), ("pw", 32, 16, 1, 1), ("dw", 16, 16, 3, 16), ("i2c", 16, 8, 3, 1)]
        nodes, inits, prev = [], [], "x"
        for name, c, m, k, grp in convs:
            inits.append(numpy_helper.from_array(rng.standard_normal((m, c // grp, k, k)).astype(np.float32),
                                                 name + "_w"))
            nodes.append(helper.make_node("Conv", [prev, name + "_w"], [name], name=name, pads=[k // 2] * 4,
                                          group=grp))
            prev = name
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 12, 12])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)], inits)
        path = os.path.join(tmp, "convs.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
        p = subprocess.run([ogsh, path, "-c", "profile --device=cpu --iters=1 --json"], capture_output=True,
                           text=True)
        want = {"wino": "ogsh cpu winograd F(2x2,3x3)", "pw": "ogsh cpu 1x1 sgemm",
                "dw": "ogsh cpu depthwise direct", "i2c": "ogsh cpu im2col sgemm"}
        got = {nd["name"]: nd["impl"] for nd in json.loads(p.stdout)["nodes"]} if not p.returncode else {}
        if got != want:
            print(f"impl: {got or p.stdout + p.stderr}, want {want}", file=sys.stderr)
            failures += 1
    print(f"test_profile_cost: {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
