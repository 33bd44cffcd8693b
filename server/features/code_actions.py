"""Code actions: the analysis' mechanical quick fixes, "suppress this code on this line",
"insert the annotations inferred from the launch site" (offered only when the document
with the inserted directives has no finding that it did not have before), and per kernel "Optimize this kernel" /
"Benchmark this kernel" (commands served by ``features.commands``)."""
from __future__ import annotations

import logging
import re
from collections import Counter

from lsprotocol import types as t

from ..pipeline import GATE, run_analysis

log = logging.getLogger("kernelsight.server")

_NOQA = re.compile(r"#\s*noqa(?P<colon>:\s*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*))?",
                   re.IGNORECASE)


def _overlaps(span, rng_lines: tuple[int, int, int, int]) -> bool:
    l0, c0, l1, c1 = rng_lines
    return not ((span.end_line, span.end_col) < (l0, c0) or (span.line, span.col) > (l1, c1))


def suppress_edit(line_text: str, line: int, code: str, index) -> t.TextEdit | None:
    """Append ``# noqa: CODE`` to the line, merging with an existing ``# noqa: ...`` list.

    Returns None when a bare ``# noqa`` already silences every code on the line.
    """
    body = line_text[:-1] if line_text.endswith("\r") else line_text
    m = _NOQA.search(body) if "#" in body else None
    if m is not None:
        if m.group("colon") is None:
            return None
        end = m.end("codes")
        start_pos = index.position(line, end)
        return t.TextEdit(range=t.Range(start=start_pos, end=start_pos), new_text=f", {code}")
    end_pos = index.position(line, len(body))
    return t.TextEdit(range=t.Range(start=end_pos, end=end_pos), new_text=f"  # noqa: {code}")


def _matching_diagnostics(finding, diags, index) -> list[t.Diagnostic]:
    rng = index.range(finding.span)
    return [d for d in diags if d.code == finding.code and d.range == rng]


def _insertion(kernel, lines: list[str]) -> tuple[int, str] | None:
    """Line before which directives go (the first body statement) and its indentation."""
    tree = kernel.tree
    if tree is None or not tree.body:
        return None
    first = tree.body[0]
    line = first.lineno - 1
    if 0 <= line < len(lines):
        text = lines[line]
        indent = text[:len(text) - len(text.lstrip())]
        return line, indent
    return None


def _inferred_text(kernel, parsed, lines: list[str]) -> tuple[int, str] | None:
    try:
        from kernelsight.analysis.infer import infer_annotations
    except ImportError:
        return None
    try:
        directives = infer_annotations(parsed, kernel)
    except Exception:
        log.exception("inferring annotations of %s failed", kernel.name)
        return None
    if not directives:
        return None
    where = _insertion(kernel, lines)
    if where is None:
        return None
    line, indent = where
    return line, "".join(f"{indent}{d.strip()}\n" for d in directives)


def _finding_keys(findings, insert_line: int = -1, shift: int = 0) -> Counter:
    """Findings counted by (code, line); lines at or after ``insert_line`` move by ``shift``."""
    return Counter((f.code, f.span.line + shift if f.span.line >= insert_line >= 0 else f.span.line)
                   for f in findings)


def _verify(text: str, path: str, config, line: int, block: str, kernel_name: str,
            before=None) -> bool:
    """True when inserting ``block`` before ``line`` adds no finding to the document.

    Both texts go through the full analysis: the fast tier alone would miss a new engine
    finding, e.g. a KS301 when the directives lose a launcher relation such as
    ``BLOCK_N = triton.next_power_of_2(N)``. Findings are compared by code and line, the
    original's lines shifted past the inserted block.
    """
    lines = text.split("\n")
    new_text = "\n".join(lines[:line]) + ("\n" if line else "") + block + "\n".join(lines[line:])
    after = run_analysis(new_text, path, config, fast=False).analysis.report.findings
    if any(f.code.startswith("KS9") and f.kernel in (None, kernel_name) for f in after):
        return False
    if before is None:  # the document's own full analysis, when the caller has none
        before = run_analysis(text, path, config, fast=False).analysis.report.findings
    added = _finding_keys(after) - _finding_keys(before, line, block.count("\n"))
    if added:
        log.info("inferred annotations for %s would add %s", kernel_name, sorted(added))
    return not added


