"""Strategy planner: which optimization to ask for next, learnt from rewards.

The knowledge base is a folder of JSON files (``agent/knowledge/*.json``), one strategy each:
``name``, ``title``, ``applies_when`` (``needs_any``: kernel features of which at least one
must be present, empty = always; ``avoid``: features that rule it out; ``min_cc``: lowest
compute capability), ``when``, ``change``, ``risks``, ``tuner_knobs`` (launch/config
parameters the strategy is about) and ``prior`` (0..1: how often it tends to pay; it orders
the first tries). Features come from the kernel's AST (``kernel_features``).

The planner treats the applicable strategies as arms of a UCB1 bandit (Auer, Cesa-Bianchi and
Fischer, "Finite-time analysis of the multiarmed bandit problem", 2002): each arm's score is
its mean reward plus ``c * sqrt(2 ln n / n_i)``; arms never tried go first, highest ``prior``
first (file order breaks ties).
Rewards are in [0, 1] (see ``reward``); the state is rebuilt from the run record on resume.
"""
from __future__ import annotations

import ast
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

KNOWLEDGE_DIR = Path(__file__).with_name("knowledge")

_REDUCTIONS = {"sum", "max", "min", "reduce", "argmax", "argmin", "cumsum", "cumprod",
               "xor_sum", "associative_scan"}


class KnowledgeError(ValueError):
    """A knowledge file is malformed; the message names the file and the field."""


@dataclass(frozen=True)
class Strategy:
    """One knowledge-base entry (see the module docstring for the fields)."""

    name: str
    title: str
    when: str
    change: str
    risks: str
    needs_any: tuple[str, ...] = ()
    avoid: tuple[str, ...] = ()
    min_cc: int = 0
    tuner_knobs: tuple[str, ...] = ()
    prior: float = 0.5

    def applies(self, features: set[str], cc: int) -> bool:
        if cc and self.min_cc and cc < self.min_cc:
            return False
        if self.avoid and features & set(self.avoid):
            return False
        return not self.needs_any or bool(features & set(self.needs_any))


def load_knowledge(folder: str | Path = KNOWLEDGE_DIR) -> list[Strategy]:
    """Read every ``*.json`` in ``folder`` (sorted by file name).

    Raises:
        KnowledgeError: a file that is not JSON or lacks a required field.
    """
    out = []
    for path in sorted(Path(folder).glob("*.json")):
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise KnowledgeError(f"{path}: not valid JSON ({exc})") from None
        missing = [k for k in ("name", "title", "when", "change", "risks") if not d.get(k)]
        if missing:
            raise KnowledgeError(f"{path}: missing field(s) {', '.join(missing)}")
        aw = d.get("applies_when") or {}
        out.append(Strategy(name=d["name"], title=d["title"], when=d["when"],
                            change=d["change"], risks=d["risks"],
                            needs_any=tuple(aw.get("needs_any", ())),
                            avoid=tuple(aw.get("avoid", ())), min_cc=int(aw.get("min_cc", 0)),
                            tuner_knobs=tuple(d.get("tuner_knobs", ())),
                            prior=float(d.get("prior", 0.5))))
    return out


def kernel_features(source: str, kernel: str) -> set[str]:
    """Coarse features of ``kernel`` in ``source`` used to filter strategies.

    ``dot`` (calls tl.dot), ``loop`` (a for/while loop), ``reduction`` (tl.sum/max/...),
    ``atomic``, ``two_d_tiles`` (two or more BLOCK* constexpr parameters), ``autotune``
    (decorated with triton.autotune), ``elementwise`` (none of dot/reduction). A source that
    does not parse, or lacks the kernel, gives the empty set.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
               and n.name == kernel), None)
    if fn is None:
        return set()
    feats: set[str] = set()
    for deco in fn.decorator_list:
        text = ast.unparse(deco)
        if "autotune" in text:
            feats.add("autotune")
    blocks = [a.arg for a in fn.args.args if "BLOCK" in a.arg.upper()]
    if len(blocks) >= 2:
        feats.add("two_d_tiles")
    for node in ast.walk(fn):
        if isinstance(node, (ast.For, ast.While)):
            feats.add("loop")
        elif isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else (
                node.func.id if isinstance(node.func, ast.Name) else "")
            if name == "dot" or name == "dot_scaled":
                feats.add("dot")
            elif name in _REDUCTIONS:
                feats.add("reduction")
            elif name.startswith("atomic_"):
                feats.add("atomic")
    if not feats & {"dot", "reduction"}:
        feats.add("elementwise")
    return feats


def reward(score: float | None, parent_score: float | None, passed: bool) -> float:
    """Reward of one candidate in [0, 1].

    0 for a candidate that failed the gate; 0.5 for one that passed but could not be timed (no
    GPU: no speed information); otherwise 0.5 + log2(score / parent_score) clipped to [0, 1],
    so doubling the parent's speed earns 1 and halving it earns 0.
    """
    if not passed:
        return 0.0
    if score is None or not parent_score or score <= 0:
        return 0.5
    return max(0.0, min(1.0, 0.5 + math.log2(score / parent_score)))


@dataclass
class Planner:
    """UCB1 over the strategies that apply to one kernel."""

    strategies: list[Strategy]
    exploration: float = 1.0
    pulls: dict[str, int] = field(default_factory=dict)
    total: dict[str, float] = field(default_factory=dict)

    @classmethod
    def for_kernel(cls, source: str, kernel: str, *, cc: int = 90,
                   knowledge: Iterable[Strategy] | None = None,
                   exploration: float = 1.0) -> "Planner":
        feats = kernel_features(source, kernel)
        pool = list(knowledge) if knowledge is not None else load_knowledge()
        chosen = [s for s in pool if s.applies(feats, cc)]
        return cls(strategies=chosen or pool, exploration=exploration)

    def by_name(self, name: str) -> Strategy | None:
        return next((s for s in self.strategies if s.name == name), None)

    def choose(self) -> Strategy:
        """The arm with the highest UCB1 index (untried arms first, highest prior first)."""
        untried = [s for s in self.strategies if self.pulls.get(s.name, 0) == 0]
        if untried:
            return max(untried, key=lambda s: s.prior)
        n = sum(self.pulls.values())

        def index(s: Strategy) -> float:
            k = self.pulls[s.name]
            return self.total[s.name] / k + self.exploration * math.sqrt(2.0 * math.log(n) / k)

        return max(self.strategies, key=index)

    def update(self, name: str | None, value: float) -> None:
        """Credit ``value`` (in [0, 1]) to strategy ``name``; unknown names are ignored."""
        if not name or self.by_name(name) is None:
            return
        self.pulls[name] = self.pulls.get(name, 0) + 1
        self.total[name] = self.total.get(name, 0.0) + float(value)

    def table(self) -> list[dict[str, Any]]:
        """Per-strategy pulls and mean reward, for the report."""
        return [{"strategy": s.name, "pulls": self.pulls.get(s.name, 0),
                 "mean_reward": (self.total.get(s.name, 0.0) / self.pulls[s.name]
                                 if self.pulls.get(s.name) else None)}
                for s in self.strategies]
