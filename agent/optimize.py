"""The optimization loop: propose, gate, select, record, until the budget is spent.

``run_optimize`` is the one entry point for both front ends (``kernelsight optimize`` and the
language server's code action). For every candidate, in this order:

1. the AST policy (``agent.policy.check_policy``): no reference / library call for the result,
   spec, reference and input maker unchanged; a breach costs no compile or GPU time;
2. the harness gate (``agent.evaluate.Evaluator``): static invariant analysis under the
   original annotations -> compile -> correctness (fresh inputs, held-out sizes) -> timing,
   stopping at the first failure;
3. ghost replay for rewrites that passed correctness: the same file with the kernel's body
   replaced by ``pass`` must FAIL correctness, else the result does not come from the kernel;
4. the review flag: a speedup more than ``review_factor`` times the best known (the reference
   or the best accepted so far) is held for a human, not accepted.

The feedback of every stage goes into the next prompt. Everything is recorded in the run
directory as it happens (``agent.record``); ``resume=True`` replays the record (population,
bandit, tuner, budget) and never evaluates a recorded candidate again.
"""
from __future__ import annotations

import json
import os
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .backends import gate_stream
from .budget import Budget, BudgetMeter
from .planner import Planner, reward
from .policy import check_policy, ghost_source, review_flag
from .proposers import Proposal, Request
from .record import RunRecord, unified_diff
from .records import STAGES, Candidate, Evaluation, StageResult
from .search import Population


class OptimizeError(RuntimeError):
    """The run cannot start (no spec, a seed that fails its own gate, a bad run directory)."""


@dataclass
class Progress:
    """One progress report, passed to the ``progress`` callback after each step.

    Attributes:
        fraction: 0..1 of the budget used (the largest fraction over the limits that are set).
        message: one line for a progress bar or an LSP work-done report.
        candidates: candidates evaluated so far; best_score: best accepted score or None.
        candidate_id / status: the candidate just finished and its status, if any.
    """

    fraction: float
    message: str
    candidates: int = 0
    best_score: float | None = None
    candidate_id: str | None = None
    status: str | None = None


@dataclass
class OptimizeResult:
    """What a run produced.

    Attributes:
        best_source: the best candidate's file text with its launch overrides baked into the
            launcher's defaults (the seed's text when nothing beat it).
        best_eval: its ``Evaluation`` (None when resumed from a record without one).
        report_path: the markdown report.
        diff: unified diff of ``best_source`` against the original file ("" if unchanged).
        best_id, best_score, seed_score: ids and geometric-mean speedups over the reference.
        timed: whether anything could be timed (False on a machine without a GPU).
        stop_reason: why the loop ended (budget, cancel, tuner converged, errors...).
        run_dir: the run directory; accepted: ids that passed every stage that ran.
    """

    best_source: str
    best_eval: Evaluation | None
    report_path: Path
    diff: str
    best_id: str = "c0000"
    best_score: float | None = None
    seed_score: float | None = None
    timed: bool = False
    stop_reason: str = ""
    run_dir: Path | None = None
    accepted: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _secrets(api_key: str | None) -> list[str]:
    """The API key plus the values of credential-like environment variables (to redact)."""
    from .isolation import is_secret_name

    out = [api_key] if api_key else []
    out += [v for k, v in os.environ.items() if is_secret_name(k) and v and len(v) >= 8]
    return out


def default_run_dir(path: Path, kernel: str, *, resume: bool) -> Path:
    """``.kernelsight/runs/<file stem>-<kernel>-<timestamp>`` under the working directory;
    with ``resume``, the newest existing one for this file and kernel."""
    base = Path.cwd() / ".kernelsight" / "runs"
    prefix = f"{path.stem}-{kernel}-"
    if resume:
        found = sorted(p for p in base.glob(prefix + "*") if (p / "run.json").exists())
        if not found:
            raise OptimizeError(f"--resume: no earlier run of {path.name}::{kernel} under {base}")
        return found[-1]
    return base / (prefix + time.strftime("%Y%m%d-%H%M%S"))


