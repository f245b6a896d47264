#!/usr/bin/env python3
"""The models of issue 18's benchmarks, exported once (GPU machine).

    q18_models.py OUTDIR [--models resnet50,mobilenetv2,bert,llama,resnet50_ort_qdq,...]
    q18_models.py OUTDIR --local-test      stand-ins without torch (see below)

Writes OUTDIR/NAME.onnx and OUTDIR/models.json (what bench/q18_bench.py
reads: each model's file, input, kind, dtype, calibration data and check
input). A model already in OUTDIR is kept (a second run reuses it; delete
the folder to export again).

  resnet50, mobilenetv2   torchvision, random weights, BatchNorm statistics
                          from 8 batches of N(0,1) images (quant_models.warm_batchnorm),
                          float32, torch.onnx.export's default (torch.export-based)
                          exporter, opset 20, batch dynamic (dummy batch 2)
  bert                    transformers BertModel(BertConfig()) (BERT-base), input_ids
                          [batch, 128] -> last_hidden_state, float32, as gpu_bench.py
                          builds it, opset 20
  llama                   a Llama-style decoder from transformers' LlamaConfig (hidden
                          2048, 8 layers, intermediate 5632, 16 heads, vocab 32000),
                          random weights, float16, input_ids [batch, seq] -> logits,
                          no KV cache: timed at seq 1 (a decode step's MatMuls: GEMVs
                          over every weight) and seq 128 (a prefill); when the dynamic
                          export fails, a fixed [1, 1] export
  resnet50_ort_qdq        onnxruntime's quantize_static of resnet50.onnx (after
                          quant_pre_process): QDQ, int8 activations (symmetric,
                          ActivationSymmetric=True, as TensorRT wants them) and int8
                          per-channel weights, MinMax calibration on 16 generated
                          N(0,1) images
  mobilenetv2_ort_qdq,    the same of mobilenetv2.onnx and bert.onnx (BERT: 16 rows of
  bert_ort_qdq            token ids in [0, 1000))

Calibration data (OUTDIR/NAME_calib.npy): 32 N(0,1) images, or 32 rows of
random token ids in [0, 1000); the check input (OUTDIR/NAME_check.npy): one
image or one row (for the Llama decoder one token).

--local-test makes stand-ins from tests/models/digits with the same
manifest (digits_cnn as "resnet50", digits_transformer as "bert", the
digits CNN quantized by onnxruntime as "resnet50_ort_qdq"), to try
q18_bench.py and q18_gpu.sh on a machine without torch or a GPU.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

IMAGE = (3, 224, 224)
SEQ = 128


def log(msg):
    print(f"q18_models: {msg}", file=sys.stderr, flush=True)


def export_image(name, path):
    import torch
    import torchvision
    from gpu_bench import export_dynamo
    from quant_models import warm_batchnorm
    torch.manual_seed(0)
    m = {"resnet50": torchvision.models.resnet50, "mobilenetv2": torchvision.models.mobilenet_v2}[name](weights=None)
    warm_batchnorm(m)
    with torch.inference_mode():
        export_dynamo(m, torch.randn(2, *IMAGE), "input", path, opset=20)


def export_bert(path):
    import torch
    from gpu_bench import build, export_dynamo, make_input
    torch.manual_seed(0)
    m, shape, kind = build("bert", "fp32")
    with torch.inference_mode():
        export_dynamo(m, make_input(shape, kind, 2, "fp32"), "input_ids", path, opset=20)


def export_llama(path):
    """Returns True when the export has a dynamic [batch, seq], False for a fixed [1, 1]."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(hidden_size=2048, num_hidden_layers=8, intermediate_size=5632, num_attention_heads=16,
                      num_key_value_heads=16, vocab_size=32000, max_position_embeddings=2048)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    lm = LlamaForCausalLM(cfg).eval().half().cuda()

    class Wrap(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids):
            return self.m(input_ids=input_ids, use_cache=False).logits

    m = Wrap(lm)
    ids = torch.randint(0, 32000, (2, 8), device="cuda")
    one = torch.randint(0, 32000, (1, 1), device="cuda")
    tries = [
        ("dynamic batch and seq (torch.export)", True,
         lambda: torch.onnx.export(m, (ids,), path, input_names=["input_ids"], output_names=["logits"], opset_version=20,
                                   dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=64),
                                                    1: torch.export.Dim("seq", min=1, max=1024)},),
                                   dynamo=True, external_data=True)),
        ("fixed [1, 1] (torch.export)", False,
         lambda: torch.onnx.export(m, (one,), path, input_names=["input_ids"], output_names=["logits"], opset_version=20,
                                   dynamo=True, external_data=True)),
        ("fixed [1, 1] (TorchScript)", False,
         lambda: torch.onnx.export(m, (one,), path, input_names=["input_ids"], output_names=["logits"], opset_version=17,
                                   dynamo=False, do_constant_folding=False)),
    ]
    with torch.inference_mode():
        for what, dynamic, f in tries:
            try:
                f()
                log(f"llama exported: {what}")
                return dynamic
            except Exception as e:  # noqa: BLE001
                log(f"llama export {what} failed: {str(e).splitlines()[0][:300] if str(e) else type(e).__name__}")
    raise RuntimeError("every llama export failed")


