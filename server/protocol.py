"""pygls' protocol with two answers it lacks: a request whose params fail validation (a
negative line, a missing field) gets an InvalidParams error instead of silence, and text sync
notifications about documents that were never opened are ignored instead of surfacing as
"Error in server: KeyError" to the user."""
from __future__ import annotations

import logging
from contextvars import ContextVar

from lsprotocol import types as t
from pygls.exceptions import JsonRpcInvalidParams
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

log = logging.getLogger("kernelsight.server")

# The ``workDoneToken`` of the ``workspace/executeCommand`` request being handled. pygls hands
# a command handler only the command's arguments; the handler's task is created right after
# the override below has set this, so the task's copy of the context holds the request's own
# token (or None).
WORK_DONE_TOKEN: ContextVar = ContextVar("kernelsight_work_done_token", default=None)

# The parts of the client's capabilities that this server (``KernelsightServer.client_supports``)
# and pygls 2.1 (position encoding, save and rename options, file operations, notebooks) read;
# None keeps a whole subtree. ``initialize`` is structured with only these: cattrs builds a
# structuring function per capability class on first use, and VS Code's full set needs about
# 60 of them, 44 ms of CPU on the loaded 2-core machine, in the middle of the editor's wait for
# the answer. tests/test_server_units.py pins that every ``client_supports`` path is kept.
READ_CAPABILITIES: dict = {
    "general": {"positionEncodings": None},
    "textDocument": {
        "synchronization": None,
        "rename": None,
        "publishDiagnostics": None,
        "diagnostic": None,
        "completion": {"completionItem": {"snippetSupport": None}},
    },
    "workspace": {"configuration": None, "diagnostics": None, "codeLens": None,
                  "inlayHint": None, "fileOperations": None, "workspaceFolders": None},
    "window": {"workDoneProgress": None},
    "notebookDocument": None,
}


def keep_read_capabilities(raw, keep: dict | None = READ_CAPABILITIES):
    """``raw`` (client capabilities as JSON) reduced to the paths in ``keep``."""
    if keep is None or not isinstance(raw, dict):
        return raw
    return {k: keep_read_capabilities(raw[k], sub) for k, sub in keep.items() if k in raw}


class _Dropped:
    """Stands for a message already answered (or not answerable); handle_message skips it."""

    jsonrpc = None


class KernelsightProtocol(LanguageServerProtocol):
    def structure_message(self, data: dict):
        if isinstance(data, dict) and data.get("method") == t.INITIALIZE:
            params = data.get("params")
            if isinstance(params, dict) and isinstance(params.get("capabilities"), dict):
                data = {**data, "params": {
                    **params, "capabilities": keep_read_capabilities(params["capabilities"])}}
        try:
            return super().structure_message(data)
        except (JsonRpcInvalidParams, Exception) as exc:
            if not isinstance(data, dict) or "jsonrpc" not in data:
                raise
            method = data.get("method", "")
            if "id" in data and method:
                log.warning("invalid params for %s (request %s): answered InvalidParams",
                            method, data.get("id"))
                self._send_response(data["id"], error=JsonRpcInvalidParams(
                    f"invalid params for {method}: {type(exc).__name__}").to_response_error())
            else:
                log.warning("ignored %s with invalid params", method or "a message")
            return _Dropped()

    def handle_message(self, message):
        if isinstance(message, _Dropped):
            return
        return super().handle_message(message)

    def _check_handler_result(self, future):
        # pygls 2.1 files the future of every notification whose handler is a generator or a
        # coroutine (didOpen, didChange, didClose, didSave) in _request_futures under a random
        # id and never removes it: the server grew by about 20 MB per 1,000 editing sessions
        # (tests/test_regressions_fuzz.py). Drop it once done.
        try:
            for key in [k for k, f in list(self._request_futures.items()) if f is future]:
                self._request_futures.pop(key, None)
        except RuntimeError:  # changed size while copied from another thread: next time
            pass
        return super()._check_handler_result(future)

    @lsp_method(t.SHUTDOWN)
    def lsp_shutdown(self, *args):
        # pygls cancels the pending futures while iterating over _request_futures; a cancelled
        # future's done-callback (_check_handler_result above) removes it from that dict, so
        # the iteration failed with "dictionary changed size" and shutdown answered an
        # internal error. Iterate over a snapshot.
        if (user_handler := self.fm.features.get(t.SHUTDOWN)) is not None:
            yield user_handler, args, None
        current_id = self.msg_id
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != current_id and not future.done():
                future.cancel()
        self._shutdown = True
        return None

    @lsp_method(t.WORKSPACE_EXECUTE_COMMAND)
    def lsp_workspace__execute_command(self, params: t.ExecuteCommandParams):
        WORK_DONE_TOKEN.set(params.work_done_token)
        return (yield from super().lsp_workspace__execute_command(params))

    def _is_open(self, uri: str) -> bool:
        return uri in self.workspace.text_documents

    @lsp_method(t.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: t.DidChangeTextDocumentParams):
        if not self._is_open(params.text_document.uri):
            log.debug("didChange of %s, which is not open: ignored", params.text_document.uri)
            return None
        return (yield from super().lsp_text_document__did_change(params))

    @lsp_method(t.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: t.DidCloseTextDocumentParams):
        if not self._is_open(params.text_document.uri):
            log.debug("didClose of %s, which is not open: ignored", params.text_document.uri)
            return None
        return (yield from super().lsp_text_document__did_close(params))
