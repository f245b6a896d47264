#!/usr/bin/env python3
"""How fast can this machine write a copy of a file that is in the page cache?

A side experiment for ogsh's saver (ir/save.c), which write()s big tensors
straight from the mmap()ed input file. Each way below copies FILE (default
bench/out/gpt.onnx) to a new file next to it, then fsyncs it, in a fresh
process, median of --repeat runs, page cache warm, os.sync() before each:

  mmap-write     write() from a fresh read-only MAP_PRIVATE mapping, in
                 pieces as big as the pieces ogsh writes (what ogsh does)
  mmap-populate  the same, after madvise(MADV_POPULATE_READ) on each piece
  bounce-1MiB    pread() into one 1 MiB buffer, write() it (like dd bs=1M)
  copy_file_range  in-kernel copy, source fd to destination fd

Prints copy time, fsync time and the process's peak RSS.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = r"""
import json, mmap, os, sys, time
MADV_POPULATE_READ = 22   # Linux 5.14
how, src, dst, piece = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sfd = os.open(src, os.O_RDONLY)
size = os.fstat(sfd).st_size
dfd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
t0 = time.perf_counter()
if how.startswith("mmap"):
    m = mmap.mmap(sfd, size, mmap.MAP_PRIVATE, mmap.PROT_READ)
    mv = memoryview(m)
    off = 0
    while off < size:
        n = min(piece, size - off)
        if how == "mmap-populate":
            m.madvise(MADV_POPULATE_READ, off - off % mmap.PAGESIZE, n + off % mmap.PAGESIZE)
        w = 0
        while w < n:
            w += os.write(dfd, mv[off + w:off + n])
        off += n
elif how == "bounce-1MiB":
    buf = bytearray(1 << 20)
    mv = memoryview(buf)
    off = 0
    while off < size:
        n = os.preadv(sfd, [mv], off)
        os.write(dfd, mv[:n])
        off += n
elif how == "copy_file_range":
    off = 0
    while off < size:
        off += os.copy_file_range(sfd, dfd, size - off, off)
t1 = time.perf_counter()
os.fsync(dfd)
t2 = time.perf_counter()
print(json.dumps({"copy": t1 - t0, "fsync": t2 - t1}))
"""

WAYS = ["mmap-write", "mmap-populate", "bounce-1MiB", "copy_file_range"]


def run(argv):
    with tempfile.TemporaryFile() as out:
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        _, st, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(st)
        out.seek(0)
        text = out.read().decode()
        if p.returncode:
            sys.exit(f"write_paths: {argv[3]} failed:\n{text}")
        return json.loads(text.strip().splitlines()[-1]), ru.ru_maxrss * 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file", nargs="?", default=os.path.join(HERE, "out", "gpt.onnx"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--piece", type=int, default=64 << 20,
                    help="bytes per write() for the mmap ways (default 64 MiB)")
    a = ap.parse_args()
    src = os.path.abspath(a.file)
    dst = src + ".copy"
    with open(src, "rb", buffering=0) as f:   # page cache warm
        while f.read(16 << 20):
            pass
    res = {w: [] for w in WAYS}
    for i in range(a.repeat + 1):             # the first round is a warm-up
        for w in WAYS:
            if os.path.exists(dst):
                os.unlink(dst)
            os.sync()
            r, rss = run([sys.executable, "-c", CHILD, w, src, dst, str(a.piece)])
            if i:
                res[w].append((r["copy"], r["fsync"], rss))
    os.unlink(dst)
    size = os.path.getsize(src)
    print(f"{src}: {size / 1e6:.1f} MB, median of {a.repeat} runs")
    print(f"| {'way':16s} | copy s | fsync s | total s | peak RSS MB |")
    print(f"|{'-' * 18}|--------|---------|---------|-------------|")
    for w in WAYS:
        c = statistics.median(x[0] for x in res[w])
        f = statistics.median(x[1] for x in res[w])
        t = statistics.median(x[0] + x[1] for x in res[w])
        r = max(x[2] for x in res[w])
        print(f"| {w:16s} | {c:6.3f} | {f:7.3f} | {t:7.3f} | {r / 1e6:11.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
