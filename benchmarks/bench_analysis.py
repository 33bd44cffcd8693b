"""Per-kernel analysis time of the invariant engine on the examples and on a real corpus.

Usage:
    python benchmarks/bench_analysis.py [--corpus DIR] [--limit N] [--budget-ms MS]
        [--no-grid] [--slowest K] [--times FILE.jsonl] [--findings FILE.jsonl]

The corpus defaults to ~/.cache/kernelsight-corpus (downloaded by
../shared/corpus/fetch-real-kernels; never committed). For every jit kernel that is not a
helper, the engine runs once with its cache bypassed. Per set (the repository's examples, then
the corpus) the script prints the median, p95 and maximum time per kernel twice: wall time
(``perf_counter``) and cpu time (``process_time``, which other jobs on the machine do not
inflate), in milliseconds on this machine; then crashes (exceptions escaping the engine),
budget exhaustions (KS911), the share of kernels modelled with no unknown construct, the
slowest kernels, the most frequent unknown constructs and the findings per code. The load
average is printed before and after, since it decides how far wall time exceeds cpu time.

``--limit N`` analyses a sample of about N corpus kernels spread over the whole corpus (every
k-th file), for quick runs. ``--times`` writes one JSON line per kernel (path, kernel, wall
and cpu milliseconds, status). ``--findings`` writes every corpus finding as one JSON line
(path, line, code, message, counterexample) for the hand review in docs/corpus.md.
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


def _sample(paths: list[Path], limit: int | None) -> list[Path]:
    """Every k-th file so that about ``limit`` kernels (about two per file) span the corpus."""
    if limit is None or not paths:
        return paths
    step = max(1, len(paths) * 2 // max(1, limit))
    return paths[::step]


def _pct(sorted_values: list[float], q: float) -> float:
    """The nearest-rank ``q`` quantile of an ascending list (0.0 when empty)."""
    if not sorted_values:
        return 0.0
    return sorted_values[int(q * (len(sorted_values) - 1))]


def run(paths: list[Path], label: str, budget_ms: int | None, findings_out=None,
        limit: int | None = None, times_out=None) -> dict:
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
    per_kernel: list[tuple[float, float, str]] = []
    n = 0
    for path in paths:
        if limit is not None and n >= limit:
            break
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
            wall_ms = (time.perf_counter() - t0) * 1000
            cpu_ms = (time.process_time() - c0) * 1000
            times.append(wall_ms)
            cpu_times.append(cpu_ms)
            per_kernel.append((cpu_ms, wall_ms, f"{path}:{k.name}"))
            if times_out is not None:
                times_out.write(json.dumps({"set": label, "path": str(path), "kernel": k.name,
                                            "wall_ms": round(wall_ms, 2),
                                            "cpu_ms": round(cpu_ms, 2),
                                            "status": res.status}) + "\n")
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
    per_kernel.sort(reverse=True)
    summary = {
        "cpu_median_ms": statistics.median(cpu_times) if cpu_times else 0.0,
        "cpu_p95_ms": _pct(cpu_times, 0.95),
        "cpu_max_ms": cpu_times[-1] if cpu_times else 0.0,
        "label": label, "files": len(paths), "kernels": n,
        "median_ms": statistics.median(times) if times else 0.0,
        "p95_ms": _pct(times, 0.95),
        "max_ms": times[-1] if times else 0.0,
        "slowest": per_kernel[:50],
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
    ap.add_argument("--limit", type=int, default=None,
                    help="analyse about N corpus kernels, sampled across the corpus")
    ap.add_argument("--budget-ms", type=int, default=None)
    ap.add_argument("--findings", default=None, help="write corpus findings as JSON lines")
    ap.add_argument("--times", default=None, help="write per-kernel times as JSON lines")
    ap.add_argument("--slowest", type=int, default=5,
                    help="list the K slowest kernels (cpu time) of each set")
    ap.add_argument("--no-grid", action="store_true",
                    help="time the per-program core only (grid-level checks off)")
    args = ap.parse_args(argv)
    sys.path.append(str(ROOT))  # after the installed package, so PYTHONPATH can override it
    import z3  # noqa: F401  (imported once up front so that no kernel pays for it)
    if args.no_grid:
        import kernelsight.analysis.engine as engine
        engine.GRID_CHECKS = False

    load_before = os.getloadavg()
    times_out = open(args.times, "w", encoding="utf-8") if args.times else None
    try:
        rows = [run(_files(ROOT / "examples"), "examples", args.budget_ms,
                    times_out=times_out)]
        corpus = Path(args.corpus)
        if corpus.is_dir():
            out = open(args.findings, "w", encoding="utf-8") if args.findings else None
            try:
                rows.append(run(_sample(_files(corpus), args.limit), "corpus", args.budget_ms,
                                out, args.limit, times_out))
            finally:
                if out:
                    out.close()
        else:
            print(f"(no corpus at {corpus}; run ../shared/corpus/fetch-real-kernels)")
    finally:
        if times_out:
            times_out.close()
    load_after = os.getloadavg()
    print(f"{'':26}{'wall time per kernel':^27} {'cpu time per kernel':^27}")
    print(f"{'set':10} {'files':>6} {'kernels':>8} {'median':>8} {'p95':>8} {'max':>8} "
          f"{'median':>8} {'p95':>8} {'max':>8} {'crash':>6} {'budget':>7} {'no-unknown':>11}")
    for r in rows:
        print(f"{r['label']:10} {r['files']:>6} {r['kernels']:>8} {r['median_ms']:>6.1f}ms "
              f"{r['p95_ms']:>6.1f}ms {r['max_ms']:>6.0f}ms {r['cpu_median_ms']:>6.1f}ms "
              f"{r['cpu_p95_ms']:>6.1f}ms {r['cpu_max_ms']:>6.0f}ms {r['crashes']:>6} "
              f"{r['budget']:>7} {100 * r['no_unknown_share']:>10.1f}%")
    print("(wall = perf_counter per kernel; cpu = process_time, which other jobs sharing the "
          "machine do not inflate)")
    print("load average (1, 5, 15 min): before " + ", ".join(f"{x:.2f}" for x in load_before)
          + "; after " + ", ".join(f"{x:.2f}" for x in load_after)
          + f"; {os.cpu_count()} cores")
    for r in rows:
        if args.slowest > 0 and r["slowest"]:
            print(f"\n[{r['label']}] slowest kernels (cpu ms, wall ms):")
            for cpu_ms, wall_ms, name in r["slowest"][:args.slowest]:
                print(f"  {cpu_ms:8.1f} {wall_ms:8.1f}  {name}")
    for r in rows:
        print(f"\n[{r['label']}] findings per code: {r['findings']}")
        print(f"[{r['label']}] most frequent unknown constructs: {r['unknown_kinds']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
