"""Triton language rules that need no annotation (KS5xx).

Each rule reads one kernel's ``ast`` tree and what the front end knows about its constexprs:
literal defaults, every ``@triton.autotune`` config and literal values passed at launch sites
of the same file. A rule reports only what it can show with those values; an unknown value
never produces a finding.

Facts about Triton used here (checked against the installed Triton 3.9 source,
``triton/compiler/code_generator.py`` and ``triton/language/semantic.py``):

* ``tl.arange(start, end)`` needs ``end - start`` to be a power of two, both constexpr.
* ``tl.dot`` needs the contracted dimension K >= 16 for 16-bit operands (>= 8 for fp32,
  >= 32 for 8-bit, >= 4 for fp64) on NVIDIA targets (``min_dot_size``); Triton before 3.2
  needed every dimension >= 16.
* The code generator has no visitor for try, lambda, set/dict comprehensions, generator
  expressions, yield, await, global/nonlocal, del, raise, class definitions, break/continue,
  dict/set literals or match; nested ``def`` is rejected explicitly; list comprehensions work
  only over tuples and with one generator.
* ``print`` inside a kernel is an alias of ``tl.device_print`` (the builtin namespace maps it).
* Block pointers (``tl.make_block_ptr``, ``tl.advance``) raise in Triton >= 3.9; tensor
  descriptors (``tl.make_tensor_descriptor``) are public since Triton 3.4.
"""
from __future__ import annotations

import ast
import itertools
import re
import time
from functools import lru_cache

from . import astnodes, codes
from .config import Config
from .frontend import ast_span, over_budget, resolve
from .kernel import KernelInfo, Param, ParsedFile
from .launches import bind_args
from .model import Finding, Fix, Span, TextEdit

MAX_CASES = 64
BLOCK_PTR_REMOVED = (3, 9)
TENSOR_DESCRIPTOR_ADDED = (3, 4)
DOT_MIN_ALL_DIMS_BEFORE = (3, 2)

_SHAPE_FUNCS = {"zeros": (0,), "full": (0,), "reshape": (1,), "view": (1,),
                "broadcast_to": (1,)}
_SHAPE_METHODS = {"reshape", "view", "broadcast_to"}
_ELEMENTWISE = {"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs", "sigmoid", "sin", "cos",
                "maximum", "minimum", "where", "fma", "cast", "erf", "floor", "ceil",
                "clamp", "softmax", "fdiv", "div_rn", "umulhi", "math"}
_DTYPE_BITS = {"float16": 16, "bfloat16": 16, "float32": 32, "float64": 64, "int8": 8,
               "uint8": 8, "float8e4nv": 8, "float8e5": 8, "float8e4b15": 8,
               "float8e4b8": 8, "float8e5b16": 8, "int16": 16, "int32": 32, "int64": 64,
               "fp16": 16, "bf16": 16, "fp32": 32, "fp64": 64, "tf32": 32}


@lru_cache(maxsize=1)
def installed_triton_version() -> tuple[int, ...] | None:
    """The installed Triton's version as a tuple (``(3, 9, 0)``), read from the package
    metadata without importing Triton; None when Triton is not installed."""
    from importlib import metadata

    try:
        text = metadata.version("triton")
    except metadata.PackageNotFoundError:
        return None
    except Exception:  # a broken installation is "unknown", not a crash
        return None
    nums = []
    for part in re.split(r"[.+-]", text):
        if not part.isdigit():
            break
        nums.append(int(part))
    return tuple(nums) if nums else None


def check_rules(parsed: ParsedFile, config: Config) -> list[Finding]:
    """Run every KS5xx rule on every jit function of ``parsed`` (kernels and helpers).

    Returns findings with exact spans and, where a fix is mechanical, ``Finding.fixes``.
    Findings of codes disabled by ``config`` are left out. Never raises on user code.

    Budget: the rules of one function share ``config.kernel_budget_ms`` of CPU time (of the
    calling thread) with what the front end already spent on it (``KernelInfo.front_seconds``).
    Past it the function's remaining rules are skipped, the findings made so far stand, and
    the function is marked not analysed (``budget_exhausted``, one KS911 information).
    """
    version = installed_triton_version()
    called = _called_names(parsed)
    launched = {l.kernel for l in parsed.launches}
    budget_s = config.kernel_budget_ms / 1000.0
    out: list[Finding] = []
    for kernel in parsed.kernels:
        if kernel.tree is None or kernel.budget_exhausted is not None:
            continue
        t0 = time.thread_time()
        found: list[Finding] = []
        try:
            _KernelRules(kernel, parsed, version, called, launched,
                         deadline=t0 + budget_s - kernel.front_seconds, findings=found).run()
        except _OutOfBudget:
            pass  # what was found stands; over_budget below reports the KS911
        except RecursionError:
            found = []  # pathological nesting: the other rules and kernels still run
        except Exception as exc:  # a rule bug must not take the file (or the server) down
            info = codes.get("KS911")
            found = [Finding(code="KS911", message=f"{info.title}: internal error in the "
                             f"language rules: {type(exc).__name__}: {exc}",
                             span=kernel.name_span, severity=info.severity,
                             kernel=kernel.name)]
        out.extend(found)
        kernel.front_seconds += time.thread_time() - t0
        over_budget(kernel, config.kernel_budget_ms, out, "language rules")
    return [f for f in out if config.enabled(f.code)]


