"""What the front end knows about a file: its kernels, their parameters, annotations and
launch sites. Produced by ``frontend.parse_file``; consumed by the rules, the engine, the
server and the agent. Plain dataclasses: no tree-sitter objects escape the front end.

Annotation expressions are kept both as text and as Python ``ast.expr`` trees (the directive
grammar is a subset of Python expressions, with ``implies`` rewritten by the parser), with
0-based spans into the file.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from .model import Finding, Span


@dataclass
class Expr:
    """An expression written in an annotation or a launch site.

    Attributes:
        text: the source text, as written.
        tree: the parsed ``ast.expr`` (positions relative to ``text``), or None if unparsable.
        span: where ``text`` stands in the file.
    """

    text: str
    tree: ast.expr | None
    span: Span
    # Where each piece of ``text`` stands in the file, as (text offset, file line, file col)
    # triples sorted by offset; empty when ``text`` is a contiguous slice of the file starting
    # at ``span``. Annotations joined from continuation lines have one piece per line.
    pieces: tuple[tuple[int, int, int], ...] = field(default=(), repr=False, compare=False)

    def position(self, line: int, col: int) -> tuple[int, int]:
        """The 0-based file (line, col) of 1-based ``line`` / 0-based character ``col`` of
        ``tree`` (ast numbering; the front end stores character columns)."""
        rows = self.text.split("\n")
        offset = sum(len(r) + 1 for r in rows[:max(line - 1, 0)]) + col
        if not self.pieces:
            if line <= 1:
                return self.span.line, self.span.col + col
            return self.span.line + line - 1, col
        start, fline, fcol = self.pieces[0]
        for piece in self.pieces:
            if piece[0] <= offset:
                start, fline, fcol = piece
            else:
                break
        return fline, fcol + offset - start

    def span_of(self, node: ast.AST) -> Span:
        """The file Span of ``node``, a node of ``tree``."""
        l0, c0 = self.position(node.lineno, node.col_offset)
        end_line = getattr(node, "end_lineno", None) or node.lineno
        end_col = getattr(node, "end_col_offset", None)
        if end_col is None:
            end_col = node.col_offset
        l1, c1 = self.position(end_line, end_col)
        return Span(l0, c0, l1, c1)


@dataclass
class Dim:
    """One dimension of a declared tensor: ``name: SIZE``."""

    name: str
    size: Expr


@dataclass
class TensorDecl:
    """``#@ tensor NAME = PTR[d0: S0, ...] strides(T0, ...)``.

    ``strides`` is None when omitted (contiguous row-major: the last stride is 1, each other
    stride the product of the sizes after it).
    """

    name: str
    ptr: str
    dims: list[Dim]
    strides: list[Expr] | None
    span: Span


@dataclass
class GridDecl:
    """``#@ grid (E0[, E1[, E2]])``: at most 3 axes."""

    axes: list[Expr]
    span: Span


@dataclass
class TensorRef:
    """``NAME[idx, ...]`` inside ``computes``: each index an Expr; ``:`` is Expr(text=":")."""

    tensor: str
    indices: list[Expr]
    span: Span


@dataclass
class ComputesDecl:
    """``#@ computes OUT[...] from IN[...], ...``."""

    out: TensorRef
    inputs: list[TensorRef]
    span: Span


@dataclass
class Directive:
    """Any other directive: ``assume``, ``assert``, ``tag``, ``partners``, ``bench``.

    Attributes:
        kind: the directive word.
        exprs: parsed expressions (``assume``: each fact; ``assert``: one; ``tag``: [target,
            value] where target is ``VALUE.dim``; ``partners``: [lead, p1, p2, ...] as names).
        raw: the text after the directive word (continuations joined with a space).
        line: 0-based line of the directive's first line (the program point for ``assert``).
    """

    kind: str
    exprs: list[Expr]
    raw: str
    span: Span
    line: int


@dataclass
class Annotations:
    """All ``#@`` directives attached to one kernel."""

    tensors: dict[str, TensorDecl] = field(default_factory=dict)
    grid: GridDecl | None = None
    assumes: list[Directive] = field(default_factory=list)
    computes: list[ComputesDecl] = field(default_factory=list)
    asserts: list[Directive] = field(default_factory=list)
    tags: list[Directive] = field(default_factory=list)
    partners: list[Directive] = field(default_factory=list)
    bench: list[Directive] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.tensors or self.grid or self.assumes or self.computes or self.asserts
                    or self.tags or self.partners or self.bench)


