"""Inlay hints: the tile shape after each assigned tile value (``kernelsight.inlayHints``,
off by default)."""
from __future__ import annotations

import re

from lsprotocol import types as t

_ASSIGNED = re.compile(r"^\s*(?:[A-Za-z_]\w*\s*,\s*)*$")


def _is_assignment_target(line: str, col: int, end_col: int) -> bool:
    before, after = line[:col], line[end_col:]
    rest = after.lstrip()
    return (_ASSIGNED.match(before) is not None and rest.startswith("=")
            and not rest.startswith("=="))


def register(ls) -> None:
    @ls.feature(t.TEXT_DOCUMENT_INLAY_HINT, t.InlayHintOptions(resolve_provider=False))
    def inlay_hints(ls, params: t.InlayHintParams):
        uri = params.text_document.uri
        state = ls.session.doc(uri)
        index = ls.index_for(uri)
        if state is None or index is None or state.ignored:
            return None
        if not ls.session.settings_for(state.path).inlay_hints:
            return None
        lo, hi = params.range.start.line, params.range.end.line
        hints: list[t.InlayHint] = []
        seen: set[tuple[int, int]] = set()
        for h in state.hovers():
            s = h.span
            if not h.shape or s.line != s.end_line or not lo <= s.line <= hi:
                continue
            if s.line >= len(index.lines) or (s.line, s.end_col) in seen:
                continue
            if not _is_assignment_target(index.lines[s.line], s.col, s.end_col):
                continue
            seen.add((s.line, s.end_col))
            hints.append(t.InlayHint(position=index.position(s.line, s.end_col),
                                     label=": [" + ", ".join(h.shape) + "]",
                                     kind=t.InlayHintKind.Type, padding_left=False))
        return hints
