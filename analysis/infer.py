"""Annotations inferred from a launch site in the same file.

Most real kernels carry no ``#@`` directives, but the function that launches them says a lot:
``kernel[grid](x, out, x.stride(0), x.shape[1], n, BLOCK=1024)`` tells which tensor each
pointer argument addresses, which argument is a stride or a size of which tensor, and how many
programs run. This module turns that into the directives a user would have written:

* ``#@ tensor X = x_ptr[r: n_rows, c: n_cols] strides(stride_xr, 1)`` for a pointer argument
  bound to a tensor whose layout the launch site fixes completely (``_layout``): its rank is
  known (``a, b = x.shape``, or a size and a stride passed for every dimension), every size is
  a kernel argument, and every access through the pointer uses exactly the declared strides;
  ``x.numel()`` gives a flat tensor only when the addresses use no other runtime argument.
  Strides come from ``x.stride(i)`` arguments, a missing last stride is 1, no stride argument
  at all means row-major. Pointers accessed only in a helper, or through an index loaded from
  memory (gather/scatter), are not declared.
* ``#@ grid (cdiv(n, BLOCK),)`` when the launch grid is written literally and every name in it
  maps to a kernel argument (``triton.cdiv`` becomes ``cdiv``, host variables are traced one
  assignment back in the launching function, ``META['BLOCK']`` is ``BLOCK``).
* ``#@ assume A == B`` for two size arguments that are the same host value, and
  ``#@ assume n <= BLOCK`` for a constexpr the launcher sets to ``next_power_of_2`` of the size
  it passes as ``n``.

Only what is certain is emitted: a tensor with an unknown size or rank, or a grid with a name
that is not a kernel argument, is left out (a wrong directive would produce false findings;
docs/corpus.md, "Inferred annotations", has the measurement behind each rule).

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
from .launches import _MEMORY_OPS, bind_args, pointer_params
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


def infer(parsed: ParsedFile, kernel: KernelInfo) -> Inferred:
    """The inference for ``kernel`` from the first of its launch sites that binds arguments
    (see module docstring). Never raises on odd launchers: what is not understood is left
    out. The result is shared between callers (the engine asks for the grid twice per
    kernel): treat it as read-only."""
    # Kept on the ParsedFile, so it dies with it: a module-level table keyed by id(parsed)
    # kept up to 65 whole ParsedFiles alive after their documents were gone.
    cache = parsed.__dict__.setdefault("_ks_inferred", {})
    key = (kernel.name, kernel.span)
    hit = cache.get(key)
    if hit is not None and hit[0] is kernel.tree:
        return hit[1]
    out = _infer(parsed, kernel)
    cache[key] = (kernel.tree, out)
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
        out.assumes = _same_sizes(bound, kernel) + _power_of_two_blocks(bound, kernel, host,
                                                                         forms)
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
        self.ranks: dict[str, set[int]] = {}
        # names assigned in a branch or loop that does not also hold the launch: their last
        # assignment need not be the value at the launch (`if B <= 4096: BLOCK = ...`)
        self.conditional: set[str] = set()
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
        self.conditional = _conditional_names(body, launch.span.line)
        for node in sorted(assigns, key=lambda n: n.lineno):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.values[target.id] = node.value
                    self._forget_rank(target.id)
                elif isinstance(target, (ast.Tuple, ast.List)):
                    self._note_rank(target, node.value)
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

    def _forget_rank(self, name: str) -> None:
        # `x = x.view(-1, n)` after `a, b = x.shape`: the unpacking no longer says x's rank
        self.ranks.pop(name, None)

    def _note_rank(self, target: ast.Tuple | ast.List, value: ast.expr) -> None:
        """``a, b = x.shape`` (or ``x.size()``) says ``x`` has exactly two dimensions."""
        for el in target.elts:
            if isinstance(el, ast.Name):
                self._forget_rank(el.id)
        if any(isinstance(el, ast.Starred) for el in target.elts):
            return
        obj = None
        if isinstance(value, ast.Attribute) and value.attr == "shape":
            obj = value.value
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and \
                value.func.attr == "size" and not value.args and not value.keywords:
            obj = value.func.value
        if obj is not None:
            key = _canon(obj)
            if key:
                self.ranks.setdefault(key, set()).add(len(target.elts))

    def rank(self, name: str) -> int | None:
        """The number of dimensions of host tensor ``name`` when a tuple unpacking of its shape
        says it (and no two unpackings disagree), else None."""
        r = self.ranks.get(name)
        if r is None and self.same_shape_as(name) is not None:
            r = self.ranks.get(self.same_shape_as(name))
        return next(iter(r)) if r and len(r) == 1 else None

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
        v = host.values.get(node.id)
        if v is not None:
            # a host variable that happens to share a kernel parameter's name (`D = x.shape[1]`
            # while the kernel's D gets `group_size`) is the host value, not the parameter
            return _to_kernel(v, forms, host, params, depth + 1)
        if node.id in params:
            return node
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
    """The tensors whose layout the launch site fixes completely (see ``_layout``)."""
    pointers = pointer_params(kernel)
    params = {p.name for p in kernel.params}
    by_tensor: dict[str, dict] = {}
    ptr_of: dict[str, str] = {}
    stride_like: set[str] = {p for p in params if "stride" in p.lower()}
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
        if src[0] == "stride":
            stride_like.add(pname)
        if src[0] == "numel":
            info["numel"] = info["numel"] or pname
        elif isinstance(src[2], int) and src[2] >= 0:
            info[src[0]].setdefault(src[2], pname)
        else:
            info["odd"] = True  # x.shape[-1]: which dimension is unknown without the rank
    # a constexpr stride (`inp_stride: tl.constexpr`) scales addresses like a runtime one
    runtime = {p.name for p in kernel.params
               if not p.is_constexpr or "stride" in p.name.lower()} - pointers
    uses = address_params(kernel, pointers)
    out: list[InferredTensor] = []
    used_names = set(params)
    for tensor, ptr in ptr_of.items():
        info = by_tensor.get(tensor)
        twin = host.same_shape_as(tensor)
        if (info is None or not (info["shape"] or info["numel"])) and twin in by_tensor:
            tw = by_tensor[twin]
            info = {"shape": tw["shape"], "numel": tw["numel"], "odd": tw.get("odd"),
                    "stride": (info or {}).get("stride", {})}
        if info is None or info.get("odd"):
            continue
        if not uses.get(ptr):
            continue  # accessed in a helper (or not at all): its addresses are not seen here
        if any(LOADED in u for u in uses.get(ptr, [])):
            continue  # indices read from memory can be anything: no size judges them
        layout = _layout(info, host.rank(tensor), [u & runtime for u in uses.get(ptr, [])],
                         stride_like)
        if layout is None:
            continue
        sizes, strides = layout
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


def _layout(info: dict, rank: int | None, used: list[set[str]],
            stride_like: set[str]) -> tuple[list[str], list[str] | None] | None:
    """Sizes and strides (None: row-major) of one host tensor, or None unless certain.

    A wrong declaration is worse than none (every access would be checked against it), so a
    layout is only returned when:

    * the rank is known: from ``a, b = x.shape`` in the launcher, or from sizes *and* strides
      passed for every dimension ``0..r-1`` (a stride pair says how the kernel walks ``x``);
      one ``x.shape[0]`` alone says nothing about the other dimensions
      (``N = x.numel() // M`` is no size the launch site names);
    * every size of those dimensions is a kernel argument;
    * every address through the pointer (``used``: the runtime arguments each access's
      address mentions) uses every declared non-unit stride and no stride-like argument the
      declaration lacks (another tensor's stride, a stride of a dimension not declared);
    * a flat ``x.numel()`` declaration only when the addresses mention no runtime argument but
      the element count itself (``row * stride + col`` against ``numel`` is not provable).
    """
    shape, stride, numel = info["shape"], info["stride"], info["numel"]
    full = rank
    if full is None and shape and stride and set(shape) == set(stride) == set(range(len(shape))):
        full = len(shape)
    if full is not None and all(i in shape for i in range(full)) and \
            set(stride) <= set(range(full)) and set(shape) <= set(range(full)):
        sizes = [shape[i] for i in range(full)]
        strides: list[str] | None
        if stride:
            strides = []
            for i in range(full):
                if i in stride:
                    strides.append(stride[i])
                elif i == full - 1:
                    strides.append("1")
                else:
                    return None
            needed = [s for s in strides if s != "1"]
            if full == 1 and strides == ["1"]:
                strides = None
        else:
            strides = None
            needed = sizes[1:]  # row-major: the offset multiplies by the later sizes
        if all(all(n in u for n in needed) and not (u & stride_like) - set(needed)
               for u in used):
            return sizes, strides
        # a flat walk over a multi-dimensional tensor may still be a 1-D use of numel
    if numel and not stride and all(not u - {numel} for u in used):
        return [numel], None
    return None


# Marker in ``address_params``: the address adds a value loaded from memory.
LOADED = "<loaded>"


def address_params(kernel: KernelInfo, pointers: set[str]) -> dict[str, list[set[str]]]:
    """For each pointer parameter, per memory access through it, the other parameters the
    access's address mentions.

    Follows local assignments (``X += row * stride``, ``ptrs = base + offs``, loop targets
    take their ``range`` bounds) from the pointer argument of every memory operation. Values
    loaded through another pointer contribute their parameters (conservative: more parameters
    mean less inference) but do not make that pointer a base of the address.
    """
    names = {p.name for p in kernel.params}
    out: dict[str, list[set[str]]] = {}
    if kernel.tree is None:
        return out
    assigned: dict[str, list[ast.expr]] = {}

    def bind(target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Name):
            assigned.setdefault(target.id, []).append(value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for el in target.elts:
                bind(el.value if isinstance(el, ast.Starred) else el, value)

    for node in ast.walk(kernel.tree):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                bind(t, node.value)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            bind(node.target, node.value)
        elif isinstance(node, ast.For):
            bind(node.target, node.iter)
        elif isinstance(node, ast.NamedExpr):
            bind(node.target, node.value)
    for node in ast.walk(kernel.tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in _MEMORY_OPS):
            continue
        ptr = node.args[0] if node.args else next(
            (k.value for k in node.keywords if k.arg in ("pointer", "base")), None)
        if ptr is None:
            continue
        bases: set[str] = set()
        used: set[str] = set()
        seen: set[tuple[str, bool]] = set()
        stack: list[tuple[ast.AST, bool]] = [(ptr, True)]
        while stack:
            e, direct = stack.pop()
            if isinstance(e, ast.Name):
                if (e.id, direct) in seen:
                    continue
                seen.add((e.id, direct))
                if e.id in names:
                    (bases if direct and e.id in pointers else used).add(e.id)
                for v in assigned.get(e.id, []):
                    stack.append((v, direct))
                continue
            if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and \
                    e.func.attr in _MEMORY_OPS:
                if direct:
                    used.add(LOADED)  # a gather/scatter index: data, not a size
                stack.extend((c, False) for c in ast.iter_child_nodes(e))
                continue
            stack.extend((c, direct) for c in ast.iter_child_nodes(e))
        for b in bases:
            out.setdefault(b, []).append(used - pointers)
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


_BRANCHING = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.Match) \
    if hasattr(ast, "Match") else (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try)


def _conditional_names(body: ast.AST, launch_line: int) -> set[str]:
    """Names assigned inside an ``if``/loop/``try`` of ``body`` that does not contain the
    launch line (0-based): whether such an assignment ran is not known at the launch."""
    out: set[str] = set()
    stack: list[tuple[ast.AST, bool]] = [(body, False)]
    while stack:
        node, cond = stack.pop()
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and cond:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                out |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
        here = cond
        if isinstance(node, _BRANCHING) and node is not body:
            holds = node.lineno - 1 <= launch_line <= (node.end_lineno or node.lineno) - 1
            here = cond or not holds
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                      ast.Lambda)):
                stack.append((child, here))
    return out


_NEXT_POW2 = {"next_power_of_2", "next_pow2", "next_power_of_two"}


def _power_of_two_blocks(bound: dict, kernel: KernelInfo, host: "_HostScope",
                         forms: dict[str, str]) -> list[str]:
    """``assume n <= BLOCK`` for a constexpr the launcher sets to ``triton.next_power_of_2``
    of the value it also passes as the size argument ``n`` (the row softmax:
    ``BLOCK_SIZE = triton.next_power_of_2(n_cols)``). A power of two at least ``n`` is what
    makes one block cover a row; without the fact the engine's constexpr case (say 64) was
    combined with any ``n``, and counterexamples such as ``n_cols=4096 BLOCK_SIZE=64``
    described launches this launcher never makes."""
    out: list[str] = []
    for p in kernel.params:
        arg = bound.get(p.name)
        if arg is None or not p.is_constexpr or arg.expr.tree is None:
            continue
        call = arg.expr.tree
        seen = 0
        while isinstance(call, ast.Name) and call.id in host.values and seen < 8:
            if call.id in host.conditional:
                break
            call = host.values[call.id]
            seen += 1
        if not (isinstance(call, ast.Call) and len(call.args) == 1 and not call.keywords):
            continue
        fn = call.func
        name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(
            fn, ast.Name) else ""
        if name not in _NEXT_POW2:
            continue
        x = call.args[0]
        texts = [_canon(x)]
        if isinstance(x, ast.Name) and x.id in host.values:
            texts.append(_canon(host.values[x.id]))
        size = next((forms[t] for t in texts if t in forms), None)
        if size is None or size == p.name:
            continue
        sp = next((q for q in kernel.params if q.name == size), None)
        if sp is None or sp.is_constexpr:
            continue
        out.append(f"{size} <= {p.name}")
    return out


__all__ = ["Inferred", "InferredTensor", "annotation_fix", "infer", "infer_annotations",
           "infer_grid", "with_inferred_annotations"]
