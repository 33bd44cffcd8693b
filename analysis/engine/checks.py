"""Per-kernel checks on what the interpreter recorded: bounds (KS101-KS107), int32 overflow
(KS110), tag invariants (KS201-KS204), numerics (KS401, KS402).

Each check states an obligation, tries a cheap syntactic proof first, then asks the solver for
a violation. ``sat`` -> a finding with the model as counterexample; ``unsat`` -> proved;
timeout -> unproved (counted, never reported).
"""
from __future__ import annotations

import ast
import math
from dataclasses import dataclass

from ..model import Related, Span
from .access import Access
from .interp import Interp, _src
from .poly import ZERO, Poly, fmt
from .render import MESSAGE_TERMS, atom_names, dot_index_name, elide, mask_text, show
from .report import (Reporter, counterexample, enclosing_blocks, insert_kwarg_fix,
                     related_chain, replace_fix)
from .solver import INT32_MAX, Domain, Result, SolverContext
from .values import (FINITE, POSITIVE, TRUE, UNDEF, b_and, b_not, b_or, cmp,
                     conjuncts, pad_value_ok)


def run_checks(it: Interp, solver: SolverContext, rep: Reporter, launch) -> None:
    done: set[int] = set()  # accesses that already have a bounds finding
    for acc in it.accesses:
        _check_overflow(it, solver, rep, acc)
    # Plain code whose tensors were inferred from the launch site: the kernel's own masks and
    # wheres explain a bounds bug better than a declaration the user never wrote, so KS104,
    # KS102/KS105 and KS103 go before KS101 there.
    inferred = inferred_decls(it)
    no_decl: set[int] = set()
    for acc in it.accesses:
        if acc.base not in inferred:
            continue
        before = len(rep.findings)
        if not (_check_mask_not_applied(it, solver, rep, acc)
                or _check_inferred_extent(it, solver, rep, acc)):
            _check_unmasked_beside_masked(it, solver, rep, acc)
        if len(rep.findings) > before:
            done.add(acc.id)
        elif _under_unknown_flag(it, acc, launch):
            # `if EVEN_K:` set by a host heuristic the file does not show: the unmasked branch
            # is right exactly when the flag is, which sizes from the launch cannot judge
            no_decl.add(acc.id)
    for acc in it.accesses:
        if acc.id in done or acc.id in no_decl:
            continue
        if acc.base is not None and acc.base in it.decls:
            if _check_declared(it, solver, rep, acc):
                done.add(acc.id)
    for acc in it.accesses:
        if acc.id not in done and acc.base not in inferred and \
                _check_mask_not_applied(it, solver, rep, acc):
            done.add(acc.id)
    for acc in it.accesses:
        if acc.id not in done and acc.base not in inferred and \
                _check_inferred_extent(it, solver, rep, acc):
            done.add(acc.id)
    for acc in it.accesses:
        if acc.id not in done and acc.base not in inferred:
            _check_unmasked_beside_masked(it, solver, rep, acc)
    if launch is not None:
        for acc in it.accesses:
            _check_foreign_stride(it, rep, acc, launch)
    for ob in it.obligations:
        # Tags compare dimension names; the names of inferred tensors come from their size
        # arguments, which say nothing of which coordinates the kernel means to combine (a
        # shift or stencil is plain code's business), so tag checks need the user's own names.
        if ob.kind in ("mix", "dot") and not inferred:
            _check_tags(it, solver, rep, ob)
        elif ob.kind == "pad":
            _check_pad(it, solver, rep, ob)
        elif ob.kind == "assert":
            _check_assert(it, solver, rep, ob)
    for acc in it.accesses:
        if acc.kind in ("store", "atomic") and acc.id not in done and not any(
                k[:3] == ("bounds", acc.span.line, acc.span.col) for k in rep._seen):
            # a store with a bounds finding is missing its mask: that finding says it
            _check_undefined_store(it, solver, rep, acc)
    for acc in it.accesses:
        if acc.kind == "store" and acc.base in it.decls and acc.base not in inferred:
            _check_store_alignment(it, solver, rep, acc)
    _check_low_precision(it, rep)


# ------------------------------------------------------------------------- helpers
def _under_unknown_flag(it: Interp, acc: Access, launch) -> bool:
    """The access runs under a condition on a constexpr flag that the launch site does not
    pass (no default either): a host heuristic such as ``EVEN_K = K % BLOCK_K == 0`` sets
    it, and the engine only enumerates its values."""
    from ..launches import bind_args
    bound = set(bind_args(launch, it.kernel)) if launch is not None else set()
    flags = {p.name for p in it.kernel.params
             if p.is_constexpr and p.default is None and p.name not in bound
             and (p.name in it.fallback or isinstance(it.consts.get(p.name), bool))}
    if not flags or it.kernel.tree is None:
        return False
    # the case fixes the flag, so the branch leaves no guard: look at the source
    for node in ast.walk(it.kernel.tree):
        if isinstance(node, ast.If) and any(isinstance(n, ast.Name) and n.id in flags
                                            for n in ast.walk(node.test)):
            if any(n is acc.node for b in node.body + node.orelse for n in ast.walk(b)):
                return True
    return False


def _mask_atoms(it: Interp) -> set[str]:
    """Atoms of every mask the kernel computes or applies, and names in any comparison of its
    source (a branch this case does not take counts: the sizes it bounds tiles by)."""
    from .values import b_polys
    out: set[str] = set()
    if it.kernel.tree is not None:
        for node in ast.walk(it.kernel.tree):
            if isinstance(node, ast.Compare):
                out |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    masks = [a.mask for a in it.accesses if a.mask is not None]
    masks += [mv.mask for _, mv, _ in it.masks if getattr(mv, "mask", None) is not None]
    for m in masks:
        for p in b_polys(m):
            out |= set(it.terms.deep_atoms(p))
    return out


def _inferred_note(it: Interp, decl) -> list[Related]:
    """Where a declaration the user never wrote comes from (the launch site)."""
    if decl.ptr not in inferred_decls(it):
        return []
    dims = ", ".join(f"{d.name}: {d.size.text}" for d in decl.dims)
    strides = "" if decl.strides is None else \
        f" strides({', '.join(s.text for s in decl.strides)})"
    return [Related(decl.span, f"inferred from this launch: {decl.name} = {decl.ptr}[{dims}]"
                               f"{strides}")]


def inferred_decls(it: Interp) -> set[str]:
    """Pointers declared by annotations inferred from the launch site, not by the user (the
    engine completes plain kernels, see ``engine._with_inferred``)."""
    own = it.parsed.kernel(it.kernel.name) if it.parsed is not None else None
    if own is None or own is it.kernel:
        return set()
    user = {d.ptr for d in own.annotations.tensors.values()}
    return set(it.decls) - user


def _op_name(acc: Access) -> str:
    return {"load": "tl.load", "store": "tl.store", "atomic": "atomic"}[acc.kind] + (
        "" if acc.via == "ptr" else f" ({'block pointer' if acc.via == 'blockptr' else 'descriptor'})")


def _nonneg(it: Interp, p: Poly, solver: SolverContext | None = None) -> bool | None:
    """True when ``p`` is provably >= 0: after substituting constexpr values every
    coefficient is >= 0 and every atom is non-negative (indices, program ids, loop counters,
    parameters; ``x % y`` when ``x`` is, since Triton's remainder takes the dividend's sign;
    ``x // y``, ``min``, ``max`` when their operands are, or when the solver proves the
    opaque term non-negative once per kernel case). None when an atom has unknown sign."""
    p = _concretize(it, p)
    for m, c in p.terms.items():
        if c < 0 and m:
            return False
        if c < 0:
            # a negative constant can be covered by a positive term only with more reasoning
            return False
        for a in m:
            k = a[0]
            if k in "%@" or a.startswith("pid") or a in it.consts:
                continue
            if k in "?":
                return None
            if k == "{":
                if not _opaque_nonneg(it, a, solver):
                    return None
    return True


