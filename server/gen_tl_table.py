"""Tables of ``triton.language`` members, from the imported package or from its source text.

Run: ``python -m kernelsight.server.gen_tl_table [OUT.json]`` (needs triton; the server
itself never imports triton and reads the bundled table, or ``build_table_from_source``).

The table holds, per public ``tl`` member: its kind, its signature (parameters whose names
start with ``_`` are the compiler's and dropped), the docstring reduced to plain markdown and
per-parameter descriptions (from ``:param x:`` fields) for signature help.

``build_table`` imports triton and reads the live objects (exact, but maps libtriton.so and
costs 64-81 MB of resident memory, measured). ``build_table_from_source`` reads the same facts from the
package's ``.py`` files with ``ast`` and never executes triton code; it misses what only
exists at import time (docstrings set by decorators, members bound by non-literal code).
"""
from __future__ import annotations

import ast
import inspect
import json
import logging
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("kernelsight.server")

OUT = Path(__file__).resolve().parent / "data" / "triton_language.json"
_MAX_DOC = 1500


def _signature(obj) -> tuple[str, list[str]]:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "", []
    params = [p for p in sig.parameters.values() if not p.name.startswith("_")]
    sig = sig.replace(parameters=params, return_annotation=inspect.Signature.empty)
    text = str(sig)
    return text, [p.name for p in params]


_PARAM = re.compile(r"^\s*:param\s+(?P<name>\w+):\s*(?P<text>.*)$")
_TYPE = re.compile(r"^\s*:type\s+(?P<name>\w+):\s*(?P<text>.*)$")


def _clean(doc: str) -> tuple[str, dict[str, str]]:
    """Docstring -> (markdown, {param: description})."""
    doc = inspect.cleandoc(doc or "")
    lines = doc.splitlines()
    body: list[str] = []
    params: dict[str, str] = {}
    current: str | None = None
    in_type = False  # inside a `:type x:` field, whose wrapped lines are not body text either
    for line in lines:
        m = _PARAM.match(line)
        if m:
            current, in_type = m.group("name"), False
            params[current] = m.group("text").strip()
            continue
        if _TYPE.match(line):
            current, in_type = None, True
            continue
        continued = line.startswith((" ", "\t")) and line.strip()
        if in_type and continued:
            continue
        if current is not None and continued:
            params[current] += " " + line.strip()
            continue
        current, in_type = None, False
        body.append(line)
    # a removed field list leaves its surrounding blank lines behind: keep one
    text = "\n".join(_markdown_blocks(body))
    text = _roles(re.sub(r"\n[ \t]*\n(?:[ \t]*\n)+", "\n\n", text).strip())
    params = {k: _roles(v) for k, v in params.items()}
    if len(text) > _MAX_DOC:
        text = text[:_MAX_DOC].rsplit("\n", 1)[0]
        text += "\n```\n…" if text.count("```") % 2 else "\n…"  # close a cut fence
    return text, params


_CODE_BLOCK = re.compile(r"^\s*\.\. code-block::\s*(?P<lang>\w*)\s*$")


def _markdown_blocks(lines: list[str]) -> list[str]:
    """reST blocks -> markdown: ``.. code-block::`` and ``para::`` literal blocks become
    closed fences (dedented); other indented lines are block quotes, which markdown would
    show as code, so they are dedented into plain paragraphs and lists."""
    out: list[str] = []
    code: list[str] | None = None

    def close() -> None:
        nonlocal code
        if code is not None:
            while code and not code[-1].strip():
                code.pop()
            while code and not code[0].strip():
                code.pop(0)
            indents = [len(c) - len(c.lstrip()) for c in code if c.strip()]
            cut = min(indents, default=0)
            out.extend(c[cut:] for c in code)
            out.extend(["```", ""])
            code = None

    for line in lines:
        if code is not None:
            if not line.strip() or line.startswith((" ", "\t")):
                code.append(line)
                continue
            close()
        if re.match(r"^\s*\.\. highlight::", line):
            continue
        m = _CODE_BLOCK.match(line)
        if m:
            out.append("```" + (m.group("lang") or "python"))
            code = []
            continue
        if line.rstrip().endswith("::") and not line.lstrip().startswith(".."):
            out.extend([line.rstrip()[:-1], "", "```python"])
            code = []
            continue
        out.append(line.lstrip())
    close()
    return out


