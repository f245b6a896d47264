#!/usr/bin/env python3
"""Which GPU kernels PyTorch runs for a benchmark model, and for how long.

    torch_kernels.py [--model mobilenetv2] [--dtype fp32] [--batch 64]
                     [--mode eager|compile] [--iters 20] [--top 25]

Runs on the GPU machine. Builds the model as bench/gpu_bench.py does (same
settings: cudnn.benchmark on, TF32 off), warms it up, then records ITERS
forward passes with torch.profiler and prints the GPU kernels grouped by
name: calls per pass, microseconds per pass, share. The counterpart of
ogsh's `profile` when a row of the benchmark is behind: it shows which
library calls and kernels the faster side spends its time in.
"""
import argparse
import collections
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_bench import build, make_input  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="mobilenetv2")
    ap.add_argument("--dtype", default="fp32")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--mode", default="eager", choices=["eager", "compile"])
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    m, shape, kind = build(a.model, a.dtype)
    x = make_input(shape, kind, a.batch, a.dtype)
    with torch.inference_mode():
        f = torch.compile(m) if a.mode == "compile" else m
        for _ in range(10):
            f(x)
        torch.cuda.synchronize()
        acts = [torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=acts) as prof:
            for _ in range(a.iters):
                f(x)
            torch.cuda.synchronize()
    per = collections.defaultdict(lambda: [0, 0.0])
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            k = per[e.name]
            k[0] += 1
            k[1] += e.device_time
    total = sum(v[1] for v in per.values()) / a.iters
    print(f"{a.model} {a.dtype} batch {a.batch} {a.mode}: GPU kernel time {total / 1000:.3f} ms a pass "
          f"({torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()})")
    print(f"{'calls':>6} {'us/pass':>9} {'share':>6}  kernel")
    for name, (n, us) in sorted(per.items(), key=lambda kv: -kv[1][1])[:a.top]:
        print(f"{n / a.iters:6.1f} {us / a.iters:9.1f} {100 * us / a.iters / total:5.1f}%  {name[:110]}")


if __name__ == "__main__":
    main()