def _called_names(parsed: ParsedFile) -> set[str]:
    names = {k.name for k in parsed.kernels}
    out: set[str] = set()
    for k in parsed.kernels:
        if k.tree is None:
            continue
        for node in astnodes.nodes(k.tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id in names and node.func.id != k.name:
                out.add(node.func.id)
    return out


class _OutOfBudget(Exception):
    """The rules of one function ran past its deadline (``check_rules`` catches it)."""


class _Case:
    """One concrete assignment of constexpr values and where it comes from."""

    def __init__(self, values: dict[str, int], where: str):
        self.values = values
        self.where = where


class _KernelRules:
    def __init__(self, kernel: KernelInfo, parsed: ParsedFile, version, called: set[str],
                 launched: set[str], *, deadline: float = float("inf"),
                 findings: list[Finding] | None = None):
        self.k = kernel
        self.parsed = parsed
        self.version = version
        self.deadline = deadline  # time.thread_time() value; past it: _OutOfBudget
        self._ticks = 0
        self.findings: list[Finding] = findings if findings is not None else []
        self.nodes = astnodes.nodes(kernel.tree)
        self._tl_used: set[str | None] | None = None
        self.params = {p.name: p for p in kernel.params}
        self.constexpr = {p.name for p in kernel.params if p.is_constexpr}
        # Parameters of helpers take constexpr-ness from their callers' arguments; only
        # entry kernels (launched here, or not called by another jit function of the file)
        # must declare tl.constexpr themselves.
        self.entry = kernel.name in launched or kernel.name not in called
        self.single = self._single_assignments()
        self.module_consts = _module_constants(parsed)
        self.cases = self._cases()
        self.dead = self._maybe_dead()

    # --- helpers ------------------------------------------------------------------------

    def tick(self, every: int = 64) -> None:
        """Check the deadline once per ``every`` calls (reading the clock costs ~1 us)."""
        self._ticks += 1
        if self._ticks % every == 0 and time.thread_time() > self.deadline:
            raise _OutOfBudget()

    def _tl(self, func: ast.expr) -> str | None:
        """``tl.arange`` -> ``"arange"`` when ``func`` names a triton.language member."""
        dotted = _dotted(func)
        if dotted is None:
            return None
        full = resolve(dotted, self.parsed.imports)
        for prefix in ("triton.language.core.", "triton.language.math.", "triton.language."):
            if full.startswith(prefix):
                return full[len(prefix):]
        head = dotted.split(".")[0]
        if head == "tl" and "tl" not in self.parsed.imports and dotted.count(".") == 1:
            return dotted.split(".", 1)[1]
        return None

    def add(self, code: str, message: str, span: Span, fixes: list[Fix] | None = None,
            node: ast.AST | None = None) -> None:
        if node is not None and id(node) in self.dead:
            return
        info = codes.get(code)
        self.findings.append(Finding(code=code, message=message, span=span,
                                     severity=info.severity, kernel=self.k.name,
                                     fixes=fixes or []))

    def _single_assignments(self) -> dict[str, ast.expr]:
        counts: dict[str, int] = {}
        values: dict[str, ast.expr] = {}
        for node in self.nodes:
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                counts[node.id] = counts.get(node.id, 0) + 1
            if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name):
                values[node.targets[0].id] = node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                    and node.value is not None:
                values[node.target.id] = node.value
        return {n: v for n, v in values.items() if counts.get(n) == 1 and n not in self.params}

    def _cases(self) -> list[_Case]:
        defaults: dict[str, int] = {}
        for p in self.k.params:
            if p.is_constexpr and p.default is not None and p.default.tree is not None:
                v = _const_int(p.default.tree)
                if v is not None:
                    defaults[p.name] = v
        configs = [(dict(c.kwargs), f"autotune config #{i + 1}"
                    + (f" (line {c.span.line + 1})" if c.span else ""))
                   for i, c in enumerate(self.k.autotune)] or [({}, "")]
        launches = []
        for site in self.parsed.launches:
            if site.kernel != self.k.name:
                continue
            vals = {}
            for name, arg in bind_args(site, self.k).items():
                if name in self.constexpr and arg.source and arg.source[0] == "int":
                    vals[name] = arg.source[1]
            launches.append((vals, f"launch at line {site.span.line + 1}"))
        launches = launches or [({}, "")]
        cases = []
        for (cv, cw), (lv, lw) in itertools.product(configs, launches):
            values = dict(defaults)
            values.update({k: v for k, v in cv.items() if isinstance(v, int)})
            values.update(lv)
            where = ", ".join(w for w in (cw, lw) if w)
            if not where and any(n in defaults for n in values):
                where = "parameter defaults"
            cases.append(_Case(values, where))
            if len(cases) >= MAX_CASES:
                break
        return cases

    def eval(self, node: ast.expr, case: _Case, depth: int = 0) -> int | None:
        """The integer value of ``node`` under ``case``, or None when not known."""
        if depth > 20:
            return None
        d = depth + 1
        if isinstance(node, ast.Constant):
            v = node.value
            return v if isinstance(v, int) and not isinstance(v, bool) else None
        if isinstance(node, ast.Name):
            if node.id in case.values:
                return case.values[node.id]
            if node.id in self.single:
                return self.eval(self.single[node.id], case, d)
            if node.id in self.module_consts and node.id not in self.params:
                return self.module_consts[node.id]
            return None
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            v = self.eval(node.operand, case, d)
            return -v if v is not None else None
        if isinstance(node, ast.BinOp):
            a, b = self.eval(node.left, case, d), self.eval(node.right, case, d)
            if a is None or b is None:
                return None
            try:
                if isinstance(node.op, ast.Add):
                    return a + b
                if isinstance(node.op, ast.Sub):
                    return a - b
                if isinstance(node.op, ast.Mult):
                    return a * b
                if isinstance(node.op, ast.FloorDiv):
                    return a // b
                if isinstance(node.op, ast.Mod):
                    return a % b
                if isinstance(node.op, ast.LShift) and 0 <= b < 64:
                    return a << b
                if isinstance(node.op, ast.RShift) and 0 <= b < 64:
                    return a >> b
                if isinstance(node.op, ast.Pow) and 0 <= b < 64:
                    return a ** b
            except ZeroDivisionError:
                return None
            return None
        if isinstance(node, ast.Call) and not node.keywords:
            name = self._tl(node.func) or _dotted(node.func) or ""
            last = name.split(".")[-1]
            args = [self.eval(a, case, d) for a in node.args]
            if any(a is None for a in args):
                return None
            if last == "constexpr" and len(args) == 1:
                return args[0]
            if last == "cdiv" and len(args) == 2 and args[1]:
                return -(-args[0] // args[1])
            if last in ("min", "minimum") and args:
                return min(args)
            if last in ("max", "maximum") and args:
                return max(args)
            if last == "next_power_of_2" and len(args) == 1 and args[0] >= 0:
                return 1 << max(args[0] - 1, 0).bit_length()
        return None

    def param_roots(self, node: ast.expr, depth: int = 0) -> list[tuple[ast.Name, Param]]:
        """Parameters whose *value* ``node`` computes with, directly or through
        single-assignment locals of scalar arithmetic; the Name returned is the one written
        in ``node`` (where a fix or message points). ``x.shape``, ``x.dtype`` and the like
        are compile-time properties, not the parameter's value, and are not followed."""
        out = []
        if depth > 10:
            return out
        for n in _value_names(node):
            if n.id in self.params:
                out.append((n, self.params[n.id]))
            elif n.id in self.single and _scalar_arith(self.single[n.id]):
                for _, p in self.param_roots(self.single[n.id], depth + 1):
                    out.append((n, p))
        return out

    def compile_time(self, node: ast.expr, depth: int = 0) -> bool:
        """True when ``node`` is known while compiling (constexprs, dtypes, shapes,
        constants), so that an ``if`` on it keeps only one branch."""
        if depth > 20:
            return False
        d = depth + 1
        if isinstance(node, ast.Constant):
            return True
        if isinstance(node, ast.Name):
            if node.id in self.constexpr or node.id in self.module_consts \
                    or node.id in self.parsed.imports:
                return True
            if node.id in self.params:
                # A helper's parameters are constexpr whenever its callers pass constexprs.
                return not self.entry
            if node.id in self.single:
                return self.compile_time(self.single[node.id], d)
            return False
        if isinstance(node, ast.Attribute):
            return node.attr in _COMPILE_TIME_ATTRS or self.compile_time(node.value, d)
        if isinstance(node, ast.Call):
            return self.compile_time(node.func, d) and all(
                self.compile_time(a, d) for a in node.args) and all(
                self.compile_time(k.value, d) for k in node.keywords)
        if isinstance(node, (ast.Compare, ast.BoolOp, ast.UnaryOp, ast.BinOp, ast.Tuple,
                             ast.List, ast.Subscript, ast.IfExp)):
            return all(self.compile_time(c, d) for c in ast.iter_child_nodes(node)
                       if isinstance(c, ast.expr))
        return False

    def _maybe_dead(self) -> set[int]:
        """Nodes inside a branch of an ``if`` on a compile-time condition: Triton compiles
        only the branch taken, so a construct there may never reach the compiler."""
        out: set[int] = set()
        for node in self.nodes:
            if isinstance(node, (ast.If, ast.IfExp)) and self.compile_time(node.test):
                self.tick()
                branches = ([*node.body, *node.orelse] if isinstance(node, ast.If)
                            else [node.body, node.orelse])
                for stmt in branches:
                    # Breadth-first order meets an enclosing branch first: a subtree already
                    # in ``out`` is complete, and walking it again made elif chains quadratic.
                    if id(stmt) not in out:
                        out.update(id(n) for n in astnodes.walk_list(stmt))
        return out

    def constexpr_fix(self, p: Param) -> list[Fix]:
        text = _constexpr_text(self.parsed.imports)
        line = self.parsed.lines[p.span.end_line] if p.span.end_line < len(self.parsed.lines) \
            else ""
        if p.annotation is None:
            edit = TextEdit(Span(p.span.end_line, p.span.end_col, p.span.end_line,
                                 p.span.end_col), f": {text}")
        else:
            m = re.compile(r"\s*:\s*").match(line, p.span.end_col)
            if not m or not line.startswith(p.annotation, m.end()):
                return []
            start = m.end()
            edit = TextEdit(Span(p.span.end_line, start, p.span.end_line,
                                 start + len(p.annotation)), text)
        return [Fix(title=f"Declare '{p.name}' as {text}", edits=(edit,))]

    # --- rules --------------------------------------------------------------------------

    def run(self) -> list[Finding]:
        calls = [n for n in self.nodes if isinstance(n, ast.Call)]
        for call in calls:
            self.tick()
            name = self._tl(call.func)
            if name == "arange":
                self.check_arange(call)
            elif name in ("program_id", "num_programs"):
                self.check_axis(call, name)
            elif name in ("make_block_ptr", "advance"):
                self.check_block_ptr(call, name)
            elif name in ("make_tensor_descriptor", "load_tensor_descriptor",
                          "store_tensor_descriptor"):
                self.check_descriptor(call, name)
            if name is not None and (name in _SHAPE_FUNCS or name == "static_range"):
                self.check_shape_use(call, name)
            elif isinstance(call.func, ast.Attribute) and call.func.attr in _SHAPE_METHODS \
                    and name is None:
                self.check_shape_use(call, call.func.attr)
            if isinstance(call.func, ast.Name) and call.func.id == "print":
                self.check_print(call)
        self.check_python_constructs()
        self.check_dots()
        return self.findings

    def _arange_bounds(self, call: ast.Call) -> tuple[ast.expr, ast.expr] | None:
        args = list(call.args)
        kws = {kw.arg: kw.value for kw in call.keywords if kw.arg}
        start = args[0] if args else kws.get("start")
        end = args[1] if len(args) > 1 else kws.get("end")
        if start is None or end is None:
            return None
        return start, end

    def check_arange(self, call: ast.Call) -> None:
        bounds = self._arange_bounds(call)
        if bounds is None:
            return
        start, end = bounds
        reported_param = False
        if self.entry:
            for bound in (start, end):
                for name_node, p in self.param_roots(bound):
                    if not p.is_constexpr:
                        via = "" if name_node.id == p.name else f" (through '{name_node.id}')"
                        self.add("KS502", f"tl.arange bound uses parameter '{p.name}'{via}, "
                                 "which is not tl.constexpr; arange bounds must be "
                                 "compile-time constants", ast_span(name_node),
                                 self.constexpr_fix(p), node=call)
                        reported_param = True
        if reported_param:
            return
        for case in self.cases:
            s, e = self.eval(start, case), self.eval(end, case)
            if s is None or e is None:
                continue
            n = e - s
            if n > 0 and n & (n - 1) == 0:
                continue
            literal = isinstance(start, ast.Constant) and isinstance(end, ast.Constant)
            where = "" if literal or not case.where else f" with {_fmt(case, call, self)} " \
                                                         f"({case.where})"
            if n <= 0:
                msg = f"tl.arange({s}, {e}) is empty or reversed{where}; end must exceed start"
            else:
                msg = (f"tl.arange({s}, {e}) spans {n} elements{where}, not a power of two "
                       f"(use {1 << (n - 1).bit_length()} and mask the extra lanes)")
            self.add("KS501", msg, ast_span(call), node=call)
            return

    def check_axis(self, call: ast.Call, name: str) -> None:
        axis = call.args[0] if call.args else next(
            (kw.value for kw in call.keywords if kw.arg == "axis"), None)
        if axis is None:
            return
        for case in self.cases:
            v = self.eval(axis, case)
            if v is not None and v not in (0, 1, 2):
                self.add("KS507", f"tl.{name}({v}): a grid has axes 0, 1 and 2 only",
                         ast_span(axis), node=call)
                return

    def _uses(self, names: set[str]) -> bool:
        if self._tl_used is None:  # once per kernel, not once per block-pointer call
            self._tl_used = {self._tl(n.func) for n in self.nodes if isinstance(n, ast.Call)}
        return not self._tl_used.isdisjoint(names)

    # KS508 ignores compile-time branches: a kernel whose every branch uses block pointers
    # fails in all of them; a kernel that also uses the other API is taken to dispatch on
    # the Triton version and is not reported.
    def check_block_ptr(self, call: ast.Call, name: str) -> None:
        if self.version is None or self.version < BLOCK_PTR_REMOVED:
            return
        if self._uses({"make_tensor_descriptor"}):
            return
        self.add("KS508", f"tl.{name} (block pointers) was removed in Triton "
                 f"{_v(BLOCK_PTR_REMOVED)}; the installed Triton is {_v(self.version)}: use "
                 "tensor descriptors (tl.make_tensor_descriptor)", ast_span(call.func))

    def check_descriptor(self, call: ast.Call, name: str) -> None:
        if self.version is None or self.version >= TENSOR_DESCRIPTOR_ADDED:
            return
        if self._uses({"make_block_ptr"}):
            return
        self.add("KS508", f"tl.{name} (tensor descriptors) needs Triton >= "
                 f"{_v(TENSOR_DESCRIPTOR_ADDED)}; the installed Triton is {_v(self.version)}: "
                 "use block pointers (tl.make_block_ptr)", ast_span(call.func))

    def check_shape_use(self, call: ast.Call, name: str) -> None:
        if not self.entry:
            return
        if name == "static_range":
            shape_args = list(call.args) + [kw.value for kw in call.keywords]
            what = "a tl.static_range bound"
        elif isinstance(call.func, ast.Attribute) and name in _SHAPE_METHODS \
                and self._tl(call.func) is None:
            shape_args = list(call.args) + [kw.value for kw in call.keywords
                                            if kw.arg == "shape"]
            what = f"the shape of .{name}()"
        else:
            idx = _SHAPE_FUNCS[name][0]
            shape_args = list(call.args[idx:idx + 1]) + [kw.value for kw in call.keywords
                                                         if kw.arg == "shape"]
            what = f"the shape of tl.{name}"
        seen = set()
        for arg in shape_args:
            for name_node, p in self.param_roots(arg):
                if p.is_constexpr or (name_node.id, p.name) in seen:
                    continue
                seen.add((name_node.id, p.name))
                via = "" if name_node.id == p.name else f" (through '{name_node.id}')"
                self.add("KS504", f"parameter '{p.name}'{via} is used as {what} but is not "
                         "declared tl.constexpr", ast_span(name_node), self.constexpr_fix(p),
                         node=call)

    def check_print(self, call: ast.Call) -> None:
        tl = _tl_alias(self.parsed.imports)
        span = ast_span(call.func)
        edits = [TextEdit(span, f"{tl}.device_print")]
        if call.args and not (isinstance(call.args[0], ast.Constant)
                              and isinstance(call.args[0].value, str)):
            first = ast_span(call.args[0])
            edits.append(TextEdit(Span(first.line, first.col, first.line, first.col), '"", '))
        fixes = [Fix(title=f"Use {tl}.device_print", edits=tuple(edits))] if call.args else []
        self.add("KS506", f"print() in a jit function: use {tl}.device_print for runtime "
                 f"values (or {tl}.static_print for compile-time values)", span, fixes,
                 node=call)

    def check_python_constructs(self) -> None:
        fn = self.k.tree
        for i, node in enumerate(self.nodes):
            if i & 1023 == 1023:
                self.tick(1)
            if node is fn:
                continue
            what = _unsupported(node, self)
            if what is None:
                continue
            label, span, hint = what
            self.add("KS505", f"{label} is not supported inside a @triton.jit function"
                     + (f"; {hint}" if hint else ""), span, node=node)

    # --- tl.dot shapes --------------------------------------------------------------------

    def check_dots(self) -> None:
        dots = [n for n in self.nodes
                if isinstance(n, ast.Call) and self._tl(n.func) == "dot" and len(n.args) >= 2]
        if not dots:
            return
        reported: set[int] = set()
        for case in self.cases:
            shapes = _ShapeInference(self, case)
            shapes.run(self.k.tree.body)
            for call in dots:
                if id(call) in reported or id(call) not in shapes.at_dot:
                    continue
                (sa, da), (sb, db) = shapes.at_dot[id(call)]
                msg = self._dot_problem(sa, sb, da, db)
                if msg:
                    where = f" ({case.where})" if case.where else ""
                    self.add("KS503", msg + where, ast_span(call), node=call)
                    reported.add(id(call))

    def _dot_problem(self, sa, sb, da, db) -> str | None:
        if not sa or not sb or len(sa) < 2 or len(sb) < 2:
            return None
        m, k_a = sa[-2], sa[-1]
        k_b, n = sb[-2], sb[-1]
        ks = [k for k in (k_a, k_b) if k is not None]
        shape = f"a: {_shape(sa)}, b: {_shape(sb)}"
        if self.version is not None and self.version < DOT_MIN_ALL_DIMS_BEFORE:
            small = [(nm, v) for nm, v in (("M", m), ("N", n), ("K", min(ks) if ks else None))
                     if v is not None and v < 16]
            if small:
                nm, v = small[0]
                return (f"tl.dot operand dimension {nm}={v} is below 16 ({shape}); Triton "
                        f"{_v(self.version)} needs M, N and K >= 16")
            return None
        if not ks:
            return None
        k = min(ks)
        bits = da or db
        need = {8: 32, 16: 16, 32: 8, 64: 4}.get(bits or 16, 16)
        if k >= need:
            return None
        kind = {8: "8-bit", 16: "16-bit", 32: "fp32", 64: "fp64"}.get(bits or 16)
        assumed = "" if bits else " (operand dtype unknown: assuming fp16/bf16)"
        return (f"tl.dot contracts K={k} elements ({shape}); {kind} operands need "
                f"K >= {need}{assumed}")


class _ShapeInference:
    """Tile shapes of local values under one case, in statement order (branches joined)."""

    def __init__(self, rules: _KernelRules, case: _Case):
        self.r = rules
        self.case = case
        self.env: dict[str, tuple | None] = {}
        self.dtype: dict[str, int | None] = {}
        self.at_dot: dict[int, tuple] = {}

    def run(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.stmt(stmt)

    def stmt(self, s: ast.stmt) -> None:
        self.r.tick()
        if isinstance(s, (ast.If, ast.While)):
            self.scan(s.test)
            before = dict(self.env)
            self.run(s.body)
            after_body = self.env
            self.env = dict(before)
            self.run(s.orelse)
            self.env = _join(after_body, self.env)
            return
        if isinstance(s, ast.For):
            self.scan(s.iter)
            for n in ast.walk(s.target):
                if isinstance(n, ast.Name):
                    self.env[n.id] = ()
            self.run(s.body)
            self.run(s.orelse)
            return
        if isinstance(s, (ast.With,)):
            self.run(s.body)
            return
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Try)):
            return
        self.scan(s)
        if isinstance(s, ast.Assign):
            shape, bits = self.shape(s.value), self.bits(s.value)
            for t in s.targets:
                if isinstance(t, ast.Name):
                    self.env[t.id] = shape
                    self.dtype[t.id] = bits
                else:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            self.env[n.id] = None
                            self.dtype[n.id] = None
        elif isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value:
            self.env[s.target.id] = self.shape(s.value)
            self.dtype[s.target.id] = self.bits(s.value)
        elif isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name):
            self.env[s.target.id] = _broadcast(self.env.get(s.target.id),
                                               self.shape(s.value))

    def scan(self, node: ast.AST) -> None:
        for n in ast.walk(node):
            if isinstance(n, ast.Call) and self.r._tl(n.func) == "dot" and len(n.args) >= 2:
                self.at_dot[id(n)] = ((self.shape(n.args[0]), self.bits(n.args[0])),
                                      (self.shape(n.args[1]), self.bits(n.args[1])))

    def bits(self, node: ast.expr) -> int | None:
        if isinstance(node, ast.Name):
            return self.dtype.get(node.id)
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and node.func.attr == "to" and node.args:
                return _dtype_bits(node.args[0])
            name = self.r._tl(node.func)
            if name in ("zeros", "full", "cast"):
                for kw in node.keywords:
                    if kw.arg == "dtype":
                        return _dtype_bits(kw.value)
                if name == "cast" and len(node.args) > 1:
                    return _dtype_bits(node.args[1])
                if name == "full" and len(node.args) > 2:
                    return _dtype_bits(node.args[2])
                if name == "zeros" and len(node.args) > 1:
                    return _dtype_bits(node.args[1])
        return None

    def shape(self, node: ast.expr, depth: int = 0) -> tuple | None:
        if depth > 30:
            return None
        d = depth + 1
        ev = self.r.eval
        if isinstance(node, ast.Constant):
            return ()
        if isinstance(node, ast.Name):
            if node.id in self.env:
                return self.env[node.id]
            if node.id in self.r.params:
                return ()
            return None
        if isinstance(node, ast.BinOp):
            return _broadcast(self.shape(node.left, d), self.shape(node.right, d))
        if isinstance(node, ast.UnaryOp):
            return self.shape(node.operand, d)
        if isinstance(node, ast.Subscript):
            base = self.shape(node.value, d)
            if base is None:
                return None
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            out, i = [], 0
            for it in items:
                if isinstance(it, ast.Constant) and it.value is None:
                    out.append(1)
                elif isinstance(it, ast.Slice) and it.lower is None and it.upper is None:
                    if i >= len(base):
                        return None
                    out.append(base[i])
                    i += 1
                else:
                    return None
            return tuple(out) + tuple(base[i:])
        if isinstance(node, ast.Attribute) and node.attr == "T":
            s = self.shape(node.value, d)
            return tuple(reversed(s)) if s is not None and len(s) == 2 else None
        if not isinstance(node, ast.Call):
            return None
        name = self.r._tl(node.func)
        if name == "arange":
            b = self.r._arange_bounds(node)
            if b is None:
                return None
            s, e = ev(b[0], self.case), ev(b[1], self.case)
            return ((e - s) if s is not None and e is not None else None,)
        if name in ("zeros", "full"):
            shape_node = node.args[0] if node.args else next(
                (kw.value for kw in node.keywords if kw.arg == "shape"), None)
            return self.literal_shape(shape_node)
        if name in ("reshape", "view", "broadcast_to") and len(node.args) >= 2:
            return self.literal_shape(node.args[1] if len(node.args) == 2
                                      else ast.Tuple(elts=node.args[1:]))
        if name == "load" and node.args:
            return self.shape(node.args[0], d)
        if name == "dot" and len(node.args) >= 2:
            a, b = self.shape(node.args[0], d), self.shape(node.args[1], d)
            if a is None or b is None or len(a) < 2 or len(b) < 2:
                return None
            return a[:-1] + (b[-1],)
        if name == "trans" and node.args:
            s = self.shape(node.args[0], d)
            return tuple(reversed(s)) if s is not None and len(s) == 2 else None
        if name in ("sum", "max", "min", "argmax", "argmin", "reduce", "xor_sum"):
            return None
        if name in _ELEMENTWISE or (name or "").startswith("math."):
            shapes = [self.shape(a, d) for a in node.args]
            out: tuple | None = ()
            for s in shapes:
                out = _broadcast(out, s)
            return out
        if isinstance(node.func, ast.Attribute) and node.func.attr == "to":
            return self.shape(node.func.value, d)
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("reshape", "view") \
                and name is None:
            arg = node.args[0] if len(node.args) == 1 else ast.Tuple(elts=node.args)
            return self.literal_shape(arg)
        return None

    def literal_shape(self, node: ast.expr | None) -> tuple | None:
        if node is None:
            return None
        items = node.elts if isinstance(node, (ast.Tuple, ast.List)) else [node]
        return tuple(self.r.eval(it, self.case) for it in items)