def _roles(text: str) -> str:
    text = re.sub(r":code:`([^`]*)`", r"`\1`", text)
    return re.sub(r":(?:py:)?(?:func|class|attr|meth|obj):`~?([^`]*)`", r"`\1`", text)


def build_table() -> dict:
    import triton
    import triton.language as tl

    members: dict[str, dict] = {}
    for name in sorted(dir(tl)):
        if name.startswith("_"):
            continue
        obj = getattr(tl, name)
        if inspect.ismodule(obj):
            kind = "module"
        elif inspect.isclass(obj):
            kind = "class"
        elif callable(obj):
            kind = "function"
        else:
            kind = "constant"
        entry: dict = {"kind": kind}
        if kind in ("function", "class"):
            sig, names = _signature(obj)
            entry["signature"] = f"{name}{sig}" if sig else name
            entry["params"] = names
            doc, pdocs = _clean(getattr(obj, "__doc__", "") or "")
            entry["doc"] = doc
            entry["param_docs"] = {k: v for k, v in pdocs.items() if k in names}
        else:
            entry["signature"] = f"{name}: {type(obj).__name__}"
            entry["doc"] = ""
        members[name] = entry
    return {"triton_version": triton.__version__, "members": members}


# --- static reading of the source -------------------------------------------------------------

_MAX_DEPTH = 12  # re-export chains in triton are 1-2 deep; the bound stops import cycles


@dataclass
class _Module:
    """One parsed module of the package: ``parts`` is its dotted path below the package root."""
    parts: tuple[str, ...]
    path: Path | None
    is_package: bool
    future_annotations: bool = False
    bindings: dict[str, object] = field(default_factory=dict)
    stars: list[_ImportRef] = field(default_factory=list)
    all_names: list[str] | None = None


class _SourceReader:
    """Resolves names of a package's modules by reading their source with ``ast`` only."""

    def __init__(self, root: Path):
        self.root = root
        self._modules: dict[tuple[str, ...], _Module | None] = {}

    def file_of(self, parts: tuple[str, ...]) -> tuple[Path, bool] | None:
        base = self.root.joinpath(*parts)
        if (base / "__init__.py").is_file():
            return base / "__init__.py", True
        if base.with_suffix(".py").is_file() and parts:
            return base.with_suffix(".py"), False
        return None

    def is_module(self, parts: tuple[str, ...]) -> bool:
        return self.file_of(parts) is not None

    def module(self, parts: tuple[str, ...]) -> _Module | None:
        """The parsed module, or None when it does not exist or cannot be parsed (logged)."""
        if parts in self._modules:
            return self._modules[parts]
        found = self.file_of(parts)
        mod = None
        if found is not None:
            path, is_pkg = found
            try:
                tree = ast.parse(path.read_bytes(), filename=str(path))
            except SyntaxError as exc:
                log.warning("%s:%s: cannot parse (%s); its tl members are left out",
                            path, exc.lineno, exc.msg)
            except (OSError, ValueError) as exc:
                log.warning("%s: cannot read (%s); its tl members are left out", path, exc)
            else:
                mod = _Module(parts, path, is_pkg)
                _collect(tree, mod)
        self._modules[parts] = mod
        return mod

    def import_base(self, mod: _Module, level: int, name: str | None) -> tuple[str, ...] | None:
        """Parts of the module named by ``from <level dots><name> import``; None if outside."""
        if level == 0:
            dotted = (name or "").split(".")
            if dotted[0] != self.root.name:
                return None  # another distribution: not ours to read
            return tuple(dotted[1:])
        base = mod.parts if mod.is_package else mod.parts[:-1]
        if level - 1 > len(base):
            return None
        base = base[:len(base) - (level - 1)]
        return base + tuple(name.split(".")) if name else base

    def resolve(self, parts: tuple[str, ...], name: str, depth: int = 0):
        """What ``name`` is in module ``parts``: (kind, node, module) or None if not static.

        kind is "def" (FunctionDef/ClassDef node), "assign" (the value/annotation node) or
        "module" (node is the submodule's parts).
        """
        if depth > _MAX_DEPTH:
            return None
        mod = self.module(parts)
        node = mod.bindings.get(name) if mod is not None else None
        if node is None and mod is not None:
            for star in mod.stars:
                target = self.import_base(mod, star.level, star.module)
                if target is not None and target != parts \
                        and name in self.public_names(target):
                    return self.resolve(target, name, depth + 1)
        if node is None:
            return self._submodule(parts, name, mod)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return ("def", node, mod)
        if isinstance(node, _ImportRef):
            target = self.import_base(mod, node.level, node.module)
            if target is None:
                return None
            if node.attr is None:  # ``import pkg.x as y``: the module itself
                return ("module", target, mod) if self.is_module(target) else None
            if target == parts:  # ``from . import x`` inside the package's own __init__
                return self._submodule(parts, node.attr, mod)
            return self.resolve(target, node.attr, depth + 1)
        if isinstance(node, _AssignRef):
            alias = self._alias(mod, node.value, depth)
            return alias if alias is not None else ("assign", node, mod)
        return None

    def _submodule(self, parts: tuple[str, ...], name: str, mod: _Module | None):
        # ``from pkg import x`` falls back to the submodule pkg.x when pkg binds no x
        return ("module", parts + (name,), mod) if self.is_module(parts + (name,)) else None

    def public_names(self, parts: tuple[str, ...]) -> set[str]:
        """What ``from <module> import *`` binds: its ``__all__``, else its public bindings."""
        mod = self.module(parts)
        if mod is None:
            return set()
        if mod.all_names is not None:
            return set(mod.all_names)
        names = {n for n in mod.bindings if not n.startswith("_")}
        for star in mod.stars:
            target = self.import_base(mod, star.level, star.module)
            if target is not None and target != parts:
                names |= self.public_names(target)
        return names

    def _alias(self, mod: _Module, value: ast.AST | None, depth: int):
        """``x = y`` or ``x = m.y`` names another binding: resolve it, else None."""
        if isinstance(value, ast.Name):
            if value.id in mod.bindings and not isinstance(mod.bindings[value.id], _AssignRef):
                return self.resolve(mod.parts, value.id, depth + 1)
            return None
        if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name):
            owner = self.resolve(mod.parts, value.value.id, depth + 1)
            if owner is not None and owner[0] == "module":
                return self.resolve(owner[1], value.attr, depth + 1)
        return None


