"""Completion: ``#@`` directive words (as snippets), declared tensor and dimension names inside
``assert``/``computes``/``assume``/``tag``/``partners``, and ``tl.*`` members."""
from __future__ import annotations

import re

from lsprotocol import types as t

from ..directives import DIRECTIVES
from ..text import tl_aliases
from ..tl_docs import TL_DOCS

_WORD_POS = re.compile(r"^\s*#@\s*(?P<partial>\w*)$")
_IN_DIRECTIVE = re.compile(r"^\s*#@\s*(?P<word>assert|computes|assume|tag|partners|grid|tensor)\b")
_TENSOR_LINE = re.compile(
    r"^\s*#@\s*tensor\s+(?P<name>\w+)\s*=\s*(?P<ptr>\w+)\s*\[(?P<dims>[^\]]*)\]")
_DOTTED_TAIL = re.compile(r"(?P<head>[A-Za-z_][\w.]*)\.(?P<partial>\w*)$")

_KINDS = {"function": t.CompletionItemKind.Function, "class": t.CompletionItemKind.Class,
          "module": t.CompletionItemKind.Module, "constant": t.CompletionItemKind.Constant}


def kernel_region(state, line: int, n_lines: int) -> tuple[int, int]:
    """Lines of the kernel that ``line`` belongs to (its directives above included), or the
    whole file when no kernel is known there."""
    latest = state.latest() if state is not None else None
    kernels = getattr(latest.parsed, "kernels", []) if latest is not None else []
    prev_end = -1
    for k in sorted(kernels, key=lambda k: k.span.line):
        if prev_end < line <= k.span.end_line:
            return prev_end + 1, k.span.end_line
        prev_end = k.span.end_line
    return 0, n_lines - 1


def declared_tensors(lines: list[str], lo: int, hi: int) -> dict[str, list[str]]:
    """``#@ tensor`` declarations in lines [lo, hi]: name -> dimension names."""
    out: dict[str, list[str]] = {}
    for i in range(max(lo, 0), min(hi, len(lines) - 1) + 1):
        m = _TENSOR_LINE.match(lines[i])
        if m:
            out[m.group("name")] = [p.split(":")[0].strip()
                                    for p in m.group("dims").split(",") if ":" in p]
    return out


def _directive_items(snippets: bool) -> list[t.CompletionItem]:
    items = []
    for d in DIRECTIVES.values():
        items.append(t.CompletionItem(
            label=d.word, kind=t.CompletionItemKind.Keyword, detail=d.syntax,
            documentation=t.MarkupContent(kind=t.MarkupKind.Markdown,
                                          value=f"{d.declares}\n\nEnables: {d.enables}"),
            insert_text=d.snippet if snippets else d.word,
            insert_text_format=(t.InsertTextFormat.Snippet if snippets
                                else t.InsertTextFormat.PlainText)))
    return items


def _tl_items() -> list[t.CompletionItem]:
    items = []
    for name, entry in TL_DOCS.members().items():
        items.append(t.CompletionItem(
            label=name, kind=_KINDS.get(entry.get("kind"), t.CompletionItemKind.Field),
            detail=entry.get("signature") or name))
    return items


def completions(ls, state, lines: list[str], line: int, col: int) -> list[t.CompletionItem]:
    if not 0 <= line < len(lines):
        return []
    before = lines[line][:col]
    snippets = ls.client_supports("text_document.completion.completion_item.snippet_support")
    if _WORD_POS.match(before):
        return _directive_items(snippets)
    m = _IN_DIRECTIVE.match(before)
    if m:
        lo, hi = kernel_region(state, line, len(lines))
        tensors = declared_tensors(lines, lo, hi)
        dims = list(dict.fromkeys(d for ds in tensors.values() for d in ds))
        if _DOTTED_TAIL.search(before):  # `value.dim`: a tag
            return [t.CompletionItem(label=d, kind=t.CompletionItemKind.Field,
                                     detail="dimension (tag)") for d in dims]
        items = [t.CompletionItem(label=name, kind=t.CompletionItemKind.Variable,
                                  detail=f"tensor [{', '.join(ds)}]")
                 for name, ds in tensors.items()]
        items += [t.CompletionItem(label=d, kind=t.CompletionItemKind.Field,
                                   detail="dimension") for d in dims]
        return items
    tail = _DOTTED_TAIL.search(before)
    if tail:
        latest = state.latest() if state is not None else None
        imports = getattr(latest.parsed, "imports", None) if latest is not None else None
        if tail.group("head") in tl_aliases(imports):
            return _tl_items()
    return []


def register(ls) -> None:
    @ls.feature(t.TEXT_DOCUMENT_COMPLETION,
                t.CompletionOptions(trigger_characters=[".", "@"],
                                    resolve_provider=True))
    def completion(ls, params: t.CompletionParams):
        uri = params.text_document.uri
        state = ls.session.doc(uri)
        index = ls.index_for(uri)
        if state is None or index is None or state.ignored:
            return None
        line, col = index.offset_col(params.position)
        items = completions(ls, state, index.lines, line, col)
        if not items:
            return None
        return t.CompletionList(is_incomplete=False, items=items)

    @ls.feature(t.COMPLETION_ITEM_RESOLVE)
    def resolve(ls, item: t.CompletionItem):
        if item.kind in _KINDS.values() and item.documentation is None:
            md = TL_DOCS.markdown(item.label)
            if md:
                item.documentation = t.MarkupContent(kind=t.MarkupKind.Markdown, value=md)
        return item
