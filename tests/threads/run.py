#!/usr/bin/env python3
"""The thread-count bit-identity test of the CPU kernels.

    run.py THREAD_IDENT MODELDIR [OGSH]

Runs thread_ident (next to this file) with 1 and 3 threads over the ONNX
backend test data inside the onnx package of this Python (node, simple,
pytorch-converted, pytorch-operator, light) and over the generated
ResNet-50, MobileNetV2 and BERT-base (batch 1, sequence 128), made in MODELDIR by
tests/models/make_models.py when missing (the costs tests share them).
Every value the models compute must have the same bits; the 3-thread runs
split even small tensors (thread_ident --small-ranges). With OGSH, BERT-base
after `optimize` runs too (saved by OGSH), so the fused kernels (FusedGemm
with its Gelu epilogue, LayerNormalization, FusedAttention) are compared.
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SUITES = ["node", "simple", "pytorch-converted", "pytorch-operator", "light"]


def main():
    args = sys.argv[1:]
    if len(args) not in (2, 3):
        raise SystemExit(__doc__)
    driver, modeldir = args[0], os.path.abspath(args[1])
    ogsh = args[2] if len(args) == 3 else None
    import onnx
    data = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    paths = [os.path.join(data, s) for s in SUITES]
    missing = [p for p in paths if not os.path.isdir(p)]
    if missing:
        print(f"the onnx package has no backend test data at {missing[0]}", file=sys.stderr)
        return 1
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "costs"))
    import check_costs
    check_costs.ensure_models(modeldir)
    paths.append(os.path.join(modeldir, "resnet50.onnx"))
    paths.append(os.path.join(modeldir, "mobilenetv2.onnx"))   # depthwise convs, 1x1 with small K
    env = dict(os.environ)
    env.pop("OGSH_THREADS", None)
    with tempfile.TemporaryDirectory() as tmp:
        paths.append(bert_test(modeldir, tmp))
        if ogsh:
            paths.append(bert_optimized(paths[-1], ogsh, tmp))
        p = subprocess.run([driver, "3", "--small-ranges"] + paths, env=env, capture_output=True, text=True)
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr[-5000:])
    return p.returncode


def bert_test(modeldir, tmp):
    """BERT-base as a test folder: token ids, a mask with padding at the end
    and two segments, batch 1, sequence 128."""
    import numpy as np
    from onnx import numpy_helper
    d = os.path.join(tmp, "bert")
    os.makedirs(os.path.join(d, "test_data_set_0"))
    os.symlink(os.path.join(modeldir, "bert.onnx"), os.path.join(d, "model.onnx"))
    rng = np.random.default_rng(1)
    seq = 128
    ids = rng.integers(1000, 30000, size=(1, seq), dtype=np.int64)
    mask = np.ones((1, seq), dtype=np.int64)
    mask[:, 100:] = 0
    types = np.zeros((1, seq), dtype=np.int64)
    types[:, 60:] = 1
    # the graph's input order: input_ids, attention_mask, token_type_ids
    for i, (name, a) in enumerate([("input_ids", ids), ("attention_mask", mask), ("token_type_ids", types)]):
        with open(os.path.join(d, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(a, name).SerializeToString())
    return d


def bert_optimized(bert_dir, ogsh, tmp):
    """The BERT test folder's model after `optimize`, with the same inputs."""
    d = os.path.join(tmp, "bert_optimized")
    os.makedirs(d)
    os.symlink(os.path.join(bert_dir, "test_data_set_0"), os.path.join(d, "test_data_set_0"))
    out = os.path.join(d, "model.onnx")
    p = subprocess.run([ogsh, os.path.join(bert_dir, "model.onnx"), "-c", f"optimize --quiet; save {out}"],
                       capture_output=True, text=True)
    if p.returncode or not os.path.exists(out):
        raise SystemExit(f"cannot optimize BERT: {p.stdout}{p.stderr}")
    return d


if __name__ == "__main__":
    sys.exit(main())
