"""Read a kernel's bench spec without executing the file.

Two formats are accepted (docs/bench.md and docs/harness.md describe them):

* **BENCH dict** (the project's own): a jit kernel carries the directive ``#@ bench NAME`` and
  the module defines ``NAME = {...}`` as a literal dict (readable with ``ast.literal_eval``)
  with the keys ``kernel``, ``launcher``, ``reference``, ``inputs`` (function names in the same
  file), ``shapes`` (small correctness shapes: dicts of size name -> int), ``bench_shapes``
  (large timing shapes), ``dtypes`` (torch dtype names), and optionally ``tolerance`` (dtype ->
  ``{"atol", "rtol"}``), ``flops`` and ``bytes`` (Python expressions over the shape names and
  ``elt``, the bytes per element of the dtype), ``config_space``, ``heldout_shapes`` and
  ``baseline`` (a function timed beside the candidate instead of the reference).
* **KernelBench task file**: ``class Model(nn.Module)``, ``get_inputs()`` and
  ``get_init_inputs()``; the candidate provides ``class ModelNew``.

Everything here is static (``ast``), so a spec is read in the caller's process even when the
file is untrusted; the functions it names are only ever called inside a worker process.
"""
from __future__ import annotations

import ast
import hashlib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Dtype names the harness understands, with their size in bytes (``elt`` in formulas).
DTYPE_BYTES = {
    "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8,
    "float8_e4m3fn": 1, "float8_e5m2": 1,
    "int8": 1, "uint8": 1, "int16": 2, "int32": 4, "int64": 8, "bool": 1,
}
_DTYPE_ALIASES = {"fp16": "float16", "half": "float16", "bf16": "bfloat16", "fp32": "float32",
                  "float": "float32", "fp64": "float64", "double": "float64"}

_REQUIRED = ("kernel", "launcher", "reference", "inputs", "shapes", "dtypes")
_KNOWN = set(_REQUIRED) | {"bench_shapes", "tolerance", "flops", "bytes", "config_space",
                           "heldout_shapes", "baseline", "description"}
_DIRECTIVE = re.compile(r"^\s*#@\s*bench\b\s*(?P<rest>.*)$")


class SpecError(ValueError):
    """A bench spec is missing, malformed or inconsistent. ``str()`` is ``file:line: message``."""

    def __init__(self, path: str | Path, line: int | None, message: str):
        self.path = str(path)
        self.line = line
        self.message = message
        where = f"{self.path}:{line}" if line else self.path
        super().__init__(f"{where}: {message}")


