"""The shared bug/fixed pairs (../shared/cases): each bug file is reported with its class, at
its line, with a concrete counterexample; each fixed file is clean; applying the finding's
quick fix removes it."""
from __future__ import annotations

from pathlib import Path

import pytest

from kernelsight.analysis import analyze_source
from kernelsight.analysis.config import Config

# generous budgets: CI machines are slow and shared; the defaults are for the editor
TEST_CONFIG = Config(kernel_budget_ms=60000, solver_timeout_ms=5000)
from kernelsight.analysis.model import Finding

CASES = Path(__file__).resolve().parent / "data" / "cases"
ENGINE_PREFIXES = ("KS1", "KS2", "KS3", "KS4")


def _engine_findings(text: str, name: str) -> list[Finding]:
    a = analyze_source(text, name, TEST_CONFIG)
    return [f for f in a.report.findings if f.code.startswith(ENGINE_PREFIXES)]


def _line_of(text: str, needle: str) -> int:
    """0-based line of the first line containing ``needle``."""
    for i, line in enumerate(text.splitlines()):
        if needle in line:
            return i
    raise AssertionError(f"{needle!r} not in file")


def _apply(text: str, finding: Finding) -> str:
    lines = text.split("\n")
    edits = sorted(finding.fixes[0].edits, key=lambda e: (e.span.line, e.span.col),
                   reverse=True)
    for e in edits:
        assert e.span.line == e.span.end_line
        row = lines[e.span.line]
        lines[e.span.line] = row[:e.span.col] + e.new_text + row[e.span.end_col:]
    return "\n".join(lines)


# (case, code, a snippet of the reported line)
EXPECTED = [
    ("R02", "KS104", "tl.store(c_ptrs, acc)"),
    ("R04", "KS110", "x = tl.load(x_ptr + row * row_stride"),
    ("R08", "KS401", "x = tl.load(logits_ptr"),
    ("R22", "KS105", "prev = tl.load(cu_ptr + offs - 1"),
]


@pytest.mark.parametrize("case,code,snippet", EXPECTED, ids=[e[0] for e in EXPECTED])
def test_bug_case_is_reported_with_class_line_and_counterexample(case, code, snippet):
    text = (CASES / f"{case}_bug.py").read_text()
    found = [f for f in _engine_findings(text, f"{case}_bug.py") if f.code == code]
    assert found, f"{case}: no {code}"
    f = found[0]
    assert f.span.line == _line_of(text, snippet)
    cex = f.counterexample
    assert cex is not None and cex.sizes, "a counterexample names the sizes"
    assert f.related, "the chain of lines that produced the bad value"


@pytest.mark.parametrize("case", ["R02", "R04", "R08", "R13", "R22"])
def test_fixed_case_has_no_finding(case):
    text = (CASES / f"{case}_fixed.py").read_text()
    assert _engine_findings(text, f"{case}_fixed.py") == []


def test_r02_counterexample_is_a_row_past_m():
    text = (CASES / "R02_bug.py").read_text()
    f = next(f for f in _engine_findings(text, "R02_bug.py") if f.code == "KS104")
    cex = f.counterexample
    m = cex.sizes["M"]
    block_m = cex.sizes["BLOCK_M"]
    row = cex.program_id[0] * block_m + cex.element["i"]
    col = cex.program_id[1] * cex.sizes["BLOCK_N"] + cex.element["j"]
    assert row >= m or col >= cex.sizes["N"]
    assert f.fixes and f.fixes[0].edits[0].new_text.endswith("mask=mask")


def test_r04_counterexample_wraps_int32():
    text = (CASES / "R04_bug.py").read_text()
    f = next(f for f in _engine_findings(text, "R04_bug.py") if f.code == "KS110")
    cex = f.counterexample
    product = cex.program_id[0] * cex.sizes["row_stride"]
    assert product > 2 ** 31 - 1
    assert product <= Config().max_elements


def test_r08_counterexample_is_a_masked_lane_of_the_last_tile():
    text = (CASES / "R08_bug.py").read_text()
    f = next(f for f in _engine_findings(text, "R08_bug.py") if f.code == "KS401")
    cex = f.counterexample
    lane = cex.loop["v0_iter"] * cex.sizes["BLOCK_V"] + cex.element["i"]
    assert lane >= cex.sizes["V"], "the lane is masked off"
    assert cex.values["masked lane value"] == 0.0
    assert "tl.max" in f.message


def test_r22_counterexample_reads_one_before_the_tensor():
    text = (CASES / "R22_bug.py").read_text()
    f = next(f for f in _engine_findings(text, "R22_bug.py") if f.code == "KS105")
    assert f.counterexample.values["offset"] == -1
    assert f.counterexample.program_id == (0,) and f.counterexample.element == {"i": 0}


@pytest.mark.parametrize("case,code", [("R02", "KS104"), ("R04", "KS110"), ("R08", "KS401"),
                                       ("R22", "KS105")])
def test_quick_fix_removes_the_finding(case, code):
    text = (CASES / f"{case}_bug.py").read_text()
    f = next(f for f in _engine_findings(text, "x.py") if f.code == code)
    assert f.fixes, f"{code} offers a quick fix"
    fixed = _apply(text, f)
    assert fixed != text
    after = [g for g in _engine_findings(fixed, "x.py") if g.code == code
             and g.span.line == f.span.line]
    assert after == []


def test_r13_loads_and_stores_are_modelled_without_unknowns():
    from kernelsight.analysis import frontend
    from kernelsight.analysis.engine import _analyze
    from kernelsight.analysis.engine.interp import Interp

    text = (CASES / "R13_bug.py").read_text()
    parsed = frontend.parse_file(text, "R13_bug.py")
    k = parsed.kernels[0]
    assert _analyze(k, parsed, TEST_CONFIG).unknowns == 0
    it = Interp(k, parsed, TEST_CONFIG, {"BT": 64, "BV": 32}, deadline=1e18)
    it.run()
    kinds = [(a.kind, a.base) for a in it.accesses]
    assert kinds == [("load", "p_ptr"), ("load", "v_ptr"), ("store", "o_ptr")]
    store = it.accesses[-1]
    assert "pid0" not in store.offset.atoms(), "the store ignores program id 0"
    assert store.value.shape == (32,)