def _opaque_nonneg(it: Interp, a: str, solver: SolverContext | None) -> bool:
    op, args = it.terms.defs.get(a, ("unknown", ()))
    if op == "mod":
        return _nonneg(it, args[0], solver) is True
    if op in ("div", "min", "max"):
        if all(_nonneg(it, x, solver) is True for x in args if isinstance(x, Poly)):
            return True
        if solver is None:
            return False
        cache = solver.__dict__.setdefault("_nonneg_lemmas", {})
        if a not in cache:
            res = solver.query([cmp("<", Poly.atom(a), ZERO)], Domain(), small_first=False)
            cache[a] = res.status == "unsat"
        return cache[a]
    return False


def _concretize(it: Interp, p: Poly) -> Poly:
    consts = {a: Poly.const(int(v)) for a in p.atoms() if a in it.consts
              for v in [it.consts[a]] if isinstance(v, int)}
    return p.subst(consts) if consts else p


def _has_unknown_atoms(it: Interp, p: Poly) -> bool:
    for a in it.terms.deep_atoms(p):
        if a[0] == "?":
            return True
        if a[0] == "{" and it.terms.defs.get(a, ("",))[0] in ("read", "bits", "where"):
            return True
    return False


def _mask_has_opaque(mask) -> bool:
    if mask is None:
        return False
    t = mask[0]
    if t == "opaque":
        return True
    if t in ("and", "or"):
        return any(_mask_has_opaque(x) for x in mask[1])
    if t == "not":
        return _mask_has_opaque(mask[1])
    return False


def _guards_ok(acc_or_guards) -> bool:
    gs = acc_or_guards.guards if hasattr(acc_or_guards, "guards") else acc_or_guards
    return not any(_mask_has_opaque(g) for g in gs)


def _related_access(it: Interp, acc: Access) -> list[Related]:
    return related_chain(it, [acc.ptr_node, acc.mask_node], acc.line)


def _bound_conjuncts(it: Interp, mask):
    """Mask conjuncts of the form ``e < n`` (or ``e <= n - 1``) where ``e`` holds the index /
    program / loop atoms and ``n`` only parameters and constants: (e, n, conjunct)."""
    out = []
    for c in conjuncts(mask):
        if c[0] != "cmp" or c[1] not in ("<", "<="):
            continue
        d = c[2]
        idx = {}
        bound = {}
        for m, k in d.terms.items():
            if not m or any(a[0] in "%@{?" or a.startswith("pid") for a in m):
                idx[m] = k  # constants stay with the index expression: `i + 1 < n`
            else:
                bound[m] = k
        e, nb = Poly(idx), -Poly(bound)
        if not idx:
            continue
        if c[1] == "<=":
            nb = nb + 1
        # e must be the "positive" side: offsets grow with it
        if any(k < 0 for k in idx.values()) and not any(k > 0 for k in idx.values()):
            continue
        out.append((e, nb, c))
    return out


# ------------------------------------------------------------------------- KS110
def _check_overflow(it: Interp, solver: SolverContext, rep: Reporter, acc: Access) -> None:
    if not acc.risks:
        return
    limit = it.config.max_elements
    for r in acc.risks:
        if ("KS110", r.line, r.col) in rep._seen or ("KS110", r.left, r.right) in rep._seen:
            continue  # one finding per product (and per product text), at its first access
        text = f"int32 product {r.left} * {r.right} <= 2^31 - 1"
        if r.needs_grid and not all(int(a[3]) in solver.pid_bounds
                                    for a in it.terms.deep_atoms(r.poly)
                                    if a in ("pid0", "pid1", "pid2")):
            # axes 1/2 and tiles: without a grid nothing says how many programs there are
            # (the one-program-per-row reading is for a scalar of axis 0 only)
            continue
        if limit <= INT32_MAX:
            rep.outcome("proved", text, acc.span)
            continue
        within = _declared_within(it, acc, limit)
        res = None if r.needs_grid else _overflow_witness(it, solver, r.poly, limit, within)
        method = "enumeration"
        if res is None:
            method = "smt"
            cond = [cmp(">", r.poly, Poly.const(INT32_MAX)),
                    cmp("<", r.poly, Poly.const(limit))]
            dom = Domain(r.shape, list(acc.loops), list(acc.guards) if _guards_ok(acc) else [])
            hint = [cmp("==", Poly.atom(a), Poly.const(4096)) for a in sorted(r.poly.atoms())
                    if a in it.runtime_params][:1]
            if r.needs_grid:
                # one goal (the solver keeps only premises sharing atoms with the last
                # condition): the overflow, within a declared tensor of max-elements
                cond = [b_and(*(cond + within))]
                first = hint + cond
            else:
                # the tensor-size bound is nonlinear (a product of sizes): as part of every
                # query it cost the corpus p95 3-15 ms; the direct witness above applies it
                first = cond + hint
            res = solver.query(first, dom, small_first=False) if hint else Result("unknown")
            if res.status != "sat":
                res = solver.query(cond, dom, small_first=False)
        status = rep.outcome(res, text, acc.span)
        if status != "refuted":
            continue
        cex = counterexample(res, it, r.shape, acc.loops, {f"{r.left} * {r.right}": r.poly},
                             method=method, notes=[f"{r.left} * {r.right} = "
                                    f"{_eval(it, res, r.poly)} > 2^31 - 1 = {INT32_MAX} "
                                    f"(tensors up to max-elements = {limit})"])
        fixes = []
        pid_stmt = _pid_assignment(it, r.pid_name) if r.pid_name else None
        if pid_stmt is not None:
            call = pid_stmt.value
            fixes.append(replace_fix(call, _src(it.parsed, call) + ".to(tl.int64)",
                                     f"Widen {r.pid_name} to int64"))
        elif r.left:
            fixes.append(_edit_left_operand(it, r))
        fixes = [f for f in fixes if f is not None]
        rel = [Related(Span(r.line, r.col, r.line, r.end_col),
                       f"int32 product {r.left} * {r.right}")] + _related_access(it, acc)
        rep.report("KS110", f"int32 offset can overflow: {r.left} * {r.right} passes 2^31 - 1 "
                   f"for large tensors (cast a factor to tl.int64 before multiplying)",
                   acc.span, cex, rel, fixes, dedupe=("KS110", r.line, r.col))
        rep._seen.add(("KS110", r.left, r.right))
        return


def _declared_within(it: Interp, acc: Access, limit: int) -> list:
    """A declared tensor holds at most ``limit`` elements: the product of its sizes (the
    witness must not need a larger tensor than max-elements allows)."""
    decl = it.decls.get(acc.base) if acc.base else None
    sizes = it.decl_sizes(decl) if decl is not None else None
    if not sizes:
        return []
    total = Poly.const(1)
    for s in sizes:
        total = total * s
    return [cmp("<=", total, Poly.const(limit))]


def _overflow_witness(it: Interp, solver: SolverContext, p: Poly, limit: int,
                      within: list = ()) -> Result | None:
    """Without assumptions, a direct witness: every run-time argument of the product = 4096
    (a common row length), other atoms 0, and the smallest program id 0 that passes 2^31 - 1.
    None when assumptions exist or the product is not increasing in program id 0."""
    env = {}
    for a in p.atoms():
        if a in it.consts:
            continue
        env[a] = 4096 if a in it.runtime_params else 0
    env["pid0"] = 0
    look = lambda a: env.get(a, int(it.consts.get(a, 0)) if isinstance(it.consts.get(a, 0), int)
                             else 0)
    try:
        c0 = it.terms.evaluate(p, look)
        env["pid0"] = 1
        slope = it.terms.evaluate(p, look) - c0
    except Exception:
        return None
    if slope <= 0:
        return None
    pid = (INT32_MAX + 1 - c0 + slope - 1) // slope
    env["pid0"] = max(pid, 0)
    val = it.terms.evaluate(p, look)
    if not (INT32_MAX < val < limit) or env["pid0"] > INT32_MAX:
        return None
    # the other sizes: any small choice under which the assumptions and the grid hold
    from .values import b_eval
    others = sorted({a for c in solver.assumptions for q in _polys(c) for a in q.atoms()} |
                    {a for b in solver.pid_bounds.values() if b is not None for a in b.atoms()} |
                    {a for c in within for q in _polys(c) for a in q.atoms()})
    others = [a for a in others if a not in env and a not in it.consts][:3]
    import itertools
    # sizes tried from the realistic (a 4096 row, the grid just large enough) down to 1
    for combo in itertools.product([env["pid0"] + 1, 4096, 64, 1], repeat=len(others)):
        trial = dict(env, **dict(zip(others, combo)))
        look2 = lambda a: trial.get(a, int(it.consts.get(a, 0))
                                    if isinstance(it.consts.get(a, 0), int) else 0)
        ev = lambda q: it.terms.evaluate(q, look2)
        try:
            if not all(b_eval(c, ev) is True for c in list(solver.assumptions) + list(within)):
                continue
            if not all(trial["pid0"] < ev(b) for ax, b in solver.pid_bounds.items()
                       if ax == 0 and b is not None):
                continue
            if any(trial.get(f"pid{ax}", 0) >= ev(b) for ax, b in solver.pid_bounds.items()
                   if ax != 0 and b is not None and f"pid{ax}" in trial):
                continue
        except Exception:
            return None
        return Result("sat", trial)
    return None


