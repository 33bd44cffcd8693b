"""Annotations inferred from a launch site in the same file.

Most real kernels carry no ``#@`` directives, but the function that launches them says a lot:
``kernel[grid](x, out, x.stride(0), x.shape[1], n, BLOCK=1024)`` tells which tensor each
pointer argument addresses, which argument is a stride or a size of which tensor, and how many
programs run. This module turns that into the directives a user would have written:

* ``#@ tensor X = x_ptr[r: n_rows, c: n_cols] strides(stride_xr, 1)`` for every pointer
  argument bound to a tensor whose every size is passed to the kernel (``x.shape[i]``,
  ``x.size(i)``, ``x.numel()`` for a flat tensor); strides come from ``x.stride(i)``
  arguments, a missing last stride is 1, no stride argument at all means row-major.
* ``#@ grid (cdiv(n, BLOCK),)`` when the launch grid is written literally and every name in it
  maps to a kernel argument (``triton.cdiv`` becomes ``cdiv``, host variables are traced one
  assignment back in the launching function, ``META['BLOCK']`` is ``BLOCK``).
* ``#@ assume A == B`` for two size arguments that are the same host value.

Only what is certain is emitted: a tensor with an unknown size, or a grid with a name that is
not a kernel argument, is left out (a wrong directive would produce false findings).

The language server offers the lines as a code action; the engine applies
``with_inferred_annotations`` before interpreting plain code, so un-annotated kernels with a
launch site get the annotated checks (bounds against the real sizes, coverage, races).
"""
from __future__ import annotations

import ast
import copy
import re
from dataclasses import dataclass, field, replace

from .exprs import parse_expr
from .kernel import (Dim, Directive, Expr, GridDecl, KernelInfo, LaunchSite,
                     ParsedFile, TensorDecl)
from .launches import bind_args, pointer_params
from .model import Fix, Span, TextEdit

_IDENT = re.compile(r"[A-Za-z_]\w*$")


@dataclass
class InferredTensor:
    """One inferred ``#@ tensor`` directive: ``name = ptr[dims] strides(strides)``.

    ``dims`` are (dimension name, size text) pairs; ``strides`` None means row-major."""

    name: str
    ptr: str
    dims: list[tuple[str, str]]
    strides: list[str] | None
    host: str  # the host expression of the tensor, e.g. "x"

    def line(self) -> str:
        dims = ", ".join(f"{d}: {s}" for d, s in self.dims)
        text = f"#@ tensor {self.name} = {self.ptr}[{dims}]"
        if self.strides is not None:
            text += f" strides({', '.join(self.strides)})"
        return text


@dataclass
class Inferred:
    """Everything inferred for one kernel from one launch site."""

    launch: LaunchSite | None = None
    tensors: list[InferredTensor] = field(default_factory=list)
    grid: list[str] | None = None
    assumes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [t.line() for t in self.tensors]
        if self.grid is not None:
            axes = ", ".join(self.grid)
            out.append(f"#@ grid ({axes}{',' if len(self.grid) == 1 else ''})")
        if self.assumes:
            out.append("#@ assume " + ", ".join(self.assumes))
        return out


def infer_annotations(parsed: ParsedFile, kernel: KernelInfo) -> list[str]:
    """Directive lines inferred from the first launch site of ``kernel`` in ``parsed``.

    Args:
        parsed: the front end's view of the file (launch sites included).
        kernel: a kernel of that file.

    Returns:
        ``#@`` lines, e.g. ``["#@ tensor X = x_ptr[i: n_elements]", "#@ grid (cdiv(n_elements,
        BLOCK),)"]``; empty when there is no launch site or nothing is certain. Directives the
        kernel already has (a declared pointer, a ``grid``) are not repeated.
    """
    inf = infer(parsed, kernel)
    ann = kernel.annotations
    declared = {d.ptr for d in ann.tensors.values()}
    names = {d.name for d in ann.tensors.values()}
    keep = Inferred(launch=inf.launch, assumes=inf.assumes,
                    grid=inf.grid if ann.grid is None else None)
    keep.tensors = [t for t in inf.tensors if t.ptr not in declared and t.name not in names]
    return keep.lines()


def annotation_fix(parsed: ParsedFile, kernel: KernelInfo) -> Fix | None:
    """The code action "insert the annotations inferred from the launch site": a ``Fix``
    inserting ``infer_annotations`` lines right above the kernel's first decorator (the
    directive block above a ``@triton.jit`` belongs to that kernel), indented like it. None
    when nothing is inferred. Callers verify by re-analysing the edited text."""
    lines = infer_annotations(parsed, kernel)
    if not lines:
        return None
    row = kernel.span.line
    text = parsed.lines[row] if row < len(parsed.lines) else ""
    indent = text[:len(text) - len(text.lstrip())]
    body = "".join(f"{indent}{l}\n" for l in lines)
    at = Span(row, 0, row, 0)
    return Fix(f"Insert {len(lines)} annotation{'s' if len(lines) > 1 else ''} inferred from "
               "the launch site", (TextEdit(at, body),))


