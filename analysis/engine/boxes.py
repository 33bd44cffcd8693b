"""Concrete evaluation of the access log for the grid-level checks (``grid.py``).

At concrete sizes, program ids and loop iterations, an access touches a *box*: for each
logical coordinate, the sorted values its enabled lanes reach. ``_box`` builds it (linear
coordinates and one-axis mask conjuncts arithmetically; other tiles lane by lane, at most
``MAX_LANES`` lanes); ``_find_hole`` and ``_find_race`` answer coverage and races over the
boxes of a whole grid. Values read from memory and unknown integers raise ``_Unknown``.
"""
from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass

from .access import Access
from .interp import Interp
from .poly import Poly
from .render import element_of
from .values import b_eval, b_polys, conjuncts

MAX_LANES = 1 << 14


class _Unknown(Exception):
    """A quantity the enumeration cannot evaluate (a memory read, an unknown integer)."""



@dataclass
class _Box:
    """What one access touches in one program and iteration: per coordinate, the values its
    unmasked lanes reach (``axes``: sorted lists), or explicit coordinate tuples (``points``)
    when the tile is not a product of per-coordinate sets."""

    pid: tuple
    iters: dict
    axes: list | None = None
    points: set | None = None
    acc: Access | None = None

    def empty(self) -> bool:
        if self.points is not None:
            return not self.points
        return any(not a for a in self.axes)

    def contains(self, elem: tuple) -> bool:
        if self.points is not None:
            return elem in self.points
        return all(e in _AxisSet.of(a) for e, a in zip(elem, self.axes))

    def first(self) -> tuple:
        if self.points is not None:
            return min(self.points)
        return tuple(a[0] for a in self.axes)


class _AxisSet:
    _cache: dict = {}

    @staticmethod
    def of(values: list) -> set:
        key = id(values)
        hit = _AxisSet._cache.get(key)
        if hit is None or hit[0] is not values:
            hit = (values, set(values))
            _AxisSet._cache[key] = hit
            if len(_AxisSet._cache) > 4096:
                _AxisSet._cache.clear()
                _AxisSet._cache[key] = hit
        return hit[1]


class _Evaluator:
    """Concrete evaluation of Polys under an environment (sizes, constexprs, program ids,
    loop counters and, per lane, tile index variables); memory reads and unknown integers
    raise ``_Unknown``. Opaque terms that do not depend on the lane are cached."""

    def __init__(self, it: Interp, env: dict):
        self.it = it
        self.terms = it.terms
        self.env = env
        self.memo: dict[str, int] = {}
        self._split: dict[Poly, tuple] = {}  # see lane_poly
        self._lane_dep: dict[str, bool] = it.__dict__.setdefault("_grid_lane_dep", {})

    def lane_dep(self, a: str) -> bool:
        hit = self._lane_dep.get(a)
        if hit is None:
            hit = any(x[0] == "%" for x in self.terms.deep_atoms(Poly.atom(a)))
            self._lane_dep[a] = hit
        return hit

    def atom(self, a: str, lane: dict | None) -> int:
        v = self.env.get(a)
        if v is not None:
            return v
        if a[0] == "%":
            if lane is None or a not in lane:
                raise _Unknown(a)
            return lane[a]
        if a[0] == "{":
            dep = self.lane_dep(a)
            if not dep:
                hit = self.memo.get(a)
                if hit is not None:
                    return hit
            op, args = self.terms.defs.get(a, ("?", ()))
            if op not in ("mod", "div", "min", "max"):
                raise _Unknown(a)
            vals = [self.poly(x, lane) for x in args if isinstance(x, Poly)]
            if op == "mod":
                r = _tmod(vals[0], vals[1])
            elif op == "div":
                r = _tdiv(vals[0], vals[1])
            elif op == "min":
                r = min(vals)
            else:
                r = max(vals)
            if not dep:
                self.memo[a] = r
            return r
        raise _Unknown(a)

    def lane_poly(self, p: Poly, lane: dict) -> int:
        """``poly(p, lane)`` for loops over the lanes of one environment (which must not
        change while this evaluator is used): the monomials that do not depend on the lane
        are summed once per Poly. Integer arithmetic is exact, so the order does not matter,
        and ``_Unknown`` is raised exactly when ``poly`` would raise it."""
        split = self._split.get(p)
        if split is None:
            env = self.env
            fixed = 0
            dyn = []
            for m, c in p.terms.items():
                v = c
                lane_atoms = []
                for a in m:
                    x = env.get(a)
                    if x is not None:
                        v *= x
                    elif a[0] == "%" or (a[0] == "{" and self.lane_dep(a)):
                        lane_atoms.append(a)
                    else:
                        v *= self.atom(a, None)
                if lane_atoms:
                    dyn.append((v, lane_atoms))
                else:
                    fixed += v
            split = self._split[p] = (fixed, dyn)
        total, dyn = split
        for v, atoms in dyn:
            for a in atoms:
                v *= self.atom(a, lane)
            total += v
        return total

    def poly(self, p: Poly, lane: dict | None = None) -> int:
        # hot (every lane of every box): atoms bound in env are looked up inline
        env = self.env
        total = 0
        for m, c in p.terms.items():
            v = c
            for a in m:
                x = env.get(a)
                v *= x if x is not None else self.atom(a, lane)
            total += v
        return total