def _pid_assignment(it: Interp, name: str):
    for stmt in it.assign_nodes.get(name, []):
        v = getattr(stmt, "value", None)
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and \
                v.func.attr == "program_id":
            return stmt
    return None


def _edit_left_operand(it: Interp, r):
    from ..model import Fix, TextEdit
    start = r.col
    end = start + len(r.left)
    line = it.parsed.lines[r.line] if r.line < len(it.parsed.lines) else ""
    if line[start:end] != r.left:
        return None
    return Fix("Widen to int64 before the multiplication",
               (TextEdit(Span(r.line, start, r.line, end), f"({r.left}).to(tl.int64)"),))


def _eval(it: Interp, res: Result, p: Poly):
    def env(a):
        if a in res.model:
            return res.model[a]
        c = it.consts.get(a)
        return int(c) if isinstance(c, int) else 0
    try:
        return it.terms.evaluate(p, env, lambda b, o: res.reads.get((b, o), 0))
    except Exception:
        return "?"


# ------------------------------------------------------------------------- KS101 / KS106
def _check_declared(it: Interp, solver: SolverContext, rep: Reporter, acc: Access) -> bool:
    decl = it.decls[acc.base]
    if acc.offset is None or _mask_has_opaque(acc.mask) or any(
            a[0] == "?" or (a[0] == "{" and it.terms.defs.get(a, ("",))[0] == "where")
            for a in it.terms.deep_atoms(acc.offset)):
        rep.outcome("unproved", f"{decl.name} in bounds", acc.span)
        return False
    coords = it.decompose(decl, acc.offset)
    if coords is None and acc.base in inferred_decls(it):
        # the launch site fixed sizes and strides, not how the kernel walks them
        rep.outcome("unproved", f"{decl.name} in bounds", acc.span)
        return False
    if coords is None:
        rep.report("KS106", f"{_op_name(acc)} offset {show(acc.offset, it)} does not decompose "
                   f"over the strides declared for {decl.name}", acc.span,
                   related=_related_access(it, acc))
        return True
    sizes = it.decl_sizes(decl)
    if sizes is None:
        return False
    mask = acc.mask if acc.mask is not None else TRUE
    bounds = _bound_conjuncts(it, mask)
    aware = _mask_atoms(it) if acc.base in inferred_decls(it) else None
    for di, (d, c, size) in enumerate(zip(decl.dims, coords, sizes)):
        text = f"0 <= {decl.name}.{d.name} = {show(c, it)} < {show(size, it)}"
        lower_ok = _nonneg(it, c, solver) is True
        upper_ok = any(e == c and n == size for e, n, _ in bounds) or (
            c.is_const() and size.is_const() and c.const_value() < size.const_value())
        if lower_ok and upper_ok:
            rep.outcome("proved", text, acc.span)
            continue
        wrong = None
        if aware is not None and not set(it.terms.deep_atoms(size)) & aware:
            # plain code that never compares anything with this size: the kernel relies on
            # a host fact (BLOCK == n_cols on this path) a launch-site size cannot judge,
            # unless its mask bounds this very coordinate by the size of another dimension
            # (`cols < n_rows`): then the author meant a bound here and picked the wrong one
            wrong = _wrong_bound(it, acc, decl, di, c, size, bounds)
            if wrong is None:
                rep.outcome("unproved", text, acc.span)
                continue
        viol = b_or(cmp("<", c, ZERO), cmp(">=", c, size))
        if lower_ok or acc.base in inferred_decls(it):
            # negative offsets of plain code are KS102's, which knows its guards
            viol = cmp(">=", c, size)
        res = solver.query([mask, viol], _dom(acc))
        if rep.outcome(res, text, acc.span) != "refuted":
            continue
        if wrong is None and aware is not None:
            # masks on swapped axes compare both sizes: still name the one meant here
            wrong = _wrong_bound(it, acc, decl, di, c, size, bounds)
        v = _eval(it, res, c)
        s = _eval(it, res, size)
        vals = {f"{decl.name}.{d.name}": c, d.size.text: size, "offset": acc.offset}
        notes = []
        if wrong is not None:
            vals[wrong.text] = wrong.bound
            notes.append(f"the mask bounds {decl.name}.{d.name} by {wrong.text} "
                         f"({wrong.owner}), not by {d.size.text}")
        cex = counterexample(res, it, acc.shape, acc.loops, vals, notes=notes)
        fixes = _mask_fixes(it, acc, solver, viol)
        verb = "writes" if acc.kind != "load" else "reads"
        msg = (f"{_op_name(acc)} {verb} {decl.name}[{d.name} = {v}] outside "
               f"0 <= {d.name} < {d.size.text} = {s} for an enabled lane")
        related = _related_access(it, acc) + _inferred_note(it, decl)
        if wrong is not None:
            msg += (f": its mask bounds {d.name} by {wrong.text}, the size of {wrong.owner}"
                    f" (wrong bound?)")
            related = [wrong.related] + related
            fixes = ([wrong.fix] if wrong.fix else []) + fixes
        rep.report("KS101", msg, acc.span, cex, related, fixes,
                   dedupe=("bounds", acc.span.line, acc.span.col, "KS101"))
        return True
    return False


# Sizes of the *other* inferred tensors as evidence of a wrong bound (off: the corpus review,
# docs/corpus.md round "wrong bound", measured it; kept as the switch that measurement uses).
WRONG_BOUND_OTHER_TENSORS = False


@dataclass(frozen=True)
class WrongBound:
    """A mask conjunct ``coordinate < bound`` whose bound is the size of another dimension
    than the one the coordinate indexes: ``bound`` (its polynomial and source text), which
    dimension it sizes (``owner``, e.g. ``X.rows``), where it is compared (``related``) and the
    replacement of the bound by the dimension's own size when that is one edit (``fix``)."""
    bound: Poly
    text: str
    owner: str
    related: Related
    fix: object = None


def _wrong_bound(it: Interp, acc: Access, decl, dim: int, c: Poly, size: Poly,
                 bounds) -> WrongBound | None:
    """Evidence that the access's mask means to bound coordinate ``c`` of ``decl``'s
    dimension ``dim`` (of size ``size``) and uses the wrong size: a conjunct ``c < n`` of
    the access's own mask where ``n`` is the size of another dimension of ``decl`` (the
    classic ``cols < n_rows``). Only the tensor's own other sizes count: a bound taken from
    another tensor is often the host's padding or broadcasting (``x`` is ``[M, N_pad]``, the
    loop runs to ``out``'s ``N``), which the launch site does not show; docs/corpus.md, round
    "wrong bound", has the measurement. None when there is no such conjunct."""
    others = {}
    pool = [decl] + ([it.decls[p] for p in sorted(inferred_decls(it)) if p != acc.base]
                     if WRONG_BOUND_OTHER_TENSORS else [])
    for od in pool:
        for j, (dj, sj) in enumerate(zip(od.dims, it.decl_sizes(od) or [])):
            if (od is not decl or j != dim) and sj != size and not sj.is_const():
                others.setdefault(sj, f"{od.name}.{dj.name}")
    if not others:
        return None
    for e, n, _ in bounds:
        if e != c or n not in others:
            continue
        text = show(n, it)
        meant = decl.dims[dim].size.text
        if _launcher_asserts_equal(it, text, meant):
            continue  # a kernel for square inputs, and the launcher says so
        node = _bound_compare(it, acc, text)
        from ..frontend import ast_span
        if node is not None:
            sp = ast_span(node)
        else:
            sp = ast_span(acc.mask_node) if acc.mask_node is not None else acc.span
        rel = Related(sp, f"compared with {text}, the size of {others[n]}; "
                          f"{decl.name}.{decl.dims[dim].name} has size {meant}")
        fix = None
        params = {p.name for p in it.kernel.params}
        if node is not None and meant in params and text in params:
            fix = replace_fix(node.comparators[0], meant, f"Bound by `{meant}`")
        return WrongBound(n, text, others[n], rel, fix)
    return None


