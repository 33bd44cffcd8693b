"""Gate stage "correctness": the candidate against the spec's torch reference.

Every check draws fresh random inputs (a new seed per evaluation, recorded in the result),
allocates the candidate's outputs poisoned (NaN for floating dtypes, see
``modload.poisoned_allocations``), runs the launcher, and compares with the reference computed
from a copy of the same inputs upcast to float32 (float64 stays), falling back to the input
dtype when the reference refuses float32. Then:

* every element must be finite where the reference is: a NaN left by the poison means the
  element was never written, and NaN/Inf never pass;
* ``|got - expected| <= atol + rtol * |expected|`` elementwise (the rule of ``torch.allclose``),
  with the spec's ``tolerance`` or the defaults below;
* at least one Triton kernel must have been launched (a launcher that just calls torch fails).

The shapes are the spec's small ``shapes`` plus held-out shapes (``heldout_shapes``) the
candidate was not tuned on. Without a GPU the worker runs under ``TRITON_INTERPRET=1``.

Default tolerances: the spec should state its own (it knows its accumulation order); without
one, ``rtol`` is about 20 units of the format's unit roundoff u (IEEE 754 binary16
u = 2**-11, bfloat16 u = 2**-8, binary32 u = 2**-24, per the formats' significand widths) and
never below 1e-5, so that reduction-order differences pass and real errors (an element from
the wrong row, a missing block) do not: float16 1e-2, bfloat16 5e-2, float32 1e-4 (also
covers TF32 dots within about 3e-4 only if the spec loosens it), float64 1e-7; ``atol`` equal
to ``rtol`` for outputs near zero.
"""
from __future__ import annotations

import math
import random
from typing import Any

from .records import StageResult

DEFAULT_TOLERANCE = {
    "float16": {"atol": 1e-2, "rtol": 1e-2},
    "bfloat16": {"atol": 5e-2, "rtol": 5e-2},
    "float32": {"atol": 1e-4, "rtol": 1e-4},
    "float64": {"atol": 1e-7, "rtol": 1e-7},
    "float8_e4m3fn": {"atol": 1.25e-1, "rtol": 1.25e-1},
    "float8_e5m2": {"atol": 2.5e-1, "rtol": 2.5e-1},
}


def tolerance_for(spec, dtype_name: str | None, out_dtype_name: str | None = None) -> dict[str, float]:
    """The spec's tolerance for ``dtype_name`` (else for the output's dtype), else the default;
    integers and bool compare exactly."""
    for name in (dtype_name, out_dtype_name):
        if name and name in spec.tolerance:
            tol = dict(DEFAULT_TOLERANCE.get(name, {"atol": 0.0, "rtol": 0.0}))
            tol.update(spec.tolerance[name])
            return tol
    for name in (out_dtype_name, dtype_name):
        if name in DEFAULT_TOLERANCE:
            return dict(DEFAULT_TOLERANCE[name])
    return {"atol": 0.0, "rtol": 0.0}