@dataclass
class _ImportRef:
    level: int
    module: str | None
    attr: str | None  # None: the name is the module itself (``from . import math``)


@dataclass
class _AssignRef:
    value: ast.AST | None
    annotation: ast.AST | None


def _collect(tree: ast.Module, mod: _Module) -> None:
    """Top-level bindings of a module, last one winning as at run time."""
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            mod.bindings[stmt.name] = _prune(stmt)
        elif isinstance(stmt, ast.ImportFrom):
            if stmt.module == "__future__":
                mod.future_annotations |= any(a.name == "annotations" for a in stmt.names)
                continue
            for alias in stmt.names:
                if alias.name == "*":
                    mod.stars.append(_ImportRef(stmt.level, stmt.module, None))
                    continue
                local = alias.asname or alias.name
                mod.bindings[local] = _ImportRef(stmt.level, stmt.module, alias.name)
            if stmt.level == 1 and stmt.module is not None and mod.is_package:
                # importing pkg.sub also binds ``sub`` as an attribute of the package
                first = stmt.module.split(".")[0]
                mod.bindings.setdefault(first, _ImportRef(1, None, first))
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                local = alias.asname or alias.name.split(".")[0]
                mod.bindings[local] = _ImportRef(0, alias.name if alias.asname else local, None)
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    mod.bindings[target.id] = _AssignRef(stmt.value, None)
                    if target.id == "__all__":
                        mod.all_names = _string_list(stmt.value)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            mod.bindings[stmt.target.id] = _AssignRef(stmt.value, stmt.annotation)
            if stmt.target.id == "__all__" and stmt.value is not None:
                mod.all_names = _string_list(stmt.value)
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) \
                and stmt.target.id == "__all__" and mod.all_names is not None:
            mod.all_names += _string_list(stmt.value) or []


def _prune(node):
    """Keep only what an entry needs (docstring, ``__init__``), so that the rest of a
    module's tree is freed before the next module is parsed (lowers the peak RSS)."""
    doc = node.body[:1] if ast.get_docstring(node, clean=False) is not None else []
    if isinstance(node, ast.ClassDef):
        inits = [_prune(s) for s in node.body
                 if isinstance(s, ast.FunctionDef) and s.name == "__init__"]
        node.body = doc + inits[-1:]
    else:
        node.body = doc
    node.decorator_list = []
    return node