def _launcher_asserts_equal(it: Interp, a: str, b: str) -> bool:
    """The launcher has an ``assert`` with ``==`` naming the host values passed for the kernel
    parameters ``a`` and ``b`` (``assert M == N``, ``assert x.shape[0] == x.shape[1]`` when
    those are passed): the two sizes are one by the host's own check."""
    import re
    from . import _launch_for
    launch = _launch_for(it.kernel, it.parsed) if it.parsed is not None else None
    if launch is None:
        return False
    params = [q.name for q in it.kernel.params]
    src = {}
    for i, arg in enumerate(launch.args):
        name = arg.name if arg.name is not None else (params[i] if i < len(params) else None)
        if name is not None and arg.expr is not None:
            src[name] = arg.expr.text
    ha, hb = src.get(a), src.get(b)
    if not ha or not hb:
        return False
    lines = it.parsed.lines
    end = min(launch.span.line, len(lines))
    start = end
    while start > 0 and not lines[start - 1].lstrip().startswith("def "):
        start -= 1
    for line in lines[max(0, start - 1):end]:
        t = line.strip()
        if t.startswith("assert") and "==" in t and all(
                re.search(rf"(?<![\w.]){re.escape(h.strip())}(?!\w)", t) for h in (ha, hb)):
            return True
    return False


def _bound_compare(it: Interp, acc: Access, text: str):
    """The one ``x < text`` (or ``<=``) comparison of the kernel on a line that builds the
    access's mask (the mask argument or an assignment it reads), or None."""
    lines = set()
    if acc.mask_node is not None:
        lines.add(acc.mask_node.lineno - 1)
        lines |= {r.span.line for r in related_chain(it, [acc.mask_node], acc.line, limit=16)}
    if it.kernel.tree is None:
        return None
    hits = [n for n in ast.walk(it.kernel.tree)
            if isinstance(n, ast.Compare) and len(n.ops) == 1
            and isinstance(n.ops[0], (ast.Lt, ast.LtE)) and n.lineno - 1 in lines
            and _src(it.parsed, n.comparators[0]).strip() == text]
    return hits[0] if len(hits) == 1 else None


def _sizes_positive(it: Interp, *polys) -> list:
    """``p >= 1`` for the run-time arguments of ``polys``: a size of 0 means no work, and
    offsets like ``(T - 1) * H`` are only negative then (spec: free sizes are at least 1)."""
    out = []
    seen = set()
    for p in polys:
        if p is None:
            continue
        for a in sorted(it.terms.deep_atoms(p)):
            if a in it.runtime_params and a not in seen:
                seen.add(a)
                out.append(cmp(">=", Poly.atom(a), Poly.const(1)))
    return out


def _no_host_relations(it: Interp, solver: SolverContext, off: Poly) -> list:
    """Facts the host usually guarantees and the kernel cannot show, for the negative-offset
    check: sizes are not ordered against each other (all run-time arguments of the offset take
    one common value: `(T - C) * D` with C <= T is the host's business), and without a known
    grid only program 0 is sure to exist (`(NT - 1 - pid) * BT` for a reversed tile index)."""
    out = []
    params = sorted(a for a in it.terms.deep_atoms(off) if a in it.runtime_params)
    for a in params[1:]:
        out.append(cmp("==", Poly.atom(a), Poly.atom(params[0])))
    for a in sorted(it.terms.deep_atoms(off)):
        if a.startswith("pid") and a[3:4].isdigit() and int(a[3]) not in solver.pid_bounds:
            out.append(cmp("==", Poly.atom(a), ZERO))
    return out


def _dom(acc: Access) -> Domain:
    return Domain(acc.shape, list(acc.loops), list(acc.guards) if _guards_ok(acc) else [])


def _mask_fixes(it: Interp, acc: Access, solver: SolverContext | None = None,
                viol=None) -> list:
    """"Apply the mask" quick fix for an unmasked access. A mask no access applies fits by
    its index atoms alone; a mask a neighbouring access applies (the usual missing-mask bug:
    the loads are masked, the store is not) is offered only when z3 shows that, under it,
    the violation ``viol`` is gone (same shape, offsets it really bounds)."""
    if acc.mask is not None or acc.via != "ptr":
        return []
    for name, m, _stmt, used in _fitting_masks(it, acc, include_used=True):
        if used:
            if solver is None or viol is None or \
                    solver.query([m, viol], _dom(acc)).status != "unsat":
                continue
        f = insert_kwarg_fix(it, acc.node, f"mask={name}", f"Apply the mask `{name}`")
        return [f] if f else []
    if solver is None or viol is None:
        return []
    # a mask written inline in a neighbouring access (`tl.load(x_ptr + offs, mask=offs < n)`):
    # copied when it means the same at this access and z3 shows it removes the violation
    for other in it.accesses:
        if other is acc or other.mask is None or other.mask_node is None or \
                isinstance(other.mask_node, ast.Name) or other.shape != acc.shape:
            continue
        text = copyable_mask(it, other.mask_node, acc.line)
        if text is None or solver.query([other.mask, viol], _dom(acc)).status != "unsat":
            continue
        f = insert_kwarg_fix(it, acc.node, f"mask={text}", f"Apply the mask `{elide(text)}`")
        return [f] if f else []
    return []


def copyable_mask(it: Interp, node: ast.expr, at_line: int) -> str | None:
    """The source of the mask expression ``node`` when copying it to another access on line
    ``at_line`` (0-based) means the same lanes there: every name in it is a parameter or is
    bound once, outside any loop, before that line, and it calls nothing that reads memory.
    None otherwise (a name rebound in between, `offs += BLOCK` in a loop, a loaded value)."""
    blocks = enclosing_blocks(it)
    loop_targets = {t.id for n in ast.walk(it.kernel.tree) if isinstance(n, ast.For)
                    for t in ast.walk(n.target) if isinstance(t, ast.Name)}
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            fn = _src(it.parsed, n.func)
            if any(w in fn for w in ("load", "atomic", "store", "rand")):
                return None
        if not isinstance(n, ast.Name):
            continue
        if n.id in loop_targets:
            return None
        binds = it.assign_nodes.get(n.id, [])
        if len(binds) > 1:
            return None
        for stmt in binds:
            if stmt.lineno - 1 >= at_line or \
                    any(kind == "loop" for kind, _, _ in blocks.get(id(stmt), [])):
                return None
    text = " ".join(_src(it.parsed, node).split())
    return text or None


def _fitting_masks(it: Interp, acc: Access, include_used: bool = False):
    """Named bounds masks whose index atoms all occur in this access's offset, as
    ``(name, mask, statement, used)``. Masks some other access applies are left out unless
    ``include_used`` (for KS104 they mean the access is unmasked on purpose, or KS103's)."""
    if acc.offset is None or not acc.shape:
        return []
    off_atoms = {a for a in it.terms.deep_atoms(acc.offset)
                 if a[0] in "%@" or a.startswith("pid")}
    out = []
    seen = set()
    used = _cached_loaded_names(it)
    for name, mv, stmt in it.masks:
        if name in seen or stmt.lineno - 1 > acc.line:
            continue
        if name in used and not include_used:
            continue
        if acc.live_masks.get(name) is not mv:
            continue  # not in scope at the access (another branch, or reassigned since)
        if it.bshape(mv.shape, acc.shape) != acc.shape or len(mv.shape) != len(acc.shape):
            continue
        m = it.align(mv, acc.shape).mask
        bc = _bound_conjuncts(it, m)
        if not bc or len(bc) != len(conjuncts(m)):
            continue
        ok = True
        for e, n, _ in bc:
            ea = {a for a in it.terms.deep_atoms(e) if a[0] in "%@" or a.startswith("pid")}
            if not ea or not ea <= off_atoms or not any(a[0] == "%" for a in ea):
                ok = False
        if ok:
            seen.add(name)
            out.append((name, m, stmt, name in used))
    return out


