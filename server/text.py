"""Small text helpers over one line of source (code point columns)."""
from __future__ import annotations

import re

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def dotted_at(line: str, col: int) -> tuple[str, int, int] | None:
    """The dotted name (``tl.load``) around ``col``: (text, start, end), or None.

    The name ends at the identifier under the cursor, so hovering ``tl`` in ``tl.load``
    gives ``tl``, hovering ``load`` gives ``tl.load``.
    """
    if not line:
        return None
    col = max(0, min(col, len(line)))
    end = col
    while end < len(line) and (line[end].isalnum() or line[end] == "_"):
        end += 1
    start = col
    while start > 0 and (line[start - 1].isalnum() or line[start - 1] in "_."):
        start -= 1
    text = line[start:end].strip(".")
    if not text or not _IDENT.match(text):
        return None
    return text, start, end


def tl_aliases(imports: dict[str, str] | None) -> set[str]:
    """Local names bound to ``triton.language`` (``tl`` always counts)."""
    names = {"tl", "triton.language"}
    for alias, target in (imports or {}).items():
        if target == "triton.language":
            names.add(alias)
    return names


def tl_member(dotted: str, aliases: set[str]) -> str | None:
    """``load`` for ``tl.load`` (any alias of triton.language), else None."""
    head, _, member = dotted.rpartition(".")
    if head in aliases and member:
        return member
    return None


def call_context(text_before: str) -> tuple[str, int] | None:
    """For the text before the cursor, the callee of the innermost open call and the index of
    the argument the cursor is in; None when the cursor is not inside a call.

    Strings and comments are not tokenised: good enough for one logical line of kernel code.
    """
    depth = 0
    commas = 0
    i = len(text_before) - 1
    while i >= 0:
        ch = text_before[i]
        if ch in ")]}":
            depth += 1
        elif ch in "([{":
            if depth == 0:
                if ch != "(":
                    return None
                j = i
                while j > 0 and (text_before[j - 1].isalnum() or text_before[j - 1] in "_."):
                    j -= 1
                callee = text_before[j:i]
                return (callee, commas) if callee else None
            depth -= 1
        elif ch == "," and depth == 0:
            commas += 1
        elif ch == "\n" and depth == 0 and text_before[:i].rstrip().endswith(":"):
            return None
        i -= 1
    return None
