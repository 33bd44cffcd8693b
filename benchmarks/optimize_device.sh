#!/bin/bash
# The tuner on the lent GPU machine: the badly configured GEMM and the GEMM / softmax /
# flash-attention examples, each beside its torch baseline (docs/benchmarks.md, Optimization).
# Usage (in the repository root there): bash benchmarks/optimize_device.sh OUTDIR [NAME ...]
set -o pipefail
out=${1:-/tmp/ks-opt-out}
work=/tmp/ks-opt
mkdir -p "$out" "$work"
source benchmarks/device_env.sh "$work/pip.txt"
python3 -c "import kernelsight.agent.optimize, triton, torch; print('torch', torch.__version__, 'triton', triton.__version__)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
# KS_OPT_SECONDS bounds the tuning so that the copies below still happen inside the lease
PYTHONUNBUFFERED=1 timeout "${KS_OPT_SECONDS:-600}" python3 benchmarks/optimize_gpu.py \
  --out "$work" --results "$out" "${@:2}" 2>&1 | tee "$out/log.txt"
cp "$work"/runs/matmul_untuned/report.md "$out"/untuned_report.md 2>/dev/null
cp "$work"/runs/matmul_untuned/best_speedup.png "$out"/untuned_best_speedup.png 2>/dev/null
tar czf "$out"/runs.tgz -C "$work" runs
