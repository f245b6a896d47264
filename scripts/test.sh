#!/bin/sh
# The README's second command (and CI's, through .ci/run): installs what is
# missing, builds ogsh three ways and runs every test:
#   build      the normal build, warnings are errors
#   build-san  ASan + UBSan (+ LeakSanitizer): all tests again
#   build-fuzz clang + libFuzzer: the loader fuzz target, time-bounded
# Ends with the line "N passed, N failed" counted from meson's test logs.
set -eu
cd "$(dirname "$0")/.."
sh scripts/deps.sh test
py="$PWD/.venv/bin/python"
jobs=$(nproc 2>/dev/null || echo 2)

setup() {   # dir, then meson options
	dir=$1
	shift
	if [ ! -f "$dir/build.ninja" ]; then
		meson setup "$dir" -Dtest_python="$py" "$@" >/dev/null
	else
		meson configure "$dir" -Dtest_python="$py" "$@" >/dev/null
	fi
	ninja -C "$dir" >/dev/null || ninja -C "$dir"
}

status=0
setup build -Dwerror=true
meson test -C build --num-processes "$jobs" --print-errorlogs || status=1

setup build-san -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false \
	-Dc_args=-fno-sanitize-recover=all -Dcuda=disabled
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	LSAN_OPTIONS=suppressions="$(pwd)/tests/lsan.supp":print_suppressions=0 \
	meson test -C build-san --num-processes "$jobs" --print-errorlogs --timeout-multiplier 3 || status=1

CC=clang setup build-fuzz -Dfuzz=true -Dcuda=disabled -Db_sanitize=address,undefined -Db_lundef=false
meson test -C build-fuzz --suite fuzz --print-errorlogs || status=1

"$py" - build build-san build-fuzz <<'PY'
import json, sys
passed = failed = skipped = 0
for d in sys.argv[1:]:
    suites = None if d != "build-fuzz" else {"fuzz"}
    try:
        lines = open(f"{d}/meson-logs/testlog.json").read().splitlines()
    except OSError:
        failed += 1
        continue
    for line in lines:
        t = json.loads(line)
        if suites and not (set(s.split(":")[-1] for s in t.get("suite", [])) & suites):
            continue
        r = t["result"]
        if r in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif r == "SKIP":
            skipped += 1
        else:
            failed += 1
if skipped:
    print(f"{skipped} skipped")
print(f"{passed} passed, {failed} failed")
PY
exit $status
