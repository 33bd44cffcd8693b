"""Parsing of expression text (annotations, launch arguments) into ``ast`` trees whose
columns count characters, not UTF-8 bytes, so that ``Expr.span_of`` maps nodes back into the
file exactly."""
from __future__ import annotations

import ast

from .kernel import Expr
from .model import Span

# Deeply nested input (generated code, fuzzers) must not take the analysis down.
_PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError)


def parse_expr(text: str) -> ast.expr | None:
    """Parse ``text`` as one Python expression (eval mode); None when it does not parse.

    Text that spans several lines outside brackets (a launch argument such as ``a +\\n b``) is
    parsed inside parentheses and shifted back. Columns of the result are character columns.
    """
    tree = _parse(text)
    if tree is None and ("\n" in text or text[:1].isspace()):
        wrapped = _parse("(" + text + ")")
        if wrapped is not None:
            _shift_first_line(wrapped, -1)
            tree = wrapped
    if tree is not None:
        _to_char_columns(tree, text)
    return tree


def _parse(text: str) -> ast.expr | None:
    try:
        return ast.parse(text, mode="eval").body
    except _PARSE_ERRORS:
        return None


def _shift_first_line(tree: ast.AST, delta: int) -> None:
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) == 1:
            node.col_offset += delta
        if getattr(node, "end_lineno", None) == 1 and node.end_col_offset is not None:
            node.end_col_offset += delta


def _to_char_columns(tree: ast.AST, text: str) -> None:
    if text.isascii():
        return
    rows = text.split("\n")
    encoded: dict[int, bytes] = {}

    def conv(line: int, col: int) -> int:
        row = rows[line - 1] if 0 < line <= len(rows) else ""
        if row.isascii():
            return col
        b = encoded.get(line)
        if b is None:
            b = encoded[line] = row.encode("utf-8", errors="surrogatepass")
        return len(b[:max(col, 0)].decode("utf-8", errors="replace"))

    for node in ast.walk(tree):
        if getattr(node, "lineno", None) is not None:
            node.col_offset = conv(node.lineno, node.col_offset)
        if getattr(node, "end_lineno", None) is not None and node.end_col_offset is not None:
            node.end_col_offset = conv(node.end_lineno, node.end_col_offset)


def make_expr(text: str, span: Span, pieces: tuple = ()) -> Expr:
    """An ``Expr`` for ``text`` at ``span`` (``pieces`` as in ``Expr``), parsed if possible."""
    return Expr(text=text, tree=parse_expr(text), span=span, pieces=pieces)


def names_in(node: ast.AST) -> list[ast.Name]:
    """Every ``ast.Name`` under ``node`` that is not the callee of a call."""
    callees = {id(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)}
    return [n for n in ast.walk(node) if isinstance(n, ast.Name) and id(n) not in callees]
