"""The z3 layer: turns Polys and BoolExprs into z3 terms, adds the domains of every atom, and
answers satisfiability queries within ``config.solver_timeout_ms``.

A query asks for values that make a *violation* true. ``sat`` = refuted (the model is the
counterexample), ``unsat`` = proved, ``unknown`` (timeout, nonlinear give-up) = unproved: an
information, never an error. z3 is imported lazily (first query), so files whose obligations
are all settled by the cheap syntactic fast paths never load it.
"""
from __future__ import annotations

import threading
import time
from functools import partial
import weakref

from dataclasses import dataclass, field
from typing import Any, Iterable

from .poly import Poly
from .values import Terms, b_polys

INT32_MAX = 2 ** 31 - 1
# Serialises every use of z3 (see SolverContext.query).
_Z3_LOCK = threading.RLock()

# Hardware limits of the launch grid: axis 0 up to 2^31 - 1 programs, axes 1 and 2 up to 65535.
PID_LIMIT = {0: INT32_MAX, 1: 65535, 2: 65535}
# Queries with nonlinear terms (products of run-time atoms, division or remainder by a
# run-time value) rarely finish; they get this fraction of the per-query time limit.
# z3 resource units allowed per millisecond of solver_timeout_ms: measured about 22 million
# units/s on a loaded 2-core CI machine, so 10,000/ms binds at about half the wall-clock limit.
RLIMIT_PER_MS = 10_000
# The wall-clock timeout of a query is this many times its time limit (see _query).
WALL_GUARD = 1
HARD_DIVISOR = 2
# Naming the program of a program-independent witness (SolverContext._program_ids) is done by
# concrete samples only, at most this much CPU per context: a z3 query per finding for it
# raised the corpus p95 by about 10 ms (benchmarks/bench_analysis.py).
REFINE_BUDGET_S = 0.01
# Bounds tried first when a violation exists, so that counterexamples use readable sizes.
SMALL = {"param": 4096, "pid": 64, "iter": 16}


@dataclass
class Loop:
    """An enclosing loop: ``var = lo + atom * step`` for ``atom`` in ``0 .. trips-1``.

    ``hi`` None means unbounded (while loops, unknown bounds). ``step`` may be symbolic;
    its sign is taken from its constant value when known, else assumed positive.
    """

    var: str
    atom: str
    lo: Poly
    hi: Poly | None
    step: Poly
    line: int
    kind: str = "range"


@dataclass
class Domain:
    """Where the atoms of a query live: the tile shape of the index variables, the loops
    around the program point and its path conditions (scalar BoolExprs)."""

    shape: tuple = ()
    loops: list = field(default_factory=list)
    guards: list = field(default_factory=list)


@dataclass
class Result:
    status: str  # "sat" | "unsat" | "unknown"
    model: dict[str, int] = field(default_factory=dict)
    reads: dict[tuple, int] = field(default_factory=dict)
    method: str = "smt"  # "enumeration" when a concrete sample found the violation
    # () -> {pid atom: value} or None: program ids completing the model (see query)
    refine: Any = field(default=None, compare=False, repr=False)


def _refine(ctx_ref, conds: tuple, dom: "Domain", res_ref) -> dict | None:
    ctx, res = ctx_ref(), res_ref()
    if ctx is None or res is None:
        return None
    return ctx._program_ids(conds, dom, res)


