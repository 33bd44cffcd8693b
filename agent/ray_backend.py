"""The Ray evaluation backend: the gate's worker jobs as Ray tasks on a cluster.

Coordination note for the optimization loop: nothing here is called by the loop directly;
``agent.backends.make_evaluator("ray:...")`` builds a ``RayEvaluator``, which behaves as any
``Evaluator`` (thread-safe ``evaluate``), and the loop's ``gate_stream`` keeps ``slots``
candidates in flight. Ray is imported only when this backend is chosen (it is the optional
``kernelsight[ray]`` extra).

How a job runs: ``Evaluator.evaluate`` splits the gate into two worker jobs (static + compile,
correctness + timing); each becomes one Ray task, ``num_gpus=1`` for the GPU job on a GPU
cluster and ``num_gpus=0`` (CPU) otherwise, with ``max_retries=0`` because retrying is this
module's decision. The task writes the spec file (and baseline file) it was sent into a
temporary folder on its node and runs the same isolated worker process as the local backend
(``isolation.run_worker``: its own session, the stage time limits, the memory limit, an
environment with every credential-like variable removed), so a candidate that crashes, hangs
or eats memory gives the same verdict as on the local backend. Results come back through one
thread that calls ``ray.wait`` on every task in flight and hands each result over as soon as it
is ready, so one slow candidate never holds back the others.

Robustness:

* lost work: a task whose Ray worker process or node dies (``WorkerCrashedError``,
  ``NodeDiedError``, Ray's out-of-memory killer, ...) gives a ``lost`` stage result; the job
  is submitted once more, pinned (softly) to another live node that has the resources when
  there is one, else to a fresh worker process; the lost attempt is kept in the result
  (``data["attempts"]``). Each task announces its node to a small registry actor when it
  starts, which is how a retry knows where not to go. The worker process a task starts dies
  with it (``PR_SET_PDEATHSIG``), so nothing is left running on the node.
* time: the stage limits are enforced on the node; the driver also gives up on a task after
  the sum of its stages' limits plus ``queue_seconds`` (cancelled with force: ``timeout``).
* secrets: the worker's environment is cleaned on the node (``isolation.clean_env``);
  ``runtime_env`` ``env_vars`` with credential-like names are dropped before they are sent;
  a cluster this module starts (``ray:local``) is started from an environment without them,
  so Ray's own worker processes never hold the driver's API keys either.
* devices: the task records the model and clock state of the GPU Ray gave it
  (``agent.devices``); on a cluster with several GPU models the GPU tasks are pinned to one
  Ray ``accelerator_type`` (``accelerator_type=``, default the type with the most GPUs).

Every node needs the same kernelsight version (``pip install 'kernelsight[agent,ray]'``) and
the same torch/triton; the candidate's spec file travels with the task, files it imports do
not.
"""
from __future__ import annotations

import itertools
import os
import shutil
import socket
import tempfile
import threading
import time
import uuid
from concurrent.futures import Future, TimeoutError as FutureTimeout
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .backends import GPU_STAGES, BackendMixin, _with_gpu
from .evaluate import Evaluator
from .isolation import WorkerOutcome, is_secret_name

QUEUE_SECONDS = 600.0  # a task may wait this long for a free GPU before the driver gives up


def import_ray():
    """The ``ray`` module, or RuntimeError with the install command."""
    try:
        import ray
    except ImportError:
        raise RuntimeError("the Ray backend needs Ray: pip install 'kernelsight[ray]'") from None
    return ray


def strip_secret_env_vars(runtime_env: dict[str, Any] | None) -> tuple[dict[str, Any], list[str]]:
    """A copy of a Ray ``runtime_env`` without credential-like ``env_vars`` (the names
    ``isolation.SECRET_PATTERNS`` matches); returns ``(runtime_env, dropped names)``."""
    env = dict(runtime_env or {})
    dropped: list[str] = []
    if "env_vars" in env:
        kept = {}
        for k, v in dict(env["env_vars"] or {}).items():
            if is_secret_name(k):
                dropped.append(k)
            else:
                kept[k] = v
        env["env_vars"] = kept
    return env, dropped


class _SecretsHidden:
    """Remove credential-like variables from ``os.environ`` for the duration of a ``with``
    (Ray's raylet and workers copy the environment of the process that starts them)."""

    def __enter__(self):
        self.saved = {k: v for k, v in os.environ.items() if is_secret_name(k)}
        for k in self.saved:
            os.environ.pop(k, None)
        return self

    def __exit__(self, *exc):
        os.environ.update(self.saved)
        return False


