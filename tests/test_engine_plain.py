"""Plain kernels (no ``#@`` directive) with a launch site in the same file: the engine infers
tensors and grid from the launch (analysis/infer.py) and still reports each bug class the
kernel's own masks, wheres and products show, with the code that names the cause.
Inference only declares what the launch site fixes: a guessed shape would turn correct
kernels into false KS101s."""
from __future__ import annotations

import textwrap

import pytest

from kernelsight.analysis import analyze_source, engine
from kernelsight.analysis.config import Config
from kernelsight.analysis.frontend import parse_file
from kernelsight.analysis.infer import infer_annotations

CONFIG = Config(kernel_budget_ms=60000, solver_timeout_ms=5000)
HEAD = "import torch\nimport triton\nimport triton.language as tl\n\n"


def analyse(body: str):
    engine._CACHE.clear()
    return analyze_source(HEAD + textwrap.dedent(body), "k.py", CONFIG).report.findings


def inferred(body: str, kernel: str) -> list[str]:
    parsed = parse_file(HEAD + textwrap.dedent(body), "k.py")
    return infer_annotations(parsed, parsed.kernel(kernel))


def line_of(body: str, needle: str) -> int:
    """0-based line in the analysed text of the first line containing ``needle``."""
    rows = (HEAD + textwrap.dedent(body)).splitlines()
    return next(i for i, r in enumerate(rows) if needle in r)


def test_hook_is_on():
    assert engine.INFER_ANNOTATIONS


SCALE = """
    @triton.jit
    def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        tl.store(y_ptr + offs, x * 2)


    def scale(x, BLOCK=256):
        y = torch.empty_like(x)
        n = x.numel()
        scale_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK)
        return y
    """


def test_readme_example_in_plain_form_reports_the_unmasked_store_with_a_counterexample():
    assert "#@ tensor Y = y_ptr[d_n: n]" in inferred(SCALE, "scale_kernel")
    found = [f for f in analyse(SCALE) if f.span.line == line_of(SCALE, "tl.store")]
    assert [f.code for f in found] == ["KS101"], [(f.code, f.message) for f in found]
    cex = found[0].counterexample
    # a lane past n in some program: n, BLOCK, program id and lane are all named
    assert set(cex.sizes) == {"n", "BLOCK"} and cex.program_id and cex.element
    lane = cex.element["i"]
    assert cex.program_id[0] * cex.sizes["BLOCK"] + lane >= cex.sizes["n"]
    assert any("inferred from this launch" in r.message for r in found[0].related)


def test_readme_example_with_the_store_masked_is_clean():
    assert analyse(SCALE.replace("x * 2)", "x * 2, mask=offs < n)")) == []


def test_same_pointer_unmasked_store_keeps_ks103_over_the_inferred_declaration():
    body = SCALE.replace("tl.store(y_ptr", "tl.store(x_ptr")
    found = [f for f in analyse(body) if f.span.line == line_of(body, "tl.store")]
    assert [f.code for f in found] == ["KS103"], [(f.code, f.message) for f in found]


def test_floor_divided_grid_is_reported_on_plain_code():
    body = SCALE.replace("x * 2)", "x * 2, mask=offs < n)").replace(
        "(triton.cdiv(n, BLOCK),)", "(n // BLOCK,)")
    codes = {f.code for f in analyse(body)}
    assert {"KS305", "KS301"} <= codes, codes


DEAD_MASK = """
    @triton.jit
    def copy2d_kernel(x_ptr, y_ptr, M, N, stride_xm, stride_ym,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + (rm % M)[:, None] * stride_xm + (rn % N)[None, :])
        mask = (rm < M)[:, None] & (rn < N)[None, :]
        tl.store(y_ptr + rm[:, None].to(tl.int64) * stride_ym + rn[None, :], x)


    def copy2d(x):
        M, N = x.shape
        y = torch.empty_like(x)
        grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
        copy2d_kernel[grid](x, y, M, N, x.stride(0), y.stride(0), BLOCK_M=32, BLOCK_N=32)
        return y
    """


def test_computed_mask_not_applied_is_ks104_on_plain_code():
    assert "#@ tensor Y = y_ptr[m: M, n: N] strides(stride_ym, 1)" in \
        inferred(DEAD_MASK, "copy2d_kernel")
    found = [f for f in analyse(DEAD_MASK) if f.span.line == line_of(DEAD_MASK, "tl.store")]
    assert "KS104" in [f.code for f in found], [(f.code, f.message) for f in found]
    assert not [f for f in found if f.code == "KS101"]


