"""The abstract interpreter of one kernel (one constexpr case).

It walks the kernel's ``ast.FunctionDef`` once (loops twice: a probe pass finds the
induction step of loop-carried pointers/integers, the real pass records), producing ``V``
values, the access log, obligations for the checks and hover records. Anything it does not
model becomes ``unknown`` and is counted in ``unknown_kinds``; unknown values never produce
findings. See README.md.
"""
from __future__ import annotations

import ast
import math
import time
from collections import Counter
from typing import Any

from ..frontend import ast_span
from ..kernel import KernelInfo, ParsedFile
from ..model import HoverInfo, Span
from .access import Access, Carried, Obligation, WhereUse
from .poly import ONE, ZERO, Poly, fmt
from .solver import Loop
from .values import (FALSE, FINITE, TRUE, UNDEF, UNKNOWN, Pad, Risk, Tag, Terms, V, b_and,
                     b_map, b_not, b_or, cmp, conjuncts, int_const, pad_apply,
                     pad_unary, unknown)


# Largest result, in bits, of a shift or a power folded into a constant (Triton integers
# have at most 64 bits; beyond that a folded value only costs time and memory).
_MAX_FOLD_BITS = 1024


class Budget(Exception):
    """Raised when the kernel's CPU-time budget (thread time) or a size limit is exhausted."""


DTYPES = {
    "float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float": "fp32",
    "float64": "fp64", "double": "fp64", "int1": "i1", "int8": "i8", "int16": "i16",
    "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32",
    "uint64": "u64", "float8e4nv": "fp8", "float8e5": "fp8", "float8e4b15": "fp8",
    "float8e4b8": "fp8", "float8e5b16": "fp8", "tf32": "fp32",
}
INT_DTYPES = {"i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"}
FLOAT_ORDER = {"fp8": 0, "fp16": 1, "bf16": 1, "fp32": 2, "fp64": 3}
UNARY_MATH = {
    "exp", "exp2", "log", "log2", "log1p", "sqrt", "sqrt_rn", "rsqrt", "sigmoid", "abs", "cos",
    "sin", "tan", "erf", "tanh", "softplus", "floor", "ceil", "fabs", "expm1", "relu", "gelu",
    "isnan", "isinf", "signbit", "round", "rint", "trunc", "acos", "asin", "atan", "cosh",
    "sinh", "fast_expf", "fast_logf", "fast_dividef", "pow", "fdiv", "div_rn", "fma", "clamp",
    "atan2", "hypot", "nextafter", "copysign", "fmod", "ilogb", "erfinv", "lgamma",
    "silu", "exp_fast", "logaddexp", "maximum_nan", "umulhi", "cdf", "mulhi",
}
NOOP_CALLS = {"static_assert", "device_assert", "static_print", "device_print", "debug_barrier",
              "assume", "print", "inline_asm_elementwise_noop"}
HINTS = {"multiple_of", "max_contiguous", "max_constancy", "constexpr", "int", "optimization_barrier"}
REDUCTIONS = {"sum": "sum", "max": "max", "min": "min", "argmax": "argmax", "argmin": "argmin",
              "xor_sum": "xor", "reduce": "other", "prod": "prod"}
SCANS = {"cumsum", "cumprod", "associative_scan", "sort", "flip"}


def _dtype_of(name: str) -> str | None:
    return DTYPES.get(name.split(".")[-1])


