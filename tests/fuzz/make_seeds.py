#!/usr/bin/env python3
"""Seed corpus for the loader fuzz target.

    make_seeds.py OUT_DIR [COUNT]

Copies COUNT (default 200) small models of the ONNX backend test data
(<onnx>/backend/test/data/node/*/model.onnx), spread over the sorted list,
plus every small one with a subgraph (If, Loop, Scan...), and writes a few
models of its own that reach the parts of the loader the node tests do not:
initializers in raw_data big enough to stay in the mapping, every typed
field, sparse initializers, functions, string tensors, value_info and
metadata.
"""
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

MAX_SEED = 8192   # bytes; small seeds keep the fuzzer fast


def node_models():
    d = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    if not os.path.isdir(d):
        sys.exit(f"no ONNX backend test data under {d}")
    out = []
    for case in sorted(os.listdir(d)):
        p = os.path.join(d, case, "model.onnx")
        if os.path.isfile(p) and os.path.getsize(p) <= MAX_SEED:
            out.append(p)
    return out


def has_subgraph(path):
    try:
        m = onnx.load(path, load_external_data=False)
    except Exception:
        return False
    return any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
               for n in m.graph.node for a in n.attribute)


def own_models():
    out = {}
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 64])
    w = numpy_helper.from_array(np.arange(64 * 8, dtype=np.float32).reshape(64, 8) / 7, "w")  # raw, 2 KB
    b = helper.make_tensor("b", TensorProto.FLOAT, [8], [0.5] * 8)                            # float_data
    w2 = helper.make_tensor("w2", TensorProto.FLOAT16, [8, 64], np.ones((8, 64), np.float16))  # int32_data
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
         helper.make_node("Add", ["h", "b"], ["h2"], name="add"),
         helper.make_node("Cast", ["w2"], ["w2f"], to=TensorProto.FLOAT),
         helper.make_node("MatMul", ["h2", "w2f"], ["y"], name="mm2")],
        "mlp", [x], [y], [w, b, w2],
        value_info=[helper.make_tensor_value_info("h", TensorProto.FLOAT, ["N", 8])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    helper.set_model_props(m, {"author": "ogsh", "k": "v"})
    out["mlp"] = m

    # every typed field and a string tensor
    inits = [
        helper.make_tensor("i64", TensorProto.INT64, [3], [1, -2, 3]),
        helper.make_tensor("i8", TensorProto.INT8, [2], [-1, 7]),
        helper.make_tensor("u32", TensorProto.UINT32, [2], [1, 2 ** 32 - 1]),
        helper.make_tensor("u64", TensorProto.UINT64, [1], [2 ** 64 - 1]),
        helper.make_tensor("f64", TensorProto.DOUBLE, [2], [1.5, -2.5]),
        helper.make_tensor("c64", TensorProto.COMPLEX64, [1], [1 + 2j]),
        helper.make_tensor("bool", TensorProto.BOOL, [2], [True, False]),
        helper.make_tensor("s", TensorProto.STRING, [2], [b"ab", b"c"]),
        helper.make_tensor("i4", TensorProto.INT4, [3], [1, -2, 3]),
        helper.make_tensor("bf", TensorProto.BFLOAT16, [2], [1.0, 2.0]),
        helper.make_tensor("empty", TensorProto.FLOAT, [0, 3], []),
    ]
    outs = [helper.make_tensor_value_info(t.name + "_o", t.data_type, None) for t in inits]
    nodes = [helper.make_node("Identity", [t.name], [t.name + "_o"]) for t in inits]
    sp = helper.make_sparse_tensor(
        helper.make_tensor("sp", TensorProto.FLOAT, [2], [1.0, 2.0]),
        helper.make_tensor("sp_idx", TensorProto.INT64, [2], [1, 5]), [2, 4])
    g = helper.make_graph(nodes + [helper.make_node("Identity", ["sp"], ["sp_o"])], "typed", [], outs +
                          [helper.make_value_info("sp_o", helper.make_sparse_tensor_type_proto(TensorProto.FLOAT, [2, 4]))],
                          inits, sparse_initializer=[sp])
    out["typed"] = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])

    # a function and a node attribute referring to the caller's attribute
    fn = helper.make_function(
        "local", "Scale", ["a"], ["o"],
        [helper.make_node("Constant", [], ["c"], value_float=1.0),
         helper.make_node("Mul", ["a", "c"], ["o"])],
        [helper.make_opsetid("", 18)], attributes=["alpha"])
    g = helper.make_graph([helper.make_node("Scale", ["x"], ["y"], domain="local", alpha=2.0)], "fn",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    out["function"] = helper.make_model(g, functions=[fn], opset_imports=[
        helper.make_opsetid("", 18), helper.make_opsetid("local", 1)])

    # nested subgraphs capturing outer values
    def branch(name, inner):
        return helper.make_graph(inner, name, [], [helper.make_tensor_value_info(name + "_o", TensorProto.FLOAT, None)])
    then = branch("then", [helper.make_node("Add", ["x", "x"], ["then_o"])])
    inner_if = helper.make_node("If", ["c"], ["else_o"], then_branch=branch("t2", [helper.make_node("Neg", ["x"], ["t2_o"])]),
                                else_branch=branch("e2", [helper.make_node("Abs", ["x"], ["e2_o"])]))
    els = branch("else", [inner_if])
    g = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=els)], "nested",
                          [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                           helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    out["nested_if"] = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    return out


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    dst = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) == 3 else 200
    os.makedirs(dst, exist_ok=True)
    models = node_models()
    step = max(1, len(models) // count)
    chosen = models[::step][:count]
    with_sub = [p for p in models if has_subgraph(p)]
    n = 0
    for p in sorted(set(chosen) | set(with_sub[:40])):
        shutil.copyfile(p, os.path.join(dst, os.path.basename(os.path.dirname(p)) + ".onnx"))
        n += 1
    for name, m in own_models().items():
        with open(os.path.join(dst, "own_" + name + ".onnx"), "wb") as f:
            f.write(m.SerializeToString())
        n += 1
    print(f"{n} seeds in {dst}")


if __name__ == "__main__":
    main()
