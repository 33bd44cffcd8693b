"""End-to-end: the server survives bad input and keeps answering."""
from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types as t
from pygls.exceptions import JsonRpcMethodNotFound
from pytest_lsp import LanguageClient

from server_harness import (EXAMPLES, ROOT, eventually, many_kernels_text, open_doc, open_file,
                            record_publishes, server_config, start, status)

KERNEL = EXAMPLES / "kernels" / "vector_add.py"


@pytest_lsp.fixture(config=server_config())
async def client(lsp_client: LanguageClient):
    await start(lsp_client)
    yield
    await lsp_client.shutdown_session()


async def _alive(client, timeout: float = 10.0) -> None:
    st = await asyncio.wait_for(status(client), timeout)
    assert "documents" in st


@pytest.mark.asyncio
async def test_unknown_method_is_an_error_reply_not_a_crash(client):
    with pytest.raises(JsonRpcMethodNotFound):
        await client.protocol.send_request_async("kernelsight/noSuchMethod", {"x": 1})
    client.protocol.notify("kernelsight/noSuchNotification", {"x": 1})
    await _alive(client)


@pytest.mark.asyncio
async def test_positions_and_ranges_past_the_end_are_clamped(client):
    uri = open_file(client, KERNEL)
    far = t.Position(line=10_000, character=500)
    doc = t.TextDocumentIdentifier(uri)
    await client.text_document_hover_async(t.HoverParams(text_document=doc, position=far))
    await client.text_document_completion_async(t.CompletionParams(text_document=doc,
                                                                   position=far))
    await client.text_document_code_action_async(t.CodeActionParams(
        text_document=doc, range=t.Range(start=far, end=far),
        context=t.CodeActionContext(diagnostics=[])))
    await client.text_document_signature_help_async(t.SignatureHelpParams(
        text_document=doc, position=far))
    client.text_document_did_change(t.DidChangeTextDocumentParams(
        text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[t.TextDocumentContentChangePartial(
            range=t.Range(start=far, end=t.Position(line=20_000, character=0)), text="x\n")]))
    # requests about documents never opened
    ghost = t.TextDocumentIdentifier("file:///nowhere/ghost.py")
    assert await client.text_document_hover_async(
        t.HoverParams(text_document=ghost, position=far)) is None
    await _alive(client)


@pytest.mark.asyncio
async def test_non_python_documents_are_ignored(client):
    uri = (ROOT / "README.md").as_uri()
    open_doc(client, uri, "# Title\n\ntl.load(x)\n#@ tensor X = x[i: N]\n", language="markdown")
    h = await client.text_document_hover_async(t.HoverParams(
        text_document=t.TextDocumentIdentifier(uri), position=t.Position(2, 4)))
    assert h is None
    st = await status(client)
    assert st["documents"][uri]["ignored"] is True
    binary = (ROOT / "blob.py").as_uri()
    open_doc(client, binary, "\x00\x01\ufffd def (((\n" * 100)
    await _alive(client)


@pytest.mark.asyncio
async def test_a_5mb_file_is_declined_with_a_message_and_hover_stays_fast(client):
    text = KERNEL.read_text()
    big = text + ("\n" + "# padding line to make the file large " + "x" * 60) * 55_000
    assert len(big) > 5_000_000
    big_uri = (EXAMPLES / "kernels" / "huge_probe.py").as_uri()
    small = open_file(client, KERNEL)
    open_doc(client, big_uri, big)
    client.text_document_did_save(t.DidSaveTextDocumentParams(
        text_document=t.TextDocumentIdentifier(big_uri)))
    loop = asyncio.get_running_loop()
    started = loop.time()
    await client.text_document_hover_async(t.HoverParams(
        text_document=t.TextDocumentIdentifier(small), position=t.Position(0, 0)))
    await client.text_document_hover_async(t.HoverParams(
        text_document=t.TextDocumentIdentifier(big_uri), position=t.Position(40_000, 3)))
    assert loop.time() - started < 5.0
    await eventually(lambda: any("not analysed" in m.message and "maxFileChars" in m.message
                                 for m in client.messages), what="the too-large message")
    await _alive(client)


@pytest.mark.asyncio
async def test_a_document_closed_mid_analysis_is_dropped_cleanly(client):
    published = record_publishes(client)

    uri = (EXAMPLES / "bugs" / "closed_probe.py").as_uri()
    open_doc(client, uri, many_kernels_text(40))
    client.text_document_did_save(t.DidSaveTextDocumentParams(
        text_document=t.TextDocumentIdentifier(uri)))
    await asyncio.sleep(0.05)
    client.text_document_did_close(t.DidCloseTextDocumentParams(
        text_document=t.TextDocumentIdentifier(uri)))
    await eventually(lambda: any(u == uri and n == 0 for u, _, n in published),
                     what="diagnostics cleared on close")
    closed_at = len(published)
    await asyncio.sleep(2.0)  # long enough for the abandoned run to have finished
    assert [p for p in published[closed_at:] if p[0] == uri] == []
    st = await status(client)
    assert uri not in st["documents"]
    await _alive(client)


CORPUS = Path(os.environ.get("KERNELSIGHT_CORPUS",
                           Path.home() / ".cache" / "kernelsight-corpus"))


@pytest.mark.slow
@pytest.mark.asyncio
async def test_corpus_kernels_opened_one_after_another(client):
    files = [p for p in sorted(CORPUS.rglob("*.py")) if "wheels" not in p.parts] \
        if CORPUS.is_dir() else []
    if not files:
        pytest.skip(f"no corpus at {CORPUS} (run shared/corpus/fetch-real-kernels, or set "
                    "KERNELSIGHT_CORPUS)")
    for path in files:
        uri = path.as_uri()
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        open_doc(client, uri, text)
        client.text_document_did_save(t.DidSaveTextDocumentParams(
            text_document=t.TextDocumentIdentifier(uri)))
        client.text_document_did_close(t.DidCloseTextDocumentParams(
            text_document=t.TextDocumentIdentifier(uri)))
    # The server answers once it has read the whole burst; runs it had started finish in the
    # background (a parse cannot be interrupted).
    await _alive(client, timeout=240.0)
    st = await status(client)
    assert st["documents"] == {}
