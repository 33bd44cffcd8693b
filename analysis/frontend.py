"""The tree-sitter front end: finds ``@triton.jit`` kernels in a Python file, error tolerant.

tree-sitter parses the whole file, so a syntax error elsewhere leaves intact kernels intact.
Each kernel without ERROR/MISSING nodes is also handed to the abstract interpreter as a Python
``ast.FunctionDef``: the interpreter needs Python's exact expression semantics (precedence,
chained comparisons, augmented assignment), which ``ast`` gives canonically, while tree-sitter
guarantees the isolation of errors. Positions in both are converted to 0-based lines and
character columns of the file.
"""
from __future__ import annotations

import ast
import re
import time
from functools import lru_cache

from . import astnodes
from .kernel import KernelInfo, Param, ParsedFile
from .model import Finding, Span

# Decorators (after alias resolution) that make a function a Triton jit function.
_JIT_NAMES = {"triton.jit", "triton.runtime.jit", "triton.runtime.jit.jit",
              "triton.language.core.jit"}


_LONE_CR = re.compile(r"\r(?!\n)")


@lru_cache(maxsize=1)
def _language():
    import tree_sitter_python
    from tree_sitter import Language

    return Language(tree_sitter_python.language())


@lru_cache(maxsize=1)
def _parser():
    from tree_sitter import Parser

    return Parser(_language())


# Node types the front end looks for anywhere in the file (ERROR subtrees included). One
# query run in tree-sitter's C code replaces a Python walk of every node per kind.
_QUERY_KINDS = ("function_definition", "assignment", "call", "comment")


@lru_cache(maxsize=1)
def _query():
    from tree_sitter import Query

    return Query(_language(), " ".join(f"({k}) @{k}" for k in _QUERY_KINDS))


def nodes_by_type(root) -> dict[str, list]:
    """Every ``function_definition``, ``assignment``, ``call`` and ``comment`` node under
    ``root``, by type, each list in document order (ancestors before descendants)."""
    from tree_sitter import QueryCursor

    caps = QueryCursor(_query()).captures(root)
    return {k: sorted(caps.get(k, ()), key=lambda n: (n.start_byte, -n.end_byte))
            for k in _QUERY_KINDS}


class SourceLines:
    """The file's lines as text and bytes, with byte-column -> character-column conversion."""

    def __init__(self, text: str):
        self.text = text
        self.lines = text.splitlines()
        # tree-sitter rows follow \n (and \r\n); str.splitlines also splits on \x0b, \x0c, \x1c..
        # and \u2028; use \n-splitting so rows agree with tree-sitter's.
        self.rows = text.split("\n")
        self.rows = [r[:-1] if r.endswith("\r") else r for r in self.rows]
        self._bytes: dict[int, bytes] = {}

    def row_bytes(self, row: int) -> bytes:
        b = self._bytes.get(row)
        if b is None:
            b = self.rows[row].encode("utf-8", errors="surrogatepass") if row < len(self.rows) else b""
            self._bytes[row] = b
        return b

    def char_col(self, row: int, byte_col: int) -> int:
        if row >= len(self.rows):
            return byte_col
        line = self.rows[row]
        if line.isascii():
            return min(byte_col, len(line))
        return len(self.row_bytes(row)[:byte_col].decode("utf-8", errors="replace"))

    def span(self, node) -> Span:
        (r0, c0), (r1, c1) = node.start_point, node.end_point
        return Span(r0, self.char_col(r0, c0), r1, self.char_col(r1, c1))


def node_text(node) -> str:
    return node.text.decode("utf-8", errors="replace")


