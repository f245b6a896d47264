#!/usr/bin/env python3
"""Golden transcript tests of ogsh's commands.

    run.py [OGSH [PYTHON [TESTS_DIR]]] [--update] [NAME...]
    run.py OGSH PYTHON TESTS_DIR --registered NAME...

Each test is a script NAME.ogs in TESTS_DIR with its expected transcript
NAME.out next to it. For a test, the runner makes a temporary folder, builds
the test models there (models.py, with PYTHON, which has the onnx package),
copies in the files of TESTS_DIR/files/ and the script, and runs ogsh in it
with NO_COLOR=1, OGSH_DEVICE=cpu (the GPU off, so transcripts are the same
with and without one), OGSH_CPU_ISA=generic (the portable kernels, so numbers
are the same on every CPU) and OGSH_THREADS=2 (the thread count `set` and
`time` print does not depend on the machine's cores). The transcript is stdout and stderr merged in order, then
the exit status as "[exit N]"; the folder's path is written $TMP.

Lines of the script starting with "#@" (comments to ogsh) drive the runner:

    #@ run: ARGS    run ogsh with these arguments (shell-style words) instead
                    of the default "-f NAME.ogs"; "<FILE" feeds FILE on stdin.
                    Several run lines run one after the other in the same
                    folder, each shown as "$ ogsh ARGS" in the transcript.
                    $TMP in ARGS is the test's folder (an absolute path).
    #@ json         stdout must be nothing but JSON documents, one for each
                    --json in the test, and each must parse (strict JSON).
    #@ copy: PATH.. copy these files or folders of the source tree (paths
                    relative to the repository root) into the test's folder
                    at the same relative paths, before the runs: a test can
                    run a script of scripts/ as a reader runs it from the
                    repository root (scripts/lessons/ are tested so), and
                    what that script writes stays in the test's folder.
    #@ mkdir: DIR.. make these folders (relative) in the test's folder.

In every test, a stdout line that is exactly "{" or "[" must start a valid
JSON document.

Timings change from run to run, so the transcript shows them masked: "N.N ms"
as "#.# ms", "time: N.N s" as "time: #.### s", JSON "ms" values as #, and
`time`'s "throughput N inferences/s" as "throughput # inferences/s".

With no NAME, every test runs. --update rewrites the .out files with what
ogsh prints now: review the change with git diff before committing it.
--registered checks that NAME... (the tests meson registers) are exactly the
scripts in TESTS_DIR and that each has its .out file.
"""
import difflib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def directives(text):
    runs, json_only, copies, dirs = [], False, [], []
    for line in text.splitlines():
        if not line.startswith("#@"):
            continue
        d = line[2:].strip()
        if d.startswith("run:"):
            runs.append(d[4:].strip())
        elif d == "json":
            json_only = True
        elif d.startswith("copy:") or d.startswith("mkdir:"):
            paths = shlex.split(d.split(":", 1)[1])
            for p in paths:
                if os.path.isabs(p) or ".." in p.split("/"):
                    raise SystemExit(f"'{line}': paths are relative, inside the tree")
            (copies if d.startswith("copy:") else dirs).extend(paths)
        else:
            raise SystemExit(f"unknown directive '{line}'")
    return runs, json_only, copies, dirs


def count_json_flags(text):
    """--json words in the test's commands: script lines and run lines."""
    n = 0
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#@ run:"):
            s = s[len("#@ run:"):]
        elif s.startswith("#"):
            continue
        n += len(re.findall(r"(?<![\w-])--json(?![\w=-])", s))
    return n


def reject_constant(name):
    raise ValueError(f"{name} is not JSON")


def json_docs(out, whole):
    """Parses the JSON documents in stdout. With `whole`, stdout must hold
    nothing else. Returns (count, error or None)."""
    dec = json.JSONDecoder(parse_constant=reject_constant)
    try:
        text = out.decode("utf-8")
    except UnicodeDecodeError as e:
        return 0, f"stdout is not valid UTF-8: {e}"
    count = 0
    if whole:
        i = 0
        while True:
            while i < len(text) and text[i] in " \n":
                i += 1
            if i == len(text):
                return count, None
            try:
                _, i = dec.raw_decode(text, i)
            except ValueError as e:
                return count, f"stdout is not a sequence of JSON documents: {e}"
            count += 1
    pos = 0
    for line in text.splitlines(keepends=True):
        if line.rstrip("\n") in ("{", "[", "{}", "[]"):
            try:
                dec.raw_decode(text, pos)
            except ValueError as e:
                return count, f"invalid JSON at offset {pos}: {e}"
            count += 1
        pos += len(line)
    return count, None


