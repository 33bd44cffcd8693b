"""Evaluation backends: where the gate's worker processes run, and how many at once.

Coordination note for the optimization loop (agent/optimize.py, kernelsight/commands/
optimize.py): the loop talks to a backend exactly as to ``agent.evaluate.Evaluator``
(``evaluate(candidate, stages=..., shapes=...) -> Evaluation``, thread-safe). Two small hooks
in the loop use the rest: ``run_optimize(evaluator="local" | "ray://HOST:PORT" | ...)`` builds
one with ``make_evaluator`` (and closes it at the end), and ``gate_stream`` gates a proposal's
candidates ``evaluator.slots`` at a time, handing each back as soon as it is finished. An
evaluator without ``slots`` (a test's fake) is driven one candidate at a time, as before.

Backends (chosen by ``--evaluator`` or the ``KERNELSIGHT_EVALUATOR`` setting):

* ``local`` (``LocalEvaluator``): one isolated worker process per visible GPU at a time, each
  pinned with ``CUDA_VISIBLE_DEVICES`` to its own GPU, for the GPU stages (correctness and
  timing); the CPU stages (static and compile) on a pool of ``os.cpu_count()`` worker
  processes with no GPU visible. Without a GPU everything runs on the CPU pool (correctness
  under ``TRITON_INTERPRET=1``).
* ``ray:local`` / ``ray:auto`` / ``ray:HOST:PORT`` / ``ray://HOST:PORT``
  (``agent.ray_backend.RayEvaluator``): GPU stages as Ray tasks with ``num_gpus=1``, CPU
  stages as CPU tasks; see that module. Ray is imported only when chosen.

Both subclass ``Evaluator`` and replace only where a worker job runs, so a candidate gets the
same stages, limits, cache key and verdict from every backend. Both add, per worker job:

* robustness: a job whose worker or node is lost (status ``lost``) is retried once on another
  GPU or node; the lost attempt stays in the result (``data["attempts"]`` of the group's first
  stage) and a second loss is the final ``lost`` verdict. Stage time limits are the harness's
  (``Evaluator(timeouts=...)``), enforced next to the worker wherever it runs.
* device-aware timing: every GPU job records the GPU's model, UUID and clock state before and
  after (``data["gpu"]`` of each stage, ``agent.devices.gpu_state``); ``Evaluation.device`` is
  the model; the first model that times a candidate becomes the run's model
  (``device_model``, or fixed by the caller) and a timing from any other model keeps its rows
  but gets ``score=None`` and ``data["comparable"]=False``, so speedups are only ranked within
  one model. The reference is timed beside every candidate in the same process on the same
  GPU (``agent/timing.py``), so each device re-times it.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Any, Callable, Iterable, Iterator

from .devices import first_visible, gpu_state, model_of, same_model
from .evaluate import Evaluator
from .isolation import run_worker
from .records import Candidate, Evaluation, StageResult

GPU_STAGES = ("correctness", "timing")
ENV_SETTING = "KERNELSIGHT_EVALUATOR"


class EvaluatorSpecError(ValueError):
    """An ``--evaluator`` value that names no backend."""


def parse_evaluator(text: str | None) -> tuple[str, str | None]:
    """``(kind, address)`` of an ``--evaluator`` value.

    ``local`` -> ("local", None); ``ray:local`` -> ("ray", "local") (start a private Ray
    cluster on this machine); ``ray:auto`` -> ("ray", "auto") (the cluster this machine
    belongs to); ``ray:HOST:PORT`` -> ("ray", "HOST:PORT") (join as a driver: this machine is a
    cluster node); ``ray://HOST:PORT`` -> ("ray", "ray://HOST:PORT") (Ray Client, from
    outside the cluster). None or "" -> ("local", None). Raises ``EvaluatorSpecError``.
    """
    t = (text or "local").strip()
    if t == "local":
        return "local", None
    if t.startswith("ray://"):
        if len(t) <= len("ray://"):
            raise EvaluatorSpecError("--evaluator ray://HOST:PORT needs a host and port")
        return "ray", t
    if t.startswith("ray:"):
        rest = t[4:]
        if not rest:
            raise EvaluatorSpecError("--evaluator ray: needs local, auto or HOST:PORT")
        return "ray", rest
    raise EvaluatorSpecError(f"--evaluator {t!r}: expected local, ray:local, ray:auto, "
                             f"ray:HOST:PORT or ray://HOST:PORT")


def make_evaluator(spec, evaluator: str | None = None, **options) -> Evaluator:
    """The backend named by ``evaluator`` (default: the ``KERNELSIGHT_EVALUATOR`` setting,
    else ``local``) for ``spec``; ``options`` go to ``Evaluator`` (device, target, timeouts,
    use_cache, ...) plus the backend's own (``LocalEvaluator`` / ``RayEvaluator``).
    Raises ``EvaluatorSpecError`` for an unknown name and ``RuntimeError`` when Ray is asked
    for but not installed or not reachable."""
    kind, address = parse_evaluator(evaluator if evaluator else os.environ.get(ENV_SETTING))
    if kind == "local":
        return LocalEvaluator(spec, **options)
    from .ray_backend import RayEvaluator

    return RayEvaluator(spec, address=address, **options)


def gate_stream(gate: Callable[[Candidate], Evaluation], candidates: Iterable[Candidate], *,
                slots: int = 1, cancel: threading.Event | None = None
                ) -> Iterator[tuple[Candidate, Evaluation]]:
    """Gate ``candidates`` ``slots`` at a time; yield ``(candidate, evaluation)`` in the order
    they FINISH, so the caller records and learns from each result at once instead of waiting
    for the slowest one. A candidate whose digest repeats one earlier in the list is gated
    once. With ``slots <= 1`` it is a plain loop in list order. Closing the generator (or
    setting ``cancel``) drops the candidates not yet started; those already running finish
    in the background and are not yielded.
    """
    seen: set[str] = set()
    todo = []
    for c in candidates:
        if c.digest not in seen:
            seen.add(c.digest)
            todo.append(c)
    if slots <= 1 or len(todo) <= 1:
        for c in todo:
            if cancel is not None and cancel.is_set():
                return
            yield c, gate(c)
        return
    pool = ThreadPoolExecutor(max_workers=min(slots, len(todo)), thread_name_prefix="ks-gate")
    pending = {pool.submit(gate, c): c for c in todo}
    try:
        while pending:
            done, _ = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            if cancel is not None and cancel.is_set():
                return
            for fut in done:
                cand = pending.pop(fut)
                yield cand, fut.result()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


# -- shared by both backends -----------------------------------------------------------------


class BackendMixin:
    """Run-wide device bookkeeping and the lost-job retry, shared by both backends.

    Subclasses implement ``_run_once(candidate, stages, seed, heldout, shapes, avoid) ->
    (results, where)`` where ``where`` names the GPU/node the job ran on (a string) and
    ``avoid`` is the set of places a retry should not use.
    """

    slots: int = 1
    device_model: str | None = None

    def _init_backend(self, device_model: str | None) -> None:
        self.device_model = device_model
        self._model_lock = threading.Lock()
        self.places: dict[str, int] = {}  # where -> worker jobs run there (for reports)

    # Evaluator.evaluate runs the gate; this only settles which device model it counts on.
    def evaluate(self, candidate: Candidate, *, stages=None, shapes=None) -> Evaluation:
        from .records import STAGES

        ev = Evaluator.evaluate(self, candidate, stages=STAGES if stages is None else stages,
                                shapes=shapes)
        return self.settle_device(ev)

    def settle_device(self, ev: Evaluation) -> Evaluation:
        """Set ``ev.device`` to the GPU model that ran its GPU stages and apply the
        same-model rule to ``ev.score`` (see the module docstring)."""
        model = None
        for s in ev.stages:
            g = (s.data or {}).get("gpu") if isinstance(s.data, dict) else None
            if g:
                model = model_of(g.get("before")) or model_of(g.get("after")) or model
        if model is None:
            return ev
        ev.device = model
        timing = ev.stage("timing")
        if timing is None or timing.status != "ok" or ev.score is None:
            return ev
        with self._model_lock:
            if self.device_model is None:
                self.device_model = model
            pinned = self.device_model
        comparable = same_model(model, pinned)
        timing.data["comparable"] = comparable
        timing.data["run_device_model"] = pinned
        if not comparable:
            timing.summary = (f"{timing.summary}; timed on {model}, but this run ranks "
                              f"speedups on {pinned} only: not scored")[:300]
            ev.score = None
        return ev

    def _run_group(self, candidate, stages, seed, heldout, shapes) -> list[StageResult]:
        attempts: list[dict[str, Any]] = []
        avoid: set[str] = set()
        for attempt in (1, 2):
            results, where = self._run_once(candidate, stages, seed, heldout, shapes, avoid)
            self.places[where] = self.places.get(where, 0) + 1
            lost = next((r for r in results if r.status == "lost"), None)
            if lost is None or attempt == 2:
                if lost is not None:
                    lost.summary = (f"lost twice ({attempts[0]['where']}, then {where}): "
                                    f"{lost.summary}")[:300]
                if attempts and results:
                    results[0].data = dict(results[0].data or {}, attempts=attempts)
                return results
            attempts.append({"status": "lost", "where": where, "stage": lost.stage,
                             "summary": lost.summary, "time": time.time()})
            avoid.add(where)
        raise AssertionError("unreachable")

    def _run_once(self, candidate, stages, seed, heldout, shapes, avoid):  # pragma: no cover
        raise NotImplementedError

    def close(self) -> None:
        """Release workers and connections (idempotent)."""


def _with_gpu(results: list[StageResult], before: dict, after: dict, host: str) -> None:
    for r in results:
        r.data = dict(r.data or {}, gpu={"before": before, "after": after, "host": host})


# -- local ------------------------------------------------------------------------------------


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as ``CUDA_VISIBLE_DEVICES`` entries: the variable's
    entries when it is set, else every index ``nvidia-smi`` lists; [] without a GPU."""
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    if vis is not None:
        return [v.strip() for v in vis.split(",") if v.strip() and v.strip() != "-1"]
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run([smi, "--query-gpu=index", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    return [ln.strip() for ln in out.stdout.splitlines() if ln.strip().isdigit()]


class LocalEvaluator(BackendMixin, Evaluator):
    """The gate on this machine's GPUs and cores (see the module docstring).

    Args (besides ``Evaluator``'s): ``gpus``: ``CUDA_VISIBLE_DEVICES`` entries to use
    (default ``visible_gpus()``; ignored when the evaluator's device is ``cpu``);
    ``cpu_workers``: size of the CPU pool (default ``os.cpu_count()``); ``device_model``:
    fix the GPU model speedups are ranked on (default: the first that times a candidate).

    ``slots`` (candidates worth keeping in flight) = GPUs + CPU workers with a GPU, so the
    CPU stages of the next candidates overlap the GPU stages of the current ones; CPU workers
    alone without one.
    """

    def __init__(self, spec, *, gpus: list[str] | None = None, cpu_workers: int | None = None,
                 device_model: str | None = None, **options):
        Evaluator.__init__(self, spec, **options)
        self._init_backend(device_model)
        self.cpu_workers = max(1, int(cpu_workers or os.cpu_count() or 1))
        self.gpus = (list(gpus) if gpus is not None else visible_gpus()) \
            if self.device == "cuda" else []
        if self.device == "cuda" and not self.gpus:
            raise RuntimeError("device 'cuda' asked for, but no GPU is visible "
                               "(CUDA_VISIBLE_DEVICES empty, or nvidia-smi lists none)")
        self._cpu = threading.BoundedSemaphore(self.cpu_workers)
        self._free = list(self.gpus)
        self._gpu_cond = threading.Condition()
        self.slots = len(self.gpus) + self.cpu_workers if self.gpus else self.cpu_workers

    def _take_gpu(self, avoid: set[str]) -> str:
        """A free GPU not named in ``avoid`` (``"gpu:<entry>"``); waits for one. When every
        GPU is avoided (one GPU only), any free one will do."""
        with self._gpu_cond:
            while True:
                usable = [g for g in self._free if f"gpu:{g}" not in avoid]
                if not usable and all(f"gpu:{g}" in avoid for g in self.gpus):
                    usable = list(self._free)  # nowhere else to go
                if usable:
                    g = usable[0]
                    self._free.remove(g)
                    return g
                self._gpu_cond.wait()

    def _give_gpu(self, g: str) -> None:
        with self._gpu_cond:
            self._free.append(g)
            self._gpu_cond.notify_all()

    def _run_once(self, candidate, stages, seed, heldout, shapes, avoid):
        gj = self.group_job(candidate, stages, seed, heldout, shapes)
        on_gpu = self.device == "cuda" and any(s in GPU_STAGES for s in stages)
        gpu = None
        if on_gpu:
            gpu = self._take_gpu(avoid)
            gj.env_extra["CUDA_VISIBLE_DEVICES"] = gpu
        else:
            # CPU stages never see a GPU: no stray CUDA context on a GPU that is timing
            gj.env_extra["CUDA_VISIBLE_DEVICES"] = ""
            self._cpu.acquire()
        try:
            before = gpu_state(gpu) if gpu is not None else None
            with tempfile.TemporaryDirectory(prefix="ks-eval-", ignore_cleanup_errors=True) as wd:
                outcome = run_worker(gj.job, limits=self.limits, env=gj.env(),
                                     use_rlimit_as=gj.use_rlimit_as, workdir=wd,
                                     progress=self.progress)
            after = gpu_state(gpu) if gpu is not None else None
        finally:
            if gpu is not None:
                self._give_gpu(gpu)
            else:
                self._cpu.release()
        results = self.fold_outcome(outcome, stages)
        where = f"gpu:{gpu}" if gpu is not None else "cpu"
        if gpu is not None:
            _with_gpu(results, before, after, "localhost")
        return results, where


__all__ = ["EvaluatorSpecError", "LocalEvaluator", "gate_stream", "make_evaluator",
           "parse_evaluator", "visible_gpus", "first_visible"]
