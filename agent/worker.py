"""The worker process: runs gate stages on one candidate and reports each as a JSON line.

Started by ``isolation.run_worker`` as ``python -m kernelsight.agent.worker JOB.json``; never
imported by the caller's process for anything but its helpers. Protocol (one JSON object per
line in the job's ``results`` file, flushed at once so that a crash loses nothing written):

* ``{"event": "stage", "stage": NAME}`` when a stage starts (the parent times stages by it),
* ``{"event": "progress", "stage": NAME, "done": i, "total": n, "label": TEXT}``,
* ``{"event": "result", "result": StageResult as dict}`` when it ends.

The worker stops after the first stage that fails. Job keys: ``stages``, ``spec_path``,
``spec_kernel``, ``source``, ``kernel``, ``launch``, ``device`` (``cpu``/``cuda``),
``target``, ``shapes`` (correctness), ``heldout`` (held-out correctness shapes),
``bench_shapes`` (timed), ``seed``, ``cache_dir``, ``baseline`` (optional ``{"path",
"function"}``), ``results``.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable


class Context:
    """What every stage needs: the job, the spec, the two modules and an event sink."""

    def __init__(self, job: dict[str, Any], workdir: Path, sink):
        from .benchspec import load_spec

        self.job = job
        self.workdir = workdir
        self._sink = sink
        self.spec = load_spec(job["spec_path"], job.get("spec_kernel"))
        self.device = job.get("device", "cpu")
        self.launch = dict(job.get("launch") or {})
        self.seed = int(job.get("seed", 0))
        self.stage = ""
        self._spec_module = None
        self._cand_module = None
        self._cand_path: Path | None = None
        self._kb = None

    # events
    def emit(self, event: dict[str, Any]) -> None:
        self._sink(event)

    def progress(self, done: int, total: int, label: str) -> None:
        self.emit({"event": "progress", "stage": self.stage, "done": done, "total": total, "label": label})

    # modules
    @property
    def candidate_path(self) -> Path:
        if self._cand_path is None:
            from .modload import write_candidate

            self._cand_path = write_candidate(self.job["source"], self.workdir, Path(self.spec.path).name)
        return self._cand_path

    def spec_module(self):
        if self._spec_module is None:
            from .modload import load_module

            self._spec_module = load_module(self.spec.path, "ks_spec_module")
        return self._spec_module

    def candidate_module(self):
        if self._cand_module is None:
            from .modload import load_module

            self._cand_module = load_module(self.candidate_path, "ks_candidate_module")
        return self._cand_module

    def functions(self) -> tuple[Callable, Callable, Callable]:
        """(launcher, reference, make_inputs): the launcher from the candidate, the reference and
        the input maker from the ORIGINAL spec file, so a candidate cannot change what it is
        compared against."""
        if self.spec.format == "kernelbench":
            return self._kernelbench_functions()
        cand = self.candidate_module()
        spec_mod = self.spec_module()
        launcher = getattr(cand, self.spec.launcher, None)
        if not callable(launcher):
            raise LookupError(f"the candidate defines no launcher function {self.spec.launcher!r}")
        return launcher, getattr(spec_mod, self.spec.reference), getattr(spec_mod, self.spec.inputs)

    def _kernelbench_functions(self):
        import torch

        if self._kb is None:
            spec_mod = self.spec_module()
            cand = self.candidate_module()
            if not hasattr(cand, "ModelNew"):
                raise LookupError("the candidate defines no class ModelNew")
            init = list(spec_mod.get_init_inputs())
            torch.manual_seed(self.seed)
            ref = spec_mod.Model(*init)
            torch.manual_seed(self.seed)
            new = cand.ModelNew(*init)
            try:  # same weights where the parameter names agree (KernelBench seeds both alike)
                new.load_state_dict(ref.state_dict(), strict=False)
            except Exception:
                pass
            dev = "cuda" if self.device == "cuda" else "cpu"
            ref = ref.to(dev).eval()
            new = new.to(dev).eval()

            def launcher(*inputs, **_overrides):
                with torch.no_grad():
                    return new(*inputs)

            def reference(*inputs):
                with torch.no_grad():
                    return ref(*inputs)

            def make_inputs(shape, dtype, device, seed):
                torch.manual_seed(seed)
                return tuple(t.to(device) if isinstance(t, torch.Tensor) else t
                             for t in spec_mod.get_inputs())

            self._kb = (launcher, reference, make_inputs)
        return self._kb

    def baseline(self) -> tuple[Callable, str]:
        """(function timed beside the candidate, its name): the job's ``baseline``
        (``{"path", "function"}``), else the spec's ``baseline``, else the reference."""
        job_b = self.job.get("baseline")
        if job_b:
            from .modload import load_module

            mod = load_module(job_b["path"], "ks_baseline_module")
            fn = getattr(mod, job_b["function"], None)
            if not callable(fn):
                raise LookupError(f"{job_b['path']} defines no function {job_b['function']!r}")
            return fn, f"{Path(job_b['path']).name}::{job_b['function']}"
        _launcher, reference, _inputs = self.functions()
        if self.spec.format == "bench" and self.spec.baseline:
            return getattr(self.spec_module(), self.spec.baseline), self.spec.baseline
        return reference, self.spec.reference

    def source_files(self) -> dict[str, str]:
        """Real file path -> the name shown in feedback, for tracebacks."""
        out = {str(self.spec.path.resolve()): f"{self.spec.path.name} (original)"}
        if self._cand_path is not None:
            out[str(self._cand_path.resolve())] = self._cand_path.name
        return out


