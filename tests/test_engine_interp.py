"""The abstract interpreter and the per-program checks on small kernels: what is modelled
(broadcasts, loops, pointers, block pointers, descriptors, helpers, tags, pads), that
unmodelled constructs stay silent, and that budgets hold."""
from __future__ import annotations

import textwrap

import pytest

from kernelsight.analysis import frontend
from kernelsight.analysis.config import Config
from kernelsight.analysis.engine import _analyze
from kernelsight.analysis.engine.interp import Interp
from kernelsight.analysis.engine.poly import Poly, fmt

CFG = Config(kernel_budget_ms=60000, solver_timeout_ms=5000)
HEADER = "import triton\nimport triton.language as tl\n\n\n"


def _parse(body: str):
    text = HEADER + textwrap.dedent(body)
    return frontend.parse_file(text, "k.py")


def run(body: str, consts: dict | None = None) -> Interp:
    parsed = _parse(body)
    k = next(k for k in parsed.kernels if not k.is_helper)
    it = Interp(k, parsed, CFG, consts or {}, deadline=1e18)
    it.run()
    return it


def analyse(body: str, config: Config = CFG):
    parsed = _parse(body)
    k = next(k for k in parsed.kernels if not k.is_helper)
    return _analyze(k, parsed, config)


def codes(body: str) -> list[str]:
    return [f.code for f in analyse(body).findings]


def test_broadcast_renames_index_variables_of_a_2d_pointer_tile():
    it = run("""
        @triton.jit
        def k(x_ptr, s0, BM: tl.constexpr, BN: tl.constexpr):
            rm = tl.arange(0, BM)
            rn = tl.arange(0, BN)
            tl.load(x_ptr + rm[:, None] * s0 + rn[None, :])
        """, {"BM": 16, "BN": 32})
    (acc,) = it.accesses
    assert acc.shape == (16, 32)
    assert acc.offset == Poly.atom("%0") * Poly.atom("s0") + Poly.atom("%1")


def test_loop_carried_pointer_becomes_an_induction_on_the_iteration_counter():
    it = run("""
        @triton.jit
        def k(a_ptr, stride_ak, K, BK: tl.constexpr):
            offs = tl.arange(0, BK)
            p = a_ptr + offs * stride_ak
            for kk in range(0, K, BK):
                tl.load(p, mask=offs < K - kk)
                p += BK * stride_ak
        """, {"BK": 16})
    (acc,) = it.accesses
    assert acc.offset == Poly.atom("%0") * Poly.atom("stride_ak") + \
        Poly.atom("@kk") * Poly.atom("BK") * Poly.atom("stride_ak")
    (loop,) = acc.loops
    assert loop.var == "kk" and loop.hi == Poly.atom("K")


def test_static_range_is_unrolled_with_concrete_iterations():
    it = run("""
        @triton.jit
        def k(x_ptr):
            for i in tl.static_range(3):
                tl.load(x_ptr + i)
        """)
    assert [a.offset.const_value() for a in it.accesses] == [0, 1, 2]


def test_helper_jit_function_is_inlined():
    it = run("""
        @triton.jit
        def row_offsets(row, stride, BLOCK: tl.constexpr):
            return row * stride + tl.arange(0, BLOCK)

        @triton.jit
        def k(x_ptr, stride, BLOCK: tl.constexpr):
            offs = row_offsets(tl.program_id(0), stride, BLOCK)
            tl.load(x_ptr + offs)
        """, {"BLOCK": 8})
    assert it.unknown_kinds == {}
    assert fmt(it.accesses[0].offset) == "pid0*stride + %0"


def test_block_pointer_access_uses_offsets_strides_and_boundary_check():
    it = run("""
        @triton.jit
        def k(a_ptr, M, K, sm, sk, BM: tl.constexpr, BK: tl.constexpr):
            p = tl.make_block_ptr(a_ptr, (M, K), (sm, sk), (tl.program_id(0) * BM, 0),
                                  (BM, BK), (1, 0))
            p = tl.advance(p, (0, BK))
            tl.load(p, boundary_check=(0,), padding_option="zero")
        """, {"BM": 16, "BK": 32})
    (acc,) = it.accesses
    assert acc.via == "blockptr" and acc.checked_dims == (0,)
    A = Poly.atom
    assert acc.offset == A("%0") * A("sm") + A("%1") * A("sk") + A("BK") * A("sk") + \
        A("BM") * A("pid0") * A("sm")
    assert acc.mask is not None


