"""Plain dataclasses shared by the evaluation harness, the proposers and the search.

A candidate is a whole source file (the kernel plus its launcher and bench spec) and the name
of the kernel being optimised; every evaluation stage appends one ``StageResult``; the search
reads ``Evaluation.score`` and feeds ``Evaluation.feedback()`` into the next prompt.
"""
from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any

# The gate runs these stages in order and stops at the first failure.
STAGES = ("static", "compile", "correctness", "timing")


@dataclass
class Candidate:
    """One proposed version of a kernel.

    Attributes:
        id: unique within a run (``"c0007"``).
        source: the complete file text of the candidate.
        kernel: the jit function being optimised (``FILE::KERNEL``'s KERNEL).
        parent: id of the candidate it was derived from, None for the seed.
        proposer: ``"seed"``, ``"tuner"`` or ``"llm:<model>"``.
        strategy: the knowledge-base strategy the proposer was asked to apply, if any.
        launch: launch/config overrides the tuner chose (``{"BLOCK_M": 128, "num_warps": 8}``).
    """

    id: str
    source: str
    kernel: str
    parent: str | None = None
    proposer: str = "seed"
    strategy: str | None = None
    launch: dict[str, Any] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        """sha256 of source + launch overrides: the cache key's candidate part."""
        h = hashlib.sha256(self.source.encode("utf-8"))
        h.update(repr(sorted(self.launch.items())).encode("utf-8"))
        return h.hexdigest()


@dataclass
class StageResult:
    """The outcome of one gate stage.

    Attributes:
        stage: one of ``STAGES``.
        ok: passed.
        seconds: wall time of the stage, in seconds.
        summary: one line for tables and logs.
        feedback: structured text for the next LLM prompt (diagnostic with counterexample,
            compile error with line, where the largest error sits, timing with % of roofline).
        data: stage-specific numbers (registers, spills, shared memory bytes; max error and
            where; per-shape times in ms, TFLOP/s, GB/s, % of peak).
        status: finer outcome: ``ok``, ``failed``, ``timeout``, ``crashed``, ``oom``,
            ``lost``, ``skipped``.
    """

    stage: str
    ok: bool
    seconds: float = 0.0
    summary: str = ""
    feedback: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    status: str = "ok"


@dataclass
class Evaluation:
    """Everything the gate learnt about one candidate.

    ``score`` is the geometric-mean speedup over the reference across the timed shapes (higher
    is better), or None when the candidate did not pass every stage that ran.
    """

    candidate_id: str
    stages: list[StageResult] = field(default_factory=list)
    score: float | None = None
    device: str | None = None
    flagged: str | None = None

    @property
    def ok(self) -> bool:
        return bool(self.stages) and all(s.ok for s in self.stages)

    @property
    def failed_stage(self) -> str | None:
        for s in self.stages:
            if not s.ok:
                return s.stage
        return None

    def stage(self, name: str) -> StageResult | None:
        for s in self.stages:
            if s.stage == name:
                return s
        return None

    def feedback(self) -> str:
        """All stages' feedback, in gate order, for the next prompt."""
        parts = []
        for s in self.stages:
            head = f"[{s.stage}: {'passed' if s.ok else s.status}] {s.summary}".rstrip()
            parts.append(head + (("\n" + s.feedback) if s.feedback else ""))
        return "\n".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