def _stage(name: str, ok: bool, summary: str, feedback: str = "", **data) -> StageResult:
    return StageResult(stage=name, ok=ok, summary=summary, feedback=feedback, data=data,
                       status="ok" if ok else "failed")


def _is_timed(ev: Evaluation) -> bool:
    t = ev.stage("timing")
    return bool(t and t.ok and t.status == "ok" and ev.score is not None)


class _Loop:
    """State of one run (kept in one object so that the replay and the live loop share it)."""

    def __init__(self, spec, seed_source: str, evaluator, record: RunRecord, proposer,
                 planner: Planner | None, budget: Budget, *, rng: random.Random,
                 review_factor: float, progress: Callable[[Progress], None] | None,
                 cancel: threading.Event, log: Callable[[str], None] | None):
        self.spec = spec
        self.seed_source = seed_source
        self.evaluator = evaluator
        self.record = record
        self.proposer = proposer
        self.planner = planner
        self.rng = rng
        self.review_factor = review_factor
        self.progress_cb = progress
        self.cancel = cancel
        self.log = log or (lambda _msg: None)
        self.meter = BudgetMeter(budget, seconds_before=record.wall_seconds())
        self.population = Population(launcher=spec.launcher)
        self.evals: dict[str, Evaluation] = {}
        self.scores: dict[str, float | None] = {}
        self.seed: Candidate | None = None
        self.seed_score: float | None = None
        self.best_id: str | None = None
        self.best_score: float | None = None
        self.history: list[dict[str, Any]] = []
        self.last_feedback = ""
        self.last_id: str | None = None
        self.accepted: list[str] = []
        self.untimed_pick: str | None = None
        self.timed = False
        self.device: str | None = None
        self.notes: list[str] = []
        self._counter = len(record.entries)
        self._ghost_checked: set[str] = set()
        self.bench_shapes: list[dict] | None = None

    # -- ids and progress -------------------------------------------------------------------
    def new_id(self) -> str:
        cid = f"c{self._counter:04d}"
        self._counter += 1
        return cid

    def report_progress(self, message: str, cid: str | None = None,
                        status: str | None = None) -> None:
        if self.progress_cb is not None:
            self.progress_cb(Progress(fraction=self.meter.fraction_used(), message=message,
                                      candidates=self.meter.candidates,
                                      best_score=self.best_score, candidate_id=cid,
                                      status=status))

    # -- the gate ---------------------------------------------------------------------------
    def gate(self, cand: Candidate) -> Evaluation:
        """Policy -> harness stages -> ghost replay; returns the evaluation (score None unless
        every stage passed)."""
        violations = check_policy(cand.source, self.seed_source, kernel=self.spec.kernel,
                                  launcher=self.spec.launcher, reference=self.spec.reference,
                                  inputs=self.spec.inputs, bench_name=self.spec.name,
                                  baseline=getattr(self.spec, "baseline", None))
        if violations:
            fb = "The candidate breaks the optimization policy:\n" + "\n".join(
                f"- {v}" for v in violations)
            return Evaluation(candidate_id=cand.id, stages=[_stage(
                "policy", False, f"{len(violations)} policy violation(s): {violations[0]}", fb,
                violations=[str(v) for v in violations])])
        seed_ev = self.evals.get(self.seed.id) if self.seed is not None else None
        seed_static = seed_ev.stage("static") if seed_ev is not None else None
        if cand.source == self.seed_source and seed_static is not None and seed_static.ok:
            # The invariant analysis reads only the source: a launch-only change (the tuner)
            # gets the seed's verdict instead of a second, identical analysis.
            ev = self.evaluator.evaluate(cand, stages=tuple(s for s in STAGES if s != "static"),
                                         shapes=self.bench_shapes)
            ev.stages.insert(0, StageResult(stage="static", ok=True, status=seed_static.status,
                                            summary="same source as the original: "
                                                    + seed_static.summary,
                                            data={"reused_from": self.seed.id}))
        else:
            ev = self.evaluator.evaluate(cand, shapes=self.bench_shapes)
        ev.stages.insert(0, _stage("policy", True, "no policy violation"))
        corr = ev.stage("correctness")
        if corr is not None and corr.ok and cand.source not in self._ghost_checked:
            ghost = ghost_source(cand.source, self.spec.kernel)
            self._ghost_checked.add(cand.source)
            if ghost is not None:
                g0 = time.monotonic()
                gev = self.evaluator.evaluate(
                    Candidate(id=f"{cand.id}-ghost", source=ghost, kernel=cand.kernel,
                              parent=cand.id, proposer="ghost", launch=dict(cand.launch)),
                    stages=("correctness",))
                gcorr = gev.stage("correctness")
                if gcorr is not None and gcorr.ok:
                    ev.stages.append(_stage(
                        "ghost", False, "the output does not depend on the kernel",
                        "Ghost replay: with the kernel's body replaced by `pass` the launcher "
                        "still produced the right output, so the result is computed outside "
                        "the kernel. The kernel itself must compute every output element."))
                    ev.score = None
                else:
                    ev.stages.append(_stage("ghost", True,
                                            "a no-op kernel fails correctness, as it must"))
                ev.stages[-1].seconds = time.monotonic() - g0
        if ev.score is not None and cand.proposer != "seed":
            # best known: the reference (1.0) or the best timed so far, the seed included
            best_known = max(1.0, self.best_score or 0.0)
            flag = review_flag(ev.score, best_known, self.review_factor)
            if flag:
                ev.flagged = flag
        return ev

    # -- bookkeeping shared by replay and live loop ----------------------------------------
    def absorb(self, cand: Candidate, ev: Evaluation | None, status: str,
               score: float | None, passed: bool, reward_value: float | None) -> None:
        self.scores[cand.id] = score
        if ev is not None:
            self.evals[cand.id] = ev
            if ev.device:
                self.device = ev.device
        if status in ("seed", "accepted", "passed"):
            self.population.add(cand, score)
            if status != "seed":
                self.accepted.append(cand.id)
                if score is None and cand.source != self.seed_source:
                    self.untimed_pick = cand.id
        if score is not None and status in ("seed", "accepted", "passed"):
            self.timed = True
            if self.best_score is None or score > self.best_score:
                self.best_score, self.best_id = score, cand.id
        if status == "seed":
            self.seed, self.seed_score = cand, score
            if self.best_id is None:
                self.best_id = cand.id
        if self.proposer is not None and status != "unparsed":
            self.proposer.observe(cand, score, passed)
        if self.planner is not None and reward_value is not None and status != "seed":
            self.planner.update(cand.strategy, reward_value)
        if status != "seed":
            self.history.append({"id": cand.id, "strategy": cand.strategy, "score": score,
                                 "outcome": status if passed or status == "unparsed" else
                                 f"{status} at {ev.failed_stage if ev else '?'}"})
            if status in ("rejected", "flagged", "unparsed"):
                self.last_id = cand.id
                self.last_feedback = (ev.feedback() if ev is not None else "") or \
                    self.last_feedback
            else:
                self.last_feedback, self.last_id = "", None

    def replay(self) -> None:
        """Rebuild population, bandit, tuner and budget from the record (resume)."""
        for call in self.record.llm_calls:
            self.meter.charge(tokens=int(call.get("tokens", 0) or 0),
                              dollars=float(call.get("dollars", 0.0) or 0.0))
        for e in self.record.entries:
            d = e.data
            try:
                source = self.record.source(e.id)
            except OSError:
                continue
            cand = Candidate(id=d["id"], source=source, kernel=self.spec.kernel,
                             parent=d.get("parent"), proposer=d.get("proposer", "seed"),
                             strategy=d.get("strategy"), launch=d.get("launch") or {})
            ev = Evaluation(candidate_id=cand.id, score=d.get("score"), device=d.get("device"),
                            flagged=d.get("flagged"),
                            stages=[StageResult(**{k: s.get(k) for k in (
                                "stage", "ok", "seconds", "summary", "feedback", "data",
                                "status")}) for s in d.get("stages") or []])
            status = d.get("status", "rejected")
            self.meter.charge(candidates=1)
            if status == "unparsed":
                ev = Evaluation(candidate_id=cand.id, stages=[_stage(
                    "reply", False, d.get("error") or "no code block", d.get("error") or "")])
            self.absorb(cand, ev, status, d.get("score") if status != "flagged" else None,
                        status in ("seed", "accepted", "passed"), d.get("reward"))
            if status == "seed" and cand.source == self.seed_source:
                self._ghost_checked.add(cand.source)

    # -- live steps -------------------------------------------------------------------------
    def timed_gate(self, cand: Candidate) -> tuple[Evaluation, float]:
        t0 = time.monotonic()
        ev = self.gate(cand)
        return ev, time.monotonic() - t0

    def evaluate_and_record(self, cand: Candidate, *, is_seed: bool = False,
                            gated: tuple[Evaluation, float] | None = None) -> str:
        # gated: (evaluation, seconds) when the gate already ran (backends.gate_stream)
        ev, seconds = self.timed_gate(cand) if gated is None else gated
        passed = ev.ok and ev.flagged is None
        score = ev.score if passed else None
        if is_seed:
            status = "seed"
        elif ev.flagged:
            status = "flagged"
        elif not ev.ok:
            status = "rejected"
        elif score is not None and (self.best_score is None or score > self.best_score):
            status = "accepted"
        elif score is None and ev.ok:
            status = "accepted"  # passed every stage that could run; untimed, so not ranked
        else:
            status = "passed"
        parent_score = self.scores.get(cand.parent or "", None)
        r = None if is_seed else reward(score, parent_score, passed)
        self.meter.charge(candidates=1)
        self.record.add(cand, ev, seed_source=self.seed_source, status=status,
                        extra={"seconds": round(seconds, 3), "reward": r})
        self.absorb(cand, ev, status, score, passed, r)
        self.log(f"{cand.id} {status}: " + (f"{score:.3f}x" if score is not None else
                                             (ev.failed_stage or "untimed")))
        self.report_progress(f"{cand.id} {status}" + (
            f" ({score:.3f}x)" if score is not None else
            (f" at {ev.failed_stage}" if ev.failed_stage else "")), cand.id, status)
        return status

    def record_unparsed(self, prop: Proposal, parent: Candidate, strategy) -> None:
        cand = Candidate(id=self.new_id(), source=prop.unparsed or "", kernel=self.spec.kernel,
                         parent=parent.id, proposer=getattr(self.proposer, "name", "?"),
                         strategy=getattr(strategy, "name", None))
        ev = Evaluation(candidate_id=cand.id, stages=[_stage(
            "reply", False, prop.error or "no code block",
            f"Your reply could not be used: {prop.error}. Reply with the whole file in one "
            f"```python block.")])
        self.meter.charge(candidates=1)
        self.record.add(cand, ev, seed_source=self.seed_source, status="unparsed",
                        extra={"error": prop.error, "reward": 0.0})
        self.absorb(cand, ev, "unparsed", None, False, 0.0)


