"""The ``kernelsight`` command. Each subcommand lives in ``kernelsight.commands.<name>`` with
``register(subparsers)`` and ``run(args) -> int``; modules are imported only when their
subcommand runs, so ``kernelsight check`` never pays for torch or litellm."""
from __future__ import annotations

import argparse
import importlib
import sys
import warnings

from . import __version__

# name -> one-line help. Order is the order shown by --help.
SUBCOMMANDS = {
    "check": "analyse files or folders and report findings (exit 1 when there are findings)",
    "serve": "run the language server (stdio by default)",
    "bench": "compile, check and time a kernel against its reference",
    "optimize": "search for a faster kernel (LLM or built-in tuner), gated by the invariants",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser. Only ``command``'s module is imported and registered, so a
    subcommand whose optional dependencies are broken cannot break the others."""
    parser = argparse.ArgumentParser(
        prog="kernelsight",
        description="Invariant analysis, language server and optimization loop for Triton kernels.")
    parser.add_argument("--version", action="version", version=f"kernelsight {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in SUBCOMMANDS.items():
        sp = sub.add_parser(name, help=help_text, description=help_text)
        if name == command:
            module = importlib.import_module(f"kernelsight.commands.{name}")
            module.register(sp)
            sp.set_defaults(_module=module)
    return parser


def _command_of(argv: list[str]) -> str | None:
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in SUBCOMMANDS else None
    return None


def main(argv: list[str] | None = None) -> int:
    """Entry point. Returns the exit status: 0 clean, 1 findings/failure, 2 usage or I/O."""
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(_command_of(argv))
    args = parser.parse_args(argv)
    if not getattr(args, "_module", None):
        parser.print_help(sys.stderr)
        return 2
    # Compiling the user's kernels to find their structure makes Python print its own
    # SyntaxWarnings (e.g. "invalid decimal literal") on stderr; they say nothing about our
    # findings and bury them, and the analysis reports real syntax errors itself (KS910).
    warnings.filterwarnings("ignore", category=SyntaxWarning)
    try:
        return int(args._module.run(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
