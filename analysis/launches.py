"""Launch sites: every ``kernel[grid](args...)`` of a file, with the grid's axes and what each
argument is (a tensor, one of its strides or sizes, a literal).

Only what the file says literally is recognised, in the function that launches: a grid written
as a tuple, a local variable assigned a tuple or a lambda, or ``lambda META: (...)`` (whose
``META['X']`` subscripts become the plain names ``X``, the constexpr ``X`` of the kernel).
Arguments that are local variables are traced one assignment back
(``n_rows, n_cols = x.shape`` makes ``n_cols`` the size ``("shape", "x", 1)``).
"""
from __future__ import annotations

import ast
import re

from . import astnodes
from .exprs import make_expr, parse_expr
from .kernel import Expr, KernelInfo, LaunchArg, LaunchSite, ParsedFile
from .model import Span

# Keyword arguments of a launch that Triton consumes itself (not kernel parameters).
LAUNCH_OPTIONS = {"num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion",
                  "grid", "warmup", "stream", "device", "launch_cooperative_grid",
                  "enable_warp_specialization", "num_buffers_warp_spec",
                  "num_consumer_groups", "reg_dec_producer", "reg_inc_consumer"}

# Calls whose result is a (new or reshaped) tensor: `y = torch.empty_like(x)` makes y a tensor.
_TENSOR_FACTORIES = {"empty", "empty_like", "zeros", "zeros_like", "ones", "ones_like",
                     "full", "full_like", "rand", "randn", "rand_like", "randn_like",
                     "arange", "tensor", "as_tensor", "empty_strided", "randint", "stack",
                     "cat", "matmul", "softmax"}
_TENSOR_METHODS = {"contiguous", "view", "reshape", "to", "t", "transpose", "permute",
                   "flatten", "float", "half", "bfloat16", "clone", "detach", "cuda", "cpu",
                   "expand", "squeeze", "unsqueeze", "view_as", "reshape_as", "type",
                   "new_empty", "new_zeros", "new_ones", "new_full", "narrow", "select",
                   "flip", "abs", "exp", "sum", "mean", "amax", "repeat"}

_SAME_TENSOR_METHODS = {"contiguous", "float", "half", "bfloat16", "detach", "clone", "to",
                        "cuda"}

_META_SUB = re.compile(r"\b(?P<meta>[A-Za-z_]\w*)\s*\[\s*(?P<q>['\"])(?P<key>[A-Za-z_]\w*)(?P=q)\s*\]")


def find_launches(root_node, src, parsed: ParsedFile) -> list[LaunchSite]:
    """Every launch ``k[grid](...)`` in the file whose ``k`` is a jit function of this file.

    Args:
        root_node: the tree-sitter module node.
        src: the file's ``frontend.SourceLines``.
        parsed: the file so far (kernels and imports known; ``k3 = triton.jit(fn)`` aliases
            are in ``parsed.imports`` as ``"kernel:fn"``).

    Returns:
        Launch sites in file order; ``grid`` None where the grid is not written literally.
    """
    kernels = {k.name for k in parsed.kernels}
    if not kernels:
        return []
    from .frontend import nodes_by_type

    by_type = getattr(parsed, "_ts_by_type", None) or nodes_by_type(root_node)
    out: list[LaunchSite] = []
    for node in by_type["call"]:
        try:
            site = _launch(node, src, parsed, kernels)
        except (RecursionError, ValueError, IndexError):
            site = None  # an unreadable launch is skipped; the kernels are still analysed
        if site is not None:
            out.append(site)
    out.sort(key=lambda s: (s.span.line, s.span.col))
    return out


def _kernel_name(name: str, parsed: ParsedFile, kernels: set[str]) -> str | None:
    target = parsed.imports.get(name, "")
    if target.startswith("kernel:"):
        return target[len("kernel:"):]
    return name if name in kernels else None


