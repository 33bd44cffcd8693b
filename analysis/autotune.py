"""``@triton.autotune`` configs and ``@triton.heuristics`` entries, read from the source.

Configs become concrete cases for the rules and the engine, so only literal values are taken:
``triton.Config({...}, num_warps=..., num_stages=...)`` written out, a list of them, a
module-level name bound to such a list, ``a + b`` of lists, or a list comprehension over
literal ranges (``[triton.Config({"BS": bs}, num_warps=w) for bs in [16, 32] for w in (2, 4)]``),
which is enumerated. A value that is not literal leaves its key out; a list that cannot be
enumerated gives no configs (the kernel is then analysed symbolically).
"""
from __future__ import annotations

import ast
import itertools
import operator

from .exprs import make_expr, parse_expr
from .kernel import AutotuneConfig, Expr
from .model import Span

MAX_CONFIGS = 4096

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
           ast.LShift: operator.lshift, ast.RShift: operator.rshift,
           ast.Div: operator.truediv}
_CMPOPS = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
           ast.GtE: operator.ge, ast.Eq: operator.eq, ast.NotEq: operator.ne,
           ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}


class _NotLiteral(Exception):
    pass


def parse_autotune(args_node, src, root) -> tuple[list[AutotuneConfig], list[str]]:
    """Configs and ``key`` names of one ``@triton.autotune(...)`` (tree-sitter argument list).

    Returns ``([], [])`` pieces that are not literal; never raises on user text.
    """
    call = _call_ast(args_node, src)
    if call is None:
        return [], []
    module = _ModuleNames(root)
    configs_node = None
    key_node = None
    for kw in call.keywords:
        if kw.arg == "configs":
            configs_node = kw.value
        elif kw.arg == "key":
            key_node = kw.value
    if configs_node is None and call.args:
        configs_node = call.args[0]
    if key_node is None and len(call.args) > 1:
        key_node = call.args[1]
    origin = _origin(args_node, src)
    configs: list[AutotuneConfig] = []
    if configs_node is not None:
        try:
            configs = _configs(configs_node, {}, module, origin, depth=0)
        except (_NotLiteral, RecursionError, ValueError, TypeError, ZeroDivisionError,
                OverflowError, MemoryError):
            configs = []
    keys: list[str] = []
    if key_node is not None:
        try:
            value = _lit(key_node, {}, module)
            if isinstance(value, (list, tuple)):
                keys = [v for v in value if isinstance(v, str)]
        except (_NotLiteral, RecursionError, ValueError, TypeError, ZeroDivisionError,
                OverflowError):
            keys = []
    return configs[:MAX_CONFIGS], keys


def parse_heuristics(args_node, src) -> dict[str, Expr]:
    """``@triton.heuristics({"NAME": lambda args: ..., ...})`` -> name -> Expr of the value."""
    out: dict[str, Expr] = {}
    first = next((c for c in args_node.named_children if c.type != "comment"), None)
    if first is None or first.type != "dictionary":
        return out
    for pair in first.named_children:
        if pair.type != "pair":
            continue
        key, value = pair.child_by_field_name("key"), pair.child_by_field_name("value")
        if key is None or value is None or key.type != "string":
            continue
        try:
            name = ast.literal_eval(key.text.decode("utf-8", errors="replace"))
        except (ValueError, SyntaxError):
            continue
        if isinstance(name, str):
            span = src.span(value)
            out[name] = make_expr(_slice(src, span), span)
    return out


# --- helpers -------------------------------------------------------------------------------

def _slice(src, span: Span) -> str:
    rows = list(src.rows[span.line:span.end_line + 1])
    if not rows:
        return ""
    if len(rows) == 1:
        return rows[0][span.col:span.end_col]
    rows[0] = rows[0][span.col:]
    rows[-1] = rows[-1][:span.end_col]
    return "\n".join(rows)


