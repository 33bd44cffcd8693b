"""On-disk cache of evaluations, keyed by (candidate, spec, stages, shapes, device, versions).

One JSON file per key under ``<cache_dir>/evals/``; writes go through a temporary file and an
atomic rename, so concurrent evaluators never read half a file. Results that depend on the
moment rather than on the candidate (``timeout``, ``lost``) are not stored.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from .records import Evaluation, StageResult

HARNESS_VERSION = "1"  # bump when a stage's rules change, so old verdicts are not reused
UNCACHED_STATUSES = ("timeout", "lost")


def default_cache_dir() -> Path:
    """``$KERNELSIGHT_CACHE_DIR``, else ``$XDG_CACHE_HOME/kernelsight``, else ``~/.cache/kernelsight``."""
    env = os.environ.get("KERNELSIGHT_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kernelsight"


def make_key(parts: dict[str, Any]) -> str:
    """sha256 of the parts as canonical JSON (sorted keys)."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()


class EvalCache:
    """Evaluations stored as JSON files, one per key."""

    def __init__(self, root: str | Path):
        self.root = Path(root) / "evals"

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str, candidate_id: str) -> Evaluation | None:
        """The stored evaluation under ``key`` with its id replaced by ``candidate_id``, or None
        (also for an unreadable file, which is then ignored)."""
        path = self._path(key)
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        try:
            stages = [StageResult(**s) for s in data["stages"]]
            return Evaluation(candidate_id=candidate_id, stages=stages, score=data.get("score"),
                              device=data.get("device"), flagged=data.get("flagged"))
        except (KeyError, TypeError):
            return None

    def put(self, key: str, evaluation: Evaluation) -> bool:
        """Store ``evaluation``; returns False (storing nothing) for timeout/lost results."""
        if any(s.status in UNCACHED_STATUSES for s in evaluation.stages):
            return False
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(evaluation.to_dict(), f, default=str)
            os.replace(tmp, path)
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return False
        return True
