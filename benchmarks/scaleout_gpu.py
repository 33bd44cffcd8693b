"""Candidates per minute of the tuner on 1 and 2 GPUs, local backend vs Ray (docs/benchmarks.md,
"Scale-out").

Each configuration runs in its own process (its own ``CUDA_VISIBLE_DEVICES``, its own fresh
Triton compile cache so none profits from another's compiled kernels, the evaluation cache
off) and does the same thing: ``run_optimize`` with the built-in tuner on one example, for a
fixed wall-clock window after the seed kernel. The rate counts the candidates recorded after the
seed over the time from the seed's record to the last record. A warm-up first measures the
device peaks once (shared by all configurations through the kernelsight cache).

Usage (GPU machine, repository root)::

    python benchmarks/scaleout_gpu.py --out DIR [--seconds 35] [--configs local-1,local-2,ray-1,ray-2]
    python benchmarks/scaleout_gpu.py --device cpu ...   # the same on a machine without GPUs
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def one(config: str, example: str, out: Path, seconds: float, device: str, batch: int,
        bench_shapes: list[dict] | None) -> dict:
    """Run one configuration in this process; returns its measurements."""
    from kernelsight.agent.backends import make_evaluator
    from kernelsight.agent.benchspec import load_spec
    from kernelsight.agent.optimize import run_optimize

    backend, ngpu = config.split("-")
    spec = load_spec(example)
    t0 = time.monotonic()
    kind = "local" if backend == "local" else "ray:local"
    extra = {"ray_init": {"num_cpus": os.cpu_count()}} if backend == "ray" else {}
    ev = SeedFromCache(make_evaluator(spec, kind, device=device, use_cache=False, **extra),
                       make_evaluator(spec, "local", device=device, use_cache=True,
                                      **({"gpus": ["0"]} if device == "cuda" else {})))
    ready = time.monotonic() - t0
    run_dir = out / f"run-{config}"
    budget = f"minutes={(seconds + 60) / 60:.3f}"
    t1 = time.monotonic()
    try:
        res = run_optimize(example, tuner=True, budget=budget, run_dir=run_dir, evaluator=ev,
                           device=device, seed=0, tuner_batch=batch, bench_shapes=bench_shapes,
                           log=lambda m: print(f"  [{config}] {m}", flush=True),
                           cancel=_cancel_after(seconds, run_dir))
    finally:
        ev.close()
    wall = time.monotonic() - t1
    entries = [json.loads(ln) for ln in (run_dir / "candidates.jsonl").read_text().splitlines()]
    seed_t = next(e["time"] for e in entries if e["status"] == "seed")
    rest = [e for e in entries if e["status"] != "seed"]
    span = (max(e["time"] for e in rest) - seed_t) if rest else 0.0
    gpus: dict[str, int] = {}
    models: set[str] = set()
    for e in rest:
        for s in e.get("stages") or []:
            g = (s.get("data") or {}).get("gpu")
            if g and s["stage"] == "correctness":
                b = g.get("before") or {}
                key = f"{b.get('index', '?')}"
                gpus[key] = gpus.get(key, 0) + 1
                if b.get("name"):
                    models.add(b["name"])
    lost = sum(1 for e in rest for s in e.get("stages") or []
               if (s.get("data") or {}).get("attempts"))
    return {
        "config": config, "backend": backend, "gpus": int(ngpu), "startup_s": ready,
        "wall_s": wall, "candidates": len(rest), "span_s": span,
        "per_minute": 60.0 * len(rest) / span if span > 0 else None,
        "seed_s": seed_t - entries[0]["time"] + (entries[0].get("seconds") or 0.0),
        "statuses": {s: sum(1 for e in rest if e["status"] == s) for s in
                     sorted({e["status"] for e in rest})},
        "gpu_jobs": gpus, "models": sorted(models), "retried": lost,
        "best_score": res.best_score, "seed_score": res.seed_score, "stop": res.stop_reason,
        "slots": getattr(ev, "slots", 1),
    }


class SeedFromCache:
    """The backend under test for the tuner's candidates; the seed and its ghost replay (the
    same in every configuration, and not counted) come from the evaluation cache that the
    warm-up filled, so the time box is spent on the candidates being measured."""

    def __init__(self, backend, cached):
        self.backend, self.cached = backend, cached
        self.slots = backend.slots
        self.device = backend.device
        self.device_name = backend.device_name

    def evaluate(self, candidate, **kw):
        if candidate.proposer in ("seed", "ghost"):
            return self.cached.evaluate(candidate, **kw)
        return self.backend.evaluate(candidate, **kw)

    def close(self):
        self.backend.close()
        self.cached.close()


def _cancel_after(seconds: float, run_dir: Path):
    """An Event set ``seconds`` after the seed has been recorded (a time box that does not
    count start-up or the seed)."""
    import threading

    ev = threading.Event()

    def watch():
        path = run_dir / "candidates.jsonl"
        while not (path.exists() and path.stat().st_size > 0):
            time.sleep(0.2)
        time.sleep(seconds)
        ev.set()

    threading.Thread(target=watch, daemon=True).start()
    return ev


WARM = """
import json, sys
from kernelsight.agent.backends import make_evaluator
from kernelsight.agent.benchspec import load_spec
from kernelsight.agent.optimize import run_optimize
example, device, run_dir, shapes = sys.argv[1:5]
ev = make_evaluator(load_spec(example), "local", device=device, use_cache=True)
r = run_optimize(example, tuner=True, budget="candidates=1", run_dir=run_dir, evaluator=ev,
                 device=device, bench_shapes=json.loads(shapes) if shapes else None)