@dataclass
class BenchSpec:
    """How to check and time one kernel.

    Attributes:
        path: the file holding the spec (and the original kernel, launcher and reference).
        text: that file's text, as read (the spec's identity in cache keys).
        format: ``"bench"`` (a BENCH dict) or ``"kernelbench"``.
        kernel: the jit kernel being optimised (``ModelNew`` for KernelBench).
        launcher: function ``launcher(*inputs, **overrides)`` returning the output tensor(s).
        reference: function ``reference(*inputs)`` returning the expected output(s).
        inputs: function ``make_inputs(shape, dtype, device, seed) -> tuple``.
        shapes: small correctness shapes, each a dict of size name -> int.
        bench_shapes: large timing shapes (defaults to ``shapes`` when absent).
        dtypes: torch dtype names, e.g. ``["float16"]`` (``[None]``: as the inputs come).
        tolerance: dtype name -> ``{"atol": float, "rtol": float}`` overriding the defaults.
        flops: expression for floating-point operations per call, or None.
        bytes: expression for the fewest bytes moved per call, or None.
        config_space: constexpr / num_warps / num_stages name -> list of values (for tuners).
        heldout_shapes: shapes used only by the correctness stage's held-out check, or None
            (then one is drawn per evaluation; see ``correctness.heldout_shapes``).
        baseline: function ``baseline(*inputs)`` timed beside the candidate (the fastest known
            implementation, e.g. cuBLAS through ``torch.matmul`` in the input dtype), or None to
            time ``reference`` itself.
        line: 1-based line of the spec (the BENCH assignment or ``class Model``).
        directive_line: 1-based line of ``#@ bench`` in the kernel, if any.
        name: the BENCH variable name.
    """

    path: Path
    text: str
    format: str
    kernel: str
    launcher: str
    reference: str
    inputs: str
    shapes: list[dict[str, int]]
    bench_shapes: list[dict[str, int]]
    dtypes: list[str | None]
    tolerance: dict[str, dict[str, float]] = field(default_factory=dict)
    flops: str | None = None
    bytes: str | None = None
    config_space: dict[str, list[Any]] = field(default_factory=dict)
    heldout_shapes: list[dict[str, int]] | None = None
    baseline: str | None = None
    line: int = 1
    directive_line: int | None = None
    name: str = "BENCH"

    @property
    def digest(self) -> str:
        """sha256 of the spec file's text and the kernel name: the cache key's spec part."""
        h = hashlib.sha256(self.text.encode("utf-8"))
        h.update(f"\0{self.format}\0{self.kernel}".encode("utf-8"))
        return h.hexdigest()

    def flops_for(self, shape: dict[str, int], dtype: str | None) -> float | None:
        """Floating-point operations of one call at ``shape`` (None when the spec has no formula).

        Raises:
            SpecError: the formula uses a name that is neither a size nor ``elt``.
        """
        return self._eval("flops", self.flops, shape, dtype)

    def bytes_for(self, shape: dict[str, int], dtype: str | None) -> float | None:
        """Fewest bytes one call must move through device memory at ``shape``, or None."""
        return self._eval("bytes", self.bytes, shape, dtype)

    def _eval(self, key: str, expr: str | None, shape: dict[str, int], dtype: str | None):
        if not expr:
            return None
        names: dict[str, float] = dict(shape)
        names["elt"] = DTYPE_BYTES.get(dtype or "float32", 4)
        try:
            return float(eval_formula(expr, names))
        except FormulaError as exc:
            raise SpecError(self.path, self.line, f"{key}: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly summary (no file text)."""
        return {
            "path": str(self.path), "format": self.format, "kernel": self.kernel,
            "launcher": self.launcher, "reference": self.reference, "inputs": self.inputs,
            "shapes": self.shapes, "bench_shapes": self.bench_shapes, "dtypes": self.dtypes,
            "tolerance": self.tolerance, "flops": self.flops, "bytes": self.bytes,
            "config_space": self.config_space, "heldout_shapes": self.heldout_shapes,
            "baseline": self.baseline,
        }


def normalize_dtype(name: Any) -> str:
    """``"fp16"``/``"torch.float16"``/``"float16"`` -> ``"float16"``.

    Raises:
        ValueError: an unknown dtype name (the message lists the accepted ones).
    """
    if not isinstance(name, str):
        raise ValueError(f"dtype must be a string, got {name!r}")
    key = name.strip()
    if key.startswith("torch."):
        key = key[len("torch."):]
    key = _DTYPE_ALIASES.get(key, key)
    if key not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {name!r}; expected one of {', '.join(DTYPE_BYTES)}")
    return key


def load_spec(path: str | Path, kernel: str | None = None) -> BenchSpec:
    """Read the bench spec of ``kernel`` (or of the file's only benchmarked kernel).

    Args:
        path: a Python file with a ``#@ bench NAME`` directive and a ``NAME = {...}`` dict, or a
            KernelBench task file (``Model``, ``get_inputs``, ``get_init_inputs``).
        kernel: the jit kernel's name (``FILE::KERNEL``); None picks the only one.

    Raises:
        SpecError: unreadable file, syntax error, no spec, several candidates and no
            ``kernel``, missing or ill-typed keys, names that are not functions of the file.
    """
    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        raise SpecError(p, None, f"cannot read file: {exc.strerror or exc}") from None
    try:
        tree = ast.parse(text, filename=str(p))
    except SyntaxError as exc:
        raise SpecError(p, exc.lineno, f"syntax error: {exc.msg}") from None
    functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    directives = _bench_directives(text, tree)
    assigns = _module_dicts(tree)

    if directives or any(_looks_like_bench(v) for v in assigns.values()):
        return _load_bench(p, text, functions, directives, assigns, kernel)
    if "Model" in classes and "get_inputs" in functions:
        return _load_kernelbench(p, text, functions, classes, kernel)
    raise SpecError(p, None, "no bench spec: expected a kernel with '#@ bench NAME' and a module-level"
                             " dict NAME = {...}, or a KernelBench task (class Model, get_inputs,"
                             " get_init_inputs)")


# --- the BENCH dict -----------------------------------------------------------------------

def _jit_kernels(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) or "autotune" in ast.unparse(d)
                                                     or "heuristics" in ast.unparse(d)
                                                     for d in node.decorator_list):
            out[node.name] = node
    return out


