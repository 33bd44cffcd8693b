"""The ``#@`` annotation parser (grammar: ../shared/spec/annotations.md, user guide:
docs/annotations.md).

A directive is a comment starting with ``#@`` inside a jit function or in the block of comment
lines directly above its first decorator. It continues on the following lines that start with
``#@`` and are indented deeper (after the ``#@``) than its first line; continuation lines are
joined with one space, and every parsed expression remembers where each piece of its text
stands in the file (``Expr.pieces``), so errors and hovers point at exact columns.

Errors become findings on ``parsed.findings``: KS901 malformed (saying what was expected
where), KS902 unknown pointer, KS903 unknown tensor/dimension/value, KS904 grid with more than
3 axes, KS905 duplicate tensor, KS906 unknown directive, KS907 stray directive, KS910 kernel
with a syntax error. The parser never raises on user text.
"""
from __future__ import annotations

import ast
import keyword
import re
import textwrap
import time
from dataclasses import dataclass, field

from . import astnodes, codes
from .exprs import parse_expr
from .kernel import (Annotations, ComputesDecl, Dim, Directive, Expr, GridDecl, KernelInfo,
                     ParsedFile, TensorDecl, TensorRef)
from .model import Finding, Span

DIRECTIVES = ("tensor", "grid", "assume", "computes", "assert", "tag", "partners", "bench")

_IDENT = re.compile(r"[A-Za-z_]\w*")
_WORD = re.compile(r"\s*(?P<word>[A-Za-z_][\w.]*)")
_OPEN, _CLOSE = "([{", ")]}"


@dataclass
class _Comment:
    row: int
    col: int            # character column of '#'
    content: str        # text after '#@', trailing comment and whitespace removed
    end_col: int        # character column after the last character kept
    indent: int         # whitespace characters between '#@' and the first word
    standalone: bool    # nothing but whitespace before the '#'


@dataclass
class _Raw:
    """One directive with its continuation lines, before parsing."""

    word: str
    word_span: Span
    body: str
    pieces: list[tuple[int, int, int]]   # (offset in body, file row, file col)
    span: Span
    row: int
    end_of_word: tuple[int, int]
    kernel: KernelInfo | None = None


@dataclass
class _Ctx:
    parsed: ParsedFile
    kernel: KernelInfo | None
    findings: list[Finding] = field(default_factory=list)
    # Tensors whose declaration was rejected: later uses are not reported again (KS903).
    failed_tensors: set[str] = field(default_factory=set)

    def error(self, code: str, message: str, span: Span) -> None:
        info = codes.get(code)
        self.findings.append(Finding(code=code, message=message, span=span,
                                     severity=info.severity,
                                     kernel=self.kernel.name if self.kernel else None))


def attach(root_node, src, parsed: ParsedFile, *, budget_ms: float | None = None) -> None:
    """Parse every ``#@`` directive of the file into ``kernel.annotations``; append KS9xx
    findings (and KS910 for kernels with a syntax error) to ``parsed.findings``.

    Args:
        root_node: the tree-sitter module node.
        src: the file's ``frontend.SourceLines``.
        parsed: the file, kernels already found.
        budget_ms: per-kernel CPU budget of the front end (see ``frontend.parse_file``); the
            time spent here is added to ``KernelInfo.front_seconds``; None: not checked.
    """
    from .frontend import over_budget

    comments = _comments(root_node, src, getattr(parsed, "_ts_by_type", None))
    raws = _group(comments, src)
    owners = _owner_ranges(parsed, src)
    by_kernel: dict[int, list[_Raw]] = {}
    stray: list[_Raw] = []
    for raw in raws:
        owner = _owner(raw.row, owners)
        if owner is None:
            stray.append(raw)
        else:
            raw.kernel = owner
            by_kernel.setdefault(id(owner), []).append(raw)
    for raw in stray:
        if raw.word in DIRECTIVES:
            ctx = _Ctx(parsed, None)
            ctx.error("KS907", f"'#@ {raw.word}' is not attached to any @triton.jit function "
                      "(put it inside the function or on the lines directly above it)",
                      raw.span)
            parsed.findings.extend(ctx.findings)
    for kernel in parsed.kernels:
        if kernel.budget_exhausted is not None:
            continue  # not analysed: its directives are not read either (KS911 says so)
        ctx = _Ctx(parsed, kernel)
        t0 = time.thread_time()
        try:
            _parse_kernel(kernel, by_kernel.get(id(kernel), []), ctx)
        except Exception as exc:  # a parser bug must not take the file (or the server) down
            ctx.error("KS911", f"annotations of '{kernel.name}' not read: internal error "
                      f"{type(exc).__name__}: {exc}", kernel.name_span)
        if kernel.has_syntax_error:
            ctx.error("KS910", _syntax_message(kernel, src), kernel.name_span)
        parsed.findings.extend(ctx.findings)
        kernel.front_seconds += time.thread_time() - t0
        if budget_ms is not None:
            over_budget(kernel, budget_ms, parsed.findings, "front end")


