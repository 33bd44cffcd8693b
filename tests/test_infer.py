"""Annotations inferred from the launch site (analysis/infer.py): tensors with their sizes and
strides, the grid, size relations; the lines parse back and re-analysing with them inserted
keeps correct code clean and turns on the annotated checks."""
from __future__ import annotations

import textwrap

from kernelsight.analysis import analyze_source, engine
from kernelsight.analysis.config import Config
from kernelsight.analysis.frontend import parse_file
from kernelsight.analysis.infer import (annotation_fix, infer, infer_annotations,
                                        with_inferred_annotations)

from fix_edits import apply_fix

HEAD = "import torch\nimport triton\nimport triton.language as tl\n\n"

SOFTMAX = HEAD + textwrap.dedent("""
    @triton.jit
    def softmax_kernel(y_ptr, x_ptr, x_row_stride, y_row_stride, n_rows, n_cols,
                       BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=float("-inf"))
        y = tl.exp(x - tl.max(x, axis=0))
        tl.store(y_ptr + row * y_row_stride + cols, y / tl.sum(y, axis=0), mask=mask)


    def softmax(x):
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        BLOCK = triton.next_power_of_2(n_cols)
        softmax_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_rows, n_cols, BLOCK=BLOCK)
        return y
    """)

VECTOR = HEAD + textwrap.dedent("""
    @triton.jit
    def add_kernel(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(z_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
                 mask=mask)


    def add(x, y, BLOCK=256):
        z = torch.empty_like(x)
        n = x.numel()
        {launch}
        return z
    """)


def lines_for(text: str, kernel: str) -> list[str]:
    parsed = parse_file(text, "k.py")
    return infer_annotations(parsed, parsed.kernel(kernel))


def insert_above_def(text: str, kernel: str, lines: list[str]) -> str:
    rows = text.split("\n")
    at = next(i for i, r in enumerate(rows) if r.startswith(f"def {kernel}("))
    while at > 0 and rows[at - 1].startswith("@"):
        at -= 1
    return "\n".join(rows[:at] + lines + rows[at:])


def analyse(text: str):
    engine._CACHE.clear()  # directives above the def are not in the engine's cache key yet
    return analyze_source(text, "k.py", Config()).report.findings


def test_strides_and_shapes_at_the_launch_give_2d_tensor_declarations():
    lines = lines_for(SOFTMAX, "softmax_kernel")
    assert "#@ tensor X = x_ptr[rows: n_rows, cols: n_cols] strides(x_row_stride, 1)" in lines
    # y = torch.empty_like(x) has x's sizes and its own stride argument
    assert "#@ tensor Y = y_ptr[rows: n_rows, cols: n_cols] strides(y_row_stride, 1)" in lines
    assert "#@ grid (n_rows,)" in lines


def test_numel_gives_a_flat_tensor_and_cdiv_grid_is_rewritten():
    text = VECTOR.replace("{launch}", "add_kernel[(triton.cdiv(n, BLOCK),)](x, y, z, n, "
                          "BLOCK=BLOCK)")
    lines = lines_for(text, "add_kernel")
    assert "#@ tensor X = x_ptr[d_n: n]" in lines
    assert "#@ tensor Z = z_ptr[d_n: n]" in lines
    assert "#@ grid (cdiv(n, BLOCK),)" in lines
    # y's size is not known at the launch (no numel/shape, not a copy of x): left out
    assert not any(l.startswith("#@ tensor Y") for l in lines)


def test_meta_lambda_grid_uses_the_constexpr_name():
    text = VECTOR.replace("{launch}", "grid = lambda META: (triton.cdiv(n, META['BLOCK']),)\n"
                          "        add_kernel[grid](x, y, z, n, BLOCK=BLOCK)")
    assert "#@ grid (cdiv(n, BLOCK),)" in lines_for(text, "add_kernel")


def test_grid_with_a_host_name_that_is_no_argument_is_not_inferred():
    text = VECTOR.replace("{launch}", "add_kernel[(num_sms,)](x, y, z, n, BLOCK=BLOCK)")
    assert not any(l.startswith("#@ grid") for l in lines_for(text, "add_kernel"))


def test_two_size_arguments_of_one_host_value_are_assumed_equal():
    text = HEAD + textwrap.dedent("""
        @triton.jit
        def k(x_ptr, M, N2, BLOCK: tl.constexpr):
            pass


        def launch(x):
            k[(1,)](x, x.shape[0], x.size(0), BLOCK=16)
        """)
    parsed = parse_file(text, "k.py")
    assert infer(parsed, parsed.kernel("k")).assumes == ["M == N2"]