_COMPILE_TIME_ATTRS = {"dtype", "shape", "type", "primitive_bitwidth", "element_ty",
                       "numel", "rank", "scalar", "value", "is_floating", "is_int",
                       "is_fp8", "is_fp16", "is_bf16", "is_fp32", "is_int_signed"}
_SCALAR_FUNCS = {"cdiv", "min", "max", "next_power_of_2", "constexpr", "minimum", "maximum"}


def _value_names(node: ast.expr) -> list[ast.Name]:
    """Names read for their value: not the bases of ``.shape``/``.dtype``-like attributes,
    not callees."""
    out = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Attribute):
            if n.attr in _COMPILE_TIME_ATTRS:
                continue
            stack.append(n.value)
        elif isinstance(n, ast.Call):
            stack.extend(n.args)
            stack.extend(k.value for k in n.keywords)
        elif isinstance(n, ast.Name):
            if isinstance(n.ctx, ast.Load):
                out.append(n)
        else:
            stack.extend(ast.iter_child_nodes(n))
    return out


def _scalar_arith(node: ast.expr) -> bool:
    """Scalar integer arithmetic: names, constants, + - * // %, cdiv/min/max."""
    callee_parts = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            name = _dotted(n.func) or ""
            if name.split(".")[-1] not in _SCALAR_FUNCS:
                return False
            callee_parts.update(id(c) for c in ast.walk(n.func))
    for n in ast.walk(node):
        if isinstance(n, (ast.Subscript, ast.Attribute)) and id(n) not in callee_parts:
            return False
    return True


