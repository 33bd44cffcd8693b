"""Document symbols: each kernel (helpers marked) with its declared tensors and grid."""
from __future__ import annotations

from lsprotocol import types as t


def register(ls) -> None:
    @ls.feature(t.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    def document_symbols(ls, params: t.DocumentSymbolParams):
        uri = params.text_document.uri
        state = ls.session.doc(uri)
        index = ls.index_for(uri)
        if state is None or index is None or state.ignored:
            return None
        result = state.latest()
        if result is None:
            return []
        out: list[t.DocumentSymbol] = []
        for k in getattr(result.parsed, "kernels", []):
            children = []
            for name, decl in k.annotations.tensors.items():
                dims = ", ".join(f"{d.name}: {d.size.text}" for d in decl.dims)
                r = index.range(decl.span)
                children.append(t.DocumentSymbol(
                    name=name, detail=f"tensor {decl.ptr}[{dims}]",
                    kind=t.SymbolKind.Array, range=r, selection_range=r))
            if k.annotations.grid is not None:
                g = k.annotations.grid
                r = index.range(g.span)
                children.append(t.DocumentSymbol(
                    name="grid", detail="(" + ", ".join(a.text for a in g.axes) + ")",
                    kind=t.SymbolKind.Struct, range=r, selection_range=r))
            rng = index.range(k.span)
            sel = index.range(k.name_span)
            if (sel.start.line, sel.start.character) < (rng.start.line, rng.start.character) or \
                    (sel.end.line, sel.end.character) > (rng.end.line, rng.end.character):
                sel = rng
            out.append(t.DocumentSymbol(
                name=k.name, detail="triton.jit helper" if k.is_helper else "triton kernel",
                kind=t.SymbolKind.Function, range=rng, selection_range=sel,
                children=children or None))
        return out
