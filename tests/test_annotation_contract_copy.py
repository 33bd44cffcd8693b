"""docs/annotation-contract.md is the users' copy of the shared contract: it may add notes, but
every line of the shared contract must be in it (where ../shared is beside the checkout)."""
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
DOC = HERE.parent / "docs" / "annotation-contract.md"
SHARED = HERE.parent.parent / "shared" / "spec" / "annotations.md"


@pytest.mark.skipif(not SHARED.is_file(), reason="../shared/spec is not beside this checkout")
def test_docs_copy_holds_every_line_of_the_shared_contract():
    doc = DOC.read_text().splitlines()
    missing = [line for line in SHARED.read_text().splitlines() if line not in doc]
    assert missing == []