print("seed speedup", r.seed_score, r.stop_reason)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="/tmp/ks-scaleout")
    ap.add_argument("--example", default=str(ROOT / "examples/kernels/vector_add.py"))
    ap.add_argument("--seconds", type=float, default=35.0)
    ap.add_argument("--configs", default="local-1,local-2,ray-1,ray-2")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--bench-shapes", default='[{"N": 16777216}]',
                    help="timed shapes as JSON (default one 16M-element vector)")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    shapes = json.loads(args.bench_shapes) if args.bench_shapes else None
    if args.one:
        r = one(args.one, args.example, out, args.seconds, args.device, args.batch, shapes)
        (out / f"result-{args.one}.json").write_text(json.dumps(r, indent=2, default=str))
        sys.stdout.flush()
        os._exit(0)  # leave no evaluation threads behind: their workers die with us
    cache = Path(tempfile.mkdtemp(prefix="ks-scale-cache-"))
    base_env = dict(os.environ, KERNELSIGHT_CACHE_DIR=str(cache), PYTHONUNBUFFERED="1")
    # warm-up: the device peaks and the seed's gate (with its ghost replay), cached for all
    t = time.monotonic()
    warm_env = dict(base_env, TRITON_CACHE_DIR=tempfile.mkdtemp(prefix="ks-triton-warm-"))
    if args.device == "cuda":
        warm_env["CUDA_VISIBLE_DEVICES"] = "0"
    subprocess.run([sys.executable, "-c", WARM, args.example, args.device, str(out / "run-warm"),
                    args.bench_shapes], env=warm_env, check=False)
    print(f"warm-up (peaks, seed): {time.monotonic() - t:.1f} s", flush=True)
    results = []
    for config in args.configs.split(","):
        n = int(config.split("-")[1])
        env = dict(base_env, TRITON_CACHE_DIR=tempfile.mkdtemp(prefix=f"ks-triton-{config}-"))
        if args.device == "cuda":
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(n))
        t = time.monotonic()
        p = subprocess.run([sys.executable, __file__, "--one", config, "--out", str(out),
                            "--example", args.example, "--seconds", str(args.seconds),
                            "--device", args.device, "--batch", str(args.batch),
                            "--bench-shapes", args.bench_shapes], env=env)
        f = out / f"result-{config}.json"
        if p.returncode == 0 and f.exists():
            results.append(json.loads(f.read_text()))
        else:
            results.append({"config": config, "error": f"exit {p.returncode}"})
        print(f"{config}: {time.monotonic() - t:.1f} s", flush=True)
    (out / "scaleout.json").write_text(json.dumps(results, indent=2, default=str))
    lines = ["| backend | GPUs | slots | candidates | span (s) | candidates/min | GPU jobs per GPU index "
             "| model | retried | best speedup |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['config']} | | | | | failed: {r['error']} | | | | |")
            continue
        pm = f"{r['per_minute']:.1f}" if r["per_minute"] else "-"
        best = f"{r['best_score']:.3f}x" if r["best_score"] else "-"
        lines.append(f"| {r['backend']} | {r['gpus']} | {r['slots']} | {r['candidates']} | "
                     f"{r['span_s']:.1f} | {pm} | {json.dumps(r['gpu_jobs'])} | "
                     f"{', '.join(r['models']) or '-'} | {r['retried']} | {best} |")
    table = "\n".join(lines)
    (out / "scaleout.md").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
