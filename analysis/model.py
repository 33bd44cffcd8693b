"""Plain dataclasses that cross layer boundaries (analysis -> CLI, server, agent).

Positions are 0-based lines and 0-based columns counted in Python ``str`` characters (code
points) of the source text; front ends convert (the CLI prints 1-based, the server converts to
the client's position encoding). Nothing here imports tree-sitter, z3 or any GPU stack.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import IntEnum
from typing import Any


class Severity(IntEnum):
    """Severity of a finding; values match LSP's DiagnosticSeverity so the server maps 1:1."""

    ERROR = 1
    WARNING = 2
    INFO = 3
    HINT = 4

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> "Severity":
        """Parse ``error|warning|info|information|hint`` (case-insensitive).

        Raises:
            ValueError: for any other word, naming the accepted ones.
        """
        key = text.strip().lower()
        if key == "information":
            key = "info"
        for sev in cls:
            if sev.label == key:
                return sev
        raise ValueError(f"unknown severity {text!r}; expected error, warning, info or hint")


@dataclass(frozen=True, order=True)
class Span:
    """A half-open source range ``[start, end)``; 0-based line and character columns."""

    line: int
    col: int
    end_line: int
    end_col: int

    def contains(self, line: int, col: int) -> bool:
        """True when the 0-based position (line, col) lies inside this span (end inclusive)."""
        if (line, col) < (self.line, self.col):
            return False
        return (line, col) <= (self.end_line, self.end_col)


@dataclass(frozen=True)
class Related:
    """One step of a counterexample's chain: a source location and what happened there."""

    span: Span
    message: str


@dataclass
class Counterexample:
    """A concrete witness that a check fails.

    Attributes:
        program_id: the program ids ``(pid0, pid1, pid2)`` of the failing program (missing axes
            are left out), or ``None`` when the failure does not depend on the program.
        element: the tile element, e.g. ``{"i": 5, "j": 9}`` (tile index variables by name).
        loop: loop iteration per loop variable, e.g. ``{"k_iter": 1}``.
        sizes: the launch sizes and constexprs used, e.g. ``{"M": 256, "BLOCK_M": 64}``.
        values: the offsets, tags and other values involved, by name, e.g. ``{"a.k": 41}``.
        method: how it was found: ``"smt"`` (solver model) or ``"enumeration"`` (concrete
            sizes enumerated, e.g. autotune configs x sizes).
        notes: extra human-readable lines (already formatted).
    """

    program_id: tuple[int, ...] | None = None
    element: dict[str, int] = field(default_factory=dict)
    loop: dict[str, int] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)
    method: str = "smt"
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        """One line: ``program_id=(3, 0)  element i=5 j=9  loop k=1  sizes M=20 N=24``."""
        parts: list[str] = []
        if self.program_id is not None:
            parts.append(f"program_id={tuple(self.program_id)}")
        if self.element:
            parts.append("element " + " ".join(f"{k}={v}" for k, v in self.element.items()))
        shown_vars = set()
        if self.loop:
            items = []
            for k, v in self.loop.items():
                var = k[:-5] if k.endswith("_iter") else None
                if var and var in self.values:  # `off=64 (iteration 1)`, not `off_iter=1`
                    items.append(f"{var}={self.values[var]} (iteration {v})")
                    shown_vars.add(var)
                else:
                    items.append(f"{k}={v}")
            parts.append("loop " + " ".join(items))
        if self.sizes:
            parts.append("sizes " + " ".join(f"{k}={v}" for k, v in self.sizes.items()))
        values = {k: v for k, v in self.values.items() if k not in shown_vars}
        # a second program or lane (KS302, KS306) reads like the first: `other program_id=(1,)
        # other element i=0`, each its own part; plain values share one `values` part
        plain = {k: v for k, v in values.items() if not isinstance(v, (list, tuple, dict))}
        if plain:
            parts.append("values " + " ".join(f"{k}={v}" for k, v in plain.items()))
        for k, v in values.items():
            if isinstance(v, dict):
                parts.append(f"{k} " + " ".join(f"{a}={b}" for a, b in v.items()))
            elif isinstance(v, (list, tuple)):
                parts.append(f"{k}={tuple(v)}")
        if self.method != "smt":
            parts.append(f"(found by {self.method})")
        return "  ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if d["program_id"] is not None:
            d["program_id"] = list(d["program_id"])
        return d


@dataclass(frozen=True)
class TextEdit:
    """Replace ``span`` of the analysed source by ``new_text``."""

    span: Span
    new_text: str


@dataclass(frozen=True)
class Fix:
    """A mechanical quick fix offered for a finding; applying ``edits`` must remove it."""

    title: str
    edits: tuple[TextEdit, ...]


@dataclass
class Finding:
    """One diagnostic: a stable code, a located message and, where a check failed, a witness.

    ``related`` is the chain of lines that produced the bad value, in program order.
    """

    code: str
    message: str
    span: Span
    severity: Severity = Severity.WARNING
    kernel: str | None = None
    counterexample: Counterexample | None = None
    related: list[Related] = field(default_factory=list)
    fixes: list[Fix] = field(default_factory=list)

    def sort_key(self) -> tuple:
        return (self.span.line, self.span.col, self.code, self.message)


@dataclass
class InvariantTally:
    """How many invariant obligations of a kernel were proved, refuted or left open."""

    proved: int = 0
    refuted: int = 0
    unproved: int = 0

    def add(self, other: "InvariantTally") -> None:
        self.proved += other.proved
        self.refuted += other.refuted
        self.unproved += other.unproved


@dataclass
class KernelSummary:
    """Per-kernel result of an analysis run (what ``--summary`` and code lenses show).

    Attributes:
        unknowns: constructs the interpreter did not model (each made a value "unknown"; none
            of them can cause a finding). ``unknown_kinds`` names them, for coverage reports.
        status: ``"analysed"``, ``"skipped"`` (fast tier only), ``"syntax-error"`` or
            ``"budget"`` (time or size budget exhausted: reported as information).
        seconds: wall time spent on this kernel, in seconds.
    """

    name: str
    span: Span
    tally: InvariantTally = field(default_factory=InvariantTally)
    unknowns: int = 0
    unknown_kinds: dict[str, int] = field(default_factory=dict)
    status: str = "analysed"
    seconds: float = 0.0


@dataclass
class FileReport:
    """Everything the analysis says about one source file."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    kernels: list[KernelSummary] = field(default_factory=list)
    seconds: float = 0.0


@dataclass
class HoverInfo:
    """What hover shows for a source position: a value's shape, tags and invariants.

    Attributes:
        span: the expression hovered.
        title: e.g. ``"a: tile[BLOCK_M, BLOCK_K] (loaded from A)"``.
        shape: symbolic shape, e.g. ``("BLOCK_M", "BLOCK_K")``; empty for scalars.
        tags: readable formulas, e.g. ``["a[i, k] <- A[m = pid_m*BLOCK_M + i, k = kk*BLOCK_K + k]"]``.
        invariants: ``(status, text)`` pairs, status in ``proved|refuted|unproved``.
        counterexample: the witness of the first refuted invariant, if any.
        markdown: extra markdown paragraphs (docs, explanations).
    """

    span: Span
    title: str
    shape: tuple[str, ...] = ()
    tags: list[str] = field(default_factory=list)
    invariants: list[tuple[str, str]] = field(default_factory=list)
    counterexample: Counterexample | None = None
    markdown: list[str] = field(default_factory=list)
