"""Which optional packages (the ``agent`` extra) are importable, without importing them.

Shared by the CLI's ``bench``/``optimize`` and the language server's commands, so that both
say the same thing when the extra is missing (and neither pays for importing torch to ask).
"""
from __future__ import annotations

import importlib.util

INSTALL_HINT = ("pip install 'kernelsight[agent]' (on a machine without a GPU, first "
                "pip install torch==2.13.0 for the CPU build)")


def available(module: str) -> bool:
    """True when ``module`` can be imported (found on the path); never imports it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing(modules: tuple[str, ...]) -> list[str]:
    """The modules of ``modules`` that are not importable, in order."""
    return [m for m in modules if not available(m)]


def require(command: str, modules: tuple[str, ...]) -> str | None:
    """None when every module is importable, else the sentence to show the user."""
    gone = missing(modules)
    if not gone:
        return None
    return (f"{command} needs the agent extra, which is not installed (missing: "
            f"{', '.join(gone)}). Install it with: {INSTALL_HINT}")
