"""Server state: open documents and their latest analysis results, settings, caches.

A document has at most one fast-tier and one full-tier result, each tagged with the document
version it was computed on. While the user types, the last full result's findings that the
fast tier cannot produce (KS1xx-KS4xx, KS6xx, KS911) are carried along: each edit shifts the
ones below it and drops the ones it touches, so squiggles stay where they belong until the
next save re-analyses the file.
"""
from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .pipeline import KernelCache, RunStats
from .settings import Settings

if TYPE_CHECKING:  # imported where used: the analysis package is not loaded at start-up
    from kernelsight.analysis.api import Analysis
    from kernelsight.analysis.model import Finding, HoverInfo, Span

log = logging.getLogger("kernelsight.server")


def is_fast_code(code: str) -> bool:
    """Codes the fast tier produces (front end, language rules, annotation syntax)."""
    return (code.startswith("KS5") or code.startswith("KS9")) and code != "KS911"


@dataclass
class Result:
    """One analysis run's outcome for one document version."""

    tier: str  # "fast" | "full"
    version: int
    text: str
    analysis: Analysis
    parsed: Any  # kernelsight.analysis.kernel.ParsedFile
    stats: RunStats = field(default_factory=RunStats)


@dataclass
class DocState:
    """What the server knows about one open document."""

    uri: str
    path: str
    version: int = 0
    fast: Result | None = None
    full: Result | None = None
    carried_findings: list[Finding] = field(default_factory=list)
    carried_hovers: list[HoverInfo] = field(default_factory=list)
    debounce: Any = None  # asyncio.TimerHandle of the pending fast run
    fast_cancel: threading.Event | None = None
    full_cancel: threading.Event | None = None
    full_generation: int = 0
    result_id: str | None = None
    result_serial: int = 0
    published: tuple | None = None  # (version, tier) last pushed
    ignored: bool = False  # not a Python file
    too_large_reported: bool = False
    verified: dict = field(default_factory=dict)  # inferred-annotation checks, by version

    def latest(self) -> Result | None:
        """The newest result of either tier (full wins on equal versions)."""
        best = None
        for r in (self.full, self.fast):
            if r is not None and (best is None or r.version > best.version):
                best = r
        return best

    def current(self) -> Result | None:
        """The newest result computed on the document's current version, else None."""
        r = self.latest()
        return r if r is not None and r.version == self.version else None

    def findings(self) -> list[Finding] | None:
        """Findings for the current version, or None when nothing is known about it yet."""
        if self.full is not None and self.full.version == self.version:
            return list(self.full.analysis.report.findings)
        if self.fast is not None and self.fast.version == self.version:
            from kernelsight.analysis.model import Finding

            return sorted(self.fast.analysis.report.findings + self.carried_findings,
                          key=Finding.sort_key)
        return None

    def hovers(self) -> list[HoverInfo]:
        if self.full is not None and self.full.version == self.version:
            return self.full.analysis.hovers
        return self.carried_hovers

    def apply_edit(self, start_line: int | None, end_line: int | None, new_text: str) -> None:
        """Move carried findings through one edit (``start_line`` None = whole text replaced)."""
        if start_line is None or end_line is None:
            self.carried_findings, self.carried_hovers = [], []
            return
        delta = new_text.count("\n") - (end_line - start_line)
        self.carried_findings = [f for f in (_shift_finding(f, start_line, end_line, delta)
                                             for f in self.carried_findings) if f is not None]
        self.carried_hovers = [h for h in (_shift_hover(h, start_line, end_line, delta)
                                           for h in self.carried_hovers) if h is not None]

    def take_full(self, result: Result) -> None:
        self.full = result
        self.carried_findings = [f for f in result.analysis.report.findings
                                 if not is_fast_code(f.code)]
        self.carried_hovers = list(result.analysis.hovers)

    def next_result_id(self) -> str:
        self.result_serial += 1
        self.result_id = f"{self.version}.{self.result_serial}"
        return self.result_id


def _shift_span(s: Span, start: int, end: int, delta: int) -> Span | None:
    if s.end_line < start:
        return s
    if s.line > end:
        from kernelsight.analysis.model import Span

        return Span(s.line + delta, s.col, s.end_line + delta, s.end_col)
    return None


