"""How a check reports: obligations (proved/refuted/unproved, counted in the InvariantTally and
shown in hovers), findings with a Counterexample built from a solver model, the ``related``
chain (a backward slice over assignments) and mechanical fixes.
"""
from __future__ import annotations

import ast
from typing import Any

from ..codes import CODES
from ..frontend import ast_span
from ..model import (Counterexample, Finding, Fix, InvariantTally, Related, Severity, Span,
                     TextEdit)
from .interp import Interp, _src
from .poly import Poly
from .render import atom_names, element_of
from .solver import Result


class Reporter:
    """Collects findings and the tally of one kernel (all cases)."""

    def __init__(self, kernel, config):
        self.kernel = kernel
        self.config = config
        self.findings: list[Finding] = []
        self.tally = InvariantTally()
        self.invariants: dict[tuple, list[tuple[str, str]]] = {}  # span key -> (status, text)
        self.cex_at: dict[tuple, Counterexample] = {}
        self._seen: set[tuple] = set()

    def outcome(self, res: Result | str, text: str, span: Span) -> str:
        """Count one obligation: ``sat`` -> refuted, ``unsat``/"proved" -> proved."""
        status = res if isinstance(res, str) else {"sat": "refuted", "unsat": "proved"}.get(
            res.status, "unproved")
        if status == "proved":
            self.tally.proved += 1
        elif status == "refuted":
            self.tally.refuted += 1
        else:
            self.tally.unproved += 1
        key = (span.line, span.col, span.end_line, span.end_col)
        lst = self.invariants.setdefault(key, [])
        if (status, text) not in lst:
            lst.append((status, text))
        return status

    def report(self, code: str, message: str, span: Span, cex: Counterexample | None = None,
               related: list[Related] | None = None, fixes: list[Fix] | None = None,
               dedupe: tuple | None = None) -> bool:
        """Add a finding unless one with the same ``dedupe`` key (default: code + span) exists
        or the code is not selected. Returns True when added."""
        if not self.config.enabled(code):
            return False
        key = dedupe or (code, span.line, span.col)
        if key in self._seen:
            return False
        self._seen.add(key)
        info = CODES.get(code)
        sev = info.severity if info else Severity.WARNING
        f = Finding(code=code, message=message, span=span, severity=sev,
                    kernel=self.kernel.name, counterexample=cex, related=related or [],
                    fixes=fixes or [])
        self.findings.append(f)
        if cex is not None:
            self.cex_at.setdefault((span.line, span.col, span.end_line, span.end_col), cex)
        return True


def counterexample(res: Result, it: Interp, shape: tuple, loops: list,
                   values: dict[str, Any] | None = None, method: str | None = None,
                   notes: list[str] | None = None) -> Counterexample:
    """Build a Counterexample from a solver model: program ids, element, loop iterations,
    sizes (runtime parameters in the model + this case's constexprs) and named values (Polys
    are evaluated under the model)."""
    m = res.model
    refined = None
    if getattr(res, "refine", None) is not None and not any(a.startswith("pid") for a in m):
        refined = res.refine()
        if refined:
            m = {**m, **refined}
    names = atom_names(it)
    axes = [a for a in range(3) if f"pid{a}" in m]
    pid = None
    if axes:
        pid = tuple(m.get(f"pid{a}", 0) for a in range(max(axes) + 1))
    elif refined == {} and getattr(it, "pid_axes", None):
        # the question never mentioned a program id (nor did the guards of the access): every
        # program fails the same way, so the first one is a witness
        pid = (0,) * (max(it.pid_axes) + 1)
    element = element_of(it, m, len(shape))
    loop = {}
    for l in loops:
        if l.atom in m:
            loop[names.get(l.atom, l.var)] = m[l.atom]
    sizes: dict[str, int] = {}
    for a, v in sorted(m.items()):
        if a[0] in "%@?{" or a.startswith("pid"):
            continue
        sizes[a] = v
    for k, v in it.consts.items():
        if isinstance(v, int):  # constexpr flags (bool) as 0/1: they select the code path
            sizes.setdefault(k, int(v))
    out_vals: dict[str, Any] = {}
    loop_atoms = {l.atom for l in loops}

    def env(a: str) -> int:
        if a in m:
            return m[a]
        c = it.consts.get(a)
        if isinstance(c, int):
            return int(c)
        return 0

    def reads(base, off):
        return res.reads.get((base, off), 0)

    for k, v in (values or {}).items():
        if isinstance(v, Poly):
            # a run-time size or stride the solver never had to pick (the query did not use
            # it) would be evaluated as 0: `offset=0` beside `A.k=33` misled a reader, so a
            # value that depends on one is left out
            if any(a not in m and not isinstance(it.consts.get(a), int) and a[0] not in "%@{"
                   and not a.startswith("pid") and a not in loop_atoms
                   for a in it.terms.deep_atoms(v)):
                continue
            try:
                out_vals[k] = it.terms.evaluate(v, env, reads)
            except Exception:
                out_vals[k] = "?"
        else:
            out_vals[k] = v
    # a loop whose variable is not its iteration count (`for off in range(0, N, BLOCK)`)
    # is keyed `off_iter`; the variable's own value is what a reader compares with the code
    for l in loops:
        key = names.get(l.atom, l.var)
        if key != l.var + "_iter" or key not in loop or l.var in out_vals:
            continue
        var = l.lo + Poly.atom(l.atom) * l.step
        if all(a in m or isinstance(it.consts.get(a), int) or a == l.atom
               for a in it.terms.deep_atoms(var)):
            try:
                out_vals[l.var] = it.terms.evaluate(var, env, reads)
            except Exception:
                pass
    return Counterexample(program_id=pid, element=element, loop=loop, sizes=sizes,
                          values=out_vals, method=method or res.method,
                          notes=list(notes or []))


