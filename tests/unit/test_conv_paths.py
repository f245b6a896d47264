#!/usr/bin/env python3
"""The CPU Conv, ConvTranspose, MatMul, Gemm and MaxPool paths against numpy (float64).

    test_conv_paths.py OGSH

One model holds many independent nodes: convolutions that take each of the
CPU's paths (1x1 stride 1 without im2col, im2col bands, grouped, the
direct depthwise kernel at stride 1 and 2 with row widths around the
16-float vector, Winograd's F(2x2, 3x3) for 3x3 stride-1 convs with odd
and even outputs and pads, dilations, asymmetric pads, 1-D and 3-D), ConvTranspose,
batched and broadcast MatMul (matrix-vector included) and Gemm with
transposes and one or two rows, and MaxPool (the register kernel at stride
1 and 2 and the loop it stands in for, with NaNs, pads, dilations and
ceil_mode; compared exactly). It runs once per instruction set
(OGSH_CPU_ISA=generic, avx2, avx512; a cap above the CPU's runs its best)
and every output is compared with a plain float64 computation.
"""
import itertools
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(7)


def conv_ref(x, w, b, strides, pads, dil, group):
    nd = x.ndim - 2
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    pw = [(0, 0), (0, 0)] + [(pads[i], pads[nd + i]) for i in range(nd)]
    xp = np.pad(x, pw)
    ks = w.shape[2:]
    out = [(xp.shape[2 + i] - (dil[i] * (ks[i] - 1) + 1)) // strides[i] + 1 for i in range(nd)]
    n, c = x.shape[:2]
    m = w.shape[0]
    cg, mg = c // group, m // group
    y = np.zeros((n, m, *out))
    for gi in range(group):
        xs = xp[:, gi * cg:(gi + 1) * cg]
        ws = w[gi * mg:(gi + 1) * mg]
        for tap in itertools.product(*[range(k) for k in ks]):
            sl = tuple(slice(tap[i] * dil[i], tap[i] * dil[i] + strides[i] * (out[i] - 1) + 1, strides[i])
                       for i in range(nd))
            patch = xs[(slice(None), slice(None)) + sl]          # n, cg, out...
            wt = ws[(slice(None), slice(None)) + tap]            # mg, cg
            y[:, gi * mg:(gi + 1) * mg] += np.einsum("nc...,mc->nm...", patch, wt)
    if b is not None:
        y += b.astype(np.float64).reshape((1, m) + (1,) * nd)
    return y


def convt_ref(x, w, b, strides, pads, group):
    """ConvTranspose, no dilation: scatter each input position."""
    nd = x.ndim - 2
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    n, c = x.shape[:2]
    mg = w.shape[1]
    m = mg * group
    cg = c // group
    ks = w.shape[2:]
    full = [strides[i] * (x.shape[2 + i] - 1) + ks[i] for i in range(nd)]
    y = np.zeros((n, m, *full))
    for gi in range(group):
        for tap in itertools.product(*[range(k) for k in ks]):
            sl = tuple(slice(tap[i], tap[i] + strides[i] * (x.shape[2 + i] - 1) + 1, strides[i]) for i in range(nd))
            wt = w[(slice(gi * cg, (gi + 1) * cg), slice(None)) + tap]   # cg, mg
            y[(slice(None), slice(gi * mg, (gi + 1) * mg)) + sl] += np.einsum(
                "nc...,cm->nm...", x[:, gi * cg:(gi + 1) * cg], wt)
    y = y[(slice(None), slice(None)) + tuple(slice(pads[i], full[i] - pads[nd + i]) for i in range(nd))]
    if b is not None:
        y += b.astype(np.float64).reshape((1, m) + (1,) * nd)
    return y


def maxpool_ref(x, ks, strides, pads, dil, ceil):
    """MaxPool's rule in ogsh: the max of the taps inside the input that are
    not NaN, NaN when every such tap is NaN, -inf when none is inside."""
    nd = x.ndim - 2
    sp = x.shape[2:]
    rnd = (lambda a, b: -(-a // b)) if ceil else (lambda a, b: a // b)
    out = []
    for i in range(nd):
        o = rnd(sp[i] + pads[i] + pads[nd + i] - dil[i] * (ks[i] - 1) - 1, strides[i]) + 1
        if ceil and (o - 1) * strides[i] >= sp[i] + pads[i]:
            o -= 1
        out.append(o)
    y = np.full(x.shape[:2] + tuple(out), -np.inf)
    have = np.zeros(y.shape, bool)
    for o in itertools.product(*[range(v) for v in out]):
        for tap in itertools.product(*[range(k) for k in ks]):
            pos = [o[i] * strides[i] - pads[i] + tap[i] * dil[i] for i in range(nd)]
            if any(p_ < 0 or p_ >= sp[i] for i, p_ in enumerate(pos)):
                continue
            v = x[(slice(None), slice(None)) + tuple(pos)].astype(np.float64)
            cur = y[(slice(None), slice(None)) + o]
            h = have[(slice(None), slice(None)) + o]
            take = ~h | np.isnan(cur) | (v > cur)
            y[(slice(None), slice(None)) + o] = np.where(take, v, cur)
            have[(slice(None), slice(None)) + o] = True
    return y


def main():
    ogsh = sys.argv[1]
    nodes, inits, inputs, outputs, feeds, want = [], [], [], [], {}, {}

    def add(op, ins, ref, exact=False, **attrs):
        k = len(nodes)
        names = []
        for j, a in enumerate(ins):
            if a is None:
                names.append("")
                continue
            nm = f"n{k}_i{j}"
            names.append(nm)
            if j == 0:
                inputs.append(helper.make_tensor_value_info(nm, TensorProto.FLOAT, a.shape))
                feeds[nm] = a
            else:
                inits.append(numpy_helper.from_array(a, nm))
        o = f"n{k}_out"
        nodes.append(helper.make_node(op, names, [o], name=f"n{k}_{op}", **attrs))
        outputs.append(helper.make_tensor_value_info(o, TensorProto.FLOAT, None))
        want[o] = (ref, f"{op} {[None if a is None else a.shape for a in ins]} {attrs}", exact)

    def conv(n, c, m, spatial, ks, strides=None, pads=None, dil=None, group=1, bias=True):
        nd = len(spatial)
        strides = strides or [1] * nd
        pads = pads or [0] * (2 * nd)
        dil = dil or [1] * nd
        x = RNG.standard_normal((n, c, *spatial)).astype(np.float32)
        w = RNG.standard_normal((m, c // group, *ks)).astype(np.float32)
        b = RNG.standard_normal(m).astype(np.float32) if bias else None
        add("Conv", [x, w, b] if bias else [x, w], conv_ref(x, w, b, strides, pads, dil, group),
            strides=strides, pads=pads, dilations=dil, group=group)

    # 1x1 stride 1 (the image is the GEMM's B), odd sizes
    conv(1, 5, 7, [9, 11], [1, 1])
    conv(2, 16, 33, [7, 7], [1, 1], bias=False)
    conv(1, 3, 13, [1, 1], [1, 1])
    # few positions, channels in vectors: computed transposed (K over one block and several)
    conv(1, 240, 64, [7, 7], [1, 1])
    conv(2, 280, 96, [5, 5], [1, 1], bias=False)
    conv(1, 300, 80, [4, 10], [1, 1])
    conv(1, 32, 64, [7, 7], [3, 3], pads=[1, 1, 1, 1])                 # from an im2col matrix
    conv(1, 300, 64, [13, 14], [1, 1], strides=[2, 2])
    conv(2, 64, 128, [8, 7], [3, 3], strides=[1, 1], pads=[0, 1, 1, 1], group=2)
    # 1x1 with stride or pads: im2col
    conv(1, 8, 12, [9, 9], [1, 1], strides=[2, 2])
    conv(1, 4, 6, [5, 6], [1, 1], pads=[1, 0, 0, 2])
    # 3x3, 7x7 stride 2, dilations, asymmetric pads, K = 1 (one channel, 1x1 taps)
    conv(1, 3, 17, [23, 19], [7, 7], strides=[2, 2], pads=[3, 3, 3, 3])
    conv(2, 6, 10, [12, 13], [3, 3], pads=[1, 1, 1, 1])
    conv(1, 4, 9, [14, 15], [3, 2], strides=[1, 2], pads=[2, 0, 1, 1], dil=[2, 3])
    conv(1, 1, 3, [8, 8], [1, 1])
    conv(1, 64, 40, [14, 14], [3, 3], pads=[1, 1, 1, 1])   # K = 576, several KC blocks
    # 3x3 stride 1 with 32+ channels both ways (Winograd F(2x2, 3x3)): odd
    # and even outputs, rows of tiles past 16, pads none, asymmetric and
    # wider than 1, two images, several KC blocks of channels
    conv(1, 32, 32, [8, 8], [3, 3], pads=[1, 1, 1, 1])
    conv(2, 40, 33, [11, 9], [3, 3], pads=[1, 1, 1, 1])
    conv(1, 35, 48, [12, 45], [3, 3])
    conv(1, 64, 36, [10, 13], [3, 3], pads=[0, 1, 2, 1], bias=False)
    conv(1, 33, 40, [9, 10], [3, 3], pads=[2, 2, 2, 2])
    conv(1, 300, 64, [9, 8], [3, 3], pads=[1, 1, 1, 1])
    # an infinity and a NaN in the input of a conv Winograd would take: the
    # infinity must reach only the outputs that read it (the direct product)
    x = RNG.standard_normal((1, 32, 10, 10)).astype(np.float32)
    x[0, 3, 4, 5] = np.inf
    x[0, 7, 8, 1] = np.nan
    w = RNG.standard_normal((32, 32, 3, 3)).astype(np.float32)
    w[:, 3] = np.abs(w[:, 3])   # the infinity times positive weights: +inf, not inf - inf
    b = RNG.standard_normal(32).astype(np.float32)
    add("Conv", [x, w, b], conv_ref(x, w, b, [1, 1], [1, 1, 1, 1], [1, 1], 1), strides=[1, 1], pads=[1, 1, 1, 1])
    # groups: 2 groups, and a grouped conv that is not depthwise
    conv(1, 8, 12, [10, 10], [3, 3], pads=[1, 1, 1, 1], group=2)
    conv(2, 12, 6, [9, 7], [3, 3], strides=[2, 1], group=3)
    # depthwise (the direct kernel): widths around 16, strides 1 and 2, pads, dilation, multiplier 2
    for w_ in (1, 7, 15, 16, 17, 33, 56):
        conv(1, 6, 6, [9, w_], [3, 3], pads=[1, 1, 1, 1], group=6)
        conv(1, 6, 6, [9, w_], [3, 3], strides=[2, 2], pads=[1, 1, 1, 1], group=6)
    # the 3x3 kernel's row steps (4, 2, 1 rows), two narrow planes a vector (an odd count: one alone)
    for h_, w_ in ((10, 8), (11, 6), (13, 14), (7, 3)):
        conv(1, 5, 5, [h_, w_], [3, 3], pads=[1, 1, 1, 1], group=5)
        conv(1, 5, 5, [h_, w_], [3, 3], strides=[2, 2], pads=[1, 1, 1, 1], group=5)
        conv(1, 3, 3, [h_, w_], [3, 3], group=3, bias=False)
        conv(1, 3, 3, [h_, w_ + 2], [3, 3], strides=[2, 2], pads=[0, 1, 2, 1], group=3)
    conv(2, 4, 4, [11, 20], [5, 5], pads=[2, 2, 2, 2], group=4)
    conv(1, 4, 4, [11, 20], [3, 3], strides=[2, 2], pads=[0, 1, 2, 0], group=4, bias=False)
    conv(1, 4, 4, [12, 21], [3, 3], pads=[2, 2, 2, 2], dil=[2, 2], group=4)
    conv(1, 3, 6, [10, 18], [3, 3], pads=[1, 1, 1, 1], group=3)
    conv(1, 5, 5, [6, 40], [1, 7], strides=[1, 3], pads=[0, 3, 0, 3], group=5)
    # 1-D and 3-D
    conv(2, 3, 5, [17], [3], strides=[2], pads=[1, 2])
    conv(1, 4, 4, [20], [3], pads=[1, 1], group=4)
    conv(1, 2, 3, [5, 6, 7], [3, 2, 3], pads=[1, 0, 1, 1, 1, 0])

    # ConvTranspose through cpu_sgemm (transposed A)
    for (n, c, m, sp, ks, st, pd, g) in [(1, 4, 3, [5, 6], [3, 3], [2, 2], [1, 1, 1, 1], 1),
                                         (2, 6, 4, [4, 7], [2, 3], [1, 2], [0, 1, 0, 0], 2),
                                         (1, 3, 5, [9], [4], [3], [1, 2], 1)]:
        x = RNG.standard_normal((n, c, *sp)).astype(np.float32)
        w = RNG.standard_normal((c, m // g, *ks)).astype(np.float32)
        b = RNG.standard_normal(m).astype(np.float32)
        add("ConvTranspose", [x, w, b], convt_ref(x, w, b, st, pd, g), strides=st, pads=pd, group=g)

    # MatMul: batched, broadcast, shared weights, matrix-vector, one row
    for sa, sb in [((3, 17, 33), (3, 33, 9)), ((2, 1, 5, 7), (3, 7, 40)), ((4, 13, 70), (70, 31)),
                   ((5, 21, 19), (19,)), ((19,), (19, 45)), ((2, 3, 8, 16), (2, 3, 16, 1)),
                   ((1, 2, 100), (100, 37)), ((130, 300), (300, 70))]:
        a = RNG.standard_normal(sa).astype(np.float32)
        b = RNG.standard_normal(sb).astype(np.float32)
        add("MatMul", [a, b], np.matmul(a.astype(np.float64), b.astype(np.float64)))
    # Gemm: transposes, one and two rows (the unpacked path), bias broadcast
    for m, k, n, ta, tb in [(1, 50, 33, 0, 1), (2, 50, 33, 1, 0), (2, 17, 40, 1, 1), (1, 300, 1000, 0, 0),
                            (9, 31, 45, 1, 1), (40, 3, 70, 0, 1)]:
        a = RNG.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
        b = RNG.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
        c = RNG.standard_normal(n).astype(np.float32)
        ref = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64) * 0.5 + 2.0 * c
        add("Gemm", [a, b, c], ref, transA=ta, transB=tb, alpha=0.5, beta=2.0)

    # MaxPool: widths around the 16-lane blocks, strides 1, 2 (the register
    # kernel) and 3, pads, dilation, ceil_mode, kernels 1 to 7 wide; NaNs and
    # zeros of both signs in the input; 1-D and 3-D take the general loop
    def maxpool(shape, ks, strides=None, pads=None, dil=None, ceil=0):
        nd = len(ks)
        strides = strides or [1] * nd
        pads = pads or [0] * (2 * nd)
        dil = dil or [1] * nd
        x = RNG.standard_normal(shape).astype(np.float32)
        x[RNG.random(shape) < 0.05] = np.nan
        x[RNG.random(shape) < 0.05] = 0.0
        x[RNG.random(shape) < 0.05] = -0.0
        add("MaxPool", [x], maxpool_ref(x, ks, strides, pads, dil, ceil), exact=True, kernel_shape=ks,
            strides=strides, pads=pads, dilations=dil, ceil_mode=ceil)

    for w_ in (1, 7, 15, 16, 17, 31, 33, 56, 112):
        maxpool((1, 3, 9, w_), [3, 3], [2, 2], [1, 1, 1, 1])
        maxpool((1, 2, 7, w_), [3, 3], [1, 1], [1, 1, 1, 1])
    maxpool((2, 2, 12, 13), [2, 2], [2, 2], ceil=1)
    maxpool((1, 2, 11, 20), [3, 5], [2, 1], [0, 2, 2, 1], dil=[2, 1])
    maxpool((1, 2, 10, 19), [3, 3], [1, 2], [1, 1, 1, 1], dil=[1, 2], ceil=1)
    maxpool((1, 2, 13, 40), [1, 7], [1, 3], [0, 3, 0, 3])
    maxpool((1, 2, 6, 6), [1, 1])
    maxpool((1, 1, 5, 5), [3, 3], [2, 2], [2, 2, 2, 2])   # windows reaching past the input
    maxpool((2, 3, 17), [3], [2], [1, 1])
    maxpool((1, 2, 5, 6, 7), [3, 2, 3], [2, 1, 2], [1, 0, 1, 1, 1, 0])
    x = np.full((1, 1, 4, 20), np.nan, np.float32)
    add("MaxPool", [x], maxpool_ref(x, [2, 2], [2, 2], [0] * 4, [1, 1], 0), exact=True, kernel_shape=[2, 2],
        strides=[2, 2])

    graph = helper.make_graph(nodes, "conv_paths", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    failures, worst = 0, 0.0
    with tempfile.TemporaryDirectory() as tmp:
        mp, ip = os.path.join(tmp, "m.onnx"), os.path.join(tmp, "in.npz")
        onnx.save(model, mp)
        np.savez(ip, **feeds)
        for isa in ("generic", "avx2", "avx512"):
            op = os.path.join(tmp, f"out_{isa}.npz")
            env = dict(os.environ, OGSH_CPU_ISA=isa)
            p = subprocess.run([ogsh, mp, "-c", f"run --inputs={ip} --save-outputs={op}"], env=env,
                               capture_output=True, text=True)
            if p.returncode:
                print(f"{isa}: ogsh failed:\n{p.stdout}{p.stderr}", file=sys.stderr)
                failures += 1
                continue
            got = np.load(op)
            for name, (ref, what, exact) in want.items():
                y = got[name].astype(np.float64)
                if y.shape != ref.shape:
                    print(f"{isa}: {what}: shape {y.shape}, want {ref.shape}", file=sys.stderr)
                    failures += 1
                    continue
                if exact:
                    if not np.array_equal(y, ref, equal_nan=True):
                        bad = int(np.sum(~((y == ref) | (np.isnan(y) & np.isnan(ref)))))
                        print(f"{isa}: {what}: {bad} elements differ", file=sys.stderr)
                        failures += 1
                    continue
                # NaNs and infinities where the reference has them, the
                # rest within the tolerance
                fin = np.isfinite(ref)
                if not (np.array_equal(np.isnan(y), np.isnan(ref)) and np.array_equal(y[np.isinf(ref)],
                                                                                    ref[np.isinf(ref)])):
                    print(f"{isa}: {what}: NaNs or infinities not where they belong", file=sys.stderr)
                    failures += 1
                    continue
                err = np.abs(y[fin] - ref[fin])
                worst = max(worst, float(err.max()) if err.size else 0.0)
                tol = 1e-4 * (1 + np.abs(ref[fin]))
                if not np.all(err <= tol):
                    print(f"{isa}: {what}: max abs error {err.max():.3g}", file=sys.stderr)
                    failures += 1
        print(f"test_conv_paths: {len(want)} nodes x 3 instruction sets, largest error {worst:.3g}, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