def _launch(call, src, parsed: ParsedFile, kernels: set[str]) -> LaunchSite | None:
    fn = call.child_by_field_name("function")
    if fn is None or fn.type != "subscript":
        return None
    value = fn.child_by_field_name("value")
    if value is None or value.type != "identifier":
        return None
    kernel = _kernel_name(_text(value), parsed, kernels)
    if kernel is None:
        return None
    args_node = call.child_by_field_name("arguments")
    if args_node is None or args_node.type != "argument_list":
        return None
    scope = _enclosing_function(call)
    env = _Scope(scope if scope is not None else _root(call), call.start_point[0], src)
    subs = fn.children_by_field_name("subscript")
    grid = _grid(subs, src, env)
    args: list[LaunchArg] = []
    for a in args_node.named_children:
        if a.type == "comment":
            continue
        if a.type == "keyword_argument":
            name_node, val = a.child_by_field_name("name"), a.child_by_field_name("value")
            if name_node is None or val is None:
                continue
            expr = _expr(val, src)
            args.append(LaunchArg(expr=expr, name=_text(name_node), source=_source(val, env)))
        elif a.type in ("list_splat", "dictionary_splat"):
            args.append(LaunchArg(expr=_expr(a, src), name=None, source=None))
        else:
            args.append(LaunchArg(expr=_expr(a, src), name=None, source=_source(a, env)))
    info = parsed.kernel(kernel)
    if info is not None:
        pointers = pointer_params(info)
        site = LaunchSite(kernel=kernel, grid=grid, args=args, span=src.span(call))
        for pname, arg in bind_args(site, info).items():
            if arg.source is None and pname in pointers and _is_dotted(arg.expr.text):
                arg.source = ("tensor", arg.expr.text)
    fname = None
    if scope is not None:
        n = scope.child_by_field_name("name")
        fname = _text(n) if n is not None else None
    return LaunchSite(kernel=kernel, grid=grid, args=args, span=src.span(call), function=fname)


def bind_args(launch: LaunchSite, kernel: KernelInfo) -> dict[str, LaunchArg]:
    """Map the launch's arguments to the kernel's parameters (positional, then keywords).

    Launch options (``num_warps``, ``num_stages``, ...) and arguments past the parameter list
    are left out; a ``*args`` splat stops positional binding (what follows is unknown).
    """
    out: dict[str, LaunchArg] = {}
    names = [p.name for p in kernel.params]
    pos = 0
    for arg in launch.args:
        if arg.name is None:
            if arg.expr.text.startswith("*"):
                pos = len(names)
                continue
            if pos < len(names):
                out[names[pos]] = arg
            pos += 1
        elif arg.name in names:
            out[arg.name] = arg
    return out


# --- scope: the assignments of the launching function -------------------------------------------

class _Scope:
    """Assignments ``name = value`` in one function body (not nested defs), before a line."""

    def __init__(self, scope_node, before_row: int, src):
        self.src = src
        self.assigned: dict[str, list[tuple[int, object, int | None]]] = {}
        self.functions: dict[str, object] = {}
        self.params: set[str] = set()
        if scope_node.type == "function_definition":
            ps = scope_node.child_by_field_name("parameters")
            for c in (ps.named_children if ps is not None else []):
                n = c if c.type == "identifier" else next(
                    (x for x in c.named_children if x.type == "identifier"), None)
                if n is not None:
                    self.params.add(_text(n))
        self._collect(scope_node, before_row)

    def _collect(self, scope_node, before_row: int) -> None:
        body = scope_node.child_by_field_name("body") if scope_node.type in (
            "function_definition",) else scope_node
        stack = [body] if body is not None else []
        while stack:
            node = stack.pop()
            t = node.type
            if t in ("function_definition", "class_definition", "lambda"):
                if t == "function_definition":
                    n = node.child_by_field_name("name")
                    if n is not None and node.start_point[0] < before_row:
                        self.functions[_text(n)] = node
                continue
            if t == "decorated_definition":
                d = node.child_by_field_name("definition")
                if d is not None and d.type == "function_definition":
                    n = d.child_by_field_name("name")
                    if n is not None and node.start_point[0] < before_row:
                        self.functions[_text(n)] = d
                continue
            if t == "assignment" and node.start_point[0] <= before_row:
                left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
                if left is not None and right is not None:
                    self._bind(left, right, node.start_point[0])
            stack.extend(node.children)

    def _bind(self, left, right, row: int) -> None:
        if left.type == "identifier":
            self.assigned.setdefault(_text(left), []).append((row, right, None))
        elif left.type in ("pattern_list", "tuple_pattern", "list_pattern"):
            for i, el in enumerate(c for c in left.named_children):
                if el.type == "identifier":
                    self.assigned.setdefault(_text(el), []).append((row, right, i))

    def lookup(self, name: str):
        """The last (value node, element index or None) assigned to ``name``, or None.

        None too when that assignment sits in a branch or loop and the name has another
        value on the other path (a launcher parameter, an earlier assignment): in
        ``if group_size is None: group_size = D`` the argument is not always ``D``."""
        entries = self.assigned.get(name)
        if not entries:
            return None
        row, value, index = max(entries, key=lambda e: e[0])
        if _conditional(value) and (len(entries) > 1 or name in self.params):
            return None
        return value, index