class Interp:
    """Interprets one kernel for one constexpr case.

    Args:
        kernel, parsed, config: the usual.
        consts: constexpr name -> concrete value (int/bool/str/float) of this case; ints
            stay symbolic atoms in polys, their value is used for shapes and conditions.
        deadline: ``time.thread_time()`` value past which ``Budget`` is raised.
        record_hovers: collect HoverInfo (first case only).
    """

    def __init__(self, kernel: KernelInfo, parsed: ParsedFile, config, consts: dict,
                 deadline: float, record_hovers: bool = True, fallback: dict | None = None):
        self.kernel = kernel
        self.parsed = parsed
        self.config = config
        self.consts = dict(consts)
        self.fallback = fallback if fallback is not None else {}
        self.deadline = deadline
        self.record_hovers = record_hovers
        self.terms = Terms()
        self.env: dict[str, V] = {}
        self.accesses: list[Access] = []
        self.obligations: list[Obligation] = []
        self.carried: list[Carried] = []
        self.wheres: list[WhereUse] = []
        self.hovers: list[HoverInfo] = []
        self.unknown_kinds: Counter = Counter()
        self.loops: list[Loop] = []
        self.guards: list = []
        self.names: dict[str, str] = {}  # atom -> display name (see _bind_name)
        self._names_off = 0  # > 0 where assignments do not name atoms (see _bind_name)
        self.named_sums: dict[str, Poly] = {}  # variable -> the formula it holds (_bind_sum)
        self.masks: list[tuple[str, V, ast.AST]] = []  # named bool tiles (KS104)
        self.assign_nodes: dict[str, list[ast.AST]] = {}
        self.pid_vars: dict[str, int] = {}  # variable -> program id axis it holds
        self.recording = True
        self.depth = 0
        self.steps = 0
        self._fresh = 0
        self._next_access = 0
        self.decls = {d.ptr: d for d in kernel.annotations.tensors.values()}
        self.decl_names = {d.name: d for d in kernel.annotations.tensors.values()}
        self.annot_mode = False
        self._annot_base: dict | None = None
        self.params = [p.name for p in kernel.params]
        self.runtime_params: set[str] = set()
        self.pid_axes: set[int] = set()  # the axes of the tl.program_id calls evaluated
        self.pointer_names = _cached(kernel.tree, "_ks_pointers", lambda: _pointer_names(kernel))
        self.helpers = {k.name: k for k in parsed.kernels}
        self.returned: V | None = None
        self.assert_lines = sorted(d.line for d in kernel.annotations.asserts)
        self._pending_asserts = list(kernel.annotations.asserts) + list(kernel.annotations.tags)

    # ------------------------------------------------------------------ bookkeeping
    def fresh(self, prefix: str = "?") -> str:
        self._fresh += 1
        return f"{prefix}{self._fresh}"

    def unk(self, kind: str, shape: tuple = ()) -> V:
        if self.recording:
            self.unknown_kinds[kind] += 1
        return unknown(kind, shape)

    def tick(self) -> None:
        self.steps += 1
        if self.steps & 63 == 0 and time.thread_time() > self.deadline:
            raise Budget("time budget exhausted")

    def concrete(self, p: Poly | V | None) -> int | None:
        """The integer value of ``p`` with constexprs substituted, or None."""
        if isinstance(p, V):
            if p.kind == "const" and isinstance(p.const, (int, bool)):
                return int(p.const)
            p = p.poly if p.kind in ("int",) else None
        if p is None:
            return None
        c = p.const_value()
        if c is not None:
            return c
        total = 0
        for m, coef in p.terms.items():
            v = coef
            for a in m:
                x = self.consts.get(a)
                if x is None:
                    x = self.fallback_value(a)
                if not isinstance(x, (int, bool)) or x is None:
                    return None
                v *= int(x)
            total += v
        return total

    def fallback_value(self, name: str) -> int | None:
        """A constexpr without any known value gets a distinct power of two the first time
        a concrete value is needed (a shape, a trip count); the case records it."""
        if name not in self.fallback:
            return None
        if self.fallback[name] is None:
            used = {v for v in self.consts.values() if isinstance(v, int)}
            for cand in (64, 32, 128, 16, 256, 512):
                if cand not in used:
                    break
            self.fallback[name] = cand
        self.consts[name] = self.fallback[name]
        self._annot_base = None  # param_value of this constexpr changes
        return self.fallback[name]

    def span(self, node: ast.AST) -> Span:
        return ast_span(node)

    # ------------------------------------------------------------------ entry
    def run(self) -> None:
        fn = self.kernel.tree
        assert fn is not None
        for p in self.kernel.params:
            self.env[p.name] = self.param_value(p.name, p.is_constexpr)
        self.exec_block(fn.body)
        self.flush_asserts(10 ** 9)

    def param_value(self, name: str, is_constexpr: bool) -> V:
        if is_constexpr:
            if name in self.consts:
                v = self.consts[name]
                if isinstance(v, bool) or v is None:
                    return V("const", const=v)
                if isinstance(v, int):
                    return V("int", poly=Poly.atom(name), width=32)
                if isinstance(v, str) and _dtype_of(v):
                    return V("dtype", const=_dtype_of(v))
                return V("const", const=v)
            if name in self.fallback:
                return V("int", poly=Poly.atom(name), width=32)
            return V("const", const=None, why="constexpr")
        if name in self.pointer_names or name in self.decls:
            return V("ptr", poly=ZERO, base=name, width=32)
        self.runtime_params.add(name)
        return V("int", poly=Poly.atom(name), width=32)

    # ------------------------------------------------------------------ statements
    def exec_block(self, stmts: list[ast.stmt]) -> None:
        for s in stmts:
            if self.returned is not None:
                return
            if self._pending_asserts:
                self.flush_asserts(s.lineno - 1)
            self.exec_stmt(s)

    def exec_stmt(self, s: ast.stmt) -> None:
        self.tick()
        t = type(s)
        if t is ast.Assign:
            val = self.eval(s.value)
            for target in s.targets:
                self.assign(target, val, s)
        elif t is ast.AugAssign:
            if isinstance(s.target, ast.Name):
                cur = self.env.get(s.target.id) or self.unk("name")
                val = self.binop(s.op, cur, self.eval(s.value), s)
                self.assign(s.target, val, s)
            else:
                self.eval(s.value)
                self.unk("augassign-target")
        elif t is ast.AnnAssign:
            if s.value is not None:
                self.assign(s.target, self.eval(s.value), s)
        elif t is ast.Expr:
            self.eval(s.value)
        elif t is ast.For:
            self.exec_for(s)
        elif t is ast.While:
            self.exec_while(s)
        elif t is ast.If:
            self.exec_if(s)
        elif t is ast.Return:
            self.returned = self.eval(s.value) if s.value is not None else V("const")
        elif t in (ast.Pass, ast.Assert, ast.Import, ast.ImportFrom):
            pass
        elif t in (ast.Break, ast.Continue):
            self.unk("break-continue")
        else:
            self.unk("stmt-" + t.__name__.lower())

    def assign(self, target: ast.expr, val: V, stmt: ast.AST) -> None:
        if isinstance(target, ast.Name):
            name = target.id
            self.env[name] = val
            if self.recording:
                self.assign_nodes.setdefault(name, []).append(stmt)
                if val.kind == "bool" and val.shape:
                    self.masks.append((name, val, stmt))
                if self.record_hovers:
                    self.hover(target, name, val)
            if val.kind == "int" and val.poly is not None and len(val.poly.terms) == 1:
                (m, c), = val.poly.terms.items()
                if c == 1 and len(m) == 1 and m[0] in ("pid0", "pid1", "pid2"):
                    self.pid_vars[name] = int(m[0][3:])
            self._bind_name(name, val)
        elif isinstance(target, (ast.Tuple, ast.List)):
            items = val.const if val.kind == "tuple" else None
            for i, elt in enumerate(target.elts):
                if items is not None and i < len(items):
                    self.assign(elt, items[i], stmt)
                elif val.kind == "unknown":
                    self.assign(elt, val, stmt)  # already counted where it arose
                else:
                    self.assign(elt, self.unk("tuple-unpack"), stmt)
        else:
            self.unk("assign-target")

    def _bind_name(self, name: str, val: V) -> None:
        """Record ``name`` as the display name of the atom a scalar ``val`` is exactly (an
        opaque term, a value read from memory, a program id, a loop counter), so formulas
        print ``group_id`` for ``pid // num_pid_in_group`` (render.atom_names).

        The first binding wins and a display name belongs to one atom: rebinding ``x`` later
        neither renames the old atom nor names the new one ``x`` too. Not recorded: during
        a loop's probe pass (its values are not the loop's); inside an ``if`` whose condition
        is undecided (the name holds that atom on one path only; the merged value is named
        after the ``if``) or an unrolled static loop (one name, a value per iteration); for
        a parameter's name; and for a helper's locals (``depth > 0``): inlining does not
        rename them, their names are not in the kernel's text, and a helper inlined twice
        binds one local to two values. A helper's ``pid = tl.program_id(0)`` still names the
        program id (it means the same in every scope) unless the kernel uses that name."""
        if not self.recording or self._names_off or val.shape or val.poly is None or \
                val.kind not in ("int", "data"):
            return
        (m, c), = list(val.poly.terms.items())[:1] or [((), 0)]
        if len(val.poly.terms) != 1 or c != 1 or len(m) != 1:
            self._bind_sum(name, val)
            return
        atom = m[0]
        is_pid = atom in ("pid0", "pid1", "pid2")
        if not (is_pid or atom[0] in "{@"):
            return
        if atom in self.names or name in self.params or name in self.names.values() or \
                name in self.named_sums:
            return
        if self.depth:
            from .render import kernel_names
            if not is_pid or name in kernel_names(self):
                return
        self.names[atom] = name

    def _bind_sum(self, name: str, val: V) -> None:
        """Record a scalar bound once in the kernel's text to a formula (``pid_m = first_pid_m
        + ...``, ``start = pid * BLOCK``) in ``named_sums``: render prints ``BLOCK_M*pid_m``
        where a formula holds that whole formula times a factor. Names bound more than once
        (``off += BLOCK``) are left out: which binding a reader would take is unclear."""
        p = val.poly
        if val.kind != "int" or self.depth or p.is_const() or name in self.named_sums or \
                name in self.params or name in self.names.values() or \
                any(a[0] in "%?" or a.endswith("'") for a in p.atoms()):
            return
        if _bound_once(self.kernel).get(name) != 1:
            return
        self.named_sums[name] = p

    def exec_if(self, s: ast.If) -> None:
        cond = self.eval(s.test)
        truth = self.truth(cond)
        if truth is True:
            self.exec_block(s.body)
            return
        if truth is False:
            self.exec_block(s.orelse)
            return
        c = cond.mask if cond.kind == "bool" and not cond.shape else None
        before = dict(self.env)
        depth = len(self.guards)
        if c is not None:
            self.guards.append(c)
        self._names_off += 1
        try:
            self.exec_block(s.body)
            del self.guards[depth:]
            ret_a, self.returned = self.returned, None
            after_then = self.env
            self.env = dict(before)
            if c is not None:
                self.guards.append(b_not(c))
            self.exec_block(s.orelse)
            del self.guards[depth:]
        finally:
            self._names_off -= 1
        ret_b = self.returned
        after_else = self.env
        self.returned = None if (ret_a is None or ret_b is None) else self.merge(ret_a, ret_b)
        if (ret_a is None) != (ret_b is None):
            # an early return in one branch: continue with the other branch's state, under
            # the condition of that branch for the rest of the function
            self.env = after_else if ret_a is not None else after_then
            if c is not None:
                self.guards.append(b_not(c) if ret_a is not None else c)
            return
        merged = {}
        for k in set(after_then) | set(after_else):
            a, b = after_then.get(k), after_else.get(k)
            if a is None or b is None:
                merged[k] = a or b
            else:
                merged[k] = self.merge(a, b)
        self.env = merged
        for k, v in merged.items():
            if v is not before.get(k):
                self._bind_name(k, v)  # `(a if … else b)` reads as the name both branches set

    def truth(self, v: V) -> bool | None:
        if v.kind == "const":
            if v.why == "constexpr":
                return None
            return bool(v.const)
        if v.kind == "bool" and not v.shape and v.mask is not None and v.mask[0] == "const":
            return v.mask[1]
        if v.kind == "int" and not v.shape:
            if v.poly is not None:
                c = v.poly.const_value()
                if c is None:
                    # a constexpr with a value decides; unknown flags stay open
                    if v.poly.atoms() <= set(self.consts):
                        c = self.concrete(v.poly)
                if c is not None:
                    return bool(c)
        if v.kind == "bool" and not v.shape and v.mask is not None:
            ev = self._eval_const_mask(v.mask)
            if ev is not None:
                return ev
        return None

    def _eval_const_mask(self, e) -> bool | None:
        from .values import b_eval
        atoms = set()
        from .values import b_polys
        for p in b_polys(e):
            atoms |= p.atoms()
        if not atoms <= set(self.consts):
            return None
        return b_eval(e, lambda p: self.concrete(p))

    def merge(self, a: V, b: V) -> V:
        if a is b:
            return a
        if a.kind != b.kind or a.shape != b.shape:
            if a.kind in ("const", "int") and b.kind in ("const", "int") and a.shape == b.shape:
                return self.unk("if-merge", a.shape)
            return self.unk("if-merge", a.shape if a.shape == b.shape else ())
        same = (a.poly == b.poly and a.base == b.base and a.mask == b.mask
                and a.const == b.const)
        tags = {d: t for d, t in a.tags.items() if b.tags.get(d) == t}
        pads = a.pads + tuple(p for p in b.pads if p not in a.pads)
        if same:
            return a.copy(tags=tags, pads=pads, risks=a.risks + b.risks, loads=a.loads | b.loads,
                          dtype=a.dtype if a.dtype == b.dtype else None,
                          width=max(a.width, b.width))
        if a.kind in ("int", "ptr") and a.poly is not None and b.poly is not None and \
                a.base == b.base:
            # one of two values, chosen by a condition the analysis does not decide: an
            # opaque term (checks that need its value skip it; it is not an unknown)
            sel = self.terms.make("where", (a.poly, b.poly),
                                  f"either({fmt(a.poly)}, {fmt(b.poly)})")
            return a.copy(poly=sel, risks=a.risks + b.risks, loads=a.loads | b.loads,
                          width=max(a.width, b.width), tags=tags)
        if a.kind == "data":
            return V("data", a.shape, dtype=a.dtype if a.dtype == b.dtype else None, tags=tags,
                     pads=pads, loads=a.loads | b.loads, risks=a.risks + b.risks)
        if a.kind == "bool" and a.mask is not None and b.mask is not None:
            # masks built in two branches: both are sound over-approximations of neither
            return self.unk("if-merge", a.shape)
        return self.unk("if-merge", a.shape)

    # ------------------------------------------------------------------ loops
    def _range_args(self, it: ast.expr):
        """(lo, hi, step, kind) polys for range/tl.range/tl.static_range, else None."""
        if not isinstance(it, ast.Call):
            return None
        name = self.callee_name(it.func)
        if name not in ("range", "tl.range", "tl.static_range"):
            return None
        args = [self.eval(a) for a in it.args]
        for kw in it.keywords:
            if kw.arg in ("num_stages", "loop_unroll_factor", "flatten", "warp_specialize",
                          "disallow_acc_multi_buffer", "disable_licm"):
                continue
            return None
        polys = [a.poly if a.kind in ("int", "data") and not a.shape else None for a in args]
        if any(p is None for p in polys) or not 1 <= len(polys) <= 3:
            return None
        if len(polys) == 1:
            lo, hi, step = ZERO, polys[0], ONE
        elif len(polys) == 2:
            lo, hi, step = polys[0], polys[1], ONE
        else:
            lo, hi, step = polys
        width = max(a.width for a in args)
        return lo, hi, step, ("static" if name == "tl.static_range" else "range"), width

    def exec_for(self, s: ast.For) -> None:
        rng = self._range_args(s.iter)
        if rng is None or not isinstance(s.target, ast.Name):
            self.unk("for-iterable")
            self._havoc_loop(s)
            return
        lo, hi, step, kind, width = rng
        var = s.target.id
        clo, chi, cstep = self.concrete(lo), self.concrete(hi), self.concrete(step)
        if kind == "static" and None not in (clo, chi, cstep) and cstep != 0:
            values = list(range(clo, chi, cstep))
            if len(values) <= self.config.max_unroll:
                self._names_off += 1  # one name, a value per iteration (see _bind_name)
                try:
                    for v in values:
                        self.env[var] = int_const(v)
                        self.exec_block(s.body)
                finally:
                    self._names_off -= 1
                self.exec_block(s.orelse)
                return
        atom = "@" + var
        while any(l.atom == atom for l in self.loops):
            atom += "'"
        loop = Loop(var, atom, lo, hi, step, s.lineno - 1, kind)
        ivar = V("int", poly=lo + Poly.atom(atom) * step, width=width)
        self.names.setdefault(atom, var + "_iter" if (lo != ZERO or step != ONE) else var)
        self._symbolic_loop(s, loop, {var: ivar}, None)

    def exec_while(self, s: ast.While) -> None:
        atom = self.fresh("@while")
        loop = Loop("while", atom, ZERO, None, ONE, s.lineno - 1, "while")
        self._symbolic_loop(s, loop, {}, s.test)

    def _havoc_loop(self, s) -> None:
        for name in _loop_facts(s)[0]:
            if name in self.env:
                self.env[name] = self.unk("loop-carried", self.env[name].shape)
        if isinstance(getattr(s, "target", None), ast.Name):
            self.env[s.target.id] = self.unk("loop-var")
        saved = self.recording
        self.exec_block(s.body)
        self.recording = saved

    def _symbolic_loop(self, s, loop: Loop, binds: dict, test: ast.expr | None) -> None:
        assigned, killed, reads = _loop_facts(s)
        carried = [n for n in assigned if n in self.env and n not in killed]
        init = {n: self.env[n] for n in carried}
        if not any(v.kind in ("int", "ptr", "blockptr") or v.tags for v in init.values()):
            # nothing whose step or tags the probe would find: one pass is enough
            self._single_pass_loop(s, loop, binds, test, carried, reads, init)
            return
        # Probe pass: carried ints/pointers get a symbolic phi; the difference after one
        # iteration is their per-iteration step when it does not depend on phi.
        saved_rec, saved_hov = self.recording, self.record_hovers
        self.recording = False
        self.record_hovers = False
        saved_state = (len(self.accesses), len(self.obligations), len(self.carried),
                       len(self.wheres), len(self.masks))
        phis: dict[str, str] = {}
        for n in carried:
            v = init[n]
            if v.kind in ("int", "ptr") and v.poly is not None:
                phis[n] = self.fresh("?phi")
                self.env[n] = v.copy(poly=v.poly + Poly.atom(phis[n]))
        self.env.update(binds)
        self.loops.append(loop)
        depth = len(self.guards)
        try:
            if test is not None:
                self.eval(test)
            self.exec_block(s.body)
        finally:
            del self.guards[depth:]
            self.loops.pop()
            self.recording, self.record_hovers = saved_rec, saved_hov
            del self.accesses[saved_state[0]:]
            del self.obligations[saved_state[1]:]
            del self.carried[saved_state[2]:]
            del self.wheres[saved_state[3]:]
            del self.masks[saved_state[4]:]
        self.returned = None
        probe = {n: self.env.get(n) for n in carried}
        entry: dict[str, V] = {}
        for n in carried:
            a, b = init[n], probe[n]
            if b is None:
                entry[n] = a
            elif n in phis:
                if b.kind == a.kind and b.poly is not None and b.base == a.base and \
                        b.shape == a.shape:
                    delta = b.poly - (a.poly + Poly.atom(phis[n]))
                    if not any(x.startswith("?phi") or x == loop.atom
                               for x in self.terms.deep_atoms(delta)):
                        risks = a.risks + tuple(r for r in b.risks if r not in a.risks)
                        entry[n] = a.copy(poly=a.poly + Poly.atom(loop.atom) * delta,
                                          risks=risks, width=max(a.width, b.width))
                        continue
                entry[n] = self.unk("loop-carried", a.shape)
            elif a.kind == "data" or b.kind == "data":
                if a.shape == b.shape and b.kind in ("data", "int", "const") and \
                        a.kind in ("data", "int", "const"):
                    tags = dict(b.tags) if not a.tags else {
                        d: t for d, t in a.tags.items() if b.tags.get(d) == t}
                    if a.kind == "data" and a.tags and not b.tags:
                        tags = {}
                    entry[n] = V("data", a.shape, dtype=a.dtype or b.dtype, tags=tags,
                                 pads=(), loads=a.loads | b.loads,
                                 risks=a.risks, extra={"carried": True})
                else:
                    entry[n] = self.unk("loop-carried", a.shape)
            elif a.kind == b.kind and a.poly == b.poly and a.base == b.base and a.mask == b.mask:
                entry[n] = a
            elif a.kind == "const" and b.kind == "const" and a.const == b.const:
                entry[n] = a
            else:
                entry[n] = self.unk("loop-carried", a.shape)
        # Real pass.
        for n in carried:
            self.env[n] = entry[n]
        self.env.update(binds)
        self.loops.append(loop)
        cond = None
        depth = len(self.guards)
        if test is not None:
            c = self.eval(test)
            cond = c.mask if c.kind == "bool" and not c.shape else None
            if cond is not None:
                self.guards.append(cond)
        try:
            self.exec_block(s.body)
        finally:
            del self.guards[depth:]
            self.loops.pop()
        self.returned = None
        exits = {n: self.env.get(n) for n in carried}
        for n in carried:
            ex = exits[n]
            if ex is not None and self.recording:
                upd = None
                for node in reversed(self.assign_nodes.get(n, [])):
                    if s.lineno <= node.lineno <= (s.end_lineno or node.lineno):
                        upd = node
                        break
                self.carried.append(Carried(n, init[n], ex, s, s.lineno - 1, upd, n in reads))
        # After the loop: induction values at an unknown trip count; data values as exit.
        for n in carried:
            e = entry[n]
            if e.kind in ("int", "ptr") and e.poly is not None and n in phis:
                self.env[n] = e.copy(poly=self.terms.subst(
                    e.poly, {loop.atom: Poly.atom(self.fresh("?trips"))}))
            elif exits[n] is not None:
                self.env[n] = exits[n]
        if hasattr(s, "orelse") and s.orelse:
            self.exec_block(s.orelse)

    def _single_pass_loop(self, s, loop: Loop, binds: dict, test, carried, reads,
                          init: dict) -> None:
        """A loop whose carried values are all data without tags (accumulators): they enter
        as carried tiles of their initial dtype and shape; one recorded pass."""
        for n in carried:
            a = init[n]
            if a.kind == "unknown":
                continue
            if a.kind in ("data", "const", "int"):
                self.env[n] = V("data", a.shape, dtype=a.dtype, extra={"carried": True},
                                loads=a.loads) if a.kind != "int" or a.poly is None else a
            else:
                self.env[n] = self.unk("loop-carried", a.shape)
        self.env.update(binds)
        self.loops.append(loop)
        cond = None
        depth = len(self.guards)
        if test is not None:
            c = self.eval(test)
            cond = c.mask if c.kind == "bool" and not c.shape else None
            if cond is not None:
                self.guards.append(cond)
        try:
            self.exec_block(s.body)
        finally:
            del self.guards[depth:]
            self.loops.pop()
        self.returned = None
        for n in carried:
            ex = self.env.get(n)
            if ex is not None and self.recording:
                upd = None
                for node in reversed(self.assign_nodes.get(n, [])):
                    if s.lineno <= node.lineno <= (s.end_lineno or node.lineno):
                        upd = node
                        break
                self.carried.append(Carried(n, init[n], ex, s, s.lineno - 1, upd, n in reads))
        if hasattr(s, "orelse") and s.orelse:
            self.exec_block(s.orelse)

    # ------------------------------------------------------------------ asserts (KS204)
    def flush_asserts(self, line: int) -> None:
        keep = []
        for d in self._pending_asserts:
            if d.line < line and d.kind == "tag":
                self.apply_user_tag(d)
            elif d.line < line:
                if self.recording and d.exprs and d.exprs[0].tree is not None:
                    self.obligations.append(Obligation(
                        "assert", d.exprs[0].tree, d.span, (), list(self.loops),
                        list(self.guards), {"directive": d, "env": dict(self.env)}))
            else:
                keep.append(d)
        self._pending_asserts = keep

    def apply_user_tag(self, d) -> None:
        """``#@ tag v.dim = EXPR``: v's elements carry coordinate ``dim`` = EXPR. A 1-D EXPR
        tags the axis of ``v`` of the same length (the first such axis not yet tagged)."""
        if len(d.exprs) != 2 or d.exprs[0].tree is None or d.exprs[1].tree is None:
            return
        target = d.exprs[0].tree
        if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)):
            return
        v = self.env.get(target.value.id)
        if v is None or v.kind not in ("data", "int"):
            return
        e = self.eval(d.exprs[1].tree)
        if e.kind != "int" or e.poly is None:
            return
        coord = e.poly
        if e.shape and e.shape != v.shape:
            if len(e.shape) != 1:
                return
            used = {k for t in v.tags.values() for k in self.terms.index_vars(t.coord)}
            axes = [k for k, n in enumerate(v.shape) if n == e.shape[0]]
            free = [k for k in axes if k not in used] or axes
            if not free:
                return
            coord = self.terms.subst(coord, {"%0": Poly.atom(f"%{free[0]}")}) if free[0] \
                else coord
        tags = dict(v.tags)
        tags[target.attr] = Tag("tag", coord, d.line)
        self.env[target.value.id] = v.copy(tags=tags)

    # ------------------------------------------------------------------ expressions
    def callee_name(self, f: ast.expr) -> str | None:
        parts = []
        while isinstance(f, ast.Attribute):
            parts.append(f.attr)
            f = f.value
        if not isinstance(f, ast.Name):
            return None
        if f.id in self.env:
            return None
        parts.append(f.id)
        dotted = ".".join(reversed(parts))
        head, _, rest = dotted.partition(".")
        full = self.parsed.imports.get(head, head if head in ("tl", "triton", "math") else head)
        if head == "tl" and "tl" not in self.parsed.imports:
            full = "triton.language"
        full = f"{full}.{rest}" if rest else full
        if full.startswith("triton.language"):
            return "tl." + full.rsplit(".", 1)[-1]
        if full.startswith("triton.") and full.rsplit(".", 1)[-1] in ("cdiv", "next_power_of_2"):
            return "tl." + full.rsplit(".", 1)[-1]
        if full.startswith("math."):
            return full
        return full

    def eval(self, node: ast.expr) -> V:
        self.tick()
        t = type(node)
        if t is ast.Constant:
            c = node.value
            if isinstance(c, bool) or c is None or isinstance(c, (str, float)):
                return V("const", const=c)
            if isinstance(c, int):
                return V("int", poly=Poly.const(c), width=32 if -2**31 <= c < 2**31 else 64)
            return self.unk("constant")
        if t is ast.Name:
            v = self.env.get(node.id)
            if v is not None:
                return v
            return self.global_name(node.id)
        if t is ast.BinOp:
            return self.binop(node.op, self.eval(node.left), self.eval(node.right), node)
        if t is ast.UnaryOp:
            return self.unary(node)
        if t is ast.Compare:
            left = self.eval(node.left)
            out = None
            for op, right_node in zip(node.ops, node.comparators):
                right = self.eval(right_node)
                r = self.compare(op, left, right)
                out = r if out is None else self.logic("and", out, r, node)
                left = right
            return out
        if t is ast.BoolOp:
            vals = [self.eval(v) for v in node.values]
            out = vals[0]
            for v in vals[1:]:
                out = self.logic("and" if isinstance(node.op, ast.And) else "or", out, v, node)
            return out
        if t is ast.Call:
            return self.call(node)
        if t is ast.Attribute:
            return self.attribute(node)
        if t is ast.Subscript:
            return self.subscript(node)
        if t in (ast.Tuple, ast.List):
            return V("tuple", const=[self.eval(e) for e in node.elts])
        if t is ast.IfExp:
            c = self.eval(node.test)
            tr = self.truth(c)
            if tr is True:
                return self.eval(node.body)
            if tr is False:
                return self.eval(node.orelse)
            return self.merge(self.eval(node.body), self.eval(node.orelse))
        return self.unk("expr-" + t.__name__.lower())

    def global_name(self, name: str) -> V:
        if name in self.helpers:
            return V("func", const=self.helpers[name])
        if name in ("tl", "triton", "math") or name in self.parsed.imports:
            return V("module", const=self.parsed.imports.get(name, name))
        if name in ("float", "int", "min", "max", "range", "len", "abs", "print", "bool",
                    "cdiv"):
            return V("module", const=name)
        return self.unk("global-name")

    def attribute(self, node: ast.Attribute) -> V:
        dotted = self.callee_name(node)
        if dotted is not None:
            dt = _dtype_of(dotted) if dotted.startswith("tl.") else None
            if dt:
                return V("dtype", const=dt)
            if dotted in ("math.inf",):
                return V("const", const=math.inf)
            if dotted in ("math.pi", "math.e"):
                return V("const", const=getattr(math, dotted[5:]))
            if dotted.startswith("math.log2") or dotted.startswith("math.log"):
                return V("module", const=dotted)
            return V("module", const=dotted)
        base = self.eval(node.value)
        a = node.attr
        if a == "dtype":
            if base.kind == "ptr":
                return V("dtype", const=None, extra={"ptr": base.base})
            return V("dtype", const=base.dtype)
        if a in ("element_ty",):
            return V("dtype", const=None)
        if a == "T" and base.shape:
            return self.permute(base, (1, 0))
        if a == "shape" and base.shape:
            return V("tuple", const=[int_const(n) for n in base.shape])
        if base.kind in ("desc", "ptr", "data", "int", "blockptr", "dtype", "const"):
            return V("method", const=(a, base))
        return self.unk("attribute")

    # ------------------------------------------------------------------ shapes
    def bshape(self, *shapes: tuple) -> tuple | None:
        nd = max(len(s) for s in shapes)
        out = []
        for k in range(nd):
            dims = {s[k - (nd - len(s))] for s in shapes if k - (nd - len(s)) >= 0}
            dims.discard(1)
            if len(dims) > 1:
                return None
            out.append(dims.pop() if dims else 1)
        return tuple(out)

    def align(self, v: V, shape: tuple) -> V:
        """Broadcast ``v`` to ``shape`` (renaming index variables)."""
        if v.shape == shape or not v.shape:
            return v
        pad = len(shape) - len(v.shape)
        mapping: dict[str, Poly] = {}
        for k, n in enumerate(v.shape):
            if n == 1 and shape[k + pad] != 1:
                mapping[f"%{k}"] = ZERO
            elif pad:
                mapping[f"%{k}"] = Poly.atom(f"%{k + pad}")
        return self.reindex(v, mapping, shape)

    def reindex(self, v: V, mapping: dict[str, Poly], shape: tuple) -> V:
        if not mapping:
            return v.copy(shape=shape)
        sub = lambda p: self.terms.subst(p, mapping)
        return v.copy(
            shape=shape,
            poly=sub(v.poly) if v.poly is not None else None,
            mask=b_map(v.mask, sub) if v.mask is not None else None,
            tags={d: Tag(t.tensor, sub(t.coord), t.line) for d, t in v.tags.items()},
            pads=tuple(Pad(p.load_id, p.value, b_map(p.mask, sub), p.line, p.other_src, p.steps)
                       for p in v.pads),
        )

    def permute(self, v: V, order: tuple) -> V:
        if len(order) != len(v.shape):
            return self.unk("permute", v.shape)
        mapping = {f"%{old}": Poly.atom(f"%{new}") for new, old in enumerate(order)}
        shape = tuple(v.shape[o] for o in order)
        return self.reindex(v, mapping, shape)

    def subscript(self, node: ast.Subscript) -> V:
        if self.annot_mode and isinstance(node.value, ast.Name) and \
                node.value.id in self.decl_names:
            return self.tensor_read(self.decl_names[node.value.id], node.slice)
        base = self.eval(node.value)
        sl = node.slice
        if base.kind == "tuple":
            idx = self.concrete(self.eval(sl))
            if idx is not None and -len(base.const) <= idx < len(base.const):
                return base.const[idx]
            return self.unk("tuple-index")
        items = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        if base.kind == "unknown":
            return base
        shape = list(base.shape)
        new_shape: list[int] = []
        mapping: dict[str, Poly] = {}
        k = 0
        for it in items:
            if isinstance(it, ast.Constant) and it.value is None:
                new_shape.append(1)
            elif isinstance(it, ast.Slice) and it.lower is None and it.upper is None \
                    and it.step is None:
                if k >= len(shape):
                    return self.unk("subscript", ())
                mapping[f"%{k}"] = Poly.atom(f"%{len(new_shape)}")
                new_shape.append(shape[k])
                k += 1
            else:
                return self.unk("subscript")
        while k < len(shape):  # trailing dims implied
            mapping[f"%{k}"] = Poly.atom(f"%{len(new_shape)}")
            new_shape.append(shape[k])
            k += 1
        mapping = {a: p for a, p in mapping.items() if p != Poly.atom(a)}
        return self.reindex(base, mapping, tuple(new_shape))

    # ------------------------------------------------------------------ arithmetic
    def unary(self, node: ast.UnaryOp) -> V:
        v = self.eval(node.operand)
        op = node.op
        if isinstance(op, ast.USub):
            if v.kind == "const" and isinstance(v.const, (int, float)) and not isinstance(
                    v.const, bool):
                return V("const", const=-v.const)
            if v.kind in ("int", "data") and v.poly is not None:
                return v.copy(poly=-v.poly, pads=self._pads_unary(v, "neg"))
            if v.kind == "data":
                return v.copy(poly=None, pads=self._pads_unary(v, "neg"))
            return self.unk("unary", v.shape)
        if isinstance(op, ast.UAdd):
            return v
        if isinstance(op, (ast.Not, ast.Invert)):
            if v.kind == "bool" and v.mask is not None:
                return v.copy(mask=b_not(v.mask))
            if v.kind == "const" and isinstance(op, ast.Not):
                if v.why == "constexpr":
                    return self.unk("constexpr-flag")
                return V("const", const=not v.const)
            if v.kind == "int" and v.poly is not None and v.poly.is_const() and \
                    isinstance(op, ast.Not):
                return V("const", const=not v.poly.const_value())
            if v.kind == "int" and not v.shape and isinstance(op, ast.Not):
                return V("bool", mask=cmp("==", v.poly, ZERO)) if v.poly is not None else \
                    self.unk("unary")
            return V("data", v.shape) if v.kind == "data" else self.unk("unary", v.shape)
        return self.unk("unary", v.shape)

    def _pads_unary(self, v: V, fn: str) -> tuple:
        return tuple(Pad(p.load_id, pad_unary(fn, p.value), p.mask, p.line, p.other_src,
                         p.steps) for p in v.pads)

    def as_numeric(self, v: V) -> V:
        """Python constants (float/bool/int) become values usable in tile arithmetic."""
        if v.kind == "const":
            c = v.const
            if isinstance(c, bool):
                return V("int", poly=Poly.const(int(c)))
            if isinstance(c, float):
                return V("data", const=c, dtype="fp32")
            if c is None and v.why == "constexpr":
                return self.unk("constexpr-value")
        return v

    def binop(self, op: ast.operator, a: V, b: V, node: ast.AST) -> V:
        same_operand = a is b
        a, b = self.as_numeric(a), self.as_numeric(b)
        if a.kind in ("unknown", "const", "module", "tuple", "dtype", "func", "method") or \
                b.kind in ("unknown", "const", "module", "tuple", "dtype", "func", "method"):
            if a.kind == "tuple" and b.kind == "tuple" and isinstance(op, ast.Add):
                return V("tuple", const=a.const + b.const)
            shape = a.shape or b.shape
            if a.kind == "unknown" or b.kind == "unknown":
                return unknown(a.why or b.why or "operand", shape)
            return self.unk("binop-operand", shape)
        shape = self.bshape(a.shape, b.shape)
        if shape is None:
            return self.unk("broadcast", a.shape)
        full = (bool(a.shape) and a.shape == shape, bool(b.shape) and b.shape == shape)
        a, b = self.align(a, shape), self.align(b, shape)
        o = type(op)
        if a.kind == "bool" and b.kind == "bool" and o in (ast.BitAnd, ast.BitOr, ast.BitXor):
            name = {ast.BitAnd: "and", ast.BitOr: "or", ast.BitXor: "xor"}[o]
            return self.logic(name, a, b, node)
        if o is ast.Mult and (a.kind == "bool") != (b.kind == "bool"):
            # x * mask: lanes where the mask is false become 0, whatever x held there
            m, other = (a, b) if a.kind == "bool" else (b, a)
            if m.mask is not None and other.pads:
                zeroed = tuple(Pad(p.load_id, 0.0, p.mask, p.line, p.other_src, p.steps)
                               if _implies_mask(m.mask, p.mask) else p for p in other.pads)
                other = other.copy(pads=zeroed)
                a, b = (m, other) if a.kind == "bool" else (other, m)
        if a.kind == "bool":
            a = self.bool_to_int(a)
        if b.kind == "bool":
            b = self.bool_to_int(b)
        if a.kind == "blockptr" or b.kind == "blockptr" or a.kind == "desc" or b.kind == "desc":
            return self.unk("blockptr-arith", shape)
        if a.kind == "ptr" or b.kind == "ptr":
            return self.ptr_arith(o, a, b, shape, node)
        width = max(a.width, b.width)
        is_int = a.kind == "int" and b.kind == "int"
        kind = "int" if is_int else "data"
        dtype = self.promote(a, b)
        tags = self.mix_tags(a, b, node, shape)
        pads = self.combine_pads(o, a, b, full)
        risks = a.risks + tuple(r for r in b.risks if r not in a.risks)
        loads = a.loads | b.loads
        poly = None
        pa, pb = a.poly, b.poly
        if pa is not None and pb is not None:
            if o is ast.Add:
                poly = pa + pb
            elif o is ast.Sub:
                poly = pa - pb
            elif o is ast.Mult:
                poly = pa * pb
                if is_int or (a.poly is not None and b.poly is not None):
                    r = self.product_risk(a, b, poly, node)
                    if r is not None:
                        risks = risks + (r,)
            elif o is ast.FloorDiv and is_int or (o is ast.Div and False):
                poly = self.divide(pa, pb)
            elif o is ast.Mod and is_int:
                poly = self.modulo(pa, pb)
            # Shift and power folding is bounded (_MAX_FOLD_BITS): `1 << 10**9` or
            # `2 ** 2 ** 2 ** 2 ** 2 ** 2` in a kernel otherwise took minutes and gigabytes.
            elif o is ast.LShift and is_int and pb.is_const():
                poly = pa * (2 ** pb.const_value()) \
                    if 0 <= pb.const_value() <= _MAX_FOLD_BITS else None
            elif o is ast.RShift and is_int and pb.is_const():
                poly = self.divide(pa, Poly.const(2 ** pb.const_value())) \
                    if 0 <= pb.const_value() <= _MAX_FOLD_BITS else None
            elif o is ast.Pow and pa.is_const() and pb.is_const() and pb.const_value() >= 0 \
                    and abs(pa.const_value()).bit_length() * pb.const_value() <= _MAX_FOLD_BITS:
                poly = Poly.const(pa.const_value() ** pb.const_value())
            elif is_int and o in (ast.BitAnd, ast.BitOr, ast.BitXor):
                if pa.is_const() and pb.is_const():
                    x, y = pa.const_value(), pb.const_value()
                    poly = Poly.const({ast.BitAnd: x & y, ast.BitOr: x | y, ast.BitXor: x ^ y}[o])
                else:
                    poly = self.terms.make("bits", (pa, pb, _opname(o)),
                                           f"{fmt(pa)} {_opname(o)} {fmt(pb)}")
        if o is ast.Div:
            kind = "data"
            poly = None
            if is_int and pa is not None and pa.is_const() and pb is not None and pb.is_const() \
                    and pb.const_value():
                return V("const", const=pa.const_value() / pb.const_value())
        if is_int and poly is None:
            return V("data", shape, dtype=dtype, tags=tags, pads=pads, loads=loads)
        if kind == "data" and o not in (ast.Add, ast.Sub, ast.Mult):
            poly = poly if o in (ast.FloorDiv, ast.Mod) else None
        if a.const is not None and b.const is not None and kind == "data" and \
                isinstance(a.const, float) and isinstance(b.const, float):
            try:
                c = {ast.Add: a.const + b.const, ast.Sub: a.const - b.const,
                     ast.Mult: a.const * b.const}.get(o)
            except Exception:
                c = None
            return V("data", shape, dtype=dtype, const=c)
        out = V(kind, shape, poly=poly, width=width, dtype=dtype, tags=tags, pads=pads,
                risks=risks, loads=loads)
        if kind == "data" and ((o in (ast.Add, ast.Mult, ast.Div) and _nn(a) and _nn(b)) or
                               (o is ast.Mult and same_operand)):
            out.extra = {"nonneg": True}
        return out

    def bool_to_int(self, v: V) -> V:
        return V("int", v.shape, poly=None, width=32, dtype="i1", loads=v.loads)

    def divide(self, pa: Poly, pb: Poly) -> Poly:
        cb = self.concrete(pb) if pb.atoms() <= set(self.consts) else pb.const_value()
        if cb == 1:
            return pa
        if pa.is_const() and pb.is_const() and pb.const_value():
            from .values import _tdiv
            return Poly.const(_tdiv(pa.const_value(), pb.const_value()))
        if pb.is_const() and pb.const_value():
            q = pa.exact_div(pb.const_value())
            if q is not None:
                return q
        return self.terms.make("div", (pa, pb))

    def modulo(self, pa: Poly, pb: Poly) -> Poly:
        if pa.is_const() and pb.is_const() and pb.const_value():
            from .values import _tmod
            return Poly.const(_tmod(pa.const_value(), pb.const_value()))
        if pb == ONE:
            return ZERO
        return self.terms.make("mod", (pa, pb))

    def promote(self, a: V, b: V) -> str | None:
        da, db = a.dtype, b.dtype
        if a.kind == "int" and b.kind == "int":
            return "i64" if max(a.width, b.width) == 64 else "i32"
        if a.kind == "data" and a.const is not None and not a.shape and b.kind == "data":
            return db  # python float scalars do not promote a tile
        if b.kind == "data" and b.const is not None and not b.shape and a.kind == "data":
            return da
        if da in FLOAT_ORDER and db in FLOAT_ORDER:
            return da if FLOAT_ORDER[da] >= FLOAT_ORDER[db] else db
        if a.kind == "int" and db in FLOAT_ORDER:
            return db
        if b.kind == "int" and da in FLOAT_ORDER:
            return da
        return None

    def product_risk(self, a: V, b: V, poly: Poly, node: ast.AST) -> Risk | None:
        """An int32 ``a * b`` whose factors are both run-time quantities (program ids, loop
        counters, tile indices, loaded indices, non-constexpr arguments): it scales with the
        tensor size and can pass 2^31 - 1 (checked in checks.py against max-elements)."""
        if max(a.width, b.width) == 64 or not isinstance(node, ast.BinOp):
            return None
        # one factor grows with the grid (program ids), the other is a run-time argument (a
        # stride or a size). A scalar of axis 0 (one program per row) is the classic case;
        # axes 1/2 and tiles (`rows[:, None] * stride`) are checked against a known grid only
        pa = _has_param(a.poly, self.runtime_params)
        pb = _has_param(b.poly, self.runtime_params)
        if not (pa or pb):
            return None
        ga = not a.shape and _grid_scaled(a.poly, self.terms)
        gb = not b.shape and _grid_scaled(b.poly, self.terms)
        needs_grid = False
        if not ((ga and pb) or (gb and pa)):
            ga = _grid_scaled(a.poly, self.terms, ("pid0", "pid1", "pid2"))
            gb = _grid_scaled(b.poly, self.terms, ("pid0", "pid1", "pid2"))
            if not ((ga and pb) or (gb and pa)):
                return None
            needs_grid = True
        pid_name = None
        for side in (node.left, node.right):
            if isinstance(side, ast.Name) and side.id in self.pid_vars:
                pid_name = side.id
        sp = self.span(node)
        shape = a.shape or b.shape
        return Risk(poly, sp.line, sp.col, sp.end_col, _operand_src(self.parsed, node.left),
                    _operand_src(self.parsed, node.right), pid_name, needs_grid, shape)

    def ptr_arith(self, o, a: V, b: V, shape: tuple, node: ast.AST) -> V:
        if o is ast.Add:
            p, q = (a, b) if a.kind == "ptr" else (b, a)
            if q.kind == "ptr":
                return self.unk("ptr-plus-ptr", shape)
            if p.poly is None or q.poly is None:
                return V("ptr", shape, poly=None, base=p.base, risks=p.risks + q.risks)
            return V("ptr", shape, poly=p.poly + q.poly, base=p.base,
                     width=max(p.width, q.width), risks=p.risks + q.risks,
                     tags={}, loads=p.loads | q.loads)
        if o is ast.Sub and a.kind == "ptr" and b.kind != "ptr":
            if a.poly is None or b.poly is None:
                return V("ptr", shape, poly=None, base=a.base)
            return V("ptr", shape, poly=a.poly - b.poly, base=a.base,
                     width=max(a.width, b.width), risks=a.risks + b.risks)
        if o is ast.Sub and a.kind == "ptr" and b.kind == "ptr" and a.base == b.base and \
                a.poly is not None and b.poly is not None:
            return V("int", shape, poly=a.poly - b.poly, width=64)
        return self.unk("ptr-arith", shape)

    def mix_tags(self, a: V, b: V, node: ast.AST, shape: tuple) -> dict:
        if not a.tags:
            return dict(b.tags)
        if not b.tags:
            return dict(a.tags)
        out = dict(a.tags)
        for d, tb in b.tags.items():
            ta = out.get(d)
            if ta is None:
                out[d] = tb
            elif ta.coord != tb.coord:
                if self.recording:
                    self.obligations.append(Obligation(
                        "mix", node, self.span(node), shape, list(self.loops), list(self.guards),
                        {"dim": d, "a": ta, "b": tb}))
                del out[d]
        return out

    def combine_pads(self, o, a: V, b: V, full: tuple = (False, False)) -> tuple:
        """Pads of ``a op b``. A pad meets the other operand's value in the same lanes: the
        other operand's pad when it comes from the same load or a load with the same mask,
        else the operand's ordinary value. ``acc + 0`` / ``t * 1`` with a full-shape tile
        (not a broadcast scalar or row) leaves ordinary values: the pad is absorbed."""
        if not a.pads and not b.pads:
            return ()
        sym = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}.get(o)
        out = []
        a_tile = full[0] or bool(a.extra and a.extra.get("carried"))
        b_tile = full[1] or bool(b.extra and b.extra.get("carried"))
        used_b: set[int] = set()
        for p in a.pads:
            q = next((q for q in b.pads if q.load_id == p.load_id or q.mask == p.mask), None)
            if q is None and b_tile and _absorbed(sym, p.value, pad_left=True):
                continue  # acc + 0: the masked lanes leave the tile's own values
            if q is not None:
                used_b.add(id(q))
                if q.value == UNDEF and p.value != UNDEF:
                    # the undefined lanes come from q's load (no other=): name that one
                    p, q = q, p
            other = q.value if q is not None else self._lane_value(b)
            val = pad_apply(sym, p.value, other) if sym else UNKNOWN
            out.append(Pad(p.load_id, val, p.mask, p.line, p.other_src, p.steps))
        for p in b.pads:
            if id(p) in used_b:
                continue
            if a_tile and _absorbed(sym, p.value, pad_left=False):
                continue
            val = pad_apply(sym, self._lane_value(a), p.value) if sym else UNKNOWN
            out.append(Pad(p.load_id, val, p.mask, p.line, p.other_src, p.steps))
        return tuple(out)

    @classmethod
    def _constant_lane(cls, v: V) -> float | None:
        """The one number every lane of ``v`` holds (a literal, ``float("-inf")``, a constant
        tile), or None when the lanes hold data."""
        if v.kind == "const":
            c = v.const
            return float(c) if isinstance(c, (int, float)) and not isinstance(c, bool) else None
        if v.kind == "data" and v.loads:
            return None
        lane = cls._lane_value(v)
        return lane if isinstance(lane, float) else None

    @staticmethod
    def _lane_value(v: V) -> Any:
        if v.kind == "data" and isinstance(v.const, float):
            return v.const
        if v.kind == "int" and v.poly is not None and v.poly.is_const():
            return float(v.poly.const_value())
        return FINITE

    def compare(self, op: ast.cmpop, a: V, b: V) -> V:
        a, b = self.as_numeric(a), self.as_numeric(b)
        sym = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
               ast.NotEq: "!="}.get(type(op))
        if a.kind == "const" and b.kind == "const" and sym:
            try:
                return V("const", const={"<": a.const < b.const, "<=": a.const <= b.const,
                                         ">": a.const > b.const, ">=": a.const >= b.const,
                                         "==": a.const == b.const, "!=": a.const != b.const}[sym])
            except TypeError:
                return self.unk("compare")
        if isinstance(op, (ast.Is, ast.IsNot)):
            if a.kind == "const" and b.kind == "const":
                same = a.const is b.const
                return V("const", const=same if isinstance(op, ast.Is) else not same)
            return self.unk("compare")
        if a.kind in ("unknown", "const", "module", "tuple", "dtype") or b.kind in (
                "unknown", "const", "module", "tuple", "dtype") or sym is None:
            if a.kind == "dtype" and b.kind == "dtype" and sym in ("==", "!="):
                if a.const is None or b.const is None:
                    return self.unk("dtype-compare")
                return V("const", const=(a.const == b.const) == (sym == "=="))
            return self.unk("compare", a.shape or b.shape)
        shape = self.bshape(a.shape, b.shape)
        if shape is None:
            return self.unk("broadcast", a.shape)
        a, b = self.align(a, shape), self.align(b, shape)
        if a.kind == "ptr" and b.kind == "ptr" and a.base == b.base and a.poly is not None \
                and b.poly is not None:
            return V("bool", shape, mask=cmp(sym, a.poly, b.poly))
        if a.kind in ("int", "data") and b.kind in ("int", "data") and a.poly is not None and \
                b.poly is not None:
            return V("bool", shape, mask=cmp(sym, a.poly, b.poly), loads=a.loads | b.loads)
        return V("bool", shape, mask=("opaque", self.fresh("?cmp")), loads=a.loads | b.loads)

    def logic(self, name: str, a: V, b: V, node: ast.AST) -> V:
        if a.kind == "const" and b.kind == "const" and a.why != "constexpr" and \
                b.why != "constexpr":
            return V("const", const=(a.const and b.const) if name == "and" else
                     (a.const or b.const))
        if a.kind == "const" and a.why != "constexpr":
            a = V("bool", mask=TRUE if a.const else FALSE)
        if b.kind == "const" and b.why != "constexpr":
            b = V("bool", mask=TRUE if b.const else FALSE)
        if a.kind != "bool" or b.kind != "bool" or a.mask is None or b.mask is None:
            shape = self.bshape(a.shape, b.shape) or a.shape
            return self.unk("mask-logic", shape)
        shape = self.bshape(a.shape, b.shape)
        if shape is None:
            return self.unk("broadcast", a.shape)
        a, b = self.align(a, shape), self.align(b, shape)
        if name == "and":
            m = b_and(a.mask, b.mask)
        elif name == "or":
            m = b_or(a.mask, b.mask)
        else:
            m = b_or(b_and(a.mask, b_not(b.mask)), b_and(b_not(a.mask), b.mask))
        return V("bool", shape, mask=m, loads=a.loads | b.loads)

    # ------------------------------------------------------------------ calls
    def call(self, node: ast.Call) -> V:
        if self.annot_mode and isinstance(node.func, ast.Name) and \
                node.func.id not in ("cdiv", "min", "max", "implies") and \
                node.func.id not in self.helpers:
            args = [self.eval(a) for a in node.args]
            if len(args) == 1 and args[0].kind == "int" and args[0].poly is not None:
                return V("int", poly=self.terms.make("uf", (node.func.id, args[0].poly),
                                                     f"{node.func.id}({fmt(args[0].poly)})"),
                         width=64)
            return self.unk("annotation-call")
        name = self.callee_name(node.func)
        if name is None:
            f = self.eval(node.func)
            if f.kind == "method":
                return self.method(node, f.const[0], f.const[1])
            if f.kind == "func":
                return self.inline(node, f.const)
            if f.kind == "module" and isinstance(f.const, str):
                name = f.const
            else:
                for a in node.args:
                    self.eval(a)
                return self.unk("call")
        if name in self.helpers and not name.startswith("tl."):
            return self.inline(node, self.helpers[name])
        if name.startswith("tl."):
            return self.tl_call(name[3:], node)
        return self.py_call(name, node)

    def args(self, node: ast.Call, names: list[str]) -> dict[str, V | None]:
        out: dict[str, Any] = {}
        for i, a in enumerate(node.args):
            if isinstance(a, ast.Starred):
                return {"__starred__": None}
            if i < len(names):
                out[names[i]] = self.eval(a)
                out["@" + names[i]] = a
        for kw in node.keywords:
            if kw.arg is not None:
                out[kw.arg] = self.eval(kw.value)
                out["@" + kw.arg] = kw.value
        return out

    def py_call(self, name: str, node: ast.Call) -> V:
        if name in ("cdiv", "triton.cdiv"):
            return self.tl_call("cdiv", node)
        if name in self.decl_names and isinstance(node.func, ast.Name):
            return self.unk("call-" + name)
        if name == "float" and node.args:
            v = self.eval(node.args[0])
            if v.kind == "const" and isinstance(v.const, str):
                try:
                    return V("const", const=float(v.const))
                except ValueError:
                    return self.unk("float")
            if v.kind == "const" and isinstance(v.const, (int, float)):
                return V("const", const=float(v.const))
            if v.kind == "int" and v.poly is not None and v.poly.is_const():
                return V("const", const=float(v.poly.const_value()))
            return V("data", v.shape)
        if name in ("int",) and node.args:
            return self.eval(node.args[0])
        if name in ("min", "max") and len(node.args) == 2:
            return self.minmax(name, self.eval(node.args[0]), self.eval(node.args[1]), node)
        if name == "len" and node.args:
            v = self.eval(node.args[0])
            if v.kind == "tuple":
                return int_const(len(v.const))
            return self.unk("len")
        if name == "abs" and node.args:
            v = self.eval(node.args[0])
            return V("data", v.shape, dtype=v.dtype, pads=self._pads_unary(v, "abs"),
                     tags=v.tags, extra={"nonneg": True})
        if name == "print":
            return V("const")
        last = name.rsplit(".", 1)[-1]
        if last in ("program_id", "num_programs") and "." in name:
            # a wrapper module's program id (flag_gems' `tle.program_id` widens to int64)
            v = self.tl_call(last, node)
            return v.copy(width=64) if v.kind == "int" else v
        if last in UNARY_MATH or last in ("maximum", "minimum", "where", "cdiv"):
            # math helpers imported from another module (`from utils import exp2`)
            return self.tl_call(last, node)
        for a in node.args:
            self.eval(a)
        return self.unk("call-" + name.split(".")[-1][:24])

    def minmax(self, name: str, a: V, b: V, node: ast.AST) -> V:
        a, b = self.as_numeric(a), self.as_numeric(b)
        if a.kind == "const" and b.kind == "const":
            try:
                return V("const", const=min(a.const, b.const) if name == "min" else
                         max(a.const, b.const))
            except TypeError:
                return self.unk("minmax")
        if a.kind in ("int", "data") and b.kind in ("int", "data"):
            shape = self.bshape(a.shape, b.shape)
            if shape is None:
                return self.unk("broadcast", a.shape)
            a, b = self.align(a, shape), self.align(b, shape)
            poly = None
            if a.kind == "int" and b.kind == "int" and a.poly is not None and b.poly is not None:
                ca, cb = self.concrete(a.poly), self.concrete(b.poly)
                if ca is not None and cb is not None and a.poly.atoms() <= set(self.consts) \
                        and b.poly.atoms() <= set(self.consts):
                    poly = Poly.const(min(ca, cb) if name == "min" else max(ca, cb))
                else:
                    poly = self.terms.make(name, (a.poly, b.poly))
                return V("int", shape, poly=poly, width=max(a.width, b.width),
                         risks=a.risks + b.risks)
            tags = self.mix_tags(a, b, node, shape)
            ident = -math.inf if name == "max" else math.inf
            pads = []
            for p, other in [(p, b) for p in a.pads] + [(p, a) for p in b.pads]:
                if p.value == ident and other.extra and other.extra.get("carried"):
                    continue  # max(acc, -inf) == acc
                pads.append(Pad(p.load_id, _unknown_unless_undef(p.value), p.mask, p.line,
                                p.other_src))
            pads = tuple(pads)
            nonneg = (name == "max" and (_nn(a) or _nn(b))) or (name == "min" and _nn(a)
                                                                   and _nn(b))
            return V("data", shape, dtype=self.promote(a, b), tags=tags, pads=pads,
                     loads=a.loads | b.loads, extra={"nonneg": True} if nonneg else None)
        return self.unk("minmax", a.shape or b.shape)

    def tl_call(self, fn: str, node: ast.Call) -> V:
        if fn == "program_id":
            a = self.args(node, ["axis"])
            axis = self.concrete(a.get("axis"))
            if axis is None or axis not in (0, 1, 2):
                return self.unk("program_id")
            self.pid_axes.add(axis)
            return V("int", poly=Poly.atom(f"pid{axis}"), width=32, dtype="i32")
        if fn == "num_programs":
            a = self.args(node, ["axis"])
            axis = self.concrete(a.get("axis"))
            if axis is None:
                return self.unk("num_programs")
            name = f"num_programs_{axis}"
            self.runtime_params.add(name)
            return V("int", poly=Poly.atom(name), width=32)
        if fn == "arange":
            a = self.args(node, ["start", "end"])
            lo, hi = self.concrete(a.get("start")), self.concrete(a.get("end"))
            if lo is None or hi is None or hi <= lo:
                return self.unk("arange")
            if hi - lo > 1 << 20:
                raise Budget("tile too large")
            return V("int", (hi - lo,), poly=Poly.const(lo) + Poly.atom("%0"), width=32,
                     dtype="i32")
        if fn in ("zeros", "full", "empty"):
            a = self.args(node, ["shape", "value", "dtype"] if fn == "full" else
                          ["shape", "dtype"])
            shape = self.shape_of(a.get("shape"))
            if shape is None:
                return self.unk(fn)
            dt = a.get("dtype")
            dtype = dt.const if dt is not None and dt.kind == "dtype" else None
            if fn == "full":
                val = a.get("value")
                if val is not None and val.kind == "int" and val.poly is not None and (
                        dtype in INT_DTYPES or dtype is None):
                    return V("int", shape, poly=val.poly, width=64 if dtype == "i64" else 32,
                             dtype=dtype)
                c = val.const if val is not None and val.kind == "const" else None
                return V("data", shape, dtype=dtype, const=c if isinstance(c, float) else None)
            if dtype in INT_DTYPES:
                return V("int", shape, poly=ZERO, width=64 if dtype == "i64" else 32,
                         dtype=dtype)
            return V("data", shape, dtype=dtype, const=0.0)
        if fn in ("zeros_like", "full_like", "empty_like"):
            a = self.args(node, ["input", "value", "dtype"] if fn == "full_like" else
                          ["input", "dtype"])
            x = a.get("input")
            dt = a.get("dtype")
            dtype = dt.const if dt is not None and dt.kind == "dtype" else (x.dtype if x else None)
            return V("data", x.shape if x else (), dtype=dtype)
        if fn == "load":
            return self.do_load(node)
        if fn == "store":
            self.do_store(node)
            return V("const")
        if fn.startswith("atomic_"):
            return self.do_atomic(node, fn)
        if fn == "make_block_ptr":
            return self.make_block_ptr(node)
        if fn == "advance":
            a = self.args(node, ["base", "offsets"])
            bp, offs = a.get("base"), a.get("offsets")
            if bp is None or bp.kind != "blockptr" or offs is None or offs.kind != "tuple":
                return self.unk("advance")
            d = dict(bp.const)
            new = []
            for o, delta in zip(d["offsets"], offs.const):
                if o is None or delta.poly is None:
                    new.append(None)
                else:
                    new.append(o + delta.poly)
            d["offsets"] = new
            d["risks"] = d.get("risks", ()) + tuple(r for x in offs.const for r in x.risks)
            return bp.copy(const=d)
        if fn in ("make_tensor_descriptor", "_experimental_make_tensor_descriptor"):
            return self.make_desc(node)
        if fn == "dot":
            return self.dot(node)
        if fn in REDUCTIONS:
            return self.reduce(fn, node)
        if fn in SCANS:
            a = self.args(node, ["input", "axis"])
            x = a.get("input")
            if x is None or x.kind == "unknown":
                return self.unk(fn)
            return V("data", x.shape, dtype=x.dtype, tags=x.tags if fn != "sort" else {},
                     loads=x.loads)
        if fn == "where":
            return self.where(node)
        if fn in ("maximum", "minimum"):
            a = self.args(node, ["x", "y"])
            if a.get("x") is None or a.get("y") is None:
                return self.unk(fn)
            return self.minmax("max" if fn == "maximum" else "min", a["x"], a["y"], node)
        if fn == "cdiv":
            a = self.args(node, ["x", "div"])
            x, d = a.get("x"), a.get("div")
            if x is None or d is None or x.poly is None or d.poly is None:
                return self.unk("cdiv")
            return V("int", x.shape, poly=self.divide(x.poly + d.poly - ONE, d.poly),
                     width=max(x.width, d.width))
        if fn == "next_power_of_2":
            a = self.args(node, ["n"])
            c = self.concrete(a.get("n"))
            if c is None:
                return self.unk("next_power_of_2")
            return int_const(1 << max(0, (c - 1).bit_length()))
        if fn in HINTS:
            a = self.args(node, ["input", "values"])
            return a.get("input") or self.unk(fn)
        if fn in NOOP_CALLS:
            for x in node.args:
                self.eval(x)
            return V("const")
        if fn in ("trans", "permute"):
            a = self.args(node, ["input", "dims"])
            x = a.get("input")
            if x is None or x.kind == "unknown":
                return self.unk(fn)
            if len(node.args) > 2:
                order = tuple(self.concrete(self.eval(e)) for e in node.args[1:])
            else:
                dims = a.get("dims")
                if dims is not None and dims.kind == "tuple":
                    order = tuple(self.concrete(e) for e in dims.const)
                else:
                    order = tuple(reversed(range(len(x.shape))))
            if None in order:
                return self.unk(fn, x.shape)
            return self.permute(x, order)
        if fn == "expand_dims":
            a = self.args(node, ["input", "axis"])
            x, ax = a.get("input"), self.concrete(a.get("axis"))
            if x is None or ax is None:
                return self.unk(fn)
            ax = ax if ax >= 0 else len(x.shape) + 1 + ax
            mapping = {f"%{k}": Poly.atom(f"%{k + 1}") for k in range(ax, len(x.shape))}
            shape = x.shape[:ax] + (1,) + x.shape[ax:]
            return self.reindex(x, mapping, shape)
        if fn == "broadcast_to":
            a = self.args(node, ["input", "shape"])
            x = a.get("input")
            shape = self.shape_of(a.get("shape")) if "shape" in a else \
                self.shape_of(V("tuple", const=[self.eval(e) for e in node.args[1:]]))
            if x is None or shape is None or self.bshape(x.shape, shape) != shape:
                return self.unk(fn)
            return self.align(x, shape)
        if fn == "broadcast":
            a = self.args(node, ["input", "other"])
            x, y = a.get("input"), a.get("other")
            if x is None or y is None:
                return self.unk(fn)
            shape = self.bshape(x.shape, y.shape)
            if shape is None:
                return self.unk(fn)
            return V("tuple", const=[self.align(x, shape), self.align(y, shape)])
        if fn in ("reshape", "view", "ravel", "join", "split", "interleave", "gather",
                  "histogram", "cat", "flip"):
            for x in node.args:
                self.eval(x)
            return self.unk(fn)
        if fn == "cast":
            a = self.args(node, ["input", "dtype"])
            return self.cast(a.get("input"), a.get("dtype"))
        if fn in ("fma",):
            a = self.args(node, ["x", "y", "z"])
            return V("data", self.bshape(*(v.shape for v in a.values() if isinstance(v, V)))
                     or (), dtype="fp32")
        if fn in UNARY_MATH or fn.startswith("fast_"):
            vals = [self.eval(x) for x in node.args]
            for kw in node.keywords:
                self.eval(kw.value)
            if not vals:
                return self.unk(fn)
            x = vals[0]
            shape = self.bshape(*(v.shape for v in vals)) if vals else ()
            if shape is None:
                return self.unk("broadcast")
            if len(vals) == 1 and x.kind in ("data", "int"):
                return V("data", x.shape, dtype=x.dtype if x.dtype in FLOAT_ORDER else "fp32",
                         tags=x.tags, pads=self._pads_unary(x, fn), loads=x.loads,
                         extra={"nonneg": True} if fn in NONNEG_FUNCS else None)
            tags: dict = {}
            for v in vals:
                if v.kind in ("data", "int"):
                    tags = self.mix_tags(V("data", shape, tags=tags), self.align(v, shape),
                                         node, shape)
            return V("data", shape, dtype="fp32", tags=tags,
                     pads=tuple(Pad(p.load_id, _unknown_unless_undef(p.value), p.mask, p.line,
                                    p.other_src) for v in vals for p in v.pads))
        if fn in ("rand", "randn", "randint", "rand4x", "randint4x", "philox", "umulhi",
                  "inline_asm_elementwise", "clamp"):
            vals = [self.eval(x) for x in node.args]
            shape = self.bshape(*(v.shape for v in vals if v.kind != "tuple")) if vals else ()
            return V("data", shape or ())
        if fn == "static_range" or fn == "range":
            return self.unk("range-value")
        for x in node.args:
            self.eval(x)
        return self.unk("tl." + fn)

    def shape_of(self, v: V | None) -> tuple | None:
        if v is None:
            return None
        if v.kind == "tuple":
            dims = [self.concrete(e) for e in v.const]
        elif v.kind == "int":
            dims = [self.concrete(v)]
        else:
            return None
        if any(d is None or d < 0 for d in dims):
            return None
        if math.prod(dims) > 1 << 22:
            raise Budget("tile too large")
        return tuple(dims)

    def cast(self, x: V | None, dt: V | None) -> V:
        if x is None:
            return self.unk("cast")
        dtype = dt.const if dt is not None and dt.kind == "dtype" else None
        if x.kind in ("int", "data") and dtype in INT_DTYPES and x.poly is not None:
            return x.copy(kind="int" if x.kind == "int" or dtype else x.kind,
                          width=64 if dtype in ("i64", "u64") else
                          (x.width if dtype is None else 32), dtype=dtype)
        if x.kind == "int" and dtype is None:
            return x.copy(dtype=None)
        if x.kind == "bool" and dtype in INT_DTYPES:
            return x.copy(kind="int", poly=None, dtype=dtype)
        if x.kind in ("int", "data", "bool"):
            return V("data", x.shape, dtype=dtype, tags=x.tags, pads=self._pads_unary(x, "cast"),
                     loads=x.loads, risks=x.risks,
                     poly=x.poly if x.kind != "bool" else None,
                     extra={"nonneg": True} if _nn(x) else None)
        if x.kind == "ptr":
            return x
        return x if x.kind == "unknown" else self.unk("cast", x.shape)

    def method(self, node: ast.Call, name: str, obj: V) -> V:
        if name == "to":
            a = self.args(node, ["dtype"])
            return self.cast(obj, a.get("dtype"))
        if obj.kind == "desc" and name in ("load", "store", "atomic_add"):
            return self.desc_access(node, obj, name)
        if name in ("sum", "max", "min", "argmax", "argmin"):
            return self.reduce(name, node, obj)
        if name in ("trans", "permute"):
            return self.permute(obj, tuple(reversed(range(len(obj.shape)))))
        if name in ("exp", "log", "sqrt", "abs"):
            return V("data", obj.shape, dtype=obj.dtype, tags=obj.tags,
                     pads=self._pads_unary(obj, name),
                     extra={"nonneg": True} if name != "log" else None)
        if name in ("reshape", "view"):
            return self.unk(name)
        if name in ("element_ty", "dtype"):
            return V("dtype", const=None)
        return self.unk("method-" + name)

    # ------------------------------------------------------------------ inlining
    def inline(self, node: ast.Call, helper: KernelInfo) -> V:
        if helper.tree is None or self.depth >= self.config.max_inline_depth:
            for a in node.args:
                self.eval(a)
            return self.unk("inline-depth")
        params = helper.params
        bound: dict[str, V] = {}
        for i, a in enumerate(node.args):
            if isinstance(a, ast.Starred) or i >= len(params):
                return self.unk("inline-args")
            bound[params[i].name] = self.eval(a)
        for kw in node.keywords:
            if kw.arg is None:
                return self.unk("inline-args")
            bound[kw.arg] = self.eval(kw.value)
        for p in params:
            if p.name not in bound:
                if p.default is not None and p.default.tree is not None:
                    bound[p.name] = self.eval(p.default.tree)
                else:
                    return self.unk("inline-args")
        saved_env, saved_ret, saved_pending = self.env, self.returned, self._pending_asserts
        saved_guards = len(self.guards)
        self.env = bound
        self.returned = None
        self._pending_asserts = []
        self.depth += 1
        try:
            self.exec_block(helper.tree.body)
            out = self.returned if self.returned is not None else V("const")
        finally:
            self.depth -= 1
            self.env, self.returned = saved_env, saved_ret
            self._pending_asserts = saved_pending
            del self.guards[saved_guards:]
        return out

    # ------------------------------------------------------------------ memory
    def _new_access(self, **kw) -> Access:
        self._next_access += 1
        acc = Access(id=self._next_access, loops=list(self.loops), guards=list(self.guards),
                     case=self.consts, **kw)
        if self.recording and kw.get("mask") is None:
            # bounds masks in scope here (KS104 only considers these)
            acc.live_masks = {n: v for n, v in self.env.items()
                              if v.kind == "bool" and v.shape}
        if self.recording:
            self.accesses.append(acc)
        return acc

    def do_load(self, node: ast.Call) -> V:
        a = self.args(node, ["pointer", "mask", "other", "boundary_check", "padding_option",
                             "cache_modifier", "eviction_policy", "volatile"])
        ptr = a.get("pointer")
        if ptr is None:
            return self.unk("load-args")
        if ptr.kind == "blockptr":
            return self.blockptr_access(node, ptr, "load", a)
        if ptr.kind != "ptr":
            return self.unk("load-pointer", ptr.shape)
        mask, other = a.get("mask"), a.get("other")
        if mask is not None and mask.kind == "const" and mask.const is None:
            mask = None
        if other is not None and other.kind == "const" and other.const is None:
            other = None
        shapes = [ptr.shape] + [v.shape for v in (mask, other) if v is not None]
        shape = self.bshape(*shapes)
        if shape is None:
            return self.unk("broadcast", ptr.shape)
        ptr = self.align(ptr, shape)
        mexpr = None
        if mask is not None:
            if mask.kind == "bool" and mask.mask is not None:
                mexpr = self.align(mask, shape).mask
            elif mask.kind == "const" and isinstance(mask.const, bool):
                mexpr = TRUE if mask.const else FALSE
            else:
                mexpr = ("opaque", self.fresh("?mask"))
        acc = self._new_access(kind="load", via="ptr", base=ptr.base, shape=shape,
                               offset=ptr.poly, mask=mexpr, span=self.span(node), node=node,
                               other=other, risks=ptr.risks, ptr_node=a.get("@pointer"),
                               mask_node=a.get("@mask"), other_node=a.get("@other"))
        result = self.load_result(acc, ptr.base, ptr.poly, shape, mexpr, other, node)
        acc.value = result
        return result

    def load_result(self, acc: Access, base: str | None, offset: Poly | None, shape: tuple,
                    mexpr, other: V | None, node: ast.AST, pad_default: Any = UNDEF) -> V:
        tags: dict = {}
        decl = self.decls.get(base) if base else None
        if decl is not None and offset is not None:
            coords = self.decompose(decl, offset)
            if coords is not None:
                tags = {d.name: Tag(decl.name, c, acc.line) for d, c in zip(decl.dims, coords)}
        poly = None
        if offset is not None and base is not None:
            label_base = decl.name if decl is not None else base
            poly = self.terms.make("read", (base, offset), f"{label_base}[{fmt(offset)}]")
        pads: tuple = ()
        if mexpr is not None and mexpr != TRUE:
            if other is None:
                val = pad_default
                src = "undefined (no other=)" if val == UNDEF else \
                    "0 (no other=)" if val == 0.0 else f"{val!r} (padding_option)"
            else:
                other = self.as_numeric(other)
                if other.kind == "data" and isinstance(other.const, float):
                    val = other.const
                elif other.kind == "int" and other.poly is not None and other.poly.is_const():
                    val = float(other.poly.const_value())
                else:
                    # a fill value computed from names (a dtype's minimum, a constexpr) was
                    # chosen deliberately: not judged
                    val = UNKNOWN
                src = _src(self.parsed, acc.other_node) if acc.other_node is not None else "?"
            pads = (Pad(acc.id, val, mexpr, acc.line, src),)
        dtype = None
        return V("data", shape, poly=poly, dtype=dtype, tags=tags, pads=pads,
                 loads=frozenset({acc.id}), width=32)

    def decompose(self, decl, offset: Poly) -> list[Poly] | None:
        """Coordinates of ``offset`` in the declared layout, or None (KS106)."""
        # The grid checks decompose the same load offsets once per scenario and program:
        # the answer depends only on the declaration's strides (cached per name) and the
        # offset, so it is kept per interpreter (a new list each time: callers own it).
        cache = self.__dict__.setdefault("_decompose_cache", {})
        key = (decl.name, offset)
        if key not in cache:
            cache[key] = self._decompose(decl, offset)
        hit = cache[key]
        return None if hit is None else list(hit)

    def _decompose(self, decl, offset: Poly) -> list[Poly] | None:
        strides = self.decl_strides(decl)
        if strides is None:
            return None
        n = len(strides)
        coords: list[Poly | None] = [None] * n
        rest = offset
        order = sorted(range(n), key=lambda d: (strides[d].is_const(),
                                                -(strides[d].const_value() or 0)))
        for d in order:
            s = strides[d]
            if not s.is_const():
                if len(s.terms) != 1:
                    return None
                (mono, coef), = s.terms.items()
                q: dict = {}
                for m, c in rest.terms.items():
                    mm = list(m)
                    ok = True
                    for x in mono:
                        if x in mm:
                            mm.remove(x)
                        else:
                            ok = False
                            break
                    if ok and c % coef == 0:
                        q[tuple(mm)] = q.get(tuple(mm), 0) + c // coef
                coord = Poly(q)
                coords[d] = coord
                rest = rest - coord * s
            else:
                c = s.const_value()
                if c == 0:
                    coords[d] = ZERO
                    continue
                if d == order[-1] or c == 1:
                    q2 = rest.exact_div(c)
                    if q2 is None:
                        return None
                    coords[d] = q2
                    rest = ZERO
                else:
                    part = Poly({m: v for m, v in rest.terms.items() if v % c == 0})
                    coords[d] = part.exact_div(c)
                    rest = rest - part
        if rest != ZERO:
            return None
        return [c if c is not None else ZERO for c in coords]

    def decl_strides(self, decl) -> list[Poly] | None:
        key = ("strides", decl.name)
        cache = self.__dict__.setdefault("_decl_cache", {})
        if key in cache:
            return cache[key]
        out: list[Poly] | None = []
        if decl.strides is not None:
            for e in decl.strides:
                p = self.annot_poly(e.tree)
                if p is None:
                    out = None
                    break
                out.append(p)
        else:
            # row-major: the last stride is 1, each other the product of the sizes after it
            acc: Poly | None = ONE
            rev = []
            for d in reversed(decl.dims):
                rev.append(acc)
                if acc is not None:
                    p = self.annot_poly(d.size.tree)
                    acc = None if p is None else acc * p
            out = None if any(x is None for x in rev) else list(reversed(rev))
        cache[key] = out
        return out

    def decl_sizes(self, decl) -> list[Poly] | None:
        key = ("sizes", decl.name)
        cache = self.__dict__.setdefault("_decl_cache", {})
        if key in cache:
            return cache[key]
        out: list[Poly] | None = []
        for d in decl.dims:
            p = self.annot_poly(d.size.tree)
            if p is None:
                out = None
                break
            out.append(p)
        cache[key] = out
        return out

    def tensor_read(self, decl, sl: ast.expr) -> V:
        """``Tensor[c0, ...]`` in an annotation: the value read at those coordinates, the same
        opaque term a ``tl.load`` at that offset produces."""
        items = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        strides = self.decl_strides(decl)
        if strides is None or len(items) != len(strides):
            return self.unk("annotation-read")
        off = ZERO
        for it, st in zip(items, strides):
            v = self.eval(it)
            if v.kind != "int" or v.poly is None:
                return self.unk("annotation-read")
            off = off + v.poly * st
        return V("int", poly=self.terms.make("read", (decl.ptr, off), f"{decl.name}[{fmt(off)}]"),
                 width=64)

    def annot_poly(self, tree: ast.expr | None) -> Poly | None:
        """Evaluate an annotation expression over the kernel's parameters (free names are
        free symbols)."""
        if tree is None:
            return None
        v = self.annot_eval(tree)
        return v.poly if v.kind == "int" else None

    def annot_eval(self, tree: ast.expr, env: dict | None = None) -> V:
        saved_env, saved_rec = self.env, self.recording
        # The parameters' values depend only on consts (changed by fallback_value, which
        # drops this cache), so they are built once, not once per annotation (hot: grid checks).
        base = self._annot_base
        if base is None:
            base = self._annot_base = {p: self.param_value(p, self.kernel.param(p).is_constexpr)
                                       for p in self.params}
        base = dict(base)
        if env:
            base.update(env)
        self.env = _FreeEnv(base, self)
        self.recording = False
        self.annot_mode = True
        try:
            return self.eval(tree)
        finally:
            self.env, self.recording = saved_env, saved_rec
            self.annot_mode = False

    def do_store(self, node: ast.Call) -> None:
        a = self.args(node, ["pointer", "value", "mask", "boundary_check", "cache_modifier",
                             "eviction_policy"])
        ptr, value = a.get("pointer"), a.get("value")
        if ptr is None:
            self.unk("store-args")
            return
        if ptr.kind == "blockptr":
            self.blockptr_access(node, ptr, "store", a)
            return
        if ptr.kind != "ptr":
            self.unk("store-pointer")
            return
        mask = a.get("mask")
        if mask is not None and mask.kind == "const" and mask.const is None:
            mask = None
        shapes = [ptr.shape] + [v.shape for v in (mask, value) if v is not None and v.kind
                                not in ("const",)]
        shape = self.bshape(*shapes)
        if shape is None:
            self.unk("broadcast")
            return
        ptr = self.align(ptr, shape)
        if value is not None and value.kind not in ("const", "unknown"):
            value = self.align(value, shape)
        mexpr = None
        if mask is not None:
            if mask.kind == "bool" and mask.mask is not None:
                mexpr = self.align(mask, shape).mask
            else:
                mexpr = ("opaque", self.fresh("?mask"))
        self._new_access(kind="store", via="ptr", base=ptr.base, shape=shape, offset=ptr.poly,
                         mask=mexpr, span=self.span(node), node=node, value=value,
                         risks=ptr.risks, ptr_node=a.get("@pointer"), mask_node=a.get("@mask"))

    def do_atomic(self, node: ast.Call, fn: str) -> V:
        names = ["pointer", "cmp", "val", "mask"] if fn == "atomic_cas" else \
            ["pointer", "val", "mask"]
        a = self.args(node, names + ["sem", "scope"])
        ptr = a.get("pointer")
        if ptr is None or ptr.kind != "ptr":
            return self.unk("atomic-pointer")
        mask = a.get("mask")
        val = a.get("val")
        shapes = [ptr.shape] + [v.shape for v in (mask, val) if v is not None]
        shape = self.bshape(*shapes)
        if shape is None:
            return self.unk("broadcast")
        ptr = self.align(ptr, shape)
        mexpr = self.align(mask, shape).mask if mask is not None and mask.kind == "bool" else (
            None if mask is None else ("opaque", self.fresh("?mask")))
        self._new_access(kind="atomic", via="ptr", base=ptr.base, shape=shape, offset=ptr.poly,
                         mask=mexpr, span=self.span(node), node=node, value=val,
                         risks=ptr.risks, ptr_node=a.get("@pointer"), mask_node=a.get("@mask"))
        return V("data", shape)

    def make_block_ptr(self, node: ast.Call) -> V:
        a = self.args(node, ["base", "shape", "strides", "offsets", "block_shape", "order"])
        base = a.get("base")
        if base is None or base.kind != "ptr" or base.shape:
            return self.unk("make_block_ptr")
        parts = {}
        for k in ("shape", "strides", "offsets"):
            v = a.get(k)
            if v is None or v.kind != "tuple":
                return self.unk("make_block_ptr")
            parts[k] = [e.poly if e.kind == "int" else None for e in v.const]
        bs = self.shape_of(a.get("block_shape"))
        if bs is None or not (len(bs) == len(parts["shape"]) == len(parts["strides"]) ==
                              len(parts["offsets"])):
            return self.unk("make_block_ptr")
        risks = base.risks + tuple(r for k in ("shape", "strides", "offsets")
                                   for e in a[k].const for r in e.risks)
        return V("blockptr", const={"base": base, "shape": parts["shape"],
                                    "strides": parts["strides"], "offsets": parts["offsets"],
                                    "block": bs, "risks": risks})

    def make_desc(self, node: ast.Call) -> V:
        a = self.args(node, ["base", "shape", "strides", "block_shape"])
        base = a.get("base")
        if base is None or base.kind != "ptr" or base.shape:
            return self.unk("make_tensor_descriptor")
        parts = {}
        for k in ("shape", "strides"):
            v = a.get(k)
            if v is None or v.kind != "tuple":
                return self.unk("make_tensor_descriptor")
            parts[k] = [e.poly if e.kind == "int" else None for e in v.const]
        bs = self.shape_of(a.get("block_shape"))
        if bs is None or len(bs) != len(parts["shape"]):
            return self.unk("make_tensor_descriptor")
        return V("desc", const={"base": base, "shape": parts["shape"],
                                "strides": parts["strides"], "block": bs,
                                "risks": base.risks})

    def _block_offset(self, d: dict, offsets: list) -> tuple[Poly | None, list]:
        base: V = d["base"]
        if base.poly is None or any(x is None for x in d["strides"]) or \
                any(x is None for x in offsets):
            return None, []
        off = base.poly
        coords = []
        for k, (o, s) in enumerate(zip(offsets, d["strides"])):
            c = o + Poly.atom(f"%{k}")
            coords.append(c)
            off = off + c * s
        return off, coords

    def blockptr_access(self, node: ast.Call, bp: V, kind: str, a: dict) -> V:
        d = bp.const
        shape = d["block"]
        off, coords = self._block_offset(d, d["offsets"])
        bc = a.get("boundary_check")
        checked: tuple = ()
        if bc is not None and bc.kind == "tuple":
            checked = tuple(self.concrete(e) for e in bc.const)
            if None in checked:
                checked = tuple(range(len(shape)))
        mexpr = None
        if off is not None and checked:
            conds = []
            for k in checked:
                if k < len(coords) and d["shape"][k] is not None:
                    conds.append(cmp("<=", ZERO, coords[k]))
                    conds.append(cmp("<", coords[k], d["shape"][k]))
            mexpr = b_and(*conds)
        padopt = a.get("padding_option")
        pad_default: Any = 0.0
        if padopt is not None and padopt.kind == "const" and padopt.const == "nan":
            pad_default = math.nan
        acc = self._new_access(kind=kind, via="blockptr", base=d["base"].base, shape=shape,
                               offset=off, mask=mexpr, span=self.span(node), node=node,
                               checked_dims=checked, block=d, risks=d.get("risks", ()),
                               ptr_node=node.args[0] if node.args else None,
                               padding=padopt.const if padopt is not None else None)
        if kind == "store":
            value = a.get("value")
            if value is not None and value.kind not in ("const", "unknown"):
                value = self.align(value, shape)
            acc.value = value
            return V("const")
        result = self.load_result(acc, d["base"].base, off, shape, mexpr, None, node,
                                  pad_default=pad_default)
        acc.value = result
        return result

    def desc_access(self, node: ast.Call, desc: V, name: str) -> V:
        a = self.args(node, ["offsets", "value"])
        offs = a.get("offsets")
        d = desc.const
        if offs is None or offs.kind != "tuple" or len(offs.const) != len(d["block"]):
            return self.unk("desc-offsets")
        offsets = [e.poly if e.kind == "int" else None for e in offs.const]
        off, coords = self._block_offset(d, offsets)
        mexpr = None
        if off is not None:
            conds = []
            for k, c in enumerate(coords):
                if d["shape"][k] is not None:
                    conds += [cmp("<=", ZERO, c), cmp("<", c, d["shape"][k])]
            mexpr = b_and(*conds)
        kind = "load" if name == "load" else ("store" if name == "store" else "atomic")
        risks = d.get("risks", ()) + tuple(r for e in offs.const for r in e.risks)
        acc = self._new_access(kind=kind, via="desc", base=d["base"].base, shape=d["block"],
                               offset=off, mask=mexpr, span=self.span(node), node=node,
                               checked_dims=tuple(range(len(d["block"]))),
                               block=dict(d, offsets=offsets), risks=risks)
        if kind == "load":
            result = self.load_result(acc, d["base"].base, off, d["block"], mexpr, None, node)
            acc.value = result
            return result
        value = a.get("value")
        if value is not None and value.kind not in ("const", "unknown"):
            value = self.align(value, d["block"])
        acc.value = value
        return V("const")

    # ------------------------------------------------------------------ tile ops
    def dot(self, node: ast.Call) -> V:
        a = self.args(node, ["input", "other", "acc", "input_precision", "allow_tf32",
                             "max_num_imprecise_acc", "out_dtype"])
        x, y, acc = a.get("input"), a.get("other"), a.get("acc")
        if x is None or y is None or len(x.shape) != 2 or len(y.shape) != 2:
            return self.unk("dot", ())
        if x.shape[1] != y.shape[0]:
            return self.unk("dot-shape", (x.shape[0], y.shape[1]))
        kk = self.fresh("%k")
        xa = {d: t for d, t in x.tags.items()}
        ya = {d: t for d, t in y.tags.items()}
        tags: dict = {}
        for d, t in xa.items():
            vars_ = self.terms.index_vars(t.coord)
            if 1 in vars_:
                if d in ya and 0 in self.terms.index_vars(ya[d].coord):
                    ca = self.terms.subst(t.coord, {"%1": Poly.atom("%0")})
                    cb = ya[d].coord
                    if self.recording and ca != cb:
                        self.obligations.append(Obligation(
                            "dot", node, self.span(node), (x.shape[1],), list(self.loops),
                            list(self.guards),
                            {"dim": d, "a": t, "b": ya[d], "ca": ca, "cb": cb,
                             "x": x, "y": y}))
                continue
            tags[d] = t
        for d, t in ya.items():
            if 0 in self.terms.index_vars(t.coord):
                continue
            if d in tags and tags[d].coord != t.coord:
                del tags[d]
                continue
            tags[d] = t
        od = a.get("out_dtype")
        dtype = od.const if od is not None and od.kind == "dtype" else "fp32"
        if acc is not None and acc.kind == "data" and acc.dtype in ("fp16", "bf16"):
            dtype = acc.dtype
        if acc is not None and acc.kind == "data":
            acc = self.align(acc, (x.shape[0], y.shape[1]))
            tags = self.mix_tags(acc, V("data", acc.shape, tags=tags), node, acc.shape)
        if x.dtype in INT_DTYPES and y.dtype in INT_DTYPES:
            dtype = "i32"
        pads = self._dot_pads(node, x, y, acc)
        return V("data", (x.shape[0], y.shape[1]), dtype=dtype, tags=tags, pads=pads,
                 loads=x.loads | y.loads | (acc.loads if acc is not None else frozenset()))

    def _dot_pads(self, node: ast.Call, x: V, y: V, acc: V | None) -> tuple:
        """Masked lanes through ``tl.dot(x, y)``: undefined lanes along the contracted axis
        (axis 1 of x, axis 0 of y) enter every output element: a ``pad`` obligation like a
        reduction's (KS403). Masks on the kept axes (rows of x, columns of y) become pads of
        the output rows / columns: a zero row stays zero, an undefined row stays undefined."""
        out = []
        for v, k_axis in ((x, 1), (y, 0)):
            for p in v.pads:
                vars_ = _vars(self.terms, p.mask)
                if f"%{k_axis}" in vars_:
                    if p.value != UNDEF:
                        continue
                    kept, along = self._split_contracted(p.mask, f"%{k_axis}")
                    if not along:
                        # `valid_row | (i >= k)`: lanes are undefined only in rows the
                        # kept-axis part masks off; those output rows are undefined
                        out.append(Pad(p.load_id, UNDEF, b_and(*kept), p.line, p.other_src,
                                       p.steps))
                    elif self.recording:
                        self.obligations.append(Obligation(
                            "pad", node, self.span(node), v.shape, list(self.loops),
                            list(self.guards), {"pad": p, "reduction": "dot", "fn": "dot",
                                                "axes": (k_axis,), "nonneg": False}))
                    continue
                val = p.value if p.value == UNDEF or p.value == 0.0 else UNKNOWN
                out.append(Pad(p.load_id, val, p.mask, p.line, p.other_src, p.steps))
        if acc is not None and acc.kind == "data" and not (acc.extra and acc.extra.get("carried")):
            out.extend(p for p in acc.pads if p not in out)
        return tuple(out)

    def _split_contracted(self, mask, kvar: str) -> tuple[list, list]:
        """Conjuncts of a pad mask without the contracted index ``kvar`` (a disjunction
        contributes its ``kvar``-free disjuncts: where they hold, the lane is defined
        whatever ``kvar`` is), and the conjuncts that mask lanes along ``kvar`` itself."""
        kept, along = [], []
        for c in conjuncts(mask):
            if kvar not in _vars(self.terms, c):
                kept.append(c)
                continue
            free = [d for d in c[1] if kvar not in _vars(self.terms, d)] if c[0] == "or" \
                else []
            if free:
                kept.append(b_or(*free))
            else:
                along.append(c)
        return kept, along

    def reduce(self, fn: str, node: ast.Call, obj: V | None = None) -> V:
        names = ["axis", "keep_dims"] if obj is not None else ["input", "axis", "keep_dims"]
        a = self.args(node, names + ["combine_fn", "return_indices", "dtype"])
        x = obj if obj is not None else a.get("input")
        if x is None or x.kind in ("unknown",):
            return self.unk(fn)
        if x.kind == "const" or not x.shape:
            return V("data", (), dtype=x.dtype)
        axv = a.get("axis")
        axis = None if axv is None or (axv.kind == "const" and axv.const is None) else \
            self.concrete(axv)
        if axv is not None and axis is None and not (axv.kind == "const" and axv.const is None):
            return self.unk(fn + "-axis")
        kd = a.get("keep_dims")
        keep = bool(kd is not None and kd.kind == "const" and kd.const)
        nd = len(x.shape)
        axes = list(range(nd)) if axis is None else [axis if axis >= 0 else nd + axis]
        red = REDUCTIONS.get(fn, "other")
        if self.recording:
            for p in x.pads:
                if any(f"%{k}" in _vars(self.terms, p.mask) for k in axes):
                    self.obligations.append(Obligation(
                        "pad", node, self.span(node), x.shape, list(self.loops),
                        list(self.guards), {"pad": p, "reduction": red, "fn": fn,
                                            "axes": tuple(axes), "value": x.poly,
                                            "nonneg": _nn(x) or x.dtype in ("i1", "u8", "u16",
                                                                            "u32", "u64")}))
        mapping: dict[str, Poly] = {}
        shape = []
        for k in range(nd):
            if k in axes:
                if keep:
                    mapping[f"%{k}"] = ZERO
                    shape.append(1)
                continue
            new = len(shape)
            shape.append(x.shape[k])
            if new != k:
                mapping[f"%{k}"] = Poly.atom(f"%{new}")
        tags = {}
        for d, t in x.tags.items():
            if any(k in self.terms.index_vars(t.coord) for k in axes):
                continue
            tags[d] = Tag(t.tensor, self.terms.subst(t.coord, mapping), t.line)
        dtype = "i32" if fn in ("argmax", "argmin") else x.dtype
        return V("data", tuple(shape), dtype=dtype, tags=tags, loads=x.loads)

    def where(self, node: ast.Call) -> V:
        a = self.args(node, ["condition", "x", "y"])
        c, x, y = a.get("condition"), a.get("x"), a.get("y")
        if c is None or x is None or y is None:
            return self.unk("where")
        x, y = self.as_numeric(x), self.as_numeric(y)
        y_shape0, x_shape0 = y.shape, x.shape
        shapes = [v.shape for v in (c, x, y) if v.kind not in ("const",)]
        shape = self.bshape(*shapes) if shapes else ()
        if shape is None:
            return self.unk("broadcast")
        c = self.align(c, shape) if c.kind != "const" else c
        x = self.align(x, shape) if x.kind not in ("const",) else x
        y = self.align(y, shape) if y.kind not in ("const",) else y
        cm = c.mask if c.kind == "bool" else None
        if self.recording and cm is not None:
            for arm, other_discard, rest in ((x, b_not(cm), y), (y, cm, x)):
                if arm.kind == "data" and arm.loads:
                    self.wheres.append(WhereUse(
                        arm.loads, other_discard, shape, self.span(node),
                        tags=dict(arm.tags or {}), loops=list(self.loops),
                        guards=list(self.guards), other=self._constant_lane(rest)))
        if x.kind == "unknown" or y.kind == "unknown":
            return unknown(x.why or y.why or "where", shape)
        if x.kind == "int" and y.kind == "int" and x.poly is not None and y.poly is not None:
            if x.poly == y.poly:
                return x
            return V("int", shape, poly=self.terms.make("where", (x.poly, y.poly),
                                                           f"where({fmt(x.poly)}, {fmt(y.poly)})"),
                     width=max(x.width, y.width))
        if x.kind == "ptr" and y.kind == "ptr" and x.base == y.base:
            if x.poly == y.poly:
                return x
            return V("ptr", shape, poly=None, base=x.base)
        tags = self.mix_tags(x, y, node, shape) if x.kind != "const" and y.kind != "const" \
            else dict(x.tags or y.tags)
        pads = []
        y_full = bool(y.shape) and y_shape0 == shape and not y.pads
        x_full = bool(x.shape) and x_shape0 == shape and not x.pads
        for p in x.pads:
            # lanes masked off by load p: is the condition false there (so y is taken)?
            if cm is not None and _implies_mask(cm, p.mask):
                if y_full:
                    continue  # they take y's own (ordinary) values
                pads.append(Pad(p.load_id, self._lane_value(y) if y.kind != "data" or
                                not y.pads else UNKNOWN, p.mask, p.line, p.other_src))
            elif p.value == UNDEF and cm is not None:
                # undefined only where the condition picks x and the load was masked off
                pads.append(Pad(p.load_id, UNDEF, b_or(p.mask, b_not(cm)), p.line,
                                p.other_src, p.steps))
            else:
                pads.append(Pad(p.load_id, _unknown_unless_undef(p.value)
                                if p.value != self._lane_value(y) else p.value, p.mask, p.line,
                                p.other_src))
        for p in y.pads:
            if any(q.load_id == p.load_id for q in pads):
                continue
            if cm is not None and _implies_mask(b_not(cm), p.mask):
                if x_full:
                    continue
                pads.append(Pad(p.load_id, self._lane_value(x), p.mask, p.line, p.other_src))
            elif p.value == UNDEF and cm is not None:
                pads.append(Pad(p.load_id, UNDEF, b_or(p.mask, cm), p.line, p.other_src,
                                p.steps))
            else:
                pads.append(Pad(p.load_id, _unknown_unless_undef(p.value), p.mask, p.line,
                                p.other_src))
        return V("data", shape, dtype=self.promote(x, y) if x.kind != "const" else y.dtype,
                 tags=tags, pads=tuple(pads), loads=x.loads | y.loads)

    # ------------------------------------------------------------------ hovers
    def hover(self, target: ast.AST, name: str, v: V) -> None:
        from .render import describe_value
        span = self.span(target)
        # hover and inlay hints show the first record of a span: later passes over the same
        # statement (unrolled static loops, the second pass of a loop) would only cost time
        seen = self.__dict__.setdefault("_hover_spans", set())
        if span in seen:
            return
        seen.add(span)
        title, tags = describe_value(name, v, self)
        self.hovers.append(HoverInfo(span=span, title=title,
                                     shape=tuple(str(n) for n in v.shape), tags=tags))