# --- collection -------------------------------------------------------------------------------

def _comments(root_node, src, by_type: dict | None = None) -> list[_Comment]:
    """The file's ``#@`` comments in (row, col) order; ``by_type`` is
    ``frontend.nodes_by_type(root_node)`` when the caller has it."""
    from .frontend import nodes_by_type

    out: list[_Comment] = []
    for node in (by_type or nodes_by_type(root_node))["comment"]:
        text = node.text.decode("utf-8", errors="replace")
        if text.startswith("#@"):
            c = _comment(node, text, src)
            if c is not None:
                out.append(c)
    out.sort(key=lambda c: (c.row, c.col))
    return out


def _comment(node, text: str, src) -> _Comment | None:
    row = node.start_point[0]
    col = src.char_col(row, node.start_point[1])
    content = _strip_trailing_comment(text[2:]).rstrip()
    m = _WORD.match(content)
    if m and "." in m.group("word"):
        return None  # a commented-out decorator such as `#@triton.jit`, not a directive
    line = src.rows[row] if row < len(src.rows) else ""
    indent = len(content) - len(content.lstrip())
    return _Comment(row=row, col=col, content=content, end_col=col + 2 + len(content),
                    indent=indent, standalone=not line[:col].strip())


def _strip_trailing_comment(text: str) -> str:
    """Drop a trailing ``# ...`` (e.g. ``# noqa: KS901``) that is not inside a string."""
    quote = None
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#":
            return text[:i]
    return text


def _group(comments: list[_Comment], src) -> list[_Raw]:
    raws: list[_Raw] = []
    i = 0
    while i < len(comments):
        first = comments[i]
        group = [first]
        j = i + 1
        while j < len(comments):
            c = comments[j]
            if c.row != group[-1].row + 1 or not c.standalone or c.indent <= first.indent \
                    or not c.content.strip():
                break
            group.append(c)
            j += 1
        raws.append(_raw(group))
        i = j
    return raws


def _raw(group: list[_Comment]) -> _Raw:
    first = group[0]
    m = _WORD.match(first.content)
    base = first.col + 2
    if m:
        word = m.group("word")
        w0 = base + m.start("word")
        word_span = Span(first.row, w0, first.row, w0 + len(word))
        rest_start = m.end()
    else:
        word = ""
        word_span = Span(first.row, first.col, first.row, first.end_col)
        rest_start = len(first.content)
    rest = first.content[rest_start:]
    lead = len(rest) - len(rest.lstrip())
    body = rest.strip()
    pieces = [(0, first.row, base + rest_start + lead)]
    for c in group[1:]:
        text = c.content.strip()
        if body:
            body += " "
        pieces.append((len(body), c.row, c.col + 2 + c.indent))
        body += text
    last = group[-1]
    span = Span(first.row, first.col, last.row, last.end_col)
    return _Raw(word=word, word_span=word_span, body=body, pieces=pieces, span=span,
                row=first.row, end_of_word=(word_span.end_line, word_span.end_col))


def _owner_ranges(parsed: ParsedFile, src) -> list[tuple[int, int, KernelInfo]]:
    """(first row, last row, kernel): the definition plus the comment block above it."""
    out = []
    for k in parsed.kernels:
        top = k.span.line
        # tree-sitter leaves comments after a body's last statement outside the function;
        # comment lines indented deeper than the `def` still belong to it.
        hi = k.span.end_line
        r = hi + 1
        while r < len(src.rows):
            row = src.rows[r]
            stripped = row.lstrip()
            if not stripped:
                r += 1
                continue
            if stripped.startswith("#") and len(row) - len(stripped) > k.span.col:
                hi = r
                r += 1
                continue
            break
        out.append((_first_comment_row(src, top), hi, k))
    return out


def _first_comment_row(src, top: int) -> int:
    r = top - 1
    while 0 <= r < len(src.rows) and src.rows[r].lstrip().startswith("#"):
        r -= 1
    return r + 1


def _owner(row: int, owners) -> KernelInfo | None:
    best = None
    for lo, hi, k in owners:
        if lo <= row <= hi and (best is None or (hi - lo) < (best[1] - best[0])):
            best = (lo, hi, k)
    return best[2] if best else None


