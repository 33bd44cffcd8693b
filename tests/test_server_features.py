"""End-to-end: hover, completion, signature help, code actions, lenses, symbols, inlay hints."""
from __future__ import annotations

import pytest
import pytest_lsp
from lsprotocol import types as t
from pytest_lsp import LanguageClient

from bug_markers import expected_findings
from server_harness import (EXAMPLES, eventually, line_of, open_doc, open_file, server_config,
                            start, wait_full)

KERNEL = EXAMPLES / "kernels" / "vector_add.py"
BUG = EXAMPLES / "bugs" / "vector_add_missing_mask.py"


@pytest_lsp.fixture(config=server_config())
async def client(lsp_client: LanguageClient):
    await start(lsp_client, settings={"inlayHints": True})
    yield
    await lsp_client.shutdown_session()


def _pos(text: str, needle: str, offset: int = 0) -> t.Position:
    line = line_of(text, needle)
    return t.Position(line=line, character=text.split("\n")[line].index(needle) + offset)


async def _hover(client, uri, pos) -> str:
    h = await client.text_document_hover_async(t.HoverParams(
        text_document=t.TextDocumentIdentifier(uri), position=pos))
    return "" if h is None else h.contents.value


def _apply(text: str, edits: list[t.TextEdit]) -> str:
    """Apply LSP edits (ASCII text: UTF-16 units = characters), last first."""
    lines = text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)

    def off(p: t.Position) -> int:
        return offsets[p.line] + p.character

    for e in sorted(edits, key=lambda e: off(e.range.start), reverse=True):
        text = text[:off(e.range.start)] + e.new_text + text[off(e.range.end):]
    return text


@pytest.mark.asyncio
async def test_hover_on_a_load_shows_its_tile_and_the_tl_docs(client):
    uri = open_file(client, KERNEL)
    await wait_full(client, uri, 1)
    text = KERNEL.read_text()
    value = await _hover(client, uri, _pos(text, "x = tl.load", 0))
    assert "shape: `[" in value, value
    docs = await _hover(client, uri, _pos(text, "tl.load(x_ptr", 4))
    assert "tl.load(pointer, mask=None, other=None" in docs
    assert "triton 3." in docs


@pytest.mark.asyncio
async def test_hover_on_a_directive_says_what_it_declares_and_enables(client):
    uri = open_file(client, KERNEL)
    text = KERNEL.read_text()
    value = await _hover(client, uri, _pos(text, "#@ tensor X", 4))
    assert "tensor `X` through pointer `x_ptr`" in value
    assert "Enables:" in value and "KS101" in value
    grid = await _hover(client, uri, _pos(text, "#@ grid", 4))
    assert "KS301" in grid and "KS302" in grid


@pytest.mark.asyncio
async def test_hover_on_a_diagnostic_explains_the_code_with_wrong_and_right_examples(client):
    uri = open_file(client, BUG)
    [(code, line1)] = expected_findings(BUG)
    await eventually(lambda: any(d.code == code for d in client.diagnostics.get(uri) or []),
                     what=code)
    [d] = [d for d in client.diagnostics[uri] if d.code == code]
    value = await _hover(client, uri, d.range.start)
    assert f"**{code} " in value and "Wrong:" in value and "Right:" in value
    # the finding's own witness, once: each failing check at a position shows its own, and
    # the value's section and the diagnostic's do not repeat the same one
    witness = d.message.split("counterexample: ", 1)[1].split("\n")[0]
    assert value.count(witness) == 1


@pytest.mark.asyncio
async def test_completion_offers_directives_declared_names_and_tl_members(client):
    text = KERNEL.read_text()
    at = line_of(text, "    pid = tl.program_id")
    lines = text.split("\n")
    lines[at:at] = ["    #@ ", "    #@ assert x.", "    v = tl."]
    uri = (EXAMPLES / "kernels" / "completion_probe.py").as_uri()
    open_doc(client, uri, "\n".join(lines))

    async def labels(line: int, char: int) -> set[str]:
        res = await client.text_document_completion_async(t.CompletionParams(
            text_document=t.TextDocumentIdentifier(uri), position=t.Position(line, char)))
        items = res.items if isinstance(res, t.CompletionList) else (res or [])
        return {i.label for i in items}

    await wait_full(client, uri, 1)
    assert {"tensor", "grid", "assume", "computes", "assert", "tag", "partners"} <= \
        await labels(at, len("    #@ "))
    assert await labels(at + 1, len("    #@ assert x.")) == {"i"}
    assert {"X", "Y", "Z", "i"} <= await labels(at + 1, len("    #@ assert "))
    members = await labels(at + 2, len("    v = tl."))
    assert {"load", "store", "dot", "arange", "program_id"} <= members


