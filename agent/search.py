"""The population: MAP-Elites cells over tile shape x pipelining depth.

Each candidate that passes the gate is placed in the cell given by its descriptor
``(tile, stages)``: ``tile`` is log2 of the product of the BLOCK* constexprs the launcher
uses (launch overrides first, else the launcher's keyword defaults), ``stages`` is
``num_stages``. A cell keeps its best candidate (the elite), so the population holds the
fastest kernel and also fast kernels of other shapes, which the next proposals can start from
(Mouret and Clune, "Illuminating search spaces by mapping elites", 2015).
"""
from __future__ import annotations

import ast
import math
import random
from dataclasses import dataclass, field
from typing import Any

from .records import Candidate


def launcher_defaults(source: str, launcher: str) -> dict[str, Any]:
    """Literal keyword defaults of ``launcher`` in ``source`` (``{"BLOCK": 1024, ...}``).

    Non-literal defaults (``None``, expressions) are left out; a source that does not parse
    or lacks the function gives ``{}``.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == launcher:
            out: dict[str, Any] = {}
            args = node.args
            pos = args.args[len(args.args) - len(args.defaults):] if args.defaults else []
            pairs = list(zip(pos, args.defaults)) + [
                (a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
            for a, d in pairs:
                try:
                    value = ast.literal_eval(d)
                except ValueError:
                    continue
                if isinstance(value, (int, float, str, bool)):
                    out[a.arg] = value
            return out
    return {}


def effective_config(candidate: Candidate, launcher: str) -> dict[str, Any]:
    cfg = launcher_defaults(candidate.source, launcher)
    cfg.update(candidate.launch)
    return cfg


def descriptor(config: dict[str, Any]) -> tuple[str, str]:
    """``(tile, stages)`` cell key of a launch configuration.

    ``tile`` is ``"t<k>"`` with k = round(log2(product of integer BLOCK* values)), or
    ``"t?"`` when no block size is known; ``stages`` is ``"s<num_stages>"`` or ``"s?"``.
    """
    blocks = [v for k, v in config.items()
              if "BLOCK" in k.upper() and isinstance(v, int) and not isinstance(v, bool) and v > 0]
    tile = f"t{round(math.log2(math.prod(blocks)))}" if blocks else "t?"
    stages = config.get("num_stages")
    return tile, (f"s{stages}" if isinstance(stages, int) else "s?")


@dataclass
class Member:
    candidate: Candidate
    score: float | None
    cell: tuple[str, str]
    order: int


def _better(a: Member, b: Member | None) -> bool:
    """a beats b: a higher score; a timed member beats an untimed one; earlier wins ties."""
    if b is None:
        return True
    if a.score is None or b.score is None:
        return a.score is not None and b.score is None
    return a.score > b.score


@dataclass
class Population:
    """MAP-Elites archive of the candidates that passed the gate."""

    launcher: str
    cells: dict[tuple[str, str], Member] = field(default_factory=dict)
    added: int = 0

    def add(self, candidate: Candidate, score: float | None) -> bool:
        """Offer a gate-passing candidate; returns True when it became its cell's elite."""
        cell = descriptor(effective_config(candidate, self.launcher))
        member = Member(candidate, score, cell, self.added)
        self.added += 1
        if _better(member, self.cells.get(cell)):
            self.cells[cell] = member
            return True
        return False

    def elites(self) -> list[Member]:
        return sorted(self.cells.values(), key=lambda m: m.order)

    def best(self) -> Member | None:
        best = None
        for m in self.elites():
            if _better(m, best):
                best = m
        return best

    def select_parent(self, rng: random.Random, exploit: float = 0.6) -> Member | None:
        """The best elite with probability ``exploit``, else a tournament of two random elites
        (keeps other tile shapes and pipelining depths alive)."""
        elites = self.elites()
        if not elites:
            return None
        if rng.random() < exploit or len(elites) == 1:
            return self.best()
        a, b = rng.sample(elites, 2)
        return a if _better(a, b) else b