_BRANCHES = {"if_statement", "elif_clause", "else_clause", "for_statement", "while_statement",
             "try_statement", "except_clause", "finally_clause", "match_statement",
             "case_clause"}  # a `with` body always runs


def _conditional(node) -> bool:
    """The assignment whose value is ``node`` runs only on some paths of its function."""
    n = node.parent
    while n is not None and n.type not in ("function_definition", "module"):
        if n.type in _BRANCHES:
            return True
        n = n.parent
    return False


def _enclosing_function(node):
    n = node.parent
    while n is not None:
        if n.type == "function_definition":
            return n
        n = n.parent
    return None


def _root(node):
    while node.parent is not None:
        node = node.parent
    return node


# --- grid -------------------------------------------------------------------------------------

def _grid(subs, src, env: _Scope) -> list[Expr] | None:
    if not subs:
        return None
    if len(subs) > 1:  # k[a, b](...)
        return [_expr(s, src) for s in subs]
    return _grid_value(subs[0], src, env, depth=0)


def _grid_value(node, src, env: _Scope, depth: int) -> list[Expr] | None:
    node = _unparen(node)
    t = node.type
    if t in ("tuple", "list", "expression_list"):
        return [_expr(c, src) for c in node.named_children if c.type != "comment"]
    if t == "lambda":
        params = node.child_by_field_name("parameters")
        meta = [_text(c) for c in params.named_children] if params is not None else []
        body = node.child_by_field_name("body")
        if body is None:
            return None
        return _grid_axes_from_body(body, src, set(meta[:1]))
    if t == "identifier" and depth < 3:
        name = _text(node)
        found = env.lookup(name)
        if found is not None and found[1] is None:
            return _grid_value(found[0], src, env, depth + 1)
        fdef = env.functions.get(name)
        if fdef is not None:
            return _grid_from_def(fdef, src)
    if t in ("integer", "call", "binary_operator", "attribute", "subscript", "identifier"):
        # A bare scalar grid `k[n](...)` launches n programs on axis 0.
        return [_expr(node, src)] if t != "call" or not _is_grid_call(node) else None
    return None


def _is_grid_call(node) -> bool:
    """A call returning the whole grid (``grid(meta)``), unlike ``triton.cdiv(n, B)``."""
    fn = node.child_by_field_name("function")
    return fn is None or _text(fn).split(".")[-1] not in ("cdiv", "min", "max", "next_power_of_2")


def _grid_axes_from_body(body, src, meta: set[str]) -> list[Expr] | None:
    body = _unparen(body)
    if body.type not in ("tuple", "list", "expression_list"):
        items = [body]
    else:
        items = [c for c in body.named_children if c.type != "comment"]
    return [_meta_expr(c, src, meta) for c in items]


def _grid_from_def(fdef, src) -> list[Expr] | None:
    """``def grid(META): return (...)`` with a single return."""
    params = fdef.child_by_field_name("parameters")
    meta = {_text(c) for c in params.named_children if c.type == "identifier"} if params else set()
    body = fdef.child_by_field_name("body")
    returns = [c for c in (body.named_children if body is not None else [])
               if c.type == "return_statement"]
    if len(returns) != 1 or not returns[0].named_children:
        return None
    return _grid_axes_from_body(returns[0].named_children[0], src, meta)


