"""``kernelsight check PATH...``: analyse files or folders and report findings.

Output formats: ruff-style text (default), JSON (a list of finding objects) and SARIF 2.1.0.
Exit status: 0 no findings (none at or above ``--fail-on``), 1 findings, 2 usage, configuration or I/O error (after every other
file has still been analysed). See docs/cli.md.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

SKIP_DIRS = {".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__", ".tox",
             ".mypy_cache", ".pytest_cache", ".ruff_cache", "build", "dist", ".eggs"}
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://pypi.org/project/kernelsight/"


def register(parser: argparse.ArgumentParser) -> None:
    """Add ``check``'s arguments to its sub-parser."""
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="Python files or folders (folders are searched for *.py)")
    parser.add_argument("--format", choices=("text", "json", "sarif"), default="text",
                        help="output format (default: text)")
    parser.add_argument("--select", metavar="CODES",
                        help="comma-separated code prefixes to report, e.g. KS1,KS203 "
                             "(replaces the configured list)")
    parser.add_argument("--ignore", metavar="CODES",
                        help="comma-separated code prefixes never reported (replaces the "
                             "configured list)")
    parser.add_argument("--config", metavar="PYPROJECT",
                        help="read [tool.kernelsight] from this file instead of the nearest "
                             "pyproject.toml")
    parser.add_argument("--isolated", action="store_true",
                        help="ignore every pyproject.toml")
    parser.add_argument("--statistics", action="store_true",
                        help="print the number of findings per code instead of the findings")
    parser.add_argument("--summary", action="store_true",
                        help="print one line per kernel: invariants proved, refuted, unproved")
    parser.add_argument("--fail-on", choices=("error", "warning", "any", "never"), default="any",
                        help="the least severe finding that makes the exit status 1: error, "
                             "warning (and errors), any (also information and hints; the "
                             "default) or never")
    parser.add_argument("--fast", action="store_true",
                        help="fast tier only: front end, annotations (KS9xx) and language "
                             "rules (KS5xx); no invariant engine")


