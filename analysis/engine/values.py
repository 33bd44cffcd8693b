"""Abstract values of the interpreter: scalars, tiles, pointers, masks, tags and pads.

Every value is a ``V``. A scalar has ``shape == ()``; a tile has a concrete shape (constexprs
are folded per case). Per-element quantities (``poly``, ``mask``, tag coordinates, pad masks)
are expressed over the tile index variables ``%0``, ``%1``, ... of the value's own shape
(``%k`` ranges over ``0 <= %k < shape[k]``). Broadcasting renames index variables
(``align``). See README.md for the full contract.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from .poly import ZERO, Poly, fmt

# ----------------------------------------------------------------------------------------
# Opaque terms: x % m, x // m, min/max, shifts, reads from memory.


class Terms:
    """Registry of opaque atoms (names starting with ``{``) and their definitions.

    A definition is ``(op, args)`` with ``op`` in ``mod div min max read unknown`` and
    ``args`` a tuple of Polys (``read``: ``(tensor_or_ptr_name, offset Poly)``).
    """

    def __init__(self) -> None:
        self.defs: dict[str, tuple[str, tuple]] = {}
        self._by_def: dict[tuple, str] = {}
        self._subst_cache: dict[tuple, str] = {}
        # per opaque atom, what its arguments contribute to index_vars / deep_atoms (a
        # definition never changes once made, so neither do these)
        self._atoms_inside: dict[str, frozenset] = {}

    def make(self, op: str, args: tuple, label: str | None = None) -> Poly:
        key = (op, tuple(a.key() if isinstance(a, Poly) else a for a in args))
        name = self._by_def.get(key)
        if name is None:
            name = "{" + (label or _label(op, args)) + "}"
            while name in self.defs:  # same label, other definition
                name = name[:-1] + "'}"
            self.defs[name] = (op, args)
            self._by_def[key] = name
        return Poly.atom(name)

    def subst_atom(self, name: str, mapping: Mapping[str, Poly]) -> str:
        d = self.defs.get(name)
        if d is None:
            return name
        op, args = d
        mkey = (name, tuple(sorted((k, v.key()) for k, v in mapping.items())))
        hit = self._subst_cache.get(mkey)
        if hit is not None:
            return hit
        new_args = tuple(self.subst(a, mapping) if isinstance(a, Poly) else a for a in args)
        if all(x is y for x, y in zip(new_args, args)):
            out = name
        else:
            (out,) = next(iter(self.make(op, new_args).terms))
        self._subst_cache[mkey] = out
        return out

    def subst(self, p: Poly, mapping: Mapping[str, Poly]) -> Poly:
        if not mapping or not p.terms:
            return p
        return p.subst(mapping, lambda a: self.subst_atom(a, mapping))

    def index_vars(self, p: Poly) -> set[int]:
        """Index variables of ``p``, looking inside opaque terms."""
        return {int(a[1:]) for a in self.deep_atoms(p) if a[0] == "%" and a[1:].isdigit()}

    def deep_atoms(self, p: Poly) -> set[str]:
        out: set[str] = set()
        for a in p.atoms():
            out.add(a)
            if a[0] == "{":
                inside = self._atoms_inside.get(a)
                if inside is None:
                    inner: set[str] = set()
                    for arg in self.defs.get(a, ("", ()))[1]:
                        if isinstance(arg, Poly):
                            inner |= self.deep_atoms(arg)
                    inside = frozenset(inner)
                    if a in self.defs:
                        self._atoms_inside[a] = inside
                out |= inside
        return out

    def evaluate(self, p: Poly, env: Callable[[str], int], reads: Callable | None = None) -> int:
        def look(a: str) -> int:
            if a[0] == "{":
                return self.eval_atom(a, env, reads)
            return env(a)
        return p.evaluate(look)

    def eval_atom(self, a: str, env, reads=None) -> int:
        op, args = self.defs[a]
        if op == "read":
            if reads is None:
                raise KeyError(a)
            return reads(args[0], self.evaluate(args[1], env, reads))
        if op == "uf":
            # an annotation's function: known only at the arguments a solver model fixed
            # (SolverContext._model keys them ("uf", name))
            if reads is None:
                raise KeyError(a)
            return reads(("uf", args[0]), self.evaluate(args[1], env, reads))
        vals = [self.evaluate(x, env, reads) for x in args if isinstance(x, Poly)]
        if op == "mod":
            return _tmod(vals[0], vals[1])
        if op == "div":
            return _tdiv(vals[0], vals[1])
        if op == "min":
            return min(vals)
        if op == "max":
            return max(vals)
        raise KeyError(a)


def _tdiv(a: int, b: int) -> int:
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _tmod(a: int, b: int) -> int:
    if b == 0:
        return 0
    return a - b * _tdiv(a, b)


def _label(op: str, args: tuple) -> str:
    s = [fmt(a) if isinstance(a, Poly) else str(a) for a in args]
    if op == "mod":
        return f"({s[0]}) % {s[1]}"
    if op == "div":
        return f"({s[0]}) // {s[1]}"
    if op in ("min", "max"):
        return f"{op}({s[0]}, {s[1]})"
    if op == "read":
        return f"{s[0]}[{s[1]}]"
    return f"{op}({', '.join(s)})"


# ----------------------------------------------------------------------------------------
# Boolean element expressions (masks and scalar conditions).
# ("cmp", op, poly) means ``poly op 0`` with op in < <= == !=;
# ("and", (e, ...)), ("or", (e, ...)), ("not", e), ("const", bool), ("opaque", name).

TRUE = ("const", True)
FALSE = ("const", False)


def cmp(op: str, lhs: Poly, rhs: Poly):
    """``lhs op rhs`` for op in < <= > >= == != as a normalised BoolExpr."""
    if op == ">":
        op, lhs, rhs = "<", rhs, lhs
    elif op == ">=":
        op, lhs, rhs = "<=", rhs, lhs
    d = lhs - rhs
    c = d.const_value()
    if c is not None:
        return ("const", {"<": c < 0, "<=": c <= 0, "==": c == 0, "!=": c != 0}[op])
    return ("cmp", op, d)


def b_and(*es):
    out = []
    for e in es:
        if e is None or e == TRUE:
            continue
        if e == FALSE:
            return FALSE
        if e[0] == "and":
            out.extend(x for x in e[1] if x not in out)
        elif e not in out:
            out.append(e)
    if not out:
        return TRUE
    return out[0] if len(out) == 1 else ("and", tuple(out))


def b_or(*es):
    out = []
    for e in es:
        if e == FALSE:
            continue
        if e == TRUE:
            return TRUE
        if e[0] == "or":
            out.extend(x for x in e[1] if x not in out)
        elif e not in out:
            out.append(e)
    if not out:
        return FALSE
    return out[0] if len(out) == 1 else ("or", tuple(out))


def b_not(e):
    if e[0] == "const":
        return ("const", not e[1])
    if e[0] == "not":
        return e[1]
    if e[0] == "cmp":
        op, p = e[1], e[2]
        if op == "<":
            return ("cmp", "<=", -p)
        if op == "<=":
            return ("cmp", "<", -p)
        if op == "==":
            return ("cmp", "!=", p)
        if op == "!=":
            return ("cmp", "==", p)
    return ("not", e)


def b_map(e, f: Callable[[Poly], Poly]):
    """Apply ``f`` to every polynomial inside a BoolExpr."""
    t = e[0]
    if t == "cmp":
        return cmp(e[1], f(e[2]), ZERO)
    if t == "and":
        return b_and(*(b_map(x, f) for x in e[1]))
    if t == "or":
        return b_or(*(b_map(x, f) for x in e[1]))
    if t == "not":
        return b_not(b_map(e[1], f))
    return e


def b_polys(e) -> list[Poly]:
    t = e[0]
    if t == "cmp":
        return [e[2]]
    if t in ("and", "or"):
        return [p for x in e[1] for p in b_polys(x)]
    if t == "not":
        return b_polys(e[1])
    return []


def conjuncts(e) -> list:
    if e is None:
        return []
    if e[0] == "and":
        return list(e[1])
    return [e]


def b_fmt(e, names=None, limit: int | None = None) -> str:
    """Readable form of a BoolExpr; ``limit`` caps the terms of each side (see ``fmt``)."""
    t = e[0]
    if t == "const":
        return str(e[1])
    if t == "cmp":
        p = e[2]
        pos = Poly({m: c for m, c in p.terms.items() if c > 0})
        neg = Poly({m: -c for m, c in p.terms.items() if c < 0})
        return f"{fmt(pos, names, limit)} {e[1]} {fmt(neg, names, limit)}"
    if t == "and":
        return " & ".join(f"({b_fmt(x, names, limit)})" for x in e[1])
    if t == "or":
        return " | ".join(f"({b_fmt(x, names, limit)})" for x in e[1])
    if t == "not":
        return f"~({b_fmt(e[1], names, limit)})"
    return str(e[1])


def b_eval(e, ev: Callable[[Poly], int]) -> bool | None:
    t = e[0]
    if t == "const":
        return e[1]
    if t == "cmp":
        v = ev(e[2])
        if type(v) is int:
            # hot in the grid checks (every lane); the table below, which evaluates all four
            # comparisons, stays for other values (None raises TypeError there)
            op = e[1]
            if op == "<":
                return v < 0
            if op == "<=":
                return v <= 0
            if op == "==":
                return v == 0
            if op == "!=":
                return v != 0
        return {"<": v < 0, "<=": v <= 0, "==": v == 0, "!=": v != 0}[e[1]]
    if t == "and":
        vals = [b_eval(x, ev) for x in e[1]]
        if False in vals:
            return False
        return None if None in vals else True
    if t == "or":
        vals = [b_eval(x, ev) for x in e[1]]
        if True in vals:
            return True
        return None if None in vals else False
    if t == "not":
        v = b_eval(e[1], ev)
        return None if v is None else not v
    return None


# ----------------------------------------------------------------------------------------
# Tags and pads.


@dataclass(frozen=True)
class Tag:
    """The logical coordinate ``dim`` of tensor ``tensor`` an element came from, as a Poly
    over the value's index variables, program ids and loop counters."""

    tensor: str
    coord: Poly
    line: int  # 0-based line of the load that created it


# The value masked-off lanes hold: a float (0.0, -inf, ...), or one of these markers.
FINITE = "finite"  # some finite value (e.g. 0 - m)
POSITIVE = "positive"  # finite and > 0 (e.g. exp(finite))
UNKNOWN = "unknown"
# no `other=`: Triton leaves masked-off lanes undefined (whatever the registers held); any
# arithmetic keeps them undefined, only a select (`tl.where`, `* mask`) replaces them
UNDEF = "undefined"


@dataclass(frozen=True)
class Pad:
    """Masked lanes of load ``load_id`` (mask ``mask`` over the value's index variables)
    hold ``value`` here; ``steps`` are the lines the padding flowed through."""

    load_id: int
    value: Any
    mask: Any
    line: int
    other_src: str
    steps: tuple = ()


@dataclass(frozen=True)
class Risk:
    """An int32 product (``a * b``) that flows into this value; see KS110."""

    poly: Poly
    line: int
    col: int
    end_col: int
    left: str  # source text of the left operand
    right: str
    pid_name: str | None = None  # variable bound to tl.program_id whose widening fixes it
    # a product of a program id of axis 1/2 or of a tile (``rows[:, None] * stride``): only
    # reported against a known grid (``#@ grid`` or the launch site), see checks.py
    needs_grid: bool = False
    shape: tuple = ()  # the product's tile shape (its index variables %k range over it)


# ----------------------------------------------------------------------------------------


class V:
    """One abstract value.

    kind: ``int`` (poly = value; None if not modelled), ``bool`` (mask), ``ptr`` (base
    parameter + poly = element offset), ``data`` (floats / loaded values; poly = the read, when
    used as an index), ``const`` (a Python constant: float, str, None, bool), ``dtype``,
    ``blockptr``, ``desc``, ``tuple``, ``module``, ``func``, ``unknown``.
    """

    __slots__ = ("kind", "shape", "poly", "mask", "base", "width", "dtype", "tags", "pads",
                 "risks", "loads", "const", "extra", "why")

    def __init__(self, kind: str, shape: tuple = (), poly: Poly | None = None, mask=None,
                 base: str | None = None, width: int = 32, dtype: str | None = None,
                 tags: dict | None = None, pads: tuple = (), risks: tuple = (),
                 loads: frozenset = frozenset(), const: Any = None, extra: dict | None = None,
                 why: str | None = None):
        self.kind = kind
        self.shape = shape
        self.poly = poly
        self.mask = mask
        self.base = base
        self.width = width
        self.dtype = dtype
        self.tags = tags or {}
        self.pads = pads
        self.risks = risks
        self.loads = loads
        self.const = const
        self.extra = extra
        self.why = why

    def copy(self, **kw) -> "V":
        v = V(self.kind, self.shape, self.poly, self.mask, self.base, self.width, self.dtype,
              self.tags, self.pads, self.risks, self.loads, self.const, self.extra, self.why)
        for k, x in kw.items():
            setattr(v, k, x)
        return v

    @property
    def is_tile(self) -> bool:
        return bool(self.shape)

    def __repr__(self) -> str:
        bits = [self.kind, str(self.shape)]
        if self.poly is not None:
            bits.append(fmt(self.poly))
        if self.base:
            bits.append(f"base={self.base}")
        if self.mask is not None:
            bits.append(b_fmt(self.mask))
        if self.tags:
            bits.append("tags=" + ",".join(f"{d}:{t.tensor}={fmt(t.coord)}"
                                           for d, t in self.tags.items()))
        return "V(" + " ".join(bits) + ")"


def unknown(why: str, shape: tuple = ()) -> V:
    return V("unknown", shape=shape, why=why)


def int_const(c: int) -> V:
    return V("int", poly=Poly.const(c))


SENTINEL = 1e9


def pad_value_ok(value: Any, reduction: str) -> bool | None:
    """Is ``value`` the identity of ``reduction``? None when not known."""
    if value == UNDEF:
        return False  # undefined lanes are never neutral
    if reduction == "dot":
        # a zero lane contributes a * 0 = 0 to the contraction; other fills are not judged
        return True if isinstance(value, float) and value == 0.0 else None
    if value == UNKNOWN:
        return None
    # a fill at or beyond an integer type's extreme (-2^31, -2^63, -1e38) is a deliberate
    # sentinel: neutral for every value the tensor can hold
    if reduction in ("max", "argmax", "lse"):
        return isinstance(value, float) and value <= -SENTINEL
    if reduction in ("min", "argmin"):
        return isinstance(value, float) and value >= SENTINEL
    if reduction == "sum":
        return isinstance(value, float) and value == 0.0
    return None


def pad_apply(op: str, a: Any, b: Any) -> Any:
    """Abstract arithmetic on lane values: floats, FINITE, POSITIVE, UNKNOWN.

    ``b`` is the other operand's value in these lanes (FINITE when it is an ordinary value).
    UNDEF (undefined lanes) wins over everything: ``undef * 0`` is NaN for an infinite lane.
    """
    if a == UNDEF or b == UNDEF:
        return UNDEF
    if a == UNKNOWN or b == UNKNOWN:
        return UNKNOWN
    fa, fb = isinstance(a, float), isinstance(b, float)
    if fa and fb:
        try:
            return float({"+": a + b, "-": a - b, "*": a * b,
                          "/": a / b if b else UNKNOWN}[op]) if op in "+-*/" else UNKNOWN
        except (TypeError, ValueError, ZeroDivisionError):
            return UNKNOWN
    inf = fa and math.isinf(a) or fb and math.isinf(b)
    if op in ("+", "-"):
        if inf:
            if fa and math.isinf(a):
                return a
            return -b if op == "-" else b
        return FINITE
    if op == "*":
        if (fa and a == 0.0 and not (fb and math.isinf(b))) or (fb and b == 0.0 and not
                                                               (fa and math.isinf(a))):
            return 0.0
        if inf:
            return UNKNOWN
        return FINITE
    if op == "/":
        if fa and a == 0.0:
            return 0.0
        return UNKNOWN if inf else FINITE
    return UNKNOWN


def pad_unary(fn: str, a: Any) -> Any:
    if a == UNDEF:
        return UNDEF
    if a == UNKNOWN:
        return UNKNOWN
    if fn in ("exp", "exp2"):
        if a == -math.inf:
            return 0.0
        if isinstance(a, float) and math.isfinite(a) and abs(a) < 80:
            return math.exp(a) if fn == "exp" else 2.0 ** a
        if isinstance(a, float) and math.isinf(a):
            return UNKNOWN
        return POSITIVE if not isinstance(a, float) or math.isfinite(a) else UNKNOWN
    if fn == "neg":
        if isinstance(a, float):
            return -a
        return FINITE
    if fn in ("abs",):
        if isinstance(a, float):
            return abs(a)
        return FINITE
    if fn == "cast":
        return a
    if isinstance(a, float) and a == 0.0 and fn in ("sin", "tanh", "sqrt", "relu"):
        return 0.0
    return UNKNOWN
