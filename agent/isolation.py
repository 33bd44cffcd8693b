"""Run untrusted candidate code in a worker process with limits.

Each call starts a fresh Python process (``python -m kernelsight.agent.worker JOB``) in its own
process group and session, so it has its own CUDA context and can be killed with everything it
spawned. Limits:

* wall time per stage: the worker appends a line to its progress file when a stage starts; the
  parent kills the process group when the current stage runs past its limit (status
  ``timeout``), or when the worker stops altogether past the job's total limit;
* memory: on a CPU-only run ``RLIMIT_AS`` caps the address space (Python raises MemoryError,
  C++ throws bad_alloc: status ``oom``); with CUDA, whose driver reserves far more address space
  than it uses, the parent instead polls the worker's resident set size (``/proc/PID/status``
  ``VmRSS``) and kills it past the limit;
* environment: every variable whose name looks like a credential is removed (``clean_env``).

A signal death becomes ``crashed`` (``SIGSEGV``, ``SIGABRT``, ...), a device fault reported by
CUDA (illegal memory access, misaligned address) also ``crashed``, a killed-for-memory run
``oom``. Nothing raised or done by the worker reaches the caller as an exception.
"""
from __future__ import annotations

import fnmatch
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

# Variables whose names match any of these (case-insensitive) never reach candidate code.
SECRET_PATTERNS = (
    "*KEY*", "*TOKEN*", "*SECRET*", "*PASSWORD*", "*PASSWD*", "*CREDENTIAL*", "*AUTH*",
    "*COOKIE*", "*SESSION*", "*PRIVATE*", "AWS_*", "OPENAI_*", "ANTHROPIC_*", "AZURE_*",
    "GOOGLE_*", "GCP_*", "GEMINI_*", "HF_*", "HUGGING*", "GITHUB_*", "GH_*", "GITLAB_*",
    "COHERE_*", "MISTRAL_*", "GROQ_*", "TOGETHER_*", "DEEPSEEK_*", "REPLICATE_*", "LITELLM_*",
    "WANDB_*", "NETRC", "SSH_*", "GPG_*", "DOCKER_*", "KUBE*", "DATABASE_URL", "*_DSN",
    "NPM_*", "PYPI_*", "TWINE_*", "SLACK_*",
)


def clean_env(env: dict[str, str] | None = None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of ``env`` (default ``os.environ``) without credential-like variables, plus ``extra``.

    The patterns are ``SECRET_PATTERNS``; matching is case-insensitive on the name.
    """
    src = dict(os.environ if env is None else env)
    out = {k: v for k, v in src.items() if not is_secret_name(k)}
    out.update(extra or {})
    return out


def is_secret_name(name: str) -> bool:
    """True when an environment variable name matches one of ``SECRET_PATTERNS``."""
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pat) for pat in SECRET_PATTERNS)


@dataclass
class Limits:
    """Per-run limits.

    Attributes:
        stage_seconds: wall-time limit per stage name, in seconds.
        startup_seconds: allowance for interpreter start and imports before the first stage.
        memory_bytes: address-space cap (CPU) or resident-set cap (CUDA), in bytes; 0 = none.
        poll_seconds: how often the parent checks progress and memory.
    """

    stage_seconds: dict[str, float] = field(default_factory=lambda: {
        "static": 60.0, "compile": 180.0, "correctness": 300.0, "timing": 600.0})
    startup_seconds: float = 60.0
    memory_bytes: int = 16 << 30
    poll_seconds: float = 0.05


@dataclass
class WorkerOutcome:
    """What came back from one worker run.

    Attributes:
        results: the StageResult dicts the worker finished, in order.
        status: ``ok`` (exited 0), ``timeout``, ``crashed``, ``oom`` or ``lost`` (exited non-zero
            with no explanation).
        stage: the stage running when the worker stopped abnormally (None if it finished).
        detail: one line: the signal, the limit hit, or the last error line.
        stderr_tail: the end of the worker's stderr (tracebacks, faulthandler dumps).
        seconds: wall time of the whole run.
        peak_rss: the largest resident set seen, in bytes (0 if not measured).
    """

    results: list[dict[str, Any]]
    status: str
    stage: str | None = None
    detail: str = ""
    stderr_tail: str = ""
    seconds: float = 0.0
    peak_rss: int = 0
    returncode: int | None = None


def _resolve_prctl():
    """libc's prctl, resolved once here: a preexec function must not dlopen after fork."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _resolve_prctl()
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


OOM_MARKERS = ("MemoryError", "std::bad_alloc", "OutOfMemoryError", "CUDA out of memory",
               "out of memory")
DEVICE_FAULT_MARKERS = ("illegal memory access", "misaligned address", "unspecified launch failure",
                        "an illegal instruction", "device-side assert", "CUDA_ERROR_ILLEGAL_ADDRESS")


def run_worker(job: dict[str, Any], *, limits: Limits, env: dict[str, str],
               use_rlimit_as: bool, workdir: str | Path | None = None,
               progress: Callable[[dict[str, Any]], None] | None = None) -> WorkerOutcome:
    """Run ``kernelsight.agent.worker`` on ``job`` and collect its stage results.

    Args:
        job: JSON-serialisable job description (see ``worker.main``); ``stages`` lists the
            stages it will run, in order.
        limits: time and memory limits.
        env: the worker's full environment (already cleaned).
        use_rlimit_as: cap the address space (only without CUDA; see the module docstring).
        workdir: folder for the job, progress and log files; a temporary one when None.
        progress: called in the parent with each progress event the worker emits.

    Returns:
        A WorkerOutcome; never raises for anything the worker does.
    """
    own_tmp = None
    if workdir is None:
        own_tmp = tempfile.TemporaryDirectory(prefix="ks-worker-")
        workdir = own_tmp.name
    wd = Path(workdir)
    wd.mkdir(parents=True, exist_ok=True)
    job_path = wd / "job.json"
    out_path = wd / "results.jsonl"
    err_path = wd / "stderr.log"
    out_path.write_text("")
    job = dict(job, results=str(out_path))
    job_path.write_text(json.dumps(job))
    mem = int(limits.memory_bytes or 0)

    def _preexec():  # runs in the child between fork and exec
        import resource
        if use_rlimit_as and mem > 0:
            resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core files from segfaults
        # If the process that started the worker dies (a Ray worker killed mid-candidate, the
        # CLI killed with SIGKILL), nobody is left to enforce the time limit: die with it.
        if _PRCTL is not None:
            _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)

    cmd = [sys.executable, "-X", "faulthandler", "-m", "kernelsight.agent.worker", str(job_path)]
    started = time.monotonic()
    with open(err_path, "wb") as err:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err, cwd=str(wd),
                                env=env, start_new_session=True, preexec_fn=_preexec,
                                close_fds=True)
        try:
            status, detail, peak = _watch(proc, out_path, job.get("stages", []), limits, mem,
                                          not use_rlimit_as, progress, started)
        except BaseException:
            # Ctrl-C (or any error) while watching: the worker runs in its own session, so
            # nothing else would stop a hanging candidate.
            _kill(proc)
            raise
    results, current = _read_results(out_path)
    stderr_tail = _tail(err_path)
    rc = proc.returncode
    if status == "ok":
        if rc == 0:
            status = "ok"
        else:
            status, detail = _classify_exit(rc, stderr_tail)
    outcome = WorkerOutcome(results=results, status=status, stage=None if status == "ok" else current,
                            detail=detail, stderr_tail=stderr_tail, seconds=time.monotonic() - started,
                            peak_rss=peak, returncode=rc)
    if own_tmp is not None:
        own_tmp.cleanup()
    return outcome


