"""The evaluation gate: static -> compile -> correctness -> timing, stopping at the first failure.

API (the contract with the search, issue 6)::

    from kernelsight.agent.benchspec import load_spec
    from kernelsight.agent.evaluate import Evaluator
    from kernelsight.agent.records import Candidate, STAGES

    spec = load_spec("examples/kernels/softmax.py")          # or load_spec(path, "softmax_kernel")
    ev = Evaluator(spec, device="auto", target="cuda:90")    # keyword-only options below
    result = ev.evaluate(Candidate(id="c0001", source=text, kernel=spec.kernel,
                                   launch={"num_warps": 8}),
                         stages=STAGES, shapes=None)
    result.ok, result.failed_stage, result.score, result.feedback()

``Evaluator(spec, *, device="auto", target="cuda:90", timeouts=None, memory_limit=16 GiB,
cache_dir=None, use_cache=True, progress=None, seed=None, baseline=None)``:

* ``device``: ``"auto"`` (CUDA when a GPU is visible, else CPU), ``"cpu"`` or ``"cuda"``. On the
  CPU the correctness stage runs under ``TRITON_INTERPRET=1`` at the spec's small shapes and
  timing is reported with status ``"skipped"`` (ok=True, so ``Evaluation.ok`` means "passed
  everything that could run"; ``score`` stays None).
* ``target``: compile target ``BACKEND:ARCH`` for the compile stage.
* ``timeouts``: stage name -> seconds (defaults: static 60, compile 180, correctness 300,
  timing 600); ``memory_limit``: bytes per worker (address space on CPU, resident set on GPU).
* ``cache_dir``: where evaluations and device peaks are cached (default
  ``cache.default_cache_dir()``); ``use_cache=False`` always re-evaluates.
* ``progress``: callable receiving the worker's events (dicts with ``event`` = ``stage`` /
  ``progress`` / ``result``, plus ``stage``, ``done``, ``total``, ``label``).
* ``seed``: fixes the random inputs (default: fresh per call; the seed used is in each
  correctness result's ``data["seed"]``).
* ``baseline``: ``(path, function)`` timed beside the candidate instead of the spec's
  ``baseline`` (or, without one, its ``reference``).

``evaluate(candidate, *, stages=STAGES, shapes=None) -> Evaluation``: ``stages`` is a subset of
``STAGES`` (run in gate order); ``shapes`` are the timed shapes (default the spec's
``bench_shapes``). Correctness always checks the spec's ``shapes`` plus held-out shapes
(``correctness.heldout_shapes``). ``candidate.launch`` is passed to the launcher as keyword
overrides (constexprs, ``num_warps``, ``num_stages``). ``Evaluation.score`` is the geometric
mean speedup over the reference across the timed shapes, None unless timing ran and passed.

Every stage except the parent's bookkeeping runs in a worker process (``isolation``): static
and compile in one, correctness and timing in another (the interpreter needs its own process
and the compile stage swaps Triton's driver). A crash, hang, out-of-memory or device fault is
the failing stage's ``status`` (``crashed``/``timeout``/``oom``/``lost``), never an exception
here. ``evaluate`` raises only ``ValueError``, for an unknown stage name or a launch override
that is not a number, string, boolean or None.
"""
from __future__ import annotations

import os
import random
import secrets
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .benchspec import BenchSpec
from .cache import HARNESS_VERSION, EvalCache, default_cache_dir, make_key
from .isolation import Limits, clean_env, run_worker
from .records import STAGES, Candidate, Evaluation, StageResult

_GROUPS = (("static", "compile"), ("correctness", "timing"))


def gpu_visible() -> bool:
    """True when an NVIDIA GPU is visible to this process, decided without importing torch:
    ``CUDA_VISIBLE_DEVICES`` not empty/-1 and ``nvidia-smi -L`` listing a GPU (or, without
    nvidia-smi, ``/proc/driver/nvidia/gpus`` non-empty)."""
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    if vis is not None and vis.strip() in ("", "-1"):
        return False
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
            return out.returncode == 0 and "GPU" in out.stdout
        except (OSError, subprocess.TimeoutExpired):
            return False
    try:
        return bool(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return False


def gpu_name() -> str:
    """First GPU's name from nvidia-smi (for cache keys and reports), or ``"cuda"``."""
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20)
            if out.returncode == 0 and out.stdout.strip():
                return out.stdout.strip().splitlines()[0]
        except (OSError, subprocess.TimeoutExpired):
            pass
    return "cuda"


