#!/usr/bin/env python3
"""Seed corpus for the calibration cache fuzz target.

    make_calib_seeds.py OUT_DIR

Writes a few valid caches in ogsh's format (ir/calib.c: "ogsh-calib 1"),
with histograms made here from known data the way ir_calib_observe bins
them, per-channel sums and names that need escapes, then mutations of them:
truncations, a wrong bin count, a bad number, a duplicate tensor, a total
that does not add up.
"""
import math
import os
import random
import sys

BINS = 2048


def pow2_ceil(a):
    m, e = math.frexp(a)
    return a if m == 0.5 else math.ldexp(1.0, e)


def quote(s):
    out = ['"']
    for ch in s.encode():
        if ch == 0x22:
            out.append('\\"')
        elif ch == 0x5C:
            out.append("\\\\")
        elif ch == 0x0A:
            out.append("\\n")
        elif ch == 0x09:
            out.append("\\t")
        elif ch < 0x20 or ch == 0x7F:
            out.append("\\x%02x" % ch)
        else:
            out.append(chr(ch) if ch < 0x80 else bytes([ch]).decode("latin-1"))
    out.append('"')
    return "".join(out)


def tensor(name, batches, n_chan=0):
    """The lines of one tensor's statistics over the given batches of floats."""
    flat = [v for b in batches for v in b]
    count = len(flat)
    lines = ["tensor " + quote(name), "count %d" % count, "nonfinite 0", "batches %d" % len(batches)]
    if count == 0:
        mn = mx = emn = emx = hm = 0.0
    else:
        mn, mx = min(flat), max(flat)
        emn, emx = min(batches[0]), max(batches[0])
        for b in batches[1:]:
            emn += 0.01 * (min(b) - emn)
            emx += 0.01 * (max(b) - emx)
        amax = max(abs(mn), abs(mx))
        hm = pow2_ceil(max(amax, 2.0 ** -64)) if amax > 0 else 0.0
    hist = [0] * BINS
    for v in flat:
        k = int(abs(v) * BINS / hm) if hm else 0
        hist[min(k, BINS - 1)] += 1
    lines += ["min %r" % mn, "max %r" % mx, "ema_min %r" % emn, "ema_max %r" % emx, "hist_max %r" % hm]
    nz = [(i, c) for i, c in enumerate(hist) if c]
    lines.append("hist %d %d" % (BINS, len(nz)))
    lines += ["%d %d" % p for p in nz]
    if n_chan:
        rows = count // n_chan
        sums = [0.0] * n_chan
        for r in range(rows):
            for ch in range(n_chan):
                sums[ch] += abs(flat[r * n_chan + ch])
        lines.append("channels %d %d" % (n_chan, rows))
        lines += ["%r" % s for s in sums]
    else:
        lines.append("channels 0 0")
    return lines


def cache(tensors, desc="seed data (64 samples)", random_data=0):
    head = ["ogsh-calib 1", "model_hash 0123456789abcdef", "stage 1", "data_hash -",
            "data_desc " + quote(desc), "random %d" % random_data, "samples 64", "batch 8",
            "tensors %d" % len(tensors)]
    body = [line for t in tensors for line in t]
    return ("\n".join(head + body + ["end"]) + "\n").encode("latin-1")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = random.Random(17)
    # exact binary fractions keep the Python binning identical to the C one
    small = [[(rng.randrange(-64, 64)) / 16.0 for _ in range(16)] for _ in range(3)]
    relu = [[max(0.0, rng.randrange(-100, 100) / 32.0) for _ in range(32)] for _ in range(2)]
    seeds = {
        "empty": cache([]),
        "one": cache([tensor("x", small)]),
        "channels": cache([tensor("conv1_out", relu, n_chan=4), tensor("odd \"name\"\n\\", small)], random_data=1),
        "zeros": cache([tensor("z", [[0.0, 0.0, -0.0]]), tensor("never", [])]),
    }
    valid = seeds["channels"]
    seeds["truncated"] = valid[: len(valid) // 2]
    seeds["bins"] = valid.replace(b"hist 2048", b"hist 2049", 1)
    seeds["number"] = valid.replace(b"count ", b"count x", 1)
    seeds["total"] = valid.replace(b"count ", b"count 9", 1)
    seeds["version"] = valid.replace(b"ogsh-calib 1", b"ogsh-calib 2", 1)
    one = seeds["one"].split(b"tensor ", 1)
    seeds["duplicate"] = one[0].replace(b"tensors 1", b"tensors 2") + b"tensor " + one[1][:-4] + b"tensor " + one[1]
    for name, data in seeds.items():
        with open(os.path.join(out, name + ".cache"), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
