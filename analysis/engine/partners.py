"""KS205, ``#@ partners LEAD: P1, P2, ...`` (the online-softmax rule): in every loop
iteration that updates LEAD, each partner is rescaled by a factor computed from the old and
the new LEAD.

Decided on the loop body's AST (a def-use analysis), not on the access log: a partner's
update must have the form ``P = P * f + ...`` / ``P *= f`` where ``f`` depends on the old
LEAD other than through its new value, and on the new value (the right-hand side of the
``LEAD = ...`` update). The counterexample names the loop, its iteration 1 and the lines.
"""
from __future__ import annotations

import ast

from ..kernel import KernelInfo, ParsedFile
from ..model import Counterexample, Related, Span
from .report import Reporter


def check_partners(kernel: KernelInfo, parsed: ParsedFile, rep: Reporter) -> None:
    """``#@ partners LEAD: P1, P2``: in each loop that updates LEAD, every partner is
    multiplied by a factor that depends on the old LEAD and on its new value."""
    tree = kernel.tree
    if tree is None:
        return
    for d in kernel.annotations.partners:
        names = [e.text.strip() for e in d.exprs]
        if len(names) < 2:
            continue
        lead, partners = names[0], names[1:]
        for loop in _loops(tree):
            body = _flatten(loop.body)
            upd = [i for i, s in enumerate(body) if lead in _targets(s)]
            if not upd:
                continue
            li = upd[-1]
            new_src = _rhs_names(body[li]) - {lead}
            for p in partners:
                _check_partner(parsed, rep, loop, body, lead, li, new_src, p, d)

def _loops(tree: ast.FunctionDef) -> list[ast.For | ast.While]:
    """The kernel's loops in ``ast.walk`` order, found once per tree: the check runs once per
    constexpr case and per ``#@ partners`` line."""
    hit = getattr(tree, "_ks_loops", None)
    if hit is None:
        hit = [n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While))]
        tree._ks_loops = hit
    return hit


def _check_partner(parsed: ParsedFile, rep: Reporter, loop, body, lead: str, li: int,
                   new_src: set[str], p: str, d) -> None:
    assigns = [i for i, s in enumerate(body) if p in _targets(s)]
    if not assigns:
        return
    ok = False
    for i in assigns:
        for factor in _scale_factors(body[i], p):
            # the old LEAD must reach the factor other than through the new value
            # (exp(-m_new) mentions m_i only inside m_new = max(m_i, ...))
            deps = _deps(body, i, factor, stop=new_src)
            old = lead in deps and _reads_before(body, lead, i, li)
            new = bool(deps & (new_src | {lead})) and (bool(deps & new_src) or i > li)
            if old and new:
                ok = True
    span = _stmt_span(parsed, body[assigns[-1]])
    text = f"{p} is rescaled when {lead} changes"
    if ok:
        rep.outcome("proved", text, span)
        return
    rep.outcome("refuted", text, span)
    var = loop.target.id if isinstance(loop, ast.For) and isinstance(loop.target, ast.Name) \
        else "iteration"
    lead_line = body[li].lineno
    rescaled = [q for q in d.exprs[1:] if q.text.strip() != p]
    cex = Counterexample(loop={var: 1}, values={"lead": lead, "partner": p},
                         method="dataflow",
                         notes=[f"iteration 1 of the loop at line {loop.lineno}: {lead} "
                                f"is updated at line {lead_line}; when it grows, {p} keeps "
                                f"values scaled for the old {lead} while "
                                f"{', '.join(q.text for q in rescaled) or 'the others'} "
                                "are rescaled"])
    related = [Related(_stmt_span(parsed, body[li]), f"{lead} updated here"),
               Related(d.span, f"#@ partners {d.raw}")]
    rep.report("KS205", f"{p} is not rescaled in the iteration that updates {lead}: "
                    f"multiply it by a factor computed from the old and the new {lead} "
                    f"(e.g. exp({lead} - {lead}_new))", span, cex, related,
                    dedupe=("KS205", span.line, p))


def _flatten(stmts: list[ast.stmt]) -> list[ast.stmt]:
    """Statements of a loop body in order, with the bodies of ``if`` blocks inlined (both
    branches) and nested loops left as one statement."""
    out = []
    for s in stmts:
        if isinstance(s, ast.If):
            out += _flatten(s.body) + _flatten(s.orelse)
        else:
            out.append(s)
    return out


def _targets(s: ast.stmt) -> set[str]:
    out = set()
    if isinstance(s, ast.Assign):
        for t in s.targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name):
                    out.add(n.id)
    elif isinstance(s, (ast.AugAssign, ast.AnnAssign)) and isinstance(s.target, ast.Name):
        out.add(s.target.id)
    return out


def _rhs_names(s: ast.stmt) -> set[str]:
    v = getattr(s, "value", None)
    if v is None:
        return set()
    out = {n.id for n in ast.walk(v) if isinstance(n, ast.Name)}
    if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name):
        out.add(s.target.id)
    return out


def _deps(body: list[ast.stmt], before: int, expr: ast.AST,
          stop: set[str] = frozenset()) -> set[str]:
    """Names ``expr`` (at statement ``before``) depends on, through earlier assignments of
    the loop body (the names themselves included); names in ``stop`` are not expanded."""
    work = [n.id for n in ast.walk(expr) if isinstance(n, ast.Name)]
    seen: set[str] = set()
    while work:
        name = work.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in stop:
            continue
        for i in range(before - 1, -1, -1):
            if name in _targets(body[i]):
                work.extend(_rhs_names(body[i]))
                break
    return seen


def _reads_before(body: list[ast.stmt], lead: str, i: int, li: int) -> bool:
    """The factor at statement ``i`` can see the old value of ``lead``: it is computed before
    the update at ``li``, or from a copy taken before it."""
    return i < li or any(lead in _rhs_names(body[k]) for k in range(li))


def _scale_factors(s: ast.stmt, p: str) -> list[ast.AST]:
    """The factors ``f`` in ``p = p * f + ...`` / ``p *= f`` / ``p = f * p``."""
    out = []
    if isinstance(s, ast.AugAssign) and isinstance(s.op, ast.Mult):
        return [s.value]
    v = getattr(s, "value", None)
    if v is None:
        return out
    for n in ast.walk(v):
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Mult, ast.Div)):
            if _is_name(n.left, p):
                out.append(n.right)
            elif _is_name(n.right, p) and isinstance(n.op, ast.Mult):
                out.append(n.left)
    return out


def _is_name(n: ast.AST, name: str) -> bool:
    while isinstance(n, ast.Subscript):
        n = n.value
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "to":
        n = n.func.value
    return isinstance(n, ast.Name) and n.id == name


def _stmt_span(parsed: ParsedFile, s: ast.stmt) -> Span:
    from ..frontend import ast_span
    return ast_span(s)


__all__ = ["check_partners"]
