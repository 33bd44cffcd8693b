"""Runs the analysis for the server: ``analysis.api.analyze_source`` with a cached front end,
a per-kernel result cache and cooperative cancellation between kernels.

Why the cache: the editor re-analyses a file on every save, usually after an edit to one
kernel; re-running the engine on every untouched kernel would put the whole file's cost on
each save. A test pins that this pipeline's findings equal ``analyze_source``'s.

Runs in a worker thread; nothing here touches the event loop or LSP types.
"""
from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the analysis loads on the first run, after `initialize` is answered
    from kernelsight.analysis.api import Analysis
    from kernelsight.analysis.config import Config


class TierGate:
    """Lets one analysis step run at a time, fast-tier steps first.

    CPython 3.11's ``ast`` module keeps its recursion-depth bookkeeping in shared state, so
    two threads building ASTs at once can fail with "AST constructor recursion depth
    mismatch" (seen here on the corpus). The full tier takes the gate per kernel, so a
    waiting fast-tier run gets in after at most one kernel's engine time.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._busy = False
        self._fast_waiting = 0

    def acquire(self, fast: bool) -> None:
        with self._cond:
            if fast:
                self._fast_waiting += 1
            try:
                while self._busy or (not fast and self._fast_waiting > 0):
                    self._cond.wait()
            finally:
                if fast:
                    self._fast_waiting -= 1
            self._busy = True

    def release(self) -> None:
        with self._cond:
            self._busy = False
            self._cond.notify_all()


GATE = TierGate()


class Cancelled(Exception):
    """The run was superseded (a newer version arrived, or the document was closed)."""


@dataclass
class RunStats:
    """What one run did: kernels analysed vs. taken from the cache, wall seconds."""

    analysed: int = 0
    cached: int = 0
    seconds: float = 0.0
    front_cached: bool = False


@dataclass
class RunResult:
    analysis: Analysis
    parsed: object  # kernelsight.analysis.kernel.ParsedFile
    stats: RunStats = field(default_factory=RunStats)


class KernelCache:
    """LRU of engine results keyed by (kernel text, its position, the file context, settings).

    Thread-safe; bounded by entry count and by the records the results hold (hover records
    and findings, ``engine.result_records``: a result has about one hover record per
    statement of its kernel, so 256 results of large kernels would be tens of MB). The
    newest entry always stays. Values are ``(KernelAnalysis, seconds)``.
    """

    def __init__(self, max_entries: int = 256, max_records: int = 20_000):
        self._data: OrderedDict[tuple, object] = OrderedDict()
        self._lock = threading.Lock()
        self.max_entries = max_entries
        self.max_records = max_records
        self.records = 0

    @staticmethod
    def _records(value) -> int:
        result = value[0] if isinstance(value, tuple) and value else value
        return 1 + len(getattr(result, "hovers", ())) + len(getattr(result, "findings", ()))

    def get(self, key: tuple):
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key: tuple, value) -> None:
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self.records -= self._records(old)
            self._data[key] = value
            self.records += self._records(value)
            while len(self._data) > 1 and (len(self._data) > self.max_entries
                                           or self.records > self.max_records):
                _, evicted = self._data.popitem(last=False)
                self.records -= self._records(evicted)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.records = 0

    def __len__(self) -> int:
        return len(self._data)


class FrontCache:
    """The front end's result (ParsedFile + rule findings) of the last few texts.

    The fast tier parses each version after the debounce; the save that follows analyses the
    same text, and reusing that parse leaves the engine's work on changed kernels as the only
    cost of a save. Entries are treated as read-only by every consumer.
    """

    def __init__(self, max_entries: int = 4):
        self._data: OrderedDict[tuple, tuple] = OrderedDict()
        self._lock = threading.Lock()
        self.max_entries = max_entries

    def get(self, key: tuple):
        with self._lock:
            hit = self._data.get(key)
            if hit is not None:
                self._data.move_to_end(key)
            return hit

    def put(self, key: tuple, value: tuple) -> None:
        with self._lock:
            self._data[key] = value
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)


FRONT_CACHE = FrontCache()


def _context_digest(parsed) -> str:
    """Digest of the file minus every launched kernel's own lines.

    A kernel's result depends on its own text, its helpers, its launch sites, imports and
    module constants (all of which stay in this digest) but not on other kernels' bodies,
    which are each collapsed to one placeholder line so that their edits leave it unchanged.
    """
    lines = parsed.text.split("\n")
    out: list[str] = []
    skip_until = -1
    starts = {k.span.line: k for k in parsed.kernels if not k.is_helper}
    for i, line in enumerate(lines):
        if i <= skip_until:
            continue
        k = starts.get(i)
        if k is not None:
            out.append("\x00kernel " + k.name)
            skip_until = k.span.end_line
            continue
        out.append(line)
    return hashlib.sha1("\n".join(out).encode("utf-8", "surrogatepass")).hexdigest()


def run_analysis(text: str, path: str, config: Config, *, fast: bool,
                 cache: KernelCache | None = None,
                 cancel: threading.Event | None = None) -> RunResult:
    """Analyse ``text`` like ``analyze_source``.

    Args:
        fast: the fast tier (front end, KS5xx, KS9xx), as ``Config(fast_only=True)``.
        cache: engine results per kernel; a hit skips the engine for that kernel.
        cancel: checked before each kernel; when set, ``Cancelled`` is raised.

    Raises:
        Cancelled: ``cancel`` was set.
        ImportError: a part of the analysis (front end, rules, engine) is not installed.
    """
    from kernelsight.analysis import api, frontend, rules  # lazy: tree-sitter loads here

    if cancel is not None and cancel.is_set():
        raise Cancelled()
    started = time.perf_counter()
    stats = RunStats()
    if config.fast_only != fast:
        config = replace(config, fast_only=fast)
    front_key = (hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest(), path,
                 replace(config, fast_only=False).key())
    front = FRONT_CACHE.get(front_key)
    if front is None:
        GATE.acquire(fast)
        try:
            parsed = frontend.parse_file(text, path, budget_ms=config.kernel_budget_ms)
            rule_findings = rules.check_rules(parsed, config)
        finally:
            GATE.release()
        FRONT_CACHE.put(front_key, (parsed, rule_findings))
    else:
        parsed, rule_findings = front
        stats.front_cached = True
    context = None

    def run_kernel(kernel, parsed, config):
        nonlocal context
        if cancel is not None and cancel.is_set():
            raise Cancelled()
        if context is None:
            context = _context_digest(parsed)
        # The source as a digest: verbatim, 256 entries of edits to a 10,000-line kernel
        # held 256 copies of its text (64 MB).
        source = hashlib.sha1(kernel.source.encode("utf-8", "surrogatepass")).hexdigest()
        key = (kernel.name, kernel.span, source, context, config.key())
        hit = cache.get(key) if cache is not None else None
        if hit is not None:
            stats.cached += 1
            return hit[0]
        GATE.acquire(False)
        try:
            if cancel is not None and cancel.is_set():
                raise Cancelled()
            t0 = time.perf_counter()
            result = api.analyze_kernel_safely(kernel, parsed, config)
            seconds = time.perf_counter() - t0
        finally:
            GATE.release()
        stats.analysed += 1
        if cache is not None:
            cache.put(key, (result, seconds))
        return result

    analysis = api.analyze_source(text, path, config, front=(parsed, rule_findings),
                                  run_kernel=run_kernel)
    if cancel is not None and cancel.is_set():
        raise Cancelled()
    stats.seconds = time.perf_counter() - started
    analysis.report.seconds = stats.seconds
    return RunResult(analysis, parsed, stats)
