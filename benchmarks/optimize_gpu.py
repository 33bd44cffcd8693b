"""Run the built-in tuner on the GPU examples and compare the best kernels it finds with the
fastest torch implementations (cuBLAS, torch.softmax, SDPA), all timed in this one process.

Each job optimises one kernel with ``run_optimize(..., tuner=True)`` under a wall-time budget,
timing one bench shape. Afterwards the seed configuration, the tuner's best configuration and
the torch baseline (``benchmarks/baselines.py``) are timed side by side here with
``triton.testing.do_bench`` (median of repeated runs, L2 flushed between them) on the same
fp16 inputs. Nothing is printed that was not measured in this run.

Usage: python benchmarks/optimize_gpu.py --out DIR [--minutes M ...] [NAME ...]
Writes DIR/optimize_results.json and DIR/optimize_table.md, and each run's record under
DIR/runs/NAME/.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# name -> (file, kernel, timed shape, baseline function in benchmarks/baselines.py, minutes)
JOBS = {
    "matmul_untuned": ("examples/tuning/matmul_untuned.py", "matmul_kernel",
                       {"M": 4096, "N": 4096, "K": 4096}, "matmul", 1.5),
    "matmul": ("examples/kernels/matmul.py", "matmul_kernel",
               {"M": 4096, "N": 4096, "K": 4096}, "matmul", 1.2),
    "softmax": ("examples/kernels/softmax.py", "softmax_kernel",
                {"M": 32768, "N": 4096}, "softmax", 0.8),
    "flash_attention": ("examples/kernels/flash_attention.py", "attn_fwd_kernel",
                        {"Z": 4, "H": 32, "N_CTX": 4096, "HEAD_DIM": 128, "CAUSAL": 0},
                        "flash_attention", 1.3),
}


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def side_by_side(name: str, file: str, shape: dict, baseline: str, launch: dict) -> dict:
    """Time seed config, best config and the torch baseline on the same fp16 inputs."""
    import torch
    import triton.testing

    from kernelsight.agent.benchspec import load_spec

    spec = load_spec(ROOT / file)
    mod = _load(ROOT / file, f"ks_bench_{name}")
    base = _load(ROOT / "benchmarks" / "baselines.py", "ks_baselines")
    inputs = getattr(mod, spec.inputs)(shape, torch.float16, "cuda", 1234)
    launcher = getattr(mod, spec.launcher)
    fns = {"seed": lambda: launcher(*inputs), "best": lambda: launcher(*inputs, **launch),
           "torch": lambda: getattr(base, baseline)(*inputs)}
    ref = fns["torch"]().float()
    out = {}
    for key, fn in fns.items():
        got = fn().float()
        err = (got - ref).abs().max().item()
        ms = triton.testing.do_bench(fn, warmup=50, rep=300, return_mode="median")
        flops = spec.flops_for(shape, "float16")
        nbytes = spec.bytes_for(shape, "float16")
        out[key] = {"ms": ms, "max_abs_diff_vs_torch": err,
                    "tflops": flops / ms / 1e9 if flops else None,
                    "gbs": nbytes / ms / 1e6 if nbytes else None}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", default=list(JOBS))
    ap.add_argument("--out", default=".", help="folder for the run records")
    ap.add_argument("--results", default=None,
                    help="folder for optimize_results.json / optimize_table.md (default --out);"
                         " rewritten after every job so an interrupted run keeps what it did")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every job's minutes")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    res_dir = Path(args.results or args.out)
    res_dir.mkdir(parents=True, exist_ok=True)

    import torch

    from kernelsight.agent.optimize import run_optimize

    results = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "torch": torch.__version__, "jobs": {}}
    import triton

    results["triton"] = triton.__version__
    if torch.cuda.is_available():
        results["device"] = torch.cuda.get_device_name()
    for name in args.names:
        file, kernel, shape, baseline, minutes = JOBS[name]
        minutes *= args.scale
        t0 = time.time()
        print(f"== {name}: tuner for {minutes:.1f} min at {shape}", flush=True)
        try:
            r = run_optimize(ROOT / file, kernel, tuner=True,
                             budget=f"minutes={minutes},candidates=60",
                             run_dir=out / "runs" / name, device=args.device,
                             bench_shapes=[shape], tuner_batch=6,
                             log=lambda m: print("  " + m, flush=True))
        except Exception as exc:  # one job's failure must not cost the others their run
            print(f"  FAILED: {type(exc).__name__}: {exc}", flush=True)
            results["jobs"][name] = {"file": file, "shape": shape,
                                     "error": f"{type(exc).__name__}: {exc}"[:4000]}
            (res_dir / "optimize_results.json").write_text(json.dumps(results, indent=2, default=str))
            continue
        entries = [json.loads(l) for l in (r.run_dir / "candidates.jsonl").read_text().splitlines()]
        best = next((e for e in entries if e["id"] == r.best_id), {})
        job = {"file": file, "kernel": kernel, "shape": shape, "stop": r.stop_reason,
               "candidates": len(entries), "seconds": round(time.time() - t0, 1),
               "seed_score": r.seed_score, "best_score": r.best_score, "best_id": r.best_id,
               "best_launch": best.get("launch") or {}, "timed": r.timed,
               "statuses": {s: sum(1 for e in entries if e["status"] == s)
                            for s in {e["status"] for e in entries}},
               "failed_stages": {s: sum(1 for e in entries if e.get("failed_stage") == s)
                                 for s in {e.get("failed_stage") for e in entries} if s}}
        print(f"  seed {r.seed_score} best {r.best_score} {job['best_launch']}", flush=True)
        if torch.cuda.is_available():
            try:
                job["side_by_side"] = side_by_side(name, file, shape, baseline, job["best_launch"])
            except Exception as exc:  # report, never hide, a failed comparison
                job["side_by_side_error"] = f"{type(exc).__name__}: {exc}"
        results["jobs"][name] = job
        (res_dir / "optimize_results.json").write_text(json.dumps(results, indent=2, default=str))
    lines = ["| kernel | shape | tuner candidates | seed -> best (harness score: geomean speedup "
             "over the baseline) | best config | seed ms | best ms | torch ms | best vs torch |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, job in results["jobs"].items():
        if "error" in job:
            lines.append(f"| {name} | {job['shape']} | - | failed: {job['error'][:200]} | | | | | |")
            continue
        sbs = job.get("side_by_side") or {}
        g = lambda k: sbs.get(k, {}).get("ms")  # noqa: E731
        cfg = ", ".join(f"{k}={v}" for k, v in job["best_launch"].items()) or "(seed)"
        vs = f"{g('torch') / g('best'):.2f}x" if g("torch") and g("best") else "-"
        fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
        lines.append(f"| {name} | {job['shape']} | {job['candidates']} | {fmt(job['seed_score'])}"
                     f" -> {fmt(job['best_score'])} | {cfg} | {fmt(g('seed'))} | "
                     f"{fmt(g('best'))} | {fmt(g('torch'))} | {vs} |")
    (res_dir / "optimize_table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