def _syntax_message(kernel: KernelInfo, src) -> str:
    node = getattr(kernel, "_ts_node", None)
    where = _first_error(node) if node is not None else None
    if where is not None:
        row, col, missing = where
        c = src.char_col(row, col) + 1
        what = f"missing '{missing}'" if missing else "invalid syntax"
        return f"kernel '{kernel.name}' not analysed: {what} at line {row + 1}, column {c}"
    try:
        ast.parse(textwrap.dedent(kernel.source))
    except SyntaxError as exc:
        # Python's message numbers lines of the kernel snippet ("... on line 4"): make them
        # file lines like the rest of the message.
        msg = re.sub(r"\bline (\d+)", lambda m: f"line {kernel.span.line + int(m.group(1))}",
                     exc.msg)
        line = kernel.span.line + (exc.lineno or 1)
        return f"kernel '{kernel.name}' not analysed: {msg} at line {line}"
    except (ValueError, RecursionError, MemoryError) as exc:
        return f"kernel '{kernel.name}' not analysed: {type(exc).__name__}"
    return f"kernel '{kernel.name}' not analysed: syntax error"


def _first_error(node):
    stack = [node]
    best = None
    while stack:
        n = stack.pop()
        if n.type == "ERROR" or n.is_missing:
            key = n.start_point
            if best is None or key < best[0]:
                best = (key, n.type if n.is_missing else None)
            continue
        if n.has_error:
            stack.extend(n.children)
    if best is None:
        return None
    (row, col), missing = best
    return row, col, missing


# --- per kernel -------------------------------------------------------------------------------

def _parse_kernel(kernel: KernelInfo, raws: list[_Raw], ctx: _Ctx) -> None:
    ann = Annotations()
    kernel.annotations = ann
    parsers = {"tensor": _tensor, "grid": _grid, "assume": _assume, "computes": _computes,
               "assert": _assert, "tag": _tag, "partners": _partners, "bench": _bench}
    for raw in raws:
        if not raw.word:
            ctx.error("KS901", "expected a directive word after '#@' (one of "
                      + ", ".join(DIRECTIVES) + ")", raw.span)
            continue
        parser = parsers.get(raw.word)
        if parser is None:
            close = _close_match(raw.word)
            hint = f"; did you mean '{close}'?" if close else ""
            ctx.error("KS906", f"unknown directive '{raw.word}' (expected one of "
                      + ", ".join(DIRECTIVES) + ")" + hint, raw.word_span)
            _remember_failed_tensor(raw, ctx)
            continue
        before = len(ctx.findings)
        try:
            parser(raw, ann, ctx)
        except RecursionError:
            ctx.error("KS901", f"'{raw.word}' directive nested too deeply", raw.span)
        if raw.word == "tensor" and len(ctx.findings) > before:
            _remember_failed_tensor(raw, ctx)
    _validate(kernel, ann, ctx)


def _remember_failed_tensor(raw: _Raw, ctx: _Ctx) -> None:
    m = re.match(r"\s*([A-Za-z_]\w*)\s*=(?!=)", raw.body)
    if m:
        ctx.failed_tensors.add(m.group(1))


def _close_match(word: str) -> str | None:
    import difflib

    m = difflib.get_close_matches(word, DIRECTIVES, n=1, cutoff=0.6)
    return m[0] if m else None


class _Body:
    """Helpers over one directive's body text and its file positions."""

    def __init__(self, raw: _Raw):
        self.raw = raw
        self.text = raw.body

    def pos(self, offset: int) -> tuple[int, int]:
        start, row, col = self.raw.pieces[0]
        for piece in self.raw.pieces:
            if piece[0] <= offset:
                start, row, col = piece
            else:
                break
        return row, col + offset - start

    def span(self, s: int, e: int) -> Span:
        if not self.text and s == e == 0:
            row, col = self.raw.end_of_word
            return Span(row, col, row, col)
        return Span(*self.pos(s), *self.pos(max(e, s)))

    def end_span(self) -> Span:
        """An empty span where the body ends (for 'expected X' at the end)."""
        if not self.text:
            row, col = self.raw.end_of_word
            return Span(row, col, row, col)
        row, col = self.pos(len(self.text))
        return Span(row, col, row, col)

    def pieces(self, s: int, e: int) -> tuple[tuple[int, int, int], ...]:
        out = []
        row, col = self.pos(s)
        out.append((0, row, col))
        for off, r, c in self.raw.pieces:
            if s < off < e:
                out.append((off - s, r, c))
        return tuple(out)

    def strip(self, s: int, e: int) -> tuple[int, int]:
        while s < e and self.text[s].isspace():
            s += 1
        while e > s and self.text[e - 1].isspace():
            e -= 1
        return s, e

    def expr(self, s: int, e: int, ctx: _Ctx, what: str) -> Expr | None:
        """Parse text[s:e] as an expression; KS901 (naming ``what``) when it does not."""
        s, e = self.strip(s, e)
        if s == e:
            ctx.error("KS901", f"expected {what}", self.span(s, e) if self.text
                      else self.end_span())
            return None
        text = self.text[s:e]
        tree = parse_expr(text)
        if tree is None:
            ctx.error("KS901", f"expected {what}, got '{text}' (not a valid expression)",
                      self.span(s, e))
            return None
        return Expr(text=text, tree=tree, span=self.span(s, e), pieces=self.pieces(s, e))


