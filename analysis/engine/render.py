"""Readable text for values, tags, masks and counterexamples (hover and finding messages)."""
from __future__ import annotations

import ast
from typing import Any

from .poly import Poly, fmt
from .values import UNDEF, V, b_fmt

INDEX_NAMES = "ijlmnpqrs"
DOT_INDEX = "k"  # the contracted index of a tl.dot, as in C[i, j] = sum_k A[i, k] B[k, j]


def kernel_names(interp) -> set[str]:
    """Every name the kernel's text uses (parameters, locals, loop variables) plus the display
    names of its atoms: a tile index must not print as one of them (``k*BLOCK_K + k``)."""
    tree = interp.kernel.tree
    hit = getattr(tree, "_ks_names", None) if tree is not None else None
    if hit is None:
        hit = {p.name for p in interp.kernel.params}
        if tree is not None:
            for n in ast.walk(tree):
                if isinstance(n, ast.Name):
                    hit.add(n.id)
                elif isinstance(n, ast.arg):
                    hit.add(n.arg)
            hit = frozenset(hit)
            tree._ks_names = hit
    return set(hit) | set(interp.names.values())


def free_name(name: str, taken: set[str]) -> str:
    """``name``, primed (``i'``, ``i''``) until no kernel name is spelled that way."""
    while name in taken:
        name += "'"
    return name


def index_names(interp, n: int | None = None) -> list[str]:
    """Display names of the tile index variables ``%0, %1, ...``: i, j, l, m, ..., primed
    when the kernel itself uses the letter."""
    taken = kernel_names(interp)
    letters = INDEX_NAMES if n is None else INDEX_NAMES[:n]
    return [free_name(c, taken) for c in letters]


def dot_index_name(interp) -> str:
    """Display name of a ``tl.dot``'s contracted index: ``k``, or ``k'`` when ``k`` is a
    kernel name (the K loop usually is)."""
    return free_name(DOT_INDEX, kernel_names(interp))


def element_of(interp, lane: dict, n: int, suffix: str = "") -> dict[str, int]:
    """``{index name: value}`` of a tile element from a model/lane keyed ``%k`` (+ suffix)."""
    return {name: lane.get(f"%{k}{suffix}", 0) for k, name in enumerate(index_names(interp, n))}


def atom_names(interp) -> dict[str, str]:
    """Display names: tile index vars as i, j, ... (see :func:`index_names`); program ids and
    loop counters by the variable that holds them."""
    names = {f"%{k}": name for k, name in enumerate(index_names(interp))}
    for a, n in interp.names.items():
        names[a] = n
    for a in ("pid0", "pid1", "pid2"):
        names.setdefault(a, a)
    return names


# hovers print at most this many terms per polynomial (see poly.fmt)
HOVER_TERMS = 24
# a formula in a finding's message or related line is cut to this many characters (the middle
# elided): opaque terms of unrolled loops or nested `//`/`%` print as hundreds of characters
FORMULA_CHARS = 120
# terms printed before cutting (printing a polynomial of thousands of terms costs seconds)
MESSAGE_TERMS = 64


def elide(text: str, max_chars: int = FORMULA_CHARS) -> str:
    """``text`` when it has at most ``max_chars`` characters; else its start and end joined
    by ``…`` (cut at spaces where one is near, so names stay whole), at most ``max_chars``."""
    if len(text) <= max_chars:
        return text
    keep = max_chars - 1
    head_n = (keep + 1) // 2
    tail_n = keep - head_n
    head = text[:head_n]
    tail = text[len(text) - tail_n:]
    sp = head.rfind(" ")
    if sp >= head_n * 2 // 3:
        head = head[:sp + 1]
    sp = tail.find(" ")
    if 0 <= sp <= tail_n // 3:
        tail = tail[sp:]
    return head + "…" + tail


def show(p: Poly | None, interp, limit: int | None = None) -> str:
    """A Poly for people, with the kernel's names. Without ``limit`` (messages, related
    lines) the text is capped at FORMULA_CHARS characters; hovers pass a term ``limit`` and
    are not capped."""
    if p is None:
        return "?"
    if limit is None:
        return elide(fmt(p, atom_names(interp), MESSAGE_TERMS))
    return fmt(p, atom_names(interp), limit)