def parse_file(text: str, path: str = "<string>", *,
               budget_ms: float | None = None) -> ParsedFile:
    """Parse ``text`` and return its kernels, launch sites, annotations and front-end findings.

    Args:
        text: the file's text.
        path: used in findings only.
        budget_ms: CPU milliseconds (of the calling thread) the front end may spend on one
            jit function, shared with the language rules (``rules.check_rules`` goes on
            counting in ``KernelInfo.front_seconds``); None means the default
            ``Config.kernel_budget_ms``. A function past it gets ``budget_exhausted`` set,
            no tree and one KS911 information finding; the other functions are unaffected.

    Never raises on malformed input: syntax errors are localised to the kernels containing them
    (``KernelInfo.has_syntax_error``, a KS910 finding from the annotation/rules layer).
    """
    from . import annotations, launches  # same package; split by job

    if budget_ms is None:
        from .config import Config

        budget_ms = Config.kernel_budget_ms

    original = text
    if "\r" in text:
        # Python and LSP both end a line at a lone CR; tree-sitter does not. CR -> LF keeps
        # every offset, so positions stay those of the original text.
        text = _LONE_CR.sub("\n", text)
    src = SourceLines(text)
    tree = _parser().parse(text.encode("utf-8", errors="surrogatepass"))
    parsed = ParsedFile(path=path, text=original, lines=src.rows)
    parsed.imports = _imports(tree.root_node)
    by_type = nodes_by_type(tree.root_node)
    parsed._ts_by_type = by_type  # type: ignore[attr-defined]  # front-end private, deleted below
    jit_wrapped = _jit_assignments(by_type["assignment"], parsed.imports)
    for fn_node, decorators in _function_defs(by_type["function_definition"]):
        t0 = time.thread_time()
        name_node = fn_node.child_by_field_name("name")
        if name_node is None:
            continue
        name = node_text(name_node)
        deco_texts = [_decorator_expr_text(d) for d in decorators]
        if not (any(_is_jit(t, parsed.imports) for t in deco_texts) or name in jit_wrapped):
            continue
        outer = decorators[0] if decorators else fn_node
        outer_span = src.span(outer)
        full_span = Span(outer_span.line, outer_span.col, *_end(src, fn_node))
        kernel = KernelInfo(
            name=name,
            span=full_span,
            name_span=src.span(name_node),
            params=_params(fn_node, src),
            decorators=deco_texts,
            source=_slice(src, full_span),
            # has_error covers MISSING nodes too (their error cost is positive).
            has_syntax_error=fn_node.has_error,
        )
        _decorator_params(kernel, decorators, src, parsed.imports, tree.root_node)
        kernel._ts_node = fn_node  # type: ignore[attr-defined]  # front-end private
        kernel._ts_decorators = decorators  # type: ignore[attr-defined]
        if not kernel.has_syntax_error:
            kernel.tree = _to_ast(src, fn_node)
            if kernel.tree is None:
                kernel.has_syntax_error = True
        kernel.front_seconds += time.thread_time() - t0
        over_budget(kernel, budget_ms, parsed.findings, "front end")
        parsed.kernels.append(kernel)
    for alias, target in jit_wrapped.items():
        if alias != target and parsed.kernel(target) is not None:
            parsed.imports.setdefault(alias, f"kernel:{target}")
    parsed.launches = launches.find_launches(tree.root_node, src, parsed)
    _mark_helpers(parsed)
    annotations.attach(tree.root_node, src, parsed, budget_ms=budget_ms)
    _unparsed_jit_functions(tree.root_node, src, parsed)
    _host_syntax_error(tree.root_node, src, parsed)
    for kernel in parsed.kernels:  # tree-sitter objects do not escape the front end
        for attr in ("_ts_node", "_ts_decorators"):
            if hasattr(kernel, attr):
                delattr(kernel, attr)
    del parsed._ts_by_type
    return parsed


def over_budget(kernel: KernelInfo, budget_ms: float, findings: list[Finding],
                stage: str) -> bool:
    """Mark ``kernel`` not analysed when its ``front_seconds`` passed ``budget_ms``.

    The first time, drops its tree (nothing later walks it: the rules skip it and the engine
    does not run) and appends one KS911 information finding naming ``stage`` (``"front end"``
    or ``"language rules"``) to ``findings``. Returns True when the kernel is (now or
    already) past its budget.
    """
    if kernel.budget_exhausted is not None:
        return True
    if kernel.has_syntax_error or kernel.front_seconds * 1000.0 <= budget_ms:
        return False
    from . import codes

    kernel.budget_exhausted = stage
    kernel.tree = None
    info = codes.get("KS911")
    findings.append(Finding(
        code="KS911", severity=info.severity, kernel=kernel.name, span=kernel.name_span,
        message=f"{info.title}: the front end and the language rules spent more than "
                f"{budget_ms:.0f} ms on '{kernel.name}' (stopped in the {stage}); it is not "
                "analysed (split it into helpers, or raise kernel-budget-ms)"))
    return True


