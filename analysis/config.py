"""Analysis settings: which codes run, their severities, size limits and solver budgets.

One dataclass shared by the CLI (``[tool.kernelsight]`` in pyproject.toml plus flags), the
server (``workspace/configuration`` under ``kernelsight``, ``initializationOptions``) and the
agent. Keys are accepted in kebab-case or camelCase (``max-elements`` / ``maxElements``).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from .model import Severity

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib


class ConfigError(ValueError):
    """A setting has the wrong type or an unknown value; the message names the key."""


@dataclass(frozen=True)
class Config:
    """Settings of one analysis run.

    Attributes:
        select: code prefixes to report (``["KS"]`` = all; ``["KS1", "KS203"]``).
        ignore: code prefixes never reported (wins over ``select``).
        severity: per-code severity overrides, e.g. ``{"KS402": Severity.ERROR}``.
        max_elements: the largest tensor, in elements, assumed for int32 overflow checks when
            no ``assume`` bounds the sizes (default 2^34: 16 Gi elements, e.g. 32 GiB of fp16,
            within an 80-141 GB GPU).
        max_size: the largest value assumed for any size argument (default 2^31 - 1).
        solver_timeout_ms: z3 limit per query, in milliseconds, enforced as z3 resource
            units (10,000 per ms, calibrated on the 2-core CI machine) so answers repeat at
            any load; past it the obligation is "not proved" (information), never an error.
        kernel_budget_ms: CPU-time budget per kernel (time of the analysing thread, z3
            included), in milliseconds, for the front end and rules and again for the
            engine (then KS911). CPU time, so results do not depend on the machine's load.
        max_unroll: most iterations of ``tl.static_range`` unrolled before summarising.
        max_inline_depth: deepest chain of helper jit functions inlined.
        target: triton compile target for the agent's compile tier, ``"cuda:90"``.
        fast_only: run only the fast tier (front end, KS5xx, KS9xx), as while typing.
    """

    select: tuple[str, ...] = ("KS",)
    ignore: tuple[str, ...] = ()
    severity: dict[str, Severity] = field(default_factory=dict)
    max_elements: int = 2 ** 34
    max_size: int = 2 ** 31 - 1
    solver_timeout_ms: int = 200
    kernel_budget_ms: int = 2000
    max_unroll: int = 64
    max_inline_depth: int = 8
    target: str = "cuda:90"
    fast_only: bool = False

    def enabled(self, code: str) -> bool:
        """True when ``code`` is selected and not ignored (longest matching prefix wins)."""
        sel = max((len(p) for p in self.select if code.startswith(p)), default=-1)
        ign = max((len(p) for p in self.ignore if code.startswith(p)), default=-1)
        return sel >= 0 and sel > ign

    def severity_of(self, code: str, default: Severity) -> Severity:
        return self.severity.get(code, default)

    def key(self) -> tuple:
        """A hashable key of every setting, for caches keyed by (kernel text, settings)."""
        return tuple((f.name, repr(getattr(self, f.name))) for f in fields(self))

    def merged(self, overrides: dict[str, Any], where: str = "settings") -> "Config":
        """Return a copy with ``overrides`` applied (kebab/camel/snake keys).

        Raises:
            ConfigError: unknown key or a value of the wrong type, naming ``where`` and the key.
        """
        changes: dict[str, Any] = {}
        names = {f.name: f for f in fields(self)}
        for raw_key, value in (overrides or {}).items():
            key = _normalise_key(raw_key)
            if key not in names:
                # Settings of other layers (agent model, budgets) share the section.
                continue
            changes[key] = _coerce(key, value, getattr(self, key), where)
        return replace(self, **changes)


def _normalise_key(key: str) -> str:
    out = []
    for ch in key.replace("-", "_"):
        if ch.isupper():
            out.append("_" + ch.lower())
        else:
            out.append(ch)
    return "".join(out).lstrip("_")


def _coerce(key: str, value: Any, current: Any, where: str) -> Any:
    if key == "severity":
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: 'severity' must be a table of CODE = level")
        try:
            levels = {str(k): Severity.parse(str(v)) for k, v in value.items()}
        except ValueError as exc:
            raise ConfigError(f"{where}: severity: {exc}") from None
        from .codes import CODES

        unknown = [k for k in levels if k not in CODES]
        if unknown:
            raise ConfigError(f"{where}: severity: unknown diagnostic code "
                              f"{', '.join(unknown)} (see docs/codes/README.md)")
        return levels
    if isinstance(current, tuple):
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            got = " (got a string: write it as a list, e.g. [\"KS110\"])" \
                if isinstance(value, str) else ""
            raise ConfigError(f"{where}: {key!r} must be a list of code prefixes{got}")
        prefixes = tuple(v.strip().upper() for v in value)
        _check_prefixes(key, prefixes, where)
        return prefixes
    if isinstance(current, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: {key!r} must be true or false")
        return value
    if isinstance(current, int):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"{where}: {key!r} must be a non-negative integer")
        return value
    if isinstance(current, str):
        if not isinstance(value, str):
            raise ConfigError(f"{where}: {key!r} must be a string")
        return value
    return value


def _check_prefixes(key: str, prefixes: tuple[str, ...], where: str) -> None:
    """ConfigError unless every entry is ``KS`` plus up to 3 digits and starts some code: a
    typo such as ``KS11O`` would otherwise silently select or ignore nothing."""
    import re

    from .codes import CODES

    bad = [p for p in prefixes if not re.fullmatch(r"KS\d{0,3}", p)]
    if bad:
        raise ConfigError(f"{where}: {key!r}: not a code prefix: {', '.join(bad)} "
                          "(expected e.g. KS, KS1, KS203)")
    unknown = [p for p in prefixes if not any(c.startswith(p) for c in CODES)]
    if unknown:
        raise ConfigError(f"{where}: {key!r}: no diagnostic code starts with "
                          f"{', '.join(unknown)} (see docs/codes/README.md)")


# Keys of [tool.kernelsight] read by other parts of the product: the language server's own
# settings (server/settings.py ``_SERVER_KEYS``, and the ``agent`` table it flattens into
# ``agent_model`` / ``agent_budget``). tests/test_config.py keeps the two lists in step.
OTHER_LAYER_KEYS = frozenset({
    "docs_url", "inlay_hints", "code_lens", "debounce_ms", "enable", "agent_model",
    "agent_budget", "max_file_chars", "agent"})


def unknown_keys(section: dict) -> list[str]:
    """Keys of a ``[tool.kernelsight]`` table that no part of the product reads, as written."""
    names = {f.name for f in fields(Config)} | OTHER_LAYER_KEYS
    return [k for k in section if _normalise_key(str(k)) not in names]


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above ``start`` (a file or a folder), or None."""
    start = start.resolve()
    for folder in [start if start.is_dir() else start.parent, *start.parents]:
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load_pyproject(path: Path, base: Config | None = None, warn=None) -> Config:
    """Read ``[tool.kernelsight]`` from a pyproject.toml into a Config.

    Args:
        warn: called with one message per key that no part of the product reads (a typo
            such as ``ignroe``); None: such keys are skipped silently.

    Raises:
        ConfigError: the file is not valid TOML, a key has the wrong type, or ``select`` /
            ``ignore`` / ``severity`` name an unknown code (message names the file and key).
    """
    base = base or Config()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    section = data.get("tool", {}).get("kernelsight", {})
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [tool.kernelsight] must be a table")
    if warn is not None:
        for key in unknown_keys(section):
            warn(f"{path} [tool.kernelsight]: unknown key {key!r} (ignored)")
    return base.merged(section, where=f"{path} [tool.kernelsight]")