def env_for(tmp):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("LC_") or k in ("LANG", "LANGUAGE"):
            del env[k]
    # the portable kernels: the same float rounding on every machine, so the
    # numbers in the transcripts do not depend on the CPU (the conformance
    # tests check the AVX2 and AVX-512 paths)
    env.update(NO_COLOR="1", LC_ALL="C", HOME=tmp, OGSH_HISTORY="", TERM="dumb", OGSH_CPU_ISA="generic",
               OGSH_DEVICE="cpu", OGSH_THREADS="2")
    return env


def execute(ogsh, tmp, args, merged):
    words = shlex.split(args.replace("$TMP", tmp))
    stdin = subprocess.DEVNULL
    argv = []
    for w in words:
        if w.startswith("<") and len(w) > 1:
            stdin = open(os.path.join(tmp, w[1:]), "rb")
        else:
            argv.append(w)
    try:
        p = subprocess.run([ogsh] + argv, cwd=tmp, stdin=stdin, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT if merged else subprocess.DEVNULL,
                           env=env_for(tmp), timeout=60)
    except subprocess.TimeoutExpired:
        return b"(timed out after 60 s)\n", 124
    finally:
        if stdin is not subprocess.DEVNULL:
            stdin.close()
    return p.stdout, p.returncode


def normalise(out, tmp):
    text = out.decode("utf-8", errors="backslashreplace")
    for t in sorted({tmp, os.path.realpath(tmp)}, key=len, reverse=True):
        text = text.replace(t, "$TMP")
    text = re.sub(r"time: \d+\.\d+ s", "time: #.### s", text)
    # run and conformance timings
    text = re.sub(r"\b\d+\.\d+ ms\b", "#.# ms", text)
    text = re.sub(r'"ms": [0-9.e+-]+', '"ms": #', text)
    # timings that expect shows (time.median_ms is 1.234, run.ms, throughput)
    text = re.sub(r"\b((?:time|profile|run)\.[\w.\[\]\"-]*?(?:ms|throughput)) is [0-9.e+-]+",
                  r"\1 is #", text)
    text = re.sub(r"throughput \d+(\.\d+)? inferences/s", "throughput # inferences/s", text)
    return text.replace("\x1b", "<ESC>")


def prepare(base, tests_dir, name, copies=(), dirs=()):
    tmp = tempfile.mkdtemp(prefix=f"ogsh-{name}-")
    shutil.copytree(base, tmp, dirs_exist_ok=True)
    shutil.copy(os.path.join(tests_dir, name + ".ogs"), os.path.join(tmp, name + ".ogs"))
    for p in copies:
        src, dst = os.path.join(ROOT, p), os.path.join(tmp, p)
        if not os.path.exists(src):
            shutil.rmtree(tmp, ignore_errors=True)
            raise SystemExit(f"{name}.ogs: #@ copy: {p} is not in {ROOT}")
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if os.path.isdir(src):
            shutil.copytree(src, dst, dirs_exist_ok=True)
        else:
            shutil.copy(src, dst)
    for d in dirs:
        os.makedirs(os.path.join(tmp, d), exist_ok=True)
    return tmp