def run(args: argparse.Namespace) -> int:
    """Run the check; returns the exit status (0 clean, 1 findings, 2 errors)."""
    from kernelsight.analysis import analyze_source
    from kernelsight.analysis.config import ConfigError

    errors = 0

    def error(message: str) -> None:
        nonlocal errors
        errors += 1
        print(f"kernelsight check: error: {message}", file=sys.stderr)

    overrides = {}
    for key in ("select", "ignore"):
        value = getattr(args, key)
        if value is not None:
            items = [v.strip().upper() for v in value.split(",") if v.strip()]
            bad = [v for v in items if not _is_code_prefix(v)]
            if bad:
                print(f"kernelsight check: error: --{key}: not a code prefix: "
                      f"{', '.join(bad)} (expected e.g. KS, KS1, KS203)", file=sys.stderr)
                return 2
            from kernelsight.analysis.codes import CODES

            unknown = [v for v in items if not any(c.startswith(v) for c in CODES)]
            if unknown:
                print(f"kernelsight check: error: --{key}: no diagnostic code starts with "
                      f"{', '.join(unknown)} (see docs/codes/README.md)", file=sys.stderr)
                return 2
            overrides[key] = items
    if args.fast:
        overrides["fast_only"] = True
    try:
        configs = _ConfigFinder(args.config, args.isolated, overrides)
    except ConfigError as exc:
        print(f"kernelsight check: error: {exc}", file=sys.stderr)
        return 2

    files: list[Path] = []
    for raw in args.paths:
        p = Path(raw)
        if not p.exists():
            error(f"{raw}: no such file or directory")
        elif p.is_dir():
            found = _python_files(p, error)
            if not found:  # exit 0 with no output would read as "checked, all clean"
                print(f"kernelsight check: warning: no Python files found under {raw}",
                      file=sys.stderr)
            files.extend(found)
        else:
            files.append(p)

    unique: dict[Path, Path] = {}
    for path in files:  # a file named twice (or inside a folder also named) is checked once
        unique.setdefault(path.resolve(), path)
    reports = []
    config_errors: set[str] = set()
    started = time.perf_counter()
    for path in unique.values():
        try:
            config = configs.for_path(path)
        except ConfigError as exc:
            if str(exc) not in config_errors:  # once per pyproject, not once per file
                config_errors.add(str(exc))
                error(str(exc))
            else:
                errors += 1
            continue
        try:
            data = path.read_bytes()
        except OSError as exc:
            error(f"{path}: cannot read: {exc.strerror or exc}")
            continue
        text = data.decode("utf-8", errors="replace")
        try:
            analysis = analyze_source(text, str(path), config)
        except Exception as exc:  # an analyser bug in one file must not stop the others
            error(f"{path}: internal error while analysing: {type(exc).__name__}: {exc}")
            continue
        reports.append((path, text, analysis.report))
    elapsed = time.perf_counter() - started

    findings = sum(len(r.findings) for _, _, r in reports)
    out = sys.stdout
    if args.format == "json":
        if args.statistics:
            json.dump(_statistics(reports), out, indent=2)
        else:
            json.dump([_finding_json(str(p), f) for p, _, r in reports for f in r.findings],
                      out, indent=2)
        out.write("\n")
    elif args.format == "sarif":
        json.dump(sarif_log(reports), out, indent=2)
        out.write("\n")
    else:
        if args.statistics:
            for row in _statistics(reports):
                out.write(f"{row['count']:>6}  {row['code']}  {row['title']}\n")
        else:
            for p, _, r in reports:
                for f in r.findings:
                    out.write(format_text(str(p), f))
        if findings and not args.statistics:
            n_files = sum(1 for _, _, r in reports if r.findings)
            out.write(f"Found {findings} finding{'s' if findings != 1 else ''} in {n_files} "
                      f"file{'s' if n_files != 1 else ''}.\n")
    if args.summary:
        stream = out if args.format == "text" else sys.stderr
        for p, _, r in reports:
            for k in r.kernels:
                own = sum(1 for f in r.findings
                          if f.kernel == k.name or k.span.line <= f.span.line <= k.span.end_line)
                stream.write(summary_line(str(p), k, own) + "\n")
        kernels = sum(len(r.kernels) for _, _, r in reports)
        stream.write(f"{len(reports)} file(s), {kernels} kernel(s) in {elapsed:.2f} s\n")
    if errors:
        return 2
    return 1 if _fails(reports, getattr(args, "fail_on", "any")) else 0


# the worst Severity value (1 = error, 4 = hint) that still fails the run, per --fail-on
_FAIL_AT = {"error": 1, "warning": 2, "any": 4, "never": 0}


def _fails(reports, fail_on: str) -> bool:
    """Whether a reported finding is at least as severe as ``fail_on`` asks."""
    worst = _FAIL_AT[fail_on]
    return any(int(f.severity) <= worst for _, _, r in reports for f in r.findings)


def _is_code_prefix(text: str) -> bool:
    import re

    return bool(re.fullmatch(r"KS\d{0,3}", text))


class _ConfigFinder:
    """The Config of each file: ``--config``, else the nearest pyproject.toml, plus flags."""

    def __init__(self, explicit: str | None, isolated: bool, overrides: dict):
        from kernelsight.analysis.config import Config, ConfigError, load_pyproject

        self.overrides = overrides
        self.cache: dict[Path, object] = {}
        self.fixed = None
        if explicit:
            p = Path(explicit)
            if not p.is_file():
                raise ConfigError(f"--config {explicit}: no such file")
            self.fixed = load_pyproject(p, warn=_warn).merged(overrides, where="command line")
        elif isolated:
            self.fixed = Config().merged(overrides, where="command line")

    def for_path(self, path: Path):
        from kernelsight.analysis.config import Config, find_pyproject, load_pyproject

        if self.fixed is not None:
            return self.fixed
        from kernelsight.analysis.config import ConfigError

        pyproject = find_pyproject(path)
        if pyproject not in self.cache:
            try:
                base = load_pyproject(pyproject, warn=_warn) if pyproject is not None \
                    else Config()
                self.cache[pyproject] = base.merged(self.overrides, where="command line")
            except ConfigError as exc:  # kept: every file under it fails the same way
                self.cache[pyproject] = exc
        got = self.cache[pyproject]
        if isinstance(got, ConfigError):
            raise got
        return got