@pytest.mark.asyncio
async def test_signature_help_tracks_the_active_tl_parameter(client):
    uri = (EXAMPLES / "kernels" / "sig_probe.py").as_uri()
    open_doc(client, uri, "import triton.language as tl\nx = tl.load(p + offs, ")
    sig = await client.text_document_signature_help_async(t.SignatureHelpParams(
        text_document=t.TextDocumentIdentifier(uri), position=t.Position(1, 22)))
    assert sig.signatures[0].label.startswith("tl.load(pointer")
    assert sig.active_parameter == 1
    assert sig.signatures[0].parameters[1].label == "mask"


async def _actions(client, uri, diag: t.Diagnostic):
    return await client.text_document_code_action_async(t.CodeActionParams(
        text_document=t.TextDocumentIdentifier(uri), range=diag.range,
        context=t.CodeActionContext(diagnostics=[diag])))


async def _reanalyse(client, uri, text: str, version: int):
    client.text_document_did_change(t.DidChangeTextDocumentParams(
        text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[t.TextDocumentContentChangeWholeDocument(text=text)]))
    client.text_document_did_save(t.DidSaveTextDocumentParams(
        text_document=t.TextDocumentIdentifier(uri)))
    await wait_full(client, uri, version)


@pytest.mark.asyncio
async def test_suppress_action_edit_applied_makes_the_reanalysis_clean(client):
    uri = open_file(client, BUG)
    [(code, _)] = expected_findings(BUG)
    await eventually(lambda: any(d.code == code for d in client.diagnostics.get(uri) or []),
                     what=code)
    [d] = [d for d in client.diagnostics[uri] if d.code == code]
    actions = await _actions(client, uri, d)
    [suppress] = [a for a in actions if a.title == f"Suppress {code} on this line"]
    assert suppress.kind == t.CodeActionKind.QuickFix
    new_text = _apply(BUG.read_text(), suppress.edit.changes[uri])
    assert f"# BUG({code})" in new_text and f"# noqa: {code}" in new_text
    await _reanalyse(client, uri, new_text, 2)
    await eventually(lambda: not any(d.code == code for d in client.diagnostics.get(uri) or []),
                     what=f"{code} gone after the edit")
    # both kernel commands are offered on the kernel
    titles = {a.title for a in actions}
    assert "Optimize this kernel (add_kernel)" in titles
    assert "Benchmark this kernel (add_kernel)" in titles


@pytest.mark.asyncio
async def test_mechanical_quick_fix_applied_makes_the_reanalysis_clean(client):
    uri = open_file(client, BUG)
    [(code, _)] = expected_findings(BUG)
    await wait_full(client, uri, 1)
    await eventually(lambda: any(d.code == code for d in client.diagnostics.get(uri) or []),
                     what=code)
    [d] = [d for d in client.diagnostics[uri] if d.code == code]
    fixes = [a for a in await _actions(client, uri, d)
             if a.kind == t.CodeActionKind.QuickFix and not a.title.startswith("Suppress")]
    assert fixes, f"the analysis offers no Fix for {code} (Finding.fixes)"
    new_text = _apply(BUG.read_text(), fixes[0].edit.changes[uri])
    await _reanalyse(client, uri, new_text, 2)
    await eventually(lambda: client.diagnostics.get(uri) is not None and not any(
        d.code == code for d in client.diagnostics[uri]), what=f"{code} fixed")


@pytest.mark.asyncio
async def test_code_lens_symbols_and_inlay_hints_describe_each_kernel(client):
    uri = open_file(client, KERNEL)
    await wait_full(client, uri, 1)
    lenses = await client.text_document_code_lens_async(t.CodeLensParams(
        text_document=t.TextDocumentIdentifier(uri)))
    titles = [lens.command.title for lens in lenses]
    assert any(title.endswith("✗") and "invariants ✔" in title for title in titles), titles
    assert "Benchmark" in titles and "Optimize" in titles
    symbols = await client.text_document_document_symbol_async(t.DocumentSymbolParams(
        text_document=t.TextDocumentIdentifier(uri)))
    [kernel] = [s for s in symbols if s.name == "add_kernel"]
    assert {c.name for c in kernel.children} >= {"X", "Y", "Z", "grid"}
    text = KERNEL.read_text()
    hints = await client.text_document_inlay_hint_async(t.InlayHintParams(
        text_document=t.TextDocumentIdentifier(uri),
        range=t.Range(start=t.Position(0, 0), end=t.Position(len(text.split("\n")), 0))))
    assert any(h.label.startswith(": [") for h in hints or []), hints


