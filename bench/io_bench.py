#!/usr/bin/env python3
"""Load/save benchmark: ogsh against the onnx Python package, on one model.

One run does everything:
  1. generates the GPT-style model with make_gpt.py into --dir (reused if there);
  2. reads the file once so that its pages are in the page cache (both sides warm);
  3. times, each in a fresh process, one warm-up and then --repeat runs of
       ogsh load   ogsh -c 'set timer on; load FILE'            (the load command's time: line)
       onnx load   python: t = perf_counter(); onnx.load(FILE)
       ogsh save   ogsh -c 'load FILE; set timer on; save OUT'  (the save command's time: line)
       onnx save   python: m = onnx.load(FILE); onnx.save(m, OUT), then fsync(OUT) and its
                   folder, timed separately (ogsh's save fsyncs the file and the folder)
     interleaved (ogsh, onnx, ogsh, onnx, ...), and takes the median; ogsh's load, which is
     near the 1 ms resolution of its timer, also as 20 loads in one process;
  4. peak RSS of each process from wait4() (ru_maxrss: the process's own high-water mark,
     startup and teardown included);
  5. a probe that reads /proc/PID/status after each operation (anonymous vs file-backed RSS);
  6. checks the saved files: onnx.checker, onnx.load(saved) == onnx.load(original) (protobuf
     equality), byte identity with the original.
It prints a table and writes DIR/results.json.

Before every save the target is removed and os.sync() is called (untimed), so that no save
pays for the writeback of an earlier one.
"""
import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MB = 1e6   # figures are in MB = 10^6 bytes
LOADS_IN_ONE = 20

ONNX_LOAD = r"""
import json, sys, time
import onnx
path = sys.argv[1]
t0 = time.perf_counter()
m = onnx.load(path)
t1 = time.perf_counter()
print(json.dumps({"t": t1 - t0, "nodes": len(m.graph.node)}))
"""

ONNX_SAVE = r"""
import json, os, sys, time
import onnx
src, dst = sys.argv[1], sys.argv[2]
m = onnx.load(src)
t0 = time.perf_counter()
onnx.save(m, dst)
t1 = time.perf_counter()
fd = os.open(dst, os.O_RDONLY)
os.fsync(fd)
os.close(fd)
fd = os.open(os.path.dirname(os.path.abspath(dst)), os.O_RDONLY | os.O_DIRECTORY)
os.fsync(fd)
os.close(fd)
t2 = time.perf_counter()
print(json.dumps({"t": t1 - t0, "t_fsync": t2 - t0}))
"""

ONNX_PROBE = r"""
import json, os, sys, time
import onnx
src, dst = sys.argv[1], sys.argv[2]
def status():
    d = {}
    for line in open("/proc/self/status"):
        k, _, v = line.partition(":")
        if k in ("VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem"):
            d[k] = int(v.split()[0]) * 1024
    return d
r = {"idle": status()}
m = onnx.load(src)
r["after load"] = status()
onnx.save(m, dst)
r["after save"] = status()
print(json.dumps(r))
"""

CHECK = r"""
import filecmp, json, os, sys
import onnx
orig = sys.argv[1]
a = onnx.load(orig)
res = {}
for tag, path in zip(sys.argv[2::2], sys.argv[3::2]):
    r = {"size": os.path.getsize(path)}
    try:
        onnx.checker.check_model(path)
        r["checker"] = True
    except Exception as e:
        r["checker"] = False
        r["checker_error"] = str(e)[:500]
    b = onnx.load(path)
    r["proto_equal"] = bool(a == b)
    if not r["proto_equal"]:
        diff = [f.name for f in a.DESCRIPTOR.fields if getattr(a, f.name) != getattr(b, f.name)]
        if "graph" in diff:
            diff += ["graph." + f.name for f in a.graph.DESCRIPTOR.fields
                     if getattr(a.graph, f.name) != getattr(b.graph, f.name)]
        r["differs_in"] = diff
    del b
    r["byte_identical"] = filecmp.cmp(orig, path, shallow=False)
    res[tag] = r
print(json.dumps(res))
"""


LAST_CPU = {}   # user/sys CPU seconds of the last process run_proc ran


