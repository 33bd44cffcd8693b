"""Anti-cheating rules applied to every candidate before, and after, the gate.

1. **AST policy** (``check_policy``): the candidate must keep the kernel (a ``@triton.jit``
   function), the launcher, the BENCH dict, the reference and the input maker; the last three
   (and the timing baseline, if the spec names one) must be unchanged from the seed (a
   candidate may not move the goal posts); the launcher and
   the plain Python helpers it calls may not call the reference, a torch / numpy / library op
   outside a small allocation-and-layout allowlist, nor use ``@``; nothing may patch an
   imported module (``torch.allclose = ...``) or reach for ``setattr``/``globals``/``sys.modules``.
2. **Ghost replay** (``ghost_source``): the candidate with the kernel's body replaced by
   ``pass``. The loop runs it through the correctness stage: it must fail, because a launcher
   whose output does not depend on the kernel computes the result some other way.
3. **Held-out sizes** are the harness's (``agent.correctness``): drawn afresh per evaluation
   and never put into a prompt (``agent.prompts`` shows only the spec's ``shapes``).
4. **Review flag** (``review_flag``): a speedup more than ``factor`` times the best known is
   flagged for a human instead of being accepted.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

# torch functions a launcher may call: allocation, dtype/device plumbing, no arithmetic.
TORCH_ALLOWED = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "full", "full_like",
    "ones", "ones_like", "arange", "tensor", "device", "is_tensor", "Size", "finfo", "iinfo",
    "float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
    "bool", "float8_e4m3fn", "float8_e5m2", "promote_types", "result_type", "get_default_dtype",
    "no_grad", "inference_mode", "Generator", "manual_seed", "is_floating_point",
}
TORCH_ALLOWED_PREFIXES = ("torch.cuda.", "torch.version.", "torch.backends.")
# Tensor methods that compute (a launcher may reshape and allocate, not compute).
COMPUTE_METHODS = {
    "matmul", "mm", "bmm", "addmm", "baddbmm", "addbmm", "einsum", "softmax", "log_softmax",
    "sum", "mean", "max", "min", "amax", "amin", "exp", "exp2", "log", "sqrt", "rsqrt",
    "add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "pow", "cumsum", "cumprod",
    "norm", "layer_norm", "relu", "gelu", "silu", "sigmoid", "tanh", "sort", "topk", "var",
    "std", "prod", "logsumexp", "matrix_power", "dot", "outer", "linear", "conv1d", "conv2d",
    "scaled_dot_product_attention", "abs", "neg", "reciprocal", "clamp", "where", "lerp",
    "addcmul", "addcdiv", "maximum", "minimum", "copy_", "index_add", "index_add_",
    "scatter", "scatter_add", "gather", "masked_fill", "masked_fill_",
}
FOREIGN_MODULES = ("numpy", "scipy", "cupy", "jax", "tensorflow", "numba", "ctypes", "cffi",
                   "subprocess", "torch.nn", "torch.ops", "torch._C", "torch.linalg",
                   "torch.fft", "torch.special", "importlib", "pickle", "marshal")
INTROSPECTION = {"setattr", "delattr", "globals", "vars", "__import__", "exec", "eval",
                 "compile"}


@dataclass(frozen=True)
class Violation:
    """One policy breach. ``line`` is 1-based (0 when the whole file is concerned); ``what``
    names the offending call (``torch.sort``, ``.sum()``), used to match the seed's own calls."""

    rule: str
    line: int
    message: str
    what: str = ""

    def __str__(self) -> str:
        return f"line {self.line}: [{self.rule}] {self.message}" if self.line else \
            f"[{self.rule}] {self.message}"