@pytest.mark.asyncio
async def test_inferred_annotations_are_offered_verified_and_check_cleanly(client):
    text = "".join(line for line in KERNEL.read_text().splitlines(True)
                   if not line.startswith("#@"))
    uri = (EXAMPLES / "kernels" / "unannotated_probe.py").as_uri()
    open_doc(client, uri, text)
    await wait_full(client, uri, 1)
    inside = _pos(text, "offs = pid * BLOCK")
    actions = await client.text_document_code_action_async(t.CodeActionParams(
        text_document=t.TextDocumentIdentifier(uri), range=t.Range(start=inside, end=inside),
        context=t.CodeActionContext(diagnostics=[])))
    [insert] = [a for a in actions if a.title.startswith("Insert the annotations inferred")]
    new_text = _apply(text, insert.edit.changes[uri])
    assert "    #@ tensor X = x_ptr[" in new_text and "    #@ grid (" in new_text
    client.text_document_did_change(t.DidChangeTextDocumentParams(
        text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[t.TextDocumentContentChangeWholeDocument(text=new_text)]))
    client.text_document_did_save(t.DidSaveTextDocumentParams(
        text_document=t.TextDocumentIdentifier(uri)))
    await wait_full(client, uri, 2)
    await eventually(lambda: client.diagnostics.get(uri) is not None, what="diagnostics")
    assert not [d for d in client.diagnostics[uri] if d.code.startswith("KS9")]
    symbols = await client.text_document_document_symbol_async(t.DocumentSymbolParams(
        text_document=t.TextDocumentIdentifier(uri)))
    [kernel] = [s for s in symbols if s.name == "add_kernel"]
    assert {"X", "grid"} <= {c.name for c in kernel.children}


# The newcomer's Neovim kernel: the launcher sets BLOCK_N = triton.next_power_of_2(N). Before
# the inference carried that relation (`#@ assume N <= BLOCK_N`), inserting the inferred
# `#@ tensor`/`#@ grid` directives made the engine report a false KS301 (Y[0, 64] never
# written for N = 65); a block it cannot relate to N must still not be offered.
BIAS_RELU = '''import torch
import triton
import triton.language as tl


@triton.jit
def bias_relu_kernel(x_ptr, b_ptr, y_ptr, M, N, stride_xm, stride_ym, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_xm + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    y = tl.maximum(x + b, 0.0)
    tl.store(y_ptr + row * stride_ym + cols, y, mask=mask)


def bias_relu(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, N = x.shape
    y = torch.empty_like(x)
    BLOCK_N = triton.next_power_of_2(N)
    bias_relu_kernel[(M,)](x, b, y, M, N, x.stride(0), y.stride(0), BLOCK_N=BLOCK_N)
    return y
'''


async def _actions_inside(client, uri: str, text: str) -> list:
    await wait_full(client, uri, 1)
    await eventually(lambda: client.diagnostics.get(uri) is not None, what="diagnostics")
    assert not [d for d in client.diagnostics[uri] if d.code == "KS301"]
    inside = _pos(text, "cols = tl.arange")
    actions = await client.text_document_code_action_async(t.CodeActionParams(
        text_document=t.TextDocumentIdentifier(uri), range=t.Range(start=inside, end=inside),
        context=t.CodeActionContext(diagnostics=[])))
    return list(actions or [])


@pytest.mark.asyncio
async def test_inferred_annotations_are_not_offered_when_they_add_a_finding(client):
    # a block the inference cannot relate to N (`max(16, ...)`): the inserted directives would
    # let N exceed BLOCK_N, and the engine would report elements never written
    text = BIAS_RELU.replace("BLOCK_N = triton.next_power_of_2(N)",
                             "BLOCK_N = max(16, triton.next_power_of_2(N))")
    uri = (EXAMPLES / "kernels" / "bias_relu_probe.py").as_uri()
    open_doc(client, uri, text)
    titles = [a.title for a in await _actions_inside(client, uri, text)]
    assert "Optimize this kernel (bias_relu_kernel)" in titles
    assert not [x for x in titles if x.startswith("Insert the annotations inferred")], titles


@pytest.mark.asyncio
async def test_inferred_annotations_carry_the_launchers_next_power_of_two_relation(client):
    uri = (EXAMPLES / "kernels" / "bias_relu_probe2.py").as_uri()
    open_doc(client, uri, BIAS_RELU)
    actions = await _actions_inside(client, uri, BIAS_RELU)
    [insert] = [a for a in actions if a.title.startswith("Insert the annotations inferred")]
    new_text = "".join(e.new_text for e in insert.edit.changes[uri])
    assert "#@ assume N <= BLOCK_N" in new_text