class SolverContext:
    """Per-kernel-case solver: atom kinds, constexpr values, assumptions, grid bounds.

    Args:
        terms: the opaque-term registry of the interpreter.
        consts: constexpr name -> concrete int of this case.
        params: runtime integer parameter names (sizes, strides), each ``0 <= p <= max_size``.
        assumptions: BoolExprs over params/constexprs that hold everywhere (``#@ assume``).
        pid_bounds: axis -> exclusive upper bound Poly (from ``#@ grid`` or a launch site).
        timeout_ms: per-query z3 time limit.
    """

    def __init__(self, terms: Terms, consts: dict[str, int], params: Iterable[str],
                 assumptions: list, pid_bounds: dict[int, Poly], timeout_ms: int,
                 max_size: int = INT32_MAX):
        self.terms = terms
        self.consts = consts
        self.params = set(params)
        self.assumptions = list(assumptions)
        self.pid_bounds = pid_bounds
        self.timeout_ms = max(1, int(timeout_ms))
        self.max_size = max_size
        self.queries = 0
        self.seconds = 0.0
        self._conv = None
        self._z3ctx = None
        self.timeouts = 0  # queries that ran out of time: later ones get less
        self.sampled = 0  # queries answered by a concrete sample before z3
        self.budget_s: float | None = None  # total z3 seconds allowed for the kernel
        self._assume_z3: list = []
        self.deadline: float | None = None
        # (BoolExpr, universal atoms, [(read base, atom, constant)]) from #@ assume
        self.templates: list = []
        self.shared_with: list = []  # contexts of earlier cases of the same kernel
        self._cache: dict[Any, Result] = {}
        self._assume_lanes: bool | None = None  # do assumptions mention index variables
        self.refine_seconds = 0.0  # CPU spent naming programs of witnesses (_program_ids)

    # -- public ---------------------------------------------------------------------------
    def release(self) -> None:
        """Drop the z3 terms this context built, under the z3 lock.

        Freeing a z3 term calls into z3 (``Z3_dec_ref`` on the shared main context); done by
        whichever thread happens to drop the last reference (or runs the cyclic garbage
        collector) while another thread is inside a query, it corrupted z3's state and
        crashed the server (SIGSEGV, seen in CI under the protocol fuzzer). The engine calls
        this when a kernel's analysis ends; ``__del__`` is the fallback. Idempotent.
        """
        with _Z3_LOCK:
            conv, self._conv = self._conv, None
            assumed, self._assume_z3 = self._assume_z3, []
            if conv is not None:
                conv.clear()
            del conv, assumed

    def __del__(self):
        if self._conv is not None or self._assume_z3:
            try:
                self.release()
            except Exception:  # interpreter shutdown: z3 and the lock may be gone
                pass

    def query(self, conds: list, dom: Domain, small_first: bool = True,
              extra_atoms: Iterable[str] = ()) -> Result:
        """Find atom values satisfying every BoolExpr in ``conds`` within ``dom``.

        A ``sat`` answer whose model names no program id although the unsliced question
        mentions one (a K-tail lane fails in every program) carries ``refine``: called when
        a finding's counterexample is built, it returns program ids that complete the same
        model (its other values pinned), so the witness names a program as promised.
        """
        res = self._query_cached(conds, dom, small_first, extra_atoms)
        if res.status == "sat" and res.refine is None:
            # only a finding's counterexample calls it: nothing is computed here (most sat
            # answers are internal questions, and this runs for every one of them)
            # a weak reference: the context caches its results, and a result holding the
            # context would make every context garbage for the cyclic collector only (a
            # larger heap and longer collections, +20% per kernel on the corpus benchmark)
            res.refine = partial(_refine, weakref.ref(self), tuple(conds), dom, weakref.ref(res))
        return res

    def _program_ids(self, conds: tuple, dom: Domain, res: Result) -> dict | None:
        """Program ids that extend ``res``'s model to the whole question ``conds``: ``{}``
        when the question names no program id (every program fails alike), None when no
        concrete sample found them (the witness then names no program)."""
        if any(a.startswith("pid") for a in res.model):
            return None
        pids = sorted({a for e in list(conds) + list(dom.guards) for p in b_polys(e)
                       for a in self.terms.deep_atoms(p)
                       if a.startswith("pid") and a[3:].isdigit()})
        if not pids:
            return {}
        if self.refine_seconds > REFINE_BUDGET_S:
            return None
        t0 = time.thread_time()
        try:
            got = self._program_ids_by_sampling(conds, dom, res.model, pids)
        finally:
            self.refine_seconds += time.thread_time() - t0
        return got

    def _program_ids_by_sampling(self, conds: tuple, dom: Domain, model: dict,
                                 pids: list) -> dict | None:
        """Concrete program ids (and values for sizes the model left open) under which every
        condition, guard and assumption holds with ``model``'s values kept: the usual
        witnesses (program 0 with large enough sizes, the program a guard names) without a
        z3 query. None when no candidate fits or a term cannot be evaluated."""
        from itertools import product

        from .values import b_eval
        checks = list(conds) + list(dom.guards) + list(self.assumptions)
        free: set[str] = set()
        for e in checks:
            for p in b_polys(e):
                free |= {a for a in self.terms.deep_atoms(p) if a not in model and
                         a not in self.consts and a[0] not in "{?"}
        free -= set(pids)

        def pool(a: str) -> list[int]:
            if a[0] in "%@":
                return [0]  # what the counterexample shows for an index or loop it leaves out
            if a in self.params:
                return [4096, 64, 17, 2, 1, 100_000]
            return [64, 8, 16, 4, 128, 1]  # a constexpr without a value in this case: a block

        pid_values = [0, 1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 63, 64]
        pools = {a: pool(a) for a in sorted(free)}
        combos = [dict(zip(pids, vs)) for vs in
                  product(pid_values, repeat=len(pids))][:200]
        sizes = [{a: v[min(i, len(v) - 1)] for a, v in pools.items()} for i in range(6)]
        for pid_env in combos:
            for size_env in sizes:
                env = {**model, **pid_env, **size_env}
                look = lambda a: env[a] if a in env else int(self.consts.get(a, 0))
                ev = lambda q: self.terms.evaluate(q, look)
                try:
                    if not all(b_eval(c, ev) is True for c in checks):
                        continue
                    if any(bound is not None and f"pid{axis}" in env and
                           not env[f"pid{axis}"] < ev(bound)
                           for axis, bound in self.pid_bounds.items()):
                        continue
                except (KeyError, ZeroDivisionError, OverflowError, ValueError, TypeError):
                    return None
                return {**pid_env, **{a: v for a, v in size_env.items() if a[0] not in "%@"}}
        return None

    def _query_cached(self, conds: list, dom: Domain, small_first: bool,
                      extra_atoms: Iterable[str]) -> Result:
        """:meth:`query` without the program-id refinement.

        Conjuncts of ``conds`` and guards that share no atom (transitively) with the last
        condition (the violation) are dropped: they cannot change its satisfiability unless
        they are unsatisfiable on their own (an access whose mask is never true).
        Results are cached per kernel across constexpr cases, keyed by the conditions and
        the constexpr values they use.
        """
        conds, dom = self._slice(conds, dom)
        used: set[str] = set(extra_atoms)
        for e in list(conds) + list(dom.guards):
            for p in b_polys(e):
                used |= self.terms.deep_atoms(p)
        loops = tuple((l.atom, l.lo, l.hi, l.step) for l in dom.loops)
        for l in dom.loops:
            for p in (l.lo, l.step, l.hi):
                if p is not None:
                    used |= self.terms.deep_atoms(p)
        cvals = tuple(sorted((a, self.consts[a]) for a in used if a in self.consts))
        pid_axes = {int(a[3]) for a in used if a.startswith("pid") and a[3:4].isdigit()}
        bounds = tuple(sorted((ax, b) for ax, b in self.pid_bounds.items() if ax in pid_axes))
        key = (tuple(conds), dom.shape, loops, tuple(dom.guards), cvals, bounds,
               small_first, tuple(self.assumptions), id(self.templates) if self.templates
               else None)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        import time
        t0 = time.thread_time()
        out_of_time = (self.deadline is not None and t0 > self.deadline) or \
            (self.budget_s is not None and self.spent() > self.budget_s)
        if out_of_time:
            # concrete samples are cheap: still look for a violation, but prove nothing
            res = self._sample_only(conds, dom, extra_atoms) or Result("unknown")
            self._cache[key] = res
            return res
        # The tile shape enters a query only through the index variables it uses: the same
        # bound check of a scalar (a program id's row) at accesses of different tile shapes
        # is one problem. Only `unsat` is reused: it holds whatever the solver's history,
        # while a model (sat) or a give-up (unknown) may depend on it.
        lane_key = self._lane_key(key, used, dom)
        if lane_key is not None:
            hit = self._cache.get(lane_key)
            if hit is not None:
                self._cache[key] = hit
                return hit
        if conds and self._lane_bound_unsat(conds[-1], dom):
            res = Result("unsat")
            self._cache[key] = res
            if lane_key is not None:
                self._cache[lane_key] = res
            return res
        # z3's main context is not thread-safe: the server runs the full analysis on its
        # worker thread and the inferred-annotation quick fix verifies on another one;
        # two threads in z3 at once crashed the server (SIGSEGV) in the protocol fuzzer.
        # The exception is handled inside the lock: its traceback holds the query's z3
        # terms, whose release (Z3_dec_ref) is a z3 call too.
        with _Z3_LOCK:
            try:
                res = self._query(conds, dom, small_first, extra_atoms)
            except Exception:  # z3 exceptions (e.g. on exotic terms) mean "not proved"
                res = Result("unknown")
        self.seconds += time.thread_time() - t0
        self._cache[key] = res
        if lane_key is not None and res.status == "unsat":
            self._cache[lane_key] = res
        return res

    def _lane_bound_unsat(self, goal, dom: Domain) -> bool:
        """True when ``goal`` is a comparison of a polynomial that is linear in index
        variables (``%k``, each in ``[0, shape[k])``) over constexprs only, and no lane makes
        it hold (a tile index against a constexpr extent): z3 would answer ``unsat`` for any
        premises, so it is not asked."""
        if goal[0] != "cmp":
            return False
        lo = hi = 0
        for m, c in goal[2].terms.items():
            lane = None
            for a in m:
                x = self.consts.get(a)
                if isinstance(x, int):
                    c *= x
                elif lane is None and a[0] == "%" and a[1:].isdigit() \
                        and int(a[1:]) < len(dom.shape) and dom.shape[int(a[1:])] >= 1:
                    lane = dom.shape[int(a[1:])] - 1
                else:
                    return False
            if lane is None:
                lo += c
                hi += c
            elif c >= 0:
                hi += c * lane
            else:
                lo += c * lane
        op = goal[1]
        if op == "<":
            return lo >= 0
        if op == "<=":
            return lo > 0
        if op == "==":
            return lo > 0 or hi < 0
        if op == "!=":
            return lo == hi == 0
        return False

    def _lane_key(self, key: tuple, used: set[str], dom: Domain) -> tuple | None:
        """``key`` with the tile shape cut down to the axes of the index variables in
        ``used`` (both ways the solver reads an axis from a name), or None when assumptions
        or templates could bring other index variables into the query."""
        if self.templates:
            return None
        if self._assume_lanes is None:
            self._assume_lanes = any(a[0] == "%" for e in self.assumptions
                                     for p in b_polys(e) for a in self.terms.deep_atoms(p))
        if self._assume_lanes:
            return None
        axes: set[int] = set()
        for a in used:
            if a[0] == "%":
                axes.add(int(a[1:2]) if a[1:2].isdigit() else 0)
                if a[1:2].isdigit():
                    axes.add(int(_digits(a[1:])))
        shape = tuple((k, dom.shape[k] if k < len(dom.shape) else None) for k in sorted(axes))
        return ("lanes", shape) + key[:1] + key[2:]

    def spent(self) -> float:
        return self.seconds + sum(getattr(o, "seconds", 0.0) for o in self.shared_with)

    def _slice(self, conds: list, dom: Domain):
        from .values import conjuncts
        if not conds:
            return conds, dom
        goal = conds[-1]
        parts = [c for x in conds[:-1] for c in conjuncts(x)] + list(dom.guards)
        atoms_of_part = []
        for c in parts:
            a: set[str] = set()
            for p in b_polys(c):
                a |= self.terms.deep_atoms(p)
            atoms_of_part.append(a)
        rel: set[str] = set()
        for p in b_polys(goal):
            rel |= self.terms.deep_atoms(p)
        rel -= set(self.consts)
        keep = [False] * len(parts)
        changed = True
        while changed:
            changed = False
            for i, a in enumerate(atoms_of_part):
                if not keep[i] and (a - set(self.consts)) & rel:
                    keep[i] = True
                    rel |= a
                    changed = True
        kept = [c for c, k in zip(parts, keep) if k]
        guards = [g for g in dom.guards if g in kept]
        premise = [c for c in kept if c not in guards]
        loops = [l for l in dom.loops if l.atom in rel]
        return premise + [goal], Domain(dom.shape, loops, guards)

    # -- internals ------------------------------------------------------------------------
    def _sample(self, conds, dom: Domain, used: set[str]) -> Result | None:
        """Try a few concrete points (smallest values, small sizes, a couple of program ids
        and iterations) before z3: most violations show at the first or last lane of the
        first program with small sizes, and nonlinear queries that z3 gives up on are
        decided this way. None when no sample violates or an atom cannot be evaluated."""
        from .values import b_eval
        atoms = sorted(a for a in used if a[0] != "{" and a not in self.consts)
        if any(a[0] == "?" for a in atoms):
            return None
        for a in used:
            if a[0] == "{" and self.terms.defs.get(a, ("",))[0] in ("read", "uf", "where",
                                                                       "bits", "unknown"):
                return None

        def choices(a: str) -> list[int]:
            if a[0] == "%":
                k = int(a[1:2]) if a[1:2].isdigit() else 0
                n = dom.shape[k] if k < len(dom.shape) else 1
                return [0, n - 1, 1] if n > 1 else [0]
            if a.startswith("pid"):
                return [0, 1, 2]
            if a[0] == "@":
                return [0, 1, 2]
            # small, non-degenerate sizes (a size of 1 makes strides coincide): replayable
            return [64, 17, 2, 100, 1]

        pools = {a: choices(a) for a in atoms}
        points = []
        for i in range(5):
            points.append({a: v[min(i, len(v) - 1)] for a, v in pools.items()})
        import random
        rng = random.Random(len(atoms) * 7919 + len(conds))
        for _ in range(12):
            points.append({a: rng.choice(v) for a, v in pools.items()})
        checks = list(conds) + list(dom.guards) + list(self.assumptions)
        for pt in points:
            env = dict(pt)
            look = lambda a: env[a] if a in env else int(self.consts.get(a, 0))
            try:
                ev = lambda p: self.terms.evaluate(p, look)
                if not all(b_eval(c, ev) is True for c in checks):
                    continue
                ok = True
                for l in dom.loops:
                    if l.hi is None or l.atom not in env:
                        continue
                    v = ev(l.lo) + env[l.atom] * ev(l.step)
                    st = ev(l.step)
                    if not (v < ev(l.hi) if st > 0 else v > ev(l.hi)) or st == 0:
                        ok = False
                for axis, bound in self.pid_bounds.items():
                    if f"pid{axis}" in env and bound is not None and \
                            not env[f"pid{axis}"] < ev(bound):
                        ok = False
                if ok:
                    return Result("sat", env, method="enumeration")
            except (KeyError, ZeroDivisionError, OverflowError, ValueError, TypeError):
                return None
        return None

    def _sample_only(self, conds, dom: Domain, extra_atoms) -> Result | None:
        if self.templates:
            return None
        pre: set[str] = set(extra_atoms)
        for e in list(conds) + list(dom.guards) + list(self.assumptions):
            for p in b_polys(e):
                pre |= self.terms.deep_atoms(p)
        for l in dom.loops:
            pre.add(l.atom)
            for p in (l.lo, l.step, l.hi):
                if p is not None:
                    pre |= self.terms.deep_atoms(p)
        for axis, bound in self.pid_bounds.items():
            if f"pid{axis}" in pre and bound is not None:
                pre |= self.terms.deep_atoms(bound)
        return self._sample(conds, dom, pre)

    def _query(self, conds, dom: Domain, small_first: bool, extra_atoms) -> Result:
        if not self.templates:
            pre: set[str] = set(extra_atoms)
            for e in list(conds) + list(dom.guards) + list(self.assumptions):
                for p in b_polys(e):
                    pre |= self.terms.deep_atoms(p)
            for l in dom.loops:
                pre.add(l.atom)
                for p in (l.lo, l.step, l.hi):
                    if p is not None:
                        pre |= self.terms.deep_atoms(p)
            for axis, bound in self.pid_bounds.items():
                if f"pid{axis}" in pre and bound is not None:
                    pre |= self.terms.deep_atoms(bound)
            hit = self._sample(conds, dom, pre)
            if hit is not None:
                self.sampled += 1
                return hit
        import z3
        self.queries += 1
        if self._conv is None:
            # z3's main context, shared by every kernel: a context per kernel made the
            # counterexamples independent of what was analysed before, but cost the server
            # about 50 MB of resident memory and 4 ms per kernel (measured with
            # benchmarks/bench_server.py); the full analysis runs on one thread.
            self._conv = _Converter(z3, self, z3.main_ctx())
            self._assume_z3 = [self._conv.boolexpr(a) for a in self.assumptions]
        conv = self._conv
        exprs = list(conds) + list(dom.guards)
        body = [conv.boolexpr(c) for c in exprs]
        used: set[str] = set(extra_atoms)
        for e in exprs:
            for p in b_polys(e):
                used |= self.terms.deep_atoms(p)
        inst, inst_atoms = self._instances(conv, used)
        body += inst
        used |= inst_atoms
        for l in dom.loops:
            used.add(l.atom)
            used |= self.terms.deep_atoms(l.lo) | self.terms.deep_atoms(l.step)
            if l.hi is not None:
                used |= self.terms.deep_atoms(l.hi)
        axes = {int(a[3]) for a in used if a.startswith("pid") and a[3:4].isdigit()}
        for axis, bound in self.pid_bounds.items():
            if axis in axes and bound is not None:
                used |= self.terms.deep_atoms(bound)
        domain, small = conv.domains(used, dom)
        s = z3.Solver(ctx=conv.zctx)
        limit = self.timeout_ms
        if self._hard(used, conds):
            limit = max(1, limit // HARD_DIVISOR)
        if self.timeouts >= 2:
            limit = max(1, min(limit, self.timeout_ms // 5))
        # The resource limit makes answers repeatable: it counts z3's work, not the clock,
        # and on a machine that is not overloaded it binds before the wall-clock timeout, so
        # a query is decided (or given up) the same way on every run. Some queries
        # (nonlinear ones) do not advance it and stop at the timeout; a longer timeout (2x,
        # 10x) made those kernels 2-4x slower and the corpus p95 107 ms instead of 100 ms
        # (benchmarks/bench_analysis.py, same machine and hour) for 6 more findings out of
        # about 1,300 (KS110 +4, KS403 +2), so the timeout stays the limit.
        s.set("rlimit", limit * RLIMIT_PER_MS)
        s.set("timeout", limit * WALL_GUARD)
        s.add(*body, *self._assume_z3, *domain)
        r = s.check()
        if r == z3.unknown:
            self.timeouts += 1
        if r == z3.sat:
            if small_first and small:
                s.push()
                s.add(*small)
                if s.check() == z3.sat:
                    return self._model(s.model(), conv, used)
                s.pop()
                s.check()
            return self._model(s.model(), conv, used)
        if r == z3.unsat:
            return Result("unsat")
        return Result("unknown")

    def _hard(self, used: set[str], conds=()) -> bool:
        consts = self.consts
        for c in conds:
            for p in b_polys(c):
                for m in p.terms:
                    if sum(1 for a in m if a not in consts and a[0] != "%") >= 2:
                        return True  # nonlinear in run-time values
        for a in used:
            if a[0] == "{":
                op, args = self.terms.defs.get(a, ("", ()))
                if op in ("mod", "div") and isinstance(args[1], Poly) and \
                        not args[1].atoms() <= set(self.consts):
                    return True
        return False

    def _instances(self, conv, used: set[str]) -> tuple[list, set[str]]:
        """Instantiate the universally quantified assumptions (``#@ assume TokenIds[p] < n``)
        at the memory reads of this query: a template read ``T[u + c]`` matched against a
        query read ``T[o]`` gives ``u := o - c``. Two rounds (instances create reads)."""
        out: list = []
        atoms: set[str] = set()
        if not self.templates:
            return out, atoms
        from .values import b_map
        done: set = set()
        pool = set(used)
        for _round in range(2):
            reads = []
            for a in sorted(pool):  # sorted: instances (and the cap of 16) must not follow hash order
                if a[0] == "{":
                    d = self.terms.defs.get(a)
                    if d and d[0] == "read":
                        reads.append(d[1])
            new_atoms: set[str] = set()
            for ti, (tmpl, uvars, triggers) in enumerate(self.templates):
                cands: dict[str, list] = {u: [] for u in uvars}
                for base, off in reads:
                    for tb, u, c in triggers:
                        if tb == base and u in cands:
                            val = off - Poly.const(c)
                            if val not in cands[u]:
                                cands[u].append(val)
                combos = [{}]
                for u in uvars:
                    combos = [dict(cmb, **{u: v}) for cmb in combos for v in cands[u]][:16]
                for cmb in combos:
                    if len(cmb) != len(uvars):
                        continue
                    key = (ti, tuple(sorted((u, v.key()) for u, v in cmb.items())))
                    if key in done:
                        continue
                    done.add(key)
                    inst = b_map(tmpl, lambda p: self.terms.subst(p, cmb))
                    out.append(conv.boolexpr(inst))
                    for p in b_polys(inst):
                        new_atoms |= self.terms.deep_atoms(p)
            atoms |= new_atoms
            if new_atoms <= pool:
                break
            pool |= new_atoms
        return out, atoms

    def _model(self, m, conv, used: set[str]) -> Result:
        out: dict[str, int] = {}
        for name in used:
            var = conv.vars.get(name)
            if var is None:
                continue
            v = m.eval(var, model_completion=True)
            try:
                out[name] = v.as_long()
            except Exception:
                continue
        reads: dict[tuple, int] = {}
        for a in sorted(used):
            if a[0] != "{":
                continue
            d = self.terms.defs.get(a)
            if not d or d[0] not in ("read", "uf"):
                continue
            # a function an annotation names (`expert(s)`) is keyed ("uf", name): its value
            # at the model's argument is part of the witness like a value read from memory
            base = d[1][0] if d[0] == "read" else ("uf", d[1][0])
            try:
                t = conv.opaque[a]
                off_z = conv.poly(d[1][1])
                reads[(base, m.eval(off_z, model_completion=True).as_long())] = \
                    m.eval(t, model_completion=True).as_long()
            except Exception:
                pass
        return Result("sat", out, reads)


class _Converter:
    """Polys/BoolExprs to z3, memoised for the life of a SolverContext (building z3 terms
    through the Python API dominates query time otherwise)."""

    def __init__(self, z3, ctx: SolverContext, zctx):
        self.z3 = z3
        # A proxy, not a reference: a cycle context <-> converter would leave the z3 terms
        # to the cyclic garbage collector, which runs on any thread (see SolverContext.release).
        self.ctx = weakref.proxy(ctx)
        self.zctx = zctx
        self.vars: dict[str, Any] = {}
        self.atom_dom: dict[str, list] = {}
        self.atom_small: dict[str, list] = {}
        self.funcs: dict[str, Any] = {}
        self.opaque: dict[str, Any] = {}
        self.opaque_side: dict[str, list] = {}
        self._poly_cache: dict[Any, Any] = {}
        self._bool_cache: dict[Any, Any] = {}

    def clear(self) -> None:
        """Forget every z3 term (the caller holds the z3 lock)."""
        for d in (self.vars, self.atom_dom, self.atom_small, self.funcs, self.opaque,
                  self.opaque_side, self._poly_cache, self._bool_cache):
            d.clear()

    def domains(self, used: set[str], dom: Domain) -> tuple[list, list]:
        domain: list = []
        small: list = []
        # Sorted: z3's model depends on the order variables and constraints are created in,
        # and set order follows PYTHONHASHSEED; unsorted, the counterexample changed per run.
        used = sorted(used)
        for a in used:
            if a in self.ctx.consts:
                continue
            self.atom(a)
            domain += self.atom_dom.get(a, [])
            domain += self.opaque_side.get(a, [])
            small += self.atom_small.get(a, [])
        # index variables and program ids may carry a suffix (``%0'``, ``pid0'``: a second
        # element or program, as grid-level checks use); the digit names the axis
        for a in used:
            if a[0] == "%" and a[1:2].isdigit():
                k = int(_digits(a[1:]))
                if k < len(dom.shape):
                    domain.append(self.vars[a] < dom.shape[k])
            elif a.startswith("pid") and a[3:4].isdigit():
                bound = self.ctx.pid_bounds.get(int(a[3]))
                if bound is not None:
                    domain.append(self.vars[a] < self.poly(bound))
        for l in dom.loops:
            domain += self.loop(l)
        return domain, small

    def atom(self, a: str):
        z3 = self.z3
        if a in self.ctx.consts:
            return z3.IntVal(self.ctx.consts[a], self.zctx)
        if a[0] == "{":
            return self.opaque_term(a)
        v = self.vars.get(a)
        if v is None:
            v = z3.Int(a, self.zctx)
            self.vars[a] = v
            dom: list = []
            small: list = []
            c = a[0]
            if c == "%":
                dom.append(v >= 0)
            elif a.startswith("pid") and a[3:4].isdigit():
                axis = int(a[3])
                dom += [v >= 0, v < PID_LIMIT.get(axis, 65535)]
                small.append(v <= SMALL["pid"])
            elif c == "@":
                dom.append(v >= 0)
                small.append(v <= SMALL["iter"])
            elif c == "?":
                pass
            else:
                dom += [v >= 0, v <= self.ctx.max_size]
                small += [v <= SMALL["param"], v >= 2]
            self.atom_dom[a] = dom
            self.atom_small[a] = small
        return v

    def loop(self, l: Loop) -> list:
        it = self.atom(l.atom)
        if l.hi is None:
            return []
        value = self.poly(l.lo) + it * self.poly(l.step)
        sc = l.step.const_value()
        if sc is not None and sc < 0:
            return [value > self.poly(l.hi)]
        out = []
        if sc is None:
            out.append(self.poly(l.step) > 0)
        out.append(value < self.poly(l.hi))
        return out

    def poly(self, p: Poly):
        key = p.key()
        hit = self._poly_cache.get(key)
        if hit is not None:
            return hit
        z3 = self.z3
        terms = []
        for m, c in p.terms.items():
            factors = [self.atom(a) for a in m]
            if not factors:
                terms.append(z3.IntVal(c, self.zctx))
                continue
            t = factors[0]
            for f in factors[1:]:
                t = t * f
            terms.append(t if c == 1 else t * c)
        if not terms:
            out = z3.IntVal(0, self.zctx)
        elif len(terms) == 1:
            out = terms[0]
        else:
            out = z3.Sum(*terms)
        self._poly_cache[key] = out
        return out

    def opaque_term(self, a: str):
        hit = self.opaque.get(a)
        if hit is not None:
            return hit
        z3 = self.z3
        op, args = self.ctx.terms.defs.get(a, ("unknown", ()))
        side: list = []
        if op == "read":
            base, off = args
            f = self.funcs.get(base)
            if f is None:
                f = z3.Function("read_" + base, z3.IntSort(self.zctx), z3.IntSort(self.zctx))
                self.funcs[base] = f
            t = f(self.poly(off))
        elif op == "uf":
            fname, arg = args
            f = self.funcs.get("uf:" + fname)
            if f is None:
                f = z3.Function("uf_" + fname, z3.IntSort(self.zctx), z3.IntSort(self.zctx))
                self.funcs["uf:" + fname] = f
            t = f(self.poly(arg))
        elif op in ("mod", "div"):
            x, y = self.poly(args[0]), self.poly(args[1])
            # Triton integer division truncates; operands here are non-negative in practice
            # (indices, sizes), where truncation and z3's Euclidean division agree.
            t = x % y if op == "mod" else x / y
            if args[1].const_value() is None:
                side.append(y != 0)
        elif op in ("min", "max"):
            x, y = self.poly(args[0]), self.poly(args[1])
            t = z3.If(x < y, x, y) if op == "min" else z3.If(x > y, x, y)
        else:
            t = z3.Int(a, self.zctx)
            self.vars[a] = t
        self.opaque[a] = t
        self.opaque_side[a] = side
        return t

    def boolexpr(self, e):
        hit = self._bool_cache.get(e)
        if hit is not None:
            return hit
        z3 = self.z3
        t = e[0]
        if t == "const":
            out = z3.BoolVal(e[1], self.zctx)
        elif t == "cmp":
            x = self.poly(e[2])
            out = {"<": x < 0, "<=": x <= 0, "==": x == 0, "!=": x != 0}[e[1]]
        elif t == "and":
            out = z3.And(*[self.boolexpr(x) for x in e[1]], self.zctx)
        elif t == "or":
            out = z3.Or(*[self.boolexpr(x) for x in e[1]], self.zctx)
        elif t == "not":
            out = z3.Not(self.boolexpr(e[1]))
        elif t == "opaque":
            out = z3.Bool(str(e[1]), self.zctx)
        else:
            raise ValueError(f"unknown BoolExpr {t}")
        self._bool_cache[e] = out
        return out


def _digits(s: str) -> str:
    out = ""
    for ch in s:
        if not ch.isdigit():
            break
        out += ch
    return out


def atoms_of(conds: list) -> set[str]:
    out: set[str] = set()
    for c in conds:
        for p in b_polys(c):
            out |= p.atoms()
    return out