def _module_aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> dotted module/object path for every import in the file."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    out[a.asname] = a.name
                else:
                    out[a.name.split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    base = aliases.get(node.id)
    if base is None:
        return None
    return ".".join([base] + parts[::-1])


def _toplevel(tree: ast.Module) -> dict[str, ast.AST]:
    out: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = node
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = node
    return out


def _is_jit(fn: ast.AST) -> bool:
    return isinstance(fn, ast.FunctionDef) and any(
        "jit" in ast.unparse(d) for d in fn.decorator_list)


def _same(a: ast.AST | None, b: ast.AST | None) -> bool:
    if a is None or b is None:
        return a is b
    strip = (lambda n: ast.dump(n, annotate_fields=False, include_attributes=False))
    return strip(a) == strip(b)


def check_policy(source: str, seed_source: str, *, kernel: str, launcher: str,
                 reference: str | None = None, inputs: str | None = None,
                 bench_name: str = "BENCH", baseline: str | None = None) -> list[Violation]:
    """All policy breaches of ``source`` (empty list: the candidate may be evaluated).

    Library calls that the seed's own host code already makes (a MoE launcher that sorts
    token ids with ``torch.sort``, say) are allowed: the rule is against *new* library
    computation, which is how a rewrite would hand the real work to torch.

    Args:
        source: the candidate file; seed_source: the original file it must stay faithful to.
        kernel, launcher, reference, inputs, baseline: the names from the bench spec.
    """
    found = _violations(source, seed_source, kernel=kernel, launcher=launcher,
                        reference=reference, inputs=inputs, bench_name=bench_name,
                        baseline=baseline)
    if not found or source == seed_source:
        return [] if source == seed_source else found
    own = {(v.rule, v.what) for v in _violations(seed_source, seed_source, kernel=kernel,
                                                  launcher=launcher, reference=reference,
                                                  inputs=inputs, bench_name=bench_name,
                                                  baseline=baseline)
           if v.what}
    return [v for v in found if not (v.what and (v.rule, v.what) in own)]


def _violations(source: str, seed_source: str, *, kernel: str, launcher: str,
                reference: str | None, inputs: str | None,
                bench_name: str, baseline: str | None = None) -> list[Violation]:
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [Violation("syntax", exc.lineno or 0, f"the file does not parse: {exc.msg}")]
    try:
        seed_tree = ast.parse(seed_source)
    except SyntaxError:
        seed_tree = ast.Module(body=[], type_ignores=[])
    top, seed_top = _toplevel(tree), _toplevel(seed_tree)
    out: list[Violation] = []
    if not _is_jit(top.get(kernel)):
        out.append(Violation("kernel-missing", 0,
                             f"the kernel {kernel!r} must stay a @triton.jit function"))
    if not isinstance(top.get(launcher), ast.FunctionDef):
        out.append(Violation("launcher-missing", 0,
                             f"the launcher {launcher!r} must stay a function"))
    for name, what in ((bench_name, "bench spec"), (reference, "reference"),
                       (inputs, "input maker"), (baseline, "timing baseline")):
        if name and name in seed_top and not _same(top.get(name), seed_top.get(name)):
            node = top.get(name)
            out.append(Violation("goalposts", getattr(node, "lineno", 0),
                                 f"the {what} {name!r} was changed; it must stay exactly as "
                                 f"in the original file"))
    aliases = _module_aliases(tree)
    # Patching library objects anywhere in the file.
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        for t in targets:
            if isinstance(t, ast.Attribute) and _dotted(t, aliases):
                out.append(Violation("patch", t.lineno,
                                     f"assigns to {ast.unparse(t)}: patching an imported "
                                     f"module is not allowed"))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in INTROSPECTION:
            out.append(Violation("introspection", node.lineno,
                                 f"calls {node.func.id}(): dynamic code and attribute "
                                 f"tricks are not allowed"))
        if isinstance(node, ast.Attribute) and node.attr == "modules" and \
                _dotted(node, aliases) == "sys.modules":
            out.append(Violation("introspection", node.lineno, "touches sys.modules"))
    # The launcher and the plain helpers it reaches.
    seen: set[str] = set()
    todo = [launcher]
    while todo:
        name = todo.pop()
        fn = top.get(name)
        if name in seen or not isinstance(fn, ast.FunctionDef) or _is_jit(fn):
            continue
        seen.add(name)
        for node in ast.walk(fn):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                out.append(Violation("library-compute", node.lineno,
                                     f"{name} multiplies matrices with '@' in Python; the "
                                     f"kernel must do the computation", "@"))
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Name):
                if reference and func.id == reference:
                    out.append(Violation("calls-reference", node.lineno,
                                         f"{name} calls the reference {reference!r}",
                                         reference))
                elif func.id in top and func.id not in seen:
                    todo.append(func.id)
                dotted = aliases.get(func.id)
            else:
                dotted = _dotted(func, aliases)
            if dotted:
                bad = None
                if dotted.startswith(FOREIGN_MODULES) or dotted.split(".")[0] in {
                        m.split(".")[0] for m in FOREIGN_MODULES if "." not in m}:
                    bad = f"calls {dotted}"
                elif dotted.startswith("torch.") and not dotted.startswith(
                        TORCH_ALLOWED_PREFIXES) and dotted.split(".")[1] not in TORCH_ALLOWED:
                    bad = f"calls {dotted}"
                if bad:
                    out.append(Violation("library-compute", node.lineno,
                                         f"{name} {bad}: a torch or library op may not do "
                                         f"the main computation; only allocation and layout "
                                         f"calls are allowed in the launcher", dotted))
            elif isinstance(func, ast.Attribute) and func.attr in COMPUTE_METHODS:
                out.append(Violation("library-compute", node.lineno,
                                     f"{name} calls .{func.attr}() on a tensor: the kernel "
                                     f"must do the computation", f".{func.attr}()"))
    return out


def ghost_source(source: str, kernel: str) -> str | None:
    """``source`` with the body of ``kernel`` replaced by ``pass`` (None if not found)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == kernel),
              None)
    if fn is None or not fn.body:
        return None
    lines = source.splitlines(keepends=True)
    first = fn.body[0]
    start = first.lineno - 1
    # The body starts after the signature's colon: keep comment lines above the first
    # statement out of the way by cutting from the statement's line.
    indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())] or "    "
    end = fn.end_lineno or start + 1
    return "".join(lines[:start]) + f"{indent}pass  # ghost: kernel body removed\n" + \
        "".join(lines[end:])


def review_flag(score: float | None, best_known: float, factor: float = 10.0) -> str | None:
    """A reason string when ``score`` beats ``best_known`` by more than ``factor``, else None."""
    if score is None or best_known <= 0 or score <= factor * best_known:
        return None
    return (f"speedup {score:.2f}x is more than {factor:g}x the best known ({best_known:.2f}x): "
            f"held for review, not accepted")
