"""The run directory: every candidate's source, diff, feedback and metrics, resumable.

Layout of ``RUN_DIR``::

    run.json            what is being optimised (file, kernel, proposer, budget, seed digest)
    candidates.jsonl    one JSON object per evaluated candidate, appended as soon as it is known
    llm.jsonl           one JSON object per LLM call (tokens, dollars, seconds, error)
    src/<id>.py         the candidate's full source
    src/<id>.diff       unified diff against the seed
    report.md, best_speedup.png, best.py, best.diff   written by ``agent.report``

Each line is written with flush + fsync after its source file, so a crash or Ctrl-C loses at
most the candidate being evaluated; a torn last line is dropped when the run is reopened.
Everything written passes through ``redact``: a known secret (the API key) is replaced by
``***`` even if a candidate or a provider error echoed it.
"""
from __future__ import annotations

import difflib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from .records import Candidate, Evaluation

RUN_FORMAT = 1


class RunDirError(RuntimeError):
    """The run directory cannot be used (belongs to another kernel, unreadable, ...)."""


def unified_diff(before: str, after: str, name: str = "kernel.py") -> str:
    """A unified diff of two sources ("" when they are equal)."""
    return "".join(difflib.unified_diff(before.splitlines(keepends=True),
                                        after.splitlines(keepends=True),
                                        fromfile=f"a/{name}", tofile=f"b/{name}"))


@dataclass
class Entry:
    """One line of candidates.jsonl, as read back."""

    data: dict[str, Any]

    @property
    def id(self) -> str:
        return self.data["id"]

    @property
    def digest(self) -> str | None:
        return self.data.get("digest")

    @property
    def score(self) -> float | None:
        return self.data.get("score")

    @property
    def status(self) -> str:
        return self.data.get("status", "")


