#!/bin/sh
# run_subgraphs.sh OGSH [PYTHON]: models with If, Loop, Scan and sequence ops
# between GPU work (issue 19) run with --device=cuda --check=cpu
# (tests/gpu/make_subgraphs.py makes the models and checks them and the plan).
# OGSH may be a command line ("sh scripts/gpu.sh ogsh").
# Exits 77 (skipped) when there is no GPU or no Python with onnx and numpy;
# otherwise 0 when every model passes, 1 when one does not.
# Environment: SUBGRAPHS_DIR keeps the models there (made once, reused);
# OGSH_CHECK_DEVICE=cpu runs both sides on the CPU, with or without a GPU
# (to try the script).
ogsh=$1
py=${2:-python3}
here=$(cd "$(dirname "$0")" && pwd)
if [ "${OGSH_CHECK_DEVICE:-cuda}" != cpu ]; then
	if [ "${OGSH_DEVICE:-}" = cpu ]; then
		echo "run_subgraphs: skipped: the GPU is turned off (OGSH_DEVICE=cpu)"
		exit 77
	fi
	if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
		echo "run_subgraphs: skipped: no GPU found"
		exit 77
	fi
fi
if ! "$py" -c 'import onnx, numpy' 2>/dev/null; then
	echo "run_subgraphs: skipped: $py lacks onnx or numpy"
	exit 77
fi
if [ -n "${SUBGRAPHS_DIR:-}" ]; then
	dir=$SUBGRAPHS_DIR
	[ -f "$dir/subgraphs.json" ] || "$py" "$here/make_subgraphs.py" "$dir" || exit 1
else
	dir=$(mktemp -d) || exit 1
	trap 'rm -rf "$dir"' EXIT
	"$py" "$here/make_subgraphs.py" "$dir" || exit 1
fi
"$py" "$here/make_subgraphs.py" --check "$ogsh" "$dir"
