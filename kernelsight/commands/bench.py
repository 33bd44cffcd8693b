"""``kernelsight bench FILE[::KERNEL]``: compile, check and time a kernel against its reference.

Runs the evaluation gate (static, compile, correctness, timing; see docs/harness.md) on the
file as it is, prints one table row per shape (shape, time, TFLOP/s, GB/s, % of the roofline,
reference time, speedup, max error) after a progress bar on stderr, and writes the full
result as JSON with ``--json PATH``. Without a GPU the table holds the interpreter's
correctness checks and says that timing was skipped.

Exit status: 0 every stage that ran passed, 1 a stage failed, 2 usage or spec error.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any


def register(parser: argparse.ArgumentParser) -> None:
    """Add ``bench``'s arguments to its sub-parser."""
    parser.add_argument("target_file", metavar="FILE[::KERNEL]",
                        help="a kernel file with a bench spec (or a KernelBench task)")
    parser.add_argument("--candidate", metavar="PATH",
                        help="evaluate this file against FILE's spec (e.g. a KernelBench ModelNew"
                             " file, or an edited copy of FILE); default: FILE itself")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="where to run (default: auto = CUDA when a GPU is visible)")
    parser.add_argument("--target", default="cuda:90",
                        help="compile target BACKEND:ARCH for the compile report (default cuda:90)")
    parser.add_argument("--json", metavar="PATH", help="write the full result as JSON to PATH")
    parser.add_argument("--stages", default="static,compile,correctness,timing",
                        help="comma-separated subset of static,compile,correctness,timing")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUE",
                        help="launcher override, e.g. --set BLOCK=128 --set num_warps=8 (repeatable)")
    parser.add_argument("--timeout", type=float, metavar="SECONDS",
                        help="wall-time limit per stage (default: static 60, compile 180,"
                             " correctness 300, timing 600)")
    parser.add_argument("--seed", type=int, help="fix the random inputs (default: fresh)")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the result cache")
    parser.add_argument("--cache-dir", metavar="DIR", help="cache folder (default ~/.cache/kernelsight)")


def _parse_overrides(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"--set expects NAME=VALUE, got {item!r}")
        v: Any = value.strip()
        for conv in (int, float):
            try:
                v = conv(v)
                break
            except ValueError:
                continue
        if v in ("True", "False"):
            v = v == "True"
        out[name.strip()] = v
    return out