@dataclass
class Param:
    """A kernel parameter. ``annotation`` is the annotation text (e.g. ``tl.constexpr``)."""

    name: str
    span: Span
    annotation: str | None = None
    default: Expr | None = None

    @property
    def is_constexpr(self) -> bool:
        return self.annotation is not None and self.annotation.split(".")[-1] == "constexpr"


@dataclass
class AutotuneConfig:
    """One ``triton.Config({...}, num_warps=..., num_stages=...)`` of ``@triton.autotune``."""

    kwargs: dict[str, Any]
    num_warps: int | None = None
    num_stages: int | None = None
    span: Span | None = None


@dataclass
class LaunchArg:
    """One argument at a launch site: positional (``name`` None) or keyword.

    ``source`` is what the front end recognised: e.g. ``("stride", "x", 0)`` for
    ``x.stride(0)``, ``("shape", "x", 1)`` for ``x.shape[1]`` / ``x.size(1)``, ``("numel",
    "x")``, ``("tensor", "x")`` for a tensor passed as a pointer, ``("int", 128)`` for a literal,
    or ``None`` when unrecognised.
    """

    expr: Expr
    name: str | None = None
    source: tuple | None = None


@dataclass
class LaunchSite:
    """``kernel[grid](args...)`` in the same file.

    Attributes:
        grid: the grid's axes as expressions when the grid is a tuple literal or a lambda
            returning one (lambda parameter ``META`` subscripts are rewritten to plain names),
            else None.
        args: positional then keyword arguments, in source order.
    """

    kernel: str
    grid: list[Expr] | None
    args: list[LaunchArg]
    span: Span
    function: str | None = None


@dataclass
class KernelInfo:
    """One ``@triton.jit`` function (a kernel or a helper called from kernels).

    Attributes:
        name: function name.
        span: the whole definition (decorators included).
        name_span: the function's name in its ``def``.
        params: parameters in order.
        decorators: decorator texts, outermost first (e.g. ``"triton.autotune(...)"``).
        autotune: configs of a stacked ``@triton.autotune`` (empty if none).
        autotune_keys: its ``key=[...]`` names.
        heuristics: ``@triton.heuristics({...})`` entries as name -> Expr.
        annotations: parsed ``#@`` directives (inside or directly above the function).
        source: the function's text exactly as in the file (from ``def`` or first decorator).
        tree: the function as ``ast.FunctionDef``, with line numbers shifted so that
            ``node.lineno - 1`` is the 0-based file line and ``col_offset`` are character
            columns in the file; None when the function has a syntax error.
        is_helper: True for a jit function that some kernel calls and that is never launched.
        has_syntax_error: tree-sitter found ERROR/MISSING nodes inside the definition.
        front_seconds: CPU seconds (of the analysing thread) the front end and the language
            rules spent on this function so far.
        budget_exhausted: why the function is not analysed although it parses (the front
            end and the rules ran past ``Config.kernel_budget_ms``; a KS911 says so), else
            None. The engine does not run on such a kernel.
    """

    name: str
    span: Span
    name_span: Span
    params: list[Param]
    decorators: list[str] = field(default_factory=list)
    autotune: list[AutotuneConfig] = field(default_factory=list)
    autotune_keys: list[str] = field(default_factory=list)
    heuristics: dict[str, Expr] = field(default_factory=dict)
    annotations: Annotations = field(default_factory=Annotations)
    source: str = ""
    tree: ast.FunctionDef | None = None
    is_helper: bool = False
    has_syntax_error: bool = False
    front_seconds: float = 0.0
    budget_exhausted: str | None = None

    def param(self, name: str) -> Param | None:
        for p in self.params:
            if p.name == name:
                return p
        return None


@dataclass
class ParsedFile:
    """The front end's view of one file.

    Attributes:
        kernels: every jit function, in file order (helpers included, ``is_helper`` set).
        launches: launch sites ``kernel[grid](...)`` found anywhere in the file.
        findings: front-end findings (``KS9xx`` annotation errors, syntax errors in kernels).
        imports: local alias -> dotted module or object, e.g. ``{"tl": "triton.language",
            "jit": "triton.jit"}``.
        lines: the file's lines (without line terminators).
    """

    path: str
    text: str
    kernels: list[KernelInfo] = field(default_factory=list)
    launches: list[LaunchSite] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    imports: dict[str, str] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)

    def kernel(self, name: str) -> KernelInfo | None:
        for k in self.kernels:
            if k.name == name:
                return k
        return None
