"""docs/codes/ is generated from analysis/codes.py: the pages must match the registry."""
from __future__ import annotations

from pathlib import Path

from kernelsight.analysis import codes

DOCS = Path(__file__).resolve().parent.parent / "docs" / "codes"


def test_docs_codes_pages_match_the_registry(tmp_path):
    codes.write_docs(tmp_path)
    expected = {p.name: p.read_text(encoding="utf-8") for p in tmp_path.iterdir()}
    actual = {p.name: p.read_text(encoding="utf-8") for p in DOCS.glob("*.md")}
    stale = sorted(set(actual) - set(expected))
    missing = sorted(set(expected) - set(actual))
    differ = sorted(n for n in set(expected) & set(actual) if expected[n] != actual[n])
    hint = "regenerate with: python -m kernelsight.analysis.codes docs/codes"
    assert not missing and not stale and not differ, (
        f"missing {missing}, stale {stale}, out of date {differ}; {hint}")


def test_every_code_has_title_why_and_examples():
    for c in codes.CODES.values():
        assert c.code.startswith("KS") and len(c.code) == 5
        assert c.title and c.why and c.wrong and c.right and c.name
