"""The analysis entry points: source in, findings with counterexamples out.

``analyze_source`` runs the front end (tree-sitter), the language rules (KS5xx), the
annotation checks (KS9xx) and, unless ``config.fast_only``, the invariant engine on every
kernel; it never raises on bad input (a crash inside one kernel's analysis becomes a KS911
information finding on that kernel, the other kernels are still analysed).
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import codes
from .config import Config
from .model import FileReport, Finding, HoverInfo, KernelSummary, Severity

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?",
                   re.IGNORECASE)


@dataclass
class Analysis:
    """A full analysis of one file: the report plus what hover needs."""

    report: FileReport
    hovers: list[HoverInfo] = field(default_factory=list)


def analyze_source(text: str, path: str = "<string>", config: Config | None = None, *,
                   front=None, run_kernel=None) -> Analysis:
    """Analyse one Python source file.

    Args:
        text: the file's text (any size; non-Python text simply has no kernels).
        path: used in findings and reports only; nothing is read from disk.
        config: settings; defaults to ``Config()``.
        front: ``(parsed, rule_findings)`` already computed for exactly this text and config
            (the language server keeps them from the fast tier); None computes them here.
        run_kernel: ``(kernel, parsed, config) -> engine.KernelAnalysis`` used instead of
            ``analyze_kernel_safely`` (the server adds its per-kernel cache and cancellation
            there; an exception it raises propagates).

    Returns:
        An ``Analysis`` whose ``report.findings`` are sorted by position, filtered by
        ``select``/``ignore`` and ``# noqa`` comments, with severities overridden per config.
    """
    from . import frontend, rules  # imported here so `import kernelsight.analysis` stays cheap

    config = config or Config()
    started = time.perf_counter()
    if front is None:
        parsed = frontend.parse_file(text, path, budget_ms=config.kernel_budget_ms)
        rule_findings = rules.check_rules(parsed, config)
    else:
        parsed, rule_findings = front
    run_kernel = run_kernel or analyze_kernel_safely
    findings: list[Finding] = list(parsed.findings)
    findings.extend(rule_findings)
    summaries: list[KernelSummary] = []
    hovers: list[HoverInfo] = []
    for kernel in parsed.kernels:
        if kernel.is_helper:
            continue
        summary = KernelSummary(name=kernel.name, span=kernel.span)
        if kernel.budget_exhausted is not None:
            summary.status = "budget"  # the front end or the rules ran out; KS911 says so
        elif kernel.has_syntax_error or kernel.tree is None:
            summary.status = "syntax-error"
        elif config.fast_only:
            summary.status = "skipped"
        else:
            t0 = time.perf_counter()
            result = run_kernel(kernel, parsed, config)
            summary.seconds = time.perf_counter() - t0
            findings.extend(result.findings)
            summary.tally = result.tally
            summary.unknowns = result.unknowns
            summary.unknown_kinds = dict(result.unknown_kinds)
            summary.status = result.status
            hovers.extend(result.hovers)
        summaries.append(summary)
    findings = finalize_findings(findings, parsed.lines, config)
    report = FileReport(path=path, findings=findings, kernels=summaries,
                        seconds=time.perf_counter() - started)
    return Analysis(report=report, hovers=hovers)


def analyze_kernel_safely(kernel, parsed, config):
    """Run the invariant engine on one kernel; an engine failure (recursion, memory, a bug)
    becomes a KS911 information finding on that kernel instead of an exception.

    Returns:
        ``engine.KernelAnalysis`` (findings not yet filtered: see ``finalize_findings``).
    """
    from .engine import KernelAnalysis, analyze_kernel

    try:
        return analyze_kernel(kernel, parsed, config)
    except RecursionError:
        reason = "expression nesting too deep"
    except MemoryError:
        reason = "out of memory"
    except Exception as exc:  # an engine bug must not take the file (or the server) down
        reason = f"internal error {type(exc).__name__}: {exc}"
    info = codes.get("KS911")
    finding = Finding(code="KS911", message=f"{info.title}: {reason}", span=kernel.name_span,
                      severity=info.severity, kernel=kernel.name)
    return KernelAnalysis(findings=[finding], status="budget")


def finalize_findings(findings: list[Finding], lines: list[str], config: Config) -> list[Finding]:
    """Filter by select/ignore and ``# noqa``, drop duplicates, apply severity overrides and
    sort by position. ``lines`` are the file's lines (``ParsedFile.lines``)."""
    kept: list[Finding] = []
    seen: set[tuple] = set()
    for f in findings:
        if not config.enabled(f.code) or _suppressed(f, lines):
            continue
        key = (f.code, f.span, f.message)
        if key in seen:
            continue
        seen.add(key)
        default = codes.CODES[f.code].severity if f.code in codes.CODES else f.severity
        if f.code in config.severity:
            f.severity = config.severity[f.code]
        elif f.severity is None:
            f.severity = default
        kept.append(f)
    kept.sort(key=Finding.sort_key)
    return kept


def _suppressed(f: Finding, lines: list[str]) -> bool:
    """``# noqa`` (all codes) or ``# noqa: KS101, KS203`` on the finding's first line."""
    if not 0 <= f.span.line < len(lines):
        return False
    line = lines[f.span.line]
    if "#" not in line:
        return False
    m = _NOQA.search(line)
    if not m:
        return False
    listed = m.group("codes")
    if listed is None:
        return True
    return f.code.upper() in {c.upper() for c in re.split(r"[\s,]+", listed) if c}


def analyze_path(path: str | Path, config: Config | None = None) -> Analysis:
    """Read a file (UTF-8, undecodable bytes replaced) and analyse it.

    Raises:
        OSError: the file cannot be read.
    """
    p = Path(path)
    data = p.read_bytes()
    text = data.decode("utf-8", errors="replace")
    return analyze_source(text, str(path), config)


def hover_at(analysis: Analysis, line: int, col: int) -> HoverInfo | None:
    """The innermost hover record whose span contains the 0-based (line, col), or None."""
    best: HoverInfo | None = None
    for h in analysis.hovers:
        if h.span.contains(line, col):
            if best is None or _size(h) < _size(best):
                best = h
    return best


def _size(h: HoverInfo) -> tuple[int, int]:
    return (h.span.end_line - h.span.line, h.span.end_col - h.span.col)


__all__ = ["Analysis", "analyze_source", "analyze_path", "analyze_kernel_safely",
           "finalize_findings", "hover_at", "Severity"]