def _join(a: dict, b: dict) -> dict:
    out = {}
    for k in set(a) | set(b):
        out[k] = a.get(k) if a.get(k) == b.get(k) else None
    return out


def _broadcast(a: tuple | None, b: tuple | None) -> tuple | None:
    if a is None or b is None:
        return None
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x == 1:
            out.append(y)
        elif y == 1:
            out.append(x)
        elif x is None:
            out.append(y)
        elif y is None or x == y:
            out.append(x)
        else:
            return None  # incompatible: Triton will complain itself; not this rule's job
    return tuple(out)


def _dtype_bits(node: ast.expr) -> int | None:
    d = _dotted(node)
    if d is None:
        return None
    return _DTYPE_BITS.get(d.split(".")[-1])


def _shape(s: tuple) -> str:
    return "[" + ", ".join("?" if v is None else str(v) for v in s) + "]"


def _fmt(case: _Case, call: ast.Call, rules: _KernelRules) -> str:
    used = {n.id for n in ast.walk(call) if isinstance(n, ast.Name)}
    frontier = list(used)
    while frontier:
        name = frontier.pop()
        if name in rules.single:
            for n in ast.walk(rules.single[name]):
                if isinstance(n, ast.Name) and n.id not in used:
                    used.add(n.id)
                    frontier.append(n.id)
    parts = [f"{k}={v}" for k, v in case.values.items() if k in used]
    return " ".join(parts) or "these values"


