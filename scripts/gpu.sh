#!/bin/sh
# gpu.sh - build a bundle here, run the GPU tests on a GPU machine.
#
#   scripts/gpu.sh bundle          (here, from the repo root) builds ogsh and
#                                  the GPU tests with CUDA in build-gpu/ and
#                                  makes gpu-bundle/ (git-ignored): the
#                                  binaries, stripped, and the shared
#                                  libraries and Graphviz plugins a bare
#                                  machine lacks
#   scripts/gpu.sh ogsh [ARG...]   runs the bundle's ogsh with its libraries
#   scripts/gpu.sh exec BIN [ARG...]
#                                  runs another program of the bundle (a test)
#   scripts/gpu.sh run [OUT] [STEP...]
#                                  (on the GPU machine, from the repo root,
#                                  gpu-bundle/ present) runs the steps and
#                                  writes their logs under OUT (default
#                                  $OUT, else ./gpu-out); STEP is ops,
#                                  conformance or check (default: all three)
#
# run's files (at most 8, as the device tool brings back):
#   gpu.txt            nvidia-smi's summary
#   ops.log            tests/gpu test_backend_ops (every GPU kernel against the CPU)
#                      and test_calib_gpu (calibration statistics against the CPU's)
#   conformance.json   the ONNX backend tests through the GPU planner, every test
#   conformance.txt    their summary per suite and the tests that do not pass
#   floor-cuda.json    the passes per suite: tests/conformance/floor-cuda.json to be
#   check.log          tests/gpu/cmd_check.ogs run with ogsh
#   summary.txt        the table printed last
#
# Environment: JOBS (bundle: ninja's jobs, default all cores), SHARDS
# (run: conformance processes at once, default 14), STEP_TIMEOUT (run:
# seconds per step, default 420), CONF_TIMEOUT (run: seconds per test, 60),
# CONF_FILTER (run: only the tests matching this regex, in one process),
# CONF_DEVICE (run: cuda, or cpu to check this script on a machine without a GPU),
# ONNX_DATA (run: the backend test data folder, when the onnx package there lacks it).
set -u

die() {
	echo "gpu.sh: $*" >&2
	exit 1
}

root=$(pwd)
[ -f "$root/meson.build" ] && [ -d "$root/kernels/cuda" ] || die "run me from the repo root"
B=$root/gpu-bundle

# ---------------------------------------------------------------------------
# bundle
# ---------------------------------------------------------------------------

# libraries every Linux machine has: never copied (the bundle's would
# shadow the machine's own glibc and C++ runtime)
is_base_lib() {
	case "$1" in
	linux-vdso.so* | ld-linux*.so* | libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | \
		libresolv.so* | libutil.so* | libgcc_s.so* | libstdc++.so* | libcuda.so* | libnvidia*) return 0 ;;
	esac
	return 1
}

# copies the non-base libraries FILE needs (ldd) into DIR
copy_deps() {
	ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | while read -r name path; do
		is_base_lib "$name" && continue
		[ -f "$2/$name" ] && continue
		cp -L "$path" "$2/$name" || exit 1
		echo "$name" >>"$2/.copied"
	done
}