class _Pump:
    """One thread that ``ray.wait``s on every task in flight and resolves a Future for each
    as soon as it is ready (value, or the Ray exception that ended it)."""

    def __init__(self, ray):
        self.ray = ray
        self.lock = threading.Lock()
        self.inflight: dict[Any, Future] = {}
        self.wake = threading.Event()
        self.closed = False
        self.thread = threading.Thread(target=self._loop, name="ks-ray-pump", daemon=True)
        self.thread.start()

    def watch(self, ref) -> Future:
        fut: Future = Future()
        with self.lock:
            self.inflight[ref] = fut
        self.wake.set()
        return fut

    def forget(self, ref) -> None:
        with self.lock:
            self.inflight.pop(ref, None)

    def _loop(self) -> None:
        ray = self.ray
        while not self.closed:
            with self.lock:
                refs = list(self.inflight)
            if not refs:
                self.wake.wait(0.5)
                self.wake.clear()
                continue
            try:
                ready, _ = ray.wait(refs, num_returns=1, timeout=0.2)
            except Exception:  # the connection went away: fail everything in flight
                if self.closed:
                    return
                ready = refs
            for ref in ready:
                with self.lock:
                    fut = self.inflight.pop(ref, None)
                if fut is None:
                    continue
                try:
                    fut.set_result(("ok", ray.get(ref)))
                except Exception as exc:  # Ray errors: the task, its worker or its node died
                    fut.set_result(("error", exc))

    def close(self) -> list[Any]:
        self.closed = True
        self.wake.set()
        with self.lock:
            refs = list(self.inflight)
            self.inflight.clear()
        return refs


def _remote_group(payload: dict[str, Any]) -> dict[str, Any]:
    """Runs ON A RAY WORKER: one isolated worker job; returns the outcome and where it ran."""
    from .cache import default_cache_dir
    from .devices import first_visible, gpu_state
    from .isolation import Limits, clean_env, run_worker

    import ray

    ctx = ray.get_runtime_context()
    node = ctx.get_node_id()
    gpu = first_visible() if payload["gpu"] else None
    where = {"host": socket.gethostname(), "node": node, "pid": os.getpid(), "gpu": gpu}
    registry = payload.get("registry")
    if registry is not None:
        registry.started.remote(payload["token"], where)  # fire and forget
    base = Path(tempfile.mkdtemp(prefix="ks-ray-"))
    try:
        job = dict(payload["job"])
        spec_dir = base / "spec"
        spec_dir.mkdir()
        name, text = payload["spec_file"]
        (spec_dir / name).write_text(text, encoding="utf-8")
        job["spec_path"] = str(spec_dir / name)
        if payload.get("baseline_file"):
            bname, btext = payload["baseline_file"]
            bdir = base / "baseline"
            bdir.mkdir()
            (bdir / bname).write_text(btext, encoding="utf-8")
            job["baseline"] = dict(job["baseline"], path=str(bdir / bname))
        job["cache_dir"] = str(default_cache_dir())  # this node's own cache (device peaks)
        extra = dict(payload["env_extra"])
        if not payload["gpu"]:
            extra["CUDA_VISIBLE_DEVICES"] = ""
        env = clean_env(extra=extra)
        for k in payload["env_drop"]:
            env.pop(k, None)
        before = gpu_state(gpu) if gpu is not None else None
        outcome = run_worker(job, limits=Limits(**payload["limits"]), env=env,
                             use_rlimit_as=payload["use_rlimit_as"], workdir=base / "work")
        after = gpu_state(gpu) if gpu is not None else None
        return {"outcome": asdict(outcome), "where": where, "before": before, "after": after}
    finally:
        shutil.rmtree(base, ignore_errors=True)


class _Registry:
    """Ray actor (0 CPUs): token -> where the task holding it started."""

    def __init__(self):
        self.places: dict[str, dict[str, Any]] = {}

    def started(self, token: str, where: dict[str, Any]) -> None:
        self.places[token] = where

    def get(self, token: str) -> dict[str, Any] | None:
        return self.places.get(token)