def _unparsed_jit_functions(root, src: SourceLines, parsed: ParsedFile) -> None:
    """KS910 for a ``@jit`` decorator that tree-sitter could not attach to any function.

    A broken ``def`` line (a missing colon or parenthesis) turns the whole definition into an
    ERROR node: no kernel is found, and without this the file would look clean.
    """
    kernel_rows = {k.name_span.line for k in parsed.kernels}
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "ERROR":
            for child in node.children:
                if child.type == "def":
                    _report_broken_def(child.start_point[0], src, parsed, kernel_rows)
        if node.has_error:
            stack.extend(node.children)


def _host_syntax_error(root, src: SourceLines, parsed: ParsedFile) -> None:
    """KS910 for the first syntax error outside every kernel (launcher or other host code).

    Kernels that parse are still analysed, but a launch site inside the broken code is not
    read, so the sizes and grid inferred from it (and the findings they enable) are lost:
    without this the user would only see some findings silently disappear. Errors inside a
    kernel, or in a broken ``@jit`` definition, already have their own KS910; a file without
    kernels is no business of this tool (it is not a Python linter).
    """
    if not root.has_error or not parsed.kernels:
        return
    taken = [(k.span.line, k.span.end_line) for k in parsed.kernels]
    taken += [(f.span.line, f.span.end_line) for f in parsed.findings if f.code == "KS910"]
    best = None
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "ERROR" or node.is_missing:
            r0, r1 = node.start_point[0], node.end_point[0]
            if not any(r0 <= b and a <= r1 for a, b in taken):
                if best is None or node.start_point < best.start_point:
                    best = node
            continue
        if node.has_error:
            stack.extend(node.children)
    if best is None:
        return
    from . import codes
    from .model import Finding

    row, col = best.start_point
    c = src.char_col(row, col)
    what = f"missing '{best.type}'" if best.is_missing else "invalid syntax"
    try:  # Python's own message and position are more precise when its first error is here
        ast.parse(src.text)
    except SyntaxError as exc:
        r = (exc.lineno or 0) - 1
        if 0 <= r < len(src.rows) and not any(a <= r <= b for a, b in taken):
            row, c, what = r, max(0, (exc.offset or 1) - 1), exc.msg
    except (ValueError, RecursionError, MemoryError):
        pass
    line = src.rows[row] if row < len(src.rows) else ""
    info = codes.get("KS910")
    parsed.findings.append(Finding(
        code="KS910", severity=info.severity,
        message=f"host code does not parse: {what} at line {row + 1}, column {c + 1}; "
                "launch sites in it are not read, so kernels launched there miss the sizes "
                "and grid inferred from them",
        span=Span(row, c, row, max(c + 1, len(line.rstrip())))))


def _report_broken_def(row: int, src: SourceLines, parsed: ParsedFile,
                       kernel_rows: set[int]) -> None:
    from . import codes
    from .model import Finding

    if row in kernel_rows or row >= len(src.rows):
        return
    above = row - 1
    jit = False
    while above >= 0:
        text = src.rows[above].strip()
        if text.startswith("@"):
            jit = jit or _is_jit(text[1:], parsed.imports) or text[1:].startswith("triton.jit")
        elif text and not text.startswith("#"):
            break
        above -= 1
    if not jit:
        return
    kernel_rows.add(row)
    line = src.rows[row]
    col = len(line) - len(line.lstrip())
    info = codes.get("KS910")
    parsed.findings.append(Finding(
        code="KS910", severity=info.severity,
        message="this @triton.jit function does not parse (check its `def` line for a "
                "missing `:` or parenthesis); it is not analysed",
        span=Span(row, col, row, len(line.rstrip()))))


def _end(src: SourceLines, node) -> tuple[int, int]:
    r, c = node.end_point
    return r, src.char_col(r, c)


def _slice(src: SourceLines, span: Span) -> str:
    rows = src.rows[span.line:span.end_line + 1]
    if not rows:
        return ""
    if len(rows) == 1:
        return rows[0][span.col:span.end_col]
    rows = list(rows)
    rows[0] = rows[0][span.col:]
    rows[-1] = rows[-1][:span.end_col]
    return "\n".join(rows)


def _function_defs(defs: list):
    """Yield (function_definition node, [decorator nodes]) for every def, nested ones too,
    in file order; ``defs`` are the ``function_definition`` nodes (``nodes_by_type``)."""
    for node in defs:
        parent = node.parent
        if parent is not None and parent.type == "decorated_definition":
            yield node, [c for c in parent.children if c.type == "decorator"]
        else:
            yield node, []


