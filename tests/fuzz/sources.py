"""Where the fuzzers' seed documents come from: the repository's examples, the shared bug
cases, and (when downloaded) the real-kernel corpus. Nothing from the corpus is copied into the
repository; tests skip the corpus parts when it is absent."""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED_CASES = Path(__file__).resolve().parent.parent / "data" / "cases"


def corpus_dir() -> Path | None:
    """The downloaded corpus (``KERNELSIGHT_CORPUS`` or ``~/.cache/kernelsight-corpus``), or
    None when it has not been fetched."""
    env = os.environ.get("KERNELSIGHT_CORPUS")
    if env:
        p = Path(env)
    else:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
        p = Path(cache) / "kernelsight-corpus"
    return p if p.is_dir() else None


def _read(p: Path) -> str:
    return p.read_bytes().decode("utf-8", errors="replace")


@lru_cache(maxsize=1)
def local_seeds() -> tuple[tuple[str, str], ...]:
    """(name, text) of every example kernel, bug example and shared case."""
    files = sorted((ROOT / "examples").rglob("*.py"))
    if SHARED_CASES.is_dir():
        files += sorted(SHARED_CASES.glob("*.py"))
    return tuple((str(p), _read(p)) for p in files)


@lru_cache(maxsize=1)
def corpus_files() -> tuple[Path, ...]:
    """Corpus files that mention ``triton`` (sorted, so a seed picks the same file again)."""
    d = corpus_dir()
    if d is None:
        return ()
    out = []
    for p in sorted(d.rglob("*.py")):
        try:
            if b"triton" in p.read_bytes():
                out.append(p)
        except OSError:
            continue
    return tuple(out)


@lru_cache(maxsize=1)
def corpus_seeds(max_chars: int = 12_000) -> tuple[tuple[str, str], ...]:
    """(name, text) of corpus files up to ``max_chars`` characters (bigger files hold many
    kernels and cost seconds per analysis; their kernels are still reached through
    ``kernel_chunks``)."""
    out = []
    for p in corpus_files():
        text = _read(p)
        if len(text) <= max_chars:
            out.append((str(p), text))
        else:
            out.extend((f"{p}#{i}", chunk) for i, chunk in enumerate(kernel_chunks(text)))
    return tuple(out)


def kernel_chunks(text: str, max_chars: int = 12_000) -> list[str]:
    """Split a big file into its import lines plus one top-level ``@triton.jit`` block each
    (decorators, annotations and body), so that each piece is analysable on its own."""
    lines = text.split("\n")
    header = [ln for ln in lines if ln.startswith(("import ", "from "))]
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for ln in lines:
        top = ln[:1] not in ("", " ", "\t", ")", "]", "}")
        if top and (ln.startswith("@") or ln.startswith("#@")):
            if current is None or not current or not (current[-1].startswith(("@", "#@"))):
                current = []
                blocks.append(current)
            current.append(ln)
        elif top and current is not None and not ln.startswith(("def ", "async def ", "#")):
            current = None
        elif current is not None:
            current.append(ln)
    out = []
    for b in blocks:
        body = "\n".join(b)
        if "jit" in body and len(body) <= max_chars:
            out.append("\n".join(header) + "\n\n" + body + "\n")
    return out