def heldout_shapes(spec, rng: random.Random, count: int = 1) -> list[dict[str, int]]:
    """Shapes the candidate was not tuned on.

    The spec's ``heldout_shapes`` when given. Otherwise ``count`` shapes drawn afresh: a size
    that differs across the spec's ``shapes`` is free and gets a random value in [min, max] of
    the values seen, rounded to a multiple of their greatest common divisor (so a size the
    author kept a multiple of 16 stays one), or a power of two when every value seen is one;
    a size equal in every shape is kept. No free size
    (or a KernelBench task): no held-out shape.
    """
    if spec.heldout_shapes:
        return [dict(s) for s in spec.heldout_shapes]
    shapes = spec.shapes
    if not shapes or not shapes[0]:
        return []
    free = {}
    for name in shapes[0]:
        values = [s[name] for s in shapes]
        if len(set(values)) > 1:
            g = 0
            for v in values:
                g = math.gcd(g, v)
            pow2 = all(v > 0 and v & (v - 1) == 0 for v in values)
            free[name] = (min(values), max(values), g, pow2)
    if not free:
        return []
    out = []
    for _ in range(count):
        for _attempt in range(20):
            shape = dict(shapes[0])
            for name, (lo, hi, g, pow2) in free.items():
                if pow2:  # e.g. a head dimension that tl.arange needs as a power of two
                    shape[name] = 1 << rng.randint(lo.bit_length() - 1, hi.bit_length() - 1)
                else:
                    k_lo, k_hi = -(-lo // g), hi // g
                    shape[name] = g * rng.randint(k_lo, k_hi)
            if shape not in shapes and shape not in out:
                break
        out.append(shape)
    return out


def run(ctx) -> StageResult:
    """Check the candidate at the job's correctness shapes and held-out shapes (worker side)."""
    import torch

    launcher, reference, make_inputs = ctx.functions()
    device = "cuda" if ctx.device == "cuda" else "cpu"
    shapes = [(s, False) for s in (ctx.job.get("shapes") or ctx.spec.shapes)]
    shapes += [(s, True) for s in (ctx.job.get("heldout") or [])]
    checks = [(s, h, d) for s, h in shapes for d in ctx.spec.dtypes]
    rows: list[dict[str, Any]] = []
    for i, (shape, held, dtype_name) in enumerate(checks):
        label = _label(shape, dtype_name) + (" (held out)" if held else "")
        ctx.progress(i, len(checks), label)
        seed = (ctx.seed * 1000003 + i) % (2 ** 31)
        row = check_once(launcher, reference, make_inputs, ctx.spec, shape, dtype_name, device, seed,
                         ctx.launch)
        row["heldout"] = held
        rows.append(row)
        if not row["ok"]:
            ctx.progress(i + 1, len(checks), label)
            feedback = (f"wrong at shape {_label(shape, dtype_name)}{' (held out: not a tuning shape)' if held else ''}"
                        f", seed {seed}:\n{row['feedback']}")
            return StageResult(stage="correctness", ok=False, status="failed",
                               summary=f"{label}: {row['summary']}"[:300], feedback=feedback,
                               data={"checks": rows, "seed": ctx.seed, "device": device})
    ctx.progress(len(checks), len(checks), "done")
    worst = max((r.get("max_abs_err") or 0.0 for r in rows), default=0.0)
    n_held = sum(1 for _, h in shapes if h)
    summary = (f"{len(rows)} check(s) passed ({len(shapes)} shape(s), {n_held} held out, "
               f"{len(ctx.spec.dtypes)} dtype(s)); max abs error {worst:.3g}")
    return StageResult(stage="correctness", ok=True, status="ok", summary=summary,
                       data={"checks": rows, "seed": ctx.seed, "device": device,
                             "interpreted": device == "cpu"})


def _label(shape: dict, dtype_name) -> str:
    dims = " ".join(f"{k}={v}" for k, v in shape.items())
    return f"{dims} {dtype_name or ''}".strip()


def check_once(launcher, reference, make_inputs, spec, shape, dtype_name, device, seed, launch) -> dict[str, Any]:
    """One check at one shape and dtype; returns a row dict with ``ok``, ``summary``,
    ``feedback`` and the error numbers (max_abs_err, max_rel_err, rel_l2)."""
    import torch

    from .modload import LaunchCounter, poisoned_allocations

    dtype = getattr(torch, dtype_name) if dtype_name else None
    inputs = make_inputs(dict(shape), dtype, device, seed)
    if not isinstance(inputs, (tuple, list)):
        inputs = (inputs,)
    problem = _zero_inputs(inputs)
    row: dict[str, Any] = {"shape": dict(shape), "dtype": dtype_name, "seed": seed}
    if problem:
        return dict(row, ok=False, summary="inputs are all zeros",
                    feedback=f"make_inputs returned {problem}: zeros hide unwritten outputs; draw random values")
    ref_inputs = [t.detach().clone() if isinstance(t, torch.Tensor) else t for t in inputs]
    with LaunchCounter() as counter, poisoned_allocations():
        got = launcher(*inputs, **launch)
    if device == "cuda":
        torch.cuda.synchronize()
    expected = _reference(reference, ref_inputs)
    if counter.count == 0:
        return dict(row, ok=False, summary="no Triton kernel was launched",
                    feedback="the launcher returned a result without launching any Triton kernel")
    row["launches"] = counter.count
    got_list = _as_list(got)
    exp_list = _as_list(expected)
    if len(got_list) != len(exp_list):
        return dict(row, ok=False, summary=f"{len(got_list)} output(s), reference has {len(exp_list)}",
                    feedback=f"the launcher returned {len(got_list)} tensor(s), the reference {len(exp_list)}")
    worst: dict[str, Any] = {"max_abs_err": 0.0, "max_rel_err": 0.0, "rel_l2": 0.0}
    for j, (g, e) in enumerate(zip(got_list, exp_list)):
        tol = tolerance_for(spec, dtype_name, str(e.dtype).replace("torch.", "") if isinstance(e, torch.Tensor) else None)
        res = compare(g, e, tol, name=f"output {j}" if len(got_list) > 1 else "output")
        for k in worst:
            worst[k] = max(worst[k], res.get(k) or 0.0)
        if not res["ok"]:
            return dict(row, **worst, ok=False, summary=res["summary"], feedback=res["feedback"], tol=tol)
    return dict(row, **worst, ok=True, summary="ok", feedback="")


def _zero_inputs(inputs) -> str | None:
    import torch

    floats = [t for t in inputs if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel() > 1]
    for k, t in enumerate(floats):
        if not bool((t != 0).any()):
            return f"an all-zero floating tensor (float input #{k}, shape {tuple(t.shape)})"
    return None


def _as_list(x) -> list:
    if isinstance(x, (tuple, list)):
        return list(x)
    return [x]


def _reference(reference, inputs):
    """The reference on float32 copies of the floating inputs (more accurate than fp16/bf16),
    or on the inputs as they are when it rejects that."""
    import torch

    up = [t.float() if isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != torch.float64
          else t for t in inputs]
    if any(a is not b for a, b in zip(up, inputs)):
        try:
            return reference(*up)
        except Exception:
            pass
    return reference(*inputs)


def compare(got, expected, tol: dict[str, float], name: str = "output") -> dict[str, Any]:
    """Compare one output with the reference.

    Args:
        got: the candidate's tensor.
        expected: the reference tensor (any dtype; compared in float64 on ``got``'s device).
        tol: ``{"atol", "rtol"}``.

    Returns:
        dict with ``ok``, ``summary``, ``feedback`` (where the largest error sits: index, got,
        expected), ``max_abs_err``, ``max_rel_err``, ``rel_l2``, ``unwritten``, ``nonfinite``.
    """
    import torch

    if not isinstance(got, torch.Tensor):
        return {"ok": False, "summary": f"{name} is {type(got).__name__}, not a tensor",
                "feedback": f"the launcher returned {type(got).__name__} for {name}"}
    if not isinstance(expected, torch.Tensor):
        expected = torch.as_tensor(expected)
    if tuple(got.shape) != tuple(expected.shape):
        return {"ok": False, "summary": f"{name} shape {tuple(got.shape)} != reference {tuple(expected.shape)}",
                "feedback": f"{name} has shape {tuple(got.shape)}, the reference {tuple(expected.shape)}"}
    # float64 on the output's own device: on a GPU that keeps large timed outputs off the host
    g = got.detach().to(torch.float64)
    e = expected.detach().to(g.device, torch.float64)
    atol, rtol = float(tol.get("atol", 0.0)), float(tol.get("rtol", 0.0))
    out: dict[str, Any] = {"unwritten": 0, "nonfinite": 0}
    fin_e = torch.isfinite(e)
    fin_g = torch.isfinite(g)
    # Where the reference itself is not finite, demand the same value (NaN where NaN, same inf).
    same_special = (~fin_e) & ((torch.isnan(e) & torch.isnan(g)) | (e == g))
    bad_special = (~fin_e) & ~same_special
    nonfinite = fin_e & ~fin_g
    n = g.numel()
    if got.is_floating_point():
        unwritten = fin_e & torch.isnan(g)
    else:
        unwritten = torch.zeros_like(fin_e)
    if bool(nonfinite.any()) or bool(bad_special.any()):
        count = int(nonfinite.sum()) + int(bad_special.sum())
        nan_count = int(unwritten.sum())
        first = _index(int(torch.nonzero((nonfinite | bad_special).flatten())[0]), got.shape)
        out.update(nonfinite=count, unwritten=nan_count)
        got_v = g.flatten()[_flat(first, got.shape)].item()
        exp_v = e.flatten()[_flat(first, got.shape)].item()
        region = _region(nonfinite | bad_special)
        if nan_count and nan_count == count:
            summary = f"{count} of {n} {name} elements never written (still NaN)"
            why = ("the output was filled with NaN before the launch and these elements are still NaN:"
                   " no program stored to them (check the grid covers every block and the store mask)")
        else:
            summary = f"{count} of {n} {name} elements are NaN/Inf where the reference is finite"
            why = "NaN/Inf never pass (overflow, a division by zero, or masked lanes loaded with a bad `other`)"
        feedback = (f"{summary}\n{why}\nfirst at index {first}: got {got_v}, expected {exp_v}\n"
                    f"affected indices span {region}")
        out.update(ok=False, summary=summary, feedback=feedback, max_abs_err=math.inf,
                   max_rel_err=math.inf, rel_l2=math.inf)
        return out
    both = fin_e
    diff = torch.where(both, (g - e).abs(), torch.zeros_like(g))
    allowed = atol + rtol * e.abs()
    ratio = torch.where(both, diff / allowed.clamp_min(1e-300), torch.zeros_like(g))
    max_abs = float(diff.max()) if n else 0.0
    rel = torch.where(both, diff / e.abs().clamp_min(1e-12), torch.zeros_like(g))
    max_rel = float(rel.max()) if n else 0.0
    denom = float(torch.linalg.vector_norm(torch.where(both, e, torch.zeros_like(e))))
    rel_l2 = float(torch.linalg.vector_norm(diff)) / denom if denom > 0 else max_abs
    out.update(max_abs_err=max_abs, max_rel_err=max_rel, rel_l2=rel_l2)
    bad = ratio > 1.0
    if got.is_floating_point() is False and not expected.is_floating_point():
        bad = diff > 0
    if bool(bad.any()):
        count = int(bad.sum())
        worst = int(torch.argmax(ratio.flatten() if got.is_floating_point() or expected.is_floating_point()
                                 else diff.flatten()))
        idx = _index(worst, got.shape)
        gv, ev = g.flatten()[worst].item(), e.flatten()[worst].item()
        summary = (f"{count} of {n} {name} elements outside tolerance; worst at {idx}:"
                   f" got {gv:.6g}, expected {ev:.6g}")
        feedback = (f"{summary}\nabs error {abs(gv - ev):.3g} > atol {atol:g} + rtol {rtol:g} * |expected|"
                    f"; max abs error {max_abs:.3g}, relative L2 error {rel_l2:.3g}\n"
                    f"wrong elements span {_region(bad)}")
        out.update(ok=False, summary=summary, feedback=feedback)
        return out
    out.update(ok=True, summary="ok", feedback="")
    return out


def _index(flat: int, shape) -> tuple[int, ...]:
    idx = []
    for size in reversed(list(shape)):
        idx.append(flat % size if size else 0)
        flat = flat // size if size else 0
    return tuple(reversed(idx))


def _flat(idx: tuple[int, ...], shape) -> int:
    flat = 0
    for i, size in zip(idx, shape):
        flat = flat * size + i
    return flat


def _region(mask) -> str:
    """Per dimension, the range of indices where ``mask`` is set: ``[0:7, 96:100]`` style."""
    import torch

    nz = torch.nonzero(mask)
    if nz.numel() == 0:
        return "nothing"
    if mask.dim() == 0:
        return "the scalar"
    lo = nz.min(dim=0).values.tolist()
    hi = nz.max(dim=0).values.tolist()
    dims = ", ".join(f"{a}:{b + 1}" for a, b in zip(lo, hi))
    return f"[{dims}] of shape {tuple(mask.shape)} ({int(mask.sum())} elements)"