def run_optimize(path: str | os.PathLike, kernel: str | None = None, *, model: str | None = None,
                 tuner: bool = False, budget: Budget | str | None = None,
                 run_dir: str | os.PathLike | None = None,
                 progress: Callable[[Progress], None] | None = None,
                 cancel: threading.Event | None = None, resume: bool = False,
                 api_key: str | None = None, api_base: str | None = None,
                 temperature: float = 0.7, max_tokens: int = 8192, retries: int = 3,
                 input_cost_per_token: float | None = None,
                 output_cost_per_token: float | None = None,
                 evaluator=None, device: str = "auto", target: str = "cuda:90",
                 seed: int = 0, review_factor: float = 10.0, tuner_batch: int = 6,
                 bench_shapes: list[dict] | None = None,
                 log: Callable[[str], None] | None = None) -> OptimizeResult:
    """Optimise ``FILE::KERNEL`` with an LLM (``model``) or the built-in tuner (``tuner``).

    Args:
        path: the kernel file (with its bench spec); kernel: the jit function (None: the
            file's only benchmarked kernel).
        model: a litellm model string; tuner: use the built-in tuner instead (exactly one).
        budget: a ``Budget`` or its text form ``"candidates=N,tokens=N,dollars=X,minutes=M"``.
        run_dir: where the record goes (default ``.kernelsight/runs/<stem>-<kernel>-<time>``).
        progress: called with a ``Progress`` after every candidate (from this thread).
        cancel: set it from another thread to stop after the candidate being evaluated;
            Ctrl-C (KeyboardInterrupt) stops the same way. Both still write the report.
        resume: continue the run in ``run_dir`` (or the newest one for this kernel).
        api_key / api_base / temperature / max_tokens / retries / *_cost_per_token: LLM
            settings (see ``agent.llm.LLMProposer``); the key is never written anywhere.
        evaluator: an object with ``evaluate(candidate, stages=...) -> Evaluation`` (default:
            ``agent.evaluate.Evaluator(spec, device=device, target=target)``), or a backend
            name for ``agent.backends.make_evaluator``: ``"local"``, ``"ray:local"``,
            ``"ray:auto"``, ``"ray://HOST:PORT"`` (also taken from ``KERNELSIGHT_EVALUATOR``
            when ``evaluator`` is None); a backend built here is closed at the end.
        seed: seeds the search's random choices; review_factor: the review threshold.
        bench_shapes: timed shapes (default: the spec's ``bench_shapes``).
        tuner_batch: configurations per tuner round.
        log: called with one line per candidate (the CLI's verbose output).

    Returns:
        ``OptimizeResult``. Never claims a speedup that was not timed: without a GPU
        ``timed`` is False and ``best_score`` None.

    Raises:
        OptimizeError: neither or both of model/tuner, a spec error, a run directory that
            cannot be used, or a seed kernel that fails its own gate.
    """
    from .benchspec import SpecError, load_spec
    from .record import RunDirError

    if bool(model) == bool(tuner):
        raise OptimizeError("choose exactly one proposer: a model (--model M) or --tuner")
    path = Path(path)
    try:
        spec = load_spec(path, kernel)
    except SpecError as exc:
        raise OptimizeError(str(exc)) from None
    kernel = spec.kernel
    seed_source = path.read_text(encoding="utf-8")
    if not isinstance(budget, Budget):
        budget = Budget.parse(budget)
    cancel = cancel or threading.Event()
    run_dir = Path(run_dir) if run_dir else default_run_dir(path, kernel, resume=resume)
    proposer_name = f"llm:{model}" if model else "tuner"
    meta = {"file": str(path), "kernel": kernel, "proposer": proposer_name,
            "budget": budget.to_dict(), "target": target}
    try:
        record = RunRecord.open(run_dir, meta, resume=resume and run_dir.exists(),
                                secrets=_secrets(api_key))
    except RunDirError as exc:
        raise OptimizeError(str(exc)) from None
    own_evaluator = evaluator is None or isinstance(evaluator, str)
    if isinstance(evaluator, str) or (evaluator is None and os.environ.get("KERNELSIGHT_EVALUATOR")):
        from .backends import EvaluatorSpecError, make_evaluator  # issue 8: local | ray:...

        try:
            evaluator = make_evaluator(spec, evaluator, device=device, target=target)
        except (EvaluatorSpecError, RuntimeError) as exc:
            raise OptimizeError(str(exc)) from None
    elif evaluator is None:
        from .evaluate import Evaluator

        evaluator = Evaluator(spec, device=device, target=target)
    rng = random.Random(seed + len(record.entries))

    planner = None
    if model:
        from .llm import LLMProposer

        proposer = LLMProposer(model=model, launcher=spec.launcher, path=path.name,
                               device=_device_words(evaluator, target), shapes=spec.shapes,
                               dtypes=spec.dtypes, api_key=api_key, api_base=api_base,
                               temperature=temperature, max_tokens=max_tokens, retries=retries,
                               input_cost_per_token=input_cost_per_token,
                               output_cost_per_token=output_cost_per_token)
        planner = Planner.for_kernel(seed_source, kernel, cc=_cc(target))
    else:
        from .tuner import Tuner

        try:
            proposer = Tuner.for_spec(spec, seed_source, rng=random.Random(seed),
                                      batch=tuner_batch)
        except ValueError as exc:
            raise OptimizeError(str(exc)) from None

    loop = _Loop(spec, seed_source, evaluator, record, proposer, planner, budget, rng=rng,
                 review_factor=review_factor, progress=progress, cancel=cancel, log=log)
    loop.bench_shapes = bench_shapes
    loop.replay()
    session_start = time.monotonic()
    stop_reason = ""
    try:
        stop_reason = _drive(loop, model is not None)
    except KeyboardInterrupt:
        stop_reason = "interrupted (Ctrl-C); resume with --resume"
    finally:
        record.set_wall_seconds(loop.meter.seconds_before + time.monotonic() - session_start)
        if own_evaluator and hasattr(evaluator, "close"):
            evaluator.close()
    return _finish(loop, spec, path, stop_reason, proposer_name)