def ort_qdq(src, dst, input_name, sample_shape, n=16, tokens=False):
    """onnxruntime's quantize_static: QDQ, int8 symmetric activations, int8 per-channel weights
    (tokens: the calibration inputs are token ids in [0, 1000))"""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    pre = dst[:-5] + "_pre.onnx"
    from onnxruntime.quantization.shape_inference import quant_pre_process
    src_q = src
    for kw in ({}, {"skip_symbolic_shape": True}):   # symbolic shape inference needs sympy
        try:
            quant_pre_process(src, pre, **kw)
            src_q = pre
            break
        except Exception as e:  # noqa: BLE001
            log(f"quant_pre_process{kw or ''} failed ({str(e)[:200]})")
    if src_q == src:
        log("quantizing the model as exported")
    rng = np.random.default_rng(1)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.left = n

        def get_next(self):
            if self.left <= 0:
                return None
            self.left -= 1
            if tokens:
                return {input_name: rng.integers(0, 1000, sample_shape).astype(np.int64)}
            return {input_name: rng.standard_normal(sample_shape).astype(np.float32)}

    quantize_static(src_q, dst, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                    extra_options={"ActivationSymmetric": True})
    if src_q == pre and os.path.exists(pre):
        os.remove(pre)


def data_files(out, name, kind, rng):
    calib, check = os.path.join(out, f"{name}_calib.npy"), os.path.join(out, f"{name}_check.npy")
    if kind == "image":
        np.save(calib, rng.standard_normal((32,) + IMAGE).astype(np.float32))
        np.save(check, rng.standard_normal((1,) + IMAGE).astype(np.float32))
    elif kind == "tokens":
        np.save(calib, rng.integers(0, 1000, (32, SEQ)).astype(np.int64))
        np.save(check, rng.integers(0, 1000, (1, SEQ)).astype(np.int64))
    else:   # decoder: one token
        np.save(calib, rng.integers(0, 32000, (8, 1)).astype(np.int64))
        np.save(check, rng.integers(0, 32000, (1, 1)).astype(np.int64))
    return calib, check


