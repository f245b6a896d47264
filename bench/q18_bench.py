#!/usr/bin/env python3
"""Issue 18's benchmarks and model checks with ogsh (GPU machine).

    q18_bench.py --ogsh 'sh scripts/gpu.sh ogsh' --models DIR --out OUT
                 [--only resnet50,bert,...] [--device cuda] [--quick]
    q18_bench.py --ogsh ... --out OUT --digits

DIR is what bench/q18_models.py wrote (DIR/models.json). For each model,
each stage is made once and saved (DIR/stages/MODEL_STAGE.onnx; a second
run reuses it):
  fp16   optimize; convert-fp16           (the float16 model as exported for
                                           the Llama decoder: optimize only)
  int8   optimize; calibrate --data=MODEL_calib.npy --batch=8; quantize int8
  fp8    as int8 with quantize fp8        (BERT)
  int8h, fp8h  as int8 and fp8 with --keep-float=float16 (what is not
         quantized runs in float16, as TensorRT mixes int8 and fp16)
  int4   optimize; quantize int4          (weight-only, the Llama decoder)
  qdq    optimize                         (onnxruntime's QDQ ResNet-50 as it comes)
then, on the saved stage:
  plan --shape=INPUT=...                  -> OUT/plans/MODEL_STAGE.txt (the islands,
                                           what runs where, the kernels)
  run --device=DEVICE --check=cpu --inputs=MODEL_check.npy   (quantized stages;
                                           `help run`'s tolerance)
  time --batch=B (--shape for the decoder) for each batch
with every log under OUT/logs. Prints a line per step, then the markdown
tables: the check of each quantized stage, and the times (model, stage,
batch, median ms, images or sequences per second, ratio to the model's fp16
stage at the same batch). OUT/q18_bench.json has every figure; the rows of earlier calls on the same
DIR are kept (DIR/q18_bench.json) and reported too, so the work can be
split over calls with --only.

--digits: tests/models/digits' CNN and transformer, calibrated on calib.npy,
quantized int8 (entropy) and fp8, `eval --labels` top-1 on the GPU and on
the CPU reference; the issue wants them within 0.2 points. Prints a table.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', "scripts"))
from ogsh_json import json_objects  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DIGITS = os.path.join(HERE, "..", "tests", "models", "digits")

# per model kind: the stages and the batches (decoder: input shapes)
PLAN = {
    "resnet50": (["fp16", "int8", "int8h"], [1, 64, 256]),
    "mobilenetv2": (["fp16", "int8", "int8h"], [1, 64]),
    "bert": (["fp16", "int8", "int8h", "fp8h"], [1, 64]),
    "llama": (["fp16", "int4"], ["1x1", "1x128"]),
    "resnet50_ort_qdq": (["qdq"], [1, 64, 256]),
    "mobilenetv2_ort_qdq": (["qdq"], [1, 64]),
    "bert_ort_qdq": (["qdq"], [1, 64]),
}
ITERS = {1: (200, 20), 64: (50, 10), 256: (20, 5)}




class Runner:
    def __init__(self, ogsh, out, device):
        self.ogsh, self.out, self.device = shlex.split(ogsh), out, device
        os.makedirs(os.path.join(out, "logs"), exist_ok=True)
        os.makedirs(os.path.join(out, "plans"), exist_ok=True)

    def __call__(self, label, args, script, timeout=300, log=None):
        """runs ogsh ARGS -c SCRIPT; returns (exit status, stdout, stderr); logs it all"""
        t0 = time.time()
        env = dict(os.environ, NO_COLOR="1")
        try:
            p = subprocess.run(self.ogsh + args + ["-c", script], capture_output=True, text=True, timeout=timeout,
                               env=env)
            rc, so, se = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            rc, so, se = 124, (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or ""), \
                f"timed out after {timeout} s"
        dt = time.time() - t0
        path = log or os.path.join(self.out, "logs", label + ".log")
        with open(path, "a") as f:
            f.write(f"$ ogsh {' '.join(shlex.quote(x) for x in args)} -c {shlex.quote(script)}\n"
                    f"# exit {rc}, {dt:.1f} s\n{so}\n{se}\n")
        print(f"  {label}: exit {rc} in {dt:.1f} s" + (f": {last_line(se)}" if rc else ""), flush=True)
        return rc, so, se


def last_line(text):
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def make_stage(run, name, m, stage, stages_dir):
    """the stage saved as a file (made once); returns (path or None, note)"""
    path = os.path.join(stages_dir, f"{name}_{stage}.onnx")
    if os.path.exists(path):
        try:
            return path, open(path + ".note").read()
        except OSError:
            return path, ""
    steps = ["optimize --quiet"]
    if stage == "fp16" and m["dtype"] == "float32":
        steps.append("convert-fp16 --json")
    elif stage in ("int8", "fp8", "int8h", "fp8h"):
        # int8h, fp8h: what is not quantized in float16 (TensorRT's mixed int8 + fp16)
        keep = " --keep-float=float16" if stage.endswith("h") and m["dtype"] == "float32" else ""
        steps += [f"calibrate --data={m['calib']} --batch=8", f"quantize {stage.rstrip('h')}{keep} --json"]
    elif stage == "int4":
        steps.append("quantize int4 --json")
    steps.append(f"save {path} --force")
    rc, so, se = run(f"{name}_{stage}_make", [m["path"]], "; ".join(steps), timeout=420)
    if rc or not os.path.exists(path):
        return None, "making the stage failed: " + last_line(se)
    note = ""
    for o in json_objects(so):
        rep = o.get("report") if isinstance(o.get("report"), dict) else o
        for msg in rep.get("messages", []) if isinstance(rep, dict) else []:
            if msg.get("kind") == "note" and msg.get("node") is None:
                note = msg.get("text", "")
    with open(path + ".note", "w") as f:
        f.write(note)
    return path, note


def shape_of(m, b):
    """the --shape value for batch (or decoder shape) b"""
    if m["kind"] == "decoder":
        return f"{m['input']}={b}"
    if m["kind"] == "image":
        return f"{m['input']}={b}x3x224x224"
    if m["kind"] == "tokens":
        return f"{m['input']}={b}x128"
    return f"{m['input']}={b}x1x8x8"   # the local stand-ins


def bench_stage(run, name, m, stage, path, batches, quick, do_check=True, do_time=True):
    r = {"model": name, "stage": stage, "file": path, "check": None, "times": {}}
    if not do_time:
        batches = batches[:1]
    if m["kind"] == "decoder" and not m.get("dynamic"):
        batches = [b for b in batches if b == "1x1"]
    # the plan at the first batch: the islands, what runs where, the kernels
    plan_file = os.path.join(run.out, "plans", f"{name}_{stage}.txt")
    if run.device == "cuda" and do_check:
        rc, so, se = run(f"{name}_{stage}_plan", [path], f"plan --shape={shape_of(m, batches[0])}")
        with open(plan_file, "w") as f:
            f.write(so + se)
        rc, so, se = run(f"{name}_{stage}_plan", [path], f"plan --shape={shape_of(m, batches[0])} --json")
        pj = next((o for o in json_objects(so) if "nodes" in o and "arena_bytes" in o), None)
        if pj:
            r["plan"] = {k: pj.get(k) for k in ("gpu", "cpu", "folded", "copies", "graph", "graph_why", "nhwc_values")}
            ops = {}
            for n in pj["nodes"]:
                key = (n.get("op"), n.get("where"), n.get("impl") or "-")
                ops[key] = ops.get(key, 0) + 1
            r["plan"]["kernels"] = [f"{k[0]} {k[1]} {k[2]}: {v}" for k, v in sorted(ops.items(), key=lambda kv: -kv[1])]
    cmds = ["set on-error continue"]
    if stage != "fp16" and do_check:
        cmds.append(f"run --device={run.device} --check=cpu --inputs={m['check']} --json")
    for b in (batches if do_time else []):
        it, wu = ITERS.get(b if isinstance(b, int) else 1, (50, 10))
        if quick:
            it, wu = 5, 1
        sh = f"--shape={shape_of(m, b)}" if m["kind"] == "decoder" else f"--batch={b}"
        cmds.append(f"time --device={run.device} {sh} --iters={it} --warmup={wu} --json")
    rc, so, se = run(f"{name}_{stage}_time", [path], "; ".join(cmds), timeout=420)
    objs = json_objects(so)
    cmp = next((o for o in objs if "compared" in o), None)
    if stage != "fp16" and do_check:
        if cmp and cmp.get("compared"):
            c = cmp["compared"][0]
            r["check"] = {"pass": cmp.get("failed", 1) == 0 and cmp.get("missing", 0) == 0,
                          **{k: c.get(k) for k in ("max_abs", "max_rel", "snr_db", "cosine", "bad", "elements",
                                                   "atol", "rtol", "top1", "worst_actual", "worst_expected",
                                                   "quant_snr_db", "within_quant_error")}}
        else:
            r["check"] = {"pass": False, "error": last_line(se) or "no comparison"}
    tj = [o for o in objs if "median_ms" in o]
    for b, t in zip(batches, tj):
        r["times"][str(b)] = {"median_ms": t.get("median_ms"), "p90_ms": t.get("p90_ms"), "graph": t.get("graph")}
    if do_time and len(tj) < len(batches):
        r["time_error"] = last_line(se)
    return r


def bench(a):
    man = json.load(open(os.path.join(a.models, "models.json")))
    stages_dir = os.path.join(a.models, "stages")
    os.makedirs(stages_dir, exist_ok=True)
    run = Runner(a.ogsh, a.out, a.device)
    only = a.only.split(",") if a.only else list(PLAN)
    # the rows of earlier calls (kept with the models: a call's OUT may be new)
    merged = os.path.join(a.models, "q18_bench.json")
    old = json.load(open(merged)) if os.path.exists(merged) else []
    rows = []

    def merge(new):
        """a row of this call over the same row of an earlier one: what this call did not measure is kept"""
        prev = next((r for r in old if (r["model"], r["stage"]) == (new["model"], new["stage"])), None)
        if not prev:
            return new
        out = dict(prev)
        for k, v in new.items():
            if v not in (None, {}, ""):
                out[k] = v
        return out

    def save():
        keep = [r for r in old if (r["model"], r["stage"]) not in {(x["model"], x["stage"]) for x in rows}]
        order = list(PLAN)
        allrows = sorted(keep + rows, key=lambda r: (order.index(r["model"]) if r["model"] in order else 99,
                                                     r["stage"] != "fp16"))
        for f in (merged, os.path.join(a.out, "q18_bench.json")):
            json.dump(allrows, open(f, "w"), indent=1)
        return allrows
    for name in only:
        if name not in man:
            print(f"{name}: not in {a.models}/models.json (the export failed?)", flush=True)
            rows.append({"model": name, "stage": "-", "error": "no model"})
            continue
        m = man[name]
        stages, batches = PLAN[name]
        if a.stages:
            stages = [x for x in a.stages.split(",") if x in stages]
        if a.batches:
            batches = [int(x) if x.isdigit() else x for x in a.batches.split(",")]
        # the stages first (each its own ogsh, on the CPU mostly: --jobs at once)
        import concurrent.futures
        with concurrent.futures.ThreadPoolExecutor(max(1, a.jobs)) as ex:
            made = list(ex.map(lambda st: make_stage(run, name, m, st, stages_dir), stages))
        for stage, (path, note) in zip(stages, made):
            print(f"== {name} {stage}", flush=True)
            if not path:
                rows.append({"model": name, "stage": stage, "error": note})
                continue
            r = bench_stage(run, name, m, stage, path, batches, a.quick, not a.no_check, not a.no_time)
            r["note"] = note
            rows.append(merge(r))
            save()
    report(save(), man)


def report(rows, man):
    def fnum(v, fmt="{:.3f}"):
        if v is None:
            return "-"
        return fmt.format(v) if isinstance(v, (int, float)) else str(v)

    print("\n### run --check=cpu on the quantized stages\n")
    print("| model | stage | result | max abs | SNR dB | bad / elements | tolerance (help run) | plan: gpu / cpu nodes, graph |")
    print("|---|---|---|---:|---:|---:|---|---|")
    for r in rows:
        if r.get("error"):
            print(f"| {r['model']} | {r['stage']} | not made: {r['error'][:120]} | | | | | |")
            continue
        c = r.get("check")
        p = r.get("plan") or {}
        pl = f"{p.get('gpu', '-')} / {p.get('cpu', '-')}, {'graph' if p.get('graph') else 'no graph'}" if p else "-"
        if c is None:
            continue
        if "error" in c:
            print(f"| {r['model']} | {r['stage']} | FAIL: {c['error'][:120]} | | | | | {pl} |")
            continue
        res = 'ok' if c['pass'] else 'FAIL'
        if c.get("quant_snr_db") is not None:
            res += f" (quantization's own SNR {c['quant_snr_db']:.1f} dB)"
        print(f"| {r['model']} | {r['stage']} | {res} | {fnum(c.get('max_abs'), '{:.4g}')} | "
              f"{fnum(c.get('snr_db'), '{:.1f}')} | {c.get('bad')} / {c.get('elements')} | "
              f"atol {fnum(c.get('atol'), '{:.3g}')} rtol {fnum(c.get('rtol'), '{:.3g}')} | {pl} |")
    notes = [r for r in rows if r.get("note") and not r.get("error")]
    if notes:
        print("\nwhat each stage's pass did:")
        for r in notes:
            print(f"- {r['model']} {r['stage']}: {r['note']}")
    print("\n### time (median of the runs, CUDA graph replay when the plan allows)\n")
    print("| model | stage | batch | median ms | images or sequences/s | vs fp16 |")
    print("|---|---|---:|---:|---:|---:|")
    fp16 = {}
    for r in rows:
        if r.get("stage") == "fp16":
            for b, t in r["times"].items():
                fp16[(r["model"], b)] = t["median_ms"]
    for r in rows:
        if r.get("error"):
            continue
        base_model = man.get(r["model"], {}).get("float_of", r["model"])
        for b, t in r["times"].items():
            ms = t["median_ms"]
            nb = int(b.split("x")[0]) if "x" in b else int(b)
            thr = nb / ms * 1000 if ms else None
            base = fp16.get((base_model, b))
            ratio = f"{base / ms:.2f}x" if (base and ms) else "-"
            print(f"| {r['model']} | {r['stage']} | {b} | {fnum(ms)} | {fnum(thr, '{:,.0f}')} | {ratio} |")
        if r.get("time_error"):
            print(f"| {r['model']} | {r['stage']} | error | {r['time_error'][:120]} | | |")


def digits(a):
    run = Runner(a.ogsh, a.out, a.device)
    rows = []
    for m in ("cnn", "transformer"):
        model = os.path.join(DIGITS, f"digits_{m}.onnx")
        for label, q in (("int8 entropy", "quantize int8 --method=entropy"), ("fp8", "quantize fp8")):
            ev = f"eval --data={DIGITS}/test.npy --labels={DIGITS}/test_labels.npy --batch=540 --json"
            script = (f"calibrate --data={DIGITS}/calib.npy --batch=32; {q}; "
                      f"{ev} --device={a.device}; {ev} --device=cpu")
            rc, so, se = run(f"digits_{m}_{label.replace(' ', '_')}", [model], script,
                             log=os.path.join(a.out, "logs", "digits.log"))
            evs = [o for o in json_objects(so) if "top1" in o and "samples" in o]
            g = evs[0]["top1"] if len(evs) > 0 else None
            c = evs[1]["top1"] if len(evs) > 1 else None
            ok = g is not None and c is not None and abs(g - c) <= 0.2 + 1e-9
            rows.append((m, label, g, c, ok, "" if len(evs) == 2 else last_line(se)))
    print(f"\n### digits: top-1 (%) of the quantized stage on {a.device} and on the CPU reference (540 held-out samples)\n")
    print(f"| model | stage | top-1 {a.device} | top-1 cpu | within 0.2 |")
    print("|---|---|---:|---:|---|")
    for m, label, g, c, ok, err in rows:
        f = (lambda v: "-" if v is None else f"{v:.2f}")
        print(f"| digits_{m} | {label} | {f(g)} | {f(c)} | {'ok' if ok else 'FAIL ' + err[:100]} |")
    return 0 if all(r[4] for r in rows) else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ogsh", default="sh scripts/gpu.sh ogsh")
    ap.add_argument("--models", default="/tmp/q18")
    ap.add_argument("--out", default=os.environ.get("OUT", "bench/out"))
    ap.add_argument("--only", help="models, comma-separated (default: all of " + ",".join(PLAN) + ")")
    ap.add_argument("--batches", help="batches instead of each model's own (decoder: 1x1,1x128)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true", help="5 timed runs per batch (to try the script)")
    ap.add_argument("--stages", help="only these of each model's stages, comma-separated")
    ap.add_argument("--jobs", type=int, default=1, help="stages made at once (each an ogsh on the CPU)")
    ap.add_argument("--no-time", action="store_true", help="make, plan and check only")
    ap.add_argument("--no-check", action="store_true", help="time only (the check of an earlier call is kept)")
    ap.add_argument("--digits", action="store_true")
    ap.add_argument("--report", action="store_true", help="only print the tables of DIR/q18_bench.json")
    a = ap.parse_args()
    os.makedirs(os.path.join(a.out, "logs"), exist_ok=True)
    if a.digits:
        return digits(a)
    if a.report:
        report(json.load(open(os.path.join(a.models, "q18_bench.json"))),
               json.load(open(os.path.join(a.models, "models.json"))))
        return 0
    bench(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
