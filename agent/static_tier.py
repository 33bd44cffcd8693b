"""Gate stage "static": the invariant analysis on the candidate's source, before anything runs.

A proposer (an LLM in particular) may rewrite a kernel and drop its ``#@`` annotations, which
would silently switch the checks off. So the ORIGINAL kernel's directives that the candidate's
kernel lacks are put back (above its decorators) before the analysis, and every finding's line
is mapped back to the candidate's own text. Findings of severity ERROR fail the stage.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from .records import StageResult

_DIRECTIVE = re.compile(r"^(?P<indent>\s*)#@\s*(?P<body>.*)$")


@dataclass
class Directive:
    """One ``#@`` directive with its continuation lines (0-based first line)."""

    line: int
    lines: list[str]
    kind: str
    key: str


def kernel_directives(text: str, kernel: str) -> tuple[list[Directive], int | None, str]:
    """The ``#@`` directives inside or directly above jit function ``kernel``.

    Returns (directives, 0-based line of its first decorator or ``def`` (None if the function
    is absent), the indentation of its ``def`` line).
    """
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return [], None, ""
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == kernel), None)
    if fn is None:
        return [], None, ""
    lines = text.splitlines()
    first = min([fn.lineno] + [d.lineno for d in fn.decorator_list]) - 1
    start = first
    while start - 1 >= 0 and lines[start - 1].lstrip().startswith("#"):
        start -= 1
    end = (fn.end_lineno or fn.lineno)
    out: list[Directive] = []
    cur: Directive | None = None
    cur_indent = -1
    for i in range(start, min(end, len(lines))):
        m = _DIRECTIVE.match(lines[i])
        if not m:
            cur = None
            continue
        body = m.group("body")
        lead = len(body) - len(body.lstrip())
        if cur is not None and lead > cur_indent:
            cur.lines.append(lines[i].strip())
            continue
        word = body.split(None, 1)[0] if body.strip() else ""
        cur = Directive(line=i, lines=[lines[i].strip()], kind=word, key="")
        cur_indent = lead
        out.append(cur)
    for d in out:
        d.key = _key(d)
    indent = re.match(r"\s*", lines[fn.lineno - 1]).group(0)
    return out, first, indent


def _key(d: Directive) -> str:
    text = " ".join(re.sub(r"^#@\s*", "", l) for l in d.lines)
    text = " ".join(text.split())
    if d.kind == "tensor":
        name = text[len("tensor"):].split("=", 1)[0].strip()
        return f"tensor {name}"
    if d.kind == "grid":
        return "grid"
    if d.kind == "computes":
        return "computes " + text[len("computes"):].split("[", 1)[0].strip()
    return text


@dataclass
class Reinserted:
    """The analysed text and how its lines map back to the candidate's."""

    text: str
    at: int | None  # 0-based line where directives were inserted
    count: int
    directives: list[str]

    def to_candidate_line(self, line: int) -> tuple[int, bool]:
        """Map a 0-based analysed line to the candidate's; the flag says it was re-inserted."""
        if self.at is None or line < self.at:
            return line, False
        if line < self.at + self.count:
            return self.at, True
        return line - self.count, False


def reinsert_annotations(original: str, candidate: str, kernel: str) -> Reinserted:
    """Put the original kernel's directives that the candidate's kernel lacks above it.

    A directive counts as present when the candidate has one of the same key: the same tensor
    name, a grid, a computes of the same output, or (assume/assert/tag/partners) the same text.
    ``bench`` directives are the harness's own and never re-inserted.
    """
    orig, _, _ = kernel_directives(original, kernel)
    cand, at, indent = kernel_directives(candidate, kernel)
    have = {d.key for d in cand}
    missing = [d for d in orig if d.kind != "bench" and d.key not in have]
    if not missing or at is None:
        return Reinserted(candidate, None, 0, [])
    new_lines: list[str] = []
    for d in missing:
        new_lines.extend(indent + l for l in d.lines)
    lines = candidate.splitlines(keepends=True)
    insert = [l + "\n" for l in new_lines]
    text = "".join(lines[:at] + insert + lines[at:])
    return Reinserted(text, at, len(insert), [" ".join(d.lines) for d in missing])