def format_exception(exc: BaseException, files: dict[str, str], limit: int = 8) -> str:
    """The exception's last line plus the traceback frames that fall in ``files`` (candidate
    or spec), as ``name:LINE in func: source line``; frames of torch/triton are left out."""
    frames = traceback.extract_tb(exc.__traceback__)
    shown = []
    for fr in frames:
        name = files.get(str(Path(fr.filename).resolve())) if fr.filename else None
        if name:
            shown.append(f"  {name}:{fr.lineno} in {fr.name}: {(fr.line or '').strip()}")
    head = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    lines = shown[-limit:]
    return head + ("\n" + "\n".join(lines) if lines else "")


STAGE_MODULES = {
    "static": "static_tier",
    "compile": "compile_tier",
    "correctness": "correctness",
    "timing": "timing",
}


def run_stage(ctx: Context, stage: str):
    """Run one stage, turning any exception into a failed StageResult."""
    import importlib

    from .records import StageResult

    ctx.stage = stage
    t0 = time.perf_counter()
    try:
        module = importlib.import_module(f"{__package__}.{STAGE_MODULES[stage]}")
        result = module.run(ctx)
    except MemoryError:
        result = StageResult(stage=stage, ok=False, status="oom",
                             summary="out of memory (MemoryError)",
                             feedback="the candidate ran out of host memory (address-space limit)")
    except BaseException as exc:  # candidate code may raise anything, SystemExit included
        text = format_exception(exc, ctx.source_files())
        status = "oom" if "out of memory" in text.lower() else "failed"
        if any(m in text.lower() for m in ("illegal memory access", "misaligned address",
                                           "unspecified launch failure")):
            status = "crashed"
        result = StageResult(stage=stage, ok=False, status=status,
                             summary=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}",
                             feedback=text)
    result.seconds = time.perf_counter() - t0
    return result


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    job_path = Path(argv[0])
    job = json.loads(job_path.read_text())
    out = open(job["results"], "a", buffering=1, encoding="utf-8")

    def sink(event: dict[str, Any]) -> None:
        out.write(json.dumps(event, default=str) + "\n")
        out.flush()

    warnings.filterwarnings("ignore")
    os.environ.setdefault("PYTHONHASHSEED", "0")
    try:
        ctx = Context(job, job_path.parent, sink)
    except Exception as exc:  # a spec that no longer loads: report it on the first stage
        from .records import StageResult

        first = (job.get("stages") or ["static"])[0]
        sink({"event": "stage", "stage": first})
        sink({"event": "result", "result": asdict(StageResult(
            stage=first, ok=False, status="failed", summary=f"spec error: {exc}", feedback=str(exc)))})
        return 0
    for stage in job.get("stages", []):
        sink({"event": "stage", "stage": stage})
        result = run_stage(ctx, stage)
        sink({"event": "result", "result": asdict(result)})
        if not result.ok:
            break
    out.close()
    # Skip interpreter teardown: a candidate's broken destructors or CUDA context teardown
    # must not turn a finished run into a crash.
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())
