"""Prompt building for the LLM proposer, and parsing of its reply.

A prompt is two chat messages. The system message states the rules the gate enforces (so the
model does not waste a round learning them). The user message holds, in this order: the task
(kernel, device, visible sizes and dtypes), the kernel's ``#@`` annotations, the strategy the
planner chose (what to change and its risks), the structured feedback of the parent and of the
most recent failed attempt (every stage: the invariant diagnostic with its counterexample, the
compile error with its line, where the largest error sits, timing with % of roofline, the
compile report), a short history of earlier attempts, and the parent's full source.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

SYSTEM = """You optimise one Triton GPU kernel at a time. Every reply you give is checked by a
gate, in this order: (1) an invariant analysis of the kernel against its `#@` annotations
(bounds, tag alignment, coverage, races, footprint), (2) compilation for the target GPU,
(3) correctness against a reference on fresh random inputs, including sizes you are not shown,
(4) timing against the reference. A candidate is accepted only if it passes all four and is
faster than the best so far.

Rules:
- Reply with the complete Python file in one ```python code block, nothing left out.
- Keep the kernel's name, the launcher's name and keyword arguments, the BENCH dict, the
  reference function and the input maker exactly as they are.
- Keep or update the `#@` annotations so that they still describe the kernel truthfully.
- The kernel must do the computation: the launcher may only allocate outputs, compute the grid
  and launch; it may not call the reference or a torch/library op for the result.
- Handle every size: masks on partial tiles, no assumption that sizes are multiples of the block.
"""


class ReplyError(ValueError):
    """The model's reply holds no usable code block."""


@dataclass
class PromptContext:
    """Everything one prompt is built from (plain data; see ``build_messages``).

    Attributes:
        kernel: jit function name; launcher: its launcher's name; path: file name shown.
        device: the target, e.g. ``"NVIDIA H200 (sm_90)"`` or ``"cuda:90 (compile only)"``.
        shapes: the correctness sizes the model may see; dtypes: torch dtype names.
        parent_source: the file the model should improve.
        parent_feedback: ``Evaluation.feedback()`` of the parent ("" for none).
        last_feedback: feedback of the most recent attempt when it failed ("" otherwise).
        last_id: that attempt's id.
        strategy: ``planner.Strategy`` or None.
        history: earlier attempts, dicts with ``id``, ``strategy``, ``outcome``, ``score``.
        best_score: geometric-mean speedup of the best accepted candidate, or None.
    """

    kernel: str
    launcher: str
    path: str
    device: str
    shapes: list[dict]
    dtypes: list[Any]
    parent_source: str
    parent_feedback: str = ""
    last_feedback: str = ""
    last_id: str | None = None
    strategy: Any = None
    history: list[dict[str, Any]] = field(default_factory=list)
    best_score: float | None = None


def annotations_of(source: str) -> str:
    """The ``#@`` lines of ``source`` with their 1-based line numbers."""
    return "\n".join(f"{i + 1:4d}: {ln.strip()}" for i, ln in enumerate(source.splitlines())
                     if ln.lstrip().startswith("#@"))


def build_messages(ctx: PromptContext) -> list[dict[str, str]]:
    """The chat messages (OpenAI format: ``[{"role", "content"}, ...]``) for one proposal."""
    parts = [f"## Task\nMake the Triton kernel `{ctx.kernel}` in `{ctx.path}` faster "
             f"(launcher `{ctx.launcher}`), for {ctx.device}.\n"
             f"Correctness sizes you may see: {_fmt_shapes(ctx.shapes)}; dtypes: "
             f"{', '.join(str(d) for d in ctx.dtypes)}. Other sizes are checked too."]
    if ctx.best_score is not None:
        parts.append(f"Best speedup over the reference so far: {ctx.best_score:.3f}x.")
    notes = annotations_of(ctx.parent_source)
    if notes:
        parts.append("## Annotations (the invariants the gate checks)\n" + notes)
    if ctx.strategy is not None:
        s = ctx.strategy
        parts.append(f"## Strategy for this attempt: {s.title} (`{s.name}`)\n"
                     f"When it pays: {s.when}\nWhat to change: {s.change}\nRisks: {s.risks}")
    if ctx.last_feedback:
        parts.append(f"## Your previous attempt ({ctx.last_id}) was rejected. Gate feedback:\n"
                     + ctx.last_feedback.strip())
    if ctx.parent_feedback:
        parts.append("## Gate feedback for the version below\n" + ctx.parent_feedback.strip())
    if ctx.history:
        rows = [f"- {h.get('id')}: strategy={h.get('strategy') or '-'} -> {h.get('outcome')}"
                + (f" ({h['score']:.3f}x)" if isinstance(h.get("score"), (int, float)) else "")
                for h in ctx.history[-8:]]
        parts.append("## Earlier attempts\n" + "\n".join(rows))
    parts.append(f"## Current version of `{ctx.path}`\n```python\n{ctx.parent_source.rstrip()}\n```"
                 "\nReply with the whole improved file in one ```python block.")
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": "\n\n".join(parts)}]


def _fmt_shapes(shapes: list[dict]) -> str:
    return "; ".join("(" + ", ".join(f"{k}={v}" for k, v in s.items()) + ")" for s in shapes) \
        or "(none)"


_FENCE = re.compile(r"```[ \t]*(?P<lang>[A-Za-z0-9_+-]*)[^\n]*\n(?P<body>.*?)```", re.S)


def parse_reply(text: str | None) -> str:
    """The Python source in the reply: the longest ```python block (else the longest fenced
    block). A reply cut off inside an open fence is refused rather than guessed.

    Raises:
        ReplyError: no code block, or an empty one.
    """
    if not text or not text.strip():
        raise ReplyError("the reply was empty")
    blocks = [(m.group("lang").lower(), m.group("body")) for m in _FENCE.finditer(text)]
    py = [b for lang, b in blocks if lang in ("python", "py", "python3")]
    pick = py or [b for _, b in blocks]
    if not pick:
        hint = " (a ``` fence was opened but never closed: the reply may be truncated)" \
            if "```" in text else ""
        raise ReplyError("the reply holds no ```python code block" + hint)
    body = max(pick, key=len)
    if not body.strip():
        raise ReplyError("the reply's code block is empty")
    return body if body.endswith("\n") else body + "\n"
