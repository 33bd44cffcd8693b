"""The data-flow invariant engine: ``analyze_kernel(kernel, parsed, config)``.

For each constexpr case (autotune configs, launch-site literals, defaults) it interprets the
kernel abstractly (``interp.Interp``), then runs the per-kernel checks (``checks``) with the z3
layer (``solver``) and the grid-level checks (``grid``, when present). Results are cached by
kernel text, position, launch sites and settings. See README.md for the internal API.
"""
from __future__ import annotations

import ast
import hashlib
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass, field

from ..codes import CODES
from ..config import Config
from ..kernel import KernelInfo, ParsedFile
from ..model import Finding, HoverInfo, InvariantTally
from .interp import Budget, Interp
from .poly import Poly
from .report import Reporter
from .solver import SolverContext
from .values import b_not, b_or

MAX_CASES = 3
# Benchmarks switch the grid-level checks off to time the per-program core separately.
GRID_CHECKS = True
# Annotations inferred from the launch site for plain (unannotated) kernels. infer.py only
# declares a tensor whose rank, sizes and strides the launch site fixes and whose addresses
# use exactly those strides (a guessed shape gave false KS101/KS202 on the corpus); see
# analysis/engine/README.md, "Inferred annotations".
INFER_ANNOTATIONS = True


@dataclass
class KernelAnalysis:
    """What the engine says about one kernel (all cases together)."""

    findings: list[Finding] = field(default_factory=list)
    tally: InvariantTally = field(default_factory=InvariantTally)
    unknowns: int = 0
    unknown_kinds: dict[str, int] = field(default_factory=dict)
    status: str = "analysed"
    hovers: list[HoverInfo] = field(default_factory=list)


_CACHE: "OrderedDict[tuple, KernelAnalysis]" = OrderedDict()
_CACHE_SIZE = 512
# The entry count alone does not bound the memory: a result holds about one hover record per
# statement (0.5-1 kB each), so 512 results of 200-line kernels held 100 MB. The records of
# all cached results are bounded too (about 10-20 MB); the newest result always stays.
_CACHE_MAX_RECORDS = 20_000
_cache_records = 0


def result_records(result: "KernelAnalysis") -> int:
    """The size of a result in records (1 + hover records + findings), the unit in which the
    engine's and the server's result caches are bounded besides their entry counts."""
    return 1 + len(result.hovers) + len(result.findings)


def analyze_kernel(kernel: KernelInfo, parsed: ParsedFile, config: Config) -> KernelAnalysis:
    """Analyse one kernel.

    Args:
        kernel: a front-end KernelInfo with ``tree`` set (syntax errors are filtered by api).
        parsed: its file (helpers, launch sites, imports, lines).
        config: settings (budgets, solver timeout, max-elements).

    Returns:
        KernelAnalysis; status ``"budget"`` (plus a KS911 information finding) when the
        CPU-time budget ``config.kernel_budget_ms`` (of the analysing thread) ran out. Never raises on odd kernels:
        unmodelled constructs are counted in ``unknown_kinds``.
    """
    key = _cache_key(kernel, parsed, config)
    hit = _CACHE.get(key)
    if hit is not None:
        _CACHE.move_to_end(key)
        return hit
    result = _analyze(kernel, parsed, config)
    _cache_put(key, result)
    return result


def _cache_put(key: tuple, result: "KernelAnalysis") -> None:
    global _cache_records
    if not _CACHE:
        _cache_records = 0  # the cache was cleared from outside
    old = _CACHE.pop(key, None)
    if old is not None:
        _cache_records -= result_records(old)
    _CACHE[key] = result
    _cache_records += result_records(result)
    while len(_CACHE) > 1 and (len(_CACHE) > _CACHE_SIZE
                               or _cache_records > _CACHE_MAX_RECORDS):
        _, evicted = _CACHE.popitem(last=False)
        _cache_records -= result_records(evicted)


