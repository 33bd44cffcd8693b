#!/bin/bash
# Scale-out on the lent 2-GPU machine: the tuner through the local backend and through Ray, on
# 1 and 2 GPUs (docs/benchmarks.md, "Scale-out"; docs/ray.md).
# Usage (repository root there, with .whl-ray and the tree-sitter wheels carried):
#   bash benchmarks/scaleout_device.sh OUTDIR [scaleout_gpu.py options]
set -o pipefail
out=${1:-/tmp/ks-scaleout}
mkdir -p "$out"
# NVLink multicast stays off (the machine's GPUs are shared); every worker inherits these.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source benchmarks/device_env.sh "$out/pip.txt" .whl .whl-ray
python3 -c "import kernelsight.agent.backends, torch, triton, ray; print('torch', torch.__version__, 'triton', triton.__version__, 'ray', ray.__version__, 'gpus', torch.cuda.device_count())"
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
work=/tmp/ks-scaleout-work
rm -rf "$work"
PYTHONUNBUFFERED=1 python3 benchmarks/scaleout_gpu.py --out "$work" "${@:2}" 2>&1 | tee "$out/log.txt"
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu --format=csv
# a few files come back: the table, the numbers, and every run's record
cp "$work"/scaleout.json "$work"/scaleout.md "$out"/ 2>/dev/null
tar czf "$out"/runs.tgz -C "$work" --exclude='src' . 2>/dev/null
