#!/usr/bin/env python3
"""The ONNX conformance suites on the cpu backend, with a floor.

    run.py OGSH [--update]

Runs `ogsh -c 'conformance ...'` over the backend test data inside the onnx
package of this Python (node, simple, pytorch-converted, pytorch-operator,
light) and checks every suite's pass count against floor.json next to this
file: fewer passes than the floor fails the test, so progress only goes up.
Every light model must pass. With --update it rewrites REPORT.md (the
runner's report) and raises floor.json to what passes now.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SUITES = ["node", "simple", "pytorch-converted", "pytorch-operator", "light"]


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    update = "--update" in sys.argv
    if len(args) != 1:
        raise SystemExit(__doc__)
    ogsh = args[0]
    import onnx
    data = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    dirs = [os.path.join(data, s) for s in SUITES]
    missing = [d for d in dirs if not os.path.isdir(d)]
    if missing:
        print(f"the onnx package has no backend test data at {missing[0]}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "REPORT.md")
        cmd = "conformance " + " ".join(f"'{d}'" for d in dirs) + f" --json --report='{report}'"
        p = subprocess.run([ogsh, "-c", cmd], capture_output=True, text=True, timeout=3600)
        if p.returncode:
            print(p.stdout[-3000:], p.stderr[-3000:], file=sys.stderr)
            return 1
        res = json.loads(p.stdout)
        with open(report) as f:
            report_text = f.read()
    floor_path = os.path.join(HERE, "floor.json")
    with open(floor_path) as f:
        floor = json.load(f)
    bad = 0
    for s in SUITES:
        got = res["suites"][s]
        print(f"{s:18} {got['passed']:5} of {got['total']:5} passed (floor {floor.get(s, 0)}), "
              f"{got['failed']} failed, {got['unsupported']} unsupported, {got['error']} errors, "
              f"{got['crashed']} crashed, {got['timed out']} timed out")
        if got["passed"] < floor.get(s, 0):
            print(f"  FAIL: {s} passes {got['passed']}, below the floor of {floor[s]}")
            bad += 1
        if got["crashed"] or got["timed out"]:
            print(f"  FAIL: {s} has tests that crash or hang")
            bad += 1
        if s == "light" and got["passed"] != got["total"]:
            print("  FAIL: every light model must pass")
            bad += 1
    for t in res["tests"]:
        if t["status"] in ("crashed", "timed out"):
            print(f"  {t['suite']}/{t['test']}: {t['status']}: {t['detail']}")
    if update:
        for s in SUITES:
            floor[s] = max(floor.get(s, 0), res["suites"][s]["passed"])
        with open(floor_path + ".tmp", "w") as f:
            json.dump(floor, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(floor_path + ".tmp", floor_path)
        with open(os.path.join(HERE, "REPORT.md.tmp"), "w") as f:
            f.write(report_text)
        os.replace(os.path.join(HERE, "REPORT.md.tmp"), os.path.join(HERE, "REPORT.md"))
        print("REPORT.md and floor.json updated")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
