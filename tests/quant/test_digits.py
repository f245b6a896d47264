#!/usr/bin/env python3
"""Accuracy of ogsh's quantization on the trained digits models (issue 17's checks).

usage: test_digits.py OGSH [--table FILE] [-k SUBSTRING]

For the small CNN and the small transformer encoder in tests/models/digits
(trained on scikit-learn's digits, held-out split of 540 samples), ogsh
calibrates on 256 training samples, quantizes or converts, and saves; each
saved model is then
  1. checked by onnx.checker and run by onnxruntime on the held-out digits:
     its top-1 must stay within the issue's margin of the float32 model's
     (int8 entropy 1.0 point, convert-fp16 0.2, fp8 1.0, int4 transformer 1.5);
  2. run by ogsh's CPU reference on the same data (`eval --labels`), which
     must give the same top-1 as onnxruntime within 0.2 points (one sample
     can round the other way: QDQ is a float simulation, and a product may
     land on the other side of a rounding step), and whose logits agree
     with onnxruntime's to an SNR reported in the table;
and onnxruntime's own quantize_static (QDQ, per-channel int8, the same 256
calibration samples, MinMax and Entropy) is run on the same models: ogsh's
int8 model with the same method must be at least as accurate.
Prints one line per check and the accuracy table (markdown, for
bench/RESULTS.md; --table FILE writes it there too). Exit 1 on any failure.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '../..', "scripts"))
from ogsh_json import json_objects  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DIGITS = os.path.join(HERE, "..", "models", "digits")
OGSH = None
FAILED = PASSED = 0
FILTER = None


def check(label, ok, detail=""):
    global FAILED, PASSED
    if ok:
        PASSED += 1
        print(f"ok    {label}" + (f" ({detail})" if detail else ""))
    else:
        FAILED += 1
        print(f"FAIL  {label}" + (f": {detail}" if detail else ""))
    sys.stdout.flush()
    return ok


def ogsh(model, script):
    env = dict(os.environ, OGSH_DEVICE="cpu", NO_COLOR="1")
    r = subprocess.run([OGSH, model, "-c", script], capture_output=True, text=True, env=env, timeout=600)
    return r.returncode, r.stdout, r.stderr




def data():
    x = np.load(os.path.join(DIGITS, "test.npy"))
    y = np.load(os.path.join(DIGITS, "test_labels.npy"))
    return x, y


def ort_logits(path, x, optimize=True):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def top1(logits, y):
    return 100.0 * float((logits.argmax(1) == y).mean())


def snr_db(ref, got):
    ref = ref.astype(np.float64)
    err = np.sum((ref - got.astype(np.float64)) ** 2)
    return float("inf") if err == 0 else 10 * np.log10(np.sum(ref ** 2) / err)


def ogsh_eval_top1(path):
    rc, out, err = ogsh(path, f"eval --data={DIGITS}/test.npy --labels={DIGITS}/test_labels.npy --metric=top1 --json")
    if rc:
        return None, err.strip() or out.strip()
    for o in json_objects(out):
        for k in ("top1", "value"):
            if isinstance(o.get(k), (int, float)):
                return float(o[k]), ""
    return None, "no top1 in eval --json: " + out[:300]


def ort_quantize(src, dst, method):
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)
    xc = np.load(os.path.join(DIGITS, "calib.npy"))

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.i = 0

        def get_next(self):
            if self.i >= len(xc):
                return None
            b = xc[self.i:self.i + 32]
            self.i += 32
            return {"x": b}

    quantize_static(src, dst, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                    calibrate_method=getattr(CalibrationMethod, method))


# (label, ogsh commands after calibration, allowed top-1 loss, model kinds)
CASES = [
    ("int8 max", "quantize int8 --method=max", 1.0, ("cnn", "transformer")),
    ("int8 percentile", "quantize int8 --method=percentile", 1.0, ("cnn", "transformer")),
    ("int8 entropy", "quantize int8 --method=entropy", 1.0, ("cnn", "transformer")),
    ("int8 mse", "quantize int8 --method=mse", 1.0, ("cnn", "transformer")),
    ("int8 entropy, rest float16", "quantize int8 --method=entropy --keep-float=float16", 1.0, ("cnn", "transformer")),
    ("fp8", "quantize fp8", 1.0, ("cnn", "transformer")),
    ("float16", "convert-fp16", 0.2, ("cnn", "transformer")),
    ("bfloat16", "convert-bf16", 1.0, ("cnn", "transformer")),
    ("int4 weights", "quantize int4", 1.5, ("transformer",)),
    ("int4 weights awq", "quantize int4 --awq", 1.5, ("transformer",)),
]
ORT_METHODS = {"MinMax": "int8 max", "Entropy": "int8 entropy"}


def main():
    global OGSH, FILTER
    args = sys.argv[1:]
    table_file = None
    if "--table" in args:
        i = args.index("--table")
        table_file = args[i + 1]
        del args[i:i + 2]
    if "-k" in args:
        i = args.index("-k")
        FILTER = args[i + 1]
        del args[i:i + 2]
    OGSH = os.path.abspath(args[0])
    x, y = data()
    rows = []
    tmp = tempfile.mkdtemp(prefix="ogsh-digits-")
    for kind in ("cnn", "transformer"):
        src = os.path.join(DIGITS, f"digits_{kind}.onnx")
        lf = ort_logits(src, x)
        base = top1(lf, y)
        rows.append((kind, "float32 (as exported)", base, None, None, "", "", ""))
        acc, fid = {}, {}
        for label, cmd, margin, kinds in CASES:
            if kind not in kinds or (FILTER and FILTER not in f"{kind} {label}"):
                continue
            out = os.path.join(tmp, f"{kind}-{label.replace(' ', '_')}.onnx")
            calib = f"calibrate --data={DIGITS}/calib.npy --batch=32 --device=cpu; " if "convert" not in cmd else ""
            rc, so, se = ogsh(src, f"{calib}{cmd}; save {out} --force")
            if not check(f"{kind} {label}: ogsh made it", rc == 0 and os.path.exists(out), (se or so).strip()[-400:]):
                continue
            try:
                onnx.checker.check_model(onnx.load(out), full_check=True)
                check(f"{kind} {label}: onnx.checker", True)
            except Exception as e:  # noqa: BLE001
                check(f"{kind} {label}: onnx.checker", False, str(e)[:300])
            # onnxruntime 1.31's CPU provider: its QDQ fusions turn float8 Q/DQ
            # around Conv/MatMul into QLinearConv/MatMulIntegerToFloat, which
            # take no float8 (the model is valid: onnx.checker passed), and
            # on int8 QDQ with float16 scales they lose accuracy (the digits
            # CNN: 22.7 dB against float32 optimized, 40.5 dB not), so both
            # run with graph optimizations off; it has no bfloat16
            # Conv/MatMul/Add kernels, so bfloat16 accuracy is ogsh's own run.
            note = ""
            lq = None
            plain = "fp8" in label or "rest float16" in label
            try:
                lq = ort_logits(out, x, optimize=not plain)
                if plain:
                    note = "onnxruntime without graph optimizations"
            except Exception as e:  # noqa: BLE001
                if "bfloat16" not in label:
                    check(f"{kind} {label}: onnxruntime runs it", False, str(e)[:300])
                    continue
                note = "onnxruntime has no CPU bfloat16 kernels: top-1 by ogsh"
            og, why = ogsh_eval_top1(out)
            check(f"{kind} {label}: ogsh eval runs", og is not None, why)
            if lq is None:
                if og is None:
                    continue
                a = og
                acc[label] = a
                check(f"{kind} {label}: top-1 {a:.2f} (ogsh) within {margin} of float {base:.2f}",
                      a >= base - margin - 1e-9)
                rows.append((kind, f"ogsh {label}", a, a - base + 0.0, og, "-", "-", note))
                continue
            a = top1(lq, y)
            acc[label] = a
            fid[label] = snr_db(lf, lq)
            check(f"{kind} {label}: top-1 {a:.2f} within {margin} of float {base:.2f}", a >= base - margin - 1e-9)
            if og is not None:
                check(f"{kind} {label}: ogsh's top-1 {og:.2f} = onnxruntime's {a:.2f} (within 0.2)",
                      abs(og - a) <= 0.2 + 1e-9)
            # ogsh's CPU logits against onnxruntime's, on the first 64 samples
            xin = os.path.join(tmp, "x64.npy")
            np.save(xin, x[:64])
            lo = os.path.join(tmp, "ogsh-out.npz")
            rc, so, se = ogsh(out, f"run --inputs={xin} --save-outputs={lo}")
            snr = None
            if rc == 0 and os.path.exists(lo):
                z = np.load(lo)
                snr = snr_db(lq[:64], z[z.files[0]])
                check(f"{kind} {label}: ogsh's CPU logits agree with onnxruntime's (SNR {snr:.1f} dB >= 30)",
                      snr >= 30)
            else:
                check(f"{kind} {label}: ogsh runs the saved model", False, (se or so).strip()[-300:])
            rows.append((kind, f"ogsh {label}", a, a - base, og, f"{fid[label]:.1f}",
                         f"{snr:.1f}" if snr is not None else "-", note))
        for m, ours in ORT_METHODS.items():
            if FILTER and FILTER not in f"{kind} {ours}":
                continue
            dst = os.path.join(tmp, f"{kind}-ort-{m}.onnx")
            try:
                ort_quantize(src, dst, m)
            except Exception as e:  # noqa: BLE001
                check(f"{kind} onnxruntime quantize_static {m}", False, str(e)[:300])
                continue
            lo = ort_logits(dst, x)
            a, f_ort = top1(lo, y), snr_db(lf, lo)
            rows.append((kind, f"onnxruntime quantize_static int8 {m}", a, a - base, None, f"{f_ort:.1f}", "", ""))
            if ours in acc:
                # One held-out sample is 0.19 points. A quantized model can
                # beat float32 by flipping a sample float32 gets wrong on a
                # thin margin; that is noise, not accuracy, so onnxruntime's
                # top-1 counts at most float32's. Fidelity to float32 (SNR
                # of the logits) is checked too: it is what a quantizer decides.
                bar = min(a, base)
                check(f"{kind} {ours}: ogsh {acc[ours]:.2f} >= onnxruntime {m} {a:.2f}"
                      + (f" (float32 {base:.2f})" if a > base else ""), acc[ours] >= bar - 1e-9)
                check(f"{kind} {ours}: ogsh's logits as close to float32's as onnxruntime {m}'s "
                      f"(SNR {fid[ours]:.1f} dB vs {f_ort:.1f} dB)", fid[ours] >= f_ort - 1.0)
    lines = ["| model | precision | top-1 (onnxruntime) | vs float32 | top-1 (ogsh eval, CPU) | "
             "logits SNR vs float32 (dB) | logits SNR ogsh vs onnxruntime (dB) | note |",
             "|---|---|---:|---:|---:|---:|---:|---|"]
    for kind, what, a, dlt, og, fsnr, snr, note in rows:
        lines.append(f"| digits {kind} | {what} | {a:.2f} | {'' if dlt is None else f'{round(dlt, 6) + 0.0:+.2f}'} | "
                     f"{'' if og is None else f'{og:.2f}'} | {fsnr} | {snr} | {note} |")
    print("\n".join(lines))
    if table_file:
        with open(table_file, "w") as f:
            f.write("\n".join(lines) + "\n")
    print(f"{PASSED} passed, {FAILED} failed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
