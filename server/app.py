"""Builds the Kernelsight language server: a pygls ``LanguageServer`` holding the session and
the analyzer, with one module per LSP feature registering its handlers.

Only pygls, lsprotocol and the light analysis modules (model, config, codes) are imported
here; tree-sitter and z3 load on the first analysis, in a worker thread.
"""
from __future__ import annotations

import asyncio
import logging
import threading
from urllib.parse import unquote, urlparse

from lsprotocol import types as t
from pygls.lsp.server import LanguageServer

from kernelsight import __version__

from .analyzer import Analyzer
from .convert import LineIndex
from .protocol import KernelsightProtocol
from .session import DocState, Result, Session

log = logging.getLogger("kernelsight.server")


class KernelsightServer(LanguageServer):
    """The language server. Features live in ``server.features.*``."""

    def __init__(self) -> None:
        super().__init__("kernelsight", __version__, protocol_cls=KernelsightProtocol,
                         max_workers=2)
        self.session = Session()
        self.analyzer = Analyzer(self.session, self.document_text, self._on_result)
        self.analyzer.on_unavailable = self.show_warning
        self.loop_thread: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._index_cache: tuple | None = None

    # --- helpers shared by features -----------------------------------------------------

    def document_text(self, uri: str) -> tuple[str, int] | None:
        """(text, version) of an open document, or None."""
        doc = self.workspace.text_documents.get(uri)
        if doc is None:
            return None
        return doc.source, doc.version or 0

    def line_index(self, text: str) -> LineIndex:
        return LineIndex(text, self.workspace.position_encoding)

    def index_for(self, uri: str) -> LineIndex | None:
        """The LineIndex of an open document's current text (cached per version)."""
        doc = self.workspace.text_documents.get(uri)
        if doc is None:
            return None
        key = (uri, doc.version)
        if self._index_cache is not None and self._index_cache[0] == key:
            return self._index_cache[1]
        index = self.line_index(doc.source)
        self._index_cache = (key, index)
        return index

    @property
    def push_mode(self) -> bool:
        """Push diagnostics unless the client both pulls them (``textDocument.diagnostic``)
        and lets the server ask for a new pull (``workspace.diagnostics.refreshSupport``).

        A pull client without the refresh request would keep the fast tier's result of the
        last edit after a save-time (full) analysis until its next edit; such a client gets
        push diagnostics only (no diagnostic provider is announced, so nothing is shown
        twice). docs/server.md states the rule.
        """
        return not (self.client_supports("text_document.diagnostic")
                    and self.client_supports("workspace.diagnostics.refresh_support"))

    def drop_pull_provider_unless_pulled(self) -> None:
        """Called from the ``initialize`` handler, before pygls computes the capabilities:
        a push-mode client is not offered ``textDocument/diagnostic``."""
        if self.push_mode:
            for method in (t.TEXT_DOCUMENT_DIAGNOSTIC, t.WORKSPACE_DIAGNOSTIC):
                self.protocol.fm.features.pop(method, None)

    def client_supports(self, dotted: str) -> bool:
        node = self.client_capabilities
        for part in dotted.split("."):
            node = getattr(node, part, None) if node is not None else None
        return bool(node)

    def call_on_loop(self, fn, *args) -> None:
        """Run ``fn(*args)`` on the event loop thread (safe from worker threads)."""
        loop = self._loop
        if loop is None or threading.get_ident() == self.loop_thread:
            fn(*args)
        else:
            loop.call_soon_threadsafe(fn, *args)

    def show_error(self, message: str) -> None:
        self.call_on_loop(self.window_show_message,
                          t.ShowMessageParams(type=t.MessageType.Error, message=message))

    def show_warning(self, message: str) -> None:
        self.call_on_loop(self.window_show_message,
                          t.ShowMessageParams(type=t.MessageType.Warning, message=message))

    def show_info(self, message: str) -> None:
        self.call_on_loop(self.window_show_message,
                          t.ShowMessageParams(type=t.MessageType.Info, message=message))

    def flush_setting_errors(self) -> None:
        errors, self.session.errors = self.session.errors, []
        for e in dict.fromkeys(errors):
            log.warning("settings: %s", e)
            self.show_error(f"kernelsight settings: {e}")

    # --- results -> client ----------------------------------------------------------------

    def _on_result(self, state: DocState, result: Result) -> None:
        from .features import diagnostics

        state.next_result_id()
        if self.push_mode:
            diagnostics.publish(self, state)
        elif result.tier == "full" and self.client_supports(
                "workspace.diagnostics.refresh_support"):
            self.workspace_diagnostic_refresh(None)
        if result.tier == "full":
            if self.client_supports("workspace.code_lens.refresh_support"):
                self.workspace_code_lens_refresh(None)
            if (self.client_supports("workspace.inlay_hint.refresh_support")
                    and self.session.settings_for(state.path).inlay_hints):
                self.workspace_inlay_hint_refresh(None)


def uri_to_path(uri: str) -> str:
    """Filesystem path of a file:// URI; other schemes give their path part (never raises)."""
    try:
        parsed = urlparse(uri)
        return unquote(parsed.path) if parsed.scheme in ("file", "") else unquote(parsed.path)
    except ValueError:
        return ""


class _ClientLogHandler(logging.Handler):
    """Forwards ``kernelsight.*`` log records to the client's log (window/logMessage)."""

    _TYPES = {logging.ERROR: t.MessageType.Error, logging.WARNING: t.MessageType.Warning,
              logging.INFO: t.MessageType.Info}

    def __init__(self, server: KernelsightServer):
        super().__init__(level=logging.INFO)
        self.server = server

    def emit(self, record: logging.LogRecord) -> None:
        try:
            kind = self._TYPES.get(record.levelno, t.MessageType.Log)
            if record.levelno >= logging.ERROR:
                kind = t.MessageType.Error
            params = t.LogMessageParams(type=kind, message=self.format(record))
            self.server.call_on_loop(self.server.window_log_message, params)
        except Exception:  # logging must never raise into the caller
            pass


def build_server() -> KernelsightServer:
    """A fresh server with every feature registered."""
    from .features import (code_actions, code_lens, commands, completion, configuration,
                           diagnostics, document_symbols, hover, inlay_hints, signature_help)

    server = KernelsightServer()
    handler = _ClientLogHandler(server)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger = logging.getLogger("kernelsight")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    for feature in (configuration, diagnostics, hover, completion, signature_help, code_actions,
                    code_lens, document_symbols, inlay_hints, commands):
        feature.register(server)
    return server
