"""Pathological inputs through the full analysis (``analyze_source`` / ``analyze_path``).

Each case runs in a child process with a wall-clock limit. It must return in time with a
clean outcome for the pathological kernel (findings, KS910 syntax error or KS911 budget
information) and must still report the sentinel kernel's known bug (KS101 at its unmasked
store): the rest of the file is still analysed. Limits are about 3x the time measured on the
2-core development machine (docs/robustness.md lists both) and apply to the CPU time of the
analysis, so that a loaded CI machine does not fail them; the wall-clock limit of the child
(4x the limit + 30 s) is what catches a hang.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from fuzz import pathological as P  # noqa: E402

RUNNER = HERE / "fuzz" / "run_case.py"

# CPU seconds allowed per case (measured on 2 cores, docs/robustness.md: 1.5-6 s for the
# three big ones since the front end and the rules share one walk per kernel, <= 2 s else).
BIG = {"long_kernel_10k_lines", "kernels_500", "one_huge_line_20000_statements"}
LIMIT_BIG_S = 20.0
LIMIT_S = 10.0
CLEAN_STATUSES = {"analysed", "budget", "syntax-error"}


def run_case(name: str, path: Path | None = None, limit: float | None = None) -> dict:
    limit = limit if limit is not None else (LIMIT_BIG_S if name in BIG else LIMIT_S)
    argv = [sys.executable, str(RUNNER), name] + ([str(path)] if path else [])
    wall = 4 * limit + 30  # start-up, warm-up analysis and a loaded machine included
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=wall)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{name}: no result within {wall:.0f} s (hang)")
    assert proc.returncode == 0, f"{name}: exit {proc.returncode}\n{proc.stderr[-3000:]}"
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["cpu_seconds"] <= limit, (
        f"{name}: {out['cpu_seconds']:.1f} s of CPU > limit {limit} s "
        f"(wall {out['seconds']:.1f} s)")
    return out


def assert_clean(out: dict, text: str | None = None, sentinel_line: int | None = None) -> None:
    for k in out["kernels"]:
        assert k["status"] in CLEAN_STATUSES, k
        if k["status"] == "budget":
            assert any(f["code"] == "KS911" and f["kernel"] == k["name"]
                       for f in out["findings"]), f"budget without KS911 for {k['name']}"
    for f in out["findings"]:
        assert "internal error" not in f["message"], f
    if text is not None:
        sentinel_line = P.sentinel_line(text)
    hits = [f for f in out["findings"]
            if f["code"] == P.SENTINEL_CODE and f["kernel"] == P.SENTINEL_NAME]
    assert [f["line"] for f in hits] == [sentinel_line], (
        f"sentinel bug not reported at line {sentinel_line}: {out['findings'][:10]}")
    sentinel = [k for k in out["kernels"] if k["name"] == P.SENTINEL_NAME]
    assert sentinel and sentinel[0]["status"] == "analysed"


# The front end now ends lines at a lone CR as Python does (analysis/frontend.py), so the
# lone-CR cases pass and are no longer expected to fail.
CASES = list(P.CASES)


@pytest.mark.timeout(200)
@pytest.mark.parametrize("name", CASES)
def test_pathological_file_returns_in_time_and_the_rest_is_analysed(name):
    out = run_case(name)
    assert_clean(out, P.CASES[name]())


@pytest.mark.timeout(200)
def test_deep_nesting_beyond_python_limits_is_a_syntax_error_finding_not_a_crash():
    out = run_case("parens_1000_deep")
    deep = [k for k in out["kernels"] if k["name"] == "deep_parens"]
    assert deep and deep[0]["status"] == "syntax-error"
    assert any(f["code"] == "KS910" and f["kernel"] == "deep_parens" for f in out["findings"])


@pytest.mark.timeout(200)
def test_static_range_of_100000_is_summarised_not_unrolled():
    out = run_case("static_range_100000")
    k = next(k for k in out["kernels"] if k["name"] == "static_unroll")
    # max_unroll (64) iterations are unrolled, the rest summarised: well under the budget
    assert k["seconds"] < 2.0, k


@pytest.mark.timeout(200)
def test_non_utf8_bytes_through_analyze_path(tmp_path):
    data = P.non_utf8_bytes()
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")
    path = tmp_path / "latin.py"
    path.write_bytes(data)
    out = run_case("non_utf8", path=path)
    text = data.decode("utf-8", errors="replace")
    assert_clean(out, text)
    latin = [k for k in out["kernels"] if k["name"] == "latin"]
    assert latin and latin[0]["status"] == "analysed"


@pytest.mark.timeout(200)
def test_crlf_and_tabs_keep_finding_lines():
    out = run_case("crlf_tabs")
    text = P.crlf_tabs()
    assert_clean(out, text)
    assert all(k["status"] == "analysed" for k in out["kernels"])


# --- the budget of the front end and the language rules ---------------------------------------
# Both share Config.kernel_budget_ms of CPU time per jit function with each other (the engine
# has its own). The 10,000-line kernel needs about 0.6 s there; a tight budget shows what
# happens past it, deterministically: CPU time of a 10-line kernel is far below 100 ms and
# that of the 10,000-line one far above.

def _front_budget_findings(findings, name):
    return [f for f in findings if f.code == "KS911" and f.kernel == name
            and "front end and the language rules" in f.message]


@pytest.mark.timeout(200)
def test_kernel_past_the_front_end_budget_is_reported_and_the_others_are_parsed():
    from kernelsight.analysis import frontend

    parsed = frontend.parse_file(P.long_kernel(), "long.py", budget_ms=100)
    long_k, sentinel = parsed.kernel("long_kernel"), parsed.kernel(P.SENTINEL_NAME)
    assert long_k.budget_exhausted == "front end" and long_k.tree is None
    assert not long_k.has_syntax_error
    [info] = _front_budget_findings(parsed.findings, "long_kernel")
    assert "stopped in the front end" in info.message and info.span == long_k.name_span
    assert sentinel.budget_exhausted is None and sentinel.tree is not None
    assert sentinel.annotations.grid is not None  # its directives were still read


@pytest.mark.timeout(200)
def test_kernel_past_the_budget_in_the_rules_is_reported_and_skips_the_engine():
    from kernelsight.analysis import frontend, rules
    from kernelsight.analysis.config import Config

    parsed = frontend.parse_file(P.long_kernel(), "long.py", budget_ms=10**9)
    long_k = parsed.kernel("long_kernel")
    spent_ms = long_k.front_seconds * 1000
    # The rules get 5 ms on top of what the front end spent; they need about 100 ms.
    found = rules.check_rules(parsed, Config(kernel_budget_ms=int(spent_ms) + 5))
    assert long_k.budget_exhausted == "language rules"
    [info] = _front_budget_findings(found, "long_kernel")
    assert "stopped in the language rules" in info.message
    assert parsed.kernel(P.SENTINEL_NAME).budget_exhausted is None


@pytest.mark.timeout(200)
def test_analyze_source_reports_a_kernel_past_the_front_end_budget_as_budget():
    from kernelsight.analysis import api
    from kernelsight.analysis.config import Config

    report = api.analyze_source(P.long_kernel(), "long.py",
                                Config(kernel_budget_ms=100)).report
    long_k = next(k for k in report.kernels if k.name == "long_kernel")
    assert long_k.status == "budget"
    assert long_k.seconds == 0.0  # the engine did not run on it
    assert len(_front_budget_findings(report.findings, "long_kernel")) == 1
    # the sentinel went through the engine (its status depends on 100 ms of wall time)
    sentinel = next(k for k in report.kernels if k.name == P.SENTINEL_NAME)
    assert sentinel.status in ("analysed", "budget") and sentinel.seconds > 0.0
