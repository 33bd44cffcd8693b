#!/bin/bash
# One call on the lent GPU machine (image: Python 3.12, torch 2.11, triton 3.6): the product as a
# user of that image meets it. Writes to OUTDIR: check.txt (`kernelsight check --summary
# examples/` under triton 3.6), memory.txt (the server's memory phase by phase), gpu.txt (every
# example kernel checked against its torch reference and timed on the GPU), summary.txt.
# Usage (in the repository root there): bash benchmarks/device_check.sh OUTDIR
set -o pipefail
out=${1:-/tmp/ks-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
source benchmarks/device_env.sh "$out/pip.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee "$out/summary.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$out/summary.txt"

t0=$SECONDS
python3 -m kernelsight check --summary examples/ >"$out/check.txt" 2>&1
rc=$?
echo "check: exit $rc, $(grep -c ': KS' "$out/check.txt") finding lines, $((SECONDS - t0)) s" | tee -a "$out/summary.txt"

timeout 240 python3 benchmarks/server_memory_probe.py --edits 1000 >"$out/memory.txt" 2>&1
echo "memory probe: exit $?" | tee -a "$out/summary.txt"
MALLOC_ARENA_MAX=2 timeout 240 python3 benchmarks/server_memory_probe.py --edits 200 >"$out/memory_arena2.txt" 2>&1
echo "memory probe (MALLOC_ARENA_MAX=2): exit $?" | tee -a "$out/summary.txt"

timeout 300 python3 benchmarks/examples_gpu.py >"$out/gpu.txt" 2>&1
echo "examples on the GPU: exit $?" | tee -a "$out/summary.txt"
tail -n 40 "$out/gpu.txt"
cat "$out/memory.txt" "$out/memory_arena2.txt"