def _cc(target: str) -> int:
    try:
        return int(target.split(":")[1])
    except (IndexError, ValueError):
        return 0


def _device_words(evaluator, target: str) -> str:
    dev = getattr(evaluator, "device_name", None) or getattr(evaluator, "device", None)
    return f"{dev} (target {target})" if dev else f"target {target}"


def _drive(loop: _Loop, is_llm: bool) -> str:
    """The live loop; returns why it stopped."""
    if loop.seed is None:
        seed = Candidate(id=loop.new_id(), source=loop.seed_source, kernel=loop.spec.kernel,
                         proposer="seed")
        loop.report_progress("evaluating the original kernel")
        loop.evaluate_and_record(seed, is_seed=True)
    seed_ev = loop.evals.get(loop.seed.id)
    if seed_ev is not None and not seed_ev.ok:
        raise OptimizeError(f"the original kernel fails its own gate at "
                            f"{seed_ev.failed_stage}: fix it first\n{seed_ev.feedback()}")
    if seed_ev is not None:
        ghost = seed_ev.stage("ghost")
        if ghost is not None and not ghost.ok:
            loop.notes.append("the original kernel passes correctness even as a no-op: the "
                              "bench spec cannot tell a real kernel from a cheat")
    if not loop.timed:
        loop.notes.append("no timing on this machine: candidates are gated but not ranked")
        if hasattr(loop.proposer, "timing"):
            loop.proposer.timing = False  # the tuner must not pretend to rank
    api_failures = 0
    while True:
        if loop.cancel.is_set():
            return "cancelled"
        reason = loop.meter.exhausted()
        if reason:
            return reason
        member = loop.population.select_parent(loop.rng)
        parent = member.candidate if member else loop.seed
        strategy = loop.planner.choose() if loop.planner is not None else None
        pev = loop.evals.get(parent.id)
        req = Request(parent=parent, parent_score=loop.scores.get(parent.id),
                      parent_feedback=pev.feedback() if pev else "", new_id=loop.new_id,
                      last_feedback=loop.last_feedback, last_id=loop.last_id,
                      strategy=strategy, history=list(loop.history),
                      best_score=loop.best_score,
                      max_candidates=loop.meter.remaining_candidates() or 1_000_000,
                      cancel=loop.cancel)
        loop.report_progress(f"proposing ({getattr(strategy, 'name', None) or 'tuner'})")
        prop = loop.proposer.propose(req)
        if prop.calls:
            loop.record.add_llm_call({
                "model": getattr(loop.proposer, "model", None), "calls": prop.calls,
                "prompt_tokens": prop.prompt_tokens, "completion_tokens": prop.completion_tokens,
                "tokens": prop.tokens, "dollars": prop.dollars, "priced": prop.priced,
                "seconds": round(prop.seconds, 3), "error": prop.error,
                "strategy": getattr(strategy, "name", None)})
            loop.meter.charge(tokens=prop.tokens, dollars=prop.dollars)
            if not prop.priced and "price" not in " ".join(loop.notes):
                loop.notes.append("litellm has no price for this model: dollars are counted "
                                  "as 0 (pass input/output cost per token to price it)")
        if prop.note and prop.note not in loop.notes:
            loop.notes.append(prop.note)
        if prop.unparsed is not None:
            loop.record_unparsed(prop, parent, strategy)
            api_failures = 0
            continue
        if prop.done and not prop.candidates:
            return prop.note or prop.error or "the proposer has nothing more to try"
        if prop.error and not prop.candidates:
            if loop.cancel.is_set():
                return "cancelled"
            api_failures += 1
            if api_failures >= 3 or not is_llm:
                return f"stopped after repeated proposer errors: {prop.error}"
            continue
        api_failures = 0
        # evaluated before (possibly in an earlier session): never twice
        fresh = [c for c in prop.candidates if c.digest not in loop.record.digests()]
        # issue 8: an evaluator with `slots` gates that many at once, results in finishing order
        stream = gate_stream(loop.timed_gate, fresh, cancel=loop.cancel,
                             slots=getattr(loop.evaluator, "slots", 1))
        try:
            while True:
                if loop.cancel.is_set():
                    return "cancelled"
                reason = loop.meter.exhausted(spending=False)
                if reason:
                    return reason
                done = next(stream, None)
                if done is None:
                    break
                loop.evaluate_and_record(done[0], gated=done[1])
        finally:
            stream.close()