def _cached_loaded_names(it: Interp) -> set[str]:
    """Names read anywhere in the kernel (a mask never read is a dead mask)."""
    from .interp import fast_walk
    out: set[str] = set()
    for k in it.parsed.kernels:  # the kernel and the helpers it may inline
        tree = k.tree
        if tree is None:
            continue
        hit = getattr(tree, "_ks_loaded", None)
        if hit is None:
            hit = {n.id for n in fast_walk(tree) if isinstance(n, ast.Name) and
                   isinstance(n.ctx, ast.Load)}
            tree._ks_loaded = hit
        out |= hit
    return out


def _check_mask_not_applied(it: Interp, solver: SolverContext, rep: Reporter,
                            acc: Access) -> bool:
    if acc.mask is not None or acc.via != "ptr" or not acc.shape:
        return False
    for name, m, stmt, _used in _fitting_masks(it, acc):
        text = f"mask `{name}` holds for every lane of this access"
        res = solver.query([b_not(m)], _dom(acc))
        if rep.outcome(res, text, acc.span) != "refuted":
            continue
        vals = {}
        for e, n, c in _bound_conjuncts(it, m):
            vals[show(e, it)] = e
            vals[show(n, it)] = n
        vals["offset"] = acc.offset
        cex = counterexample(res, it, acc.shape, acc.loops, vals,
                             notes=[f"`{name}` is false for this lane, which the access "
                                    f"still performs"])
        fix = insert_kwarg_fix(it, acc.node, f"mask={name}", f"Apply the mask `{name}`")
        sp = Span(stmt.lineno - 1, stmt.col_offset, stmt.lineno - 1, stmt.col_offset)
        rel = [Related(sp, f"`{name}` computed here")] + _related_access(it, acc)
        return rep.report("KS104", f"{_op_name(acc)} does not apply the computed mask `{name}`,"
                          f" which fits its offsets: lanes outside it are accessed", acc.span,
                          cex, rel, [fix] if fix else [],
                          dedupe=("bounds", acc.span.line, acc.span.col, "KS104"))
    return False


# ------------------------------------------------------------------------- KS102 / KS105
def _check_inferred_extent(it: Interp, solver: SolverContext, rep: Reporter,
                           acc: Access) -> bool:
    if acc.offset is None or acc.base is None or acc.via != "ptr" or acc.kind == "atomic":
        return False
    if (acc.base in it.decls and acc.base not in inferred_decls(it)) or \
            _mask_has_opaque(acc.mask):
        return False
    if _has_unknown_atoms(it, acc.offset):
        return False
    mask = acc.mask if acc.mask is not None else TRUE
    off = acc.offset
    checks = []
    nn = _nonneg(it, off, solver)
    if nn is True:
        rep.outcome("proved", f"offset {show(off, it)} >= 0", acc.span)
    if nn is False:
        checks.append(("neg", cmp("<", off, ZERO), f"offset {show(off, it)} >= 0"))
    # No "past the extent" check from `e < n` masks: `ptr + offs + 1` under `offs < n` is the
    # idiom of arrays with n + 1 entries (cu_seqlens, cumulative counts); the corpus review
    # found every such report false. Negative offsets are always outside the tensor.
    pos = _sizes_positive(it, off, *([p for c in conjuncts(mask) if c[0] == "cmp"
                                       for p in [c[2]]]))
    pos += _no_host_relations(it, solver, off)
    for kind, viol, text in checks:
        res = solver.query(pos + [mask, viol], _dom(acc))
        if rep.outcome(res, text, acc.span) != "refuted":
            continue
        offv = _eval(it, res, off)
        code = "KS102"
        where_span = None
        if acc.kind == "load":
            for w in it.wheres:
                if acc.id in w.loads and w.shape == acc.shape:
                    chk = solver.query(pos + [mask, w.discard, viol], _dom(acc))
                    if chk.status == "sat":
                        code, res, where_span = "KS105", chk, w.span
                        offv = _eval(it, res, off)
                        break
        vals = {"offset": off}
        for e, n, _ in _bound_conjuncts(it, mask):
            vals[show(n, it)] = n
        cex = counterexample(res, it, acc.shape, acc.loops, vals)
        rel = _related_access(it, acc)
        fixes = []
        if kind == "neg":
            bound_txt = f"{acc.base}[{offv}]"
            msg = (f"{_op_name(acc)} offset {show(off, it)} = {offv} is negative for an enabled "
                   f"lane: it reads {bound_txt}, before the tensor")
            if acc.kind == "store":
                msg = msg.replace("reads", "writes")
            fix = _guard_fix(it, acc)
            if fix:
                fixes.append(fix)
        else:
            msg = (f"{_op_name(acc)} offset {show(off, it)} = {offv} reaches past the extent "
                   f"its mask implies")
        if code == "KS105":
            rel.append(Related(where_span, "tl.where evaluates the load in every lane, also "
                               "the ones it discards"))
            msg += "; the enclosing tl.where does not guard the memory access"
        return rep.report(code, msg, acc.span, cex, rel, fixes,
                          dedupe=("bounds", acc.span.line, acc.span.col, code))
    return False


def _guard_fix(it: Interp, acc: Access):
    """Add ``& (offset >= 0)`` to the mask when the offset text is ``base + <offset>``."""
    if acc.ptr_node is None or acc.mask_node is None:
        return None
    ptr_txt = _src(it.parsed, acc.ptr_node)
    base = acc.base or ""
    if not ptr_txt.startswith(base + " + "):
        return None
    off_txt = ptr_txt[len(base) + 3:]
    from ..frontend import ast_span
    from ..model import Fix, TextEdit
    mtxt = _src(it.parsed, acc.mask_node)
    edits = [TextEdit(ast_span(acc.mask_node), f"({mtxt}) & ({off_txt} >= 0)")]
    if acc.kind == "load" and acc.other_node is None:
        f = insert_kwarg_fix(it, acc.node, "other=0", "")
        if f:
            edits.append(f.edits[0])
    return Fix("Mask the lanes whose offset is negative", tuple(edits))


# ------------------------------------------------------------------------- KS103
def _check_unmasked_beside_masked(it: Interp, solver: SolverContext, rep: Reporter,
                                  acc: Access) -> None:
    if acc.mask is not None or acc.via != "ptr" or not acc.shape or acc.offset is None:
        return
    if acc.base is None or _has_unknown_atoms(it, acc.offset):
        return
    for other in it.accesses:
        if other is acc or other.base != acc.base or other.mask is None or other.offset is None:
            continue
        if _mask_has_opaque(other.mask):
            continue
        # the missing-mask class: the same addresses (up to a constant shift) as an access
        # that is masked; other unmasked accesses (full tiles of a loop) are left alone
        if not (acc.offset - other.offset).is_const() or acc.shape != other.shape:
            continue
        for e, n, _ in _bound_conjuncts(it, other.mask):
            rest = other.offset - e
            if it.terms.index_vars(rest):
                continue
            # the masked access says the valid offsets are rest + [0, n)
            rel_off = acc.offset - rest
            viol = b_or(cmp(">=", rel_off, n), cmp("<", rel_off, ZERO))
            text = f"offset within the extent of line {other.line + 1}'s mask"
            res = solver.query(_sizes_positive(it, acc.offset, n) + [viol], _dom(acc))
            if rep.outcome(res, text, acc.span) != "refuted":
                return
            cex = counterexample(res, it, acc.shape, acc.loops,
                                 {"offset": acc.offset, show(n, it): n})
            rel = [Related(other.span, f"masked access of {acc.base}: "
                           f"{mask_text(other.mask, it, other.mask_node)}")] + \
                _related_access(it, acc)
            fix = None
            if other.mask_node is not None:
                mt = copyable_mask(it, other.mask_node, acc.line)
                if mt is not None and solver.query([other.mask, viol], _dom(acc)).status \
                        == "unsat":
                    fix = insert_kwarg_fix(it, acc.node, f"mask={mt}",
                                           f"Apply the mask `{elide(mt)}`")
            rep.report("KS103", f"{_op_name(acc)} through {acc.base} is unmasked while line "
                       f"{other.line + 1} masks the same pointer: this lane leaves that extent",
                       acc.span, cex, rel, [fix] if fix else [],
                       dedupe=("bounds", acc.span.line, acc.span.col, "KS103"))
            return


