#!/usr/bin/env python3
"""The manual page test: build/shell/ogsh.1 (made by `ogsh --man` at build
time) has the sections of a manual page; its COMMANDS list every command of
the table (read from shell/commands.c, not from ogsh) under its group, the
groups in the table's order, each with its usage, summary, help and example;
its OPTIONS every option main.c takes; its ENVIRONMENT every OGSH_* variable
the sources read with getenv; every line that starts with '.' is a request
the page means (a text line starting with '.' or a quote must be escaped);
and, when groff is installed, groff formats it with every warning on and
says nothing (without groff that part is skipped, and said so).

    check_man.py OGSH_1 COMMANDS_C SRC_ROOT
"""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_docs import table_of  # noqa: E402

SECTIONS = ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "COMMANDS", "EXAMPLES", "ENVIRONMENT", "FILES",
            "SEE ALSO"]
# the requests and macros ogsh.1 uses; any other line starting with '.' is
# text that was not escaped
REQUESTS = {"TH", "SH", "SS", "TP", "IP", "PP", "RS", "RE", "nf", "fi", "B", "I", "BR", "br", "ad", "nh", '\\"'}


def plain(roff):
    """roff text with font changes and escapes taken out: what a reader sees"""
    s = re.sub(r"\\f[BIRP]", "", roff)
    s = s.replace("\\-", "-").replace("\\e", "\\").replace("\\&", "").replace("\\:", "")
    return re.sub(r"\\\[u([0-9A-F]{4,6})\]", lambda m: chr(int(m.group(1), 16)), s)


def sections(lines):
    """{name: [lines]} of the .SH sections, and their order"""
    out, order, cur = {}, [], None
    for ln in lines:
        if ln.startswith(".SH "):
            cur = ln[4:].strip().strip('"')
            order.append(cur)
            out[cur] = []
        elif cur:
            out[cur].append(ln)
    return out, order


def commands_of(body):
    """[(group, name, tag, entry lines)] of the COMMANDS section"""
    out, group = [], None
    for i, ln in enumerate(body):
        if ln.startswith(".SS "):
            group = ln[4:].strip()
        elif ln == ".TP" and i + 1 < len(body):
            tag = body[i + 1]
            m = re.match(r"\\fB([a-z0-9\\-]+)\\fR", tag)
            if m:
                entry = []
                for e in body[i + 2:]:
                    if e in (".TP",) or e.startswith(".SS "):
                        break
                    entry.append(e)
                out.append((group, plain(m.group(1)), plain(tag), entry))
    return out


def source_env_vars(root):
    names = set()
    for top in ("ir", "exec", "kernels", "passes", "shell"):
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if f.endswith((".c", ".h", ".cu")):
                    with open(os.path.join(d, f), encoding="utf-8", errors="replace") as fh:
                        names |= set(re.findall(r'getenv\("(OGSH_[A-Z0-9_]+)"\)', fh.read()))
    return names


def main_options(root):
    with open(os.path.join(root, "shell", "main.c"), encoding="utf-8") as f:
        return set(re.findall(r'strcmp\(a, "(-[-a-z]+)"\) == 0', f.read()))


def check_groff(path):
    groff = shutil.which("groff")
    if not groff:
        print("groff not found: formatting not checked")
        return 0
    r = subprocess.run([groff, "-man", "-Tutf8", "-ww", "-z", path], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=dict(os.environ, LC_ALL="C"))
    if r.returncode or r.stderr:
        print(f"groff -man -ww says (exit {r.returncode}):\n{r.stderr.decode(errors='replace')}")
        return 1
    print("groff formats it with every warning on and says nothing")
    return 0


def main():
    page, commands_c, root = sys.argv[1:4]
    with open(page, encoding="utf-8") as f:
        text = f.read()
    lines = text.splitlines()
    status = 0

    for n, ln in enumerate(lines, 1):
        if ln.startswith((".", "'")):
            req = ln[1:].split(" ", 1)[0]
            if ln.startswith("'") or req not in REQUESTS:
                print(f"{page}:{n}: a text line that roff reads as a request: {ln[:60]!r}")
                status = 1

    secs, order = sections(lines)
    if [s for s in order if s in SECTIONS] != SECTIONS:
        print(f"sections {order}; a manual page needs {SECTIONS} in that order")
        return 1

    table = table_of(commands_c)
    if len(table) < 10:
        print(f"only {len(table)} commands found in {commands_c}: the table's format changed?")
        return 1
    got = commands_of(secs["COMMANDS"])
    listed = {name: (group, tag, entry) for group, name, tag, entry in got}
    for name, group in table:
        if name not in listed:
            print(f"command '{name}' of the table is not in the page's COMMANDS")
            status = 1
            continue
        g, tag, entry = listed[name]
        if g != group:
            print(f"the page lists '{name}' under '{g}', the table's group is '{group}'")
            status = 1
        # the summary as a sentence, then .IP help text, then .IP Example:
        ok = (len(entry) >= 5 and entry[0].endswith(".") and entry[1] == ".IP" and entry[2]
              and entry[3] == ".IP" and entry[4].startswith("Example: "))
        if not ok:
            print(f"'{name}': the page's entry is not summary, help text and example: {entry[:5]!r}")
            status = 1
    extra = sorted(set(listed) - {n for n, _ in table})
    if extra:
        print(f"the page lists commands the table does not have: {extra}")
        status = 1
    groups = []
    for _, g in table:
        if g not in groups:
            groups.append(g)
    page_groups = [ln[4:] for ln in secs["COMMANDS"] if ln.startswith(".SS ")]
    if page_groups != groups:
        print(f"the page's groups are {page_groups}, the table's (as help lists them) {groups}")
        status = 1

    opts = plain("\n".join(secs["OPTIONS"]))
    for o in sorted(main_options(root)):
        if not re.search(r"^(\S+, )?" + re.escape(o) + r"( |,|$)", opts, re.M):
            print(f"option {o} (shell/main.c) is not in the page's OPTIONS")
            status = 1
    env = set(re.findall(r"^\.B (\S+)$", "\n".join(secs["ENVIRONMENT"]), re.M))
    want_env = source_env_vars(root)
    if not want_env:
        print("no getenv(\"OGSH_...\") found in the sources: the search is broken?")
        status = 1
    for v in sorted(want_env - env):
        print(f"{v} is read by the sources (getenv) but not in the page's ENVIRONMENT")
        status = 1

    if status == 0:
        print(f"ogsh.1 has {len(SECTIONS)} sections, all {len(table)} commands of the table in their "
              f"{len(groups)} groups, {len(main_options(root))} options and {len(want_env)} OGSH_ variables")
    status |= check_groff(page)
    return status


if __name__ == "__main__":
    sys.exit(main())
