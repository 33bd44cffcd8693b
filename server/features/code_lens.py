"""Code lenses above each kernel: ``N invariants ✔ · M ✗ · Benchmark · Optimize``."""
from __future__ import annotations

from lsprotocol import types as t


def lens_title(summary) -> str:
    """The tally part of the lens for one KernelSummary."""
    if summary.status == "syntax-error":
        return "not analysed: syntax error"
    if summary.status == "skipped":
        return "invariants: analysing…"
    tally = summary.tally
    text = f"{tally.proved} invariants ✔ · {tally.refuted} ✗"
    if tally.unproved:
        text += f" · {tally.unproved} ?"
    if summary.status == "budget":
        text += " (budget exhausted)"
    return text


def register(ls) -> None:
    @ls.feature(t.TEXT_DOCUMENT_CODE_LENS, t.CodeLensOptions(resolve_provider=False))
    def code_lens(ls, params: t.CodeLensParams):
        uri = params.text_document.uri
        state = ls.session.doc(uri)
        index = ls.index_for(uri)
        if state is None or index is None or state.ignored:
            return None
        if not ls.session.settings_for(state.path).code_lens:
            return None
        result = state.full if state.full is not None and state.full.version == state.version \
            else state.latest()
        if result is None:
            return None
        lenses: list[t.CodeLens] = []
        names = {k.name: k for k in getattr(result.parsed, "kernels", [])}
        for summary in result.analysis.report.kernels:
            kernel = names.get(summary.name)
            span = kernel.name_span if kernel is not None else summary.span
            rng = index.range(span)
            lenses.append(t.CodeLens(range=rng, command=t.Command(
                title=lens_title(summary), command="kernelsight.showFindings",
                arguments=[uri, summary.name])))
            lenses.append(t.CodeLens(range=rng, command=t.Command(
                title="Benchmark", command="kernelsight.benchmark",
                arguments=[uri, summary.name])))
            lenses.append(t.CodeLens(range=rng, command=t.Command(
                title="Optimize", command="kernelsight.optimize",
                arguments=[uri, summary.name])))
        return lenses
