"""Load the spec file and a candidate's source as modules, inside a worker process only.

Triton's ``@jit`` reads a kernel's source through ``inspect``, so a candidate is written to a
real file first: ``<workdir>/candidate/<original file name>``, which makes tracebacks and
compile errors name the file the user knows. Also here: the allocation poisoning used by the
correctness stage and the launch counter that proves a Triton kernel actually ran.
"""
from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator


def load_module(path: str | Path, name: str) -> ModuleType:
    """Import ``path`` as module ``name`` (registered in ``sys.modules``; its folder goes on
    ``sys.path`` so sibling imports work). Exceptions of the module's top level propagate."""
    p = Path(path).resolve()
    folder = str(p.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(name, p)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {p}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def write_candidate(source: str, workdir: str | Path, filename: str) -> Path:
    """Write a candidate's source where it can be imported; returns the file's path."""
    folder = Path(workdir) / "candidate"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / filename
    path.write_text(source, encoding="utf-8")
    return path


# --- poisoning -------------------------------------------------------------------------------

def poison_value(dtype) -> Any:
    """NaN for floating dtypes; for integers the most negative value (for bool: True), a value a
    kernel's real output rarely takes, so an unwritten element shows as a mismatch."""
    import torch

    if dtype.is_floating_point or dtype.is_complex:
        return float("nan")
    if dtype == torch.bool:
        return True
    return torch.iinfo(dtype).min


@contextlib.contextmanager
def poisoned_allocations() -> Iterator[list]:
    """While active, ``torch.empty``, ``empty_like``, ``empty_strided`` and ``Tensor.new_empty``
    return tensors filled with ``poison_value``: an output element the kernel never writes stays
    NaN instead of inheriting whatever the allocator recycled (often the right answer from an
    earlier run). Yields the list of tensors allocated so."""
    import torch

    made: list = []
    originals = {name: getattr(torch, name) for name in ("empty", "empty_like", "empty_strided")}
    new_empty = torch.Tensor.new_empty

    def wrap(fn):
        def poisoned(*args, **kwargs):
            t = fn(*args, **kwargs)
            if isinstance(t, torch.Tensor) and t.numel() and t.device.type != "meta":
                with torch.no_grad():
                    t.fill_(poison_value(t.dtype))
                made.append(t)
            return t
        return poisoned

    try:
        for name, fn in originals.items():
            setattr(torch, name, wrap(fn))
        torch.Tensor.new_empty = wrap(new_empty)
        yield made
    finally:
        for name, fn in originals.items():
            setattr(torch, name, fn)
        torch.Tensor.new_empty = new_empty


# --- launch counting ---------------------------------------------------------------------------

class LaunchCounter:
    """Counts Triton kernel launches (compiled or interpreted) while installed."""

    def __init__(self) -> None:
        self.count = 0
        self.kernels: list[str] = []
        self._restore: list[tuple[type, Any]] = []

    def __enter__(self) -> "LaunchCounter":
        classes = []
        try:
            from triton.runtime.jit import JITFunction
            classes.append(JITFunction)
        except ImportError:  # pragma: no cover - triton always has it
            pass
        try:
            from triton.runtime.interpreter import InterpretedFunction
            classes.append(InterpretedFunction)
        except ImportError:  # pragma: no cover
            pass
        for cls in classes:
            orig = cls.__dict__.get("run")
            if orig is None:
                continue
            self._restore.append((cls, orig))
            counter = self

            def run(this, *args, __orig=orig, **kwargs):
                if not kwargs.get("warmup", False):
                    counter.count += 1
                    name = getattr(this, "__name__", None) or getattr(getattr(this, "fn", None), "__name__", "?")
                    if name not in counter.kernels:
                        counter.kernels.append(str(name))
                return __orig(this, *args, **kwargs)

            cls.run = run
        return self

    def __exit__(self, *exc) -> None:
        for cls, orig in self._restore:
            cls.run = orig
        self._restore.clear()