SHIFT = """
    @triton.jit
    def shift_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        prev = tl.where(offs > 0, tl.load(x_ptr + offs - 1, mask=mask), 0.0)
        tl.store(y_ptr + offs, prev, mask=mask)


    def shift(x, BLOCK=256):
        n = x.numel()
        y = torch.empty_like(x)
        shift_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK)
        return y
    """


def test_load_under_where_is_ks105_and_the_shift_is_no_tag_finding_on_plain_code():
    assert "#@ tensor X = x_ptr[d_n: n]" in inferred(SHIFT, "shift_kernel")
    found = analyse(SHIFT)
    assert [f.code for f in found] == ["KS105"], [(f.code, f.message) for f in found]
    assert found[0].span.line == line_of(SHIFT, "tl.where")


AXIS = """
    @triton.jit
    def scale_rows_kernel(x_ptr, y_ptr, M, N, stride_x, stride_y, BLOCK_N: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + row * stride_x + cols, mask=cols < N)
        out_cols = tl.arange(0, BLOCK_N)
        tl.store(y_ptr + row * stride_y + out_cols, x * 2, mask=out_cols < N)


    def scale_rows(x, BLOCK_N=128):
        M, N = x.shape
        y = torch.empty_like(x)
        scale_rows_kernel[(M, GRID1)](x, y, M, N, x.stride(0), y.stride(0), BLOCK_N=BLOCK_N)
        return y
    """


def test_store_ignoring_a_split_grid_axis_is_ks306_on_plain_code():
    body = AXIS.replace("GRID1", "triton.cdiv(N, BLOCK_N)")
    assert "#@ grid (M, cdiv(N, BLOCK_N))" in inferred(body, "scale_rows_kernel")
    found = [f for f in analyse(body) if f.code == "KS306"]
    assert found and found[0].span.line == line_of(body, "tl.store")


def test_store_ignoring_an_axis_of_one_program_is_not_reported():
    # the launch site says axis 1 has a single program: nothing is written twice
    assert not [f for f in analyse(AXIS.replace("GRID1", "1")) if f.code == "KS306"]


ROWS = """
    @triton.jit
    def row_copy_kernel(x_ptr, y_ptr, M, N, stride_x, stride_y, BLOCK: tl.constexpr):
        row = tl.program_id(0)ROW
        cols = tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_ptr + row * stride_x + cols, mask=mask)
        tl.store(y_ptr + row * stride_y + cols, x, mask=mask)


    def row_copy(x):
        M, N = x.shape
        y = torch.empty_like(x)
        row_copy_kernel[(M,)](x, y, M, N, x.stride(0), y.stride(0),
                             BLOCK=triton.next_power_of_2(N))
        return y
    """


def test_int32_row_offset_overflow_is_ks110_on_plain_code_and_int64_is_clean():
    body = ROWS.replace("ROW", "")
    assert "#@ tensor X = x_ptr[m: M, n: N] strides(stride_x, 1)" in \
        inferred(body, "row_copy_kernel")
    found = analyse(body)
    assert {f.code for f in found} == {"KS110"}, [(f.code, f.message) for f in found]
    assert analyse(ROWS.replace("ROW", ".to(tl.int64)")) == []


def test_foreign_stride_is_ks107_on_plain_code_and_the_tensor_is_not_inferred():
    body = ROWS.replace("ROW", ".to(tl.int64)").replace("y_ptr + row * stride_y",
                                                              "y_ptr + row * stride_x")
    # y is allocated fresh (contiguous) while x may be a strided view: x's row stride is wrong
    body = body.replace("y = torch.empty_like(x)", "y = torch.empty((M, N), device=x.device)")
    # y's address uses x's stride: declaring y with it would be a guess
    assert not any(l.startswith("#@ tensor Y") for l in inferred(body, "row_copy_kernel"))
    found = [f for f in analyse(body) if f.code == "KS107"]
    assert found and "y_ptr" in found[0].message


@pytest.mark.parametrize("launcher,why", [
    ("    M = x.shape[0]\n    N = x.numel() // M\n", "N is no size the launch names"),
    ("    N = x.shape[1]\n    M = x.shape[0]\n",
     "shape[0], shape[1] without strides: rank unknown"),
    ("    M, N, K = x.shape\n", "3-D tensor with two sizes passed"),
])
def test_partial_shapes_give_no_tensor_declaration(launcher, why):
    body = textwrap.dedent("""
        @triton.jit
        def k(X, Out, M, N, BLOCK: tl.constexpr):
            cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            for r in range(0, M):
                v = tl.load(X + r * N + cols, mask=cols < N)
                tl.store(Out + r * N + cols, v, mask=cols < N)


        def launch(x, out):
        """) + launcher + "    k[(triton.cdiv(N, 64),)](x, out, M, N, BLOCK=64)\n"
    assert not any(l.startswith("#@ tensor X") for l in inferred(body, "k")), why


