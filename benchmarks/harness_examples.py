"""Run the evaluation gate on every example kernel and print one table (GPU machine).

Each example goes through ``kernelsight.agent.evaluate.Evaluator`` exactly as the optimisation
loop would use it (static, compile, correctness, timing, each in a worker process), with the
fastest torch implementation from ``benchmarks/baselines.py`` timed beside it. If the static
stage rejects an example, the result says so and the remaining stages are run without it, so
that every example still gets a time.

Usage: python benchmarks/harness_examples.py [--out DIR] [--device auto|cpu|cuda] [NAME ...]
Writes DIR/harness_results.json and DIR/harness_table.md; prints the table last.
"""
from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINES = ROOT / "benchmarks" / "baselines.py"


def environment() -> dict:
    import torch
    import triton

    env = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "python": platform.python_version(),
           "torch": torch.__version__, "triton": triton.__version__, "cuda": torch.version.cuda}
    if torch.cuda.is_available():
        env["device"] = torch.cuda.get_device_name()
        props = torch.cuda.get_device_properties(0)
        env["sms"] = props.multi_processor_count
        env["memory_gib"] = round(props.total_memory / 2 ** 30, 1)
    try:
        env["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                       capture_output=True, text=True, timeout=20).stdout.strip()
    except OSError:
        pass
    return env


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="example names (default: all in examples/kernels)")
    ap.add_argument("--out", default=".", help="folder for the JSON and markdown outputs")
    ap.add_argument("--device", default="auto")
    args = ap.parse_args(argv)

    from kernelsight.agent.benchspec import load_spec
    from kernelsight.agent.evaluate import Evaluator
    from kernelsight.agent.records import STAGES, Candidate
    from kernelsight.commands.bench import ProgressBar

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = environment()
    print(json.dumps(env), flush=True)
    paths = sorted((ROOT / "examples" / "kernels").glob("*.py"))
    if args.names:
        paths = [p for p in paths if p.stem in args.names]
    baseline_names = set(_functions(BASELINES))
    results = []
    md = ["| kernel | shape | dtype | time (ms) | TFLOP/s | GB/s | % of roofline | baseline | baseline (ms)"
          " | speedup | max abs err |", "|---" * 11 + "|"]
    for path in paths:
        spec = load_spec(path)
        base = (str(BASELINES), path.stem) if path.stem in baseline_names else None
        ev = Evaluator(spec, device=args.device, cache_dir=out / "cache", use_cache=False,
                       progress=ProgressBar(sys.stdout), baseline=base,
                       timeouts={"compile": 240, "correctness": 240, "timing": 400})
        cand = Candidate(id=path.stem, source=path.read_text(), kernel=spec.kernel)
        t0 = time.monotonic()
        r = ev.evaluate(cand)
        note = ""
        if r.failed_stage == "static":
            note = "static stage failed: " + r.stage("static").summary
            static = r.stage("static")
            r = ev.evaluate(cand, stages=tuple(s for s in STAGES if s != "static"))
            r.stages.insert(0, static)
        print(f"\n== {path.stem} ({time.monotonic() - t0:.0f} s) on {r.device}", flush=True)
        for st in r.stages:
            print(f"  {st.stage:<12} {st.status:<8} {st.summary}", flush=True)
            if not st.ok:
                print("    " + st.feedback.replace("\n", "\n    ")[:3000], flush=True)
        if note:
            print("  note: " + note, flush=True)
        timing = r.stage("timing")
        rows = timing.data.get("rows", []) if timing is not None else []
        for row in rows:
            shape = " ".join(f"{k}={v}" for k, v in row["shape"].items())
            md.append(f"| {path.stem} | {shape} | {row['dtype']} | {row['ms']:.4f} | {fmt(row.get('tflops'), '.1f')}"
                      f" | {fmt(row.get('gbs'), '.0f')} | {fmt(row.get('pct_peak'), '.0f')}"
                      f" | {row.get('baseline')} | {row['ref_ms']:.4f} | {row['speedup']:.2f}x"
                      f" | {row['max_abs_err']:.2g} |")
        results.append({"example": path.stem, "note": note, "evaluation": r.to_dict()})
        (out / "harness_results.json").write_text(json.dumps({"environment": env, "results": results},
                                                             indent=1, default=str))
    peaks = {}
    for res in results:
        for st in res["evaluation"]["stages"]:
            if st["stage"] == "timing" and st["data"].get("peaks"):
                peaks = st["data"]["peaks"]
    (out / "harness_table.md").write_text("\n".join(md) + "\n")
    print("\nenvironment:", json.dumps(env))
    print("peaks:", json.dumps(peaks))
    print("\n".join(md))
    return 0


def _functions(path: Path) -> list[str]:
    import ast

    tree = ast.parse(path.read_text())
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]


if __name__ == "__main__":
    raise SystemExit(main())
