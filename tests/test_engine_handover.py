"""Engine behaviours pinned while closing the grid-checks requests of
analysis/engine/README.md: the per-kernel cache sees directives above the ``def``, launcher
defaults survive a launch inside a block."""
from __future__ import annotations

import textwrap

from kernelsight.analysis import analyze_source
from kernelsight.analysis.config import Config
from kernelsight.analysis.engine import constexpr_cases
from kernelsight.analysis.frontend import parse_file

# generous budgets: CI machines are slow and shared; the defaults are for the editor
CONFIG = Config(kernel_budget_ms=60000, solver_timeout_ms=5000)
HEADER = "import triton\nimport triton.language as tl\n\n"

VEC = HEADER + textwrap.dedent("""
    #@ tensor X = x_ptr[i: N]
    #@ tensor Z = z_ptr[i: N]
    #@ grid {grid}
    #@ computes Z[i] from X[i]
    @triton.jit
    def k(x_ptr, z_ptr, N, BLOCK: tl.constexpr = 128):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < N)
        tl.store(z_ptr + offs, x, mask=offs < N)
    """)


def _codes(text: str) -> list[str]:
    return [f.code for f in analyze_source(text, "k.py", CONFIG).report.findings]


def test_changing_a_directive_above_the_def_changes_the_result():
    # same kernel text (decorator to end), only the `#@ grid` line above it differs; the
    # engine's per-kernel cache must not hand back the first answer for the second text
    short = _codes(VEC.format(grid="(N // BLOCK,)"))
    full = _codes(VEC.format(grid="(cdiv(N, BLOCK),)"))
    assert "KS301" in short
    assert "KS301" not in full
    # and back again: still the right answer, now possibly from the cache
    assert "KS301" in _codes(VEC.format(grid="(N // BLOCK,)"))


LAUNCH_IN_BLOCK = HEADER + textwrap.dedent("""
    @triton.jit
    def k(x_ptr, z_ptr, N, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(z_ptr + offs, tl.load(x_ptr + offs))


    def launch(x, z, BLOCK=256):
        n = x.numel()
        if n % BLOCK == 0:
            {launch}
    """)


def test_launcher_default_is_read_when_the_launch_sits_in_a_block():
    text = LAUNCH_IN_BLOCK.format(launch="k[(n // BLOCK,)](x, z, n, BLOCK=BLOCK)")
    parsed = parse_file(text, "k.py")
    kernel = next(k for k in parsed.kernels if k.name == "k")
    cases, missing = constexpr_cases(kernel, parsed)
    assert [c["BLOCK"] for c in cases] == [256]
    assert "BLOCK" not in missing


def test_launcher_default_is_read_when_the_launch_is_the_body_of_a_with():
    text = LAUNCH_IN_BLOCK.replace("if n % BLOCK == 0:", "with torch.cuda.device(0):").format(
        launch="k[(n // BLOCK,)](x, z, n, BLOCK=BLOCK)")
    parsed = parse_file(text, "k.py")
    kernel = next(k for k in parsed.kernels if k.name == "k")
    cases, _ = constexpr_cases(kernel, parsed)
    assert [c["BLOCK"] for c in cases] == [256]


def _ks101(text: str):
    found = analyze_source(text, "k.py", CONFIG).report.findings
    return [f for f in found if f.code == "KS101"]


def test_missing_store_mask_gets_the_mask_the_loads_apply_as_quick_fix():
    from pathlib import Path
    path = Path(__file__).resolve().parent.parent / "examples" / "bugs" / \
        "vector_add_missing_mask.py"
    text = path.read_text(encoding="utf-8")
    hits = _ks101(text)
    assert hits and hits[0].fixes, [(f.code, f.fixes) for f in hits]
    edits = hits[0].fixes[0].edits
    assert any("mask=mask" in e.new_text for e in edits)


SHIFTED = HEADER + textwrap.dedent("""
    #@ tensor X = x_ptr[i: N]
    #@ tensor Z = z_ptr[i: N]
    #@ grid (cdiv(N, BLOCK),)
    @triton.jit
    def k(x_ptr, z_ptr, N, BLOCK: tl.constexpr = 128):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < N
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(z_ptr + offs + 1, x)
    """)


def test_neighbouring_mask_that_does_not_bound_the_offset_is_not_offered():
    # `offs < N` leaves offs + 1 == N enabled: applying it would not remove the finding
    hits = _ks101(SHIFTED)
    assert hits
    assert not hits[0].fixes


def _names_in(formula: str) -> set[str]:
    import re
    return set(re.findall(r"[A-Za-z_]\w*'*", formula))