do_bundle() {
	command -v meson >/dev/null || die "meson is not installed"
	jobs=${JOBS:-$(nproc)}
	if [ ! -f build-gpu/build.ninja ]; then
		meson setup build-gpu -Dcuda=enabled --buildtype=release || die "meson setup failed"
	fi
	# meson (1.0) gives nvcc no dependency file, so ninja does not see the
	# headers a .cu includes (kernels/cuda/*.h): a header newer than a CUDA
	# object (a struct shared with the C side, say) would leave a stale
	# object that reads the struct the old way. Rebuild those objects then:
	# each object's own source and the headers it includes, transitively.
	stale=$(find build-gpu -name '*.cu.o' 2>/dev/null | while read -r o; do
		src=kernels/cuda/$(basename "$o" .cu.o | sed 's/^cuda_//').cu
		if [ ! -f "$src" ]; then
			echo "$o"
			continue
		fi
		seen=" $src "
		todo=$src
		while [ -n "$todo" ]; do
			next=""
			for f in $todo; do
				for h in $(sed -n 's/^#include "\(.*\.h\)".*/\1/p' "$f"); do
					[ -f "$h" ] || h=$(dirname "$f")/$h
					[ -f "$h" ] || continue
					case "$seen" in *" $h "*) continue ;; esac
					seen="$seen$h "
					next="$next $h"
				done
			done
			todo=$next
		done
		for f in $seen; do
			[ "$f" -nt "$o" ] && { echo "$o"; break; }
		done
	done)
	if [ -n "$stale" ]; then
		echo "gpu.sh: headers changed since $(echo "$stale" | wc -l) CUDA objects were built: rebuilding them"
		echo "$stale" | xargs rm -f
	fi
	ninja -C build-gpu -j"$jobs" shell/ogsh tests/gpu/test_backend_ops tests/gpu/test_calib_gpu \
		tests/gpu/test_qconv tests/gpu/test_qgemm || die "the build failed"

	rm -rf "$B"
	mkdir -p "$B/bin" "$B/lib" "$B/graphviz" "$B/fonts" || die "cannot make $B"
	cp build-gpu/shell/ogsh build-gpu/tests/gpu/test_backend_ops build-gpu/tests/gpu/test_calib_gpu \
		build-gpu/tests/gpu/test_qconv build-gpu/tests/gpu/test_qgemm "$B/bin/" ||
		die "cannot copy the binaries"
	strip "$B/bin/ogsh" "$B/bin/test_backend_ops" "$B/bin/test_calib_gpu" "$B/bin/test_qconv" "$B/bin/test_qgemm"

	# the libraries of the binaries
	for f in "$B/bin/ogsh" "$B/bin/test_backend_ops" "$B/bin/test_calib_gpu" "$B/bin/test_qconv" "$B/bin/test_qgemm"; do
		copy_deps "$f" "$B/lib" || die "cannot copy the libraries of $f"
	done

	# Graphviz: the plugins `dot -Tsvg/-Tpng/-Tpdf` use (core renderers,
	# the dot layout, cairo/pango for png and pdf and text sizes) and what
	# they need; config6a is remade for just these
	gvdir=$(dirname "$(ldd "$B/bin/ogsh" | awk '$1 ~ /^libgvc\.so/ { print $3 }')")/graphviz
	[ -d "$gvdir" ] || gvdir=/usr/lib/x86_64-linux-gnu/graphviz
	for p in core dot_layout pango; do
		src=$(ls "$gvdir"/libgvplugin_$p.so.[0-9] 2>/dev/null | head -n 1)
		[ -n "$src" ] || die "no Graphviz plugin '$p' in $gvdir"
		cp -L "$src" "$B/graphviz/" || die "cannot copy $src"
		copy_deps "$src" "$B/lib" || die "cannot copy the libraries of $src"
	done
	if command -v dot >/dev/null; then
		GVBINDIR=$B/graphviz LD_LIBRARY_PATH=$B/lib dot -c 2>/dev/null
	fi
	[ -f "$B/graphviz/config6a" ] || cp "$gvdir/config6a" "$B/graphviz/" ||
		die "cannot make the Graphviz plugin configuration"

	# one font, so that a machine without fonts still lays out labels
	font=$(fc-match -f '%{file}' 'DejaVu Sans' 2>/dev/null)
	[ -f "$font" ] || font=/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf
	[ -f "$font" ] && cp "$font" "$B/fonts/"

	strip --strip-unneeded "$B"/lib/*.so* "$B"/graphviz/*.so* 2>/dev/null
	printf '%s\n' "$(git rev-parse HEAD 2>/dev/null || echo unknown)" >"$B/VERSION"
	echo "gpu.sh: copied libraries: $(sort "$B/lib/.copied" | tr '\n' ' ')"
	rm -f "$B/lib/.copied"
	echo "gpu.sh: graphviz plugins: $(cd "$B/graphviz" && ls | tr '\n' ' ')"
	size=$(du -sk "$B" | cut -f1)
	echo "gpu.sh: bundle $B: $((size / 1024)) MiB ($size KiB)"
	# the device tool carries 64 MiB with the tree: a larger bundle travels
	# compressed (.gpu/ is ignored by git) and is unpacked there first
	if [ "$size" -ge $((48 * 1024)) ]; then
		mkdir -p .gpu && tar cJf .gpu/bundle.txz gpu-bundle || die "cannot compress the bundle"
		echo "gpu.sh: over 48 MiB: carry .gpu/bundle.txz ($(du -k .gpu/bundle.txz | cut -f1) KiB) instead of gpu-bundle/;" \
			"unpack it there with: tar xJf .gpu/bundle.txz"
	fi
}

# ---------------------------------------------------------------------------
# run
# ---------------------------------------------------------------------------

# a Python with the onnx package (python3 on the GPU machine)
find_onnx_data() {
	if [ -n "${ONNX_DATA:-}" ] && [ -d "$ONNX_DATA/node" ]; then
		echo "python3 $ONNX_DATA"
		return 0
	fi
	for py in python3 "$root/.venv/bin/python"; do
		d=$("$py" -c 'import onnx,os;print(os.path.dirname(onnx.__file__))' 2>/dev/null) || continue
		[ -d "$d/backend/test/data/node" ] && {
			echo "$py $d/backend/test/data"
			return 0
		}
	done
	return 1
}

# the library folders of cuDNN and cuBLAS(Lt) on this machine: the CUDA
# toolkit's, and the nvidia-* Python packages' (where PyTorch gets them)
cuda_lib_dirs() {
	dirs=""
	for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
		[ -d "$d" ] && dirs="$dirs:$d"
	done
	for py in python3 /opt/torch/.venv/bin/python3; do
		more=$("$py" - 2>/dev/null <<'EOF'
import importlib, os
out = []
for m in ("nvidia.cudnn", "nvidia.cublas", "nvidia.cu13", "nvidia.cuda_runtime"):
    try:
        p = importlib.import_module(m)
    except Exception:
        continue
    for base in list(getattr(p, "__path__", [])):
        lib = os.path.join(base, "lib")
        if os.path.isdir(lib):
            out.append(lib)
print(":".join(out))
EOF
		) && [ -n "$more" ] && {
			dirs="$dirs:$more"
			break
		}
	done
	echo "${dirs#:}"
}

# runs a bundle binary with the bundle's libraries (set only for it: the
# bundle's older libraries must not reach the machine's own programs)
bx() {
	LD_LIBRARY_PATH="$B/lib:$CUDA_DIRS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" GVBINDIR="$B/graphviz" \
		FONTCONFIG_FILE="$FONTS_CONF" "$@"
}

status_of() {   # exit status -> word
	case "$1" in
	0) echo passed ;;
	77) echo "skipped" ;;
	124 | 137) echo "timed out" ;;
	*) echo "failed ($1)" ;;
	esac
}

step_ops() {
	echo "== test_backend_ops"
	timeout -k 10 "$STEP_TIMEOUT" env LD_LIBRARY_PATH="$B/lib:$CUDA_DIRS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
		"$B/bin/test_backend_ops" >"$O/ops.log" 2>&1
	rc=$?
	# the calibration statistics on the GPU against ir_calib_observe, in the same log
	echo "== test_calib_gpu" >>"$O/ops.log"
	timeout -k 10 "$STEP_TIMEOUT" env LD_LIBRARY_PATH="$B/lib:$CUDA_DIRS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
		"$B/bin/test_calib_gpu" >>"$O/ops.log" 2>&1 || rc=1
	tail -n 3 "$O/ops.log"
	OPS_RC=$rc
	OPS_LINE=$(grep -E '^[0-9]+ ops, [0-9]+ cases' "$O/ops.log" | tail -n 1)
	[ -n "$OPS_LINE" ] || OPS_LINE=$(tail -n 1 "$O/ops.log")
}

step_conformance() {
	echo "== conformance --device $CONF_DEVICE"
	CONF_RC=1
	CONF_LINE="no onnx backend test data"
	if [ "$gpu" = no ] && [ "$CONF_DEVICE" = cuda ]; then
		CONF_RC=77
		CONF_LINE="skipped: no GPU"
		echo "$CONF_LINE" | tee "$O/conformance.txt"
		return
	fi
	found=$(find_onnx_data) || {
		echo "gpu.sh: no Python with the onnx package's backend test data" | tee "$O/conformance.txt"
		return
	}
	py=${found%% *}
	data=${found#* }
	tmp=$(mktemp -d) || return
	# shards run at once (each test runs in its own child process, which
	# starts CUDA afresh: one process would take too long)
	n=0
	# the node tests dealt round-robin into SHARDS-2 shards (so that the slow
	# families spread out), the other suites in two
	nn=$((SHARDS > 3 ? SHARDS - 2 : 1))
	shards='simple pytorch-operator light .;pytorch-converted .'
	k=0
	while [ $k -lt $nn ]; do
		re=$(ls "$data/node" | awk -v n=$nn -v k=$k '(NR - 1) % n == k { printf "%s%s", (c++ ? "|" : ""), $0 }')
		[ -n "$re" ] && shards="$shards;node ^($re)\$"
		k=$((k + 1))
	done
	[ -n "${CONF_FILTER:-}" ] && shards="node simple pytorch-converted pytorch-operator light $CONF_FILTER"
	IFS=';'
	set -f
	for shard in $shards; do
		unset IFS
		set +f
		n=$((n + 1))
		suites=${shard% *}
		filter=${shard##* }
		(
			cd "$data" && bx timeout -k 10 "$STEP_TIMEOUT" "$B/bin/ogsh" -c \
				"conformance $suites --device $CONF_DEVICE --json --timeout=$CONF_TIMEOUT --filter='$filter'" \
				>"$tmp/shard$n.json" 2>"$tmp/shard$n.err"
			echo $? >"$tmp/shard$n.rc"
		) &
		while [ "$(jobs -p | wc -l)" -ge "$SHARDS" ]; do
			sleep 1
		done
	done
	unset IFS
	set +f
	wait
	"$py" - "$tmp" "$O" <<'EOF'
import glob, json, os, sys
tmp, out = sys.argv[1], sys.argv[2]
tests, errors, rcs = [], [], []
for f in sorted(glob.glob(os.path.join(tmp, "shard*.json")), key=lambda p: int(p.split("shard")[-1][:-5])):
    base = f[:-5]
    rc = open(base + ".rc").read().strip() if os.path.exists(base + ".rc") else "?"
    err = open(base + ".err").read().strip() if os.path.exists(base + ".err") else ""
    rcs.append(rc)
    try:
        tests += json.load(open(f))["tests"]
    except Exception as e:
        errors.append(f"{os.path.basename(base)}: exit {rc}: {err[-500:] or e}")
        continue
    if rc != "0" and err:
        errors.append(f"{os.path.basename(base)}: exit {rc}: {err[-500:]}")
order = ["node", "simple", "pytorch-converted", "pytorch-operator", "light"]
suites = {}
for t in tests:
    s = suites.setdefault(t["suite"], {"total": 0, "passed": 0, "failed": 0, "unsupported": 0, "error": 0,
                                       "crashed": 0, "timed out": 0, "on_gpu": 0, "passed_on_gpu": 0, "cpu_only": 0})
    s["total"] += 1
    s[t["status"]] = s.get(t["status"], 0) + 1
    g, c, f_ = t.get("gpu_nodes", 0), t.get("cpu_nodes", 0), t.get("folded_nodes", 0)
    if g > 0:
        s["on_gpu"] += 1
        s["passed_on_gpu"] += t["status"] == "passed"
    elif c + f_ > 0:
        s["cpu_only"] += 1
json.dump({"tests": tests, "suites": suites, "shard_errors": errors}, open(os.path.join(out, "conformance.json"), "w"), indent=1)
json.dump({k: suites[k]["passed"] for k in sorted(suites)}, open(os.path.join(out, "floor-cuda.json"), "w"), indent=2)
with open(os.path.join(out, "conformance.txt"), "w") as f:
    hdr = f"{'suite':18} {'tests':>6} {'passed':>6} {'failed':>6} {'unsup':>6} {'error':>6} {'crash':>6} {'t/o':>4} {'on gpu':>7} {'gpu ok':>7} {'cpu-only':>8}"
    print(hdr, file=f)
    tot = {}
    for k in sorted(suites, key=lambda k: order.index(k) if k in order else 99):
        s = suites[k]
        for kk, v in s.items():
            tot[kk] = tot.get(kk, 0) + v
        print(f"{k:18} {s['total']:6} {s['passed']:6} {s['failed']:6} {s['unsupported']:6} {s['error']:6} "
              f"{s['crashed']:6} {s['timed out']:4} {s['on_gpu']:7} {s['passed_on_gpu']:7} {s['cpu_only']:8}", file=f)
    if tot:
        print(f"{'all':18} {tot['total']:6} {tot['passed']:6} {tot['failed']:6} {tot['unsupported']:6} {tot['error']:6} "
              f"{tot['crashed']:6} {tot['timed out']:4} {tot['on_gpu']:7} {tot['passed_on_gpu']:7} {tot['cpu_only']:8}", file=f)
    for e in errors:
        print("shard error:", e, file=f)
    print("\nnot passing (test: status: detail) [gpu/cpu nodes]:", file=f)
    for t in tests:
        if t["status"] != "passed":
            print(f"{t['suite']}/{t['test']}: {t['status']}: {t.get('detail')} "
                  f"[{t.get('gpu_nodes', 0)}/{t.get('cpu_nodes', 0)}]", file=f)
    print("\ncpu-only (passed or not, no node on the GPU):", file=f)
    for t in tests:
        if t.get("gpu_nodes", 0) == 0 and t.get("cpu_nodes", 0) + t.get("folded_nodes", 0) > 0:
            print(f"{t['suite']}/{t['test']}: {t['ops']}", file=f)
ok = tot.get("passed", 0) if tot else 0
line = (f"{tot.get('total', 0)} tests: {ok} passed, {tot.get('failed', 0)} failed, {tot.get('unsupported', 0)} unsupported, "
        f"{tot.get('error', 0)} errors, {tot.get('crashed', 0)} crashed, {tot.get('timed out', 0)} timed out; "
        f"{tot.get('on_gpu', 0)} on the GPU, {tot.get('cpu_only', 0)} cpu-only") if tot else "no results"
if errors:
    line += f"; {len(errors)} shard errors: {errors[0][:200]}"
open(os.path.join(tmp, "line"), "w").write(line)
sys.exit(0 if tot and not errors and not tot.get("crashed") and not tot.get("timed out") else 1)
EOF
	CONF_RC=$?
	CONF_LINE=$(cat "$tmp/line" 2>/dev/null)
	head -n 8 "$O/conformance.txt"
	rm -rf "$tmp"
}

step_check() {
	echo "== tests/gpu/cmd_check.ogs"
	if [ ! -f "$root/tests/gpu/cmd_check.ogs" ]; then
		echo "no tests/gpu/cmd_check.ogs" >"$O/check.log"
		CHECK_RC=77
	else
		bx timeout -k 10 "$STEP_TIMEOUT" sh "$root/tests/gpu/run_check.sh" "$B/bin/ogsh" "$root/tests/gpu/cmd_check.ogs" \
			>"$O/check.log" 2>&1
		CHECK_RC=$?
	fi
	tail -n 5 "$O/check.log"
	CHECK_LINE=$(tail -n 1 "$O/check.log")
}

do_run() {
	O=${OUT:-$root/gpu-out}
	case "${1:-}" in
	"" | ops | conformance | check) ;;
	*)
		O=$1
		shift
		;;
	esac
	steps=${*:-ops conformance check}
	[ -x "$B/bin/ogsh" ] || die "no bundle at $B: run 'scripts/gpu.sh bundle' first (on the build machine)"
	mkdir -p "$O" || die "cannot make $O"
	O=$(cd "$O" && pwd)
	STEP_TIMEOUT=${STEP_TIMEOUT:-420}
	CONF_TIMEOUT=${CONF_TIMEOUT:-60}
	CONF_DEVICE=${CONF_DEVICE:-cuda}
	SHARDS=${SHARDS:-14}
	CUDA_DIRS=$(cuda_lib_dirs)
	# fontconfig: the bundle's font, and the machine's own fonts if any
	FONTS_CONF=$(mktemp)
	cat >"$FONTS_CONF" <<EOF
<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "fonts.dtd">
<fontconfig><dir>$B/fonts</dir><dir>/usr/share/fonts</dir><cachedir>/tmp/ogsh-fontconfig</cachedir></fontconfig>
EOF
	echo "== the machine"
	gpu=yes
	if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
		{
			nvidia-smi -L
			nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,utilization.gpu,temperature.gpu,clocks.sm,clocks.max.sm --format=csv
		} >"$O/gpu.txt" 2>&1
	else
		gpu=no
		echo "no GPU: nvidia-smi is missing or finds no GPU" >"$O/gpu.txt"
	fi
	echo "cuDNN/cuBLAS folders: ${CUDA_DIRS:-none found}" >>"$O/gpu.txt"
	cat "$O/gpu.txt"
	[ $gpu = yes ] || echo "gpu.sh: no GPU here: the steps will report skipped"

	OPS_RC=-; OPS_LINE="not run"
	CONF_RC=-; CONF_LINE="not run"
	CHECK_RC=-; CHECK_LINE="not run"
	for s in $steps; do
		case $s in
		ops) step_ops ;;
		conformance) step_conformance ;;
		check) step_check ;;
		*) die "unknown step '$s' (there is: ops, conformance, check)" ;;
		esac
	done
	rm -f "$FONTS_CONF"
	{
		echo
		echo "== summary ($(date -u '+%Y-%m-%d %H:%M UTC'), bundle $(cat "$B/VERSION" 2>/dev/null))"
		printf '%-12s %-12s %s\n' step result detail
		for s in ops conformance check; do
			case $s in
			ops) rc=$OPS_RC line=$OPS_LINE ;;
			conformance) rc=$CONF_RC line=$CONF_LINE ;;
			check) rc=$CHECK_RC line=$CHECK_LINE ;;
			esac
			if [ "$rc" = - ]; then r="not run"; else r=$(status_of "$rc"); fi
			printf '%-12s %-12s %s\n' "$s" "$r" "$line"
		done
		echo "logs: $O"
	} | tee "$O/summary.txt"
	for rc in $OPS_RC $CONF_RC $CHECK_RC; do
		case $rc in 0 | 77 | -) ;; *) return 1 ;; esac
	done
	return 0
}

case "${1:-}" in
bundle) do_bundle ;;
run)
	shift
	do_run "$@"
	;;
ogsh)
	# the bundle's ogsh with its libraries (for benchmarks: bench/gpu_bench.py --ogsh 'scripts/gpu.sh ogsh')
	shift
	[ -x "$B/bin/ogsh" ] || die "no bundle at $B: run 'scripts/gpu.sh bundle' first (on the build machine)"
	CUDA_DIRS=$(cuda_lib_dirs)
	FONTS_CONF=/dev/null
	bx "$B/bin/ogsh" "$@"
	;;
exec)
	# another bundle binary with the bundle's libraries: scripts/gpu.sh exec test_backend_ops --filter Attention
	shift
	[ $# -gt 0 ] && [ -x "$B/bin/$1" ] || die "usage: scripts/gpu.sh exec BINARY [ARG...] (a program in $B/bin)"
	bin=$1
	shift
	CUDA_DIRS=$(cuda_lib_dirs)
	FONTS_CONF=/dev/null
	bx "$B/bin/$bin" "$@"
	;;
*)
	echo "usage: scripts/gpu.sh bundle | run [OUT] [ops|conformance|check...] | ogsh [ARG...] | exec BINARY [ARG...]" >&2
	exit 2
	;;
esac