def _shift_finding(f: Finding, start: int, end: int, delta: int) -> Finding | None:
    span = _shift_span(f.span, start, end, delta)
    if span is None:
        return None
    from kernelsight.analysis.model import Related

    related = []
    for r in f.related:
        rs = _shift_span(r.span, start, end, delta)
        if rs is not None:
            related.append(Related(rs, r.message))
    # Fixes were computed on the old text; they are offered again after the next analysis.
    return replace(f, span=span, related=related, fixes=[])


def _shift_hover(h: HoverInfo, start: int, end: int, delta: int) -> HoverInfo | None:
    span = _shift_span(h.span, start, end, delta)
    return None if span is None else replace(h, span=span)


class Session:
    """All documents, the settings sources and the shared kernel cache."""

    def __init__(self) -> None:
        self.docs: dict[str, DocState] = {}
        self.cache = KernelCache()
        self.init_options: dict[str, Any] = {}
        self.client_settings: dict[str, Any] = {}
        self._pyproject: dict[str, tuple[float, Settings | None, str | None]] = {}
        self._resolved: dict[str, Settings] = {}
        self.errors: list[str] = []

    def doc(self, uri: str) -> DocState | None:
        return self.docs.get(uri)

    def open(self, uri: str, path: str, version: int, language_id: str | None) -> DocState:
        state = DocState(uri=uri, path=path, version=version)
        state.ignored = not _is_python(path, language_id)
        self.docs[uri] = state
        return state

    def close(self, uri: str) -> DocState | None:
        state = self.docs.pop(uri, None)
        if state is not None:
            for ev in (state.fast_cancel, state.full_cancel):
                if ev is not None:
                    ev.set()
            if state.debounce is not None:
                state.debounce.cancel()
        return state

    def settings_changed(self) -> None:
        self._resolved.clear()
        self._pyproject.clear()

    def settings_for(self, path: str) -> Settings:
        """Resolved settings for a document path; bad sources are skipped and remembered in
        ``errors`` (the caller shows them once)."""
        folder = str(Path(path).parent) if path else ""
        cached = self._resolved.get(folder)
        if cached is not None and not self._pyproject_changed(folder):
            return cached
        from kernelsight.analysis.config import ConfigError

        settings = Settings()
        pyproject = self._load_pyproject(folder)
        if pyproject is not None:
            settings = pyproject
        for raw, where in ((self.init_options, "initializationOptions"),
                           (self.client_settings, "workspace/configuration 'kernelsight'")):
            try:
                settings = settings.merged(raw, where)
            except ConfigError as exc:
                self.errors.append(str(exc))
        self._resolved[folder] = settings
        return settings

    def _pyproject_changed(self, folder: str) -> bool:
        entry = self._pyproject.get(folder)
        if entry is None:
            return True
        mtime, _, where = entry
        if where is None:
            return False
        try:
            return os.stat(where).st_mtime != mtime
        except OSError:
            return True

    def _load_pyproject(self, folder: str) -> Settings | None:
        from kernelsight.analysis.config import ConfigError, find_pyproject

        if not folder or not os.path.isdir(folder):
            self._pyproject[folder] = (0.0, None, None)
            return None
        found = find_pyproject(Path(folder))
        if found is None:
            self._pyproject[folder] = (0.0, None, None)
            return None
        try:
            from kernelsight.analysis.config import tomllib

            data = tomllib.loads(found.read_text(encoding="utf-8"))
            section = data.get("tool", {}).get("kernelsight", {})
            settings = Settings().merged(section, f"{found} [tool.kernelsight]")
        except (OSError, ValueError, ConfigError) as exc:
            self.errors.append(f"{found}: {exc}")
            settings = None
        try:
            mtime = os.stat(found).st_mtime
        except OSError:
            mtime = 0.0
        self._pyproject[folder] = (mtime, settings, str(found))
        return settings


def _is_python(path: str, language_id: str | None) -> bool:
    if language_id:
        return language_id.lower() in ("python", "py", "triton")
    return path.endswith((".py", ".pyi"))