def _call_ast(args_node, src) -> ast.Call | None:
    span = src.span(args_node)
    tree = parse_expr("f" + _slice(src, span))
    return tree if isinstance(tree, ast.Call) else None


def _origin(args_node, src) -> tuple[int, int]:
    span = src.span(args_node)
    return span.line, span.col - 1  # the parsed text had "f" in front


def _node_span(node: ast.AST, origin: tuple[int, int] | None) -> Span | None:
    if origin is None or getattr(node, "lineno", None) is None:
        return None
    row0, col0 = origin

    def at(line: int, col: int) -> tuple[int, int]:
        return (row0, col0 + col) if line == 1 else (row0 + line - 1, col)

    l0, c0 = at(node.lineno, node.col_offset)
    l1, c1 = at(node.end_lineno or node.lineno, node.end_col_offset or node.col_offset)
    return Span(l0, c0, l1, c1)


class _ModuleNames:
    """Module-level ``NAME = <expr>`` assignments, parsed on demand."""

    def __init__(self, root):
        self.nodes: dict[str, object] = {}
        for child in root.named_children:
            node = child
            if node.type == "expression_statement" and node.named_children:
                node = node.named_children[0]
            if node.type == "assignment":
                left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
                if left is not None and right is not None and left.type == "identifier":
                    self.nodes[left.text.decode("utf-8", errors="replace")] = right
        self._cache: dict[str, ast.expr | None] = {}

    def get(self, name: str) -> ast.expr | None:
        if name not in self._cache:
            node = self.nodes.get(name)
            self._cache[name] = None
            if node is not None:
                self._cache[name] = parse_expr(node.text.decode("utf-8", errors="replace"))
        return self._cache[name]


def _configs(node: ast.expr, env: dict, module: _ModuleNames, origin, depth: int
             ) -> list[AutotuneConfig]:
    if depth > 4:
        raise _NotLiteral
    if isinstance(node, (ast.List, ast.Tuple)):
        out = []
        for el in node.elts:
            if isinstance(el, ast.Starred):
                out.extend(_configs(el.value, env, module, origin, depth + 1))
            else:
                out.append(_config(el, env, module, origin))
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return (_configs(node.left, env, module, origin, depth + 1)
                + _configs(node.right, env, module, origin, depth + 1))
    if isinstance(node, ast.Name) and node.id not in env:
        value = module.get(node.id)
        if value is None:
            raise _NotLiteral
        return _configs(value, env, module, None, depth + 1)
    if isinstance(node, ast.ListComp):
        out = []
        for bound in _enumerate(node.generators, env, module):
            out.append(_config(node.elt, bound, module, origin))
            if len(out) > MAX_CONFIGS:
                break
        return out
    raise _NotLiteral


def _enumerate(generators, env: dict, module: _ModuleNames):
    """Every binding of a comprehension's targets whose conditions hold."""
    if not generators:
        yield env
        return
    gen, rest = generators[0], generators[1:]
    if gen.is_async:
        raise _NotLiteral
    values = _lit(gen.iter, env, module)
    if not isinstance(values, (list, tuple, range)):
        raise _NotLiteral
    for v in values:
        bound = dict(env)
        _bind(gen.target, v, bound)
        if all(_lit(cond, bound, module) for cond in gen.ifs):
            yield from _enumerate(rest, bound, module)


def _bind(target: ast.expr, value, env: dict) -> None:
    if isinstance(target, ast.Name):
        env[target.id] = value
    elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (list, tuple)) \
            and len(value) == len(target.elts):
        for t, v in zip(target.elts, value):
            _bind(t, v, env)
    else:
        raise _NotLiteral