def enclosing_blocks(it: Interp) -> dict[int, list[tuple[str, int, int]]]:
    """Per statement id, the ``if``/``for``/``while`` blocks around it as (kind, first line,
    last line), 0-based; cached on the kernel's tree."""
    tree = it.kernel.tree
    hit = getattr(tree, "_ks_blocks", None)
    if hit is not None:
        return hit
    out: dict[int, list[tuple[str, int, int]]] = {}
    stack: list[tuple[ast.AST, list]] = [(tree, [])]
    while stack:
        node, around = stack.pop()
        out[id(node)] = around
        inner = around
        if isinstance(node, (ast.If, ast.For, ast.While)):
            kind = "if" if isinstance(node, ast.If) else "loop"
            inner = around + [(kind, node.lineno - 1, (node.end_lineno or node.lineno) - 1)]
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                stack.append((child, inner))
    try:
        tree._ks_blocks = out
    except AttributeError:
        pass
    return out


def _reaching(it: Interp, stmts: list, line: int) -> list:
    """Of the assignments ``stmts`` of one name, those that can reach line ``line``: not
    after it (unless in a loop around it: the next iteration sees them), and not before an
    unconditional rebinding that precedes it (`cols = ...` in three loops: only the last
    loop's). Only the related lines depend on this, never a finding."""
    if it.kernel.tree is None or len(stmts) < 2:
        return stmts
    blocks = enclosing_blocks(it)

    def encloses(b) -> bool:
        return b[1] <= line <= b[2]

    before = [s for s in stmts if s.lineno - 1 <= line]
    after = [s for s in stmts if s.lineno - 1 > line and
             any(b[0] == "loop" and encloses(b) for b in blocks.get(id(s), []))]
    last = None
    for s in before:
        # a plain rebinding whose every block also holds `line` happens on each way there
        if isinstance(s, ast.Assign) and all(encloses(b) for b in blocks.get(id(s), [])):
            last = s
    if last is not None:
        before = [s for s in before if s.lineno >= last.lineno]
    return before + after


def related_chain(it: Interp, nodes: list[ast.AST], before_line: int, limit: int = 8,
                  extra: list[Related] | None = None) -> list[Related]:
    """The assignments that produced the names used in ``nodes`` (a backward slice), in
    program order, at most ``limit`` entries."""
    seen_stmts: set[int] = set()
    out: list[tuple[int, Related]] = []
    work: list[str] = []
    for n in nodes:
        if n is None:
            continue
        work.extend(x.id for x in ast.walk(n) if isinstance(x, ast.Name))
    seen_names: set[str] = set()
    while work and len(out) < limit:
        name = work.pop(0)
        if name in seen_names:
            continue
        seen_names.add(name)
        for stmt in _reaching(it, it.assign_nodes.get(name, []), before_line):
            if id(stmt) in seen_stmts:
                continue
            seen_stmts.add(id(stmt))
            sp = ast_span(stmt)
            text = _src(it.parsed, stmt)
            if len(text) > 100:
                text = text[:97] + "..."
            out.append((sp.line, Related(Span(sp.line, sp.col, sp.line,
                                              len(it.parsed.lines[sp.line])
                                              if sp.line < len(it.parsed.lines) else sp.end_col),
                                         text)))
            value = getattr(stmt, "value", None)
            if value is not None:
                work.extend(x.id for x in ast.walk(value) if isinstance(x, ast.Name))
    rel = [r for _, r in sorted(out, key=lambda t: t[0])]
    return (extra or []) + rel


def insert_kwarg_fix(it: Interp, call: ast.Call, text: str, title: str) -> Fix | None:
    """Insert ``, text`` before the closing parenthesis of ``call``."""
    if call.end_lineno is None or call.end_col_offset is None:
        return None
    line = call.end_lineno - 1
    col = call.end_col_offset - 1
    src_line = it.parsed.lines[line] if line < len(it.parsed.lines) else ""
    if col < 0 or col >= len(src_line) or src_line[col] != ")":
        return None
    # a trailing comma before ')' already separates
    prev = src_line[:col].rstrip()
    sep = " " if prev.endswith(",") else ", "
    return Fix(title, (TextEdit(Span(line, col, line, col), f"{sep}{text}"),))


def replace_fix(node: ast.AST, text: str, title: str) -> Fix:
    return Fix(title, (TextEdit(ast_span(node), text),))