def _cache_key(kernel: KernelInfo, parsed: ParsedFile, config: Config) -> tuple:
    """What the kernel's result depends on, as a short tuple. The texts (the kernel's own
    source and every other jit function's, which may be helpers) enter as a SHA-256 digest:
    kept verbatim, each entry held the whole file's kernel sources, and 512 entries of
    edits to a large file held hundreds of MB."""
    helpers = tuple((k.name, k.source) for k in parsed.kernels if k.name != kernel.name)
    launches = tuple((l.kernel, l.span, tuple((a.name, a.source, a.expr.text) for a in l.args),
                      tuple(g.text for g in l.grid or ()))
                     for l in parsed.launches if l.kernel == kernel.name)
    digest = hashlib.sha256(repr((kernel.source, helpers, launches,
                                  _annotation_key(kernel, parsed))).encode(
        "utf-8", "surrogatepass")).hexdigest()
    return (kernel.name, kernel.span, digest, config.key())


def _annotation_key(kernel: KernelInfo, parsed: ParsedFile) -> tuple:
    """The text and place of every ``#@`` directive of the kernel. Directives above the
    decorator are not in ``kernel.source``; ``repr(kernel.annotations)`` would not do as a key
    (the parsed ``ast`` trees print their addresses)."""
    a = kernel.annotations
    spans = [t.span for t in a.tensors.values()]
    if a.grid is not None:
        spans.append(a.grid.span)
    spans += [c.span for c in a.computes]
    spans += [d.span for d in (*a.assumes, *a.asserts, *a.tags, *a.partners, *a.bench)]
    lines = parsed.lines
    out = []
    for sp in spans:
        text = "\n".join(lines[i] for i in range(sp.line, min(sp.end_line, len(lines) - 1) + 1)
                         if 0 <= i < len(lines))
        out.append((sp.line, sp.col, sp.end_line, sp.end_col, text))
    return tuple(sorted(out))


def constexpr_cases(kernel: KernelInfo, parsed: ParsedFile) -> tuple[list[dict], dict]:
    """The concrete constexpr assignments to analyse, and the names with no known value.

    Sources, later ones winning: parameter defaults, literal keyword/positional arguments at
    launch sites in the file, each ``triton.Config`` of ``@triton.autotune`` (one case each,
    at most MAX_CASES).
    """
    base: dict = {}
    cx = [p for p in kernel.params if p.is_constexpr]
    for p in cx:
        if p.default is not None and p.default.tree is not None:
            v = _literal(p.default.tree)
            if v is not _NO:
                base[p.name] = v
    launch = _launch_for(kernel, parsed)
    if launch is not None:
        names = [p.name for p in kernel.params]
        pos = 0
        for arg in launch.args:
            name = arg.name
            if name is None:
                name = names[pos] if pos < len(names) else None
                pos += 1
            p = kernel.param(name) if name else None
            if p is None or not p.is_constexpr:
                continue
            v = _NO
            if arg.source and arg.source[0] == "int":
                v = arg.source[1]
            elif arg.expr.tree is not None:
                v = _literal(arg.expr.tree)
                if v is _NO and isinstance(arg.expr.tree, ast.Name):
                    # `BLOCK=BLOCK` inside a launcher `def f(..., BLOCK=128)`
                    v = _launcher_default(parsed, launch, arg.expr.tree.id)
            if v is not _NO:
                base[name] = v
    cases = []
    for cfg in kernel.autotune[:MAX_CASES]:
        case = dict(base)
        for k, v in cfg.kwargs.items():
            if isinstance(v, (int, float, str, bool)):
                case[k] = v
        cases.append(case)
    if not cases:
        cases = [base]
    missing = {p.name: None for p in cx if all(p.name not in c for c in cases)}
    # constexpr flags with no value (`if IS_CAUSAL:`): analyse both settings
    flags = [n for n in _flag_names_cached(kernel) if n in missing]
    if flags:
        split = []
        for case in cases:
            for value in (False, True):
                split.append(dict(case, **{f: value for f in flags}))
        cases = split[:max(MAX_CASES, 2)]
        for f in flags:
            missing.pop(f, None)
    return cases, missing