def test_block_pointer_dim_without_boundary_check_is_reported_out_of_bounds():
    res = analyse("""
        #@ tensor A = a_ptr[m: M, k: K] strides(sm, sk)
        @triton.jit
        def k(a_ptr, M, K, sm, sk, BM: tl.constexpr = 16, BK: tl.constexpr = 32):
            p = tl.make_block_ptr(a_ptr, (M, K), (sm, sk), (tl.program_id(0) * BM, 0),
                                  (BM, BK), (1, 0))
            tl.load(p, boundary_check=(0,))
        """)
    assert [f.code for f in res.findings] == ["KS101"]
    assert "A[k = " in res.findings[0].message


def test_tensor_descriptor_access_is_bounds_checked_by_construction():
    res = analyse("""
        #@ tensor A = a_ptr[m: M, k: K] strides(K, 1)
        @triton.jit
        def k(a_ptr, M, K, BM: tl.constexpr = 16, BK: tl.constexpr = 32):
            d = tl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BM, BK])
            x = d.load([tl.program_id(0) * BM, 0])
            d.store([tl.program_id(0) * BM, 0], x)
        """)
    assert res.findings == [] and res.unknowns == 0
    assert res.tally.proved > 0


def test_unmodelled_construct_is_counted_and_silent():
    res = analyse("""
        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr = 64):
            offs = tl.arange(0, BLOCK)
            y = tl.reshape(tl.load(x_ptr + offs, mask=offs < n), (8, 8))
            tl.store(x_ptr + offs, tl.reshape(y, (64,)))
        """)
    assert res.unknown_kinds.get("reshape", 0) >= 1
    assert all(f.code != "KS202" for f in res.findings)


def test_time_budget_gives_status_budget_and_ks911():
    res = analyse("""
        @triton.jit
        def k(x_ptr, BLOCK: tl.constexpr = 64):
            for i in tl.static_range(60):
                for j in tl.static_range(60):
                    x = tl.load(x_ptr + i * 60 + j + tl.arange(0, BLOCK))
        """, Config(kernel_budget_ms=50))
    assert res.status == "budget"
    assert [f.code for f in res.findings] == ["KS911"]


def test_inferred_extent_reports_negative_offsets_but_not_the_n_plus_one_idiom():
    body = """
        @triton.jit
        def k(cu_ptr, y_ptr, n, BLOCK: tl.constexpr = 64):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            nxt = tl.load(cu_ptr + offs SHIFT, mask=offs < n)
            tl.store(y_ptr + offs, nxt, mask=offs < n)
        """
    # cu_seqlens-style arrays hold n + 1 entries: reading offs + 1 is the idiom
    assert codes(body.replace("SHIFT", "+ 1")) == []
    res = analyse(body.replace("SHIFT", "- 1"))
    (f,) = res.findings
    assert f.code == "KS102" and f.counterexample.values["offset"] == -1


def test_pointer_advanced_by_the_wrong_block_is_a_contraction_mismatch():
    body = """
        #@ tensor A = a_ptr[m: M, k: K] strides(sam, sak)
        #@ tensor B = b_ptr[k: K, n: N] strides(sbk, sbn)
        @triton.jit
        def k(a_ptr, b_ptr, M, N, K, sam, sak, sbk, sbn,
              BM: tl.constexpr = 16, BN: tl.constexpr = 32, BK: tl.constexpr = 16):
            rm = tl.arange(0, BM)
            rn = tl.arange(0, BN)
            rk = tl.arange(0, BK)
            a_p = a_ptr + rm[:, None] * sam + rk[None, :] * sak
            b_p = b_ptr + rk[:, None] * sbk + rn[None, :] * sbn
            acc = tl.zeros((BM, BN), dtype=tl.float32)
            for kk in range(0, K, BK):
                a = tl.load(a_p)
                b = tl.load(b_p)
                acc += tl.dot(a, b)
                a_p += BK * sak
                b_p += STEP * sbk
        """
    assert "KS201" not in codes(body.replace("STEP", "BK"))
    res = analyse(body.replace("STEP", "BN"))
    f = next(f for f in res.findings if f.code == "KS201")
    cex = f.counterexample
    assert cex.values["a.k"] != cex.values["b.k"]
    assert cex.loop["kk_iter"] >= 1