_INFER_CACHE: dict = {}


def infer(parsed: ParsedFile, kernel: KernelInfo) -> Inferred:
    """The inference for ``kernel`` from the first of its launch sites that binds arguments
    (see module docstring). Never raises on odd launchers: what is not understood is left
    out. The result is shared between callers (the engine asks for the grid twice per
    kernel): treat it as read-only."""
    key = (id(parsed), kernel.name, kernel.span)
    hit = _INFER_CACHE.get(key)
    if hit is not None and hit[0] is parsed and hit[1] is kernel.tree:
        return hit[2]
    out = _infer(parsed, kernel)
    if len(_INFER_CACHE) > 64:
        _INFER_CACHE.clear()
    _INFER_CACHE[key] = (parsed, kernel.tree, out)
    return out


def _infer(parsed: ParsedFile, kernel: KernelInfo) -> Inferred:
    launch = next((l for l in parsed.launches if l.kernel == kernel.name), None)
    out = Inferred(launch=launch)
    if launch is None or kernel.tree is None:
        return out
    try:
        host = _HostScope(parsed, launch)
        bound = bind_args(launch, kernel)
        forms = _param_forms(bound, kernel)
        out.tensors = _tensors(kernel, bound, host)
        out.grid = _grid(launch, kernel, forms, host)
        out.assumes = _same_sizes(bound, kernel)
    except (RecursionError, ValueError, TypeError, AttributeError):
        return Inferred(launch=launch)
    return out


def infer_grid(parsed: ParsedFile, kernel: KernelInfo) -> list[Expr] | None:
    """The launch grid in kernel terms as ``Expr`` trees (spans: the launch site's grid), or
    None when it is not written literally or mentions a host name that is no argument."""
    inf = infer(parsed, kernel)
    if inf.grid is None or inf.launch is None:
        return None
    spans = [g.span for g in (inf.launch.grid or [])]
    out = []
    for i, text in enumerate(inf.grid):
        span = spans[i] if i < len(spans) else inf.launch.span
        out.append(Expr(text=text, tree=parse_expr(text), span=span))
    return out


def with_inferred_annotations(parsed: ParsedFile, kernel: KernelInfo) -> KernelInfo:
    """A copy of ``kernel`` whose annotations are completed with the inferred ones (declared
    tensors and grid win; nothing is removed). Returns ``kernel`` itself when nothing new is
    inferred. The inferred Exprs carry the launch site's span, so findings that point at a
    directive point at the launch that implied it."""
    inf = infer(parsed, kernel)
    ann = kernel.annotations
    declared = {d.ptr for d in ann.tensors.values()}
    names = {d.name for d in ann.tensors.values()}
    new_tensors = [t for t in inf.tensors if t.ptr not in declared and t.name not in names]
    new_grid = inf.grid if ann.grid is None else None
    if not new_tensors and new_grid is None:
        return kernel
    span = inf.launch.span if inf.launch is not None else kernel.name_span
    ann2 = copy.copy(ann)
    ann2.tensors = dict(ann.tensors)
    for t in new_tensors:
        dims = [Dim(d, Expr(s, parse_expr(s), span)) for d, s in t.dims]
        strides = None if t.strides is None else [Expr(s, parse_expr(s), span)
                                                  for s in t.strides]
        ann2.tensors[t.name] = TensorDecl(t.name, t.ptr, dims, strides, span)
    if new_grid is not None:
        ann2.grid = GridDecl([Expr(g, parse_expr(g), span) for g in new_grid], span)
    if inf.assumes and not ann.assumes:
        ann2.assumes = [Directive("assume", [Expr(a, parse_expr(a), span)
                                             for a in inf.assumes],
                                  ", ".join(inf.assumes), span, span.line)]
    return replace(kernel, annotations=ann2)


# --- host side ------------------------------------------------------------------------------

_MODULE_TREES: dict = {}


