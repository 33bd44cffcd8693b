"""The "Apply the mask" quick fix copies a mask written inline in a neighbouring access
(`tl.load(x_ptr + offs, mask=offs < n)`) to the unmasked access, the README's 30-second
example, and only when the copy means the same lanes there and removes the violation."""
from __future__ import annotations

import textwrap
from pathlib import Path

from kernelsight.analysis import analyze_source, engine
from kernelsight.analysis.config import Config

from fix_edits import apply_fix

ROOT = Path(__file__).resolve().parents[1]
CONFIG = Config(kernel_budget_ms=60000, solver_timeout_ms=5000)
HEAD = "import triton\nimport triton.language as tl\n\n\n"


def findings(text: str):
    engine._CACHE.clear()
    return analyze_source(text, "k.py", CONFIG).report.findings


def test_readme_examples_get_the_inline_mask_fix_and_the_fixed_file_is_clean():
    for name, code in (("quickstart_scale_inplace.py", "KS103"), ("quickstart_scale.py", "KS101")):
        text = (ROOT / "examples" / "bugs" / name).read_text()
        (f,) = [f for f in findings(text) if f.code == code]
        assert f.fixes and f.fixes[0].title == "Apply the mask `offs < n`", name
        fixed = apply_fix(text, f.fixes[0])
        assert "mask=offs < n)" in fixed.split("\n")[f.span.line]
        assert [g.code for g in findings(fixed) if g.code.startswith("KS1")] == [], name


def test_inline_mask_over_a_name_advanced_in_a_loop_is_not_copied():
    text = HEAD + textwrap.dedent("""
        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            for _ in range(4):
                x = tl.load(x_ptr + offs, mask=offs < n)
                tl.store(x_ptr + offs, x * 2)
                offs += BLOCK
        """)
    ks103 = [f for f in findings(text) if f.code == "KS103"]
    assert ks103, "the unmasked store is still reported"
    assert all(not f.fixes for f in ks103)


def test_inline_mask_that_does_not_cover_a_shifted_store_is_not_offered():
    text = HEAD + textwrap.dedent("""
        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n - 1)
            tl.store(x_ptr + offs + 2, x)
        """)
    ks103 = [f for f in findings(text) if f.code == "KS103"]
    assert ks103 and all(not f.fixes for f in ks103)
