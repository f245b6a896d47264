#!/usr/bin/env python3
"""Runs a fuzz target for a bounded time (the meson tests 'fuzz-load', 'fuzz-run', 'fuzz-image').

    run_fuzz.py FUZZ_BIN MAKE_SEEDS [LIBFUZZER OPTIONS...]

MAKE_SEEDS is a Python script (make_seeds.py) or a program
(make_image_seeds); either is run with the seed folder as its argument.

Makes the seed corpus in a temporary folder, then runs the fuzzer on it with
the given options (e.g. -max_total_time=120 -rss_limit_mb=4096 -timeout=10).
New inputs go to another temporary folder; both are removed at the end.
Fails when the fuzzer finds a crash, a leak, a timeout or an out-of-memory,
i.e. when it exits non-zero; the reproducer is kept under
fuzz-artifacts/ in the current folder (meson runs tests in the build dir)
and its path is printed.
"""
import os
import subprocess
import sys
import tempfile


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    fuzz, make_seeds, opts = sys.argv[1], sys.argv[2], sys.argv[3:]
    art = os.path.abspath("fuzz-artifacts") + os.sep
    os.makedirs(art, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ogsh-fuzz-") as tmp:
        seeds = os.path.join(tmp, "seeds")
        corpus = os.path.join(tmp, "corpus")
        os.makedirs(corpus)
        # a seed maker is a Python script, or a program (images are made with libjpeg)
        maker = [sys.executable, make_seeds] if make_seeds.endswith(".py") else [make_seeds]
        subprocess.run([*maker, seeds], check=True)
        env = dict(os.environ)
        # leaks are bugs too; report them with a stack
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
        env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
        cmd = [fuzz, f"-artifact_prefix={art}", "-print_final_stats=1", *opts, corpus, seeds]
        print(" ".join(cmd), flush=True)
        rc = subprocess.run(cmd, env=env).returncode
    if rc != 0:
        found = sorted(os.listdir(art))
        print(f"fuzzer exited with status {rc}; artifacts in {art}: {' '.join(found) or '(none)'}")
        return 1
    print("fuzzer: no crash, leak or timeout")
    return 0


if __name__ == "__main__":
    sys.exit(main())
