"""Document sync and diagnostics.

Open: fast tier now, full tier right after. Change: incremental text sync (pygls applies the
edits), carried full-tier findings move with the edit, the full run in flight is superseded and
the fast tier is debounced. Save: full tier. Close: everything for the document is cancelled
and its diagnostics cleared.

Pull (``textDocument/diagnostic``, ``workspace/diagnostic``) serves a client that announces
pull diagnostics and ``workspace.diagnostics.refreshSupport``: a finished full run sends
``workspace/diagnostic/refresh``. Every other client gets push
(``textDocument/publishDiagnostics``) only, and is not offered the pull provider (see
``KernelsightServer.push_mode``).
"""
from __future__ import annotations

import asyncio
import logging

from lsprotocol import types as t

from ..convert import finding_to_diagnostic

log = logging.getLogger("kernelsight.server")


def diagnostics_for(ls, state) -> list[t.Diagnostic] | None:
    """LSP diagnostics of the document's current version, None when not analysed yet."""
    findings = state.findings()
    if findings is None:
        return None
    index = ls.index_for(state.uri)
    if index is None:
        return None
    settings = ls.session.settings_for(state.path)
    related = ls.client_supports("text_document.publish_diagnostics.related_information") \
        or not ls.push_mode
    return [finding_to_diagnostic(f, index, state.uri, settings.docs_url, related)
            for f in findings]


def publish(ls, state) -> None:
    diags = diagnostics_for(ls, state)
    if diags is None:
        return
    ls.text_document_publish_diagnostics(t.PublishDiagnosticsParams(
        uri=state.uri, diagnostics=diags, version=state.version))


def register(ls) -> None:
    @ls.feature(t.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls, params: t.DidOpenTextDocumentParams):
        from ..app import uri_to_path

        doc = params.text_document
        state = ls.session.open(doc.uri, uri_to_path(doc.uri), doc.version, doc.language_id)
        if state.ignored:
            log.info("not analysing %s (language %s)", doc.uri, doc.language_id)
            return
        ls.session.settings_for(state.path)
        ls.flush_setting_errors()
        asyncio.ensure_future(ls.analyzer.run(doc.uri, "fast"))
        asyncio.ensure_future(ls.analyzer.run(doc.uri, "full"))

    @ls.feature(t.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls, params: t.DidChangeTextDocumentParams):
        state = ls.session.doc(params.text_document.uri)
        if state is None:
            return
        state.version = params.text_document.version
        for change in params.content_changes:
            rng = getattr(change, "range", None)
            if rng is None:
                state.apply_edit(None, None, change.text)
            else:
                state.apply_edit(rng.start.line, rng.end.line, change.text)
        if state.ignored:
            return
        ls.analyzer.cancel_full(state)
        settings = ls.session.settings_for(state.path)
        ls.analyzer.schedule_fast(state, settings.debounce_ms / 1000.0)

    @ls.feature(t.TEXT_DOCUMENT_DID_SAVE, t.SaveOptions(include_text=False))
    def did_save(ls, params: t.DidSaveTextDocumentParams):
        state = ls.session.doc(params.text_document.uri)
        if state is None or state.ignored:
            return
        asyncio.ensure_future(ls.analyzer.run(state.uri, "full"))

    @ls.feature(t.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls, params: t.DidCloseTextDocumentParams):
        uri = params.text_document.uri
        state = ls.session.close(uri)
        if state is not None and ls.push_mode and not state.ignored:
            ls.text_document_publish_diagnostics(
                t.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @ls.feature(t.TEXT_DOCUMENT_DIAGNOSTIC,
                t.DiagnosticOptions(identifier="kernelsight", inter_file_dependencies=False,
                                    workspace_diagnostics=True))
    async def document_diagnostic(ls, params: t.DocumentDiagnosticParams):
        uri = params.text_document.uri
        state = ls.session.doc(uri)
        if state is None or state.ignored:
            return t.RelatedFullDocumentDiagnosticReport(items=[])
        await ls.analyzer.ensure_current(uri)
        state = ls.session.doc(uri)
        if state is None:
            return t.RelatedFullDocumentDiagnosticReport(items=[])
        diags = diagnostics_for(ls, state)
        if diags is None:  # superseded while waiting: the next pull gets the new version
            return t.RelatedFullDocumentDiagnosticReport(items=[])
        if state.result_id is None:
            state.next_result_id()
        if params.previous_result_id and params.previous_result_id == state.result_id:
            return t.RelatedUnchangedDocumentDiagnosticReport(result_id=state.result_id)
        return t.RelatedFullDocumentDiagnosticReport(items=diags, result_id=state.result_id)

    @ls.feature(t.WORKSPACE_DIAGNOSTIC)
    async def workspace_diagnostic(ls, params: t.WorkspaceDiagnosticParams):
        previous = {p.uri: p.value for p in (params.previous_result_ids or [])}
        items: list = []
        for uri, state in list(ls.session.docs.items()):
            if state.ignored:
                continue
            await ls.analyzer.ensure_current(uri)
            diags = diagnostics_for(ls, state)
            if diags is None:
                continue
            if state.result_id is None:
                state.next_result_id()
            if previous.get(uri) == state.result_id:
                items.append(t.WorkspaceUnchangedDocumentDiagnosticReport(
                    uri=uri, version=state.version, result_id=state.result_id))
            else:
                items.append(t.WorkspaceFullDocumentDiagnosticReport(
                    uri=uri, version=state.version, items=diags, result_id=state.result_id))
        return t.WorkspaceDiagnosticReport(items=items)