# ------------------------------------------------------------------------- KS107
def _check_foreign_stride(it: Interp, rep: Reporter, acc: Access, launch) -> None:
    if acc.offset is None or acc.base is None:
        return
    src = _launch_sources(it, launch)
    bsrc = src.get(acc.base)
    if not bsrc or bsrc[0] != "tensor":
        return
    tensor = bsrc[1]
    for a in sorted(acc.offset.atoms()):
        s = src.get(a)
        if s and s[0] == "stride" and s[1] != tensor and \
                not _same_layout_by_construction(it, launch, tensor, s[1]):
            rep.report("KS107", f"{_op_name(acc)} addresses {acc.base} (tensor `{tensor}` at the "
                       f"launch) with {a} = {s[1]}.stride({s[2]}), a stride of another tensor",
                       acc.span, None,
                       [Related(launch.span, "launch site")] + _related_access(it, acc),
                       dedupe=("KS107", acc.base, a))


def _same_layout_by_construction(it: Interp, launch, x: str, y: str) -> bool:
    """The launcher allocates one tensor like the other (``y = torch.empty_like(x)``, or both
    with the same ``torch.empty(shape)`` arguments): then they share strides by
    construction and passing one tensor's stride for both is deliberate."""
    import re
    lines = it.parsed.lines
    end = min(launch.span.line, len(lines))
    start = end
    while start > 0 and not lines[start - 1].lstrip().startswith("def "):
        start -= 1
    text = "\n".join(lines[max(0, start - 1):end])
    like = r"(empty|zeros|ones|full|rand|randn)_like\(\s*{}\b"
    for a, b in ((x, y), (y, x)):
        if re.search(rf"\b{re.escape(a)}\s*=\s*torch\.{like.format(re.escape(b))}", text) or \
                re.search(rf"\b{re.escape(a)}\s*=\s*{re.escape(b)}\.new_(empty|zeros|ones)\(",
                          text) or \
                re.search(rf"\b{re.escape(a)}\s*=\s*{re.escape(b)}\.(clone|view|"
                          rf"reshape|view_as)\(", text):
            return True
    for line in text.splitlines():
        # `assert q.stride() == v.stride()`: the launcher checks the layouts agree
        if line.lstrip().startswith("assert") and "stride" in line and \
                re.search(rf"\b{re.escape(x)}\b", line) and re.search(rf"\b{re.escape(y)}\b", line):
            return True
    made = {}
    for m in re.finditer(r"\b(\w+)\s*=\s*torch\.(empty|zeros|ones|full)\((.*)\)", text):
        made[m.group(1)] = m.group(3).split("dtype")[0].split("device")[0].strip(" ,")
    return x in made and y in made and made[x] == made[y]


def _launch_sources(it: Interp, launch) -> dict:
    out = {}
    params = [p.name for p in it.kernel.params]
    pos = 0
    for arg in launch.args:
        if arg.name is None:
            if pos < len(params):
                out[params[pos]] = arg.source
            pos += 1
        else:
            out[arg.name] = arg.source
    return {k: v for k, v in out.items() if v}


# ------------------------------------------------------------------------- KS201/202
def _check_tags(it: Interp, solver: SolverContext, rep: Reporter, ob) -> None:
    d = ob.data
    dim = d["dim"]
    if ob.kind == "dot":
        ca, cb = d["ca"], d["cb"]
        text = f"a.{dim} == b.{dim} at tl.dot"
        shape = ob.shape
    else:
        ca, cb = d["a"].coord, d["b"].coord
        text = f"equal {dim} coordinates combined"
        shape = ob.shape
    if ca == cb:
        rep.outcome("proved", text, ob.span)
        return
    dom = Domain(shape, list(ob.loops), list(ob.guards) if _guards_ok(ob.guards) else [])
    res = solver.query([cmp("!=", ca, cb)], dom)
    if rep.outcome(res, text, ob.span) != "refuted":
        return
    ta, tb = d["a"], d["b"]
    va, vb = _eval(it, res, ca), _eval(it, res, cb)
    lines = sorted({ta.line, tb.line})
    rel = [Related(Span(l, 0, l, len(it.parsed.lines[l]) if l < len(it.parsed.lines) else 0),
                   f"tags {ta.tensor if l == ta.line else tb.tensor}.{dim} created by this load")
           for l in lines]
    node = ob.node
    nodes = list(getattr(node, "args", [])) if isinstance(node, ast.Call) else \
        [getattr(node, "left", None), getattr(node, "right", None)]
    rel += related_chain(it, [n for n in nodes if n is not None], ob.span.line)
    if ob.kind == "dot":
        # the obligation's index variable %0 runs along the contracted dimension
        kname = dot_index_name(it)
        names = atom_names(it).with_names({"%0": kname})
        cex = counterexample(res, it, (), ob.loops,
                             {f"a.{dim}": ca, f"b.{dim}": cb},
                             notes=[f"a.{dim} = {elide(fmt(ca, names, MESSAGE_TERMS))} = "
                                    f"{va}   b.{dim} = {elide(fmt(cb, names, MESSAGE_TERMS))}"
                                    f" = {vb}"])
        cex.element = {kname: res.model.get("%0", 0)}
        rep.report("KS201", f"tl.dot contracts unequal coordinates: a.{dim} != b.{dim} "
                   f"({ta.tensor}.{dim} = {va}, {tb.tensor}.{dim} = {vb})", ob.span, cex, rel)
    else:
        cex = counterexample(res, it, shape, ob.loops, {f"a.{dim}": ca, f"b.{dim}": cb})
        rep.report("KS202", f"elementwise operation combines {ta.tensor}.{dim} = {va} with "
                   f"{tb.tensor}.{dim} = {vb}", ob.span, cex, rel)


# ------------------------------------------------------------------------- KS203
def _check_store_alignment(it: Interp, solver: SolverContext, rep: Reporter,
                           acc: Access) -> None:
    v = acc.value
    if v is None or v.kind != "data" or not v.tags or acc.offset is None:
        return
    decl = it.decls[acc.base]
    coords = it.decompose(decl, acc.offset)
    if coords is None:
        return
    mask = acc.mask if acc.mask is not None else TRUE
    if _mask_has_opaque(mask):
        return
    for d, c in zip(decl.dims, coords):
        t = v.tags.get(d.name)
        if t is None:
            continue
        text = f"stored value's {d.name} tag equals the store coordinate"
        if t.coord == c:
            rep.outcome("proved", text, acc.span)
            continue
        res = solver.query([mask, cmp("!=", t.coord, c)], _dom(acc))
        if rep.outcome(res, text, acc.span) != "refuted":
            continue
        vs, vt = _eval(it, res, c), _eval(it, res, t.coord)
        cex = counterexample(res, it, acc.shape, acc.loops,
                             {f"{decl.name}.{d.name} (store)": c,
                              f"value.{d.name} ({t.tensor})": t.coord})
        rel = [Related(Span(t.line, 0, t.line, len(it.parsed.lines[t.line])),
                       f"value tagged {t.tensor}.{d.name} = {show(t.coord, it)}")]
        rel += _related_access(it, acc)
        rep.report("KS203", f"tl.store writes {decl.name}[{d.name} = {vs}] with a value computed "
                   f"for {d.name} = {vt} ({t.tensor}.{d.name})", acc.span, cex, rel)
        return


# ------------------------------------------------------------------------- KS401
_NEUTRAL = {"max": ("-inf", 'float("-inf")'), "argmax": ("-inf", 'float("-inf")'),
            "min": ("+inf", 'float("inf")'), "argmin": ("+inf", 'float("inf")'),
            "sum": ("0", "0.0")}


