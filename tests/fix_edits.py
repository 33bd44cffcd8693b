"""Applying an analysis ``Fix`` to a text, as an editor applies a quick fix's edits."""
from __future__ import annotations


def apply_fix(text: str, fix) -> str:
    """``text`` with every edit of ``fix`` applied (0-based rows and columns; rows split on
    ``\\n``), the last edit first so that earlier positions stay valid."""
    offsets = [0]
    for row in text.split("\n"):
        offsets.append(offsets[-1] + len(row) + 1)
    for e in sorted(fix.edits, key=lambda e: (e.span.line, e.span.col), reverse=True):
        start = offsets[e.span.line] + e.span.col
        end = offsets[e.span.end_line] + e.span.end_col
        text = text[:start] + e.new_text + text[end:]
    return text
