#!/bin/sh
# run_check.sh OGSH SCRIPT: runs the GPU golden script (tests/gpu/cmd_check.ogs)
# with ogsh on a machine with a GPU. Exits 77 (skipped) when there is no GPU
# or no script; otherwise ogsh's exit status.
ogsh=$1
script=$2
if [ ! -f "$script" ]; then
	echo "run_check: skipped: no $script"
	exit 77
fi
if [ "${OGSH_DEVICE:-}" = cpu ]; then
	echo "run_check: skipped: the GPU is turned off (OGSH_DEVICE=cpu)"
	exit 77
fi
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
	echo "run_check: skipped: no GPU found"
	exit 77
fi
cd "$(dirname "$script")" || exit 1
exec "$ogsh" -f "$(basename "$script")"