def _string_list(node: ast.AST) -> list[str] | None:
    if isinstance(node, (ast.List, ast.Tuple)) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        return [e.value for e in node.elts]
    return None


_KIND = inspect.Parameter


def _format_signature(args: ast.arguments, future_annotations: bool,
                      skip_first: bool = False) -> tuple[str, list[str]]:
    """``ast.arguments`` -> the text ``str(inspect.Signature)`` gives, and the parameter names.

    Parameters starting with ``_`` are dropped (as in ``_signature``). Annotations of modules
    with ``from __future__ import annotations`` are strings at run time, so they are quoted.
    """
    positional = [(a, _KIND.POSITIONAL_ONLY) for a in args.posonlyargs] + \
        [(a, _KIND.POSITIONAL_OR_KEYWORD) for a in args.args]
    defaults: list[ast.AST | None] = [None] * (len(positional) - len(args.defaults)) + \
        list(args.defaults)
    params = [(a, k, d) for (a, k), d in zip(positional, defaults)]
    if skip_first and params:
        params = params[1:]
    if args.vararg is not None:
        params.append((args.vararg, _KIND.VAR_POSITIONAL, None))
    params += [(a, _KIND.KEYWORD_ONLY, d) for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    if args.kwarg is not None:
        params.append((args.kwarg, _KIND.VAR_KEYWORD, None))
    params = [p for p in params if not p[0].arg.startswith("_")]

    parts: list[str] = []
    pos_only_pending = False
    star_done = False
    for arg, kind, default in params:
        if kind != _KIND.POSITIONAL_ONLY and pos_only_pending:
            parts.append("/")
            pos_only_pending = False
        if kind == _KIND.POSITIONAL_ONLY:
            pos_only_pending = True
        if kind == _KIND.VAR_POSITIONAL:
            star_done = True
        if kind == _KIND.KEYWORD_ONLY and not star_done:
            parts.append("*")
            star_done = True
        text = arg.arg
        if kind == _KIND.VAR_POSITIONAL:
            text = "*" + text
        elif kind == _KIND.VAR_KEYWORD:
            text = "**" + text
        if arg.annotation is not None:
            ann = ast.unparse(arg.annotation)
            text += ": " + (repr(ann) if future_annotations else ann)
        if default is not None:
            text += (" = " if arg.annotation is not None else "=") + ast.unparse(default)
        parts.append(text)
    if pos_only_pending:
        parts.append("/")
    return "(" + ", ".join(parts) + ")", [p[0].arg for p in params]


def _class_init(reader: _SourceReader, cls: ast.ClassDef, mod: _Module,
                seen: set[int] | None = None):
    """The ``__init__`` a class uses: its own, else the first found along its static bases."""
    seen = seen or set()
    if id(cls) in seen:
        return None
    seen.add(id(cls))
    for stmt in cls.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
            return stmt, mod
    for base in cls.bases:
        found = None
        if isinstance(base, ast.Name):
            found = reader.resolve(mod.parts, base.id)
        elif isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name):
            owner = reader.resolve(mod.parts, base.value.id)
            if owner is not None and owner[0] == "module":
                found = reader.resolve(owner[1], base.attr)
        if found is not None and found[0] == "def" and isinstance(found[1], ast.ClassDef):
            init = _class_init(reader, found[1], found[2], seen)
            if init is not None:
                return init
    return None


def _constant_type(reader: _SourceReader, ref: _AssignRef, mod: _Module) -> str | None:
    """The type name ``type(obj).__name__`` would give, where the source says it plainly."""
    if ref.annotation is not None:
        return ast.unparse(ref.annotation)
    value = ref.value
    if isinstance(value, ast.Constant):
        return type(value.value).__name__
    if isinstance(value, (ast.List, ast.Tuple, ast.Dict, ast.Set)):
        return type(value).__name__.lower()
    if isinstance(value, ast.Call):
        func = value.func
        name = func.id if isinstance(func, ast.Name) else \
            func.attr if isinstance(func, ast.Attribute) else None
        if isinstance(func, ast.Name):
            found = reader.resolve(mod.parts, func.id)
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            owner = reader.resolve(mod.parts, func.value.id)
            found = reader.resolve(owner[1], func.attr) if owner and owner[0] == "module" \
                else None
        else:
            found = None
        if found is not None and found[0] == "def" and isinstance(found[1], ast.ClassDef):
            return name
    return None