def _split_top(text: str, s: int, e: int, sep: str = ",") -> list[tuple[int, int]]:
    """Split text[s:e] at ``sep`` outside brackets and strings; returns (start, end) pairs."""
    parts = []
    depth = 0
    quote = None
    start = s
    for i in range(s, e):
        ch = text[i]
        if quote:
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth = max(depth - 1, 0)
        elif ch == sep and depth == 0:
            parts.append((start, i))
            start = i + 1
    parts.append((start, e))
    return parts


def _find_word(text: str, word: str, s: int, e: int) -> list[int]:
    """Offsets of ``word`` (a whole word) at bracket depth 0 in text[s:e]."""
    out = []
    depth = 0
    quote = None
    i = s
    while i < e:
        ch = text[i]
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth = max(depth - 1, 0)
        elif depth == 0 and text.startswith(word, i) \
                and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")) \
                and (i + len(word) >= len(text)
                     or not (text[i + len(word)].isalnum() or text[i + len(word)] == "_")):
            out.append(i)
            i += len(word)
            continue
        i += 1
    return out


def _match_bracket(text: str, i: int) -> int | None:
    """Index of the bracket closing the one at ``i``, or None."""
    depth = 0
    quote = None
    for j in range(i, len(text)):
        ch = text[j]
        if quote:
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
            if depth == 0:
                return j
    return None


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i].isspace():
        i += 1
    return i


# --- tensor -----------------------------------------------------------------------------------

def _tensor(raw: _Raw, ann: Annotations, ctx: _Ctx) -> None:
    b = _Body(raw)
    t = b.text
    i = _skip_ws(t, 0)
    m = _IDENT.match(t, i)
    if not m:
        ctx.error("KS901", "expected a tensor name after 'tensor' "
                  "(tensor NAME = PTR[dim: SIZE, ...])", _at(b, i))
        return
    name, name_span = m.group(), b.span(m.start(), m.end())
    i = _skip_ws(t, m.end())
    if not t.startswith("=", i) or t.startswith("==", i):
        ctx.error("KS901", f"expected '=' after tensor name '{name}'", _at(b, i))
        return
    i = _skip_ws(t, i + 1)
    m = _IDENT.match(t, i)
    if not m:
        ctx.error("KS901", f"expected the pointer argument after '{name} ='", _at(b, i))
        return
    ptr, ptr_span = m.group(), b.span(m.start(), m.end())
    i = _skip_ws(t, m.end())
    if not t.startswith("[", i):
        ctx.error("KS901", f"expected '[' after pointer '{ptr}' (PTR[dim: SIZE, ...])",
                  _at(b, i))
        return
    close = _match_bracket(t, i)
    if close is None:
        ctx.error("KS901", "unclosed '[' in tensor declaration", b.span(i, i + 1))
        return
    dims: list[Dim] = []
    seen: dict[str, Span] = {}
    parts = _split_top(t, i + 1, close)
    if len(parts) == 1 and not t[i + 1:close].strip():
        ctx.error("KS901", "expected at least one dimension 'dim: SIZE' inside '[...]'",
                  b.span(i, close + 1))
        return
    for s, e in parts:
        s, e = b.strip(s, e)
        if s == e:
            ctx.error("KS901", "expected a dimension 'dim: SIZE' between commas",
                      b.span(s, e))
            return
        dm = _IDENT.match(t, s)
        colon = _skip_ws(t, dm.end()) if dm else s
        if not dm or colon >= e or t[colon] != ":":
            got = t[s:e]
            where = b.span(dm.end(), dm.end()) if dm else b.span(s, e)
            ctx.error("KS901", f"expected 'dim: SIZE' (e.g. 'm: M'), got '{got}'"
                      + (f": missing ':' after dimension name '{dm.group()}'" if dm else ""),
                      where)
            return
        dname = dm.group()
        size = b.expr(colon + 1, e, ctx, f"a size expression after '{dname}:'")
        if size is None:
            return
        if dname in seen:
            ctx.error("KS901", f"dimension '{dname}' appears twice in tensor '{name}'",
                      b.span(dm.start(), dm.end()))
            return
        seen[dname] = b.span(dm.start(), dm.end())
        dims.append(Dim(dname, size))
    i = _skip_ws(t, close + 1)
    strides = None
    if i < len(t):
        sm = re.compile(r"strides\b").match(t, i)
        if not sm:
            ctx.error("KS901", f"expected 'strides(...)' or the end of the directive, got "
                      f"'{t[i:]}'", b.span(i, len(t)))
            return
        j = _skip_ws(t, sm.end())
        if not t.startswith("(", j):
            ctx.error("KS901", "expected '(' after 'strides'", _at(b, j))
            return
        sclose = _match_bracket(t, j)
        if sclose is None:
            ctx.error("KS901", "unclosed '(' after 'strides'", b.span(j, j + 1))
            return
        strides = []
        for s, e in _split_top(t, j + 1, sclose):
            st = b.expr(s, e, ctx, "a stride expression")
            if st is None:
                return
            strides.append(st)
        k = _skip_ws(t, sclose + 1)
        if k < len(t):
            ctx.error("KS901", f"unexpected text after 'strides(...)': '{t[k:]}'",
                      b.span(k, len(t)))
            return
        if len(strides) != len(dims):
            ctx.error("KS901", f"strides(...) gives {len(strides)} stride(s) for "
                      f"{len(dims)} dimension(s) of tensor '{name}'", b.span(i, sclose + 1))
            return
    kernel = ctx.kernel
    if kernel is not None and kernel.param(ptr) is None:
        params = ", ".join(p.name for p in kernel.params) or "none"
        ctx.error("KS902", f"'{ptr}' is not a parameter of kernel '{kernel.name}' "
                  f"(parameters: {params})", ptr_span)
        return
    if name in ann.tensors:
        prev = ann.tensors[name].span
        ctx.error("KS905", f"tensor '{name}' is already declared at line {prev.line + 1}",
                  name_span)
        return
    decl = TensorDecl(name=name, ptr=ptr, dims=dims, strides=strides, span=raw.span)
    ann.tensors[name] = decl