def _v(version: tuple) -> str:
    return ".".join(str(x) for x in version)


def _dotted(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _const_int(node: ast.expr) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) \
            and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _const_int(node.operand)
        return -v if v is not None else None
    return None


def _module_constants(parsed: ParsedFile) -> dict[str, int]:
    """Module-level ``NAME = tl.constexpr(64)`` / ``NAME: tl.constexpr = 64`` (the globals a
    kernel may read)."""
    cache = getattr(parsed, "_ks_module_consts", None)
    if cache is not None:
        return cache
    out: dict[str, int] = {}
    for line in parsed.lines:
        m = re.match(r"([A-Za-z_]\w*)\s*(?::\s*[\w.]*constexpr\s*)?=\s*(?:[\w.]*constexpr\()?"
                     r"\s*(-?\d+)\s*\)?\s*(?:#.*)?$", line)
        if m and ("constexpr" in line):
            out[m.group(1)] = int(m.group(2))
    parsed._ks_module_consts = out  # type: ignore[attr-defined]
    return out


def _tl_alias(imports: dict[str, str]) -> str:
    for alias, target in imports.items():
        if target == "triton.language":
            return alias
    if "triton" in imports.values() or "triton" in imports:
        return "triton.language"
    return "tl"


def _constexpr_text(imports: dict[str, str]) -> str:
    if imports.get("constexpr") in ("triton.language.constexpr", "triton.language.core.constexpr"):
        return "constexpr"
    return f"{_tl_alias(imports)}.constexpr"