def _infer_and_verify(result, kernel, path: str, config) -> tuple[int, str] | None:
    """Worker-thread part: infer the directives, then check them (None = nothing to offer)."""
    lines = result.text.split("\n")
    GATE.acquire(True)
    try:
        got = _inferred_text(kernel, result.parsed, lines)
    finally:
        GATE.release()
    if got is None:
        return None
    line, block = got
    # the full result of this very version already holds the findings "before"
    before = result.analysis.report.findings if result.tier == "full" else None
    if not _verify(result.text, path, config, line, block, kernel.name, before):
        log.info("inferred annotations for %s not offered: they do not check cleanly",
                 kernel.name)
        return None
    return got


async def inferred_annotation_actions(ls, state, result, uri: str, kernel) -> list:
    key = (result.version, kernel.name)
    if key not in state.verified:
        settings = ls.session.settings_for(state.path)
        try:
            got = await ls.analyzer.on_full_thread(_infer_and_verify, result, kernel,
                                                   state.path or uri, settings.config)
        except Exception:
            log.exception("inferring annotations of %s failed", kernel.name)
            got = None
        state.verified = {k: v for k, v in state.verified.items() if k[0] == result.version}
        state.verified[key] = got
    got = state.verified[key]
    if got is None:
        return []
    line, block = got
    index = ls.index_for(uri)
    if index is None:  # closed while the inference ran (tests/test_regressions_fuzz.py)
        return []
    now = ls.document_text(uri)
    if now is None or now[1] != result.version:  # edited meanwhile: positions are stale
        return []
    pos = index.position(line, 0)
    return [t.CodeAction(
        title=f"Insert the annotations inferred from the launch site ({kernel.name})",
        kind=t.CodeActionKind.RefactorRewrite,
        edit=t.WorkspaceEdit(changes={uri: [t.TextEdit(range=t.Range(start=pos, end=pos),
                                                       new_text=block)]}))]


def register(ls) -> None:
    @ls.feature(t.TEXT_DOCUMENT_CODE_ACTION, t.CodeActionOptions(code_action_kinds=[
        t.CodeActionKind.QuickFix, t.CodeActionKind.RefactorRewrite]))
    async def code_action(ls, params: t.CodeActionParams):
        uri = params.text_document.uri
        state = ls.session.doc(uri)
        index = ls.index_for(uri)
        if state is None or index is None or state.ignored:
            return None
        l0, c0 = index.offset_col(params.range.start)
        l1, c1 = index.offset_col(params.range.end)
        window = (l0, c0, l1, c1)
        only = params.context.only
        want_fix = not only or any(k.startswith("quickfix") for k in only)
        want_refactor = not only or any(k.startswith("refactor") for k in only)
        diags = list(params.context.diagnostics or [])
        actions: list[t.CodeAction] = []
        findings = state.findings() or []
        if want_fix:
            for f in findings:
                if not _overlaps(f.span, window):
                    continue
                matched = _matching_diagnostics(f, diags, index)
                for fix in f.fixes:
                    edits = [t.TextEdit(range=index.range(e.span), new_text=e.new_text)
                             for e in fix.edits]
                    actions.append(t.CodeAction(
                        title=fix.title, kind=t.CodeActionKind.QuickFix,
                        diagnostics=matched or None, is_preferred=True,
                        edit=t.WorkspaceEdit(changes={uri: edits})))
            seen: set[tuple[str, int]] = set()
            for f in findings:
                if not _overlaps(f.span, window) or (f.code, f.span.line) in seen:
                    continue
                seen.add((f.code, f.span.line))
                if not 0 <= f.span.line < len(index.lines):
                    continue
                edit = suppress_edit(index.lines[f.span.line], f.span.line, f.code, index)
                if edit is None:
                    continue
                actions.append(t.CodeAction(
                    title=f"Suppress {f.code} on this line", kind=t.CodeActionKind.QuickFix,
                    diagnostics=_matching_diagnostics(f, diags, index) or None,
                    edit=t.WorkspaceEdit(changes={uri: [edit]})))
        result = state.current()
        kernels = getattr(result.parsed, "kernels", []) if result is not None else []
        for kernel in kernels:
            if kernel.is_helper or not (kernel.span.line <= l0 <= kernel.span.end_line):
                continue
            if want_refactor:
                actions += await inferred_annotation_actions(ls, state, result, uri, kernel)
                for title, command in (("Optimize this kernel", "kernelsight.optimize"),
                                       ("Benchmark this kernel", "kernelsight.benchmark")):
                    actions.append(t.CodeAction(
                        title=f"{title} ({kernel.name})", kind=t.CodeActionKind.RefactorRewrite,
                        command=t.Command(title=title, command=command,
                                          arguments=[uri, kernel.name])))
        return actions or None
