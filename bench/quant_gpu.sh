#!/bin/sh
# quant_gpu.sh OUT: issue 17's GPU figures in one run on the GPU machine
# (from the repo root, gpu-bundle/ present; python with torch, onnx, onnxruntime):
#   1. the digits models: calibrate on the GPU, quantize (int8 entropy, fp8),
#      eval top-1 on the GPU and on the CPU reference, and the plan's placement
#      -> OUT/digits.txt
#   2. bench/quant_bench.py on ResNet-50 and BERT-base over 1000 generated
#      samples, with sensitivity over 256 images -> OUT/quant_bench.txt/.json
set -u
OUT=${1:-${OUT:-gpu-out}}
mkdir -p "$OUT"
og="sh scripts/gpu.sh ogsh"
D=tests/models/digits
{
	for m in cnn transformer; do
		for q in "quantize int8 --method=entropy" "quantize fp8" "convert-fp16"; do
			echo "== digits_$m: $q"
			$og $D/digits_$m.onnx -c "set timer on; calibrate --data=$D/calib.npy --batch=32; $q; \
eval --data=$D/test.npy --labels=$D/test_labels.npy --batch=540 --device=cuda; \
eval --data=$D/test.npy --labels=$D/test_labels.npy --batch=540 --device=cpu; plan --shape=x=64x1x8x8" 2>&1 | grep -vE '^  (rewrote|rejected|note)' 
		done
	done
} >"$OUT/digits.txt" 2>&1
python bench/quant_bench.py --ogsh "$og" --models resnet50,bert --samples 1000 --device cuda --batch 32 \
	--sensitivity 256 --out /tmp/qb >"$OUT/quant_bench.txt" 2>"$OUT/quant_bench.err"
cp /tmp/qb/quant_bench.json "$OUT/" 2>/dev/null
tail -5 "$OUT/quant_bench.txt"
