#!/usr/bin/env python3
"""The hostile-file test of the loader (the meson test 'hostile').

    run.py OGSH_BIN MAKE_CORPUS_PY [CORPUS_DIR] [-k NAME_SUBSTRING] [-v]

Writes the corpus with make_corpus.py into a fresh temporary folder (or into
CORPUS_DIR, which is then kept), runs `ogsh -c info FILE` on every case of
its manifest, and checks:

  hostile files: exit status 1 (not 0, not a signal, not a sanitizer's
  own status), exactly one line on stderr, that line holds "error:", the
  file's path and the expected fragment, and the message after the path
  starts in lowercase; no hang (20 s);
  good files: exit status 0 and no "error:" on stderr.

Prints one line per failure and a summary; exits 1 if anything failed.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

TIMEOUT = int(os.environ.get("HOSTILE_TIMEOUT", "20"))


def run_one(ogsh, root, row, env):
    path = os.path.join(root, row["file"])
    t0 = time.monotonic()
    try:
        p = subprocess.run([ogsh, "-c", "info", path], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=TIMEOUT, env=env)
    except subprocess.TimeoutExpired:
        return f"hung for more than {TIMEOUT} s", ""
    dt = time.monotonic() - t0
    err = p.stderr.decode("utf-8", "replace")
    lines = err.splitlines()
    shown = err.strip().replace("\n", " | ")[:600]
    if row.get("good"):
        if p.returncode != 0:
            return f"a good file failed to load (status {p.returncode}): {shown}", shown
        if "error:" in err or "runtime error" in err or "Sanitizer" in err:
            return f"a good file loaded with errors on stderr: {shown}", shown
        return None, f"loaded ({dt:.2f} s)"
    if p.returncode < 0:
        return f"killed by signal {-p.returncode}: {shown}", shown
    if p.returncode != 1:
        return f"exit status {p.returncode}, expected 1: {shown}", shown
    if len(lines) != 1:
        return f"{len(lines)} lines on stderr, expected 1: {shown}", shown
    line = lines[0]
    if "error:" not in line:
        return f"no 'error:' on stderr: {shown}", shown
    if row["expect"] not in line:
        return f"expected '{row['expect']}' in: {shown}", shown
    # "error: FILE: object: what is wrong"
    after = line.split("error:", 1)[1].strip()
    if not after.startswith(path + ": "):
        return f"the message does not start with the file's path: {shown}", shown
    msg = after[len(path) + 2:]
    if not msg or msg[0].isupper():
        return f"the message does not start in lowercase: {shown}", shown
    return None, line


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    verbose = "-v" in sys.argv
    only = None
    if "-k" in sys.argv:
        only = sys.argv[sys.argv.index("-k") + 1]
        args.remove(only)
    if len(args) not in (2, 3):
        sys.exit(__doc__)
    ogsh, make_corpus = os.path.abspath(args[0]), args[1]
    keep = len(args) == 3
    root = os.path.abspath(args[2]) if keep else tempfile.mkdtemp(prefix="ogsh-hostile-")
    if keep and os.path.exists(root):
        shutil.rmtree(root)
    env = dict(os.environ)
    env.pop("OGSH_COLOR", None)
    env["NO_COLOR"] = "1"
    # sanitizer builds: report leaks, stop at the first report
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    try:
        subprocess.run([sys.executable, make_corpus, root], check=True)
        with open(os.path.join(root, "manifest.json")) as f:
            rows = json.load(f)
        if len(rows) < 50:
            print(f"the manifest has only {len(rows)} cases")
            return 1
        failed = 0
        ran = 0
        for row in rows:
            if only and only not in row["name"]:
                continue
            ran += 1
            why, out = run_one(ogsh, root, row, env)
            if why:
                failed += 1
                print(f"FAIL {row['name']} ({row['what']}): {why}")
            elif verbose:
                print(f"ok   {row['name']}: {out}")
        print(f"{ran - failed} of {ran} cases passed")
        return 1 if failed or not ran else 0
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
