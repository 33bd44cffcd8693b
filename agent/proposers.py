"""The proposer interface shared by the LLM proposer (``agent.llm``) and the built-in tuner
(``agent.tuner``).

The loop hands a proposer a ``Request`` (the parent to improve, its feedback, the strategy the
planner picked, the history) and gets back a ``Proposal``: zero or more new candidates plus
what producing them cost. After evaluating each candidate the loop calls ``observe`` so that a
proposer with its own model of the space (the tuner) can learn from the result.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from .records import Candidate


@dataclass
class Request:
    """What the loop asks of a proposer for one round.

    Attributes:
        parent: the candidate to improve (the seed in the first round).
        parent_score: its score (None when untimed), parent_feedback its gate feedback.
        last_feedback / last_id: the most recent rejected attempt's feedback, for the prompt.
        strategy: ``planner.Strategy`` chosen for this round, or None.
        history: earlier attempts (dicts with id, strategy, outcome, score).
        best_score: best accepted score so far (None when nothing was timed).
        new_id: returns a fresh candidate id each call.
        max_candidates: at most this many candidates (the budget's remainder).
        cancel: set when the user cancels; long waits (backoff) must watch it.
    """

    parent: Candidate
    parent_score: float | None
    parent_feedback: str
    new_id: Callable[[], str]
    last_feedback: str = ""
    last_id: str | None = None
    strategy: Any = None
    history: list[dict[str, Any]] = field(default_factory=list)
    best_score: float | None = None
    max_candidates: int = 1
    cancel: threading.Event = field(default_factory=threading.Event)


@dataclass
class Proposal:
    """A proposer's answer.

    Attributes:
        candidates: new candidates (may be empty).
        prompt_tokens, completion_tokens, dollars, seconds: the cost of producing them.
        error: why nothing (or a broken reply) came back, for the next prompt and the record.
        unparsed: the raw reply when it held no code (recorded as an ``unparsed`` attempt).
        done: the proposer has nothing more to offer (the tuner converged; no timing).
        note: a message for the user (e.g. "cannot time on this machine").
    """

    candidates: list[Candidate] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    dollars: float = 0.0
    priced: bool = True
    seconds: float = 0.0
    calls: int = 0
    error: str | None = None
    unparsed: str | None = None
    done: bool = False
    note: str | None = None

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class Proposer(Protocol):
    """What the loop needs from a proposer."""

    name: str

    def propose(self, request: Request) -> Proposal:
        ...

    def observe(self, candidate: Candidate, score: float | None, passed: bool) -> None:
        ...