def run(ctx) -> StageResult:
    """Analyse the candidate (worker side); see the module docstring."""
    return check_source(ctx.job["source"], ctx.spec.text, ctx.job.get("kernel") or ctx.spec.kernel,
                        str(ctx.spec.path.name), kernelbench=ctx.spec.format == "kernelbench")


def check_source(source: str, original: str, kernel: str, filename: str,
                 kernelbench: bool = False) -> StageResult:
    """Run ``kernelsight.analysis.analyze_source`` on ``source`` with the original annotations
    re-inserted; ERROR findings fail. Lines in the feedback are the candidate's, 1-based."""
    try:
        from kernelsight.analysis.api import analyze_source
        from kernelsight.analysis.model import Severity
    except ImportError as exc:  # analysis extra not installed: nothing to check, say so
        return StageResult(stage="static", ok=True, status="skipped",
                           summary=f"static analysis unavailable ({exc})")
    if not kernelbench:
        try:
            tree = ast.parse(source)
        except SyntaxError as exc:
            return StageResult(stage="static", ok=False, status="failed",
                               summary=f"syntax error at line {exc.lineno}: {exc.msg}",
                               feedback=f"{filename}:{exc.lineno}:{exc.offset or 0}: syntax error: {exc.msg}")
        if not any(isinstance(n, ast.FunctionDef) and n.name == kernel for n in ast.walk(tree)):
            return StageResult(stage="static", ok=False, status="failed",
                               summary=f"kernel {kernel!r} not found in the candidate",
                               feedback=f"the candidate must keep the jit function {kernel!r} (same name)")
        re_ins = reinsert_annotations(original, source, kernel)
    else:
        re_ins = Reinserted(source, None, 0, [])
    try:
        analysis = analyze_source(re_ins.text, filename)
    except ImportError as exc:
        return StageResult(stage="static", ok=True, status="skipped",
                           summary=f"static analysis unavailable ({exc})")
    except Exception as exc:  # an analysis bug must not be blamed on the candidate
        return StageResult(stage="static", ok=True, status="skipped",
                           summary=f"static analysis failed internally ({type(exc).__name__}: {exc})"[:300])
    findings = analysis.report.findings
    errors = [f for f in findings if f.severity == Severity.ERROR]
    feedback_lines = []
    if re_ins.count:
        feedback_lines.append(f"re-inserted {len(re_ins.directives)} annotation(s) of the original kernel"
                              f" that the candidate dropped: " + "; ".join(re_ins.directives))
    items = []
    for f in findings:
        line, inserted = re_ins.to_candidate_line(f.span.line)
        head = f"{line + 1}:{f.span.col + 1} {f.code} {f.message}"
        if inserted:
            head += " (on a re-inserted annotation)"
        parts = [head]
        if f.counterexample is not None:
            desc = f.counterexample.describe()
            if desc:
                parts.append("  " + desc)
            parts.extend("  " + n for n in f.counterexample.notes)
        for r in f.related:
            rl, _ = re_ins.to_candidate_line(r.span.line)
            parts.append(f"  line {rl + 1}: {r.message}")
        feedback_lines.append("\n".join(parts))
        items.append({"line": line + 1, "col": f.span.col + 1, "code": f.code, "message": f.message,
                      "severity": f.severity.label if f.severity is not None else None})
    kernels = {k.name: {"status": k.status, "proved": k.tally.proved, "refuted": k.tally.refuted,
                        "unproved": k.tally.unproved} for k in analysis.report.kernels}
    data = {"findings": items, "errors": len(errors), "kernels": kernels, "reinserted": re_ins.directives}
    if errors:
        first = errors[0]
        line, _ = re_ins.to_candidate_line(first.span.line)
        summary = f"{len(errors)} error(s); first {first.code} at line {line + 1}: {first.message}"
        return StageResult(stage="static", ok=False, status="failed", summary=summary[:300],
                           feedback="\n".join(feedback_lines), data=data)
    tally = [v for v in kernels.values()]
    proved = sum(v["proved"] for v in tally)
    summary = f"no errors ({len(findings)} other finding(s), {proved} invariant(s) proved)"
    return StageResult(stage="static", ok=True, status="ok", summary=summary,
                       feedback="\n".join(feedback_lines), data=data)
