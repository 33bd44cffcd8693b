"""Which GPU a timing ran on, and in what clock state: read beside every GPU stage.

A speedup is a ratio of two times taken in one process on one GPU (candidate and reference,
``agent/timing.py``), so it holds for that GPU model only: an H100 and an H200 rank the same
two kernels differently. The evaluation backends (``agent/backends.py``,
``agent/ray_backend.py``) therefore read the state of the GPU a worker was given before and
after its stages and attach it to the timing result, and compare speedups only between
candidates timed on the same model (``same_model``).

Sources, in order: NVML through ``pynvml`` (the ``nvidia-ml-py`` package) when importable,
else ``nvidia-smi --query-gpu``. Both address GPUs by their physical index or UUID, which is
what ``CUDA_VISIBLE_DEVICES`` holds (Ray sets it to physical indices). Neither is imported
at module load. Nothing here raises: a GPU that cannot be read gives ``{"error": ...}``.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

# nvidia-smi --query-gpu fields (``nvidia-smi --help-query-gpu``) and the keys they become.
_SMI_FIELDS = (
    ("name", "name"), ("uuid", "uuid"), ("index", "index"),
    ("clocks.sm", "sm_clock_mhz"), ("clocks.mem", "mem_clock_mhz"),
    ("clocks.max.sm", "max_sm_clock_mhz"), ("clocks.max.mem", "max_mem_clock_mhz"),
    ("temperature.gpu", "temperature_c"), ("power.draw", "power_w"),
    ("pstate", "pstate"), ("clocks_event_reasons.active", "clock_event_reasons"),
    ("driver_version", "driver"),
)


def first_visible(visible: str | None = None) -> str | None:
    """The first entry of ``CUDA_VISIBLE_DEVICES`` (``visible`` or the environment's): a
    physical index (``"1"``) or a UUID (``"GPU-..."``); None when unset or empty."""
    text = os.environ.get("CUDA_VISIBLE_DEVICES") if visible is None else visible
    if text is None:
        return None
    first = text.split(",")[0].strip()
    return first if first and first != "-1" else None


def gpu_state(device: str | None) -> dict[str, Any]:
    """Model, UUID and clock state of the GPU ``device`` (physical index or UUID).

    Returns a dict with ``name``, ``uuid``, ``index``, ``sm_clock_mhz``, ``mem_clock_mhz``,
    ``max_sm_clock_mhz``, ``max_mem_clock_mhz`` (MHz), ``temperature_c``, ``power_w`` (W),
    ``pstate``, ``clock_event_reasons`` (NVML's throttle bitmask as hex; 0x0 = not throttled,
    0x1 = idle), ``driver`` and ``source`` (``nvml``/``nvidia-smi``); ``{"error": text}``
    when the device cannot be read.
    """
    if device is None:
        return {"error": "no GPU assigned (CUDA_VISIBLE_DEVICES unset or empty)"}
    state = _nvml_state(device)
    if state is None:
        state = _smi_state(device)
    return state


def _nvml_state(device: str) -> dict[str, Any] | None:
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        if device.startswith(("GPU-", "MIG-")):
            h = pynvml.nvmlDeviceGetHandleByUUID(device)
        else:
            h = pynvml.nvmlDeviceGetHandleByIndex(int(device))

        def text(v):
            return v.decode() if isinstance(v, bytes) else str(v)

        clk = pynvml.nvmlDeviceGetClockInfo
        maxclk = pynvml.nvmlDeviceGetMaxClockInfo
        out: dict[str, Any] = {
            "name": text(pynvml.nvmlDeviceGetName(h)),
            "uuid": text(pynvml.nvmlDeviceGetUUID(h)),
            "index": int(pynvml.nvmlDeviceGetIndex(h)),
            "sm_clock_mhz": clk(h, pynvml.NVML_CLOCK_SM),
            "mem_clock_mhz": clk(h, pynvml.NVML_CLOCK_MEM),
            "max_sm_clock_mhz": maxclk(h, pynvml.NVML_CLOCK_SM),
            "max_mem_clock_mhz": maxclk(h, pynvml.NVML_CLOCK_MEM),
            "driver": text(pynvml.nvmlSystemGetDriverVersion()),
            "source": "nvml",
        }
        for key, fn in (("temperature_c", lambda: pynvml.nvmlDeviceGetTemperature(
                            h, pynvml.NVML_TEMPERATURE_GPU)),
                        ("power_w", lambda: pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0),
                        ("pstate", lambda: f"P{int(pynvml.nvmlDeviceGetPerformanceState(h))}"),
                        ("clock_event_reasons", lambda: hex(
                            pynvml.nvmlDeviceGetCurrentClocksEventReasons(h)
                            if hasattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons")
                            else pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h)))):
            try:
                out[key] = fn()
            except Exception:  # a field this driver does not support
                out[key] = None
        return out
    except Exception as exc:
        return {"error": f"NVML: {exc}", "source": "nvml"}
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def _smi_state(device: str) -> dict[str, Any]:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return {"error": "neither pynvml nor nvidia-smi is available"}
    fields = ",".join(f for f, _ in _SMI_FIELDS)
    try:
        out = subprocess.run([smi, "-i", device, f"--query-gpu={fields}",
                              "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": f"nvidia-smi: {exc}"}
    if out.returncode != 0 or not out.stdout.strip():
        return {"error": f"nvidia-smi -i {device}: {(out.stderr or out.stdout).strip()[:200]}"}
    values = [v.strip() for v in out.stdout.strip().splitlines()[0].split(",")]
    state: dict[str, Any] = {"source": "nvidia-smi"}
    for (_, key), value in zip(_SMI_FIELDS, values):
        state[key] = _number(value)
    return state


def _number(text: str) -> Any:
    if text in ("[N/A]", "N/A", "[Not Supported]", ""):
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            continue
    return text


def model_of(state: dict[str, Any] | None) -> str | None:
    """The GPU model name of a ``gpu_state`` dict (None when unknown)."""
    return (state or {}).get("name") or None


def same_model(a: str | None, b: str | None) -> bool:
    """True when two timings may be compared: both ran on the same GPU model (both known)."""
    return bool(a) and a == b
