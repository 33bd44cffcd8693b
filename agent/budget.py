"""Limits of one optimization run: candidates evaluated, LLM tokens, dollars and wall time.

A ``Budget`` is the user's request (``candidates=40,tokens=200000,dollars=2.5,minutes=30``);
a ``BudgetMeter`` counts what the run has spent so far and says which limit, if any, is
reached. A resumed run starts its meter from the totals in the run record, so stopping and
resuming never buys extra budget.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

_KEYS = {"candidates": int, "tokens": int, "dollars": float, "minutes": float}


class BudgetError(ValueError):
    """A ``--budget`` string that cannot be read; the message names the bad item."""


@dataclass
class Budget:
    """Upper limits; None means no limit on that quantity.

    Attributes:
        candidates: candidates evaluated (the seed counts as one).
        tokens: prompt + completion tokens over all LLM calls.
        dollars: US dollars as priced by litellm (or the prices given to the proposer).
        minutes: wall time of the run, in minutes, summed over resumed sessions.
    """

    candidates: int | None = 24
    tokens: int | None = None
    dollars: float | None = None
    minutes: float | None = None

    @classmethod
    def parse(cls, text: str | None) -> "Budget":
        """Read ``"candidates=N,tokens=N,dollars=X,minutes=M"`` (any subset, any order).

        Raises:
            BudgetError: an unknown key, a missing ``=``, a non-number or a negative value.
        """
        budget = cls()
        if not text:
            return budget
        for i, item in enumerate(p.strip() for p in text.split(",")):
            if not item:
                continue
            key, sep, value = item.partition("=")
            key = key.strip().lower()
            if not sep:
                raise BudgetError(f"budget item {i + 1} {item!r}: expected KEY=VALUE")
            if key not in _KEYS:
                raise BudgetError(f"budget item {i + 1} {item!r}: unknown key {key!r} "
                                  f"(known: {', '.join(_KEYS)})")
            try:
                number = _KEYS[key](value.strip())
            except ValueError:
                raise BudgetError(f"budget item {i + 1} {item!r}: {value.strip()!r} is not "
                                  f"a{'n integer' if _KEYS[key] is int else ' number'}") from None
            if number < 0:
                raise BudgetError(f"budget item {i + 1} {item!r}: must be >= 0")
            setattr(budget, key, number)
        return budget

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class BudgetMeter:
    """What a run has spent; ``exhausted()`` names the first limit reached, else None."""

    budget: Budget
    candidates: int = 0
    tokens: int = 0
    dollars: float = 0.0
    seconds_before: float = 0.0  # wall time spent by earlier sessions of a resumed run
    started: float = field(default_factory=time.monotonic)

    @property
    def seconds(self) -> float:
        """Wall time of the run so far, in seconds, earlier sessions included."""
        return self.seconds_before + (time.monotonic() - self.started)

    def charge(self, *, candidates: int = 0, tokens: int = 0, dollars: float = 0.0) -> None:
        self.candidates += candidates
        self.tokens += tokens
        self.dollars += dollars

    def exhausted(self, *, spending: bool = True) -> str | None:
        """The first limit reached, as a sentence, else None.

        With ``spending=False`` only the candidate and time limits count: a reply whose tokens
        are already paid for is still evaluated after the token or dollar limit is reached.
        """
        b = self.budget
        if b.candidates is not None and self.candidates >= b.candidates:
            return f"candidate limit reached ({self.candidates}/{b.candidates})"
        if spending and b.tokens is not None and self.tokens >= b.tokens:
            return f"token limit reached ({self.tokens}/{b.tokens})"
        if spending and b.dollars is not None and self.dollars >= b.dollars:
            return f"dollar limit reached (${self.dollars:.4f}/${b.dollars:.2f})"
        if b.minutes is not None and self.seconds >= 60.0 * b.minutes:
            return f"time limit reached ({self.seconds / 60:.1f}/{b.minutes:g} min)"
        return None

    def remaining_candidates(self) -> int | None:
        if self.budget.candidates is None:
            return None
        return max(0, self.budget.candidates - self.candidates)

    def fraction_used(self) -> float:
        """The largest used fraction over the limits that are set (for progress bars), 0..1."""
        b = self.budget
        parts = []
        if b.candidates:
            parts.append(self.candidates / b.candidates)
        if b.tokens:
            parts.append(self.tokens / b.tokens)
        if b.dollars:
            parts.append(self.dollars / b.dollars)
        if b.minutes:
            parts.append(self.seconds / (60.0 * b.minutes))
        return min(1.0, max(parts)) if parts else 0.0
