#!/usr/bin/env python3
"""The drawing tests: DOT read back with libcgraph, SVG and PNG files.

    check_dot.py OGSH DOT_READBACK MODELS_PY MODELS_DIR

For the demo model, the generated ResNet-50 and a transformer (a 2-layer
BERT), before and after `optimize`: ogsh writes the drawing as DOT and the
stage as ONNX, and dot_readback (C, agread) checks node and edge counts,
labels, colours and the legend against the model; the same for `--diff 0`
(with the counts `diff --json` gives) and for `--collapse`. Then SVG and PNG
files: the SVG parses as XML, the PNG has its signature and a plausible size.
"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    return r.returncode, r.stdout


def diff_counts(text):
    """added, removed, changed (nodes; Constant nodes are not drawn) from diff --json"""
    doc = json.loads(text)
    added = removed = 0
    changed = set()
    for c in doc["changes"]:
        m = re.match(r"n(\d+) '.*' \((.*)\)$", c["node"])
        if not m or m.group(2) == "Constant":
            continue
        if c["kind"] == "added":
            added += 1
        elif c["kind"] == "removed":
            removed += 1
        elif c["kind"] in ("rewired", "attrs"):
            changed.add(m.group(1))
    return added, removed, len(changed)


def main():
    ogsh, readback, models_py, models_dir = (os.path.abspath(a) for a in sys.argv[1:5])
    rc, out = run([sys.executable, models_py, models_dir, "resnet50", "bert2", "bert64"])
    if rc:
        sys.exit(f"models.py failed:\n{out}")
    fails = 0
    with tempfile.TemporaryDirectory(prefix="ogsh-dot-") as tmp:
        cases = [("demo", None), ("resnet50", os.path.join(models_dir, "resnet50.onnx")),
                 ("bert2", os.path.join(models_dir, "bert2.onnx"))]
        for name, path in cases:
            p = lambda f: os.path.join(tmp, f"{name}-{f}")  # noqa: E731
            script = ([f"load '{path}'"] if path else []) + [
                f"save '{p('s0.onnx')}'", f"dot '{p('s0.dot')}'", f"dot '{p('s0c.dot')}' --collapse",
                "optimize --quiet", f"save '{p('s1.onnx')}'", f"dot '{p('s1.dot')}'",
                f"dot '{p('d.dot')}' --diff 0", f"diff 0 -0 --json"]
            rc, out = run([ogsh, "-c", "; ".join(script)], cwd=tmp)
            if rc:
                print(f"FAIL: {name}: ogsh exited {rc}:\n{out}")
                fails += 1
                continue
            doc = out[out.index("{"):]
            added, removed, changed = diff_counts(doc)
            checks = [[p("s0.onnx"), p("s0.dot")], [p("s1.onnx"), p("s1.dot")],
                      [p("s1.onnx"), p("d.dot"), "--diff", str(added), str(removed), str(changed)]]
            if name != "demo":   # the demo's names have no scopes
                checks.append([p("s0.onnx"), p("s0c.dot"), "--collapse"])
            for args in checks:
                rc, out = run([readback] + args)
                print(out.rstrip().replace(tmp + "/", ""))
                if rc:
                    fails += 1
        # SVG and PNG, rendered in-process
        svg, png = os.path.join(tmp, "demo.svg"), os.path.join(tmp, "demo.png")
        rc, out = run([ogsh, "-c", f"dot '{svg}'; optimize --quiet; dot '{png}' --diff 0"], cwd=tmp)
        print(out.rstrip().replace(tmp + "/", ""))
        if rc:
            fails += 1
        else:
            root = ET.parse(svg).getroot()
            titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
            ok = root.tag == "{http://www.w3.org/2000/svg}svg" and "n0" in titles and "in0" in titles
            print(f"demo.svg: XML, {len(titles)} titles: {'ok' if ok else 'FAIL'}")
            fails += not ok
            with open(png, "rb") as f:
                head = f.read(24)
            w, h = struct.unpack(">II", head[16:24]) if len(head) == 24 else (0, 0)
            ok = head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR" and 200 < w < 20000 and 200 < h < 20000
            print(f"demo.png: {w} x {h}, {os.path.getsize(png)} bytes: {'ok' if ok else 'FAIL'}")
            fails += not ok
        # a large graph: cheaper layout settings (and a note), in seconds; past --max-nodes, refused
        big = os.path.join(tmp, "bert64.svg")
        t0 = time.monotonic()
        rc, out = run([ogsh, "-c", f"load '{os.path.join(models_dir, 'bert64.onnx')}'; dot '{big}'"], cwd=tmp)
        secs = time.monotonic() - t0
        ok = rc == 0 and "note: " in out and os.path.exists(big) and secs < 120
        if ok:
            n = sum(1 for e in ET.parse(big).getroot().iter("{http://www.w3.org/2000/svg}g") if e.get("class") == "node")
            ok = n > 5000
            print(f"bert64.svg: {n} nodes in {secs:.1f} s: {'ok' if ok else 'FAIL'}")
        else:
            print(f"bert64.svg: FAIL ({secs:.1f} s): {out}")
        fails += not ok
        rc, out = run([ogsh, "-c", f"load '{os.path.join(models_dir, 'bert64.onnx')}'; dot --max-nodes 1000"], cwd=tmp)
        ok = rc == 1 and "over the limit of 1,000" in out and "--around" in out and "--collapse" in out
        print(f"bert64 over --max-nodes: {'ok' if ok else 'FAIL: ' + out}")
        fails += not ok
        # nothing half-written is left when a drawing fails
        rc, out = run([ogsh, "-c", f"dot '{os.path.join(tmp, 'no', 'x.svg')}'"], cwd=tmp)
        ok = rc == 1 and "cannot write" in out and not any(f.startswith(".") for f in os.listdir(tmp))
        print(f"unwritable path: {'ok' if ok else 'FAIL: ' + out}")
        fails += not ok
    print(f"{fails} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
