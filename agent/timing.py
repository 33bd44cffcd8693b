"""Gate stage "timing" (GPU only): the candidate and the reference, side by side.

Per timed shape and dtype, in the worker's own CUDA context:

1. fresh random inputs; the candidate's output is checked once against the reference's at this
   size (same rule as the correctness stage; the error goes into the table);
2. ``triton.testing.do_bench(fn, warmup, rep, return_mode="median")`` for the candidate, then
   for the baseline (the spec's ``baseline``, e.g. cuBLAS through ``torch.matmul``, else its
   ``reference``): it runs ``fn`` for ``warmup`` ms first, then times each run with CUDA
   events while zeroing a 256 MB buffer before every run, which flushes the L2 cache, and
   returns the median in ms;
3. achieved TFLOP/s and GB/s from the spec's ``flops``/``bytes`` formulas, and the percentage of
   the roofline ``min(peak FLOP/s, intensity x peak bandwidth)`` (Williams, Waterman and
   Patterson, "Roofline", CACM 2009) with the device's MEASURED peaks (``measure_peaks``).

The stage's ``data["rows"]`` holds one row per shape and dtype; ``data["score"]`` the geometric
mean of reference time / candidate time.
"""
from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

from .records import StageResult

WARMUP_MS = 25
REP_MS = 100
COPY_BYTES = 1 << 30          # 1 GiB each way: far past the 50-60 MB L2 of an H100/H200
GEMM_SIZE = 8192              # M = N = K for the dense GEMM peak


def device_key() -> str:
    """A file-name-safe key of the current CUDA device and the torch/CUDA versions."""
    import torch

    name = torch.cuda.get_device_name()
    return "".join(c if c.isalnum() else "-" for c in f"{name}-torch{torch.__version__}-cuda{torch.version.cuda}")