class _FreeEnv(dict):
    """Environment for annotation expressions: names that are not parameters are free
    symbols (size atoms)."""

    def __init__(self, base: dict, interp: Interp):
        super().__init__(base)
        self.interp = interp

    def get(self, key, default=None):
        if key in self:
            return self[key]
        if key in ("cdiv", "min", "max", "tl", "triton", "math", "float", "int"):
            return None
        v = V("int", poly=Poly.atom(key), width=32)
        self.interp.runtime_params.add(key)
        self[key] = v
        return v


NONNEG_FUNCS = {"exp", "exp2", "sqrt", "sqrt_rn", "rsqrt", "abs", "fabs", "sigmoid", "relu",
                "softplus", "fast_expf"}


def _nn(v: V) -> bool:
    return bool(v.extra and v.extra.get("nonneg")) or (
        v.kind == "data" and isinstance(v.const, float) and v.const >= 0)


def _unknown_unless_undef(value) -> Any:
    """Lane value after an operation the pad arithmetic does not follow: still undefined
    when it was (nothing but a select replaces undefined lanes), else unknown."""
    return UNDEF if value == UNDEF else UNKNOWN


def _absorbed(sym: str | None, value, pad_left: bool) -> bool:
    """``acc op pad`` leaves ``acc`` unchanged: + 0, - 0 (pad on the right), * 1."""
    if not isinstance(value, float):
        return False
    if sym == "+" and value == 0.0:
        return True
    if sym == "-" and value == 0.0 and not pad_left:
        return True
    if sym == "*" and value == 1.0:
        return True
    return False


