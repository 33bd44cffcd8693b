"""Start-up cost of the language server: a persistent cache of the code attrs generates.

Importing lsprotocol defines about 570 attrs classes, and attrs compiles the source of every
generated ``__init__``/``__eq__``/``__repr__``; cattrs then compiles a structuring function
for each message type the first time one arrives (``initialize`` brings the biggest). That is
about a third of the start, and the same work at every start. ``install()`` lets the
module-level ``compile`` of attrs and cattrs look each (source, filename) up in a marshal file
first and records misses; ``save()`` writes the file (after ``initialized``). The key is the source text itself, so another attrs or lsprotocol
version simply misses; the file name carries the Python version, whose bytecode it holds.
Any failure falls back to attrs' own compile.

``pause_gc()``/``resume_gc()``: the imports before ``initialize`` is answered allocate about
100,000 tracked objects and few of them die, so the cyclic collector's 118 passes over them
are mostly wasted: measured with ``gc.callbacks`` on the 2-core development machine (loaded),
85 ms of CPU before the answer with the default threshold of 700, 43-56 ms with 5,000 (16
passes). Switching the collector off entirely costs 9 MB of resident memory for good (attrs
replaces each slotted class it builds, and the 575 discarded classes then pile up until one
late full collection, which took 87 ms and does not give the pages back), hence the larger
threshold instead. Once the answer is written, ``gc.freeze()`` moves the start-up objects out
of the collector's reach: a full collection then took 0 ms instead of 34 ms, which would
otherwise land in the middle of a hover or a save.
"""
from __future__ import annotations

import builtins
import gc
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


_GC_THRESHOLDS: tuple | None = None
START_GC_THRESHOLD = 5000  # youngest-generation allocations between passes during start-up


def pause_gc() -> None:
    """Make the cyclic collector run rarely until ``resume_gc()`` (start-up only)."""
    global _GC_THRESHOLDS
    if _GC_THRESHOLDS is None:
        _GC_THRESHOLDS = gc.get_threshold()
        gc.set_threshold(START_GC_THRESHOLD, *_GC_THRESHOLDS[1:])


def resume_gc() -> None:
    """Freeze the start-up objects and restore the collector's thresholds (idempotent)."""
    global _GC_THRESHOLDS
    if _GC_THRESHOLDS is None:
        return
    gc.collect(0)  # the youngest generation's garbage, not frozen with the rest
    gc.freeze()
    gc.set_threshold(*_GC_THRESHOLDS)
    _GC_THRESHOLDS = None


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


def release() -> None:
    """Drop the cache from memory and give attrs and cattrs their own compile back.

    Called once ``save()`` has run: the cache's keys are whole generated sources (about 3 MB
    for lsprotocol, seen with tracemalloc after 1,000 edits), and past start-up only the odd
    structuring function of a message type not seen yet would still look one up.
    """
    try:
        import attr._make as make
        import cattrs.gen as gen
    except ImportError:
        return
    for module in (make, gen):
        if module.__dict__.get("compile") is _compile:
            del module.compile  # back to the builtin
    _CACHE.clear()
