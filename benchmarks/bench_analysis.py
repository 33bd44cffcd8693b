"""Per-kernel analysis time of the invariant engine on the examples and on a real corpus.

Usage:
    python benchmarks/bench_analysis.py [--corpus DIR] [--limit N] [--budget-ms MS]
        [--findings FILE.jsonl]

The corpus defaults to ~/.cache/kernelsight-corpus (downloaded by
../shared/corpus/fetch-real-kernels; never committed). For every jit kernel that is not a
helper, the engine runs once with its cache bypassed; the script prints the median, p95 and
maximum wall time per kernel (milliseconds, this machine), crashes (exceptions escaping the
engine), budget exhaustions, the share of kernels modelled with no unknown construct, the most
frequent unknown constructs and the findings per code. ``--findings`` writes every finding as
one JSON line (path, line, code, message, counterexample) for the hand review in
docs/corpus.md.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _files(folder: Path) -> list[Path]:
    out = []
    for p in sorted(folder.rglob("*.py")):
        try:
            text = p.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if "jit" in text and "triton" in text:
            out.append(p)
    return out


def run(paths: list[Path], label: str, budget_ms: int | None, findings_out=None,
        limit: int | None = None) -> dict:
    from kernelsight.analysis import frontend
    from kernelsight.analysis.config import Config
    from kernelsight.analysis.engine import _analyze

    config = Config() if budget_ms is None else Config(kernel_budget_ms=budget_ms)
    times: list[float] = []
    cpu_times: list[float] = []
    parse_times: list[float] = []
    crashes: list[str] = []
    budget = 0
    clean = 0
    unknown_kinds: Counter = Counter()
    codes: Counter = Counter()
    n = 0
    for path in paths:
        text = path.read_text(encoding="utf-8", errors="replace")
        t0 = time.perf_counter()
        try:
            parsed = frontend.parse_file(text, str(path))
        except Exception as exc:  # a front-end crash is reported, not fatal
            crashes.append(f"{path}: front end {type(exc).__name__}: {exc}")
            continue
        parse_times.append((time.perf_counter() - t0) * 1000)
        for k in parsed.kernels:
            if k.is_helper or k.tree is None:
                continue
            if limit is not None and n >= limit:
                break
            n += 1
            t0 = time.perf_counter()
            c0 = time.process_time()
            try:
                res = _analyze(k, parsed, config)
            except Exception as exc:
                crashes.append(f"{path}:{k.name}: {type(exc).__name__}: {exc}\n"
                               + traceback.format_exc(limit=-3))
                continue
            times.append((time.perf_counter() - t0) * 1000)
            cpu_times.append((time.process_time() - c0) * 1000)
            if res.status == "budget":
                budget += 1
            if res.unknowns == 0:
                clean += 1
            unknown_kinds.update(res.unknown_kinds)
            for f in res.findings:
                codes[f.code] += 1
                if findings_out is not None:
                    cex = f.counterexample.to_dict() if f.counterexample else None
                    findings_out.write(json.dumps({
                        "path": str(path), "kernel": k.name, "line": f.span.line + 1,
                        "code": f.code, "message": f.message, "counterexample": cex,
                        "source_line": parsed.lines[f.span.line].strip()
                        if f.span.line < len(parsed.lines) else ""}) + "\n")
    times.sort()
    cpu_times.sort()
    summary = {
        "cpu_median_ms": statistics.median(cpu_times) if cpu_times else 0.0,
        "cpu_p95_ms": cpu_times[int(0.95 * (len(cpu_times) - 1))] if cpu_times else 0.0,
        "label": label, "files": len(paths), "kernels": n,
        "median_ms": statistics.median(times) if times else 0.0,
        "p95_ms": times[int(0.95 * (len(times) - 1))] if times else 0.0,
        "max_ms": times[-1] if times else 0.0,
        "mean_ms": statistics.fmean(times) if times else 0.0,
        "parse_median_ms": statistics.median(parse_times) if parse_times else 0.0,
        "crashes": len(crashes), "budget": budget,
        "no_unknown_share": clean / max(1, len(times)),
        "unknown_kinds": unknown_kinds.most_common(12),
        "findings": dict(sorted(codes.items())),
    }
    for c in crashes[:10]:
        print("CRASH", c, file=sys.stderr)
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", default=os.path.expanduser("~/.cache/kernelsight-corpus"))
    ap.add_argument("--limit", type=int, default=None, help="analyse at most N corpus kernels")
    ap.add_argument("--budget-ms", type=int, default=None)
    ap.add_argument("--findings", default=None, help="write corpus findings as JSON lines")
    ap.add_argument("--no-grid", action="store_true",
                    help="time the per-program core only (grid-level checks off)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import z3  # noqa: F401  (imported once up front so that no kernel pays for it)
    if args.no_grid:
        import kernelsight.analysis.engine as engine
        engine.GRID_CHECKS = False

    rows = [run(_files(ROOT / "examples"), "examples", args.budget_ms)]
    corpus = Path(args.corpus)
    if corpus.is_dir():
        out = open(args.findings, "w", encoding="utf-8") if args.findings else None
        try:
            rows.append(run(_files(corpus), "corpus", args.budget_ms, out, args.limit))
        finally:
            if out:
                out.close()
    else:
        print(f"(no corpus at {corpus}; run ../shared/corpus/fetch-real-kernels)")
    print(f"{'set':10} {'files':>6} {'kernels':>8} {'median':>8} {'p95':>8} {'max':>8} "
          f"{'cpu-med':>8} {'cpu-p95':>8} {'crash':>6} {'budget':>7} {'no-unknown':>11}")
    for r in rows:
        print(f"{r['label']:10} {r['files']:>6} {r['kernels']:>8} {r['median_ms']:>7.1f}ms "
              f"{r['p95_ms']:>7.1f}ms {r['max_ms']:>7.0f}ms {r['cpu_median_ms']:>7.1f}ms "
              f"{r['cpu_p95_ms']:>7.1f}ms {r['crashes']:>6} {r['budget']:>7} "
              f"{100 * r['no_unknown_share']:>10.1f}%")
    print("(wall = perf_counter per kernel; cpu = process_time, less sensitive to other jobs "
          "sharing the machine)")
    for r in rows:
        print(f"\n[{r['label']}] findings per code: {r['findings']}")
        print(f"[{r['label']}] most frequent unknown constructs: {r['unknown_kinds']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