def _at(b: _Body, i: int) -> Span:
    """The span of the unexpected token at offset i (or an empty span at the end)."""
    t = b.text
    if i >= len(t):
        return b.end_span()
    m = re.compile(r"\w+|\S").match(t, i)
    return b.span(i, m.end() if m else i + 1)


# --- grid ---------------------------------------------------------------------------------

def _grid(raw: _Raw, ann: Annotations, ctx: _Ctx) -> None:
    b = _Body(raw)
    t = b.text
    s, e = b.strip(0, len(t))
    if s == e:
        ctx.error("KS901", "expected the grid's axes, e.g. 'grid (cdiv(N, BLOCK),)'",
                  b.end_span())
        return
    if t[s] == "(" and _match_bracket(t, s) == e - 1:
        s, e = s + 1, e - 1
    parts = _split_top(t, s, e)
    if len(parts) > 1 and not t[parts[-1][0]:parts[-1][1]].strip():
        parts = parts[:-1]  # trailing comma of a 1-tuple
    if len(parts) == 1 and not t[parts[0][0]:parts[0][1]].strip():
        ctx.error("KS901", "expected at least one grid axis inside '()'", raw.span)
        return
    axes = []
    for ps, pe in parts:
        ax = b.expr(ps, pe, ctx, "a grid axis expression")
        if ax is None:
            return
        axes.append(ax)
    if len(axes) > 3:
        extra = Span(axes[3].span.line, axes[3].span.col, axes[-1].span.end_line,
                     axes[-1].span.end_col)
        ctx.error("KS904", f"grid has {len(axes)} axes; a Triton grid has at most 3 "
                  "(fold the extra axes into one, e.g. 'A * B')", extra)
        return
    if ann.grid is not None:
        ctx.error("KS901", f"grid is already declared at line {ann.grid.span.line + 1}",
                  raw.word_span)
        return
    ann.grid = GridDecl(axes=axes, span=raw.span)


# --- assume / assert ----------------------------------------------------------------------