_STATEMENTS = {ast.Try: "try", ast.Global: "global", ast.Nonlocal: "nonlocal",
               ast.Delete: "del", ast.Raise: "raise", ast.Break: "break",
               ast.Continue: "continue", ast.ClassDef: "class", ast.AsyncFor: "async",
               ast.AsyncWith: "async", ast.AsyncFunctionDef: "async", ast.FunctionDef: "def"}
_LABELS = {ast.Try: "try/except", ast.Global: "a global statement",
           ast.Nonlocal: "a nonlocal statement", ast.Delete: "a del statement",
           ast.Raise: "a raise statement",
           ast.Break: "break", ast.Continue: "continue",
           ast.ClassDef: "a class definition", ast.AsyncFor: "async for",
           ast.AsyncWith: "async with", ast.AsyncFunctionDef: "an async function definition",
           ast.FunctionDef: "a nested function definition",
           ast.Lambda: "a lambda", ast.SetComp: "a set comprehension",
           ast.DictComp: "a dict comprehension", ast.GeneratorExp: "a generator expression",
           ast.Yield: "yield", ast.YieldFrom: "yield from", ast.Await: "await",
           ast.Dict: "a dict literal", ast.Set: "a set literal"}
if hasattr(ast, "TryStar"):
    _STATEMENTS[ast.TryStar] = "try"
    _LABELS[ast.TryStar] = "try/except*"
