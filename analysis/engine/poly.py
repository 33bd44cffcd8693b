"""Integer polynomials over named atoms: the engine's representation of offsets, masks' operands
and tag coordinates.

An atom is a string. Its first character says what it is (see README.md, "Atoms"):
``%0``/``%1``... tile index variables (per element), ``pid0``.. program ids, ``@k``.. loop
iteration counters, ``?n`` unknown integers, ``{...}`` opaque terms (``x % M``, ``x // 2``,
``min(a, b)``, a value read from memory); any other name is a kernel parameter.

A ``Poly`` is an immutable mapping monomial -> integer coefficient, where a monomial is a sorted
tuple of atoms (repetition = power) and ``()`` is the constant monomial. Affine offsets are
the common case; products of parameters (``row * row_stride``) stay exact.
"""
from __future__ import annotations

import heapq
from typing import Callable, Iterable, Mapping

Mono = tuple  # tuple[str, ...]


class Poly:
    """An immutable integer polynomial. Construct with ``Poly.const``, ``Poly.atom`` or
    arithmetic; never mutate ``terms``."""

    __slots__ = ("terms", "_hash", "_atoms")

    def __init__(self, terms: Mapping[Mono, int] | None = None):
        self.terms: dict[Mono, int] = {m: c for m, c in (terms or {}).items() if c != 0}
        self._hash = None
        self._atoms: frozenset | None = None

    # -- constructors -------------------------------------------------------------------
    @staticmethod
    def const(c: int) -> "Poly":
        return Poly({(): int(c)}) if c else ZERO

    @staticmethod
    def atom(name: str) -> "Poly":
        return Poly({(name,): 1})

    # -- queries ------------------------------------------------------------------------
    def is_const(self) -> bool:
        return not self.terms or (len(self.terms) == 1 and () in self.terms)

    def const_value(self) -> int | None:
        if not self.terms:
            return 0
        if len(self.terms) == 1 and () in self.terms:
            return self.terms[()]
        return None

    @property
    def constant(self) -> int:
        return self.terms.get((), 0)

    def atoms(self) -> set[str]:
        """The atoms of every monomial (a new set: callers may change it). Computed once per
        Poly: offsets of unrolled kernels have thousands of terms over a few dozen atoms."""
        if self._atoms is None:
            out: set[str] = set()
            for m in self.terms:
                out.update(m)
            self._atoms = frozenset(out)
        return set(self._atoms)

    def depends_on(self, pred: Callable[[str], bool]) -> bool:
        return any(pred(a) for m in self.terms for a in m)

    def index_vars(self) -> set[int]:
        return {int(a[1:]) for m in self.terms for a in m if a[0] == "%"}

    def coefficient_of(self, atom: str) -> "Poly | None":
        """The polynomial ``q`` with ``self = atom * q + r`` where ``r`` has no ``atom``;
        None when ``atom`` appears squared (no unique coordinate)."""
        out: dict[Mono, int] = {}
        for m, c in self.terms.items():
            n = m.count(atom)
            if n == 0:
                continue
            if n > 1:
                return None
            rest = list(m)
            rest.remove(atom)
            out[tuple(rest)] = out.get(tuple(rest), 0) + c
        return Poly(out)

    def without_atom(self, atom: str) -> "Poly":
        return Poly({m: c for m, c in self.terms.items() if atom not in m})

    # -- arithmetic ---------------------------------------------------------------------
    def __add__(self, other: "Poly | int") -> "Poly":
        if isinstance(other, int):
            other = Poly.const(other)
        if not other.terms:
            return self
        if not self.terms:
            return other
        out = dict(self.terms)
        for m, c in other.terms.items():
            out[m] = out.get(m, 0) + c
        return Poly(out)

    __radd__ = __add__

    def __neg__(self) -> "Poly":
        return Poly({m: -c for m, c in self.terms.items()})

    def __sub__(self, other: "Poly | int") -> "Poly":
        if isinstance(other, int):
            other = Poly.const(other)
        return self + (-other)

    def __rsub__(self, other: int) -> "Poly":
        return Poly.const(other) - self

    def __mul__(self, other: "Poly | int") -> "Poly":
        if isinstance(other, int):
            if other == 0:
                return ZERO
            return Poly({m: c * other for m, c in self.terms.items()})
        if not self.terms or not other.terms:
            return ZERO
        out: dict[Mono, int] = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in other.terms.items():
                m = tuple(sorted(m1 + m2)) if m1 and m2 else (m1 or m2)
                out[m] = out.get(m, 0) + c1 * c2
        return Poly(out)

    __rmul__ = __mul__

    def exact_div(self, k: int) -> "Poly | None":
        """``self / k`` when every coefficient is divisible by the integer ``k``."""
        if k == 0 or any(c % k for c in self.terms.values()):
            return None
        return Poly({m: c // k for m, c in self.terms.items()})

    def subst(self, mapping: Mapping[str, "Poly"], opaque: Callable[[str], str] | None = None
              ) -> "Poly":
        """Replace atoms by polynomials; ``opaque(name)`` renames opaque terms whose
        definition mentions substituted atoms (see ``Terms.subst``)."""
        if not self.terms:
            return self
        out = ZERO
        changed = False
        for m, c in self.terms.items():
            term = Poly.const(c)
            hit = False
            for a in m:
                if a in mapping:
                    term = term * mapping[a]
                    hit = True
                elif opaque is not None and a[0] == "{":
                    b = opaque(a)
                    hit = hit or b != a
                    term = term * Poly.atom(b)
                else:
                    term = term * Poly.atom(a)
            changed = changed or hit
            out = out + term
        return out if changed else self

    def evaluate(self, env: Callable[[str], int]) -> int:
        total = 0
        for m, c in self.terms.items():
            v = c
            for a in m:
                v *= env(a)
            total += v
        return total

    # -- identity -----------------------------------------------------------------------
    def key(self) -> tuple:
        return tuple(sorted(self.terms.items()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Poly) and self.terms == other.terms

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self.terms.items()))
        return self._hash

    def __repr__(self) -> str:
        return f"Poly({fmt(self)})"


ZERO = Poly()
ONE = Poly({(): 1})


def fmt(p: Poly, names: Mapping[str, str] | None = None, limit: int | None = None) -> str:
    """Readable form, e.g. ``pid_m*64 + i``; ``names`` renames atoms for display. With
    ``limit``, at most that many terms are written, then ``+ … (N more terms)``: hovers of
    unrolled static loops hold polynomials of thousands of terms, which nobody reads and
    which cost most of such a kernel's analysis time to print."""
    if not p.terms:
        return "0"
    names = names or {}
    parts: list[tuple[int, str]] = []

    def order(item):
        m, _ = item
        return (len(m) == 0, [a[0] == "%" for a in m], m)

    items = p.terms.items()
    more = 0
    if limit is not None and len(p.terms) > limit:
        more = len(p.terms) - limit
        items = heapq.nsmallest(limit, items, key=order)
    for m, c in sorted(items, key=order):
        body = "*".join(names.get(a, a) for a in m)
        if not body:
            parts.append((c, str(abs(c))))
        elif abs(c) == 1:
            parts.append((c, body))
        else:
            parts.append((c, f"{body}*{abs(c)}"))
    if parts and parts[0][0] < 0 and any(c > 0 for c, _ in parts):
        # `num_pid_m - first_pid_m`, not `-first_pid_m + num_pid_m`
        parts = [x for x in parts if x[0] > 0] + [x for x in parts if x[0] < 0]
    out = ""
    for i, (c, s) in enumerate(parts):
        if i == 0:
            out = ("-" if c < 0 else "") + s
        else:
            out += (" - " if c < 0 else " + ") + s
    if more:
        out += f" + … ({more} more terms)"
    return out


def lin_parts(polys: Iterable[Poly]) -> set[str]:
    out: set[str] = set()
    for p in polys:
        out |= p.atoms()
    return out
