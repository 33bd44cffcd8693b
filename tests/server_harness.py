"""Shared pieces of the language-server end-to-end tests (pytest-lsp, real subprocess)."""
from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Union

import pytest_lsp
from lsprotocol import types as t
from pytest_lsp import ClientServerConfig, LanguageClient

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SERVER_CMD = [sys.executable, "-m", "kernelsight", "serve"]


def server_config(**env) -> ClientServerConfig:
    environ = dict(os.environ)
    environ.update(env)
    return ClientServerConfig(server_command=list(SERVER_CMD), server_env=environ)


def fix_code_action_union(client: LanguageClient) -> None:
    """lsprotocol 2025.0.0 structures any code action carrying a ``command`` as a Command on
    the client side; decide by the type of the ``command`` field instead."""
    conv = client.protocol._converter
    conv.register_structure_hook(Union[t.Command, t.CodeAction], lambda o, _: conv.structure(
        o, t.Command if isinstance(o.get("command"), str) else t.CodeAction))


def install_apply_edit(client: LanguageClient, answer: bool = True) -> list:
    applied: list[t.ApplyWorkspaceEditParams] = []

    @client.feature(t.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: t.ApplyWorkspaceEditParams):
        applied.append(params)
        return t.ApplyWorkspaceEditResult(applied=answer)

    return applied


async def start(client: LanguageClient, *, pull: bool = False, refresh: bool = True,
                settings: dict | None = None, init_options: dict | None = None,
                root: Path = ROOT) -> None:
    fix_code_action_union(client)
    client.refreshes = {"codeLens": 0, "inlayHint": 0}

    @client.feature(t.WORKSPACE_CODE_LENS_REFRESH)
    def code_lens_refresh(params):
        client.refreshes["codeLens"] += 1

    @client.feature(t.WORKSPACE_INLAY_HINT_REFRESH)
    def inlay_hint_refresh(params):
        client.refreshes["inlayHint"] += 1

    client.set_configuration(settings or {}, section="kernelsight")
    caps = pytest_lsp.client_capabilities("visual-studio-code")
    if pull:  # VS Code's recorded capabilities predate pull diagnostics
        caps.text_document.diagnostic = t.DiagnosticClientCapabilities(
            related_information=True, data_support=True)
        caps.workspace.diagnostics = t.DiagnosticWorkspaceClientCapabilities(
            refresh_support=refresh)
    else:
        caps.text_document.diagnostic = None
    client.init_result = await client.initialize_session(t.InitializeParams(
        capabilities=caps, root_uri=root.as_uri(), initialization_options=init_options,
        workspace_folders=[t.WorkspaceFolder(uri=root.as_uri(), name=root.name)]))


async def eventually(pred, timeout: float = 20.0, what: str = "condition"):
    async def poll():
        while not pred():
            await asyncio.sleep(0.02)
    try:
        await asyncio.wait_for(poll(), timeout)
    except asyncio.TimeoutError:
        raise AssertionError(f"timed out after {timeout}s waiting for {what}") from None


def open_doc(client: LanguageClient, uri: str, text: str, version: int = 1,
             language: str = "python") -> None:
    client.text_document_did_open(t.DidOpenTextDocumentParams(
        t.TextDocumentItem(uri=uri, language_id=language, version=version, text=text)))


def open_file(client: LanguageClient, path: Path, version: int = 1) -> str:
    uri = path.as_uri()
    open_doc(client, uri, path.read_text(encoding="utf-8"), version)
    return uri


async def status(client: LanguageClient) -> dict:
    return await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command="kernelsight.status", arguments=[]))


async def wait_full(client: LanguageClient, uri: str, version: int, timeout: float = 60.0):
    """Wait until the server holds a full-tier result for ``uri`` at ``version``."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        st = await status(client)
        doc = st["documents"].get(uri)
        if doc is not None and doc["full"] == version:
            return st
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"no full analysis of {uri} v{version}: {st}")
        await asyncio.sleep(0.05)


def line_of(text: str, needle: str) -> int:
    for i, line in enumerate(text.split("\n")):
        if needle in line:
            return i
    raise AssertionError(f"{needle!r} not in text")


def many_kernels_text(n: int) -> str:
    """The missing-mask bug example with its kernel repeated ``n`` times (renamed copies)."""
    body = (EXAMPLES / "bugs" / "vector_add_missing_mask.py").read_text()
    start = body.index("#@ tensor X")
    end = body.index("\ndef vector_add")
    kernel = body[start:end]
    copies = [kernel.replace("add_kernel", f"add_kernel_{i}") for i in range(n)]
    return body[:start] + "\n\n".join(copies) + body[end:]


def record_publishes(client: LanguageClient) -> list[tuple[str, int | None, int]]:
    """Replace pytest-lsp's publishDiagnostics handler by one that also records every
    notification as (uri, version, number of diagnostics)."""
    published: list[tuple[str, int | None, int]] = []

    def record(params: t.PublishDiagnosticsParams):
        published.append((params.uri, params.version, len(params.diagnostics)))
        client.diagnostics[params.uri] = params.diagnostics

    client.protocol.fm.features.pop(t.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, None)
    client.feature(t.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)(record)
    return published