def make(out, names):
    man_path = os.path.join(out, "models.json")
    man = json.load(open(man_path)) if os.path.exists(man_path) else {}
    rng = np.random.default_rng(0)
    for name in names:
        path = os.path.join(out, f"{name}.onnx")
        if name in man and os.path.exists(path):
            log(f"{name}: kept {path}")
            continue
        t0 = time.time()
        try:
            entry = {"path": path}
            if name in ("resnet50", "mobilenetv2"):
                export_image(name, path)
                entry.update(input="input", kind="image", dtype="float32", dynamic=True)
            elif name == "bert":
                export_bert(path)
                entry.update(input="input_ids", kind="tokens", dtype="float32", dynamic=True)
            elif name == "llama":
                dyn = export_llama(path)
                entry.update(input="input_ids", kind="decoder", dtype="float16", dynamic=dyn)
            elif name.endswith("_ort_qdq"):
                base = name[:-len("_ort_qdq")]
                src = os.path.join(out, f"{base}.onnx")
                if base not in man or not os.path.exists(src):
                    raise RuntimeError(f"needs {base} first")
                kind = man[base]["kind"]
                ort_qdq(src, path, man[base]["input"], (1, SEQ) if kind == "tokens" else (1,) + IMAGE,
                        tokens=kind == "tokens")
                entry.update(input=man[base]["input"], kind=kind, dtype="int8 (onnxruntime QDQ)", dynamic=True,
                             float_of=base)
            else:
                raise RuntimeError(f"unknown model {name}")
            entry["calib"], entry["check"] = data_files(out, name, entry["kind"], rng)
            man[name] = entry
            json.dump(man, open(man_path, "w"), indent=1)
            log(f"{name}: {path} in {time.time() - t0:.1f} s")
        except Exception as e:  # noqa: BLE001
            log(f"{name}: FAILED after {time.time() - t0:.1f} s: {type(e).__name__}: {str(e)[:400]}")
    return man


def local_test(out):
    """stand-ins from tests/models/digits (no torch needed)"""
    import shutil
    digits = os.path.join(HERE, "..", "tests", "models", "digits")
    man = {}
    rng = np.random.default_rng(0)
    for name, src, kind in (("resnet50", "digits_cnn.onnx", "image8"), ("bert", "digits_transformer.onnx", "image8")):
        path = os.path.join(out, f"{name}.onnx")
        shutil.copy(os.path.join(digits, src), path)
        calib, check = os.path.join(out, f"{name}_calib.npy"), os.path.join(out, f"{name}_check.npy")
        np.save(calib, rng.standard_normal((32, 1, 8, 8)).astype(np.float32))
        np.save(check, rng.standard_normal((1, 1, 8, 8)).astype(np.float32))
        man[name] = {"path": path, "input": "x", "kind": kind, "dtype": "float32", "dynamic": True,
                     "calib": calib, "check": check}
    # a tiny float16 "decoder": input_ids [batch, seq] -> Gather -> MatMul -> Relu -> MatMul -> logits
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    f16 = np.float16
    inits = [numpy_helper.from_array((rng.standard_normal((1000, 256)) * 0.1).astype(f16), "emb"),
             numpy_helper.from_array((rng.standard_normal((256, 512)) * 0.06).astype(f16), "w1"),
             numpy_helper.from_array((rng.standard_normal((512, 1000)) * 0.04).astype(f16), "w2")]
    nodes = [helper.make_node("Gather", ["emb", "input_ids"], ["h"]), helper.make_node("MatMul", ["h", "w1"], ["a"]),
             helper.make_node("Relu", ["a"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["logits"])]
    g = helper.make_graph(nodes, "decoder", [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT16, ["batch", "seq", 1000])], inits)
    path = os.path.join(out, "llama.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    calib, check = data_files(out, "llama", "decoder", rng)
    np.save(check, rng.integers(0, 1000, (1, 1)).astype(np.int64))
    man["llama"] = {"path": path, "input": "input_ids", "kind": "decoder", "dtype": "float16", "dynamic": True,
                    "calib": calib, "check": check}
    path = os.path.join(out, "resnet50_ort_qdq.onnx")
    ort_qdq(man["resnet50"]["path"], path, "x", (1, 1, 8, 8))
    man["resnet50_ort_qdq"] = dict(man["resnet50"], path=path, dtype="int8 (onnxruntime QDQ)", float_of="resnet50")
    json.dump(man, open(os.path.join(out, "models.json"), "w"), indent=1)
    log(f"local stand-ins -> {out}")
    return man


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--models", default="resnet50,mobilenetv2,bert,llama,resnet50_ort_qdq,mobilenetv2_ort_qdq,"
                                           "bert_ort_qdq")
    ap.add_argument("--local-test", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    man = local_test(a.out) if a.local_test else make(a.out, a.models.split(","))
    for k, v in man.items():
        print(f"{k}: {v['path']} ({v['kind']}, {v['dtype']}, input {v['input']})")


if __name__ == "__main__":
    main()