def _watch(proc, out_path: Path, stages: list[str], limits: Limits, mem: int, watch_rss: bool,
           progress, started: float):
    stage_started = started
    stage_name: str | None = None
    budget = limits.startup_seconds
    seen = 0
    peak = 0
    total = limits.startup_seconds + sum(limits.stage_seconds.get(s, 300.0) for s in stages)
    while True:
        rc = proc.poll()
        seen, events = _new_events(out_path, seen)
        for ev in events:
            if ev.get("event") == "stage":
                stage_name = ev.get("stage")
                stage_started = time.monotonic()
                budget = limits.stage_seconds.get(stage_name, 300.0)
            if progress:
                try:
                    progress(ev)
                except Exception:  # a broken progress callback must not kill the run
                    pass
        if rc is not None:
            return "ok", "", peak
        now = time.monotonic()
        rss = _rss(proc.pid)
        peak = max(peak, rss)
        if watch_rss and mem > 0 and rss > mem:
            _kill(proc)
            return "oom", f"resident memory {rss / 2**30:.1f} GiB passed the limit of {mem / 2**30:.1f} GiB", peak
        if now - stage_started > budget or now - started > total:
            _kill(proc)
            what = f"stage {stage_name}" if stage_name else "worker start-up"
            return "timeout", f"{what} ran past its limit of {budget:.0f} s", peak
        time.sleep(limits.poll_seconds)


def _new_events(path: Path, seen: int):
    try:
        with open(path, "rb") as f:
            f.seek(seen)
            data = f.read()
    except OSError:
        return seen, []
    # Only complete lines: the worker may be half-way through writing one.
    cut = data.rfind(b"\n")
    if cut < 0:
        return seen, []
    events = []
    for raw in data[:cut].splitlines():
        try:
            events.append(json.loads(raw))
        except ValueError:
            continue
    return seen + cut + 1, events


def _read_results(path: Path):
    results: list[dict[str, Any]] = []
    current = None
    _, events = _new_events(path, 0)
    for ev in events:
        if ev.get("event") == "stage":
            current = ev.get("stage")
        elif ev.get("event") == "result":
            results.append(ev["result"])
            current = None
    return results, current


def _rss(pid: int) -> int:
    """Resident set of the worker and its children, in bytes (Linux /proc; 0 elsewhere)."""
    total = 0
    for p in [pid] + _children(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
                        break
        except (OSError, ValueError):
            continue
    return total


def _children(pid: int) -> list[int]:
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(x) for x in f.read().split())
    except (OSError, ValueError):
        pass
    return out


def _kill(proc) -> None:
    """Kill the worker's whole process group (it runs in its own session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _classify_exit(rc: int, stderr_tail: str) -> tuple[str, str]:
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        if -rc == signal.SIGKILL:
            return "oom", f"killed by {name} (the kernel's out-of-memory killer, most likely)"
        if any(m in stderr_tail for m in OOM_MARKERS) and -rc == signal.SIGABRT:
            return "oom", f"aborted ({name}) after running out of memory"
        return "crashed", f"killed by {name}"
    last = _last_error_line(stderr_tail)
    if any(m in stderr_tail for m in OOM_MARKERS):
        return "oom", last or f"exit status {rc} after running out of memory"
    if any(m.lower() in stderr_tail.lower() for m in DEVICE_FAULT_MARKERS):
        return "crashed", last or f"device fault, exit status {rc}"
    return "lost", last or f"exit status {rc} with no result"


def _last_error_line(text: str) -> str:
    for line in reversed(text.strip().splitlines()):
        s = line.strip()
        if s and not s.startswith(("File ", "^", "~")):
            return s[:300]
    return ""


def _tail(path: Path, limit: int = 6000) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-limit:].decode("utf-8", errors="replace")