def _meta_expr(node, src, meta: set[str]) -> Expr:
    """An axis of a lambda grid with ``META['X']`` rewritten to ``X`` (span stays the source)."""
    expr = _expr(node, src)
    if not meta:
        return expr

    def sub(m: re.Match) -> str:
        return m.group("key") if m.group("meta") in meta else m.group(0)

    text = _META_SUB.sub(sub, expr.text)
    if text == expr.text:
        return expr
    return Expr(text=text, tree=parse_expr(text), span=expr.span)


def _unparen(node):
    while node.type == "parenthesized_expression" and node.named_children:
        inner = [c for c in node.named_children if c.type != "comment"]
        if len(inner) != 1:
            break
        node = inner[0]
    return node


# --- arguments ------------------------------------------------------------------------------

def _source(node, env: _Scope, depth: int = 0) -> tuple | None:
    """What an argument is: ("stride", x, i), ("shape", x, i), ("numel", x), ("tensor", x),
    ("int", v), or None."""
    node = _unparen(node)
    t = node.type
    if t == "integer":
        try:
            return ("int", int(_text(node).replace("_", ""), 0))
        except ValueError:
            return None
    if t == "unary_operator" and _text(node).startswith("-"):
        inner = node.child_by_field_name("argument")
        if inner is not None and inner.type == "integer":
            s = _source(inner, env, depth)
            return ("int", -s[1]) if s else None
        return None
    if t == "call":
        fn = node.child_by_field_name("function")
        args = node.child_by_field_name("arguments")
        if fn is None or fn.type != "attribute" or args is None:
            return None
        obj, attr = fn.child_by_field_name("object"), fn.child_by_field_name("attribute")
        if obj is None or attr is None or not _is_tensor_name(obj):
            return None
        method = _text(attr)
        pos = [a for a in args.named_children if a.type != "comment"]
        if method == "stride" and len(pos) == 1:
            i = _int(pos[0])
            return ("stride", _text(obj), i) if i is not None else None
        if method == "size" and len(pos) == 1:
            i = _int(pos[0])
            return ("shape", _text(obj), i) if i is not None else None
        if method == "numel" and not pos:
            return ("numel", _text(obj))
        if method == "data_ptr" and not pos:
            return ("tensor", _text(obj))
        if method in _SAME_TENSOR_METHODS and obj.type == "identifier":
            # `x.contiguous()`, `x.float()`: the same logical tensor, maybe another layout
            return ("tensor", _text(obj))
        return None
    if t == "subscript":
        value = node.child_by_field_name("value")
        subs = node.children_by_field_name("subscript")
        if value is not None and value.type == "attribute" and len(subs) == 1:
            obj, attr = value.child_by_field_name("object"), value.child_by_field_name("attribute")
            i = _int(subs[0])
            if obj is not None and attr is not None and i is not None and _is_tensor_name(obj):
                if _text(attr) == "shape":
                    return ("shape", _text(obj), i)
        if value is not None and value.type == "call" and len(subs) == 1:
            inner_fn = value.child_by_field_name("function")
            i = _int(subs[0])
            if inner_fn is not None and inner_fn.type == "attribute" and i is not None:
                obj = inner_fn.child_by_field_name("object")
                attr = inner_fn.child_by_field_name("attribute")
                if obj is not None and attr is not None and _is_tensor_name(obj):
                    if _text(attr) == "stride":
                        return ("stride", _text(obj), i)
                    if _text(attr) == "size":
                        return ("shape", _text(obj), i)
        return None
    if t == "identifier":
        name = _text(node)
        if name in ("None", "True", "False"):
            return None
        found = env.lookup(name) if depth < 4 else None
        if found is None:
            # A parameter of the launcher or a name we cannot trace: decided by the caller
            # (``tensor_like``) from the kernel parameter it binds to.
            return None
        value, index = found
        value = _unparen(value)
        if index is None:
            if value.type == "identifier":
                return _source(value, env, depth + 1) if _text(value) != name else None
            if _is_tensor_producer(value):
                return ("tensor", name)
            return _source(value, env, depth + 1)
        # tuple unpacking: `M, K = a.shape`
        if value.type == "attribute":
            obj, attr = value.child_by_field_name("object"), value.child_by_field_name("attribute")
            if obj is not None and attr is not None and _text(attr) == "shape":
                return ("shape", _text(obj), index)
        if value.type == "call":
            fn = value.child_by_field_name("function")
            if fn is not None and fn.type == "attribute":
                obj, attr = fn.child_by_field_name("object"), fn.child_by_field_name("attribute")
                args = value.child_by_field_name("arguments")
                if obj is not None and attr is not None and _text(attr) in ("size", "stride") \
                        and args is not None and not args.named_children:
                    kind = "shape" if _text(attr) == "size" else "stride"
                    return (kind, _text(obj), index)
        if value.type in ("tuple", "expression_list", "list"):
            items = [c for c in value.named_children if c.type != "comment"]
            if index < len(items):
                return _source(items[index], env, depth + 1)
        return None
    return None