def test_transposed_store_is_misaligned():
    body = """
        #@ tensor X = x_ptr[m: M, n: N] strides(sxm, sxn)
        #@ tensor Y = y_ptr[m: M, n: N] strides(sym, syn)
        @triton.jit
        def k(x_ptr, y_ptr, M, N, sxm, sxn, sym, syn, B: tl.constexpr = 16):
            rm = tl.program_id(0) * B + tl.arange(0, B)
            rn = tl.program_id(1) * B + tl.arange(0, B)
            m = (rm[:, None] < M) & (rn[None, :] < N)
            x = tl.load(x_ptr + rm[:, None] * sxm + rn[None, :] * sxn, mask=m)
            tl.store(y_ptr + STORE, x, mask=m)
        """
    assert "KS203" not in codes(body.replace("STORE", "rm[:, None] * sym + rn[None, :] * syn"))
    got = codes(body.replace("STORE", "rn[:, None] * sym + rm[None, :] * syn"))
    assert "KS203" in got


def test_row_statistic_from_the_wrong_axis_mixes_coordinates():
    body = """
        #@ tensor X = x_ptr[r: R, c: C] strides(C, 1)
        @triton.jit
        def k(x_ptr, y_ptr, R, C, B: tl.constexpr = 16):
            rr = tl.arange(0, B)
            cc = tl.arange(0, B)
            x = tl.load(x_ptr + rr[:, None] * C + cc[None, :])
            m = tl.max(x, axis=AXIS)
            tl.store(y_ptr + rr[:, None] * C + cc[None, :], x - m[:, None])
        """
    assert "KS202" not in codes(body.replace("AXIS", "1"))
    assert "KS202" in codes(body.replace("AXIS", "0"))


def test_user_assert_is_checked_at_its_program_point():
    body = """
        @triton.jit
        def k(x_ptr, BLOCK: tl.constexpr = 64):
            pid = tl.program_id(0)
            start = pid * BLOCK
            #@ assert start >= LIMIT
            tl.load(x_ptr + start + tl.arange(0, BLOCK))
        """
    assert "KS204" not in codes(body.replace("LIMIT", "0"))
    res = analyse(body.replace("LIMIT", "64"))
    f = next(f for f in res.findings if f.code == "KS204")
    assert f.counterexample.program_id == (0,)


def test_neutral_padding_and_where_replacement_are_not_reported():
    body = """
        @triton.jit
        def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr = 64):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=OTHER)
            x = tl.where(offs < n, x, float("-inf"))
            tl.store(y_ptr, tl.max(x, axis=0))
        """
    assert codes(body.replace("OTHER", "0.0")) == []
    no_where = body.replace('x = tl.where(offs < n, x, float("-inf"))', "pass")
    assert codes(no_where.replace("OTHER", "0.0")) == ["KS401"]
    assert codes(no_where.replace("OTHER", 'float("-inf")')) == []


def test_max_of_absolute_values_accepts_zero_padding():
    assert codes("""
        @triton.jit
        def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr = 64):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
            tl.store(y_ptr, tl.max(tl.abs(x), axis=0))
        """) == []


def test_accumulator_absorbs_zero_padding_across_a_loop():
    assert codes("""
        @triton.jit
        def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr = 64):
            acc = tl.zeros((BLOCK,), dtype=tl.float32)
            for off in range(0, n, BLOCK):
                offs = off + tl.arange(0, BLOCK)
                acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0)
            tl.store(y_ptr, tl.sum(acc, axis=0))
        """) == []


def test_low_precision_accumulator_is_reported_with_a_dtype_fix():
    res = analyse("""
        @triton.jit
        def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr = 64):
            acc = tl.zeros((BLOCK,), dtype=tl.float16)
            for off in range(0, n, BLOCK):
                offs = off + tl.arange(0, BLOCK)
                acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float16)
            tl.store(y_ptr + tl.arange(0, BLOCK), acc)
        """)
    (f,) = [f for f in res.findings if f.code == "KS402"]
    assert f.fixes[0].edits[0].new_text == "tl.float32"


def test_int64_row_index_is_not_an_overflow():
    body = """
        @triton.jit
        def k(x_ptr, stride, n, BLOCK: tl.constexpr = 64):
            row = tl.program_id(0)ROW
            offs = tl.arange(0, BLOCK)
            tl.load(x_ptr + row * stride + offs, mask=offs < n)
        """
    assert codes(body.replace("ROW", "")) == ["KS110"]
    assert codes(body.replace("ROW", ".to(tl.int64)")) == []