def test_numel_with_a_strided_row_offset_gives_no_flat_declaration():
    body = """
        @triton.jit
        def k(x_ptr, stride_row, T, N, BLOCK: tl.constexpr):
            row = tl.program_id(0).to(tl.int64)
            cols = tl.arange(0, BLOCK)
            tl.store(x_ptr + row * stride_row + cols, 0.0, mask=cols < N)


        def launch(x):
            T = x.numel()
            k[(x.shape[0],)](x, x.stride(0), T, x.shape[1], BLOCK=64)
        """
    assert not any(l.startswith("#@ tensor X") for l in inferred(body, "k"))
    assert not [f for f in analyse(body) if f.code in ("KS101", "KS106")]


def test_a_size_assigned_in_a_branch_of_the_launcher_is_not_traced():
    # `group_size` is D only when the caller passed None: not a size of x
    body = """
        @triton.jit
        def k(x_ptr, stride_row, T, D, BLOCK: tl.constexpr):
            row = tl.program_id(0).to(tl.int64)
            cols = tl.arange(0, BLOCK)
            tl.store(x_ptr + row * stride_row + cols, 0.0, mask=cols < D)


        def launch(x, group_size=None):
            T, D = x.shape
            if group_size is None:
                group_size = D
            k[(T,)](x, x.stride(0), T, group_size, BLOCK=64)
        """
    assert not any(l.startswith("#@ tensor X") for l in inferred(body, "k"))


def test_a_pointer_addressed_by_loaded_indices_is_not_declared():
    body = """
        @triton.jit
        def gather_kernel(src_ptr, idx_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n
            idx = tl.load(idx_ptr + offs, mask=mask)
            tl.store(out_ptr + offs, tl.load(src_ptr + idx, mask=mask), mask=mask)


        def gather(src, idx, BLOCK=256):
            out = torch.empty_like(src)
            n = src.numel()
            gather_kernel[(triton.cdiv(n, BLOCK),)](src, idx, out, n, BLOCK=BLOCK)
            return out
        """
    lines = inferred(body, "gather_kernel")
    assert "#@ tensor OUT = out_ptr[d_n: n]" in lines
    assert not any(l.startswith("#@ tensor SRC") for l in lines)
    assert analyse(body) == []


EVEN = """
    @triton.jit
    def row_sum_kernel(x_ptr, out_ptr, M, K, stride_m, BLOCK_K: tl.constexpr,
                       EVEN_K: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK_K)
        acc = tl.zeros([BLOCK_K], dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            if EVEN_K:
                acc += tl.load(x_ptr + row * stride_m + k0 + cols)
            else:
                acc += tl.load(x_ptr + row * stride_m + k0 + cols, mask=k0 + cols < K,
                               other=0.0)
        tl.store(out_ptr + row, tl.sum(acc, axis=0))


    def row_sum(x):
        M, K = x.shape
        out = torch.empty(M, device=x.device)
        row_sum_kernel[(M,)](x, out, M, K, x.stride(0), BLOCK_K=64LAUNCH)
        return out
    """


def test_unmasked_branch_on_a_flag_the_launch_does_not_pass_is_not_judged():
    # a host heuristic (EVEN_K = K % BLOCK_K == 0) sets the flag: nothing to check it against
    body = EVEN.replace("LAUNCH", "")
    assert "#@ tensor X = x_ptr[m: M, k: K] strides(stride_m, 1)" in \
        inferred(body, "row_sum_kernel")
    assert not [f for f in analyse(body) if f.code == "KS101"]


def test_unmasked_branch_on_a_flag_the_launch_sets_is_reported():
    body = EVEN.replace("LAUNCH", ", EVEN_K=True")
    found = [f for f in analyse(body) if f.code == "KS101"]
    assert found and found[0].span.line == line_of(body, "acc += tl.load(x_ptr + row")


def test_mask_free_kernel_is_not_judged_against_a_size_it_never_compares():
    # the host launches it only when BLOCK == n_cols; the kernel never mentions n_cols in a mask
    body = """
        @triton.jit
        def row_scale_kernel(x_ptr, y_ptr, n_rows, n_cols, stride_x, stride_y,
                             BLOCK: tl.constexpr):
            row = tl.program_id(0).to(tl.int64)
            cols = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + row * stride_x + cols)
            tl.store(y_ptr + row * stride_y + cols, x * 2)


        def row_scale(x):
            n_rows, n_cols = x.shape
            y = torch.empty_like(x)
            row_scale_kernel[(n_rows,)](x, y, n_rows, n_cols, x.stride(0), y.stride(0),
                                        BLOCK=triton.next_power_of_2(n_cols))
            return y
        """
    assert "#@ tensor X = x_ptr[rows: n_rows, cols: n_cols] strides(stride_x, 1)" in \
        inferred(body, "row_scale_kernel")
    assert not [f for f in analyse(body) if f.code == "KS101"]