def versions() -> dict[str, str]:
    """Versions that change results: python, torch, triton, the harness (no imports of torch)."""
    from importlib import metadata

    out = {"python": sys.version.split()[0], "harness": HARNESS_VERSION}
    for name in ("torch", "triton"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


class Evaluator:
    """Runs the gate on candidates of one spec. See the module docstring for every option."""

    def __init__(self, spec: BenchSpec, *, device: str = "auto", target: str = "cuda:90",
                 timeouts: dict[str, float] | None = None, memory_limit: int = 16 << 30,
                 cache_dir: str | Path | None = None, use_cache: bool = True,
                 progress: Callable[[dict[str, Any]], None] | None = None,
                 seed: int | None = None,
                 baseline: tuple[str | Path, str] | None = None):
        if device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
        self.spec = spec
        self.device = ("cuda" if gpu_visible() else "cpu") if device == "auto" else device
        self.target = target
        self.limits = Limits(memory_bytes=int(memory_limit))
        if timeouts:
            unknown = set(timeouts) - set(STAGES) - {"startup"}
            if unknown:
                raise ValueError(f"unknown stage(s) in timeouts: {', '.join(sorted(unknown))}")
            self.limits.stage_seconds.update({k: float(v) for k, v in timeouts.items() if k != "startup"})
            if "startup" in timeouts:
                self.limits.startup_seconds = float(timeouts["startup"])
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
        self.cache = EvalCache(self.cache_dir) if use_cache else None
        self.progress = progress
        self.seed = seed
        self.baseline = (str(Path(baseline[0]).resolve()), baseline[1]) if baseline else None
        self.device_name = gpu_name() if self.device == "cuda" else "cpu (TRITON_INTERPRET=1)"
        self._versions = versions()

    def cache_key(self, candidate: Candidate, stages: tuple[str, ...], shapes) -> str:
        """The key under which ``evaluate`` stores this candidate's result."""
        return make_key({
            "candidate": candidate.digest, "kernel": candidate.kernel, "spec": self.spec.digest,
            "stages": list(stages), "shapes": shapes, "device": self.device_name,
            "target": self.target, "versions": self._versions, "seed": self.seed,
            "baseline": self.baseline,
        })

    def evaluate(self, candidate: Candidate, *, stages: tuple[str, ...] = STAGES,
                 shapes: list[dict] | None = None) -> Evaluation:
        """Run the requested stages on ``candidate`` in gate order; see the module docstring."""
        unknown = [s for s in stages if s not in STAGES]
        if unknown:
            raise ValueError(f"unknown stage(s) {', '.join(unknown)}; expected some of {', '.join(STAGES)}")
        bad = {k: v for k, v in candidate.launch.items()
               if not isinstance(v, (int, float, str, bool, type(None)))}
        if bad:
            raise ValueError(f"launch overrides must be numbers, strings, booleans or None: {bad!r}")
        wanted = tuple(s for s in STAGES if s in stages)
        key = self.cache_key(candidate, wanted, shapes)
        if self.cache is not None:
            hit = self.cache.get(key, candidate.id)
            if hit is not None:
                if self.progress:
                    self.progress({"event": "cached", "stage": None})
                return hit
        evaluation = Evaluation(candidate_id=candidate.id, device=self.device_name)
        seed = self.seed if self.seed is not None else secrets.randbelow(2 ** 31)
        rng = random.Random(seed)
        from .correctness import heldout_shapes

        heldout = heldout_shapes(self.spec, rng) if "correctness" in wanted else []
        failed = False
        for group in _GROUPS:
            run_now = [s for s in group if s in wanted]
            if not run_now or failed:
                continue
            if self.device == "cpu" and "timing" in run_now:
                run_now.remove("timing")
            if run_now:
                results = self._run_group(candidate, run_now, seed, heldout, shapes)
                evaluation.stages.extend(results)
                if any(not r.ok for r in results):
                    failed = True
                    continue
            if self.device == "cpu" and "timing" in group and "timing" in wanted:
                evaluation.stages.append(StageResult(
                    stage="timing", ok=True, status="skipped",
                    summary="timing skipped: no GPU on this machine (static, compile and interpreter"
                            " correctness ran)"))
        timing = evaluation.stage("timing")
        if evaluation.ok and timing is not None and timing.status == "ok":
            evaluation.score = timing.data.get("score")
        if self.cache is not None:
            self.cache.put(key, evaluation)
        return evaluation

    # -- one worker -------------------------------------------------------------------------
    # The three methods below are the seam the evaluation backends (agent/backends.py,
    # agent/ray_backend.py) use: they build the same job, run it somewhere else (a pinned GPU,
    # a Ray task on another node) and fold the outcome the same way, so every backend gives
    # the same results as this class.

    def group_job(self, candidate: Candidate, stages: list[str], seed: int,
                  heldout: list[dict], shapes) -> "GroupJob":
        """The worker job for ``stages`` of ``candidate`` (nothing is run)."""
        interpret = self.device == "cpu" and "correctness" in stages
        extra = {"PYTHONUNBUFFERED": "1"}
        if interpret:
            extra["TRITON_INTERPRET"] = "1"
        if self.device == "cpu":
            extra["CUDA_VISIBLE_DEVICES"] = ""
        job = {
            "stages": stages, "spec_path": str(Path(self.spec.path).resolve()),
            "spec_kernel": self.spec.kernel if self.spec.format == "bench" else None,
            "source": candidate.source, "kernel": candidate.kernel, "launch": candidate.launch,
            "device": self.device, "target": self.target, "shapes": self.spec.shapes,
            "heldout": heldout, "bench_shapes": shapes or self.spec.bench_shapes, "seed": seed,
            "cache_dir": str(self.cache_dir),
            "baseline": {"path": self.baseline[0], "function": self.baseline[1]} if self.baseline else None,
        }
        return GroupJob(job=job, env_extra=extra,
                        env_drop=() if interpret else ("TRITON_INTERPRET",),
                        use_rlimit_as=self.device == "cpu")

    def fold_outcome(self, outcome, stages: list[str]) -> list[StageResult]:
        """The StageResults of one worker run (``isolation.WorkerOutcome``): what it reported,
        plus one failing result for the stage it stopped in (crash, timeout, oom, lost)."""
        results = [StageResult(**r) for r in outcome.results]
        done = {r.stage for r in results}
        if outcome.status == "ok":
            missing = [s for s in stages if s not in done]
            if missing and all(r.ok for r in results):
                results.append(StageResult(
                    stage=missing[0], ok=False, status="lost",
                    summary="the worker exited without reporting this stage",
                    feedback="the candidate ended the worker process (sys.exit/os._exit?) before the"
                             " stage finished\n" + _tail_lines(outcome.stderr_tail)))
            return results
        stage = outcome.stage or next((s for s in stages if s not in done), stages[0])
        summary = {
            "timeout": f"timed out: {outcome.detail}",
            "oom": f"out of memory: {outcome.detail}",
            "crashed": f"crashed: {outcome.detail}",
        }.get(outcome.status, f"worker lost: {outcome.detail}")
        feedback = summary + ("\n" + _tail_lines(outcome.stderr_tail) if outcome.stderr_tail.strip() else "")
        results.append(StageResult(stage=stage, ok=False, status=outcome.status, seconds=outcome.seconds,
                                   summary=summary[:300], feedback=feedback,
                                   data={"returncode": outcome.returncode, "peak_rss": outcome.peak_rss}))
        return results

    def _run_group(self, candidate: Candidate, stages: list[str], seed: int,
                   heldout: list[dict], shapes) -> list[StageResult]:
        gj = self.group_job(candidate, stages, seed, heldout, shapes)
        with tempfile.TemporaryDirectory(prefix="ks-eval-", ignore_cleanup_errors=True) as wd:
            outcome = run_worker(gj.job, limits=self.limits, env=gj.env(),
                                 use_rlimit_as=gj.use_rlimit_as, workdir=wd, progress=self.progress)
        return self.fold_outcome(outcome, stages)


@dataclass
class GroupJob:
    """One worker run, before it runs: the job dict (``worker.main``), the variables to add to
    and drop from the cleaned environment, and whether to cap the address space (CPU only)."""

    job: dict[str, Any]
    env_extra: dict[str, str]
    env_drop: tuple[str, ...] = ()
    use_rlimit_as: bool = False

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """``base`` (default ``os.environ``) without secrets, plus ``env_extra``, less ``env_drop``."""
        env = clean_env(base, extra=self.env_extra)
        for name in self.env_drop:
            env.pop(name, None)
        return env


def _tail_lines(text: str, n: int = 25) -> str:
    lines = [l for l in text.strip().splitlines() if "UserWarning" not in l and "warn_once" not in l]
    return "\n".join(lines[-n:])