def _decorator_expr_text(deco) -> str:
    for child in deco.children:
        if child.type != "@" and child.is_named:
            return node_text(child)
    return node_text(deco).lstrip("@").strip()


def resolve(dotted: str, imports: dict[str, str]) -> str:
    """Resolve the first component of a dotted name through the file's import aliases."""
    head, _, rest = dotted.partition(".")
    base = imports.get(head, head)
    return f"{base}.{rest}" if rest else base


def _is_jit(deco_text: str, imports: dict[str, str]) -> bool:
    callee = deco_text.split("(", 1)[0].strip().replace(" ", "")
    full = resolve(callee, imports)
    if full in _JIT_NAMES:
        return True
    # `@triton.jit` in a snippet that forgot `import triton` is still meant as Triton's jit.
    return callee == "triton.jit"


def _imports(root) -> dict[str, str]:
    out: dict[str, str] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "import_statement":
            for child in node.named_children:
                if child.type == "aliased_import":
                    name = child.child_by_field_name("name")
                    alias = child.child_by_field_name("alias")
                    if name is not None and alias is not None:
                        out[node_text(alias)] = node_text(name)
                elif child.type == "dotted_name":
                    full = node_text(child)
                    out.setdefault(full.split(".")[0], full.split(".")[0])
        elif node.type == "import_from_statement":
            module = node.child_by_field_name("module_name")
            if module is None:
                continue
            mod = node_text(module).lstrip(".")
            for child in node.children_by_field_name("name"):
                if child.type == "aliased_import":
                    name = child.child_by_field_name("name")
                    alias = child.child_by_field_name("alias")
                    if name is not None and alias is not None:
                        out[node_text(alias)] = f"{mod}.{node_text(name)}"
                elif child.type == "dotted_name":
                    out[node_text(child)] = f"{mod}.{node_text(child)}"
        elif node.type in ("module", "block", "if_statement", "try_statement", "else_clause",
                           "except_clause", "finally_clause", "with_statement",
                           "decorated_definition", "function_definition", "class_definition"):
            stack.extend(node.children)
    return out


def _jit_assignments(assignments: list, imports: dict[str, str]) -> dict[str, str]:
    """``kernel = triton.jit(fn)`` -> {"kernel": "fn"} (the wrapped def becomes a kernel);
    ``assignments`` are the file's ``assignment`` nodes (``nodes_by_type``). For a name
    wrapped twice the first assignment in the file wins."""
    out: dict[str, str] = {}
    for node in reversed(assignments):  # the last write wins: visit the file backwards
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if left is None or right is None or right.type != "call":
            continue
        fn = right.child_by_field_name("function")
        args = right.child_by_field_name("arguments")
        if fn is not None and args is not None and _is_jit(node_text(fn), imports):
            positional = [a for a in args.named_children if a.type == "identifier"]
            if positional and left.type == "identifier":
                out[node_text(left)] = node_text(positional[0])
                out.setdefault(node_text(positional[0]), node_text(positional[0]))
    return out


def _params(fn_node, src: SourceLines) -> list[Param]:
    params_node = fn_node.child_by_field_name("parameters")
    out: list[Param] = []
    if params_node is None:
        return out
    from .kernel import Expr

    for child in params_node.named_children:
        t = child.type
        if t == "identifier":
            out.append(Param(node_text(child), src.span(child)))
        elif t in ("typed_parameter", "default_parameter", "typed_default_parameter"):
            name_node = child.child_by_field_name("name")
            if name_node is None:  # typed_parameter keeps the name as its first child
                name_node = next((c for c in child.named_children if c.type == "identifier"),
                                 None)
            if name_node is None:
                continue
            type_node = child.child_by_field_name("type")
            value_node = child.child_by_field_name("value")
            default = None
            if value_node is not None:
                vtext = node_text(value_node)
                try:
                    tree = ast.parse(vtext, mode="eval").body
                except SyntaxError:
                    tree = None
                default = Expr(vtext, tree, src.span(value_node))
            out.append(Param(node_text(name_node), src.span(name_node),
                             annotation=_annotation_text(type_node),
                             default=default))
    return out


def _annotation_text(type_node) -> str | None:
    """The annotation as written, without the quotes of a string annotation."""
    if type_node is None:
        return None
    text = node_text(type_node).strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1].strip()
    return text


