#!/usr/bin/env python3
"""The docs test: docs/commands.md is what `ogsh --doc` prints, every
command of the table has a golden script test that runs it and `help` for
it, and every command of the table (read from shell/commands.c, not from
ogsh) is in docs/commands.md and in `help`'s list under its group, the
groups in the order the table first names them.

    check_docs.py OGSH DOCS_MD TESTS_DIR COMMANDS_C
"""
import difflib
import os
import re
import shlex
import subprocess
import sys

FIX = "build/shell/ogsh --doc > docs/commands.md"


def commands_from_doc(doc):
    """The command names of the summary table: | [`name`](#name) | ... |"""
    return re.findall(r"^\| \[`([^`]+)`\]\(#", doc, re.M)


def split_commands(line):
    """The commands of one line of a script or a -c argument: the first word
    of each ';'-separated part (quotes are not split, comments cut)."""
    out = []
    try:
        lex = shlex.shlex(line, posix=True, punctuation_chars=";")
        lex.whitespace_split = True
        lex.commenters = ""
        words = list(lex)
    except ValueError:
        words = line.replace(";", " ; ").split()
    first = True
    for w in words:
        if w.startswith("#") and not w[1:2].isdigit():
            break
        if w == ";":
            first = True
            continue
        if first:
            out.append(w)
            first = False
    return out


def commands_of_test(text):
    """(command names run, commands asked `help` for) in a test script."""
    ran, helped = [], set()
    lines = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#@ run:"):
            words = shlex.split(s[len("#@ run:"):])
            for i, w in enumerate(words[:-1]):
                if w == "-c":
                    lines.append(words[i + 1])
        elif s and not s.startswith("#"):
            lines.append(s)
    for line in lines:
        for part in re.split(r";", line):
            words = part.split()
            if len(words) >= 2 and words[0] == "help":
                helped.add(words[1])
        ran += split_commands(line)
    return set(ran), helped


def table_of(commands_c):
    """[(name, group)] of the command table, in its order"""
    with open(commands_c, encoding="utf-8") as f:
        src = f.read()
    return re.findall(r'\{ "([a-z0-9-]+)", cmd_\w+,.*?"([a-z]+)" \},', src, re.S)


def help_groups(text):
    """[(group, [command names])] of `help`'s list"""
    out = []
    for line in text.splitlines()[1:]:
        if re.match(r"^[a-z]+$", line):
            out.append((line, []))
        elif out and re.match(r"^  [a-z0-9-]+ ", line):
            out[-1][1].append(line.split()[0])
        elif not line.strip():
            continue
        else:
            break
    return out


def check_table(ogsh, doc_names, commands_c):
    """every command of the table in the doc and in help, under its group"""
    table = table_of(commands_c)
    if len(table) < 10:
        print(f"only {len(table)} commands found in {commands_c}: the table's format changed?")
        return 1
    status = 0
    for n, _ in table:
        if n not in doc_names:
            print(f"command '{n}' of the table is not in docs/commands.md")
            status = 1
    env = dict(os.environ, NO_COLOR="1")
    text = subprocess.run([ogsh, "-c", "help"], stdout=subprocess.PIPE, check=True, env=env).stdout.decode()
    got = help_groups(text)
    order = []
    for _, g in table:
        if g not in order:
            order.append(g)
    if [g for g, _ in got] != order:
        print(f"help lists the groups {[g for g, _ in got]}, the table's order is {order}")
        status = 1
    listed = {n: g for g, names in got for n in names}
    for n, g in table:
        if n not in listed:
            print(f"command '{n}' of the table is missing from help")
            status = 1
        elif listed[n] != g:
            print(f"help lists '{n}' under '{listed[n]}', the table's group is '{g}'")
            status = 1
    if status == 0:
        print(f"help lists all {len(table)} commands of the table in their {len(order)} groups")
    return status


def main():
    ogsh, docs_md, tests_dir, commands_c = sys.argv[1:5]
    status = 0
    got = subprocess.run([ogsh, "--doc"], stdout=subprocess.PIPE, check=True).stdout.decode()
    try:
        with open(docs_md, encoding="utf-8") as f:
            want = f.read()
    except OSError as e:
        want = ""
        print(f"cannot read {docs_md}: {e.strerror}")
    if got != want:
        sys.stdout.writelines(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                                   "docs/commands.md", "ogsh --doc"))
        print(f"\ndocs/commands.md is not what `ogsh --doc` prints: regenerate it with\n    {FIX}")
        status = 1

    names = commands_from_doc(got)
    if not names:
        print("no commands found in the output of ogsh --doc")
        return 1
    status |= check_table(ogsh, set(commands_from_doc(want)), commands_c)
    ran, helped = set(), set()
    tests = sorted(f for f in os.listdir(tests_dir) if f.endswith(".ogs"))
    for t in tests:
        with open(os.path.join(tests_dir, t), encoding="utf-8") as f:
            r, h = commands_of_test(f.read())
        ran |= r
        helped |= h
    for n in names:
        if n not in ran:
            print(f"command '{n}' has no golden test that runs it: add tests/script/{n}.ogs "
                  f"(and {n}-errors.ogs for its errors)")
            status = 1
        if n not in helped:
            print(f"command '{n}' is not in tests/script/help.ogs: add 'help {n}'")
            status = 1
    if status == 0:
        print(f"docs/commands.md is up to date; all {len(names)} commands have golden tests "
              f"({len(tests)} scripts)")
    return status


if __name__ == "__main__":
    sys.exit(main())