@dataclass
class RunRecord:
    """Append-only record of one optimization run (see the module docstring for the layout)."""

    root: Path
    secrets: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    entries: list[Entry] = field(default_factory=list)
    llm_calls: list[dict[str, Any]] = field(default_factory=list)

    # -- opening ---------------------------------------------------------------------------
    @classmethod
    def open(cls, root: str | os.PathLike, meta: dict[str, Any], *, resume: bool,
             secrets: Iterable[str] = ()) -> "RunRecord":
        """Create ``root`` or, with ``resume``, reopen it.

        Args:
            meta: ``file``, ``kernel``, ``proposer`` ... of this run; on resume ``file`` and
                ``kernel`` must match the recorded ones.
            resume: reopen an existing run; without it a directory that already holds
                candidates is refused, so two runs never interleave in one record.
        Raises:
            RunDirError: the directory belongs to another kernel, or holds a run and
                ``resume`` is False, or its run.json is unreadable.
        """
        root = Path(root)
        rec = cls(root=root, secrets=[s for s in secrets if s and len(s) >= 4])
        run_json = root / "run.json"
        if run_json.exists():
            try:
                old = json.loads(run_json.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise RunDirError(f"{run_json}: unreadable run description ({exc})") from None
            if not resume:
                raise RunDirError(f"{root} already holds a run of {old.get('file')}::"
                                  f"{old.get('kernel')}; pass --resume to continue it or "
                                  f"choose another --run-dir")
            for key in ("file", "kernel"):
                if str(old.get(key)) != str(meta.get(key)):
                    raise RunDirError(f"{root} holds a run of {old.get('file')}::"
                                      f"{old.get('kernel')}, not {meta.get('file')}::"
                                      f"{meta.get('kernel')}")
            rec.meta = old
            rec.meta.setdefault("sessions", []).append(time.time())
            rec.entries = [Entry(d) for d in rec._read_jsonl(root / "candidates.jsonl")]
            rec.llm_calls = rec._read_jsonl(root / "llm.jsonl")
        else:
            (root / "src").mkdir(parents=True, exist_ok=True)
            rec.meta = dict(meta, format=RUN_FORMAT, created=time.time(), sessions=[time.time()])
        (root / "src").mkdir(parents=True, exist_ok=True)
        rec._write_text(run_json, json.dumps(rec.meta, indent=2, sort_keys=True, default=str))
        return rec

    @staticmethod
    def _read_jsonl(path: Path) -> list[dict[str, Any]]:
        if not path.exists():
            return []
        good: list[dict[str, Any]] = []
        raw = path.read_bytes()
        keep = 0
        for line in raw.splitlines(keepends=True):
            try:
                good.append(json.loads(line))
            except ValueError:
                break  # a torn line from a crash: it and anything after it is dropped
            keep += len(line)
        if keep != len(raw):
            with open(path, "r+b") as fh:
                fh.truncate(keep)
        return good

    # -- writing ---------------------------------------------------------------------------
    def redact(self, text: str) -> str:
        for s in self.secrets:
            text = text.replace(s, "***")
        return text

    def _write_text(self, path: Path, text: str) -> None:
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(self.redact(text), encoding="utf-8")
        os.replace(tmp, path)

    def _append(self, path: Path, obj: dict[str, Any]) -> None:
        line = self.redact(json.dumps(obj, sort_keys=True, default=str)) + "\n"
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())

    def add_llm_call(self, info: dict[str, Any]) -> None:
        """Record one LLM call (tokens, dollars, seconds, model, error) before it is used."""
        info = dict(info, time=time.time())
        self.llm_calls.append(info)
        self._append(self.root / "llm.jsonl", info)

    def add(self, candidate: Candidate, evaluation: Evaluation | None, *, seed_source: str,
            status: str, extra: dict[str, Any] | None = None) -> Entry:
        """Write the candidate's source and diff, then append its line; returns the entry.

        ``status`` is ``seed``, ``accepted``, ``rejected``, ``flagged`` or ``unparsed``.
        """
        src_dir = self.root / "src"
        self._write_text(src_dir / f"{candidate.id}.py", candidate.source)
        diff = unified_diff(seed_source, candidate.source, Path(str(self.meta.get("file",
                                                                                  "kernel.py"))).name)
        self._write_text(src_dir / f"{candidate.id}.diff", diff)
        data: dict[str, Any] = {
            "id": candidate.id, "parent": candidate.parent, "proposer": candidate.proposer,
            "strategy": candidate.strategy, "launch": candidate.launch,
            "digest": candidate.digest, "status": status, "time": time.time(),
            "diff_lines": sum(1 for ln in diff.splitlines()
                              if ln[:1] in "+-" and not ln.startswith(("+++", "---"))),
        }
        if evaluation is not None:
            data.update(score=evaluation.score, flagged=evaluation.flagged,
                        device=evaluation.device, failed_stage=evaluation.failed_stage,
                        feedback=evaluation.feedback(),
                        stages=[_stage_dict(s) for s in evaluation.stages])
        data.update(extra or {})
        entry = Entry(json.loads(self.redact(json.dumps(data, default=str))))
        self._append(self.root / "candidates.jsonl", data)
        self.entries.append(entry)
        return entry

    def write_file(self, name: str, text: str) -> Path:
        path = self.root / name
        self._write_text(path, text)
        return path

    # -- reading ---------------------------------------------------------------------------
    def digests(self) -> set[str]:
        return {e.digest for e in self.entries if e.digest}

    def source(self, cid: str) -> str:
        return (self.root / "src" / f"{cid}.py").read_text(encoding="utf-8")

    def totals(self) -> dict[str, float]:
        """Tokens, dollars and LLM seconds over every recorded call."""
        return {
            "tokens": sum(int(c.get("tokens", 0) or 0) for c in self.llm_calls),
            "prompt_tokens": sum(int(c.get("prompt_tokens", 0) or 0) for c in self.llm_calls),
            "completion_tokens": sum(int(c.get("completion_tokens", 0) or 0)
                                     for c in self.llm_calls),
            "dollars": sum(float(c.get("dollars", 0.0) or 0.0) for c in self.llm_calls),
            "llm_calls": len(self.llm_calls),
        }

    def wall_seconds(self) -> float:
        return float(self.meta.get("wall_seconds", 0.0))

    def set_wall_seconds(self, seconds: float) -> None:
        self.meta["wall_seconds"] = seconds
        self._write_text(self.root / "run.json",
                         json.dumps(self.meta, indent=2, sort_keys=True, default=str))

    def next_id(self) -> str:
        return f"c{len(self.entries):04d}"


def _stage_dict(stage) -> dict[str, Any]:
    return {"stage": stage.stage, "ok": stage.ok, "status": stage.status,
            "seconds": round(float(stage.seconds or 0.0), 4), "summary": stage.summary,
            "feedback": stage.feedback, "data": stage.data}
