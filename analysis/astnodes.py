"""Every node of a kernel's ``ast`` tree, listed once and shared by the front end and the rules.

The front end, the annotation checks, the launch analysis and each language rule used to walk
the kernel's tree on their own (about ten full walks of a 10,000-line kernel, most of the
front end's time). ``nodes(tree)`` lists the tree once, in ``ast.walk`` order, and keeps the
list on the root node, so a walk costs one list iteration and the list dies with the tree.

The list is valid while the tree's shape is unchanged: positions may be rewritten in place
(the front end does that before the first call), nodes must not be added or removed. Nothing
in the analysis rewrites a kernel's tree.
"""
from __future__ import annotations

import ast
from collections import deque

# An attribute name no ast field uses; ``ast.dump``/``unparse`` ignore non-field attributes.
_ATTR = "_ks_nodes"


def nodes(tree: ast.AST) -> list[ast.AST]:
    """All nodes of ``tree`` (the root included) in ``ast.walk`` (breadth-first) order.

    Computed on the first call for a root and cached on it; later calls return the same list
    (callers must not modify it). Linear in the tree's size.
    """
    cached = tree.__dict__.get(_ATTR)
    if cached is not None:
        return cached
    out = walk_list(tree)
    setattr(tree, _ATTR, out)
    return out


def walk_list(tree: ast.AST) -> list[ast.AST]:
    """``list(ast.walk(tree))`` without the generator's per-node overhead (same order)."""
    out: list[ast.AST] = []
    todo = deque([tree])
    append, popleft, extend = out.append, todo.popleft, todo.extend
    while todo:
        node = popleft()
        append(node)
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, ast.AST):
                todo.append(value)
            elif isinstance(value, list):
                extend(v for v in value if isinstance(v, ast.AST))
    return out


def remember(tree: ast.AST, all_nodes: list[ast.AST]) -> None:
    """Cache ``all_nodes`` (exactly ``walk_list(tree)``) as ``nodes(tree)``: for a caller that
    had to walk the tree anyway."""
    setattr(tree, _ATTR, all_nodes)


def of_type(tree: ast.AST, kind: type | tuple[type, ...]) -> list[ast.AST]:
    """The nodes of ``tree`` that are instances of ``kind``, in ``ast.walk`` order."""
    return [n for n in nodes(tree) if isinstance(n, kind)]


__all__ = ["nodes", "walk_list", "remember", "of_type"]