def _finish(loop: _Loop, spec, path: Path, stop_reason: str, proposer_name: str) -> OptimizeResult:
    from .report import write_report
    from .tuner import bake_launch

    record = loop.record
    best_id = loop.best_id if loop.timed else (loop.untimed_pick or
                                               (loop.seed.id if loop.seed else None))
    best_source = loop.seed_source
    if best_id is not None:
        try:
            best_source = record.source(best_id)
        except OSError:
            pass
        entry = next((e for e in record.entries if e.id == best_id), None)
        launch = (entry.data.get("launch") if entry else None) or {}
        if launch:
            best_source = bake_launch(best_source, spec.launcher, launch)
    diff = unified_diff(loop.seed_source, best_source, path.name)
    if diff:
        record.write_file("best.py", best_source)
        record.write_file("best.diff", diff)
    if loop.planner is not None:
        record.write_file("bandit.json", json.dumps(loop.planner.table(), indent=2))
    result = {"best_id": best_id, "seed_score": loop.seed_score,
              "best_score": loop.best_score if loop.timed else None,
              "stop_reason": stop_reason, "device": loop.device, "proposer": proposer_name,
              "timed": loop.timed, "notes": loop.notes, "diff": diff}
    report = write_report(record, result=result,
                          planner_table=loop.planner.table() if loop.planner else None)
    loop.report_progress(f"done: {stop_reason}")
    return OptimizeResult(best_source=best_source, best_eval=loop.evals.get(best_id or ""),
                          report_path=report, diff=diff, best_id=best_id or "",
                          best_score=loop.best_score if loop.timed else None,
                          seed_score=loop.seed_score, timed=loop.timed,
                          stop_reason=stop_reason, run_dir=record.root,
                          accepted=list(loop.accepted), notes=list(loop.notes))