def _entry(reader: _SourceReader, name: str, resolved) -> dict:
    kind, node, mod = resolved
    if kind == "module":
        return {"kind": "module", "signature": f"{name}: module", "doc": ""}
    if kind == "assign":
        type_name = _constant_type(reader, node, mod)
        return {"kind": "constant", "doc": "",
                "signature": f"{name}: {type_name}" if type_name else name}
    if isinstance(node, ast.ClassDef):
        init = _class_init(reader, node, mod)
        if init is not None:
            sig, names = _format_signature(init[0].args, init[1].future_annotations,
                                           skip_first=True)
        else:
            sig, names = "()", []  # object.__init__
        entry_kind = "class"
    else:
        sig, names = _format_signature(node.args, mod.future_annotations)
        entry_kind = "function"
    doc, pdocs = _clean(ast.get_docstring(node) or "")
    return {"kind": entry_kind, "signature": f"{name}{sig}", "params": names, "doc": doc,
            "param_docs": {k: v for k, v in pdocs.items() if k in names}}


def _package_dir_and_version(package_dir: Path | None) -> tuple[Path, str]:
    if package_dir is None:
        from importlib.util import find_spec

        # A top-level find_spec consults the path finders only; triton/__init__.py does not run.
        spec = find_spec("triton")
        if spec is None or not spec.submodule_search_locations:
            raise ModuleNotFoundError("triton is not installed (no package spec found)")
        package_dir = Path(next(iter(spec.submodule_search_locations)))
        try:
            from importlib.metadata import version

            return package_dir, version("triton")
        except Exception:  # metadata missing or broken: fall back to the source's literal
            pass
    package_dir = Path(package_dir)
    init = package_dir / "__init__.py"
    try:
        tree = ast.parse(init.read_bytes(), filename=str(init))
    except (OSError, SyntaxError, ValueError):
        return package_dir, "unknown"
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__version__" for t in stmt.targets) \
                and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
            return package_dir, stmt.value.value
    return package_dir, "unknown"


def build_table_from_source(package_dir: Path | None = None) -> dict:
    """The ``build_table`` structure for an installed triton, read from its source with ``ast``.

    ``package_dir`` is the ``triton`` package directory (default: where
    ``importlib.util.find_spec("triton")`` finds it; nothing of triton is imported or run).
    Public names are those bound at the top of ``language/__init__.py`` (relative imports
    with their ``as`` aliases, submodules, its own defs and assignments) plus its ``__all__``;
    each is followed through re-exports to its ``def``/``class``/assignment. Names that need
    running code to resolve are left out; so are the members of a module that does not parse
    (a warning names the file and line). Docstrings assigned by decorators at import time
    are not seen: those members have an empty ``doc``.

    Raises ModuleNotFoundError when triton is not installed, ValueError (with file and line)
    when ``language/__init__.py`` itself cannot be read or parsed.
    """
    root, version = _package_dir_and_version(package_dir)
    reader = _SourceReader(root)
    lang = ("language",)
    init = reader.module(lang)
    if init is None:
        path = root / "language" / "__init__.py"
        try:
            ast.parse(path.read_bytes(), filename=str(path))
        except SyntaxError as exc:
            raise ValueError(f"{path}:{exc.lineno}: cannot parse: {exc.msg}") from exc
        except OSError as exc:
            raise ValueError(f"{path}: cannot read: {exc}") from exc
        raise ValueError(f"{path}: cannot read")
    names = {n for n in init.bindings if not n.startswith("_")}
    names |= {n for n in init.all_names or [] if not n.startswith("_")}
    for star in init.stars:
        target = reader.import_base(init, star.level, star.module)
        if target is not None and target != lang:
            names |= {n for n in reader.public_names(target) if not n.startswith("_")}
    members: dict[str, dict] = {}
    for name in sorted(names):
        resolved = reader.resolve(lang, name)
        if resolved is not None:
            members[name] = _entry(reader, name, resolved)
    return {"triton_version": version, "members": members}


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else OUT
    table = build_table()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {len(table['members'])} members of triton {table['triton_version']} to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