def test_declared_directives_are_not_repeated_and_win():
    text = SOFTMAX.replace("@triton.jit", "#@ tensor X = x_ptr[r: n_rows, c: n_cols] "
                           "strides(x_row_stride, 1)\n@triton.jit")
    lines = lines_for(text, "softmax_kernel")
    assert not any(l.startswith("#@ tensor X ") for l in lines)
    parsed = parse_file(text, "k.py")
    k = parsed.kernel("softmax_kernel")
    k2 = with_inferred_annotations(parsed, k)
    assert k2.annotations.tensors["X"].dims[0].name == "r"
    assert "Y" in k2.annotations.tensors and k2.annotations.grid is not None
    assert "Y" not in k.annotations.tensors  # the original is not modified


def test_without_a_launch_site_nothing_is_inferred():
    text = SOFTMAX.split("def softmax(")[0]
    parsed = parse_file(text, "k.py")
    k = parsed.kernel("softmax_kernel")
    assert infer_annotations(parsed, k) == []
    assert with_inferred_annotations(parsed, k) is k


def test_inserted_lines_parse_and_keep_a_correct_kernel_clean():
    text = VECTOR.replace("{launch}", "add_kernel[(triton.cdiv(n, BLOCK),)](x, y, z, n, "
                          "BLOCK=BLOCK)")
    lines = lines_for(text, "add_kernel")
    annotated = insert_above_def(text, "add_kernel", lines)
    parsed = parse_file(annotated, "k.py")
    assert not [f for f in parsed.findings if f.code.startswith("KS9")]
    ann = parsed.kernel("add_kernel").annotations
    assert set(ann.tensors) == {"X", "Z"} and ann.grid is not None
    assert analyse(annotated) == [] == analyse(text)


def test_inserted_lines_turn_on_coverage_for_a_floor_divided_grid():
    text = VECTOR.replace("{launch}", "add_kernel[(n // BLOCK,)](x, y, z, n, BLOCK=BLOCK)")
    annotated = insert_above_def(text, "add_kernel", lines_for(text, "add_kernel"))
    codes = {f.code for f in analyse(annotated)}
    assert "KS301" in codes and "KS305" in codes


def test_code_action_inserts_the_lines_above_the_decorator_and_reanalysis_agrees():
    text = VECTOR.replace("{launch}", "add_kernel[(n // BLOCK,)](x, y, z, n, BLOCK=BLOCK)")
    parsed = parse_file(text, "k.py")
    fix = annotation_fix(parsed, parsed.kernel("add_kernel"))
    assert fix is not None and "launch site" in fix.title
    edited = apply_fix(text, fix)
    rows = edited.split("\n")
    at = rows.index("@triton.jit")
    assert rows[at - 1] == "#@ grid (n // BLOCK,)" and rows[at - 3].startswith("#@ tensor X")
    parsed2 = parse_file(edited, "k.py")
    assert parsed2.kernel("add_kernel").annotations.grid is not None
    assert annotation_fix(parsed2, parsed2.kernel("add_kernel")) is None  # nothing left
    assert "KS301" in {f.code for f in analyse(edited)}


def test_next_power_of_two_block_is_assumed_to_cover_the_size_it_was_made_from():
    assert infer(parse_file(SOFTMAX, "k.py"), parse_file(SOFTMAX, "k.py").kernel(
        "softmax_kernel")).assumes == ["n_cols <= BLOCK"]
    direct = SOFTMAX.replace("BLOCK=BLOCK)", "BLOCK=triton.next_power_of_2(x.shape[1]))")
    parsed = parse_file(direct, "k.py")
    assert infer(parsed, parsed.kernel("softmax_kernel")).assumes == ["n_cols <= BLOCK"]
    # a block from anything else says nothing about n_cols
    other = SOFTMAX.replace("triton.next_power_of_2(n_cols)", "triton.next_power_of_2(n_rows)")
    parsed = parse_file(other, "k.py")
    assert infer(parsed, parsed.kernel("softmax_kernel")).assumes == ["n_rows <= BLOCK"]
    capped = SOFTMAX.replace("triton.next_power_of_2(n_cols)", "min(1024, n_cols)")
    parsed = parse_file(capped, "k.py")
    assert infer(parsed, parsed.kernel("softmax_kernel")).assumes == []


def test_overflow_witness_respects_the_launchers_block_relation():
    text = SOFTMAX.replace(".to(tl.int64)", "")
    engine._CACHE.clear()
    found = [f for f in analyze_source(text, "k.py", Config(kernel_budget_ms=60000))
             .report.findings if f.code == "KS110"]
    assert found, "row * x_row_stride is an int32 product"
    for f in found:
        sizes = f.counterexample.sizes
        assert sizes["n_cols"] <= sizes["BLOCK"], sizes


def test_block_set_by_next_power_of_two_only_on_a_branch_gives_no_relation():
    text = SOFTMAX.replace("    BLOCK = triton.next_power_of_2(n_cols)\n",
                           "    BLOCK = 1024\n    if n_cols <= 4096:\n"
                           "        BLOCK = triton.next_power_of_2(n_cols)\n")
    assert "if n_cols <= 4096" in text
    parsed = parse_file(text, "k.py")
    assert infer(parsed, parsed.kernel("softmax_kernel")).assumes == []