def _to_ast(src: SourceLines, fn_node) -> ast.FunctionDef | None:
    """Parse the function (without decorators) with ``ast`` and move positions into the file."""
    r0, c0 = fn_node.start_point
    r1, _ = fn_node.end_point
    indent = src.char_col(r0, c0)
    rows = src.rows[r0:r1 + 1]
    prefix = rows[0][:indent] if rows else ""
    stripped: list[bool] = []
    body: list[str] = []
    for i, row in enumerate(rows):
        if i == 0:
            body.append(row[indent:])
            stripped.append(True)
        elif row.startswith(prefix):
            body.append(row[len(prefix):])
            stripped.append(True)
        else:  # blank lines, or lines of a multi-line string literal
            body.append(row)
            stripped.append(False)
    try:
        module = ast.parse("\n".join(body))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    fn = next((n for n in module.body if isinstance(n, (ast.FunctionDef,
                                                         ast.AsyncFunctionDef))), None)
    if not isinstance(fn, ast.FunctionDef):
        return None
    body_bytes = {}
    n_rows = len(body)
    # Per relative row: the indent to add back, and whether byte columns are characters.
    shifts = [indent if keep else 0 for keep in stripped]
    ascii_rows = [line.isascii() for line in body]

    def char_col(rel_row: int, byte_col: int) -> int:
        if rel_row >= n_rows or ascii_rows[rel_row]:
            return byte_col
        b = body_bytes.get(rel_row)
        if b is None:
            b = body_bytes[rel_row] = body[rel_row].encode("utf-8", errors="surrogatepass")
        return len(b[:byte_col].decode("utf-8", errors="replace"))

    all_nodes = astnodes.walk_list(fn)
    for node in all_nodes:
        lineno = getattr(node, "lineno", None)
        if lineno is None:
            continue
        rel = lineno - 1
        shift = shifts[rel] if rel < n_rows else 0
        node.col_offset = char_col(rel, node.col_offset) + shift
        node.lineno = rel + r0 + 1
        end_lineno = getattr(node, "end_lineno", None)
        if end_lineno is not None and node.end_col_offset is not None:
            end_rel = end_lineno - 1
            end_shift = shifts[end_rel] if end_rel < n_rows else 0
            node.end_col_offset = char_col(end_rel, node.end_col_offset) + end_shift
            node.end_lineno = end_rel + r0 + 1
    astnodes.remember(fn, all_nodes)  # the walk above is the one every later pass reuses
    return fn


def _mark_helpers(parsed: ParsedFile) -> None:
    """A jit function that another jit function calls and that no launch site launches."""
    names = {k.name for k in parsed.kernels}
    launched = {l.kernel for l in parsed.launches}
    called: set[str] = set()
    for k in parsed.kernels:
        if k.tree is None:
            continue
        for node in astnodes.nodes(k.tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if node.func.id in names and node.func.id != k.name:
                    called.add(node.func.id)
    for k in parsed.kernels:
        k.is_helper = k.name in called and k.name not in launched


def _decorator_params(kernel: KernelInfo, decorators, src: SourceLines,
                      imports: dict[str, str], root) -> None:
    """Fill ``autotune``, ``autotune_keys`` and ``heuristics`` from stacked decorators."""
    from . import autotune

    for deco in decorators:
        expr = next((c for c in deco.children if c.is_named), None)
        if expr is None or expr.type != "call":
            continue
        fn = expr.child_by_field_name("function")
        if fn is None:
            continue
        full = resolve(node_text(fn).replace(" ", ""), imports)
        last = full.split(".")[-1]
        if not (full.startswith("triton") or full == last):
            continue
        args = expr.child_by_field_name("arguments")
        if args is None:
            continue
        if last == "autotune":
            configs, keys = autotune.parse_autotune(args, src, root)
            kernel.autotune.extend(configs)
            kernel.autotune_keys.extend(keys)
        elif last == "heuristics":
            kernel.heuristics.update(autotune.parse_heuristics(args, src))


def ast_span(node: ast.AST) -> Span:
    """The file Span of an ``ast`` node taken from ``KernelInfo.tree`` (positions converted)."""
    line = node.lineno - 1
    end_line = (getattr(node, "end_lineno", None) or node.lineno) - 1
    end_col = getattr(node, "end_col_offset", None)
    return Span(line, node.col_offset, end_line, end_col if end_col is not None else node.col_offset)
