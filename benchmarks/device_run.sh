#!/bin/bash
# Benchmark every example through the harness on the lent GPU machine (see docs/benchmarks.md).
# Usage (in the repository root there): bash benchmarks/device_run.sh OUTDIR
set -o pipefail
out=${1:-/tmp/ks-out}
mkdir -p "$out"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
if ! python3 -m pip install -q --no-deps --no-index --no-build-isolation -e . >"$out/pip.txt" 2>&1; then
  # no editable install possible: lay the package out by links instead
  rm -rf /tmp/kspkg && mkdir -p /tmp/kspkg && cp -r kernelsight /tmp/kspkg/
  for d in agent analysis server; do ln -s "$PWD/$d" "/tmp/kspkg/kernelsight/$d"; done
  export PYTHONPATH=/tmp/kspkg${PYTHONPATH:+:$PYTHONPATH}
fi
python3 -c "import kernelsight.agent.evaluate, kernelsight.analysis.api, triton, torch; print('kernelsight importable; torch', torch.__version__, 'triton', triton.__version__)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
PYTHONUNBUFFERED=1 python3 benchmarks/harness_examples.py --device cuda --out "$out" "${@:2}" 2>&1 | tee "$out/log.txt"