def measure_peaks(cache_dir: str | Path | None, dtypes: list[str | None]) -> dict[str, Any]:
    """The device's measured ceilings, computed once per device and cached as JSON.

    ``copy_gbs``: a device-to-device copy of 1 GiB, counting bytes read plus written, GB/s.
    ``gemm_tflops[dtype]``: ``torch.matmul`` (cuBLAS) of two random 8192 x 8192 matrices of
    ``dtype`` (float32 runs in full float32, not TF32), TFLOP/s at 2*M*N*K FLOP per product.
    Both are do_bench medians. Returns a dict with these plus ``device`` and ``measured_at``.
    """
    import torch
    from triton.testing import do_bench

    path = Path(cache_dir) / f"peaks-{device_key()}.json" if cache_dir else None
    peaks: dict[str, Any] = {}
    if path and path.exists():
        try:
            peaks = json.loads(path.read_text())
        except ValueError:
            peaks = {}
    changed = False
    if "copy_gbs" not in peaks:
        src = torch.empty(COPY_BYTES // 4, dtype=torch.float32, device="cuda").uniform_()
        dst = torch.empty_like(src)
        ms = do_bench(lambda: dst.copy_(src), warmup=WARMUP_MS, rep=REP_MS, return_mode="median")
        peaks["copy_gbs"] = 2 * COPY_BYTES / (ms * 1e-3) / 1e9
        del src, dst
        changed = True
    gemm = peaks.setdefault("gemm_tflops", {})
    for name in {d for d in dtypes if d in ("float16", "bfloat16", "float32")}:
        if name in gemm:
            continue
        dt = getattr(torch, name)
        a = torch.randn(GEMM_SIZE, GEMM_SIZE, device="cuda", dtype=dt)
        b = torch.randn(GEMM_SIZE, GEMM_SIZE, device="cuda", dtype=dt)
        prev = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
        try:
            ms = do_bench(lambda: torch.matmul(a, b), warmup=WARMUP_MS, rep=REP_MS, return_mode="median")
        finally:
            torch.backends.cuda.matmul.allow_tf32 = prev
        gemm[name] = 2 * GEMM_SIZE ** 3 / (ms * 1e-3) / 1e12
        del a, b
        changed = True
    peaks.setdefault("device", torch.cuda.get_device_name())
    peaks.setdefault("measured_at", time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    if changed and path:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(peaks, indent=2))
        os.replace(tmp, path)  # atomic: evaluators on one device may race to write it
    return peaks


def roofline(flops: float | None, nbytes: float | None, ms: float, peaks: dict[str, Any],
             dtype: str | None) -> dict[str, Any]:
    """Achieved rates and the percentage of the roofline at ``ms`` milliseconds per call.

    Returns tflops, gbs (None when the formula is absent), pct_peak (achieved over attainable,
    0..100+), bound (``"memory"``/``"compute"``), intensity (FLOP per byte).
    """
    sec = ms * 1e-3
    tflops = flops / sec / 1e12 if flops else None
    gbs = nbytes / sec / 1e9 if nbytes else None
    peak_bw = peaks.get("copy_gbs")
    peak_fl = (peaks.get("gemm_tflops") or {}).get(dtype or "", None)
    out = {"tflops": tflops, "gbs": gbs, "pct_peak": None, "bound": None,
           "intensity": (flops / nbytes) if flops and nbytes else None}
    parts = []
    if tflops is not None and peak_fl:
        parts.append(tflops / peak_fl)
    if gbs is not None and peak_bw:
        parts.append(gbs / peak_bw)
    if parts:
        out["pct_peak"] = 100.0 * max(parts)
    if flops and nbytes and peak_bw and peak_fl:
        ridge = peak_fl * 1e12 / (peak_bw * 1e9)
        out["bound"] = "compute" if flops / nbytes >= ridge else "memory"
    elif nbytes:
        out["bound"] = "memory"
    return out


def run(ctx) -> StageResult:
    """Time the candidate and the reference on every timed shape (worker side)."""
    import torch
    from triton.testing import do_bench

    from .correctness import compare, tolerance_for

    if ctx.device != "cuda" or not torch.cuda.is_available():
        return StageResult(stage="timing", ok=True, status="skipped",
                           summary="timing skipped: no GPU")
    launcher, reference, make_inputs = ctx.functions()
    baseline, baseline_name = ctx.baseline()
    spec = ctx.spec
    peaks = measure_peaks(ctx.job.get("cache_dir"), spec.dtypes)
    shapes = ctx.job.get("bench_shapes") or spec.bench_shapes
    jobs = [(s, d) for s in shapes for d in spec.dtypes]
    rows: list[dict[str, Any]] = []
    for i, (shape, dtype_name) in enumerate(jobs):
        label = " ".join(f"{k}={v}" for k, v in shape.items()) + (f" {dtype_name}" if dtype_name else "")
        ctx.progress(i, len(jobs), label)
        dtype = getattr(torch, dtype_name) if dtype_name else None
        seed = (ctx.seed * 7919 + i) % (2 ** 31)
        inputs = make_inputs(dict(shape), dtype, "cuda", seed)
        if not isinstance(inputs, (tuple, list)):
            inputs = (inputs,)
        got = launcher(*inputs, **ctx.launch)
        expected = reference(*inputs)
        torch.cuda.synchronize()
        got_l = got if isinstance(got, (tuple, list)) else [got]
        exp_l = expected if isinstance(expected, (tuple, list)) else [expected]
        err = 0.0
        for g, e in zip(got_l, exp_l):
            tol = tolerance_for(spec, dtype_name, str(e.dtype).replace("torch.", ""))
            res = compare(g, e, tol)
            err = max(err, res.get("max_abs_err") or 0.0)
            if not res["ok"]:
                return StageResult(stage="timing", ok=False, status="failed",
                                   summary=f"wrong at timed shape {label}: {res['summary']}"[:300],
                                   feedback=res["feedback"], data={"rows": rows, "peaks": peaks})
        base_err = None
        if baseline is not reference:
            base = baseline(*inputs)
            b0 = base[0] if isinstance(base, (tuple, list)) else base
            if isinstance(b0, torch.Tensor) and tuple(b0.shape) == tuple(exp_l[0].shape):
                base_err = float((b0.double() - exp_l[0].double()).abs().max())
            del base, b0
        del got, expected, got_l, exp_l
        ms = do_bench(lambda: launcher(*inputs, **ctx.launch), warmup=WARMUP_MS, rep=REP_MS,
                      return_mode="median")
        ref_ms = do_bench(lambda: baseline(*inputs), warmup=WARMUP_MS, rep=REP_MS, return_mode="median")
        flops = spec.flops_for(shape, dtype_name)
        nbytes = spec.bytes_for(shape, dtype_name)
        row = {"shape": dict(shape), "dtype": dtype_name, "ms": ms, "ref_ms": ref_ms,
               "speedup": ref_ms / ms if ms > 0 else None, "max_abs_err": err, "seed": seed,
               "baseline": baseline_name, "baseline_max_abs_err": base_err,
               "flops": flops, "bytes": nbytes}
        row.update(roofline(flops, nbytes, ms, peaks, dtype_name))
        ref_roof = roofline(flops, nbytes, ref_ms, peaks, dtype_name)
        row["ref_tflops"], row["ref_gbs"], row["ref_pct_peak"] = (ref_roof["tflops"], ref_roof["gbs"],
                                                                  ref_roof["pct_peak"])
        rows.append(row)
        del inputs
        torch.cuda.empty_cache()
    ctx.progress(len(jobs), len(jobs), "done")
    speedups = [r["speedup"] for r in rows if r["speedup"]]
    score = math.exp(sum(math.log(s) for s in speedups) / len(speedups)) if speedups else None
    feedback = "\n".join(_row_text(r) for r in rows)
    summary = (f"geomean speedup {score:.3f}x vs reference over {len(rows)} shape(s)" if score
               else "no timed shapes")
    return StageResult(stage="timing", ok=True, status="ok", summary=summary, feedback=feedback,
                       data={"rows": rows, "score": score, "peaks": peaks, "baseline": baseline_name,
                             "device": torch.cuda.get_device_name(),
                             "method": f"triton.testing.do_bench median, warmup {WARMUP_MS} ms, rep {REP_MS} ms,"
                                       " L2 flushed before each run"})


def _row_text(r: dict[str, Any]) -> str:
    dims = " ".join(f"{k}={v}" for k, v in r["shape"].items())
    rate = []
    if r.get("tflops") is not None:
        rate.append(f"{r['tflops']:.1f} TFLOP/s")
    if r.get("gbs") is not None:
        rate.append(f"{r['gbs']:.0f} GB/s")
    pct = f", {r['pct_peak']:.0f}% of roofline ({r['bound']}-bound)" if r.get("pct_peak") is not None else ""
    return (f"{dims} {r['dtype'] or ''}: {r['ms']:.4f} ms ({', '.join(rate)}{pct}); reference"
            f" {r['ref_ms']:.4f} ms; speedup {r['speedup']:.2f}x")