def _fact(b: _Body, s: int, e: int, ctx: _Ctx, what: str) -> Expr | None:
    """One expression, where top-level ``A implies B`` becomes ``implies(A, B)``
    (right-associative)."""
    s, e = b.strip(s, e)
    hits = _find_word(b.text, "implies", s, e)
    if not hits:
        return b.expr(s, e, ctx, what)
    cut = hits[0]
    left = b.expr(s, cut, ctx, "a condition before 'implies'")
    if left is None:
        return None
    right = _fact(b, cut + len("implies"), e, ctx, "a consequence after 'implies'")
    if right is None:
        return None
    # Trees of both sides are relative to their own text; move them into this fact's text.
    _shift(left.tree, b.strip(s, cut)[0] - s)
    _shift(right.tree, b.strip(cut + len("implies"), e)[0] - s)
    text = b.text[s:e]
    call = ast.Call(func=ast.Name(id="implies", ctx=ast.Load()), args=[left.tree, right.tree],
                    keywords=[])
    call.lineno = call.end_lineno = 1
    call.col_offset, call.end_col_offset = 0, len(text)
    call.func.lineno = call.func.end_lineno = 1
    call.func.col_offset = cut - s
    call.func.end_col_offset = cut - s + len("implies")
    return Expr(text=text, tree=call, span=b.span(s, e), pieces=b.pieces(s, e))


def _shift(tree: ast.AST, delta: int) -> None:
    if delta:
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) == 1:
                node.col_offset += delta
            if getattr(node, "end_lineno", None) == 1 and node.end_col_offset is not None:
                node.end_col_offset += delta


def _assume(raw: _Raw, ann: Annotations, ctx: _Ctx) -> None:
    b = _Body(raw)
    if not b.text.strip():
        ctx.error("KS901", "expected at least one fact after 'assume', e.g. "
                  "'assume 1 <= n_cols <= BLOCK'", b.end_span())
        return
    facts = []
    for s, e in _split_top(b.text, 0, len(b.text)):
        f = _fact(b, s, e, ctx, "a fact (a boolean expression) between commas")
        if f is None:
            return
        facts.append(f)
    ann.assumes.append(Directive("assume", facts, raw.body, raw.span, raw.row))


def _assert(raw: _Raw, ann: Annotations, ctx: _Ctx) -> None:
    b = _Body(raw)
    if not b.text.strip():
        ctx.error("KS901", "expected a condition after 'assert', e.g. 'assert a.k == b.k'",
                  b.end_span())
        return
    f = _fact(b, 0, len(b.text), ctx, "a condition")
    if f is None:
        return
    ann.asserts.append(Directive("assert", [f], raw.body, raw.span, raw.row))


# --- computes ---------------------------------------------------------------------------------

def _computes(raw: _Raw, ann: Annotations, ctx: _Ctx) -> None:
    b = _Body(raw)
    t = b.text
    hits = _find_word(t, "from", 0, len(t))
    if not hits:
        ctx.error("KS901", "expected 'OUT[...] from IN[...], ...': missing 'from'",
                  b.end_span() if not t.strip() else b.span(0, len(t)))
        return
    out = _tensor_ref(b, 0, hits[0], ctx, "the output 'OUT[d, ...]' before 'from'")
    if out is None:
        return
    inputs = []
    start = hits[0] + len("from")
    if not t[start:].strip():
        ctx.error("KS901", "expected at least one input 'IN[...]' after 'from'",
                  b.end_span())
        return
    for s, e in _split_top(t, start, len(t)):
        ref = _tensor_ref(b, s, e, ctx, "an input 'IN[...]'")
        if ref is None:
            return
        inputs.append(ref)
    ann.computes.append(ComputesDecl(out=out, inputs=inputs, span=raw.span))


def _tensor_ref(b: _Body, s: int, e: int, ctx: _Ctx, what: str) -> TensorRef | None:
    t = b.text
    s, e = b.strip(s, e)
    m = _IDENT.match(t, s)
    if s == e or not m:
        ctx.error("KS901", f"expected {what}", b.span(s, e) if s < e else b.end_span())
        return None
    i = _skip_ws(t, m.end())
    if i >= e or t[i] != "[":
        ctx.error("KS901", f"expected '[' after tensor name '{m.group()}' in {what}",
                  _at(b, i) if i < e else b.span(m.start(), m.end()))
        return None
    close = _match_bracket(t, i)
    if close is None or close >= e:
        ctx.error("KS901", "unclosed '['", b.span(i, i + 1))
        return None
    if _skip_ws(t, close + 1) < e:
        k = _skip_ws(t, close + 1)
        ctx.error("KS901", f"unexpected text after '{t[s:close + 1]}': '{t[k:e]}' "
                  "(separate tensors with ',')", b.span(k, e))
        return None
    indices = []
    for ps, pe in _split_top(t, i + 1, close):
        idx = _index(b, ps, pe, ctx)
        if idx is None:
            return None
        indices.append(idx)
    return TensorRef(tensor=m.group(), indices=indices, span=b.span(s, close + 1))


