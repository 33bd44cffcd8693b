"""Built-in tuner: searches launch/config overrides of one kernel without an LLM.

The space is the spec's ``config_space`` (constexprs, ``num_warps``, ``num_stages``,
``GROUP_M`` ...), restricted to the keyword arguments the launcher accepts, plus the configs of
the kernel's ``@triton.autotune`` list that fit those keywords. Spaces of thousands of points
are not enumerated: the search is an evolutionary neighbourhood search (a (mu + lambda)
strategy over an integer lattice):

1. the first batch is the autotune list, then half of it one-knob neighbours of the author's
   own configuration (the launcher's defaults) and the rest random points of the space;
2. every later batch takes the ``mu`` best timed configs and proposes unseen neighbours: one
   knob moved one step along its list (most of the batch) or two knobs moved at once;
   a random point now and then keeps the search from sticking to one basin;
3. it stops after ``patience`` batches without a better score, or when no unseen neighbour of
   the elite is left.

Without timings (a machine without a GPU) nothing can be ranked: the tuner gates its first
batch (compile + correctness still run) and then stops with a note saying it cannot time,
so no speedup is ever claimed from a machine that cannot measure one.
"""
from __future__ import annotations

import ast
import itertools
import random
from dataclasses import dataclass, field
from typing import Any

from .proposers import Proposal, Request
from .records import Candidate
from .search import launcher_defaults


def launcher_keywords(source: str, launcher: str) -> tuple[set[str], bool]:
    """(parameter names of ``launcher``, whether it takes ``**kwargs``)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set(), False
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == launcher:
            a = node.args
            names = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
            return names, a.kwarg is not None
    return set(), False


def autotune_configs(source: str, kernel: str) -> list[dict[str, Any]]:
    """The literal configs of ``@triton.autotune(configs=[triton.Config({...}, num_warps=..,
    num_stages=..), ...])`` on ``kernel`` (non-literal entries are skipped)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    out: list[dict[str, Any]] = []
    for node in tree.body:
        if not (isinstance(node, ast.FunctionDef) and node.name == kernel):
            continue
        for deco in node.decorator_list:
            if not (isinstance(deco, ast.Call) and "autotune" in ast.unparse(deco.func)):
                continue
            configs = next((k.value for k in deco.keywords if k.arg == "configs"),
                           deco.args[0] if deco.args else None)
            if not isinstance(configs, (ast.List, ast.Tuple)):
                continue
            for call in configs.elts:
                if not isinstance(call, ast.Call):
                    continue
                cfg: dict[str, Any] = {}
                try:
                    if call.args:
                        cfg.update(ast.literal_eval(call.args[0]))
                    for k in call.keywords:
                        if k.arg in ("num_warps", "num_stages", "num_ctas"):
                            cfg[k.arg] = ast.literal_eval(k.value)
                except ValueError:
                    continue
                out.append(cfg)
    return out


