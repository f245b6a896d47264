#!/usr/bin/env python3
"""GPU speed: ogsh `time` against PyTorch on the same GPU, in one run.

    gpu_bench.py --ogsh 'sh scripts/gpu.sh ogsh' [--models resnet50,mobilenetv2,bert]
                 [--dtypes fp32,fp16] [--batches 1,64] [--modes eager,graph,compile]
                 [--iters 200] [--levels extended,all] [--out DIR]

Runs on the GPU machine (PyTorch, torchvision and transformers there). For
each model and dtype it builds the PyTorch model (random weights: speed does
not depend on them), exports it with torch.onnx.export (batch dim dynamic;
BERT-base takes input_ids of 128 tokens, the attention mask all ones), then
for each batch size times:
  - PyTorch eager, under inference_mode;
  - PyTorch replaying a CUDA graph captured by hand (torch.cuda.CUDAGraph);
  - torch.compile(mode="reduce-overhead") after its compilation;
  - ogsh `time --json` on the exported model as loaded, and after `optimize`
    (one column per --levels entry; extended is optimize's default).
The transformers (ViT-B/16 from torchvision; BERT-base and GPT-2 from
transformers, 128 tokens) are exported with the default, torch.export-based
exporter at opset 20 and a batch-2 example (so the batch dim stays dynamic);
the CNNs with the TorchScript one (opset 17).
Every figure is the median of ITERS runs timed with CUDA events after a
warm-up, input upload excluded on both sides. Prints a Markdown table and
writes OUT/gpu_bench.json.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

import torch


def build(name, dtype):
    if name == "resnet50":
        import torchvision
        m = torchvision.models.resnet50(weights=None)
        shape, kind = (1, 3, 224, 224), "image"
    elif name == "mobilenetv2":
        import torchvision
        m = torchvision.models.mobilenet_v2(weights=None)
        shape, kind = (1, 3, 224, 224), "image"
    elif name == "vit":
        import torchvision
        m = torchvision.models.vit_b_16(weights=None)
        shape, kind = (1, 3, 224, 224), "vit"
    elif name == "gpt2":
        import transformers
        cfg = transformers.GPT2Config()   # GPT-2 small: 12 layers, hidden 768, 12 heads
        cfg.use_cache = False
        cfg.attn_implementation = "eager"
        gpt = transformers.GPT2Model(cfg)

        class WrapG(torch.nn.Module):
            def __init__(self, g):
                super().__init__()
                self.g = g

            def forward(self, input_ids):
                return self.g(input_ids=input_ids, use_cache=False).last_hidden_state
        m = WrapG(gpt)
        shape, kind = (1, 128), "tokens"
    elif name == "bert":
        import transformers
        cfg = transformers.BertConfig()   # BERT-base: 12 layers, hidden 768, 12 heads
        cfg.attn_implementation = "eager"
        bert = transformers.BertModel(cfg, add_pooling_layer=False)

        class Wrap(torch.nn.Module):
            def __init__(self, b):
                super().__init__()
                self.b = b

            def forward(self, input_ids):
                return self.b(input_ids=input_ids).last_hidden_state
        m = Wrap(bert)
        shape, kind = (1, 128), "tokens"
    else:
        raise SystemExit(f"unknown model {name}")
    m = m.eval().cuda()
    if dtype == "fp16":
        m = m.half()
    return m, shape, kind


def make_input(shape, kind, batch, dtype):
    g = torch.Generator(device="cuda").manual_seed(0)
    full = (batch,) + tuple(shape[1:])
    if kind == "tokens":
        return torch.randint(0, 1000, full, device="cuda", generator=g)
    x = torch.rand(full, device="cuda", generator=g) * 2 - 1
    return x.half() if dtype == "fp16" else x


def cuda_time(fn, iters, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def torch_times(m, x, modes, iters):
    out = {}
    with torch.inference_mode():
        if "eager" in modes:
            out["eager"] = cuda_time(lambda: m(x), iters, 20)
        if "graph" in modes:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    m(x)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                m(x)
            out["graph"] = cuda_time(g.replay, iters, 20)
            del g
        if "compile" in modes:
            t0 = time.time()
            c = torch.compile(m, mode="reduce-overhead")
            for _ in range(5):
                c(x)
            out["compile_s"] = time.time() - t0
            out["compile"] = cuda_time(lambda: c(x), iters, 20)
            torch._dynamo.reset()
    return out


def export_dynamo(m, x, name, path, opset=18):
    torch.onnx.export(m, (x,), path, input_names=[name], output_names=["output"],
                      dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=1024)},),
                      opset_version=opset, dynamo=True)


def export(m, shape, kind, dtype, path):
    name = "input_ids" if kind == "tokens" else "input"
    if kind in ("tokens", "vit"):
        # BERT through the torch.export-based exporter: the TorchScript one
        # writes Cast(to=float) on every float16 Linear weight (torch 2.11),
        # so its "float16" MatMuls run in float32. The example batch is 2: an
        # example dim of 1 is specialized (the batch would come out fixed).
        # The transformers (ViT-B/16, BERT, GPT-2) go through the default
        # exporter at opset 20, as a user exports them today.
        with torch.inference_mode():
            export_dynamo(m, make_input(shape, kind, 2, dtype), name, path, opset=20)
        return
    x = make_input(shape, kind, 1, dtype)
    with torch.inference_mode():
        try:
            # no constant folding in float16: the TorchScript exporter folds
            # weight transposes on the CPU in float32 (seen with torch 2.11:
            # BERT's MatMul weights came out float32); ogsh folds them itself
            torch.onnx.export(m, (x,), path, input_names=[name], output_names=["output"],
                              dynamic_axes={name: {0: "batch"}, "output": {0: "batch"}},
                              opset_version=17, dynamo=False, do_constant_folding=dtype != "fp16")
        except Exception as e:  # the TorchScript exporter may be gone: use the new one
            print(f"  TorchScript export failed ({e}); using dynamo=True", file=sys.stderr)
            export_dynamo(m, make_input(shape, kind, 2, dtype), name, path)


def ogsh_time(ogsh, path, batch, iters, level, log, tf32=False):
    cmds = [f"load {path}"]
    if tf32:
        cmds.append("set tf32 on")
    if level:
        cmds.append(f"optimize --level={level} --quiet")
    cmds.append(f"time --batch={batch} --iters={iters} --warmup=20 --json")
    t0 = time.time()
    p = subprocess.run(shlex.split(ogsh) + ["-c", "; ".join(cmds)], capture_output=True, text=True, timeout=900)
    log.write(f"$ ogsh -c '{'; '.join(cmds)}'  ({time.time() - t0:.1f} s, exit {p.returncode})\n")
    log.write(p.stdout + p.stderr + "\n")
    log.flush()
    if p.returncode != 0:
        return None, (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
    txt = p.stdout
    start = txt.rfind("\n{")
    start = 0 if start < 0 else start + 1
    try:
        j = json.loads(txt[start:])
    except ValueError:
        return None, "no JSON from time"
    return j.get("median_ms"), None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ogsh", default="sh scripts/gpu.sh ogsh")
    ap.add_argument("--models", default="resnet50,mobilenetv2,bert")
    ap.add_argument("--dtypes", default="fp32,fp16")
    ap.add_argument("--batches", default="1,64")
    ap.add_argument("--modes", default="eager,graph,compile")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--levels", default="extended",
                    help="optimize levels timed after the model as loaded, one column each (extended is optimize's default)")
    ap.add_argument("--out", default=os.environ.get("OUT", "bench/out"))
    ap.add_argument("--export-only", metavar="DIR", help="only write DIR/MODEL_DTYPE.onnx for each model and dtype")
    ap.add_argument("--tf32", action="store_true",
                    help="float32 rows also with TF32 on both sides: torch.compile with allow_tf32 (matmul and cuDNN) "
                         "and ogsh `set tf32 on` after optimize (two more columns)")
    a = ap.parse_args()
    if a.export_only:
        os.makedirs(a.export_only, exist_ok=True)
        for name in a.models.split(","):
            for dt in a.dtypes.split(","):
                m, shape, kind = build(name, dt)
                export(m, shape, kind, dt, os.path.join(a.export_only, f"{name}_{dt}.onnx"))
                print(f"wrote {a.export_only}/{name}_{dt}.onnx", flush=True)
        return
    os.makedirs(a.out, exist_ok=True)
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    modes = a.modes.split(",")
    levels = [lv for lv in a.levels.split(",") if lv]
    rows = []
    log = open(os.path.join(a.out, "gpu_bench.log"), "a")
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}", flush=True)
    for name in a.models.split(","):
        for dt in a.dtypes.split(","):
            m, shape, kind = build(name, dt)
            path = os.path.join("/tmp", f"{name}_{dt}.onnx")
            export(m, shape, kind, dt, path)
            for b in [int(x) for x in a.batches.split(",")]:
                x = make_input(shape, kind, b, dt)
                t = torch_times(m, x, modes, a.iters)
                r = {"model": name, "dtype": dt, "batch": b, **t}
                r["ogsh"], r["ogsh_err"] = ogsh_time(a.ogsh, path, b, a.iters, None, log)
                for lv in levels:
                    r["ogsh_" + lv], r["ogsh_" + lv + "_err"] = ogsh_time(a.ogsh, path, b, a.iters, lv, log)
                if a.tf32 and dt == "fp32":
                    torch.backends.cuda.matmul.allow_tf32 = True
                    torch.backends.cudnn.allow_tf32 = True
                    r["compile_tf32"] = torch_times(m, x, ["compile"], a.iters).get("compile")
                    torch.backends.cuda.matmul.allow_tf32 = False
                    torch.backends.cudnn.allow_tf32 = False
                    r["ogsh_tf32"], r["ogsh_tf32_err"] = ogsh_time(a.ogsh, path, b, a.iters, levels[0] if levels else None,
                                                                   log, tf32=True)
                rows.append(r)
                print(json.dumps(r), flush=True)
            del m
            torch.cuda.empty_cache()
    with open(os.path.join(a.out, "gpu_bench.json"), "w") as f:
        json.dump(rows, f, indent=1)

    def f(v):
        return "-" if v is None else f"{v:.3f}"
    heads = "".join(" ogsh optimize" + ("" if lv == "extended" else f" --level={lv}") + " |" for lv in levels)
    tf = " torch.compile TF32 | ogsh optimize TF32 |" if a.tf32 else ""
    print("\n| model | dtype | batch | torch eager | torch graph | torch.compile | ogsh |" + heads + tf +
          " ogsh / best torch |")
    print("|---|---|---:|---:|---:|---:|---:|" + "---:|" * len(levels) + ("---:|---:|" if a.tf32 else "") + "---:|")
    for r in rows:
        best = min([v for v in (r.get("graph"), r.get("compile")) if v] or [0])
        mine = r.get("ogsh_" + levels[0]) if levels else r.get("ogsh")
        ratio = f"{mine / best:.2f}" if best and mine else "-"
        print(f"| {r['model']} | {r['dtype']} | {r['batch']} | {f(r.get('eager'))} | {f(r.get('graph'))} | "
              f"{f(r.get('compile'))} | {f(r['ogsh'])} |" + "".join(f" {f(r['ogsh_' + lv])} |" for lv in levels) +
              (f" {f(r.get('compile_tf32'))} | {f(r.get('ogsh_tf32'))} |" if a.tf32 else "") + f" {ratio} |")
    for r in rows:
        for k in ["ogsh_err"] + ["ogsh_" + lv + "_err" for lv in levels] + ["ogsh_tf32_err"]:
            if r.get(k):
                print(f"{r['model']} {r['dtype']} b{r['batch']} {k}: {r[k]}")


if __name__ == "__main__":
    main()