def _implies_mask(cond, load_mask) -> bool:
    """Structural test: ``cond`` implies ``load_mask`` (so cond is false on masked lanes)."""
    lc = conjuncts(load_mask)
    cc = conjuncts(cond)
    return bool(lc) and all(x in cc for x in lc)


def _vars(terms: Terms, mask) -> set[str]:
    from .values import b_polys
    out = set()
    for p in b_polys(mask):
        out |= {f"%{k}" for k in terms.index_vars(p)}
    return out


def _runtime(p: Poly | None, consts: dict) -> bool:
    if p is None:
        return False
    for m in p.terms:
        for a in m:
            if a not in consts:
                return True
    return False


def _grid_scaled(p: Poly | None, terms: Terms, axes: tuple = ("pid0",)) -> bool:
    if p is None:
        return False
    # Axis 0 is the only grid axis with more than 65535 programs: one program per row.
    atoms = terms.deep_atoms(p)
    return any(a in atoms for a in axes)


def _has_param(p: Poly | None, params: set[str]) -> bool:
    if p is None:
        return False
    return any(a in params for m in p.terms for a in m)


def _bound_once(kernel: KernelInfo) -> dict[str, int]:
    """How often each name is a target of an assignment in the kernel's text (an augmented
    assignment counts twice: it rebinds a name bound before)."""
    tree = kernel.tree
    if tree is None:
        return {}

    def count() -> dict[str, int]:
        out: dict[str, int] = {}
        for n in ast.walk(tree):
            targets = []
            if isinstance(n, ast.Assign):
                targets = n.targets
            elif isinstance(n, (ast.AugAssign, ast.AnnAssign, ast.For)):
                targets = [n.target]
            for t in targets:
                for x in ast.walk(t):
                    if isinstance(x, ast.Name):
                        out[x.id] = out.get(x.id, 0) + (2 if isinstance(n, ast.AugAssign)
                                                        else 1)
        return out
    return _cached(tree, "_ks_bound_once", count)


