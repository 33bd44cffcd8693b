"""Parse the ``# BUG(KSxxx): reason`` markers of examples/bugs/*.py.

Each bug example carries exactly one marker, a trailing comment on the line where the analysis
must report the code. When the root cause sits on another line (a pointer advanced by the
wrong stride, reported at the ``tl.dot`` that consumes it), the marker is on the reported line
and its reason names the cause.
"""
from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

MARKER = re.compile(r"#\s*BUG\((KS\d{3})\)\s*:\s*(\S.*)$")

BUGS_DIR = Path(__file__).resolve().parent.parent / "examples" / "bugs"


def markers(path: str | Path) -> list[tuple[str, int, str]]:
    """All markers of a file as (code, 1-based line, reason), in file order.

    Only real comments count (tokenize), so a marker quoted inside a docstring is ignored.

    Raises:
        OSError: the file cannot be read.
        tokenize.TokenError / SyntaxError: the file is not tokenizable Python.
    """
    text = Path(path).read_text(encoding="utf-8")
    found = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            m = MARKER.search(tok.string)
            if m:
                found.append((m.group(1), tok.start[0], m.group(2).strip()))
    return found


def expected_findings(path: str | Path) -> list[tuple[str, int]]:
    """The findings the analysis must report for a bug example: [(code, 1-based line)]."""
    return [(code, line) for code, line, _ in markers(path)]


def bug_files() -> list[Path]:
    """Every bug example, sorted by name."""
    return sorted(BUGS_DIR.glob("*.py"))