def _tdiv(a: int, b: int) -> int:
    if b == 0:
        raise _Unknown("division by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _tmod(a: int, b: int) -> int:
    return a - b * _tdiv(a, b)


def _box(it: Interp, acc: Access, coords: list[Poly], env: dict) -> _Box | None:
    """The box of ``acc`` under a full scalar environment; None when not evaluable."""
    ev = _Evaluator(it, env)
    shape = acc.shape
    for gexpr in acc.guards:
        try:
            g = b_eval(gexpr, ev.poly)
        except _Unknown:
            return None
        if g is None:
            return None
        if not g:
            return _Box((), {}, axes=[[] for _ in coords])
    allowed = [list(range(n)) for n in shape]
    multi = []
    for c in conjuncts(acc.mask):
        if c[0] == "opaque":
            return None
        vs = set()
        for p in b_polys(c):
            vs |= _ivars(it, p)
        if not vs:
            try:
                r = b_eval(c, ev.poly)
            except _Unknown:
                return None
            if r is None:
                return None
            if not r:
                return _Box((), {}, axes=[[] for _ in coords])
        elif len(vs) == 1:
            (k,) = vs
            if k >= len(shape):
                return None
            name = f"%{k}"
            try:
                lin = _linear(it, c[2], k, ev) if c[0] == "cmp" else None
                if lin is not None:
                    keep = _keep_linear(allowed[k], lin[0], lin[1], c[1])
                else:
                    keep = []
                    for x in allowed[k]:
                        r = b_eval(c, lambda p: ev.poly(p, {name: x}))
                        if r is None:
                            return None
                        if r:
                            keep.append(x)
            except _Unknown:
                return None
            allowed[k] = keep
        else:
            multi.append(c)
    coord_vars = [_ivars(it, c) for c in coords]
    product = not multi and all(len(v) <= 1 for v in coord_vars)
    used = [next(iter(v)) for v in coord_vars if len(v) == 1]
    if product and len(used) != len(set(used)):
        product = False
    if product:
        axes = []
        try:
            for c, vs in zip(coords, coord_vars):
                if not vs:
                    axes.append([ev.poly(c)])
                    continue
                (k,) = vs
                lin = _linear(it, c, k, ev)
                if lin is not None:
                    axes.append(_linear_axis(allowed[k], lin[0], lin[1]))
                    continue
                name = f"%{k}"
                axes.append(sorted({ev.poly(c, {name: x}) for x in allowed[k]}))
        except _Unknown:
            return None
        # a tile axis whose lanes are all masked off empties the box even when no coordinate
        # uses it
        if any(not allowed[k] for k in range(len(shape))):
            axes = [[] for _ in coords]
        return _Box((), {}, axes=axes)
    n = 1
    for a in allowed:
        n *= len(a)
    if n > MAX_LANES:
        return None
    fast = _affine_points(it, ev, allowed, multi, coords)
    if fast is not None:
        return _Box((), {}, points=fast)
    pts = set()
    try:
        for lane_vals in itertools.product(*allowed):
            lane = {f"%{k}": x for k, x in enumerate(lane_vals)}
            ok = True
            for c in multi:
                r = b_eval(c, lambda p: ev.lane_poly(p, lane))
                if r is None:
                    return None
                if not r:
                    ok = False
                    break
            if ok:
                pts.add(tuple(ev.lane_poly(c, lane) for c in coords))
    except _Unknown:
        return None
    return _Box((), {}, points=pts)


_CMP = {"<": lambda v: v < 0, "<=": lambda v: v <= 0, "==": lambda v: v == 0,
        "!=": lambda v: v != 0}


def _linear_axis(xs: list[int], a: int, b: int) -> list[int]:
    """The ascending values of ``a * x + b`` over the ascending lanes ``xs`` (duplicates
    only for ``a = 0``, which keeps one)."""
    if not xs:
        return []
    if a == 0:
        return [b]
    lo, hi = xs[0], xs[-1]
    if hi - lo + 1 == len(xs):  # contiguous lanes (the usual mask): an arithmetic range
        if a > 0:
            return list(range(a * lo + b, a * hi + b + 1, a))
        return list(range(a * hi + b, a * lo + b + 1, -a))
    if a > 0:
        return [a * x + b for x in xs]
    return sorted({a * x + b for x in xs})


def _affine(it: Interp, p: Poly, ev: "_Evaluator", nvars: int):
    """``p = b + sum_k a_k * %k`` with lane-independent ``a_k``, ``b``: ``(b, [a_0, a_1,
    ...])`` evaluated, or None (nonlinear in the lanes, an index inside an opaque term, or a
    coefficient that cannot be evaluated)."""
    cache = it.__dict__.setdefault("_grid_affine", {})
    split = cache.get(p, False)
    if split is False:
        split = None
        rest = p
        coefs = []
        for k in range(nvars):
            name = f"%{k}"
            q = rest.coefficient_of(name)
            if q is None or _ivars(it, q):
                break
            coefs.append(q)
            rest = rest.without_atom(name)
        else:
            if not _ivars(it, rest):
                split = (rest, coefs)
        cache[p] = split
    if split is None:
        return None
    try:
        return ev.poly(split[0]), [ev.poly(q) for q in split[1]]
    except _Unknown:
        return None


def _affine_points(it: Interp, ev: "_Evaluator", allowed: list, multi: list,
                   coords: list[Poly]) -> set | None:
    """The coordinate tuples of the enabled lanes when every coordinate and every remaining
    mask conjunct (``cmp`` only) is affine in the lanes: integer arithmetic per lane instead
    of evaluating polynomials. None when that does not apply (the caller goes lane by lane,
    which also reports what cannot be evaluated)."""
    n = len(allowed)
    if any(not a for a in allowed):
        return None
    aff_coords = []
    for c in coords:
        a = _affine(it, c, ev, n)
        if a is None:
            return None
        aff_coords.append(a)
    conds = []
    for c in multi:
        if c[0] != "cmp":
            return None
        a = _affine(it, c[2], ev, n)
        if a is None:
            return None
        conds.append((_CMP[c[1]], a[0], a[1]))
    pts = set()
    for lane_vals in itertools.product(*allowed):
        ok = True
        for test, b, coefs in conds:
            v = b
            for x, q in zip(lane_vals, coefs):
                v += q * x
            if not test(v):
                ok = False
                break
        if ok:
            elem = []
            for b, coefs in aff_coords:
                v = b
                for x, q in zip(lane_vals, coefs):
                    v += q * x
                elem.append(v)
            pts.add(tuple(elem))
    return pts


def _keep_linear(values: list[int], a: int, b: int, op: str) -> list[int]:
    """The ``x`` of the ascending list ``values`` with ``a * x + b op 0`` (op in ``< <= ==
    !=``), found by bisecting at the bound instead of testing lane by lane (tiles of 16k
    lanes are masked this way once per program and iteration)."""
    if a == 0:
        return list(values) if _CMP[op](b) else []
    if op == "<" or op == "<=":
        # a*x + b < 0  <=>  a*x <= -b - 1 ;  a*x + b <= 0  <=>  a*x <= -b
        rhs = -b - 1 if op == "<" else -b
        if a > 0:
            return values[:bisect.bisect_right(values, rhs // a)]
        # a < 0: a*x <= rhs  <=>  x >= ceil(rhs / a)
        return values[bisect.bisect_left(values, _ceil_div(rhs, a)):]
    exact = (-b) % a == 0
    x0 = (-b) // a
    i = bisect.bisect_left(values, x0)
    present = exact and i < len(values) and values[i] == x0
    if op == "==":
        return [x0] if present else []
    if op == "!=":
        return values[:i] + values[i + 1:] if present else list(values)
    return [x for x in values if _CMP[op](a * x + b)]


def _ceil_div(n: int, d: int) -> int:
    return -((-n) // d)


def _linear(it: Interp, p: Poly, k: int, ev: "_Evaluator") -> tuple[int, int] | None:
    """``p = a * %k + b`` with ``a``, ``b`` free of tile index variables: (a, b) evaluated."""
    cache = it.__dict__.setdefault("_grid_linear", {})
    key = (p, k)
    split = cache.get(key, False)
    if split is False:
        name = f"%{k}"
        q = p.coefficient_of(name)
        split = None
        if q is not None:
            rest = p.without_atom(name)
            if not _ivars(it, q) and not _ivars(it, rest):
                split = (q, rest)
        cache[key] = split
    if split is None:
        return None
    return ev.poly(split[0]), ev.poly(split[1])


def _ivars(it: Interp, p: Poly) -> set[int]:
    """``it.terms.index_vars(p)``, cached per interpreter (polys are immutable)."""
    cache = it.__dict__.setdefault("_grid_ivars", {})
    hit = cache.get(p)
    if hit is None:
        hit = cache[p] = it.terms.index_vars(p)
    return hit


def _lane_of(it: Interp, acc: Access, coords: list[Poly], env: dict, elem: tuple):
    """A lane of ``acc`` whose coordinates are ``elem`` (ignoring the mask), and whether the
    mask lets it through; None when no lane has them."""
    ev = _Evaluator(it, env)
    shape = acc.shape
    per_var: dict[int, set] = {}
    for c, want in zip(coords, elem):
        vs = it.terms.index_vars(c)
        if not vs:
            if ev.poly(c) != want:
                return None
            continue
        if len(vs) > 1:
            return None
        (k,) = vs
        hits = {x for x in range(shape[k]) if ev.poly(c, {f"%{k}": x}) == want}
        per_var[k] = per_var[k] & hits if k in per_var else hits
        if not per_var[k]:
            return None
    lane = {f"%{k}": min(per_var.get(k, {0})) for k in range(len(shape))}
    mask_ok = True
    if acc.mask is not None:
        try:
            mask_ok = bool(b_eval(acc.mask, lambda p: ev.poly(p, lane)))
        except _Unknown:
            mask_ok = True
    return element_of(it, lane, len(shape)), mask_ok


def _find_race(boxes: list[_Box], sizes: list[int] | None):
    """Two boxes of different programs sharing an element inside the extent (or anywhere when
    the extent is unknown): (box1, box2, element) or None. Sweep over the first coordinate."""
    def clip(b: _Box):
        if b.points is not None:
            pts = b.points if sizes is None else {p for p in b.points
                                                  if all(0 <= x < s for x, s in zip(p, sizes))}
            return None, pts
        axes = b.axes if sizes is None else [[x for x in a if 0 <= x < s]
                                             for a, s in zip(b.axes, sizes)]
        return axes, None

    items = []
    for b in boxes:
        axes, pts = clip(b)
        if axes is not None:
            if any(not a for a in axes):
                continue
            items.append((axes[0][0], axes[0][-1], b, axes, None))
        else:
            if not pts:
                continue
            lo = min(p[0] for p in pts)
            hi = max(p[0] for p in pts)
            items.append((lo, hi, b, None, pts))
    items.sort(key=lambda x: x[0])
    active: list = []
    for item in items:
        lo = item[0]
        active = [a for a in active if a[1] >= lo]
        for other in active:
            if other[2].pid == item[2].pid:
                continue
            elem = _intersect(other, item)
            if elem is not None:
                return other[2], item[2], elem
        active.append(item)
    return None


def _intersect(a, b):
    _, _, _, axes_a, pts_a = a
    _, _, _, axes_b, pts_b = b
    if axes_a is not None and axes_b is not None:
        elem = []
        for x, y in zip(axes_a, axes_b):
            if x[-1] < y[0] or y[-1] < x[0]:
                return None
            common = _AxisSet.of(x) & _AxisSet.of(y) if len(x) < len(y) else \
                _AxisSet.of(y) & _AxisSet.of(x)
            if not common:
                return None
            elem.append(min(common))
        return tuple(elem)
    if pts_a is None:
        axes_a, pts_a, axes_b, pts_b = axes_b, pts_b, axes_a, pts_a
    # a has points
    if pts_b is not None:
        common = pts_a & pts_b
        return min(common) if common else None
    for p in sorted(pts_a):
        if all(x in _AxisSet.of(ax) for x, ax in zip(p, axes_b)):
            return p
    return None


def _find_hole(boxes: list[_Box], sizes: list[int]) -> tuple | None:
    """The first element of the extent ``sizes`` (row-major) that no box covers."""
    total = 1
    for s in sizes:
        total *= s
    mark = bytearray(total)
    strides = []
    acc = 1
    for s in reversed(sizes):
        strides.append(acc)
        acc *= s
    strides.reverse()
    last = len(sizes) - 1
    for b in boxes:
        if b.points is not None:
            for p in b.points:
                if all(0 <= x < s for x, s in zip(p, sizes)):
                    mark[sum(x * st for x, st in zip(p, strides))] = 1
            continue
        axes = [[x for x in a if 0 <= x < s] for a, s in zip(b.axes, sizes)]
        if any(not a for a in axes):
            continue
        tail = axes[last]
        contiguous = tail[-1] - tail[0] + 1 == len(tail)
        for head in itertools.product(*axes[:last]):
            base = sum(x * st for x, st in zip(head, strides))
            if contiguous:
                mark[base + tail[0]: base + tail[-1] + 1] = b"\x01" * len(tail)
            else:
                for x in tail:
                    mark[base + x] = 1
    i = mark.find(0)
    if i < 0:
        return None
    elem = []
    for st in strides:
        elem.append(i // st)
        i %= st
    return tuple(elem)