def _config(node: ast.expr, env: dict, module: _ModuleNames, origin) -> AutotuneConfig:
    if not isinstance(node, ast.Call):
        raise _NotLiteral
    fname = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
    if fname != "Config":
        raise _NotLiteral
    kw_node = node.args[0] if node.args else None
    opts: dict[str, ast.expr] = {}
    for kw in node.keywords:
        if kw.arg == "kwargs":
            kw_node = kw.value
        elif kw.arg is not None:
            opts[kw.arg] = kw.value
    for i, name in ((1, "num_warps"), (2, "num_stages")):
        if len(node.args) > i:
            opts.setdefault(name, node.args[i])
    kwargs: dict = {}
    if isinstance(kw_node, ast.Dict):
        for k, v in zip(kw_node.keys, kw_node.values):
            if k is None:
                continue
            try:
                key = _lit(k, env, module)
                kwargs[key] = _lit(v, env, module)
            except (_NotLiteral, ValueError, TypeError, ZeroDivisionError, OverflowError):
                continue  # this key is not a concrete value; the others still are
    elif kw_node is not None:
        try:
            value = _lit(kw_node, env, module)
            if isinstance(value, dict):
                kwargs = value
        except (_NotLiteral, ValueError, TypeError, ZeroDivisionError, OverflowError):
            pass
    cfg = AutotuneConfig(kwargs={k: v for k, v in kwargs.items() if isinstance(k, str)},
                         span=_node_span(node, origin))
    for name in ("num_warps", "num_stages"):
        if name in opts:
            try:
                v = _lit(opts[name], env, module)
                if isinstance(v, int) and not isinstance(v, bool):
                    setattr(cfg, name, v)
            except (_NotLiteral, ValueError, TypeError, ZeroDivisionError, OverflowError):
                pass
    return cfg


def _lit(node: ast.expr, env: dict, module: _ModuleNames, depth: int = 0):
    """Evaluate a literal expression (constants, names bound in ``env`` or module constants,
    containers, arithmetic, comparisons, ``range``/``min``/``max``)."""
    if depth > 50:
        raise _NotLiteral
    d = depth + 1
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        value = module.get(node.id)
        if value is None:
            raise _NotLiteral
        return _lit(value, {}, module, d)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = [_lit(e, env, module, d) for e in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    if isinstance(node, ast.Dict):
        return {_lit(k, env, module, d): _lit(v, env, module, d)
                for k, v in zip(node.keys, node.values) if k is not None}
    if isinstance(node, ast.UnaryOp):
        v = _lit(node.operand, env, module, d)
        if isinstance(node.op, ast.USub):
            return -v
        if isinstance(node.op, ast.UAdd):
            return +v
        if isinstance(node.op, ast.Not):
            return not v
        raise _NotLiteral
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _lit(node.left, env, module, d), _lit(node.right, env, module, d)
        if isinstance(node.op, ast.Pow) and isinstance(right, int) and right > 64:
            raise _NotLiteral
        return _BINOPS[type(node.op)](left, right)
    if isinstance(node, ast.Compare):
        left = _lit(node.left, env, module, d)
        for op, comp in zip(node.ops, node.comparators):
            right = _lit(comp, env, module, d)
            if type(op) not in _CMPOPS or not _CMPOPS[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.BoolOp):
        values = [_lit(v, env, module, d) for v in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.IfExp):
        return _lit(node.body if _lit(node.test, env, module, d) else node.orelse, env,
                    module, d)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        args = [_lit(a, env, module, d) for a in node.args]
        if node.func.id == "range" and all(isinstance(a, int) for a in args) and args:
            r = range(*args)
            if len(r) > MAX_CONFIGS:
                raise _NotLiteral
            return r
        if node.func.id in ("min", "max") and args:
            return (min if node.func.id == "min" else max)(*args)
        raise _NotLiteral
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr == "product" and not node.keywords:
        lists = [_lit(a, env, module, d) for a in node.args]
        total = 1
        for lst in lists:
            total *= len(lst)
        if total > MAX_CONFIGS:
            raise _NotLiteral
        return [tuple(p) for p in itertools.product(*lists)]
    raise _NotLiteral