def _index(b: _Body, s: int, e: int, ctx: _Ctx) -> Expr | None:
    """An index of a tensor reference: an expression, ``:`` or ``lo:hi``."""
    s, e = b.strip(s, e)
    text = b.text[s:e]
    if not text:
        ctx.error("KS901", "expected an index (an expression, ':' or 'lo:hi')", b.span(s, e))
        return None
    if ":" not in text or _split_top(text, 0, len(text), ":") == [(0, len(text))]:
        return b.expr(s, e, ctx, "an index expression")
    tree = parse_expr("_[" + text + "]")
    if not isinstance(tree, ast.Subscript) or not isinstance(tree.slice, ast.Slice):
        ctx.error("KS901", f"expected an index (an expression, ':' or 'lo:hi'), got '{text}'",
                  b.span(s, e))
        return None
    sl = tree.slice
    _shift(sl, -2)
    return Expr(text=text, tree=sl, span=b.span(s, e), pieces=b.pieces(s, e))


# --- tag / partners / bench -------------------------------------------------------------------

def _tag(raw: _Raw, ann: Annotations, ctx: _Ctx) -> None:
    b = _Body(raw)
    t = b.text
    eq = _single_equals(t)
    if eq is None:
        ctx.error("KS901", "expected 'VALUE.dim = EXPR' after 'tag'",
                  b.span(0, len(t)) if t else b.end_span())
        return
    s, e = b.strip(0, eq)
    m = re.fullmatch(r"([A-Za-z_]\w*)\s*\.\s*([A-Za-z_]\w*)", t[s:e])
    if not m:
        ctx.error("KS901", f"expected 'VALUE.dim' before '=', got '{t[s:e]}'",
                  b.span(s, e) if s < e else _at(b, eq))
        return
    target = b.expr(s, e, ctx, "'VALUE.dim'")
    value = b.expr(eq + 1, len(t), ctx, "an expression after '='")
    if target is None or value is None:
        return
    ann.tags.append(Directive("tag", [target, value], raw.body, raw.span, raw.row))


def _single_equals(t: str) -> int | None:
    depth = 0
    for i, ch in enumerate(t):
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
        elif ch == "=" and depth == 0:
            prev = t[i - 1] if i else ""
            nxt = t[i + 1] if i + 1 < len(t) else ""
            if prev not in "=<>!" and nxt != "=":
                return i
    return None


def _partners(raw: _Raw, ann: Annotations, ctx: _Ctx) -> None:
    b = _Body(raw)
    t = b.text
    m = _IDENT.match(t, 0)
    colon = _skip_ws(t, m.end()) if m else 0
    if not m or colon >= len(t) or t[colon] != ":":
        ctx.error("KS901", "expected 'LEAD: PARTNER, ...' after 'partners'",
                  _at(b, m.end() if m else 0) if t else b.end_span())
        return
    if keyword.iskeyword(m.group()):
        # a keyword matches the identifier pattern but is no variable (and ast rejects it)
        ctx.error("KS901", f"expected a kernel variable before ':', got the keyword "
                  f"'{m.group()}'", b.span(m.start(), m.end()))
        return
    exprs = [Expr(m.group(), ast.parse(m.group(), mode="eval").body, b.span(0, m.end()))]
    parts = _split_top(t, colon + 1, len(t))
    for s, e in parts:
        s, e = b.strip(s, e)
        if not _IDENT.fullmatch(t[s:e] or "-"):
            ctx.error("KS901", "expected a partner name (a kernel variable) "
                      + (f", got '{t[s:e]}'" if s < e else "after ':'"),
                      b.span(s, e) if s < e else b.end_span())
            return
        exprs.append(b.expr(s, e, ctx, "a partner name"))
    ann.partners.append(Directive("partners", exprs, raw.body, raw.span, raw.row))


def _bench(raw: _Raw, ann: Annotations, ctx: _Ctx) -> None:
    # The bench grammar belongs to the agent (it reads ``raw``); a parseable body is kept.
    b = _Body(raw)
    exprs = []
    s, e = b.strip(0, len(b.text))
    if s < e:
        tree = parse_expr(b.text[s:e])
        if tree is not None:
            exprs.append(Expr(b.text[s:e], tree, b.span(s, e), b.pieces(s, e)))
    ann.bench.append(Directive("bench", exprs, raw.body, raw.span, raw.row))


# --- names --------------------------------------------------------------------------------------

