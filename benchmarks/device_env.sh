# Sourced by the device scripts (benchmarks/*_device.sh, device_run.sh, device_check.sh) on the
# lent GPU machine, in the repository root: installs the carried wheels (the image lacks them)
# and makes `kernelsight` importable from this tree.
# Usage: source benchmarks/device_env.sh PIP_LOG [WHEEL_DIR ...]   (default WHEEL_DIR: .whl)
_ks_log=$1
shift
_ks_wheels=$(for d in "${@:-.whl}"; do ls "$d"/*.whl 2>/dev/null; done)
if [ -n "$_ks_wheels" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $_ks_wheels \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
if ! python3 -m pip install -q --no-deps --no-index --no-build-isolation -e . >"$_ks_log" 2>&1; then
  # no editable install possible (no setuptools there): lay the package out by links instead
  rm -rf /tmp/kspkg && mkdir -p /tmp/kspkg && cp -r kernelsight /tmp/kspkg/
  for d in agent analysis server; do ln -s "$PWD/$d" "/tmp/kspkg/kernelsight/$d"; done
  export PYTHONPATH=/tmp/kspkg${PYTHONPATH:+:$PYTHONPATH}
fi
unset _ks_log _ks_wheels