def _warn(message: str) -> None:
    print(f"kernelsight check: warning: {message}", file=sys.stderr)


def _python_files(folder: Path, error) -> list[Path]:
    out: list[Path] = []
    stack = [folder]
    while stack:
        d = stack.pop()
        try:
            entries = sorted(d.iterdir(), key=lambda p: p.name)
        except OSError as exc:
            error(f"{d}: cannot list: {exc.strerror or exc}")
            continue
        subdirs = []
        for e in entries:
            if e.is_dir():
                if e.name not in SKIP_DIRS and not e.name.endswith(".egg-info"):
                    subdirs.append(e)
            elif e.suffix == ".py" and e.is_file():
                out.append(e)
        stack.extend(reversed(subdirs))
    return sorted(out)


# --- formats ----------------------------------------------------------------------------------

def format_text(path: str, f) -> str:
    """``path:line:col: CODE message`` (1-based) and the indented counterexample lines."""
    s = f.span
    lines = [f"{path}:{s.line + 1}:{s.col + 1}: {f.code} {f.message}"]
    ce = f.counterexample
    if ce is not None:
        described = ce.describe()
        if described:
            lines.append(f"  {described}")
        lines.extend(f"  {note}" for note in ce.notes)
    for r in f.related:
        lines.append(f"  line {r.span.line + 1}: {r.message}")
    return "\n".join(lines) + "\n"


def summary_line(path: str, k, findings: int | None = None) -> str:
    """``path::kernel  findings F  proved P  refuted R  unproved U  unknown X  (status)``.

    ``proved/refuted/unproved`` count invariant obligations (bounds, tags, coverage...);
    ``findings`` counts every finding in the kernel, language rules included; ``unknown``
    counts constructs the interpreter did not model (they never cause a finding).
    """
    t = k.tally
    head = f"{path}::{k.name}  " + (f"findings {findings}  " if findings is not None else "")
    return (f"{head}proved {t.proved}  refuted {t.refuted}  unproved {t.unproved}"
            f"  unknown {k.unknowns}  ({k.status})")


def _finding_json(path: str, f) -> dict:
    s = f.span
    return {
        "path": path,
        "line": s.line + 1,
        "column": s.col + 1,
        "end_line": s.end_line + 1,
        "end_column": s.end_col + 1,
        "code": f.code,
        "severity": f.severity.label if f.severity is not None else "warning",
        "message": f.message,
        "kernel": f.kernel,
        "counterexample": f.counterexample.to_dict() if f.counterexample else None,
        "related": [{"path": path, "line": r.span.line + 1, "column": r.span.col + 1,
                     "message": r.message} for r in f.related],
        "fixes": [{"title": fx.title,
                   "edits": [{"line": e.span.line + 1, "column": e.span.col + 1,
                              "end_line": e.span.end_line + 1,
                              "end_column": e.span.end_col + 1, "new_text": e.new_text}
                             for e in fx.edits]} for fx in f.fixes],
        "url": help_uri(f.code),
    }


def _statistics(reports) -> list[dict]:
    from kernelsight.analysis import codes

    counts = Counter(f.code for _, _, r in reports for f in r.findings)
    rows = []
    for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        title = codes.CODES[code].title if code in codes.CODES else ""
        rows.append({"code": code, "count": n, "title": title})
    return rows


