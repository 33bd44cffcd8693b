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
from functools import lru_cache

from .kernel import KernelInfo, Param, ParsedFile
from .model import Span

# Decorators (after alias resolution) that make a function a Triton jit function.
_JIT_NAMES = {"triton.jit", "triton.runtime.jit", "triton.runtime.jit.jit",
              "triton.language.core.jit"}


_LONE_CR = re.compile(r"\r(?!\n)")


@lru_cache(maxsize=1)
def _parser():
    import tree_sitter_python
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_python.language()))


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


def parse_file(text: str, path: str = "<string>") -> ParsedFile:
    """Parse ``text`` and return its kernels, launch sites, annotations and front-end findings.

    Never raises on malformed input: syntax errors are localised to the kernels containing them
    (``KernelInfo.has_syntax_error``, a KS910 finding from the annotation/rules layer).
    """
    from . import annotations, launches  # same package; split by job

    original = text
    if "\r" in text:
        # Python and LSP both end a line at a lone CR; tree-sitter does not. CR -> LF keeps
        # every offset, so positions stay those of the original text.
        text = _LONE_CR.sub("\n", text)
    src = SourceLines(text)
    tree = _parser().parse(text.encode("utf-8", errors="surrogatepass"))
    parsed = ParsedFile(path=path, text=original, lines=src.rows)
    parsed.imports = _imports(tree.root_node)
    jit_wrapped = _jit_assignments(tree.root_node, parsed.imports)
    for fn_node, decorators in _function_defs(tree.root_node):
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
            has_syntax_error=fn_node.has_error or _has_missing(fn_node),
        )
        _decorator_params(kernel, decorators, src, parsed.imports, tree.root_node)
        kernel._ts_node = fn_node  # type: ignore[attr-defined]  # front-end private
        kernel._ts_decorators = decorators  # type: ignore[attr-defined]
        if not kernel.has_syntax_error:
            kernel.tree = _to_ast(src, fn_node)
            if kernel.tree is None:
                kernel.has_syntax_error = True
        parsed.kernels.append(kernel)
    for alias, target in jit_wrapped.items():
        if alias != target and parsed.kernel(target) is not None:
            parsed.imports.setdefault(alias, f"kernel:{target}")
    parsed.launches = launches.find_launches(tree.root_node, src, parsed)
    _mark_helpers(parsed)
    annotations.attach(tree.root_node, src, parsed)
    _unparsed_jit_functions(tree.root_node, src, parsed)
    for kernel in parsed.kernels:  # tree-sitter objects do not escape the front end
        for attr in ("_ts_node", "_ts_decorators"):
            if hasattr(kernel, attr):
                delattr(kernel, attr)
    return parsed


def _unparsed_jit_functions(root, src: SourceLines, parsed: ParsedFile) -> None:
    """KS910 for a ``@jit`` decorator that tree-sitter could not attach to any function.

    A broken ``def`` line (a missing colon or parenthesis) turns the whole definition into an
    ERROR node: no kernel is found, and without this the file would look clean.
    """
    from . import codes
    from .model import Finding

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


def _has_missing(node) -> bool:
    stack = [node]
    while stack:
        n = stack.pop()
        if n.is_missing:
            return True
        stack.extend(n.children)
    return False


def _function_defs(root):
    """Yield (function_definition node, [decorator nodes]) for every def, nested ones too."""
    stack = [root]
    while stack:
        node = stack.pop()
        t = node.type
        if t == "decorated_definition":
            definition = node.child_by_field_name("definition")
            decos = [c for c in node.children if c.type == "decorator"]
            if definition is not None and definition.type == "function_definition":
                yield definition, decos
                body = definition.child_by_field_name("body")
                if body is not None:
                    stack.append(body)
                continue
        elif t == "function_definition":
            yield node, []
            body = node.child_by_field_name("body")
            if body is not None:
                stack.append(body)
            continue
        stack.extend(reversed(node.children))


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


def _jit_assignments(root, imports: dict[str, str]) -> dict[str, str]:
    """``kernel = triton.jit(fn)`` -> {"kernel": "fn"} (the wrapped def becomes a kernel)."""
    out: dict[str, str] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "assignment":
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            if left is not None and right is not None and right.type == "call":
                fn = right.child_by_field_name("function")
                args = right.child_by_field_name("arguments")
                if fn is not None and args is not None and _is_jit(node_text(fn), imports):
                    positional = [a for a in args.named_children if a.type == "identifier"]
                    if positional and left.type == "identifier":
                        out[node_text(left)] = node_text(positional[0])
                        out.setdefault(node_text(positional[0]), node_text(positional[0]))
        stack.extend(node.children)
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

    def char_col(rel_row: int, byte_col: int) -> int:
        line = body[rel_row] if rel_row < len(body) else ""
        if line.isascii():
            return byte_col
        b = body_bytes.get(rel_row)
        if b is None:
            b = body_bytes[rel_row] = line.encode("utf-8", errors="surrogatepass")
        return len(b[:byte_col].decode("utf-8", errors="replace"))

    for node in ast.walk(fn):
        if not hasattr(node, "lineno") or node.lineno is None:
            continue
        rel = node.lineno - 1
        shift = indent if rel < len(stripped) and stripped[rel] else 0
        node.col_offset = char_col(rel, node.col_offset) + shift
        node.lineno = rel + r0 + 1
        end_rel = (node.end_lineno or node.lineno) - 1
        if getattr(node, "end_lineno", None) is not None and node.end_col_offset is not None:
            end_shift = indent if end_rel < len(stripped) and stripped[end_rel] else 0
            node.end_col_offset = char_col(end_rel, node.end_col_offset) + end_shift
            node.end_lineno = end_rel + r0 + 1
    return fn


def _mark_helpers(parsed: ParsedFile) -> None:
    """A jit function that another jit function calls and that no launch site launches."""
    names = {k.name for k in parsed.kernels}
    launched = {l.kernel for l in parsed.launches}
    called: set[str] = set()
    for k in parsed.kernels:
        if k.tree is None:
            continue
        for node in ast.walk(k.tree):
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
