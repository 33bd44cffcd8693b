"""Schedules analysis runs off the event loop.

Two single-thread pools: the fast tier (tree-sitter front end, KS5xx, KS9xx; milliseconds) and
the full tier (the invariant engine; up to seconds per kernel). Separate pools keep a long full
run from delaying the fast tier while the user types; the event loop itself only converts and
publishes, so hover and completion answer while either pool works.

Superseding: every run carries a ``threading.Event``; a newer run for the same document sets
the older one's event (the pipeline checks it before each kernel), and a result is accepted
only if the document is still open at the version the run started from.
"""
from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Callable

from .pipeline import Cancelled, run_analysis
from .session import DocState, Result, Session

log = logging.getLogger("kernelsight.server")


class Analyzer:
    """Runs and supersedes analyses; calls ``on_result(state, result)`` on the event loop."""

    def __init__(self, session: Session, get_text: Callable[[str], tuple[str, int] | None],
                 on_result: Callable[[DocState, Result], None]):
        self.session = session
        self.get_text = get_text
        self.on_result = on_result
        self._fast_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ks-fast")
        self._full_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ks-full")
        self._missing_reported: set[str] = set()
        self.on_unavailable: Callable[[str], None] | None = None
        # Counters the tests and the benchmark read through kernelsight/status.
        self.superseded = 0
        self.completed = {"fast": 0, "full": 0}

    def schedule_fast(self, state: DocState, delay_s: float) -> None:
        """(Re)start the debounce timer of the fast tier for ``state``."""
        if state.debounce is not None:
            state.debounce.cancel()
        loop = asyncio.get_running_loop()
        uri = state.uri
        state.debounce = loop.call_later(
            delay_s, lambda: asyncio.ensure_future(self.run(uri, "fast")))

    def cancel_full(self, state: DocState) -> None:
        if state.full_cancel is not None and not state.full_cancel.is_set():
            state.full_cancel.set()
            self.superseded += 1
        state.full_cancel = None

    async def run(self, uri: str, tier: str) -> Result | None:
        """Analyse the document's current text; None when superseded, closed or failing."""
        state = self.session.doc(uri)
        if state is None or state.ignored:
            return None
        got = self.get_text(uri)
        if got is None:
            return None
        text, version = got
        settings = self.session.settings_for(state.path)
        if not settings.enable:
            return None
        if len(text) > settings.max_file_chars:
            if not state.too_large_reported:
                state.too_large_reported = True
                msg = (f"{state.path or uri}: not analysed, {len(text):,} characters is more "
                       f"than kernelsight.maxFileChars = {settings.max_file_chars:,}")
                log.warning(msg)
                if self.on_unavailable is not None:
                    self.on_unavailable(msg)
            return None
        cancel = threading.Event()
        if tier == "fast":
            if state.debounce is not None:
                state.debounce.cancel()
                state.debounce = None
            if state.fast_cancel is not None:
                state.fast_cancel.set()
            state.fast_cancel = cancel
            pool = self._fast_pool
        else:
            self.cancel_full(state)
            state.full_cancel = cancel
            pool = self._full_pool
        loop = asyncio.get_running_loop()
        job = partial(run_analysis, text, state.path or uri, settings.config, fast=tier == "fast",
                      cache=self.session.cache, cancel=cancel)
        try:
            rr = await loop.run_in_executor(pool, job)
        except Cancelled:
            self.superseded += tier == "fast"
            log.debug("%s analysis of %s v%s superseded", tier, uri, version)
            return None
        except ImportError as exc:
            self._report_missing(exc)
            return None
        except RecursionError:
            log.warning("%s analysis of %s: expression nesting too deep", tier, uri)
            return None
        except Exception:  # an analysis bug must not take the server down
            log.exception("%s analysis of %s v%s failed", tier, uri, version)
            return None
        finally:
            if tier == "full" and state.full_cancel is cancel:
                state.full_cancel = None
            if tier == "fast" and state.fast_cancel is cancel:
                state.fast_cancel = None
        if cancel.is_set():
            return None
        current = self.session.doc(uri)
        if current is not state or state.version != version:
            log.debug("%s result for %s v%s dropped: document now v%s", tier, uri, version,
                      None if current is None else current.version)
            return None
        result = Result(tier, version, text, rr.analysis, rr.parsed, rr.stats)
        if tier == "fast":
            state.fast = result
        else:
            state.take_full(result)
        self.completed[tier] += 1
        log.info("%s analysis of %s v%s: %d findings, %d kernels analysed, %d cached, %.1f ms",
                 tier, uri.rsplit("/", 1)[-1], version, len(rr.analysis.report.findings),
                 rr.stats.analysed, rr.stats.cached, rr.stats.seconds * 1000)
        self.on_result(state, result)
        return result

    async def ensure_current(self, uri: str) -> Result | None:
        """A result for the document's current version, running the fast tier now if none."""
        state = self.session.doc(uri)
        if state is None:
            return None
        current = state.current()
        if current is not None:
            return current
        return await self.run(uri, "fast")

    def _report_missing(self, exc: ImportError) -> None:
        name = getattr(exc, "name", None) or str(exc)
        if name in self._missing_reported:
            return
        self._missing_reported.add(name)
        msg = (f"kernelsight analysis unavailable ({exc}); the server keeps running without "
               "its diagnostics")
        log.warning(msg)
        if self.on_unavailable is not None:
            self.on_unavailable(msg)

    async def on_full_thread(self, fn, *args):
        """``fn(*args)`` on the full analysis' thread, awaited. z3 is not thread-safe (see
        ``solver._Z3_LOCK``): work that may query it, such as verifying a quick fix by
        analysing the edited text, runs where the full analysis runs, one job at a time."""
        return await asyncio.get_running_loop().run_in_executor(self._full_pool, fn, *args)

    def shutdown(self) -> None:
        for state in self.session.docs.values():
            for ev in (state.fast_cancel, state.full_cancel):
                if ev is not None:
                    ev.set()
        self._fast_pool.shutdown(wait=False, cancel_futures=True)
        self._full_pool.shutdown(wait=False, cancel_futures=True)
