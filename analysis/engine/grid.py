"""Grid-level checks: what the programs of a launch do together.

Per-kernel checks (``checks.py``) look at one program. These look at the whole grid, from the
access log of the interpreter (``it.accesses``) and the grid (``#@ grid``, else the launch
site in the same file, see ``analysis.infer``):

* KS301 coverage: every element of a stored tensor that ``computes`` names (or, without
  ``computes``, the declared or mask-inferred extent) is written by some program.
* KS302 races: no element is written by two different programs.
* KS303 / KS304 footprint of ``#@ computes OUT[d...] from IN[...]``: every written element
  reads all (KS303) and only (KS304) the input elements named.
* KS205 ``#@ partners LEAD: V1, ...``: a loop iteration that updates LEAD rescales every
  partner by a factor computed from the old and the new LEAD.
* KS305 a launch grid sized by floor division; KS306 a store whose address ignores a program
  id axis that the kernel's other accesses split work along (plain code, no annotations).

How each is decided (details in docs/analysis.md, "Grid-level checks"):

* Coverage, races and the "reads all" half of the footprint are decided by **enumeration**:
  concrete launch sizes are chosen (sizes that are and are not multiples of the blocks, at
  most ``MAX_SCENARIOS``, each satisfying the ``#@ assume`` facts), every program of the grid
  and every loop iteration is visited, and the tile of each access becomes a *box*: per
  logical coordinate, the set of values its unmasked lanes reach (a coordinate that depends on
  one tile axis; masks conjuncts on one axis filter that axis). Tiles that are not boxes are
  enumerated lane by lane when small. Counterexamples say ``method="enumeration"``.
* The "only" half of the footprint compares the tags of the stored value with the
  ``computes`` index expressions and asks z3 for a written lane where they differ
  (``method="smt"``); data-dependent reads and uninterpreted functions (``expert(s)``) are
  handled by the solver's assumption templates.
* KS306 is structural (which program id axes an address mentions), with a z3 model for the
  witness lane; KS205 is a def-use analysis of the loop body; KS305 reads the launch site.

Cost: enumeration is bounded by ``MAX_PROGRAMS`` programs, ``MAX_BOXES`` boxes and
``MAX_ELEMENTS`` marked elements per scenario, and stops at the kernel's deadline.
"""
from __future__ import annotations

import ast
import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..kernel import ComputesDecl, KernelInfo, ParsedFile
from ..model import Counterexample, Related, Span
from .access import Access
from .interp import Interp
from .poly import ONE, Poly
from .render import atom_names, element_of, show
from .report import Reporter, counterexample, related_chain
from .solver import Domain, SolverContext
from .boxes import (MAX_LANES, _AxisSet, _Box, _box, _Evaluator, _find_hole, _find_race,
                    _lane_of, _linear, _Unknown)
from .partners import check_partners
from .values import TRUE, V, b_and, b_eval, b_polys, cmp, conjuncts

MAX_SCENARIOS = 3
MAX_PROGRAMS = 4096
MAX_BOXES = 20000
MAX_ELEMENTS = 1 << 21
MAX_TRIPS = 4096
# z3 time the grid checks may use beyond the engine's per-kernel z3 budget, as a share of
# config.kernel_budget_ms (summed over the kernel's constexpr cases).
GRID_Z3_SHARE = 0.125


# ============================================================================ entry point

def run_grid_checks(it: Interp, solver: SolverContext, rep: Reporter, kernel: KernelInfo,
                    parsed: ParsedFile, config) -> None:
    """Run the grid-level checks of one constexpr case (see module docstring).

    Args:
        it: the interpreter after ``run()`` (access log, carried values, terms, consts).
        solver: this case's SolverContext (its ``pid_bounds`` come from ``#@ grid``; when the
            kernel has none, the grid inferred from the launch site is installed here).
        rep: the kernel's Reporter (findings, tally, hovers).
        kernel, parsed, config: the usual.

    Never raises for odd kernels: what cannot be evaluated is skipped (counted as unproved).
    """
    g = _GridChecks(it, solver, rep, kernel, parsed, config)
    # The engine caps z3 at a share of the kernel budget (solver.budget_s, across cases);
    # the per-kernel checks may spend all of it. Grid checks get a reserve on top, bounded
    # the same way (the kernel's deadline still applies).
    saved = solver.budget_s
    if saved is not None:
        solver.budget_s = saved + config.kernel_budget_ms / 1000.0 * GRID_Z3_SHARE
    try:
        g.run()
    finally:
        solver.budget_s = saved



# ============================================================================ the checks