def test_dot_counterexample_names_the_contracted_index_apart_from_the_k_loop():
    from pathlib import Path
    path = Path(__file__).resolve().parent.parent / "examples" / "bugs" / \
        "matmul_b_wrong_stride.py"
    found = analyze_source(path.read_text(encoding="utf-8"), str(path), CONFIG)
    [ks201] = [f for f in found.report.findings if f.code == "KS201"]
    cex = ks201.counterexample
    assert "k" in cex.loop  # the K loop's variable is `k` ...
    assert "k" not in cex.element  # ... so the contracted tile index is named otherwise
    (index,) = cex.element
    note = cex.notes[0]
    assert f"+ {index} " in note
    # the formula's index term is never a bare `k` (which would read as the loop variable)
    assert "+ k " not in note and not note.rstrip().endswith("+ k")


ROW_LOOP = HEADER + textwrap.dedent("""
    @triton.jit
    def k(x_ptr, z_ptr, N, BLOCK: tl.constexpr):
        for i in range(0, 4):
            offs = (tl.program_id(0) * 4 + i) * BLOCK + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < N)
            tl.store(z_ptr + offs, x, mask=offs < N)
    """)


def test_hover_names_the_tile_index_apart_from_a_loop_variable_called_i():
    from kernelsight.analysis import hover_at
    a = analyze_source(ROW_LOOP, "k.py", CONFIG)
    line = next(n for n, l in enumerate(ROW_LOOP.splitlines()) if "offs = (" in l)
    col = ROW_LOOP.splitlines()[line].index("offs")
    h = hover_at(a, line, col)
    assert h is not None
    # offs = (pid*4 + i)*BLOCK + <tile index>: the tile index must not print as `i`
    assert "i'" in h.title, h.title
    assert "+ i'" in h.title or h.title.endswith("i'"), h.title


PLAIN_2D = HEADER + textwrap.dedent("""
    @triton.jit
    def col_sum_kernel(X, Out, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
        col_mask = cols < N
        X += cols[None, :]
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for off in range(0, M, BLOCK_M):
            rows = off + tl.arange(0, BLOCK_M)[:, None]
            mask = (rows < M) & col_mask[None, :]
            acc += tl.load(X + rows * N, mask, other=0.0)
        tl.store(Out + cols, tl.sum(acc, axis=0), mask=col_mask)


    def col_sum(x):
        M = x.shape[0]
        N = x.numel() // M
        out = x.new_empty(N)
        grid = lambda meta: (triton.cdiv(N, meta["BLOCK_N"]),)
        col_sum_kernel[grid](x, out, M, N, BLOCK_M=32, BLOCK_N=64)
        return out
    """)


def test_plain_kernel_is_not_checked_against_a_guessed_tensor_shape():
    # the launch site alone would make X a 1-D tensor of M elements (flag-gems'
    # weight_bias_backward_kernel in the corpus); plain kernels keep the extent checks only
    found = analyze_source(PLAIN_2D, "k.py", CONFIG).report.findings
    assert not [f for f in found if f.code in ("KS101", "KS202", "KS203")], \
        [(f.code, f.message) for f in found]


UNROLLED = HEADER + textwrap.dedent("""
    @triton.jit
    def k(x_ptr, z_ptr, N, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for s in tl.static_range(8):
            cur = offs + s * N
            acc += tl.load(x_ptr + cur, mask=cur < 8 * N)
        tl.store(z_ptr + offs, acc, mask=offs < N)
    """)


def test_unrolled_loop_records_one_hover_per_span():
    hovers = analyze_source(UNROLLED, "k.py", CONFIG).hovers
    spans = [h.span for h in hovers if h.title.startswith("cur:")]
    assert len(spans) == 1, [h.title for h in hovers if h.title.startswith("cur:")]
    # the one kept is the first iteration's (s = 0), which hover always showed
    assert len(spans) == len(set(spans))


def test_hover_formula_of_a_huge_polynomial_is_cut_after_a_fixed_number_of_terms():
    from kernelsight.analysis.engine.poly import Poly, fmt
    from kernelsight.analysis.engine.render import HOVER_TERMS
    p = Poly({(f"s{k}",): k + 1 for k in range(500)})
    text = fmt(p, None, HOVER_TERMS)
    assert text.endswith(f"+ … ({500 - HOVER_TERMS} more terms)")
    assert text.count("+") == HOVER_TERMS  # HOVER_TERMS - 1 between terms, one before "…"
    assert fmt(p).count("+") == 499  # messages keep the whole formula
