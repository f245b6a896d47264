#!/bin/sh
# tfm_gpu.sh [OUT] [STEP...]: issue 20's float16 transformer work on the GPU
# machine in one call (from the repo root, with gpu-bundle/ or
# .gpu/bundle.txz; python3 with torch, torchvision, transformers, onnx).
# Steps (default: export profile):
#   export   bench/gpu_bench.py --export-only: ViT-B/16, BERT-base, GPT-2 in
#            float16 (and float32 with TFM_FP32=1) into $TFM_MODELS (default
#            /tmp/tfm; kept while the machine stays up)
#   profile  ogsh `optimize` then `plan` and `profile` of each model at batch
#            1 and 32                  -> OUT/profile.txt, by op: OUT/profile_sum.txt
#   nodes    `optimize`, `nodes` and `shapes` of each model    -> OUT/nodes.txt
#   torch    bench/torch_kernels.py: PyTorch's kernels for the same rows
#                                                       -> OUT/torch.txt
#   check    every stage of `optimize` against the CPU reference
#            (`run --check=cpu --rtol=1e-2`) at batch 1 -> OUT/check.txt
#   ops      the GPU op test (tests/gpu/test_backend_ops) -> OUT/ops.txt
#   bench    bench/gpu_bench.py on the transformer rows -> OUT/bench.txt, OUT/gpu_bench.json
# Environment: OGSH (default: sh scripts/gpu.sh ogsh), TFM_MODELS,
# TFM_ONLY (models, comma-separated: vit,bert,gpt2), TFM_BATCHES (1,32),
# TFM_BENCH_ARGS (more arguments for gpu_bench.py).
set -u
OUT=${1:-${OUT:-gpu-out}}
[ $# -gt 0 ] && shift
steps=${*:-export profile}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
M=${TFM_MODELS:-/tmp/tfm}
only=${TFM_ONLY:-vit,bert,gpt2}
batches=${TFM_BATCHES:-1,32}
og=${OGSH:-sh scripts/gpu.sh ogsh}
py=${PYTHON:-python3}

if [ -z "${OGSH:-}" ] && [ ! -x gpu-bundle/bin/ogsh ]; then
	[ -f .gpu/bundle.txz ] || { echo "tfm_gpu.sh: no gpu-bundle/ and no .gpu/bundle.txz (scripts/gpu.sh bundle)"; exit 1; }
	tar xJf .gpu/bundle.txz || exit 1
fi
{
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1
	"$py" -c 'import torch, onnx; print("torch", torch.__version__, "onnx", onnx.__version__, "cudnn", torch.backends.cudnn.version())' 2>&1
	echo "bundle $(cat gpu-bundle/VERSION 2>/dev/null)"
} >"$OUT/gpu.txt"
cat "$OUT/gpu.txt"

models=$(echo "$only" | tr ',' ' ')
bl=$(echo "$batches" | tr ',' ' ')
for s in $steps; do
	t0=$(date +%s)
	case $s in
	export)
		mkdir -p "$M"
		dts=fp16
		[ "${TFM_FP32:-0}" = 1 ] && dts=fp32,fp16
		timeout -k 10 420 "$py" bench/gpu_bench.py --export-only "$M" --models "$only" --dtypes "$dts" \
			>"$OUT/export.txt" 2>&1
		echo "== export ($?, $(($(date +%s) - t0)) s)"
		grep -E '^wrote|Error|error' "$OUT/export.txt" | tail -n 8
		;;
	profile)
		for m in $models; do
			for b in $bl; do
				echo "#### $m fp16 batch $b" >>"$OUT/profile.txt"
				timeout -k 10 300 $og -c "load $M/${m}_fp16.onnx; optimize --quiet; plan --shape=batch=$b; profile --shape=batch=$b --top=5000; time --batch=$b --iters=100" \
					>"$OUT/p.txt" 2>&1
				cat "$OUT/p.txt" >>"$OUT/profile.txt"
				# the profile's time by op and kernel (the ms column is the first of the form 0.123)
				{
					echo "#### $m fp16 batch $b: $(grep -E '^median' "$OUT/p.txt" | tail -n 1)"
					awk '$1 ~ /^n[0-9]+$/ && $4 == "gpu" { for (i = 5; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9][0-9][0-9]$/) break;
						impl = ""; for (j = 5; j < i; j++) impl = impl " " $j; t[$3 " |" impl] += $i; c[$3 " |" impl]++; tot += $i }
						END { for (k in t) printf "%8.3f %4d %s\n", t[k], c[k], k; printf "%8.3f total (per-node medians)\n", tot }' \
						"$OUT/p.txt" | sort -rn | head -n 16
				} >>"$OUT/profile_sum.txt"
				rm -f "$OUT/p.txt"
				echo "== profile $m b$b: $(grep -E '^median' "$OUT/profile.txt" | tail -n 1)"
			done
		done
		;;
	nodes)
		# the optimized graphs, node by node with their types (for passes)
		for m in $models; do
			echo "#### $m fp16 after optimize" >>"$OUT/nodes.txt"
			timeout -k 10 200 $og -c "load $M/${m}_fp16.onnx; optimize; nodes; shapes" >>"$OUT/nodes.txt" 2>&1
		done
		echo "== nodes ($(wc -l <"$OUT/nodes.txt") lines)"
		;;
	torch)
		for m in $models; do
			for b in $bl; do
				echo "#### torch $m fp16 batch $b (eager)" >>"$OUT/torch.txt"
				timeout -k 10 200 "$py" bench/torch_kernels.py --model "$m" --dtype fp16 --batch "$b" --top 30 \
					>>"$OUT/torch.txt" 2>&1
			done
		done
		echo "== torch ($(($(date +%s) - t0)) s)"
		;;
	check)
		# every stage of optimize (checkout 0..N; the stages past the last give an error, the script goes on)
		for m in $models; do
			for b in ${TFM_CHECK_BATCHES:-1}; do
				echo "#### $m fp16 batch $b: every stage against the CPU reference" >>"$OUT/check.txt"
				cmds="set on-error continue; load $M/${m}_fp16.onnx; optimize --quiet; stages"
				i=0
				while [ "$i" -le 14 ]; do
					cmds="$cmds; checkout $i; run --check=cpu --rtol=1e-2 --atol=1e-2 --shape=batch=$b"
					i=$((i + 1))
				done
				timeout -k 10 500 $og -c "$cmds" >>"$OUT/check.txt" 2>&1
				echo "== check $m b$b ($?): $(grep -c 'compared: [0-9]* passed, 0 failed' "$OUT/check.txt") passing runs so far," \
					"$(grep -c 'error: run' "$OUT/check.txt") failing"
			done
		done
		;;
	ops)
		# the GPU op test; TFM_OPS_FILTER: only the cases whose label matches (a regex)
		if [ -n "${TFM_OPS_FILTER:-}" ]; then
			timeout -k 10 400 sh scripts/gpu.sh exec test_backend_ops --filter "$TFM_OPS_FILTER" >"$OUT/ops.txt" 2>&1
		else
			timeout -k 10 400 sh scripts/gpu.sh run "$OUT/ops" ops >"$OUT/ops.txt" 2>&1
		fi
		echo "== ops ($?)"
		grep -E "FAIL|fail" "$OUT/ops.txt" | head -n 20
		tail -n 3 "$OUT/ops.txt"
		;;
	bench)
		timeout -k 10 560 "$py" bench/gpu_bench.py --ogsh "$og" --models "$only" --dtypes fp16 --batches "$batches" \
			--modes graph,compile --iters 100 --out "$OUT" ${TFM_BENCH_ARGS:-} >"$OUT/bench.txt" 2>&1
		echo "== bench ($?, $(($(date +%s) - t0)) s)"
		;;
	*)
		echo "tfm_gpu.sh: unknown step '$s'"
		;;
	esac
done
[ -f "$OUT/bench.txt" ] && sed -n '/^| model/,$p' "$OUT/bench.txt"
exit 0