WRONG_BOUND = """
    @triton.jit
    def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_rows, n_cols,
                       BLOCK_SIZE: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK_SIZE)
        mask = cols < BOUND
        x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
        x = x - tl.max(x, axis=0)
        num = tl.exp(x)
        den = tl.sum(num, axis=0)
        tl.store(out_ptr + row * out_row_stride + cols, num / den, mask=mask)


    def softmax(x):
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        BLOCK_SIZE = triton.next_power_of_2(n_cols)
        softmax_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_rows, n_cols,
                                  BLOCK_SIZE=BLOCK_SIZE)
        return y
    """


def test_mask_against_the_size_of_the_other_dimension_is_ks101_with_the_meant_size():
    # `cols < n_rows`: n_cols is never compared, but the mask bounds the column coordinate
    # by the tensor's row count, so the column bound is checked and the lane past the row
    # that n_rows > n_cols enables is reported
    body = WRONG_BOUND.replace("BOUND", "n_rows")
    assert "#@ tensor X = in_ptr[rows: n_rows, cols: n_cols] strides(in_row_stride, 1)" in \
        inferred(body, "softmax_kernel")
    found = [f for f in analyse(body) if f.code == "KS101"]
    assert [f.span.line for f in found] == [line_of(body, "x = tl.load"),
                                           line_of(body, "tl.store")], \
        [(f.code, f.message) for f in found]
    load = found[0]
    cex = load.counterexample
    assert cex.sizes["n_rows"] > cex.sizes["n_cols"]
    lane = cex.element["i"]
    assert cex.sizes["n_cols"] <= lane < min(cex.sizes["n_rows"], cex.sizes["BLOCK_SIZE"])
    assert "by n_rows" in load.message
    mask_line = line_of(body, "mask = cols < n_rows")
    assert any(r.span.line == mask_line and "n_cols" in r.message for r in load.related)
    fix = next(f for f in load.fixes if "n_cols" in f.title)
    (edit,) = fix.edits
    src = (HEAD + textwrap.dedent(body)).splitlines()[mask_line]
    assert edit.span.line == mask_line and \
        src[edit.span.col:edit.span.end_col] == "n_rows" and edit.new_text == "n_cols"
    # the fix is the tutorial's mask: applied, no bounds finding is left
    fixed = src[:edit.span.col] + edit.new_text + src[edit.span.end_col:]
    assert not [f for f in analyse(body.replace(src.strip(), fixed.strip()))
                if f.code.startswith("KS10")]


def test_tutorial_softmax_bounding_cols_by_n_cols_is_clean():
    assert not [f for f in analyse(WRONG_BOUND.replace("BOUND", "n_cols"))
                if f.code.startswith("KS10")]


def test_kernel_bounding_rows_by_n_rows_and_cols_by_n_cols_is_clean():
    body = """
        @triton.jit
        def copy_kernel(x_ptr, y_ptr, n_rows, n_cols, stride_x, stride_y,
                        BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
            rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
            cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
            mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
            x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask)
            tl.store(y_ptr + rows[:, None] * stride_y + cols[None, :], x, mask=mask)


        def copy(x):
            n_rows, n_cols = x.shape
            y = torch.empty_like(x)
            grid = (triton.cdiv(n_rows, 32), triton.cdiv(n_cols, 64))
            copy_kernel[grid](x, y, n_rows, n_cols, x.stride(0), y.stride(0),
                              BLOCK_R=32, BLOCK_C=64)
            return y
        """
    assert any(l.startswith("#@ tensor X = x_ptr[") for l in inferred(body, "copy_kernel"))
    assert not [f for f in analyse(body) if f.code.startswith("KS10")]
    # and the axes swapped in the mask is the same bug class, reported on both accesses
    swapped = body.replace("(rows[:, None] < n_rows) & (cols[None, :] < n_cols)",
                           "(rows[:, None] < n_cols) & (cols[None, :] < n_rows)")
    assert len([f for f in analyse(swapped) if f.code == "KS101"]) == 2


def test_wrong_bound_is_not_reported_when_the_launcher_asserts_the_sizes_equal():
    # a kernel for square inputs: `cols < n_rows` is the column bound by the host's own check
    body = WRONG_BOUND.replace("BOUND", "n_rows").replace(
        "n_rows, n_cols = x.shape", "n_rows, n_cols = x.shape\n        assert n_rows == n_cols")
    assert "assert n_rows == n_cols" in body
    assert not [f for f in analyse(body) if f.code.startswith("KS10")]
