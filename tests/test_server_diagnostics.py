"""End-to-end: diagnostics of the language server (push and pull), superseding, settings.

Each test starts the real server (`python -m kernelsight serve`) through pytest-lsp.
"""
from __future__ import annotations

import asyncio
import shutil
import textwrap

import pytest
import pytest_lsp
from lsprotocol import types as t
from pytest_lsp import LanguageClient

from bug_markers import expected_findings
from server_harness import (EXAMPLES, eventually, many_kernels_text, open_doc,
                            record_publishes, open_file, server_config, start,
                            status, wait_full)

BUG = EXAMPLES / "bugs" / "vector_add_missing_mask.py"


@pytest_lsp.fixture(config=server_config())
async def client(lsp_client: LanguageClient):
    await start(lsp_client)
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=server_config())
async def pull_client(lsp_client: LanguageClient):
    await start(lsp_client, pull=True)
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=server_config())
async def pull_client_without_refresh(lsp_client: LanguageClient):
    await start(lsp_client, pull=True, refresh=False)
    yield
    await lsp_client.shutdown_session()


def _codes(diags) -> set[tuple[str, int]]:
    return {(d.code, d.range.start.line) for d in diags or []}


@pytest.mark.asyncio
async def test_buggy_example_gets_diagnostic_with_code_link_and_related_information(client):
    uri = open_file(client, BUG)
    [(code, line1)] = expected_findings(BUG)
    await eventually(lambda: (code, line1 - 1) in _codes(client.diagnostics.get(uri)),
                     what=f"{code} on line {line1}")
    [d] = [d for d in client.diagnostics[uri] if (d.code, d.range.start.line) == (code, line1 - 1)]
    assert d.source == "kernelsight"
    assert d.severity == t.DiagnosticSeverity.Error
    assert d.code_description is not None and d.code_description.href.endswith(f"{code}.md")
    assert d.related_information, "the counterexample travels as related information"
    assert any(r.message.startswith("counterexample") for r in d.related_information)
    assert all(r.location.uri == uri for r in d.related_information)
    # the range covers the reported expression on its line, never past the line's end
    line_text = BUG.read_text().split("\n")[line1 - 1]
    assert d.range.end.character <= len(line_text)


@pytest.mark.asyncio
async def test_pull_client_gets_reports_unchanged_ids_and_a_refresh_after_full_analysis(
        pull_client):
    client = pull_client
    uri = open_file(client, BUG)
    await wait_full(client, uri, 1)
    st = await status(client)
    assert st["push"] is False
    [(code, line1)] = expected_findings(BUG)
    report = await client.text_document_diagnostic_async(t.DocumentDiagnosticParams(
        text_document=t.TextDocumentIdentifier(uri)))
    assert report.kind == "full"
    assert (code, line1 - 1) in _codes(report.items)
    again = await client.text_document_diagnostic_async(t.DocumentDiagnosticParams(
        text_document=t.TextDocumentIdentifier(uri), previous_result_id=report.result_id))
    assert again.kind == "unchanged"
    ws = await client.workspace_diagnostic_async(t.WorkspaceDiagnosticParams(
        previous_result_ids=[]))
    [item] = [i for i in ws.items if i.uri == uri]
    assert (code, line1 - 1) in _codes(item.items) and item.version == 1
    await eventually(lambda: client.diagnostic_refresh_count >= 1, what="diagnostic refresh")
    assert client.diagnostics.get(uri) is None, "a pull client gets no pushed diagnostics"


@pytest.mark.asyncio
async def test_pull_client_without_refresh_support_gets_save_time_results_pushed(
        pull_client_without_refresh):
    """Such a client could not be told that a save-time analysis changed the result, so the
    server offers no pull provider and pushes every result, the full tier's included."""
    client = pull_client_without_refresh
    assert client.init_result.capabilities.diagnostic_provider is None
    published = record_publishes(client)
    [(code, line1)] = expected_findings(BUG)
    buggy = BUG.read_text()
    bug_line = buggy.split("\n")[line1 - 1]
    fixed = buggy.replace(bug_line, bug_line.replace("x + y)", "x + y, mask=mask)"))
    assert fixed != buggy
    uri = BUG.with_name("generated_pull_without_refresh.py").as_uri()
    open_doc(client, uri, fixed)
    await wait_full(client, uri, 1)
    assert (await status(client))["push"] is True
    await eventually(lambda: (uri, 1, 0) in published, what="clean diagnostics of v1")
    # The edit brings the bug back; the fast tier cannot see it (KS1xx come from the engine).
    client.text_document_did_change(t.DidChangeTextDocumentParams(
        text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[t.TextDocumentContentChangeWholeDocument(text=buggy)]))
    await eventually(lambda: any(p[:2] == (uri, 2) for p in published), what="fast tier of v2")
    assert (code, line1 - 1) not in _codes(client.diagnostics[uri])
    client.text_document_did_save(t.DidSaveTextDocumentParams(
        text_document=t.TextDocumentIdentifier(uri)))
    await eventually(lambda: (code, line1 - 1) in _codes(client.diagnostics.get(uri)),
                     what=f"the save-time {code} pushed")
    assert published[-1][:2] == (uri, 2)


