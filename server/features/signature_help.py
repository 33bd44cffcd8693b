"""Signature help for ``tl.*`` calls (parameters from the triton.language table)."""
from __future__ import annotations

from lsprotocol import types as t

from ..text import call_context, tl_aliases, tl_member
from ..tl_docs import TL_DOCS

_MAX_CONTEXT_LINES = 8  # a call's arguments rarely span more lines in kernel code


def signature_at(state, lines: list[str], line: int, col: int) -> t.SignatureHelp | None:
    if not 0 <= line < len(lines):
        return None
    first = max(0, line - _MAX_CONTEXT_LINES)
    before = "\n".join(lines[first:line] + [lines[line][:col]])
    ctx = call_context(before)
    if ctx is None:
        return None
    callee, active = ctx
    latest = state.latest()
    imports = getattr(latest.parsed, "imports", None) if latest is not None else None
    member = tl_member(callee, tl_aliases(imports))
    if member is None:
        return None
    entry = TL_DOCS.get(member)
    if entry is None or entry.get("kind") not in ("function", "class"):
        return None
    pdocs = entry.get("param_docs") or {}
    params = [t.ParameterInformation(
        label=name, documentation=pdocs.get(name) or None) for name in entry.get("params", [])]
    sig = t.SignatureInformation(
        label="tl." + (entry.get("signature") or member),
        documentation=t.MarkupContent(kind=t.MarkupKind.Markdown, value=entry.get("doc", "")),
        parameters=params,
        active_parameter=min(active, max(len(params) - 1, 0)))
    return t.SignatureHelp(signatures=[sig], active_signature=0,
                           active_parameter=min(active, max(len(params) - 1, 0)))


def register(ls) -> None:
    @ls.feature(t.TEXT_DOCUMENT_SIGNATURE_HELP,
                t.SignatureHelpOptions(trigger_characters=["(", ","],
                                       retrigger_characters=[","]))
    def signature_help(ls, params: t.SignatureHelpParams):
        uri = params.text_document.uri
        state = ls.session.doc(uri)
        index = ls.index_for(uri)
        if state is None or index is None or state.ignored:
            return None
        line, col = index.offset_col(params.position)
        return signature_at(state, index.lines, line, col)