class _GridChecks:
    def __init__(self, it: Interp, solver: SolverContext, rep: Reporter, kernel: KernelInfo,
                 parsed: ParsedFile, config):
        self.it = it
        self.solver = solver
        self.rep = rep
        self.kernel = kernel
        self.parsed = parsed
        self.config = config
        self.ann = kernel.annotations
        self.names = atom_names(it)
        self.deadline = solver.deadline or (time.thread_time() + 1.0)
        self.grid, self.grid_source, self.grid_span = self._grid()
        self.consts = {k: int(v) for k, v in it.consts.items()
                       if isinstance(v, (int, bool))}
        self.by_id = {a.id: a for a in it.accesses}
        self.reported_stores: set[int] = set()
        self.divisible_only = False
        launch = next((l for l in parsed.launches if l.kernel == kernel.name), None)
        if self.grid_source == "launch" and launch is not None:
            for e in launch.grid or []:
                for node in _top_level_floordivs(e.tree) if e.tree is not None else []:
                    if _divisibility_checked(parsed, launch.span.line,
                                             ast.unparse(node.left), ast.unparse(node.right)):
                        # the host only launches when the division is exact; the
                        # enumeration's sizes would not be
                        self.divisible_only = True
        used = [k for a in it.accesses for k in self._pid_axes_access(a)]
        if self.ann.grid is not None:
            self.n_axes = len(self.ann.grid.axes)
        elif self.grid_source == "launch":
            self.n_axes = max([k for k in range(3) if self.grid[k] != ONE] + used + [0]) + 1
        else:
            self.n_axes = max(used + [0]) + 1

    def _pid(self, pid) -> tuple:
        """A program id with as many axes as the grid has (or the kernel uses)."""
        p = list(pid)[:max(self.n_axes, 1)]
        return tuple(p + [0] * (self.n_axes - len(p)))

    # ------------------------------------------------------------------ setup
    def _grid(self) -> tuple[list[Poly] | None, str | None, Span | None]:
        g = self.ann.grid
        if g is not None:
            axes = [self.it.annot_poly(e.tree) for e in g.axes[:3]]
            if any(a is None for a in axes):
                return None, None, None
            # infer.with_inferred_annotations gives an inferred grid the launch's span
            inferred = any(l.span == g.span for l in self.parsed.launches
                           if l.kernel == self.kernel.name)
            return (axes + [ONE] * (3 - len(axes)), "launch" if inferred else "annotation",
                    g.span)
        from ..infer import infer_grid
        try:
            exprs = infer_grid(self.parsed, self.kernel)
        except Exception:  # inference is best effort; never take the analysis down
            exprs = None
        if not exprs:
            return None, None, None
        axes = [self.it.annot_poly(e.tree) for e in exprs[:3]]
        if any(a is None for a in axes):
            return None, None, None
        axes = axes + [ONE] * (3 - len(axes))
        if not self.solver.pid_bounds:
            self.solver.pid_bounds = {k: p for k, p in enumerate(axes)}
        return axes, "launch", exprs[0].span

    def time_left(self) -> bool:
        return time.thread_time() < self.deadline

    def run(self) -> None:
        if self.it.kernel.is_helper:
            return
        self.check_floor_grid()
        self.check_store_ignores_axis()
        if self.time_left():
            self.check_partners()
        if self.time_left():
            self.check_footprint_tags()
        if self.grid is not None and self.time_left():
            self.check_enumerated()

    # ================================================================ KS305
    def check_floor_grid(self) -> None:
        """A launch grid axis ``a // b`` that is not the ``(a + b - 1) // b`` idiom."""
        for launch in self.parsed.launches:
            if launch.kernel != self.kernel.name or not launch.grid:
                continue
            for axis, e in enumerate(launch.grid):
                if e.tree is None:
                    continue
                for node in _top_level_floordivs(e.tree):
                    if _is_ceil_idiom(node):
                        continue
                    b = node.right
                    if not self._is_block_name(launch, b):
                        continue
                    num, den = ast.unparse(node.left), ast.unparse(b)
                    if _divisibility_checked(self.parsed, launch.span.line, num, den):
                        continue
                    den_v = self._host_value(den)
                    sizes = {}
                    if den_v:
                        sizes = {num: 2 * den_v + 1, den: den_v}
                    notes = []
                    if den_v:
                        notes.append(f"{num}={2 * den_v + 1}, {den}={den_v}: the grid has "
                                     f"{2} programs on axis {axis}, covering {2 * den_v} of "
                                     f"{2 * den_v + 1} elements; the last {1} is never "
                                     "processed")
                    cex = Counterexample(program_id=None, sizes=sizes,
                                         values={"grid axis": e.text,
                                                 "programs": 2 if den_v else "?"},
                                         method="enumeration", notes=notes)
                    span = e.span_of(node)
                    self.rep.report(
                        "KS305", f"launch grid axis {axis} is `{e.text}`: floor division "
                        f"drops the last partial block when {num} is not a multiple of {den}; "
                        f"use triton.cdiv({num}, {den})", span, cex,
                        [Related(launch.span, "launch site")],
                        dedupe=("KS305", span.line, span.col))

    def _is_block_name(self, launch, node: ast.expr) -> bool:
        """``node`` names a tile size: a constexpr parameter of the kernel (``META['BLOCK']``
        is already ``BLOCK``), or the host value passed to one (``BLOCK=block``)."""
        if not isinstance(node, ast.Name):
            return False
        tiles = _tile_constexprs(self.kernel)
        if node.id in tiles:
            return True
        from ..launches import bind_args
        for pname, arg in bind_args(launch, self.kernel).items():
            if pname in tiles and arg.expr.text.strip() == node.id:
                return True
        return False

    def _host_value(self, text: str) -> int | None:
        v = self.consts.get(text)
        if isinstance(v, int) and v > 1:
            return v
        try:
            c = int(text, 0)
            return c if c > 1 else None
        except ValueError:
            return None

    # ================================================================ KS306
    def check_store_ignores_axis(self) -> None:
        """A store whose address (offset, mask, path conditions) mentions no ``pid_k`` while
        the kernel's other accesses and the stored value depend on ``pid_k``: every program
        along axis k writes the same elements."""
        it = self.it
        axes_of = {a.id: self._pid_axes_access(a) for a in it.accesses}
        for acc in it.accesses:
            if acc.kind != "store" or acc.offset is None or acc.base is None:
                continue
            mine = axes_of[acc.id]
            others = set()
            users: dict[int, list[Access]] = {}
            for o in it.accesses:
                if o.id == acc.id:
                    continue
                for k in axes_of[o.id]:
                    others.add(k)
                    users.setdefault(k, []).append(o)
            value_axes = self._value_axes(acc.value)
            store_bounds = self._mask_bounds(acc, None)
            for k in sorted(others - mine):
                if k not in value_axes:
                    continue
                # the axis must split the dimension the store covers: some access bounds a
                # pid_k-dependent coordinate by a size the store's mask also bounds (split-K
                # reduction axes and per-row scalars fail this)
                split = set()
                for u in users.get(k, []):
                    split |= self._mask_bounds(u, k)
                if not (split & store_bounds):
                    continue
                if self.grid is not None:
                    n = self.grid[k].const_value()
                    if n is not None and n <= 1:
                        continue
                self._report_ignored_axis(acc, k, users.get(k, []))
                break

    def _mask_bounds(self, a: Access, axis: int | None) -> set[str]:
        """Size atoms compared in ``a``'s mask conjuncts (only conjuncts that depend on
        ``pid{axis}`` when ``axis`` is given)."""
        out: set[str] = set()
        if a.mask is None:
            return out
        for c in conjuncts(a.mask):
            polys = b_polys(c)
            if axis is not None and axis not in self._pid_axes(polys):
                continue
            for p in polys:
                out |= self._free_atoms(p)
        return out

    def _pid_axes_access(self, a: Access) -> set[int]:
        polys = []
        if a.offset is not None:
            polys.append(a.offset)
        for e in ([a.mask] if a.mask is not None else []) + list(a.guards):
            polys += b_polys(e)
        if a.block:
            for key in ("offsets", "shape", "strides"):
                polys += [p for p in a.block.get(key, []) if isinstance(p, Poly)]
        return self._pid_axes(polys)

    def _pid_axes(self, polys) -> set[int]:
        out = set()
        for p in polys:
            for atom in self.it.terms.deep_atoms(p):
                if atom.startswith("pid") and atom[3:4].isdigit() and len(atom) == 4:
                    out.add(int(atom[3]))
        return out

    def _value_axes(self, v: V | None) -> set[int]:
        if v is None:
            return set()
        polys = []
        if v.poly is not None:
            polys.append(v.poly)
        for t in (v.tags or {}).values():
            polys.append(t.coord)
        for lid in v.loads or ():
            a = self.by_id.get(lid)
            if a is not None and a.offset is not None:
                polys.append(a.offset)
        return self._pid_axes(polys)

    def _report_ignored_axis(self, acc: Access, k: int, users: list[Access]) -> None:
        it = self.it
        pk = f"pid{k}"
        user = it.names.get(pk)  # the kernel's variable for this program id, if it has one
        name = user or f"program_id({k})"
        goal = b_and(acc.mask if acc.mask is not None else TRUE,
                     cmp("==", Poly.atom(pk), Poly.const(1)))
        # program pid_k = 1 must have work of its own: some lane of an access that uses
        # pid_k is enabled there (else the axis might have a single program at these sizes)
        from .values import b_map
        for u in users:
            if u.mask is None or not u.shape:
                continue
            sub = {f"%{d}": Poly.atom(f"?u{d}") for d in range(len(u.shape))}
            bounds = [b_and(cmp(">=", Poly.atom(f"?u{d}"), Poly.const(0)),
                            cmp("<", Poly.atom(f"?u{d}"), Poly.const(n)))
                      for d, n in enumerate(u.shape)]
            goal = b_and(goal, b_map(u.mask, lambda p: it.terms.subst(p, sub)), *bounds)
            break
        res = self.solver.query([goal], acc.domain())
        if res.status != "sat":
            # unsat: program k = 1 never has work next to this store; unknown: no witness
            self.rep.outcome(res, f"the store's programs along {name} write disjoint elements",
                             acc.span)
            return
        model = dict(res.model)
        n_axes = max(self.n_axes, k + 1)
        pid_a = tuple(0 if a == k else model.get(f"pid{a}", 0) for a in range(n_axes))
        pid_b = tuple(1 if a == k else model.get(f"pid{a}", 0) for a in range(n_axes))
        env = self._model_env(model)
        try:
            off = it.terms.evaluate(acc.offset, env)
        except Exception:
            off = "?"
        elem = element_of(it, model, len(acc.shape))
        where = f"{acc.base}[{off}]"
        decl = it.decls.get(acc.base)
        if decl is not None and isinstance(off, int):
            coords = it.decompose(decl, acc.offset)
            if coords is not None:
                try:
                    vals = [it.terms.evaluate(c, env) for c in coords]
                    where = f"{decl.name}[{', '.join(str(v) for v in vals)}]"
                except Exception:
                    pass
        sizes = {a: v for a, v in sorted(model.items())
                 if a[0] not in "%@?{" and not a.startswith("pid")}
        for c, v in self.consts.items():
            sizes.setdefault(c, v)
        lines = sorted({u.line + 1 for u in users})
        lane = {f"%{d}": Poly.const(model.get(f"%{d}", 0)) for d in range(len(acc.shape))}
        symbolic = show(it.terms.subst(acc.offset, lane), it)
        notes = [f"programs {name}=0 and {name}=1 both write {where}",
                 f"the address is {acc.base} + {symbolic} for every value of {name}"]
        cex = Counterexample(program_id=pid_a, element=elem, sizes=sizes,
                             values={"program_id (second)": list(pid_b), "element": where,
                                     "offset": symbolic},
                             method="smt", notes=notes)
        msg = (f"tl.store to {acc.base} ignores program_id({k})"
               f"{f' ({user})' if user else ''}, which the accesses at "
               f"line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))} split work "
               f"along: programs {pid_a} and {pid_b} both write {where} (a write race), and "
               f"the elements the other {name} programs should write are never written")
        related = [Related(u.span, f"{'tl.load' if u.kind == 'load' else 'tl.store'} uses "
                           f"{name}") for u in users[:3]]
        related += related_chain(it, [acc.ptr_node], acc.line)
        if self.rep.report("KS306", msg, acc.span, cex, related,
                           dedupe=("KS306", acc.span.line, acc.span.col)):
            self.rep.outcome("refuted", f"every program along {name} writes its own elements",
                             acc.span)
        self.reported_stores.add(acc.id)

    def _model_env(self, model: dict) -> Callable[[str], int]:
        consts = self.consts

        def env(a: str) -> int:
            if a in model:
                return model[a]
            if a in consts:
                return consts[a]
            return 0
        return env

    def check_partners(self) -> None:
        """KS205, see ``partners.py``."""
        check_partners(self.kernel, self.parsed, self.rep)

    # ================================================================ KS304 (tags)
    def check_footprint_tags(self) -> None:
        """For every store into the OUT of a ``computes``, each input coordinate the stored
        value carries as a tag must equal the index expression ``computes`` gives for it."""
        it = self.it
        for comp in self.ann.computes:
            out = it.decl_names.get(comp.out.tensor)
            if out is None:
                continue
            for acc in it.accesses:
                if acc.kind != "store" or acc.base != out.ptr or acc.offset is None:
                    continue
                v = acc.value
                if v is None or v.kind != "data" or not v.tags or v.shape != acc.shape:
                    continue
                coords = it.decompose(out, acc.offset)
                if coords is None:
                    continue
                env = self._out_env(comp, out, coords)
                if env is None:
                    continue
                for ref in comp.inputs:
                    decl = it.decl_names.get(ref.tensor)
                    if decl is None or len(ref.indices) != len(decl.dims):
                        continue
                    out_names = {i.text.strip() for i in comp.out.indices}
                    for dim, idx in zip(decl.dims, ref.indices):
                        if _is_range(idx):
                            continue
                        if idx.text.strip() == dim.name and dim.name in out_names and \
                                any(d.name == dim.name for d in out.dims):
                            # the input's coordinate is the output's: store alignment
                            # (KS203) already compares it
                            continue
                        tag = v.tags.get(dim.name)
                        if tag is None or tag.tensor != decl.name:
                            continue
                        self._tag_query(acc, comp, decl, dim.name, idx, tag.coord, env, ref)

    def _concrete_retry(self, goal, acc: Access):
        """Re-ask a query that timed out with the program id and the sizes that the program
        id decoding depends on fixed to concrete values (a few programs of a few scenarios):
        the decoding (``pid // num_pid_in_group`` ...) then folds to constants and only the
        data-dependent part (reads, uninterpreted functions) is left to z3. A ``sat`` answer
        refutes the obligation; ``unsat`` answers only cover the tried values, so the result
        stays ``unknown`` then."""
        from .solver import Result
        from .values import b_map
        it = self.it
        atoms: set[str] = set()
        for p in b_polys(goal):
            atoms |= it.terms.deep_atoms(p)
        pids = sorted(a for a in atoms if a.startswith("pid") and len(a) == 4)
        if not pids:
            return Result("unknown")
        hard: set[str] = set()
        for a in atoms:
            if a[0] == "{" and any(x.startswith("pid") for x in it.terms.deep_atoms(
                    Poly.atom(a))):
                hard |= self._free_atoms(Poly.atom(a))
        for p in self.grid or []:
            hard |= self._free_atoms(p)
        hard = {a for a in hard if a[0] not in "?"}
        tries = unsat = 0
        for env in self._scenarios(hard, []):
            try:
                programs = self._programs(env) if self.grid is not None else None
            except _Unknown:
                programs = None
            if not programs:
                continue
            picks = [programs[min(1, len(programs) - 1)], programs[-1], programs[0],
                     programs[len(programs) // 2]]
            seen = set()
            for pid in picks:
                if pid in seen:
                    continue
                seen.add(pid)
                tries += 1
                if tries > 4 or unsat >= 2 or not self.time_left():
                    return Result("unknown")
                sub = {a: Poly.const(env[a]) for a in hard if a in env}
                for k in range(3):
                    sub[f"pid{k}"] = Poly.const(pid[k])
                g2 = b_map(goal, lambda p: it.terms.subst(p, sub))
                res = self.solver.query([g2], acc.domain())
                unsat += res.status == "unsat"
                if res.status == "sat":
                    model = dict(res.model)
                    for a, v in sub.items():
                        model[a] = v.const_value()
                    return Result("sat", model, res.reads)
        return Result("unknown")

    def _out_env(self, comp: ComputesDecl, out, coords: list[Poly]) -> dict | None:
        env = {}
        if len(comp.out.indices) != len(coords):
            return None
        for idx, c in zip(comp.out.indices, coords):
            t = idx.tree
            if isinstance(t, ast.Name):
                env[t.id] = V("int", poly=c, width=64)
        return env

    def _tag_query(self, acc: Access, comp, decl, dim: str, idx, coord: Poly, env,
                   ref=None) -> None:
        it = self.it
        try:
            want = it.annot_eval(idx.tree, env)
        except Exception:
            return
        if want.kind != "int" or want.poly is None:
            return
        text = f"{comp.out.tensor}[...] reads {decl.name}.{dim} = {idx.text}"
        if want.poly == coord:
            self.rep.outcome("proved", text, acc.span)
            return
        goal = b_and(acc.mask if acc.mask is not None else TRUE, cmp("!=", coord, want.poly))
        hard = any(a[0] == "{" and self.it.terms.defs.get(a, ("",))[0] in ("div", "mod", "min",
                                                                            "max")
                   and any(x.startswith("pid") for x in self.it.terms.deep_atoms(Poly.atom(a)))
                   for p in b_polys(goal) for a in self.it.terms.deep_atoms(p))
        saved = self.solver.timeout_ms
        if hard:
            # program id decoding by `//`/`%` of symbolic sizes: a short symbolic try, then
            # concrete programs (_concrete_retry)
            self.solver.timeout_ms = min(saved, 50)
        try:
            res = self.solver.query([goal], acc.domain())
        finally:
            self.solver.timeout_ms = saved
        if res.status == "unknown":
            res = self._concrete_retry(goal, acc)
        status = self.rep.outcome(res, text, acc.span)
        if status != "refuted":
            return
        m = res.model
        cex = counterexample(res, it, acc.shape, acc.loops,
                             {f"{decl.name}.{dim} read": coord, f"{idx.text} (computes)":
                              want.poly})
        for r, val in list(res.reads.items())[:6]:
            cex.values[_read_text(it, r[0], r[1])] = val
        out_coords = it.decompose(it.decl_names[comp.out.tensor], acc.offset) or []
        elem = []
        for c in out_coords:
            try:
                elem.append(str(it.terms.evaluate(c, self._model_env(m),
                                                  lambda b, o: res.reads.get((b, o), 0))))
            except Exception:
                elem.append("?")
        where = f"{comp.out.tensor}[{', '.join(elem)}]"
        wkey = f"{idx.text} (computes)"
        want_val = cex.values.get(wkey)
        if want_val == "?":
            # a function of the annotation the solver's witness gives no value at this
            # argument, or a term it cannot evaluate: say so rather than print `?`
            del cex.values[wkey]
            want_text = f"{idx.text}, which the witness leaves open"
        else:
            want_text = f"{idx.text} = {want_val}"
        cex.notes.append(f"{where} is computed from {decl.name} at {dim} = "
                         f"{cex.values.get(f'{decl.name}.{dim} read')}, but `computes` names "
                         f"{dim} = {want_text}")
        cex.program_id = self._pid(tuple(m.get(f"pid{k}", 0) for k in range(3)))
        got = _concrete_text(it, coord, self._model_env(m), res.reads)
        msg = (f"footprint: {where} (program {cex.program_id}) reads {decl.name} at {dim} = "
               f"{got}, but `computes` names {decl.name}[{ref_text(ref)}] with {dim} = "
               f"{idx.text}")
        self.rep.report("KS304", msg, acc.span, cex,
                        [Related(comp.span, "#@ computes")] +
                        related_chain(it, [acc.ptr_node], acc.line),
                        dedupe=("KS304", acc.span.line, decl.name, dim))

    # ================================================================ enumeration
    def _host_decided_constexprs(self) -> set[str]:
        """Constexprs whose value the analysis had to make up: no default, launch literal or
        autotune config (``fallback``), or a flag analysed both ways. A launcher that
        computes them from the sizes (``XBLOCK = next_power_of_2(cdiv(M, 12))``) ties them
        to the grid in a way enumeration cannot see."""
        out = {k for k, v in self.it.fallback.items() if v is not None}
        try:
            from . import _flag_names, constexpr_cases
            cases, _ = constexpr_cases(self.kernel, self.parsed)
            for n in _flag_names(self.kernel):
                if len({repr(c.get(n)) for c in cases}) > 1:
                    out.add(n)
        except Exception:
            pass
        return out

    def check_enumerated(self) -> None:
        """KS301, KS302 and KS303 at concrete sizes (see module docstring)."""
        it = self.it
        if self.grid_source == "launch" and (self._host_decided_constexprs() or
                                             self.divisible_only):
            return
        stores: dict[str, list[Access]] = {}
        for acc in it.accesses:
            if acc.kind == "store" and acc.base is not None and acc.offset is not None \
                    and acc.id not in self.reported_stores:
                stores.setdefault(acc.base, []).append(acc)
        if not stores:
            return
        targets = []
        for base, accs in stores.items():
            t = self._target(base, accs)
            if t is not None:
                targets.append(t)
        if not targets:
            return
        needed: set[str] = set()
        for t in targets:
            needed |= t.atoms
        for p in self.grid:
            needed |= self._free_atoms(p)
        if any(a[0] == "?" for a in needed):
            return
        found: set[tuple] = set()
        for t in targets:
            if self.time_left():
                self._race_smt(t, found)
        for env in self._scenarios(needed, targets):
            if not self.time_left():
                return
            try:
                programs = self._programs(env)
            except _Unknown:
                continue
            if programs is None:
                continue
            ev = _Evaluator(self.it, env)
            for k in range(3):
                # tl.num_programs(k) is the grid's extent (persistent loops step by it)
                env[f"num_programs_{k}"] = ev.poly(self.grid[k])
            for t in targets:
                if not self.time_left():
                    return
                try:
                    self._check_target(t, env, programs, found)
                except _Unknown:
                    continue

    # -- races by z3, for affine program-id structure
    def _race_smt(self, t, found: set) -> None:
        """Ask z3 for two different programs that write one element (within the extent when
        known): ``unsat`` proves the target race-free for every size; ``sat`` is a KS302
        finding with a model. Only for stores whose coordinates use program ids outside
        ``//``/``%``/``min`` terms (grouped orderings are left to the enumeration: z3 rarely
        decides them within the time limit)."""
        from .solver import Loop
        from .values import b_map, b_or
        it = self.it
        for acc in t.stores:
            for c in t.coords[acc.id]:
                for a in c.atoms():
                    if a[0] == "{" and any(x.startswith("pid") for x in
                                           it.terms.deep_atoms(Poly.atom(a))):
                        return
                    if a[0] in "?":
                        return
        if len(t.stores) != 1:
            return  # pairs of different stores: enumeration
        acc = t.stores[0]
        # values read from memory in the address or the guards (scatter indices, a counter
        # bumped by atomics): two programs read them independently, which z3 cannot tell
        # unless `#@ assume` says how they relate
        polys = list(t.coords[acc.id]) + [p for e in ([acc.mask] if acc.mask is not None
                                                      else []) + list(acc.guards)
                                          for p in b_polys(e)]
        if any(self.it.terms.defs.get(a, ("",))[0] == "read"
               for p in polys for a in self.it.terms.deep_atoms(p)) and \
                not self.solver.templates:
            return
        # tl.num_programs(k) is the grid's extent (persistent loops step by it)
        nprog = {f"num_programs_{k}": self.grid[k] for k in range(3)}

        def bind(p: Poly) -> Poly:
            return it.terms.subst(p, nprog)
        coords = [bind(c) for c in t.coords[acc.id]]
        ren = {f"pid{k}": Poly.atom(f"pid{k}'") for k in range(3)}
        ren.update({f"%{k}": Poly.atom(f"%{k}'") for k in range(len(acc.shape))})
        ren.update({l.atom: Poly.atom(l.atom + "'") for l in acc.loops})

        def prime(p: Poly) -> Poly:
            return it.terms.subst(p, ren)
        mask = b_map(acc.mask, bind) if acc.mask is not None else TRUE
        guards = [b_map(g, bind) for g in acc.guards]
        conds = [mask, b_map(mask, prime)]
        conds += guards + [b_map(g, prime) for g in guards]
        if t.sizes is not None:
            for c, size in zip(coords, t.sizes):
                conds.append(cmp(">=", c, Poly.const(0)))
                conds.append(cmp("<", c, size))
        for c in coords:
            conds.append(cmp("==", c, prime(c)))
        # programs differ when any axis of the grid differs, also one the store ignores
        axes = [k for k in range(3) if self.grid[k] != ONE]
        if not axes:
            return
        conds.append(b_or(*[cmp("!=", Poly.atom(f"pid{k}"), Poly.atom(f"pid{k}'"))
                            for k in axes]))
        base_loops = [Loop(l.var, l.atom, bind(l.lo), bind(l.hi) if l.hi is not None else None,
                           bind(l.step), l.line, l.kind) for l in acc.loops]
        loops = base_loops + [Loop(l.var + "'", l.atom + "'", prime(l.lo),
                                   prime(l.hi) if l.hi is not None else None,
                                   prime(l.step), l.line, l.kind) for l in base_loops]
        goal = b_and(*conds)
        saved = self.solver.timeout_ms
        self.solver.timeout_ms = min(saved, 80)
        try:
            res = self.solver.query([goal], Domain(acc.shape, loops, []))
        finally:
            self.solver.timeout_ms = saved
        text = "no two programs write one element"
        if res.status == "unsat":
            self.rep.outcome(res, text, acc.span)
            found.add(("KS302", t.base))  # proved: nothing for the enumeration to find
            return
        if res.status != "sat":
            return
        m = res.model
        env = self._model_env(m)
        try:
            elem = tuple(it.terms.evaluate(c, env) for c in coords)
        except Exception:
            return
        pid1 = self._pid(tuple(m.get(f"pid{k}'", 0) for k in range(3)))
        pid2 = self._pid(tuple(m.get(f"pid{k}", 0) for k in range(3)))
        where = self._name_elem(t, elem)
        sizes = {a: v for a, v in sorted(m.items())
                 if a[0] not in "%@?{" and not a.startswith("pid")}
        for k, v in self.consts.items():
            sizes.setdefault(k, v)
        loop = {l.var: m.get(l.atom, 0) for l in acc.loops}
        cex = Counterexample(program_id=pid2, element=element_of(self.it, m, len(acc.shape)),
                             loop=loop, sizes=sizes,
                             values={"element": where, "other program_id": list(pid1),
                                     "other element": element_of(self.it, m, len(acc.shape),
                                                                 suffix="'")},
                             method="smt",
                             notes=[f"programs {pid1} and {pid2} both write {where}"])
        msg = (f"write race: programs {pid1} and {pid2} both write {where} "
               f"(sizes {_fmt_sizes(sizes, t.atoms | self._grid_atoms())})")
        self.rep.outcome(res, text, acc.span)
        self.rep.report("KS302", msg, acc.span, cex,
                        related_chain(it, [acc.ptr_node], acc.line),
                        dedupe=("KS302", acc.span.line, acc.span.col))
        found.add(("KS302", t.base))

    # -- what to check per stored pointer
    @dataclass
    class _Target:
        base: str
        stores: list
        decl: Any
        coords: dict  # store id -> list[Poly] logical coordinates
        sizes: list | None  # extent per coordinate (Polys) or None (no coverage check)
        computes: ComputesDecl | None
        atoms: set = field(default_factory=set)
        extent_from: str = ""

    def _target(self, base: str, accs: list[Access]):
        it = self.it
        decl = it.decls.get(base)
        coords: dict[int, list[Poly]] = {}
        sizes = None
        extent_from = ""
        comp = None
        if decl is not None:
            for a in accs:
                c = it.decompose(decl, a.offset)
                if c is None:
                    return None
                coords[a.id] = c
            sizes = it.decl_sizes(decl)
            from .checks import inferred_decls
            extent_from = (f"{decl.name}, inferred from the launch site"
                           if decl.ptr in inferred_decls(it) else f"#@ tensor {decl.name}")
            for c in self.ann.computes:
                if c.out.tensor == decl.name:
                    comp = c
            if comp is None and self.ann.computes:
                # `computes` names the outputs; a declared tensor it does not name may be
                # scratch space written partially on purpose
                sizes = None
        else:
            # plain pointer: raw element offsets, only when they use no stride-like size
            for a in accs:
                if any(x not in self.tiled and x[0] not in "%@{" and not x.startswith("pid")
                       and x not in self.consts for x in it.terms.deep_atoms(a.offset)):
                    return None
                coords[a.id] = [a.offset]
            ext = self._mask_extent(accs)
            if ext is not None:
                sizes = [ext]
                extent_from = "the store mask"
        t = self._Target(base, accs, decl, coords, sizes, comp, extent_from=extent_from)
        atoms: set[str] = set()
        for a in accs:
            atoms |= self._access_atoms(a, coords[a.id])
        for s in sizes or []:
            atoms |= self._free_atoms(s)
        if comp is not None:
            for ref in comp.inputs:
                d = it.decl_names.get(ref.tensor)
                if d is None:
                    continue
                for s in it.decl_sizes(d) or []:
                    atoms |= self._free_atoms(s)
                for load in self._loads_of(accs, d):
                    c = it.decompose(d, load.offset) if load.offset is not None else None
                    if c is not None:
                        atoms |= self._access_atoms(load, c)
        t.atoms = atoms
        return t

    @property
    def tiled(self) -> set[str]:
        """Size arguments compared against tile offsets (masks, loop bounds): they get values
        around the block sizes; other free sizes (batch, heads) get small counts."""
        hit = getattr(self, "_tiled", None)
        if hit is not None:
            return hit
        out: set[str] = set()
        for a in self.it.accesses:
            for e in ([a.mask] if a.mask is not None else []):
                for p in b_polys(e):
                    out |= self._free_atoms(p)
            for l in a.loops:
                if l.hi is not None:
                    out |= self._free_atoms(l.hi)
        self._tiled = out
        return out

    def _free_atoms(self, p: Poly) -> set[str]:
        out = set()
        for a in self.it.terms.deep_atoms(p):
            if a[0] in "%@{" or a.startswith("pid") or a in self.consts:
                continue
            out.add(a)
        return out

    def _access_atoms(self, a: Access, coords: list[Poly]) -> set[str]:
        out: set[str] = set()
        for c in coords:
            out |= self._free_atoms(c)
        for e in ([a.mask] if a.mask is not None else []) + list(a.guards):
            for p in b_polys(e):
                out |= self._free_atoms(p)
        for l in a.loops:
            for p in (l.lo, l.hi, l.step):
                if p is not None:
                    out |= self._free_atoms(p)
        return out

    def _mask_extent(self, accs: list[Access]) -> Poly | None:
        """``offs < n`` in every store's mask, ``offs`` the store's offset: extent [0, n)."""
        ext = None
        for a in accs:
            found = None
            for c in conjuncts(a.mask):
                if c[0] == "cmp" and c[1] == "<":
                    rest = c[2] - a.offset
                    # c: offset - n < 0  ->  rest = -n
                    if not self.it.terms.index_vars(rest) and not self._pid_axes([rest]):
                        found = -rest
            if found is None or (ext is not None and found != ext):
                return None
            ext = found
        return ext

    def _loads_of(self, stores: list[Access], decl) -> list[Access]:
        key = (tuple(a.id for a in stores), decl.name)
        cache = self.__dict__.setdefault("_loads_cache", {})
        if key not in cache:
            cache[key] = self._loads_of_uncached(stores, decl)
        return cache[key]

    def _loads_of_uncached(self, stores: list[Access], decl) -> list[Access]:
        ids: set[int] = set()
        for s in stores:
            if s.value is not None:
                ids |= set(s.value.loads or ())
        return [a for a in self.it.accesses if a.id in ids and a.kind == "load"
                and a.base == decl.ptr]

    # -- concrete sizes
    def _scenarios(self, needed: set[str], targets) -> list[dict]:
        blocks = [v for v in self.consts.values() if v >= 2]
        B = max(blocks) if blocks else 16
        tiled = sorted(a for a in needed if a in self.tiled)
        counts = sorted(a for a in needed if a not in self.tiled)
        shapes = [
            (lambda j: B * (j + 1) + j + 1, lambda j: 2 + j % 2),   # partial last blocks
            (lambda j: B * (j + 2), lambda j: 3 - j % 2),           # whole blocks
            (lambda j: max(1, B // 2 + j + 1), lambda j: 1),        # less than one block
            (lambda j: 1, lambda j: 1),
        ]
        out = []
        for ft, fc in shapes:
            env = dict(self.consts)
            for j, a in enumerate(tiled):
                env[a] = ft(j)
            for j, a in enumerate(counts):
                env[a] = fc(j)
            if self._assumptions_hold(env):
                out.append(env)
            if len(out) >= MAX_SCENARIOS:
                break
        return out

    def _heuristics(self) -> list:
        """``@triton.heuristics({"NAME": lambda args: EXPR})`` of this case's constexprs, as
        (name, case value, parsed EXPR over kernel arguments)."""
        hit = getattr(self, "_heur", None)
        if hit is not None:
            return hit
        import re
        from ..exprs import parse_expr
        out = []
        for name, e in self.kernel.heuristics.items():
            if name not in self.it.consts or e.tree is None or not isinstance(e.tree, ast.Lambda):
                continue
            body = ast.unparse(e.tree.body)
            arg = e.tree.args.args[0].arg if e.tree.args.args else "args"
            body = re.sub(rf"\b{arg}\s*\[\s*['\"](\w+)['\"]\s*\]", r"\1", body)
            tree = parse_expr(body)
            if tree is not None:
                out.append((name, self.it.consts[name], tree))
        self._heur = out
        return out

    def _assumptions_hold(self, env: dict) -> bool:
        ev = _Evaluator(self.it, env)
        for name, value, tree in self._heuristics():
            try:
                v = self.it.annot_eval(tree)
            except Exception:
                continue
            try:
                if v.kind == "bool" and v.mask is not None:
                    r = b_eval(v.mask, ev.poly)
                    if r is not None and bool(r) != bool(value):
                        return False
                elif v.kind == "int" and v.poly is not None and isinstance(value, int):
                    if ev.poly(v.poly) != value:
                        return False
            except _Unknown:
                continue
        for fact in self.solver.assumptions:
            try:
                r = b_eval(fact, ev.poly)
            except _Unknown:
                continue
            if r is False:
                return False
        return True

    def _programs(self, env: dict) -> list[tuple] | None:
        ev = _Evaluator(self.it, env)
        dims = [ev.poly(p) for p in self.grid]
        if any(d < 0 for d in dims):
            return None
        total = dims[0] * dims[1] * dims[2]
        if total == 0 or total > MAX_PROGRAMS:
            return None
        return list(itertools.product(range(dims[0]), range(dims[1]), range(dims[2])))

    # -- one target at one scenario
    def _check_target(self, t, env: dict, programs: list[tuple], found: set) -> None:
        boxes: list[_Box] = []
        for acc in t.stores:
            for n, pid in enumerate(programs):
                if n % 64 == 63 and not self.time_left():
                    raise _Unknown("time budget")
                for b in self._boxes(acc, t.coords[acc.id], env, pid):
                    boxes.append(b)
                    # A box can cost MAX_LANES evaluations: without the deadline here a kernel
                    # ran 78 s past a 2 s budget (tests/test_regressions_fuzz.py).
                    if len(boxes) > MAX_BOXES or not self.time_left():
                        return
        ev = _Evaluator(self.it, env)
        sizes = None
        if t.sizes is not None:
            sizes = [ev.poly(s) for s in t.sizes]
        if ("KS302", t.base) not in found:
            race = _find_race(boxes, sizes)
            if race is not None:
                found.add(("KS302", t.base))
                self._report_race(t, env, race)
        if sizes is not None and ("KS301", t.base) not in found:
            total = 1
            for s in sizes:
                total *= max(s, 0)
            if 0 < total <= MAX_ELEMENTS:
                hole = _find_hole(boxes, sizes)
                if hole is not None:
                    found.add(("KS301", t.base))
                    self._report_hole(t, env, sizes, hole)
        if t.computes is not None and ("KS303", t.base) not in found:
            if self._check_reads_all(t, env, programs, boxes, sizes):
                found.add(("KS303", t.base))

    def _boxes(self, acc: Access, coords: list[Poly], env: dict, pid: tuple):
        """The boxes of ``acc`` in program ``pid``: one per loop iteration (all iterations of
        the enclosing loops, outermost first)."""
        base_env = dict(env)
        for k in range(3):
            base_env[f"pid{k}"] = pid[k]
        for iters in self._iterations(acc.loops, base_env):
            e = dict(base_env)
            e.update(iters)
            b = _box(self.it, acc, coords, e)
            if b is None:
                raise _Unknown("tile")
            b.pid, b.iters, b.acc = pid, {l.var: iters.get(l.atom, 0) for l in acc.loops}, acc
            if not b.empty():
                yield b

    def _iterations(self, loops, env: dict):
        if not loops:
            yield {}
            return
        first, rest = loops[0], loops[1:]
        ev = _Evaluator(self.it, env)
        if first.hi is None:
            raise _Unknown("unbounded loop")
        lo, hi, step = ev.poly(first.lo), ev.poly(first.hi), ev.poly(first.step)
        if step == 0:
            raise _Unknown("zero step")
        n = 0
        v = lo
        while (v < hi if step > 0 else v > hi):
            if n >= MAX_TRIPS:
                raise _Unknown("too many iterations")
            e2 = dict(env)
            e2[first.atom] = n
            for inner in self._iterations(rest, e2):
                out = {first.atom: n}
                out.update(inner)
                yield out
            n += 1
            v += step

    # -- reporting of enumeration results
    def _sizes_of(self, env: dict, t) -> dict:
        out = {}
        for a in sorted(t.atoms):
            if a in env:
                out[a] = env[a]
        for a in sorted(self._grid_atoms()):
            if a in env:
                out[a] = env[a]
        for k, v in self.consts.items():
            out.setdefault(k, v)
        return out

    def _grid_atoms(self) -> set[str]:
        out = set()
        for p in self.grid or []:
            out |= self._free_atoms(p)
        return out

    def _grid_text(self, env: dict) -> str:
        ev = _Evaluator(self.it, env)
        dims = [ev.poly(p) for p in self.grid]
        while len(dims) > 1 and dims[-1] == 1:
            dims.pop()
        return "(" + ", ".join(map(str, dims)) + ("," if len(dims) == 1 else "") + ")"

    def _name_elem(self, t, elem: tuple) -> str:
        if t.decl is not None:
            return f"{t.decl.name}[{', '.join(map(str, elem))}]"
        return f"{t.base}[{elem[0]}]"

    def _report_race(self, t, env: dict, race) -> None:
        b1, b2, elem = race
        acc = b2.acc
        where = self._name_elem(t, elem)
        pid1 = self._pid(b1.pid)
        pid2 = self._pid(b2.pid)
        sizes = self._sizes_of(env, t)
        notes = [f"grid {self._grid_text(env)} ({'#@ grid' if self.grid_source == 'annotation' else 'launch site'})",
                 f"program {pid1} writes {where} at line {b1.acc.line + 1}"
                 + (f" (iteration {_fmt_iters(b1.iters)})" if b1.iters else ""),
                 f"program {pid2} writes {where} at line {acc.line + 1}"
                 + (f" (iteration {_fmt_iters(b2.iters)})" if b2.iters else "")]
        cex = Counterexample(program_id=pid2, loop=dict(b2.iters), sizes=sizes,
                             values={"element": where, "other program_id": list(pid1)},
                             method="enumeration", notes=notes)
        msg = (f"write race: programs {pid1} and {pid2} both write {where} "
               f"(sizes {_fmt_sizes(sizes, t.atoms | self._grid_atoms())})")
        related = [Related(b1.acc.span, f"program {pid1} writes here")] if b1.acc is not acc \
            else []
        related += related_chain(self.it, [acc.ptr_node], acc.line)
        self.rep.outcome("refuted", "no two programs write one element", acc.span)
        self.rep.report("KS302", msg, acc.span, cex, related,
                        dedupe=("KS302", acc.span.line, acc.span.col))

    def _report_hole(self, t, env: dict, sizes: list[int], elem: tuple) -> None:
        acc = t.stores[-1]
        where = self._name_elem(t, elem)
        sizes_d = self._sizes_of(env, t)
        writer = self._would_write(t, env, elem)
        notes = [f"grid {self._grid_text(env)} ({'#@ grid' if self.grid_source == 'annotation' else 'launch site'}); "
                 f"extent from {t.extent_from}: {list(sizes)}"]
        if writer is not None:
            pid, lane, inside = writer
            lane_txt = " ".join(f"{k}={v}" for k, v in lane.items()) if isinstance(lane, dict) \
                else str(lane)
            if inside:
                notes.append(f"program {pid} would write it (lane {lane_txt}) but its mask is "
                             f"false")
            else:
                notes.append(f"program {pid} would write it (lane {lane_txt}), but the grid "
                             f"{self._grid_text(env)} has no such program")
        else:
            notes.append("no program of any grid would write it: the address or mask never "
                         "reaches it")
        cex = Counterexample(program_id=writer[0] if writer else None,
                             element=dict(writer[1]) if writer else {},
                             sizes=sizes_d, values={"element": where},
                             method="enumeration", notes=notes)
        msg = (f"{where} is never written by any program (sizes "
               f"{_fmt_sizes(sizes_d, t.atoms | self._grid_atoms())}, grid "
               f"{self._grid_text(env)})")
        related = []
        if self.grid_span is not None:
            related.append(Related(self.grid_span, "grid" if self.grid_source == "annotation"
                                   else "launch grid"))
        related += related_chain(self.it, [acc.ptr_node, acc.mask_node], acc.line)
        self.rep.outcome("refuted", "every output element is written", acc.span)
        self.rep.report("KS301", msg, acc.span, cex, related,
                        dedupe=("KS301", acc.span.line, acc.span.col))

    def _would_write(self, t, env: dict, elem: tuple):
        """The program (inside or past the grid) whose tile holds ``elem``: probes the
        programs of a grid twice as large per axis."""
        ev = _Evaluator(self.it, env)
        dims = [ev.poly(p) for p in self.grid]
        ranges = [range(max(1, 2 * d + 1)) if d > 1 or self._pid_used(k) else range(1)
                  for k, d in enumerate(dims)]
        n = 0
        for pid in itertools.product(*ranges):
            n += 1
            if n > 512:
                break
            for acc in t.stores:
                e = dict(env)
                for k in range(3):
                    e[f"pid{k}"] = pid[k]
                try:
                    for iters in self._iterations(acc.loops, e):
                        e2 = dict(e)
                        e2.update(iters)
                        lane = _lane_of(self.it, acc, t.coords[acc.id], e2, elem)
                        if lane is not None:
                            lane_vals, masked_in = lane
                            inside = all(p < d for p, d in zip(pid, dims))
                            if inside and masked_in:
                                continue
                            return self._pid(pid), lane_vals, inside
                except _Unknown:
                    return None
        return None

    def _pid_used(self, k: int) -> bool:
        return any(k in self._pid_axes_access(a) for a in self.it.accesses)

    # -- KS303 by enumeration
    def _check_reads_all(self, t, env: dict, programs, boxes: list[_Box], sizes) -> bool:
        it = self.it
        comp = t.computes
        # one written element per program, at most a few programs
        firsts: dict[tuple, _Box] = {}
        for b in boxes:
            if b.pid not in firsts and b.acc.kind == "store":
                firsts[b.pid] = b
        chosen = list(firsts.values())
        chosen = chosen[-1:] + chosen[:1] if len(chosen) > 1 else chosen
        for b in chosen:
            elem = b.first()
            if sizes is not None and any(not (0 <= e < s) for e, s in zip(elem, sizes)):
                continue
            out_env = {}
            for idx, val in zip(comp.out.indices, elem):
                if isinstance(idx.tree, ast.Name):
                    out_env[idx.tree.id] = val
            for ref in comp.inputs:
                decl = it.decl_names.get(ref.tensor)
                if decl is None or len(ref.indices) != len(decl.dims):
                    continue
                loads = self._loads_of(t.stores, decl)
                if not loads:
                    continue
                r = self._reads_all_input(t, b, elem, out_env, ref, decl, loads, env)
                if r is not None:
                    self._report_partial(t, b, elem, ref, decl, env, r)
                    return True
        return False

    def _reads_all_input(self, t, b: _Box, elem, out_env: dict, ref, decl, loads, env):
        it = self.it
        sizes = it.decl_sizes(decl)
        if sizes is None:
            return None
        ev = _Evaluator(it, env)
        want_point: dict[int, int] = {}
        ranges: dict[int, tuple[int, int]] = {}
        for j, idx in enumerate(ref.indices):
            if idx.text.strip() == ":":
                ranges[j] = (0, ev.poly(sizes[j]))
            elif _is_range(idx):
                lo_t, hi_t = _split_range(idx.text)
                lo = self._eval_annot(lo_t, out_env, env) if lo_t else 0
                hi = self._eval_annot(hi_t, out_env, env) if hi_t else ev.poly(sizes[j])
                if lo is None or hi is None:
                    return None
                ranges[j] = (lo, hi)
            else:
                v = self._eval_annot(idx.text, out_env, env)
                if v is not None:
                    want_point[j] = v
        if not ranges:
            return None
        got: dict[int, set] = {j: set() for j in ranges}
        any_box = False
        for load in loads:
            coords = it.decompose(decl, load.offset) if load.offset is not None else None
            if coords is None:
                return None
            try:
                for lb in self._boxes(load, coords, env, b.pid):
                    any_box = True
                    if lb.points is not None:
                        for pt in lb.points:
                            if all(pt[j] == v for j, v in want_point.items()):
                                for j in ranges:
                                    got[j].add(pt[j])
                        continue
                    if all(v in _AxisSet.of(lb.axes[j]) for j, v in want_point.items()):
                        for j in ranges:
                            got[j].update(lb.axes[j])
            except _Unknown:
                return None
        if not any_box:
            return None
        load_ids = {l.id for l in loads}
        for w in self.it.wheres:
            kept = self._where_kept(w, load_ids, decl, ranges, out_env, env, b.pid)
            if kept is None:
                continue
            for j, vals in kept.items():
                got[j] &= vals
        for j, (lo, hi) in ranges.items():
            missing = [x for x in range(lo, min(hi, lo + MAX_ELEMENTS)) if x not in got[j]]
            if missing:
                return (j, lo, hi, missing, sorted(got[j]), want_point)
        return None

    def _where_kept(self, w, load_ids: set, decl, ranges: dict, out_env: dict, env: dict,
                    pid: tuple) -> dict | None:
        """For ``tl.where(cond, x, CONST)`` whose arm derives from a load of ``decl``: the
        values of each range coordinate of ``decl`` that survive ``cond`` in the lanes of the
        written element (matched through the arm's tags), over all iterations. None when the
        where does not relate the written element to ``decl``'s coordinates (or the engine
        does not record the arm's tags)."""
        tags = getattr(w, "tags", None)
        other = getattr(w, "other", None)
        if not tags or not isinstance(other, (int, float)) or not (set(w.loads) & load_ids):
            return None
        rng = {}
        for j in ranges:
            t = tags.get(decl.dims[j].name)
            if t is not None and t.tensor == decl.name:
                rng[j] = t.coord
        if not rng:
            return None
        range_names = {decl.dims[j].name for j in rng}
        rows = {n: tags[n].coord for n in out_env if n in tags and n not in range_names}
        if not rows:
            return None
        it = self.it
        base_env = dict(env)
        for k in range(3):
            base_env[f"pid{k}"] = pid[k]
        kept: dict[int, set] = {j: set() for j in rng}
        try:
            for iters in self._iterations(list(getattr(w, "loops", []) or []), base_env):
                e = dict(base_env)
                e.update(iters)
                ev = _Evaluator(it, e)
                allowed = [list(range(n)) for n in w.shape]
                for n, coord in rows.items():
                    vs = it.terms.index_vars(coord)
                    if not vs:
                        if ev.poly(coord) != out_env[n]:
                            return None  # this program's where concerns other elements
                        continue
                    if len(vs) != 1:
                        return None
                    (k,) = vs
                    lin = _linear(it, coord, k, ev)
                    if lin is None:
                        return None
                    a, c = lin
                    allowed[k] = [x for x in allowed[k] if a * x + c == out_env[n]]
                total = 1
                for a_ in allowed:
                    total *= len(a_)
                if total > MAX_LANES:
                    return None
                for lane_vals in itertools.product(*allowed):
                    lane = {f"%{k}": x for k, x in enumerate(lane_vals)}
                    r = b_eval(w.discard, lambda p: ev.lane_poly(p, lane))
                    if r is None:
                        return None
                    if not r:
                        for j, coord in rng.items():
                            kept[j].add(ev.lane_poly(coord, lane))
        except _Unknown:
            return None
        return kept

    def _eval_annot(self, text: str, out_env: dict, env: dict) -> int | None:
        from ..exprs import parse_expr
        cache = self.__dict__.setdefault("_annot_cache", {})
        key = (text, tuple(sorted(out_env.items())))
        if key not in cache:
            tree = parse_expr(text)
            v = None
            if tree is not None:
                try:
                    v = self.it.annot_eval(tree, {k: V("int", poly=Poly.const(x), width=64)
                                                  for k, x in out_env.items()})
                except Exception:
                    v = None
            cache[key] = v
        v = cache[key]
        if v is None or v.kind != "int" or v.poly is None:
            return None
        try:
            return _Evaluator(self.it, env).poly(v.poly)
        except _Unknown:
            return None

    def _report_partial(self, t, b: _Box, elem, ref, decl, env, r) -> None:
        j, lo, hi, missing, got, want_point = r
        acc = b.acc
        where = self._name_elem(t, elem)
        dim = decl.dims[j].name
        miss_idx = []
        for jj in range(len(decl.dims)):
            if jj == j:
                miss_idx.append(str(missing[0]))
            elif jj in want_point:
                miss_idx.append(str(want_point[jj]))
            else:
                miss_idx.append(decl.dims[jj].name)
        missing_el = f"{decl.name}[{', '.join(miss_idx)}]"
        read = _ranges_text(got)
        sizes = self._sizes_of(env, t)
        for s in it_sizes(self.it, decl):
            if s in env:
                sizes.setdefault(s, env[s])
        notes = [f"program {self._pid(b.pid)} writes {where}; `computes` needs {decl.name} "
                 f"{dim} in [{lo}, {hi}), the program reads {dim} in {read or 'nothing'}",
                 f"{len(missing)} value{'s' if len(missing) > 1 else ''} of {dim} never read, "
                 f"first {missing_el}"]
        cex = Counterexample(program_id=self._pid(b.pid), sizes=sizes,
                             values={"element": where, "unread": missing_el,
                                     f"{dim} read": read, f"{dim} needed": f"[{lo}, {hi})"},
                             method="enumeration", notes=notes)
        msg = (f"footprint incomplete: {where} should read {decl.name}[{ref_text(ref)}] but "
               f"never reads {missing_el} ({dim} read: {read or 'none'}; needed [{lo}, {hi}); "
               f"sizes {_fmt_sizes(sizes, t.atoms)})")
        related = [Related(t.computes.span, "#@ computes")]
        loads = self._loads_of(t.stores, decl)
        for l in loads[:2]:
            related.append(Related(l.span, f"reads {decl.name}"))
            for lp in l.loops[:1]:
                sp = Span(lp.line, 0, lp.line, len(self.parsed.lines[lp.line])
                          if lp.line < len(self.parsed.lines) else 0)
                related.append(Related(sp, f"loop over {lp.var}"))
        self.rep.outcome("refuted", f"every written element reads all of {decl.name}"
                         f"[{ref_text(ref)}]", acc.span)
        self.rep.report("KS303", msg, acc.span, cex, related,
                        dedupe=("KS303", acc.span.line, decl.name))


# ============================================================================ helpers

def it_sizes(it: Interp, decl) -> list[str]:
    out = []
    for s in it.decl_sizes(decl) or []:
        out += [a for a in s.atoms() if a[0] not in "%@?{"]
    return out


def ref_text(ref) -> str:
    return ", ".join(i.text for i in ref.indices)


def _is_range(idx) -> bool:
    t = idx.text.strip()
    if t == ":":
        return True
    depth = 0
    for ch in t:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == ":" and depth == 0:
            return True
    return False


def _split_range(text: str) -> tuple[str, str]:
    depth = 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == ":" and depth == 0:
            return text[:i].strip(), text[i + 1:].strip()
    return text, ""


def _ranges_text(values: list[int]) -> str:
    if not values:
        return ""
    parts = []
    start = prev = values[0]
    for v in values[1:]:
        if v == prev + 1:
            prev = v
            continue
        parts.append((start, prev))
        start = prev = v
    parts.append((start, prev))
    return ", ".join(f"[{a}, {b + 1})" for a, b in parts[:4]) + (" ..." if len(parts) > 4
                                                                 else "")


def _trim_pid(pid: tuple) -> tuple:
    p = list(pid)
    while len(p) > 1 and p[-1] == 0:
        p.pop()
    return tuple(p)


def _fmt_iters(iters: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in iters.items())


def _fmt_sizes(sizes: dict, relevant: set) -> str:
    items = [(k, v) for k, v in sizes.items() if k in relevant] or list(sizes.items())
    return " ".join(f"{k}={v}" for k, v in items[:8])


def _concrete_text(it: Interp, p: Poly, env, reads: dict) -> str:
    """``ExpertIds[1] = 0`` for a value read from memory, else the value."""
    def rd(b, o):
        return reads.get((b, o), 0)
    try:
        val = it.terms.evaluate(p, env, rd)
    except Exception:
        return show(p, it)
    if len(p.terms) == 1:
        (mono, c), = p.terms.items()
        if c == 1 and len(mono) == 1 and mono[0][0] == "{":
            d = it.terms.defs.get(mono[0])
            if d and d[0] == "read":
                try:
                    off = it.terms.evaluate(d[1][1], env, rd)
                    return f"{_read_name(it, d[1][0])}[{off}] = {val}"
                except Exception:
                    pass
    return str(val)


def _read_name(it: Interp, base: str) -> str:
    d = it.decls.get(base)
    return d.name if d is not None else base


def _read_text(it: Interp, base, arg: int) -> str:
    """``ExpertIds[25]`` for a value read from memory; ``expert(3)`` for an annotation's
    function at an argument (solver models key those ("uf", name))."""
    if isinstance(base, tuple):
        return f"{base[1]}({arg})"
    return f"{_read_name(it, base)}[{arg}]"


def _divisibility_checked(parsed: ParsedFile, line0: int, num: str, den: str) -> bool:
    """The host code makes ``num % den == 0`` known around the launch at 0-based ``line0``:
    an enclosing ``if`` or an earlier ``assert`` tests it, or ``den`` is computed from ``num``
    in the same function."""
    from ..infer import module_tree
    tree = module_tree(parsed)
    if tree is None:
        return False
    line1 = line0 + 1

    def is_check(test: ast.AST) -> bool:
        for n in ast.walk(test):
            if isinstance(n, ast.Compare) and len(n.ops) == 1 and \
                    isinstance(n.ops[0], ast.Eq):
                sides = [n.left, n.comparators[0]]
                for a, b in (sides, sides[::-1]):
                    if isinstance(a, ast.BinOp) and isinstance(a.op, ast.Mod) and \
                            isinstance(b, ast.Constant) and b.value == 0 and \
                            ast.unparse(a.left) == num and ast.unparse(a.right) == den:
                        return True
        return False

    for n in ast.walk(tree):
        if isinstance(n, ast.If) and n.lineno <= line1 <= (n.end_lineno or n.lineno):
            if any(s.lineno <= line1 <= (s.end_lineno or s.lineno) for s in n.body) and \
                    is_check(n.test):
                return True
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                n.lineno <= line1 <= (n.end_lineno or n.lineno):
            for st in ast.walk(n):
                if isinstance(st, ast.Assert) and st.lineno < line1 and is_check(st.test):
                    return True
                # a divisor computed from the size itself (`per_cta = n // 16`, then
                # `n // per_cta`) is chosen to divide it
                if isinstance(st, ast.Assign) and st.lineno < line1 and \
                        any(isinstance(t, ast.Name) and t.id == den for t in st.targets) and \
                        any(ast.unparse(x) == num for x in ast.walk(st.value)):
                    return True
    return False


def _tile_constexprs(kernel: KernelInfo) -> set[str]:
    """Constexpr parameters used as a tile size: inside ``tl.arange(...)`` or as the step of
    a ``range``/``tl.range`` loop (a row length passed as a constexpr is not one)."""
    cx = {p.name for p in kernel.params if p.is_constexpr}
    out: set[str] = set()
    if kernel.tree is None:
        return out
    for n in ast.walk(kernel.tree):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        fname = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) \
            else ""
        args = []
        if fname == "arange":
            args = n.args
        elif fname in ("range", "static_range") and len(n.args) >= 3:
            args = [n.args[2]]
        for a in args:
            out |= {x.id for x in ast.walk(a) if isinstance(x, ast.Name) and x.id in cx}
    return out


def _top_level_floordivs(tree: ast.expr):
    """Floor divisions of a grid axis outside any call (``n // BLOCK``, ``B * (n // BLOCK)``;
    not the ``out_c // groups`` inside ``triton.cdiv(out_c // groups, BLOCK)``)."""
    stack = [tree]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Call):
            continue
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.FloorDiv):
            yield n
        stack.extend(ast.iter_child_nodes(n))


def _is_ceil_idiom(node: ast.BinOp) -> bool:
    """``(a + b - 1) // b`` (any order of the terms)."""
    den = ast.unparse(node.right)
    terms: list[tuple[int, str]] = []

    def flat(n, sign):
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Sub)):
            flat(n.left, sign)
            flat(n.right, sign if isinstance(n.op, ast.Add) else -sign)
        else:
            terms.append((sign, ast.unparse(n)))
    flat(node.left, 1)
    if (1, den) in terms and (-1, "1") in terms:
        return True
    # (a + (b - 1)) already flattened; a + b_minus_1 with a name like BLOCK_M1: not recognised
    return False



__all__ = ["run_grid_checks"]