def _opname(o) -> str:
    return {ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}.get(o, "?")


def _src(parsed: ParsedFile, node: ast.AST | None) -> str:
    if node is None:
        return ""
    sp = ast_span(node)
    lines = parsed.lines
    if sp.line == sp.end_line and 0 <= sp.line < len(lines):
        return lines[sp.line][sp.col:sp.end_col]
    if 0 <= sp.line < len(lines):
        parts = [lines[sp.line][sp.col:]] + lines[sp.line + 1:sp.end_line] + \
                ([lines[sp.end_line][:sp.end_col]] if sp.end_line < len(lines) else [])
        return " ".join(x.strip() for x in parts)
    return ""


def _operand_src(parsed: ParsedFile, node: ast.AST) -> str:
    text = _src(parsed, node)
    if isinstance(node, (ast.BinOp, ast.BoolOp, ast.Compare, ast.UnaryOp)) and \
            not (text.startswith("(") and text.endswith(")")):
        return f"({text})"
    return text


def _assigned_names(body: list[ast.stmt]) -> list[str]:
    out: list[str] = []
    for s in body:
        for n in fast_walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id not in out:
                out.append(n.id)
    return out


def fast_walk(node):
    """Like ``ast.walk`` (any order), about twice as fast on large kernels."""
    stack = [node]
    AST = ast.AST
    while stack:
        n = stack.pop()
        yield n
        for f in n._fields:
            v = getattr(n, f, None)
            if v.__class__ is list:
                for x in v:
                    if isinstance(x, AST):
                        stack.append(x)
            elif isinstance(v, AST):
                stack.append(v)