def _flag_names_cached(kernel: KernelInfo) -> list[str]:
    if kernel.tree is None:
        return []
    hit = getattr(kernel.tree, "_ks_flags", None)
    if hit is None:
        hit = _flag_names(kernel)
        kernel.tree._ks_flags = hit
    return hit


def _flag_names(kernel: KernelInfo) -> list[str]:
    names: list[str] = []
    if kernel.tree is None:
        return names
    for n in _walk_stmts(kernel.tree.body):
        test = n.test if isinstance(n, ast.If) else None
        if test is None:
            continue
        bare = [test]
        while bare:
            t = bare.pop()
            if isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.Not):
                bare.append(t.operand)
                continue
            if isinstance(t, ast.BoolOp):
                bare.extend(t.values)
                continue
            if isinstance(t, ast.Name) and t.id not in names:
                p = kernel.param(t.id)
                if p is not None and p.is_constexpr:
                    names.append(t.id)
    return names


_NO = object()


def _literal(tree: ast.expr):
    try:
        v = ast.literal_eval(tree)
    except (ValueError, SyntaxError, TypeError, RecursionError):
        if isinstance(tree, ast.Attribute):  # tl.float16 as a constexpr value
            return tree.attr
        return _NO
    if isinstance(v, (int, float, str, bool)):
        return v
    return _NO


def _walk_stmts(body):
    for st in body:
        yield st
        for part in ("body", "orelse"):
            sub = getattr(st, part, None)
            if isinstance(sub, list):
                yield from _walk_stmts(sub)


def _launcher_default(parsed: ParsedFile, launch, name: str):
    """The literal default of parameter ``name`` of the function that holds the launch (or a
    plain ``name = literal`` at the top of its body). Only that function's text is parsed."""
    if not launch.function:
        return _NO
    # Kept on the ParsedFile, so it dies with it: a module-level table keyed by id(parsed)
    # kept up to 65 whole ParsedFiles (trees included) alive after their documents were gone.
    cache = parsed.__dict__.setdefault("_ks_launcher_defaults", {})
    hit = cache.get(launch.function)
    if hit is None:
        hit = cache[launch.function] = _function_defaults(parsed, launch)
    return hit.get(name, _NO)


