"""The engine on the project's examples: correct kernels give no finding and are modelled
without unknown constructs; every bug marker whose code the per-program core owns is reported
at the marked line. (Grid-level codes are pinned in test_engine_grid.py.)"""
from __future__ import annotations

from pathlib import Path

import pytest

from bug_markers import bug_files, expected_findings
from kernelsight.analysis import frontend
from kernelsight.analysis.config import Config

# generous budgets: CI machines are slow and shared; the defaults are for the editor
TEST_CONFIG = Config(kernel_budget_ms=60000, solver_timeout_ms=5000)
from kernelsight.analysis.engine import analyze_kernel

ROOT = Path(__file__).resolve().parent.parent
KERNELS = sorted((ROOT / "examples" / "kernels").glob("*.py"))
CORE_CODES = {"KS101", "KS102", "KS103", "KS104", "KS105", "KS106", "KS107", "KS110", "KS201",
              "KS202", "KS203", "KS204", "KS401", "KS402"}


def _analyse(path: Path):
    parsed = frontend.parse_file(path.read_text(), str(path))
    out = []
    for k in parsed.kernels:
        if k.is_helper or k.tree is None:
            continue
        out.append((k, analyze_kernel(k, parsed, TEST_CONFIG)))
    return out


@pytest.mark.parametrize("path", KERNELS, ids=[p.stem for p in KERNELS])
def test_correct_example_has_no_finding_and_no_unknown(path):
    for k, res in _analyse(path):
        assert res.findings == [], [(f.code, f.span.line + 1, f.message) for f in res.findings]
        assert res.unknowns == 0, res.unknown_kinds
        assert res.status == "analysed"
        assert res.tally.refuted == 0 and res.tally.proved > 0


CORE_BUGS = [p for p in bug_files() if any(c in CORE_CODES for c, _ in expected_findings(p))]


@pytest.mark.parametrize("path", CORE_BUGS, ids=[p.stem for p in CORE_BUGS])
def test_bug_marker_is_reported_at_its_line_with_a_counterexample(path):
    got = [(f.code, f.span.line + 1, f) for _, res in _analyse(path) for f in res.findings]
    for code, line in expected_findings(path):
        if code not in CORE_CODES:
            continue
        hits = [f for c, l, f in got if c == code and l == line]
        assert hits, f"{path.name}: expected {code} at line {line}, got " \
                     f"{[(c, l) for c, l, _ in got]}"
        f = hits[0]
        if code != "KS402":  # a dtype fact, not a value: no counterexample needed
            assert f.counterexample is not None


def test_hover_shows_tags_as_formulas_on_matmul():
    from kernelsight.analysis import analyze_path, hover_at

    path = ROOT / "examples" / "kernels" / "matmul.py"
    a = analyze_path(path, TEST_CONFIG)
    lines = path.read_text().splitlines()
    row = next(i for i, l in enumerate(lines) if l.strip().startswith("a = tl.load(a_ptrs"))
    h = hover_at(a, row, lines[row].index("a ="))
    assert h is not None and "tile[" in h.title
    assert any(t.startswith("a[i, j] <- A[") and "m = " in t and "k = " in t for t in h.tags)
    call = lines[row].index("tl.load")
    h2 = hover_at(a, row, call + 3)
    assert h2 is not None and h2.invariants and all(s == "proved" for s, _ in h2.invariants)


def test_hover_carries_the_counterexample_of_a_refuted_invariant():
    from kernelsight.analysis import analyze_path, hover_at

    path = ROOT / "examples" / "bugs" / "vector_add_missing_mask.py"
    a = analyze_path(path, TEST_CONFIG)
    (code, line), = expected_findings(path)
    text = path.read_text().splitlines()[line - 1]
    h = hover_at(a, line - 1, text.index("tl.store") + 2)
    assert h is not None
    assert any(s == "refuted" for s, _ in h.invariants)
    assert h.counterexample is not None and h.counterexample.element
