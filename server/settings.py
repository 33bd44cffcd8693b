"""Server settings: the analysis ``Config`` plus what only the editor integration needs.

Sources, later ones winning: defaults, ``[tool.kernelsight]`` of the nearest pyproject.toml,
``initializationOptions``, and ``workspace/configuration`` section ``kernelsight``. Keys may be
camelCase, kebab-case or snake_case (``maxElements`` = ``max-elements``).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernelsight.analysis.config import Config

# Keys only the server reads (normalised snake_case) -> (type, default).
_SERVER_KEYS = {
    "docs_url": str,
    "inlay_hints": bool,
    "code_lens": bool,
    "debounce_ms": int,
    "enable": bool,
    "agent_model": str,
    "agent_budget": int,
    "max_file_chars": int,
}


@dataclass(frozen=True)
class Settings:
    """Everything configurable, resolved.

    Attributes:
        config: analysis settings (``select``, ``ignore``, ``severity``, ``maxElements``,
            ``maxSize``, ``solverTimeoutMs``, ``kernelBudgetMs``, ``target``, ...).
        docs_url: link template for a code's docs page, ``{code}`` replaced; empty = the
            repository's docs/codes page when present.
        inlay_hints: show tile shapes as inlay hints (off by default: they are wide).
        code_lens: show the per-kernel lens line.
        debounce_ms: delay of the fast tier after the last keystroke, in milliseconds.
        enable: analyse at all (False publishes nothing).
        agent_model: litellm model name for "Optimize this kernel" (empty: the agent's default).
        agent_budget: candidates the optimizer may evaluate.
        max_file_chars: larger documents are not analysed (the parser's time grows faster
            than linearly on some inputs, and a run cannot be interrupted mid-parse).
    """

    config: Config = field(default_factory=lambda: _config_class()())
    docs_url: str = ""
    inlay_hints: bool = False
    code_lens: bool = True
    debounce_ms: int = 300
    enable: bool = True
    agent_model: str = ""
    agent_budget: int = 16
    max_file_chars: int = 1_000_000

    def key(self) -> tuple:
        """Hashable key of everything that changes analysis results."""
        return self.config.key()

    def merged(self, raw: dict[str, Any] | None, where: str) -> "Settings":
        """Apply one source of settings.

        Raises:
            ConfigError: a key has the wrong type; the message names ``where`` and the key.
        """
        if not raw:
            return self
        if not isinstance(raw, dict):
            raise _config_error(f"{where}: settings must be an object, got {type(raw).__name__}")
        flat = dict(raw)
        agent = flat.pop("agent", None)
        if isinstance(agent, dict):
            for k, v in agent.items():
                flat["agent_" + _snake(k)] = v
        changes: dict[str, Any] = {}
        analysis: dict[str, Any] = {}
        for key, value in flat.items():
            name = _snake(key)
            if name in _SERVER_KEYS:
                changes[name] = _check(name, value, _SERVER_KEYS[name], where)
            else:
                analysis[key] = value
        config = self.config.merged(analysis, where=where)
        # The server chooses the tier per run; a stray fastOnly must not disable the engine.
        config = replace(config, fast_only=False)
        return replace(self, config=config, **changes)


def _config_class() -> type:
    # Imported on first use: the analysis package (and tomllib) is not needed to answer
    # `initialize`, and the server's start-up time is an editor's wait.
    from kernelsight.analysis.config import Config

    return Config


def _config_error(message: str) -> Exception:
    from kernelsight.analysis.config import ConfigError

    return ConfigError(message)


def _snake(key: str) -> str:
    out = []
    for ch in str(key).replace("-", "_"):
        out.append("_" + ch.lower() if ch.isupper() else ch)
    return "".join(out).lstrip("_")


def _check(name: str, value: Any, kind: type, where: str) -> Any:
    if kind is bool and not isinstance(value, bool):
        raise _config_error(f"{where}: {name!r} must be true or false")
    if kind is int and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise _config_error(f"{where}: {name!r} must be a non-negative integer")
    if kind is str and not isinstance(value, str):
        raise _config_error(f"{where}: {name!r} must be a string")
    return value