class ProgressBar:
    """A one-line bar on stderr, redrawn in place on a terminal, one line per stage otherwise."""

    def __init__(self, stream=None, width: int = 24):
        self.stream = stream or sys.stderr
        self.width = width
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.stage = ""
        self.started = time.monotonic()

    def __call__(self, ev: dict[str, Any]) -> None:
        kind = ev.get("event")
        if kind == "cached":
            self._line("cached result (same source, spec, device and versions)")
        elif kind == "stage":
            self.stage = ev.get("stage") or ""
            self._draw(0, 1, "started")
        elif kind == "progress":
            self._draw(int(ev.get("done", 0)), max(1, int(ev.get("total", 1))), str(ev.get("label", "")))
        elif kind == "result":
            r = ev.get("result") or {}
            mark = "ok" if r.get("ok") else r.get("status", "failed")
            self._draw(1, 1, f"{mark} ({r.get('seconds', 0):.1f} s)", final=True)

    def _draw(self, done: int, total: int, label: str, final: bool = False) -> None:
        filled = int(self.width * done / total)
        bar = "#" * filled + "-" * (self.width - filled)
        text = f"[{bar}] {self.stage:<11} {done}/{total} {label}"[:110]
        if self.tty:
            self.stream.write("\r\033[K" + text + ("\n" if final else ""))
            self.stream.flush()
        elif final:
            self._line(text)

    def _line(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()


def _fmt(v, spec: str, dash: str = "-") -> str:
    if v is None:
        return dash
    try:
        return format(v, spec)
    except (TypeError, ValueError):
        return str(v)


def _shape_text(shape: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in shape.items()) or "(task inputs)"


def render_table(evaluation, spec) -> str:
    """The result table: timing rows on a GPU, correctness rows otherwise."""
    head = ["shape", "dtype", "time ms", "TFLOP/s", "GB/s", "% peak", "ref ms", "speedup", "max err"]
    rows: list[list[str]] = []
    timing = evaluation.stage("timing")
    corr = evaluation.stage("correctness")
    if timing is not None and timing.status == "ok":
        for r in timing.data.get("rows", []):
            rows.append([_shape_text(r["shape"]), r.get("dtype") or "", _fmt(r["ms"], ".4f"),
                         _fmt(r.get("tflops"), ".1f"), _fmt(r.get("gbs"), ".0f"),
                         _fmt(r.get("pct_peak"), ".0f"), _fmt(r["ref_ms"], ".4f"),
                         _fmt(r.get("speedup"), ".2f") + "x", _fmt(r.get("max_abs_err"), ".2g")])
    elif corr is not None:
        for r in corr.data.get("checks", []):
            shape = _shape_text(r["shape"]) + (" (held out)" if r.get("heldout") else "")
            err = _fmt(r.get("max_abs_err"), ".2g") if r.get("ok") else "FAIL"
            rows.append([shape, r.get("dtype") or "", "-", "-", "-", "-", "-", "-", err])
    if not rows:
        return ""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) if i < 2 else h.rjust(w) for i, (h, w) in enumerate(zip(head, widths)))]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Evaluate the file and print the table; returns the exit status."""
    from kernelsight.extras import require

    problem = require("kernelsight bench", ("torch", "triton"))
    if problem:
        print(f"kernelsight bench: {problem}", file=sys.stderr)
        return 2
    from kernelsight.agent.benchspec import SpecError, load_spec
    from kernelsight.agent.evaluate import Evaluator
    from kernelsight.agent.records import STAGES, Candidate

    path, sep, kernel = args.target_file.partition("::")
    try:
        spec = load_spec(path, kernel or None)
    except SpecError as exc:
        print(f"kernelsight bench: {exc}", file=sys.stderr)
        return 2
    stages = tuple(s.strip() for s in args.stages.split(",") if s.strip())
    bad = [s for s in stages if s not in STAGES]
    if bad:
        print(f"kernelsight bench: unknown stage(s) {', '.join(bad)}; expected {', '.join(STAGES)}",
              file=sys.stderr)
        return 2
    try:
        launch = _parse_overrides(args.overrides)
    except ValueError as exc:
        print(f"kernelsight bench: {exc}", file=sys.stderr)
        return 2
    cand_path = Path(args.candidate) if args.candidate else Path(path)
    try:
        source = cand_path.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        print(f"kernelsight bench: {cand_path}: cannot read: {exc.strerror or exc}", file=sys.stderr)
        return 2
    timeouts = {s: args.timeout for s in STAGES} if args.timeout else None
    bar = ProgressBar()
    evaluator = Evaluator(spec, device=args.device, target=args.target, timeouts=timeouts,
                          cache_dir=args.cache_dir, use_cache=not args.no_cache, progress=bar,
                          seed=args.seed)
    candidate = Candidate(id="bench", source=source, kernel=spec.kernel, launch=launch)
    evaluation = evaluator.evaluate(candidate, stages=stages)

    out = sys.stdout
    out.write(f"{spec.path}::{spec.kernel} on {evaluation.device}\n")
    for st in evaluation.stages:
        state = "passed" if st.ok and st.status == "ok" else st.status
        out.write(f"  {st.stage:<12} {state:<8} {st.summary}\n")
    table = render_table(evaluation, spec)
    if table:
        out.write("\n" + table + "\n")
    failed = evaluation.failed_stage
    if failed:
        st = evaluation.stage(failed)
        out.write(f"\n{failed} failed:\n{st.feedback}\n")
    timing = evaluation.stage("timing")
    if timing is not None and timing.status == "skipped":
        out.write(f"\n{timing.summary}\n")
    elif evaluation.score is not None:
        peaks = timing.data.get("peaks", {})
        out.write(f"\ngeomean speedup {evaluation.score:.3f}x; % peak is of the roofline with measured"
                  f" peaks: copy {_fmt(peaks.get('copy_gbs'), '.0f')} GB/s, GEMM "
                  + ", ".join(f"{k} {v:.0f} TFLOP/s" for k, v in (peaks.get('gemm_tflops') or {}).items())
                  + "\n")
    if args.json:
        payload = {"spec": spec.to_dict(), "candidate": str(cand_path), "launch": launch,
                   "evaluation": evaluation.to_dict()}
        try:
            Path(args.json).write_text(json.dumps(payload, indent=2, default=str))
        except OSError as exc:
            print(f"kernelsight bench: cannot write {args.json}: {exc.strerror or exc}", file=sys.stderr)
            return 2
    return 0 if evaluation.ok else 1
