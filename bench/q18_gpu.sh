#!/bin/sh
# q18_gpu.sh [OUT] [STEP...]: issue 18's GPU checks and benchmarks in one call
# on the GPU machine (from the repo root, with gpu-bundle/ or .gpu/bundle.txz;
# python3 with torch, torchvision, transformers, onnx, onnxruntime).
# Steps (default: models bench digits):
#   models   bench/q18_models.py: ResNet-50, MobileNetV2, BERT-base (float32),
#            a Llama-style decoder (float16) and onnxruntime's QDQ ResNet-50, MobileNetV2 and BERT,
#            exported once into $Q18_MODELS (default /tmp/q18; kept for the
#            next call while the machine stays up)           -> OUT/models.txt
#   bench    bench/q18_bench.py: each model's fp16 / int8 / fp8 / int4 stage
#            made once (saved under $Q18_MODELS/stages), its plan, run
#            --check=cpu, time at batch 1, 64 (and 256 for ResNet-50)
#                                                           -> OUT/q18_bench.txt,
#            OUT/q18_bench.json, OUT/logs/, OUT/plans/ (the islands)
#   digits   the digits models quantized int8 and fp8: eval top-1 on the GPU
#            against the CPU reference                     -> OUT/digits.txt
#   islands  tests/gpu/run_islands.sh (the gpu-islands test) -> OUT/islands.txt
# Prints the tables last. The first call exports (about 3 minutes); if a
# call would pass the device tool's limit, split it: `... models digits`,
# then `... bench`, then `... islands`.
# Environment: OGSH (default: sh scripts/gpu.sh ogsh), Q18_MODELS, Q18_ONLY
# (bench: models, comma-separated), Q18_DEVICE (cuda; cpu with
# Q18_LOCAL=1 tries everything on the digits stand-ins without torch or a GPU).
set -u
OUT=${1:-${OUT:-gpu-out}}
[ $# -gt 0 ] && shift
steps=${*:-models bench digits}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
M=${Q18_MODELS:-/tmp/q18}
DEV=${Q18_DEVICE:-cuda}
og=${OGSH:-sh scripts/gpu.sh ogsh}
py=${PYTHON:-python3}

if [ -z "${OGSH:-}" ] && [ ! -x gpu-bundle/bin/ogsh ]; then
	[ -f .gpu/bundle.txz ] || { echo "q18_gpu.sh: no gpu-bundle/ and no .gpu/bundle.txz (scripts/gpu.sh bundle)"; exit 1; }
	tar xJf .gpu/bundle.txz || exit 1
fi
{
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1
	$og -c gpu 2>&1
	"$py" -c 'import torch, onnx, onnxruntime; print("torch", torch.__version__, "onnx", onnx.__version__, "onnxruntime", onnxruntime.__version__)' 2>&1
	echo "bundle $(cat gpu-bundle/VERSION 2>/dev/null)"
} >"$OUT/gpu.txt"
head -n 3 "$OUT/gpu.txt"

for s in $steps; do
	t0=$(date +%s)
	case $s in
	models)
		if [ "${Q18_LOCAL:-0}" = 1 ]; then
			"$py" bench/q18_models.py "$M" --local-test >"$OUT/models.txt" 2>&1
		else
			timeout -k 10 480 "$py" bench/q18_models.py "$M" >"$OUT/models.txt" 2>&1
		fi
		echo "== models ($?, $(($(date +%s) - t0)) s)"
		grep -E 'FAILED|failed|^[a-z0-9_]+: ' "$OUT/models.txt" | grep -v WARNING
		;;
	bench)
		timeout -k 10 540 "$py" bench/q18_bench.py --ogsh "$og" --models "$M" --out "$OUT" --device "$DEV" \
			${Q18_ONLY:+--only "$Q18_ONLY"} ${Q18_QUICK:+--quick} >"$OUT/q18_bench.txt" 2>&1
		rc=$?
		echo "== bench ($rc, $(($(date +%s) - t0)) s)"
		if [ $rc -ne 0 ] && [ -f "$M/q18_bench.json" ]; then   # stopped early: the tables of what was done
			"$py" bench/q18_bench.py --models "$M" --out "$OUT" --report >>"$OUT/q18_bench.txt" 2>&1
		fi
		;;
	digits)
		timeout -k 10 300 "$py" bench/q18_bench.py --ogsh "$og" --out "$OUT" --device "$DEV" --digits \
			>"$OUT/digits.txt" 2>&1
		echo "== digits ($?, $(($(date +%s) - t0)) s)"
		;;
	islands)
		if [ "$DEV" = cpu ]; then export OGSH_CHECK_DEVICE=cpu; fi
		ISLANDS_DIR=/tmp/q18-islands timeout -k 10 420 sh tests/gpu/run_islands.sh "$og" "$py" >"$OUT/islands.txt" 2>&1
		echo "== islands ($?, $(($(date +%s) - t0)) s)"
		grep -E 'FAIL|^islands:' "$OUT/islands.txt" | head -n 30
		;;
	*)
		echo "q18_gpu.sh: unknown step '$s' (models, bench, digits, islands)"
		exit 2
		;;
	esac
done
# the tables last
[ -f "$OUT/q18_bench.txt" ] && case " $steps " in *" bench "*) sed -n '/^### run --check/,$p' "$OUT/q18_bench.txt" ;; esac
[ -f "$OUT/digits.txt" ] && case " $steps " in *" digits "*) sed -n '/^### digits/,$p' "$OUT/digits.txt" ;; esac
exit 0