def run_proc(argv, stdin=subprocess.DEVNULL):
    """Runs argv; returns (rc, stdout, stderr, wall seconds, peak RSS bytes of that process)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, stdin=stdin, stdout=out, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        LAST_CPU.update(user=ru.ru_utime, sys=ru.ru_stime)
        out.seek(0)
        err.seek(0)
        return (p.returncode, out.read().decode(errors="replace"), err.read().decode(errors="replace"),
                wall, ru.ru_maxrss * 1024)


def check_rc(what, rc, out, err):
    if rc != 0:
        sys.exit(f"io_bench: {what} failed (exit {rc}):\n{out}{err}")


def ogsh_quote(path):
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


TIME_RE = re.compile(r"^time: ([0-9.]+) s$", re.M)


def ogsh_time(err):
    """The time: line of the last command (the one after 'set timer on')."""
    times = TIME_RE.findall(err)
    if not times:
        sys.exit(f"io_bench: no 'time:' line in ogsh's stderr:\n{err}")
    return float(times[-1])


def warm(path):
    """Reads the file once: afterwards its pages are in the page cache."""
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while f.read(16 << 20):
            pass
    return time.perf_counter() - t0


def cached_fraction(path):
    """Fraction of the file in the page cache, from fincore (None if unavailable)."""
    try:
        out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES,SIZE", path],
                             capture_output=True, text=True, check=True).stdout.split()
        return int(out[0]) / max(1, int(out[1]))
    except (OSError, subprocess.CalledProcessError, ValueError, IndexError):
        return None


def remove(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class Op:
    def __init__(self, name):
        self.name = name
        self.times = []      # in-process time of the operation
        self.walls = []      # whole process, start to exit
        self.rss = []        # peak RSS of the process
        self.extra = {}      # name -> list of further times

    def add(self, t, wall, rss, **extra):
        extra = dict(extra, cpu_user=LAST_CPU["user"], cpu_sys=LAST_CPU["sys"])
        self.times.append(t)
        self.walls.append(wall)
        self.rss.append(rss)
        for k, v in extra.items():
            self.extra.setdefault(k, []).append(v)

    def summary(self):
        d = {"median_s": statistics.median(self.times), "min_s": min(self.times), "max_s": max(self.times),
             "times_s": self.times, "process_wall_median_s": statistics.median(self.walls),
             "peak_rss_bytes_max": max(self.rss), "peak_rss_bytes": self.rss}
        for k, v in self.extra.items():
            d[k + "_median_s"] = statistics.median(v)
            d[k + "_s"] = v
        return d


def versions(ogsh, py):
    v = {}
    try:
        v["ogsh"] = subprocess.run([ogsh, "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    except OSError as e:
        v["ogsh"] = [str(e)]
    v["python"] = subprocess.run([py, "-c", "import sys; print(sys.version.split()[0])"],
                                 capture_output=True, text=True).stdout.strip()
    v["onnx/numpy/protobuf"] = subprocess.run(
        [py, "-c", "import onnx, numpy, google.protobuf as g; "
                   "from google.protobuf.internal import api_implementation as a; "
                   "print(onnx.__version__, numpy.__version__, g.__version__, a.Type())"],
        capture_output=True, text=True).stdout.strip()
    try:
        v["gcc"] = subprocess.run(["gcc", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        v["gcc"] = "?"
    v["kernel"] = platform.release()
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
        dirty = subprocess.run(["git", "--no-optional-locks", "-C", ROOT, "status", "--porcelain", "--untracked-files=no", "--", "ir",
                                "shell"], capture_output=True, text=True).stdout.split()[1::2]
        v["source"] = head + (f" + uncommitted changes in {', '.join(dirty)}" if dirty else "")
    except OSError:
        v["source"] = "?"
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    v["cpu"] = cpu
    v["cores"] = os.cpu_count()
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                v["ram_gib"] = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return v


def machine_load():
    """Load average and CPU pressure: other work on the machine makes timings noisy."""
    d = {"loadavg_1min": os.getloadavg()[0]}
    try:
        with open("/proc/pressure/cpu") as f:
            d["cpu_pressure_some_avg60"] = float(f.readline().split()[2].split("=")[1])
    except (OSError, IndexError, ValueError):
        pass
    return d


def probe_ogsh(ogsh, model, out):
    """Drives one ogsh over a pipe; reads /proc/PID/status after load and after save."""
    def status(pid):
        d = {}
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, val = line.partition(":")
                if k in ("VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem"):
                    d[k] = int(val.split()[0]) * 1024
        return d

    p = subprocess.Popen([ogsh], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True, bufsize=1)

    def sync_point():
        # 'set timer' prints the setting: when it comes back, the commands before it are done
        p.stdin.write("set timer\n")
        p.stdin.flush()
        while True:
            line = p.stdout.readline()
            if not line:
                sys.exit("io_bench: ogsh probe: ogsh ended early")
            if line.startswith("timer"):
                return

    r = {}
    sync_point()
    r["idle"] = status(p.pid)
    p.stdin.write(f"load {ogsh_quote(model)}\n")
    sync_point()
    r["after load"] = status(p.pid)
    p.stdin.write(f"save {ogsh_quote(out)}\n")
    sync_point()
    r["after save"] = status(p.pid)
    p.stdin.close()
    _, st, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(st)
    p.stdout.close()
    r["exit peak (ru_maxrss)"] = {"VmHWM": ru.ru_maxrss * 1024}
    return r


def main(argv=None):
    ap = argparse.ArgumentParser(description="ogsh vs onnx load/save benchmark")
    ap.add_argument("--dir", default=os.path.join(HERE, "out"), help="where the model and saved files go")
    ap.add_argument("--repeat", type=int, default=5, help="measured runs per operation (after 1 warm-up)")
    ap.add_argument("--ogsh", default=os.path.join(ROOT, "build", "shell", "ogsh"))
    ap.add_argument("--python", default=None, help="Python with onnx (default: .venv/bin/python, then this one)")
    ap.add_argument("--regen", action="store_true", help="generate the model even if it is there")
    ap.add_argument("--keep", action="store_true", help="keep the saved files (the model is always kept)")
    ap.add_argument("--clean", action="store_true", help="also delete the generated model at the end")
    a = ap.parse_args(argv)

    py = a.python or (os.path.join(ROOT, ".venv", "bin", "python")
                      if os.access(os.path.join(ROOT, ".venv", "bin", "python"), os.X_OK) else sys.executable)
    ogsh_built = os.path.abspath(a.ogsh)
    if not os.access(ogsh_built, os.X_OK):
        sys.exit(f"io_bench: no ogsh at {ogsh_built} (build it: ninja -C build)")
    os.makedirs(a.dir, exist_ok=True)
    # a private copy, so that a rebuild during the run cannot mix two binaries
    ogsh = os.path.abspath(os.path.join(a.dir, "ogsh"))
    shutil.copy2(ogsh_built, ogsh)
    with open(ogsh, "rb") as f:
        ogsh_sha = hashlib.sha256(f.read()).hexdigest()[:16]
    model = os.path.abspath(os.path.join(a.dir, "gpt.onnx"))
    out_ogsh = os.path.abspath(os.path.join(a.dir, "saved_by_ogsh.onnx"))
    out_onnx = os.path.abspath(os.path.join(a.dir, "saved_by_onnx.onnx"))
    res = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "versions": versions(ogsh, py), "repeat": a.repeat}
    res["versions"]["ogsh binary"] = f"{ogsh_built} (sha256 {ogsh_sha}...)"
    for k, v in res["versions"].items():
        print(f"{k}: {v[0] if isinstance(v, list) else v}")
    res["load_before"] = machine_load()
    print(f"machine load: {res['load_before']}")
    if res["load_before"]["loadavg_1min"] > 0.5:
        print("io_bench: WARNING: the machine is busy (load average > 0.5): timings will be noisy; "
              "run again when it is idle", file=sys.stderr)

    # 1. the model
    if a.regen or not os.path.exists(model):
        rc, out, err, wall, _ = run_proc([py, os.path.join(HERE, "make_gpt.py"), "--out", model])
        check_rc("make_gpt.py", rc, out, err)
        print(out.strip())
        res["make_gpt"] = out.strip().splitlines()
    size = os.path.getsize(model)
    res["file_size_bytes"] = size
    print(f"model: {model}, {size} bytes ({size / MB:.1f} MB)")

    # 2. page cache: warm for both sides
    t = warm(model)
    frac = cached_fraction(model)
    res["page_cache"] = {"warm_read_s": t, "cached_fraction": frac}
    print(f"page cache: read the file once ({t:.2f} s); in cache: "
          f"{'?' if frac is None else f'{100 * frac:.0f}%'}")

    # idle baselines: what the processes take before any model
    rc, out, err, wall, rss = run_proc([ogsh, "-c", ""])
    check_rc("ogsh -c ''", rc, out, err)
    res["idle"] = {"ogsh_peak_rss_bytes": rss, "ogsh_wall_s": wall}
    rc, out, err, wall, rss_py = run_proc([py, "-c", "import onnx"])
    check_rc("python -c 'import onnx'", rc, out, err)
    res["idle"].update(python_onnx_peak_rss_bytes=rss_py, python_onnx_wall_s=wall)
    print(f"idle peak RSS: ogsh -c '' {rss / MB:.0f} MB, python -c 'import onnx' {rss_py / MB:.0f} MB")

    ops = {k: Op(k) for k in ("ogsh load", "onnx load", "ogsh save", "onnx save")}
    mq = ogsh_quote(model)

    def ogsh_load():
        rc, out, err, wall, rss = run_proc([ogsh, "-c", f"set timer on; load {mq}"])
        check_rc("ogsh load", rc, out, err)
        return ogsh_time(err), wall, rss, {}

    def onnx_load():
        rc, out, err, wall, rss = run_proc([py, "-c", ONNX_LOAD, model])
        check_rc("onnx.load", rc, out, err)
        return json.loads(out.strip().splitlines()[-1])["t"], wall, rss, {}

    def ogsh_save():
        remove(out_ogsh)
        os.sync()
        rc, out, err, wall, rss = run_proc([ogsh, "-c", f"load {mq}; set timer on; save {ogsh_quote(out_ogsh)}"])
        check_rc("ogsh save", rc, out, err)
        return ogsh_time(err), wall, rss, {}

    def onnx_save():
        remove(out_onnx)
        os.sync()
        rc, out, err, wall, rss = run_proc([py, "-c", ONNX_SAVE, model, out_onnx])
        check_rc("onnx.save", rc, out, err)
        j = json.loads(out.strip().splitlines()[-1])
        return j["t"], wall, rss, {"with_fsync": j["t_fsync"]}

    runners = {"ogsh load": ogsh_load, "onnx load": onnx_load, "ogsh save": ogsh_save, "onnx save": onnx_save}

    # 3. warm-up, then interleaved measured runs
    for name, fn in runners.items():
        fn()
    for i in range(a.repeat):
        for name, fn in runners.items():
            t, wall, rss, extra = fn()
            ops[name].add(t, wall, rss, **extra)
            print(f"  run {i + 1}/{a.repeat} {name:9s} {t:8.3f} s   process {wall:6.2f} s   "
                  f"peak RSS {rss / MB:6.0f} MB" + "".join(f"   {k} {v:.3f} s" for k, v in extra.items()),
                  flush=True)
    # ogsh's load is near the 1 ms resolution of its timer: time N loads in one process as well
    # (each load after the first also frees the model before it, so this errs on the slow side)
    script = os.path.join(a.dir, "loads.ogsh")
    with open(script, "w") as f:
        f.write(f"load {mq}\n" * LOADS_IN_ONE)
    per_load = []
    for i in range(a.repeat + 1):
        rc, out, err, wall, rss = run_proc([ogsh, "-c", f"set timer on; source {ogsh_quote(script)}"])
        check_rc("ogsh source loads", rc, out, err)
        if i:
            per_load.append(ogsh_time(err) / LOADS_IN_ONE)
    remove(script)
    res["ogsh_load_in_one_process"] = {"loads": LOADS_IN_ONE, "per_load_median_s": statistics.median(per_load),
                                      "per_load_s": per_load}
    res["page_cache"]["cached_fraction_after"] = cached_fraction(model)
    res["load_after"] = machine_load()
    res["ops"] = {k: v.summary() for k, v in ops.items()}

    # 4. where the memory is: anonymous vs file-backed, read from /proc after each operation
    remove(out_ogsh)
    res["probe"] = {"ogsh": probe_ogsh(ogsh, model, out_ogsh)}
    remove(out_onnx)
    rc, out, err, wall, rss = run_proc([py, "-c", ONNX_PROBE, model, out_onnx])
    check_rc("onnx probe", rc, out, err)
    res["probe"]["onnx"] = json.loads(out.strip().splitlines()[-1])
    res["probe"]["onnx"]["exit peak (ru_maxrss)"] = {"VmHWM": rss}

    # 5. are the saved files right?
    rc, out, err, wall, rss = run_proc([py, "-c", CHECK, model, "ogsh", out_ogsh, "onnx", out_onnx])
    check_rc("check", rc, out, err)
    res["check"] = json.loads(out.strip().splitlines()[-1])

    # report
    o = res["ops"]
    rows = [
        ("load", o["ogsh load"], o["onnx load"]["median_s"], o["onnx load"]),
        ("save (onnx.save, no fsync)", o["ogsh save"], o["onnx save"]["median_s"], o["onnx save"]),
        ("save (onnx.save + fsync)", o["ogsh save"], o["onnx save"]["with_fsync_median_s"], o["onnx save"]),
    ]
    print()
    print(f"file: {size / MB:.1f} MB; medians of {a.repeat} runs after 1 warm-up; page cache warm; "
          f"peak RSS = max over the runs of each process's ru_maxrss; MB = 10^6 bytes")
    hdr = (f"| {'operation':28s} | {'ogsh s':>7s} | {'onnx s':>7s} | {'speedup':>7s} | "
           f"{'ogsh peak RSS MB':>16s} | {'ogsh RSS/file':>13s} | {'onnx peak RSS MB':>16s} | {'onnx RSS/file':>13s} |")
    print(hdr)
    sep = "|" + "|".join("-" * len(c) for c in hdr.split("|")[1:-1]) + "|"
    print(sep)
    table = []
    for label, og, onnx_t, on in rows:
        og_t = og["median_s"]
        r_og, r_on = og["peak_rss_bytes_max"], on["peak_rss_bytes_max"]
        line = (f"| {label:28s} | {og_t:7.3f} | {onnx_t:7.3f} | {onnx_t / og_t:6.1f}x | {r_og / MB:16.0f} | "
                f"{r_og / size:12.2f}x | {r_on / MB:16.0f} | {r_on / size:12.2f}x |")
        table.append(line)
        print(line)
    res["table"] = [hdr, sep] + table
    print(f"(idle processes: ogsh -c '' {res['idle']['ogsh_peak_rss_bytes'] / MB:.0f} MB, "
          f"python -c 'import onnx' {res['idle']['python_onnx_peak_rss_bytes'] / MB:.0f} MB; "
          f"save rows: the process loads, then saves)")
    print("per operation: median [min, max] of the timed operation; whole process: wall, user CPU, "
          "system CPU (medians)")
    for k, v in o.items():
        print(f"  {k:9s} {v['median_s']:7.3f} [{v['min_s']:.3f}, {v['max_s']:.3f}] s   process "
              f"{v['process_wall_median_s']:5.2f} s wall, {v['cpu_user_median_s']:5.2f} s user, "
              f"{v['cpu_sys_median_s']:5.2f} s sys")
    lo = res["ogsh_load_in_one_process"]
    print(f"  ogsh load, {lo['loads']} loads in one process (source of a script): "
          f"{1000 * lo['per_load_median_s']:.2f} ms per load (median of {a.repeat}); "
          f"onnx.load is {o['onnx load']['median_s'] / lo['per_load_median_s']:.0f}x that")
    print()
    print("memory after each operation, from /proc/PID/status (MB):")
    for side, pr in res["probe"].items():
        for stage, d in pr.items():
            print(f"  {side:4s} {stage:22s} " + "  ".join(f"{k} {v / MB:6.0f}" for k, v in d.items()))
    print()
    sp = o["onnx load"]["median_s"] / o["ogsh load"]["median_s"]
    goals = {
        "ogsh load >= 5x faster than onnx.load": sp >= 5,
        "ogsh load peak RSS < 1.3x file size": o["ogsh load"]["peak_rss_bytes_max"] < 1.3 * size,
        "ogsh save peak RSS < 1.3x file size": o["ogsh save"]["peak_rss_bytes_max"] < 1.3 * size,
    }
    res["goals"] = goals
    for g, ok in goals.items():
        print(f"goal: {g}: {'PASS' if ok else 'FAIL'}")
    for tag, r in res["check"].items():
        print(f"check {tag}-saved file: checker {'ok' if r['checker'] else 'FAILED: ' + r.get('checker_error', '')}, "
              f"onnx.load == original: {r['proto_equal']}"
              + (f" (differs in {', '.join(r['differs_in'])})" if not r["proto_equal"] else "")
              + f", byte-identical: {r['byte_identical']}, {r['size']} bytes")

    with open(os.path.join(a.dir, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    print(f"\nresults: {os.path.join(a.dir, 'results.json')}")

    print(f"machine load at the end: {res['load_after']}")
    remove(ogsh)
    if not a.keep:
        remove(out_ogsh)
        remove(out_onnx)
    if a.clean:
        remove(model)
    ok = all(r["checker"] and r["proto_equal"] for r in res["check"].values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