def _cached(node, attr: str, make):
    """Syntactic facts are computed once per AST node (kernel trees outlive the cases)."""
    if node is None:
        return make()
    hit = getattr(node, attr, None)
    if hit is None:
        hit = make()
        setattr(node, attr, hit)
    return hit


def _loop_facts(s: ast.stmt) -> tuple:
    """(assigned names in order, names killed first, names read) of a loop body."""
    return _cached(s, "_ks_loop", lambda: (_assigned_names(s.body), _killed_first(s.body),
                                           _read_names(s.body)))


def _killed_first(body: list[ast.stmt]) -> set[str]:
    """Names whose first use in the loop body (in order) is a plain assignment at the top
    level of the body: their value does not flow around the loop."""
    read: set[str] = set()
    killed: set[str] = set()
    for st in body:
        if isinstance(st, (ast.Assign, ast.AnnAssign)) and st.value is not None:
            for n in fast_walk(st.value):
                if isinstance(n, ast.Name):
                    read.add(n.id)
            targets = st.targets if isinstance(st, ast.Assign) else [st.target]
            for t in targets:
                for n in fast_walk(t):
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and \
                            n.id not in read:
                        killed.add(n.id)
        else:
            for n in fast_walk(st):
                if isinstance(n, ast.Name) and n.id not in killed:
                    read.add(n.id)
    return killed