def _bench_directives(text: str, tree: ast.Module) -> dict[str, tuple[str, int]]:
    """kernel name -> (BENCH variable name, 1-based line) for every ``#@ bench`` directive that
    sits inside a jit function or in the comment block directly above it."""
    lines = text.splitlines()
    found: dict[str, tuple[str, int]] = {}
    for name, fn in _jit_kernels(tree).items():
        first = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
        start = first - 1
        while start - 1 >= 0 and lines[start - 1].lstrip().startswith("#"):
            start -= 1
        end = fn.end_lineno or fn.lineno
        for i in range(start, min(end, len(lines))):
            m = _DIRECTIVE.match(lines[i])
            if m:
                rest = m.group("rest").strip() or "BENCH"
                found[name] = (rest.split()[0], i + 1)
                break
    return found


def _module_dicts(tree: ast.Module) -> dict[str, ast.Assign]:
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                and isinstance(node.value, ast.Dict):
            out[node.target.id] = node
    return out


def _looks_like_bench(node) -> bool:
    keys = {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
    return {"kernel", "launcher", "reference"} <= keys


def _load_bench(p, text, functions, directives, assigns, kernel) -> BenchSpec:
    if kernel is not None:
        if kernel in directives:
            var, dline = directives[kernel]
        else:
            matches = [n for n, a in assigns.items() if _looks_like_bench(a) and _kernel_of(a) == kernel]
            if not matches:
                known = sorted(set(directives) | {k for a in assigns.values()
                                                  if _looks_like_bench(a) for k in [_kernel_of(a)] if k})
                raise SpecError(p, None, f"no bench spec for kernel {kernel!r}"
                                         + (f"; benchmarked kernels: {', '.join(known)}" if known else ""))
            var, dline = matches[0], None
    elif len(directives) == 1:
        kernel, (var, dline) = next(iter(directives.items()))
    elif len(directives) > 1:
        raise SpecError(p, None, "several kernels carry '#@ bench' ("
                        + ", ".join(sorted(directives)) + "): name one as FILE::KERNEL")
    else:
        candidates = [n for n, a in assigns.items() if _looks_like_bench(a)]
        if len(candidates) > 1:
            raise SpecError(p, None, f"several bench dicts ({', '.join(candidates)}): name a kernel as FILE::KERNEL")
        var, dline = candidates[0], None
    if var not in assigns:
        raise SpecError(p, dline, f"'#@ bench {var}' names no module-level dict literal {var} = {{...}}")
    node = assigns[var]
    line = node.lineno
    try:
        data = ast.literal_eval(node.value)
    except (ValueError, SyntaxError, TypeError) as exc:
        raise SpecError(p, line, f"{var} must be a literal dict (ast.literal_eval): {exc}") from None

    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise SpecError(p, line, f"{var} lacks key(s) {', '.join(missing)}")
    unknown = sorted(set(data) - _KNOWN)
    if unknown:
        raise SpecError(p, line, f"{var} has unknown key(s) {', '.join(map(str, unknown))};"
                                 f" known: {', '.join(sorted(_KNOWN))}")
    for key in ("kernel", "launcher", "reference", "inputs"):
        if not isinstance(data[key], str):
            raise SpecError(p, _key_line(node, key, line), f"{var}[{key!r}] must be a function name string")
    if kernel is None:
        kernel = data["kernel"]
    if data["kernel"] != kernel:
        raise SpecError(p, _key_line(node, "kernel", line),
                        f"{var}['kernel'] is {data['kernel']!r} but the directive sits in {kernel!r}")
    if data.get("baseline") is not None and not isinstance(data["baseline"], str):
        raise SpecError(p, _key_line(node, "baseline", line), f"{var}['baseline'] must be a function name string")
    for key in ("launcher", "reference", "inputs", "baseline"):
        if key in data and data[key] is not None and data[key] not in functions:
            raise SpecError(p, _key_line(node, key, line),
                            f"{var}[{key!r}] names {data[key]!r}, which is no module-level function of this file")
    jit = _jit_kernels(ast.parse(text))
    if kernel not in jit:
        raise SpecError(p, _key_line(node, "kernel", line), f"kernel {kernel!r} is no @triton.jit function of this file")

    shapes = _shapes(p, node, data, "shapes", line, required=True)
    bench_shapes = _shapes(p, node, data, "bench_shapes", line, required=False) or list(shapes)
    heldout = _shapes(p, node, data, "heldout_shapes", line, required=False)
    dtypes = data["dtypes"]
    if not isinstance(dtypes, list) or not dtypes:
        raise SpecError(p, _key_line(node, "dtypes", line), f"{var}['dtypes'] must be a non-empty list")
    try:
        dtypes = [normalize_dtype(d) for d in dtypes]
    except ValueError as exc:
        raise SpecError(p, _key_line(node, "dtypes", line), str(exc)) from None
    tolerance = _tolerance(p, node, data.get("tolerance") or {}, line)
    for key in ("flops", "bytes"):
        expr = data.get(key)
        if expr is None:
            continue
        if not isinstance(expr, str):
            raise SpecError(p, _key_line(node, key, line), f"{var}[{key!r}] must be an expression string")
        names = set(shapes[0]) | {"elt"}
        try:
            check_formula(expr, names)
        except FormulaError as exc:
            raise SpecError(p, _key_line(node, key, line), f"{var}[{key!r}]: {exc}") from None
    config_space = data.get("config_space") or {}
    if not isinstance(config_space, dict) or not all(isinstance(v, (list, tuple)) for v in config_space.values()):
        raise SpecError(p, _key_line(node, "config_space", line), f"{var}['config_space'] must map names to lists")
    return BenchSpec(path=p, text=text, format="bench", kernel=kernel, launcher=data["launcher"],
                     reference=data["reference"], inputs=data["inputs"], shapes=shapes,
                     bench_shapes=bench_shapes, dtypes=dtypes, tolerance=tolerance,
                     flops=data.get("flops"), bytes=data.get("bytes"),
                     config_space={k: list(v) for k, v in config_space.items()},
                     heldout_shapes=heldout, baseline=data.get("baseline"), line=line,
                     directive_line=dline, name=var)


def _kernel_of(node) -> str | None:
    for k, v in zip(node.value.keys, node.value.values):
        if isinstance(k, ast.Constant) and k.value == "kernel" and isinstance(v, ast.Constant):
            return v.value
    return None


def _key_line(node, key: str, default: int) -> int:
    for k in node.value.keys:
        if isinstance(k, ast.Constant) and k.value == key:
            return k.lineno
    return default


def _shapes(p, node, data, key, line, required) -> list[dict[str, int]] | None:
    value = data.get(key)
    if value is None:
        if required:
            raise SpecError(p, line, f"missing {key!r}")
        return None
    at = _key_line(node, key, line)
    if not isinstance(value, list) or not value:
        raise SpecError(p, at, f"{key!r} must be a non-empty list of dicts of size name -> int")
    out = []
    for i, s in enumerate(value):
        if not isinstance(s, dict) or not s or not all(isinstance(k, str) and isinstance(v, int)
                                                        and not isinstance(v, bool) and v >= 0
                                                        for k, v in s.items()):
            raise SpecError(p, at, f"{key}[{i}] must be a dict of size name -> int >= 0, got {s!r}")
        out.append(dict(s))
    names = set(out[0])
    for i, s in enumerate(out):
        if set(s) != names:
            raise SpecError(p, at, f"{key}[{i}] has sizes {sorted(s)}, {key}[0] has {sorted(names)}")
    return out


def _tolerance(p, node, tol, line) -> dict[str, dict[str, float]]:
    at = _key_line(node, "tolerance", line)
    if not isinstance(tol, dict):
        raise SpecError(p, at, "'tolerance' must map dtype -> {'atol': float, 'rtol': float}")
    out = {}
    for dt, v in tol.items():
        try:
            name = normalize_dtype(dt)
        except ValueError as exc:
            raise SpecError(p, at, f"tolerance: {exc}") from None
        if not isinstance(v, dict) or not set(v) <= {"atol", "rtol"} or not v \
                or not all(isinstance(x, (int, float)) and x >= 0 for x in v.values()):
            raise SpecError(p, at, f"tolerance[{dt!r}] must be {{'atol': float, 'rtol': float}}, got {v!r}")
        out[name] = {k: float(x) for k, x in v.items()}
    return out


# --- KernelBench --------------------------------------------------------------------------

def _load_kernelbench(p, text, functions, classes, kernel) -> BenchSpec:
    if kernel not in (None, "Model", "ModelNew"):
        raise SpecError(p, None, f"a KernelBench task has no kernel {kernel!r}; use ModelNew")
    if "get_init_inputs" not in functions:
        raise SpecError(p, classes["Model"].lineno, "KernelBench task lacks get_init_inputs()")
    forward = [n for n in classes["Model"].body if isinstance(n, ast.FunctionDef) and n.name == "forward"]
    if not forward:
        raise SpecError(p, classes["Model"].lineno, "class Model has no forward()")
    return BenchSpec(path=p, text=text, format="kernelbench", kernel="ModelNew",
                     launcher="ModelNew", reference="Model", inputs="get_inputs",
                     shapes=[{}], bench_shapes=[{}], dtypes=[None],
                     line=classes["Model"].lineno, name="Model")


# --- formulas -----------------------------------------------------------------------------

class FormulaError(ValueError):
    """A FLOP/byte formula uses something other than arithmetic on sizes."""


_FUNCS = {
    "cdiv": lambda a, b: -(-a // b), "min": min, "max": max, "ceil": math.ceil,
    "floor": math.floor, "log2": math.log2, "sqrt": math.sqrt, "abs": abs,
}
_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)


def check_formula(expr: str, names: set[str]) -> None:
    """Raise FormulaError unless ``expr`` is arithmetic over ``names`` and the allowed functions
    (``cdiv min max ceil floor log2 sqrt abs``)."""
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as exc:
        raise FormulaError(f"not an expression: {exc.msg}") from None
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if node.id not in names and node.id not in _FUNCS:
                raise FormulaError(f"unknown name {node.id!r} (sizes: {', '.join(sorted(names))})")
        elif isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCS or node.keywords:
                raise FormulaError(f"only {', '.join(_FUNCS)} may be called")
        elif isinstance(node, ast.BinOp):
            if not isinstance(node.op, _BINOPS):
                raise FormulaError(f"operator {type(node.op).__name__} not allowed")
        elif isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, (ast.USub, ast.UAdd)):
                raise FormulaError("only unary + and - are allowed")
        elif isinstance(node, ast.Constant):
            if not isinstance(node.value, (int, float)) or isinstance(node.value, bool):
                raise FormulaError(f"constant {node.value!r} is not a number")
        elif not isinstance(node, (ast.Expression, ast.Load, ast.operator, ast.unaryop)):
            raise FormulaError(f"{type(node).__name__} not allowed in a formula")


def eval_formula(expr: str, names: dict[str, float]) -> float:
    """Evaluate a checked formula with ``names`` bound (no builtins reachable)."""
    check_formula(expr, set(names))
    code = compile(ast.parse(expr, mode="eval"), "<formula>", "eval")
    return eval(code, {"__builtins__": {}}, {**_FUNCS, **names})  # noqa: S307 - AST checked above
