#!/usr/bin/env python3
"""Calibration and sensitivity speed (issue 17's benchmarks).

    quant_bench.py --ogsh 'build/shell/ogsh' [--models resnet50,bert] [--samples 1000]
                   [--device cuda|cpu] [--batch 32] [--sensitivity 256] [--out DIR]

For each model it makes the model (torchvision/transformers export when torch
is importable, else tests/models/make_models.py with the onnx API; random
weights either way: speed does not depend on them) and generated data
(ResNet-50: N float32 images [N,3,224,224] in one .npy written in chunks;
BERT-base: N sequences of 128 tokens in an .npz: input_ids, attention_mask,
token_type_ids), then measures with `set timer on` inside one ogsh process:
  - `calibrate --data=... --batch=B --device=D` over all N samples: the
    command's time, and the peak host memory of the process (ru_maxrss)
    against the model's size (the goal: under the model plus 512 MB);
  - `calib --method=M` for each method after it: re-deriving every scale
    (goal: under 100 ms for ResNet-50);
  - with --sensitivity K (ResNet-50 only): `quantize int8` then `sensitivity`
    over the first K samples: its time (goal: under a minute for 256 on the GPU).
Prints a Markdown table and writes OUT/quant_bench.json.
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_model(name, out):
    path = os.path.join(out, f"{name}.onnx")
    if os.path.exists(path):
        return path, "existing"
    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
    if have_torch and name == "resnet50":
        import torch
        import torchvision
        m = torchvision.models.resnet50().eval()
        torch.onnx.export(m, (torch.zeros(2, 3, 224, 224),), path, input_names=["x"], output_names=["logits"],
                          dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}}, opset_version=17, dynamo=False)
        return path, "torchvision resnet50, torch.onnx.export (TorchScript)"
    if have_torch and name == "bert":
        import torch
        from transformers import BertConfig, BertModel
        bert = BertModel(BertConfig()).eval()

        class Wrap(torch.nn.Module):   # keyword arguments: BertModel.forward's positions change between versions
            def __init__(self):
                super().__init__()
                self.bert = bert

            def forward(self, input_ids, attention_mask, token_type_ids):
                o = self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
                return o.last_hidden_state, o.pooler_output

        m = Wrap().eval()
        ids = torch.zeros(2, 128, dtype=torch.int64)
        torch.onnx.export(m, (ids, torch.ones_like(ids), torch.zeros_like(ids)), path,
                          input_names=["input_ids", "attention_mask", "token_type_ids"],
                          output_names=["last_hidden_state", "pooler_output"],
                          dynamic_axes={k: {0: "batch"} for k in ("input_ids", "attention_mask", "token_type_ids")},
                          opset_version=17, dynamo=False)
        return path, "transformers BertModel (bert-base config), torch.onnx.export (TorchScript)"
    subprocess.run([sys.executable, os.path.join(ROOT, "tests", "models", "make_models.py"), out, name], check=True)
    return path, "tests/models/make_models.py (onnx API)"


def make_data(name, n, out):
    rng = np.random.default_rng(0)
    if name == "resnet50":
        path = os.path.join(out, f"resnet50_{n}.npy")
        if not os.path.exists(path):
            a = np.lib.format.open_memmap(path + ".tmp", mode="w+", dtype=np.float32, shape=(n, 3, 224, 224))
            for i in range(0, n, 64):
                k = min(64, n - i)
                a[i:i + k] = rng.standard_normal((k, 3, 224, 224), dtype=np.float32)
            a.flush()
            del a
            os.replace(path + ".tmp", path)
        return path
    path = os.path.join(out, f"bert_{n}.npz")
    if not os.path.exists(path):
        np.savez(path + ".tmp.npz", input_ids=rng.integers(0, 30522, (n, 128), dtype=np.int64),
                 attention_mask=np.ones((n, 128), np.int64), token_type_ids=np.zeros((n, 128), np.int64))
        os.replace(path + ".tmp.npz", path)
    return path


def run_ogsh(ogsh, model, script):
    """Runs ogsh; returns (exit code, stdout, stderr, wall s, peak RSS in KiB of the ogsh process).

    The peak comes from /usr/bin/time: a child of this Python process would
    report Python's own peak too (Linux keeps the largest RSS across fork and
    exec, and this process has held the generated data or torch)."""
    import tempfile
    timer = ["/usr/bin/time", "-f", "OGSH_MAXRSS_KIB %M"] if os.path.exists("/usr/bin/time") else []
    with tempfile.TemporaryFile("w+") as fo, tempfile.TemporaryFile("w+") as fe:
        t0 = time.time()
        p = subprocess.Popen(timer + shlex.split(ogsh) + [model, "-c", script], stdout=fo, stderr=fe, text=True)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.time() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        out, err = fo.read(), fe.read()
        m = re.findall(r"^OGSH_MAXRSS_KIB (\d+)$", err, re.M)
        rss = int(m[-1]) if m else ru.ru_maxrss
        return p.returncode, out, err, wall, rss


def times(out):
    return [float(t) for t in re.findall(r"^time: ([0-9.]+) s$", out, re.M)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ogsh", default=os.path.join(ROOT, "build", "shell", "ogsh"))
    ap.add_argument("--models", default="resnet50,bert")
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--sensitivity", type=int, default=0)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "out"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rows, res = [], []
    methods = ["max", "percentile", "entropy", "mse"]
    for name in a.models.split(","):
        model, how = make_model(name, a.out)
        data = make_data(name, a.samples, a.out)
        size = os.path.getsize(model)
        script = (f"set timer on; calibrate --data={data} --batch={a.batch} --device={a.device}; "
                  + "; ".join(f"calib --method={m} --json" for m in methods))
        # the same process over one batch: what ogsh, the libraries, the model and one
        # batch take; the full run's peak over it is what calibrating more data adds
        _, _, _, _, rss1 = run_ogsh(a.ogsh, model, f"calibrate --data={data} --batch={a.batch} --batches=1 "
                                    f"--device={a.device}")
        rc, out, err, wall, rss = run_ogsh(a.ogsh, model, script)
        t = times(out + err)
        r = {"model": name, "made_by": how, "samples": a.samples, "batch": a.batch, "device": a.device,
             "rc": rc, "model_bytes": size, "peak_rss_bytes": rss * 1024, "peak_rss_one_batch_bytes": rss1 * 1024,
             "wall_s": wall,
             "calibrate_s": t[0] if t else None,
             "rederive_ms": {m: 1000 * x for m, x in zip(methods, t[1:])}, "stderr_tail": err[-600:]}
        if a.sensitivity and name == "resnet50":
            script = (f"calibrate --data={data} --batch={a.batch} --batches={max(1, 256 // a.batch)} "
                      f"--device={a.device}; quantize int8; set timer on; "
                      f"sensitivity --data={data} --batch={a.batch} --batches={max(1, a.sensitivity // a.batch)} --json")
            rc2, out2, err2, _, _ = run_ogsh(a.ogsh, model, script)
            t2 = times(out2 + err2)
            r["sensitivity_s"] = t2[-1] if t2 and rc2 == 0 else None
            r["sensitivity_samples"] = a.sensitivity
            r["sensitivity_err"] = err2[-600:] if rc2 else ""
        res.append(r)
        print(json.dumps(r, indent=1), file=sys.stderr)
        mb = 1 << 20
        rows.append(f"| {name} | {a.device} | {a.samples} | {a.batch} | "
                    f"{r['calibrate_s'] if r['calibrate_s'] is not None else 'failed'} | "
                    f"{size / mb:.0f} | {rss1 / 1024:.0f} | {rss / 1024:.0f} | "
                    + " / ".join(f"{v:.0f}" for v in r["rederive_ms"].values()) + " | "
                    + (f"{r.get('sensitivity_s')}" if "sensitivity_s" in r else "") + " |")
    with open(os.path.join(a.out, "quant_bench.json"), "w") as f:
        json.dump(res, f, indent=1)
    print("| model | device | samples | batch | calibrate (s) | model (MiB) | peak RSS, one batch (MiB) | "
          "peak RSS, all (MiB) | re-derive max/pct/entropy/mse (ms) | sensitivity (s) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|---:|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