def kernel_locals(kernel: KernelInfo) -> set[str]:
    """Names a kernel assigns (assignments, augmented assignments, loop targets)."""
    out: set[str] = set()
    if kernel.tree is None:
        return out
    for node in astnodes.nodes(kernel.tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
    return out


def _validate(kernel: KernelInfo, ann: Annotations, ctx: _Ctx) -> None:
    """KS903: unknown tensors, dimensions and values in assert/computes/tag/partners."""
    dims: set[str] = {d.name for t in ann.tensors.values() for d in t.dims}
    for d in ann.tags:
        target = d.exprs[0].tree
        if isinstance(target, ast.Attribute):
            dims.add(target.attr)
    free: set[str] = set()
    for t in ann.tensors.values():
        for d in t.dims:
            free |= _names(d.size)
        for st in t.strides or []:
            free |= _names(st)
    if ann.grid:
        for ax in ann.grid.axes:
            free |= _names(ax)
    for d in ann.assumes:
        for e in d.exprs:
            free |= _names(e)
    values = {p.name for p in kernel.params} | kernel_locals(kernel) | free
    check_values = kernel.tree is not None
    tensors = ann.tensors
    failed = ctx.failed_tensors

    def unknown_tensor(expr: Expr, node: ast.Name) -> None:
        if node.id in failed:
            return
        known = ", ".join(tensors) or "none declared"
        ctx.error("KS903", f"unknown tensor '{node.id}' (declared tensors: {known})",
                  expr.span_of(node))

    def check_tensor_reads(expr: Expr) -> None:
        for node in ast.walk(expr.tree):
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
                    and node.value.id not in tensors and node.value.id not in values:
                unknown_tensor(expr, node.value)

    for d in ann.assumes:
        for e in d.exprs:
            check_tensor_reads(e)
    for c in ann.computes:
        for ref in [c.out, *c.inputs]:
            decl = tensors.get(ref.tensor)
            if decl is None and ref.tensor in failed:
                continue
            if decl is None:
                known = ", ".join(tensors) or "none declared"
                ctx.error("KS903", f"unknown tensor '{ref.tensor}' (declared tensors: {known})",
                          Span(ref.span.line, ref.span.col, ref.span.line,
                               ref.span.col + len(ref.tensor)))
                continue
            if len(ref.indices) != len(decl.dims):
                ctx.error("KS901", f"tensor '{ref.tensor}' has {len(decl.dims)} dimension(s); "
                          f"{len(ref.indices)} index(es) given", ref.span)
            for idx in ref.indices:
                if idx.tree is not None:
                    check_tensor_reads(idx)
    for d in ann.asserts:
        for e in d.exprs:
            check_tensor_reads(e)
            _check_value_names(e, values, dims, tensors, ctx, check_values)
    for d in ann.tags:
        target, value = d.exprs
        if check_values:
            node = target.tree.value if isinstance(target.tree, ast.Attribute) else None
            if isinstance(node, ast.Name) and node.id not in values:
                ctx.error("KS903", f"unknown value '{node.id}': not a parameter or a variable "
                          f"of kernel '{kernel.name}'", target.span_of(node))
        _check_value_names(value, values, dims, tensors, ctx, check_values)
    for d in ann.partners:
        if not check_values:
            continue
        for e in d.exprs:
            if e is not None and isinstance(e.tree, ast.Name) and e.tree.id not in values:
                ctx.error("KS903", f"unknown value '{e.tree.id}': not a parameter or a variable"
                          f" of kernel '{kernel.name}'", e.span)
        d.exprs = [e for e in d.exprs if e is not None]


def _check_value_names(expr: Expr, values: set[str], dims: set[str], tensors, ctx: _Ctx,
                       check_values: bool) -> None:
    if expr.tree is None:
        return
    callees = {id(n.func) for n in ast.walk(expr.tree) if isinstance(n, ast.Call)}
    for node in ast.walk(expr.tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id in tensors or id(node) in callees:
                continue
            if node.attr not in dims:
                sp = expr.span_of(node)
                known = ", ".join(sorted(dims)) or "none declared"
                ctx.error("KS903", f"unknown dimension '{node.attr}' in "
                          f"'{node.value.id}.{node.attr}' (dimensions: {known})",
                          Span(sp.end_line, sp.end_col - len(node.attr), sp.end_line,
                               sp.end_col))
        elif isinstance(node, ast.Name) and check_values and id(node) not in callees:
            if node.id not in values and node.id not in tensors and node.id != "implies":
                ctx.error("KS903", f"unknown value '{node.id}': not a parameter, a variable "
                          f"of kernel '{ctx.kernel.name}' or a declared size",
                          expr.span_of(node))


def _names(expr: Expr) -> set[str]:
    if expr.tree is None:
        return set()
    return {n.id for n in ast.walk(expr.tree) if isinstance(n, ast.Name)}


__all__ = ["attach", "DIRECTIVES", "kernel_locals"]