if hasattr(ast, "Match"):
    _STATEMENTS[ast.Match] = "match"
    _LABELS[ast.Match] = "a match statement"

_HINTS = {ast.Raise: "use tl.device_assert or tl.static_assert",
          ast.FunctionDef: "move it to module level and decorate it with @triton.jit",
          ast.Lambda: "use a @triton.jit helper function",
          ast.Try: "check conditions with tl.device_assert instead",
          ast.Break: "fold the exit condition into the loop bounds or a mask",
          ast.Continue: "guard the rest of the body with an if or a mask",
          ast.GeneratorExp: "use a loop", ast.SetComp: "use a loop",
          ast.DictComp: "use a loop"}

_NON_TUPLE_ITERS = {"range", "enumerate", "zip", "static_range", "arange", "reversed"}


def _unsupported(node: ast.AST, rules: _KernelRules) -> tuple[str, Span, str] | None:
    t = type(node)
    if t in _STATEMENTS:
        kw = _STATEMENTS[t]
        line, col = node.lineno - 1, node.col_offset
        return _LABELS[t], Span(line, col, line, col + len(kw)), _HINTS.get(t, "")
    if t in _LABELS:
        return _LABELS[t], ast_span(node), _HINTS.get(t, "")
    if t is ast.With:
        for item in node.items:
            ctx_expr = item.context_expr
            func = ctx_expr.func if isinstance(ctx_expr, ast.Call) else ctx_expr
            dotted = _dotted(func) or ""
            full = resolve(dotted, rules.parsed.imports) if dotted else ""
            if not (full.startswith("triton") or dotted.startswith(("tl.", "triton."))):
                line, col = node.lineno - 1, node.col_offset
                return ("a with statement over a non-Triton context manager",
                        Span(line, col, line, col + 4), "")
        return None
    if t is ast.ListComp:
        if len(node.generators) > 1:
            return "a nested list comprehension", ast_span(node), "use nested loops"
        it = node.generators[0].iter
        if isinstance(it, ast.Call):
            name = (_dotted(it.func) or "").split(".")[-1]
            if name in _NON_TUPLE_ITERS:
                return (f"a list comprehension over {name}(...)", ast_span(node),
                        "Triton builds list comprehensions only from tuples; use a "
                        "tl.static_range loop")
        return None
    if t is ast.Call and isinstance(node.func, ast.Name) and node.func.id == rules.k.name:
        return (f"recursion ('{rules.k.name}' calls itself)", ast_span(node.func),
                "write it as a loop")
    return None


__all__ = ["check_rules", "installed_triton_version"]
