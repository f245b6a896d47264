#!/usr/bin/env python3
"""history save makes a script that replays the session: the same stages.

    history_replay.py OGSH

Saves the demo model to a file, runs a session on it (passes, hand edits,
undo/redo, a calibration and quantization, a failing command), saves its
history, replays that with `ogsh -f`, and checks that `stages` prints the
same table both times, that the header names the model by its absolute path
and its SHA-256, and that the failing and help commands were left out.
"""
import hashlib
import os
import re
import subprocess
import sys
import tempfile

SESSION = """\
set on-error continue
apply fuse-conv-bn
help stages
apply nosuch
rename conv2 second_conv
undo
redo
optimize --quiet
checkout 2
set-attr conv1 group=1
calibrate --data=random --batches=2 --seed=3
quantize int8
stats
stages
"""


def ogsh(exe, args, cwd):
    env = dict(os.environ, NO_COLOR="1", OGSH_DEVICE="cpu", OGSH_CPU_ISA="generic")
    p = subprocess.run([exe] + args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=120)
    return p


def stages_table(out):
    """The last `stages` table of a transcript."""
    lines = out.splitlines()
    starts = [i for i, l in enumerate(lines) if l.split()[:3] == ["stage", "made", "by"]]
    if not starts:
        return None
    i = starts[-1]
    table = [lines[i]]
    for l in lines[i + 1:]:
        if not re.match(r"^[* ]\s+\d+\s", l):
            break
        table.append(l)
    return "\n".join(table)


def main():
    exe = os.path.abspath(sys.argv[1])
    fails = []
    with tempfile.TemporaryDirectory(prefix="ogsh-history-") as tmp:
        p = ogsh(exe, ["-c", "save demo.onnx"], tmp)
        if p.returncode:
            print(p.stdout, p.stderr)
            return 1
        with open(os.path.join(tmp, "session.ogs"), "w") as f:
            f.write(SESSION + "history save replay.ogs\n")
        first = ogsh(exe, ["demo.onnx", "-f", "session.ogs"], tmp)
        a = stages_table(first.stdout)
        if a is None or len(a.splitlines()) < 6:
            fails.append("the session made no stages table with 5 stages:\n" + first.stdout + first.stderr)
        script = open(os.path.join(tmp, "replay.ogs")).read()
        # replayed from another folder: the model is found by its absolute path
        other = os.path.join(tmp, "elsewhere")
        os.mkdir(other)
        second = ogsh(exe, ["-f", os.path.join(tmp, "replay.ogs")], other)
        b = stages_table(second.stdout)
        if second.returncode:
            fails.append(f"the replay exited with {second.returncode}:\n{second.stderr}")
        if a != b:
            fails.append(f"stages differ:\n--- session\n{a}\n--- replay\n{b}")
        model = os.path.realpath(os.path.join(tmp, "demo.onnx"))
        sha = hashlib.sha256(open(model, "rb").read()).hexdigest()
        if f"# sha256: {sha}\n" not in script:
            fails.append(f"the header lacks the model's sha256 {sha}:\n{script}")
        if f"\nload {model}\n" not in script:
            fails.append(f"no 'load {model}' line:\n{script}")
        if not re.search(r"^# A session of ogsh \S+, written by `history save` on \d{4}-\d\d-\d\d \d\d:\d\d:\d\d",
                         script, re.M):
            fails.append("the header has no version and date:\n" + script)
        for left_out in ("help stages", "apply nosuch", "history"):
            if re.search(rf"^{re.escape(left_out)}\b", script, re.M):
                fails.append(f"'{left_out}' should not be in the saved history:\n{script}")
        for kept in ("apply fuse-conv-bn", "undo", "checkout 2", "set-attr conv1 group=1", "quantize int8", "set on-error stop"):
            if not re.search(rf"^{re.escape(kept)}$", script, re.M):
                fails.append(f"'{kept}' is missing from the saved history:\n{script}")
    for f in fails:
        print("FAIL:", f)
    print("history replay:", "ok" if not fails else f"{len(fails)} failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
