#!/usr/bin/env python3
"""Quantization on models exported the way users export them (GPU machine).

    quant_models.py --ogsh 'sh scripts/gpu.sh ogsh' [--out DIR]

Exports, with torch.onnx.export, architectures the rest of the suite does
not use: torchvision's mobilenet_v3_small (Hardswish, squeeze-excitation)
with the TorchScript exporter and efficientnet_b0 (SiLU, squeeze-excitation)
with the default (dynamo) one, and a 2-layer GPT-2 from transformers
(TorchScript); each in float32 and float16, batch dynamic (dummy batch 2).
The image models' BatchNorm statistics come from 8 batches of N(0,1)
images in training mode (random init leaves them at 0/1 and the outputs
near 1e-9). For each, ogsh (GPU when there is one):
    calibrate --data=D.npy --batch=4; quantize int8 --method=entropy;
    eval --data=D.npy --against=0 --batch=4; save Q.onnx
(D: 8 generated samples, N(0,1) images or random token ids of 16)
and, for the float32 ones, convert-fp16 the same way. Each saved model goes
through onnx.checker and onnxruntime (CPU); the table says what ran, what
quantize rewrote and kept, and the SNR against the float stage (generated
inputs: a check that the stage is sound, not an accuracy figure).
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys

import numpy as np


def warm_batchnorm(m, batches=8, batch=16):
    """Random init leaves BatchNorm's running statistics at 0/1, and the
    activations of image nets then shrink layer by layer (outputs near 1e-9,
    below float16's range); statistics from a few batches of N(0,1) images
    give the scale a trained model has. Leaves m in eval mode."""
    import torch
    m.train()
    with torch.no_grad():
        for _ in range(batches):
            m(torch.randn(batch, 3, 224, 224))
    return m.eval()


def export_all(out):
    import torch
    import torchvision
    from transformers import GPT2Config, GPT2Model

    made = []

    class GPT(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = GPT2Model(GPT2Config(n_layer=2, n_embd=256, n_head=4, vocab_size=1000, n_positions=128))

        def forward(self, ids):
            return self.m(input_ids=ids).last_hidden_state

    specs = [("mobilenet_v3_small", lambda: torchvision.models.mobilenet_v3_small(), "image", False),
             ("efficientnet_b0", lambda: torchvision.models.efficientnet_b0(), "image", True),
             ("gpt2_2layer", GPT, "tokens", False)]
    for name, ctor, kind, dynamo in specs:
        for dt in ("fp32", "fp16"):
            torch.manual_seed(0)
            m = ctor()
            if kind == "image":
                warm_batchnorm(m)
            m = m.eval()
            dev = "cuda" if dt == "fp16" else "cpu"
            m = m.to(dev)
            if dt == "fp16":
                m = m.half()
            if kind == "image":
                x = torch.randn(2, 3, 224, 224, device=dev, dtype=torch.float16 if dt == "fp16" else torch.float32)
                inames = ["x"]
            else:
                x = torch.randint(0, 1000, (2, 16), device=dev)
                inames = ["ids"]
            path = os.path.join(out, f"{name}_{dt}.onnx")
            try:
                if dynamo:
                    torch.onnx.export(m, (x,), path, input_names=inames, external_data=False,
                                      dynamic_shapes=({0: torch.export.Dim("batch")},))
                else:
                    axes = {inames[0]: {0: "batch"} if kind == "image" else {0: "batch", 1: "seq"}}
                    torch.onnx.export(m, (x,), path, input_names=inames, dynamic_axes=axes, opset_version=17,
                                      dynamo=False)
                made.append((name, dt, path, "dynamo" if dynamo else "torchscript"))
            except Exception as e:  # noqa: BLE001
                print(f"export {name} {dt} failed: {e}", file=sys.stderr)
    return made


def ogsh(cmd, model, script):
    r = subprocess.run(shlex.split(cmd) + [model, "-c", script], capture_output=True, text=True, timeout=600)
    return r.returncode, r.stdout, r.stderr


def ort_check(path):
    import onnx
    import onnxruntime as ort
    try:
        onnx.checker.check_model(onnx.load(path), full_check=True)
    except Exception as e:  # noqa: BLE001
        return f"checker: {str(e)[:120]}"
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        feeds = {}
        for i in s.get_inputs():
            shape = [2 if not isinstance(d, int) else d for d in i.shape]
            if "int" in i.type:
                shape = [2, 16] if len(shape) == 2 else shape
                feeds[i.name] = np.random.default_rng(0).integers(0, 1000, shape).astype(np.int64)
            else:
                dt = np.float16 if "float16" in i.type else np.float32
                feeds[i.name] = np.random.default_rng(0).standard_normal(shape).astype(dt)
        o = s.run(None, feeds)[0]
        return "ok" if np.isfinite(o.astype(np.float32)).all() else "non-finite outputs"
    except Exception as e:  # noqa: BLE001
        return f"onnxruntime: {str(e)[:160]}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ogsh", required=True)
    ap.add_argument("--out", default="/tmp/qm")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rows = []
    for name, dt, path, how in export_all(a.out):
        rng = np.random.default_rng(0)
        data = os.path.join(a.out, f"{name}_data.npy")
        if "gpt2" in name:
            np.save(data, rng.integers(0, 1000, (8, 16)).astype(np.int64))
        else:
            np.save(data, rng.standard_normal((8, 3, 224, 224)).astype(np.float32))
        steps = [("int8 entropy", "quantize int8 --method=entropy")]
        if dt == "fp32":
            steps.append(("convert-fp16", "convert-fp16"))
        for label, q in steps:
            out = os.path.join(a.out, f"{name}_{dt}_{label.replace(' ', '_')}.onnx")
            script = (f"calibrate --data={data} --batch=4; {q} --json; "
                      f"eval --data={data} --against=0 --batch=4 --json; save {out} --force")
            rc, so, se = ogsh(a.ogsh, path, script)
            rep = re.search(r'"rewritten": (\d+)', so)
            rej = re.search(r'"rejected": (\d+)', so)
            snr = re.search(r'"snr_db": ([-0-9.e+inf]+|null)', so)
            err = (se.strip().splitlines() or [""])[-1][:160] if rc else ""
            ortres = ort_check(out) if rc == 0 and os.path.exists(out) else "-"
            rows.append(f"| {name} | {dt} | {how} | {label} | {'ok' if rc == 0 else 'FAILED: ' + err} | "
                        f"{rep.group(1) if rep else '-'} / {rej.group(1) if rej else '-'} | "
                        f"{snr.group(1) if snr else '-'} | {ortres} |")
            print(rows[-1], flush=True)
    print("| model | dtype | exporter | step | ogsh (calibrate, step, eval, save on the GPU) | rewritten / kept | "
          "SNR vs float stage (dB, generated inputs) | saved model: onnx.checker + onnxruntime |")
    print("|---|---|---|---|---|---:|---:|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
