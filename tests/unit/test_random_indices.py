#!/usr/bin/env python3
"""Random inputs that index a table stay inside it (exec/inputs.c).

    test_random_indices.py OGSH

An integer graph input read as the indices of a Gather (directly, or through
a Cast or Identity) gets random values in [0, rows of the smallest such
table); other integer inputs keep [-10, 10]. Before, a token_type_ids input
into a table of 2 rows made `run`, `time` and `profile` fail ("index 6 is out
of range for a dim of 2").
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    ogsh = sys.argv[1]
    t2 = numpy_helper.from_array(np.arange(2 * 4, dtype=np.float32).reshape(2, 4), "t2")
    t5 = numpy_helper.from_array(np.arange(5 * 4, dtype=np.float32).reshape(5, 4), "t5")
    t7 = numpy_helper.from_array(np.arange(3 * 7, dtype=np.float32).reshape(3, 7), "t7")
    nodes = [
        # ids: a Cast to int32 then a Gather of 2 rows, and a Gather of 5 rows: [0, 2)
        helper.make_node("Cast", ["ids"], ["ids32"], to=TensorProto.INT32),
        helper.make_node("Gather", ["t2", "ids32"], ["g2"]),
        helper.make_node("Gather", ["t5", "ids"], ["g5"]),
        helper.make_node("Identity", ["ids"], ["ids_out"]),
        # cols: the indices of axis 1 (7 columns), through an Identity: [0, 7)
        helper.make_node("Identity", ["cols"], ["cols_i"]),
        helper.make_node("Gather", ["t7", "cols_i"], ["g7"], axis=1),
        helper.make_node("Identity", ["cols"], ["cols_out"]),
        # other: read as a Gather's data, not its indices: [-10, 10]
        helper.make_node("Gather", ["other", "zero"], ["g_other"]),
        helper.make_node("Identity", ["other"], ["other_out"]),
    ]
    zero = numpy_helper.from_array(np.array(0, dtype=np.int64), "zero")
    graph = helper.make_graph(
        nodes, "random_indices",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", 300]),
         helper.make_tensor_value_info("cols", TensorProto.INT64, [300]),
         helper.make_tensor_value_info("other", TensorProto.INT64, [300])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("g2", "g5", "g7")] +
        [helper.make_tensor_value_info(n, TensorProto.INT64, None) for n in ("ids_out", "cols_out", "other_out",
                                                                             "g_other")],
        [t2, t5, t7, zero])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.onnx")
        onnx.save(model, path)
        for cmd in ("run --device=cpu --shape=batch=3 --save-outputs=" + os.path.join(d, "out.npz"),
                    "time --device=cpu --iters=2 --shape=batch=3", "profile --device=cpu --iters=1 --shape=batch=3"):
            r = subprocess.run([ogsh, path, "-c", cmd], capture_output=True, text=True)
            if r.returncode:
                print(f"'{cmd}' failed:\n{r.stdout}{r.stderr}")
                bad += 1
        out = np.load(os.path.join(d, "out.npz"))
        for name, lo, hi in (("ids_out", 0, 1), ("cols_out", 0, 6), ("other_out", -10, 10)):
            v = out[name]
            if v.min() != lo or v.max() != hi:
                print(f"{name}: values in [{v.min()}, {v.max()}], expected [{lo}, {hi}]")
                bad += 1
    print("random indices:", "FAILED" if bad else "ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