def run_test(ogsh, base, tests_dir, name):
    """Returns (transcript, problems)."""
    path = os.path.join(tests_dir, name + ".ogs")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    runs, json_only, copies, dirs = directives(text)
    runs = runs or [f"-f {name}.ogs"]
    problems = []

    tmp = prepare(base, tests_dir, name, copies, dirs)
    parts = []
    try:
        for args in runs:
            out, rc = execute(ogsh, tmp, args, merged=True)
            body = normalise(out, tmp)
            if body and not body.endswith("\n"):
                body += "\n(no newline at the end)\n"
            parts.append(f"$ ogsh {args}\n{body}[exit {rc}]\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    # the same again with stdout alone, for the JSON checks
    if json_only or "--json" in text:
        tmp = prepare(base, tests_dir, name, copies, dirs)
        try:
            docs = 0
            for args in runs:
                out, _ = execute(ogsh, tmp, args, merged=False)
                n, err = json_docs(out, json_only)
                docs += n
                if err:
                    problems.append(f"{args}: {err}")
            want = count_json_flags(text)
            if json_only and docs != want:
                problems.append(f"{docs} JSON documents on stdout, but the test has {want} --json")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return "".join(parts), problems


def build_base(python, tests_dir):
    base = tempfile.mkdtemp(prefix="ogsh-models-")
    r = subprocess.run([python, os.path.join(tests_dir, "models.py"), base], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT)
    if r.returncode:
        shutil.rmtree(base, ignore_errors=True)
        sys.exit(f"models.py failed:\n{r.stdout.decode(errors='replace')}")
    files = os.path.join(tests_dir, "files")
    if os.path.isdir(files):
        shutil.copytree(files, base, dirs_exist_ok=True)
    return base


def all_tests(tests_dir):
    return sorted(f[:-4] for f in os.listdir(tests_dir) if f.endswith(".ogs"))


def check_registered(tests_dir, names):
    have = set(all_tests(tests_dir))
    reg = set(names)
    bad = []
    for n in sorted(have - reg):
        bad.append(f"{n}.ogs is not registered in tests/script/meson.build (add '{n}' to script_tests)")
    for n in sorted(reg - have):
        bad.append(f"'{n}' is registered in tests/script/meson.build but {n}.ogs does not exist")
    for n in sorted(have):
        if not os.path.exists(os.path.join(tests_dir, n + ".out")):
            bad.append(f"{n}.ogs has no {n}.out (make it with run.py --update {n}, then review it)")
    for b in bad:
        print(b)
    print(f"{len(have)} scripts, {len(reg)} registered" + ("" if bad else ", all with transcripts"))
    return 1 if bad else 0


def main():
    args = sys.argv[1:]
    update = "--update" in args
    registered = "--registered" in args
    args = [a for a in args if a not in ("--update", "--registered")]
    pos = []
    # the paths come first; a word that names a test is a test
    while args and len(pos) < 3 and (os.sep in args[0] or (
            os.path.exists(args[0]) and not os.path.exists(os.path.join(HERE, args[0] + ".ogs")))):
        pos.append(args.pop(0))
    ogsh = os.path.abspath(pos[0]) if len(pos) > 0 else os.path.join(ROOT, "build", "shell", "ogsh")
    python = pos[1] if len(pos) > 1 else os.path.join(ROOT, ".venv", "bin", "python")
    tests_dir = os.path.abspath(pos[2]) if len(pos) > 2 else HERE
    if registered:
        return check_registered(tests_dir, args)
    names = args or all_tests(tests_dir)
    for n in names:
        if not os.path.exists(os.path.join(tests_dir, n + ".ogs")):
            sys.exit(f"no test named '{n}' ({n}.ogs is not in {tests_dir})")
    if not os.access(ogsh, os.X_OK):
        sys.exit(f"cannot run '{ogsh}': build it first (ninja -C build)")

    base = build_base(python, tests_dir)
    failed = 0
    try:
        for n in names:
            got, problems = run_test(ogsh, base, tests_dir, n)
            out_path = os.path.join(tests_dir, n + ".out")
            if update:
                old = open(out_path, encoding="utf-8").read() if os.path.exists(out_path) else None
                if old != got:
                    with open(out_path, "w", encoding="utf-8") as f:
                        f.write(got)
                    print(f"{n}: updated {os.path.relpath(out_path)}")
            else:
                if not os.path.exists(out_path):
                    print(f"{n}: FAIL: no expected transcript {n}.out (run.py --update {n}, then review it)")
                    failed += 1
                    continue
                want = open(out_path, encoding="utf-8").read()
                if want != got:
                    problems.insert(0, "the transcript differs from " + n + ".out:\n" + "".join(
                        difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                             f"{n}.out (expected)", f"{n} (ogsh now)")))
            for p in problems:
                print(f"{n}: FAIL: {p}")
            if problems:
                failed += 1
            elif not update:
                print(f"{n}: ok")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if failed and not update:
        which = " ".join(names) + " " if len(names) < 5 else ""
        print(f"{failed} of {len(names)} failed; if the new output is right, run "
              f"tests/script/run.py --update {which}and review it with git diff")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