def module_tree(parsed: ParsedFile) -> ast.Module | None:
    """``ast.parse`` of the whole file, parsed once per ParsedFile (the launch inference, the
    grid checks and every kernel of the file share it; nobody mutates it). None on a syntax
    error."""
    key = id(parsed)
    hit = _MODULE_TREES.get(key)
    if hit is None or hit[0] is not parsed:
        try:
            tree = ast.parse(parsed.text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            tree = None
        _MODULE_TREES.clear()  # one file at a time: the editor and the benchmarks go file by file
        hit = _MODULE_TREES[key] = (parsed, tree)
    return hit[1]


class _HostScope:
    """Plain assignments of the launching function (``n = x.numel()``, ``M, K = a.shape``)
    before the launch, for tracing grid names back to launch arguments."""

    def __init__(self, parsed: ParsedFile, launch: LaunchSite):
        self.values: dict[str, ast.expr] = {}
        tree = module_tree(parsed)
        if tree is None:
            return
        fn = None
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    node.name == launch.function and \
                    node.lineno - 1 <= launch.span.line <= (node.end_lineno or 0):
                fn = node
                break
        body = fn if fn is not None else tree
        assigns = []
        for node in ast.walk(body):
            if isinstance(node, ast.Assign) and node.lineno - 1 <= launch.span.line:
                assigns.append(node)
        for node in sorted(assigns, key=lambda n: n.lineno):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.values[target.id] = node.value
                elif isinstance(target, (ast.Tuple, ast.List)):
                    for i, el in enumerate(target.elts):
                        if not isinstance(el, ast.Name):
                            continue
                        v = node.value
                        if isinstance(v, (ast.Tuple, ast.List)) and i < len(v.elts):
                            self.values[el.id] = v.elts[i]
                        elif isinstance(v, ast.Attribute) and v.attr == "shape":
                            self.values[el.id] = ast.Subscript(v, ast.Constant(i), ast.Load())
                        elif isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
                                and v.func.attr in ("size", "stride") and not v.args:
                            self.values[el.id] = ast.Call(v.func, [ast.Constant(i)], [])

    def same_shape_as(self, name: str) -> str | None:
        """``y = torch.empty_like(x)`` (or zeros_like/...) -> ``"x"``."""
        v = self.values.get(name)
        if isinstance(v, ast.Call) and isinstance(v.func, (ast.Attribute, ast.Name)):
            fname = v.func.attr if isinstance(v.func, ast.Attribute) else v.func.id
            if fname in ("empty_like", "zeros_like", "ones_like", "full_like", "rand_like",
                         "randn_like") and v.args:
                return _canon(v.args[0])
        return None


def _canon(node: ast.AST) -> str:
    """A canonical text for a host expression: ``x.size(1)`` and ``x.shape[1]`` agree."""
    try:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "size" and len(node.args) == 1:
            return f"{ast.unparse(node.func.value)}.shape[{ast.unparse(node.args[0])}]"
        return ast.unparse(node)
    except (ValueError, TypeError, AttributeError, RecursionError):
        return ""


def _source_forms(source: tuple | None) -> list[str]:
    if not source:
        return []
    kind = source[0]
    if kind == "shape":
        return [f"{source[1]}.shape[{source[2]}]"]
    if kind == "stride":
        return [f"{source[1]}.stride({source[2]})"]
    if kind == "numel":
        return [f"{source[1]}.numel()"]
    return []


def _param_forms(bound: dict, kernel: KernelInfo) -> dict[str, str]:
    """Host expression text -> the kernel parameter it is bound to."""
    forms: dict[str, str] = {}
    for pname, arg in bound.items():
        texts = _source_forms(arg.source)
        if arg.expr.tree is not None:
            texts.append(_canon(arg.expr.tree))
        for t in texts:
            if t and t not in forms:
                forms[t] = pname
    return forms


# --- grid -----------------------------------------------------------------------------------

_CDIV = {"cdiv", "ceil_div", "ceildiv"}


def _grid(launch: LaunchSite, kernel: KernelInfo, forms: dict[str, str],
          host: _HostScope) -> list[str] | None:
    if not launch.grid:
        return None
    params = {p.name for p in kernel.params}
    out = []
    for axis in launch.grid[:3]:
        if axis.tree is None:
            return None
        t = _to_kernel(axis.tree, forms, host, params, 0)
        if t is None:
            return None
        out.append(ast.unparse(t))
    return out


def _to_kernel(node: ast.expr, forms: dict[str, str], host: _HostScope, params: set[str],
               depth: int) -> ast.expr | None:
    """Rewrite a host expression into kernel parameters, or None when a name cannot be."""
    if depth > 4:
        return None
    key = _canon(node)
    if key in forms:
        return ast.Name(forms[key], ast.Load())
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and \
            not isinstance(node.value, bool):
        return node
    if isinstance(node, ast.Name):
        if node.id in params:
            return node
        v = host.values.get(node.id)
        if v is not None:
            return _to_kernel(v, forms, host, params, depth + 1)
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult,
                                                            ast.FloorDiv, ast.Mod)):
        a = _to_kernel(node.left, forms, host, params, depth)
        b = _to_kernel(node.right, forms, host, params, depth)
        if a is None or b is None:
            return None
        return ast.BinOp(a, node.op, b)
    if isinstance(node, ast.Call) and len(node.args) == 2 and not node.keywords:
        fname = node.func.attr if isinstance(node.func, ast.Attribute) else \
            node.func.id if isinstance(node.func, ast.Name) else ""
        if fname in _CDIV or fname in ("min", "max"):
            a = _to_kernel(node.args[0], forms, host, params, depth)
            b = _to_kernel(node.args[1], forms, host, params, depth)
            if a is None or b is None:
                return None
            name = "cdiv" if fname in _CDIV else fname
            return ast.Call(ast.Name(name, ast.Load()), [a, b], [])
    return None


