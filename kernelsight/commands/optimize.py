"""``kernelsight optimize FILE::KERNEL [--model M | --tuner] [--budget ...] [--run-dir D] [--resume]
[--evaluator local|ray:local|ray://HOST:PORT]``

Runs ``kernelsight.agent.optimize.run_optimize`` with a progress bar on stderr, then prints the
result (best speedup, run directory, report) on stdout. Exit status: 0 when the run finished
(whether or not it found something faster), 1 when it could not run, 2 for usage errors,
130 when interrupted (the record is kept; ``--resume`` continues it).

The API key is never taken on the command line (it would show in ``ps`` and shell history):
litellm reads the provider's usual variable (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY`` ...), or
``--api-key-env NAME`` names another variable to read it from.
"""
from __future__ import annotations

import argparse
import os
import sys
import threading


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE[::KERNEL]",
                        help="the kernel file with its bench spec, optionally ::KERNEL")
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument("--model", metavar="M",
                     help="litellm model string, e.g. openai/gpt-4o or anthropic/claude-sonnet-4-5")
    who.add_argument("--tuner", action="store_true",
                     help="use the built-in tuner (block sizes, warps, stages; no LLM)")
    parser.add_argument("--budget", metavar="SPEC", default=None,
                        help="limits, e.g. candidates=30,tokens=200000,dollars=2,minutes=20 "
                             "(default candidates=24)")
    parser.add_argument("--run-dir", metavar="D", default=None,
                        help="run directory (default .kernelsight/runs/<stem>-<kernel>-<time>)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run in --run-dir (or the newest one of this kernel)")
    parser.add_argument("--api-base", metavar="URL", default=None,
                        help="OpenAI-compatible endpoint for the model")
    parser.add_argument("--api-key-env", metavar="NAME", default=None,
                        help="environment variable holding the API key")
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--max-tokens", type=int, default=8192)
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--evaluator", metavar="WHERE", default=None,
                        help="where candidates are evaluated: local (this machine's GPUs and "
                             "cores, the default), ray:local (a private Ray cluster here), "
                             "ray:auto / ray:HOST:PORT (join a Ray cluster), ray://HOST:PORT "
                             "(Ray Client); default $KERNELSIGHT_EVALUATOR, else local "
                             "(docs/ray.md)")
    parser.add_argument("--target", default="cuda:90", help="compile target (default cuda:90)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the search's choices")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def _split_target(text: str) -> tuple[str, str | None]:
    if "::" in text:
        path, kernel = text.rsplit("::", 1)
        return path, (kernel or None)
    return text, None


class _Bar:
    """A one-line progress bar on stderr (plain lines when stderr is not a terminal)."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self.width = 0

    def __call__(self, p) -> None:
        if self.quiet:
            return
        filled = int(round(24 * p.fraction))
        best = f" best {p.best_score:.3f}x" if p.best_score is not None else ""
        text = f"[{'#' * filled}{'.' * (24 - filled)}] {100 * p.fraction:3.0f}% " \
               f"{p.candidates} cand.{best}  {p.message}"
        if self.tty:
            pad = max(0, self.width - len(text))
            sys.stderr.write("\r" + text + " " * pad)
            self.width = len(text)
        else:
            sys.stderr.write(text + "\n")
        sys.stderr.flush()

    def close(self) -> None:
        if self.tty and self.width and not self.quiet:
            sys.stderr.write("\n")


def run(args: argparse.Namespace) -> int:
    from kernelsight.extras import require

    needs = ("torch", "triton") + (("litellm",) if getattr(args, "model", None) else ())
    problem = require("kernelsight optimize", needs)
    if problem:
        print(f"kernelsight optimize: {problem}", file=sys.stderr)
        return 2
    from kernelsight.agent.budget import Budget, BudgetError
    from kernelsight.agent.optimize import OptimizeError, run_optimize

    path, kernel = _split_target(args.file)
    if not os.path.isfile(path):
        print(f"kernelsight optimize: {path}: no such file", file=sys.stderr)
        return 2
    try:
        budget = Budget.parse(args.budget)
    except BudgetError as exc:
        print(f"kernelsight optimize: --budget: {exc}", file=sys.stderr)
        return 2
    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            print(f"kernelsight optimize: --api-key-env {args.api_key_env}: variable is not set",
                  file=sys.stderr)
            return 2
    from kernelsight.agent.backends import EvaluatorSpecError, parse_evaluator

    evaluator = args.evaluator or os.environ.get("KERNELSIGHT_EVALUATOR") or "local"
    try:
        parse_evaluator(evaluator)
    except EvaluatorSpecError as exc:
        print(f"kernelsight optimize: {exc}", file=sys.stderr)
        return 2
    bar = _Bar(args.quiet)
    cancel = threading.Event()
    try:
        result = run_optimize(path, kernel, model=args.model, tuner=args.tuner, budget=budget,
                              run_dir=args.run_dir, resume=args.resume, progress=bar,
                              cancel=cancel, api_key=api_key, api_base=args.api_base,
                              temperature=args.temperature, max_tokens=args.max_tokens,
                              device=args.device, target=args.target, seed=args.seed,
                              evaluator=evaluator)
    except OptimizeError as exc:
        bar.close()
        print(f"kernelsight optimize: {exc}", file=sys.stderr)
        return 1
    bar.close()
    print(f"stopped: {result.stop_reason}")
    if result.timed:
        seed = f"{result.seed_score:.3f}x" if result.seed_score is not None else "-"
        best = f"{result.best_score:.3f}x" if result.best_score is not None else "-"
        print(f"seed {seed} the reference, best {best} ({result.best_id})")
    else:
        print("no timing on this machine: nothing is claimed faster; "
              f"{len(result.accepted)} candidate(s) passed the gate")
    for note in result.notes:
        if not (not result.timed and note.startswith("no timing")):  # said just above
            print(f"note: {note}")
    print(f"run directory: {result.run_dir}")
    print(f"report: {result.report_path}")
    if result.diff:
        print(f"best diff: {result.run_dir / 'best.diff'}")
    return 130 if result.stop_reason.startswith("interrupted") else 0
