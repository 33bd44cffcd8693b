"""Start-up cost of the language server: a persistent cache of the code attrs generates.

Importing lsprotocol defines about 570 attrs classes, and attrs compiles the source of every
generated ``__init__``/``__eq__``/``__repr__``; cattrs then compiles a structuring function
for each message type the first time one arrives (``initialize`` brings the biggest). That is
about a third of the start, and the same work at every start. ``install()`` lets the
module-level ``compile`` of attrs and cattrs look each (source, filename) up in a marshal file
first and records misses; ``save()`` writes the file (after ``initialized``). The key is the source text itself, so another attrs or lsprotocol
version simply misses; the file name carries the Python version, whose bytecode it holds.
Any failure falls back to attrs' own compile.
"""
from __future__ import annotations

import builtins
import marshal
import os
import sys
from pathlib import Path

_CACHE: dict[tuple, object] = {}
_MISSES = 0
_FILE: Path | None = None


def _cache_file() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    tag = f"{sys.implementation.cache_tag}-{sys.version_info.releaselevel}"
    return base / "kernelsight" / f"attrs-code-{tag}.marshal"


def _compile(source, filename, mode, *args, **kwargs):
    global _MISSES
    if args or kwargs or not isinstance(source, str):
        return builtins.compile(source, filename, mode, *args, **kwargs)
    key = (source, filename, mode)
    code = _CACHE.get(key)
    if code is None:
        code = builtins.compile(source, filename, mode)
        _CACHE[key] = code
        _MISSES += 1
    return code


def install() -> None:
    """Route attrs' compile through the cache (call before importing pygls/lsprotocol)."""
    global _FILE
    if "lsprotocol.types" in sys.modules:
        return
    try:
        import attr._make as make
        import cattrs.gen as gen
    except ImportError:
        return
    _FILE = _cache_file()
    try:
        data = marshal.loads(_FILE.read_bytes())
        if isinstance(data, dict):
            _CACHE.update(data)
    except (OSError, ValueError, EOFError, TypeError):
        pass
    make.compile = _compile
    gen.compile = _compile


def save() -> None:
    """Write the cache when something new was compiled since the last save; never raises."""
    global _MISSES
    try:
        if not _MISSES or _FILE is None:
            return
        _MISSES = 0
        _FILE.parent.mkdir(parents=True, exist_ok=True)
        tmp = _FILE.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(marshal.dumps(dict(_CACHE)))
        os.replace(tmp, _FILE)
    except Exception:
        pass