def _is_dotted(text: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", text))


_MEMORY_OPS = {"load", "store", "atomic_add", "atomic_max", "atomic_min", "atomic_cas",
               "atomic_xchg", "atomic_and", "atomic_or", "atomic_xor", "make_block_ptr",
               "make_tensor_descriptor", "prefetch"}


def pointer_params(kernel: KernelInfo) -> set[str]:
    """Parameters used as pointers: named ``*ptr*``, or the base of an address given to
    ``tl.load``/``tl.store``/atomics/block pointers (followed through local assignments such
    as ``X += row * stride`` and ``a_ptrs = a_ptr + offs``)."""
    names = {p.name for p in kernel.params}
    out = {n for n in names if "ptr" in n.lower()}
    if kernel.tree is None:
        return out
    assigned: dict[str, list[ast.expr]] = {}
    for node in astnodes.nodes(kernel.tree):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    assigned.setdefault(t.id, []).append(node.value)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            assigned.setdefault(node.target.id, []).append(
                ast.BinOp(left=ast.Name(node.target.id), op=node.op, right=node.value))
    bases: list[ast.expr] = []
    for node in astnodes.nodes(kernel.tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in _MEMORY_OPS and node.args:
            bases.append(node.args[0])
        elif isinstance(node, ast.Attribute) and node.attr == "dtype":
            bases.append(node.value)
    seen: set[str] = set()
    while bases:
        e = bases.pop()
        while True:
            if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
                e = e.left
            elif isinstance(e, (ast.Subscript, ast.Attribute)):
                e = e.value
            elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
                    and e.func.attr in ("to", "cast"):
                e = e.func.value
            else:
                break
        if isinstance(e, ast.Name) and e.id not in seen:
            seen.add(e.id)
            if e.id in names:
                out.add(e.id)
            bases.extend(assigned.get(e.id, []))
    return out


def _is_tensor_producer(node) -> bool:
    if node.type != "call":
        return False
    fn = node.child_by_field_name("function")
    if fn is None:
        return False
    text = _text(fn)
    last = text.split(".")[-1]
    if text.startswith("torch.") and last in _TENSOR_FACTORIES:
        return True
    if fn.type == "attribute" and last in _TENSOR_METHODS:
        return True
    return False


def _is_tensor_name(node) -> bool:
    return node.type in ("identifier", "attribute")


def _int(node) -> int | None:
    node = _unparen(node)
    text = _text(node).replace("_", "")
    try:
        return int(text, 0)
    except ValueError:
        return None


def _expr(node, src) -> Expr:
    span = src.span(node)
    return make_expr(_slice(src, span), span)


def _slice(src, span: Span) -> str:
    rows = src.rows[span.line:span.end_line + 1]
    if not rows:
        return ""
    if len(rows) == 1:
        return rows[0][span.col:span.end_col]
    rows = list(rows)
    rows[0] = rows[0][span.col:]
    rows[-1] = rows[-1][:span.end_col]
    return "\n".join(rows)


def _text(node) -> str:
    return node.text.decode("utf-8", errors="replace")


__all__ = ["find_launches", "bind_args", "LAUNCH_OPTIONS"]