@dataclass
class Tuner:
    """Evolutionary neighbourhood search over launch overrides (see the module docstring).

    Args:
        space: name -> list of values (ordered: neighbours are adjacent entries).
        seed_source: the file; every candidate keeps it and changes only ``launch``.
        kernel, launcher: names from the spec.
        batch: candidates per round; mu: parents kept per round; patience: rounds without
            improvement before stopping; rng: the source of randomness (seed it for tests).
    """

    space: dict[str, list[Any]]
    seed_source: str
    kernel: str
    launcher: str
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    batch: int = 6
    mu: int = 3
    patience: int = 3
    timing: bool = True
    tried: dict[tuple, float | None] = field(default_factory=dict)
    passed: set[tuple] = field(default_factory=set)
    rounds: int = 0
    stale: int = 0
    best: float | None = None
    name: str = "tuner"

    @classmethod
    def for_spec(cls, spec, seed_source: str, *, rng: random.Random | None = None,
                 timing: bool = True, batch: int = 6) -> "Tuner":
        """A tuner over the spec's config space (``ValueError`` when nothing is tunable)."""
        names, any_kw = launcher_keywords(seed_source, spec.launcher)
        space = {k: list(v) for k, v in (spec.config_space or {}).items()
                 if v and (any_kw or k in names)}
        for cfg in autotune_configs(seed_source, spec.kernel):
            for k, v in cfg.items():
                if (any_kw or k in names) and k in space and v not in space[k]:
                    space[k] = sorted(space[k] + [v])
        if not space:
            raise ValueError(f"nothing to tune: the spec of {spec.kernel!r} has no config_space "
                             f"entries that the launcher {spec.launcher!r} accepts as keywords")
        return cls(space=space, seed_source=seed_source, kernel=spec.kernel,
                   launcher=spec.launcher, rng=rng or random.Random(0), timing=timing,
                   batch=batch)

    # -- configurations ---------------------------------------------------------------------
    @property
    def size(self) -> int:
        n = 1
        for v in self.space.values():
            n *= len(v)
        return n

    def key(self, cfg: dict[str, Any]) -> tuple:
        return tuple(cfg.get(k) for k in self.space)

    def full(self, partial: dict[str, Any]) -> dict[str, Any]:
        """A config with every knob set: ``partial`` over the launcher's defaults, then the
        first listed value for knobs without either."""
        defaults = launcher_defaults(self.seed_source, self.launcher)
        return {k: partial.get(k, defaults.get(k, vals[0])) for k, vals in self.space.items()}

    def random_config(self) -> dict[str, Any]:
        return {k: self.rng.choice(v) for k, v in self.space.items()}

    def neighbours(self, cfg: dict[str, Any]) -> list[dict[str, Any]]:
        """Every config one step away along one knob's list."""
        out = []
        for k, vals in self.space.items():
            i = vals.index(cfg[k]) if cfg.get(k) in vals else None
            steps = [0, len(vals) - 1] if i is None else [i - 1, i + 1]
            for j in steps:
                if 0 <= j < len(vals) and vals[j] != cfg.get(k):
                    out.append(dict(cfg, **{k: vals[j]}))
        return out

    def seen(self, cfg: dict[str, Any]) -> bool:
        return self.key(cfg) in self.tried

    # -- the proposer interface -------------------------------------------------------------
    def observe(self, candidate: Candidate, score: float | None, passed: bool) -> None:
        k = self.key(self.full(candidate.launch))
        self.tried[k] = score if passed else None
        if passed:
            self.passed.add(k)
        if passed and score is not None and (self.best is None or score > self.best):
            self.best = score
            self.stale = -1  # reset at the end of the round

    def _elite(self) -> list[dict[str, Any]]:
        timed = [(s, k) for k, s in self.tried.items() if s is not None]
        timed.sort(key=lambda t: -t[0])
        return [dict(zip(self.space, k)) for _, k in timed[: self.mu]]

    def propose(self, request: Request) -> Proposal:
        n = max(0, min(self.batch, request.max_candidates))
        prop = Proposal()
        if self.rounds > 0:
            self.stale += 1
        if self.rounds > 0 and not self.timing:
            prop.done = True
            prop.note = (f"cannot time on this machine: {len(self.passed)} of {len(self.tried)} "
                         f"configurations passed the gate; none is claimed faster than the seed")
            return prop
        if self.rounds > 0 and self.stale >= self.patience:
            prop.done = True
            prop.note = f"converged: {self.patience} rounds without a faster configuration"
            return prop
        picks: list[dict[str, Any]] = []

        def take(cfg: dict[str, Any]) -> None:
            cfg = self.full(cfg)
            if len(picks) < n and not self.seen(cfg) and \
                    self.key(cfg) not in {self.key(p) for p in picks}:
                picks.append(cfg)

        if self.rounds == 0:
            for cfg in autotune_configs(self.seed_source, self.kernel):
                take({k: v for k, v in cfg.items() if k in self.space})
            # half local (one step from the author's own configuration), half random
            near = self.neighbours(self.full({}))
            self.rng.shuffle(near)
            for cfg in near[: max(1, n // 2)]:
                take(cfg)
            for _ in range(50 * n):
                if len(picks) >= n:
                    break
                take(self.random_config())
        else:
            elite = self._elite()
            pool = []
            for rank, cfg in enumerate(elite):
                for nb in self.neighbours(cfg):
                    pool.append((rank + self.rng.random(), nb))
                # two-knob jumps: escape ridges that one-knob moves cannot cross
                for a, b in itertools.combinations(self.neighbours(cfg), 2):
                    diff = {k for k in self.space if a[k] != cfg[k]} | \
                        {k for k in self.space if b[k] != cfg[k]}
                    if len(diff) == 2 and self.rng.random() < 0.1:
                        pool.append((rank + 1.5 + self.rng.random(), {**a, **{
                            k: b[k] for k in self.space if b[k] != cfg[k]}}))
            pool.sort(key=lambda t: t[0])
            n_explore = 1 if n >= 4 else 0
            for _, cfg in pool:
                if len(picks) >= n - n_explore:
                    break
                take(cfg)
            for _ in range(50 * n):
                if len(picks) >= n:
                    break
                take(self.random_config())
        self.rounds += 1
        if not picks:
            prop.done = True
            prop.note = "no untried configuration is left near the best ones"
            return prop
        for cfg in picks:
            self.tried.setdefault(self.key(cfg), None)
            prop.candidates.append(Candidate(
                id=request.new_id(), source=self.seed_source, kernel=self.kernel,
                parent=request.parent.id, proposer="tuner",
                strategy=getattr(request.strategy, "name", None) or "autotune_configs",
                launch=cfg))
        return prop


def bake_launch(source: str, launcher: str, launch: dict[str, Any]) -> str:
    """``source`` with the launcher's keyword defaults set to ``launch`` (the tuner's winning
    overrides become a plain source edit the user can read and apply).

    Only defaults that exist are rewritten; an override with no matching keyword default is
    left out (the returned source then differs from the evaluated config, so callers check
    ``launcher_defaults`` of the result). Returns ``source`` unchanged if it does not parse.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == launcher),
              None)
    if fn is None or not launch:
        return source
    a = fn.args
    pos = a.args[len(a.args) - len(a.defaults):] if a.defaults else []
    pairs = list(zip(pos, a.defaults)) + [(x, d) for x, d in zip(a.kwonlyargs, a.kw_defaults)
                                          if d is not None]
    lines = source.splitlines(keepends=True)
    edits = []
    for arg, default in pairs:
        if arg.arg in launch and default.lineno == default.end_lineno:
            edits.append((default.lineno - 1, default.col_offset, default.end_col_offset,
                          repr(launch[arg.arg])))
    # right to left so earlier columns stay valid
    for line, c0, c1, text in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        raw = lines[line].encode("utf-8")
        lines[line] = (raw[:c0] + text.encode("utf-8") + raw[c1:]).decode("utf-8")
    return "".join(lines)