def help_uri(code: str) -> str:
    """The documentation page of ``code``: the docs/codes page of this checkout as a file URI
    when it exists (editable installs), else the page's path relative to the repository."""
    docs = Path(__file__).resolve().parents[2] / "docs" / "codes" / f"{code}.md"
    if docs.is_file():
        return docs.as_uri()
    return f"docs/codes/{code}.md"


_LEVEL = {1: "error", 2: "warning", 3: "note", 4: "note"}


def sarif_log(reports) -> dict:
    """A SARIF 2.1.0 log of the findings: one run, rules from the code registry, each
    counterexample's chain of related lines as a code flow."""
    from kernelsight import __version__
    from kernelsight.analysis import codes

    rule_ids = list(codes.CODES)
    rules = []
    for cid in rule_ids:
        c = codes.CODES[cid]
        rules.append({
            "id": c.code,
            "name": c.name,
            "shortDescription": {"text": c.title},
            "fullDescription": {"text": c.why},
            "help": {"text": f"{c.why}\n\nWrong:\n{c.wrong}\n\nRight:\n{c.right}",
                     "markdown": codes.render_markdown(c)},
            "helpUri": help_uri(c.code),
            "defaultConfiguration": {"level": _LEVEL[int(c.severity)]},
        })
    results = []
    artifacts: dict[str, int] = {}
    for path, _, report in reports:
        uri = _uri(path)
        artifacts.setdefault(uri, len(artifacts))
        for f in report.findings:
            loc = _location(uri, artifacts[uri], f.span)
            result = {
                "ruleId": f.code,
                "level": _LEVEL.get(int(f.severity), "warning"),
                "message": {"text": f.message},
                "locations": [loc],
            }
            if f.code in codes.CODES:
                result["ruleIndex"] = rule_ids.index(f.code)
            if f.related or f.counterexample is not None:
                steps = [{"location": {**_location(uri, artifacts[uri], r.span),
                                       "message": {"text": r.message}}} for r in f.related]
                ce_text = f.counterexample.describe() if f.counterexample else ""
                steps.append({"location": {**loc, "message": {"text": ce_text or f.message}}})
                result["codeFlows"] = [{
                    "message": {"text": ce_text or f.message},
                    "threadFlows": [{"locations": steps}],
                }]
            if f.related:
                result["relatedLocations"] = [
                    {**_location(uri, artifacts[uri], r.span), "id": i,
                     "message": {"text": r.message}} for i, r in enumerate(f.related)]
            if f.counterexample is not None:
                result["properties"] = {"counterexample": f.counterexample.to_dict()}
            if f.fixes:
                result["fixes"] = [{
                    "description": {"text": fx.title},
                    "artifactChanges": [{
                        "artifactLocation": {"uri": uri, "index": artifacts[uri]},
                        "replacements": [{
                            "deletedRegion": _region(e.span),
                            "insertedContent": {"text": e.new_text}} for e in fx.edits],
                    }]} for fx in f.fixes]
            results.append(result)
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "kernelsight", "version": __version__,
                                "informationUri": INFORMATION_URI, "rules": rules}},
            "columnKind": "unicodeCodePoints",
            "artifacts": [{"location": {"uri": u}} for u in artifacts],
            "results": results,
        }],
    }


def _uri(path: Path) -> str:
    p = Path(path)
    if p.is_absolute():
        return p.as_uri()
    from urllib.parse import quote

    return quote(p.as_posix())


def _region(span) -> dict:
    return {"startLine": span.line + 1, "startColumn": span.col + 1,
            "endLine": span.end_line + 1, "endColumn": span.end_col + 1}


def _location(uri: str, index: int, span) -> dict:
    return {"physicalLocation": {"artifactLocation": {"uri": uri, "index": index},
                                 "region": _region(span)}}
