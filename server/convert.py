"""The one translation layer between analysis results and LSP types.

Analysis positions are 0-based lines and 0-based *code point* columns of the analysed text;
LSP positions count columns in the negotiated position encoding (UTF-16 unless the client
offered UTF-8 or UTF-32). Every range the server sends goes through ``LineIndex``, and every
``Finding`` becomes a ``Diagnostic`` through ``finding_to_diagnostic`` only.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types as t

if TYPE_CHECKING:  # the analysis package loads with the first analysis, not at start-up
    from kernelsight.analysis.model import Finding, HoverInfo, Span

SOURCE = "kernelsight"

# The repository layout puts docs/ next to server/; an installed wheel has no docs folder.
_DOCS_DIR = Path(__file__).resolve().parent.parent / "docs" / "codes"


class LineIndex:
    """Converts between code point columns and client position units for one text.

    Lines are split on ``\\n`` only, as tree-sitter counts rows; a trailing ``\\r`` stays part
    of its line's text but never matters for columns before it.
    """

    def __init__(self, text: str, encoding: str | t.PositionEncodingKind | None = None):
        self.lines = text.split("\n")
        enc = str(getattr(encoding, "value", encoding) or "utf-16")
        self.encoding = enc

    def _units(self, s: str) -> int:
        if s.isascii() or self.encoding == "utf-32":
            return len(s)
        if self.encoding == "utf-8":
            return len(s.encode("utf-8"))
        return len(s) + sum(1 for ch in s if ord(ch) > 0xFFFF)

    def position(self, line: int, col: int) -> t.Position:
        """Client position of (line, code point col), clamped into the text."""
        if line < 0:
            return t.Position(line=0, character=0)
        if line >= len(self.lines):
            last = len(self.lines) - 1
            return t.Position(line=last, character=self._units(self.lines[last]))
        text = self.lines[line]
        col = max(0, min(col, len(text)))
        return t.Position(line=line, character=self._units(text[:col]))

    def range(self, span: Span) -> t.Range:
        start = self.position(span.line, span.col)
        end = self.position(span.end_line, span.end_col)
        if (end.line, end.character) < (start.line, start.character):
            end = start
        return t.Range(start=start, end=end)

    def offset_col(self, position: t.Position) -> tuple[int, int]:
        """(line, code point col) of a client position, clamped into the text."""
        line = max(0, min(position.line, len(self.lines) - 1))
        text = self.lines[line]
        want = max(0, position.character)
        if text.isascii() or self.encoding == "utf-32":
            return line, min(want, len(text))
        units = 0
        for i, ch in enumerate(text):
            if units >= want:
                return line, i
            units += (len(ch.encode("utf-8")) if self.encoding == "utf-8"
                      else (2 if ord(ch) > 0xFFFF else 1))
        return line, len(text)


def docs_href(code: str, template: str = "") -> str | None:
    """The documentation link of ``code``.

    An explicit ``template`` (``kernelsight.docsUrl``, with ``{code}``) wins; otherwise the
    repository's generated page docs/codes/KSxxx.md as a file URI when it exists; else None.
    """
    if template:
        return template.replace("{code}", code)
    page = _DOCS_DIR / f"{code}.md"
    if page.is_file():
        return page.as_uri()
    return None


def finding_to_diagnostic(f: Finding, index: LineIndex, uri: str, docs_url: str = "",
                          related_support: bool = True) -> t.Diagnostic:
    """Translate one Finding.

    The message keeps the finding's first line; the counterexample (one line) is appended to
    the message and also carried as the last related-information entry at the finding's own
    range, after the chain of lines from ``Finding.related``.
    """
    rng = index.range(f.span)
    message = f.message
    related: list[t.DiagnosticRelatedInformation] = []
    for r in f.related:
        related.append(t.DiagnosticRelatedInformation(
            location=t.Location(uri=uri, range=index.range(r.span)), message=r.message))
    if f.counterexample is not None:
        line = f.counterexample.describe()
        if line:
            message = f"{message}\n  counterexample: {line}"
            related.append(t.DiagnosticRelatedInformation(
                location=t.Location(uri=uri, range=rng), message=f"counterexample: {line}"))
    if related and not related_support:
        message += "".join(f"\n  line {r.location.range.start.line + 1}: {r.message}"
                           for r in related if not r.message.startswith("counterexample"))
    href = docs_href(f.code, docs_url)
    return t.Diagnostic(
        range=rng,
        message=message,
        severity=t.DiagnosticSeverity(int(f.severity)),
        code=f.code,
        code_description=t.CodeDescription(href=href) if href else None,
        source=SOURCE,
        related_information=related or None,
        data={"kernel": f.kernel} if f.kernel else None,
    )


_MARK = {"proved": "✔", "refuted": "✗", "unproved": "?"}


def hover_markdown(h: HoverInfo) -> str:
    """Markdown of one HoverInfo: title, shape, tags, invariants, counterexample, extras."""
    parts = [f"**{h.title}**"]
    if h.shape:
        parts.append("shape: `[" + ", ".join(h.shape) + "]`")
    if h.tags:
        parts.append("tags:\n" + "\n".join(f"- `{tag}`" for tag in h.tags))
    if h.invariants:
        parts.append("invariants:\n" + "\n".join(
            f"- {_MARK.get(status, status)} {text}" for status, text in h.invariants))
    if h.counterexample is not None:
        parts.append("counterexample: `" + h.counterexample.describe() + "`")
    parts.extend(h.markdown)
    return "\n\n".join(parts)


def code_markdown(code: str, message: str | None = None, counterexample: str = "") -> str:
    """Explanation of a diagnostic code with its wrong/right example (from the registry);
    ``counterexample`` (one line, ``Counterexample.describe()``) follows the message, so that
    a position with several failing checks shows each check's own witness."""
    from kernelsight.analysis import codes

    c = codes.CODES.get(code)
    cex = f"\n\ncounterexample: `{counterexample}`" if counterexample else ""
    if c is None:
        return f"**{code}**" + (f": {message}" if message else "") + cex
    head = f"**{c.code} {c.title}** (`{c.name}`)"
    if message:
        head += f"\n\n{message}"
    head += cex
    return (f"{head}\n\n{c.why}\n\nWrong:\n```python\n{c.wrong}\n```\n\n"
            f"Right:\n```python\n{c.right}\n```\n\nSilence on one line: `# noqa: {c.code}`")