def test_assumed_small_tensor_proves_no_overflow():
    body = """
        #@ assume n_rows * stride <= 1000000
        @triton.jit
        def k(x_ptr, stride, n_rows, BLOCK: tl.constexpr = 64):
            #@ grid (n_rows,)
            row = tl.program_id(0)
            tl.load(x_ptr + row * stride + tl.arange(0, BLOCK))
        """
    res = analyse(body)
    assert "KS110" not in [f.code for f in res.findings]


def test_foreign_stride_from_the_launch_site():
    res = analyse("""
        @triton.jit
        def k(x_ptr, y_ptr, sx, sy, n, BLOCK: tl.constexpr):
            row = tl.program_id(0).to(tl.int64)
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + row * sx + offs, mask=offs < n)
            tl.store(y_ptr + row * sx + offs, x, mask=offs < n)

        def launch(x, y):
            k[(x.shape[0],)](x, y, x.stride(0), y.stride(0), x.shape[1], BLOCK=128)
        """)
    (f,) = [f for f in res.findings if f.code == "KS107"]
    assert "y_ptr" in f.message and "x.stride(0)" in f.message


def test_launch_site_literal_and_launcher_default_fill_constexprs():
    from kernelsight.analysis.engine import constexpr_cases

    parsed = _parse("""
        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr, WARPS_HINT: tl.constexpr):
            tl.load(x_ptr + tl.arange(0, BLOCK))

        def launch(x, BLOCK=256):
            k[(1,)](x, x.numel(), BLOCK=BLOCK, WARPS_HINT=4)
        """)
    cases, missing = constexpr_cases(parsed.kernels[0], parsed)
    assert cases == [{"BLOCK": 256, "WARPS_HINT": 4}] and missing == {}


def test_hover_records_shape_and_offset_formula():
    res = analyse("""
        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr = 64):
            pid_m = tl.program_id(0)
            offs = pid_m * BLOCK + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n)
        """)
    titles = [h.title for h in res.hovers]
    assert "offs: tile[64] int32 = BLOCK*pid_m + i" in titles
    load = next(h for h in res.hovers if h.title.startswith("tl.load"))
    assert "offset = BLOCK*pid_m + i" in load.tags and load.invariants


@pytest.mark.parametrize("snippet", [
    "x = tl.load(x_ptr + tl.arange(0, 3))",            # not a power of two: still no crash
    "for i in range(n):\n                n = n - 1",
    "while n > 0:\n                n = n // 2",
    "x = tl.load(x_ptr)\n            x = x.reshape((1,))[None, None, :]",
    "a, b = tl.split(tl.load(x_ptr + tl.arange(0, 2)))",
    "y = [i for i in range(3)]",
    "tl.store(x_ptr + tl.arange(0, 4), tl.zeros((8,), dtype=tl.float32))",
])
def test_odd_kernels_do_not_crash(snippet):
    res = analyse(f"""
        @triton.jit
        def k(x_ptr, n):
            {snippet}
        """)
    assert res.status == "analysed"


def test_early_return_guards_the_rest_of_the_kernel():
    body = """
        @triton.jit
        def k(g_ptr, y_ptr, K, BLOCK: tl.constexpr = 64):
            i = tl.program_id(0).to(tl.int64)
            GUARD
            offs = tl.arange(0, BLOCK)
            prev = tl.load(g_ptr + (i - 1) * K + offs, mask=offs < K)
            tl.store(y_ptr + i * K + offs, prev, mask=offs < K)
        """
    assert codes(body.replace("GUARD", "if i == 0:\n                return")) == []
    assert codes(body.replace("GUARD", "pass")) == ["KS102"]


def test_where_with_the_accumulator_as_other_arm_keeps_its_values():
    assert codes("""
        @triton.jit
        def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr = 64):
            lo = tl.full((BLOCK,), float("inf"), dtype=tl.float32)
            for off in range(0, n, BLOCK):
                offs = off + tl.arange(0, BLOCK)
                a = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
                lo = tl.where(offs < n, tl.minimum(lo, a), lo)
            tl.store(y_ptr, tl.min(lo, axis=0))
        """) == []
