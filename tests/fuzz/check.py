"""The property every fuzzed document must satisfy: the analysis returns a well-formed report
(registered codes, spans inside the document, a status for every kernel), and nothing inside it
was an exception swallowed as a KS911 "internal error"."""
from __future__ import annotations

import re
import traceback

from kernelsight.analysis import api, codes
from kernelsight.analysis.config import Config
from kernelsight.analysis.model import Finding

INTERNAL = "internal error"
STATUSES = {"analysed", "budget", "syntax-error", "skipped"}


class Problem(AssertionError):
    """The analysis broke the property; the message says how (with a traceback if any)."""


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _span_ok(f: Finding, n_rows: int) -> bool:
    s = f.span
    return (0 <= s.line <= s.end_line <= n_rows and s.col >= 0 and s.end_col >= 0
            and (s.line, s.col) <= (s.end_line, s.end_col))


def engine_traceback(text: str, path: str, kernel_name: str, config: Config) -> str:
    """Re-run the engine on one kernel without the API's safety net, for the traceback."""
    from kernelsight.analysis import frontend
    from kernelsight.analysis.engine import analyze_kernel

    parsed = frontend.parse_file(text, path)
    for k in parsed.kernels:
        if k.name == kernel_name and not k.is_helper and k.tree is not None:
            try:
                analyze_kernel(k, parsed, config)
            except Exception:
                return traceback.format_exc()
    return "(not reproduced outside analyze_source)"


def check_document(text: str, path: str = "fuzz.py", config: Config | None = None):
    """Analyse ``text`` fully and check the report.

    Returns:
        The ``Analysis``.
    Raises:
        Problem: a malformed report or an internal error inside a kernel's analysis.
        Exception: whatever the analysis raised (a crash).
    """
    config = config or Config()
    analysis = api.analyze_source(text, path, config)
    report = analysis.report
    # Rows as LSP and Python count them: a lone CR ends a line too (the front end agrees).
    n_rows = len(_LINE_BREAK.split(text))
    for f in report.findings:
        if f.code not in codes.CODES:
            raise Problem(f"unregistered code {f.code}: {f.message}")
        if not f.message:
            raise Problem(f"{f.code} without a message")
        if not _span_ok(f, n_rows):
            raise Problem(f"{f.code} span {f.span} outside the document ({n_rows} rows)")
        for r in f.related:
            if not (0 <= r.span.line <= n_rows):
                raise Problem(f"{f.code} related span {r.span} outside the document")
        if f.code == "KS911" and INTERNAL in f.message:
            tb = engine_traceback(text, path, f.kernel or "", config)
            raise Problem(f"{f.message}\n{tb}")
    for k in report.kernels:
        if k.status not in STATUSES:
            raise Problem(f"kernel {k.name}: unexpected status {k.status!r}")
    return analysis