def _check_pad(it: Interp, solver: SolverContext, rep: Reporter, ob) -> None:
    pad = ob.data["pad"]
    red = ob.data["reduction"]
    ok = pad_value_ok(pad.value, red)
    if not ok and red in ("max", "argmax") and ob.data.get("nonneg") and \
            isinstance(pad.value, float) and pad.value <= 0.0:
        ok = True  # max over non-negative values (abs, exp, squares): 0 is neutral too
    acc = next((a for a in it.accesses if a.id == pad.load_id), None)
    text = f"masked lanes of line {pad.line + 1} neutral for tl.{ob.data['fn']}"
    if not ok and isinstance(pad.value, float) and _sign_assumed(it, solver, ob, pad, red):
        ok = True  # `#@ assume X[i] >= 0`: 0 (or any pad below the data) is neutral for max
    if ok is None:
        rep.outcome("unproved", text, ob.span)
        return
    if ok:
        rep.outcome("proved", text, ob.span)
        return
    if acc is None or _mask_has_opaque(pad.mask):
        rep.outcome("unproved", text, ob.span)
        return
    # the padding matters only where a lane is masked off along the reduced axis while the
    # rest of its mask holds (a masked row of a row-wise reduction is never stored)
    axes = {f"%{k}" for k in ob.data.get("axes", ())}
    along, rest = [], []
    for c in conjuncts(pad.mask):
        vars_ = {f"%{k}" for p in _polys(c) for k in it.terms.index_vars(p)}
        (along if vars_ & axes else rest).append(c)
    if not along:
        rep.outcome("proved", text, ob.span)
        return
    dom = Domain(ob.shape, list(ob.loops), list(ob.guards) if _guards_ok(ob.guards) else [])
    res = solver.query(rest + [b_not(b_and(*along))], dom)
    if rep.outcome(res, text, acc.span) != "refuted":
        return
    if pad.value == UNDEF:
        neutral = _NEUTRAL[red][1] if red in _NEUTRAL else "0.0" if red == "dot" else None
        _report_undefined(it, rep, res, acc, pad, ob.span, ob.shape, ob.loops,
                          _undefined_observer(ob), neutral)
        return
    raw = pad.other_src
    transformed = not _same_value(pad.value, acc.other, raw)
    want = _NEUTRAL.get(red)
    fixes = []
    if want is not None:
        neutral_text = want[1]
        if red == "sum" and transformed:
            neutral_text = 'float("-inf")'  # exp(-inf - m) = 0 is the identity downstream
        if acc.other_node is not None:
            fixes.append(replace_fix(acc.other_node, neutral_text,
                                     f"Pad masked lanes with {neutral_text}"))
        else:
            f = insert_kwarg_fix(it, acc.node, f"other={neutral_text}",
                                 f"Pad masked lanes with {neutral_text}")
            if f:
                fixes.append(f)
    shown = _show_pad(pad.value)
    lane_val = pad.value if isinstance(pad.value, float) else shown
    cex = counterexample(res, it, ob.shape, ob.loops, {"masked lane value": lane_val},
                         notes=[_mask_note(it, pad, acc)])
    rel = [Related(ob.span, f"tl.{ob.data['fn']} reduces over the masked lanes, which hold "
                   f"{shown}" + (f" (from other={raw})" if transformed else ""))]
    rel += _related_access(it, acc)
    ident = want[0] if want else "its identity"
    hint = _sign_hint(it, acc, pad, red)
    rep.report("KS401", f"masked lanes are loaded as {raw} and reach tl.{ob.data['fn']} as "
               f"{shown}, not its identity {ident}" + hint, acc.span, cex, rel, fixes,
               dedupe=("KS401", acc.span.line, acc.span.col))


def _sign_assumed(it: Interp, solver: SolverContext, ob, pad, red: str) -> bool:
    """The reduced data provably lies on the neutral side of the pad on every enabled lane:
    ``max`` of values ``>= pad`` (``#@ assume Mid[i] >= 0`` with a 0.0 pad), ``min`` of values
    ``<= pad``. Only facts the user stated (``assume`` on a declared tensor's reads) can
    prove it; without them the query is satisfiable and the finding stands."""
    value = ob.data.get("value")
    if value is None or red not in ("max", "argmax", "min", "argmin") or \
            math.isnan(pad.value) or math.isinf(pad.value) or _mask_has_opaque(pad.mask):
        return False
    if not any(it.terms.defs.get(a, ("",))[0] == "read" for a in it.terms.deep_atoms(value)):
        return False  # not data read from memory: no assumption can speak about it
    if not solver.templates and not solver.assumptions:
        return False
    # pads are floats; the data's facts are over integers in z3 (reads are Int): a pad of
    # 0.0 compares like 0, a fractional pad is not judged
    if pad.value != int(pad.value):
        return False
    bound = Poly.const(int(pad.value))
    viol = cmp("<", value, bound) if red in ("max", "argmax") else cmp(">", value, bound)
    dom = Domain(ob.shape, list(ob.loops), list(ob.guards) if _guards_ok(ob.guards) else [])
    return solver.query([pad.mask, viol], dom, small_first=False).status == "unsat"


def _sign_hint(it: Interp, acc: Access, pad, red: str) -> str:
    """For a 0 pad under max/min: the directive that states the data's sign (when the data
    is never negative, 0 is neutral for max and the finding goes away)."""
    if red not in ("max", "argmax", "min", "argmin") or pad.value != 0.0:
        return ""
    family = ("max", "argmax") if red in ("max", "argmax") else ("min", "argmin")
    if any(o.kind == "pad" and o.data["pad"].load_id == pad.load_id and
           o.data["reduction"] not in family for o in it.obligations):
        return ""  # the padding also reaches a sum (logsumexp): the sign would not help
    rel = ">=" if red in ("max", "argmax") else "<="
    decl = it.decls.get(acc.base) if acc.base else None
    if decl is not None:
        idx = ", ".join(d.name for d in decl.dims)
        return (f"; if {decl.name} is never {'negative' if rel == '>=' else 'positive'}, "
                f"state it: `#@ assume {decl.name}[{idx}] {rel} 0`")
    stem = (acc.base or "x").removesuffix("_ptr") or "x"
    name = next(n for n in (stem.capitalize(), stem.upper(), stem.capitalize() + "Data")
                if n != acc.base)
    return (f"; if the data is never {'negative' if rel == '>=' else 'positive'}, declare it "
            f"and state it: `#@ tensor {name} = {acc.base}[i: SIZE]` and "
            f"`#@ assume {name}[i] {rel} 0`")


def _mask_note(it: Interp, pad, acc: Access) -> str:
    """The counterexample's note on a padded lane: which mask is false there."""
    text = mask_text(pad.mask, it, acc.mask_node)
    if text.startswith("`"):
        return f"the mask {text} of the tl.load on line {pad.line + 1} is false for this lane"
    return f"mask {text} is false for this lane"


def _undefined_observer(ob) -> str:
    fn = ob.data["fn"]
    if fn == "dot":
        return "the contracted axis of tl.dot"
    return f"tl.{fn} over the masked axis"


def _report_undefined(it: Interp, rep: Reporter, res: Result, acc: Access, pad, where: Span,
                      shape: tuple, loops: list, observer: str, neutral: str | None,
                      fixes: list | None = None, store: Access | None = None) -> None:
    """KS403 at the load (where ``other=`` goes) with the observer as related information;
    for a ``store`` that lets the lanes through, at the store (its mask is what is missing)."""
    fixes = list(fixes or [])
    if neutral and acc.other_node is None:
        f = insert_kwarg_fix(it, acc.node, f"other={neutral}", f"Pad masked lanes with {neutral}")
        if f:
            fixes.append(f)
    cex = counterexample(res, it, shape, loops, {"masked lane value": "undefined"},
                         notes=[_mask_note(it, pad, acc)])
    verb = "writes" if "store" in observer or "atomic" in observer else "reads"
    if store is not None:
        rel = [Related(acc.span, f"tl.load without other=: its masked-off lanes "
                       f"({mask_text(pad.mask, it, acc.mask_node)} false) are undefined")]
        rel += _related_access(it, store)
        rep.report("KS403", f"{observer} writes undefined values: the masked-off lanes of "
                   f"the tl.load on line {pad.line + 1} (no other=)", store.span, cex, rel,
                   fixes, dedupe=("KS403", store.span.line, store.span.col))
        return
    rel = [Related(where, f"{observer} {verb} the masked-off lanes of line {pad.line + 1}, "
                   f"which hold no defined value")] + _related_access(it, acc)
    rep.report("KS403", f"masked-off lanes of this tl.load have no other= and are undefined; "
               f"they reach {observer}", acc.span, cex, rel, fixes,
               dedupe=("KS403", acc.span.line, acc.span.col))


