"""Records the interpreter leaves for the checks: memory accesses, tile-level obligations
(mixing, contraction, pads reaching reductions), loop-carried values and `tl.where` uses.

These are the engine's internal API for checks (local ones in ``checks.py``, grid-level ones
written on top of the access log). Everything is plain data; Polys and BoolExprs are
explained in README.md.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from ..model import Span
from .poly import Poly
from .solver import Domain
from .values import V


@dataclass
class Access:
    """One ``tl.load`` / ``tl.store`` / atomic / block-pointer / descriptor access.

    Attributes:
        id: unique per kernel case (a load's result carries it in ``V.loads``).
        kind: ``load``, ``store`` or ``atomic``.
        via: ``ptr`` (pointer tile), ``blockptr`` or ``desc`` (tensor descriptor).
        base: the pointer *parameter* the address is relative to (after reassignments such as
            ``X += row * stride``, still the parameter), or None when not known.
        shape: the tile shape; ``offset``/``mask`` use index variables ``%k < shape[k]``.
        offset: element offset from ``base`` (a Poly over %k, pids, loop atoms, params), or
            None when not modelled.
        mask: BoolExpr of the enabled lanes; None = unmasked (every lane). For block
            pointers/descriptors, the lanes kept by ``boundary_check`` / the descriptor.
        checked_dims: for block pointers, the dims in ``boundary_check`` (descriptors: all).
        block: for block pointers/descriptors: ``{"shape": [Poly], "strides": [Poly],
            "offsets": [Poly]}`` (offsets of the block's first element, per dim).
        value: the stored value (store/atomic) or the loaded result (load).
        other: the ``other=`` value (load); None when absent (masked lanes read as 0).
        loops: enclosing loops, outermost first (``Loop``: var, atom, lo, hi, step).
        guards: scalar path conditions (``if`` conditions, ``while`` conditions).
        risks: int32 products that flow into the address (KS110).
        node: the call; ptr_node/mask_node/other_node: its arguments (None if absent).
        case: the constexpr values of the case this access was recorded in.
    """

    id: int
    kind: str
    via: str
    base: str | None
    shape: tuple
    offset: Poly | None
    mask: Any
    span: Span
    node: ast.Call
    value: V | None = None
    other: V | None = None
    checked_dims: tuple = ()
    block: dict | None = None
    loops: list = field(default_factory=list)
    guards: list = field(default_factory=list)
    risks: tuple = ()
    ptr_node: ast.expr | None = None
    mask_node: ast.expr | None = None
    other_node: ast.expr | None = None
    case: dict = field(default_factory=dict)
    padding: Any = None
    live_masks: dict = field(default_factory=dict)

    @property
    def line(self) -> int:
        return self.span.line

    def domain(self) -> Domain:
        return Domain(self.shape, list(self.loops), list(self.guards))


@dataclass
class Obligation:
    """A tile-level invariant to decide after interpretation.

    kind: ``mix`` (KS202: ``a`` and ``b`` coordinates of one dim must be equal),
    ``dot`` (KS201: contracted coordinates), ``pad`` (KS401: masked lanes reach a
    reduction), ``assert`` (KS204).
    """

    kind: str
    node: ast.AST
    span: Span
    shape: tuple
    loops: list
    guards: list
    data: dict = field(default_factory=dict)


@dataclass
class Carried:
    """A loop-carried variable: its value on entry and after one iteration (KS402)."""

    name: str
    init: V
    exit: V
    loop: ast.AST
    loop_line: int
    update_node: ast.AST | None
    read_in_body: bool


@dataclass
class WhereUse:
    """``tl.where(cond, x, y)`` where ``x`` or ``y`` derives from loads ``loads``.

    ``discard`` is the BoolExpr of lanes where that arm is NOT selected. ``tags`` are the
    arm's tags (logical coordinates over the where's index variables), ``loops``/``guards``
    the enclosing loops and path conditions, ``other`` the value the discarded lanes take
    when it is one number for every lane (``-inf``, ``0.0``), else None: grid.py counts the
    discarded lanes as "not read" only then (KS303 on causal masks)."""

    loads: frozenset
    discard: Any
    shape: tuple
    span: Span
    tags: dict = field(default_factory=dict)
    loops: list = field(default_factory=list)
    guards: list = field(default_factory=list)
    other: float | None = None
