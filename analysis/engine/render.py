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


def atom_names(interp, inner_chars: int | None = None) -> "DisplayNames":
    """Display names of atoms, as a mapping for :func:`poly.fmt`: tile index variables as i,
    j, ... (see :func:`index_names`); program ids, loop counters and opaque terms by the
    variable the kernel bound them to (``interp.names``, recorded by ``Interp._bind_name``);
    a program id the kernel never named as ``tl.program_id(0)``, the expression the kernel
    wrote; any other opaque term by its definition in Python syntax (:class:`DisplayNames`).
    ``inner_chars`` caps the text of one opaque term (default FORMULA_CHARS)."""
    names = {f"%{k}": name for k, name in enumerate(index_names(interp))}
    for a, n in interp.names.items():
        names[a] = n
    for k in range(3):
        names.setdefault(f"pid{k}", f"tl.program_id({k})")
    return DisplayNames(names, interp, inner_chars or FORMULA_CHARS)


def fold_named(p: Poly, interp) -> Poly:
    """``p`` with each multiple of a formula a variable holds (``interp.named_sums``) written
    as that variable: ``BLOCK_M*GROUP_M*group_id + BLOCK_M*(...) + i`` becomes
    ``BLOCK_M*pid_m + i`` when the kernel bound ``pid_m = first_pid_m + (...)``. Exact: only
    a factor times every term of the formula, each with its coefficient, is replaced. Larger
    formulas are tried first (``pid_m`` before the ``first_pid_m`` inside it). For display
    only: the atoms it introduces (the variables' names; a kernel local is never a
    parameter, see ``Interp._bind_sum``) mean nothing to the solver."""
    sums = getattr(interp, "named_sums", None)
    if not sums or not p.terms or len(p.terms) > 4 * MESSAGE_TERMS:
        return p
    order = sorted(enumerate(sums.items()), key=lambda e: (-len(e[1][1].terms), -e[0]))
    for _, (name, x) in order:
        atoms = p.atoms()
        if name in atoms or not x.atoms() <= atoms:
            continue
        m0 = max(x.terms, key=len)
        c0 = x.terms[m0]
        for _ in range(len(p.terms)):
            for m, c in p.terms.items():
                q = _mono_div(m, m0)
                if q is None or c % c0:
                    continue
                k = Poly({q: c // c0})
                kx = k * x
                if all(p.terms.get(mm) == cc for mm, cc in kx.terms.items()):
                    p = p - kx + k * Poly.atom(name)
                    break
            else:
                break
    return p


def _mono_div(m: tuple, d: tuple) -> tuple | None:
    """The monomial ``m / d`` (both sorted tuples of atoms), None when ``d`` does not divide
    ``m``."""
    rest = list(m)
    for a in d:
        try:
            rest.remove(a)
        except ValueError:
            return None
    return tuple(rest)


# the condition of a value chosen by `tl.where` or merged from the two branches of an `if`:
# the engine keeps both candidates but not the condition (see ``Interp.merge``)
HIDDEN_CONDITION = "…"


class DisplayNames:
    """Atom -> display text, computed lazily (a kernel with unrolled loops holds thousands of
    opaque terms; a message shows a few). Opaque terms without a name print as the Python
    expression that defines them, with display names substituted recursively:

    * ``x % m`` -> ``(x % m)``; ``x // m`` -> ``(x // m)``, or ``cdiv(a, m)`` when ``x`` is
      exactly ``a + m - 1`` (how ``tl.cdiv`` is modelled);
    * ``min``/``max`` -> ``min(a, b)``; a value read from memory -> ``A[offset]``;
    * a value chosen by a condition the analysis does not keep (``tl.where(c, a, b)``, or
      ``x`` assigned ``a`` in the ``if`` branch and ``b`` in the ``else`` branch) ->
      ``(a if … else b)``: Python's conditional expression, with the operands in the order
      the kernel wrote them and ``…`` for the condition that is not shown.

    Each term's text is capped at ``inner_chars`` characters (:func:`elide`, brackets kept
    balanced). Only ``get`` is provided: it is all ``fmt`` uses."""

    def __init__(self, names: dict[str, str], interp, inner_chars: int):
        self.names = names
        self.interp = interp
        self.inner_chars = inner_chars
        self._memo: dict[str, str] = {}

    def __contains__(self, atom: str) -> bool:
        return self.get(atom) is not None

    def __getitem__(self, atom: str) -> str:
        out = self.get(atom)
        if out is None:
            raise KeyError(atom)
        return out

    def with_names(self, extra: dict[str, str]) -> "DisplayNames":
        """A copy that also renames ``extra`` (e.g. ``%0`` as the contracted index ``k``)."""
        return DisplayNames(dict(self.names, **extra), self.interp, self.inner_chars)

    def get(self, atom: str, default=None):
        hit = self.names.get(atom)
        if hit is not None:
            return hit
        if atom[:1] != "{":
            return default
        hit = self._memo.get(atom)
        if hit is None:
            hit = self._opaque(atom)
            self._memo[atom] = hit
        return hit

    def _text(self, p, folded: bool = False) -> str:
        if not isinstance(p, Poly):
            return str(p)
        if not folded:
            p = fold_named(p, self.interp)
        return elide(fmt(p, self, MESSAGE_TERMS), self.inner_chars)

    def _operand(self, p, right: bool = False) -> str:
        """``p`` as an operand of ``%``, ``//`` or a bit operator: bracketed when it is a sum
        (or, on the right, a product: ``x % (2*m)``, not ``x % 2*m``)."""
        if not isinstance(p, Poly):
            return str(p)
        p = fold_named(p, self.interp)
        s = self._text(p, folded=True)
        simple = len(p.terms) == 1 and not s.startswith("-")
        if simple and right:
            (m, c), = p.terms.items()
            simple = len(m) <= 1 and (c == 1 or not m)
        return s if simple else f"({s})"

    def _opaque(self, atom: str) -> str:
        d = self.interp.terms.defs.get(atom)
        if d is None:
            return atom[1:-1] if atom.endswith("}") else atom
        op, args = d
        if op in ("mod", "div") and len(args) == 2:
            x, m = args
            if op == "div":
                a = _ceil_div_numerator(x, m)
                if a is not None:
                    return f"cdiv({self._text(a)}, {self._text(m)})"
            sym = "%" if op == "mod" else "//"
            return f"({self._operand(x)} {sym} {self._operand(m, right=True)})"
        if op in ("min", "max") and len(args) == 2:
            return f"{op}({self._text(args[0])}, {self._text(args[1])})"
        if op == "where" and len(args) == 2:
            return f"({self._text(args[0])} if {HIDDEN_CONDITION} else {self._text(args[1])})"
        if op == "read" and len(args) == 2:
            base, off = args
            decl = self.interp.decls.get(base)
            return f"{decl.name if decl is not None else base}[{self._text(off)}]"
        if op == "uf" and len(args) == 2:
            return f"{args[0]}({self._text(args[1])})"
        if op == "bits" and len(args) == 3:
            return f"({self._operand(args[0])} {args[2]} {self._operand(args[1], right=True)})"
        label = atom[1:-1] if atom.endswith("}") else atom
        return label.replace("{", "(").replace("}", ")")


def _ceil_div_numerator(x: Poly, m: Poly) -> Poly | None:
    """``a`` when ``x == a + m - 1`` term by term (``tl.cdiv(a, m)`` is modelled as
    ``(a + m - 1) // m``), else None. Only a divisor other than 1 counts, and every term of
    ``m - 1`` must appear in ``x`` with its coefficient: ``(N + 3) // 4`` is ``cdiv(N, 4)``,
    ``(N + 2) // 4`` is not."""
    c = m.const_value()
    if c is not None and c <= 1:
        return None
    m1 = m - 1
    if any(x.terms.get(mono) != coef for mono, coef in m1.terms.items()):
        return None
    a = x - m1
    return a if a.terms else None


# hovers print at most this many terms per polynomial (see poly.fmt)
HOVER_TERMS = 24
# a formula in a finding's message or related line is cut to this many characters (whole
# terms elided): opaque terms of unrolled loops or nested `//`/`%` print as hundreds of
# characters
FORMULA_CHARS = 120
# a hover caps each opaque term's text at this many characters (hovers are not capped as a
# whole; a term nested ten deep would otherwise print thousands of characters)
HOVER_TERM_CHARS = 200
# terms printed before cutting (printing a polynomial of thousands of terms costs seconds)
MESSAGE_TERMS = 64

_OPEN, _CLOSE = "([{", ")]}"
# top-level separators by binding strength, loosest first: a cut keeps the looser operators
# (the comparison of a mask, the `&` of two bounds) and drops whole terms of a sum
_LEVELS = ((" | ",), (" & ",), (" < ", " <= ", " == ", " != ", " > ", " >= "), (" + ", " - "))


def elide(text: str, max_chars: int = FORMULA_CHARS) -> str:
    """``text`` when it has at most ``max_chars`` characters; else a shorter form of at most
    ``max_chars`` characters in which ``…`` stands for whole terms that were left out
    (``BLOCK_M*group_id + … + i``). Every bracket pair of the result is whole: the cut never
    falls inside a bracket; a single term too long by itself keeps its brackets and has its
    inside shortened the same way (``min(a, …)``)."""
    if len(text) <= max_chars:
        return text
    out = _shrink(text, max_chars)
    return out if len(out) <= max_chars else _cut(out, max_chars)


def _split_top(text: str, seps: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """(pieces, separators) of ``text`` split at ``seps`` outside any bracket."""
    pieces, found = [], []
    depth = start = i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth = max(0, depth - 1)
        elif depth == 0 and ch in " ,":
            for s in seps:
                if text.startswith(s, i):
                    pieces.append(text[start:i])
                    found.append(s)
                    i += len(s)
                    start = i
                    break
            else:
                i += 1
            continue
        i += 1
    pieces.append(text[start:])
    return pieces, found


def _fit(parts: list[str], budget: int) -> list[str]:
    """Shorten the longest of ``parts`` until their total length is at most ``budget``."""
    parts = list(parts)
    for _ in range(4 * len(parts) + 4):
        excess = sum(map(len, parts)) - budget
        if excess <= 0:
            break
        k = max(range(len(parts)), key=lambda j: len(parts[j]))
        if len(parts[k]) <= 1:
            break
        parts[k] = _shrink(parts[k], max(1, len(parts[k]) - excess))
    return parts


def _shrink(text: str, budget: int) -> str:
    if len(text) <= budget:
        return text
    if budget <= 1:
        return "…"
    pieces, seps = _split_top(text, (", ",))
    if len(pieces) > 1:
        return _join(_fit(pieces, budget - sum(map(len, seps))), seps)
    for level in _LEVELS[:3]:
        pieces, seps = _split_top(text, level)
        if len(pieces) > 1:
            return _join(_fit(pieces, budget - sum(map(len, seps))), seps)
    pieces, seps = _split_top(text, _LEVELS[3])
    if len(pieces) > 2:
        return _elide_terms(pieces, seps, budget)
    if len(pieces) == 2:
        return _join(_fit(pieces, budget - len(seps[0])), seps)
    return _shrink_term(text, budget) if _groups(text) else _cut(text, budget)


def _join(pieces: list[str], seps: list[str]) -> str:
    out = pieces[0]
    for s, p in zip(seps, pieces[1:]):
        out += s + p
    return out


def _elide_terms(pieces: list[str], seps: list[str], budget: int) -> str:
    """A sum of three or more terms: the first and last terms, then more from either end
    while they fit, with ``op …`` for the terms between (``a + … + i``)."""
    n = len(pieces)
    pieces = list(pieces)

    def render(h: int, t: int) -> str:
        head = _join(pieces[:h], seps[:h - 1])
        return head + seps[h - 1] + "…" + "".join(seps[j - 1] + pieces[j]
                                                  for j in range(n - t, n))

    out = render(1, 1)
    if len(out) > budget:
        # the end terms alone are too long: shorten them (inside their brackets)
        fixed = len(out) - len(pieces[0]) - len(pieces[-1])
        pieces[0], pieces[-1] = _fit([pieces[0], pieces[-1]], budget - fixed)
        return render(1, 1)
    h = t = 1
    while h + t < n - 1:
        head_len = len(_join(pieces[:h], seps[:h - 1]))
        tail_len = len(_join(pieces[n - t:], seps[n - t:]))
        tries = [(h + 1, t), (h, t + 1)] if head_len <= tail_len else [(h, t + 1), (h + 1, t)]
        for cand in tries:
            txt = render(*cand)
            if len(txt) <= budget:
                h, t = cand
                out = txt
                break
        else:
            break
    return out


def _shrink_term(text: str, budget: int) -> str:
    """One term (a product, a call, a bracketed sum): shorten the inside of its longest
    top-level bracket pair, then the next, until it fits (best effort; :func:`elide` cuts
    what still does not fit with :func:`_cut`)."""
    cur = text
    for _ in range(16):
        excess = len(cur) - budget
        if excess <= 0:
            break
        groups = [g for g in _groups(cur) if cur[g[0]:g[1]] != "…"]
        if not groups:
            break
        lo, hi = max(groups, key=lambda g: g[1] - g[0])
        inner = cur[lo:hi]
        short = "…" if len(inner) - excess < 1 else _shrink(inner, len(inner) - excess)
        if len(short) >= len(inner):
            short = "…"
        cur = cur[:lo] + short + cur[hi:]
    return cur


def _groups(text: str) -> list[tuple[int, int]]:
    """(start, end) of the inside of each top-level bracket pair of ``text``."""
    out = []
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch in _OPEN:
            if depth == 0:
                start = i + 1
            depth += 1
        elif ch in _CLOSE and depth:
            depth -= 1
            if depth == 0:
                out.append((start, i))
    return out


def _cut(text: str, budget: int) -> str:
    """The longest prefix of ``text`` that, with ``…`` and the brackets it leaves open
    closed, fits in ``budget`` characters."""
    stack: list[str] = []
    best = "…"
    for i, ch in enumerate(text):
        if i + 1 + len(stack) <= budget:
            best = text[:i] + "…" + "".join(_CLOSE[_OPEN.index(c)] for c in reversed(stack))
        elif i + 1 > budget:
            break
        if ch in _OPEN:
            stack.append(ch)
        elif ch in _CLOSE and stack:
            stack.pop()
    return best


def show(p: Poly | None, interp, limit: int | None = None) -> str:
    """A Poly for people, with the kernel's names (:func:`atom_names`). Without ``limit``
    (messages, related lines) the text is capped at FORMULA_CHARS characters; hovers pass a
    term ``limit`` and are not capped as a whole."""
    if p is None:
        return "?"
    p = fold_named(p, interp)
    if limit is None:
        return elide(fmt(p, atom_names(interp), MESSAGE_TERMS))
    return fmt(p, atom_names(interp, HOVER_TERM_CHARS), limit)


def show_mask(m, interp, limit: int | None = None) -> str:
    """A mask for people; capped like :func:`show` when no term ``limit`` is given."""
    from .values import b_map
    m = b_map(m, lambda p: fold_named(p, interp))
    if limit is None:
        return elide(b_fmt(m, atom_names(interp), MESSAGE_TERMS))
    return b_fmt(m, atom_names(interp, HOVER_TERM_CHARS), limit)


def internal_terms(text: str) -> bool:
    """True when a rendered formula shows what the kernel's text does not: a value chosen by
    a condition that is not shown (``(a if … else b)``), a second lane or program of a
    pairwise check (``i'``), or an elision (``…``)."""
    return "{" in text or "…" in text or "'" in text


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
