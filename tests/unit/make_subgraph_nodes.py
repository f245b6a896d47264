#!/usr/bin/env python3
"""Writes the models of test_run_node (tests/unit): an If whose branches read
two values of the main graph by name, a Loop whose body reads a value and an
initializer of the main graph, and a Loop with an If inside that reads a
value two graphs up (the models of tests/gpu/make_subgraphs.py).

    make_subgraph_nodes.py OUTDIR     writes OUTDIR/subgraph_if.onnx,
                                      subgraph_loop.onnx, subgraph_loop_if.onnx
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpu"))
from onnx import save  # noqa: E402
from make_subgraphs import if_model, loop_if_model, loop_model  # noqa: E402

out = sys.argv[1]
save(if_model(True), os.path.join(out, "subgraph_if.onnx"))
save(loop_model(), os.path.join(out, "subgraph_loop.onnx"))
save(loop_if_model(), os.path.join(out, "subgraph_loop_if.onnx"))
