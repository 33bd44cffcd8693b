"""tests/data/cases is a copy of the team's shared bug/fixed pairs, so the suite runs from a
fresh clone without ../shared; where ../shared/cases exists (CI), the copy must not drift."""
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
COPY = HERE / "data" / "cases"
SHARED = HERE.parent.parent / "shared" / "cases"


def test_every_bug_case_has_its_fixed_pair():
    bugs = sorted(p.name for p in COPY.glob("*_bug.py"))
    assert bugs, "no bug cases copied"
    for name in bugs:
        assert (COPY / name.replace("_bug.py", "_fixed.py")).is_file(), name


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/cases is not beside this checkout")
def test_copy_matches_the_shared_cases():
    shared = {p.name: p.read_text() for p in SHARED.glob("*.py")}
    copy = {p.name: p.read_text() for p in COPY.glob("*.py")}
    assert copy == shared
