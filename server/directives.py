"""What each ``#@`` directive declares and which checks it turns on (for hover and completion).

The contract itself is ../shared/spec/annotations.md; this table is the editor's summary of it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class DirectiveDoc:
    word: str
    syntax: str
    declares: str
    enables: str
    snippet: str  # LSP snippet inserted by completion


DIRECTIVES: dict[str, DirectiveDoc] = {d.word: d for d in (
    DirectiveDoc(
        "tensor", "tensor NAME = PTR[dim: SIZE, ...] strides(S0, ...)",
        "names the logical tensor that pointer argument `PTR` addresses, with named dimensions "
        "and sizes; without `strides(...)` the layout is contiguous row-major.",
        "bounds of every load/store through the pointer (KS101, KS106, KS107), tags on loaded "
        "elements, so contraction (KS201), mixing (KS202) and store alignment (KS203) can be "
        "checked, and int32 overflow of its offsets (KS110).",
        "tensor ${1:NAME} = ${2:ptr}[${3:dim}: ${4:SIZE}]"),
    DirectiveDoc(
        "grid", "grid (E0[, E1[, E2]])",
        "the launch grid in terms of kernel arguments and constexprs (`cdiv`, `min`, `max`, "
        "`+ - * // %`).",
        "coverage of the stored tensors (KS301), write races between programs (KS302) and "
        "program id axes a store ignores (KS306).",
        "grid (${1:cdiv(N, BLOCK)},)"),
    DirectiveDoc(
        "assume", "assume EXPR[, EXPR...]",
        "facts the analysis may use: ranges, divisibility, relations, `implies`, facts about "
        "index tensors.",
        "nothing by itself; it narrows the sizes every other check considers (fewer false "
        "counterexamples, e.g. for KS110 overflow).",
        "assume ${1:1 <= N}"),
    DirectiveDoc(
        "computes", "computes OUT[d, ...] from IN[...], ...",
        "the data-flow footprint: each written element of `OUT` depends on exactly these "
        "input elements (`:` = a whole dimension, `lo:hi` = a range).",
        "footprint checks: every written element reads all (KS303) and only (KS304) the named "
        "inputs; with `grid`, coverage (KS301).",
        "computes ${1:OUT}[${2:i}] from ${3:IN}[${4:i}]"),
    DirectiveDoc(
        "assert", "assert EXPR",
        "a relation checked at this program point; `value.dim` is the logical coordinate "
        "`dim` carried by tile `value`.",
        "the assertion itself (KS204), with a counterexample when it fails.",
        "assert ${1:a}.${2:k} == ${3:b}.${2:k}"),
    DirectiveDoc(
        "tag", "tag VALUE.dim = EXPR",
        "attaches a user tag to a value that is not loaded from a declared tensor (running "
        "statistics, accumulators).",
        "tag-based checks (KS202, KS203, KS204) on that value.",
        "tag ${1:m_i}.${2:q} = ${3:offs_m}"),
    DirectiveDoc(
        "partners", "partners LEAD: V1, V2, ...",
        "values that must be rescaled whenever `LEAD` (a running maximum) is updated in a loop "
        "iteration (the online-softmax rule).",
        "the rescaling check (KS205).",
        "partners ${1:m_i}: ${2:acc}, ${3:l_i}"),
    DirectiveDoc(
        "bench", "bench ...",
        "how the agent runs and times the kernel (sizes, reference, dtypes).",
        "no static check; used by `kernelsight bench` and `Optimize this kernel`.",
        "bench ${1}"),
)}

_DIRECTIVE = re.compile(r"^\s*#@\s*(?P<word>[A-Za-z_]\w*)?(?P<rest>.*)$")


def directive_at(line: str) -> tuple[str | None, str] | None:
    """(directive word or None, text after it) when ``line`` is a ``#@`` line, else None."""
    m = _DIRECTIVE.match(line)
    if not m:
        return None
    return m.group("word"), m.group("rest")


_TENSOR = re.compile(r"^\s*(?P<name>\w+)\s*=\s*(?P<ptr>\w+)\s*\[(?P<dims>[^\]]*)\]")


def directive_markdown(word: str | None, rest: str) -> str:
    """Hover text of one directive line."""
    if word is None or word not in DIRECTIVES:
        known = ", ".join(f"`{w}`" for w in DIRECTIVES)
        return (f"**#@ {word or ''}**: not a Kernelsight directive (KS906). "
                f"Known directives: {known}.")
    d = DIRECTIVES[word]
    parts = [f"**#@ {d.syntax}**", f"Declares: {d.declares}", f"Enables: {d.enables}"]
    if word == "tensor":
        m = _TENSOR.match(rest)
        if m:
            dims = [p.split(":")[0].strip() for p in m.group("dims").split(",") if p.strip()]
            parts.insert(1, f"Here: tensor `{m.group('name')}` through pointer "
                            f"`{m.group('ptr')}`, dimensions "
                            + ", ".join(f"`{x}`" for x in dims) + ".")
    return "\n\n".join(parts)