def _check_undefined_store(it: Interp, solver: SolverContext, rep: Reporter,
                           acc: Access) -> None:
    """KS403 at a store: the stored value holds undefined lanes (a load without ``other=``)
    that the store's mask lets through. Elementwise math stored under the load's own mask
    (or a narrower one) is fine; an unmasked or differently masked store writes garbage."""
    v = acc.value
    if v is None or v.kind != "data" or not v.pads or acc.via != "ptr":
        return
    smask = acc.mask if acc.mask is not None else TRUE
    for pad in v.pads:
        if pad.value != UNDEF:
            continue
        load = next((a for a in it.accesses if a.id == pad.load_id), None)
        text = f"masked-off lanes of line {pad.line + 1} not stored"
        if load is None or _mask_has_opaque(pad.mask) or _mask_has_opaque(smask) or any(
                _has_unknown_atoms(it, q) for q in _polys(smask)):
            # a store mask computed from loaded data (`r < count`) may well imply the load's
            # mask through facts about that data the kernel cannot show
            rep.outcome("unproved", text, acc.span)
            continue
        if set(conjuncts(pad.mask)) <= set(conjuncts(smask)):
            rep.outcome("proved", text, acc.span)
            continue
        # the load may sit in a loop the store is outside of (an accumulator's exit value):
        # its iteration counter ranges over that loop
        loops = list(acc.loops) + [l for l in load.loops
                                   if all(l.atom != m.atom for m in acc.loops)]
        dom = Domain(acc.shape, loops, list(acc.guards) if _guards_ok(acc) else [])
        polys = _polys(pad.mask) + _polys(smask)
        # `m = tl.load(p + c, mask=pid < M)` stored unmasked is fine when the grid has M
        # programs; without a known grid only program 0 is sure to exist (as for KS102)
        pids = sorted({a for q in polys for a in it.terms.deep_atoms(q)
                       if a in ("pid0", "pid1", "pid2") and int(a[3]) not in solver.pid_bounds})
        premise = _sizes_positive(it, acc.offset, *polys) + \
            [cmp("==", Poly.atom(a), ZERO) for a in pids]
        res = solver.query(premise + [b_and(smask, b_not(pad.mask))], dom)
        if rep.outcome(res, text, acc.span) != "refuted":
            continue
        what = f"this unmasked {_op_name(acc)}" if acc.mask is None else \
            f"this {_op_name(acc)}, whose mask lets them through,"
        # the usual fix is the load's mask on the store, not a fill value nobody reads
        fixes = []
        if acc.mask is None and isinstance(load.mask_node, ast.Name) and \
                load.mask_node.id in acc.live_masks:
            f = insert_kwarg_fix(it, acc.node, f"mask={load.mask_node.id}",
                                 f"Apply the mask `{load.mask_node.id}`")
            fixes = [f] if f else []
        _report_undefined(it, rep, res, load, pad, acc.span, acc.shape, loops, what, None,
                          fixes, store=acc)
        return


def _polys(c):
    from .values import b_polys
    return b_polys(c)


def _same_value(value, other_v, raw) -> bool:
    if other_v is None:
        return value == 0.0
    c = other_v.const
    if isinstance(c, (int, float)) and not isinstance(c, bool):
        return isinstance(value, float) and (value == c or (math.isnan(value) and math.isnan(c)))
    return False


def _show_pad(v) -> str:
    if isinstance(v, float):
        if v == -math.inf:
            return "-inf"
        if v == math.inf:
            return "+inf"
        return repr(v)
    return {FINITE: "a finite value", POSITIVE: "a positive value"}.get(v, str(v))


# ------------------------------------------------------------------------- KS402
def _check_low_precision(it: Interp, rep: Reporter) -> None:
    for c in it.carried:
        if not c.read_in_body or c.exit.kind != "data" or c.init.kind not in ("data", "int"):
            continue
        if c.exit.dtype not in ("fp16", "bf16") or c.init.dtype not in ("fp16", "bf16", None):
            continue
        if c.init.dtype is None and c.init.kind != "data":
            continue
        node = c.update_node or c.loop
        sp = Span(node.lineno - 1, node.col_offset, node.lineno - 1,
                  len(it.parsed.lines[node.lineno - 1]))
        fixes = []
        init_stmt = None
        for stmt in it.assign_nodes.get(c.name, []):
            if stmt.lineno - 1 < c.loop_line:
                init_stmt = stmt
        if init_stmt is not None and isinstance(getattr(init_stmt, "value", None), ast.Call):
            for kw in init_stmt.value.keywords:
                if kw.arg == "dtype":
                    fixes.append(replace_fix(kw.value, "tl.float32",
                                             "Accumulate in float32"))
        rel = []
        if init_stmt is not None:
            isp = Span(init_stmt.lineno - 1, init_stmt.col_offset, init_stmt.lineno - 1,
                       len(it.parsed.lines[init_stmt.lineno - 1]))
            rel.append(Related(isp, f"{c.name} starts as {c.init.dtype or 'a low-precision'} "
                               f"value"))
        rep.report("KS402", f"`{c.name}` accumulates across the loop in {c.exit.dtype}",
                   sp, None, rel, fixes)


# ------------------------------------------------------------------------- KS204
def _check_assert(it: Interp, solver: SolverContext, rep: Reporter, ob) -> None:
    d = ob.data["directive"]
    env = ob.data["env"]
    tree = ob.node
    text = d.raw.strip()
    try:
        cond, shape = _assert_expr(it, tree, env)
    except _NotModelled:
        rep.outcome("unproved", text, d.span)
        return
    dom = Domain(shape, list(ob.loops), list(ob.guards) if _guards_ok(ob.guards) else [])
    res = solver.query([b_not(cond)], dom)
    if rep.outcome(res, text, d.span) != "refuted":
        return
    cex = counterexample(res, it, shape, ob.loops, {})
    rep.report("KS204", f"#@ assert {text} does not hold", d.span, cex,
               related_chain(it, [tree], d.line))


class _NotModelled(Exception):
    pass


def _assert_expr(it: Interp, tree: ast.expr, env: dict):
    """Evaluate an assert over tags (``v.dim``) and scalars. Tiles' index variables are
    unified per tag axis: each tag operand that depends on one axis gets the variable %0."""
    shape: list = []

    def operand(n) -> Poly:
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
            v = env.get(n.value.id)
            if v is None or n.attr not in v.tags:
                raise _NotModelled
            c = v.tags[n.attr].coord
            vars_ = sorted(it.terms.index_vars(c))
            if len(vars_) > 1:
                raise _NotModelled
            if vars_:
                k = vars_[0]
                n_axis = v.shape[k]
                if not shape:
                    shape.append(n_axis)
                else:
                    shape[0] = min(shape[0], n_axis)
                c = it.terms.subst(c, {f"%{k}": Poly.atom("%0")}) if k else c
            return c
        if isinstance(n, ast.Name):
            v = env.get(n.id)
            if v is None or v.kind != "int" or v.poly is None or v.shape:
                raise _NotModelled
            return v.poly
        if isinstance(n, ast.Constant) and isinstance(n.value, int):
            return Poly.const(n.value)
        if isinstance(n, ast.BinOp):
            a, b = operand(n.left), operand(n.right)
            if isinstance(n.op, ast.Add):
                return a + b
            if isinstance(n.op, ast.Sub):
                return a - b
            if isinstance(n.op, ast.Mult):
                return a * b
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return -operand(n.operand)
        raise _NotModelled

    def boolean(n):
        if isinstance(n, ast.Compare):
            out = TRUE
            left = operand(n.left)
            for op, r in zip(n.ops, n.comparators):
                right = operand(r)
                sym = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
                       ast.NotEq: "!="}.get(type(op))
                if sym is None:
                    raise _NotModelled
                out = b_and(out, cmp(sym, left, right))
                left = right
            return out
        if isinstance(n, ast.BoolOp):
            parts = [boolean(x) for x in n.values]
            return b_and(*parts) if isinstance(n.op, ast.And) else b_or(*parts)
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            return b_not(boolean(n.operand))
        raise _NotModelled

    cond = boolean(tree)
    return cond, tuple(shape)