class RayEvaluator(BackendMixin, Evaluator):
    """The gate on a Ray cluster (see the module docstring).

    Args (besides ``Evaluator``'s, whose ``device="auto"`` here means "cuda when the cluster
    has GPUs"):
        address: ``"local"`` (start a private cluster on this machine; ``ray_init`` options
            such as ``num_cpus`` apply), ``"auto"``, ``"HOST:PORT"`` or ``"ray://HOST:PORT"``.
        runtime_env: Ray runtime environment for the tasks (credential-like ``env_vars`` are
            dropped).
        accelerator_type: Ray accelerator type the GPU tasks are pinned to (default: the only
            one, or the one with the most GPUs); device_model: GPU model name speedups are
            ranked on (default: the first that times a candidate).
        max_in_flight: candidates kept in flight (default: cluster GPUs + CPUs with GPUs,
            CPUs without).
        queue_seconds: how long a task may wait for a worker before it is given up.
        ray_init: extra keyword arguments for ``ray.init`` (only when this evaluator starts or
            joins the cluster).
    Raises RuntimeError when Ray is not installed or the cluster cannot be reached.
    """

    def __init__(self, spec, *, address: str | None = "local",
                 runtime_env: dict[str, Any] | None = None,
                 accelerator_type: str | None = None, device_model: str | None = None,
                 max_in_flight: int | None = None, queue_seconds: float = QUEUE_SECONDS,
                 ray_init: dict[str, Any] | None = None, **options):
        ray = import_ray()
        self.ray = ray
        self.address = address or "local"
        self.runtime_env, self.dropped_env = strip_secret_env_vars(runtime_env)
        self.owns_ray = False
        self._connect(dict(ray_init or {}))
        resources = ray.cluster_resources()
        gpus = int(resources.get("GPU", 0))
        device = options.pop("device", "auto")
        if device == "auto":
            device = "cuda" if gpus > 0 else "cpu"
        if device == "cuda" and gpus == 0:
            self.close()
            raise RuntimeError(f"device 'cuda' asked for, but the Ray cluster at "
                               f"{self.address} has no GPU")
        Evaluator.__init__(self, spec, device=device, **options)
        self._init_backend(device_model)
        self.queue_seconds = float(queue_seconds)
        self.accelerator_type = accelerator_type or (self._pick_accelerator() if
                                                     device == "cuda" else None)
        if device == "cuda":
            # the cache key's device part: the cluster's GPU type, not this machine's GPU
            self.device_name = f"ray:{self.accelerator_type or 'GPU'}"
        n_cpu = int(resources.get("CPU", 1))
        self.slots = int(max_in_flight) if max_in_flight else (
            gpus + n_cpu if device == "cuda" else max(1, n_cpu))
        self._task = ray.remote(_remote_group)
        self._registry = ray.remote(num_cpus=0)(_Registry).remote()
        self._pump = _Pump(ray)
        self._closed = False
        self._tokens = itertools.count()
        self._spec_file = (Path(self.spec.path).name,
                           Path(self.spec.path).read_text(encoding="utf-8"))
        self._baseline_file = ((Path(self.baseline[0]).name,
                                Path(self.baseline[0]).read_text(encoding="utf-8"))
                               if self.baseline else None)

    # -- connection ------------------------------------------------------------------------
    def _connect(self, init: dict[str, Any]) -> None:
        ray = self.ray
        if ray.is_initialized():
            return  # the caller's session: use it, leave it running
        init.setdefault("include_dashboard", False)
        init.setdefault("log_to_driver", False)
        init.setdefault("namespace", "kernelsight")
        if self.runtime_env:
            init.setdefault("runtime_env", self.runtime_env)
        try:
            if self.address == "local":
                with _SecretsHidden():
                    ray.init(**init)
            else:
                for k in ("num_cpus", "num_gpus", "include_dashboard"):
                    init.pop(k, None)  # resources belong to the cluster, not to a driver
                ray.init(address=self.address, **init)
        except Exception as exc:
            raise RuntimeError(f"cannot start or reach the Ray cluster at {self.address}: "
                               f"{type(exc).__name__}: {exc}") from None
        self.owns_ray = True

    def _pick_accelerator(self) -> str | None:
        per_type: dict[str, int] = {}
        for node in self._alive_nodes():
            res = node.get("Resources", {})
            for key in res:
                if key.startswith("accelerator_type:"):
                    t = key.split(":", 1)[1]
                    per_type[t] = per_type.get(t, 0) + int(res.get("GPU", 0))
        if len(per_type) <= 1:
            return None  # one model (or unknown): no constraint needed
        return max(per_type.items(), key=lambda kv: kv[1])[0]

    def _alive_nodes(self) -> list[dict[str, Any]]:
        try:
            return [n for n in self.ray.nodes() if n.get("Alive")]
        except Exception:
            return []

    # -- one job ---------------------------------------------------------------------------
    def _run_once(self, candidate, stages, seed, heldout, shapes, avoid):
        ray = self.ray
        gj = self.group_job(candidate, stages, seed, heldout, shapes)
        on_gpu = self.device == "cuda" and any(s in GPU_STAGES for s in stages)
        token = f"{uuid.uuid4().hex[:12]}-{next(self._tokens)}"
        payload = {
            "job": gj.job, "env_extra": gj.env_extra, "env_drop": list(gj.env_drop),
            "use_rlimit_as": gj.use_rlimit_as, "limits": asdict(self.limits), "gpu": on_gpu,
            "spec_file": self._spec_file, "baseline_file": self._baseline_file,
            "registry": self._registry, "token": token,
        }
        opts: dict[str, Any] = {"num_cpus": 1, "num_gpus": 1 if on_gpu else 0, "max_retries": 0}
        if self.runtime_env:
            opts["runtime_env"] = self.runtime_env
        if on_gpu and self.accelerator_type:
            opts["resources"] = {f"accelerator_type:{self.accelerator_type}": 0.001}
        other = self._other_node(avoid, on_gpu)
        if other is not None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id=other, soft=True)
        limit = (self.limits.startup_seconds + sum(self.limits.stage_seconds.get(s, 300.0)
                                                   for s in stages) + self.queue_seconds)
        started = time.monotonic()
        ref = self._task.options(**opts).remote(payload)
        fut = self._pump.watch(ref)
        try:
            kind, value = fut.result(timeout=limit)
        except FutureTimeout:
            self._pump.forget(ref)
            self._cancel(ref)
            outcome = WorkerOutcome(results=[], status="timeout",
                                    detail=f"no answer from the Ray task within {limit:.0f} s",
                                    seconds=time.monotonic() - started)
            return self.fold_outcome(outcome, stages), self._where_of(token)
        if kind == "error":
            first = str(value).strip().splitlines()[0] if str(value).strip() else ""
            outcome = WorkerOutcome(results=[], status="lost",
                                    detail=f"Ray task failed: {type(value).__name__}: {first}"[:300],
                                    seconds=time.monotonic() - started)
            return self.fold_outcome(outcome, stages), self._where_of(token)
        outcome = WorkerOutcome(**value["outcome"])
        results = self.fold_outcome(outcome, stages)
        w = value["where"]
        if on_gpu:
            _with_gpu(results, value.get("before"), value.get("after"), w.get("host", "?"))
        return results, _place(w)

    def _other_node(self, avoid: set[str], on_gpu: bool) -> str | None:
        """A live node not in ``avoid`` with the resources the job needs (None: any)."""
        if not avoid:
            return None
        bad = {a.split("/", 1)[0] for a in avoid}
        for node in self._alive_nodes():
            res = node.get("Resources", {})
            if node.get("NodeID") in bad:
                continue
            if on_gpu and res.get("GPU", 0) < 1:
                continue
            if res.get("CPU", 0) < 1:
                continue
            return node.get("NodeID")
        return None

    def _where_of(self, token: str) -> str:
        try:
            w = self.ray.get(self._registry.get.remote(token), timeout=10)
        except Exception:
            w = None
        return _place(w) if w else "unknown/never started"

    def _cancel(self, ref) -> None:
        try:
            self.ray.cancel(ref, force=True)
        except Exception:
            pass

    def close(self) -> None:
        """Cancel the tasks in flight; stop the cluster if this evaluator started it."""
        if getattr(self, "_closed", False):
            return
        self._closed = True
        pump = getattr(self, "_pump", None)
        if pump is not None:
            for ref in pump.close():
                self._cancel(ref)
        reg = getattr(self, "_registry", None)
        if reg is not None:
            try:
                self.ray.kill(reg)
            except Exception:
                pass
            self._registry = None
        if self.owns_ray:
            self.owns_ray = False
            try:
                self.ray.shutdown()
            except Exception:
                pass


def _place(w: dict[str, Any]) -> str:
    """``NODE/host:gpuN`` -- the node id first, which is what a retry avoids."""
    gpu = f":gpu{w['gpu']}" if w.get("gpu") is not None else ""
    return f"{w.get('node', '?')}/{w.get('host', '?')}{gpu}"