@pytest.mark.asyncio
async def test_superseded_full_analysis_is_cancelled_and_only_the_latest_version_published(
        client):
    published = record_publishes(client)

    # Many kernels make the full run long enough to be overtaken by the next edit.
    text = many_kernels_text(40)
    uri = (EXAMPLES / "bugs" / "generated_many_kernels.py").as_uri()
    open_doc(client, uri, text)
    for version in range(2, 6):
        client.text_document_did_change(t.DidChangeTextDocumentParams(
            text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[t.TextDocumentContentChangePartial(
                range=t.Range(start=t.Position(0, 0), end=t.Position(0, 0)), text="# edit\n")]))
        client.text_document_did_save(t.DidSaveTextDocumentParams(
            text_document=t.TextDocumentIdentifier(uri)))
        await asyncio.sleep(0.01)
    st = await wait_full(client, uri, 5, timeout=120)
    assert st["superseded"] >= 1
    await eventually(lambda: any(p[:2] == (uri, 5) for p in published), what="diagnostics of version 5")
    stale = {v for u, v, _ in published if u == uri} - {1, 5}
    assert not stale, f"diagnostics published for superseded versions {stale}"


@pytest.mark.asyncio
async def test_changed_settings_take_effect_on_open_documents(client):
    uri = open_file(client, BUG)
    [(code, line1)] = expected_findings(BUG)
    await eventually(lambda: (code, line1 - 1) in _codes(client.diagnostics.get(uri)),
                     what=f"{code} before the settings change")
    client.set_configuration({"ignore": [code]}, section="kernelsight")
    client.workspace_did_change_configuration(t.DidChangeConfigurationParams(settings=None))
    await eventually(lambda: client.diagnostics.get(uri) is not None
                     and code not in {d.code for d in client.diagnostics[uri]},
                     what=f"{code} gone after ignore")
    client.set_configuration({"severity": {code: "hint"}}, section="kernelsight")
    client.workspace_did_change_configuration(t.DidChangeConfigurationParams(settings=None))
    await eventually(lambda: any(d.code == code and d.severity == t.DiagnosticSeverity.Hint
                                 for d in client.diagnostics.get(uri) or []),
                     what=f"{code} back as a hint")


@pytest_lsp.fixture(config=server_config())
async def init_options_client(lsp_client: LanguageClient):
    await start(lsp_client, init_options={"kernelsight": {"ignore": ["KS101"]}})
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio
async def test_initialization_options_apply(init_options_client):
    client = init_options_client
    uri = open_file(client, BUG)
    await wait_full(client, uri, 1)
    await eventually(lambda: client.diagnostics.get(uri) is not None, what="diagnostics")
    assert "KS101" not in {d.code for d in client.diagnostics[uri]}


@pytest.mark.asyncio
async def test_pyproject_tool_section_applies_and_a_bad_one_is_shown(client, tmp_path):
    shutil.copy(BUG, tmp_path / "k.py")
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""
        [tool.kernelsight]
        severity = { KS101 = "warning" }
    """))
    uri = open_file(client, tmp_path / "k.py")
    await eventually(lambda: any(d.code == "KS101" for d in client.diagnostics.get(uri) or []),
                     what="KS101")
    [d] = [d for d in client.diagnostics[uri] if d.code == "KS101"]
    assert d.severity == t.DiagnosticSeverity.Warning
    bad = tmp_path / "bad"
    bad.mkdir()
    shutil.copy(BUG, bad / "k.py")
    (bad / "pyproject.toml").write_text("[tool.kernelsight]\nmax-elements = 'many'\n")
    open_file(client, bad / "k.py")
    await eventually(lambda: any("max_elements" in m.message for m in client.messages),
                     what="the settings error shown to the user")
