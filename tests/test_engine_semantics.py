"""Semantics the engine models beyond bounds: undefined masked lanes of a load without
``other=`` (KS403), int32 products of program ids of every axis and of tiles against a known
grid (KS110), readable formulas in messages, and the sign of loaded data stated by
``#@ assume`` (KS401)."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kernelsight.analysis import analyze_source, frontend
from kernelsight.analysis.config import Config
from kernelsight.analysis.engine import _analyze
from kernelsight.analysis.engine.render import FORMULA_CHARS, elide

CFG = Config(kernel_budget_ms=60000, solver_timeout_ms=5000)
HEADER = "import triton\nimport triton.language as tl\n\n\n"
CASES = Path(__file__).resolve().parent / "data" / "cases"


def analyse(body: str):
    parsed = frontend.parse_file(HEADER + textwrap.dedent(body), "k.py")
    k = next(k for k in parsed.kernels if not k.is_helper)
    return _analyze(k, parsed, CFG)


def codes(body: str) -> list[str]:
    return [f.code for f in analyse(body).findings]


def one(body: str, code: str):
    (f,) = [f for f in analyse(body).findings if f.code == code]
    return f


# ------------------------------------------------------------------ KS403 undefined lanes
SUM = """
    @triton.jit
    def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr = 64):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        tl.store(y_ptr, tl.sum(x, axis=0))
    """


def test_sum_over_a_load_without_other_reads_undefined_lanes():
    f = one(SUM, "KS403")
    cex = f.counterexample
    assert cex.element["i"] >= cex.sizes["n"], "the lane is masked off"
    assert cex.sizes["BLOCK"] == 64
    assert "tl.sum" in f.message and "other=" in f.message
    assert f.fixes and f.fixes[0].edits[0].new_text.endswith("other=0.0")


def test_other_for_max_is_minus_infinity_and_the_fix_clears_the_finding():
    body = SUM.replace("tl.sum(", "tl.max(")
    f = one(body, "KS403")
    assert 'other=float("-inf")' in f.fixes[0].edits[0].new_text
    fixed = body.replace("mask=offs < n)", 'mask=offs < n, other=float("-inf"))')
    assert codes(fixed) == []


def test_elementwise_math_stored_under_the_same_mask_is_not_reported():
    assert codes("""
        @triton.jit
        def k(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr = 64):
            pid = tl.program_id(0)
            offs = pid * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n
            x = tl.load(x_ptr + offs, mask=mask)
            y = tl.load(y_ptr + offs, mask=mask)
            tl.store(z_ptr + offs, tl.exp(x) * y + 1.0, mask=mask)
        """) == []


def test_where_with_the_load_mask_cleans_the_lanes():
    assert codes(SUM.replace("tl.sum(x, axis=0)", "tl.sum(tl.where(offs < n, x, 0), axis=0)")) \
        == []


def test_multiplying_by_the_mask_cleans_the_lanes():
    assert codes(SUM.replace("tl.sum(x, axis=0)", "tl.sum(x * (offs < n), axis=0)")) == []


def test_reduction_along_an_axis_the_mask_does_not_depend_on_is_fine():
    assert codes("""
        @triton.jit
        def k(x_ptr, y_ptr, M, N: tl.constexpr = 64, BM: tl.constexpr = 16):
            pid = tl.program_id(0)
            rows = pid * BM + tl.arange(0, BM)
            cols = tl.arange(0, N)
            x = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=rows[:, None] < M)
            tl.store(y_ptr + rows, tl.sum(x, axis=1), mask=rows < M)
        """) == []


def test_unmasked_store_of_undefined_lanes_is_reported_at_the_store():
    body = """
        @triton.jit
        def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr = 64):
            offs = tl.arange(0, BLOCK)
            mask = offs < n
            x = tl.load(x_ptr + offs, mask=mask)
            tl.store(y_ptr + offs, x * 2.0)
        """
    f = one(body, "KS403")
    text = HEADER + textwrap.dedent(body)
    assert "tl.store" in text.splitlines()[f.span.line]
    assert f.counterexample.element["i"] >= f.counterexample.sizes["n"]
    assert f.fixes[0].edits[0].new_text == ", mask=mask"
    assert codes(body.replace("x * 2.0)", "x * 2.0, mask=mask)")) == []


def test_store_after_a_loop_of_undefined_lanes_names_the_iteration():
    f = one("""
        @triton.jit
        def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr = 64):
            acc = tl.zeros((BLOCK,), dtype=tl.float32)
            for off in range(0, n, BLOCK):
                offs = off + tl.arange(0, BLOCK)
                acc += tl.load(x_ptr + offs, mask=offs < n)
            tl.store(y_ptr + tl.arange(0, BLOCK), acc)
        """, "KS403")
    cex = f.counterexample
    (it,) = cex.loop.values()
    assert it * 64 + cex.element["i"] >= cex.sizes["n"]


def test_dot_contracting_undefined_lanes_is_reported():
    body = """
        @triton.jit
        def k(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr = 16, BN: tl.constexpr = 16,
              BK: tl.constexpr = 16):
            rm = tl.arange(0, BM)
            rn = tl.arange(0, BN)
            rk = tl.arange(0, BK)
            a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :], mask=rk[None, :] < KOTHER)
            b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :], mask=rk[:, None] < K, other=0.0)
            tl.store(c_ptr + rm[:, None] * BN + rn[None, :], tl.dot(a, b))
        """
    f = one(body.replace("KOTHER", "K"), "KS403")
    assert "tl.dot" in f.message
    assert f.counterexample.element["j"] >= f.counterexample.sizes["K"]
    assert codes(body.replace("KOTHER", "K, other=0.0")) == []


def test_undefined_lanes_are_blamed_on_the_load_without_other():
    res = analyse("""
        @triton.jit
        def k(x_ptr, w_ptr, y_ptr, n, BLOCK: tl.constexpr = 64):
            offs = tl.arange(0, BLOCK)
            mask = offs < n
            w = tl.load(w_ptr + offs, mask=mask)
            x = tl.load(x_ptr + offs, mask=mask, other=0.0)
            tl.store(y_ptr, tl.sum(x * w, axis=0))
        """)
    (f,) = [f for f in res.findings if f.code == "KS403"]
    assert f.span.line == HEADER.count("\n") + 5  # the load of w


def test_hover_says_masked_lanes_are_undefined():
    text = HEADER + textwrap.dedent(SUM)
    a = analyze_source(text, "k.py", CFG)
    lines = [t for h in a.hovers for t in (h.tags if hasattr(h, "tags") else [])]
    blob = " ".join(str(x) for x in lines) or " ".join(str(h) for h in a.hovers)
    assert "undefined" in blob
    assert "hold 0.0" not in blob


@pytest.mark.parametrize("case", ["R02", "R04", "R08", "R13", "R22"])
def test_fixed_cases_have_no_undefined_lane_finding(case):
    text = (CASES / f"{case}_fixed.py").read_text()
    a = analyze_source(text, f"{case}_fixed.py", CFG)
    assert [f for f in a.report.findings if f.code in ("KS403", "KS110")] == []


# ------------------------------------------------------------------ KS110 axes 1/2, tiles
AXIS1 = """
    GRID
    @triton.jit
    def k(x_ptr, T, V, BV: tl.constexpr = 64):
        i_v = tl.program_id(0)
        i_b = tl.program_id(1)WIDEN
        offs = i_v * BV + tl.arange(0, BV)
        tl.load(x_ptr + i_b * T + offs, mask=offs < T)
    """


def test_axis_1_product_is_reported_against_a_known_grid():
    f = one(AXIS1.replace("GRID", "#@ grid (cdiv(T, BV), B)").replace("WIDEN", ""), "KS110")
    cex = f.counterexample
    assert len(cex.program_id) == 2
    assert cex.program_id[1] * cex.sizes["T"] > 2 ** 31 - 1
    assert "i_b * T" in f.message
    assert f.fixes and "tl.int64" in f.fixes[0].edits[0].new_text


def test_axis_1_product_without_a_grid_is_not_reported():
    # the shared fixed case R13 is of this shape: nothing says axis 1 has many programs
    assert "KS110" not in codes(AXIS1.replace("GRID", "").replace("WIDEN", ""))


def test_widened_axis_1_program_id_is_not_reported():
    body = AXIS1.replace("GRID", "#@ grid (cdiv(T, BV), B)").replace("WIDEN", ".to(tl.int64)")
    assert "KS110" not in codes(body)


def test_axis_1_product_that_cannot_pass_int32_under_the_grid_is_proved():
    body = AXIS1.replace("GRID", "#@ grid (cdiv(T, BV), 4)\n#@ assume T <= 65536") \
        .replace("WIDEN", "")
    assert "KS110" not in codes(body)


TILE = """
    GRID
    @triton.jit
    def k(x_ptr, M, stride_m, BM: tl.constexpr = 64, BN: tl.constexpr = 32):
        pid = tl.program_id(0)
        rows = pid * BM + tl.arange(0, BM)
        cols = tl.arange(0, BN)
        tl.load(x_ptr + ROWS * stride_m + cols[None, :], mask=rows[:, None] < M)
    """


def test_tile_product_is_reported_against_a_known_grid():
    body = TILE.replace("GRID", "#@ grid (cdiv(M, BM),)").replace("ROWS", "rows[:, None]")
    f = one(body, "KS110")
    cex = f.counterexample
    row = cex.program_id[0] * 64 + cex.element["i"]
    assert row * cex.sizes["stride_m"] > 2 ** 31 - 1
    assert "rows[:, None] * stride_m" in f.message
    widened = TILE.replace("GRID", "#@ grid (cdiv(M, BM),)") \
        .replace("ROWS", "rows[:, None].to(tl.int64)")
    assert "KS110" not in codes(widened)


def test_tile_product_without_a_grid_is_not_reported():
    # the shared fixed case R02 multiplies row tiles by strides with no grid in the file
    assert "KS110" not in codes(TILE.replace("GRID", "").replace("ROWS", "rows[:, None]"))


def test_declared_tensor_within_max_elements_bounds_the_witness():
    # C is [M, N] with at most 2^20 elements: no tile product of its offsets passes 2^31
    body = """
        #@ tensor C = c_ptr[m: M, n: N] strides(stride_m, 1)
        #@ grid (cdiv(M, BM),)
        #@ assume M <= 1024, N <= 1024, stride_m <= 1024
        @triton.jit
        def k(c_ptr, M, N, stride_m, BM: tl.constexpr = 64, BN: tl.constexpr = 32):
            pid = tl.program_id(0)
            rows = pid * BM + tl.arange(0, BM)
            cols = tl.arange(0, BN)
            tl.load(c_ptr + rows[:, None] * stride_m + cols[None, :],
                    mask=(rows[:, None] < M) & (cols[None, :] < N))
        """
    assert "KS110" not in codes(body)


# ------------------------------------------------------------------ formulas in messages
def test_elide_keeps_short_text_and_cuts_the_middle_of_long_text():
    assert elide("pid*BLOCK + i") == "pid*BLOCK + i"
    long = " + ".join(f"{{(x{i}*BLOCK + i) // N{i}}}*stride{i}" for i in range(20))
    out = elide(long)
    assert len(out) <= FORMULA_CHARS
    assert "…" in out
    assert out.startswith("{(x0*BLOCK") and out.endswith("*stride19")


def test_store_alignment_related_line_caps_a_huge_formula():
    # the stored value's tag is a sum of many opaque `//` and `%` terms: the KS203 message
    # and related lines stay readable
    body = """
        #@ tensor X = x_ptr[m: M] strides(1)
        #@ tensor Y = y_ptr[m: M] strides(1)
        @triton.jit
        def k(x_ptr, y_ptr, M, D0, D1, D2, D3, D4, D5, D6, D7, BLOCK: tl.constexpr = 64):
            offs = tl.arange(0, BLOCK)
            idx = (offs // D0 % D1 + offs // D2 % D3 + offs // D4 % D5 + offs // D6 % D7
                   + offs // D1 % D3 + offs // D5 % D7 + offs // D0 % D3 + offs // D2 % D5
                   + offs // D4 % D7 + offs // D6 % D1 + offs // D3 % D0 + offs // D7 % D2)
            x = tl.load(x_ptr + idx, mask=idx < M)
            tl.store(y_ptr + offs, x, mask=offs < M)
        """
    f = one(body, "KS203")
    for text in [f.message] + [r.message for r in f.related]:
        assert len(text) < FORMULA_CHARS + 80, text
    assert any("…" in r.message for r in f.related)


# ------------------------------------------------------------------ KS401 data sign
MAXNORM = """
    DECL
    @triton.jit
    def k(mid_ptr, out_ptr, n, BLOCK: tl.constexpr = 64):
        offs = tl.arange(0, BLOCK)
        x = tl.load(mid_ptr + offs, mask=offs < n, other=0.0)
        tl.store(out_ptr, tl.max(x, axis=0))
    """


def test_zero_padding_under_max_names_the_assume_that_silences_it():
    f = one(MAXNORM.replace("DECL", "#@ tensor Mid = mid_ptr[i: n]"), "KS401")
    assert "#@ assume Mid[i] >= 0" in f.message
    f = one(MAXNORM.replace("DECL", ""), "KS401")
    assert "#@ tensor Mid = mid_ptr[i: SIZE]" in f.message and "#@ assume Mid[i] >= 0" in f.message


def test_assumed_non_negative_data_makes_zero_padding_neutral_for_max():
    body = MAXNORM.replace("DECL", "#@ tensor Mid = mid_ptr[i: n]\n#@ assume Mid[i] >= 0")
    assert codes(body) == []
    # an assumption that does not give the sign leaves the finding
    body = MAXNORM.replace("DECL", "#@ tensor Mid = mid_ptr[i: n]\n#@ assume Mid[i] >= -1")
    assert "KS401" in codes(body)


def test_where_picking_the_other_arm_where_the_load_was_masked_off_is_clean():
    # slice_scatter: the source is loaded only inside the slice; outside it the where takes
    # the input, so every stored lane is defined
    assert codes("""
        @triton.jit
        def k(inp_ptr, src_ptr, out_ptr, n, start, BLOCK: tl.constexpr = 64):
            idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = idx < n
            in_slice = idx >= start
            inp = tl.load(inp_ptr + idx, mask=mask)
            src = tl.load(src_ptr + idx - start, mask=mask & in_slice)
            tl.store(out_ptr + idx, tl.where(in_slice, src, inp), mask=mask)
        """) == []


def test_no_assume_hint_when_the_padding_also_reaches_a_sum():
    # logsumexp (shared case R08): a sign fact would silence the max but not the sum
    text = (CASES / "R08_bug.py").read_text()
    a = analyze_source(text, "R08_bug.py", CFG)
    (f,) = [f for f in a.report.findings if f.code == "KS401"]
    assert "assume" not in f.message


def test_scalar_load_guarded_by_the_program_count_is_not_reported_without_a_grid():
    # instance_norm: `m = tl.load(mean + c, mask=pid < M)` stored unmasked at `pid`
    body = """
        GRID
        @triton.jit
        def k(mean_ptr, out_ptr, M, C):
            pid = tl.program_id(0)
            m = tl.load(mean_ptr + pid % C, mask=pid < M)
            tl.store(out_ptr + pid, m)
        """
    assert codes(body.replace("GRID", "")) == []
    # a grid larger than M makes the unmasked store write undefined values
    f = one(body.replace("GRID", "#@ grid (M + 1,)"), "KS403")
    assert f.counterexample.program_id[0] >= f.counterexample.sizes["M"]


def test_dot_of_a_causally_selected_undefined_row_is_checked_at_the_store():
    # fla based/fused_chunk: rows past T are undefined, the causal where keeps them; they
    # only reach the output rows past T, which the store masks off
    body = """
        @triton.jit
        def k(z_ptr, b_ptr, o_ptr, T, BT: tl.constexpr = 16):
            r = tl.arange(0, BT)
            z = tl.load(z_ptr + r, mask=r < T)
            s = tl.where(r[:, None] >= r[None, :], z[:, None] + tl.zeros((BT, BT), tl.float32),
                         0.0)
            b = tl.load(b_ptr + r[:, None] * BT + r[None, :])
            o = tl.dot(s, b)
            tl.store(o_ptr + r[:, None] * BT + r[None, :], o, mask=STORE_MASK)
        """
    assert codes(body.replace("STORE_MASK", "r[:, None] < T")) == []
    f = one(body.replace("STORE_MASK", "r[None, :] < BT"), "KS403")
    assert f.counterexample.element["i"] >= f.counterexample.sizes["T"]


def test_counterexample_names_the_mask_as_written_when_its_formula_has_engine_terms():
    # a mask over a value merged by a condition the formula cannot show: the note shows the
    # mask argument as the user wrote it instead
    # (a value chosen by tl.where and never named prints as `(a if … else b)`: the condition
    # is not kept, so the formula does not say which lanes it covers)
    f = one("""
        @triton.jit
        def k(a_ptr, c_ptr, M, K, num_m, GROUP: tl.constexpr = 8, BM: tl.constexpr = 16,
              BK: tl.constexpr = 16):
            pid = tl.program_id(0)
            offs_m = tl.where(pid < num_m, pid // GROUP, pid % GROUP) * BM + tl.arange(0, BM)
            offs_k = tl.arange(0, BK)
            mask_a = (offs_m[:, None] < M) & (offs_k[None, :] < K)
            a = tl.load(a_ptr + offs_m[:, None] * K + offs_k[None, :], mask=mask_a)
            tl.store(c_ptr + offs_m, tl.sum(a, axis=1), mask=offs_m < M)
        """, "KS403")
    note = " ".join(f.counterexample.notes)
    assert "`mask_a`" in note and "either(" not in note and "{" not in note
    plain = one(SUM, "KS403")
    assert plain.counterexample.notes == ["mask i < n is false for this lane"]


def test_witness_names_the_program_that_reaches_a_program_independent_violation():
    # the lane past K fails in any program, but only program 3 reaches the load: the
    # program id completes the model under the guard instead of being left out
    f = one("""
        #@ tensor X = x_ptr[d: K]
        @triton.jit
        def k(x_ptr, y_ptr, K, BLOCK: tl.constexpr = 64):
            pid = tl.program_id(0)
            offs = tl.arange(0, BLOCK)
            if pid == 3:
                x = tl.load(x_ptr + offs, mask=offs < K + 1)
                tl.store(y_ptr + offs, x)
        """, "KS101")
    assert f.counterexample.program_id == (3,)


def test_witness_of_a_k_tail_in_every_program_names_a_program():
    src = (Path(__file__).resolve().parents[1] / "examples" / "bugs" /
           "matmul_mask_wrong_bound.py").read_text()
    (f,) = [f for f in analyze_source(src, "m.py", CFG).report.findings if f.code == "KS101"]
    assert f.counterexample.program_id is not None
