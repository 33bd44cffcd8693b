"""Evaluation backends (issue 8): the local backend, the Ray backend on a local CPU-only cluster,
the lost-worker retry, secrets on Ray workers, and device-aware scoring.

The Ray tests start one private cluster for the module (2 CPUs, no dashboard) through
``RayEvaluator(address="local")`` and run the real gate on the tiny saxpy kernel of the loop
tests (static analysis, compile for cuda:90, correctness under TRITON_INTERPRET=1). They skip
with a reason when Ray is not installed (``pip install 'kernelsight[ray]'``).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data" / "agent_loop"
PLANTED = {"KS_TEST_API_KEY": "sk-planted-ray-9f3a1c", "KS_TEST_TOKEN": "tok-planted-77d2"}


@pytest.fixture()
def seed_file(tmp_path):
    path = tmp_path / "saxpy.py"
    shutil.copy(DATA / "saxpy.py", path)
    return path


def _spec(path):
    from kernelsight.agent.benchspec import load_spec

    return load_spec(path)


# --- no Ray needed ---------------------------------------------------------------------------


def test_parse_evaluator_names_every_backend_and_rejects_the_rest():
    from kernelsight.agent.backends import EvaluatorSpecError, parse_evaluator

    assert parse_evaluator(None) == ("local", None)
    assert parse_evaluator("local") == ("local", None)
    assert parse_evaluator("ray:local") == ("ray", "local")
    assert parse_evaluator("ray:auto") == ("ray", "auto")
    assert parse_evaluator("ray:10.0.0.5:6379") == ("ray", "10.0.0.5:6379")
    assert parse_evaluator("ray://head:10001") == ("ray", "ray://head:10001")
    for bad in ("slurm", "ray:", "ray://"):
        with pytest.raises(EvaluatorSpecError):
            parse_evaluator(bad)


def test_cli_rejects_an_unknown_evaluator_with_usage_status(seed_file, capsys):
    from kernelsight.cli import main

    assert main(["optimize", f"{seed_file}::saxpy_kernel", "--tuner", "--evaluator", "slurm"]) == 2
    assert "--evaluator 'slurm'" in capsys.readouterr().err


def test_gate_stream_yields_in_finishing_order_and_gates_a_repeated_digest_once():
    from kernelsight.agent.backends import gate_stream
    from kernelsight.agent.records import Candidate

    delays = {"slow": 0.6, "fast": 0.05, "mid": 0.3}
    calls = []

    def gate(c):
        calls.append(c.id)
        time.sleep(delays[c.id])
        return c.id

    cands = [Candidate(id=i, source=i, kernel="k") for i in ("slow", "fast", "mid")]
    cands.append(Candidate(id="slow", source="slow", kernel="k"))  # same digest again
    got = [c.id for c, _ in gate_stream(gate, cands, slots=3)]
    assert got == ["fast", "mid", "slow"]
    assert sorted(calls) == ["fast", "mid", "slow"]
    # one slot: the plain loop, in list order
    assert [c.id for c, _ in gate_stream(gate, cands[:3], slots=1)] == ["slow", "fast", "mid"]


def test_runtime_env_vars_that_look_like_credentials_are_dropped():
    from kernelsight.agent.ray_backend import strip_secret_env_vars

    env, dropped = strip_secret_env_vars({"env_vars": {"OPENAI_API_KEY": "sk-x", "HF_TOKEN": "t",
                                                       "OMP_NUM_THREADS": "4"},
                                          "pip": ["numpy"]})
    assert env == {"env_vars": {"OMP_NUM_THREADS": "4"}, "pip": ["numpy"]}
    assert sorted(dropped) == ["HF_TOKEN", "OPENAI_API_KEY"]


def test_timings_on_another_gpu_model_are_kept_but_not_scored(seed_file, tmp_path):
    from kernelsight.agent.backends import LocalEvaluator
    from kernelsight.agent.records import Evaluation, StageResult

    ev = LocalEvaluator(_spec(seed_file), device="cpu", cache_dir=tmp_path / "c")

    def timed(cid, model, score):
        gpu = {"before": {"name": model, "sm_clock_mhz": 1980}, "after": {"name": model}}
        return Evaluation(candidate_id=cid, score=score, stages=[
            StageResult(stage="correctness", ok=True, data={"gpu": gpu}),
            StageResult(stage="timing", ok=True, summary="geomean 1.2x",
                        data={"score": score, "gpu": gpu})])

    a = ev.settle_device(timed("c1", "NVIDIA H200", 1.2))
    b = ev.settle_device(timed("c2", "NVIDIA H100 80GB HBM3", 1.5))
    c = ev.settle_device(timed("c3", "NVIDIA H200", 1.3))
    assert ev.device_model == "NVIDIA H200"
    assert (a.device, a.score, a.stage("timing").data["comparable"]) == ("NVIDIA H200", 1.2, True)
    assert b.score is None and b.stage("timing").data["comparable"] is False
    assert b.device == "NVIDIA H100 80GB HBM3" and "not scored" in b.stage("timing").summary
    assert c.score == 1.3


def test_local_retry_goes_to_another_gpu_when_there_is_one(seed_file, tmp_path):
    from kernelsight.agent.backends import LocalEvaluator

    ev = LocalEvaluator(_spec(seed_file), device="cpu", cache_dir=tmp_path / "c")
    ev.gpus, ev._free = ["0", "1"], ["0", "1"]  # two GPUs, as CUDA_VISIBLE_DEVICES entries
    assert ev._take_gpu({"gpu:0"}) == "1"
    ev._give_gpu("1")
    ev.gpus, ev._free = ["0"], ["0"]  # one GPU: the retry runs on it again
    assert ev._take_gpu({"gpu:0"}) == "0"


def test_gpu_state_without_a_gpu_is_an_error_not_an_exception():
    from kernelsight.agent.devices import first_visible, gpu_state, same_model

    assert first_visible("") is None and first_visible("-1") is None
    assert first_visible("3,1") == "3" and first_visible("GPU-ab12,1") == "GPU-ab12"
    assert "error" in gpu_state(None)
    assert "error" in gpu_state("0") or gpu_state("0").get("name")  # a real GPU, if any
    assert not same_model(None, None) and same_model("NVIDIA H200", "NVIDIA H200")


@pytest.mark.interpret
def test_local_backend_retries_a_lost_worker_once_and_keeps_the_lost_attempt(seed_file, tmp_path):
    """A worker that vanishes without a verdict (here: the first import of the candidate ends
    the process) is ``lost``; the job runs once more and the final result says so."""
    from kernelsight.agent.backends import LocalEvaluator
    from kernelsight.agent.records import Candidate

    marker = tmp_path / "first-attempt-done"
    src = seed_file.read_text().replace(
        "import torch\n",
        f"import os\nif not os.path.exists({str(marker)!r}):\n"
        f"    open({str(marker)!r}, 'w').close()\n    os._exit(3)\nimport torch\n", 1)
    ev = LocalEvaluator(_spec(seed_file), device="cpu", use_cache=False, cpu_workers=2)
    res = ev.evaluate(Candidate(id="c1", source=src, kernel="saxpy_kernel"), stages=("compile",))
    assert res.ok, res.feedback()
    attempts = res.stages[0].data["attempts"]
    assert [a["status"] for a in attempts] == ["lost"] and attempts[0]["stage"] == "compile"
    # lost twice is the final verdict, with both places named
    src2 = seed_file.read_text().replace("import torch\n", "import os\nos._exit(3)\n", 1)
    res2 = ev.evaluate(Candidate(id="c2", source=src2, kernel="saxpy_kernel"), stages=("compile",))
    assert not res2.ok and res2.stages[-1].status == "lost"
    assert res2.stages[-1].summary.startswith("lost twice (cpu, then cpu)")


# --- through Ray -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    """A private 2-CPU Ray cluster started by the Ray backend itself, from an environment that
    holds planted credentials (they must not reach Ray's workers)."""
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'kernelsight[ray]'")
    if ray.is_initialized():
        pytest.skip("a Ray session is already running in this process")
    from kernelsight.agent.ray_backend import RayEvaluator

    saved = {k: os.environ.get(k) for k in PLANTED}
    os.environ.update(PLANTED)
    d = tmp_path_factory.mktemp("raysrc")
    shutil.copy(DATA / "saxpy.py", d / "saxpy.py")
    try:
        owner = RayEvaluator(_spec(d / "saxpy.py"), address="local", device="cpu",
                             ray_init={"num_cpus": 2}, cache_dir=d / "cache")
        yield ray
        owner.close()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert not ray.is_initialized()


@pytest.fixture(scope="module")
def seed_cache(tmp_path_factory):
    """Evaluation cache shared by the Ray search tests for the seed kernel and its ghost replay
    (the same in every test); the tuner's candidates are never cached."""
    return tmp_path_factory.mktemp("seed-cache")


class Counting:
    """Wraps an evaluator, counts evaluations per (proposer, candidate digest), and takes the
    seed and its ghost replay from ``cached`` when given."""

    def __init__(self, inner, cached=None):
        self.inner = inner
        self.cached = cached
        self.slots = inner.slots
        self.device = inner.device
        self.device_name = inner.device_name
        self.seen: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def evaluate(self, candidate, **kw):
        with self.lock:
            self.seen.append((candidate.proposer, candidate.digest))
        if self.cached is not None and candidate.proposer in ("seed", "ghost"):
            return self.cached.evaluate(candidate, **kw)
        return self.inner.evaluate(candidate, **kw)


def _entries(run_dir):
    return [json.loads(ln) for ln in (run_dir / "candidates.jsonl").read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.interpret
@pytest.mark.timeout(240)
def test_tuner_search_through_ray_records_every_candidate_and_resumes_without_repeats(
        ray_cluster, seed_cache, seed_file, tmp_path):
    from kernelsight.agent.optimize import run_optimize
    from kernelsight.agent.ray_backend import RayEvaluator

    run_dir = tmp_path / "run"
    ev1 = Counting(RayEvaluator(_spec(seed_file), address="local", device="cpu",
                                use_cache=False, cache_dir=tmp_path / "cache"),
                   RayEvaluator(_spec(seed_file), address="local", device="cpu",
                                cache_dir=seed_cache))
    assert ev1.slots == 2 and ev1.device == "cpu"
    r1 = run_optimize(seed_file, tuner=True, budget="candidates=3", run_dir=run_dir,
                      evaluator=ev1, tuner_batch=2)
    first = _entries(run_dir)
    assert [e["status"] for e in first] == ["seed", "accepted", "accepted"], r1.stop_reason
    assert all(e["device"] == "cpu (TRITON_INTERPRET=1)" for e in first)
    assert all(s["status"] in ("ok", "skipped") for e in first for s in e["stages"])

    ev2 = Counting(RayEvaluator(_spec(seed_file), address="local", device="cpu",
                                use_cache=False, cache_dir=tmp_path / "cache"),
                   RayEvaluator(_spec(seed_file), address="local", device="cpu",
                                cache_dir=seed_cache))
    run_optimize(seed_file, tuner=True, budget="candidates=4", run_dir=run_dir, evaluator=ev2,
                 resume=True, tuner_batch=2)
    every = _entries(run_dir)
    assert len(every) == 4 and [e["id"] for e in every[:3]] == [e["id"] for e in first]
    digests = [e["digest"] for e in every]
    assert len(set(digests)) == len(digests), "a candidate was recorded twice"
    # the resumed session evaluated only new candidates: nothing of the first session again
    again = {d for p, d in ev2.seen if p != "ghost"} & {e["digest"] for e in first}
    assert not again
    assert len([1 for p, _ in ev2.seen if p == "tuner"]) == 1
    assert all(e["status"] in ("seed", "accepted") for e in every)


def _ray_worker_of_a_candidate(skip_pid: int) -> int | None:
    """pid of a Ray worker process that is running a candidate's isolated worker right now."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            if "kernelsight.agent.worker" not in cmd:
                continue
            stat = Path(f"/proc/{pid}/stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            parent = Path(f"/proc/{ppid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError, IndexError):
            continue
        if ppid != skip_pid and parent.startswith("ray::"):
            return ppid
    return None


@pytest.mark.slow
@pytest.mark.interpret
@pytest.mark.timeout(240)
def test_ray_worker_killed_mid_candidate_is_lost_retried_and_every_candidate_accounted_for(
        ray_cluster, seed_cache, seed_file, tmp_path):
    from kernelsight.agent.optimize import run_optimize
    from kernelsight.agent.ray_backend import RayEvaluator

    run_dir = tmp_path / "run"
    ev = Counting(RayEvaluator(_spec(seed_file), address="local", device="cpu",
                               use_cache=False, cache_dir=tmp_path / "cache"),
                  RayEvaluator(_spec(seed_file), address="local", device="cpu",
                               cache_dir=seed_cache))
    killed: list[int] = []
    stop = threading.Event()

    def killer():
        # wait for the seed's record, then kill the Ray worker of the next candidate job
        path = run_dir / "candidates.jsonl"
        while not stop.is_set() and not (path.exists() and path.stat().st_size):
            time.sleep(0.1)
        while not stop.is_set() and not killed:
            pid = _ray_worker_of_a_candidate(os.getpid())
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            time.sleep(0.05)

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    try:
        r = run_optimize(seed_file, tuner=True, budget="candidates=3", run_dir=run_dir,
                         evaluator=ev, tuner_batch=2)
    finally:
        stop.set()
        t.join(5)
    assert killed, "no candidate worker was seen running under a Ray worker"
    entries = _entries(run_dir)
    # every candidate the tuner proposed is in the record, with a verdict
    proposed = {c for p, c in ev.seen if p == "tuner"}
    assert {e["digest"] for e in entries if e["proposer"] == "tuner"} == proposed
    assert len(entries) == 3 and r.stop_reason.startswith("candidate limit")
    lost = [(e["id"], s) for e in entries for s in e["stages"] if s["data"].get("attempts")]
    assert len(lost) == 1, [e["stages"] for e in entries]
    attempt = lost[0][1]["data"]["attempts"][0]
    assert attempt["status"] == "lost" and "Ray task failed" in attempt["summary"]
    assert all(e["status"] in ("seed", "accepted") for e in entries)  # the retry passed
    # the killed worker left no candidate process behind (PR_SET_PDEATHSIG)
    time.sleep(0.5)
    assert _ray_worker_of_a_candidate(os.getpid()) is None


@pytest.mark.slow
@pytest.mark.interpret
@pytest.mark.timeout(180)
def test_planted_secrets_reach_neither_ray_workers_nor_candidates(ray_cluster, seed_file,
                                                                  tmp_path):
    from kernelsight.agent.isolation import is_secret_name
    from kernelsight.agent.ray_backend import RayEvaluator
    from kernelsight.agent.records import Candidate

    ray = ray_cluster
    assert os.environ["KS_TEST_API_KEY"] == PLANTED["KS_TEST_API_KEY"]  # the driver keeps them

    @ray.remote(num_cpus=1)
    def worker_env():
        return dict(os.environ)

    wenv = ray.get(worker_env.remote())
    for name, value in PLANTED.items():
        assert name not in wenv and value not in wenv.values()
    # Ray's own cluster token aside, nothing credential-like reaches Ray's workers
    leaked = [k for k in wenv if is_secret_name(k) and not k.startswith("RAY_")]
    assert not leaked, leaked

    # a candidate that fails if it can see anything credential-like in its environment
    src = seed_file.read_text().replace("import torch\n", (
        "import os\nimport fnmatch\n"
        "_seen = [k for k in os.environ if any(fnmatch.fnmatchcase(k.upper(), p) for p in "
        "('*KEY*', '*TOKEN*', '*SECRET*', '*AUTH*'))]\n"
        "if _seen:\n    raise RuntimeError('CANDIDATE SAW ' + ','.join(_seen))\n"
        "import torch\n"), 1)
    ev = RayEvaluator(_spec(seed_file), address="local", device="cpu", use_cache=False,
                      runtime_env={"env_vars": {"KS_TEST_API_KEY": "x", "OMP_NUM_THREADS": "1"}},
                      cache_dir=tmp_path / "cache")
    assert ev.dropped_env == ["KS_TEST_API_KEY"]
    res = ev.evaluate(Candidate(id="c1", source=src, kernel="saxpy_kernel"), stages=("compile",))
    assert res.ok, res.feedback()


@pytest.mark.slow
@pytest.mark.interpret
@pytest.mark.timeout(180)
def test_ray_and_local_give_the_same_verdict_and_ray_enforces_stage_time_limits(
        ray_cluster, seed_file, tmp_path):
    from kernelsight.agent.backends import LocalEvaluator
    from kernelsight.agent.ray_backend import RayEvaluator
    from kernelsight.agent.records import Candidate

    spec = _spec(seed_file)
    opts = dict(device="cpu", use_cache=False, seed=7, cache_dir=tmp_path / "cache")
    cand = Candidate(id="c1", source=seed_file.read_text(), kernel="saxpy_kernel",
                     launch={"BLOCK": 256})
    local = LocalEvaluator(spec, **opts).evaluate(cand, stages=("correctness",))
    remote = RayEvaluator(spec, address="local", **opts).evaluate(cand, stages=("correctness",))

    def verdict(ev):
        c = ev.stage("correctness")
        return ev.ok, c.status, c.summary, [(k.get("shape"), k.get("max_abs_err"))
                                            for k in c.data.get("checks", [])]

    assert local.ok and verdict(local) == verdict(remote)
    # a candidate that hangs is stopped on its node by the stage limit
    hang = seed_file.read_text().replace("    z = torch.empty_like(x)\n",
                                         "    while True:\n        pass\n", 1)
    res = RayEvaluator(spec, address="local", timeouts={"correctness": 6}, **opts).evaluate(
        Candidate(id="c2", source=hang, kernel="saxpy_kernel"), stages=("correctness",))
    last = res.stages[-1]
    assert not res.ok and last.status == "timeout" and "limit of 6 s" in last.summary