def _read_names(body: list[ast.stmt]) -> set[str]:
    out: set[str] = set()
    for s in body:
        for n in fast_walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                out.add(n.id)
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                out.add(n.target.id)
    return out


_PTR_FUNCS = {"load", "store", "make_block_ptr", "make_tensor_descriptor", "atomic_add",
              "atomic_max", "atomic_min", "atomic_cas", "atomic_xchg", "atomic_and",
              "atomic_or", "atomic_xor", "_experimental_make_tensor_descriptor"}


def _pointer_names(kernel: KernelInfo) -> set[str]:
    """Parameters used as pointers: named like pointers, or reaching the address argument
    of a load/store (through ``+``/``-`` chains and assignments), or read via ``.dtype``."""
    fn = kernel.tree
    params = {p.name for p in kernel.params if not p.is_constexpr}
    out = {p for p in params if "ptr" in p.lower() or p.lower().endswith("_p")}
    if fn is None:
        return out
    roots: set[str] = set()
    deps: dict[str, set[str]] = {}

    def leftmost(e: ast.expr) -> set[str]:
        names = set()
        while True:
            if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
                names |= leftmost(e.right) if isinstance(e.right, (ast.Name, ast.BinOp)) and \
                    _is_namey(e.right) else set()
                e = e.left
            elif isinstance(e, ast.Subscript):
                e = e.value
            elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and \
                    e.func.attr in ("to", "multiple_of", "max_contiguous"):
                e = e.func.value
            elif isinstance(e, ast.Call) and e.args and isinstance(e.func, ast.Attribute) and \
                    e.func.attr in ("multiple_of", "max_contiguous", "advance"):
                e = e.args[0]
            else:
                break
        if isinstance(e, ast.Name):
            names.add(e.id)
        return names

    for n in fast_walk(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                n.func.attr in _PTR_FUNCS and n.args:
            roots |= leftmost(n.args[0])
        elif isinstance(n, ast.Attribute) and n.attr == "dtype" and isinstance(n.value, ast.Name):
            roots.add(n.value.id)
        elif isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Name):
                    deps.setdefault(t.id, set()).update(leftmost(n.value))
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            deps.setdefault(n.target.id, set()).add(n.target.id)
    seen = set()
    stack = list(roots)
    while stack:
        x = stack.pop()
        if x in seen:
            continue
        seen.add(x)
        stack.extend(deps.get(x, ()))
    return out | (seen & params)


def _is_namey(e: ast.expr) -> bool:
    return False