def show_mask(m, interp, limit: int | None = None) -> str:
    """A mask for people; capped like :func:`show` when no term ``limit`` is given."""
    if limit is None:
        return elide(b_fmt(m, atom_names(interp), MESSAGE_TERMS))
    return b_fmt(m, atom_names(interp), limit)


def internal_terms(text: str) -> bool:
    """True when a rendered formula shows the engine's own terms rather than the kernel's
    names: opaque terms (``{(pid0) % 8}``, ``{where(...)}``), values merged from two branches
    (``either(a, b)``), a second lane or program of a pairwise check (``i'``), or an elision."""
    return "{" in text or "either(" in text or "'" in text or "…" in text


def mask_text(mask, interp, node: ast.AST | None = None) -> str:
    """A mask for a finding's note or related line: its formula over the kernel's names when
    that reads plainly (``BLOCK*pid0 + i < n``), else the mask argument as written in the
    source (``offs_m[:, None] < M``, in backquotes): a formula such as
    ``TILE_M*{either(pid0, {(pid0 + ...) // GROUP_M})} + i < M`` names no variable the user
    wrote, and the counterexample's sizes and element already make the lane concrete."""
    formula = show_mask(mask, interp)
    if node is None or not internal_terms(formula):
        return formula
    from .interp import _src  # render is imported by interp's helpers; import late
    source = " ".join(_src(interp.parsed, node).split())
    return f"`{elide(source)}`" if source else formula


def describe_value(name: str, v: V, interp) -> tuple[str, list[str]]:
    """(title, tag formulas) for hover, e.g. ``a: tile[64, 32] fp16 (loaded from A)``."""
    shape = "[" + ", ".join(str(n) for n in v.shape) + "]"
    idx = ", ".join(index_names(interp, len(v.shape)))
    dt = f" {v.dtype}" if v.dtype else ""
    if v.kind == "int":
        width = f"int{v.width}"
        kind = f"tile{shape} {width}" if v.shape else f"{width} scalar"
        title = f"{name}: {kind}"
        if v.poly is not None:
            title += f" = {show(v.poly, interp, HOVER_TERMS)}"
    elif v.kind == "ptr":
        kind = f"pointer tile{shape}" if v.shape else "pointer"
        title = f"{name}: {kind} = {v.base} + {show(v.poly, interp, HOVER_TERMS)}"
    elif v.kind == "bool":
        kind = f"mask{shape}" if v.shape else "condition"
        title = f"{name}: {kind} = {show_mask(v.mask, interp, HOVER_TERMS)}"
    elif v.kind == "data":
        src = sorted({t.tensor for t in v.tags.values()})
        origin = f" (from {', '.join(src)})" if src else ""
        title = f"{name}: tile{shape}{dt}{origin}" if v.shape else f"{name}: scalar{dt}{origin}"
    elif v.kind == "blockptr":
        title = f"{name}: block pointer {list(v.const['block'])} into {v.const['base'].base}"
    elif v.kind == "desc":
        title = f"{name}: tensor descriptor {list(v.const['block'])} of {v.const['base'].base}"
    elif v.kind == "const":
        title = f"{name}: constant {v.const!r}"
    elif v.kind == "unknown":
        title = f"{name}: not modelled ({v.why})"
    else:
        title = f"{name}: {v.kind}"
    tags = []
    if v.tags:
        by_tensor: dict[str, list[str]] = {}
        for d, t in v.tags.items():
            by_tensor.setdefault(t.tensor, []).append(
                f"{d} = {show(t.coord, interp, HOVER_TERMS)}")
        lhs = f"{name}[{idx}]" if idx else name
        for tensor, parts in by_tensor.items():
            tags.append(f"{lhs} <- {tensor}[{', '.join(parts)}]")
    if v.pads:
        for p in v.pads:
            tags.append(f"masked lanes of line {p.line + 1} hold {_pad(p.value)}")
    return title, tags


def _pad(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)
    if value == UNDEF:
        return "undefined values (a load without other=)"
    return str(value)