# --- tensors --------------------------------------------------------------------------------

def _tensors(kernel: KernelInfo, bound: dict, host: _HostScope) -> list[InferredTensor]:
    pointers = pointer_params(kernel)
    params = {p.name for p in kernel.params}
    by_tensor: dict[str, dict] = {}
    ptr_of: dict[str, str] = {}
    for pname, arg in bound.items():
        src = arg.source
        if not src:
            continue
        if src[0] == "tensor" and pname in pointers:
            ptr_of.setdefault(src[1], pname)
            continue
        info = by_tensor.setdefault(src[1], {"shape": {}, "stride": {}, "numel": None}) \
            if src[0] in ("shape", "stride", "numel") else None
        if info is None:
            continue
        if src[0] == "numel":
            info["numel"] = info["numel"] or pname
        elif isinstance(src[2], int) and src[2] >= 0:
            info[src[0]].setdefault(src[2], pname)
    out: list[InferredTensor] = []
    used_names = set(params)
    for tensor, ptr in ptr_of.items():
        info = by_tensor.get(tensor)
        if (info is None or not (info["shape"] or info["numel"])) and host.same_shape_as(
                tensor) in by_tensor:
            twin = by_tensor[host.same_shape_as(tensor)]
            info = {"shape": twin["shape"], "numel": twin["numel"],
                    "stride": (info or {}).get("stride", {})}
        if info is None:
            continue
        rank = max([*info["shape"], *info["stride"]], default=-1) + 1
        sizes: list[str] | None
        if info["shape"] and all(i in info["shape"] for i in range(rank)):
            sizes = [info["shape"][i] for i in range(rank)]
        elif info["numel"] and rank <= 1:
            sizes = [info["numel"]]
            rank = 1
        else:
            continue
        strides: list[str] | None = None
        if info["stride"]:
            strides = []
            for i in range(rank):
                if i in info["stride"]:
                    strides.append(info["stride"][i])
                elif i == rank - 1:
                    strides.append("1")
                else:
                    strides = None
                    break
            if strides is not None and all(s == "1" for s in strides[-1:]) and \
                    len(strides) == 1:
                strides = None
        dims: list[tuple[str, str]] = []
        taken: set[str] = set()
        for s in sizes:
            d = _dim_name(s, params | taken)
            taken.add(d)
            dims.append((d, s))
        name = _tensor_name(tensor, used_names)
        used_names.add(name)
        out.append(InferredTensor(name, ptr, dims, strides, tensor))
    return out


def _dim_name(size: str, taken: set[str]) -> str:
    base = size.lower()
    for prefix in ("num_", "n_"):
        if base.startswith(prefix) and len(base) > len(prefix):
            base = base[len(prefix):]
            break
    if base in taken or not _IDENT.match(base):
        base = "d_" + size
    while base in taken:
        base += "_"
    return base


def _tensor_name(host: str, taken: set[str]) -> str:
    base = re.sub(r"\W", "_", host.split(".")[-1]).upper() or "T"
    if not _IDENT.match(base):
        base = "T_" + base
    name = base
    i = 2
    while name in taken:
        name = f"{base}{i}"
        i += 1
    return name


def _same_sizes(bound: dict, kernel: KernelInfo) -> list[str]:
    """``assume A == B`` for two runtime size arguments bound to the same host value."""
    seen: dict[str, str] = {}
    out: list[str] = []
    for p in kernel.params:
        arg = bound.get(p.name)
        if arg is None or p.is_constexpr or not arg.source or arg.source[0] not in (
                "shape", "numel"):
            continue
        key = _source_forms(arg.source)[0]
        if key in seen:
            out.append(f"{seen[key]} == {p.name}")
        else:
            seen[key] = p.name
    return out


__all__ = ["Inferred", "InferredTensor", "annotation_fix", "infer", "infer_annotations",
           "infer_grid", "with_inferred_annotations"]
