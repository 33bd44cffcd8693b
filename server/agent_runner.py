"""Child process of the language server's "Optimize this kernel" command.

Reads one JSON job on stdin (``path``, ``source``, ``kernel``, ``model``, ``budget``,
``target``), runs ``kernelsight.agent.optimize.run_optimize`` on the buffer's text and writes
JSON lines on stdout: ``{"event": "progress", "message", "percentage"}`` while it runs, then
one ``{"event": "result", ...}`` or ``{"event": "error", "message"}``. SIGTERM (the server's
cancel) asks the agent to stop after the candidate being evaluated.

Running here keeps torch, triton and litellm out of the server process, and lets the server
end a run it can no longer wait for.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path


def _emit(event: dict) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def _seed_file(path: Path, source: str) -> Path:
    """The buffer's text as a file in a fresh temporary folder, named like the original.

    Never beside the original: a run that is killed must not leave files in the user's tree.
    The original's folder goes on the import path (here and in the agent's workers) so that
    sibling imports still resolve.
    """
    folder = Path(tempfile.mkdtemp(prefix="kernelsight-optimize-"))
    seed = folder / path.name
    seed.write_text(source, encoding="utf-8")
    parent = str(path.parent)
    sys.path.insert(0, parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (parent, os.environ.get("PYTHONPATH", "")) if p)
    return seed


def summary_line(result) -> str:
    """One sentence for the Apply/Discard prompt; claims no speedup that was not timed."""
    if result.timed and result.best_score is not None:
        seed = f" (original {result.seed_score:.2f}x)" if result.seed_score else ""
        return f"best candidate {result.best_id}: {result.best_score:.2f}x the reference{seed}"
    if not result.timed:
        return ("no GPU here, so nothing was timed; candidates were only checked for "
                "correctness")
    return f"no candidate beat the original ({result.stop_reason})"


def main() -> int:
    job = json.loads(sys.stdin.read() or "{}")
    cancel = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: cancel.set())
    try:
        from kernelsight.agent.optimize import OptimizeError, default_run_dir, run_optimize
    except ImportError as exc:
        _emit({"event": "error", "message": f"the optimizer is not available: {exc}"})
        return 1
    original = Path(job["path"])
    seed = _seed_file(original, job["source"])
    try:
        model = job.get("model") or None
        budget = job.get("budget")
        result = run_optimize(
            seed, job.get("kernel"), model=model, tuner=model is None,
            budget=f"candidates={int(budget)}" if budget else None,
            run_dir=default_run_dir(original, job.get("kernel") or "kernel", resume=False),
            target=job.get("target") or "cuda:90", cancel=cancel,
            progress=lambda p: _emit({"event": "progress", "message": p.message,
                                      "percentage": max(0, min(100, int(p.fraction * 100)))}))
    except OptimizeError as exc:
        _emit({"event": "error", "message": str(exc)})
        return 1
    finally:
        shutil.rmtree(seed.parent, ignore_errors=True)
    _emit({"event": "result", "source": result.best_source, "summary": summary_line(result),
           "timed": result.timed, "best_score": result.best_score,
           "stop_reason": result.stop_reason, "report": str(result.report_path),
           "changed": bool(result.diff)})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
