"""Hover: analysis records (shape, tags, invariants, counterexample) on values, loads, stores
and ``tl.dot``; directive explanations on ``#@`` lines; code explanations on diagnostics;
signature and docs on ``tl.*`` members. Sections are joined with a rule."""
from __future__ import annotations

from lsprotocol import types as t

from ..convert import code_markdown, hover_markdown
from ..directives import directive_at, directive_markdown
from ..text import dotted_at, tl_aliases, tl_member
from ..tl_docs import TL_DOCS


def _innermost(hovers, line: int, col: int):
    best = None
    for h in hovers:
        if h.span.contains(line, col):
            size = (h.span.end_line - h.span.line, h.span.end_col - h.span.col)
            if best is None or size < best[0]:
                best = (size, h)
    return None if best is None else best[1]


def hover_sections(ls, state, lines: list[str], line: int, col: int) -> list[str]:
    if not 0 <= line < len(lines):
        return []
    src = lines[line]
    sections: list[str] = []
    directive = directive_at(src)
    if directive is not None:
        sections.append(directive_markdown(*directive))
    h = _innermost(state.hovers(), line, col)
    shown = ""
    if h is not None:
        sections.append(hover_markdown(h))
        if h.counterexample is not None:
            shown = h.counterexample.describe()
    findings = state.findings() or []
    for f in findings:
        if f.span.contains(line, col):
            cex = f.counterexample.describe() if f.counterexample is not None else ""
            # the value's section above already shows this witness
            sections.append(code_markdown(f.code, f.message, "" if cex == shown else cex))
    if directive is None:
        found = dotted_at(src, col)
        if found is not None:
            latest = state.latest()
            imports = getattr(latest.parsed, "imports", None) if latest is not None else None
            member = tl_member(found[0], tl_aliases(imports))
            if member is not None:
                md = TL_DOCS.markdown(member)
                if md:
                    sections.append(md)
    return sections


def register(ls) -> None:
    @ls.feature(t.TEXT_DOCUMENT_HOVER)
    def hover(ls, params: t.HoverParams):
        uri = params.text_document.uri
        state = ls.session.doc(uri)
        index = ls.index_for(uri)
        if state is None or index is None or state.ignored:
            return None
        line, col = index.offset_col(params.position)
        sections = hover_sections(ls, state, index.lines, line, col)
        if not sections:
            return None
        return t.Hover(contents=t.MarkupContent(kind=t.MarkupKind.Markdown,
                                                value="\n\n---\n\n".join(sections)))
