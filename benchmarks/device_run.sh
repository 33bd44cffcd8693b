#!/bin/bash
# Benchmark every example through the harness on the lent GPU machine (see docs/benchmarks.md).
# Usage (in the repository root there): bash benchmarks/device_run.sh OUTDIR
set -o pipefail
out=${1:-/tmp/ks-out}
mkdir -p "$out"
source benchmarks/device_env.sh "$out/pip.txt"
python3 -c "import kernelsight.agent.evaluate, kernelsight.analysis.api, triton, torch; print('kernelsight importable; torch', torch.__version__, 'triton', triton.__version__)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
PYTHONUNBUFFERED=1 python3 benchmarks/harness_examples.py --device cuda --out "$out" "${@:2}" 2>&1 | tee "$out/log.txt"