def _function_defaults(parsed: ParsedFile, launch) -> dict:
    lines = parsed.lines
    start = None
    for i in range(min(launch.span.line, len(lines) - 1), -1, -1):
        stripped = lines[i].lstrip()
        if stripped.startswith(f"def {launch.function}(") or \
                stripped.startswith(f"async def {launch.function}("):
            start = i
            break
    if start is None:
        return {}
    indent = len(lines[start]) - len(lines[start].lstrip())
    # the launcher's text up to (not including) the launch statement, closed by a `pass`
    if launch.span.line - start > 400:
        return {}  # a launcher that long is not worth parsing on every save
    body = [l[indent:] if l[:indent].strip() == "" else l for l in lines[start:launch.span.line]]
    chunk = "\n".join(body)
    # close the cut text with a `pass` where the launch statement stood: when the line before
    # opens a block (`if`, `for`, `with`), only its indentation parses
    at = lines[launch.span.line] if launch.span.line < len(lines) else ""
    own = max(len(at) - len(at.lstrip()) - indent, 1)
    tree = None
    for cut in (chunk + "\n" + " " * own + "pass", chunk + "\n    pass", chunk):
        try:
            tree = ast.parse(cut)
            break
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    if tree is None or not tree.body or not isinstance(tree.body[0], ast.FunctionDef):
        return {}
    node = tree.body[0]
    a = node.args
    pos = a.posonlyargs + a.args
    vals: dict = {}
    for st in node.body:
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and \
                isinstance(st.targets[0], ast.Name):
            vals.setdefault(st.targets[0].id, _literal(st.value))
    pairs = list(zip(pos[len(pos) - len(a.defaults):], a.defaults))
    pairs += [(k, d) for k, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
    for arg, d in pairs:
        vals[arg.arg] = _literal(d)
    return vals


def _launch_for(kernel: KernelInfo, parsed: ParsedFile):
    for l in parsed.launches:
        if l.kernel == kernel.name:
            return l
    return None


def _analyze(kernel: KernelInfo, parsed: ParsedFile, config: Config) -> KernelAnalysis:
    solvers: list = []
    try:
        return _analyze_cases(kernel, parsed, config, solvers)
    finally:
        # z3 terms are freed here, under the z3 lock, on the analysing thread: left to the
        # garbage collector they were freed on whatever thread ran it (SolverContext.release)
        for solver in solvers:
            solver.release()


def _analyze_cases(kernel: KernelInfo, parsed: ParsedFile, config: Config,
                   solvers: list) -> KernelAnalysis:
    t0 = time.thread_time()
    deadline = t0 + config.kernel_budget_ms / 1000.0
    out = KernelAnalysis()
    if kernel.tree is None:
        out.status = "syntax-error"
        return out
    kernel = _with_inferred(kernel, parsed)
    cases, missing = constexpr_cases(kernel, parsed)
    rep = Reporter(kernel, config)
    unknown_kinds: Counter = Counter()
    launch = _launch_for(kernel, parsed)
    fallback = dict(missing)
    budget_reason = None
    shared_cache: dict = {}
    inferred_grid = _inferred_grid(kernel, parsed)
    # Autotune configs that differ only in launch options (num_warps, num_stages) give the
    # same constexpr case: its findings would all be duplicates, so the case is analysed once
    # and its obligations counted again (the tally counts obligations per case).
    done_cases: dict[tuple, tuple[int, int, int]] = {}
    for ci, case in enumerate(cases):
        case_key = tuple(sorted((k, type(v).__name__, repr(v)) for k, v in case.items()))
        if case_key in done_cases:
            proved, refuted, unproved = done_cases[case_key]
            rep.tally.proved += proved
            rep.tally.refuted += refuted
            rep.tally.unproved += unproved
            continue
        tally_before = (rep.tally.proved, rep.tally.refuted, rep.tally.unproved)
        it = Interp(kernel, parsed, config, case, deadline, record_hovers=(ci == 0),
                    fallback=fallback)
        try:
            it.run()
        except Budget as exc:
            budget_reason = str(exc)
            if ci == 0:
                unknown_kinds.update(it.unknown_kinds)
            break
        except RecursionError:
            budget_reason = "expression nesting too deep"
            break
        if ci == 0:
            unknown_kinds.update(it.unknown_kinds)
        facts, templates = _assumptions(it)
        solver = SolverContext(it.terms, {k: int(v) for k, v in it.consts.items()
                                          if isinstance(v, (int, bool))},
                               it.runtime_params, facts, _pid_bounds(it, inferred_grid),
                               config.solver_timeout_ms, config.max_size)
        solver.templates = templates
        solver._cache = shared_cache
        # z3 gets at most half of the kernel's budget, across its cases
        solver.budget_s = config.kernel_budget_ms / 2000.0
        solver.shared_with = list(solvers)
        if solvers:
            solver.timeouts = solvers[-1].timeouts
        solvers.append(solver)
        solver.deadline = deadline
        try:
            from .checks import run_checks
            run_checks(it, solver, rep, launch)
            try:
                from . import grid  # grid-level checks (KS3xx, KS205), when present
            except ImportError:
                grid = None
            if GRID_CHECKS and grid is not None and hasattr(grid, "run_grid_checks"):
                grid.run_grid_checks(it, solver, rep, kernel, parsed, config)
        except Budget as exc:
            budget_reason = str(exc)
        if ci == 0:
            out.hovers = _hovers(it, rep)
        if budget_reason or time.thread_time() > deadline:
            budget_reason = budget_reason or "time budget exhausted"
            break
        done_cases[case_key] = (rep.tally.proved - tally_before[0],
                                rep.tally.refuted - tally_before[1],
                                rep.tally.unproved - tally_before[2])
    out.findings = rep.findings
    out.tally = rep.tally
    out.unknown_kinds = dict(unknown_kinds)
    out.unknowns = sum(unknown_kinds.values())
    if budget_reason:
        out.status = "budget"
        info = CODES["KS911"]
        out.findings.append(Finding(
            code="KS911", message=f"{info.title}: {budget_reason} (after "
            f"{(time.thread_time() - t0) * 1000:.0f} ms; budget {config.kernel_budget_ms} ms)",
            span=kernel.name_span, severity=info.severity, kernel=kernel.name))
    return out


def _universal_names(it: Interp) -> dict[int, set[str]]:
    """Per assume directive, the names that stand for every value of their range: not a
    parameter, tensor or function, and not used in a tensor size or the grid."""
    ann = it.kernel.annotations
    elsewhere: Counter = Counter()
    per: dict[int, set[str]] = {}

    def names(tree):
        out = set()
        for n in ast.walk(tree):
            if isinstance(n, ast.Name) and isinstance(getattr(n, "ctx", None), ast.Load):
                out.add(n.id)
        for n in ast.walk(tree):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
                out.discard(n.func.id)
        return out

    for i, d in enumerate(ann.assumes):
        s = set()
        for e in d.exprs:
            if e.tree is not None:
                s |= names(e.tree)
        per[i] = s
        elsewhere.update(s)
    fixed: set[str] = set(it.params) | set(it.decl_names)
    for decl in ann.tensors.values():
        for dim in decl.dims:
            if dim.size.tree is not None:
                fixed |= names(dim.size.tree)
    if ann.grid is not None:
        for e in ann.grid.axes:
            if e.tree is not None:
                fixed |= names(e.tree)
    # A name used only in assume/computes directives is bound per directive (the spec's
    # `p` in `TokenIds[p]` recurs in several facts, each meaning "for every p").
    return {i: {n for n in s if n not in fixed} for i, s in per.items()}


def _assumptions(it: Interp) -> tuple[list, list]:
    """``#@ assume`` facts as BoolExprs (plus ``size >= 1`` for free size symbols), and the
    universally quantified ones as templates for ``SolverContext.templates``."""
    out = []
    templates = []
    universal = _universal_names(it)
    for i, d in enumerate(it.kernel.annotations.assumes):
        uvars = universal.get(i, set())
        for e in d.exprs:
            if e.tree is None:
                continue
            b = _annot_bool(it, e.tree)
            if b is None:
                continue
            if uvars:
                trig = _triggers(it, b, uvars)
                used = {u for _, u, _ in trig}
                if used == set(uvars) or (used and used >= {u for u in uvars
                                                          if _mentions(it, b, u)}):
                    templates.append((b, tuple(sorted(used)), trig))
                continue
            out.append(b)
    for decl in it.kernel.annotations.tensors.values():
        sizes = it.decl_sizes(decl) or []
        for s in sizes:
            for a in s.atoms():
                if a not in it.consts and a[0] not in "%@?{" and not a.startswith("pid"):
                    from .values import cmp
                    out.append(cmp(">=", Poly.atom(a), Poly.const(1)))
    return out, templates


def _triggers(it: Interp, b, uvars: set[str]) -> list:
    from .values import b_polys
    trig = []
    for p in b_polys(b):
        for a in it.terms.deep_atoms(p):
            if a[0] != "{":
                continue
            op, args = it.terms.defs.get(a, ("", ()))
            if op != "read":
                continue
            base, off = args
            for u in uvars:
                if off.coefficient_of(u) == Poly.const(1):
                    rest = off.without_atom(u)
                    if rest.is_const() and (base, u, rest.constant) not in trig:
                        trig.append((base, u, rest.constant))
    return trig


def _mentions(it: Interp, b, u: str) -> bool:
    from .values import b_polys
    return any(u in it.terms.deep_atoms(p) for p in b_polys(b))


def _annot_bool(it: Interp, tree: ast.expr):
    if isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and \
            tree.func.id == "implies" and len(tree.args) == 2:
        a, b = _annot_bool(it, tree.args[0]), _annot_bool(it, tree.args[1])
        if a is None or b is None:
            return None
        return b_or(b_not(a), b)
    try:
        v = it.annot_eval(tree)
    except Exception:
        return None
    if v.kind == "bool" and not v.shape and v.mask is not None:
        if v.mask[0] == "opaque":
            return None
        return v.mask
    return None


def _pid_bounds(it: Interp, inferred: list | None = None) -> dict:
    """Program id bounds from ``#@ grid``, else from the launch site (``infer.infer_grid``)."""
    g = it.kernel.annotations.grid
    axes_exprs = g.axes if g is not None else inferred
    out: dict = {}
    if not axes_exprs:
        return out
    polys = [it.annot_poly(e.tree) for e in axes_exprs[:3]]
    if g is None and any(p is None for p in polys):
        return out  # a partly understood launch grid bounds nothing
    for axis, p in enumerate(polys):
        if p is not None:
            out[axis] = p
    for axis in range(len(axes_exprs), 3):
        out[axis] = Poly.const(1)
    return out


def _with_inferred(kernel: KernelInfo, parsed: ParsedFile) -> KernelInfo:
    """``kernel`` with the tensors and grid its launch site implies, when it declares neither
    (the user's own directives are never completed behind their back)."""
    ann = kernel.annotations
    if not INFER_ANNOTATIONS or ann.tensors or ann.grid is not None or \
            _launch_for(kernel, parsed) is None:
        return kernel
    try:
        from ..infer import with_inferred_annotations
        return with_inferred_annotations(parsed, kernel)
    except Exception:  # inference is best effort; the plain analysis still runs
        return kernel


def _inferred_grid(kernel: KernelInfo, parsed: ParsedFile):
    if kernel.annotations.grid is not None or _launch_for(kernel, parsed) is None:
        return None
    try:
        from ..infer import infer_grid
        return infer_grid(parsed, kernel)
    except Exception:  # inference is best effort
        return None


def _hovers(it: Interp, rep: Reporter) -> list[HoverInfo]:
    from .render import HOVER_TERMS, show, show_mask
    hovers = list(it.hovers)
    for acc in it.accesses:
        key = (acc.span.line, acc.span.col, acc.span.end_line, acc.span.end_col)
        shape = "[" + ", ".join(str(n) for n in acc.shape) + "]"
        title = f"{'tl.load' if acc.kind == 'load' else 'tl.store' if acc.kind == 'store' else 'atomic'}" \
                f" {acc.base or '?'} + offset, tile{shape}"
        tags = [f"offset = {show(acc.offset, it, HOVER_TERMS)}"]
        tags.append("mask = " + (show_mask(acc.mask, it, HOVER_TERMS) if acc.mask is not None else
                                 "none (every lane)"))
        v = acc.value
        if v is not None and v.tags:
            from .render import describe_value
            tags += describe_value("value", v, it)[1]
        hovers.append(HoverInfo(span=acc.span, title=title,
                                shape=tuple(str(n) for n in acc.shape), tags=tags,
                                invariants=list(rep.invariants.get(key, [])),
                                counterexample=rep.cex_at.get(key)))
    for ob in it.obligations:
        if ob.kind == "dot":
            key = (ob.span.line, ob.span.col, ob.span.end_line, ob.span.end_col)
            if not any(h.span == ob.span for h in hovers):
                hovers.append(HoverInfo(span=ob.span, title="tl.dot",
                                        invariants=list(rep.invariants.get(key, [])),
                                        counterexample=rep.cex_at.get(key)))
    return hovers


__all__ = ["KernelAnalysis", "analyze_kernel", "constexpr_cases"]
